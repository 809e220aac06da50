//! service: the core that HTTP, the CLI and tests call. "Keep this Add,
//! durably and searchably, then tell me; answer this Search."
//!
//! One writer thread owns the SQLite write connection and the tantivy
//! writer. Adds queue to it over a bounded channel with a reply slot; it
//! drains up to `max_batch` of them, stores them in one SQLite transaction
//! (`synchronous=FULL`), indexes every Add the index lacks, commits the index
//! with the last sequence number as payload, reloads the reader, and only
//! then replies. The same catch-up runs at start-up, so a crash between the
//! two commits loses nothing. Searches run on tokio's blocking pool with a
//! pooled read connection.
//!
//! Architecture invariant: nothing here knows HTTP; no blocking work runs on
//! an async worker thread.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::domain::{AddOutcome, AddRequest, MemoryItem, SearchRequest};
use crate::index::{self, IndexError, IndexWriterHandle, OpenState, SearchIndex, SessionDoc};
use crate::ingest::{self, IngestMessage, SessionRecord};
use crate::rank;
pub use crate::search::Explained;
use crate::search::Searcher;
use crate::store::{self, Admission, StoreError, StoredSession};
use crate::time::now_ms;

/// Errors of the service, as its callers need to tell them apart.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request id was used before with a different body.
    #[error(
        "request_id {request_id:?} was already used for user_id {user_id:?} with a different body"
    )]
    Conflict {
        /// The request id.
        request_id: String,
        /// The scope.
        user_id: String,
    },
    /// The service is stopping or the writer is gone: try again later.
    #[error("the service is shutting down")]
    ShuttingDown,
    /// Stored durably, but the index could not be updated yet; a retry
    /// answers once it is searchable.
    #[error("stored, but not yet searchable: {0}")]
    NotYetSearchable(String),
    /// The data directory is held by another process.
    #[error("data directory {0} is in use by another codemem process")]
    Locked(PathBuf),
    /// Data directory problems at start-up.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The index failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The store could not write a group of Adds; none of it was stored.
    #[error("store write failed: {0}")]
    WriteFailed(String),
    /// A derived record could not be encoded.
    #[error("cannot encode a session record: {0}")]
    Encode(String),
    /// A blocking task panicked or was cancelled.
    #[error("internal task failed: {0}")]
    Task(String),
}

/// Knobs of the service.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// Where the store and the index live.
    pub data_dir: PathBuf,
    /// The most Adds written in one group commit.
    pub max_batch: usize,
    /// The most Adds waiting for the writer before senders wait.
    pub queue_capacity: usize,
    /// Characters a Search answer may hold unless the request says.
    pub search_budget_chars: usize,
    /// Mask common credentials in message content before storage.
    pub redact_secrets: bool,
}

impl ServiceOptions {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServiceOptions {
        ServiceOptions {
            data_dir: data_dir.into(),
            max_batch: 256,
            queue_capacity: 1024,
            search_budget_chars: rank::assemble::DEFAULT_BUDGET_CHARS,
            redact_secrets: false,
        }
    }
}

/// An Add for the writer thread.
struct AddJob {
    request: AddRequest,
    reply: oneshot::Sender<Result<AddOutcome, ServiceError>>,
}

/// What the writer thread is asked to do.
enum WriteJob {
    /// Store an Add (Adds queued together are written together).
    Add(AddJob),
    /// Delete every session last changed before a time (retention).
    Purge {
        cutoff_ms: i64,
        reply: oneshot::Sender<Result<store::Deleted, ServiceError>>,
    },
    /// Delete everything of a user.
    DeleteUser {
        user_id: String,
        reply: oneshot::Sender<Result<store::Deleted, ServiceError>>,
    },
}

/// What a health check reports.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok` when the writer is running.
    pub status: &'static str,
    /// Highest sequence number committed to the index.
    pub indexed_seq: i64,
    /// Documents visible to searches.
    pub num_docs: u64,
}

