//! derive: from stored messages to what searches read. A session's record
//! is derived from all its messages; for an Add that happens before the
//! writer (see [`prepare_add`]), on the caller's blocking thread, and the
//! writer only checks that the session did not move on in between. The
//! index catches up with every Add the store holds past its published
//! sequence number (the parts of its messages and the changed sessions'
//! documents), and with the sessions re-derived without an Add.

use std::collections::HashMap;
use std::sync::Mutex;

use super::ServiceError;
use super::writer::Writer;
use precedent_core::domain::{AddRequest, SessionId, SessionKey, UserId};
use precedent_index::SessionDoc;
use precedent_ingest::incremental::SessionExtractor;
use precedent_ingest::{self as ingest, Clock, IngestMessage, SessionRecord};
use precedent_rank as rank;
use precedent_store::{self as store, Admission, SessionRow, StoreConn, StoreTx, StoredSession};

/// The version of the extraction that derives records (stored with each;
/// records of an older one are derived again at start-up, see
/// `service::rederive`).
pub use precedent_ingest::EXTRACTOR_VERSION;

/// A session record derived outside the writer, valid while the session's
/// last stored Add is still `base_last_seq`.
#[derive(Debug, Clone)]
pub(super) struct Derived {
    /// The session's last Add the derivation started from (0: none).
    pub(super) base_last_seq: i64,
    /// The record, JSON.
    pub(super) record_json: String,
    /// Its diagnostics, JSON.
    pub(super) diagnostics_json: String,
    /// Messages the record was derived from.
    pub(super) num_messages: i64,
}

/// An Add's session record derived before the writer, with what the index
/// takes of it: the session document's text and ranking profile, made from
/// the record in memory (the stored copy is not read back).
#[derive(Debug)]
pub(super) struct DerivedAdd {
    /// The record, as it is stored.
    pub(super) derived: Derived,
    /// The session document's text.
    text: String,
    /// The ranking profile, but for the sequence number and time the Add
    /// is stored under (boxed: a few hundred bytes, moved with the Add).
    profile: Box<rank::SessionProfile>,
}

impl DerivedAdd {
    /// The session's index document once the Add is stored as `last_seq`
    /// at `updated_at_ms`: the document the stored record gives.
    pub(super) fn into_session_doc(
        self,
        user_id: &UserId,
        session_id: &SessionId,
        last_seq: i64,
        updated_at_ms: i64,
    ) -> Option<SessionDoc> {
        finish_doc(
            user_id.clone(),
            session_id.clone(),
            self.text,
            *self.profile,
            last_seq,
            updated_at_ms,
        )
    }
}

/// What the store said of an Add before the writer saw it.
pub(super) enum Prepared {
    /// The request id is taken: the writer answers from the request log.
    Known,
    /// New: its session's record with it, and the extraction state after
    /// it (to keep once the Add is stored).
    Derived {
        /// The record and its index document.
        derived: DerivedAdd,
        /// The state after the Add's messages.
        extractor: Box<SessionExtractor>,
    },
}

/// The extraction states of recently written sessions, each valid while
/// its session's last Add is the one it was kept with: an Add to such a
/// session extracts only its own messages. Bounded by bytes; the least
/// recently used go first. A state is taken out while an Add uses it, so
/// two Adds never extend one state.
pub(super) struct ExtractorCache {
    /// A std mutex: held only to take, insert or evict (evicting scans for
    /// the least recently used entry, a few thousand at most).
    entries: Mutex<CacheEntries>,
    max_bytes: usize,
}

#[derive(Default)]
struct CacheEntries {
    by_session: HashMap<SessionKey, CachedExtractor>,
    bytes: usize,
    clock: u64,
}

struct CachedExtractor {
    last_seq: i64,
    extractor: Box<SessionExtractor>,
    bytes: usize,
    used: u64,
}

