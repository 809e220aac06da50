//! writer: the one thread that writes. A [`Writer`] owns the store's write
//! connection and the index's writable side; Adds and deletions queue to it
//! over a bounded channel with a reply slot. An Add comes with its
//! session's record, derived before the writer from the session as it was;
//! the writer checks that no other Add of that session landed in between
//! (else the Add goes back to be derived again) and that the session stays
//! within its size limit. Adds queued together are stored in one
//! transaction, indexed and published (searchable) before any of them is
//! answered; the index commits what was published in the background, about
//! once a second (`index::writer`). A deletion or a group of re-derived
//! records runs after the Adds queued before it, store first, then index.
//!
//! Fairness: an Add of more than `INDEX_SLICE_BYTES` of content is stored
//! whole with its group, but its messages are indexed (as parts) a slice per
//! turn, beside the next groups of Adds, so that everyone's turn carries
//! at most one slice of it; it is answered when its last slice is
//! published. Meanwhile the index's published sequence number stays below
//! it (the Adds after it that are indexed already are replaced, not
//! duplicated, by a replay after a crash).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::cache::UserMarks;
use super::deletion::UserDeletions;
use super::derive::{
    DerivedAdd, Rederived, Verdict, admit_with_record, derive_session, session_docs,
};
use super::{ServiceError, ServiceOptions, WriterMetrics};
use precedent_core::domain::{AddOutcome, AddRequest, SessionId, SessionKey, UserId};
use precedent_core::time::now_ms;
use precedent_index::{self as index, IndexWriterHandle, OpenState, SearchIndex, SessionDoc};
use precedent_store::{
    self as store, Admission, StoreConn, StoreError, StoreLocation, StoreTx, StoredMessage,
};

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

/// The longest the writer waits for Adds being prepared to join a group:
/// a turn costs about the same for one Add or several, so with concurrent
/// clients a short wait buys fewer turns. A single client's Add is never
/// waited for (nothing else is being prepared).
const MAX_GROUP_WAIT: Duration = Duration::from_millis(4);

/// How often the writer looks for a job while published documents wait
/// for their commit.
const JOB_POLL: Duration = Duration::from_millis(1);

/// Bytes of message content above which an Add's messages are
/// indexed in slices, and the bytes of slices one writer turn indexes:
/// what one Add can add to everyone's turn.
const INDEX_SLICE_BYTES: usize = 256 * 1024;

/// The one writer: the store's write connection, the index's writable
/// side, and what it keeps between turns. Runs on its own thread
/// ([`Writer::run`]) until every sender of jobs is gone.
pub(super) struct Writer {
    /// The store's write connection, opened again when it breaks.
    pub(super) conn: StoreConn,
    /// Where the store is (to reconnect).
    store: StoreLocation,
    /// The index's writable side.
    pub(super) index: IndexWriterHandle,
    /// The index searches read, told what is published.
    pub(super) search_index: Arc<SearchIndex>,
    /// The data directory (the index is closed there at the end).
    data_dir: PathBuf,
    /// The most Adds written in one group.
    max_batch: usize,
    /// Bytes of message content a session may hold.
    max_session_bytes: i64,
    /// What the index holds of each user, when the store is shared with
    /// other nodes (`None`: this process is the store's only writer).
    pub(super) marks: Option<Arc<UserMarks>>,
    /// Counts for `/metrics`.
    pub(super) metrics: Arc<WriterMetrics>,
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
    pub(super) deletions: UserDeletions,
    /// Jobs released by a finished deletion, run before new ones.
    ready: VecDeque<WriteJob>,
}

/// The jobs of one writer turn: the Adds queued together, and the job
/// after them that is not an Add.
struct Turn {
    adds: Vec<AddJob>,
    job: Option<WriteJob>,
}

/// An Add stored whose messages are indexed a slice per writer
/// turn; answered once the last slice is published.
struct SlicedAdd {
    seq: i64,
    /// Read from the store at its first slice.
    messages: Option<Vec<StoredMessage>>,
    /// The first message not indexed yet.
    next: usize,
    reply: AddReply,
    answer: AddAnswer,
    /// Retries of it (same request id and body) that arrived meanwhile.
    retries: Vec<(AddReply, AddAnswer)>,
}

