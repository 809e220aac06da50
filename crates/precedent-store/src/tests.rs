//! The store's conformance suite: every operation's contract, run against
//! SQLite always and against PostgreSQL: the database `PRECEDENT_TEST_POSTGRES`
//! names when it is set, else a server of the test process's own (`initdb`
//! in a temporary directory, started once, stopped and removed at process
//! exit). Each test runs in a fresh schema, dropped at the end. Only where
//! PostgreSQL is not installed does the PostgreSQL half say it was skipped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use super::*;
use precedent_core::domain::testing::{key, sid, uid};
use precedent_core::domain::{AddRequest, Message, Role, SessionId, UserId};

/// The environment variable naming the PostgreSQL database of the tests.
const POSTGRES_URL_VAR: &str = "PRECEDENT_TEST_POSTGRES";

/// A backend under test, with what it needs kept alive and cleaned up.
struct Backend {
    conn: StoreConn,
    _dir: Option<tempfile::TempDir>,
    schema: Option<(String, String)>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.schema {
            let dropped = postgres::PgConn::open(url, None, false).and_then(|conn| {
                conn.batch(&format!(
                    "DROP SCHEMA IF EXISTS {} CASCADE",
                    postgres::quote_identifier(schema)
                ))
            });
            if let Err(error) = dropped {
                eprintln!("cannot drop test schema {schema}: {error}");
            }
        }
    }
}

fn sqlite() -> Backend {
    let dir = tempfile::tempdir().expect("temporary directory");
    let conn = open_writer(dir.path()).expect("open sqlite");
    Backend {
        conn,
        _dir: Some(dir),
        schema: None,
    }
}

/// A fresh schema in the test database, `None` (with a note) without one.
fn postgres(test: &str) -> Option<Backend> {
    let url = postgres_url(test)?;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let schema = format!(
        "precedent_test_{}_{}_{test}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let conn = postgres::PgConn::open(&url, Some(&schema), true)
        .unwrap_or_else(|error| panic!("test PostgreSQL database: {error}"));
    Some(Backend {
        conn: StoreConn::Postgres(Box::new(conn)),
        _dir: None,
        schema: Some((url, schema)),
    })
}

/// The URL of the tests' PostgreSQL database: `PRECEDENT_TEST_POSTGRES`,
/// else the process's own server; `None` where neither is there.
fn postgres_url(test: &str) -> Option<String> {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) => Some(url),
        Err(_) => own_postgres_url(test),
    }
}

/// The server of this test process's own, started by the first test that
/// needs it; taken and stopped at process exit.
static OWN_POSTGRES: Mutex<Option<super::test_postgres::OwnPostgres>> = Mutex::new(None);

/// The URL of the process's own server, `None` (with a note naming `test`)
/// where PostgreSQL is not installed.
fn own_postgres_url(test: &str) -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    URL.get_or_init(|| {
        let server = super::test_postgres::OwnPostgres::start("store conformance suite")?;
        let url = server.url();
        *OWN_POSTGRES
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = Some(server);
        unsafe extern "C" {
            fn atexit(callback: extern "C" fn()) -> std::os::raw::c_int;
        }
        // SAFETY: registers a plain function with the C runtime; it runs
        // once, on the main thread, when the test harness exits.
        if unsafe { atexit(stop_own_postgres) } != 0 {
            eprintln!("cannot register the stop of the test PostgreSQL at exit");
        }
        Some(url)
    })
    .clone()
    .or_else(|| {
        let why = super::test_postgres::unavailable()
            .unwrap_or_else(|| "the test server did not start".to_string());
        eprintln!("{test}: PostgreSQL half skipped ({why})");
        None
    })
}

/// Stops the own server and removes its directory (its `Drop`).
extern "C" fn stop_own_postgres() {
    let server = OWN_POSTGRES
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .take();
    drop(server);
}

/// Declares a test per backend for a contract `fn(&mut StoreConn)`.
macro_rules! conformance {
    ($($contract:ident),* $(,)?) => {
        mod sqlite_backend {
            $(#[test]
            fn $contract() {
                let mut backend = super::sqlite();
                super::$contract(&mut backend.conn);
            })*
        }
        mod postgres_backend {
            $(#[test]
            fn $contract() {
                if let Some(mut backend) = super::postgres(stringify!($contract)) {
                    super::$contract(&mut backend.conn);
                }
            })*
        }
    };
}

conformance!(
    admission,
    admission_rolled_back_leaves_nothing,
    seq_is_monotonic_and_never_reused,
    messages_read_back,
    session_records,
    extractor_versions_and_pending_index,
    delete_user_records_pending,
    purge_records_pending,
    users_listed,
    sessions_listed_in_pages,
    session_messages_read_in_pages,
    migration_is_idempotent,
    evidence_counted,
    user_state_follows_adds_deletions_and_purges,
    records_stored_compressed_and_old_rows_read,
    records_of_schema_6_read_after_migration,
    long_messages_read_back_whole_and_by_prefix,
);

fn add(user: &str, request: &str, session: &str, contents: &[&str]) -> AddRequest {
    let messages = contents
        .iter()
        .enumerate()
        .map(|(index, content)| Message {
            role: if index % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            content: content.to_string(),
            timestamp_ms: (index == 0).then_some(1_700_000_000_000),
        })
        .collect();
    AddRequest::new(
        request.to_string(),
        user.to_string(),
        session.to_string(),
        messages,
    )
    .expect("a valid Add")
}

/// Stores an Add in its own transaction; answers its sequence number.
fn store(conn: &mut StoreConn, request: &AddRequest) -> i64 {
    let tx = conn.transaction().expect("begin");
    let admission = admit(&tx, request, &request.body_sha256(), 1_000).expect("admit");
    tx.commit().expect("commit");
    match admission {
        Admission::Inserted { seq } => seq,
        other => panic!("expected a new Add, got {other:?}"),
    }
}

