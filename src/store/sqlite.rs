//! The SQLite backend: today's embedded store (WAL, `synchronous=FULL`)
//! in `<data-dir>/precedent.sqlite3`. Migrations by `PRAGMA user_version`.
//! Every function here answers for one operation of the seam in
//! [`super`]; the contracts are written there.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};

use super::codec;
use super::{
    Admission, DATABASE_FILE, Deleted, ListCursor, SCHEMA_VERSION, SESSIONS_MISSING_SQL,
    SESSIONS_PAGE_SQL, SESSIONS_PER_USER_SQL, StoreError, StoredMessage, StoredSession, StoredUser,
    USERS_PAGE_SQL, UserState, content_bytes, cursor_bounds, database_path,
};
use crate::domain::{AddRequest, Role};

const SCHEMA_V1: &str = "
CREATE TABLE requests (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    body_sha256  BLOB NOT NULL,
    num_messages INTEGER NOT NULL,
    stored_at_ms INTEGER NOT NULL,
    UNIQUE (user_id, request_id)
);
CREATE TABLE messages (
    message_id    INTEGER PRIMARY KEY,
    seq           INTEGER NOT NULL REFERENCES requests(seq),
    user_id       TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    message_index INTEGER NOT NULL,
    role          TEXT NOT NULL,
    content       TEXT NOT NULL,
    timestamp_ms  INTEGER,
    UNIQUE (seq, message_index)
);
CREATE INDEX messages_by_user_session ON messages (user_id, session_id);
";

/// Version 2: the session record derived from all messages of a session.
const SCHEMA_V2: &str = "
CREATE TABLE sessions (
    user_id          TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    record_json      TEXT NOT NULL,
    diagnostics_json TEXT NOT NULL,
    num_messages     INTEGER NOT NULL,
    last_seq         INTEGER NOT NULL,
    updated_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (user_id, session_id)
);
CREATE INDEX sessions_by_last_seq ON sessions (last_seq);
";

const SCHEMA_V3: &str = "
CREATE TABLE pending_user_deletions (
    user_id TEXT PRIMARY KEY NOT NULL
);
";

const SCHEMA_V4: &str = "
CREATE TABLE pending_session_deletions (
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    PRIMARY KEY (user_id, session_id)
);
CREATE INDEX requests_by_user_session ON requests (user_id, session_id);
";

/// Version 5: the extractor version of each session record (records of an
/// older extractor are re-derived in the background), the content bytes of
/// each Add (the per-session size limit sums them), and the sessions whose
/// record changed without an Add (a re-derivation) and whose index document
/// may still be the old one.
const SCHEMA_V5: &str = "
ALTER TABLE sessions ADD COLUMN extractor_version INTEGER NOT NULL DEFAULT 0;
CREATE INDEX sessions_by_extractor_version ON sessions (extractor_version);
ALTER TABLE requests ADD COLUMN content_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE requests SET content_bytes = COALESCE(
    (SELECT SUM(length(CAST(m.content AS BLOB))) FROM messages m WHERE m.seq = requests.seq), 0);
CREATE TABLE pending_session_index (
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    PRIMARY KEY (user_id, session_id)
);
";

/// Version 6: each user's deletion generation, bumped by a user deletion or
/// a retention purge of their sessions, so that an index kept elsewhere (a
/// node of a shared store) knows to drop what it holds of the user; and the
/// index by user and sequence number that finds a user's last Add at once.
const SCHEMA_V6: &str = "
CREATE TABLE user_generations (
    user_id    TEXT PRIMARY KEY NOT NULL,
    generation INTEGER NOT NULL
);
CREATE INDEX requests_by_user_seq ON requests (user_id, seq);
";

/// Version 7: session records, their diagnostics and message content are
/// written compressed (a zlib stream, stored as a BLOB in the same column;
/// see `store::codec`) unless short. The tables do not change, and values
/// of earlier versions (TEXT) read as they are; the version tells an
/// older precedent that it cannot read this store.
const SCHEMA_V7: &str = "";

