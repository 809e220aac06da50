//! The PostgreSQL writer's side: admission of an Add (the duplicate
//! check, the sequence and session locks, the request and message
//! inserts), the derived sessions' upserts, the deletions and the queues
//! the writer leaves for the indexer (sessions to index, deletions to
//! apply). Each function answers for one operation of the seam in
//! [`crate::store`]; the contracts are written there.

use postgres::types::ToSql;

use super::reads::{SESSION_COLUMNS, pairs, sessions};
use super::{PgConn, get, to_i64};
use crate::domain::AddRequest;
use crate::store::{Admission, Deleted, StoreError, StoredSession, codec, content_bytes};

pub(in crate::store) fn prior_admission(
    conn: &PgConn,
    request: &AddRequest,
    body_sha256: &[u8; 32],
) -> Result<Option<Admission>, StoreError> {
    let Some(row) = conn.query_opt(
        "SELECT seq, body_sha256 FROM requests WHERE user_id = $1 AND request_id = $2",
        &[&request.user_id, &request.request_id],
    )?
    else {
        return Ok(None);
    };
    let seq: i64 = get(&row, 0)?;
    let stored_hash: &[u8] = get(&row, 1)?;
    Ok(Some(if stored_hash == body_sha256.as_slice() {
        Admission::Duplicate { seq }
    } else {
        Admission::Conflict
    }))
}

pub(in crate::store) fn session_content_bytes(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<i64, StoreError> {
    get(
        &conn.query_one(
            "SELECT COALESCE(SUM(content_bytes), 0)::BIGINT FROM requests
             WHERE user_id = $1 AND session_id = $2",
            &[&user_id, &session_id],
        )?,
        0,
    )
}

/// The key of the transaction-scoped advisory lock that writers take
/// before their first sequence number (the single-key space; session locks
/// use the two-key space, which does not overlap it).
const SEQUENCE_LOCK_KEY: i64 = 7303174651193360002;

/// Takes the sequence lock for the rest of the transaction, once: a
/// writer that takes sequence numbers holds it until it commits or rolls
/// back, so writers commit in the order of their sequence numbers and a
/// reader that sees seq N sees every committed seq below N ("everything
/// after seq N" never skips a row that commits late). The cost: writer
/// transactions of every process sharing the database are serialised from
/// their first insert to their commit, one commit (WAL flush) at a time.
fn lock_sequence(tx: &PgConn) -> Result<(), StoreError> {
    if tx.sequence_locked.get() {
        return Ok(());
    }
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SEQUENCE_LOCK_KEY])?;
    tx.sequence_locked.set(tx.in_transaction.get());
    Ok(())
}

/// Locks these sessions for the rest of the transaction (an advisory lock
/// per `(user_id, session_id)`, by the hashes of both), in one order every
/// writer follows, so that two processes never interleave a session's
/// check-then-insert and never deadlock on each other's sessions.
pub(in crate::store) fn lock_sessions(
    tx: &PgConn,
    sessions: &[(String, String)],
) -> Result<(), StoreError> {
    if sessions.is_empty() {
        return Ok(());
    }
    let (user_ids, session_ids): (Vec<&str>, Vec<&str>) = sessions
        .iter()
        .map(|(user_id, session_id)| (user_id.as_str(), session_id.as_str()))
        .unzip();
    // The subquery is sorted and fenced (OFFSET 0), so the locks are taken
    // in key order.
    tx.query(
        "SELECT pg_advisory_xact_lock(k.user_key, k.session_key) FROM (
             SELECT DISTINCT hashtext(u) AS user_key, hashtext(s) AS session_key
             FROM UNNEST($1::TEXT[], $2::TEXT[]) AS t (u, s)
             ORDER BY 1, 2 OFFSET 0
         ) k",
        &[&user_ids, &session_ids],
    )?;
    Ok(())
}

