//! The write path: the per-session size limit, Adds of one session racing
//! each other (records derived before the writer, checked and derived again
//! when another Add landed first), and records of an older extractor
//! derived again at start-up while searches answer.

use axum::http::StatusCode;
use serde_json::json;

use precedent::{Clock, IngestMessage, Role, extract_session};

use crate::support::{ServerProcess, TestApp, add_body, data_dir, reason};

/// Every stored message of a session in order, and its stored record.
fn stored_session(
    data_dir: &std::path::Path,
    user_id: &str,
    session_id: &str,
) -> (Vec<(Role, String)>, String, i64) {
    let conn = rusqlite::Connection::open(data_dir.join("precedent.sqlite3")).expect("store");
    let mut statement = conn
        .prepare(
            "SELECT role, content FROM messages WHERE user_id = ?1 AND session_id = ?2
             ORDER BY seq, message_index",
        )
        .expect("prepare");
    let messages = statement
        .query_map([user_id, session_id], |row| {
            let role: String = row.get(0)?;
            Ok((
                Role::parse(&role).expect("role"),
                stored_text(row.get_ref(1)?),
            ))
        })
        .expect("query")
        .collect::<Result<Vec<(Role, String)>, _>>()
        .expect("rows");
    let (record_json, num_messages): (String, i64) = conn
        .query_row(
            "SELECT record_json, num_messages FROM sessions WHERE user_id = ?1 AND session_id = ?2",
            [user_id, session_id],
            |row| Ok((stored_text(row.get_ref(0)?), row.get(1)?)),
        )
        .expect("record");
    (messages, record_json, num_messages)
}

/// A stored record or message: the text itself, or a zlib stream of it (a
/// BLOB), as the store writes all but short ones.
fn stored_text(value: rusqlite::types::ValueRef<'_>) -> String {
    use std::io::Read;
    match value {
        rusqlite::types::ValueRef::Text(text) => String::from_utf8(text.to_vec()).expect("utf-8"),
        rusqlite::types::ValueRef::Blob(compressed) => {
            let mut json = String::new();
            flate2::read::ZlibDecoder::new(compressed)
                .read_to_string(&mut json)
                .expect("zlib stream");
            json
        }
        other => panic!("text stored as {:?}", other.data_type()),
    }
}

fn derived_json(messages: &[(Role, String)]) -> String {
    let inputs = IngestMessage::in_order(
        messages
            .iter()
            .map(|(role, content)| (*role, content.as_str())),
    );
    serde_json::to_string(&extract_session(&inputs, Clock::Wall(std::time::Instant::now)).0)
        .expect("json")
}

