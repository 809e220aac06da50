//! writer: the one thread that writes. A [`Writer`] owns the store's write
//! connection and the index's writable side; Adds and deletions queue to it
//! over a bounded channel with a reply slot. Adds queued together are
//! stored in one transaction, indexed and published (searchable) before any
//! of them is answered; the index commits what was published in the
//! background, about once a second (`index::writer`). A deletion or a group
//! of re-derived records runs after the Adds queued before it, store first,
//! then index.
//!
//! A turn reads as stages, each a type the next one consumes (`turn`,
//! `adds`): the jobs `Gathered` from the queue; their Adds `Stored` in one
//! transaction, each verdict sorted out; `Published` by one index turn,
//! each answer final; `Replied`. Then the turn's other job, a slice of a
//! user deletion (`deletion`) and the index commit when it is due.
//!
//! The Add protocol. Preparation is optimistic: `Service::add` prepares
//! an Add on the extraction pool against a read snapshot of the store
//! (`crate::derive::prepare_add`), deriving its session's record from the
//! session's messages as they were and noting the session's last Add it
//! started from. The snapshot's checks of the request log and of the
//! session's size limit are a fast path (`crate::derive::fast_path_check`):
//! they spare a known Add the derivation and a refused one the queue, and
//! decide nothing. The writer's transaction is the only admission truth
//! (`writer::derive::admit_with_record`): with the group's sessions
//! locked, in queue order (an Add sees the Adds before it in its group), it
//! checks the request log, the size limit, and that the session's last Add
//! is still the one the record started from. When another Add of the
//! session landed in between, the Add is `Stale`: nothing of it is stored,
//! and it goes back to `Service::add` to be prepared again from a new
//! snapshot. An Add is sent back at most `MAX_DERIVE_ATTEMPTS` times: a
//! session whose Adds keep landing concurrently (one client's parallel
//! Adds, or other nodes of a shared store) could otherwise send it back
//! without end. Its last attempt carries no record; the writer derives it
//! inside its transaction from every message of the session, which cannot
//! be stale, at the cost of that derivation in the writer's turn (hence
//! only last).
//!
//! Fairness: an Add of more than `INDEX_SLICE_BYTES` of content is stored
//! whole with its group, but its messages are indexed (as parts) a slice per
//! turn, beside the next groups of Adds, so that everyone's turn carries
//! at most one slice of it; it is answered when its last slice is
//! published. Meanwhile the index's published sequence number stays below
//! it (the Adds after it that are indexed already are replaced, not
//! duplicated, by a replay after a crash).

mod adds;
mod cache;
mod deletion;
mod derive;
mod publish;
mod turn;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use tokio::sync::oneshot;

use self::adds::SlicedAdd;
use self::deletion::UserDeletions;
use self::derive::derive_missing;
use crate::cache::UserMarks;
use crate::derive::{DerivedAdd, Rederived};
use crate::{ServiceError, ServiceOptions, WriterMetrics};
use precedent_core::domain::{AddOutcome, AddRequest, SessionKey, UserId};
use precedent_index::{self as index, IndexWriterHandle, OpenState, SearchIndex};
use precedent_store::{self as store, StoreConn, StoreLocation};

/// What the writer answers an Add.
#[derive(Debug)]
pub(super) enum AddAnswer {
    /// Done: stored (or stored before), durable and searchable; with the
    /// sequence number it was stored under when its record was the one
    /// derived before the writer.
    Done(AddOutcome, Option<i64>),
    /// Another Add of its session landed since its record was derived:
    /// nothing stored; here is the request back, to derive again.
    Stale(AddRequest),
}

/// Where the writer answers an Add.
type AddReply = oneshot::Sender<Result<AddAnswer, ServiceError>>;

/// An Add for the writer thread.
pub(super) struct AddJob {
    pub(super) request: AddRequest,
    /// Its session's record derived before the writer, with the index
    /// document made of it; `None`: the writer derives the record (after
    /// repeated stale attempts) and the index reads it from the store.
    pub(super) derived: Option<DerivedAdd>,
    pub(super) reply: AddReply,
}

