//! search: "here is a user and a new task; what of their stored experience
//! helps, best first?" — over a read-only view of the data directory.
//!
//! Query analysis, candidates from the index, ranking and the noise gate
//! ([`rank`]), then result assembly with the session records and messages
//! read from the store. The service searches through a [`Searcher`] beside
//! its writer; `precedent search` opens one on a data directory directly,
//! which works while a server holds it (SQLite readers and tantivy readers
//! never block the writer).
//!
//! Architecture invariant: nothing here writes.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::ReadError;
use precedent_core::domain::{MemoryItem, SearchRequest, SessionId, UserId};
use precedent_index::{self as index, SearchIndex};
use precedent_ingest::{Clock, SessionRecord};
use precedent_rank as rank;
use precedent_store::{self as store, ReaderPool, StoreConn, StoreLocation};

/// Kept candidates an explanation checks against a checkout, at most.
const MAX_STALE_CHECKS: usize = 20;

/// What ranking made of a Search: the query's facts, every candidate
/// with its verdict, and the terms that find messages.
/// [`Searcher::search`] answers from it; [`Explained`] shows it.
#[derive(Debug, Clone)]
pub struct Ranked {
    /// The facts read from the query.
    pub query: rank::query::QueryFacts,
    /// Sessions in the user's scope.
    pub num_sessions: usize,
    /// Every candidate: kept ones first, best first.
    pub candidates: Vec<rank::Scored>,
    /// The query's rarest terms the memory holds (finds messages).
    pub rarest_terms: Vec<String>,
}

impl Ranked {
    /// The ranking of a Search for a user with nothing stored: no
    /// sessions, no candidates.
    pub fn nothing_stored(query: &str) -> Ranked {
        Ranked {
            query: rank::query::analyze(query, Clock::Wall(std::time::Instant::now)),
            num_sessions: 0,
            candidates: Vec::new(),
            rarest_terms: Vec::new(),
        }
    }
}

/// A ranking as an explanation shows it (see [`Searcher::explain`]): its
/// candidates with the gate's thresholds, and how the kept ones stand
/// against the caller's checkout.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Explained {
    /// The facts read from the query.
    pub query: rank::query::QueryFacts,
    /// Sessions in the user's scope.
    pub num_sessions: usize,
    /// Every candidate: kept ones first, best first.
    pub candidates: Vec<rank::Scored>,
    /// A candidate less likely relevant than this is dropped.
    pub keep_probability: f32,
    /// A candidate whose session BM25 is this many times every other's
    /// (its `bm25_margin`) stands out: kept whatever its language or
    /// probability.
    pub standout_margin: f32,
    /// How the kept candidates stand against the caller's checkout, by
    /// session, when the Search named one (`repo`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub stale: std::collections::BTreeMap<String, super::stale::Staleness>,
}

impl Explained {
    /// The explanation of `ranked`, with the `stale` marks of its kept
    /// candidates.
    pub fn of(
        ranked: Ranked,
        stale: std::collections::BTreeMap<String, super::stale::Staleness>,
    ) -> Explained {
        Explained {
            query: ranked.query,
            num_sessions: ranked.num_sessions,
            candidates: ranked.candidates,
            keep_probability: rank::KEEP_PROBABILITY,
            standout_margin: rank::STANDOUT_MARGIN,
            stale,
        }
    }

    /// The explanation of a Search for a user with nothing stored: no
    /// sessions, no candidates.
    pub fn nothing_stored(query: &str) -> Explained {
        Explained::of(
            Ranked::nothing_stored(query),
            std::collections::BTreeMap::new(),
        )
    }
}

/// Searches over an index and the store's read connections.
pub struct Searcher {
    index: Arc<SearchIndex>,
    /// The store's read connections (the service's own pool, shared).
    readers: Arc<ReaderPool>,
    /// Parsed ranking profiles by document: a segment never changes, so an
    /// entry is right for as long as its segment lives. Bounded: cleared
    /// when full. A std mutex: held only to look up or insert.
    profiles: Mutex<HashMap<index::DocKey, Arc<rank::SessionProfile>>>,
    /// Profiles the cache holds at most before it is cleared.
    max_cached_profiles: usize,
    budget_chars: usize,
}

/// Parsed profiles kept at most (a few KB each).
const MAX_CACHED_PROFILES: usize = 20_000;

/// Best-matching parts (each brings its best message) fetched per confident
/// session (the best of all of them by BM25, so one session may bring more
/// than this, another none).
const PARTS_PER_CONFIDENT_SESSION: usize = 5;

