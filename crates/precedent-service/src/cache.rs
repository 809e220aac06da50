//! cache: a node's index as a cache of a shared store. "Before I answer
//! for this user, does my index hold everything the store holds of them?"
//!
//! Several nodes may share one PostgreSQL store, each with its own index,
//! each taking Adds. A node remembers, per user it has indexed, a [`Mark`]:
//! every Add of the user up to `seq` is in its index, as of the user's
//! deletion generation `generation`. Before a Search (or an explain) for a
//! user, the node reads the user's [`UserState`] from the store (one
//! indexed lookup) and compares: when the store holds a later Add, or a
//! newer generation (the user was deleted, or some of their sessions
//! purged, by any node), the writer thread catches the user up
//! ([`Writer::catch_up_user`]): a new generation, or a user never indexed, drops
//! every document of the user first; then the user's Adds after the mark
//! are indexed (replacing any documents of the same Adds) and the user's
//! changed session records upserted from the store (records are stored
//! with the Add by whichever node took it: nothing is derived again). The
//! writer's own Adds move the mark forward when they leave no gap
//! ([`Writer::advance_after_own_adds`]), so a user routed to one node is caught up
//! only after Adds other nodes took.
//!
//! A user with nothing stored (no Add in the store) is answered empty
//! after the check, with no catch-up and no mark: searches for users that
//! never wrote cost no writer job and leave nothing behind. Marks are kept
//! for the `ServiceOptions::max_cached_users` most recently used users
//! ([`UserMarks`]); a user whose mark was dropped is filled from nothing on
//! next use, like a user never seen, so a dropped mark costs time, never
//! correctness. A stored record that cannot be read (an older extractor's
//! shape) is left out of the catch-up's commit with a warning, then derived
//! again from its messages, stored and indexed; if that fails, the mark
//! stays below the session and the next Search tries again.
//!
//! Sequence numbers become visible in order (writers hold one advisory
//! lock from their first insert to commit), so a user's last sequence
//! number read now covers every Add of the user that will ever commit
//! below it: a mark is a prefix, never a set with holes.
//!
//! Marks live in memory and are written to `user_marks.json` beside the
//! index at a clean shutdown (after the index is synced); a start-up reads
//! and removes the file, and trusts it only when the index opened as it
//! was. After a crash there is none: every user is filled again on first
//! use, from nothing (their documents dropped first), which is correct
//! whatever the index held.
//!
//! SQLite has one writer, this process, whose index follows every Add it
//! stores: there are no marks and no check (`Service` holds `None`).
//!
//! Architecture invariant: the store is the truth; a Search never answers
//! from an index behind the store for its user.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Mutex;

use super::ServiceError;
use super::derive::{readable_session_doc, rederive};
use super::writer::Writer;
use precedent_core::domain::UserId;
use precedent_core::time::now_ms;
use precedent_index::{IndexWriterHandle, SearchIndex};
use precedent_store::{self as store, StoreConn, StoredSession, UserState};

/// The file the marks are kept in between a clean shutdown and the next
/// start-up.
pub const MARKS_FILE: &str = "user_marks.json";

/// Adds read from the store per batch while a user is caught up.
const ADDS_PER_BATCH: usize = 512;

/// What the index holds of one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Mark {
    /// Every Add of the user up to this sequence number is indexed.
    pub(super) seq: i64,
    /// The user's deletion generation those documents belong to.
    pub(super) generation: i64,
}

/// Users whose marks a node keeps unless configured
/// (`ServiceOptions::max_cached_users`): a mark and its place in the
/// recency order take about 150 bytes with a 40-byte user id, so some
/// 15 MB at most.
pub const DEFAULT_MAX_CACHED_USERS: usize = 100_000;

/// The marks of the users this node has indexed, the most recently used
/// `capacity` of them: the least recently used mark is dropped to make
/// room. A user without a mark is filled from nothing on next use (every
/// document of the user dropped first), so dropping a mark never makes a
/// Search answer from behind the store; the user's documents stay in the
/// index until then.
#[derive(Debug)]
pub(super) struct UserMarks {
    /// A std mutex: held only to read, insert or copy out.
    inner: Mutex<Recency>,
}

/// The marks and their order of use.
#[derive(Debug, Default)]
struct Recency {
    /// Most users kept.
    capacity: usize,
    /// Each user's mark and the tick of its last use.
    marks: HashMap<UserId, (Mark, u64)>,
    /// Users by the tick of their last use, oldest first.
    by_use: BTreeMap<u64, UserId>,
    /// The tick the next use gets.
    next_tick: u64,
}

impl Recency {
    fn new(capacity: usize) -> Recency {
        Recency {
            capacity: capacity.max(1),
            ..Recency::default()
        }
    }

    /// The user's mark, moved to the most recently used.
    fn touch(&mut self, user_id: &UserId) -> Option<Mark> {
        let tick = self.next_tick;
        let (mark, used) = self.marks.get_mut(user_id)?;
        self.by_use.remove(used);
        *used = tick;
        self.by_use.insert(tick, user_id.clone());
        self.next_tick += 1;
        Some(*mark)
    }