fn record(user: &str, session: &str, last_seq: i64, updated_at_ms: i64) -> StoredSession {
    StoredSession {
        user_id: uid(user),
        session_id: sid(session),
        record_json: format!(r#"{{"task":"{session}","evidence":[1,2]}}"#),
        diagnostics_json: "[]".to_string(),
        num_messages: 2,
        last_seq,
        updated_at_ms,
        extractor_version: 3,
    }
}

fn sorted<T: Ord>(mut items: Vec<T>) -> Vec<T> {
    items.sort();
    items
}

fn admission(conn: &mut StoreConn) {
    let first = add("u1", "r1", "s1", &["fix the bug", "done"]);
    let hash = first.body_sha256();
    assert_eq!(prior_admission(conn, &first, &hash).unwrap(), None);
    let seq = store(conn, &first);
    assert!(seq > 0);
    assert_eq!(
        prior_admission(conn, &first, &hash).unwrap(),
        Some(Admission::Duplicate { seq })
    );
    // The same key and body again: a duplicate, nothing stored.
    let tx = conn.transaction().unwrap();
    assert_eq!(
        admit(&tx, &first, &hash, 2_000).unwrap(),
        Admission::Duplicate { seq }
    );
    // The same key with another body: a conflict, nothing changed.
    let other = add("u1", "r1", "s1", &["something else"]);
    assert_eq!(
        admit(&tx, &other, &other.body_sha256(), 2_000).unwrap(),
        Admission::Conflict
    );
    // The same request id under another user is another key.
    let elsewhere = add("u2", "r1", "s1", &["fix the bug", "done"]);
    let elsewhere_seq = match admit(&tx, &elsewhere, &elsewhere.body_sha256(), 2_000).unwrap() {
        Admission::Inserted { seq } => seq,
        other => panic!("expected a new Add, got {other:?}"),
    };
    tx.commit().unwrap();
    assert!(elsewhere_seq > seq);
    assert_eq!(last_seq(conn).unwrap(), elsewhere_seq);
    assert_eq!(messages_of_add(conn, seq).unwrap().len(), 2);
    assert_eq!(
        session_content_bytes(conn, &uid("u1"), &sid("s1")).unwrap(),
        content_bytes(&first)
    );
    assert_eq!(
        content_bytes(&first),
        ("fix the bug".len() + "done".len()) as i64
    );
    assert_eq!(
        session_content_bytes(conn, &uid("u1"), &sid("nothing")).unwrap(),
        0
    );
}

fn admission_rolled_back_leaves_nothing(conn: &mut StoreConn) {
    let request = add("u1", "r1", "s1", &["hello"]);
    {
        let tx = conn.transaction().unwrap();
        assert!(matches!(
            admit(&tx, &request, &request.body_sha256(), 1).unwrap(),
            Admission::Inserted { .. }
        ));
        // Dropped without commit.
    }
    assert_eq!(
        prior_admission(conn, &request, &request.body_sha256()).unwrap(),
        None
    );
    assert_eq!(last_seq(conn).unwrap(), 0);
    assert!(messages_after(conn, 0, 10).unwrap().is_empty());
    // The connection works on after the rollback.
    store(conn, &request);
    assert_eq!(messages_after(conn, 0, 10).unwrap().len(), 1);
}

fn seq_is_monotonic_and_never_reused(conn: &mut StoreConn) {
    let mut seqs = Vec::new();
    for index in 0..3 {
        seqs.push(store(
            conn,
            &add("gone", &format!("r{index}"), "s", &["text"]),
        ));
    }
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
    let highest = seqs[2];
    delete_whole_user(conn, "gone");
    assert_eq!(last_seq(conn).unwrap(), 0);
    let after = store(conn, &add("other", "r0", "s", &["text"]));
    assert!(after > highest, "{after} reuses a number up to {highest}");
    // The same key as a deleted Add is new again, under a new number.
    let again = store(conn, &add("gone", "r0", "s", &["text"]));
    assert!(again > after);
}

fn messages_read_back(conn: &mut StoreConn) {
    let first = store(conn, &add("u1", "a", "s1", &["one", "two"]));
    let second = store(conn, &add("u1", "b", "s2", &["three"]));
    let third = store(conn, &add("u1", "c", "s1", &["four", "fünf ünïcödé"]));
    let foreign = store(conn, &add("u2", "d", "s1", &["secret"]));

    let all = messages_after(conn, 0, 100).unwrap();
    let order: Vec<(i64, usize)> = all.iter().map(|m| (m.seq, m.message_index)).collect();
    assert_eq!(
        order,
        vec![
            (first, 0),
            (first, 1),
            (second, 0),
            (third, 0),
            (third, 1),
            (foreign, 0)
        ]
    );
    let message = &all[0];
    assert_eq!(message.user_id, "u1");
    assert_eq!(message.session_id, "s1");
    assert_eq!(message.request_id, "a");
    assert_eq!(message.role, Role::User);
    assert_eq!(message.content, "one");
    assert_eq!(message.timestamp_ms, Some(1_700_000_000_000));
    assert_eq!(message.stored_at_ms, 1_000);
    assert_eq!(all[1].role, Role::Assistant);
    assert_eq!(all[1].timestamp_ms, None);

    // At most `limit` Adds' worth, after a sequence number.
    let two_adds = messages_after(conn, first, 2).unwrap();
    let seqs: Vec<i64> = two_adds.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, vec![second, third, third]);
    assert!(messages_after(conn, foreign, 10).unwrap().is_empty());

    let of_add = messages_of_add(conn, third).unwrap();
    assert_eq!(of_add.len(), 2);
    assert_eq!(of_add[1].content, "fünf ünïcödé");
    assert!(messages_of_add(conn, foreign + 100).unwrap().is_empty());

    let session = session_messages(conn, &uid("u1"), &sid("s1")).unwrap();
    let contents: Vec<&str> = session.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, vec!["one", "two", "four", "fünf ünïcödé"]);
    // A range of one Add's messages, only within the user.
    assert_eq!(
        messages_of_add_in(conn, &uid("u1"), third, 1, 2).unwrap(),
        vec![of_add[1].clone()]
    );
    assert_eq!(
        messages_of_add_in(conn, &uid("u1"), third, 0, 10).unwrap(),
        of_add
    );
    assert!(
        messages_of_add_in(conn, &uid("someone else"), third, 0, 10)
            .unwrap()
            .is_empty()
    );
    assert!(
        messages_of_add_in(conn, &uid("u1"), third, 2, 10)
            .unwrap()
            .is_empty()
    );

    assert_eq!(
        session_first_source(conn, &uid("u1"), &sid("s1")).unwrap(),
        Some(("a".to_string(), 0))
    );
    assert_eq!(
        session_first_source(conn, &uid("u1"), &sid("none")).unwrap(),
        None
    );
    assert_eq!(
        session_message_sources(conn, &uid("u1"), &sid("s1")).unwrap(),
        vec![
            ("a".to_string(), 0),
            ("a".to_string(), 1),
            ("c".to_string(), 0),
            ("c".to_string(), 1)
        ]
    );
    // Every session has messages and no record yet.
    assert_eq!(
        sorted(sessions_missing(conn).unwrap()),
        vec![key("u1", "s1"), key("u1", "s2"), key("u2", "s1")]
    );
}