/// What the writer thread is asked to do.
pub(super) enum WriteJob {
    /// Store an Add (Adds queued together are written together).
    Add(AddJob),
    /// Delete every session last changed before a time (retention).
    Purge {
        cutoff_ms: i64,
        reply: oneshot::Sender<Result<store::Deleted, ServiceError>>,
    },
    /// Delete everything of a user.
    DeleteUser {
        user_id: UserId,
        reply: oneshot::Sender<Result<store::Deleted, ServiceError>>,
    },
    /// Bring the index up to what the store holds of a user (a node of a
    /// shared store, before it answers for the user).
    CatchUpUser {
        user_id: UserId,
        reply: oneshot::Sender<Result<(), ServiceError>>,
    },
    /// Store records derived again (a newer extractor) for sessions that
    /// did not move on; answers how many were stored.
    Rederive {
        sessions: Vec<Rederived>,
        reply: oneshot::Sender<Result<usize, ServiceError>>,
    },
}

/// Bytes of message content above which an Add's messages are
/// indexed in slices, and the bytes of slices one writer turn indexes:
/// what one Add can add to everyone's turn.
const INDEX_SLICE_BYTES: usize = 256 * 1024;

/// The one writer: the store's write connection, the index's writable
/// side, and what it keeps between turns. Runs on its own thread
/// (`Writer::run`) until every sender of jobs is gone.
pub(super) struct Writer {
    /// The store's write connection, opened again when it breaks.
    conn: StoreConn,
    /// Where the store is (to reconnect).
    store: StoreLocation,
    /// The index's writable side.
    index: IndexWriterHandle,
    /// The index searches read, told what is published.
    search_index: Arc<SearchIndex>,
    /// The data directory (the index is closed there at the end).
    data_dir: PathBuf,
    /// The most Adds written in one group.
    max_batch: usize,
    /// Bytes of message content a session may hold.
    max_session_bytes: i64,
    /// What the index holds of each user, when the store is shared with
    /// other nodes (`None`: this process is the store's only writer).
    marks: Option<Arc<UserMarks>>,
    /// Counts for `/metrics`.
    metrics: Arc<WriterMetrics>,
    /// Adds being prepared before the writer (read only here).
    adds_preparing: Arc<AtomicUsize>,
    /// Stored Adds whose messages are indexed a slice per turn.
    sliced: VecDeque<SlicedAdd>,
    /// After a failed index update the index may hold documents of an
    /// unrecorded commit: the next turn catches up, replacing instead of
    /// appending.
    index_may_hold_unrecorded: bool,
    /// Users being deleted a slice per turn, and the jobs that wait for
    /// them.
    deletions: UserDeletions,
    /// Jobs released by a finished deletion, run before new ones.
    ready: VecDeque<WriteJob>,
}