/// One line about a stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The session.
    pub session_id: String,
    /// The task statement's first line, capped.
    pub task: String,
    /// Dominant language.
    pub language: Option<String>,
    /// `resolved`, `failed` or `unknown`.
    pub status: crate::ingest::OutcomeStatus,
    /// Files the session changed.
    pub num_files_changed: usize,
    /// Symbols the session changed.
    pub num_symbols_changed: usize,
    /// Errors met.
    pub num_errors: usize,
    /// Messages stored.
    pub num_messages: i64,
    /// When the record was last derived, Unix ms.
    pub updated_at_ms: i64,
    /// The first files changed (at most [`SUMMARY_LIST_LEN`]).
    pub files_changed: Vec<String>,
    /// The first symbols changed (at most [`SUMMARY_LIST_LEN`]).
    pub symbols_changed: Vec<String>,
    /// The types of the first errors met (distinct, at most [`SUMMARY_LIST_LEN`]).
    pub error_types: Vec<String>,
}

/// How many files, symbols and error types a session summary names.
pub const SUMMARY_LIST_LEN: usize = 5;

impl SessionSummary {
    fn of(session: &StoredSession) -> Option<SessionSummary> {
        let record: SessionRecord = serde_json::from_str(&session.record_json).ok()?;
        let first_line = record.task.lines().next().unwrap_or("").trim();
        Some(SessionSummary {
            session_id: session.session_id.clone(),
            task: first_line.chars().take(200).collect(),
            language: record.language,
            status: record.outcome.status,
            num_files_changed: record.files_changed.len(),
            num_symbols_changed: record.symbols_changed.len(),
            num_errors: record.errors.len(),
            num_messages: session.num_messages,
            updated_at_ms: session.updated_at_ms,
            files_changed: record
                .files_changed
                .iter()
                .take(SUMMARY_LIST_LEN)
                .cloned()
                .collect(),
            symbols_changed: record
                .symbols_changed
                .iter()
                .take(SUMMARY_LIST_LEN)
                .cloned()
                .collect(),
            error_types: {
                let mut types: Vec<String> = Vec::new();
                for error in &record.errors {
                    if types.len() == SUMMARY_LIST_LEN {
                        break;
                    }
                    if !types.contains(&error.error_type) {
                        types.push(error.error_type.clone());
                    }
                }
                types
            },
        })
    }
}

/// A session's whole derived record, with where each message came from.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionDetail {
    /// The session.
    pub session_id: String,
    /// Messages stored.
    pub num_messages: i64,
    /// When the record was last derived, Unix ms.
    pub updated_at_ms: i64,
    /// The record.
    pub record: SessionRecord,
    /// What the extractors could not parse.
    pub diagnostics: Vec<ingest::Diagnostic>,
    /// Per message of the session (by session index): the Add's request id
    /// and the message's index within it.
    pub sources: Vec<(String, usize)>,
}

impl SessionDetail {
    fn of(
        session: &StoredSession,
        sources: Vec<(String, usize)>,
    ) -> Result<SessionDetail, ServiceError> {
        let corrupt = |error: serde_json::Error| {
            ServiceError::Store(StoreError::Corrupt(format!("session record: {error}")))
        };
        Ok(SessionDetail {
            session_id: session.session_id.clone(),
            num_messages: session.num_messages,
            updated_at_ms: session.updated_at_ms,
            record: serde_json::from_str(&session.record_json).map_err(corrupt)?,
            diagnostics: serde_json::from_str(&session.diagnostics_json).map_err(corrupt)?,
            sources,
        })
    }
}

/// Summaries of every session of a user, most recently updated first, read
/// with any connection to the store (the service's, or the CLI's own).
pub fn session_summaries(
    conn: &Connection,
    user_id: &str,
) -> Result<Vec<SessionSummary>, ServiceError> {
    Ok(store::sessions_of_user(conn, user_id)?
        .iter()
        .filter_map(SessionSummary::of)
        .collect())
}

/// One session's whole record with provenance; `None` when the user has no
/// such session.
pub fn session_detail(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
) -> Result<Option<SessionDetail>, ServiceError> {
    let Some(session) = store::session(conn, user_id, session_id)? else {
        return Ok(None);
    };
    let sources = store::session_message_sources(conn, user_id, session_id)?;
    SessionDetail::of(&session, sources).map(Some)
}

