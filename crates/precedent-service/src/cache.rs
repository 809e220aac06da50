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
//! (`Writer::catch_up_user`, in `writer::cache`): a new generation, or a user never indexed, drops
//! every document of the user first; then the user's Adds after the mark
//! are indexed (replacing any documents of the same Adds) and the user's
//! changed session records upserted from the store (records are stored
//! with the Add by whichever node took it: nothing is derived again). The
//! writer's own Adds move the mark forward when they leave no gap
//! (`Writer::advance_after_own_adds`), so a user routed to one node is
//! caught up only after Adds other nodes took.
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

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;

use precedent_core::domain::UserId;
use precedent_store::UserState;

/// The file the marks are kept in between a clean shutdown and the next
/// start-up.
pub(crate) const MARKS_FILE: &str = "user_marks.json";

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
    pub(super) fn set(&self, user_id: &UserId, mark: Mark) -> usize {
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
