//! writer: the one thread that writes. It owns the SQLite write connection
//! and the tantivy writer; Adds and deletions queue to it over a bounded
//! channel with a reply slot. An Add comes with its session's record,
//! derived before the writer from the session as it was; the writer checks
//! that no other Add of that session landed in between (else the Add goes
//! back to be derived again) and that the session stays within its size
//! limit. Adds queued together are stored in one transaction, indexed and
//! published (searchable) before any of them is answered, and committed in
//! the background about once a second (`index::writer`); a deletion
//! or a group of re-derived records runs after the Adds queued before it,
//! store first, then index.
//!
//! Fairness: an Add of more than `INDEX_SLICE_BYTES` of content is stored
//! whole with its group, but its messages are indexed (as parts) a slice per
//! turn, beside the next groups of Adds, so that everyone's turn carries
//! at most one slice of it; it is answered when its last slice is
//! published. Meanwhile the index's committed sequence number stays below
//! it (the Adds after it that are indexed already are replaced, not
//! duplicated, by a replay after a crash).

use std::path::Path;

use tokio::sync::{mpsc, oneshot};

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::cache::{UserMarks, advance_after_own_adds, catch_up_user};
use super::deletion::UserDeletions;
use super::derive::{
    Derived, Rederived, Verdict, admit_with_record, catch_up, index_rederived, session_docs,
    store_rederived,
};
use super::{ServiceError, WriterMetrics};
use crate::domain::{AddOutcome, AddRequest};
use crate::index::{IndexWriterHandle, SearchIndex};
use crate::store::{self, Admission, StoreConn, StoreError, StoreLocation, StoreTx, StoredMessage};
use crate::time::now_ms;

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

/// An Add for the writer thread.
pub(super) struct AddJob {
    pub(super) request: AddRequest,
    /// Its session's record derived before the writer; `None`: the writer
    /// derives it (after repeated stale attempts).
    pub(super) derived: Option<Derived>,
    pub(super) reply: oneshot::Sender<Result<AddAnswer, ServiceError>>,
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
        user_id: String,
        reply: oneshot::Sender<Result<store::Deleted, ServiceError>>,
    },
    /// Bring the index up to what the store holds of a user (a node of a
    /// shared store, before it answers for the user).
    CatchUpUser {
        user_id: String,
        reply: oneshot::Sender<Result<(), ServiceError>>,
    },
    /// Store records derived again (a newer extractor) for sessions that
    /// did not move on; answers how many were stored.
    Rederive {
        sessions: Vec<Rederived>,
        reply: oneshot::Sender<Result<usize, ServiceError>>,
    },
}

/// What the writer thread reports to the rest of the service.
pub(super) struct WriterReports<'a> {
    /// Counts for `/metrics`.
    pub(super) metrics: &'a WriterMetrics,
    /// Adds being prepared before the writer (read only).
    pub(super) adds_preparing: &'a std::sync::atomic::AtomicUsize,
}

/// The longest the writer waits for Adds being prepared to join a group:
/// a commit costs the same for one Add or several, so with concurrent
/// clients a short wait buys fewer commits. A single client's Add is never
/// waited for (nothing else is being prepared).
const MAX_GROUP_WAIT: std::time::Duration = std::time::Duration::from_millis(4);

/// What bounds the writer's work.
#[derive(Debug, Clone, Copy)]
pub(super) struct WriterLimits {
    /// The most Adds written in one group commit.
    pub(super) max_batch: usize,
    /// Bytes of message content a session may hold.
    pub(super) max_session_bytes: i64,
}

/// Where the writer's data lives.
pub(super) struct WriterHome<'a> {
    /// The data directory (the index is closed there at the end).
    pub(super) data_dir: &'a Path,
    /// The store, reconnected to when its connection breaks.
    pub(super) store: &'a StoreLocation,
    /// What the index holds of each user, when the store is shared with
    /// other nodes (`None`: this process is the store's only writer).
    pub(super) marks: Option<&'a UserMarks>,
}

