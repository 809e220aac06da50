//! The PostgreSQL read queries: messages after a sequence number, by id
//! or by session, the derived sessions and users, and the rows they are
//! made from. Each function answers for one operation of the seam in
//! [`crate::store`]; the contracts are written there.

use postgres::Row;

use super::{PgConn, get, to_i64};
use crate::domain::Role;
use crate::store::{
    ListCursor, SESSIONS_MISSING_SQL, SESSIONS_PAGE_SQL, SESSIONS_PER_USER_SQL, StoreError,
    StoredMessage, StoredSession, StoredUser, USERS_PAGE_SQL, UserState, codec, cursor_bounds,
};

const MESSAGE_COLUMNS: &str = "m.message_id, m.seq, m.user_id, m.session_id, r.request_id,
     m.message_index, m.role, m.content, m.timestamp_ms, r.stored_at_ms";

fn message_from_row(row: &Row) -> Result<StoredMessage, StoreError> {
    let role: String = get(row, 6)?;
    let message_index: i64 = get(row, 5)?;
    let Some(role) = Role::parse(&role) else {
        return Err(StoreError::Corrupt(format!("unknown role {role:?}")));
    };
    Ok(StoredMessage {
        message_id: get(row, 0)?,
        seq: get(row, 1)?,
        user_id: get(row, 2)?,
        session_id: get(row, 3)?,
        request_id: get(row, 4)?,
        message_index: usize::try_from(message_index).unwrap_or(0),
        role,
        content: get(row, 7)?,
        timestamp_ms: get(row, 8)?,
        stored_at_ms: get(row, 9)?,
    })
}

fn messages(rows: Vec<Row>) -> Result<Vec<StoredMessage>, StoreError> {
    rows.iter().map(message_from_row).collect()
}

pub(in crate::store) fn messages_after(
    conn: &PgConn,
    after_seq: i64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    messages(conn.query(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
             WHERE m.seq IN (SELECT seq FROM requests WHERE seq > $1 ORDER BY seq LIMIT $2)
             ORDER BY m.seq, m.message_index"
        ),
        &[&after_seq, &to_i64(limit)],
    )?)
}

pub(in crate::store) fn messages_of_add(
    conn: &PgConn,
    seq: i64,
) -> Result<Vec<StoredMessage>, StoreError> {
    messages(conn.query(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
             WHERE m.seq = $1 ORDER BY m.message_index"
        ),
        &[&seq],
    )?)
}

pub(in crate::store) fn messages_of_add_in(
    conn: &PgConn,
    user_id: &str,
    seq: i64,
    first_index: i64,
    end_index: i64,
) -> Result<Vec<StoredMessage>, StoreError> {
    messages(conn.query(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
             WHERE m.seq = $1 AND m.message_index >= $2 AND m.message_index < $3
               AND m.user_id = $4
             ORDER BY m.message_index"
        ),
        &[&seq, &first_index, &end_index, &user_id],
    )?)
}

pub(in crate::store) fn last_seq(conn: &PgConn) -> Result<i64, StoreError> {
    get(
        &conn.query_one("SELECT COALESCE(MAX(seq), 0)::BIGINT FROM requests", &[])?,
        0,
    )
}

pub(in crate::store) fn session_messages(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<Vec<StoredMessage>, StoreError> {
    messages(conn.query(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
             WHERE m.user_id = $1 AND m.session_id = $2
             ORDER BY m.seq, m.message_index"
        ),
        &[&user_id, &session_id],
    )?)
}

pub(in crate::store) fn session_messages_page(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
    after_seq: i64,
    after_index: i64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    messages(conn.query(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq {}",
            crate::store::SESSION_MESSAGES_PAGE_SQL
        ),
        &[
            &user_id,
            &session_id,
            &after_seq,
            &after_index,
            &to_i64(limit),
        ],
    )?)
}

pub(super) const SESSION_COLUMNS: &str = "user_id, session_id, record_json, diagnostics_json, num_messages, last_seq, updated_at_ms, extractor_version";