/// Version 8: a user's sessions are listed in pages, most recently updated
/// first, by an index walk.
const SCHEMA_V8: &str = "
CREATE INDEX IF NOT EXISTS sessions_by_user_last_seq ON sessions (user_id, last_seq, session_id);
";

/// The size the write-ahead log is cut back to once a checkpoint has
/// copied it into the database. SQLite reuses the log from its start but
/// keeps the file at its largest size until the last connection closes:
/// one big Add (a 50 MB session) would otherwise leave that much on disk
/// for as long as the server runs. Four times the log of an automatic
/// checkpoint (1000 pages), so ordinary Adds never pay a truncation.
const WAL_SIZE_LIMIT_BYTES: i64 = 16 * 1024 * 1024;

/// Opens the database for the one writer: WAL, `synchronous=FULL`, schema
/// created or migrated.
pub(super) fn open_writer(data_dir: &Path) -> Result<Connection, StoreError> {
    let path = database_path(data_dir);
    if path.file_name() != Some(std::ffi::OsStr::new(DATABASE_FILE)) {
        tracing::info!(
            path = %path.display(),
            "opening the database under its former name (codemem.sqlite3), since {DATABASE_FILE} does not exist"
        );
    }
    let conn = Connection::open(path)?;
    // A new database gives the pages of deleted rows back to the file
    // system a slice at a time (see `reclaim_space`); it can only be chosen
    // before the first table.
    let tables: i64 = conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |row| row.get(0))?;
    if tables == 0 {
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT_BYTES)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    migrate(&conn)?;
    Ok(conn)
}

/// Opens a read-only connection (one per blocking thread that reads).
pub(super) fn open_reader(data_dir: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(database_path(data_dir))?;
    conn.pragma_update(None, "query_only", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    Ok(conn)
}

fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let tx = conn.unchecked_transaction()?;
    if version < 1 {
        tx.execute_batch(SCHEMA_V1)?;
    }
    if version < 2 {
        // Records of sessions stored before version 2 are derived by the
        // service at start-up (see `sessions_missing`).
        tx.execute_batch(SCHEMA_V2)?;
    }
    if version < 3 {
        // Users deleted from the store whose index documents may remain
        // (see `begin_user_deletion`).
        tx.execute_batch(SCHEMA_V3)?;
    }
    if version < 4 {
        // Sessions purged from the store (retention) whose index documents
        // may remain (see `purge_sessions_before`).
        tx.execute_batch(SCHEMA_V4)?;
    }
    if version < 5 {
        // Records of earlier stores carry extractor version 0: the service
        // re-derives them in the background (see `sessions_derived_before`).
        tx.execute_batch(SCHEMA_V5)?;
    }
    if version < 6 {
        // Generations start at 0 for every user (see `user_state`).
        tx.execute_batch(SCHEMA_V6)?;
    }
    if version < 7 {
        // Records stored before stay plain JSON until they are derived
        // again; messages stored before stay plain text.
        tx.execute_batch(SCHEMA_V7)?;
    }
    if version < 8 {
        tx.execute_batch(SCHEMA_V8)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

/// What the request log already says about an Add's key: `None` when it is
/// new.
pub(super) fn prior_admission(
    conn: &Connection,
    request: &AddRequest,
    body_sha256: &[u8; 32],
) -> Result<Option<Admission>, StoreError> {
    let existing: Option<(i64, Vec<u8>)> = conn
        .prepare_cached(
            "SELECT seq, body_sha256 FROM requests WHERE user_id = ?1 AND request_id = ?2",
        )?
        .query_row(params![request.user_id, request.request_id], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?;
    Ok(existing.map(|(seq, stored_hash)| {
        if stored_hash.as_slice() == body_sha256.as_slice() {
            Admission::Duplicate { seq }
        } else {
            Admission::Conflict
        }
    }))
}

/// Bytes of message content a session holds (over its Adds).
pub(super) fn session_content_bytes(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
) -> Result<i64, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT COALESCE(SUM(content_bytes), 0) FROM requests
             WHERE user_id = ?1 AND session_id = ?2",
        )?
        .query_row(params![user_id, session_id], |row| row.get(0))?)
}

