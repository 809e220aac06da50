//! deletion: users deleted a slice at a time, between the writer's turns.
//!
//! A deletion begins in one short transaction that records it as pending
//! (readers then see nothing of the user, an Add of the user from another
//! process is refused) and the index forgets the user. Each turn of the
//! writer after that deletes at most [`SLICE_TIME`] worth of the user's rows
//! in one transaction, beside everyone else's Adds. When nothing is left,
//! one last transaction clears the pending record, the deletion is answered,
//! and the free pages of a SQLite store are given back to the file system,
//! [`VACUUM_PAGES_PER_TURN`] per turn.
//!
//! Meanwhile the jobs that concern the user (its Adds, a catch-up of its
//! index) wait in [`UserDeletions`] and run, in their order, once it is
//! finished; a re-derivation leaves its sessions out. A crash leaves the
//! pending record: start-up forgets the user in the index again and the
//! writer resumes the slices ([`UserDeletions::resume`]).
//!
//! Purges (retention) are one transaction each, store first, then index
//! ([`Writer::purge`]); sessions the store deleted and the index did not
//! forget (a crash in between) are forgotten at start-up
//! ([`Writer::forget_deleted`]).

use std::collections::VecDeque;

use tokio::sync::oneshot;

use super::{WriteJob, Writer};
use crate::ServiceError;
use precedent_core::domain::UserId;
use precedent_store::{self as store, StoreConn, StoreError, StoreTx};

/// How long one turn's slice of a deletion may take, about.
const SLICE_TIME: std::time::Duration = std::time::Duration::from_millis(10);

/// Rows deleted by one statement of a slice.
const ROWS_PER_STATEMENT: usize = 500;

/// Free SQLite pages given back per turn once a deletion is finished
/// (4 MiB of 4 KiB pages).
const VACUUM_PAGES_PER_TURN: usize = 1024;

/// A reply slot of a deletion.
type Reply = oneshot::Sender<Result<store::Deleted, ServiceError>>;

/// One user's deletion under way.
struct Deletion {
    user_id: UserId,
    /// What was removed so far.
    deleted: store::Deleted,
    /// Who waits for it (several, when the deletion was asked again).
    replies: Vec<Reply>,
}

/// The deletions under way and the jobs that wait for them.
#[derive(Default)]
pub(super) struct UserDeletions {
    /// In the order they were asked; the first one is sliced.
    under_way: VecDeque<Deletion>,
    /// Jobs of users being deleted, in arrival order.
    held: Vec<WriteJob>,
    /// Free pages may remain to be given back.
    reclaim: bool,
}

impl UserDeletions {
    /// The deletions a crash interrupted, to be finished (start-up has
    /// made the index forget their users).
    pub(super) fn resume(conn: &StoreConn) -> Result<UserDeletions, ServiceError> {
        let under_way = store::pending_user_deletions(conn)?
            .into_iter()
            .map(|user_id| Deletion {
                user_id,
                deleted: store::Deleted::default(),
                replies: Vec::new(),
            })
            .collect::<VecDeque<_>>();
        if !under_way.is_empty() {
            tracing::info!(
                users = under_way.len(),
                "finishing user deletions an earlier run began"
            );
        }
        Ok(UserDeletions {
            under_way,
            held: Vec::new(),
            reclaim: true,
        })
    }

    /// Whether a turn has work here (the writer then does not wait for
    /// jobs).
    pub(super) fn is_busy(&self) -> bool {
        !self.under_way.is_empty() || self.reclaim
    }

    /// Whether the user's deletion is under way.
    pub(super) fn holds(&self, user_id: &UserId) -> bool {
        self.under_way
            .iter()
            .any(|deletion| deletion.user_id == *user_id)
    }

    /// Keeps a job of a user being deleted until the deletion is finished.
    pub(super) fn hold(&mut self, job: WriteJob) {
        self.held.push(job);
    }

    /// Answers the first deletion, which is finished, and gives back the
    /// held jobs no deletion under way concerns any more.
    fn finished(&mut self) -> Vec<WriteJob> {
        let Some(done) = self.under_way.pop_front() else {
            return Vec::new();
        };
        tracing::info!(
            requests = done.deleted.requests,
            messages = done.deleted.messages,
            sessions = done.deleted.sessions,
            "user deleted"
        );
        for reply in done.replies {
            let _ = reply.send(Ok(done.deleted));
        }
        self.reclaim = true;
        let held = std::mem::take(&mut self.held);
        let (still, released) = held
            .into_iter()
            .partition(|job| job_user(job).is_some_and(|user_id| self.holds(user_id)));
        self.held = still;
        released
    }
}

