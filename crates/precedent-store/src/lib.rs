//! store: the source of truth. "Here is an Add, keep it; here is a
//! sequence number, give me everything stored after it."
//!
//! The request log keys every Add by `(user_id, request_id)` with the
//! SHA-256 of its canonical body and a monotonically increasing sequence
//! number (`seq`, never reused); raw messages hang off it in source order.
//! The index is derived from these rows and catches up by `seq`.
//!
//! One seam, backends behind it: [`StoreConn`] is a connection to one of
//! them (`sqlite.rs`: the embedded default, `<data-dir>/precedent.sqlite3`;
//! `postgres/`: a PostgreSQL database that several processes can share).
//! Most operations below run the SQL both backends share (`sql.rs`: the
//! statements, column lists and migrations, written once) and read its
//! rows with one mapper per stored type (`rows.rs`); the session records
//! are in `sessions.rs`, the reads by user in `users.rs`; the rest (opening,
//! admission, locks, purges) are one `match` over the backends. Both keep
//! the same contracts, held equal by one conformance suite (`tests.rs`).
//!
//! The store is the truth: the index is derived from it and can always be
//! rebuilt from it.
//!
//! Why an enum and not a trait object: a transaction borrows its
//! connection, and each backend's transaction type has its own lifetime
//! and API, so a trait would need generic associated types or boxed
//! transactions; with two closed backends the enum keeps every operation
//! a plain function (`store::admit(&tx, ...)`, as callers wrote before the
//! seam), the backends' code free functions over their own connection
//! type, and the compiler checks that every operation covers every
//! backend.
//!
//! Architecture invariant: this module knows nothing of HTTP, tantivy or
//! ranking. It is called from blocking threads only.

mod codec;
mod pool;
mod postgres;
mod rows;
mod sessions;
mod sql;
mod sqlite;
#[cfg(test)]
mod tests;
mod users;
// The integration tests' own-server harness, shared with the conformance
// suite (which uses only part of it).
#[cfg(test)]
#[allow(dead_code)]
#[path = "../../../tests/integration/support/pg.rs"]
mod test_postgres;

use std::path::{Path, PathBuf};

use rows::{Db, Param, SqlRow};
use sql::Sql;

use precedent_core::domain::{AddRequest, Role, SessionId, SessionKey, UserId};

pub use self::pool::ReaderPool;
pub use self::sessions::{
    SessionRow, StoredSession, clear_sessions_pending_index, count_sessions_derived_before,
    mark_session_for_index, session, session_first_source, session_last_seq,
    sessions_changed_between, sessions_derived_before, sessions_missing, sessions_pending_index,
    upsert_session,
};
pub use self::users::{
    ListCursor, StoredUser, UserState, count_evidence, session_message_sources, sessions_of_user,
    sessions_per_user, user_messages_between, user_seqs_between, user_sessions_changed_after,
    user_state, users,
};

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database was written by a newer precedent.
    #[error("database schema version {found} is newer than this precedent supports ({supported})")]
    SchemaTooNew {
        /// Version found in the file.
        found: i64,
        /// Newest version this build knows.
        supported: i64,
    },
    /// A stored value does not fit the schema.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// PostgreSQL failed (a statement, or the connection while in use).
    #[error("postgres: {0}")]
    Postgres(#[from] ::postgres::Error),
    /// PostgreSQL cannot be reached or refused the connection. `url` has
    /// its password redacted.
    #[error("postgres at {url} is unavailable: {reason}")]
    PostgresUnavailable {
        /// The connection URL, password redacted.
        url: String,
        /// What the client said.
        reason: String,
    },
    /// A statement failed inside a PostgreSQL transaction, which was then
    /// rolled back instead of committed.
    #[error("postgres: the transaction was rolled back after a failed statement")]
    TransactionAborted,
    /// The user's deletion is under way: nothing of the Add was stored.
    #[error("user_id {0:?} is being deleted; retry once the deletion has finished")]
    UserBeingDeleted(String),
}

/// The file name of the database inside the data directory.
pub const DATABASE_FILE: &str = "precedent.sqlite3";

/// The file name the database had before the product's rename (it was
/// called codemem): still opened, for one release, in a data directory
/// that holds it and no [`DATABASE_FILE`].
pub const LEGACY_DATABASE_FILE: &str = "codemem.sqlite3";