fn session_from_row(row: &Row) -> Result<StoredSession, StoreError> {
    Ok(StoredSession {
        user_id: get(row, 0)?,
        session_id: get(row, 1)?,
        record_json: codec::unpack_or_empty(get(row, 2)?, "record_json"),
        diagnostics_json: codec::unpack_or_empty(get(row, 3)?, "diagnostics_json"),
        num_messages: get(row, 4)?,
        last_seq: get(row, 5)?,
        updated_at_ms: get(row, 6)?,
        extractor_version: get(row, 7)?,
    })
}

pub(super) fn sessions(rows: Vec<Row>) -> Result<Vec<StoredSession>, StoreError> {
    rows.iter().map(session_from_row).collect()
}

pub(super) fn pairs(rows: Vec<Row>) -> Result<Vec<(String, String)>, StoreError> {
    rows.iter()
        .map(|row| Ok((get(row, 0)?, get(row, 1)?)))
        .collect()
}

pub(in crate::store) fn session_last_seq(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<i64, StoreError> {
    match conn.query_opt(
        "SELECT last_seq FROM sessions WHERE user_id = $1 AND session_id = $2",
        &[&user_id, &session_id],
    )? {
        Some(row) => get(&row, 0),
        None => Ok(0),
    }
}

pub(in crate::store) fn sessions_derived_before(
    conn: &PgConn,
    version: i64,
    limit: usize,
) -> Result<Vec<(String, String)>, StoreError> {
    pairs(conn.query(
        "SELECT user_id, session_id FROM sessions WHERE extractor_version < $1
         ORDER BY last_seq DESC LIMIT $2",
        &[&version, &to_i64(limit)],
    )?)
}

pub(in crate::store) fn count_sessions_derived_before(
    conn: &PgConn,
    version: i64,
) -> Result<i64, StoreError> {
    get(
        &conn.query_one(
            "SELECT COUNT(*) FROM sessions WHERE extractor_version < $1",
            &[&version],
        )?,
        0,
    )
}

pub(in crate::store) fn sessions_changed_between(
    conn: &PgConn,
    after_seq: i64,
    up_to_seq: i64,
) -> Result<Vec<StoredSession>, StoreError> {
    sessions(conn.query(
        &format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE last_seq > $1 AND last_seq <= $2
             ORDER BY last_seq"
        ),
        &[&after_seq, &up_to_seq],
    )?)
}

pub(in crate::store) fn sessions_missing(
    conn: &PgConn,
) -> Result<Vec<(String, String)>, StoreError> {
    pairs(conn.query(SESSIONS_MISSING_SQL, &[])?)
}

