//! What operators and tools read: `/metrics`, `/openapi.json`, `/ui`,
//! `GET /v1/users`, and JSON logs, from the real binary.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ServerProcess, add_body, data_dir};

/// A GET answered with its status, content type and body as text.
fn get_text(address: SocketAddr, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").expect("head");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status");
    let content_type = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

/// The value of one sample line (`name{labels} value`) of a metrics text.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

#[test]
fn metrics_count_requests_per_route_and_status_without_user_ids() {
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &[]);
    for (index, user) in ["secret-user-a", "secret-user-b"].iter().enumerate() {
        let (status, _) = server.request(
            "POST",
            "/v1/add",
            Some(&add_body(
                &format!("r{index}"),
                user,
                "s1",
                &["The parser drops trailing commas in `parse_list`"],
            )),
        );
        assert_eq!(status, 200);
    }
    let (status, _) = server.request(
        "POST",
        "/v1/search",
        Some(&json!({"user_id": "secret-user-a", "query": "trailing commas", "top_k": 3})),
    );
    assert_eq!(status, 200);
    let (status, _) = server.request("POST", "/v1/add", Some(&json!({"user_id": "x"})));
    assert_eq!(status, 422);

    let (status, content_type, metrics) = get_text(server.address, "/metrics");
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let count = |series: &str| {
        sample(&metrics, series).unwrap_or_else(|| panic!("{series} missing:\n{metrics}"))
    };
    assert_eq!(
        count(r#"precedent_http_requests_total{route="/v1/add",method="POST",status="200"}"#),
        2.0
    );
    assert_eq!(
        count(r#"precedent_http_requests_total{route="/v1/add",method="POST",status="422"}"#),
        1.0
    );
    assert_eq!(
        count(
            r#"precedent_http_request_duration_seconds_count{route="/v1/search",method="POST",status="200"}"#
        ),
        1.0
    );
    assert_eq!(count("precedent_adds_written_total"), 2.0);
    assert!(count("precedent_index_commit_duration_seconds_count") >= 1.0);
    assert!(count("precedent_index_documents") >= 2.0);
    assert!(count("precedent_store_bytes") > 0.0);
    assert_eq!(count("precedent_users"), 2.0);
    assert_eq!(count(r#"precedent_sessions_per_user_bucket{le="1"}"#), 2.0);
    assert_eq!(count("precedent_add_queue_depth"), 0.0);
    assert!(
        !metrics.contains("secret-user"),
        "user ids must not appear in metrics"
    );
    // Every line is a comment or a `name{labels} number` sample.
    for line in metrics.lines().filter(|line| !line.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap_or("");
        assert!(value.parse::<f64>().is_ok(), "bad sample line {line:?}");
    }
    server.terminate();
}

#[test]
fn openapi_document_ui_page_and_user_list_are_served() {
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &[]);
    let (status, content_type, body) = get_text(server.address, "/openapi.json");
    assert_eq!(status, 200);
    assert!(content_type.starts_with("application/json"));
    let document: Value = serde_json::from_str(&body).expect("JSON");
    assert!(
        document["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1"))
    );
    assert!(document["paths"]["/v1/search/explain"]["post"].is_object());

    let (status, content_type, page) = get_text(server.address, "/ui");
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(page.contains("<html"), "an HTML document");
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "the page fetches nothing from elsewhere"
    );

    let (status, _) = server.request(
        "POST",
        "/v1/add",
        Some(&add_body("r1", "alice", "s1", &["Fix the cache"])),
    );
    assert_eq!(status, 200);
    let (status, users) = server.request("GET", "/v1/users", None);
    assert_eq!(status, 200);
    assert_eq!(users["data"][0]["user_id"], "alice");
    assert_eq!(users["data"][0]["num_sessions"], 1);
    server.terminate();
}

#[test]
fn json_logs_are_one_object_per_line() {
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &["--log-format", "json"]);
    let lines = server.stderr();
    assert!(!lines.is_empty());
    for line in &lines {
        let value: Value =
            serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
        assert!(
            value.get("level").is_some() && value.get("timestamp").is_some(),
            "{line}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|line| line.contains("listening on http://"))
    );
    server.terminate();
}

/// A data directory that is a file is named as such, once.
#[test]
fn a_data_directory_that_is_a_file_is_said_so_once() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").expect("file");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&file)
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.matches("it is a file, not a directory").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("File exists"), "{stderr}");
}

/// A data directory that cannot be read is said so, with the system's
/// reason, not as a missing store.
#[test]
fn an_unreadable_data_directory_is_not_called_missing() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").expect("file");
    // A directory under a file: reading it fails with ENOTDIR (a mode-000
    // directory would do too, but not for root).
    let unreadable = file.join("data");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(["inspect", "--user-id", "u", "--data-dir"])
        .arg(&unreadable)
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read the data directory"),
        "{stderr}"
    );
    assert!(!stderr.contains("no precedent store"), "{stderr}");
}
