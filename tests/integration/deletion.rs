//! User deletion in slices, against the real binary: other users' Adds go
//! on while a large user is deleted, an Add of the user being deleted is
//! answered and kept once the deletion is over, readers see nothing of the
//! user meanwhile, and the store's file gives the space back afterwards.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{ServerProcess, add_body, data_dir};

/// Adds `adds` sessions of `messages` messages each (about 400 bytes
/// each) for `user_id`.
fn fill(server: &ServerProcess, user_id: &str, adds: usize, messages: usize) {
    let text = "the parser drops the trailing comma of a nested table ".repeat(8);
    for add in 0..adds {
        let contents: Vec<String> = (0..messages)
            .map(|index| format!("{text} {index}"))
            .collect();
        let refs: Vec<&str> = contents.iter().map(String::as_str).collect();
        let body = add_body(&format!("fill-{add}"), user_id, &format!("s{add}"), &refs);
        let (status, answer) = server.request("POST", "/add", Some(&body));
        assert_eq!(status, 200, "{answer}");
    }
}

fn sessions_listed(server: &ServerProcess, user_id: &str) -> Vec<String> {
    let (status, page) = server.request("GET", &format!("/v1/sessions?user_id={user_id}"), None);
    assert_eq!(status, 200, "{page}");
    page["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|session| session["session_id"].as_str().map(str::to_string))
        .collect()
}

/// The store's bytes on disk: its file and its write-ahead log.
fn database_bytes(dir: &Path) -> u64 {
    ["precedent.sqlite3", "precedent.sqlite3-wal"]
        .iter()
        .filter_map(|name| std::fs::metadata(dir.join(name)).ok())
        .map(|metadata| metadata.len())
        .sum()
}

#[test]
fn a_large_deletion_leaves_other_writes_alone_and_gives_the_space_back() {
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &[]);
    fill(&server, "big", 40, 500);
    fill(&server, "kept", 1, 2);
    let before = database_bytes(&dir);

    let address = server.address;
    let deleting = std::thread::spawn(move || {
        crate::support::http_request(address, "DELETE", "/v1/users/big", None, &[])
    });
    // Meanwhile: Adds of another user, and one of the user being deleted.
    let mut others = Vec::new();
    for index in 0..20 {
        let body = add_body(
            &format!("during-{index}"),
            "kept",
            &format!("during-{index}"),
            &[&format!("written during the deletion {index}")],
        );
        let (status, answer) = server.request("POST", "/add", Some(&body));
        assert_eq!(status, 200, "{answer}");
        others.push(format!("during-{index}"));
    }
    let late = add_body("late", "big", "late", &["sent while the user was deleted"]);
    let (status, answer) = server.request("POST", "/add", Some(&late));
    assert_eq!(status, 200, "{answer}");

    let (status, deleted) = deleting.join().expect("delete thread");
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(
        deleted["deleted"],
        json!({"requests": 40, "messages": 20000, "sessions": 40}),
        "{deleted}"
    );
    // The late Add was answered, so it is kept: it came after the deletion.
    assert_eq!(sessions_listed(&server, "big"), vec!["late".to_string()]);
    let mut kept = sessions_listed(&server, "kept");
    kept.sort();
    let mut expected: Vec<String> = others;
    expected.push("s0".to_string());
    expected.sort();
    assert_eq!(kept, expected);
    let (status, found) = server.request(
        "POST",
        "/search",
        Some(
            &json!({"query": "parser trailing comma nested table", "user_id": "big", "top_k": 10}),
        ),
    );
    assert_eq!(status, 200, "{found}");
    assert!(
        found["data"]
            .as_array()
            .expect("data")
            .iter()
            .all(|item| !item["content"]
                .as_str()
                .unwrap_or("")
                .contains("nested table")),
        "{found}"
    );

    // The free pages go back to the file system a slice per turn, and the
    // files on disk shrink.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = database_bytes(&dir);
    while after * 2 > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after = database_bytes(&dir);
    }
    assert!(
        after * 2 <= before,
        "the database holds {after} bytes after the deletion, {before} before"
    );
    assert_eq!(server.terminate(), Some(0));
}

/// While a deletion is under way the user's sessions are not listed (the
/// state is built by hand: a pending deletion whose rows are still there,
/// read by `inspect`, which reads the store directly).
#[test]
fn a_user_being_deleted_is_not_listed() {
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &[]);
    fill(&server, "doomed", 2, 2);
    fill(&server, "kept", 1, 2);
    assert_eq!(server.terminate(), Some(0));
    let conn = rusqlite::Connection::open(dir.join("precedent.sqlite3")).expect("store");
    conn.execute(
        "INSERT INTO pending_user_deletions (user_id) VALUES ('doomed')",
        [],
    )
    .expect("pending");
    drop(conn);
    let inspect = |args: &[&str]| -> Value {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_precedent"))
            .arg("inspect")
            .arg("--data-dir")
            .arg(&dir)
            .args(args)
            .arg("--json")
            .output()
            .expect("inspect runs");
        serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "{error}: {} {}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        })
    };
    let sessions = inspect(&["--user-id", "doomed"]);
    assert_eq!(sessions["data"], json!([]), "{sessions}");
    let kept = inspect(&["--user-id", "kept"]);
    assert_eq!(kept["data"].as_array().map(Vec::len), Some(1), "{kept}");
}