pub(in crate::store) fn admit(
    tx: &PgConn,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    stored_at_ms: i64,
) -> Result<Admission, StoreError> {
    if let Some(prior) = prior_admission(tx, request, body_sha256)? {
        return Ok(prior);
    }
    lock_sequence(tx)?;
    if user_deletion_pending(tx, &request.user_id)? {
        return Err(StoreError::UserBeingDeleted(request.user_id.clone()));
    }
    let inserted = tx.query_opt(
        "INSERT INTO requests (user_id, request_id, session_id, body_sha256, num_messages, stored_at_ms, content_bytes)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (user_id, request_id) DO NOTHING
         RETURNING seq",
        &[
            &request.user_id,
            &request.request_id,
            &request.session_id,
            &body_sha256.as_slice(),
            &to_i64(request.messages.len()),
            &stored_at_ms,
            &content_bytes(request),
        ],
    )?;
    let Some(row) = inserted else {
        // Another process stored the same key since the look-up above.
        return Ok(prior_admission(tx, request, body_sha256)?.unwrap_or(Admission::Conflict));
    };
    let seq: i64 = get(&row, 0)?;
    let indexes: Vec<i64> = (0..request.messages.len()).map(to_i64).collect();
    let roles: Vec<&str> = request
        .messages
        .iter()
        .map(|message| message.role.as_str())
        .collect();
    let contents: Vec<&str> = request
        .messages
        .iter()
        .map(|message| message.content.as_str())
        .collect();
    let timestamps: Vec<Option<i64>> = request
        .messages
        .iter()
        .map(|message| message.timestamp_ms)
        .collect();
    // One statement for all the messages of the Add.
    tx.execute(
        "INSERT INTO messages (seq, user_id, session_id, message_index, role, content, timestamp_ms)
         SELECT $1, $2, $3, m.message_index, m.role, m.content, m.timestamp_ms
         FROM UNNEST($4::BIGINT[], $5::TEXT[], $6::TEXT[], $7::BIGINT[])
             AS m (message_index, role, content, timestamp_ms)
         ORDER BY m.message_index",
        &[
            &seq,
            &request.user_id,
            &request.session_id,
            &indexes,
            &roles,
            &contents,
            &timestamps,
        ],
    )?;
    Ok(Admission::Inserted { seq })
}

pub(in crate::store) fn upsert_session(
    conn: &PgConn,
    session: &StoredSession,
) -> Result<(), StoreError> {
    let record = codec::pack(&session.record_json);
    let diagnostics = codec::pack(&session.diagnostics_json);
    conn.execute(
        &format!(
            "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (user_id, session_id) DO UPDATE SET
                 record_json = excluded.record_json,
                 diagnostics_json = excluded.diagnostics_json,
                 num_messages = excluded.num_messages,
                 last_seq = excluded.last_seq,
                 updated_at_ms = excluded.updated_at_ms,
                 extractor_version = excluded.extractor_version"
        ),
        &[
            &session.user_id,
            &session.session_id,
            &record.as_bytes(),
            &diagnostics.as_bytes(),
            &session.num_messages,
            &session.last_seq,
            &session.updated_at_ms,
            &session.extractor_version,
        ],
    )?;
    Ok(())
}

pub(in crate::store) fn mark_session_for_index(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO pending_session_index (user_id, session_id) VALUES ($1, $2)
         ON CONFLICT DO NOTHING",
        &[&user_id, &session_id],
    )?;
    Ok(())
}

pub(in crate::store) fn sessions_pending_index(
    conn: &PgConn,
) -> Result<Vec<StoredSession>, StoreError> {
    let columns = SESSION_COLUMNS
        .split(", ")
        .map(|column| format!("s.{column}"))
        .collect::<Vec<_>>()
        .join(", ");
    sessions(conn.query(
        &format!(
            "SELECT {columns} FROM pending_session_index p
             JOIN sessions s ON s.user_id = p.user_id AND s.session_id = p.session_id"
        ),
        &[],
    )?)
}

pub(in crate::store) fn clear_sessions_pending_index(conn: &PgConn) -> Result<(), StoreError> {
    conn.execute("DELETE FROM pending_session_index", &[])?;
    Ok(())
}

pub(in crate::store) fn begin_user_deletion(tx: &PgConn, user_id: &str) -> Result<(), StoreError> {
    // Every Add checks for a pending deletion after taking the sequence
    // lock: one of another process either committed before this (and is
    // deleted with the rest) or sees the deletion and is refused.
    lock_sequence(tx)?;
    tx.execute(
        "INSERT INTO pending_user_deletions (user_id) VALUES ($1) ON CONFLICT DO NOTHING",
        &[&user_id],
    )?;
    bump_generations(tx, &[user_id.to_string()])
}

pub(in crate::store) fn user_deletion_pending(
    conn: &PgConn,
    user_id: &str,
) -> Result<bool, StoreError> {
    Ok(conn
        .query_opt(
            "SELECT 1 FROM pending_user_deletions WHERE user_id = $1",
            &[&user_id],
        )?
        .is_some())
}