/// Session candidates taken per BM25 field: past this, sessions share only
/// common words with the query.
const MAX_CANDIDATES_PER_FIELD: usize = 100;

impl Searcher {
    /// A searcher over `index` and the store `readers` read; answers hold
    /// about `budget_chars` characters unless a request says otherwise.
    pub fn new(index: Arc<SearchIndex>, readers: Arc<ReaderPool>, budget_chars: usize) -> Searcher {
        Searcher {
            index,
            readers,
            profiles: Mutex::new(HashMap::new()),
            max_cached_profiles: MAX_CACHED_PROFILES,
            budget_chars: budget_chars.max(1),
        }
    }

    /// The same searcher with a profile cache of at most `max_profiles`
    /// entries (20,000 by default).
    pub fn with_max_cached_profiles(mut self, max_profiles: usize) -> Searcher {
        self.max_cached_profiles = max_profiles.max(1);
        self
    }

    /// A searcher over a data directory a server built (and may still
    /// hold); errs when there is no store or no index of this version.
    pub fn open_read_only(data_dir: &Path, budget_chars: usize) -> Result<Searcher, ReadError> {
        Searcher::open_read_only_at(
            data_dir,
            StoreLocation::Sqlite(data_dir.to_path_buf()),
            budget_chars,
        )
    }

    /// A searcher over the index of a data directory and the store at
    /// `store` (the one the server of that directory uses).
    pub fn open_read_only_at(
        data_dir: &Path,
        store: StoreLocation,
        budget_chars: usize,
    ) -> Result<Searcher, ReadError> {
        let index = index::open_read_only(data_dir)?;
        // Fails early, with the store's own error, when there is no store.
        drop(store.open_reader()?);
        Ok(Searcher::new(
            Arc::new(index),
            Arc::new(ReaderPool::new(store)),
            budget_chars,
        ))
    }

    /// Answers a Search: rank the user's sessions,
    /// keep what passes the noise gate, assemble the answer within the
    /// character budget.
    pub fn search(&self, request: &SearchRequest) -> Result<Vec<MemoryItem>, ReadError> {
        let started = std::time::Instant::now();
        let ranked = self.rank(request)?;
        let ranked_at = started.elapsed();
        let budget = request.max_chars().unwrap_or(self.budget_chars);
        let shown = rank::assemble::shown_sessions(&ranked.candidates, budget, request.top_k());
        if shown.is_empty() {
            return Ok(Vec::new());
        }
        // A user being deleted has no memory, whatever an index that has
        // not caught up with the deletion yet still holds (a node of a
        // shared store).
        if self.with_reader(|conn| Ok(store::user_deletion_pending(conn, request.user_id())?))? {
            return Ok(Vec::new());
        }
        // The best-matching messages of the sessions that show them, as
        // they are: what the query names may sit in any message, not only
        // in the task, the fix or an error.
        // The profiles' session ids were read back from the index, which
        // holds only ids the store had.
        let with_messages: Vec<SessionId> = shown
            .iter()
            .filter(|session| session.shows_messages())
            .map(|session| SessionId::from_stored(session.scored.session_id.as_str()))
            .collect();
        let parts = self.index.search_parts_in(
            request.user_id(),
            &with_messages,
            &ranked.rarest_terms,
            with_messages.len() * PARTS_PER_CONFIDENT_SESSION,
        )?;
        let searched_at = started.elapsed();
        let loaded = self.with_reader(|conn| {
            Loaded::read(
                conn,
                request.user_id(),
                &shown,
                &parts,
                &ranked.rarest_terms,
            )
        })?;
        let sessions = loaded.kept_sessions();
        let loaded_at = started.elapsed();
        let mut items = rank::assemble::assemble(&ranked.query, &sessions, budget, request.top_k());
        if let Some(root) = request.repo() {
            // Records this answer read already are checked as they are.
            self.mark_stale(root, request.user_id(), &loaded.records(), &mut items)?;
        }
        tracing::debug!(
            rank_ms = ranked_at.as_secs_f64() * 1e3,
            message_search_ms = (searched_at - ranked_at).as_secs_f64() * 1e3,
            store_ms = (loaded_at - searched_at).as_secs_f64() * 1e3,
            assemble_ms = (started.elapsed() - loaded_at).as_secs_f64() * 1e3,
            num_candidates = ranked.candidates.len(),
            num_items = items.len(),
            "search answered"
        );
        Ok(items)
    }

