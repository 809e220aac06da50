//! The derived session records: one per session, written whole
//! ([`upsert_session`]), read back and decoded ([`StoredSession::record`]),
//! and the marks that say which the index must take up again.

use super::rows::{self, Db};
use super::{StoreConn, StoreError, codec, sql, to_i64};
use precedent_core::domain::{SessionId, SessionKey, UserId};

/// A derived session record as it is written ([`upsert_session`]),
/// borrowed from whoever holds it: a record is not copied to be stored.
#[derive(Debug, Clone, Copy)]
pub struct SessionRow<'a> {
    /// Scope.
    pub user_id: &'a UserId,
    /// The session.
    pub session_id: &'a SessionId,
    /// The record, serialized by the service.
    pub record_json: &'a str,
    /// What the extractors could not parse, serialized by the service.
    pub diagnostics_json: &'a str,
    /// Messages the record was derived from.
    pub num_messages: i64,
    /// Sequence number of the last Add the record includes.
    pub last_seq: i64,
    /// When the record was derived.
    pub updated_at_ms: i64,
    /// The version of the extractor that derived it.
    pub extractor_version: i64,
}

/// A derived session record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// Scope.
    pub user_id: UserId,
    /// The session.
    pub session_id: SessionId,
    /// The record, serialized by the service (stored compressed: see
    /// `store::codec`; empty when the stored bytes cannot be read), read
    /// by [`StoredSession::record`].
    pub record_json: String,
    /// What the extractors could not parse, serialized by the service
    /// (stored as the record is).
    pub diagnostics_json: String,
    /// Messages the record was derived from.
    pub num_messages: i64,
    /// Sequence number of the last Add the record includes.
    pub last_seq: i64,
    /// When the record was last derived.
    pub updated_at_ms: i64,
    /// The version of the extractor that derived the record (0: unknown,
    /// from a store older than versioned records).
    pub extractor_version: i64,
}

impl StoredSession {
    /// The session's key.
    pub fn key(&self) -> SessionKey {
        SessionKey::new(self.user_id.clone(), self.session_id.clone())
    }

    /// The session as [`upsert_session`] writes it (tests write whole
    /// stored sessions).
    pub fn row(&self) -> SessionRow<'_> {
        SessionRow {
            user_id: &self.user_id,
            session_id: &self.session_id,
            record_json: &self.record_json,
            diagnostics_json: &self.diagnostics_json,
            num_messages: self.num_messages,
            last_seq: self.last_seq,
            updated_at_ms: self.updated_at_ms,
            extractor_version: self.extractor_version,
        }
    }

    /// The session's derived record, decoded from its stored JSON: the
    /// whole record (`ingest::SessionRecord`) or a view of the fields a
    /// caller reads. The one decoder of stored records, with one policy: a
    /// record that does not decode (damaged bytes, or the shape of another
    /// extractor) is never a panic and never dropped unseen, but a
    /// [`StoreError::Corrupt`] naming the session, and a warning in the
    /// log. What becomes of the session is the caller's: the writer derives
    /// it again, a read-only reader leaves it out or shows it without its
    /// record.
    pub fn record<T: serde::de::DeserializeOwned>(&self) -> Result<T, StoreError> {
        self.decode(&self.record_json, "record")
    }

    /// What the extractors could not parse, decoded as
    /// [`StoredSession::record`] decodes the record.
    pub fn diagnostics<T: serde::de::DeserializeOwned>(&self) -> Result<T, StoreError> {
        self.decode(&self.diagnostics_json, "diagnostics")
    }

    fn decode<T: serde::de::DeserializeOwned>(
        &self,
        json: &str,
        what: &str,
    ) -> Result<T, StoreError> {
        serde_json::from_str(json).map_err(|error| {
            tracing::warn!(
                session_id = %self.session_id,
                %error,
                "stored session {what} unreadable"
            );
            StoreError::Corrupt(format!("session {what} of {:?}: {error}", self.session_id))
        })
    }
}

