//! derive: from stored messages to what searches read. A session's record
//! is re-derived from all its messages (inside the caller's transaction);
//! the index catches up with every Add the store holds past its committed
//! sequence number, message documents and the changed sessions' documents.

use rusqlite::Connection;

use super::ServiceError;
use crate::index::{IndexWriterHandle, SearchIndex, SessionDoc};
use crate::ingest::{self, IngestMessage, SessionRecord};
use crate::rank;
use crate::store::{self, StoredSession};
/// Indexes every Add the store holds past the index's committed sequence
/// number, in groups, committing each. Returns how many Adds it indexed.
pub(super) fn catch_up(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    replace: bool,
) -> Result<usize, ServiceError> {
    const ADDS_PER_COMMIT: usize = 512;
    let mut num_adds = 0;
    loop {
        let messages = store::messages_after(conn, writer.committed_seq(), ADDS_PER_COMMIT)?;
        let Some(last) = messages.last() else {
            return Ok(num_adds);
        };
        let last_seq = last.seq;
        let mut seqs: Vec<i64> = messages.iter().map(|message| message.seq).collect();
        seqs.dedup();
        num_adds += seqs.len();
        let mut sessions: Vec<SessionDoc> = Vec::new();
        for session in store::sessions_changed_between(conn, writer.committed_seq(), last_seq)? {
            let messages = store::session_messages(conn, &session.user_id, &session.session_id)?;
            sessions.extend(session_doc(&session, &messages));
        }
        let indexed = writer
            .add_messages(&messages, replace)
            .and_then(|()| writer.upsert_sessions(&sessions))
            .and_then(|()| writer.commit(last_seq, search_index));
        if let Err(error) = indexed {
            if let Err(rollback_error) = writer.rollback() {
                tracing::error!(error = %rollback_error, "index rollback failed");
            }
            return Err(error.into());
        }
    }
}

/// Re-derives the record of one session from all its stored messages and
/// stores it, inside the caller's transaction.
pub(super) fn derive_session(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
    now_ms: i64,
) -> Result<(), ServiceError> {
    let messages = store::session_messages(conn, user_id, session_id)?;
    let inputs = IngestMessage::in_order(
        messages
            .iter()
            .map(|message| (message.role, message.content.as_str())),
    );
    let (record, diagnostics) = ingest::extract_session(&inputs);
    let encode = |error: serde_json::Error| ServiceError::Encode(error.to_string());
    store::upsert_session(
        conn,
        &StoredSession {
            user_id: user_id.to_string(),
            session_id: session_id.to_string(),
            record_json: serde_json::to_string(&record).map_err(encode)?,
            diagnostics_json: serde_json::to_string(&diagnostics).map_err(encode)?,
            num_messages: messages.len() as i64,
            last_seq: messages
                .iter()
                .map(|message| message.seq)
                .max()
                .unwrap_or(0),
            updated_at_ms: now_ms,
        },
    )?;
    Ok(())
}

/// The index document of a stored session record; `None` (logged) when the
/// stored record cannot be read. `messages` are the session's messages in
/// order: those no evidence came from (a plain remark, a question, an
/// observation that showed nothing wrong) are searchable through the
/// session too.
fn session_doc(session: &StoredSession, messages: &[store::StoredMessage]) -> Option<SessionDoc> {
    let record: SessionRecord = match serde_json::from_str(&session.record_json) {
        Ok(record) => record,
        Err(error) => {
            tracing::error!(%error, "stored session record unreadable; not indexed");
            return None;
        }
    };
    const MAX_TEXT_BYTES: usize = 256 * 1024;
    const MAX_PLAIN_MESSAGE_BYTES: usize = 64 * 1024;
    let mut text = record.task.clone();
    for evidence in &record.evidence {
        if text.len() + evidence.text.len() > MAX_TEXT_BYTES {
            break;
        }
        text.push('\n');
        text.push_str(&evidence.text);
    }
    let with_evidence: std::collections::HashSet<usize> = record
        .evidence
        .iter()
        .map(|evidence| evidence.message_index)
        .collect();
    let mut plain_bytes = 0usize;
    for (index, message) in messages.iter().enumerate() {
        if with_evidence.contains(&index) {
            continue;
        }
        let content = ingest::text::truncate_to_bytes(&message.content, MAX_PLAIN_MESSAGE_BYTES);
        if text.len() + content.len() > MAX_TEXT_BYTES {
            break;
        }
        plain_bytes += content.len();
        text.push('\n');
        text.push_str(content);
    }
    tracing::trace!(plain_bytes, "session text");
    let profile = rank::SessionProfile::from_record(
        &session.session_id,
        &record,
        session.last_seq,
        session.updated_at_ms,
    );
    let profile_json = match serde_json::to_string(&profile) {
        Ok(json) => json,
        Err(error) => {
            tracing::error!(%error, "session profile not serializable; not indexed");
            return None;
        }
    };
    Some(SessionDoc {
        user_id: session.user_id.clone(),
        session_id: session.session_id.clone(),
        last_seq: session.last_seq,
        profile_json,
        text,
    })
}
