//! What `cache` does as the writer: a user caught up with the shared store
//! before a Search ([`Writer::catch_up_user`]), and the marks moved past the
//! writer's own Adds ([`Writer::advance_after_own_adds`]). See the module
//! `cache` for what a mark is and why it is kept.

use std::collections::{BTreeMap, BTreeSet};

use super::Writer;
use crate::ServiceError;
use crate::cache::Mark;
use crate::derive::{SessionDocLookup, readable_session_doc, rederive};
use precedent_core::domain::UserId;
use precedent_core::time::now_ms;
use precedent_index::{IndexWriterHandle, SearchIndex};
use precedent_store::{self as store, StoreConn, StoredSession, UserState};

/// Adds read from the store per batch while a user is caught up.
const ADDS_PER_BATCH: usize = 512;

/// What a user's catch-up indexed.
struct CaughtUp {
    /// Adds indexed.
    num_adds: usize,
    /// When the oldest of them was stored.
    oldest_stored_ms: Option<i64>,
    /// Sessions whose stored record could not be read, left out.
    unreadable: Vec<StoredSession>,
}

impl Writer {
    /// Brings the index up to what the store holds of one user, on the
    /// writer thread: see the module `cache`. Nothing to do on
    /// SQLite (no marks), whose index follows every Add.
    pub(super) fn catch_up_user(&mut self, user_id: &UserId) -> Result<(), ServiceError> {
        let Some(marks) = self.marks.clone() else {
            return Ok(());
        };
        let started = std::time::Instant::now();
        let snapshot = self.conn.snapshot()?;
        let state = store::user_state(&snapshot, user_id)?;
        let from = match marks.get(user_id) {
            Some(mark) if mark.generation == state.generation => {
                if mark.seq >= state.last_seq {
                    // Another Search's catch-up did it meanwhile.
                    return Ok(());
                }
                Some(mark.seq)
            }
            _ => None,
        };
        let indexed = index_user(
            &snapshot,
            &mut self.index,
            &self.search_index,
            user_id,
            from,
            state,
        );
        drop(snapshot);
        let caught_up = self.roll_back_on_error(indexed)?;
        let seq = self.derive_unreadable(&caught_up.unreadable, state.last_seq);
        let evicted = marks.set(
            user_id,
            Mark {
                seq,
                generation: state.generation,
            },
        );
        let lag_ms = self.count_catch_up(&caught_up, evicted);
        tracing::debug!(
            num_adds = caught_up.num_adds,
            refilled = from.is_none(),
            lag_ms,
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "user caught up"
        );
        Ok(())
    }