    /// Marks each item with how its session stands against the checkout
    /// at `root` ([`super::stale`]): its experience, and its error trace and
    /// messages too, which show the same session's code as it was; a stale
    /// one's text says so.
    fn mark_stale(
        &self,
        root: &std::path::Path,
        user_id: &UserId,
        read: &HashMap<&str, &SessionRecord>,
        items: &mut [MemoryItem],
    ) -> Result<(), ReadError> {
        // Compact sessions' records, and those of sessions shown by a
        // message alone, were not read for the answer: read now.
        let mut unread: Vec<String> = Vec::new();
        for item in items.iter() {
            if !read.contains_key(item.session_id.as_str()) && !unread.contains(&item.session_id) {
                unread.push(item.session_id.clone());
            }
        }
        let mut marks = self.staleness_of(root, user_id, &unread)?;
        for item in items.iter() {
            if let Some(record) = read.get(item.session_id.as_str())
                && !marks.contains_key(&item.session_id)
            {
                marks.insert(item.session_id.clone(), super::stale::check(root, record));
            }
        }
        for item in items.iter_mut() {
            let Some(staleness) = marks.get(&item.session_id) else {
                continue;
            };
            if let Some(line) = super::stale::line(staleness) {
                item.content.push('\n');
                item.content.push_str(&line);
            }
            item.stale = Some(staleness.clone());
        }
        Ok(())
    }

    /// How each of `sessions` stands against the checkout at `root`.
    fn staleness_of(
        &self,
        root: &std::path::Path,
        user_id: &UserId,
        sessions: &[String],
    ) -> Result<std::collections::BTreeMap<String, super::stale::Staleness>, ReadError> {
        let stored = self.with_reader(|conn| {
            sessions
                .iter()
                .map(|session_id| {
                    // Named by the index, which holds stored sessions.
                    let session_id = SessionId::from_stored(session_id.as_str());
                    Ok(store::session(conn, user_id, &session_id)?)
                })
                .collect::<Result<Vec<_>, ReadError>>()
        })?;
        let mut marks = std::collections::BTreeMap::new();
        for stored in stored.into_iter().flatten() {
            let Ok(record) = stored.record::<SessionRecord>() else {
                continue;
            };
            marks.insert(
                stored.session_id.into_string(),
                super::stale::check(root, &record),
            );
        }
        Ok(marks)
    }

    /// Every candidate session of a Search with its features, ranking
    /// score and the gate's verdict, kept ones first; with a checkout named
    /// (`repo`), how each kept one stands against it.
    pub fn explain(&self, request: &SearchRequest) -> Result<Explained, ReadError> {
        let ranked = self.rank(request)?;
        let mut stale = std::collections::BTreeMap::new();
        if let Some(root) = request.repo() {
            let kept: Vec<String> = ranked
                .candidates
                .iter()
                .filter(|scored| scored.dropped.is_none())
                .take(MAX_STALE_CHECKS)
                .map(|scored| scored.session_id.clone())
                .collect();
            stale = self.staleness_of(root, request.user_id(), &kept)?;
        }
        Ok(Explained::of(ranked, stale))
    }

