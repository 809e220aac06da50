//! The SQL both backends run, written once: the schema's migrations, the
//! column lists and every statement, in PostgreSQL's placeholders (`$1`,
//! `$2`, ...). SQLite gets each text with its placeholders renumbered
//! explicitly (`?1`, `?2`, ...): SQLite reads `$1` as a *named* parameter,
//! numbered by first appearance, which binds the wrong value as soon as a
//! statement names its parameters out of order.
//!
//! Where the backends need different text, a statement carries both
//! ([`Sql::each`]) and says why; the statements that only one backend
//! runs (PostgreSQL's array inserts, its advisory locks) stay in its file.

use std::sync::OnceLock;

/// A text of SQL for both backends.
pub(super) struct Sql {
    /// The text as PostgreSQL runs it.
    postgres: &'static str,
    /// SQLite's own text, where it differs beyond placeholders.
    sqlite_text: Option<&'static str>,
    /// SQLite's text with its placeholders renumbered, made on first use.
    sqlite: OnceLock<String>,
}

impl Sql {
    /// The same text on both backends.
    const fn new(text: &'static str) -> Sql {
        Sql {
            postgres: text,
            sqlite_text: None,
            sqlite: OnceLock::new(),
        }
    }

    /// A text of each backend's own (placeholders as in [`Sql::new`]).
    const fn each(postgres: &'static str, sqlite: &'static str) -> Sql {
        Sql {
            postgres,
            sqlite_text: Some(sqlite),
            sqlite: OnceLock::new(),
        }
    }

    /// The text PostgreSQL runs.
    pub(super) fn postgres(&self) -> &'static str {
        self.postgres
    }

    /// The text SQLite runs.
    pub(super) fn sqlite(&self) -> &str {
        self.sqlite
            .get_or_init(|| sqlite_placeholders(self.sqlite_text.unwrap_or(self.postgres)))
    }
}

/// `text` with each `$n` placeholder written `?n`. No statement here holds
/// a `$` in a string literal.
fn sqlite_placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

/// The columns of a session record as `rows::session` reads them, each
/// after `$prefix` (a table alias and its dot, or nothing).
macro_rules! session_columns {
    ($prefix:literal) => {
        concat!(
            $prefix,
            "user_id, ",
            $prefix,
            "session_id, ",
            $prefix,
            "record_json, ",
            $prefix,
            "diagnostics_json, ",
            $prefix,
            "num_messages, ",
            $prefix,
            "last_seq, ",
            $prefix,
            "updated_at_ms, ",
            $prefix,
            "extractor_version"
        )
    };
}

/// `SELECT` of the session records' columns (`rows::session`) from
/// `sessions`.
macro_rules! select_sessions {
    () => {
        concat!("SELECT ", session_columns!(""), " FROM sessions")
    };
}

/// `SELECT` of the stored messages' columns (`rows::message`), each with
/// its Add.
macro_rules! select_messages {
    () => {
        "SELECT m.message_id, m.seq, m.user_id, m.session_id, r.request_id,
            m.message_index, m.role, m.content, m.timestamp_ms, r.stored_at_ms
     FROM messages m JOIN requests r ON r.seq = m.seq"
    };
}

/// Each message of a session as its source (request id, index in it), in
/// session order (`rows::source`).
macro_rules! session_sources {
    () => {
        "SELECT r.request_id, m.message_index
     FROM messages m JOIN requests r ON r.seq = m.seq
     WHERE m.user_id = $1 AND m.session_id = $2
     ORDER BY m.seq, m.message_index"
    };
}

/// Version 1: the request log and its messages. The keys differ: SQLite's
/// are row ids (`INTEGER PRIMARY KEY`, `AUTOINCREMENT` so a sequence
/// number is never reused), PostgreSQL's identity columns; so do the
/// byte strings' type names.
macro_rules! schema_v1 {
    (seq: $seq:literal, message_id: $message_id:literal, bytes: $bytes:literal) => {
        concat!(
            "CREATE TABLE requests (
    seq          ",
            $seq,
            ",
    user_id      TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    body_sha256  ",
            $bytes,
            " NOT NULL,
    num_messages BIGINT NOT NULL,
    stored_at_ms BIGINT NOT NULL,
    UNIQUE (user_id, request_id)
);
CREATE TABLE messages (
    message_id    ",
            $message_id,
            ",
    seq           BIGINT NOT NULL REFERENCES requests(seq),
    user_id       TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    message_index BIGINT NOT NULL,
    role          TEXT NOT NULL,
    content       TEXT NOT NULL,
    timestamp_ms  BIGINT,
    UNIQUE (seq, message_index)
);
CREATE INDEX messages_by_user_session ON messages (user_id, session_id);"
        )
    };
}

