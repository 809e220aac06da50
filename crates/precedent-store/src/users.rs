//! Reads by user: listings walked by cursor (a user's sessions, the users),
//! and what the store holds of one user since a sequence number.

use super::rows::{self, Db};
use super::{StoreConn, StoreError, StoredMessage, StoredSession, sql, to_i64};
use precedent_core::domain::{SessionId, UserId};

/// Where a listing goes on: after the item of this last sequence number
/// and key (a session id in a user's sessions, a user id in the users).
/// Listings are ordered by both, descending, so pages walked by cursors
/// give each item once; an item updated during the walk moves to the
/// front, behind the walk, and a new walk lists it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    /// The last sequence number of the item listed last.
    pub last_seq: i64,
    /// Its session or user id.
    pub key: String,
}

impl StoredSession {
    /// Where a listing goes on after this session.
    pub fn cursor(&self) -> ListCursor {
        ListCursor {
            last_seq: self.last_seq,
            key: self.session_id.to_string(),
        }
    }
}

impl StoredUser {
    /// Where a listing goes on after this user.
    pub fn cursor(&self) -> ListCursor {
        ListCursor {
            last_seq: self.last_seq,
            key: self.user_id.to_string(),
        }
    }
}

/// The bounds a page's SQL compares with: `(last_seq, key) < bounds`.
fn cursor_bounds(after: Option<&ListCursor>) -> (i64, String) {
    match after {
        Some(cursor) => (cursor.last_seq, cursor.key.clone()),
        None => (i64::MAX, String::new()),
    }
}

/// At most `limit` sessions of a user after `after`, most recently updated
/// first.
pub fn sessions_of_user(
    conn: &StoreConn,
    user_id: &UserId,
    after: Option<&ListCursor>,
    limit: usize,
) -> Result<Vec<StoredSession>, StoreError> {
    let (after_seq, after_key) = cursor_bounds(after);
    conn.rows(
        &sql::SESSIONS_OF_USER,
        &[&user_id.as_str(), &after_seq, &after_key, &to_i64(limit)],
        rows::session,
    )
}

/// At most `limit` users holding sessions after `after`, one line each:
/// how many, how many messages, and the last sequence number, most
/// recently active first.
pub fn users(
    conn: &StoreConn,
    after: Option<&ListCursor>,
    limit: usize,
) -> Result<Vec<StoredUser>, StoreError> {
    let (after_seq, after_key) = cursor_bounds(after);
    conn.rows(
        &sql::USERS_PAGE,
        &[&after_seq, &after_key, &to_i64(limit)],
        rows::user,
    )
}

/// How many sessions each user holds, in no order (the metrics' histogram).
pub fn sessions_per_user(conn: &StoreConn) -> Result<Vec<i64>, StoreError> {
    conn.rows(&sql::SESSIONS_PER_USER, &[], rows::integer)
}

/// What [`users`] reports of one user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredUser {
    /// Scope.
    pub user_id: UserId,
    /// Sessions stored.
    pub num_sessions: i64,
    /// Messages over those sessions.
    pub num_messages: i64,
    /// When a record of the user was last derived.
    pub updated_at_ms: i64,
    /// The sequence number of the user's last Add with a session record.
    pub last_seq: i64,
}

/// For each message of a session, in session order: the request id of the
/// Add it came with and its index within that Add.
pub fn session_message_sources(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
) -> Result<Vec<(String, usize)>, StoreError> {
    conn.rows(
        &sql::SESSION_SOURCES,
        &[&user_id.as_str(), &session_id.as_str()],
        rows::source,
    )
}

/// Evidence items over every stored session record (a figure of the scale
/// bench).
pub fn count_evidence(conn: &StoreConn) -> Result<i64, StoreError> {
    Ok(conn
        .rows(&sql::RECORDS, &[], rows::evidence_items)?
        .into_iter()
        .fold(0, i64::saturating_add))
}

/// What the store holds of one user, as a node's index compares it with
/// what it has indexed (see `service::cache`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserState {
    /// The sequence number of the user's last Add, 0 when none.
    pub last_seq: i64,
    /// The user's deletion generation: 0 until a user deletion or a
    /// retention purge of their sessions, one more with each.
    pub generation: i64,
}

/// The user's last sequence number and deletion generation: one indexed
/// lookup each.
pub fn user_state(conn: &StoreConn, user_id: &UserId) -> Result<UserState, StoreError> {
    conn.one_row(&sql::USER_STATE, &[&user_id.as_str()], rows::user_state)
}

/// The sequence numbers of the user's Adds in `(after_seq, up_to_seq]`, in
/// order.
pub fn user_seqs_between(
    conn: &StoreConn,
    user_id: &UserId,
    after_seq: i64,
    up_to_seq: i64,
) -> Result<Vec<i64>, StoreError> {
    conn.rows(
        &sql::USER_SEQS_BETWEEN,
        &[&user_id.as_str(), &after_seq, &up_to_seq],
        rows::integer,
    )
}

/// Messages of the user's Adds with a sequence number in `(after_seq,
/// up_to_seq]`, at most `limit` Adds' worth, in sequence and source order.
pub fn user_messages_between(
    conn: &StoreConn,
    user_id: &UserId,
    after_seq: i64,
    up_to_seq: i64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    conn.rows(
        &sql::USER_MESSAGES_BETWEEN,
        &[&user_id.as_str(), &after_seq, &up_to_seq, &to_i64(limit)],
        rows::message,
    )
}

/// The user's session records changed by an Add after `after_seq`.
pub fn user_sessions_changed_after(
    conn: &StoreConn,
    user_id: &UserId,
    after_seq: i64,
) -> Result<Vec<StoredSession>, StoreError> {
    conn.rows(
        &sql::USER_SESSIONS_CHANGED_AFTER,
        &[&user_id.as_str(), &after_seq],
        rows::session,
    )
}