/// The database file of a data directory: [`DATABASE_FILE`], or
/// [`LEGACY_DATABASE_FILE`] when only that one exists.
pub fn database_path(data_dir: &Path) -> PathBuf {
    let path = data_dir.join(DATABASE_FILE);
    let legacy = data_dir.join(LEGACY_DATABASE_FILE);
    if !path.exists() && legacy.is_file() {
        return legacy;
    }
    path
}

/// The schema version every backend migrates to.
const SCHEMA_VERSION: i64 = 8;

/// A connection to the store, whichever backend holds it. Not `Sync`: one
/// thread uses it at a time (the writer owns one; readers are pooled).
pub enum StoreConn {
    /// The embedded SQLite database of a data directory.
    Sqlite(rusqlite::Connection),
    /// A PostgreSQL database.
    Postgres(Box<postgres::PgConn>),
}

impl std::fmt::Debug for StoreConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreConn::Sqlite(_) => f.write_str("StoreConn::Sqlite"),
            StoreConn::Postgres(_) => f.write_str("StoreConn::Postgres"),
        }
    }
}

/// One operation: the same call on whichever backend `$conn` is.
macro_rules! dispatch {
    ($conn:expr, $op:ident($($arg:expr),* $(,)?)) => {
        match $conn {
            StoreConn::Sqlite(conn) => sqlite::$op(conn, $($arg),*),
            StoreConn::Postgres(conn) => postgres::$op(conn, $($arg),*),
        }
    };
}

impl Db for StoreConn {
    fn rows<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: fn(&dyn SqlRow) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        match self {
            StoreConn::Sqlite(conn) => conn.rows(sql, params, map),
            StoreConn::Postgres(conn) => conn.rows(sql, params, map),
        }
    }

    fn first_row<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: fn(&dyn SqlRow) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        match self {
            StoreConn::Sqlite(conn) => conn.first_row(sql, params, map),
            StoreConn::Postgres(conn) => conn.first_row(sql, params, map),
        }
    }

    fn run(&self, sql: &Sql, params: &[&dyn Param]) -> Result<usize, StoreError> {
        match self {
            StoreConn::Sqlite(conn) => conn.run(sql, params),
            StoreConn::Postgres(conn) => conn.run(sql, params),
        }
    }
}

/// A count or index as the store's integers hold it.
fn to_i64(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A transaction on a [`StoreConn`]: dereferences to the connection, so
/// every operation runs inside it; rolled back when dropped uncommitted.
pub struct StoreTx<'a> {
    conn: &'a StoreConn,
    inner: TxInner<'a>,
}

enum TxInner<'a> {
    Sqlite(rusqlite::Transaction<'a>),
    Postgres(postgres::PgTx<'a>),
}

impl StoreConn {
    /// Begins the writer's transaction.
    pub fn transaction(&mut self) -> Result<StoreTx<'_>, StoreError> {
        self.begin(false)
    }

    /// Begins a read-only snapshot: every read inside sees the same state
    /// of the store.
    pub fn snapshot(&self) -> Result<StoreTx<'_>, StoreError> {
        self.begin(true)
    }

    fn begin(&self, snapshot: bool) -> Result<StoreTx<'_>, StoreError> {
        let inner = match self {
            // A deferred SQLite transaction is a snapshot from its first
            // read (WAL), and the writer's is the only writing one.
            StoreConn::Sqlite(conn) => TxInner::Sqlite(conn.unchecked_transaction()?),
            StoreConn::Postgres(conn) => TxInner::Postgres(conn.begin(snapshot)?),
        };
        Ok(StoreTx { conn: self, inner })
    }
}

impl StoreTx<'_> {
    /// Makes the transaction's writes durable.
    pub fn commit(self) -> Result<(), StoreError> {
        match self.inner {
            TxInner::Sqlite(tx) => tx.commit()?,
            TxInner::Postgres(tx) => tx.commit()?,
        }
        Ok(())
    }
}

impl std::ops::Deref for StoreTx<'_> {
    type Target = StoreConn;

    fn deref(&self) -> &StoreConn {
        self.conn
    }
}