/// The migrations by schema version: entry `i` takes the schema from
/// version `i` to `i + 1` (SQLite counts in `PRAGMA user_version`,
/// PostgreSQL in its `schema_version` table). Integer columns are `BIGINT`
/// on both: SQLite gives the name integer affinity, as it does `INTEGER`.
pub(super) static MIGRATIONS: [Sql; 8] = [
    Sql::each(
        schema_v1!(
            seq: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
            message_id: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
            bytes: "BYTEA"
        ),
        schema_v1!(
            seq: "INTEGER PRIMARY KEY AUTOINCREMENT",
            message_id: "INTEGER PRIMARY KEY",
            bytes: "BLOB"
        ),
    ),
    // Version 2: the session record derived from all messages of a
    // session. Records of sessions stored before are derived by the service
    // at start-up (see `sessions_missing`).
    Sql::new(
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
    ),
    // Version 3: users deleted from the store whose index documents may
    // remain (see `begin_user_deletion`).
    Sql::new(
        "CREATE TABLE pending_user_deletions (
    user_id TEXT PRIMARY KEY NOT NULL
);",
    ),
    // Version 4: sessions purged from the store (retention) whose index
    // documents may remain (see `purge_sessions_before`).
    Sql::new(
        "CREATE TABLE pending_session_deletions (
    user_id    TEXT NOT NULL,
    session_id TEXT NOT NULL,
    PRIMARY KEY (user_id, session_id)
);
CREATE INDEX requests_by_user_session ON requests (user_id, session_id);",
    ),
    // Version 5: the extractor version of each session record (records of
    // earlier stores carry 0 and are derived again in the background, see
    // `sessions_derived_before`), the content bytes of each Add (the
    // per-session size limit sums them), and the sessions whose record
    // changed without an Add (a re-derivation) and whose index document may
    // still be the old one.
    Sql::new(
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
    ),
    // Version 6: each user's deletion generation, bumped by a user deletion
    // or a retention purge of their sessions, so that an index kept
    // elsewhere (a node of a shared store) knows to drop what it holds of
    // the user (generations start at 0, see `user_state`); and the index by
    // user and sequence number that finds a user's last Add at once.
    Sql::new(
        "CREATE TABLE user_generations (
    user_id    TEXT PRIMARY KEY NOT NULL,
    generation BIGINT NOT NULL
);
CREATE INDEX requests_by_user_seq ON requests (user_id, seq);",
    ),
    // Version 7: session records and their diagnostics (and, in SQLite,
    // message content) are written compressed (`store::codec`) unless
    // short. PostgreSQL keeps them as BYTEA, rows of earlier versions as
    // their UTF-8 text; SQLite keeps a zlib stream as a BLOB in the same
    // column, so its tables do not change: the version tells an older
    // precedent that it cannot read this store. Records stored before stay
    // plain JSON until they are derived again.
    Sql::each(
        "ALTER TABLE sessions
    ALTER COLUMN record_json TYPE BYTEA USING convert_to(record_json, 'UTF8'),
    ALTER COLUMN diagnostics_json TYPE BYTEA USING convert_to(diagnostics_json, 'UTF8');",
        "",
    ),
    // Version 8: a user's sessions are listed in pages, most recently
    // updated first, by an index walk.
    Sql::new(
        "CREATE INDEX IF NOT EXISTS sessions_by_user_last_seq ON sessions (user_id, last_seq, session_id);",
    ),
];

/// What the request log says of an Add's key: its sequence number and
/// body hash.
pub(super) static PRIOR_ADMISSION: Sql =
    Sql::new("SELECT seq, body_sha256 FROM requests WHERE user_id = $1 AND request_id = $2");