/// Records an Add in the request log and stores its messages, inside the
/// caller's transaction, unless the key is already taken.
pub(super) fn admit(
    tx: &Connection,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    stored_at_ms: i64,
) -> Result<Admission, StoreError> {
    if user_deletion_pending(tx, &request.user_id)? {
        return Err(StoreError::UserBeingDeleted(request.user_id.clone()));
    }
    if let Some(prior) = prior_admission(tx, request, body_sha256)? {
        return Ok(prior);
    }
    tx.prepare_cached(
        "INSERT INTO requests (user_id, request_id, session_id, body_sha256, num_messages, stored_at_ms, content_bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        request.user_id,
        request.request_id,
        request.session_id,
        body_sha256.as_slice(),
        request.messages.len() as i64,
        stored_at_ms,
        content_bytes(request),
    ])?;
    let seq = tx.last_insert_rowid();
    let mut insert = tx.prepare_cached(
        "INSERT INTO messages (seq, user_id, session_id, message_index, role, content, timestamp_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (index, message) in request.messages.iter().enumerate() {
        insert.execute(params![
            seq,
            request.user_id,
            request.session_id,
            index as i64,
            message.role.as_str(),
            codec::pack(&message.content),
            message.timestamp_ms,
        ])?;
    }
    Ok(Admission::Inserted { seq })
}

const MESSAGE_COLUMNS: &str = "m.message_id, m.seq, m.user_id, m.session_id, r.request_id,
     m.message_index, m.role, m.content, m.timestamp_ms, r.stored_at_ms";

fn message_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<StoredMessage, String>> {
    let role: String = row.get(6)?;
    let message_index: i64 = row.get(5)?;
    let Some(role) = Role::parse(&role) else {
        return Ok(Err(format!("unknown role {role:?}")));
    };
    let Some(content) = text_column(row, 7)? else {
        return Ok(Err(
            "message content that is not a readable zlib stream or UTF-8".into(),
        ));
    };
    Ok(Ok(StoredMessage {
        message_id: row.get(0)?,
        seq: row.get(1)?,
        user_id: row.get(2)?,
        session_id: row.get(3)?,
        request_id: row.get(4)?,
        message_index: usize::try_from(message_index).unwrap_or(0),
        role,
        content,
        timestamp_ms: row.get(8)?,
        stored_at_ms: row.get(9)?,
    }))
}

/// Messages of Adds with `seq > after_seq`, at most `limit` Adds' worth, in
/// sequence and source order.
pub(super) fn messages_after(
    conn: &Connection,
    after_seq: i64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
         WHERE m.seq IN (SELECT seq FROM requests WHERE seq > ?1 ORDER BY seq LIMIT ?2)
         ORDER BY m.seq, m.message_index"
    );
    let mut statement = conn.prepare_cached(&sql)?;
    let rows = statement.query_map(params![after_seq, limit as i64], message_from_row)?;
    collect_messages(rows)
}

/// The messages of one Add, in source order.
pub(super) fn messages_of_add(
    conn: &Connection,
    seq: i64,
) -> Result<Vec<StoredMessage>, StoreError> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
         WHERE m.seq = ?1 ORDER BY m.message_index"
    );
    let mut statement = conn.prepare_cached(&sql)?;
    let rows = statement.query_map(params![seq], message_from_row)?;
    collect_messages(rows)
}