/// Where the store is: the one place a command says which backend holds
/// its data. SQLite in the data directory is the default; a PostgreSQL
/// URL (`postgres://` or `postgresql://`) names a database instead, while
/// the data directory keeps the index (a cache) and the lock file.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// `precedent.sqlite3` inside this data directory.
    Sqlite(PathBuf),
    /// A PostgreSQL database, by connection URL (it may hold a password:
    /// shown only through [`StoreLocation::describe`]).
    Postgres(String),
}

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Why a store location was not understood.
#[derive(Debug, thiserror::Error)]
#[error("unknown store {0:?}: give `sqlite` (the data directory's database) or a postgres:// URL")]
pub struct UnknownStore(pub String);

impl StoreLocation {
    /// The location a command was given: `None`, empty or `sqlite` is the
    /// data directory's SQLite database; a `postgres://` or
    /// `postgresql://` URL a PostgreSQL database.
    pub fn parse(given: Option<&str>, data_dir: &Path) -> Result<StoreLocation, UnknownStore> {
        let given = given.map(str::trim).unwrap_or_default();
        if given.is_empty() || given.eq_ignore_ascii_case("sqlite") {
            return Ok(StoreLocation::Sqlite(data_dir.to_path_buf()));
        }
        let lower = given.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            return Ok(StoreLocation::Postgres(given.to_string()));
        }
        Err(UnknownStore(postgres::redact(given)))
    }

    /// The backend's name: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self {
            StoreLocation::Sqlite(_) => "sqlite",
            StoreLocation::Postgres(_) => "postgres",
        }
    }

    /// The location for logs and errors: the SQLite file's path, or the
    /// URL with any password redacted.
    pub fn describe(&self) -> String {
        match self {
            StoreLocation::Sqlite(data_dir) => database_path(data_dir).display().to_string(),
            StoreLocation::Postgres(url) => postgres::redact(url),
        }
    }

    /// Whether a URL given on the command line carries a password (which
    /// every local user can read there).
    pub fn has_password(&self) -> bool {
        match self {
            StoreLocation::Sqlite(_) => false,
            StoreLocation::Postgres(url) => postgres::redact(url) != *url,
        }
    }

    /// Whether the store exists already (a PostgreSQL database is assumed
    /// to: connecting tells).
    pub fn exists(&self) -> bool {
        self.try_exists().unwrap_or(false)
    }

    /// Whether the store is there, or why that cannot be told (a data
    /// directory this user may not read).
    pub fn try_exists(&self) -> std::io::Result<bool> {
        match self {
            StoreLocation::Sqlite(data_dir) => database_path(data_dir).try_exists(),
            StoreLocation::Postgres(_) => Ok(true),
        }
    }

    /// Opens the writer's connection, schema created or migrated.
    pub fn open_writer(&self) -> Result<StoreConn, StoreError> {
        match self {
            StoreLocation::Sqlite(data_dir) => open_writer(data_dir),
            StoreLocation::Postgres(url) => Ok(StoreConn::Postgres(Box::new(
                postgres::PgConn::open(url, None, true)?,
            ))),
        }
    }

    /// Opens a read-only connection (one per blocking thread that reads).
    pub fn open_reader(&self) -> Result<StoreConn, StoreError> {
        match self {
            StoreLocation::Sqlite(data_dir) => open_reader(data_dir),
            StoreLocation::Postgres(url) => {
                let conn = postgres::PgConn::open(url, None, false)?;
                conn.batch("SET default_transaction_read_only = on")?;
                Ok(StoreConn::Postgres(Box::new(conn)))
            }
        }
    }
}

impl StoreConn {
    /// Whether the connection is gone (PostgreSQL closed it, or the
    /// network did): it is then dropped and a new one opened.
    pub fn is_broken(&self) -> bool {
        match self {
            StoreConn::Sqlite(_) => false,
            StoreConn::Postgres(conn) => conn.is_closed(),
        }
    }
}

impl StoreError {
    /// Whether the store could not be reached (as opposed to a statement
    /// that failed): the request may succeed once it is back.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::PostgresUnavailable { .. } => true,
            StoreError::Postgres(error) => postgres::is_connection_error(error),
            StoreError::Sqlite(_)
            | StoreError::SchemaTooNew { .. }
            | StoreError::Corrupt(_)
            | StoreError::TransactionAborted
            | StoreError::UserBeingDeleted(_) => false,
        }
    }
}