    /// Sets the user's mark (the most recently used); answers how many
    /// marks were dropped to make room.
    fn insert(&mut self, user_id: &UserId, mark: Mark) -> usize {
        let tick = self.next_tick;
        self.next_tick += 1;
        if let Some((_, previous_tick)) = self.marks.insert(user_id.clone(), (mark, tick)) {
            self.by_use.remove(&previous_tick);
        }
        self.by_use.insert(tick, user_id.clone());
        let mut evicted = 0;
        while self.marks.len() > self.capacity {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.marks.remove(&oldest);
            evicted += 1;
        }
        evicted
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct MarksFile {
    users: HashMap<String, Mark>,
}

impl UserMarks {
    /// No marks yet; at most `capacity` kept.
    pub(super) fn new(capacity: usize) -> UserMarks {
        UserMarks {
            inner: Mutex::new(Recency::new(capacity)),
        }
    }

    /// The mark of a user, `None` when this node has not indexed them (or
    /// dropped their mark since); counts as a use.
    pub(super) fn get(&self, user_id: &UserId) -> Option<Mark> {
        self.inner.lock().ok()?.touch(user_id)
    }

    /// Sets a user's mark; answers how many marks of other users were
    /// dropped to make room.
    fn set(&self, user_id: &UserId, mark: Mark) -> usize {
        self.inner
            .lock()
            .map_or(0, |mut inner| inner.insert(user_id, mark))
    }

    /// Users indexed.
    pub(super) fn len(&self) -> usize {
        self.inner.lock().map_or(0, |inner| inner.marks.len())
    }

    /// Whether the index holds everything the store holds of the user.
    pub(super) fn is_current(&self, user_id: &UserId, state: UserState) -> bool {
        self.get(user_id)
            .is_some_and(|mark| mark.generation == state.generation && mark.seq >= state.last_seq)
    }

    /// The marks a clean shutdown left in `data_dir`, when `trusted` (the
    /// index opened as it was), at most `capacity` of them; the file is
    /// removed either way, so that a crash of this run leaves none behind.
    pub(super) fn load(data_dir: &Path, trusted: bool, capacity: usize) -> UserMarks {
        let marks = UserMarks::new(capacity);
        let path = data_dir.join(MARKS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return marks,
            Err(error) => {
                tracing::warn!(%error, "user marks unreadable; users are indexed again on first use");
                return marks;
            }
        };
        if let Err(error) = std::fs::remove_file(&path) {
            tracing::warn!(%error, "user marks not removed; not used");
            return marks;
        }
        if !trusted {
            return marks;
        }
        match serde_json::from_str::<MarksFile>(&text) {
            Ok(file) => {
                tracing::info!(num_users = file.users.len(), "user marks loaded");
                // The file holds ids of users this node indexed from the
                // store.
                for (user_id, mark) in file.users {
                    marks.set(&UserId::from_stored(user_id), mark);
                }
                marks
            }
            Err(error) => {
                tracing::warn!(%error, "user marks unreadable; users are indexed again on first use");
                marks
            }
        }
    }

    /// Writes the marks to `data_dir` (after the index's last commit was
    /// synced).
    pub(super) fn save(&self, data_dir: &Path) -> std::io::Result<()> {
        let users = self
            .inner
            .lock()
            .map(|inner| {
                inner
                    .marks
                    .iter()
                    .map(|(user_id, (mark, _))| (user_id.to_string(), *mark))
                    .collect()
            })
            .unwrap_or_default();
        let text = serde_json::to_string(&MarksFile { users }).map_err(std::io::Error::other)?;
        let partial = data_dir.join(format!("{MARKS_FILE}.partial"));
        std::fs::write(&partial, text)?;
        std::fs::File::open(&partial)?.sync_all()?;
        std::fs::rename(&partial, data_dir.join(MARKS_FILE))
    }
}

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
    /// writer thread: see the module's documentation. Nothing to do on
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
                Ok(doc) => sessions.extend(doc),
                Err(session) => unreadable.push(session),
            }
        }
    }
    index.upsert_sessions(&sessions)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use precedent_core::domain::testing::uid;

    fn mark(seq: i64) -> Mark {
        Mark { seq, generation: 0 }
    }

    #[test]
    fn marks_past_the_capacity_drop_the_least_recently_used() {
        let marks = UserMarks::new(2);
        assert_eq!(marks.set(&uid("a"), mark(1)), 0);
        assert_eq!(marks.set(&uid("b"), mark(2)), 0);
        // A use of a makes b the least recently used.
        assert_eq!(marks.get(&uid("a")), Some(mark(1)));
        assert_eq!(marks.set(&uid("c"), mark(3)), 1);
        assert_eq!(marks.len(), 2);
        assert_eq!(marks.get(&uid("b")), None, "b was dropped");
        assert_eq!(marks.get(&uid("a")), Some(mark(1)));
        assert_eq!(marks.get(&uid("c")), Some(mark(3)));
        // Setting a user kept moves its mark and drops nothing.
        assert_eq!(marks.set(&uid("a"), mark(4)), 0);
        assert_eq!(marks.get(&uid("a")), Some(mark(4)));
        assert_eq!(marks.len(), 2);
    }

    #[test]
    fn a_dropped_user_is_not_current_and_is_filled_from_nothing() {
        let marks = UserMarks::new(1);
        let state = UserState {
            last_seq: 5,
            generation: 0,
        };
        marks.set(&uid("a"), mark(5));
        assert!(marks.is_current(&uid("a"), state));
        marks.set(&uid("b"), mark(7));
        assert!(!marks.is_current(&uid("a"), state), "a's mark was dropped");
        assert_eq!(marks.get(&uid("a")), None);
    }

    #[test]
    fn saved_marks_load_within_the_capacity() {
        let dir = tempfile::tempdir().expect("temp dir");
        let marks = UserMarks::new(10);
        for (index, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
            marks.set(&uid(name), mark(index as i64));
        }
        marks.save(dir.path()).expect("save");
        let loaded = UserMarks::load(dir.path(), true, 3);
        assert_eq!(loaded.len(), 3);
        assert!(!dir.path().join(MARKS_FILE).exists(), "the file is removed");
        marks.save(dir.path()).expect("save");
        let loaded = UserMarks::load(dir.path(), true, 10);
        assert_eq!(loaded.get(&uid("c")), Some(mark(2)));
    }
}