/// The running core: store, index and writer thread.
pub struct Service {
    redact_secrets: bool,
    searcher: Arc<Searcher>,
    data_dir: PathBuf,
    search_index: Arc<SearchIndex>,
    /// Guarded by a std mutex: held only to clone or take the sender,
    /// never across an await.
    sender: Mutex<Option<mpsc::Sender<WriteJob>>>,
    writer_thread: Mutex<Option<JoinHandle<()>>>,
    committed_seq: Arc<std::sync::atomic::AtomicI64>,
    writer_metrics: Arc<WriterMetrics>,
    /// Held for the life of the service: the directory's exclusive lock.
    _lock: File,
}

/// What the writer thread counts, for `/metrics`.
#[derive(Debug, Default)]
pub struct WriterMetrics {
    /// Time to store, derive, index and commit one group of Adds.
    pub commit: crate::metrics::Histogram,
    /// Adds handed to the writer (stored or found stored before).
    pub adds_written: std::sync::atomic::AtomicU64,
}

/// Figures of the running service, read when metrics are scraped.
#[derive(Debug, Clone)]
pub struct ServiceFigures {
    /// Jobs waiting for the writer.
    pub queue_depth: usize,
    /// The queue's capacity.
    pub queue_capacity: usize,
    /// Documents visible to searches.
    pub num_docs: u64,
    /// Bytes of the data directory (store and index files).
    pub store_bytes: u64,
    /// Sessions of each user holding any (user ids left out).
    pub sessions_per_user: Vec<i64>,
}

/// Lock file that keeps two processes off one data directory.
pub const LOCK_FILE: &str = "LOCK";

impl Service {
    /// Opens (or creates) the data directory, brings the index up to date
    /// with the store, and starts the writer thread. Blocking: call it from
    /// a blocking context.
    pub fn open(options: ServiceOptions) -> Result<Arc<Service>, ServiceError> {
        let data_dir = options.data_dir.clone();
        let io_error = |source| ServiceError::DataDir {
            path: data_dir.clone(),
            source,
        };
        std::fs::create_dir_all(&data_dir).map_err(io_error)?;
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(data_dir.join(LOCK_FILE))
            .map_err(io_error)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(ServiceError::Locked(data_dir));
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(io_error(source)),
        }

        // Compiling the tag queries takes a few hundred milliseconds once;
        // done beside start-up so that neither start-up nor the first Add
        // waits for all of it (an extraction needing a query still being
        // compiled waits for that one).
        let warm_up = std::thread::Builder::new()
            .name("codemem-warm-up".to_string())
            .spawn(|| {
                let started = std::time::Instant::now();
                for error in ingest::warm_up() {
                    tracing::error!(%error, "tag query does not compile; that language falls back to line scans");
                }
                tracing::debug!(
                    elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
                    "tag queries compiled"
                );
            });
        if let Err(error) = warm_up {
            tracing::warn!(%error, "cannot start the warm-up thread; queries compile on first use");
        }
        let mut conn = store::open_writer(&data_dir)?;
        let (search_index, mut writer, state) = index::open(&data_dir)?;
        let search_index = Arc::new(search_index);
        let stored_seq = store::last_seq(&conn)?;
        let missing = store::sessions_missing(&conn)?;
        if !missing.is_empty() {
            let tx = conn.transaction().map_err(StoreError::from)?;
            for (user_id, session_id) in &missing {
                derive_session(&tx, user_id, session_id, now_ms())?;
            }
            tx.commit().map_err(StoreError::from)?;
            tracing::info!(
                num_sessions = missing.len(),
                "derived records of earlier sessions"
            );
        }
        let replayed = catch_up(&mut conn, &mut writer, &search_index, true)?;
        // Deletions the store finished and the index did not (a crash in
        // between).
        forget_deleted(&conn, &mut writer, &search_index)?;
        tracing::info!(
            index = ?state,
            stored_seq,
            replayed_adds = replayed,
            num_docs = search_index.num_docs(),
            "store and index opened"
        );
        if state == OpenState::Recreated {
            tracing::warn!("index was rebuilt from the store");
        }