/// The writer thread's loop: takes jobs until every sender is gone, then
/// closes the index (synced, marked clean).
pub(super) fn writer_loop(
    home: WriterHome<'_>,
    mut receiver: mpsc::Receiver<WriteJob>,
    mut conn: StoreConn,
    mut writer: IndexWriterHandle,
    search_index: &SearchIndex,
    reports: WriterReports<'_>,
    limits: WriterLimits,
) {
    let WriterHome {
        data_dir,
        store: location,
        marks,
    } = home;
    let WriterLimits {
        max_batch,
        max_session_bytes,
    } = limits;
    let WriterReports {
        metrics,
        adds_preparing,
    } = reports;
    let mut batch = Vec::with_capacity(max_batch);
    // Stored Adds whose messages are indexed a slice per turn.
    let mut sliced: VecDeque<SlicedAdd> = VecDeque::new();
    // After a failed index update the writer may hold documents of an
    // unrecorded commit: the next catch-up replaces instead of appending.
    let mut index_may_hold_unrecorded = false;
    // Users being deleted a slice per turn, and the jobs that wait for
    // them; jobs released by a finished deletion run first.
    let mut deletions = UserDeletions::resume(&conn).unwrap_or_else(|error| {
        tracing::error!(%error, "pending user deletions not read; the next start-up finishes them");
        UserDeletions::default()
    });
    let mut ready: VecDeque<WriteJob> = VecDeque::new();
    loop {
        // With slices to index, new jobs are taken as they come, and a turn
        // without any indexes the next slice.
        // With published documents waiting for their commit, a job is
        // waited for only until the commit is due.
        let first = if let Some(job) = ready.pop_front() {
            Some(job)
        } else if sliced.is_empty() && !deletions.is_busy() {
            let next = match writer.commit_due_in() {
                None => receiver.blocking_recv().map(Some).ok_or(()),
                Some(wait) => next_job_within(&mut receiver, wait),
            };
            match next {
                Ok(job) => job,
                Err(()) => break,
            }
        } else {
            receiver.try_recv().ok()
        };
        // Adds queued together are written together; a deletion is done
        // after the Adds queued before it.
        let mut deletion = None;
        match first {
            Some(WriteJob::Add(job)) => batch.push(job),
            Some(other) => deletion = Some(other),
            None => {}
        }
        let group_deadline = std::time::Instant::now() + MAX_GROUP_WAIT;
        while !batch.is_empty() && deletion.is_none() && batch.len() < max_batch {
            let next = match ready.pop_front() {
                Some(job) => Ok(job),
                None => receiver.try_recv(),
            };
            match next {
                Ok(WriteJob::Add(job)) => batch.push(job),
                Ok(other) => deletion = Some(other),
                Err(mpsc::error::TryRecvError::Empty)
                    if adds_preparing.load(std::sync::atomic::Ordering::Acquire) > 0
                        && std::time::Instant::now() < group_deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                Err(_) => break,
            }
        }
        // Adds of users being deleted wait for the deletion's end.
        if batch
            .iter()
            .any(|job| deletions.holds(&job.request.user_id))
        {
            let (held, kept): (Vec<AddJob>, Vec<AddJob>) = batch
                .drain(..)
                .partition(|job| deletions.holds(&job.request.user_id));
            batch = kept;
            for job in held {
                deletions.hold(WriteJob::Add(job));
            }
        }
        if !batch.is_empty() || !sliced.is_empty() || deletion.is_some() || deletions.is_busy() {
            reconnect_if_broken(&mut conn, location);
        }
        let started = std::time::Instant::now();
        if !batch.is_empty() {
            metrics
                .adds_written
                .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
            let indexed = write_batch(
                &mut conn,
                &mut writer,
                search_index,
                &mut batch,
                &mut sliced,
                BatchOptions {
                    replace: index_may_hold_unrecorded,
                    max_session_bytes,
                    marks,
                    metrics,
                },
            );
            metrics.commit.observe(started.elapsed());
            index_may_hold_unrecorded = !indexed;
        } else if !sliced.is_empty() {
            let indexed = index_slices(
                &mut conn,
                &mut writer,
                search_index,
                &mut sliced,
                SliceTurn {
                    replace: index_may_hold_unrecorded,
                    all: false,
                },
            );
            metrics.commit.observe(started.elapsed());
            index_may_hold_unrecorded = !indexed;
        }
        if deletion.is_some() && !sliced.is_empty() {
            // A deletion finds every stored Add's documents in the index.
            let indexed = index_slices(
                &mut conn,
                &mut writer,
                search_index,
                &mut sliced,
                SliceTurn {
                    replace: index_may_hold_unrecorded,
                    all: true,
                },
            );
            index_may_hold_unrecorded = !indexed;
        }
        match deletion {
            Some(WriteJob::DeleteUser { user_id, reply }) => {
                deletions.begin(&mut conn, &mut writer, search_index, user_id, reply);
            }
            Some(WriteJob::Purge { cutoff_ms, reply }) => {
                let _ = reply.send(purge(&mut conn, &mut writer, search_index, cutoff_ms));
            }
            Some(WriteJob::Rederive {
                mut sessions,
                reply,
            }) => {
                // A session being deleted is not written again.
                sessions.retain(|session| !deletions.holds(&session.user_id));
                let _ = reply.send(rederived(&mut conn, &mut writer, search_index, &sessions));
            }
            Some(WriteJob::CatchUpUser { user_id, reply }) if deletions.holds(&user_id) => {
                deletions.hold(WriteJob::CatchUpUser { user_id, reply });
            }
            Some(WriteJob::CatchUpUser { user_id, reply }) => {
                let caught_up = match marks {
                    Some(marks) => catch_up_user(
                        &mut conn,
                        &mut writer,
                        search_index,
                        marks,
                        metrics,
                        &user_id,
                    ),
                    None => Ok(()),
                };
                let _ = reply.send(caught_up);
            }
            Some(WriteJob::Add(_)) | None => {}
        }
        if deletions.is_busy() {
            ready.extend(deletions.turn(&mut conn, &mut writer, search_index));
        }
        if writer.commit_due_in() == Some(std::time::Duration::ZERO)
            && let Err(error) = writer.commit_published()
        {
            tracing::error!(%error, "index commit failed; the store holds the adds and a retry catches up");
            index_may_hold_unrecorded = true;
        }
        // A commit in the background that failed lost what it held: the
        // next turn catches up from the last commit, replacing.
        if writer.take_commit_failure() {
            index_may_hold_unrecorded = true;
        }
    }
    let indexed_seq = writer.committed_seq();
    match writer.close(data_dir, search_index) {
        Ok(()) => {
            tracing::info!(indexed_seq, "writer stopped, index synced");
            if let Some(marks) = marks
                && let Err(error) = marks.save(data_dir)
            {
                tracing::warn!(%error, "user marks not saved; users are indexed again on first use");
            }
        }
        Err(error) => {
            tracing::error!(%error, indexed_seq, "index not synced at shutdown; the next start-up verifies it")
        }
    }
}

