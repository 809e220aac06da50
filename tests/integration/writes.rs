//! The write path: the per-session size limit, Adds of one session racing
//! each other (records derived before the writer, checked and derived again
//! when another Add landed first), and records of an older extractor
//! derived again at start-up while searches answer.

use axum::http::StatusCode;
use serde_json::json;

use codemem::domain::Role;
use codemem::ingest::{self, IngestMessage};

use crate::support::{ServerProcess, TestApp, add_body, data_dir, reason};

/// Every stored message of a session in order, and its stored record.
fn stored_session(
    data_dir: &std::path::Path,
    user_id: &str,
    session_id: &str,
) -> (Vec<(Role, String)>, String, i64) {
    let conn = rusqlite::Connection::open(data_dir.join("codemem.sqlite3")).expect("store");
    let mut statement = conn
        .prepare(
            "SELECT role, content FROM messages WHERE user_id = ?1 AND session_id = ?2
             ORDER BY seq, message_index",
        )
        .expect("prepare");
    let messages = statement
        .query_map([user_id, session_id], |row| {
            let role: String = row.get(0)?;
            Ok((Role::parse(&role).expect("role"), row.get(1)?))
        })
        .expect("query")
        .collect::<Result<Vec<(Role, String)>, _>>()
        .expect("rows");
    let (record_json, num_messages): (String, i64) = conn
        .query_row(
            "SELECT record_json, num_messages FROM sessions WHERE user_id = ?1 AND session_id = ?2",
            [user_id, session_id],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("record");
    (messages, record_json, num_messages)
}

fn derived_json(messages: &[(Role, String)]) -> String {
    let inputs = IngestMessage::in_order(
        messages
            .iter()
            .map(|(role, content)| (*role, content.as_str())),
    );
    serde_json::to_string(&ingest::extract_session(&inputs).0).expect("json")
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
    let conn = rusqlite::Connection::open(app.dir.path().join("codemem.sqlite3")).expect("store");
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

    // As an older codemem left it: records of extractor version 0, one of
    // them in a shape this build cannot read, and no index.
    let conn = rusqlite::Connection::open(dir.join("codemem.sqlite3")).expect("store");
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
        let conn = rusqlite::Connection::open(dir.join("codemem.sqlite3")).expect("store");
        let outdated: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sessions WHERE extractor_version < ?1",
                [codemem::service::EXTRACTOR_VERSION],
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