    /// Counts a catch-up for `/metrics`; answers how old its oldest Add
    /// was, in ms.
    fn count_catch_up(&self, caught_up: &CaughtUp, evicted: usize) -> i64 {
        let metrics = &self.metrics;
        metrics.cache_evictions.fetch_add(
            u64::try_from(evicted).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
        let lag_ms = caught_up
            .oldest_stored_ms
            .map_or(0, |stored| now_ms().saturating_sub(stored).max(0));
        metrics
            .catch_ups
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        metrics.catch_up_adds.fetch_add(
            u64::try_from(caught_up.num_adds).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
        metrics
            .catch_up_lag
            .observe(std::time::Duration::from_millis(lag_ms.unsigned_abs()));
        lag_ms
    }

    /// Records that could not be read were left out of the catch-up's
    /// commit: derived again and stored (unless an Add landed on the
    /// session since) and indexed now. Answers the user's new mark: `seq`,
    /// or, when that fails, below the first of them, so that the next
    /// Search tries again (this one answers without).
    fn derive_unreadable(&mut self, sessions: &[StoredSession], seq: i64) -> i64 {
        if sessions.is_empty() {
            return seq;
        }
        match self.rederive_sessions(sessions) {
            Ok(()) => seq,
            Err(error) => {
                tracing::warn!(%error, num_sessions = sessions.len(), "unreadable session records not derived again; the next search tries again");
                sessions
                    .iter()
                    .map(|session| session.last_seq - 1)
                    .min()
                    .unwrap_or(seq)
                    .min(seq)
            }
        }
    }

    /// Derives the records of `sessions` again from their messages, stores
    /// them (those whose session did not move on) and indexes them, on the
    /// writer's connection.
    fn rederive_sessions(&mut self, sessions: &[StoredSession]) -> Result<(), ServiceError> {
        let mut derived = Vec::with_capacity(sessions.len());
        for session in sessions {
            let key = session.key();
            derived.extend(rederive(&self.conn, &key.user_id, &key.session_id)?);
        }
        let stored = self.rederived(&derived)?;
        tracing::info!(
            num_sessions = stored,
            "unreadable session records derived again"
        );
        Ok(())
    }

    /// After the writer indexed and published its own Adds (`indexed`: per
    /// user, their sequence numbers), moves each user's mark to the user's
    /// last Add when every Add of the user past the mark is one of them (no
    /// other node's Add in between, same generation). A failure leaves the
    /// marks where they are: the next Search catches up.
    pub(super) fn advance_after_own_adds(&self, indexed: &BTreeMap<UserId, BTreeSet<i64>>) {
        let Some(marks) = &self.marks else {
            return;
        };
        for (user_id, seqs) in indexed {
            let Some(mark) = marks.get(user_id) else {
                continue;
            };
            match advanced_mark(&self.conn, user_id, mark, seqs) {
                Ok(Some(next)) => {
                    let evicted = marks.set(user_id, next);
                    self.metrics.cache_evictions.fetch_add(
                        u64::try_from(evicted).unwrap_or(u64::MAX),
                        std::sync::atomic::Ordering::Relaxed,
                    );
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, "user mark not moved; the next search catches up")
                }
            }
        }
    }
}

/// Queues the user's Adds after `from` up to `state` (every document of the
/// user dropped first when `from` is `None`) and the user's changed session
/// records, read from `snapshot`, then commits.
fn index_user(
    snapshot: &StoreConn,
    index: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    user_id: &UserId,
    from: Option<i64>,
    state: UserState,
) -> Result<CaughtUp, ServiceError> {
    if from.is_none() {
        index.delete_users(std::slice::from_ref(user_id));
    }
    let mut after = from.unwrap_or(0);
    let mut num_adds = 0usize;
    let mut oldest_stored_ms = None;
    loop {
        let messages =
            store::user_messages_between(snapshot, user_id, after, state.last_seq, ADDS_PER_BATCH)?;
        let Some(last) = messages.last() else {
            break;
        };
        after = last.seq;
        num_adds += store::num_adds(&messages);
        oldest_stored_ms = oldest_stored_ms.or(messages.first().map(|m| m.stored_at_ms));
        index.add_messages(&messages, true)?;
    }
    let mut sessions = Vec::new();
    let mut unreadable = Vec::new();
    for session in store::user_sessions_changed_after(snapshot, user_id, from.unwrap_or(0))? {
        if session.last_seq <= state.last_seq {
            match readable_session_doc(session)? {
                SessionDocLookup::Read(doc) => sessions.extend(doc),
                SessionDocLookup::Unreadable(session) => unreadable.push(session),
            }
        }
    }
    index.upsert_sessions(sessions)?;
    index.commit(index.published_seq(), search_index)?;
    Ok(CaughtUp {
        num_adds,
        oldest_stored_ms,
        unreadable,
    })
}

/// The user's mark moved to their last Add, when every Add of the user
/// past `mark` is one of `seqs` and the generation is the same; `None`
/// otherwise.
fn advanced_mark(
    conn: &StoreConn,
    user_id: &UserId,
    mark: Mark,
    seqs: &BTreeSet<i64>,
) -> Result<Option<Mark>, ServiceError> {
    let snapshot = conn.snapshot()?;
    let state = store::user_state(&snapshot, user_id)?;
    if state.generation != mark.generation {
        return Ok(None);
    }
    let between = store::user_seqs_between(&snapshot, user_id, mark.seq, state.last_seq)?;
    Ok(between
        .iter()
        .all(|seq| seqs.contains(seq))
        .then_some(Mark {
            seq: state.last_seq,
            generation: state.generation,
        }))
}
