//! The PostgreSQL backend: the same tables and contracts as `sqlite.rs`
//! in a database that operators replicate and several precedent processes
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
//! This file holds the connection ([`PgConn`], [`PgTx`]), the redaction
//! of URLs, the classification of connection errors, the migrations' runner
//! and how PostgreSQL runs the statements both backends share ([`Db`],
//! [`SqlRow`]); `writes.rs` holds what only PostgreSQL does (admission
//! under locks, purges and generations by arrays), each function answering
//! for one operation of the seam in [`super`], whose contract is written
//! there.

mod writes;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement};

pub(super) use writes::*;

use super::rows::{Db, Param, SqlRow};
use super::sql::{self, Sql};
use super::{SCHEMA_VERSION, StoreError, codec};

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
/// An error with the causes under it ("error connecting to server:
/// Connection refused (os error 111)"): the driver's own text names the
/// step, its source the reason.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = inner.source();
    }
    text
}

pub(crate) fn redact(url: &str) -> String {
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
pub(crate) fn is_connection_error(error: &postgres::Error) -> bool {
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
            reason: with_causes(&error),
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

    #[cfg(test)]
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

    /// The one BIGINT a query answers (the conformance suite's look at
    /// stored forms).
    #[cfg(test)]
    pub(crate) fn query_i64(&self, sql: &str) -> Result<i64, StoreError> {
        get(&self.query_one(sql, &[])?, 0)
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
        for (step, migration) in (1..).zip(&sql::MIGRATIONS) {
            if version < step {
                self.batch(migration.postgres())?;
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
            .name("precedent-pg-close".to_string())
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

/// The parameters as PostgreSQL binds them.
fn bind<'a>(params: &[&'a dyn Param]) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|param| param.postgres()).collect()
}

impl Db for PgConn {
    fn rows<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: fn(&dyn SqlRow) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        self.query(sql.postgres(), &bind(params))?
            .iter()
            .map(|row| map(row))
            .collect()
    }

    fn first_row<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: fn(&dyn SqlRow) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        match self.query_opt(sql.postgres(), &bind(params))? {
            Some(row) => Ok(Some(map(&row)?)),
            None => Ok(None),
        }
    }

    fn run(&self, sql: &Sql, params: &[&dyn Param]) -> Result<usize, StoreError> {
        self.execute(sql.postgres(), &bind(params))
    }
}

impl SqlRow for Row {
    fn integer(&self, index: usize) -> Result<i64, StoreError> {
        get(self, index)
    }

    fn optional_integer(&self, index: usize) -> Result<Option<i64>, StoreError> {
        get(self, index)
    }

    fn text(&self, index: usize) -> Result<String, StoreError> {
        get(self, index)
    }

    fn bytes(&self, index: usize) -> Result<Vec<u8>, StoreError> {
        get(self, index)
    }

    /// BYTEA (records), told apart by its first byte (`store::codec`), or
    /// TEXT (message content, which PostgreSQL compresses itself).
    fn packed_text(&self, index: usize) -> Result<Option<String>, StoreError> {
        let is_bytes = self
            .columns()
            .get(index)
            .is_some_and(|column| *column.type_() == postgres::types::Type::BYTEA);
        if is_bytes {
            return Ok(codec::unpack(get(self, index)?));
        }
        Ok(Some(get(self, index)?))
    }
}
