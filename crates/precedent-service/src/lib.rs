//! precedent-service: the core that HTTP, the CLI and tests call. "Keep this Add,
//! durably and searchably, then tell me; answer this Search."
//!
//! One writer thread owns the store's write connection and the index's
//! writable side (`writer::Writer`). Adds queue to it over a bounded channel
//! with a reply slot; it drains up to `max_batch` of them, stores them in
//! one transaction (SQLite: `synchronous=FULL`), indexes every Add the index
//! lacks and publishes the new documents (searchable at once, beside the
//! committed segments), and only then replies. The index commits what was
//! published in the background, about once a second or sooner when much
//! text waits, with the last sequence number as payload; at start-up the
//! same catch-up indexes every stored Add after that number, so a crash
//! before a commit loses nothing. Searches and inspection run on tokio's
//! blocking pool, the Adds prepared before the writer on the extraction
//! pool's threads (`extract_pool`), each with a read connection of the
//! service's pool.
//!
//! Architecture invariant: nothing here knows HTTP; no blocking work runs on
//! an async worker thread.

pub mod metrics;
pub mod read;

mod cache;
mod derive;
mod extract_pool;
mod rederive;
mod retention;
mod workers;
mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

pub use self::cache::DEFAULT_MAX_CACHED_USERS;
use self::cache::UserMarks;
use self::derive::{ExtractorCache, Preparation, Prepared, prepare_add};
use self::extract_pool::ExtractPool;
use self::rederive::Rederivation;
use self::retention::Retention;
use self::workers::Workers;
use self::writer::{AddAnswer, AddJob, WriteJob, Writer};
use crate::read::ReadError;
use crate::read::inspect::{self, SessionDetail, SessionSummary};
use crate::read::search::{Explained, Searcher};
use precedent_core::domain::{
    AddOutcome, AddRequest, MemoryItem, RequestId, SearchRequest, SessionId, UserId,
};
use precedent_index::{IndexError, SearchIndex};
use precedent_ingest as ingest;
use precedent_rank as rank;
use precedent_store::{self as store, ReaderPool, StoreConn, StoreError, StoreLocation};