pub(in crate::store) fn delete_user_slice(
    tx: &PgConn,
    user_id: &str,
    rows: usize,
) -> Result<Deleted, StoreError> {
    let rows = i64::try_from(rows).unwrap_or(i64::MAX);
    let messages = tx.execute(
        "DELETE FROM messages WHERE message_id IN
             (SELECT message_id FROM messages WHERE user_id = $1 LIMIT $2)",
        &[&user_id, &rows],
    )?;
    if messages > 0 {
        return Ok(Deleted {
            messages,
            ..Deleted::default()
        });
    }
    let requests = tx.execute(
        "DELETE FROM requests WHERE seq IN
             (SELECT seq FROM requests WHERE user_id = $1 LIMIT $2)",
        &[&user_id, &rows],
    )?;
    if requests > 0 {
        return Ok(Deleted {
            requests,
            ..Deleted::default()
        });
    }
    let sessions = tx.execute(
        "DELETE FROM sessions WHERE (user_id, session_id) IN
             (SELECT user_id, session_id FROM sessions WHERE user_id = $1 LIMIT $2)",
        &[&user_id, &rows],
    )?;
    if sessions == 0 {
        tx.execute(
            "DELETE FROM pending_session_index WHERE user_id = $1",
            &[&user_id],
        )?;
    }
    Ok(Deleted {
        sessions,
        ..Deleted::default()
    })
}

pub(in crate::store) fn finish_user_deletion(tx: &PgConn, user_id: &str) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM pending_user_deletions WHERE user_id = $1",
        &[&user_id],
    )?;
    bump_generations(tx, &[user_id.to_string()])
}

pub(in crate::store) fn purge_sessions_before(
    tx: &PgConn,
    cutoff_ms: i64,
) -> Result<Deleted, StoreError> {
    let select_old = || {
        pairs(tx.query(
            "SELECT user_id, session_id FROM sessions WHERE updated_at_ms < $1",
            &[&cutoff_ms],
        )?)
    };
    // Locked as an Add locks them, then read again: a session another
    // process added to meanwhile is no longer old.
    lock_sessions(tx, &select_old()?)?;
    let old = select_old()?;
    if old.is_empty() {
        return Ok(Deleted::default());
    }
    let (user_ids, session_ids): (Vec<String>, Vec<String>) = old.into_iter().unzip();
    let params: [&(dyn ToSql + Sync); 2] = [&user_ids, &session_ids];
    let delete = |table: &str| {
        tx.execute(
            &format!(
                "DELETE FROM {table} t USING UNNEST($1::TEXT[], $2::TEXT[]) AS o (user_id, session_id)
                 WHERE t.user_id = o.user_id AND t.session_id = o.session_id"
            ),
            &params,
        )
    };
    let deleted = Deleted {
        messages: delete("messages")?,
        requests: delete("requests")?,
        sessions: delete("sessions")?,
    };
    tx.execute(
        "INSERT INTO pending_session_deletions (user_id, session_id)
         SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[])
         ON CONFLICT DO NOTHING",
        &params,
    )?;
    let users: std::collections::BTreeSet<String> = user_ids.iter().cloned().collect();
    bump_generations(tx, &users.into_iter().collect::<Vec<_>>())?;
    Ok(deleted)
}

pub(in crate::store) fn pending_session_deletions(
    conn: &PgConn,
) -> Result<Vec<(String, String)>, StoreError> {
    pairs(conn.query(
        "SELECT user_id, session_id FROM pending_session_deletions",
        &[],
    )?)
}

pub(in crate::store) fn clear_session_deletions(
    conn: &PgConn,
    sessions: &[(String, String)],
) -> Result<(), StoreError> {
    for (user_id, session_id) in sessions {
        conn.execute(
            "DELETE FROM pending_session_deletions WHERE user_id = $1 AND session_id = $2",
            &[user_id, session_id],
        )?;
    }
    Ok(())
}

pub(in crate::store) fn pending_user_deletions(conn: &PgConn) -> Result<Vec<String>, StoreError> {
    conn.query("SELECT user_id FROM pending_user_deletions", &[])?
        .iter()
        .map(|row| get(row, 0))
        .collect()
}

/// Moves these users to their next deletion generation (inside the
/// caller's transaction).
fn bump_generations(tx: &PgConn, user_ids: &[String]) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO user_generations (user_id, generation)
         SELECT user_id, 1 FROM UNNEST($1::TEXT[]) AS u (user_id)
         ON CONFLICT (user_id) DO UPDATE SET generation = user_generations.generation + 1",
        &[&user_ids],
    )?;
    Ok(())
}