fn session_records(conn: &mut StoreConn) {
    let seq = store(conn, &add("u1", "a", "s1", &["one", "two"]));
    assert_eq!(session(conn, &uid("u1"), &sid("s1")).unwrap(), None);
    assert_eq!(session_last_seq(conn, &uid("u1"), &sid("s1")).unwrap(), 0);
    let first = record("u1", "s1", seq, 10);
    upsert_session(conn, first.row()).unwrap();
    assert_eq!(
        session(conn, &uid("u1"), &sid("s1")).unwrap(),
        Some(first.clone())
    );
    assert_eq!(session_last_seq(conn, &uid("u1"), &sid("s1")).unwrap(), seq);
    assert!(sessions_missing(conn).unwrap().is_empty());

    // An upsert replaces every field of the record.
    let later = store(conn, &add("u1", "b", "s1", &["three"]));
    let replaced = StoredSession {
        record_json: "{\"task\":\"again\"}".to_string(),
        diagnostics_json: "[\"d\"]".to_string(),
        num_messages: 3,
        last_seq: later,
        updated_at_ms: 20,
        extractor_version: 4,
        ..first.clone()
    };
    let tx = conn.transaction().unwrap();
    upsert_session(&tx, replaced.row()).unwrap();
    tx.commit().unwrap();
    assert_eq!(
        session(conn, &uid("u1"), &sid("s1")).unwrap(),
        Some(replaced.clone())
    );

    let other_seq = store(conn, &add("u1", "c", "s2", &["x"]));
    let other = record("u1", "s2", other_seq, 30);
    upsert_session(conn, other.row()).unwrap();
    assert_eq!(
        sessions_of_user(conn, &uid("u1"), None, 100).unwrap(),
        vec![other.clone(), replaced.clone()]
    );
    assert!(
        sessions_of_user(conn, &uid("nobody"), None, 100)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        sessions_changed_between(conn, seq, other_seq).unwrap(),
        vec![replaced.clone(), other.clone()]
    );
    assert_eq!(
        sessions_changed_between(conn, later, other_seq).unwrap(),
        vec![other]
    );
    assert!(
        sessions_changed_between(conn, other_seq, i64::MAX)
            .unwrap()
            .is_empty()
    );

    // A snapshot reads what was committed.
    let snapshot = conn.snapshot().unwrap();
    assert_eq!(
        session(&snapshot, &uid("u1"), &sid("s1")).unwrap(),
        Some(replaced)
    );
    drop(snapshot);
}

fn extractor_versions_and_pending_index(conn: &mut StoreConn) {
    for (index, version) in [1, 3, 2, 3].into_iter().enumerate() {
        let session_id = format!("s{index}");
        let seq = store(conn, &add("u1", &format!("r{index}"), &session_id, &["m"]));
        upsert_session(
            conn,
            StoredSession {
                extractor_version: version,
                ..record("u1", &session_id, seq, 10)
            }
            .row(),
        )
        .unwrap();
    }
    assert_eq!(count_sessions_derived_before(conn, 3).unwrap(), 2);
    assert_eq!(count_sessions_derived_before(conn, 4).unwrap(), 4);
    assert_eq!(count_sessions_derived_before(conn, 1).unwrap(), 0);
    // Most recently changed first, at most `limit`.
    assert_eq!(
        sessions_derived_before(conn, 3, 10).unwrap(),
        vec![key("u1", "s2"), key("u1", "s0")]
    );
    assert_eq!(
        sessions_derived_before(conn, 4, 1).unwrap(),
        vec![key("u1", "s3")]
    );

    assert!(sessions_pending_index(conn).unwrap().is_empty());
    let tx = conn.transaction().unwrap();
    mark_session_for_index(&tx, &uid("u1"), &sid("s0")).unwrap();
    mark_session_for_index(&tx, &uid("u1"), &sid("s0")).unwrap();
    mark_session_for_index(&tx, &uid("u1"), &sid("s2")).unwrap();
    // Marked, then gone: left out.
    mark_session_for_index(&tx, &uid("u1"), &sid("never-stored")).unwrap();
    tx.commit().unwrap();
    let mut pending: Vec<SessionId> = sessions_pending_index(conn)
        .unwrap()
        .into_iter()
        .map(|session| session.session_id)
        .collect();
    pending.sort();
    assert_eq!(pending, vec!["s0", "s2"]);
    clear_sessions_pending_index(conn).unwrap();
    assert!(sessions_pending_index(conn).unwrap().is_empty());
}

/// Deletes a user as the writer does: begun, two rows a slice, finished.
fn delete_whole_user(conn: &mut StoreConn, user_id: &str) -> Deleted {
    let user_id = &uid(user_id);
    let tx = conn.transaction().unwrap();
    begin_user_deletion(&tx, user_id).unwrap();
    tx.commit().unwrap();
    let mut total = Deleted::default();
    loop {
        let tx = conn.transaction().unwrap();
        let step = delete_user_slice(&tx, user_id, 2).unwrap();
        tx.commit().unwrap();
        if step == Deleted::default() {
            break;
        }
        total += step;
    }
    let tx = conn.transaction().unwrap();
    finish_user_deletion(&tx, user_id).unwrap();
    tx.commit().unwrap();
    total
}