        let committed_seq = Arc::new(std::sync::atomic::AtomicI64::new(writer.committed_seq()));
        let (sender, receiver) = mpsc::channel(options.queue_capacity.max(1));
        let thread_index = Arc::clone(&search_index);
        let thread_seq = Arc::clone(&committed_seq);
        let writer_metrics = Arc::new(WriterMetrics::default());
        let thread_metrics = Arc::clone(&writer_metrics);
        let thread_data_dir = data_dir.clone();
        let max_batch = options.max_batch.max(1);
        let writer_thread = std::thread::Builder::new()
            .name("codemem-writer".to_string())
            .spawn(move || {
                writer_loop(
                    &thread_data_dir,
                    receiver,
                    conn,
                    writer,
                    &thread_index,
                    WriterReports {
                        committed_seq: &thread_seq,
                        metrics: &thread_metrics,
                    },
                    max_batch,
                )
            })
            .map_err(io_error)?;

        Ok(Arc::new(Service {
            redact_secrets: options.redact_secrets,
            searcher: Arc::new(Searcher::new(
                Arc::clone(&search_index),
                data_dir.clone(),
                options.search_budget_chars,
            )),
            data_dir,
            search_index,
            sender: Mutex::new(Some(sender)),
            writer_thread: Mutex::new(Some(writer_thread)),
            committed_seq,
            writer_metrics,
            _lock: lock,
        }))
    }

    /// Stores an Add and answers once it is durable and searchable.
    pub async fn add(&self, mut request: AddRequest) -> Result<AddOutcome, ServiceError> {
        if self.redact_secrets {
            // Before anything is stored or hashed: a retry is masked the
            // same way and stays the same request.
            for message in &mut request.messages {
                if let std::borrow::Cow::Owned(masked) = crate::redact::redact(&message.content) {
                    message.content = masked;
                }
            }
        }
        self.ask_writer(|reply| WriteJob::Add(AddJob { request, reply }))
            .await
    }

    /// Queues a job for the writer thread and waits for its answer.
    async fn ask_writer<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<T, ServiceError>>) -> WriteJob,
    ) -> Result<T, ServiceError> {
        let sender = self
            .sender
            .lock()
            .map_err(|_| ServiceError::ShuttingDown)?
            .clone()
            .ok_or(ServiceError::ShuttingDown)?;
        let (reply, answer) = oneshot::channel();
        sender
            .send(job(reply))
            .await
            .map_err(|_| ServiceError::ShuttingDown)?;
        answer.await.map_err(|_| ServiceError::ShuttingDown)?
    }

    /// Deletes everything of a user from store and index; answers what it
    /// removed.
    pub async fn delete_user(&self, user_id: String) -> Result<store::Deleted, ServiceError> {
        self.ask_writer(|reply| WriteJob::DeleteUser { user_id, reply })
            .await
    }

    /// Deletes every session of every user last changed more than `age`
    /// ago, from store and index; answers what it removed.
    pub async fn purge_older_than(
        &self,
        age: std::time::Duration,
    ) -> Result<store::Deleted, ServiceError> {
        let cutoff_ms = now_ms().saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
        self.ask_writer(|reply| WriteJob::Purge { cutoff_ms, reply })
            .await
    }

    /// Runs `work` on the blocking pool with the searcher (search, explain
    /// and inspection read SQLite and tantivy synchronously).
    async fn on_blocking_pool<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Searcher) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let service = Arc::clone(self);
        tokio::task::spawn_blocking(move || work(&service.searcher))
            .await
            .map_err(|error| ServiceError::Task(error.to_string()))?
    }

    /// Ranks the stored experience of the request's user for its query.
    pub async fn search(
        self: &Arc<Self>,
        request: SearchRequest,
    ) -> Result<Vec<MemoryItem>, ServiceError> {
        self.on_blocking_pool(move |searcher| searcher.search(&request))
            .await
    }

    /// Every candidate session of a Search with its features, score and the
    /// gate's verdict.
    pub async fn explain(
        self: &Arc<Self>,
        request: SearchRequest,
    ) -> Result<Explained, ServiceError> {
        self.on_blocking_pool(move |searcher| searcher.explain(&request))
            .await
    }

    /// Summaries of every session of a user, most recently updated first.
    pub async fn list_sessions(
        self: &Arc<Self>,
        user_id: String,
    ) -> Result<Vec<SessionSummary>, ServiceError> {
        self.on_blocking_pool(move |searcher| {
            searcher.with_reader(|conn| session_summaries(conn, &user_id))
        })
        .await
    }

    /// Every user holding sessions, most recently active first.
    pub async fn list_users(self: &Arc<Self>) -> Result<Vec<store::StoredUser>, ServiceError> {
        self.on_blocking_pool(move |searcher| searcher.with_reader(|conn| Ok(store::users(conn)?)))
            .await
    }

    /// The whole derived record of one session of a user, with provenance.
    pub async fn session_detail(
        self: &Arc<Self>,
        user_id: String,
        session_id: String,
    ) -> Result<Option<SessionDetail>, ServiceError> {
        self.on_blocking_pool(move |searcher| {
            searcher.with_reader(|conn| session_detail(conn, &user_id, &session_id))
        })
        .await
    }

    /// Health: the writer runs and what the index holds.
    pub fn health(&self) -> Health {
        let writer_running = self
            .writer_thread
            .lock()
            .map(|thread| thread.as_ref().is_some_and(|handle| !handle.is_finished()))
            .unwrap_or(false);
        Health {
            status: if writer_running { "ok" } else { "stopping" },
            indexed_seq: self
                .committed_seq
                .load(std::sync::atomic::Ordering::Acquire),
            num_docs: self.search_index.num_docs(),
        }
    }

    /// What the writer thread counted.
    pub fn writer_metrics(&self) -> &WriterMetrics {
        &self.writer_metrics
    }

    /// Queue depth, documents, store size and sessions per user, read now.
    pub async fn figures(self: &Arc<Self>) -> Result<ServiceFigures, ServiceError> {
        let (queue_depth, queue_capacity) = self
            .sender
            .lock()
            .ok()
            .and_then(|sender| {
                sender.as_ref().map(|sender| {
                    (
                        sender.max_capacity() - sender.capacity(),
                        sender.max_capacity(),
                    )
                })
            })
            .unwrap_or((0, 0));
        let num_docs = self.search_index.num_docs();
        let data_dir = self.data_dir.clone();
        let sessions_per_user = self
            .on_blocking_pool(move |searcher| {
                searcher.with_reader(|conn| {
                    Ok(store::users(conn)?
                        .iter()
                        .map(|user| user.num_sessions)
                        .collect())
                })
            })
            .await?;
        let store_bytes = tokio::task::spawn_blocking(move || directory_bytes(&data_dir, 3))
            .await
            .unwrap_or(0);
        Ok(ServiceFigures {
            queue_depth,
            queue_capacity,
            num_docs,
            store_bytes,
            sessions_per_user,
        })
    }

    /// The data directory this service holds.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Stops taking Adds, lets the writer finish every queued one, and
    /// waits for it. Idempotent.
    pub async fn shutdown(&self) {
        let sender = self.sender.lock().ok().and_then(|mut sender| sender.take());
        drop(sender);
        let thread = self
            .writer_thread
            .lock()
            .ok()
            .and_then(|mut thread| thread.take());
        if let Some(thread) = thread {
            let joined = tokio::task::spawn_blocking(move || thread.join()).await;
            if !matches!(joined, Ok(Ok(()))) {
                tracing::error!("writer thread ended abnormally");
            }
        }
    }
}