/// Bytes of message content a session holds.
pub(super) static SESSION_CONTENT_BYTES: Sql = Sql::new(
    "SELECT CAST(COALESCE(SUM(content_bytes), 0) AS BIGINT) FROM requests
     WHERE user_id = $1 AND session_id = $2",
);

/// The request log's entry of an Add, answering its sequence number; no
/// row when another process stored the same key since the writer looked
/// it up (PostgreSQL; SQLite's one writer looked in the same transaction).
pub(super) static INSERT_REQUEST: Sql = Sql::new(
    "INSERT INTO requests (user_id, request_id, session_id, body_sha256, num_messages, stored_at_ms, content_bytes)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (user_id, request_id) DO NOTHING
     RETURNING seq",
);

/// Messages of Adds with a sequence number over `$1`, `$2` Adds' worth.
pub(super) static MESSAGES_AFTER: Sql = Sql::new(concat!(
    select_messages!(),
    "
     WHERE m.seq IN (SELECT seq FROM requests WHERE seq > $1 ORDER BY seq LIMIT $2)
     ORDER BY m.seq, m.message_index"
));

/// The messages of one Add.
pub(super) static MESSAGES_OF_ADD: Sql = Sql::new(concat!(
    select_messages!(),
    "
     WHERE m.seq = $1 ORDER BY m.message_index"
));

/// The messages `$2..$3` of the Add `$1` if it is the user `$4`'s.
pub(super) static MESSAGES_OF_ADD_IN: Sql = Sql::new(concat!(
    select_messages!(),
    "
     WHERE m.seq = $1 AND m.message_index >= $2 AND m.message_index < $3
       AND m.user_id = $4
     ORDER BY m.message_index"
));

/// The highest sequence number stored.
pub(super) static LAST_SEQ: Sql =
    Sql::new("SELECT CAST(COALESCE(MAX(seq), 0) AS BIGINT) FROM requests");

/// All messages of a session.
pub(super) static SESSION_MESSAGES: Sql = Sql::new(concat!(
    select_messages!(),
    "
     WHERE m.user_id = $1 AND m.session_id = $2
     ORDER BY m.seq, m.message_index"
));

/// A page of a session's messages after the message `($3, $4)`.
pub(super) static SESSION_MESSAGES_PAGE: Sql = Sql::new(concat!(
    select_messages!(),
    "
     WHERE m.user_id = $1 AND m.session_id = $2
       AND (m.seq, m.message_index) > ($3, $4)
     ORDER BY m.seq, m.message_index LIMIT $5"
));

/// Inserts or replaces a session record.
pub(super) static UPSERT_SESSION: Sql = Sql::new(concat!(
    "INSERT INTO sessions (",
    session_columns!(""),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (user_id, session_id) DO UPDATE SET
         record_json = excluded.record_json,
         diagnostics_json = excluded.diagnostics_json,
         num_messages = excluded.num_messages,
         last_seq = excluded.last_seq,
         updated_at_ms = excluded.updated_at_ms,
         extractor_version = excluded.extractor_version"
));

/// The last sequence number a session's record includes.
pub(super) static SESSION_LAST_SEQ: Sql =
    Sql::new("SELECT last_seq FROM sessions WHERE user_id = $1 AND session_id = $2");

/// Sessions an extractor older than `$1` derived, most recently changed
/// first.
pub(super) static SESSIONS_DERIVED_BEFORE: Sql = Sql::new(
    "SELECT user_id, session_id FROM sessions WHERE extractor_version < $1
     ORDER BY last_seq DESC LIMIT $2",
);

/// How many records an extractor older than `$1` derived.
pub(super) static COUNT_SESSIONS_DERIVED_BEFORE: Sql =
    Sql::new("SELECT COUNT(*) FROM sessions WHERE extractor_version < $1");

/// Marks a session whose record changed without an Add.
pub(super) static MARK_SESSION_FOR_INDEX: Sql = Sql::new(
    "INSERT INTO pending_session_index (user_id, session_id) VALUES ($1, $2)
     ON CONFLICT DO NOTHING",
);