fn delete_user_records_pending(conn: &mut StoreConn) {
    let a = store(conn, &add("doomed", "a", "s1", &["one", "two"]));
    let b = store(conn, &add("doomed", "b", "s2", &["three"]));
    let kept = store(conn, &add("kept", "a", "s1", &["four"]));
    upsert_session(conn, record("doomed", "s1", a, 1).row()).unwrap();
    upsert_session(conn, record("doomed", "s2", b, 1).row()).unwrap();
    upsert_session(conn, record("kept", "s1", kept, 1).row()).unwrap();

    // Begun: pending, hidden from the users' list, Adds of the user refused.
    let tx = conn.transaction().unwrap();
    begin_user_deletion(&tx, &uid("doomed")).unwrap();
    tx.commit().unwrap();
    assert!(user_deletion_pending(conn, &uid("doomed")).unwrap());
    assert!(!user_deletion_pending(conn, &uid("kept")).unwrap());
    assert_eq!(
        pending_user_deletions(conn).unwrap(),
        vec!["doomed".to_string()]
    );
    let listed: Vec<UserId> = users(conn, None, 10)
        .unwrap()
        .into_iter()
        .map(|user| user.user_id)
        .collect();
    assert_eq!(listed, vec!["kept".to_string()]);
    let late = add("doomed", "c", "s3", &["five"]);
    let tx = conn.transaction().unwrap();
    let refused = admit(&tx, &late, &late.body_sha256(), 1);
    assert!(
        matches!(refused, Err(StoreError::UserBeingDeleted(ref user)) if user == "doomed"),
        "{refused:?}"
    );
    drop(tx);

    // Sliced: messages first, then Adds, then records, two rows at a time.
    let mut steps = Vec::new();
    loop {
        let tx = conn.transaction().unwrap();
        let step = delete_user_slice(&tx, &uid("doomed"), 2).unwrap();
        tx.commit().unwrap();
        if step == Deleted::default() {
            break;
        }
        steps.push(step);
    }
    let messages = |messages| Deleted {
        messages,
        ..Deleted::default()
    };
    let requests = |requests| Deleted {
        requests,
        ..Deleted::default()
    };
    let sessions = |sessions| Deleted {
        sessions,
        ..Deleted::default()
    };
    assert_eq!(
        steps,
        vec![messages(2), messages(1), requests(2), sessions(2)]
    );
    assert!(
        session_messages(conn, &uid("doomed"), &sid("s1"))
            .unwrap()
            .is_empty()
    );
    assert!(
        sessions_of_user(conn, &uid("doomed"), None, 100)
            .unwrap()
            .is_empty()
    );
    let request = add("doomed", "a", "s1", &["one", "two"]);
    assert_eq!(
        prior_admission(conn, &request, &request.body_sha256()).unwrap(),
        None
    );
    assert_eq!(
        sessions_of_user(conn, &uid("kept"), None, 100)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(messages_after(conn, 0, 10).unwrap().len(), 1);
    // Still pending until finished; then the user's Adds are taken again.
    assert!(user_deletion_pending(conn, &uid("doomed")).unwrap());
    let tx = conn.transaction().unwrap();
    finish_user_deletion(&tx, &uid("doomed")).unwrap();
    tx.commit().unwrap();
    assert!(pending_user_deletions(conn).unwrap().is_empty());
    store(conn, &late);

    // Deleting a user that never was removes nothing.
    assert_eq!(delete_whole_user(conn, "never-was"), Deleted::default());
    assert!(pending_user_deletions(conn).unwrap().is_empty());
}

fn purge_records_pending(conn: &mut StoreConn) {
    let old = store(conn, &add("u1", "a", "old", &["one", "two"]));
    let old_too = store(conn, &add("u1", "b", "old", &["three"]));
    let other_old = store(conn, &add("u2", "c", "old", &["four"]));
    let fresh = store(conn, &add("u1", "d", "fresh", &["five"]));
    upsert_session(conn, record("u1", "old", old_too, 100).row()).unwrap();
    upsert_session(conn, record("u2", "old", other_old, 199).row()).unwrap();
    upsert_session(conn, record("u1", "fresh", fresh, 200).row()).unwrap();
    assert!(old < old_too);

    let tx = conn.transaction().unwrap();
    let deleted = purge_sessions_before(&tx, 200).unwrap();
    tx.commit().unwrap();
    assert_eq!(
        deleted,
        Deleted {
            requests: 3,
            messages: 4,
            sessions: 2
        }
    );
    assert!(
        session_messages(conn, &uid("u1"), &sid("old"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        sessions_of_user(conn, &uid("u1"), None, 100)
            .unwrap()
            .into_iter()
            .map(|session| session.session_id)
            .collect::<Vec<_>>(),
        vec!["fresh"]
    );
    assert_eq!(
        session_content_bytes(conn, &uid("u1"), &sid("old")).unwrap(),
        0
    );
    let pending = sorted(pending_session_deletions(conn).unwrap());
    assert_eq!(pending, vec![key("u1", "old"), key("u2", "old")]);

    // Nothing older: nothing removed.
    let tx = conn.transaction().unwrap();
    assert_eq!(purge_sessions_before(&tx, 200).unwrap(), Deleted::default());
    tx.commit().unwrap();

    clear_session_deletions(conn, &pending[..1]).unwrap();
    assert_eq!(
        pending_session_deletions(conn).unwrap(),
        pending[1..].to_vec()
    );
    clear_session_deletions(conn, &pending).unwrap();
    assert!(pending_session_deletions(conn).unwrap().is_empty());
}

fn user_state_follows_adds_deletions_and_purges(conn: &mut StoreConn) {
    assert_eq!(user_state(conn, &uid("u")).unwrap(), UserState::default());
    let first = store(conn, &add("u", "a", "s1", &["one", "two"]));
    let other = store(conn, &add("v", "b", "s1", &["three"]));
    let second = store(conn, &add("u", "c", "s2", &["four"]));
    upsert_session(conn, record("u", "s1", first, 100).row()).unwrap();
    upsert_session(conn, record("v", "s1", other, 100).row()).unwrap();
    upsert_session(conn, record("u", "s2", second, 300).row()).unwrap();
    assert_eq!(
        user_state(conn, &uid("u")).unwrap(),
        UserState {
            last_seq: second,
            generation: 0
        }
    );
    assert_eq!(
        user_seqs_between(conn, &uid("u"), 0, second).unwrap(),
        vec![first, second]
    );
    assert_eq!(
        user_seqs_between(conn, &uid("u"), first, second).unwrap(),
        vec![second]
    );
    let messages = user_messages_between(conn, &uid("u"), 0, second, 10).unwrap();
    assert_eq!(
        messages
            .iter()
            .map(|message| message.content.as_str())
            .collect::<Vec<_>>(),
        vec!["one", "two", "four"]
    );
    assert!(messages.iter().all(|message| message.user_id == "u"));
    assert_eq!(
        user_messages_between(conn, &uid("u"), 0, second, 1)
            .unwrap()
            .len(),
        2,
        "the limit counts Adds"
    );
    assert!(
        user_messages_between(conn, &uid("u"), 0, first, 10)
            .unwrap()
            .iter()
            .all(|message| message.seq == first)
    );
    assert_eq!(
        user_sessions_changed_after(conn, &uid("u"), first)
            .unwrap()
            .into_iter()
            .map(|session| session.session_id)
            .collect::<Vec<_>>(),
        vec!["s2"]
    );

    // A purge of one of the user's sessions moves the user (only) to the
    // next generation.
    let tx = conn.transaction().unwrap();
    purge_sessions_before(&tx, 200).unwrap();
    tx.commit().unwrap();
    assert_eq!(user_state(conn, &uid("u")).unwrap().generation, 1);
    assert_eq!(user_state(conn, &uid("v")).unwrap().generation, 1);
    assert_eq!(user_state(conn, &uid("u")).unwrap().last_seq, second);

    // A deletion too (its beginning and its end), and the user then holds
    // no Add.
    delete_whole_user(conn, "u");
    assert_eq!(
        user_state(conn, &uid("u")).unwrap(),
        UserState {
            last_seq: 0,
            generation: 3
        }
    );
    assert_eq!(user_state(conn, &uid("v")).unwrap().generation, 1);
}

fn users_listed(conn: &mut StoreConn) {
    assert!(users(conn, None, 100).unwrap().is_empty());
    assert!(sessions_per_user(conn).unwrap().is_empty());
    let a = store(conn, &add("alice", "a", "s1", &["one"]));
    let b = store(conn, &add("bob", "b", "s1", &["two"]));
    let c = store(conn, &add("alice", "c", "s2", &["three"]));
    upsert_session(
        conn,
        StoredSession {
            num_messages: 4,
            ..record("alice", "s1", a, 50)
        }
        .row(),
    )
    .unwrap();
    upsert_session(
        conn,
        StoredSession {
            num_messages: 1,
            ..record("bob", "s1", b, 70)
        }
        .row(),
    )
    .unwrap();
    upsert_session(
        conn,
        StoredSession {
            num_messages: 2,
            ..record("alice", "s2", c, 60)
        }
        .row(),
    )
    .unwrap();
    // Most recently active (highest last seq) first.
    let alice = StoredUser {
        user_id: uid("alice"),
        num_sessions: 2,
        num_messages: 6,
        updated_at_ms: 60,
        last_seq: c,
    };
    let bob = StoredUser {
        user_id: uid("bob"),
        num_sessions: 1,
        num_messages: 1,
        updated_at_ms: 70,
        last_seq: b,
    };
    assert_eq!(
        users(conn, None, 100).unwrap(),
        vec![alice.clone(), bob.clone()]
    );
    assert_eq!(sorted(sessions_per_user(conn).unwrap()), vec![1, 2]);
    // In pages: after the first user, the second; after the last, nothing.
    assert_eq!(users(conn, None, 1).unwrap(), vec![alice.clone()]);
    let after_alice = ListCursor {
        last_seq: alice.last_seq,
        key: alice.user_id.to_string(),
    };
    assert_eq!(
        users(conn, Some(&after_alice), 1).unwrap(),
        vec![bob.clone()]
    );
    let after_bob = ListCursor {
        last_seq: bob.last_seq,
        key: bob.user_id.to_string(),
    };
    assert!(users(conn, Some(&after_bob), 10).unwrap().is_empty());
}

/// A user's sessions read in pages of every size give each session once,
/// in the order of the whole listing, and a page never reaches another
/// user's sessions.
fn sessions_listed_in_pages(conn: &mut StoreConn) {
    let mut expected = Vec::new();
    for index in 0..7 {
        let session = format!("s{index}");
        let seq = store(conn, &add("u1", &format!("r{index}"), &session, &["x"]));
        upsert_session(conn, record("u1", &session, seq, index).row()).unwrap();
        expected.push(session);
        let other = format!("o{index}");
        let seq = store(conn, &add("u2", &format!("r{index}"), &other, &["y"]));
        upsert_session(conn, record("u2", &other, seq, index).row()).unwrap();
    }
    expected.reverse();
    let whole: Vec<SessionId> = sessions_of_user(conn, &uid("u1"), None, 100)
        .unwrap()
        .into_iter()
        .map(|session| session.session_id)
        .collect();
    assert_eq!(whole, expected);
    for size in 1..=8 {
        let mut listed = Vec::new();
        let mut after: Option<ListCursor> = None;
        loop {
            let page = sessions_of_user(conn, &uid("u1"), after.as_ref(), size).unwrap();
            assert!(page.len() <= size);
            let Some(last) = page.last() else { break };
            after = Some(ListCursor {
                last_seq: last.last_seq,
                key: last.session_id.to_string(),
            });
            listed.extend(page.into_iter().map(|session| session.session_id));
        }
        assert_eq!(listed, expected, "pages of {size}");
    }
    assert!(
        sessions_of_user(conn, &uid("u1"), None, 0)
            .unwrap()
            .is_empty()
    );
}

/// A session's messages read in pages of every size give each message
/// once, in session order, and never another session's or user's.
fn session_messages_read_in_pages(conn: &mut StoreConn) {
    store(conn, &add("u1", "r1", "s1", &["a", "b", "c"]));
    store(conn, &add("u1", "r2", "s2", &["other session"]));
    store(conn, &add("u2", "r1", "s1", &["other user"]));
    store(conn, &add("u1", "r3", "s1", &["d", "e"]));
    let whole: Vec<String> = session_messages(conn, &uid("u1"), &sid("s1"))
        .unwrap()
        .into_iter()
        .map(|message| message.content)
        .collect();
    assert_eq!(whole, vec!["a", "b", "c", "d", "e"]);
    for size in 1..=6 {
        let mut listed = Vec::new();
        let mut after = None;
        loop {
            let page = session_messages_page(conn, &uid("u1"), &sid("s1"), after, size).unwrap();
            assert!(page.len() <= size);
            let Some(last) = page.last() else { break };
            after = Some((last.seq, last.message_index as i64));
            listed.extend(page.into_iter().map(|message| message.content));
        }
        assert_eq!(listed, whole, "pages of {size}");
    }
}

fn migration_is_idempotent(conn: &mut StoreConn) {
    let seq = store(conn, &add("u1", "a", "s1", &["one"]));
    // Opening again migrates nothing and keeps every row.
    let again = match &*conn {
        StoreConn::Sqlite(sqlite) => {
            let path = sqlite.path().expect("file database").to_string();
            let dir = std::path::Path::new(&path)
                .parent()
                .expect("data dir")
                .to_path_buf();
            open_writer(&dir).expect("reopen")
        }
        StoreConn::Postgres(_) => {
            let url = postgres_url("migration_is_idempotent").expect("url");
            let schema = current_schema(conn);
            StoreConn::Postgres(Box::new(
                postgres::PgConn::open(&url, Some(&schema), true).expect("reopen"),
            ))
        }
    };
    assert_eq!(last_seq(&again).unwrap(), seq);
    assert_eq!(messages_of_add(&again, seq).unwrap().len(), 1);
    // A newer schema than this build knows is refused.
    match &again {
        StoreConn::Sqlite(sqlite) => {
            sqlite
                .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                .unwrap();
            let dir = std::path::Path::new(sqlite.path().unwrap())
                .parent()
                .unwrap()
                .to_path_buf();
            assert!(matches!(
                open_writer(&dir),
                Err(StoreError::SchemaTooNew { found, supported })
                    if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION
            ));
        }
        StoreConn::Postgres(pg) => {
            pg.batch(&format!(
                "UPDATE schema_version SET version = {}",
                SCHEMA_VERSION + 1
            ))
            .unwrap();
            let url = postgres_url("migration_is_idempotent").expect("url");
            let schema = current_schema(&again);
            assert!(matches!(
                postgres::PgConn::open(&url, Some(&schema), true),
                Err(StoreError::SchemaTooNew { found, supported })
                    if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION
            ));
        }
    }
}

fn current_schema(conn: &StoreConn) -> String {
    match conn {
        StoreConn::Postgres(pg) => pg.current_schema().expect("current schema"),
        StoreConn::Sqlite(_) => unreachable!("PostgreSQL only"),
    }
}

fn evidence_counted(conn: &mut StoreConn) {
    assert_eq!(count_evidence(conn).unwrap(), 0);
    let a = store(conn, &add("u1", "a", "s1", &["one"]));
    let b = store(conn, &add("u1", "b", "s2", &["two"]));
    upsert_session(conn, record("u1", "s1", a, 1).row()).unwrap();
    upsert_session(
        conn,
        StoredSession {
            record_json: "{\"task\":\"no evidence\"}".to_string(),
            ..record("u1", "s2", b, 1)
        }
        .row(),
    )
    .unwrap();
    assert_eq!(count_evidence(conn).unwrap(), 2);
}

/// A record that compresses as real ones do: evidence repeating text.
fn large_record(user: &str, session: &str, last_seq: i64) -> StoredSession {
    let evidence = vec![
        r#"{"kind":"trace","text":"Traceback (most recent call last): File \"app.py\", line 3"}"#;
        50
    ]
    .join(",");
    StoredSession {
        record_json: format!(r#"{{"task":"{session}","evidence":[{evidence}]}}"#),
        diagnostics_json: format!("[{}]", [r#""unparsed hunk header""#; 10].join(",")),
        ..record(user, session, last_seq, 10)
    }
}

/// Bytes the store holds for a session's record.
fn stored_record_bytes(conn: &StoreConn, session_id: &str) -> i64 {
    let sql = format!(
        "SELECT CAST(length(record_json) AS BIGINT) FROM sessions WHERE session_id = '{session_id}'"
    );
    match conn {
        StoreConn::Sqlite(sqlite) => sqlite.query_row(&sql, [], |row| row.get(0)).unwrap(),
        StoreConn::Postgres(pg) => pg.query_i64(&sql).unwrap(),
    }
}

/// Writes a session row as precedent did before records were compressed:
/// the JSON text itself (TEXT in SQLite; in PostgreSQL the column's type
/// is that of the schema, `as_text` for versions before 7).
fn insert_plain_record(conn: &StoreConn, session: &StoredSession, as_text: bool) {
    let (record, diagnostics) = (&session.record_json, &session.diagnostics_json);
    assert!(!record.contains('\'') && !diagnostics.contains('\''));
    let sql = |record: String, diagnostics: String| {
        format!(
            "INSERT INTO sessions (user_id, session_id, record_json, diagnostics_json,
                 num_messages, last_seq, updated_at_ms, extractor_version)
             VALUES ('{}', '{}', {record}, {diagnostics}, {}, {}, {}, {})",
            session.user_id,
            session.session_id,
            session.num_messages,
            session.last_seq,
            session.updated_at_ms,
            session.extractor_version
        )
    };
    match conn {
        StoreConn::Sqlite(sqlite) => {
            sqlite
                .execute_batch(&sql(format!("'{record}'"), format!("'{diagnostics}'")))
                .unwrap();
            let kind: String = sqlite
                .query_row(
                    "SELECT typeof(record_json) FROM sessions WHERE session_id = ?1",
                    [session.session_id.as_str()],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(kind, "text");
        }
        StoreConn::Postgres(pg) if as_text => pg
            .batch(&sql(format!("'{record}'"), format!("'{diagnostics}'")))
            .unwrap(),
        StoreConn::Postgres(pg) => pg
            .batch(&sql(
                format!("convert_to('{record}', 'UTF8')"),
                format!("convert_to('{diagnostics}', 'UTF8')"),
            ))
            .unwrap(),
    }
}

fn records_stored_compressed_and_old_rows_read(conn: &mut StoreConn) {
    let seq = store(conn, &add("u1", "a", "s1", &["one"]));
    let large = large_record("u1", "s1", seq);
    upsert_session(conn, large.row()).unwrap();
    assert_eq!(
        session(conn, &uid("u1"), &sid("s1")).unwrap(),
        Some(large.clone())
    );
    assert_eq!(
        sessions_of_user(conn, &uid("u1"), None, 100).unwrap(),
        vec![large.clone()]
    );
    let stored = stored_record_bytes(conn, "s1");
    assert!(
        stored * 4 < large.record_json.len() as i64,
        "{stored} bytes stored for {} of JSON",
        large.record_json.len()
    );

    // A row written before records were compressed reads as it was, and
    // is compressed when its record is stored again.
    let old_seq = store(conn, &add("u1", "b", "s-old", &["two"]));
    let old = large_record("u1", "s-old", old_seq);
    insert_plain_record(conn, &old, false);
    assert_eq!(
        stored_record_bytes(conn, "s-old"),
        old.record_json.len() as i64
    );
    assert_eq!(
        session(conn, &uid("u1"), &sid("s-old")).unwrap(),
        Some(old.clone())
    );
    assert_eq!(
        sessions_changed_between(conn, 0, old_seq).unwrap(),
        vec![large.clone(), old.clone()]
    );
    assert_eq!(count_evidence(conn).unwrap(), 100);
    upsert_session(conn, old.row()).unwrap();
    assert!(stored_record_bytes(conn, "s-old") * 4 < old.record_json.len() as i64);
    assert_eq!(session(conn, &uid("u1"), &sid("s-old")).unwrap(), Some(old));
    assert_eq!(count_evidence(conn).unwrap(), 100);
}

fn records_of_schema_6_read_after_migration(conn: &mut StoreConn) {
    let seq = store(conn, &add("u1", "a", "s1", &["one"]));
    let old = large_record("u1", "s1", seq);
    // The store as version 6 left it.
    let reopened = match &*conn {
        StoreConn::Sqlite(sqlite) => {
            sqlite.pragma_update(None, "user_version", 6).unwrap();
            insert_plain_record(conn, &old, true);
            let dir = std::path::Path::new(sqlite.path().expect("file database"))
                .parent()
                .expect("data dir")
                .to_path_buf();
            open_writer(&dir).expect("migrate")
        }
        StoreConn::Postgres(pg) => {
            pg.batch(
                "ALTER TABLE sessions
                    ALTER COLUMN record_json TYPE TEXT USING convert_from(record_json, 'UTF8'),
                    ALTER COLUMN diagnostics_json TYPE TEXT
                        USING convert_from(diagnostics_json, 'UTF8');
                 UPDATE schema_version SET version = 6",
            )
            .unwrap();
            insert_plain_record(conn, &old, true);
            let url = postgres_url("records_of_schema_6_read_after_migration").expect("url");
            let schema = current_schema(conn);
            StoreConn::Postgres(Box::new(
                postgres::PgConn::open(&url, Some(&schema), true).expect("migrate"),
            ))
        }
    };
    assert_eq!(
        session(&reopened, &uid("u1"), &sid("s1")).unwrap(),
        Some(old.clone())
    );
    assert_eq!(count_evidence(&reopened).unwrap(), 50);
    let replaced = StoredSession {
        updated_at_ms: 20,
        ..old
    };
    upsert_session(&reopened, replaced.row()).unwrap();
    assert!(stored_record_bytes(&reopened, "s1") * 4 < replaced.record_json.len() as i64);
    assert_eq!(
        session(&reopened, &uid("u1"), &sid("s1")).unwrap(),
        Some(replaced)
    );
}

fn long_messages_read_back_whole_and_by_prefix(conn: &mut StoreConn) {
    let long = "fünf ünïcödé Traceback (most recent call last)\n".repeat(200);
    let like_zlib = format!("x = parse_config(path)\n{}", "y = 1\n".repeat(100));
    let seq = store(conn, &add("u1", "a", "s1", &[&long, "short", &like_zlib]));
    // As stored before content was compressed: the text itself, here one
    // that starts with the zlib header's byte.
    let old = format!("x{}", "old plain content ".repeat(50));
    let sql = format!(
        "INSERT INTO messages (seq, user_id, session_id, message_index, role, content)
         VALUES ({seq}, 'u1', 's1', 3, 'user', '{old}')"
    );
    match &*conn {
        StoreConn::Sqlite(sqlite) => sqlite.execute_batch(&sql).unwrap(),
        StoreConn::Postgres(pg) => pg.batch(&sql).unwrap(),
    }
    let expected = [long.as_str(), "short", like_zlib.as_str(), old.as_str()];

    let session = session_messages(conn, &uid("u1"), &sid("s1")).unwrap();
    let contents: Vec<&str> = session.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, expected);
    let contents: Vec<String> = messages_after(conn, 0, 10)
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(contents, expected);
    for message in &session {
        let found = messages_of_add_in(
            conn,
            &uid("u1"),
            message.seq,
            message.message_index,
            message.message_index + 1,
        )
        .unwrap();
        assert_eq!(found, vec![message.clone()]);
    }
    let ids: Vec<i64> = session.iter().map(|m| m.message_id).collect();
    if let StoreConn::Sqlite(sqlite) = &*conn {
        let stored: i64 = sqlite
            .query_row(
                "SELECT length(content) FROM messages WHERE message_id = ?1",
                [ids[0]],
                |row| row.get(0),
            )
            .unwrap();
        assert!(stored * 10 < long.len() as i64, "{stored} bytes stored");
    }
}

#[test]
fn the_sqlite_log_is_cut_back_after_a_big_write_is_checkpointed() {
    let backend = sqlite();
    let StoreConn::Sqlite(conn) = &backend.conn else {
        unreachable!("sqlite")
    };
    let wal = std::path::PathBuf::from(format!("{}-wal", conn.path().expect("file database")));
    conn.execute_batch(
        "CREATE TABLE scratch (bytes BLOB);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 24)
         INSERT INTO scratch SELECT randomblob(1048576) FROM n;",
    )
    .unwrap();
    let after_write = std::fs::metadata(&wal).unwrap().len();
    assert!(after_write > 24 << 20, "{after_write} bytes of log");
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        .unwrap();
    // The next write starts the log again, and cuts the file back.
    conn.execute_batch("DELETE FROM scratch").unwrap();
    let after_next = std::fs::metadata(&wal).unwrap().len();
    assert!(after_next <= 17 << 20, "{after_next} bytes of log");
}

#[test]
fn redacts_passwords() {
    assert_eq!(
        postgres::redact("postgres://precedent:s3cr%40t@db.example:5432/precedent"),
        "postgres://precedent:***@db.example:5432/precedent"
    );
    assert_eq!(
        postgres::redact("postgresql://u@host/db?sslmode=disable&password=hunter2"),
        "postgresql://u@host/db?sslmode=disable&password=***"
    );
    assert_eq!(
        postgres::redact("host=db user=u password='a b c' dbname=x"),
        "host=db user=u password=*** dbname=x"
    );
    assert_eq!(
        postgres::redact("postgres://u@host/db"),
        "postgres://u@host/db"
    );
}

#[test]
fn unreachable_postgres_is_a_clear_error_without_the_password() {
    // Port 1 on loopback: nothing listens, the connection is refused.
    let error = postgres::PgConn::open("postgres://u:topsecret@127.0.0.1:1/db", None, true)
        .err()
        .expect("no server there");
    let message = error.to_string();
    assert!(!message.contains("topsecret"), "{message}");
    assert!(
        message.contains("postgres://u:***@127.0.0.1:1/db"),
        "{message}"
    );
    // The reason under the driver's "error connecting to server".
    assert!(message.to_lowercase().contains("refused"), "{message}");
}

#[test]
fn postgres_commit_after_a_failed_statement_rolls_back() {
    let Some(mut backend) = postgres("commit_after_failure") else {
        return;
    };
    let StoreConn::Postgres(pg) = &mut backend.conn else {
        unreachable!("a PostgreSQL backend");
    };
    let request = add("u1", "r1", "s1", &["hello"]);
    let tx = pg.begin(false).unwrap();
    postgres::admit(pg, &request, &request.body_sha256(), 1).unwrap();
    assert!(pg.batch("SELECT no_such_column FROM requests").is_err());
    assert!(matches!(tx.commit(), Err(StoreError::TransactionAborted)));
    assert_eq!(last_seq(&backend.conn).unwrap(), 0);
    // The connection is usable again.
    store(&mut backend.conn, &request);
    assert!(last_seq(&backend.conn).unwrap() > 0);
}

#[test]
fn a_store_location_is_sqlite_by_default_or_a_postgres_url() {
    let dir = std::path::Path::new("/data/precedent");
    for given in [None, Some(""), Some("  "), Some("sqlite"), Some("SQLite")] {
        assert_eq!(
            StoreLocation::parse(given, dir).unwrap(),
            StoreLocation::Sqlite(dir.to_path_buf()),
            "{given:?}"
        );
    }
    let url = "postgres://precedent:s3cret@db.example/precedent";
    let location = StoreLocation::parse(Some(url), dir).unwrap();
    assert_eq!(location, StoreLocation::Postgres(url.to_string()));
    assert_eq!(location.backend(), "postgres");
    assert!(location.has_password());
    assert_eq!(
        location.describe(),
        "postgres://precedent:***@db.example/precedent"
    );
    assert!(!format!("{location:?}").contains("s3cret"));
    let without = StoreLocation::parse(Some("postgresql://precedent@db/precedent"), dir).unwrap();
    assert!(!without.has_password());
    assert_eq!(
        StoreLocation::Sqlite(dir.to_path_buf()).describe(),
        "/data/precedent/precedent.sqlite3"
    );
    let unknown = StoreLocation::parse(Some("mysql://u:pw@host/db"), dir).expect_err("refused");
    assert!(unknown.to_string().contains("postgres://"), "{unknown}");
    assert!(!unknown.to_string().contains("pw@"), "{unknown}");
}

#[test]
fn a_closed_postgres_connection_is_broken_and_its_errors_mean_unavailable() {
    let Some(backend) = postgres("closed_connection") else {
        return;
    };
    assert!(!backend.conn.is_broken());
    let StoreConn::Postgres(pg) = &backend.conn else {
        unreachable!("a PostgreSQL backend");
    };
    // The server ends this session, as a restart would.
    let error = pg
        .batch("SELECT pg_terminate_backend(pg_backend_pid())")
        .expect_err("the session is gone");
    assert!(error.is_unavailable(), "{error}");
    let error = last_seq(&backend.conn).expect_err("closed");
    assert!(error.is_unavailable(), "{error}");
    assert!(backend.conn.is_broken());
    // A statement that fails on a live connection is not unavailability.
    let Some(live) = postgres("live_connection") else {
        return;
    };
    let StoreConn::Postgres(pg) = &live.conn else {
        unreachable!("a PostgreSQL backend");
    };
    let error = pg
        .batch("SELECT no_such_column FROM requests")
        .expect_err("fails");
    assert!(!error.is_unavailable(), "{error}");
}

/// A second connection to a PostgreSQL backend's schema, as another
/// process would open it.
fn second_connection(backend: &Backend) -> StoreConn {
    let (url, schema) = backend.schema.clone().expect("a PostgreSQL backend");
    StoreConn::Postgres(Box::new(
        postgres::PgConn::open(&url, Some(&schema), false).expect("second connection"),
    ))
}

/// Whether `finished` hears nothing for a moment: the other writer waits.
fn still_waiting(finished: &std::sync::mpsc::Receiver<i64>) -> bool {
    matches!(
        finished.recv_timeout(std::time::Duration::from_millis(300)),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
    )
}

#[test]
fn postgres_writers_of_two_processes_commit_in_sequence_order() {
    let Some(mut first) = postgres("sequence_order") else {
        return;
    };
    let mut second = second_connection(&first);
    let reader = second_connection(&first);
    let a = add("u1", "a", "s1", &["first writer"]);
    let tx = first.conn.transaction().unwrap();
    let Admission::Inserted { seq: seq_a } = admit(&tx, &a, &a.body_sha256(), 1).unwrap() else {
        panic!("a new Add");
    };
    // A second writer (another session, another process) takes the next
    // sequence number only once the first has committed.
    let (finished, heard) = std::sync::mpsc::channel();
    let other = std::thread::spawn(move || {
        let b = add("u2", "b", "s2", &["second writer"]);
        let seq = store(&mut second, &b);
        finished.send(seq).unwrap();
    });
    assert!(still_waiting(&heard), "the second writer did not wait");
    assert!(messages_after(&reader, 0, 10).unwrap().is_empty());
    tx.commit().unwrap();
    let seq_b = heard
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    other.join().unwrap();
    assert!(seq_b > seq_a);
    let seqs: Vec<i64> = messages_after(&reader, 0, 10)
        .unwrap()
        .iter()
        .map(|message| message.seq)
        .collect();
    assert_eq!(seqs, vec![seq_a, seq_b]);
}

#[test]
fn postgres_session_locks_hold_a_sessions_checks_until_commit() {
    let Some(mut first) = postgres("session_locks") else {
        return;
    };
    let mut second = second_connection(&first);
    let tx = first.conn.transaction().unwrap();
    let held = key("u1", "s1");
    lock_sessions(&tx, &[(&held.user_id, &held.session_id)]).unwrap();
    // The first writer reads the session and stores an Add to it.
    assert_eq!(session_last_seq(&tx, &uid("u1"), &sid("s1")).unwrap(), 0);
    let a = add("u1", "a", "s1", &["one"]);
    let Admission::Inserted { seq } = admit(&tx, &a, &a.body_sha256(), 1).unwrap() else {
        panic!("a new Add");
    };
    upsert_session(&tx, record("u1", "s1", seq, 1).row()).unwrap();
    let (finished, heard) = std::sync::mpsc::channel();
    let other = std::thread::spawn(move || {
        let tx = second.transaction().unwrap();
        // Another session of the same user is not held up.
        lock_sessions(&tx, &[(&uid("u1"), &sid("s0"))]).unwrap();
        lock_sessions(&tx, &[(&uid("u1"), &sid("s1"))]).unwrap();
        // Past the lock, the other process's Add is visible.
        let last = session_last_seq(&tx, &uid("u1"), &sid("s1")).unwrap();
        tx.commit().unwrap();
        finished.send(last).unwrap();
    });
    assert!(still_waiting(&heard), "the second writer did not wait");
    tx.commit().unwrap();
    let seen = heard
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    other.join().unwrap();
    assert_eq!(seen, seq);
}

#[test]
fn an_unreadable_record_is_a_corrupt_error_naming_its_session() {
    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Task {
        task: String,
    }
    let readable = record("u1", "s1", 1, 1);
    assert_eq!(
        readable.record::<Task>().unwrap(),
        Task {
            task: "s1".to_string()
        }
    );
    assert_eq!(
        readable.diagnostics::<Vec<String>>().unwrap(),
        Vec::<String>::new()
    );
    for record_json in ["", "{\"renamed_task\":\"old\"}", "{not json"] {
        let damaged = StoredSession {
            record_json: record_json.to_string(),
            ..record("u1", "s-damaged", 1, 1)
        };
        match damaged.record::<Task>() {
            Err(StoreError::Corrupt(reason)) => {
                assert!(reason.contains("s-damaged"), "{reason}");
            }
            other => panic!("{record_json:?} read as {other:?}"),
        }
    }
}