pub(super) fn messages_of_add_in(
    conn: &Connection,
    user_id: &str,
    seq: i64,
    first_index: i64,
    end_index: i64,
) -> Result<Vec<StoredMessage>, StoreError> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
         WHERE m.seq = ?1 AND m.message_index >= ?2 AND m.message_index < ?3
           AND m.user_id = ?4
         ORDER BY m.message_index"
    );
    let mut statement = conn.prepare_cached(&sql)?;
    let rows = statement.query_map(
        params![seq, first_index, end_index, user_id],
        message_from_row,
    )?;
    collect_messages(rows)
}

fn collect_messages(
    rows: impl Iterator<Item = rusqlite::Result<Result<StoredMessage, String>>>,
) -> Result<Vec<StoredMessage>, StoreError> {
    let mut out = Vec::new();
    for row in rows {
        out.push(row?.map_err(StoreError::Corrupt)?);
    }
    Ok(out)
}

/// The highest sequence number stored, 0 when empty.
pub(super) fn last_seq(conn: &Connection) -> Result<i64, StoreError> {
    Ok(
        conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM requests", [], |row| {
            row.get(0)
        })?,
    )
}

/// All messages of one session of one user, in session order (by Add, then
/// by index within the Add).
pub(super) fn session_messages(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
) -> Result<Vec<StoredMessage>, StoreError> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
         WHERE m.user_id = ?1 AND m.session_id = ?2
         ORDER BY m.seq, m.message_index"
    ))?;
    let rows = statement.query_map(params![user_id, session_id], message_from_row)?;
    collect_messages(rows)
}

/// A page of one session's messages (see [`super::session_messages_page`]).
pub(super) fn session_messages_page(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
    after_seq: i64,
    after_index: i64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq {}",
        super::SESSION_MESSAGES_PAGE_SQL
    ))?;
    let rows = statement.query_map(
        params![user_id, session_id, after_seq, after_index, to_i64(limit)],
        message_from_row,
    )?;
    collect_messages(rows)
}

const SESSION_COLUMNS: &str = "user_id, session_id, record_json, diagnostics_json, num_messages, last_seq, updated_at_ms, extractor_version";

fn session_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredSession> {
    Ok(StoredSession {
        user_id: row.get(0)?,
        session_id: row.get(1)?,
        record_json: json_column(row, 2, "record_json")?,
        diagnostics_json: json_column(row, 3, "diagnostics_json")?,
        num_messages: row.get(4)?,
        last_seq: row.get(5)?,
        updated_at_ms: row.get(6)?,
        extractor_version: row.get(7)?,
    })
}