impl ExtractorCache {
    /// A cache of at most `max_bytes` of states (roughly).
    pub(super) fn new(max_bytes: usize) -> ExtractorCache {
        ExtractorCache {
            entries: Mutex::new(CacheEntries::default()),
            max_bytes,
        }
    }

    /// Takes out the state of a session whose last Add is `last_seq`.
    fn take(
        &self,
        user_id: &UserId,
        session_id: &SessionId,
        last_seq: i64,
    ) -> Option<Box<SessionExtractor>> {
        let mut entries = self.entries.lock().ok()?;
        let key = SessionKey::new(user_id.clone(), session_id.clone());
        let cached = entries.by_session.remove(&key)?;
        entries.bytes -= cached.bytes;
        (cached.last_seq == last_seq).then_some(cached.extractor)
    }

    /// Keeps the state of a session whose last Add is now `last_seq`.
    pub(super) fn put(
        &self,
        user_id: &UserId,
        session_id: &SessionId,
        last_seq: i64,
        extractor: Box<SessionExtractor>,
    ) {
        let bytes = extractor.approx_bytes();
        if bytes > self.max_bytes {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        entries.clock += 1;
        let used = entries.clock;
        let key = SessionKey::new(user_id.clone(), session_id.clone());
        if let Some(old) = entries.by_session.insert(
            key,
            CachedExtractor {
                last_seq,
                extractor,
                bytes,
                used,
            },
        ) {
            entries.bytes -= old.bytes;
        }
        entries.bytes += bytes;
        while entries.bytes > self.max_bytes {
            let Some(oldest) = entries
                .by_session
                .iter()
                .min_by_key(|(_, cached)| cached.used)
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            if let Some(evicted) = entries.by_session.remove(&oldest) {
                entries.bytes -= evicted.bytes;
            }
        }
    }
}

/// Why an Add cannot be stored: it would take its session past the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TooLarge {
    /// Bytes of content the session holds.
    pub(super) stored_bytes: i64,
    /// Bytes of content of the Add.
    pub(super) adding_bytes: i64,
}

/// Checks the Add against the request log and the session's size limit, and
/// derives its session's record with it, on the caller's thread (a read
/// connection: a consistent snapshot of the store).
pub(super) fn prepare_add(
    conn: &StoreConn,
    cache: &ExtractorCache,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    max_session_bytes: i64,
) -> Result<Result<Prepared, TooLarge>, ServiceError> {
    let snapshot = conn.snapshot()?;
    if store::prior_admission(&snapshot, request, body_sha256)?.is_some() {
        return Ok(Ok(Prepared::Known));
    }
    if let Err(too_large) = check_size(&snapshot, request, max_session_bytes)? {
        return Ok(Err(too_large));
    }
    let base_last_seq =
        store::session_last_seq(&snapshot, request.user_id(), request.session_id())?;
    let mut extractor = match cache.take(request.user_id(), request.session_id(), base_last_seq) {
        Some(extractor) => extractor,
        None => {
            let stored =
                store::session_messages(&snapshot, request.user_id(), request.session_id())?;
            let mut extractor =
                Box::new(SessionExtractor::new(Clock::Wall(std::time::Instant::now)));
            extractor.extend_dated(
                stored
                    .iter()
                    .map(|message| (message.role, message.content.as_str(), message.timestamp_ms)),
            );
            extractor
        }
    };
    drop(snapshot);
    extractor.extend_dated(
        request
            .messages()
            .iter()
            .map(|message| (message.role, message.content.as_str(), message.timestamp_ms)),
    );
    let (record, diagnostics) = extractor.record();
    let encode = ServiceError::Encode;
    let (text, profile) = doc_parts(request.session_id(), &record);
    Ok(Ok(Prepared::Derived {
        derived: DerivedAdd {
            derived: Derived {
                base_last_seq,
                record_json: serde_json::to_string(&record).map_err(encode)?,
                diagnostics_json: serde_json::to_string(&diagnostics).map_err(encode)?,
                num_messages: extractor.num_messages() as i64,
            },
            text,
            profile: Box::new(profile),
        },
        extractor,
    }))
}

