//! The PostgreSQL backend: the same tables and contracts as `sqlite.rs`
//! in a database that operators replicate and several codemem processes
//! can share. `BIGINT GENERATED ALWAYS AS IDENTITY` gives the sequence
//! numbers (a sequence never hands a number out twice, whether its
//! transaction committed or not), `BYTEA` holds the body hashes, and
//! migrations are recorded in a `schema_version` table, run under an
//! advisory lock so that processes starting together migrate once.
//!
//! The client is the synchronous `postgres` crate: the store is called
//! from the writer thread and from blocking-pool threads only, as SQLite
//! is, so an async client would need a runtime handle at every call for
//! nothing. It runs its own small runtime inside.
//!
//! Every function here answers for one operation of the seam in
//! [`super`]; the contracts are written there.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement};

use super::{
    Admission, Deleted, SCHEMA_VERSION, StoreError, StoredMessage, StoredSession, StoredUser,
    UserState, content_bytes,
};
use crate::domain::{AddRequest, Role};

/// A connection to PostgreSQL with its prepared statements. Operations
/// take `&self` like SQLite's (the client is borrowed for one statement at
/// a time); a transaction is `BEGIN` ... `COMMIT` on the same session.
pub struct PgConn {
    /// `None` only while the connection is dropped (see its `Drop`).
    client: RefCell<Option<Client>>,
    /// The URL, password redacted, for errors.
    url: String,
    statements: RefCell<HashMap<String, Statement>>,
    /// Inside `BEGIN`: whether a statement failed since (PostgreSQL then
    /// rolls back on `COMMIT` without an error, so the commit must know).
    in_transaction: Cell<bool>,
    transaction_failed: Cell<bool>,
    /// The transaction holds the sequence lock (see [`lock_sequence`]).
    sequence_locked: Cell<bool>,
}

/// `url` with any password replaced by `***`, for errors and logs: the
/// `user:password@` of a URL, a `password=` query parameter or key-value
/// pair.
pub fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |end| rest_start + end);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo_end = rest_start + at;
            if let Some(colon) = out[rest_start..userinfo_end].find(':') {
                out.replace_range(rest_start + colon + 1..userinfo_end, "***");
            }
        }
    }
    let mut redacted = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(found) = rest.find("password=") {
        let value_start = found + "password=".len();
        redacted.push_str(&rest[..value_start]);
        redacted.push_str("***");
        let value = &rest[value_start..];
        let value_len = if let Some(quoted) = value.strip_prefix('\'') {
            quoted.find('\'').map_or(value.len(), |end| end + 2)
        } else {
            value
                .find(|c: char| c == '&' || c.is_whitespace())
                .unwrap_or(value.len())
        };
        rest = &value[value_len..];
    }
    redacted.push_str(rest);
    redacted
}