/// A text column as the store keeps it (`store::codec`): TEXT, or a BLOB
/// holding a zlib stream; `None` when the bytes are not readable text.
fn text_column(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Option<String>> {
    Ok(match row.get_ref(index)? {
        ValueRef::Text(text) => String::from_utf8(text.to_vec()).ok(),
        ValueRef::Blob(compressed) => codec::inflate(compressed),
        other => {
            return Err(rusqlite::Error::InvalidColumnType(
                index,
                String::new(),
                other.data_type(),
            ));
        }
    })
}

/// A record or diagnostics column: unreadable bytes (damaged on disk)
/// read as an empty string with a warning, a record derived again by the
/// callers that parse it (see `codec::unpack_or_empty`).
fn json_column(row: &rusqlite::Row<'_>, index: usize, column: &str) -> rusqlite::Result<String> {
    Ok(text_column(row, index)?.unwrap_or_else(|| {
        tracing::warn!(column, "stored json cannot be read");
        String::new()
    }))
}

/// Inserts or replaces the derived record of a session.
pub(super) fn upsert_session(conn: &Connection, session: &StoredSession) -> Result<(), StoreError> {
    conn.prepare_cached(&format!(
        "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (user_id, session_id) DO UPDATE SET
             record_json = excluded.record_json,
             diagnostics_json = excluded.diagnostics_json,
             num_messages = excluded.num_messages,
             last_seq = excluded.last_seq,
             updated_at_ms = excluded.updated_at_ms,
             extractor_version = excluded.extractor_version"
    ))?
    .execute(params![
        session.user_id,
        session.session_id,
        codec::pack(&session.record_json),
        codec::pack(&session.diagnostics_json),
        session.num_messages,
        session.last_seq,
        session.updated_at_ms,
        session.extractor_version,
    ])?;
    Ok(())
}

/// The sequence number of the last Add a session's record includes, 0 when
/// the session has no record.
pub(super) fn session_last_seq(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
) -> Result<i64, StoreError> {
    Ok(conn
        .prepare_cached("SELECT last_seq FROM sessions WHERE user_id = ?1 AND session_id = ?2")?
        .query_row(params![user_id, session_id], |row| row.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Up to `limit` sessions whose record an extractor older than `version`
/// derived, as `(user_id, session_id)`, most recently changed first.
pub(super) fn sessions_derived_before(
    conn: &Connection,
    version: i64,
    limit: usize,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut statement = conn.prepare_cached(
        "SELECT user_id, session_id FROM sessions WHERE extractor_version < ?1
         ORDER BY last_seq DESC LIMIT ?2",
    )?;
    let rows = statement.query_map(params![version, limit as i64], |row| {
        Ok((row.get(0)?, row.get(1)?))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// How many session records an extractor older than `version` derived.
pub(super) fn count_sessions_derived_before(
    conn: &Connection,
    version: i64,
) -> Result<i64, StoreError> {
    Ok(conn
        .prepare_cached("SELECT COUNT(*) FROM sessions WHERE extractor_version < ?1")?
        .query_row(params![version], |row| row.get(0))?)
}

/// Records that a session's record changed without an Add, so that its
/// index document is replaced (inside the caller's transaction).
pub(super) fn mark_session_for_index(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO pending_session_index (user_id, session_id) VALUES (?1, ?2)",
    )?
    .execute(params![user_id, session_id])?;
    Ok(())
}

/// The records of the sessions marked by [`mark_session_for_index`] (those
/// deleted since are left out).
pub(super) fn sessions_pending_index(conn: &Connection) -> Result<Vec<StoredSession>, StoreError> {
    let columns = SESSION_COLUMNS
        .split(", ")
        .map(|column| format!("s.{column}"))
        .collect::<Vec<_>>()
        .join(", ");
    // CROSS JOIN keeps the (usually empty) pending table outside: without
    // statistics SQLite would rather walk every session record and look
    // each up in it, at every start-up and every re-derived group.
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {columns} FROM pending_session_index p
         CROSS JOIN sessions s ON s.user_id = p.user_id AND s.session_id = p.session_id"
    ))?;
    let rows = statement.query_map([], session_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The index holds the current documents of every pending session.
pub(super) fn clear_sessions_pending_index(conn: &Connection) -> Result<(), StoreError> {
    conn.execute("DELETE FROM pending_session_index", [])?;
    Ok(())
}

/// Sessions whose record changed with Adds in `(after_seq, up_to_seq]`.
pub(super) fn sessions_changed_between(
    conn: &Connection,
    after_seq: i64,
    up_to_seq: i64,
) -> Result<Vec<StoredSession>, StoreError> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE last_seq > ?1 AND last_seq <= ?2
         ORDER BY last_seq"
    ))?;
    let rows = statement.query_map(params![after_seq, up_to_seq], session_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Sessions that have messages but no derived record (stored before records
/// existed), as `(user_id, session_id)`.
///
/// See [`SESSIONS_MISSING_SQL`].
pub(super) fn sessions_missing(conn: &Connection) -> Result<Vec<(String, String)>, StoreError> {
    let mut statement = conn.prepare(SESSIONS_MISSING_SQL)?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// One session of a user.
pub(super) fn session(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
) -> Result<Option<StoredSession>, StoreError> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id = ?1 AND session_id = ?2"
        ))?
        .query_row(params![user_id, session_id], session_from_row)
        .optional()?)
}

/// `(request_id, index within that Add)` of a session's first message.
/// Each message of a session as its source (request id, index in it), in
/// session order.
const SESSION_SOURCES_SQL: &str = "SELECT r.request_id, m.message_index
     FROM messages m JOIN requests r ON r.seq = m.seq
     WHERE m.user_id = ?1 AND m.session_id = ?2
     ORDER BY m.seq, m.message_index";

fn source_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(String, usize)> {
    let index: i64 = row.get(1)?;
    Ok((row.get(0)?, usize::try_from(index).unwrap_or(0)))
}

pub(super) fn session_first_source(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
) -> Result<Option<(String, usize)>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{SESSION_SOURCES_SQL} LIMIT 1"))?
        .query_row(params![user_id, session_id], source_from_row)
        .optional()?)
}

/// Deletes everything of a user from the store, inside the caller's
/// transaction, and records that the index still has to forget them.
/// Nothing to do: one process writes a SQLite store (the data
/// directory's lock file), and SQLite's write lock serialises it.
pub(super) fn lock_sessions(
    _tx: &Connection,
    _sessions: &[(String, String)],
) -> Result<(), StoreError> {
    Ok(())
}

pub(super) fn begin_user_deletion(tx: &Connection, user_id: &str) -> Result<(), StoreError> {
    tx.execute(
        "INSERT OR IGNORE INTO pending_user_deletions (user_id) VALUES (?1)",
        params![user_id],
    )?;
    bump_generation(tx, user_id)
}

pub(super) fn user_deletion_pending(conn: &Connection, user_id: &str) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM pending_user_deletions WHERE user_id = ?1")?
        .query_row(params![user_id], |_| Ok(()))
        .optional()?
        .is_some())
}