/// Whether the Add fits within its session's size limit.
pub(super) fn check_size(
    conn: &StoreConn,
    request: &AddRequest,
    max_session_bytes: i64,
) -> Result<Result<(), TooLarge>, ServiceError> {
    let adding_bytes = store::content_bytes(request);
    let stored_bytes = store::session_content_bytes(conn, request.user_id(), request.session_id())?;
    if stored_bytes.saturating_add(adding_bytes) > max_session_bytes {
        return Ok(Err(TooLarge {
            stored_bytes,
            adding_bytes,
        }));
    }
    Ok(Ok(()))
}

/// What the writer made of one Add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Stored now, stored before, or a conflict.
    Admission(Admission),
    /// Over the session's size limit: nothing stored.
    TooLarge(TooLarge),
    /// Its session moved on since the record was derived: nothing stored,
    /// derive again.
    Stale,
}

/// Stores one Add with its session's record inside the writer's
/// transaction: from `derived` when it is still current, derived here from
/// all the session's messages when there is none.
pub(super) fn admit_with_record(
    tx: &StoreTx<'_>,
    request: &AddRequest,
    derived: Option<&Derived>,
    max_session_bytes: i64,
    stored_at_ms: i64,
) -> Result<Verdict, ServiceError> {
    // Hashed once per request, by whichever asks first (`prepare`, on the
    // extraction pool, unless the writer derives the record itself).
    let body_sha256 = request.body_sha256();
    if let Some(prior) = store::prior_admission(tx, request, &body_sha256)? {
        return Ok(Verdict::Admission(prior));
    }
    if let Err(too_large) = check_size(tx, request, max_session_bytes)? {
        return Ok(Verdict::TooLarge(too_large));
    }
    if let Some(derived) = derived
        && store::session_last_seq(tx, request.user_id(), request.session_id())?
            != derived.base_last_seq
    {
        return Ok(Verdict::Stale);
    }
    let admission = store::admit(tx, request, &body_sha256, stored_at_ms)?;
    if let Admission::Inserted { seq } = admission {
        match derived {
            Some(derived) => store::upsert_session(
                tx,
                SessionRow {
                    user_id: request.user_id(),
                    session_id: request.session_id(),
                    record_json: &derived.record_json,
                    diagnostics_json: &derived.diagnostics_json,
                    num_messages: derived.num_messages,
                    last_seq: seq,
                    updated_at_ms: stored_at_ms,
                    extractor_version: EXTRACTOR_VERSION,
                },
            )?,
            None => derive_session(tx, request.user_id(), request.session_id(), stored_at_ms)?,
        }
    }
    Ok(Verdict::Admission(admission))
}

/// A session's record re-derived without an Add (a newer extractor), valid
/// while its last Add is still `derived.base_last_seq`.
#[derive(Debug, Clone)]
pub(super) struct Rederived {
    /// Scope.
    pub(super) user_id: UserId,
    /// The session.
    pub(super) session_id: SessionId,
    /// The record.
    pub(super) derived: Derived,
    /// When its last Add was stored (kept: re-deriving does not make a
    /// session younger for retention).
    pub(super) updated_at_ms: i64,
}

/// Derives a stored session's record again from its messages, on the
/// caller's thread; `None` when the session is gone.
pub(super) fn rederive(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
) -> Result<Option<Rederived>, ServiceError> {
    let snapshot = conn.snapshot()?;
    let Some(session) = store::session(&snapshot, user_id, session_id)? else {
        return Ok(None);
    };
    let messages = store::session_messages(&snapshot, user_id, session_id)?;
    drop(snapshot);
    let (record_json, diagnostics_json) = extract_json(&messages)?;
    Ok(Some(Rederived {
        user_id: user_id.clone(),
        session_id: session_id.clone(),
        derived: Derived {
            base_last_seq: session.last_seq,
            record_json,
            diagnostics_json,
            num_messages: messages.len() as i64,
        },
        updated_at_ms: session.updated_at_ms,
    }))
}