/// One message of an Add the writer stored, as the index takes it.
struct AddedMessage<'a> {
    seq: i64,
    user_id: &'a UserId,
    session_id: &'a SessionId,
    /// Its index within the Add.
    index: usize,
    content: &'a str,
}

impl precedent_index::MessageToIndex for AddedMessage<'_> {
    fn seq(&self) -> i64 {
        self.seq
    }

    fn user_id(&self) -> &UserId {
        self.user_id
    }

    fn session_id(&self) -> &SessionId {
        self.session_id
    }

    fn message_index(&self) -> usize {
        self.index
    }

    fn content(&self) -> &str {
        self.content
    }
}

/// A group of Adds after the store's verdicts: each one's answer, and what
/// the index is to take of them.
#[derive(Default)]
struct Admitted {
    answers: Vec<(AddReply, Result<AddAnswer, ServiceError>)>,
    /// Adds stored now (with their sequence numbers) whose messages are
    /// indexed whole this turn, from the request: the same text the store
    /// just took, not read back.
    small: Vec<(i64, AddRequest)>,
    /// Per user, the sequence numbers of those Adds.
    own_indexed: BTreeMap<UserId, BTreeSet<i64>>,
    /// The sessions the stored Adds changed, each
    /// with its document when the record stored is the one derived before
    /// the writer (`None`: read from the store).
    sessions: BTreeMap<SessionKey, Option<SessionDoc>>,
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
            max_session_bytes: i64::try_from(options.max_session_bytes).unwrap_or(i64::MAX),
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

    /// Takes jobs until every sender is gone, then closes the index
    /// (synced, marked clean).
    pub(super) fn run(mut self, mut receiver: mpsc::Receiver<WriteJob>) {
        while let Some(turn) = self.gather_turn(&mut receiver) {
            self.take_turn(turn);
        }
        self.close();
    }

    /// The next turn's jobs: the Adds queued together (at most
    /// `max_batch`; those of users being deleted are held back), and the
    /// job after them that is not an Add. `None` once every sender is gone.
    fn gather_turn(&mut self, receiver: &mut mpsc::Receiver<WriteJob>) -> Option<Turn> {
        let mut turn = Turn {
            adds: Vec::new(),
            job: None,
        };
        match self.first_job(receiver)? {
            Some(WriteJob::Add(job)) => turn.adds.push(job),
            Some(other) => turn.job = Some(other),
            None => {}
        }
        let group_deadline = Instant::now() + MAX_GROUP_WAIT;
        while !turn.adds.is_empty() && turn.job.is_none() && turn.adds.len() < self.max_batch {
            let next = match self.ready.pop_front() {
                Some(job) => Ok(job),
                None => receiver.try_recv(),
            };
            match next {
                Ok(WriteJob::Add(job)) => turn.adds.push(job),
                Ok(other) => turn.job = Some(other),
                Err(mpsc::error::TryRecvError::Empty)
                    if self.adds_preparing.load(Ordering::Acquire) > 0
                        && Instant::now() < group_deadline =>
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(_) => break,
            }
        }
        // Adds of users being deleted wait for the deletion's end.
        if turn
            .adds
            .iter()
            .any(|job| self.deletions.holds(job.request.user_id()))
        {
            let (held, kept): (Vec<AddJob>, Vec<AddJob>) = turn
                .adds
                .drain(..)
                .partition(|job| self.deletions.holds(job.request.user_id()));
            turn.adds = kept;
            for job in held {
                self.deletions.hold(WriteJob::Add(job));
            }
        }
        Some(turn)
    }

    /// The turn's first job: one a finished deletion released, else a new
    /// one. With slices or a deletion to work on, a turn does not wait for
    /// one (`Some(None)`); with published documents waiting for their
    /// commit, it waits only until the commit is due. `None` once every
    /// sender is gone.
    fn first_job(&mut self, receiver: &mut mpsc::Receiver<WriteJob>) -> Option<Option<WriteJob>> {
        if let Some(job) = self.ready.pop_front() {
            return Some(Some(job));
        }
        if !self.sliced.is_empty() || self.deletions.is_busy() {
            return Some(receiver.try_recv().ok());
        }
        match self.index.commit_due_in() {
            None => receiver.blocking_recv().map(Some),
            Some(wait) => next_job_within(receiver, wait),
        }
    }