/// How long a connection attempt waits unless the URL says
/// (`connect_timeout`).
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether an error means the connection is gone or the server cannot
/// serve now (shutting down, starting, a connection exception), rather
/// than a statement that failed.
pub fn is_connection_error(error: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    if error.is_closed() {
        return true;
    }
    if let Some(code) = error.code() {
        return code.code().starts_with("08")
            || [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(code);
    }
    // No SQLSTATE: the socket failed (an IO error), or the connection
    // could not be made.
    std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
}

impl PgConn {
    /// Whether the connection is closed (the server or the network ended
    /// it).
    pub fn is_closed(&self) -> bool {
        self.client.borrow().as_ref().is_none_or(Client::is_closed)
    }

    /// Connects to `url` (a `postgres://` URL or a key-value connection
    /// string), optionally into `schema` (created when missing), and
    /// migrates the schema when `migrate` is set.
    pub fn open(url: &str, schema: Option<&str>, migrate: bool) -> Result<PgConn, StoreError> {
        let unavailable = |error: postgres::Error| StoreError::PostgresUnavailable {
            url: redact(url),
            reason: error.to_string(),
        };
        let mut config: postgres::Config = url.parse().map_err(unavailable)?;
        if config.get_connect_timeout().is_none() {
            // An unreachable host fails an Add or a health check in
            // seconds, not after the operating system's TCP timeout.
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let client = config.connect(NoTls).map_err(unavailable)?;
        let conn = PgConn {
            client: RefCell::new(Some(client)),
            url: redact(url),
            statements: RefCell::new(HashMap::new()),
            in_transaction: Cell::new(false),
            transaction_failed: Cell::new(false),
            sequence_locked: Cell::new(false),
        };
        if let Some(schema) = schema {
            let quoted = quote_identifier(schema);
            conn.batch(&format!(
                "CREATE SCHEMA IF NOT EXISTS {quoted}; SET search_path TO {quoted}"
            ))?;
        }
        if migrate {
            conn.migrate()?;
        }
        Ok(conn)
    }

    /// The client, borrowed for one statement.
    fn client(&self) -> Result<std::cell::RefMut<'_, Client>, StoreError> {
        std::cell::RefMut::filter_map(self.client.borrow_mut(), Option::as_mut).map_err(|_| {
            StoreError::PostgresUnavailable {
                url: self.url.clone(),
                reason: "the connection is closed".to_string(),
            }
        })
    }

    fn note<T>(&self, result: Result<T, postgres::Error>) -> Result<T, StoreError> {
        if result.is_err() && self.in_transaction.get() {
            self.transaction_failed.set(true);
        }
        Ok(result?)
    }

    pub(super) fn batch(&self, sql: &str) -> Result<(), StoreError> {
        let result = self.client()?.batch_execute(sql);
        self.note(result)
    }

    fn prepared(&self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let result = self.client()?.prepare(sql);
        let statement = self.note(result)?;
        self.statements
            .borrow_mut()
            .insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError> {
        let statement = self.prepared(sql)?;
        let result = self.client()?.query(&statement, params);
        self.note(result)
    }

    fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        let statement = self.prepared(sql)?;
        let result = self.client()?.query_opt(&statement, params);
        self.note(result)
    }

    fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, StoreError> {
        let statement = self.prepared(sql)?;
        let result = self.client()?.query_one(&statement, params);
        self.note(result)
    }

    fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<usize, StoreError> {
        let statement = self.prepared(sql)?;
        let result = self.client()?.execute(&statement, params);
        let rows = self.note(result)?;
        Ok(usize::try_from(rows).unwrap_or(usize::MAX))
    }

    /// Begins a transaction: the writer's (read committed), or a read-only
    /// snapshot (repeatable read: every statement sees the same state).
    pub(super) fn begin(&self, snapshot: bool) -> Result<PgTx<'_>, StoreError> {
        self.batch(if snapshot {
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        } else {
            "BEGIN"
        })?;
        self.in_transaction.set(true);
        self.transaction_failed.set(false);
        self.sequence_locked.set(false);
        Ok(PgTx {
            conn: self,
            open: true,
        })
    }

    /// The schema tables are created in (the first of the search path).
    #[cfg(test)]
    pub(super) fn current_schema(&self) -> Result<String, StoreError> {
        get(&self.query_one("SELECT current_schema()::TEXT", &[])?, 0)
    }

    fn migrate(&self) -> Result<(), StoreError> {
        let tx = self.begin(false)?;
        // One migrating process at a time; the others wait, then find the
        // schema current.
        self.batch(
            "SELECT pg_advisory_xact_lock(7303174651193360001);
             CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)",
        )?;
        let version: i64 = match self.query_opt("SELECT MAX(version) FROM schema_version", &[])? {
            Some(row) => get::<Option<i64>>(&row, 0)?.unwrap_or(0),
            None => 0,
        };
        if version > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        for (step, sql) in (1..).zip(MIGRATIONS) {
            if version < step {
                self.batch(sql)?;
            }
        }
        if version < SCHEMA_VERSION {
            self.batch("DELETE FROM schema_version")?;
            self.execute(
                "INSERT INTO schema_version (version) VALUES ($1)",
                &[&SCHEMA_VERSION],
            )?;
        }
        tx.commit()
    }
}

impl Drop for PgConn {
    /// The synchronous client closes its connection by blocking on its own
    /// runtime, which panics on a thread that drives async tasks (a service
    /// dropped at the end of `main`'s runtime, with its pooled readers):
    /// there, the client is closed on a thread of its own.
    fn drop(&mut self) {
        let Some(client) = self.client.get_mut().take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            drop(client);
            return;
        }
        if let Err(error) = std::thread::Builder::new()
            .name("codemem-pg-close".to_string())
            .spawn(move || drop(client))
        {
            tracing::warn!(%error, "cannot start a thread to close a postgres connection");
        }
    }
}

/// A transaction on a [`PgConn`]; rolled back when dropped uncommitted.
pub(super) struct PgTx<'a> {
    conn: &'a PgConn,
    open: bool,
}