/// Errors of the service, as its callers need to tell them apart.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request id was used before with a different body.
    #[error(
        "request_id {:?} was already used for user_id {:?} with a different body",
        .request_id.as_str(),
        .user_id.as_str()
    )]
    Conflict {
        /// The request id.
        request_id: RequestId,
        /// The scope.
        user_id: UserId,
    },
    /// The Add would take its session past the size limit: nothing of it
    /// was stored.
    #[error(
        "the session would hold {} bytes of message content ({stored_bytes} stored, {adding_bytes} in this Add), past the limit of {max_session_bytes} bytes per session; start a new session",
        stored_bytes.saturating_add(*adding_bytes)
    )]
    SessionTooLarge {
        /// Bytes the session holds.
        stored_bytes: i64,
        /// Bytes of the Add.
        adding_bytes: i64,
        /// The limit.
        max_session_bytes: i64,
    },
    /// The service is stopping or the writer is gone: try again later.
    #[error("the service is shutting down")]
    ShuttingDown,
    /// Stored durably, but the index could not be updated yet; a retry
    /// answers once it is searchable. The failure is shared by every Add
    /// of the writer's turn.
    #[error("stored, but not yet searchable: {0}")]
    NotYetSearchable(#[source] Arc<ServiceError>),
    /// The data directory is held by another process.
    #[error("data directory {0} is in use by another precedent process")]
    Locked(PathBuf),
    /// Data directory problems at start-up.
    #[error("data directory {}: {cause}", path.display())]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// What went wrong (said in the message, not as a source, so a
        /// printed chain says it once).
        cause: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The index failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The store could not write a group of Adds; none of it was stored.
    /// The failure is shared by every Add of the group.
    #[error("store write failed: {0}")]
    WriteFailed(#[source] Arc<ServiceError>),
    /// A derived record could not be encoded.
    #[error("cannot encode a session record: {0}")]
    Encode(#[source] serde_json::Error),
    /// A blocking task panicked or was cancelled, a thread could not be
    /// started or stopped answering.
    #[error("internal task failed: {what}{}", .source.as_ref().map(|why| format!(": {why}")).unwrap_or_default())]
    Task {
        /// What failed.
        what: &'static str,
        /// Why, when an error says it.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl ServiceError {
    /// An internal task failed: `what`, and the error that says why.
    fn task(
        what: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> ServiceError {
        ServiceError::Task {
            what,
            source: Some(source.into()),
        }
    }
}

impl From<ReadError> for ServiceError {
    fn from(error: ReadError) -> ServiceError {
        match error {
            ReadError::Store(error) => ServiceError::Store(error),
            ReadError::Index(error) => ServiceError::Index(error),
        }
    }
}

/// Knobs of the service.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// Where the index and the lock file live (and the store, when it is
    /// SQLite).
    pub data_dir: PathBuf,
    /// Where the store is: the data directory's SQLite database unless
    /// told otherwise.
    pub store: StoreLocation,
    /// The most Adds written in one group commit.
    pub max_batch: usize,
    /// The most Adds waiting for the writer before senders wait.
    pub queue_capacity: usize,
    /// Characters a Search answer may hold unless the request says.
    pub search_budget_chars: usize,
    /// Mask common credentials in message content before storage.
    pub redact_secrets: bool,
    /// Purge sessions not added to for longer than this, at start-up and
    /// then hourly (their messages, Adds, record and index documents). Off
    /// when `None`.
    pub retention: Option<Duration>,
    /// Bytes of message content one session may hold; an Add past it is
    /// refused whole ([`ServiceError::SessionTooLarge`]).
    pub max_session_bytes: usize,
    /// On a shared store, users whose index marks this node keeps (the
    /// least recently searched dropped first; such a user is filled again
    /// on next use). Unused on SQLite.
    pub max_cached_users: usize,
}

/// Bytes of message content one session may hold unless configured: room
/// for whole trajectories of long agent runs, while one session's
/// re-derivation and indexing stay bounded.
pub const DEFAULT_MAX_SESSION_BYTES: usize = 64 * 1024 * 1024;

/// Bytes of session extraction states kept between Adds (see
/// `derive::ExtractorCache`).
const EXTRACTOR_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// Listing pages read at once (`Service::list_sessions`); more wait.
const LISTINGS_AT_ONCE: usize = 4;

/// Threads that prepare Adds at most (one per core, at least two).
const MAX_EXTRACT_THREADS: usize = 8;

/// Times an Add's record is derived before the writer when other Adds of
/// its session keep landing in between; then the writer derives it.
const MAX_DERIVE_ATTEMPTS: usize = 3;

impl ServiceOptions {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServiceOptions {
        let data_dir = data_dir.into();
        ServiceOptions {
            store: StoreLocation::Sqlite(data_dir.clone()),
            data_dir,
            max_batch: 256,
            queue_capacity: 1024,
            search_budget_chars: rank::assemble::DEFAULT_BUDGET_CHARS,
            redact_secrets: false,
            retention: None,
            max_session_bytes: DEFAULT_MAX_SESSION_BYTES,
            max_cached_users: cache::DEFAULT_MAX_CACHED_USERS,
        }
    }

    /// The per-session limit as the store counts bytes.
    fn session_byte_limit(&self) -> i64 {
        i64::try_from(self.max_session_bytes).unwrap_or(i64::MAX)
    }
}

/// What a health check reports.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok` when the writer is running and the store answers; `stopping`
    /// when the writer is gone; `store unreachable` when the store does
    /// not answer.
    pub status: &'static str,
    /// The store's backend: `sqlite` or `postgres`.
    pub store: &'static str,
    /// Whether the store answered a query just now.
    pub store_reachable: bool,
    /// Highest sequence number searchable in the index (published; its
    /// commit may follow within about a second).
    pub indexed_seq: i64,
    /// Documents visible to searches.
    pub num_docs: u64,
}

/// The running core: store, index and writer thread.
pub struct Service {
    redact_secrets: bool,
    /// The store's read connections: for searches, inspection, health and
    /// the Adds prepared before the writer.
    readers: Arc<ReaderPool>,
    searcher: Arc<Searcher>,
    data_dir: PathBuf,
    store: StoreLocation,
    search_index: Arc<SearchIndex>,
    max_session_bytes: i64,
    /// Listing pages being read at once: each holds up to a page's bytes
    /// and a store connection, so many clients walking huge memories wait
    /// their turn rather than multiply both.
    listings: tokio::sync::Semaphore,
    /// Extraction states of recently written sessions.
    extractors: ExtractorCache,
    /// Adds being prepared (checked and derived) before the writer.
    adds_preparing: Arc<AtomicUsize>,
    /// The threads that prepare Adds; stopped first at shutdown (and
    /// dropped before `workers`).
    extract_pool: ExtractPool,
    /// The writer's queue and thread, and the retention and re-derivation
    /// threads that send to it; stopped after the extraction pool, in
    /// their order (see `workers`).
    workers: Workers,
    writer_metrics: Arc<WriterMetrics>,
    /// What the index holds of each user, when the store is shared with
    /// other nodes (PostgreSQL); `None` on SQLite, whose only writer is
    /// this process (see `cache`).
    marks: Option<Arc<UserMarks>>,
    /// Held for the life of the service: the directory's exclusive lock.
    _lock: File,
}

/// What the writer thread counts, for `/metrics`.
#[derive(Debug, Default)]
pub struct WriterMetrics {
    /// Time of one writer turn: a group of Adds stored, indexed and
    /// published (or, without Adds, a slice of a large Add).
    pub write_turn: crate::metrics::Histogram,
    /// Adds handed to the writer (stored or found stored before).
    pub adds_written: std::sync::atomic::AtomicU64,
    /// Adds sent back to be derived again: another Add of their session
    /// landed since their record was derived.
    pub adds_rederived_stale: std::sync::atomic::AtomicU64,
    /// Session records of an older extractor still to derive again.
    pub sessions_to_rederive: std::sync::atomic::AtomicU64,
    /// Session records derived again since start-up (newer extractor).
    pub sessions_rederived: std::sync::atomic::AtomicU64,
    /// Users caught up with the store before a Search (a shared store).
    pub catch_ups: std::sync::atomic::AtomicU64,
    /// Adds those catch-ups indexed (how far behind the index was).
    pub catch_up_adds: std::sync::atomic::AtomicU64,
    /// Users whose marks were dropped to keep at most
    /// `ServiceOptions::max_cached_users` (filled again on next use).
    pub cache_evictions: std::sync::atomic::AtomicU64,
    /// How old the oldest Add a catch-up indexed was (how long the index
    /// was behind for that user).
    pub catch_up_lag: crate::metrics::Histogram,
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
    /// Users this node's index follows, when the store is shared (`None`:
    /// SQLite, whose index holds every user).
    pub num_users_indexed: Option<usize>,
}

/// How long a health check waits for the store to answer.
const HEALTH_STORE_TIMEOUT: Duration = Duration::from_secs(3);

/// Lock file that keeps two processes off one data directory.
pub const LOCK_FILE: &str = "LOCK";

impl Service {
    /// Opens (or creates) the data directory, brings the index up to date
    /// with the store, and starts the writer thread. Blocking: call it from
    /// a blocking context.
    pub fn open(options: ServiceOptions) -> Result<Arc<Service>, ServiceError> {
        let data_dir = options.data_dir.clone();
        let io_error = |cause| ServiceError::DataDir {
            path: data_dir.clone(),
            cause,
        };
        let lock = lock_data_dir(&data_dir)?;
        warm_up_in_background();
        let writer = Writer::open(&options)?;
        let search_index = writer.search_index();
        let marks = writer.marks();
        let writer_metrics = writer.metrics();
        let adds_preparing = writer.adds_preparing();
        let max_session_bytes = options.session_byte_limit();
        let (sender, receiver) = mpsc::channel(options.queue_capacity.max(1));
        let writer_thread = std::thread::Builder::new()
            .name("precedent-writer".to_string())
            .spawn(move || writer.run(receiver))
            .map_err(io_error)?;
        // Policy of this service: whoever opens it with a retention age
        // gets the purges.
        let retention = options
            .retention
            .map(|age| Retention::start(age, sender.clone()))
            .transpose()
            .map_err(io_error)?;
        let extract_pool = ExtractPool::start(
            std::thread::available_parallelism()
                .map_or(2, usize::from)
                .clamp(2, MAX_EXTRACT_THREADS),
        )
        .map_err(io_error)?;
        let rederivation =
            Rederivation::start(&options.store, sender.clone(), Arc::clone(&writer_metrics))?;
        let readers = Arc::new(ReaderPool::new(options.store.clone()));
        Ok(Arc::new(Service {
            redact_secrets: options.redact_secrets,
            searcher: Arc::new(Searcher::new(
                Arc::clone(&search_index),
                Arc::clone(&readers),
                options.search_budget_chars,
            )),
            readers,
            data_dir,
            store: options.store,
            search_index,
            max_session_bytes,
            listings: tokio::sync::Semaphore::new(LISTINGS_AT_ONCE),
            extractors: ExtractorCache::new(EXTRACTOR_CACHE_BYTES),
            adds_preparing,
            extract_pool,
            workers: Workers::new(sender, writer_thread, retention, rederivation),
            writer_metrics,
            marks,
            _lock: lock,
        }))
    }

    /// Stores an Add and answers once it is durable and searchable. Its
    /// session's record is derived first, on the extraction pool (Adds of
    /// different sessions in parallel); the writer only stores it, or sends
    /// the Add back (`Stale`) when another Add of the session landed in
    /// between: the Add protocol, stated in the module `writer`.
    pub async fn add(
        self: &Arc<Self>,
        mut request: AddRequest,
    ) -> Result<AddOutcome, ServiceError> {
        if self.redact_secrets {
            // Before anything is stored or hashed: a retry is masked the
            // same way and stays the same request.
            request.redact_secrets();
        }
        for attempt in 0..=MAX_DERIVE_ATTEMPTS {
            let mut extractor = None;
            // Counted while it is prepared, so that the writer may wait a
            // moment for it to join the group being written.
            let preparing = Preparing::start(&self.adds_preparing);
            let derived = if attempt < MAX_DERIVE_ATTEMPTS {
                let (prepared, returned) = self.prepare(request).await?;
                request = returned;
                match prepared {
                    Prepared::Derived {
                        derived,
                        extractor: after,
                    } => {
                        extractor = Some(after);
                        Some(derived)
                    }
                    Prepared::Known => None,
                }
            } else {
                None
            };
            let user_id = request.user_id().clone();
            let session_id = request.session_id().clone();
            drop(preparing);
            let answer = self
                .ask_writer(|reply| {
                    WriteJob::Add(AddJob {
                        request,
                        derived,
                        reply,
                    })
                })
                .await?;
            match answer {
                AddAnswer::Done(outcome, stored_seq) => {
                    if let (Some(seq), Some(extractor)) = (stored_seq, extractor) {
                        self.extractors.put(&user_id, &session_id, seq, extractor);
                    }
                    return Ok(outcome);
                }
                AddAnswer::Stale(returned) => {
                    self.writer_metrics
                        .adds_rederived_stale
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    request = returned;
                }
            }
        }
        // The last attempt carries no record: the writer derives it and
        // never answers stale.
        Err(ServiceError::Task {
            what: "an add was sent back by the writer without a record",
            source: None,
        })
    }

    /// Checks an Add against the request log and its session's size limit
    /// and derives its session's record, on the extraction pool; hands the
    /// request back.
    async fn prepare(
        self: &Arc<Self>,
        request: AddRequest,
    ) -> Result<(Prepared, AddRequest), ServiceError> {
        let service = Arc::clone(self);
        let max_session_bytes = self.max_session_bytes;
        let (prepared, request) = self
            .extract_pool
            .run(move || {
                let body_sha256 = request.body_sha256();
                let prepared = service.readers.with_reader(|conn| {
                    prepare_add(
                        conn,
                        &service.extractors,
                        &request,
                        &body_sha256,
                        max_session_bytes,
                    )
                });
                (prepared, request)
            })
            .await?;
        match prepared? {
            Preparation::Ready(prepared) => Ok((prepared, request)),
            Preparation::TooLarge(too_large) => Err(too_large.into_error(max_session_bytes)),
        }
    }

    /// Queues a job for the writer thread and waits for its answer.
    async fn ask_writer<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<T, ServiceError>>) -> WriteJob,
    ) -> Result<T, ServiceError> {
        let sender = self.workers.sender()?;
        let (reply, answer) = oneshot::channel();
        sender
            .send(job(reply))
            .await
            .map_err(|_| ServiceError::ShuttingDown)?;
        answer.await.map_err(|_| ServiceError::ShuttingDown)?
    }

    /// Deletes everything of a user from store and index; answers what it
    /// removed.
    pub async fn delete_user(&self, user_id: UserId) -> Result<store::Deleted, ServiceError> {
        self.ask_writer(|reply| WriteJob::DeleteUser { user_id, reply })
            .await
    }

    /// Deletes every session of every user last changed more than `age`
    /// ago, from store and index; answers what it removed.
    pub async fn purge_older_than(&self, age: Duration) -> Result<store::Deleted, ServiceError> {
        let cutoff_ms = retention::cutoff_ms(age);
        self.ask_writer(|reply| WriteJob::Purge { cutoff_ms, reply })
            .await
    }

    /// Runs `work` on the blocking pool with the service (search, explain
    /// and inspection read the store and tantivy synchronously).
    async fn on_blocking_pool<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Service) -> Result<T, ReadError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let service = Arc::clone(self);
        let read = tokio::task::spawn_blocking(move || work(&service))
            .await
            .map_err(|error| ServiceError::task("a blocking task", error))?;
        Ok(read?)
    }

    /// Runs `read` with a pooled store read connection, on the blocking
    /// pool.
    async fn read_store<T: Send + 'static>(
        self: &Arc<Self>,
        read: impl FnOnce(&StoreConn) -> Result<T, ReadError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        self.on_blocking_pool(move |service| service.readers.with_reader(read))
            .await
    }

    /// Runs `read` of a user's documents once the index holds everything
    /// the store holds of the user. On a shared store the check (one
    /// indexed lookup) and, when current, the read are one trip to the
    /// blocking pool; when behind, the writer catches the user up first. A
    /// user with nothing stored gets `empty` at once: no writer job, no
    /// mark, whatever the index still holds of them (documents of a user
    /// deleted by another node, dropped when the user comes back). On
    /// SQLite there is nothing to check.
    async fn read_current<T: Send + 'static>(
        self: &Arc<Self>,
        user_id: UserId,
        read: impl Fn(&Searcher) -> Result<T, ReadError> + Send + Sync + 'static,
        empty: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ServiceError> {
        let Some(marks) = self.marks.clone() else {
            return self
                .on_blocking_pool(move |service| read(&service.searcher))
                .await;
        };
        let read = Arc::new(read);
        let first_read = Arc::clone(&read);
        let checked_user = user_id.clone();
        let answered = self
            .on_blocking_pool(move |service| {
                let state = service
                    .readers
                    .with_reader(|conn| store::user_state(conn, &checked_user))?;
                if state.last_seq == 0 {
                    Ok(Some(empty()))
                } else if marks.is_current(&checked_user, state) {
                    Ok(Some(first_read(&service.searcher)?))
                } else {
                    Ok(None)
                }
            })
            .await?;
        if let Some(answer) = answered {
            return Ok(answer);
        }
        self.ask_writer(|reply| WriteJob::CatchUpUser { user_id, reply })
            .await?;
        self.on_blocking_pool(move |service| read(&service.searcher))
            .await
    }

    /// Ranks the stored experience of the request's user for its query.
    pub async fn search(
        self: &Arc<Self>,
        request: SearchRequest,
    ) -> Result<Vec<MemoryItem>, ServiceError> {
        self.read_current(
            request.user_id().clone(),
            move |searcher| searcher.search(&request),
            Vec::new,
        )
        .await
    }

    /// Every candidate session of a Search with its features, score and the
    /// gate's verdict.
    pub async fn explain(
        self: &Arc<Self>,
        request: SearchRequest,
    ) -> Result<Explained, ServiceError> {
        let query = request.query().to_string();
        self.read_current(
            request.user_id().clone(),
            move |searcher| searcher.explain(&request),
            move || Explained::nothing_stored(&query),
        )
        .await
    }

    /// Summaries of at most `limit` sessions of a user after `after`, most
    /// recently updated first, handed to `sink` as they are read; answers
    /// the sink and where the next page starts.
    pub async fn list_sessions<S>(
        self: &Arc<Self>,
        user_id: UserId,
        after: Option<store::ListCursor>,
        limit: usize,
        mut sink: S,
    ) -> Result<(S, Option<store::ListCursor>), ServiceError>
    where
        S: inspect::PageSink<SessionSummary> + Send + 'static,
    {
        self.read_listing(move |conn| {
            let next =
                inspect::visit_session_summaries(conn, &user_id, after.as_ref(), limit, &mut sink)?;
            Ok((sink, next))
        })
        .await
    }

    /// At most `limit` messages of a user's session after `after`, in
    /// session order, handed to `sink` as they are read; answers the sink
    /// and where the next page starts.
    pub async fn session_messages<S>(
        self: &Arc<Self>,
        user_id: UserId,
        session_id: SessionId,
        after: Option<store::ListCursor>,
        limit: usize,
        mut sink: S,
    ) -> Result<(S, Option<store::ListCursor>), ServiceError>
    where
        S: inspect::PageSink<inspect::MessageView> + Send + 'static,
    {
        self.read_listing(move |conn| {
            let next = inspect::visit_session_messages(
                conn,
                &user_id,
                &session_id,
                after.as_ref(),
                limit,
                &mut sink,
            )?;
            Ok((sink, next))
        })
        .await
    }

    /// Runs `read` (a page of a listing) on a store connection of the
    /// blocking pool, in its turn among the listings built at once
    /// ([`LISTINGS_AT_ONCE`]).
    async fn read_listing<T: Send + 'static>(
        self: &Arc<Self>,
        read: impl FnOnce(&store::StoreConn) -> Result<T, crate::read::ReadError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let _turn = self
            .listings
            .acquire()
            .await
            .map_err(|error| ServiceError::task("a listing's turn", error))?;
        self.read_store(read).await
    }

    /// At most `limit` users holding sessions after `after`, most recently
    /// active first.
    pub async fn list_users(
        self: &Arc<Self>,
        after: Option<store::ListCursor>,
        limit: usize,
    ) -> Result<inspect::Page<store::StoredUser>, ServiceError> {
        self.read_store(move |conn| inspect::users(conn, after.as_ref(), limit))
            .await
    }

    /// The whole derived record of one session of a user, with provenance.
    pub async fn session_detail(
        self: &Arc<Self>,
        user_id: UserId,
        session_id: SessionId,
    ) -> Result<Option<SessionDetail>, ServiceError> {
        self.read_store(move |conn| inspect::session_detail(conn, &user_id, &session_id))
            .await
    }

    /// Health: the writer runs, the store answers (one query on a read
    /// connection, within [`HEALTH_STORE_TIMEOUT`]), and what the index
    /// holds.
    pub async fn health(self: &Arc<Self>) -> Health {
        let writer_running = self.workers.writer_running();
        let probe = self.read_store(|conn| Ok(store::last_seq(conn)?));
        let store_reachable = match tokio::time::timeout(HEALTH_STORE_TIMEOUT, probe).await {
            Ok(Ok(_)) => true,
            Ok(Err(error)) => {
                tracing::warn!(%error, "health: the store does not answer");
                false
            }
            Err(_) => {
                tracing::warn!("health: the store did not answer in time");
                false
            }
        };
        Health {
            status: match (writer_running, store_reachable) {
                (false, _) => "stopping",
                (true, false) => "store unreachable",
                (true, true) => "ok",
            },
            store: self.store.backend(),
            store_reachable,
            indexed_seq: self.search_index.visible_seq(),
            num_docs: self.search_index.num_docs(),
        }
    }

    /// What the writer thread counted.
    pub fn writer_metrics(&self) -> &WriterMetrics {
        &self.writer_metrics
    }

    /// Queue depth, documents, store size and sessions per user, read now.
    pub async fn figures(self: &Arc<Self>) -> Result<ServiceFigures, ServiceError> {
        let (queue_depth, queue_capacity) = self.workers.queue();
        let num_docs = self.search_index.num_docs();
        let data_dir = self.data_dir.clone();
        let sessions_per_user = self
            .read_store(|conn| Ok(store::sessions_per_user(conn)?))
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
            num_users_indexed: self.marks.as_ref().map(|marks| marks.len()),
        })
    }

    /// The data directory this service holds.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Where this service's store is.
    pub fn store_location(&self) -> &StoreLocation {
        &self.store
    }

    /// Stops taking Adds, lets the writer finish every queued one, and
    /// waits for it. Idempotent.
    pub async fn shutdown(&self) {
        // Adds being prepared finish and reach the writer before it stops.
        let extract_threads = self.extract_pool.stop();
        let joined = tokio::task::spawn_blocking(move || {
            extract_threads
                .into_iter()
                .all(|thread| thread.join().is_ok())
        })
        .await;
        if !matches!(joined, Ok(true)) {
            tracing::error!("an extraction thread ended abnormally");
        }
        // Then re-derivation, retention, and the writer, which finishes
        // every queued job.
        self.workers.shutdown().await;
    }
}