pub(super) fn delete_user_slice(
    tx: &Connection,
    user_id: &str,
    rows: usize,
) -> Result<Deleted, StoreError> {
    let rows = to_i64(rows);
    let messages = tx
        .prepare_cached(
            "DELETE FROM messages WHERE message_id IN
                 (SELECT message_id FROM messages WHERE user_id = ?1 LIMIT ?2)",
        )?
        .execute(params![user_id, rows])?;
    if messages > 0 {
        return Ok(Deleted {
            messages,
            ..Deleted::default()
        });
    }
    let requests = tx
        .prepare_cached(
            "DELETE FROM requests WHERE seq IN
                 (SELECT seq FROM requests WHERE user_id = ?1 LIMIT ?2)",
        )?
        .execute(params![user_id, rows])?;
    if requests > 0 {
        return Ok(Deleted {
            requests,
            ..Deleted::default()
        });
    }
    let sessions = tx
        .prepare_cached(
            "DELETE FROM sessions WHERE rowid IN
                 (SELECT rowid FROM sessions WHERE user_id = ?1 LIMIT ?2)",
        )?
        .execute(params![user_id, rows])?;
    if sessions == 0 {
        tx.prepare_cached("DELETE FROM pending_session_index WHERE user_id = ?1")?
            .execute(params![user_id])?;
    }
    Ok(Deleted {
        sessions,
        ..Deleted::default()
    })
}

pub(super) fn finish_user_deletion(tx: &Connection, user_id: &str) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM pending_user_deletions WHERE user_id = ?1",
        params![user_id],
    )?;
    bump_generation(tx, user_id)
}