impl PgTx<'_> {
    /// `COMMIT`, unless a statement failed inside the transaction: then
    /// `ROLLBACK` and an error (PostgreSQL would roll back silently).
    pub(super) fn commit(mut self) -> Result<(), StoreError> {
        self.open = false;
        let failed = self.conn.transaction_failed.get();
        let result = self.conn.batch(if failed { "ROLLBACK" } else { "COMMIT" });
        self.conn.in_transaction.set(false);
        result?;
        if failed {
            return Err(StoreError::TransactionAborted);
        }
        Ok(())
    }
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if self.open {
            if let Err(error) = self.conn.batch("ROLLBACK") {
                tracing::warn!(%error, "postgres rollback failed");
            }
            self.conn.in_transaction.set(false);
        }
    }
}

pub(super) fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A column of a row, a type mismatch an error rather than a panic.
fn get<'a, T: postgres::types::FromSql<'a>>(row: &'a Row, index: usize) -> Result<T, StoreError> {
    Ok(row.try_get(index)?)
}

/// The migrations by schema version: entry `i` takes the schema from
/// version `i` to `i + 1`, as `sqlite.rs`'s do.
const MIGRATIONS: [&str; 6] = [
    "CREATE TABLE requests (
        seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id      TEXT NOT NULL,
        request_id   TEXT NOT NULL,
        session_id   TEXT NOT NULL,
        body_sha256  BYTEA NOT NULL,
        num_messages BIGINT NOT NULL,
        stored_at_ms BIGINT NOT NULL,
        UNIQUE (user_id, request_id)
    );
    CREATE TABLE messages (
        message_id    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        seq           BIGINT NOT NULL REFERENCES requests(seq),
        user_id       TEXT NOT NULL,
        session_id    TEXT NOT NULL,
        message_index BIGINT NOT NULL,
        role          TEXT NOT NULL,
        content       TEXT NOT NULL,
        timestamp_ms  BIGINT,
        UNIQUE (seq, message_index)
    );
    CREATE INDEX messages_by_user_session ON messages (user_id, session_id);",
    "CREATE TABLE sessions (
        user_id          TEXT NOT NULL,
        session_id       TEXT NOT NULL,
        record_json      TEXT NOT NULL,
        diagnostics_json TEXT NOT NULL,
        num_messages     BIGINT NOT NULL,
        last_seq         BIGINT NOT NULL,
        updated_at_ms    BIGINT NOT NULL,
        PRIMARY KEY (user_id, session_id)
    );
    CREATE INDEX sessions_by_last_seq ON sessions (last_seq);",
    "CREATE TABLE pending_user_deletions (
        user_id TEXT PRIMARY KEY NOT NULL
    );",
    "CREATE TABLE pending_session_deletions (
        user_id    TEXT NOT NULL,
        session_id TEXT NOT NULL,
        PRIMARY KEY (user_id, session_id)
    );
    CREATE INDEX requests_by_user_session ON requests (user_id, session_id);",
    "ALTER TABLE sessions ADD COLUMN extractor_version BIGINT NOT NULL DEFAULT 0;
    CREATE INDEX sessions_by_extractor_version ON sessions (extractor_version);
    ALTER TABLE requests ADD COLUMN content_bytes BIGINT NOT NULL DEFAULT 0;
    UPDATE requests SET content_bytes = COALESCE(
        (SELECT SUM(octet_length(m.content)) FROM messages m WHERE m.seq = requests.seq), 0);
    CREATE TABLE pending_session_index (
        user_id    TEXT NOT NULL,
        session_id TEXT NOT NULL,
        PRIMARY KEY (user_id, session_id)
    );",
    "CREATE TABLE user_generations (
        user_id    TEXT PRIMARY KEY NOT NULL,
        generation BIGINT NOT NULL
    );
    CREATE INDEX requests_by_user_seq ON requests (user_id, seq);",
];