/// The next job, waiting at most `wait`: `Ok(None)` when none came in
/// time, `Err` when every sender is gone.
fn next_job_within(
    receiver: &mut mpsc::Receiver<WriteJob>,
    wait: std::time::Duration,
) -> Result<Option<WriteJob>, ()> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match receiver.try_recv() {
            Ok(job) => return Ok(Some(job)),
            Err(mpsc::error::TryRecvError::Disconnected) => return Err(()),
            Err(mpsc::error::TryRecvError::Empty) => {
                if std::time::Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(JOB_POLL);
            }
        }
    }
}

/// How often the writer looks for a job while published documents wait
/// for their commit.
const JOB_POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// Opens a new connection in place of one the store closed (a PostgreSQL
/// restart or a network failure). When the store is still unreachable the
/// broken connection stays, the jobs of this turn fail (an Add answers 503
/// with Retry-After, nothing stored), and the next turn tries again.
fn reconnect_if_broken(conn: &mut StoreConn, location: &StoreLocation) {
    if !conn.is_broken() {
        return;
    }
    match location.open_writer() {
        Ok(fresh) => {
            tracing::info!(store = %location.describe(), "store connection restored");
            *conn = fresh;
        }
        Err(error) => tracing::warn!(%error, "store still unreachable"),
    }
}