    /// One turn: its Adds stored and published (or, without Adds, the next
    /// slice of the sliced Adds), then its other job, a slice of a user
    /// deletion, and the index commit when it is due.
    fn take_turn(&mut self, turn: Turn) {
        let Turn { adds, job } = turn;
        if !adds.is_empty() || !self.sliced.is_empty() || job.is_some() || self.deletions.is_busy()
        {
            self.reconnect_if_broken();
        }
        let started = Instant::now();
        if !adds.is_empty() {
            self.metrics
                .adds_written
                .fetch_add(adds.len() as u64, Ordering::Relaxed);
            self.write_batch(adds);
            self.metrics.write_turn.observe(started.elapsed());
        } else if !self.sliced.is_empty() {
            self.index_slices(false);
            self.metrics.write_turn.observe(started.elapsed());
        }
        if let Some(job) = job {
            if !self.sliced.is_empty() {
                // A deletion finds every stored Add's documents in the index.
                self.index_slices(true);
            }
            self.run_job(job);
        }
        if self.deletions.is_busy() {
            let released = self.user_deletion_turn();
            self.ready.extend(released);
        }
        self.commit_if_due();
    }

    /// Runs a job that is not an Add.
    fn run_job(&mut self, job: WriteJob) {
        match job {
            WriteJob::DeleteUser { user_id, reply } => self.begin_user_deletion(user_id, reply),
            WriteJob::Purge { cutoff_ms, reply } => {
                let _ = reply.send(self.purge(cutoff_ms));
            }
            WriteJob::Rederive {
                mut sessions,
                reply,
            } => {
                // A session being deleted is not written again.
                sessions.retain(|session| !self.deletions.holds(&session.user_id));
                let _ = reply.send(self.rederived(&sessions));
            }
            WriteJob::CatchUpUser { user_id, reply } if self.deletions.holds(&user_id) => {
                self.deletions
                    .hold(WriteJob::CatchUpUser { user_id, reply });
            }
            WriteJob::CatchUpUser { user_id, reply } => {
                let _ = reply.send(self.catch_up_user(&user_id));
            }
            // Never here: Adds join the turn's group.
            WriteJob::Add(_) => {}
        }
    }