/// Opens the SQLite database of `data_dir` for the one writer: WAL,
/// `synchronous=FULL`, schema created or migrated.
pub fn open_writer(data_dir: &Path) -> Result<StoreConn, StoreError> {
    Ok(StoreConn::Sqlite(sqlite::open_writer(data_dir)?))
}

/// Opens a read-only connection to the SQLite database of `data_dir` (one
/// per blocking thread that reads).
pub fn open_reader(data_dir: &Path) -> Result<StoreConn, StoreError> {
    Ok(StoreConn::Sqlite(sqlite::open_reader(data_dir)?))
}

/// What the request log says about an Add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// New: stored under this sequence number.
    Inserted {
        /// The sequence number given to it.
        seq: i64,
    },
    /// Stored before with the same body.
    Duplicate {
        /// The sequence number it was stored under.
        seq: i64,
    },
    /// Stored before with a different body: nothing was changed.
    Conflict,
}

/// What the request log already says about an Add's key: `None` when it is
/// new.
pub fn prior_admission(
    conn: &StoreConn,
    request: &AddRequest,
    body_sha256: &[u8; 32],
) -> Result<Option<Admission>, StoreError> {
    admission_in(conn, request, body_sha256)
}

/// [`prior_admission`] on a backend's own connection (its `admit` asks
/// too).
fn admission_in(
    conn: &impl Db,
    request: &AddRequest,
    body_sha256: &[u8; 32],
) -> Result<Option<Admission>, StoreError> {
    let prior = conn.first_row(
        &sql::PRIOR_ADMISSION,
        &[&request.user_id().as_str(), &request.request_id().as_str()],
        |row| Ok((row.integer(0)?, row.bytes(1)?)),
    )?;
    Ok(prior.map(|(seq, stored_hash)| {
        if stored_hash.as_slice() == body_sha256.as_slice() {
            Admission::Duplicate { seq }
        } else {
            Admission::Conflict
        }
    }))
}

/// Bytes of message content in an Add.
pub fn content_bytes(request: &AddRequest) -> i64 {
    request
        .messages()
        .iter()
        .map(|message| message.content.len() as i64)
        .sum()
}

/// Bytes of message content a session holds (over its Adds).
pub fn session_content_bytes(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
) -> Result<i64, StoreError> {
    conn.one_row(
        &sql::SESSION_CONTENT_BYTES,
        &[&user_id.as_str(), &session_id.as_str()],
        rows::integer,
    )
}

/// Records an Add in the request log and stores its messages, inside the
/// caller's transaction, unless the key is already taken.
pub fn admit(
    tx: &StoreTx<'_>,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    stored_at_ms: i64,
) -> Result<Admission, StoreError> {
    dispatch!(tx.conn, admit(request, body_sha256, stored_at_ms))
}

/// Locks these sessions for the rest of the writer's
/// transaction, so that a session's check-then-insert (is the request
/// known, is the session within its limit, did it move on since its record
/// was derived) holds while other processes write the same database. Call
/// it first in the transaction, with every session the transaction will
/// write: the locks are taken in one order, and [`admit`] takes the
/// sequence lock only after them. A session may be named more than once,
/// in any order.
pub fn lock_sessions(
    tx: &StoreTx<'_>,
    sessions: &[(&UserId, &SessionId)],
) -> Result<(), StoreError> {
    dispatch!(tx.conn, lock_sessions(sessions))
}

/// A stored message with the ids that trace it back to its Add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Row id, stable for the life of the store.
    pub message_id: i64,
    /// Sequence number of the Add it came with.
    pub seq: i64,
    /// Scope.
    pub user_id: UserId,
    /// Trajectory.
    pub session_id: SessionId,
    /// The Add's request id.
    pub request_id: String,
    /// Index within the Add.
    pub message_index: usize,
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
    /// Message time if given.
    pub timestamp_ms: Option<i64>,
    /// When the Add was stored.
    pub stored_at_ms: i64,
}