/// Inserts or replaces the derived record of a session.
pub fn upsert_session(conn: &StoreConn, session: SessionRow<'_>) -> Result<(), StoreError> {
    conn.run(
        &sql::UPSERT_SESSION,
        &[
            &session.user_id.as_str(),
            &session.session_id.as_str(),
            &codec::pack(session.record_json),
            &codec::pack(session.diagnostics_json),
            &session.num_messages,
            &session.last_seq,
            &session.updated_at_ms,
            &session.extractor_version,
        ],
    )?;
    Ok(())
}

/// The sequence number of the last Add a session's record includes, 0 when
/// the session has no record.
pub fn session_last_seq(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
) -> Result<i64, StoreError> {
    Ok(conn
        .first_row(
            &sql::SESSION_LAST_SEQ,
            &[&user_id.as_str(), &session_id.as_str()],
            rows::integer,
        )?
        .unwrap_or(0))
}

/// Up to `limit` sessions whose record an extractor older than `version`
/// derived, most recently changed first.
pub fn sessions_derived_before(
    conn: &StoreConn,
    version: i64,
    limit: usize,
) -> Result<Vec<SessionKey>, StoreError> {
    conn.rows(
        &sql::SESSIONS_DERIVED_BEFORE,
        &[&version, &to_i64(limit)],
        rows::session_key,
    )
}

/// How many session records an extractor older than `version` derived.
pub fn count_sessions_derived_before(conn: &StoreConn, version: i64) -> Result<i64, StoreError> {
    conn.one_row(
        &sql::COUNT_SESSIONS_DERIVED_BEFORE,
        &[&version],
        rows::integer,
    )
}

/// Records that a session's record changed without an Add, so that its
/// index document is replaced (inside the caller's transaction).
pub fn mark_session_for_index(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
) -> Result<(), StoreError> {
    conn.run(
        &sql::MARK_SESSION_FOR_INDEX,
        &[&user_id.as_str(), &session_id.as_str()],
    )?;
    Ok(())
}

/// The records of the sessions marked by [`mark_session_for_index`] (those
/// deleted since are left out).
pub fn sessions_pending_index(conn: &StoreConn) -> Result<Vec<StoredSession>, StoreError> {
    conn.rows(&sql::SESSIONS_PENDING_INDEX, &[], rows::session)
}

/// The index holds the current documents of every pending session.
pub fn clear_sessions_pending_index(conn: &StoreConn) -> Result<(), StoreError> {
    conn.run(&sql::CLEAR_SESSIONS_PENDING_INDEX, &[])?;
    Ok(())
}

/// Sessions whose record changed with Adds in `(after_seq, up_to_seq]`.
pub fn sessions_changed_between(
    conn: &StoreConn,
    after_seq: i64,
    up_to_seq: i64,
) -> Result<Vec<StoredSession>, StoreError> {
    conn.rows(
        &sql::SESSIONS_CHANGED_BETWEEN,
        &[&after_seq, &up_to_seq],
        rows::session,
    )
}

/// Sessions that have messages but no derived record (stored before records
/// existed).
pub fn sessions_missing(conn: &StoreConn) -> Result<Vec<SessionKey>, StoreError> {
    conn.rows(&sql::SESSIONS_MISSING, &[], rows::session_key)
}

/// One session of a user.
pub fn session(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
) -> Result<Option<StoredSession>, StoreError> {
    conn.first_row(
        &sql::SESSION,
        &[&user_id.as_str(), &session_id.as_str()],
        rows::session,
    )
}

/// `(request_id, index within that Add)` of a session's first message.
pub fn session_first_source(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
) -> Result<Option<(String, usize)>, StoreError> {
    conn.first_row(
        &sql::SESSION_FIRST_SOURCE,
        &[&user_id.as_str(), &session_id.as_str()],
        rows::source,
    )
}