#[tokio::test]
async fn an_add_past_the_session_limit_gets_413_and_nothing_of_it_is_stored() {
    let app = TestApp::with_service(
        |options| options.max_session_bytes = 1_000,
        Default::default(),
    );
    let first = "limitfirst ".repeat(40);
    let (status, body) = app
        .add(&add_body("r1", "u", "s", &[&first, "short reply"]))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The second Add would take the session past 1,000 bytes.
    let second = format!("limitsecond {}", "x".repeat(600));
    let (status, body) = app.add(&add_body("r2", "u", "s", &[&second, "more"])).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let why = reason(&body);
    assert!(why.contains("1000"), "the limit is named: {why}");
    assert!(app.search("u", "limitsecond", 10).await.is_empty());
    let (messages, record_json, num_messages) = stored_session(app.dir.path(), "u", "s");
    assert_eq!(messages.len(), 2, "only the first Add's messages");
    assert_eq!(num_messages, 2);
    assert_eq!(record_json, derived_json(&messages));

    // One Add alone past the limit, in a fresh session: nothing stored.
    let (status, body) = app
        .add(&add_body("r3", "u", "other", &[&"y".repeat(1_200)]))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let conn = rusqlite::Connection::open(app.dir.path().join("precedent.sqlite3")).expect("store");
    let stored: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM requests WHERE session_id = 'other'",
            [],
            |row| row.get(0),
        )
        .expect("count");
    assert_eq!(stored, 0);

    // Within the limit, the session still takes Adds.
    let (status, body) = app.add(&add_body("r4", "u", "s", &["tiny"])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_adds_of_one_session_all_land_in_its_record() {
    let app = std::sync::Arc::new(TestApp::new());
    let tasks: Vec<_> = (0..8)
        .map(|client| {
            let app = std::sync::Arc::clone(&app);
            tokio::spawn(async move {
                for round in 0..4 {
                    let body = add_body(
                        &format!("r{client}-{round}"),
                        "u",
                        "shared",
                        &[
                            &format!("racemark{client}x{round} in src/app_{client}.py"),
                            &format!("Traceback (most recent call last):\n  File \"src/app_{client}.py\", line {round}, in run_{client}\nValueError: bad {client}"),
                        ],
                    );
                    let (status, body) = app.add(&body).await;
                    assert_eq!(status, StatusCode::OK, "{body}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("client");
    }
    let (messages, record_json, num_messages) = stored_session(app.dir.path(), "u", "shared");
    assert_eq!(messages.len(), 64);
    assert_eq!(num_messages, 64, "the record includes every Add");
    assert_eq!(
        record_json,
        derived_json(&messages),
        "the record is the derivation of all the session's messages"
    );
}

#[test]
fn records_of_an_older_extractor_are_derived_again_at_start_up_while_search_answers() {
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &[]);
    for index in 0..6 {
        let body = add_body(
            &format!("r{index}"),
            "u",
            &format!("s{index}"),
            &[
                &format!("upgrademark{index}q fix parse_config in config.py"),
                "done",
            ],
        );
        assert_eq!(server.request("POST", "/add", Some(&body)).0, 200);
    }
    assert_eq!(server.terminate(), Some(0));

    // As an older precedent left it: records of extractor version 0, one of
    // them in a shape this build cannot read, and no index.
    let conn = rusqlite::Connection::open(dir.join("precedent.sqlite3")).expect("store");
    conn.execute("UPDATE sessions SET extractor_version = 0", [])
        .expect("age records");
    conn.execute(
        "UPDATE sessions SET record_json = '{\"renamed_task\": \"old\"}' WHERE session_id = 's3'",
        [],
    )
    .expect("old shape");
    drop(conn);
    std::fs::remove_dir_all(dir.join("index")).expect("remove index");

    let server = ServerProcess::start(&dir, &[]);
    // Search answers at once, every session included.
    for index in 0..6 {
        let (status, body) = server.request(
            "POST",
            "/search",
            Some(&json!({"query": format!("upgrademark{index}q"), "user_id": "u", "top_k": 10})),
        );
        assert_eq!(status, 200, "{body}");
        assert!(
            body["data"]
                .as_array()
                .expect("data")
                .iter()
                .any(|item| item["session_id"] == format!("s{index}")),
            "s{index} is searchable: {body}"
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let conn = rusqlite::Connection::open(dir.join("precedent.sqlite3")).expect("store");
        let outdated: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sessions WHERE extractor_version < ?1",
                [precedent::EXTRACTOR_VERSION],
                |row| row.get(0),
            )
            .expect("count");
        if outdated == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{outdated} records still outdated"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let stderr = server.stderr();
    assert!(
        stderr
            .iter()
            .any(|line| line.contains("derived again in the background")),
        "{stderr:?}"
    );
    let (messages, record_json, _) = stored_session(&dir, "u", "s3");
    assert_eq!(
        record_json,
        derived_json(&messages),
        "the unreadable record was derived again"
    );
    assert_eq!(server.terminate(), Some(0));
}

#[test]
fn resumed_extraction_equals_extraction_of_the_whole_over_dev_sessions() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/incremental");
    let report = precedent::bench_check_incremental(&fixture, 3, 0x5eed).expect("check");
    assert_eq!(report.num_sessions, 39);
    assert!(report.num_chunks > 3 * report.num_sessions);
    assert_eq!(
        report.num_mismatches, 0,
        "resumed records differ: {:?}",
        report.mismatch_examples
    );
}

#[tokio::test]
async fn an_add_to_a_session_extends_its_kept_state_into_the_full_record() {
    let app = TestApp::new();
    let turns = [
        "Fix parse_config in config.py: it fails on empty files",
        "```bash\npython -m pytest tests/test_config.py\n```",
        "Traceback (most recent call last):\n  File \"config.py\", line 3, in parse_config\nValueError: empty",
        "--- a/config.py\n+++ b/config.py\n@@ -1,3 +1,4 @@\n def parse_config(text):\n+    if not text:\n+        return {}\n     return load(text)\n",
        "1 passed",
        "Done: parse_config returns an empty mapping for empty files.",
    ];
    for (index, turn) in turns.iter().enumerate() {
        let role = if index % 2 == 0 { "user" } else { "assistant" };
        let body = json!({
            "request_id": format!("r{index}"),
            "user_id": "u",
            "session_id": "s",
            "messages": [{"role": role, "content": turn}],
        });
        let (status, body) = app.add(&body).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (messages, record_json, num_messages) = stored_session(app.dir.path(), "u", "s");
        assert_eq!(num_messages, index as i64 + 1);
        assert_eq!(record_json, derived_json(&messages), "after Add {index}");
    }
}

/// Messages and session records in the store, and documents in the index
/// (`/health`), of a data directory a server holds.
fn store_and_index_counts(server: &ServerProcess, data_dir: &std::path::Path) -> (i64, u64) {
    let conn = rusqlite::Connection::open(data_dir.join("precedent.sqlite3")).expect("store");
    let stored: i64 = conn
        .query_row(
            "SELECT (SELECT COUNT(*) FROM messages) + (SELECT COUNT(*) FROM sessions)",
            [],
            |row| row.get(0),
        )
        .expect("count");
    let (status, health) = server.request("GET", "/health", None);
    assert_eq!(status, 200);
    (stored, health["num_docs"].as_u64().expect("num_docs"))
}

/// A big Add: `count` messages of about 50 KB, each with its own marker.
fn big_add_body(
    request_id: &str,
    user_id: &str,
    session_id: &str,
    count: usize,
) -> serde_json::Value {
    let filler = "def handler(request):\n    return respond(request.body)\n".repeat(900);
    let contents: Vec<String> = (0..count)
        .map(|index| format!("bigmark{index:03}q {session_id}\n{filler}"))
        .collect();
    let refs: Vec<&str> = contents.iter().map(String::as_str).collect();
    add_body(request_id, user_id, session_id, &refs)
}

#[test]
fn a_big_add_is_indexed_in_slices_while_other_adds_are_answered() {
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &[]);
    let address = server.address;
    let (big_status, small_statuses) = std::thread::scope(|scope| {
        let big = scope.spawn(|| {
            crate::support::http_request(
                address,
                "POST",
                "/add",
                Some(&big_add_body("big", "u-big", "big-session", 40)),
                &[],
            )
            .0
        });
        let small: Vec<u16> = (0..20)
            .map(|index| {
                crate::support::http_request(
                    address,
                    "POST",
                    "/add",
                    Some(&add_body(
                        &format!("small-{index}"),
                        "u-small",
                        &format!("s{}", index % 3),
                        &[&format!("smallmark{index:02}q beside a big add")],
                    )),
                    &[],
                )
                .0
            })
            .collect();
        (big.join().expect("big"), small)
    });
    assert_eq!(big_status, 200);
    assert!(
        small_statuses.iter().all(|status| *status == 200),
        "{small_statuses:?}"
    );
    let (stored, indexed) = store_and_index_counts(&server, &dir);
    assert_eq!(
        indexed as i64, stored,
        "one document per message and session"
    );
    for index in [0, 19] {
        let (status, body) = server.request(
            "POST",
            "/search",
            Some(&json!({"query": format!("smallmark{index:02}q"), "user_id": "u-small", "top_k": 5})),
        );
        assert_eq!(status, 200, "{body}");
        assert!(
            body["data"]
                .as_array()
                .expect("data")
                .iter()
                .any(|item| item["content"]
                    .as_str()
                    .is_some_and(|content| content.contains(&format!("smallmark{index:02}q")))),
            "{body}"
        );
    }
    let conn = rusqlite::Connection::open(dir.join("precedent.sqlite3")).expect("store");
    let big_messages: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM messages WHERE session_id = 'big-session'",
            [],
            |row| row.get(0),
        )
        .expect("count");
    assert_eq!(big_messages, 40);
    assert_eq!(server.terminate(), Some(0));
}

#[test]
fn a_kill_while_a_big_add_is_indexed_in_slices_loses_and_duplicates_nothing() {
    let (_guard, dir) = data_dir();
    for cycle in 0..3u64 {
        let server = ServerProcess::start(&dir, &[]);
        let address = server.address;
        let sender = std::thread::spawn(move || {
            crate::support::try_post(
                address,
                "/add",
                &big_add_body(&format!("big-{cycle}"), "u", &format!("big-{cycle}"), 60),
            )
        });
        std::thread::sleep(std::time::Duration::from_millis(150 + cycle * 250));
        server.kill();
        let _ = sender.join();
    }
    let server = ServerProcess::start(&dir, &[]);
    let (stored, indexed) = store_and_index_counts(&server, &dir);
    assert_eq!(
        indexed as i64, stored,
        "after kills mid-Add: one document per message and session"
    );
    // Every stored request has all of its messages.
    let conn = rusqlite::Connection::open(dir.join("precedent.sqlite3")).expect("store");
    let partial: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM requests r WHERE (SELECT COUNT(*) FROM messages m WHERE m.seq = r.seq) != r.num_messages",
            [],
            |row| row.get(0),
        )
        .expect("query");
    assert_eq!(partial, 0);
    assert_eq!(server.terminate(), Some(0));
}

#[test]
fn a_retry_of_a_big_add_sent_while_it_is_indexed_is_answered_once_it_is_searchable() {
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &[]);
    let address = server.address;
    let body = big_add_body("big-retried", "u", "retried", 40);
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let body = &body;
                scope.spawn(move || {
                    crate::support::http_request(address, "POST", "/add", Some(body), &[]).0
                })
            })
            .collect();
        senders
            .into_iter()
            .map(|sender| sender.join().expect("sender"))
            .collect()
    });
    assert_eq!(statuses, vec![200, 200]);
    let (stored, indexed) = store_and_index_counts(&server, &dir);
    assert_eq!(indexed as i64, stored, "stored and indexed once");
    let (_, health) = server.request("GET", "/health", None);
    assert_eq!(
        health["indexed_seq"], 1,
        "answered after the last slice: {health}"
    );
    assert_eq!(server.terminate(), Some(0));
}