    /// Commits the published documents in the background when they are
    /// due. A commit that failed (now or in the background) lost what it
    /// held: the next turn catches up from the last commit, replacing.
    fn commit_if_due(&mut self) {
        if self.index.commit_due_in() == Some(Duration::ZERO)
            && let Err(error) = self.index.commit_published()
        {
            tracing::error!(%error, "index commit failed; the store holds the adds and a retry catches up");
            self.index_may_hold_unrecorded = true;
        }
        if self.index.take_commit_failure() {
            self.index_may_hold_unrecorded = true;
        }
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

    /// Stores a group of Adds in one transaction, indexes and publishes
    /// them, then replies to each.
    fn write_batch(&mut self, adds: Vec<AddJob>) {
        let stored_at_ms = now_ms();
        let started = Instant::now();
        let verdicts = match self.store_batch(&adds, stored_at_ms) {
            Ok(verdicts) => verdicts,
            Err(error) => {
                tracing::error!(%error, num_adds = adds.len(), "store write failed, nothing stored");
                let error = Arc::new(error);
                for job in adds {
                    let _ = job
                        .reply
                        .send(Err(ServiceError::WriteFailed(Arc::clone(&error))));
                }
                // A commit whose answer was lost (the connection dropped
                // during COMMIT) may have stored the group after all: the
                // next turn catches the index up from its published
                // sequence number instead of indexing only its own Adds.
                self.index_may_hold_unrecorded = true;
                return;
            }
        };
        let stored = started.elapsed();
        let mut admitted = self.sort_out(adds, verdicts, stored_at_ms);
        let replace = self.index_may_hold_unrecorded;
        let sessions = std::mem::take(&mut admitted.sessions);
        let indexed = self.index_adds(&admitted.small, sessions, false);
        tracing::debug!(
            num_adds = admitted.answers.len(),
            store_ms = stored.as_secs_f64() * 1e3,
            index_ms = (started.elapsed() - stored).as_secs_f64() * 1e3,
            num_sliced = self.sliced.len(),
            "batch written"
        );
        match indexed {
            Ok(done) => {
                answer_sliced(done);
                self.index_may_hold_unrecorded = false;
                // Before the answers: a client's Search right after its Add
                // finds the mark current and answers from the index at
                // once, instead of waiting behind the writer's next group
                // for a catch-up job (the index already holds the group: it
                // was published above).
                if !replace {
                    self.advance_after_own_adds(&admitted.own_indexed);
                }
            }
            Err(error) => {
                tracing::error!(%error, "index update failed; the store holds the adds and a retry catches up");
                let error = Arc::new(error);
                for (_, answer) in &mut admitted.answers {
                    if matches!(answer, Ok(AddAnswer::Done(..))) {
                        *answer = Err(ServiceError::NotYetSearchable(Arc::clone(&error)));
                    }
                }
                self.index_may_hold_unrecorded = true;
            }
        }
        for (reply, answer) in admitted.answers {
            let _ = reply.send(answer);
        }
    }

    /// Admits a group of Adds in one store transaction, with their
    /// sessions' records; answers each one's verdict, in order.
    fn store_batch(
        &mut self,
        adds: &[AddJob],
        stored_at_ms: i64,
    ) -> Result<Vec<Verdict>, ServiceError> {
        let tx = self.conn.transaction()?;
        // Other processes may write the same database: each session's
        // checks below hold until the commit.
        let sessions: BTreeSet<SessionKey> = adds
            .iter()
            .map(|job| {
                SessionKey::new(
                    job.request.user_id().clone(),
                    job.request.session_id().clone(),
                )
            })
            .collect();
        store::lock_sessions(&tx, &sessions.into_iter().collect::<Vec<_>>())?;
        let mut verdicts = Vec::with_capacity(adds.len());
        // In queue order: an Add's check sees the records of the Adds
        // before it in the group.
        for job in adds {
            verdicts.push(admit_with_record(
                &tx,
                &job.request,
                job.derived.as_ref().map(|add| &add.derived),
                self.max_session_bytes,
                stored_at_ms,
            )?);
        }
        tx.commit()?;
        Ok(verdicts)
    }

    /// Each Add's answer from its verdict, and what the index is to take:
    /// the Adds stored now (a large one joins the sliced Adds) and their
    /// sessions. A retry of an Add still indexed in slices waits for it.
    fn sort_out(
        &mut self,
        adds: Vec<AddJob>,
        verdicts: Vec<Verdict>,
        stored_at_ms: i64,
    ) -> Admitted {
        let mut admitted = Admitted::default();
        for (job, verdict) in adds.into_iter().zip(verdicts) {
            let derived_before = job.derived.is_some();
            let answer = match verdict {
                Verdict::Stale => Ok(AddAnswer::Stale(job.request)),
                Verdict::TooLarge(too_large) => Err(ServiceError::SessionTooLarge {
                    stored_bytes: too_large.stored_bytes,
                    adding_bytes: too_large.adding_bytes,
                    max_session_bytes: self.max_session_bytes,
                }),
                Verdict::Admission(Admission::Conflict) => Err(ServiceError::Conflict {
                    request_id: job.request.request_id().clone(),
                    user_id: job.request.user_id().clone(),
                }),
                Verdict::Admission(Admission::Duplicate { seq }) => {
                    let answer = AddAnswer::Done(AddOutcome::AlreadyStored, None);
                    // A retry of an Add still indexed in slices is answered
                    // with it, once it is searchable.
                    if let Some(original) = self.sliced.iter_mut().find(|add| add.seq == seq) {
                        original.retries.push((job.reply, answer));
                        continue;
                    }
                    Ok(answer)
                }
                Verdict::Admission(Admission::Inserted { seq }) => {
                    let request = &job.request;
                    let doc = job.derived.and_then(|add| {
                        add.into_session_doc(
                            request.user_id(),
                            request.session_id(),
                            seq,
                            stored_at_ms,
                        )
                    });
                    // The last Add of a session stored in the group gives
                    // its document.
                    admitted.sessions.insert(
                        SessionKey::new(request.user_id().clone(), request.session_id().clone()),
                        doc,
                    );
                    let answer = AddAnswer::Done(AddOutcome::Stored, derived_before.then_some(seq));
                    if store::content_bytes(request) > INDEX_SLICE_BYTES as i64 {
                        self.sliced.push_back(SlicedAdd {
                            seq,
                            messages: None,
                            next: 0,
                            reply: job.reply,
                            answer,
                            retries: Vec::new(),
                        });
                        continue;
                    }
                    admitted
                        .own_indexed
                        .entry(request.user_id().clone())
                        .or_default()
                        .insert(seq);
                    admitted.small.push((seq, job.request));
                    Ok(answer)
                }
            };
            admitted.answers.push((job.reply, answer));
        }
        admitted
    }

    /// A turn without new Adds: the next slice (or, with `all`, every
    /// remaining slice) of the sliced Adds, published. Answers the Adds it
    /// completes, and on failure every sliced Add (stored, not yet
    /// searchable).
    fn index_slices(&mut self, all: bool) {
        match self.index_adds(&[], BTreeMap::new(), all) {
            Ok(done) => {
                answer_sliced(done);
                self.index_may_hold_unrecorded = false;
            }
            Err(error) => {
                tracing::error!(%error, "index update failed; the store holds the adds and a retry catches up");
                let error = Arc::new(error);
                for add in self.sliced.drain(..) {
                    let replies = std::iter::once(add.reply)
                        .chain(add.retries.into_iter().map(|(reply, _)| reply));
                    for reply in replies {
                        let _ = reply.send(Err(ServiceError::NotYetSearchable(Arc::clone(&error))));
                    }
                }
                self.index_may_hold_unrecorded = true;
            }
        }
    }

    /// An index turn ([`Writer::index_turn`]; on failure, what it queued is
    /// dropped), or, when the index may hold documents of an unrecorded
    /// commit, a catch-up from its published sequence number, replacing
    /// (which finishes every sliced Add). Answers the sliced Adds finished.
    fn index_adds(
        &mut self,
        small: &[(i64, AddRequest)],
        sessions: BTreeMap<SessionKey, Option<SessionDoc>>,
        all: bool,
    ) -> Result<Vec<SlicedAdd>, ServiceError> {
        if self.index_may_hold_unrecorded {
            self.catch_up()?;
            return Ok(self.sliced.drain(..).collect());
        }
        let indexed = self.index_turn(small, sessions, all);
        self.roll_back_on_error(indexed)
    }

    /// One index turn, published (committed in the background): the parts
    /// of `small_seqs`, the documents of `sessions`, and the next
    /// [`INDEX_SLICE_BYTES`] (`all`: everything) of the sliced Adds, oldest
    /// first. The published sequence number is the one below the oldest
    /// sliced Add still unfinished (every Add up to it is indexed; Adds
    /// after it may be too, and a replay after a crash replaces their
    /// documents), else the store's last. Answers the sliced Adds it
    /// finished.
    fn index_turn(
        &mut self,
        small: &[(i64, AddRequest)],
        sessions: BTreeMap<SessionKey, Option<SessionDoc>>,
        all: bool,
    ) -> Result<Vec<SlicedAdd>, ServiceError> {
        for (seq, request) in small {
            let messages: Vec<AddedMessage<'_>> = request
                .messages()
                .iter()
                .enumerate()
                .map(|(index, message)| AddedMessage {
                    seq: *seq,
                    user_id: request.user_id(),
                    session_id: request.session_id(),
                    index,
                    content: &message.content,
                })
                .collect();
            self.index.add_messages(&messages, false)?;
        }
        self.index
            .upsert_sessions(&session_docs(&self.conn, sessions)?)?;
        let mut room = if all { usize::MAX } else { INDEX_SLICE_BYTES };
        let mut done = Vec::new();
        while room > 0 {
            let Some(add) = self.sliced.front_mut() else {
                break;
            };
            if add.messages.is_none() {
                add.messages = Some(store::messages_of_add(&self.conn, add.seq)?);
            }
            let messages = add.messages.as_deref().unwrap_or_default();
            let start = add.next;
            let mut end = start;
            while end < messages.len() && (end == start || messages[end].content.len() <= room) {
                room = room.saturating_sub(messages[end].content.len());
                end += 1;
            }
            self.index.add_messages(&messages[start..end], false)?;
            add.next = end;
            if end >= messages.len() {
                done.extend(self.sliced.pop_front());
            } else {
                break;
            }
        }
        let published = match self.sliced.front() {
            Some(oldest) => (oldest.seq - 1).max(self.index.published_seq()),
            None => store::last_seq(&self.conn)?,
        };
        self.index.publish(published, &self.search_index)?;
        Ok(done)
    }

    /// Stores records derived again for sessions that did not move on,
    /// then replaces their index documents.
    pub(super) fn rederived(&mut self, sessions: &[Rederived]) -> Result<usize, ServiceError> {
        let tx = self.conn.transaction()?;
        let stored = super::derive::store_rederived(&tx, sessions)?;
        tx.commit()?;
        self.index_rederived()?;
        Ok(stored)
    }

    /// Purges the sessions last changed before `cutoff_ms` from the store,
    /// then from the index: the store's transaction records them as
    /// pending, so a crash in between leaves the index part to start-up
    /// ([`Writer::forget_deleted`]).
    fn purge(&mut self, cutoff_ms: i64) -> Result<store::Deleted, ServiceError> {
        let deleted = self.delete(|tx| store::purge_sessions_before(tx, cutoff_ms))?;
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
    fn delete(
        &mut self,
        delete: impl FnOnce(&StoreTx<'_>) -> Result<store::Deleted, StoreError>,
    ) -> Result<store::Deleted, ServiceError> {
        let tx = self.conn.transaction()?;
        let deleted = delete(&tx)?;
        tx.commit()?;
        self.forget_deleted()?;
        Ok(deleted)
    }

    /// Removes from the index every user and session the store has deleted
    /// or is deleting, and clears the pending records of the sessions.
    fn forget_deleted(&mut self) -> Result<(), ServiceError> {
        let users = store::pending_user_deletions(&self.conn)?;
        let sessions = store::pending_session_deletions(&self.conn)?;
        if users.is_empty() && sessions.is_empty() {
            return Ok(());
        }
        self.forget(&users, &sessions)?;
        // A user's pending record goes when the last of its rows has
        // (`deletion::UserDeletions`).
        store::clear_session_deletions(&self.conn, &sessions)?;
        Ok(())
    }

    /// Makes the index forget these users and sessions, committed; on
    /// failure, drops what it queued.
    pub(super) fn forget(
        &mut self,
        users: &[UserId],
        sessions: &[SessionKey],
    ) -> Result<(), ServiceError> {
        let forgotten = self.index.forget(users, sessions, &self.search_index);
        self.roll_back_on_error(forgotten)
    }

    /// `indexed`, after dropping what the index queued when it failed (the
    /// published sequence number goes back to the last commit's).
    pub(super) fn roll_back_on_error<T, E>(
        &mut self,
        indexed: Result<T, E>,
    ) -> Result<T, ServiceError>
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

/// Derives the records of sessions stored without one (messages of an
/// earlier run whose record was never stored).
fn derive_missing(conn: &mut StoreConn) -> Result<(), ServiceError> {
    let missing = store::sessions_missing(conn)?;
    if missing.is_empty() {
        return Ok(());
    }
    let tx = conn.transaction()?;
    for key in &missing {
        derive_session(&tx, &key.user_id, &key.session_id, now_ms())?;
    }
    tx.commit()?;
    tracing::info!(
        num_sessions = missing.len(),
        "derived records of earlier sessions"
    );
    Ok(())
}

/// The next job, waiting at most `wait`: `Some(None)` when none came in
/// time, `None` when every sender is gone.
fn next_job_within(
    receiver: &mut mpsc::Receiver<WriteJob>,
    wait: Duration,
) -> Option<Option<WriteJob>> {
    let deadline = Instant::now() + wait;
    loop {
        match receiver.try_recv() {
            Ok(job) => return Some(Some(job)),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) => {
                if Instant::now() >= deadline {
                    return Some(None);
                }
                std::thread::sleep(JOB_POLL);
            }
        }
    }
}

/// Answers sliced Adds whose last slice is published.
fn answer_sliced(done: Vec<SlicedAdd>) {
    for add in done {
        let _ = add.reply.send(Ok(add.answer));
        for (reply, answer) in add.retries {
            let _ = reply.send(Ok(answer));
        }
    }
}