pub(in crate::store) fn session(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<Option<StoredSession>, StoreError> {
    conn.query_opt(
        &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id = $1 AND session_id = $2"),
        &[&user_id, &session_id],
    )?
    .as_ref()
    .map(session_from_row)
    .transpose()
}

/// Each message of a session as its source (request id, index in it), in
/// session order.
const SESSION_SOURCES_SQL: &str = "SELECT r.request_id, m.message_index
     FROM messages m JOIN requests r ON r.seq = m.seq
     WHERE m.user_id = $1 AND m.session_id = $2
     ORDER BY m.seq, m.message_index";

fn source_from_row(row: &Row) -> Result<(String, usize), StoreError> {
    let index: i64 = get(row, 1)?;
    Ok((get(row, 0)?, usize::try_from(index).unwrap_or(0)))
}

pub(in crate::store) fn session_first_source(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<Option<(String, usize)>, StoreError> {
    conn.query_opt(
        &format!("{SESSION_SOURCES_SQL} LIMIT 1"),
        &[&user_id, &session_id],
    )?
    .as_ref()
    .map(source_from_row)
    .transpose()
}

pub(in crate::store) fn sessions_of_user(
    conn: &PgConn,
    user_id: &str,
    after: Option<&ListCursor>,
    limit: usize,
) -> Result<Vec<StoredSession>, StoreError> {
    let (after_seq, after_key) = cursor_bounds(after);
    sessions(conn.query(
        &format!("SELECT {SESSION_COLUMNS} FROM sessions {SESSIONS_PAGE_SQL}"),
        &[&user_id, &after_seq, &after_key, &to_i64(limit)],
    )?)
}

pub(in crate::store) fn users(
    conn: &PgConn,
    after: Option<&ListCursor>,
    limit: usize,
) -> Result<Vec<StoredUser>, StoreError> {
    let (after_seq, after_key) = cursor_bounds(after);
    conn.query(USERS_PAGE_SQL, &[&after_seq, &after_key, &to_i64(limit)])?
        .iter()
        .map(|row| {
            Ok(StoredUser {
                user_id: get(row, 0)?,
                num_sessions: get(row, 1)?,
                num_messages: get(row, 2)?,
                updated_at_ms: get(row, 3)?,
                last_seq: get(row, 4)?,
            })
        })
        .collect()
}

pub(in crate::store) fn sessions_per_user(conn: &PgConn) -> Result<Vec<i64>, StoreError> {
    conn.query(SESSIONS_PER_USER_SQL, &[])?
        .iter()
        .map(|row| get(row, 0))
        .collect()
}

pub(in crate::store) fn session_message_sources(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<Vec<(String, usize)>, StoreError> {
    conn.query(SESSION_SOURCES_SQL, &[&user_id, &session_id])?
        .iter()
        .map(source_from_row)
        .collect()
}

/// Read here rather than by SQL's JSON functions: records are stored
/// compressed.
pub(in crate::store) fn count_evidence(conn: &PgConn) -> Result<i64, StoreError> {
    let mut total: i64 = 0;
    for row in conn.query("SELECT record_json FROM sessions", &[])? {
        let record_json = codec::unpack_or_empty(get(&row, 0)?, "record_json");
        total = total.saturating_add(codec::evidence_items(&record_json));
    }
    Ok(total)
}

pub(in crate::store) fn user_state(conn: &PgConn, user_id: &str) -> Result<UserState, StoreError> {
    let row = conn.query_one(
        "SELECT COALESCE((SELECT MAX(seq) FROM requests WHERE user_id = $1), 0)::BIGINT,
                COALESCE((SELECT generation FROM user_generations WHERE user_id = $1), 0)::BIGINT",
        &[&user_id],
    )?;
    Ok(UserState {
        last_seq: get(&row, 0)?,
        generation: get(&row, 1)?,
    })
}

pub(in crate::store) fn user_seqs_between(
    conn: &PgConn,
    user_id: &str,
    after_seq: i64,
    up_to_seq: i64,
) -> Result<Vec<i64>, StoreError> {
    conn.query(
        "SELECT seq FROM requests WHERE user_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq",
        &[&user_id, &after_seq, &up_to_seq],
    )?
    .iter()
    .map(|row| get(row, 0))
    .collect()
}

pub(in crate::store) fn user_messages_between(
    conn: &PgConn,
    user_id: &str,
    after_seq: i64,
    up_to_seq: i64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    messages(conn.query(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
             WHERE m.seq IN (SELECT seq FROM requests WHERE user_id = $1 AND seq > $2
                             AND seq <= $3 ORDER BY seq LIMIT $4)
             ORDER BY m.seq, m.message_index"
        ),
        &[&user_id, &after_seq, &up_to_seq, &to_i64(limit)],
    )?)
}

pub(in crate::store) fn user_sessions_changed_after(
    conn: &PgConn,
    user_id: &str,
    after_seq: i64,
) -> Result<Vec<StoredSession>, StoreError> {
    sessions(conn.query(
        &format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id = $1 AND last_seq > $2
             ORDER BY last_seq"
        ),
        &[&user_id, &after_seq],
    )?)
}