/// Creates the data directory if need be and takes its exclusive lock,
/// held for as long as the file stays open.
fn lock_data_dir(data_dir: &Path) -> Result<File, ServiceError> {
    let io_error = |cause| ServiceError::DataDir {
        path: data_dir.to_path_buf(),
        cause,
    };
    if data_dir.exists() && !data_dir.is_dir() {
        return Err(io_error(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "it is a file, not a directory",
        )));
    }
    precedent_core::files::private_dir(data_dir).map_err(io_error)?;
    let wide = precedent_core::files::wider_than_private(data_dir);
    if !wide.is_empty() {
        tracing::warn!(
            "the data directory {} lets other users read it ({} entries, {} among them); make it private with: {}",
            data_dir.display(),
            wide.len(),
            wide[0].display(),
            precedent_core::files::fix_command(data_dir)
        );
    }
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(data_dir.join(LOCK_FILE))
        .map_err(io_error)?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(ServiceError::Locked(data_dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(source)) => Err(io_error(source)),
    }
}

/// Compiles the tag queries on a thread of their own. That takes a few
/// hundred milliseconds once; done beside start-up so that neither start-up
/// nor the first Add waits for all of it (an extraction needing a query
/// still being compiled waits for that one).
fn warm_up_in_background() {
    let warm_up = std::thread::Builder::new()
        .name("precedent-warm-up".to_string())
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
}

/// Counts an Add as being prepared until dropped.
struct Preparing<'a>(&'a AtomicUsize);

impl<'a> Preparing<'a> {
    fn start(count: &'a AtomicUsize) -> Preparing<'a> {
        count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Preparing(count)
    }
}

impl Drop for Preparing<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use precedent_core::domain::testing::uid;

    #[test]
    fn a_conflict_names_its_ids_as_text() {
        let conflict = ServiceError::Conflict {
            request_id: RequestId::new("r1").expect("a valid request id"),
            user_id: uid("ada"),
        };
        assert_eq!(
            conflict.to_string(),
            r#"request_id "r1" was already used for user_id "ada" with a different body"#
        );
    }
}