/// Messages of Adds with `seq > after_seq`, at most `limit` Adds' worth, in
/// sequence and source order.
pub fn messages_after(
    conn: &StoreConn,
    after_seq: i64,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    conn.rows(
        &sql::MESSAGES_AFTER,
        &[&after_seq, &to_i64(limit)],
        rows::message,
    )
}

/// The messages of one Add, in source order.
pub fn messages_of_add(conn: &StoreConn, seq: i64) -> Result<Vec<StoredMessage>, StoreError> {
    conn.rows(&sql::MESSAGES_OF_ADD, &[&seq], rows::message)
}

/// The messages `first_index..end_index` of the Add `seq`, if it is
/// `user_id`'s, in source order. Filtering on the user here is
/// deliberate: an Add named by another scope's index still yields nothing.
pub fn messages_of_add_in(
    conn: &StoreConn,
    user_id: &UserId,
    seq: i64,
    first_index: usize,
    end_index: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    let first = i64::try_from(first_index).unwrap_or(i64::MAX);
    let end = i64::try_from(end_index).unwrap_or(i64::MAX);
    conn.rows(
        &sql::MESSAGES_OF_ADD_IN,
        &[&seq, &first, &end, &user_id.as_str()],
        rows::message,
    )
}

/// The highest sequence number stored, 0 when empty.
pub fn last_seq(conn: &StoreConn) -> Result<i64, StoreError> {
    conn.one_row(&sql::LAST_SEQ, &[], rows::integer)
}

/// All messages of one session of one user, in session order (by Add, then
/// by index within the Add).
pub fn session_messages(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
) -> Result<Vec<StoredMessage>, StoreError> {
    conn.rows(
        &sql::SESSION_MESSAGES,
        &[&user_id.as_str(), &session_id.as_str()],
        rows::message,
    )
}

/// At most `limit` messages of one session of one user after the message
/// `after` (its Add's `seq` and its index there), in session order: a page
/// of the session's messages.
pub fn session_messages_page(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
    after: Option<(i64, i64)>,
    limit: usize,
) -> Result<Vec<StoredMessage>, StoreError> {
    let (after_seq, after_index) = after.unwrap_or((i64::MIN, i64::MIN));
    conn.rows(
        &sql::SESSION_MESSAGES_PAGE,
        &[
            &user_id.as_str(),
            &session_id.as_str(),
            &after_seq,
            &after_index,
            &to_i64(limit),
        ],
        rows::message,
    )
}

/// What deleting a user removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Deleted {
    /// Adds (request log entries).
    pub requests: usize,
    /// Messages.
    pub messages: usize,
    /// Session records.
    pub sessions: usize,
}

impl std::ops::AddAssign for Deleted {
    fn add_assign(&mut self, other: Deleted) {
        self.requests += other.requests;
        self.messages += other.messages;
        self.sessions += other.sessions;
    }
}

/// Starts deleting a user, inside the caller's transaction: records the
/// deletion as pending (readers then see no data of the user, and Adds of
/// the user are refused with [`StoreError::UserBeingDeleted`]) and bumps
/// the user's generation. The rows go in slices ([`delete_user_slice`]),
/// then [`finish_user_deletion`].
pub fn begin_user_deletion(tx: &StoreTx<'_>, user_id: &UserId) -> Result<(), StoreError> {
    dispatch!(tx.conn, begin_user_deletion(user_id))
}

/// Whether a deletion of the user is under way (begun, not finished).
pub fn user_deletion_pending(conn: &StoreConn, user_id: &UserId) -> Result<bool, StoreError> {
    deletion_pending(conn, user_id)
}

/// Enters an Add in the request log (inside a backend's `admit`): its new
/// sequence number, or, when another process stored the same key since
/// the caller looked it up, what the log says of the key now.
fn enter_request(
    tx: &impl Db,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    stored_at_ms: i64,
) -> Result<Result<i64, Admission>, StoreError> {
    let inserted = tx.first_row(
        &sql::INSERT_REQUEST,
        &[
            &request.user_id().as_str(),
            &request.request_id().as_str(),
            &request.session_id().as_str(),
            &body_sha256.as_slice(),
            &to_i64(request.messages().len()),
            &stored_at_ms,
            &content_bytes(request),
        ],
        rows::integer,
    )?;
    match inserted {
        Some(seq) => Ok(Ok(seq)),
        None => Ok(Err(
            admission_in(tx, request, body_sha256)?.unwrap_or(Admission::Conflict)
        )),
    }
}

