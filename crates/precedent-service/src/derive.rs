//! derive: from stored messages to what searches read. A session's record
//! is derived from all its messages; for an Add that happens before the
//! writer (see [`prepare_add`]), on an extraction thread, against a read
//! snapshot, and the writer only checks that the session did not move on
//! in between (the Add protocol: see the module `writer`). Records of an
//! older extractor are derived again here ([`rederive`]) and stored by the
//! writer; a stored record becomes the session's index document here
//! ([`session_doc`]).

use std::collections::HashMap;
use std::sync::Mutex;

use super::ServiceError;
use precedent_core::domain::{AddRequest, SessionId, SessionKey, UserId};
use precedent_index::SessionDoc;
use precedent_ingest::incremental::SessionExtractor;
use precedent_ingest::{self as ingest, Clock, IngestMessage, SessionRecord};
use precedent_rank as rank;
use precedent_store::{self as store, SessionRow, StoreConn, StoredSession};

/// The version of the extraction that derives records (stored with each;
/// records of an older one are derived again at start-up, see
/// `service::rederive`).
pub(crate) use precedent_ingest::EXTRACTOR_VERSION;

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

/// What preparing an Add before the writer came to.
pub(super) enum Preparation {
    /// For the writer: known already, or derived.
    Ready(Prepared),
    /// Refused on the fast path: the snapshot's session is too large for
    /// it (the writer is not asked).
    TooLarge(TooLarge),
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

impl TooLarge {
    /// The error that refuses the Add, naming the limit.
    pub(super) fn into_error(self, max_session_bytes: i64) -> ServiceError {
        ServiceError::SessionTooLarge {
            stored_bytes: self.stored_bytes,
            adding_bytes: self.adding_bytes,
            max_session_bytes,
        }
    }
}

/// Prepares an Add for the writer, on the caller's thread (a read
/// connection: a consistent snapshot of the store): the fast path's checks
/// ([`fast_path_check`]), then its session's record derived from the
/// snapshot's messages and the Add's. Optimistic: the writer's transaction
/// checks again and decides.
pub(super) fn prepare_add(
    conn: &StoreConn,
    cache: &ExtractorCache,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    max_session_bytes: i64,
) -> Result<Preparation, ServiceError> {
    let snapshot = conn.snapshot()?;
    if let Some(settled) = fast_path_check(&snapshot, request, body_sha256, max_session_bytes)? {
        return Ok(settled);
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
    Ok(Preparation::Ready(Prepared::Derived {
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

/// The fast path: the request log and the size limit checked on the read
/// snapshot, before anything is derived. A request id taken already goes
/// to the writer without a record ([`Prepared::Known`]; the writer answers
/// from the request log), an Add past the limit is refused at once;
/// `None`: derive. Decides nothing for the store: the writer's transaction
/// checks both again (`writer::derive::admit_with_record`).
fn fast_path_check(
    snapshot: &StoreConn,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    max_session_bytes: i64,
) -> Result<Option<Preparation>, ServiceError> {
    if store::prior_admission(snapshot, request, body_sha256)?.is_some() {
        return Ok(Some(Preparation::Ready(Prepared::Known)));
    }
    if let Fit::TooLarge(too_large) = check_size(snapshot, request, max_session_bytes)? {
        return Ok(Some(Preparation::TooLarge(too_large)));
    }
    Ok(None)
}

/// Whether an Add fits within its session's size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fit {
    /// The session stays within the limit.
    Fits,
    /// The Add would take it past.
    TooLarge(TooLarge),
}

/// Whether the Add fits within its session's size limit, as `conn` sees
/// the session (a snapshot before the writer, the writer's transaction).
pub(super) fn check_size(
    conn: &StoreConn,
    request: &AddRequest,
    max_session_bytes: i64,
) -> Result<Fit, ServiceError> {
    let adding_bytes = store::content_bytes(request);
    let stored_bytes = store::session_content_bytes(conn, request.user_id(), request.session_id())?;
    if stored_bytes.saturating_add(adding_bytes) > max_session_bytes {
        return Ok(Fit::TooLarge(TooLarge {
            stored_bytes,
            adding_bytes,
        }));
    }
    Ok(Fit::Fits)
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
    let session = match readable_session_doc(session)? {
        SessionDocLookup::Read(doc) => return Ok(doc),
        SessionDocLookup::Unreadable(session) => session,
    };
    derive_session(
        conn,
        &session.user_id,
        &session.session_id,
        session.updated_at_ms,
    )?;
    let Some(again) = store::session(conn, &session.user_id, &session.session_id)? else {
        return Ok(None);
    };
    match again.record() {
        Ok(record) => doc_of_record(again, &record),
        Err(error) => {
            tracing::error!(%error, "derived session record unreadable; not indexed");
            Ok(None)
        }
    }
}

/// What a stored session's record gives on a read-only snapshot.
pub(super) enum SessionDocLookup {
    /// The record was read: its index document (`None`: its profile could
    /// not be encoded, see [`finish_doc`]).
    Read(Option<SessionDoc>),
    /// The record cannot be read: the session back, for its record to be
    /// derived again where it can be stored.
    Unreadable(StoredSession),
}

/// A stored session's index document, or the session back when its record
/// cannot be read: for a caller on a read-only snapshot, which cannot store
/// the record derived again (see [`session_doc`]).
pub(super) fn readable_session_doc(
    session: StoredSession,
) -> Result<SessionDocLookup, ServiceError> {
    match session.record::<SessionRecord>() {
        Ok(record) => Ok(SessionDocLookup::Read(doc_of_record(session, &record)?)),
        Err(error) => {
            tracing::warn!(%error, "stored session record unreadable; derived again from its messages");
            Ok(SessionDocLookup::Unreadable(session))
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
fn doc_parts(session_id: &SessionId, record: &SessionRecord) -> (String, rank::SessionProfile) {
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