/// How [`write_batch`] writes.
#[derive(Debug, Clone, Copy)]
struct BatchOptions<'a> {
    /// The index may hold documents of an unrecorded commit: replace
    /// instead of appending.
    replace: bool,
    /// Bytes of message content a session may hold.
    max_session_bytes: i64,
    /// The users' marks to move past the Adds indexed (a shared store).
    marks: Option<&'a UserMarks>,
    /// Where mark evictions are counted.
    metrics: &'a WriterMetrics,
}

/// Stores a group of Adds in one transaction, indexes them, then replies to
/// each. Drains `batch`. Returns whether the index is up to date.
fn write_batch(
    conn: &mut StoreConn,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    batch: &mut Vec<AddJob>,
    sliced: &mut VecDeque<SlicedAdd>,
    options: BatchOptions<'_>,
) -> bool {
    let stored_at_ms = now_ms();
    let started = std::time::Instant::now();
    let admitted: Result<Vec<Verdict>, ServiceError> = (|| {
        let tx = conn.transaction()?;
        // Other processes may write the same database: each session's
        // checks below hold until the commit.
        let sessions: BTreeSet<(String, String)> = batch
            .iter()
            .map(|job| (job.request.user_id.clone(), job.request.session_id.clone()))
            .collect();
        store::lock_sessions(&tx, &sessions.into_iter().collect::<Vec<_>>())?;
        let mut verdicts = Vec::with_capacity(batch.len());
        // In queue order: an Add's check sees the records of the Adds
        // before it in the group.
        for job in batch.iter() {
            verdicts.push(admit_with_record(
                &tx,
                &job.request,
                job.derived.as_ref(),
                options.max_session_bytes,
                stored_at_ms,
            )?);
        }
        tx.commit()?;
        Ok(verdicts)
    })();
    let verdicts = match admitted {
        Ok(verdicts) => verdicts,
        Err(error) => {
            tracing::error!(%error, num_adds = batch.len(), "store write failed, nothing stored");
            let reason = error.to_string();
            for job in batch.drain(..) {
                let _ = job
                    .reply
                    .send(Err(ServiceError::WriteFailed(reason.clone())));
            }
            // A commit whose answer was lost (the connection dropped
            // during COMMIT) may have stored the group after all: the next
            // turn catches the index up from its committed sequence number
            // instead of indexing only its own Adds.
            return false;
        }
    };
    let stored = started.elapsed();
    let mut answers = Vec::with_capacity(batch.len());
    let mut small_seqs = Vec::new();
    let mut own_indexed: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    let mut sessions = BTreeSet::new();
    for (job, verdict) in batch.drain(..).zip(verdicts) {
        let derived_before = job.derived.is_some();
        let answer = match verdict {
            Verdict::Stale => Ok(AddAnswer::Stale(job.request)),
            Verdict::TooLarge(too_large) => Err(ServiceError::SessionTooLarge {
                stored_bytes: too_large.stored_bytes,
                adding_bytes: too_large.adding_bytes,
                max_session_bytes: options.max_session_bytes,
            }),
            Verdict::Admission(Admission::Conflict) => Err(ServiceError::Conflict {
                request_id: job.request.request_id.clone(),
                user_id: job.request.user_id.clone(),
            }),
            Verdict::Admission(Admission::Duplicate { seq }) => {
                let answer = AddAnswer::Done(AddOutcome::AlreadyStored, None);
                // A retry of an Add still indexed in slices is answered
                // with it, once it is searchable.
                if let Some(original) = sliced.iter_mut().find(|add| add.seq == seq) {
                    original.retries.push((job.reply, answer));
                    continue;
                }
                Ok(answer)
            }
            Verdict::Admission(Admission::Inserted { seq }) => {
                sessions.insert((job.request.user_id.clone(), job.request.session_id.clone()));
                let answer = AddAnswer::Done(AddOutcome::Stored, derived_before.then_some(seq));
                if store::content_bytes(&job.request) > INDEX_SLICE_BYTES as i64 {
                    sliced.push_back(SlicedAdd {
                        seq,
                        messages: None,
                        next: 0,
                        reply: job.reply,
                        answer,
                        retries: Vec::new(),
                    });
                    continue;
                }
                small_seqs.push(seq);
                own_indexed
                    .entry(job.request.user_id.clone())
                    .or_default()
                    .insert(seq);
                Ok(answer)
            }
        };
        answers.push((job.reply, answer));
    }
    let indexed = if options.replace {
        // The index may hold documents of an unrecorded commit: catch up
        // from its committed sequence number, replacing.
        catch_up(conn, writer, search_index).map(|_| finish_all(sliced))
    } else {
        index_turn(
            conn,
            writer,
            search_index,
            &small_seqs,
            &sessions,
            sliced,
            false,
        )
    };
    tracing::debug!(
        num_adds = answers.len(),
        store_ms = stored.as_secs_f64() * 1e3,
        index_ms = (started.elapsed() - stored).as_secs_f64() * 1e3,
        num_sliced = sliced.len(),
        "batch written"
    );
    let ok = match indexed {
        Ok(done) => {
            answer_sliced(done);
            true
        }
        Err(error) => {
            tracing::error!(%error, "index update failed; the store holds the adds and a retry catches up");
            for (_, answer) in &mut answers {
                if matches!(answer, Ok(AddAnswer::Done(..))) {
                    *answer = Err(ServiceError::NotYetSearchable(error.to_string()));
                }
            }
            false
        }
    };
    // Before the answers: a client's Search right after its Add finds the
    // mark current and answers from the index at once, instead of waiting
    // behind the writer's next group for a catch-up job (the index already
    // holds the group: it was committed above).
    if let Some(marks) = options.marks
        && ok
        && !options.replace
    {
        advance_after_own_adds(conn, marks, options.metrics, &own_indexed);
    }
    for (reply, answer) in answers {
        let _ = reply.send(answer);
    }
    ok
}