fn to_i64(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(super) fn prior_admission(
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

pub(super) fn session_content_bytes(
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
pub(super) fn lock_sessions(tx: &PgConn, sessions: &[(String, String)]) -> Result<(), StoreError> {
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

/// Locks every stored session of a user, as [`lock_sessions`] does.
fn lock_user_sessions(tx: &PgConn, user_id: &str) -> Result<(), StoreError> {
    tx.query(
        "SELECT pg_advisory_xact_lock(k.user_key, k.session_key) FROM (
             SELECT DISTINCT hashtext(user_id) AS user_key, hashtext(session_id) AS session_key
             FROM requests WHERE user_id = $1
             ORDER BY 1, 2 OFFSET 0
         ) k",
        &[&user_id],
    )?;
    Ok(())
}

pub(super) fn admit(
    tx: &PgConn,
    request: &AddRequest,
    body_sha256: &[u8; 32],
    stored_at_ms: i64,
) -> Result<Admission, StoreError> {
    if let Some(prior) = prior_admission(tx, request, body_sha256)? {
        return Ok(prior);
    }
    lock_sequence(tx)?;
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

pub(super) fn messages_after(
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

pub(super) fn messages_of_add(conn: &PgConn, seq: i64) -> Result<Vec<StoredMessage>, StoreError> {
    messages(conn.query(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
             WHERE m.seq = $1 ORDER BY m.message_index"
        ),
        &[&seq],
    )?)
}

pub(super) fn messages_by_id(
    conn: &PgConn,
    user_id: &str,
    message_ids: &[i64],
) -> Result<Vec<StoredMessage>, StoreError> {
    messages(conn.query(
        &format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN requests r ON r.seq = m.seq
             WHERE m.message_id = ANY($1) AND m.user_id = $2"
        ),
        &[&message_ids, &user_id],
    )?)
}

pub(super) fn last_seq(conn: &PgConn) -> Result<i64, StoreError> {
    get(
        &conn.query_one("SELECT COALESCE(MAX(seq), 0)::BIGINT FROM requests", &[])?,
        0,
    )
}

pub(super) fn session_messages(
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

const SESSION_COLUMNS: &str = "user_id, session_id, record_json, diagnostics_json, num_messages, last_seq, updated_at_ms, extractor_version";

fn session_from_row(row: &Row) -> Result<StoredSession, StoreError> {
    Ok(StoredSession {
        user_id: get(row, 0)?,
        session_id: get(row, 1)?,
        record_json: get(row, 2)?,
        diagnostics_json: get(row, 3)?,
        num_messages: get(row, 4)?,
        last_seq: get(row, 5)?,
        updated_at_ms: get(row, 6)?,
        extractor_version: get(row, 7)?,
    })
}

fn sessions(rows: Vec<Row>) -> Result<Vec<StoredSession>, StoreError> {
    rows.iter().map(session_from_row).collect()
}

fn pairs(rows: Vec<Row>) -> Result<Vec<(String, String)>, StoreError> {
    rows.iter()
        .map(|row| Ok((get(row, 0)?, get(row, 1)?)))
        .collect()
}

pub(super) fn upsert_session(conn: &PgConn, session: &StoredSession) -> Result<(), StoreError> {
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
            &session.record_json,
            &session.diagnostics_json,
            &session.num_messages,
            &session.last_seq,
            &session.updated_at_ms,
            &session.extractor_version,
        ],
    )?;
    Ok(())
}

pub(super) fn session_last_seq(
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

pub(super) fn sessions_derived_before(
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

pub(super) fn count_sessions_derived_before(
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

pub(super) fn mark_session_for_index(
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

pub(super) fn sessions_pending_index(conn: &PgConn) -> Result<Vec<StoredSession>, StoreError> {
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

pub(super) fn clear_sessions_pending_index(conn: &PgConn) -> Result<(), StoreError> {
    conn.execute("DELETE FROM pending_session_index", &[])?;
    Ok(())
}

pub(super) fn session_message_ids(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<Vec<i64>, StoreError> {
    conn.query(
        "SELECT message_id FROM messages WHERE user_id = $1 AND session_id = $2
         ORDER BY seq, message_index",
        &[&user_id, &session_id],
    )?
    .iter()
    .map(|row| get(row, 0))
    .collect()
}

pub(super) fn message_content_prefix(
    conn: &PgConn,
    message_id: i64,
    max_chars: usize,
) -> Result<Option<String>, StoreError> {
    let max_chars = i32::try_from(max_chars).unwrap_or(i32::MAX);
    match conn.query_opt(
        "SELECT substr(content, 1, $2::INT4) FROM messages WHERE message_id = $1",
        &[&message_id, &max_chars],
    )? {
        Some(row) => Ok(Some(get(&row, 0)?)),
        None => Ok(None),
    }
}

pub(super) fn sessions_changed_between(
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

pub(super) fn sessions_missing(conn: &PgConn) -> Result<Vec<(String, String)>, StoreError> {
    // The request log by session (one row per Add), not every message: see
    // the SQLite backend.
    pairs(conn.query(
        "SELECT r.user_id, r.session_id FROM requests r
         GROUP BY r.user_id, r.session_id
         HAVING NOT EXISTS (
                    SELECT 1 FROM sessions s
                    WHERE s.user_id = r.user_id AND s.session_id = r.session_id)
                AND EXISTS (
                    SELECT 1 FROM messages m
                    WHERE m.user_id = r.user_id AND m.session_id = r.session_id)",
        &[],
    )?)
}

pub(super) fn session(
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

fn source_from_row(row: &Row) -> Result<(String, usize), StoreError> {
    let index: i64 = get(row, 1)?;
    Ok((get(row, 0)?, usize::try_from(index).unwrap_or(0)))
}

pub(super) fn session_first_source(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<Option<(String, usize)>, StoreError> {
    conn.query_opt(
        "SELECT r.request_id, m.message_index FROM messages m JOIN requests r ON r.seq = m.seq
         WHERE m.user_id = $1 AND m.session_id = $2
         ORDER BY m.seq, m.message_index LIMIT 1",
        &[&user_id, &session_id],
    )?
    .as_ref()
    .map(source_from_row)
    .transpose()
}

pub(super) fn delete_user(tx: &PgConn, user_id: &str) -> Result<Deleted, StoreError> {
    // An Add of another process checked against a session's messages either
    // commits before the deletion or finds its session gone.
    lock_user_sessions(tx, user_id)?;
    let messages = tx.execute("DELETE FROM messages WHERE user_id = $1", &[&user_id])?;
    let sessions = tx.execute("DELETE FROM sessions WHERE user_id = $1", &[&user_id])?;
    let requests = tx.execute("DELETE FROM requests WHERE user_id = $1", &[&user_id])?;
    tx.execute(
        "INSERT INTO pending_user_deletions (user_id) VALUES ($1) ON CONFLICT DO NOTHING",
        &[&user_id],
    )?;
    bump_generations(tx, &[user_id.to_string()])?;
    Ok(Deleted {
        requests,
        messages,
        sessions,
    })
}

pub(super) fn purge_sessions_before(tx: &PgConn, cutoff_ms: i64) -> Result<Deleted, StoreError> {
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

pub(super) fn pending_session_deletions(
    conn: &PgConn,
) -> Result<Vec<(String, String)>, StoreError> {
    pairs(conn.query(
        "SELECT user_id, session_id FROM pending_session_deletions",
        &[],
    )?)
}

pub(super) fn clear_session_deletions(
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

pub(super) fn pending_user_deletions(conn: &PgConn) -> Result<Vec<String>, StoreError> {
    conn.query("SELECT user_id FROM pending_user_deletions", &[])?
        .iter()
        .map(|row| get(row, 0))
        .collect()
}

pub(super) fn clear_user_deletions(conn: &PgConn, user_ids: &[String]) -> Result<(), StoreError> {
    conn.execute(
        "DELETE FROM pending_user_deletions WHERE user_id = ANY($1)",
        &[&user_ids],
    )?;
    Ok(())
}

pub(super) fn sessions_of_user(
    conn: &PgConn,
    user_id: &str,
) -> Result<Vec<StoredSession>, StoreError> {
    sessions(conn.query(
        &format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id = $1
             ORDER BY last_seq DESC"
        ),
        &[&user_id],
    )?)
}

pub(super) fn users(conn: &PgConn) -> Result<Vec<StoredUser>, StoreError> {
    conn.query(
        "SELECT user_id, COUNT(*), SUM(num_messages)::BIGINT, MAX(updated_at_ms) FROM sessions
         GROUP BY user_id ORDER BY MAX(last_seq) DESC",
        &[],
    )?
    .iter()
    .map(|row| {
        Ok(StoredUser {
            user_id: get(row, 0)?,
            num_sessions: get(row, 1)?,
            num_messages: get(row, 2)?,
            updated_at_ms: get(row, 3)?,
        })
    })
    .collect()
}

pub(super) fn session_message_sources(
    conn: &PgConn,
    user_id: &str,
    session_id: &str,
) -> Result<Vec<(String, usize)>, StoreError> {
    conn.query(
        "SELECT r.request_id, m.message_index FROM messages m JOIN requests r ON r.seq = m.seq
         WHERE m.user_id = $1 AND m.session_id = $2
         ORDER BY m.seq, m.message_index",
        &[&user_id, &session_id],
    )?
    .iter()
    .map(source_from_row)
    .collect()
}

pub(super) fn count_evidence(conn: &PgConn) -> Result<i64, StoreError> {
    get(
        &conn.query_one(
            "SELECT COALESCE(SUM(CASE WHEN jsonb_typeof(record_json::JSONB -> 'evidence') = 'array'
                 THEN jsonb_array_length(record_json::JSONB -> 'evidence') END), 0)::BIGINT
             FROM sessions",
            &[],
        )?,
        0,
    )
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

pub(super) fn user_state(conn: &PgConn, user_id: &str) -> Result<UserState, StoreError> {
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

pub(super) fn user_seqs_between(
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

pub(super) fn user_messages_between(
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

pub(super) fn user_sessions_changed_after(
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