/// The records of the marked sessions. SQLite's CROSS JOIN keeps the
/// (usually empty) pending table outside: without statistics SQLite would
/// rather walk every session record and look each up in it, at every
/// start-up and every re-derived group. PostgreSQL plans by its
/// statistics (and has no CROSS JOIN with a condition).
macro_rules! sessions_pending_index {
    ($join:literal) => {
        concat!(
            "SELECT ",
            session_columns!("s."),
            " FROM pending_session_index p
     ",
            $join,
            " sessions s ON s.user_id = p.user_id AND s.session_id = p.session_id"
        )
    };
}

/// The records of the marked sessions (see `sessions_pending_index!`).
pub(super) static SESSIONS_PENDING_INDEX: Sql = Sql::each(
    sessions_pending_index!("JOIN"),
    sessions_pending_index!("CROSS JOIN"),
);

/// Forgets every marked session.
pub(super) static CLEAR_SESSIONS_PENDING_INDEX: Sql = Sql::new("DELETE FROM pending_session_index");

/// Sessions whose record changed with Adds in `($1, $2]`.
pub(super) static SESSIONS_CHANGED_BETWEEN: Sql = Sql::new(concat!(
    select_sessions!(),
    " WHERE last_seq > $1 AND last_seq <= $2
     ORDER BY last_seq"
));

/// The sessions with messages but no record. Runs at every start-up, so it
/// walks the request log by session (one entry per Add) rather than the
/// messages (several per Add: on a large store the scan of every message
/// was most of the start-up), and looks each session up once; only a
/// session without a record has its messages looked for.
pub(super) static SESSIONS_MISSING: Sql = Sql::new(
    "SELECT r.user_id, r.session_id FROM requests r
     GROUP BY r.user_id, r.session_id
     HAVING NOT EXISTS (
                SELECT 1 FROM sessions s
                WHERE s.user_id = r.user_id AND s.session_id = r.session_id)
            AND EXISTS (
                SELECT 1 FROM messages m
                WHERE m.user_id = r.user_id AND m.session_id = r.session_id)",
);

/// One session record.
pub(super) static SESSION: Sql = Sql::new(concat!(
    select_sessions!(),
    " WHERE user_id = $1 AND session_id = $2"
));

/// Each message of a session as its source.
pub(super) static SESSION_SOURCES: Sql = Sql::new(session_sources!());

/// The source of a session's first message.
pub(super) static SESSION_FIRST_SOURCE: Sql = Sql::new(concat!(session_sources!(), " LIMIT 1"));

/// Records a user's deletion as pending.
pub(super) static INSERT_PENDING_USER_DELETION: Sql =
    Sql::new("INSERT INTO pending_user_deletions (user_id) VALUES ($1) ON CONFLICT DO NOTHING");

/// Whether a user's deletion is pending.
pub(super) static USER_DELETION_PENDING: Sql =
    Sql::new("SELECT 1 FROM pending_user_deletions WHERE user_id = $1");

/// At most `$2` messages of the user `$1`.
pub(super) static DELETE_USER_MESSAGES: Sql = Sql::new(
    "DELETE FROM messages WHERE message_id IN
         (SELECT message_id FROM messages WHERE user_id = $1 LIMIT $2)",
);

/// At most `$2` Adds of the user `$1`.
pub(super) static DELETE_USER_REQUESTS: Sql = Sql::new(
    "DELETE FROM requests WHERE seq IN
         (SELECT seq FROM requests WHERE user_id = $1 LIMIT $2)",
);

/// At most `$2` session records of the user `$1`: by SQLite's row id,
/// which PostgreSQL tables do not have, and by key there.
pub(super) static DELETE_USER_SESSIONS: Sql = Sql::each(
    "DELETE FROM sessions WHERE (user_id, session_id) IN
         (SELECT user_id, session_id FROM sessions WHERE user_id = $1 LIMIT $2)",
    "DELETE FROM sessions WHERE rowid IN
         (SELECT rowid FROM sessions WHERE user_id = $1 LIMIT $2)",
);

/// Forgets the user's sessions marked for the index.
pub(super) static DELETE_USER_PENDING_INDEX: Sql =
    Sql::new("DELETE FROM pending_session_index WHERE user_id = $1");

/// Ends a user's pending deletion.
pub(super) static DELETE_PENDING_USER_DELETION: Sql =
    Sql::new("DELETE FROM pending_user_deletions WHERE user_id = $1");