/// Bytes of message content above which an Add's messages are
/// indexed in slices, and the bytes of slices one writer turn indexes:
/// what one Add can add to everyone's commit.
const INDEX_SLICE_BYTES: usize = 256 * 1024;

/// An Add stored whose messages are indexed a slice per writer
/// turn; answered once the last slice is committed.
struct SlicedAdd {
    seq: i64,
    /// Read from the store at its first slice.
    messages: Option<Vec<StoredMessage>>,
    /// The first message not indexed yet.
    next: usize,
    reply: oneshot::Sender<Result<AddAnswer, ServiceError>>,
    answer: AddAnswer,
    /// Retries of it (same request id and body) that arrived meanwhile.
    retries: Vec<(oneshot::Sender<Result<AddAnswer, ServiceError>>, AddAnswer)>,
}

/// Every sliced Add as done (a catch-up indexed all of them).
fn finish_all(sliced: &mut VecDeque<SlicedAdd>) -> Vec<SlicedAdd> {
    sliced.drain(..).collect()
}

/// Answers sliced Adds whose last slice is committed.
fn answer_sliced(done: Vec<SlicedAdd>) {
    for add in done {
        let _ = add.reply.send(Ok(add.answer));
        for (reply, answer) in add.retries {
            let _ = reply.send(Ok(answer));
        }
    }
}

/// How a turn without new Adds indexes sliced Adds.
#[derive(Debug, Clone, Copy)]
struct SliceTurn {
    /// The index may hold documents of an unrecorded commit: catch up
    /// from its committed sequence number, replacing (which finishes every
    /// sliced Add).
    replace: bool,
    /// Every remaining slice at once, not only the next.
    all: bool,
}

/// A turn without new Adds: the next slice (or all of them) of the sliced
/// Adds, committed. Answers the Adds it completes, and on failure every
/// sliced Add (stored, not yet searchable). Returns whether the index is up
/// to date.
fn index_slices(
    conn: &mut StoreConn,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    sliced: &mut VecDeque<SlicedAdd>,
    turn: SliceTurn,
) -> bool {
    let indexed = if turn.replace {
        catch_up(conn, writer, search_index).map(|_| finish_all(sliced))
    } else {
        index_turn(
            conn,
            writer,
            search_index,
            &[],
            &BTreeSet::new(),
            sliced,
            turn.all,
        )
    };
    match indexed {
        Ok(done) => {
            answer_sliced(done);
            true
        }
        Err(error) => {
            tracing::error!(%error, "index update failed; the store holds the adds and a retry catches up");
            for add in sliced.drain(..) {
                let replies = std::iter::once(add.reply)
                    .chain(add.retries.into_iter().map(|(reply, _)| reply));
                for reply in replies {
                    let _ = reply.send(Err(ServiceError::NotYetSearchable(error.to_string())));
                }
            }
            false
        }
    }
}