pub(super) fn reclaim_space(conn: &Connection, pages: usize) -> Result<bool, StoreError> {
    let auto_vacuum: i64 = conn.pragma_query_value(None, "auto_vacuum", |row| row.get(0))?;
    // 2: INCREMENTAL. Stores created before it was the default reuse their
    // free pages instead.
    if auto_vacuum != 2 {
        return Ok(false);
    }
    let free: i64 = conn.pragma_query_value(None, "freelist_count", |row| row.get(0))?;
    if free == 0 {
        return Ok(false);
    }
    conn.execute_batch(&format!("PRAGMA incremental_vacuum({pages})"))?;
    let free: i64 = conn.pragma_query_value(None, "freelist_count", |row| row.get(0))?;
    // The vacuum's pages are in the write-ahead log; the file shrinks only
    // when a checkpoint copies the whole log back. One after each slice
    // (the file shrinks as the slices go), and at the end one that also
    // empties the log.
    let mode = if free == 0 { "TRUNCATE" } else { "PASSIVE" };
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(()))?;
    Ok(free > 0)
}

/// Deletes every session whose record was last derived before
/// `cutoff_ms` (its messages, Adds and record), inside the caller's
/// transaction, and records each as pending for the index. Answers the
/// totals removed.
pub(super) fn purge_sessions_before(
    tx: &Connection,
    cutoff_ms: i64,
) -> Result<Deleted, StoreError> {
    let old: Vec<(String, String)> = {
        let mut statement =
            tx.prepare_cached("SELECT user_id, session_id FROM sessions WHERE updated_at_ms < ?1")?;
        let rows = statement.query_map(params![cutoff_ms], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut deleted = Deleted::default();
    for (user_id, session_id) in &old {
        deleted.messages += tx.execute(
            "DELETE FROM messages WHERE user_id = ?1 AND session_id = ?2",
            params![user_id, session_id],
        )?;
        deleted.requests += tx.execute(
            "DELETE FROM requests WHERE user_id = ?1 AND session_id = ?2",
            params![user_id, session_id],
        )?;
        deleted.sessions += tx.execute(
            "DELETE FROM sessions WHERE user_id = ?1 AND session_id = ?2",
            params![user_id, session_id],
        )?;
        tx.execute(
            "INSERT OR IGNORE INTO pending_session_deletions (user_id, session_id) VALUES (?1, ?2)",
            params![user_id, session_id],
        )?;
    }
    let users: std::collections::BTreeSet<&String> =
        old.iter().map(|(user_id, _)| user_id).collect();
    for user_id in users {
        bump_generation(tx, user_id)?;
    }
    Ok(deleted)
}

/// Sessions purged from the store whose index documents may remain.
pub(super) fn pending_session_deletions(
    conn: &Connection,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut statement =
        conn.prepare_cached("SELECT user_id, session_id FROM pending_session_deletions")?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The index forgot these sessions.
pub(super) fn clear_session_deletions(
    conn: &Connection,
    sessions: &[(String, String)],
) -> Result<(), StoreError> {
    for (user_id, session_id) in sessions {
        conn.execute(
            "DELETE FROM pending_session_deletions WHERE user_id = ?1 AND session_id = ?2",
            params![user_id, session_id],
        )?;
    }
    Ok(())
}

/// Users deleted from the store whose index documents may remain.
pub(super) fn pending_user_deletions(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut statement = conn.prepare_cached("SELECT user_id FROM pending_user_deletions")?;
    let rows = statement.query_map([], |row| row.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A page of a user's sessions, most recently updated first, after
/// `after` (see [`ListCursor`]).
pub(super) fn sessions_of_user(
    conn: &Connection,
    user_id: &str,
    after: Option<&ListCursor>,
    limit: usize,
) -> Result<Vec<StoredSession>, StoreError> {
    let (after_seq, after_key) = cursor_bounds(after);
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions {SESSIONS_PAGE_SQL}"
    ))?;
    let rows = statement.query_map(
        params![user_id, after_seq, after_key, to_i64(limit)],
        session_from_row,
    )?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A page of the users holding sessions, most recently active first.
pub(super) fn users(
    conn: &Connection,
    after: Option<&ListCursor>,
    limit: usize,
) -> Result<Vec<StoredUser>, StoreError> {
    let (after_seq, after_key) = cursor_bounds(after);
    let mut statement = conn.prepare_cached(USERS_PAGE_SQL)?;
    let rows = statement.query_map(params![after_seq, after_key, to_i64(limit)], |row| {
        Ok(StoredUser {
            user_id: row.get(0)?,
            num_sessions: row.get(1)?,
            num_messages: row.get(2)?,
            updated_at_ms: row.get(3)?,
            last_seq: row.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// How many sessions each user holds.
pub(super) fn sessions_per_user(conn: &Connection) -> Result<Vec<i64>, StoreError> {
    let mut statement = conn.prepare_cached(SESSIONS_PER_USER_SQL)?;
    let rows = statement.query_map([], |row| row.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn to_i64(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// For each message of a session, in session order: the request id of the
/// Add it came with and its index within that Add.
pub(super) fn session_message_sources(
    conn: &Connection,
    user_id: &str,
    session_id: &str,
) -> Result<Vec<(String, usize)>, StoreError> {
    let mut statement = conn.prepare_cached(SESSION_SOURCES_SQL)?;
    let rows = statement.query_map(params![user_id, session_id], source_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Evidence items over every stored session record (read here rather
/// than by SQL's JSON functions: records are stored compressed).
pub(super) fn count_evidence(conn: &Connection) -> Result<i64, StoreError> {
    let mut statement = conn.prepare("SELECT record_json FROM sessions")?;
    let mut rows = statement.query([])?;
    let mut total: i64 = 0;
    while let Some(row) = rows.next()? {
        let record_json = json_column(row, 0, "record_json")?;
        total = total.saturating_add(codec::evidence_items(&record_json));
    }
    Ok(total)
}

/// Moves a user to its next deletion generation (inside the caller's
/// transaction).
fn bump_generation(tx: &Connection, user_id: &str) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO user_generations (user_id, generation) VALUES (?1, 1)
         ON CONFLICT (user_id) DO UPDATE SET generation = generation + 1",
    )?
    .execute(params![user_id])?;
    Ok(())
}

pub(super) fn user_state(conn: &Connection, user_id: &str) -> Result<UserState, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT COALESCE((SELECT MAX(seq) FROM requests WHERE user_id = ?1), 0),
                    COALESCE((SELECT generation FROM user_generations WHERE user_id = ?1), 0)",
        )?
        .query_row(params![user_id], |row| {
            Ok(UserState {
                last_seq: row.get(0)?,
                generation: row.get(1)?,
            })
        })?)
}

pub(super) fn user_seqs_between(
    conn: &Connection,
    user_id: &str,
    after_seq: i64,
    up_to_seq: i64,
) -> Result<Vec<i64>, StoreError> {
    let mut statement = conn.prepare_cached(
        "SELECT seq FROM requests WHERE user_id = ?1 AND seq > ?2 AND seq <= ?3 ORDER BY seq",
    )?;
    let rows = statement.query_map(params![user_id, after_seq, up_to_seq], |row| row.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn user_messages_between(
    conn: &Connection,
    user_id: &str,
    after_seq: i64,
    up_to_seq: i64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
         WHERE m.seq IN (SELECT seq FROM requests WHERE user_id = ?1 AND seq > ?2 AND seq <= ?3
                         ORDER BY seq LIMIT ?4)
         ORDER BY m.seq, m.message_index"
    ))?;
    let rows = statement.query_map(
        params![
            user_id,
            after_seq,
            up_to_seq,
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
        message_from_row,
    )?;
    collect_messages(rows)
}

pub(super) fn user_sessions_changed_after(
    conn: &Connection,
    user_id: &str,
    after_seq: i64,
) -> Result<Vec<StoredSession>, StoreError> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id = ?1 AND last_seq > ?2
         ORDER BY last_seq"
    ))?;
    let rows = statement.query_map(params![user_id, after_seq], session_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}