/// Sessions whose record was last derived before `$1`.
pub(super) static SESSIONS_UPDATED_BEFORE: Sql =
    Sql::new("SELECT user_id, session_id FROM sessions WHERE updated_at_ms < $1");

/// Sessions purged from the store whose index documents may remain.
pub(super) static PENDING_SESSION_DELETIONS: Sql =
    Sql::new("SELECT user_id, session_id FROM pending_session_deletions");

/// The index forgot a purged session.
pub(super) static CLEAR_SESSION_DELETION: Sql =
    Sql::new("DELETE FROM pending_session_deletions WHERE user_id = $1 AND session_id = $2");

/// Users deleted from the store whose index documents may remain.
pub(super) static PENDING_USER_DELETIONS: Sql =
    Sql::new("SELECT user_id FROM pending_user_deletions");

/// A page of a user's sessions after the cursor `($2, $3)`.
pub(super) static SESSIONS_OF_USER: Sql = Sql::new(concat!(
    select_sessions!(),
    " WHERE user_id = $1 AND (last_seq, session_id) < ($2, $3)
     ORDER BY last_seq DESC, session_id DESC LIMIT $4"
));

/// A page of the users holding sessions after the cursor `($1, $2)`.
pub(super) static USERS_PAGE: Sql = Sql::new(
    "SELECT user_id, COUNT(*), CAST(SUM(num_messages) AS BIGINT),
            MAX(updated_at_ms), MAX(last_seq)
     FROM sessions
     WHERE user_id NOT IN (SELECT user_id FROM pending_user_deletions)
     GROUP BY user_id
     HAVING (MAX(last_seq), user_id) < ($1, $2)
     ORDER BY MAX(last_seq) DESC, user_id DESC LIMIT $3",
);

/// How many sessions each user holds.
pub(super) static SESSIONS_PER_USER: Sql =
    Sql::new("SELECT COUNT(*) FROM sessions GROUP BY user_id");

/// Every stored record (read by `codec`, not by SQL's JSON functions:
/// records are stored compressed).
pub(super) static RECORDS: Sql = Sql::new("SELECT record_json FROM sessions");

/// A user's last sequence number and deletion generation.
pub(super) static USER_STATE: Sql = Sql::new(
    "SELECT CAST(COALESCE((SELECT MAX(seq) FROM requests WHERE user_id = $1), 0) AS BIGINT),
            CAST(COALESCE((SELECT generation FROM user_generations WHERE user_id = $1), 0) AS BIGINT)",
);

/// The user's sequence numbers in `($2, $3]`.
pub(super) static USER_SEQS_BETWEEN: Sql =
    Sql::new("SELECT seq FROM requests WHERE user_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq");

/// Messages of the user's Adds in `($2, $3]`, `$4` Adds' worth.
pub(super) static USER_MESSAGES_BETWEEN: Sql = Sql::new(concat!(
    select_messages!(),
    "
     WHERE m.seq IN (SELECT seq FROM requests WHERE user_id = $1 AND seq > $2 AND seq <= $3
                     ORDER BY seq LIMIT $4)
     ORDER BY m.seq, m.message_index"
));

/// The user's session records changed by an Add after `$2`.
pub(super) static USER_SESSIONS_CHANGED_AFTER: Sql = Sql::new(concat!(
    select_sessions!(),
    " WHERE user_id = $1 AND last_seq > $2
     ORDER BY last_seq"
));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_numbers_its_placeholders_explicitly() {
        assert_eq!(
            sqlite_placeholders("WHERE a = $2 AND b = $10 AND c = 'x$'"),
            "WHERE a = ?2 AND b = ?10 AND c = 'x$'"
        );
        assert_eq!(
            SESSION_LAST_SEQ.postgres(),
            "SELECT last_seq FROM sessions WHERE user_id = $1 AND session_id = $2"
        );
        assert_eq!(
            SESSION_LAST_SEQ.sqlite(),
            "SELECT last_seq FROM sessions WHERE user_id = ?1 AND session_id = ?2"
        );
        assert!(
            SESSIONS_PENDING_INDEX
                .sqlite()
                .contains("CROSS JOIN sessions s")
        );
        assert!(!SESSIONS_PENDING_INDEX.postgres().contains("CROSS"));
    }
}