/// How many Adds `messages` (in seq order, as the store reads them) hold.
pub fn num_adds(messages: &[StoredMessage]) -> usize {
    messages.chunk_by(|a, b| a.seq == b.seq).count()
}

/// [`user_deletion_pending`] on a backend's own connection (its `admit`
/// asks too).
fn deletion_pending(conn: &impl Db, user_id: &UserId) -> Result<bool, StoreError> {
    Ok(conn
        .first_row(
            &sql::USER_DELETION_PENDING,
            &[&user_id.as_str()],
            rows::exists,
        )?
        .is_some())
}

/// Deletes at most `rows` rows of a user, inside the caller's transaction:
/// messages first, then Adds, then session records. Answers what it
/// removed; nothing removed means nothing is left.
pub fn delete_user_slice(
    tx: &StoreTx<'_>,
    user_id: &UserId,
    rows: usize,
) -> Result<Deleted, StoreError> {
    let rows = to_i64(rows);
    let messages = tx.run(&sql::DELETE_USER_MESSAGES, &[&user_id.as_str(), &rows])?;
    if messages > 0 {
        return Ok(Deleted {
            messages,
            ..Deleted::default()
        });
    }
    let requests = tx.run(&sql::DELETE_USER_REQUESTS, &[&user_id.as_str(), &rows])?;
    if requests > 0 {
        return Ok(Deleted {
            requests,
            ..Deleted::default()
        });
    }
    let sessions = tx.run(&sql::DELETE_USER_SESSIONS, &[&user_id.as_str(), &rows])?;
    if sessions == 0 {
        tx.run(&sql::DELETE_USER_PENDING_INDEX, &[&user_id.as_str()])?;
    }
    Ok(Deleted {
        sessions,
        ..Deleted::default()
    })
}

/// Ends a user's deletion once [`delete_user_slice`] finds nothing left:
/// the pending record goes (the index must have forgotten the user before
/// the commit) and the generation is bumped again.
pub fn finish_user_deletion(tx: &StoreTx<'_>, user_id: &UserId) -> Result<(), StoreError> {
    dispatch!(tx.conn, finish_user_deletion(user_id))
}

/// Gives at most `pages` free pages of a SQLite store back to the file
/// system (a no-op on PostgreSQL, and on SQLite stores created before
/// incremental vacuum was their default). Answers whether free pages
/// remain.
pub fn reclaim_space(conn: &StoreConn, pages: usize) -> Result<bool, StoreError> {
    match conn {
        StoreConn::Sqlite(conn) => sqlite::reclaim_space(conn, pages),
        StoreConn::Postgres(_) => Ok(false),
    }
}

/// Deletes every session whose record was last derived before
/// `cutoff_ms` (its messages, Adds and record), inside the caller's
/// transaction, and records each as pending for the index. Answers the
/// totals removed.
pub fn purge_sessions_before(tx: &StoreTx<'_>, cutoff_ms: i64) -> Result<Deleted, StoreError> {
    dispatch!(tx.conn, purge_sessions_before(cutoff_ms))
}

/// Sessions purged from the store whose index documents may remain.
pub fn pending_session_deletions(conn: &StoreConn) -> Result<Vec<SessionKey>, StoreError> {
    conn.rows(&sql::PENDING_SESSION_DELETIONS, &[], rows::session_key)
}

/// The index forgot these sessions.
pub fn clear_session_deletions(
    conn: &StoreConn,
    sessions: &[SessionKey],
) -> Result<(), StoreError> {
    for key in sessions {
        conn.run(
            &sql::CLEAR_SESSION_DELETION,
            &[&key.user_id.as_str(), &key.session_id.as_str()],
        )?;
    }
    Ok(())
}

/// Users deleted from the store whose index documents may remain.
pub fn pending_user_deletions(conn: &StoreConn) -> Result<Vec<UserId>, StoreError> {
    conn.rows(&sql::PENDING_USER_DELETIONS, &[], rows::user_id)
}