/// Deletes a user from the store (one transaction, which also records the
/// deletion as pending for the index), then from the index, then clears
/// the pending record. A crash in between leaves the pending record, and
/// start-up finishes the index part (see [`forget_deleted`]).
fn delete_user(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    user_id: &str,
) -> Result<store::Deleted, ServiceError> {
    let deleted = delete_then_forget(conn, writer, search_index, |tx| {
        store::delete_user(tx, user_id)
    })?;
    tracing::info!(
        requests = deleted.requests,
        messages = deleted.messages,
        sessions = deleted.sessions,
        "user deleted"
    );
    Ok(deleted)
}

/// Purges the sessions last changed before `cutoff_ms` from the store, then
/// from the index, crash-safe like [`delete_user`].
fn purge(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    cutoff_ms: i64,
) -> Result<store::Deleted, ServiceError> {
    let deleted = delete_then_forget(conn, writer, search_index, |tx| {
        store::purge_sessions_before(tx, cutoff_ms)
    })?;
    if deleted.sessions > 0 {
        tracing::info!(
            sessions = deleted.sessions,
            requests = deleted.requests,
            messages = deleted.messages,
            "retention purged old sessions"
        );
    }
    Ok(deleted)
}

/// Runs a store deletion in one transaction (which also records it as
/// pending), then makes the index forget what it deleted.
fn delete_then_forget(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    delete: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<store::Deleted, StoreError>,
) -> Result<store::Deleted, ServiceError> {
    let tx = conn.transaction().map_err(StoreError::from)?;
    let deleted = delete(&tx)?;
    tx.commit().map_err(StoreError::from)?;
    forget_deleted(conn, writer, search_index)?;
    Ok(deleted)
}

