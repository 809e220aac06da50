//! What only the PostgreSQL writer does: admission of an Add under the
//! sequence and session locks that let several processes write one
//! database (with its messages inserted in one statement of arrays), and
//! user deletions and purges under the same locks (sessions deleted and
//! generations bumped by arrays, one round trip each). Each function
//! answers for one operation of the seam in [`crate`]; the
//! contracts are written there.

use postgres::types::ToSql;

use super::PgConn;
use crate::rows::{self, Db};
use crate::{Admission, Deleted, StoreError, sql, to_i64};
use precedent_core::domain::{AddRequest, SessionId, UserId};

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
pub(crate) fn lock_sessions(
    tx: &PgConn,
    sessions: &[(&UserId, &SessionId)],
) -> Result<(), StoreError> {
    if sessions.is_empty() {
        return Ok(());
    }
    let (user_ids, session_ids): (Vec<&str>, Vec<&str>) = sessions
        .iter()
        .map(|(user_id, session_id)| (user_id.as_str(), session_id.as_str()))
        .unzip();
    // The subquery is de-duplicated, sorted and fenced (OFFSET 0), so the
    // locks are taken once each, in key order, whatever the caller's.
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

pub(crate) fn admit(
    tx: &PgConn,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    stored_at_ms: i64,
) -> Result<Admission, StoreError> {
    if let Some(prior) = crate::admission_in(tx, request, body_sha256)? {
        return Ok(prior);
    }
    lock_sequence(tx)?;
    if crate::deletion_pending(tx, request.user_id())? {
        return Err(StoreError::UserBeingDeleted(request.user_id().to_string()));
    }
    let seq = match crate::enter_request(tx, request, body_sha256, stored_at_ms)? {
        Ok(seq) => seq,
        Err(prior) => return Ok(prior),
    };
    let indexes: Vec<i64> = (0..request.messages().len()).map(to_i64).collect();
    let roles: Vec<&str> = request
        .messages()
        .iter()
        .map(|message| message.role.as_str())
        .collect();
    let contents: Vec<&str> = request
        .messages()
        .iter()
        .map(|message| message.content.as_str())
        .collect();
    let timestamps: Vec<Option<i64>> = request
        .messages()
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
            &request.user_id().as_str(),
            &request.session_id().as_str(),
            &indexes,
            &roles,
            &contents,
            &timestamps,
        ],
    )?;
    Ok(Admission::Inserted { seq })
}

pub(crate) fn begin_user_deletion(tx: &PgConn, user_id: &UserId) -> Result<(), StoreError> {
    // Every Add checks for a pending deletion after taking the sequence
    // lock: one of another process either committed before this (and is
    // deleted with the rest) or sees the deletion and is refused.
    lock_sequence(tx)?;
    tx.run(&sql::INSERT_PENDING_USER_DELETION, &[&user_id.as_str()])?;
    bump_generations(tx, &[user_id.to_string()])
}

pub(crate) fn finish_user_deletion(tx: &PgConn, user_id: &UserId) -> Result<(), StoreError> {
    tx.run(&sql::DELETE_PENDING_USER_DELETION, &[&user_id.as_str()])?;
    bump_generations(tx, &[user_id.to_string()])
}

pub(crate) fn purge_sessions_before(tx: &PgConn, cutoff_ms: i64) -> Result<Deleted, StoreError> {
    let select_old = || {
        tx.rows(
            &sql::SESSIONS_UPDATED_BEFORE,
            &[&cutoff_ms],
            rows::session_key,
        )
    };
    // Locked as an Add locks them, then read again: a session another
    // process added to meanwhile is no longer old.
    let held = select_old()?;
    lock_sessions(
        tx,
        &held
            .iter()
            .map(|key| (&key.user_id, &key.session_id))
            .collect::<Vec<_>>(),
    )?;
    let old = select_old()?;
    if old.is_empty() {
        return Ok(Deleted::default());
    }
    let (user_ids, session_ids): (Vec<String>, Vec<String>) = old
        .into_iter()
        .map(|key| (key.user_id.to_string(), key.session_id.to_string()))
        .unzip();
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