/// One index turn (published, committed in the background): the parts of
/// `small_seqs`, the documents
/// of `sessions`, and the next [`INDEX_SLICE_BYTES`] (`all`: everything)
/// of the sliced Adds, oldest first. The committed sequence number is the
/// one below the oldest sliced Add still unfinished (every Add up to it is
/// indexed; Adds after it may be too, and a replay after a crash replaces
/// their documents), else the store's last. Answers the sliced Adds it
/// finished.
fn index_turn(
    conn: &mut StoreConn,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    small_seqs: &[i64],
    sessions: &BTreeSet<(String, String)>,
    sliced: &mut VecDeque<SlicedAdd>,
    all: bool,
) -> Result<Vec<SlicedAdd>, ServiceError> {
    let indexed = (|| {
        for &seq in small_seqs {
            writer.add_messages(&store::messages_of_add(conn, seq)?, false)?;
        }
        writer.upsert_sessions(&session_docs(conn, sessions)?)?;
        let mut room = if all { usize::MAX } else { INDEX_SLICE_BYTES };
        let mut done = Vec::new();
        while room > 0 {
            let Some(add) = sliced.front_mut() else {
                break;
            };
            if add.messages.is_none() {
                add.messages = Some(store::messages_of_add(conn, add.seq)?);
            }
            let messages = add.messages.as_deref().unwrap_or_default();
            let start = add.next;
            let mut end = start;
            while end < messages.len() && (end == start || messages[end].content.len() <= room) {
                room = room.saturating_sub(messages[end].content.len());
                end += 1;
            }
            writer.add_messages(&messages[start..end], false)?;
            add.next = end;
            if end >= messages.len() {
                done.extend(sliced.pop_front());
            } else {
                break;
            }
        }
        let committed = match sliced.front() {
            Some(oldest) => (oldest.seq - 1).max(writer.committed_seq()),
            None => store::last_seq(conn)?,
        };
        writer.publish(committed, search_index)?;
        Ok(done)
    })();
    if indexed.is_err()
        && let Err(rollback_error) = writer.rollback()
    {
        tracing::error!(error = %rollback_error, "index rollback failed");
    }
    indexed
}

/// Stores records derived again for sessions that did not move on, then
/// replaces their index documents.
fn rederived(
    conn: &mut StoreConn,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    sessions: &[Rederived],
) -> Result<usize, ServiceError> {
    let tx = conn.transaction()?;
    let stored = store_rederived(&tx, sessions)?;
    tx.commit()?;
    index_rederived(conn, writer, search_index)?;
    Ok(stored)
}

/// Purges the sessions last changed before `cutoff_ms` from the store, then
/// from the index: the store's transaction records them as pending, so a
/// crash in between leaves the index part to start-up ([`forget_deleted`]).
fn purge(
    conn: &mut StoreConn,
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
    conn: &mut StoreConn,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    delete: impl FnOnce(&StoreTx<'_>) -> Result<store::Deleted, StoreError>,
) -> Result<store::Deleted, ServiceError> {
    let tx = conn.transaction()?;
    let deleted = delete(&tx)?;
    tx.commit()?;
    forget_deleted(conn, writer, search_index)?;
    Ok(deleted)
}

/// Removes from the index every user and session the store has deleted
/// or is deleting, and clears the pending records of the sessions.
pub(super) fn forget_deleted(
    conn: &StoreConn,
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
    // A user's pending record goes when the last of its rows has
    // (`deletion::UserDeletions`).
    store::clear_session_deletions(conn, &sessions)?;
    Ok(())
}