/// Removes from the index every user and session the store has deleted,
/// and clears their pending records.
fn forget_deleted(
    conn: &Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
) -> Result<(), ServiceError> {
    let users = store::pending_user_deletions(conn)?;
    let sessions = store::pending_session_deletions(conn)?;
    if users.is_empty() && sessions.is_empty() {
        return Ok(());
    }
    if let Err(error) = writer.forget(&users, &sessions, search_index) {
        if let Err(rollback_error) = writer.rollback() {
            tracing::error!(error = %rollback_error, "index rollback failed");
        }
        return Err(error.into());
    }
    store::clear_user_deletions(conn, &users)?;
    store::clear_session_deletions(conn, &sessions)?;
    Ok(())
}

/// Indexes every Add the store holds past the index's committed sequence
/// number, in groups, committing each. Returns how many Adds it indexed.
fn catch_up(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    replace: bool,
) -> Result<usize, ServiceError> {
    const ADDS_PER_COMMIT: usize = 512;
    let mut num_adds = 0;
    loop {
        let messages = store::messages_after(conn, writer.committed_seq(), ADDS_PER_COMMIT)?;
        let Some(last) = messages.last() else {
            return Ok(num_adds);
        };
        let last_seq = last.seq;
        let mut seqs: Vec<i64> = messages.iter().map(|message| message.seq).collect();
        seqs.dedup();
        num_adds += seqs.len();
        let mut sessions: Vec<SessionDoc> = Vec::new();
        for session in store::sessions_changed_between(conn, writer.committed_seq(), last_seq)? {
            let messages = store::session_messages(conn, &session.user_id, &session.session_id)?;
            sessions.extend(session_doc(&session, &messages));
        }
        let indexed = writer
            .add_messages(&messages, replace)
            .and_then(|()| writer.upsert_sessions(&sessions))
            .and_then(|()| writer.commit(last_seq, search_index));
        if let Err(error) = indexed {
            if let Err(rollback_error) = writer.rollback() {
                tracing::error!(error = %rollback_error, "index rollback failed");
            }
            return Err(error.into());
        }
    }
}

/// Re-derives the record of one session from all its stored messages and
/// stores it, inside the caller's transaction.
fn derive_session(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
    now_ms: i64,
) -> Result<(), ServiceError> {
    let messages = store::session_messages(conn, user_id, session_id)?;
    let inputs = IngestMessage::in_order(
        messages
            .iter()
            .map(|message| (message.role, message.content.as_str())),
    );
    let (record, diagnostics) = ingest::extract_session(&inputs);
    let encode = |error: serde_json::Error| ServiceError::Encode(error.to_string());
    store::upsert_session(
        conn,
        &StoredSession {
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            record_json: serde_json::to_string(&record).map_err(encode)?,
            diagnostics_json: serde_json::to_string(&diagnostics).map_err(encode)?,
            num_messages: messages.len() as i64,
            last_seq: messages
                .iter()
                .map(|message| message.seq)
                .max()
                .unwrap_or(0),
            updated_at_ms: now_ms,
        },
    )?;
    Ok(())
}