impl Writer {
    /// Begins deleting a user (or joins the deletion under way): recorded
    /// as pending in the store, forgotten by the index. `reply` is answered
    /// when the last row is gone.
    pub(super) fn begin_user_deletion(&mut self, user_id: UserId, reply: Reply) {
        if let Some(deletion) = self
            .deletions
            .under_way
            .iter_mut()
            .find(|deletion| deletion.user_id == user_id)
        {
            deletion.replies.push(reply);
            return;
        }
        let begun = (|| {
            let tx = self.conn.transaction()?;
            store::begin_user_deletion(&tx, &user_id)?;
            tx.commit()?;
            Ok::<_, ServiceError>(())
        })();
        if let Err(error) = begun {
            let _ = reply.send(Err(error));
            return;
        }
        // Searches find nothing of the user from now on; should this fail,
        // readers still see the pending record, and the end of the
        // deletion forgets the user again.
        if let Err(error) = self.forget(std::slice::from_ref(&user_id), &[]) {
            tracing::warn!(%error, "index did not forget a user being deleted yet; it does at the end");
        }
        tracing::info!("user deletion begun");
        self.deletions.under_way.push_back(Deletion {
            user_id,
            deleted: store::Deleted::default(),
            replies: vec![reply],
        });
    }

    /// One turn's work: a slice of the first deletion, or, with none under
    /// way, some free pages given back. Answers the jobs released by a
    /// deletion that finished, to be run now.
    pub(super) fn user_deletion_turn(&mut self) -> Vec<WriteJob> {
        let Some(deletion) = self.deletions.under_way.front_mut() else {
            if self.deletions.reclaim {
                self.deletions.reclaim =
                    match store::reclaim_space(&self.conn, VACUUM_PAGES_PER_TURN) {
                        Ok(more) => more,
                        Err(error) => {
                            tracing::warn!(%error, "free pages not given back");
                            false
                        }
                    };
            }
            return Vec::new();
        };
        match slice(&mut self.conn, &deletion.user_id) {
            Ok(Some(removed)) => {
                deletion.deleted += removed;
                Vec::new()
            }
            Ok(None) => {
                let user_id = deletion.user_id.clone();
                match self.finish_user_deletion(&user_id) {
                    Ok(()) => self.deletions.finished(),
                    Err(error) => {
                        // The pending record stays: readers see nothing of
                        // the user, and the next turn tries to finish again.
                        tracing::error!(%error, "user deletion not finished yet; retried");
                        Vec::new()
                    }
                }
            }
            Err(error) => {
                tracing::error!(%error, "user deletion slice failed; retried");
                Vec::new()
            }
        }
    }

    /// Purges the sessions last changed before `cutoff_ms` from the store,
    /// then from the index: the store's transaction records them as
    /// pending, so a crash in between leaves the index part to start-up
    /// ([`Writer::forget_deleted`]).
    pub(super) fn purge(&mut self, cutoff_ms: i64) -> Result<store::Deleted, ServiceError> {
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
    pub(super) fn forget_deleted(&mut self) -> Result<(), ServiceError> {
        let users = store::pending_user_deletions(&self.conn)?;
        let sessions = store::pending_session_deletions(&self.conn)?;
        if users.is_empty() && sessions.is_empty() {
            return Ok(());
        }
        self.forget(&users, &sessions)?;
        // A user's pending record goes when the last of its rows has
        // (`UserDeletions`).
        store::clear_session_deletions(&self.conn, &sessions)?;
        Ok(())
    }

    /// Ends a deletion whose rows are all gone: the index forgets the user
    /// (again), then the pending record goes.
    fn finish_user_deletion(&mut self, user_id: &UserId) -> Result<(), ServiceError> {
        self.forget(std::slice::from_ref(user_id), &[])?;
        let tx = self.conn.transaction()?;
        store::finish_user_deletion(&tx, user_id)?;
        tx.commit()?;
        Ok(())
    }
}

/// The user a held job is for (`None`: a job of no single user).
fn job_user(job: &WriteJob) -> Option<&UserId> {
    match job {
        WriteJob::Add(add) => Some(add.request.user_id()),
        WriteJob::CatchUpUser { user_id, .. } => Some(user_id),
        WriteJob::DeleteUser { .. } | WriteJob::Purge { .. } | WriteJob::Rederive { .. } => None,
    }
}

/// Deletes rows of the user for about [`SLICE_TIME`], in one transaction.
/// `None`: nothing was left.
fn slice(conn: &mut StoreConn, user_id: &UserId) -> Result<Option<store::Deleted>, ServiceError> {
    let started = std::time::Instant::now();
    let tx = conn.transaction()?;
    let mut removed = store::Deleted::default();
    loop {
        let step = store::delete_user_slice(&tx, user_id, ROWS_PER_STATEMENT)?;
        if step == store::Deleted::default() {
            break;
        }
        removed += step;
        if started.elapsed() >= SLICE_TIME {
            break;
        }
    }
    tx.commit()?;
    Ok((removed != store::Deleted::default()).then_some(removed))
}