    /// Every candidate session of a Search with its features, ranking
    /// score and the gate's verdict, kept ones first.
    pub fn rank(&self, request: &SearchRequest) -> Result<Ranked, ReadError> {
        let started = std::time::Instant::now();
        let query = rank::query::analyze(request.query(), Clock::Wall(std::time::Instant::now));
        let analyzed_at = started.elapsed();
        // Profiles the cache holds are pinned here when the index is told
        // it need not read them: the cache may be cleared (or another
        // search may clear it) before they are used.
        let pinned: std::cell::RefCell<HashMap<index::DocKey, Arc<rank::SessionProfile>>> =
            std::cell::RefCell::new(HashMap::new());
        let known = |key: &index::DocKey| {
            let cached = self
                .profiles
                .lock()
                .ok()
                .and_then(|profiles| profiles.get(key).cloned());
            match cached {
                Some(profile) => {
                    pinned.borrow_mut().insert(*key, profile);
                    true
                }
                None => false,
            }
        };
        let found = self.index.search_sessions(
            request.user_id(),
            &query.terms,
            MAX_CANDIDATES_PER_FIELD,
            &known,
        )?;
        let mut pinned = pinned.into_inner();
        let candidates: Vec<rank::Candidate> = found
            .hits
            .into_iter()
            .filter_map(|hit| {
                let profile = match &hit.profile {
                    Some(bytes) => {
                        let parsed = rank::SessionProfile::decode(bytes)
                            .inspect_err(|error| {
                                tracing::error!(%error, "stored session profile unreadable; skipped");
                            })
                            .ok()?;
                        let parsed = Arc::new(parsed);
                        self.remember_profile(hit.key, Arc::clone(&parsed));
                        parsed
                    }
                    None => pinned.remove(&hit.key)?,
                };
                Some(rank::Candidate {
                    profile,
                    text_bm25: hit.text_score,
                    matched_weight: hit.matched_weight,
                })
            })
            .collect();
        let num_sessions = usize::try_from(found.scope_size).unwrap_or(usize::MAX);
        let found_at = started.elapsed();
        let candidates = rank::rank(
            &query,
            &candidates,
            num_sessions,
            found.query_weight,
            &found.rarest_terms,
        );
        tracing::debug!(
            analyze_ms = analyzed_at.as_secs_f64() * 1e3,
            candidates_ms = (found_at - analyzed_at).as_secs_f64() * 1e3,
            rank_ms = (started.elapsed() - found_at).as_secs_f64() * 1e3,
            "ranked"
        );
        Ok(Ranked {
            query,
            num_sessions,
            candidates,
            rarest_terms: found.rarest_terms,
        })
    }

    fn remember_profile(&self, key: index::DocKey, profile: Arc<rank::SessionProfile>) {
        if let Ok(mut profiles) = self.profiles.lock() {
            if profiles.len() >= self.max_cached_profiles {
                profiles.clear();
            }
            profiles.insert(key, profile);
        }
    }

    /// Runs `read` with a pooled read connection.
    pub fn with_reader<T>(
        &self,
        read: impl FnOnce(&StoreConn) -> Result<T, ReadError>,
    ) -> Result<T, ReadError> {
        self.readers.with_reader(read)
    }
}

/// What an answer read from the store for the sessions it shows.
struct Loaded<'a> {
    /// In the order shown.
    sessions: Vec<LoadedSession<'a>>,
    /// The best-matching message of each part found, by session, best
    /// part first.
    messages: HashMap<String, Vec<store::StoredMessage>>,
}

/// A shown session with what was read for it.
struct LoadedSession<'a> {
    scored: &'a rank::Scored,
    /// Its room in the answer ([`rank::assemble::ShownSession::room`]).
    room: f32,
    /// Its record, when it needs one and the stored one is readable.
    record: Option<SessionRecord>,
    /// `(request_id, index within that Add)` of each message (of its first
    /// alone when it needs no record).
    sources: Vec<(String, usize)>,
    /// See [`session_time`].
    created_at_ms: i64,
}

impl<'a> Loaded<'a> {
    /// Reads what `shown` needs: each session's record and sources as
    /// [`rank::assemble::ShownSession::needs_record`] says, and the
    /// message of each of `parts` that [`rank::assemble::best_message`]
    /// chooses for `terms`.
    fn read(
        conn: &StoreConn,
        user_id: &UserId,
        shown: &[rank::assemble::ShownSession<'a>],
        parts: &[index::PartHit],
        terms: &[String],
    ) -> Result<Loaded<'a>, ReadError> {
        let stored = shown
            .iter()
            .map(|session| {
                // Named by the index, which holds stored sessions.
                let session_id = &SessionId::from_stored(session.scored.session_id.as_str());
                if !session.needs_record() {
                    let first = store::session_first_source(conn, user_id, session_id)?;
                    return Ok((session, None, first.into_iter().collect()));
                }
                let sources = store::session_message_sources(conn, user_id, session_id)?;
                let stored = store::session(conn, user_id, session_id)?;
                Ok((session, stored, sources))
            })
            .collect::<Result<Vec<_>, ReadError>>()?;
        let mut messages: HashMap<String, Vec<store::StoredMessage>> = HashMap::new();
        for part in parts {
            let mut held = store::messages_of_add_in(
                conn,
                user_id,
                part.seq,
                part.first_index,
                part.end_index,
            )?;
            let contents = held.iter().map(|message| message.content.as_str());
            if let Some(best) = rank::assemble::best_message(contents, terms) {
                let message = held.swap_remove(best);
                messages
                    .entry(message.session_id.to_string())
                    .or_default()
                    .push(message);
            }
        }
        let sessions = stored
            .into_iter()
            .map(|(shown, stored, sources)| {
                let scored = shown.scored;
                let record = stored.and_then(|stored| {
                    stored
                        .record::<SessionRecord>()
                        .inspect_err(|error| {
                            tracing::error!(%error, "stored session record unreadable; shown compact");
                        })
                        .ok()
                });
                let created_at_ms = session_time(record.as_ref(), scored);
                LoadedSession {
                    scored,
                    room: shown.room(),
                    record,
                    sources,
                    created_at_ms,
                }
            })
            .collect();
        Ok(Loaded { sessions, messages })
    }

