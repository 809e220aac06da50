//! The SQLite backend: today's embedded store (WAL, `synchronous=FULL`)
//! in `<data-dir>/precedent.sqlite3`. Migrations by `PRAGMA user_version`.
//! Here are what only SQLite does (opening, pragmas, the one writer's
//! admission, purges and space reclaimed) and how SQLite runs the
//! statements both backends share ([`Db`], [`SqlRow`]); each operation
//! answers for one of the seam in [`super`], where the contracts are
//! written.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};

use super::rows::{Db, Param, SqlRow};
use super::sql::{self, Sql};
use super::{
    Admission, DATABASE_FILE, Deleted, SCHEMA_VERSION, StoreError, codec, database_path, to_i64,
};
use precedent_core::domain::{AddRequest, SessionId, UserId};

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
    for (step, migration) in (1..).zip(&sql::MIGRATIONS) {
        if version < step {
            tx.execute_batch(migration.sqlite())?;
        }
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

/// Records an Add in the request log and stores its messages, inside the
/// caller's transaction, unless the key is already taken.
pub(super) fn admit(
    tx: &Connection,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    stored_at_ms: i64,
) -> Result<Admission, StoreError> {
    if super::deletion_pending(tx, request.user_id())? {
        return Err(StoreError::UserBeingDeleted(request.user_id().to_string()));
    }
    // A key already taken is answered by `enter_request`'s conflict.
    let seq = match super::enter_request(tx, request, body_sha256, stored_at_ms)? {
        Ok(seq) => seq,
        Err(prior) => return Ok(prior),
    };
    // One row per message, the content compressed unless short
    // (PostgreSQL inserts them in one statement of arrays, which SQLite
    // does not have, and compresses large values itself).
    let mut insert = tx.prepare_cached(
        "INSERT INTO messages (seq, user_id, session_id, message_index, role, content, timestamp_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (index, message) in request.messages().iter().enumerate() {
        insert.execute(params![
            seq,
            request.user_id().as_str(),
            request.session_id().as_str(),
            to_i64(index),
            message.role.as_str(),
            codec::pack(&message.content),
            message.timestamp_ms,
        ])?;
    }
    Ok(Admission::Inserted { seq })
}

/// Nothing to do: one process writes a SQLite store (the data
/// directory's lock file), and SQLite's write lock serialises it.
pub(super) fn lock_sessions(
    _tx: &Connection,
    _sessions: &[(&UserId, &SessionId)],
) -> Result<(), StoreError> {
    Ok(())
}

pub(super) fn begin_user_deletion(tx: &Connection, user_id: &UserId) -> Result<(), StoreError> {
    tx.run(&sql::INSERT_PENDING_USER_DELETION, &[&user_id.as_str()])?;
    bump_generation(tx, user_id)
}

pub(super) fn finish_user_deletion(tx: &Connection, user_id: &UserId) -> Result<(), StoreError> {
    tx.run(&sql::DELETE_PENDING_USER_DELETION, &[&user_id.as_str()])?;
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
/// totals removed. A session at a time: PostgreSQL deletes them all at
/// once by arrays, which SQLite does not have.
pub(super) fn purge_sessions_before(
    tx: &Connection,
    cutoff_ms: i64,
) -> Result<Deleted, StoreError> {
    let old = tx.rows(
        &sql::SESSIONS_UPDATED_BEFORE,
        &[&cutoff_ms],
        super::rows::session_key,
    )?;
    let mut deleted = Deleted::default();
    for key in &old {
        let (user_id, session_id) = (key.user_id.as_str(), key.session_id.as_str());
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
    let users: std::collections::BTreeSet<&UserId> = old.iter().map(|key| &key.user_id).collect();
    for user_id in users {
        bump_generation(tx, user_id)?;
    }
    Ok(deleted)
}

/// Moves a user to its next deletion generation (inside the caller's
/// transaction; PostgreSQL moves several users in one statement of
/// arrays).
fn bump_generation(tx: &Connection, user_id: &UserId) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO user_generations (user_id, generation) VALUES (?1, 1)
         ON CONFLICT (user_id) DO UPDATE SET generation = generation + 1",
    )?
    .execute(params![user_id.as_str()])?;
    Ok(())
}

/// The parameters as SQLite binds them.
fn bind<'a>(params: &'a [&'a dyn Param]) -> impl rusqlite::Params + 'a {
    rusqlite::params_from_iter(params.iter().map(|param| param.sqlite()))
}

impl Db for Connection {
    fn rows<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: fn(&dyn SqlRow) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let mut statement = self.prepare_cached(sql.sqlite())?;
        let mut rows = statement.query(bind(params))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(map(row)?);
        }
        Ok(out)
    }

    fn first_row<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: fn(&dyn SqlRow) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let mut statement = self.prepare_cached(sql.sqlite())?;
        let mut rows = statement.query(bind(params))?;
        match rows.next()? {
            Some(row) => Ok(Some(map(row)?)),
            None => Ok(None),
        }
    }

    fn run(&self, sql: &Sql, params: &[&dyn Param]) -> Result<usize, StoreError> {
        Ok(self.prepare_cached(sql.sqlite())?.execute(bind(params))?)
    }
}

impl SqlRow for rusqlite::Row<'_> {
    fn integer(&self, index: usize) -> Result<i64, StoreError> {
        Ok(self.get(index)?)
    }

    fn optional_integer(&self, index: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.get(index)?)
    }

    fn text(&self, index: usize) -> Result<String, StoreError> {
        Ok(self.get(index)?)
    }

    fn bytes(&self, index: usize) -> Result<Vec<u8>, StoreError> {
        Ok(self.get(index)?)
    }

    /// TEXT, or a BLOB holding a zlib stream.
    fn packed_text(&self, index: usize) -> Result<Option<String>, StoreError> {
        Ok(match self.get_ref(index)? {
            ValueRef::Text(text) => String::from_utf8(text.to_vec()).ok(),
            ValueRef::Blob(compressed) => codec::inflate(compressed),
            other => {
                return Err(rusqlite::Error::InvalidColumnType(
                    index,
                    String::new(),
                    other.data_type(),
                )
                .into());
            }
        })
    }
}
