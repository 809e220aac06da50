//! Listings in pages (`GET /v1/sessions`, `GET /v1/users`) against the
//! real binary: a walk by cursor gives each item once, in the order of the
//! whole list; bad limits and cursors are refused with a reason.

use serde_json::Value;

use crate::support::{ServerProcess, add_body, data_dir, reason};

fn ids(page: &Value, key: &str) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data in {page}"))
        .iter()
        .map(|item| item[key].as_str().expect("id").to_string())
        .collect()
}

/// Every page of `path` (which holds a `limit`) by cursor.
fn walk(server: &ServerProcess, path: &str, key: &str) -> Vec<Vec<String>> {
    walk_from(server, path, key, None)
}

/// Every page of `path` by cursor from `cursor` on.
fn walk_from(
    server: &ServerProcess,
    path: &str,
    key: &str,
    mut cursor: Option<String>,
) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    loop {
        let url = match &cursor {
            Some(cursor) => format!("{path}&cursor={cursor}"),
            None => path.to_string(),
        };
        let (status, page) = server.request("GET", &url, None);
        assert_eq!(status, 200, "{url}: {page}");
        pages.push(ids(&page, key));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => {
                assert!(page["next_cursor"].is_null(), "{page}");
                return pages;
            }
        }
        assert!(pages.len() < 100, "the walk never ends");
    }
}

#[test]
fn sessions_are_listed_in_pages_each_once() {
    let (_dir, path) = data_dir();
    let server = ServerProcess::start(&path, &[]);
    for index in 0..23 {
        let body = add_body(
            &format!("r{index}"),
            "paged",
            &format!("s{index:02}"),
            &[&format!("Fix the parser bug number {index}")],
        );
        assert_eq!(server.request("POST", "/v1/add", Some(&body)).0, 200);
    }
    // Another user's sessions never appear in this user's pages.
    let other = add_body("o", "other", "s-other", &["Fix the other bug"]);
    assert_eq!(server.request("POST", "/v1/add", Some(&other)).0, 200);

    // One page of the default limit holds them all, most recent first.
    let (status, whole) = server.request("GET", "/v1/sessions?user_id=paged", None);
    assert_eq!(status, 200);
    let expected: Vec<String> = (0..23).rev().map(|index| format!("s{index:02}")).collect();
    assert_eq!(ids(&whole, "session_id"), expected);
    assert!(whole["next_cursor"].is_null(), "{whole}");

    let pages = walk(&server, "/v1/sessions?user_id=paged&limit=5", "session_id");
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![5, 5, 5, 5, 3]
    );
    assert_eq!(pages.concat(), expected);

    // A session updated during a walk moves to the front, behind the walk:
    // the rest of the walk neither repeats nor loses another session.
    let (_, first) = server.request("GET", "/v1/sessions?user_id=paged&limit=5", None);
    let cursor = first["next_cursor"].as_str().expect("cursor").to_string();
    let more = add_body(
        "r-again",
        "paged",
        "s20",
        &["Fix the parser bug number 20", "more"],
    );
    assert_eq!(server.request("POST", "/v1/add", Some(&more)).0, 200);
    let rest = walk_from(
        &server,
        "/v1/sessions?user_id=paged&limit=5",
        "session_id",
        Some(cursor),
    )
    .concat();
    assert_eq!(rest, expected[5..].to_vec());
}

#[test]
fn users_are_listed_in_pages() {
    let (_dir, path) = data_dir();
    let server = ServerProcess::start(&path, &[]);
    for user in ["ann", "bob", "cy"] {
        let body = add_body(&format!("r-{user}"), user, "s1", &["Fix the bug"]);
        assert_eq!(server.request("POST", "/v1/add", Some(&body)).0, 200);
    }
    let pages = walk(&server, "/v1/users?limit=2", "user_id");
    assert_eq!(pages, vec![vec!["cy", "bob"], vec!["ann"]]);
}

#[test]
fn bad_limits_and_cursors_are_refused_with_a_reason() {
    let (_dir, path) = data_dir();
    let server = ServerProcess::start(&path, &[]);
    let body = add_body("r", "u", "s", &["Fix the bug"]);
    assert_eq!(server.request("POST", "/v1/add", Some(&body)).0, 200);
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=10001", "limit"),
        ("limit=-3", "limit"),
        ("limit=ten", "limit"),
        ("limit=2&limit=3", "limit"),
        ("cursor=zz", "cursor"),
        ("cursor=3a", "cursor"),
    ] {
        for route in ["/v1/sessions?user_id=u&", "/v1/users?"] {
            let (status, answer) = server.request("GET", &format!("{route}{query}"), None);
            assert_eq!(status, 422, "{route}{query}: {answer}");
            let reason = reason(&answer);
            assert!(reason.contains(field), "{route}{query}: {reason}");
        }
    }
    // The largest limit is accepted.
    let (status, _) = server.request("GET", "/v1/sessions?user_id=u&limit=10000", None);
    assert_eq!(status, 200);
}

/// A session's messages, in pages, in session order: each once, none of
/// another session or user; a long message is cut and says how long it
/// was; a missing session_id is refused with a reason.
#[test]
fn a_sessions_messages_are_listed_in_pages() {
    let (_dir, path) = data_dir();
    let server = ServerProcess::start(&path, &[]);
    let long = "x".repeat(70_000);
    let adds = [
        add_body("r1", "u", "s", &["Fix the parser", "Looking at parse()"]),
        add_body("r-other", "u", "other", &["Another task"]),
        add_body("r-user", "v", "s", &["Another user's task"]),
        add_body("r2", "u", "s", &["pytest -q", &long]),
        add_body("r3", "u", "s", &["All tests pass"]),
    ];
    for body in &adds {
        assert_eq!(server.request("POST", "/v1/add", Some(body)).0, 200);
    }
    let pages = walk(
        &server,
        "/v1/messages?user_id=u&session_id=s&limit=2",
        "request_id",
    );
    assert_eq!(
        pages,
        vec![vec!["r1", "r1"], vec!["r2", "r2"], vec!["r3"]],
        "request ids by page"
    );
    let (status, whole) = server.request("GET", "/v1/messages?user_id=u&session_id=s", None);
    assert_eq!(status, 200, "{whole}");
    let messages = whole["data"].as_array().expect("data");
    let indexes: Vec<u64> = messages
        .iter()
        .map(|message| message["message_index"].as_u64().expect("index"))
        .collect();
    assert_eq!(indexes, vec![0, 1, 0, 1, 0]);
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[1]["content"], "Looking at parse()");
    assert_eq!(messages[3]["content_chars"], 70_000);
    assert_eq!(
        messages[3]["content"].as_str().expect("content").len(),
        65_536
    );
    assert!(whole["next_cursor"].is_null(), "{whole}");

    let (status, none) = server.request("GET", "/v1/messages?user_id=u&session_id=nope", None);
    assert_eq!(status, 200, "{none}");
    assert_eq!(none["data"], serde_json::json!([]));
    let (status, refused) = server.request("GET", "/v1/messages?user_id=u", None);
    assert_eq!(status, 422, "{refused}");
    assert!(reason(&refused).contains("session_id") || refused.to_string().contains("session_id"));
}