/// The index document of a stored session record; `None` (logged) when the
/// stored record cannot be read. `messages` are the session's messages in
/// order: those no evidence came from (a plain remark, a question, an
/// observation that showed nothing wrong) are searchable through the
/// session too.
fn session_doc(session: &StoredSession, messages: &[store::StoredMessage]) -> Option<SessionDoc> {
    let record: SessionRecord = match serde_json::from_str(&session.record_json) {
        Ok(record) => record,
        Err(error) => {
            tracing::error!(%error, "stored session record unreadable; not indexed");
            return None;
        }
    };
    const MAX_TEXT_BYTES: usize = 256 * 1024;
    const MAX_PLAIN_MESSAGE_BYTES: usize = 64 * 1024;
    let mut text = record.task.clone();
    for evidence in &record.evidence {
        if text.len() + evidence.text.len() > MAX_TEXT_BYTES {
            break;
        }
        text.push('\n');
        text.push_str(&evidence.text);
    }
    let with_evidence: std::collections::HashSet<usize> = record
        .evidence
        .iter()
        .map(|evidence| evidence.message_index)
        .collect();
    let mut plain_bytes = 0usize;
    for (index, message) in messages.iter().enumerate() {
        if with_evidence.contains(&index) {
            continue;
        }
        let content = ingest::text::truncate_to_bytes(&message.content, MAX_PLAIN_MESSAGE_BYTES);
        if text.len() + content.len() > MAX_TEXT_BYTES {
            break;
        }
        plain_bytes += content.len();
        text.push('\n');
        text.push_str(content);
    }
    tracing::trace!(plain_bytes, "session text");
    let profile = rank::SessionProfile::from_record(
        &session.session_id,
        &record,
        session.last_seq,
        session.updated_at_ms,
    );
    let profile_json = match serde_json::to_string(&profile) {
        Ok(json) => json,
        Err(error) => {
            tracing::error!(%error, "session profile not serializable; not indexed");
            return None;
        }
    };
    Some(SessionDoc {
        user_id: session.user_id.clone(),
        session_id: session.session_id.clone(),
        last_seq: session.last_seq,
        profile_json,
        text,
    })
}

/// Bytes of the files under `directory`, `depth` levels down at most
/// (symbolic links are not followed).
pub fn directory_bytes(directory: &Path, depth: usize) -> u64 {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(metadata) if metadata.is_file() => metadata.len(),
            Ok(metadata) if metadata.is_dir() && depth > 0 => {
                directory_bytes(&entry.path(), depth - 1)
            }
            _ => 0,
        })
        .sum()
}

/// What the writer thread reports to the rest of the service.
struct WriterReports<'a> {
    /// Highest sequence number committed to the index.
    committed_seq: &'a std::sync::atomic::AtomicI64,
    /// Counts for `/metrics`.
    metrics: &'a WriterMetrics,
}