    /// The sessions as assembly reads them.
    fn kept_sessions(&self) -> Vec<rank::assemble::KeptSession<'_>> {
        self.sessions
            .iter()
            .map(|session| rank::assemble::KeptSession {
                scored: session.scored,
                record: session.record.as_ref(),
                sources: &session.sources,
                created_at_ms: session.created_at_ms,
                room: session.room,
                matched_messages: self
                    .messages
                    .get(&session.scored.session_id)
                    .into_iter()
                    .flatten()
                    .map(|message| rank::assemble::MatchedMessage {
                        content: &message.content,
                        request_id: &message.request_id,
                        index_in_add: message.message_index,
                        created_at_ms: message.timestamp_ms.unwrap_or(message.stored_at_ms),
                    })
                    .collect(),
            })
            .collect()
    }

    /// The records read, by session.
    fn records(&self) -> HashMap<&str, &SessionRecord> {
        self.sessions
            .iter()
            .filter_map(|session| {
                let record = session.record.as_ref()?;
                Some((session.scored.session_id.as_str(), record))
            })
            .collect()
    }
}

/// When a kept session's experience happened, Unix ms: its latest dated
/// message (the stored record's, else the ranking profile's, which a
/// compact item has alone), else when its record was last derived.
fn session_time(record: Option<&SessionRecord>, scored: &rank::Scored) -> i64 {
    record
        .and_then(|record| record.last_message_at_ms)
        .or(scored.last_message_at_ms)
        .unwrap_or(scored.updated_at_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use precedent_core::domain::testing::{sid, uid};
    use precedent_index::SessionDoc;

    /// A session document of `alice` about the parser, with `profile` as
    /// its stored profile.
    fn parser_session(session_id: &str, profile: Vec<u8>) -> SessionDoc {
        SessionDoc {
            user_id: uid("alice"),
            session_id: sid(session_id),
            last_seq: 1,
            profile,
            text: "the config parser rejects trailing commas".to_string(),
        }
    }

    fn ranked_sessions(searcher: &Searcher) -> Vec<String> {
        let request = SearchRequest::new(
            "the config parser rejects trailing commas".to_string(),
            "alice".to_string(),
            10,
            None,
            None,
        )
        .expect("a valid search");
        let ranked = searcher.rank(&request).expect("rank");
        ranked
            .candidates
            .iter()
            .map(|candidate| candidate.session_id.clone())
            .collect()
    }

    #[test]
    fn a_stored_profile_that_does_not_decode_is_skipped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (search_index, mut writer, _) = index::open(dir.path()).expect("open index");
        let search_index = Arc::new(search_index);
        let profile = rank::SessionProfile {
            session_id: "good".to_string(),
            task_line: "the config parser rejects trailing commas".to_string(),
            last_seq: 1,
            ..rank::SessionProfile::default()
        };
        let good = parser_session("good", profile.encode().expect("encodable"));
        let json = serde_json::to_vec(&profile).expect("serializable");
        let sessions = [
            good,
            parser_session("json", json),
            parser_session("empty", Vec::new()),
        ];
        writer
            .upsert_sessions(sessions.to_vec())
            .expect("queue sessions");
        let readers = Arc::new(ReaderPool::new(StoreLocation::Sqlite(
            dir.path().to_path_buf(),
        )));
        // Read from the published batch, then from the committed segment.
        writer.publish(1, &search_index).expect("publish");
        let searcher = Searcher::new(Arc::clone(&search_index), Arc::clone(&readers), 12_000);
        assert_eq!(ranked_sessions(&searcher), ["good"]);
        writer.commit(1, &search_index).expect("commit");
        let searcher = Searcher::new(search_index, readers, 12_000);
        assert_eq!(ranked_sessions(&searcher), ["good"]);
        assert_eq!(ranked_sessions(&searcher), ["good"], "from the cache");
    }
}
