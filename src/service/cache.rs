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
//! ([`catch_up_user`]): a new generation, or a user never indexed, drops
//! every document of the user first; then the user's Adds after the mark
//! are indexed (replacing any documents of the same Adds) and the user's
//! changed session records upserted from the store (records are stored
//! with the Add by whichever node took it: nothing is derived again). The
//! writer's own Adds move the mark forward when they leave no gap
//! ([`advance_after_own_adds`]), so a user routed to one node is caught up
//! only after Adds other nodes took.
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

use super::derive::session_doc;
use super::{ServiceError, WriterMetrics};
use crate::index::{IndexWriterHandle, SearchIndex};
use crate::store::{self, StoreConn, UserState};
use crate::time::now_ms;

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

/// The marks of every user this node has indexed.
#[derive(Debug, Default)]
pub(super) struct UserMarks {
    /// A std mutex: held only to read, insert or copy out.
    marks: Mutex<HashMap<String, Mark>>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct MarksFile {
    users: HashMap<String, Mark>,
}

impl UserMarks {
    /// The mark of a user, `None` when this node has not indexed them.
    pub(super) fn get(&self, user_id: &str) -> Option<Mark> {
        self.marks.lock().ok()?.get(user_id).copied()
    }

    fn set(&self, user_id: &str, mark: Mark) {
        if let Ok(mut marks) = self.marks.lock() {
            marks.insert(user_id.to_string(), mark);
        }
    }

    /// Users indexed.
    pub(super) fn len(&self) -> usize {
        self.marks.lock().map_or(0, |marks| marks.len())
    }

    /// Whether the index holds everything the store holds of the user.
    pub(super) fn is_current(&self, user_id: &str, state: UserState) -> bool {
        self.get(user_id)
            .is_some_and(|mark| mark.generation == state.generation && mark.seq >= state.last_seq)
    }

    /// The marks a clean shutdown left in `data_dir`, when `trusted` (the
    /// index opened as it was); the file is removed either way, so that a
    /// crash of this run leaves none behind.
    pub(super) fn load(data_dir: &Path, trusted: bool) -> UserMarks {
        let path = data_dir.join(MARKS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return UserMarks::default();
            }
            Err(error) => {
                tracing::warn!(%error, "user marks unreadable; users are indexed again on first use");
                return UserMarks::default();
            }
        };
        if let Err(error) = std::fs::remove_file(&path) {
            tracing::warn!(%error, "user marks not removed; not used");
            return UserMarks::default();
        }
        if !trusted {
            return UserMarks::default();
        }
        match serde_json::from_str::<MarksFile>(&text) {
            Ok(file) => {
                tracing::info!(num_users = file.users.len(), "user marks loaded");
                UserMarks {
                    marks: Mutex::new(file.users),
                }
            }
            Err(error) => {
                tracing::warn!(%error, "user marks unreadable; users are indexed again on first use");
                UserMarks::default()
            }
        }
    }

    /// Writes the marks to `data_dir` (after the index's last commit was
    /// synced).
    pub(super) fn save(&self, data_dir: &Path) -> std::io::Result<()> {
        let users = self
            .marks
            .lock()
            .map(|marks| marks.clone())
            .unwrap_or_default();
        let text = serde_json::to_string(&MarksFile { users }).map_err(std::io::Error::other)?;
        let partial = data_dir.join(format!("{MARKS_FILE}.partial"));
        std::fs::write(&partial, text)?;
        std::fs::File::open(&partial)?.sync_all()?;
        std::fs::rename(&partial, data_dir.join(MARKS_FILE))
    }
}

/// Brings the index up to what the store holds of one user, on the writer
/// thread: see the module's documentation.
pub(super) fn catch_up_user(
    conn: &mut StoreConn,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    marks: &UserMarks,
    metrics: &WriterMetrics,
    user_id: &str,
) -> Result<(), ServiceError> {
    let started = std::time::Instant::now();
    let snapshot = conn.snapshot()?;
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
    let indexed = (|| {
        if from.is_none() {
            writer.delete_users(&[user_id.to_string()]);
        }
        let mut after = from.unwrap_or(0);
        let mut num_adds = 0usize;
        let mut oldest_stored_ms = None;
        loop {
            let messages = store::user_messages_between(
                &snapshot,
                user_id,
                after,
                state.last_seq,
                ADDS_PER_BATCH,
            )?;
            let Some(last) = messages.last() else {
                break;
            };
            after = last.seq;
            let mut seqs: Vec<i64> = messages.iter().map(|message| message.seq).collect();
            seqs.dedup();
            num_adds += seqs.len();
            oldest_stored_ms = oldest_stored_ms.or(messages.first().map(|m| m.stored_at_ms));
            writer.add_messages(&messages, true)?;
        }
        let mut sessions = Vec::new();
        for session in store::user_sessions_changed_after(&snapshot, user_id, from.unwrap_or(0))? {
            if session.last_seq <= state.last_seq {
                sessions.extend(session_doc(&snapshot, session)?);
            }
        }
        writer.upsert_sessions(&sessions)?;
        writer.commit(writer.committed_seq(), search_index)?;
        Ok::<_, ServiceError>((num_adds, oldest_stored_ms))
    })();
    drop(snapshot);
    let (num_adds, oldest_stored_ms) = match indexed {
        Ok(done) => done,
        Err(error) => {
            if let Err(rollback_error) = writer.rollback() {
                tracing::error!(error = %rollback_error, "index rollback failed");
            }
            return Err(error);
        }
    };
    marks.set(
        user_id,
        Mark {
            seq: state.last_seq,
            generation: state.generation,
        },
    );
    let lag_ms = oldest_stored_ms.map_or(0, |stored| now_ms().saturating_sub(stored).max(0));
    metrics
        .catch_ups
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    metrics.catch_up_adds.fetch_add(
        u64::try_from(num_adds).unwrap_or(u64::MAX),
        std::sync::atomic::Ordering::Relaxed,
    );
    metrics
        .catch_up_lag
        .observe(std::time::Duration::from_millis(lag_ms.unsigned_abs()));
    tracing::debug!(
        num_adds,
        refilled = from.is_none(),
        lag_ms,
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        "user caught up"
    );
    Ok(())
}

/// After the writer indexed and committed its own Adds (`indexed`: per
/// user, their sequence numbers), moves each user's mark to the user's last
/// Add when every Add of the user past the mark is one of them (no other
/// node's Add in between, same generation). A failure leaves the marks
/// where they are: the next Search catches up.
pub(super) fn advance_after_own_adds(
    conn: &StoreConn,
    marks: &UserMarks,
    indexed: &BTreeMap<String, BTreeSet<i64>>,
) {
    for (user_id, seqs) in indexed {
        let Some(mark) = marks.get(user_id) else {
            continue;
        };
        let advanced = (|| {
            let snapshot = conn.snapshot()?;
            let state = store::user_state(&snapshot, user_id)?;
            if state.generation != mark.generation {
                return Ok::<_, ServiceError>(None);
            }
            let between = store::user_seqs_between(&snapshot, user_id, mark.seq, state.last_seq)?;
            Ok(between
                .iter()
                .all(|seq| seqs.contains(seq))
                .then_some(Mark {
                    seq: state.last_seq,
                    generation: state.generation,
                }))
        })();
        match advanced {
            Ok(Some(next)) => marks.set(user_id, next),
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "user mark not moved; the next search catches up"),
        }
    }
}