impl Writer {
    /// Opens the store's write connection and the index, and brings the
    /// index up to date with the store: records of sessions stored without
    /// one derived, every Add the index lacks indexed (one writer: SQLite),
    /// deletions the store finished and the index did not forgotten.
    /// Blocking.
    pub(super) fn open(options: &ServiceOptions) -> Result<Writer, ServiceError> {
        let mut conn = options.store.open_writer()?;
        let (search_index, index, state) = index::open(&options.data_dir)?;
        let stored_seq = store::last_seq(&conn)?;
        derive_missing(&mut conn)?;
        // A shared store: users are caught up on first use, from marks a
        // clean shutdown left (see `cache`); a new index starts replaying
        // from now. One writer (SQLite): everything the index lacks now.
        let marks = match &options.store {
            StoreLocation::Postgres(_) => Some(Arc::new(UserMarks::load(
                &options.data_dir,
                state == OpenState::Opened,
                options.max_cached_users,
            ))),
            StoreLocation::Sqlite(_) => None,
        };
        let mut writer = Writer {
            conn,
            store: options.store.clone(),
            index,
            search_index: Arc::new(search_index),
            data_dir: options.data_dir.clone(),
            max_batch: options.max_batch.max(1),
            max_session_bytes: options.session_byte_limit(),
            marks,
            metrics: Arc::new(WriterMetrics::default()),
            adds_preparing: Arc::new(AtomicUsize::new(0)),
            sliced: VecDeque::new(),
            index_may_hold_unrecorded: false,
            deletions: UserDeletions::default(),
            ready: VecDeque::new(),
        };
        let replayed = if writer.marks.is_some() {
            if state != OpenState::Opened {
                writer.index.commit(stored_seq, &writer.search_index)?;
            }
            0
        } else {
            writer.catch_up()?
        };
        // Deletions the store finished and the index did not (a crash in
        // between).
        writer.forget_deleted()?;
        tracing::info!(
            index = ?state,
            stored_seq,
            replayed_adds = replayed,
            num_docs = writer.search_index.num_docs(),
            "store and index opened"
        );
        if state == OpenState::Recreated {
            tracing::warn!("index was rebuilt from the store");
        }
        // User deletions a crash interrupted: finished a slice per turn.
        writer.deletions = UserDeletions::resume(&writer.conn).unwrap_or_else(|error| {
            tracing::error!(%error, "pending user deletions not read; the next start-up finishes them");
            UserDeletions::default()
        });
        Ok(writer)
    }

    /// The index searches read.
    pub(super) fn search_index(&self) -> Arc<SearchIndex> {
        Arc::clone(&self.search_index)
    }

    /// The users' marks, when the store is shared.
    pub(super) fn marks(&self) -> Option<Arc<UserMarks>> {
        self.marks.clone()
    }

    /// What the writer counts.
    pub(super) fn metrics(&self) -> Arc<WriterMetrics> {
        Arc::clone(&self.metrics)
    }

    /// The count of Adds being prepared, which the writer waits a moment
    /// for to join a group.
    pub(super) fn adds_preparing(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.adds_preparing)
    }

    /// Closes the index at the end (everything published committed, files
    /// synced, marked clean), and saves the users' marks.
    fn close(self) {
        let indexed_seq = self.index.published_seq();
        match self.index.close(&self.data_dir, &self.search_index) {
            Ok(()) => {
                tracing::info!(indexed_seq, "writer stopped, index synced");
                if let Some(marks) = &self.marks
                    && let Err(error) = marks.save(&self.data_dir)
                {
                    tracing::warn!(%error, "user marks not saved; users are indexed again on first use");
                }
            }
            Err(error) => {
                tracing::error!(%error, indexed_seq, "index not synced at shutdown; the next start-up verifies it")
            }
        }
    }

    /// Opens a new connection in place of one the store closed (a
    /// PostgreSQL restart or a network failure). When the store is still
    /// unreachable the broken connection stays, the jobs of this turn fail
    /// (an Add answers 503 with Retry-After, nothing stored), and the next
    /// turn tries again.
    fn reconnect_if_broken(&mut self) {
        if !self.conn.is_broken() {
            return;
        }
        match self.store.open_writer() {
            Ok(fresh) => {
                tracing::info!(store = %self.store.describe(), "store connection restored");
                self.conn = fresh;
            }
            Err(error) => tracing::warn!(%error, "store still unreachable"),
        }
    }

    /// Makes the index forget these users and sessions, committed; on
    /// failure, drops what it queued.
    fn forget(&mut self, users: &[UserId], sessions: &[SessionKey]) -> Result<(), ServiceError> {
        let forgotten = self.index.forget(users, sessions, &self.search_index);
        self.roll_back_on_error(forgotten)
    }

    /// `indexed`, after dropping what the index queued when it failed (the
    /// published sequence number goes back to the last commit's).
    fn roll_back_on_error<T, E>(&mut self, indexed: Result<T, E>) -> Result<T, ServiceError>
    where
        ServiceError: From<E>,
    {
        if indexed.is_err()
            && let Err(rollback_error) = self.index.rollback()
        {
            tracing::error!(error = %rollback_error, "index rollback failed");
        }
        Ok(indexed?)
    }
}
