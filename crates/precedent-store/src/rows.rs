//! How the operations both backends run alike reach either: a
//! connection runs a statement of [`super::sql`] with parameters of
//! either driver ([`Db`], [`Param`]), and a row of either driver is read
//! by one mapper per stored type ([`SqlRow`], [`session`], [`message`],
//! ...). The backends implement the traits for their own connection and
//! row types.

use super::sql::Sql;
use super::{StoreError, StoredMessage, StoredSession, StoredUser, UserState};
use precedent_core::domain::{Role, SessionId, SessionKey, UserId};

/// A statement parameter both drivers can bind.
pub(super) trait Param: Sync {
    /// As SQLite binds it.
    fn sqlite(&self) -> &dyn rusqlite::ToSql;
    /// As PostgreSQL binds it.
    fn postgres(&self) -> &(dyn ::postgres::types::ToSql + Sync);
}

impl<T: rusqlite::ToSql + ::postgres::types::ToSql + Sync> Param for T {
    fn sqlite(&self) -> &dyn rusqlite::ToSql {
        self
    }

    fn postgres(&self) -> &(dyn ::postgres::types::ToSql + Sync) {
        self
    }
}

/// A row of either backend, read by column index; a value of another
/// type is an error, never a panic.
pub(super) trait SqlRow {
    /// An integer column.
    fn integer(&self, index: usize) -> Result<i64, StoreError>;
    /// An integer column that may be NULL.
    fn optional_integer(&self, index: usize) -> Result<Option<i64>, StoreError>;
    /// A text column.
    fn text(&self, index: usize) -> Result<String, StoreError>;
    /// A byte string column.
    fn bytes(&self, index: usize) -> Result<Vec<u8>, StoreError>;
    /// A text the store may keep compressed (`store::codec`): `None` when
    /// its bytes are neither a readable zlib stream nor UTF-8.
    fn packed_text(&self, index: usize) -> Result<Option<String>, StoreError>;
}

/// A connection that runs the shared statements.
pub(super) trait Db {
    /// Every row `sql` answers, each read by `map`.
    fn rows<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: fn(&dyn SqlRow) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError>;

    /// The row `sql` answers, read by `map`; `None` when none. For
    /// statements that answer one row at most (PostgreSQL fails one that
    /// answers more).
    fn first_row<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: fn(&dyn SqlRow) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError>;

    /// Runs `sql`; answers the rows it changed.
    fn run(&self, sql: &Sql, params: &[&dyn Param]) -> Result<usize, StoreError>;

    /// The one row an aggregate answers, read by `map`.
    fn one_row<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: fn(&dyn SqlRow) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.first_row(sql, params, map)?.ok_or_else(|| {
            StoreError::Corrupt("a statement that always answers a row did not".into())
        })
    }
}

/// A stored session record. A record or diagnostics column whose bytes
/// cannot be read (damaged on disk) reads as an empty string with a
/// warning rather than failing every query that lists it: the record does
/// not decode ([`StoredSession::record`]), and its callers say what
/// becomes of it.
pub(super) fn session(row: &dyn SqlRow) -> Result<StoredSession, StoreError> {
    Ok(StoredSession {
        user_id: UserId::from_stored(row.text(0)?),
        session_id: SessionId::from_stored(row.text(1)?),
        record_json: json_or_empty(row.packed_text(2)?, "record_json"),
        diagnostics_json: json_or_empty(row.packed_text(3)?, "diagnostics_json"),
        num_messages: row.integer(4)?,
        last_seq: row.integer(5)?,
        updated_at_ms: row.integer(6)?,
        extractor_version: row.integer(7)?,
    })
}

/// A record or diagnostics column's text, empty with a warning when its
/// bytes cannot be read.
pub(super) fn json_or_empty(text: Option<String>, column: &str) -> String {
    text.unwrap_or_else(|| {
        tracing::warn!(column, "stored json cannot be read");
        String::new()
    })
}

/// A stored message with its Add's request id and time.
pub(super) fn message(row: &dyn SqlRow) -> Result<StoredMessage, StoreError> {
    let role = row.text(6)?;
    let message_index = row.integer(5)?;
    let Some(role) = Role::parse(&role) else {
        return Err(StoreError::Corrupt(format!("unknown role {role:?}")));
    };
    let Some(content) = row.packed_text(7)? else {
        return Err(StoreError::Corrupt(
            "message content that is not a readable zlib stream or UTF-8".into(),
        ));
    };
    Ok(StoredMessage {
        message_id: row.integer(0)?,
        seq: row.integer(1)?,
        user_id: UserId::from_stored(row.text(2)?),
        session_id: SessionId::from_stored(row.text(3)?),
        request_id: row.text(4)?,
        message_index: usize::try_from(message_index).unwrap_or(0),
        role,
        content,
        timestamp_ms: row.optional_integer(8)?,
        stored_at_ms: row.integer(9)?,
    })
}

/// A line of the users' listing.
pub(super) fn user(row: &dyn SqlRow) -> Result<StoredUser, StoreError> {
    Ok(StoredUser {
        user_id: UserId::from_stored(row.text(0)?),
        num_sessions: row.integer(1)?,
        num_messages: row.integer(2)?,
        updated_at_ms: row.integer(3)?,
        last_seq: row.integer(4)?,
    })
}

/// A user's last sequence number and generation.
pub(super) fn user_state(row: &dyn SqlRow) -> Result<UserState, StoreError> {
    Ok(UserState {
        last_seq: row.integer(0)?,
        generation: row.integer(1)?,
    })
}

/// A message's source: its Add's request id and its index there.
pub(super) fn source(row: &dyn SqlRow) -> Result<(String, usize), StoreError> {
    let index = row.integer(1)?;
    Ok((row.text(0)?, usize::try_from(index).unwrap_or(0)))
}

/// Two text columns, a stored `(user_id, session_id)`: a session's key.
pub(super) fn session_key(row: &dyn SqlRow) -> Result<SessionKey, StoreError> {
    Ok(SessionKey::from_stored(row.text(0)?, row.text(1)?))
}

/// The first column, a stored user id.
pub(super) fn user_id(row: &dyn SqlRow) -> Result<UserId, StoreError> {
    Ok(UserId::from_stored(row.text(0)?))
}

/// The first column, an integer.
pub(super) fn integer(row: &dyn SqlRow) -> Result<i64, StoreError> {
    row.integer(0)
}

/// Nothing of the row: that there is one.
pub(super) fn exists(_row: &dyn SqlRow) -> Result<(), StoreError> {
    Ok(())
}

/// A stored record's evidence items.
pub(super) fn evidence_items(row: &dyn SqlRow) -> Result<i64, StoreError> {
    let record_json = json_or_empty(row.packed_text(0)?, "record_json");
    Ok(super::codec::evidence_items(&record_json))
}