/// Stores re-derived records whose sessions did not move on, inside the
/// writer's transaction, and marks them for the index. Answers how many it
/// stored.
pub(super) fn store_rederived(
    tx: &StoreTx<'_>,
    sessions: &[Rederived],
) -> Result<usize, ServiceError> {
    let keys: Vec<SessionKey> = sessions
        .iter()
        .map(|session| SessionKey::new(session.user_id.clone(), session.session_id.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    store::lock_sessions(tx, &keys)?;
    let mut stored = 0;
    for session in sessions {
        if store::session_last_seq(tx, &session.user_id, &session.session_id)?
            != session.derived.base_last_seq
        {
            // An Add landed since: it derived the record with this
            // extractor already (or the session is gone).
            continue;
        }
        store::upsert_session(
            tx,
            SessionRow {
                user_id: &session.user_id,
                session_id: &session.session_id,
                record_json: &session.derived.record_json,
                diagnostics_json: &session.derived.diagnostics_json,
                num_messages: session.derived.num_messages,
                last_seq: session.derived.base_last_seq,
                updated_at_ms: session.updated_at_ms,
                extractor_version: EXTRACTOR_VERSION,
            },
        )?;
        store::mark_session_for_index(tx, &session.user_id, &session.session_id)?;
        stored += 1;
    }
    Ok(stored)
}

impl Writer {
    /// Indexes every Add the store holds past the index's published
    /// sequence number, in groups, committing each (replacing what the
    /// index holds of those Adds past its last commit), then the sessions
    /// re-derived without an Add. Returns how many Adds it indexed.
    pub(super) fn catch_up(&mut self) -> Result<usize, ServiceError> {
        const ADDS_PER_COMMIT: usize = 512;
        let mut num_adds = 0;
        loop {
            let after = self.index.published_seq();
            let messages = store::messages_after(&self.conn, after, ADDS_PER_COMMIT)?;
            let Some(last) = messages.last() else {
                break;
            };
            let last_seq = last.seq;
            num_adds += store::num_adds(&messages);
            let mut sessions: Vec<SessionDoc> = Vec::new();
            for session in store::sessions_changed_between(&self.conn, after, last_seq)? {
                sessions.extend(session_doc(&self.conn, session)?);
            }
            let indexed = self
                .index
                .add_messages(&messages, true)
                .and_then(|()| self.index.upsert_sessions(&sessions))
                .and_then(|()| self.index.commit(last_seq, &self.search_index));
            self.roll_back_on_error(indexed)?;
        }
        self.index_rederived()?;
        Ok(num_adds)
    }

    /// Replaces the index documents of the sessions re-derived without an
    /// Add, committed, then clears their marks.
    pub(super) fn index_rederived(&mut self) -> Result<(), ServiceError> {
        let pending = store::sessions_pending_index(&self.conn)?;
        if pending.is_empty() {
            return Ok(());
        }
        let mut sessions = Vec::with_capacity(pending.len());
        for session in pending {
            sessions.extend(session_doc(&self.conn, session)?);
        }
        let published_seq = self.index.published_seq();
        let indexed = self
            .index
            .upsert_sessions(&sessions)
            .and_then(|()| self.index.commit(published_seq, &self.search_index));
        self.roll_back_on_error(indexed)?;
        store::clear_sessions_pending_index(&self.conn)?;
        Ok(())
    }
}

/// The index documents of these `(user_id, session_id)` sessions' current
/// records: the one given, else the stored record's (sessions gone are left
/// out).
pub(super) fn session_docs(
    conn: &StoreConn,
    sessions: std::collections::BTreeMap<SessionKey, Option<SessionDoc>>,
) -> Result<Vec<SessionDoc>, ServiceError> {
    let mut docs = Vec::with_capacity(sessions.len());
    for (
        SessionKey {
            user_id,
            session_id,
        },
        doc,
    ) in sessions
    {
        if let Some(doc) = doc {
            docs.push(doc);
        } else if let Some(session) = store::session(conn, &user_id, &session_id)? {
            docs.extend(session_doc(conn, session)?);
        }
    }
    Ok(docs)
}

/// The record and diagnostics, JSON, of a session's messages in order.
fn extract_json(messages: &[store::StoredMessage]) -> Result<(String, String), ServiceError> {
    let inputs = IngestMessage::in_order_dated(
        messages
            .iter()
            .map(|message| (message.role, message.content.as_str(), message.timestamp_ms)),
    );
    let (record, diagnostics) =
        ingest::extract_session(&inputs, Clock::Wall(std::time::Instant::now));
    let encode = ServiceError::Encode;
    Ok((
        serde_json::to_string(&record).map_err(encode)?,
        serde_json::to_string(&diagnostics).map_err(encode)?,
    ))
}

/// Re-derives the record of one session from all its stored messages and
/// stores it, inside the caller's transaction (or alone).
pub(super) fn derive_session(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
    now_ms: i64,
) -> Result<(), ServiceError> {
    let messages = store::session_messages(conn, user_id, session_id)?;
    let (record_json, diagnostics_json) = extract_json(&messages)?;
    store::upsert_session(
        conn,
        SessionRow {
            user_id,
            session_id,
            record_json: &record_json,
            diagnostics_json: &diagnostics_json,
            num_messages: messages.len() as i64,
            last_seq: messages
                .iter()
                .map(|message| message.seq)
                .max()
                .unwrap_or(0),
            updated_at_ms: now_ms,
            extractor_version: EXTRACTOR_VERSION,
        },
    )?;
    Ok(())
}

/// Bytes of a session document's text (the task) at most.
const MAX_TEXT_BYTES: usize = 256 * 1024;

/// The index document of a stored session record. A record that cannot be
/// read (written by an extractor whose record had another shape) is derived
/// again from the session's messages and stored, never left out of search.
/// The document holds the record's task and profile, never the session's
/// messages: each message is indexed once, in a part of the Add that
/// brought it (see `index`).
pub(super) fn session_doc(
    conn: &StoreConn,
    session: StoredSession,
) -> Result<Option<SessionDoc>, ServiceError> {
    let record: SessionRecord = match session.record() {
        Ok(record) => record,
        Err(error) => {
            tracing::warn!(%error, "stored session record unreadable; deriving it again");
            let key = session.key();
            derive_session(conn, &key.user_id, &key.session_id, session.updated_at_ms)?;
            let Some(again) = store::session(conn, &key.user_id, &key.session_id)? else {
                return Ok(None);
            };
            match again.record() {
                Ok(record) => return doc_of_record(again, &record),
                Err(error) => {
                    tracing::error!(%error, "derived session record unreadable; not indexed");
                    return Ok(None);
                }
            }
        }
    };
    doc_of_record(session, &record)
}

/// A stored session's index document, or the session back when its record
/// cannot be read: for a caller on a read-only snapshot, which cannot store
/// the record derived again (see [`session_doc`]).
pub(super) fn readable_session_doc(
    session: StoredSession,
) -> Result<Result<Option<SessionDoc>, StoredSession>, ServiceError> {
    match session.record::<SessionRecord>() {
        Ok(record) => Ok(Ok(doc_of_record(session, &record)?)),
        Err(error) => {
            tracing::warn!(%error, "stored session record unreadable; left out and derived again");
            Ok(Err(session))
        }
    }
}

/// The index document of a session with its record read.
fn doc_of_record(
    session: StoredSession,
    record: &SessionRecord,
) -> Result<Option<SessionDoc>, ServiceError> {
    let (text, profile) = doc_parts(&session.session_id, record);
    Ok(finish_doc(
        session.user_id,
        session.session_id,
        text,
        profile,
        session.last_seq,
        session.updated_at_ms,
    ))
}

/// A session document's text and ranking profile, made from its record;
/// the profile's sequence number and time are set by [`finish_doc`].
fn doc_parts(session_id: &str, record: &SessionRecord) -> (String, rank::SessionProfile) {
    let text = ingest::text::truncate_to_bytes(&record.task, MAX_TEXT_BYTES).to_string();
    let profile = rank::SessionProfile::from_record(session_id, record, 0, 0);
    (text, profile)
}

/// The index document of a session whose record includes the Adds up to
/// `last_seq`, last changed at `updated_at_ms`.
fn finish_doc(
    user_id: UserId,
    session_id: SessionId,
    text: String,
    mut profile: rank::SessionProfile,
    last_seq: i64,
    updated_at_ms: i64,
) -> Option<SessionDoc> {
    profile.last_seq = last_seq;
    profile.updated_at_ms = updated_at_ms;
    let profile = match profile.encode() {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::error!(%error, "session profile not serializable; not indexed");
            return None;
        }
    };
    Some(SessionDoc {
        user_id,
        session_id,
        last_seq,
        profile,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use precedent_core::domain::testing::{sid, uid};
    use precedent_core::domain::{Message, Role};

    fn message(role: Role, content: &str) -> Message {
        Message {
            role,
            content: content.to_string(),
            timestamp_ms: Some(1_700_000_000_000),
        }
    }

    /// The index document an Add carries from its derivation is the one the
    /// stored record gives, for a first Add and for one after it.
    #[test]
    fn an_adds_document_is_the_stored_records_document() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut conn = store::open_writer(dir.path()).expect("store");
        let cache = ExtractorCache::new(1024 * 1024);
        let turns = [
            vec![
                message(
                    Role::User,
                    "Fix the crash in src/parser.rs when the input ends early",
                ),
                message(
                    Role::Assistant,
                    "Running the tests.\n$ cargo test parser\nthread 'parser::tests::eof' panicked at src/parser.rs:42:9:\ncalled `Option::unwrap()` on a `None` value\ntest parser::tests::eof ... FAILED",
                ),
            ],
            vec![message(
                Role::Assistant,
                "--- a/src/parser.rs\n+++ b/src/parser.rs\n@@ -40,3 +40,3 @@ fn next_token(&mut self) -> Option<Token> {\n-        let byte = self.input.get(self.at).unwrap();\n+        let byte = self.input.get(self.at)?;\n         self.at += 1;\n$ cargo test parser\ntest parser::tests::eof ... ok",
            )],
        ];
        for (number, messages) in turns.into_iter().enumerate() {
            let request = AddRequest::new(
                format!("r{number}"),
                "ada".to_string(),
                "s1".to_string(),
                messages,
            )
            .expect("a valid Add");
            let prepared = prepare_add(&conn, &cache, &request, &request.body_sha256(), i64::MAX)
                .expect("prepared")
                .expect("fits");
            let Prepared::Derived { derived, .. } = prepared else {
                panic!("a new Add is derived");
            };
            let stored_at_ms = 1_700_000_000_500 + number as i64;
            let tx = conn.transaction().expect("transaction");
            let verdict = admit_with_record(
                &tx,
                &request,
                Some(&derived.derived),
                i64::MAX,
                stored_at_ms,
            )
            .expect("admitted");
            tx.commit().expect("commit");
            let Verdict::Admission(Admission::Inserted { seq }) = verdict else {
                panic!("stored: {verdict:?}");
            };
            let stored = store::session(&conn, &uid("ada"), &sid("s1"))
                .expect("read")
                .expect("stored session");
            let from_store = session_doc(&conn, stored).expect("document");
            let carried = derived.into_session_doc(&uid("ada"), &sid("s1"), seq, stored_at_ms);
            assert!(carried.is_some());
            assert_eq!(carried, from_store);
        }
    }
}