fn writer_loop(
    data_dir: &Path,
    mut receiver: mpsc::Receiver<WriteJob>,
    mut conn: Connection,
    mut writer: IndexWriterHandle,
    search_index: &SearchIndex,
    reports: WriterReports<'_>,
    max_batch: usize,
) {
    let WriterReports {
        committed_seq,
        metrics,
    } = reports;
    let mut batch = Vec::with_capacity(max_batch);
    // After a failed index update the writer may hold documents of an
    // unrecorded commit: the next catch-up replaces instead of appending.
    let mut index_may_hold_unrecorded = false;
    while let Some(first) = receiver.blocking_recv() {
        // Adds queued together are written together; a deletion is done
        // after the Adds queued before it.
        let mut deletion = None;
        match first {
            WriteJob::Add(job) => batch.push(job),
            other => deletion = Some(other),
        }
        while deletion.is_none() && batch.len() < max_batch {
            match receiver.try_recv() {
                Ok(WriteJob::Add(job)) => batch.push(job),
                Ok(other) => deletion = Some(other),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            metrics
                .adds_written
                .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
            let started = std::time::Instant::now();
            let indexed = write_batch(
                &mut conn,
                &mut writer,
                search_index,
                &mut batch,
                index_may_hold_unrecorded,
            );
            metrics.commit.observe(started.elapsed());
            index_may_hold_unrecorded = !indexed;
        }
        match deletion {
            Some(WriteJob::DeleteUser { user_id, reply }) => {
                let _ = reply.send(delete_user(&mut conn, &mut writer, search_index, &user_id));
            }
            Some(WriteJob::Purge { cutoff_ms, reply }) => {
                let _ = reply.send(purge(&mut conn, &mut writer, search_index, cutoff_ms));
            }
            Some(WriteJob::Add(_)) | None => {}
        }
        committed_seq.store(writer.committed_seq(), std::sync::atomic::Ordering::Release);
    }
    let indexed_seq = writer.committed_seq();
    match writer.close(data_dir) {
        Ok(()) => tracing::info!(indexed_seq, "writer stopped, index synced"),
        Err(error) => {
            tracing::error!(%error, indexed_seq, "index not synced at shutdown; the next start-up verifies it")
        }
    }
}

/// Stores a group of Adds in one transaction, indexes them, then replies to
/// each. Drains `batch`. Returns whether the index is up to date.
fn write_batch(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    batch: &mut Vec<AddJob>,
    replace: bool,
) -> bool {
    let stored_at_ms = now_ms();
    let started = std::time::Instant::now();
    let admitted: Result<Vec<Admission>, ServiceError> = (|| {
        let tx = conn.transaction().map_err(StoreError::from)?;
        let mut admissions = Vec::with_capacity(batch.len());
        let mut touched = std::collections::BTreeSet::new();
        for job in batch.iter() {
            // Hashed here, on the writer thread, not on an async worker.
            let body_sha256 = job.request.body_sha256();
            let admission = store::admit(&tx, &job.request, &body_sha256, stored_at_ms)?;
            if let Admission::Inserted { .. } = admission {
                touched.insert((
                    job.request.user_id.as_str(),
                    job.request.session_id.as_str(),
                ));
            }
            admissions.push(admission);
        }
        for (user_id, session_id) in touched {
            derive_session(&tx, user_id, session_id, stored_at_ms)?;
        }
        tx.commit().map_err(StoreError::from)?;
        Ok(admissions)
    })();
    let admissions = match admitted {
        Ok(admissions) => admissions,
        Err(error) => {
            tracing::error!(%error, num_adds = batch.len(), "store write failed, nothing stored");
            let reason = error.to_string();
            for job in batch.drain(..) {
                let _ = job
                    .reply
                    .send(Err(ServiceError::WriteFailed(reason.clone())));
            }
            return !replace;
        }
    };
    // Replace is off on the normal path: the index is exactly at the
    // store's previous head, so these sequence numbers are new to it.
    let stored = started.elapsed();
    let indexed = catch_up(conn, writer, search_index, replace);
    tracing::debug!(
        num_adds = batch.len(),
        store_ms = stored.as_secs_f64() * 1e3,
        index_ms = (started.elapsed() - stored).as_secs_f64() * 1e3,
        "batch written"
    );
    if let Err(error) = &indexed {
        tracing::error!(%error, "index update failed; the store holds the adds and a retry catches up");
    }
    for (job, admission) in batch.drain(..).zip(admissions) {
        let answer = match (admission, &indexed) {
            (Admission::Conflict, _) => Err(ServiceError::Conflict {
                request_id: job.request.request_id.clone(),
                user_id: job.request.user_id.clone(),
            }),
            (_, Err(error)) => Err(ServiceError::NotYetSearchable(error.to_string())),
            (Admission::Inserted { .. }, Ok(_)) => Ok(AddOutcome::Stored),
            (Admission::Duplicate { .. }, Ok(_)) => Ok(AddOutcome::AlreadyStored),
        };
        let _ = job.reply.send(answer);
    }
    indexed.is_ok()
}
