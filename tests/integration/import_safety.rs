//! `precedent import` of transcripts that change under it or are not what
//! they seem: real Claude Code block-per-line logs grown, rewritten,
//! replaced and watched (each gives the file's content exactly once),
//! links to a device or a FIFO, oversized and binary files, and lines that
//! cannot be read (reported, with their numbers).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::support::{ServerProcess, data_dir};

const MAIN_LOG: &str = "4d5611e5-241a-462a-8d15-5122611a9569";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/transcripts/claude-code")
        .join(name)
}

/// The lines of a real Claude Code log (each with its newline).
fn fixture_lines(name: &str) -> Vec<String> {
    std::fs::read_to_string(fixture(name))
        .expect("fixture")
        .lines()
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The main log's lines with another session id (a different transcript
/// under the same name).
fn lines_with_session(name: &str, session_id: &str) -> Vec<String> {
    fixture_lines(name)
        .into_iter()
        .map(|line| {
            let mut event: Value = serde_json::from_str(&line).expect("json");
            if event.get("sessionId").is_some() {
                event["sessionId"] = json!(session_id);
            }
            format!("{event}\n")
        })
        .collect()
}

/// `precedent` with its home in `home`, waited for at most a minute (an
/// import that hangs fails here instead of hanging the suite).
fn precedent_at(home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let child = command_at(home, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    let output = match receiver.recv_timeout(Duration::from_secs(60)) {
        Ok(output) => output.expect("output"),
        Err(_) => {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            panic!("precedent {args:?} did not return within a minute");
        }
    };
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

fn command_at(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_precedent"));
    command
        .args(args)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("HOME", home)
        .env_remove("PRECEDENT_DATA_DIR")
        .stdin(Stdio::null());
    command
}

/// Imports `paths` into `home`'s data directory: the JSON report.
fn import(home: &Path, paths: &[&Path]) -> Value {
    let mut args = vec!["import", "--user-id", "me", "--json"];
    args.extend(paths.iter().map(|path| path.to_str().expect("utf-8")));
    let (code, out, err) = precedent_at(home, &args);
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str(&out).unwrap_or_else(|_| panic!("not a JSON report: {out}"))
}

/// A session's record with what depends on how it was batched (request
/// ids, times) left out: equal records hold the same messages.
fn record(home: &Path, data_dir: Option<&Path>, session_id: &str) -> Value {
    let mut args = vec![
        "inspect",
        "--user-id",
        "me",
        "--session",
        session_id,
        "--json",
    ];
    let data_dir_arg = data_dir.map(|path| path.to_str().expect("utf-8").to_string());
    if let Some(path) = &data_dir_arg {
        args.extend(["--data-dir", path.as_str()]);
    }
    let (code, out, err) = precedent_at(home, &args);
    if code != Some(0) {
        return json!({"missing": err});
    }
    let mut record: Value = serde_json::from_str(&out).expect("record");
    if let Some(object) = record.as_object_mut() {
        object.remove("updated_at");
        object.remove("session_id");
    }
    // Provenance names the Add and the message's place in it.
    if let Some(evidence) = record["evidence"].as_array_mut() {
        for item in evidence {
            if let Some(object) = item.as_object_mut() {
                object.remove("source");
            }
        }
    }
    record
}

/// Sets a file's change time an hour back: a quiet file.
fn make_quiet(path: &Path) {
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3_600);
    std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open")
        .set_modified(an_hour_ago)
        .expect("set mtime");
}

/// The record of `content` imported whole, at once, into a fresh home.
fn reference_record(content: &str, session_id: &str) -> Value {
    let home = tempfile::tempdir().expect("home");
    let folder = tempfile::tempdir().expect("folder");
    let log = folder.path().join(format!("{MAIN_LOG}.jsonl"));
    std::fs::write(&log, content).expect("write");
    make_quiet(&log);
    import(home.path(), &[&log]);
    record(home.path(), None, session_id)
}

fn append(path: &Path, lines: &[String]) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open");
    file.write_all(lines.concat().as_bytes()).expect("append");
}

fn main_session() -> String {
    format!("claude-code:{MAIN_LOG}")
}

#[test]
fn a_block_appended_to_an_imported_response_is_stored_once() {
    let lines = fixture_lines(&format!("{MAIN_LOG}.jsonl"));
    let home = tempfile::tempdir().expect("home");
    let folder = tempfile::tempdir().expect("folder");
    let log = folder.path().join(format!("{MAIN_LOG}.jsonl"));
    // Up to the first block (text) of the response msg_013C...; its
    // tool_use block comes in the next line.
    std::fs::write(&log, lines[..12].concat()).expect("write");
    let first = import(home.path(), &[&log]);
    assert_eq!(first["responses_held_back"], 1, "{first}");
    assert_eq!(first["messages_imported"], 4, "{first}");

    append(&log, &lines[12..13]);
    let second = import(home.path(), &[&log]);
    assert_eq!(second["responses_held_back"], 1, "{second}");
    assert_eq!(second["messages_imported"], 0, "{second}");

    append(&log, &lines[13..]);
    let third = import(home.path(), &[&log]);
    assert_eq!(third["responses_held_back"], 0, "{third}");
    assert_eq!(third["messages_imported"], 2, "{third}");
    assert_eq!(third["messages_already_imported"], 4, "{third}");

    let got = record(home.path(), None, &main_session());
    assert_eq!(got["num_messages"], 6, "{got:#}");
    assert_eq!(got, reference_record(&lines.concat(), &main_session()));
    let again = import(home.path(), &[&log]);
    assert_eq!(again["messages_imported"], 0, "{again}");
}

#[test]
fn a_response_in_a_quiet_file_is_stored_without_waiting() {
    let lines = fixture_lines(&format!("{MAIN_LOG}.jsonl"));
    let home = tempfile::tempdir().expect("home");
    let folder = tempfile::tempdir().expect("folder");
    let log = folder.path().join(format!("{MAIN_LOG}.jsonl"));
    std::fs::write(&log, lines[..13].concat()).expect("write");
    make_quiet(&log);
    let report = import(home.path(), &[&log]);
    assert_eq!(report["responses_held_back"], 0, "{report}");
    assert_eq!(report["messages_imported"], 5, "{report}");
    assert_eq!(
        record(home.path(), None, &main_session()),
        reference_record(&lines[..13].concat(), &main_session())
    );
}

#[test]
fn a_transcript_truncated_and_rewritten_is_imported_again_as_a_new_session() {
    let lines = fixture_lines(&format!("{MAIN_LOG}.jsonl"));
    let home = tempfile::tempdir().expect("home");
    let folder = tempfile::tempdir().expect("folder");
    let log = folder.path().join(format!("{MAIN_LOG}.jsonl"));
    std::fs::write(&log, lines.concat()).expect("write");
    import(home.path(), &[&log]);
    let original = record(home.path(), None, &main_session());
    assert_eq!(original["num_messages"], 6, "{original:#}");

    // Rewritten in place (same inode): the first turn, then other work,
    // fewer messages than were imported.
    let mut rewritten = lines[..4].concat();
    for event in [
        json!({"type": "assistant", "sessionId": MAIN_LOG, "message": {"id": "msg_other", "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_other", "name": "Bash", "input": {"command": "cargo test --workspace"}}]}}),
        json!({"type": "user", "sessionId": MAIN_LOG, "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_other", "content": "test result: ok"}]}}),
    ] {
        rewritten.push_str(&format!("{event}\n"));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&log)
        .expect("open")
        .write_all(rewritten.as_bytes())
        .expect("rewrite");
    let report = import(home.path(), &[&log]);
    let restarted = format!("{}~2", main_session());
    assert_eq!(
        report["sessions_restarted"][0]["session_id"], restarted,
        "{report}"
    );
    assert_eq!(report["messages_imported"], 3, "{report}");
    assert_eq!(record(home.path(), None, &main_session()), original);
    let new = record(home.path(), None, &restarted);
    assert_eq!(new, reference_record(&rewritten, &main_session()));
    assert!(
        new["commands"]
            .to_string()
            .contains("cargo test --workspace"),
        "{new:#}"
    );
    let again = import(home.path(), &[&log]);
    assert_eq!(again["messages_imported"], 0, "{again}");
    assert_eq!(again["sessions_restarted"], json!([]), "{again}");
}

#[test]
fn a_file_replaced_by_another_of_the_same_name_is_never_mixed_with_it() {
    let home = tempfile::tempdir().expect("home");
    let folder = tempfile::tempdir().expect("folder");
    let log = folder.path().join(format!("{MAIN_LOG}.jsonl"));
    std::fs::write(&log, fixture_lines(&format!("{MAIN_LOG}.jsonl")).concat()).expect("write");
    import(home.path(), &[&log]);
    let original = record(home.path(), None, &main_session());

    // Another log (more messages), same name and session id, new inode.
    let other = lines_with_session("subagent.jsonl", MAIN_LOG);
    let other = other[..46].concat();
    std::fs::remove_file(&log).expect("remove");
    std::fs::write(&log, &other).expect("replace");
    let report = import(home.path(), &[&log]);
    let restarted = format!("{}~2", main_session());
    assert_eq!(
        report["sessions_restarted"][0]["session_id"], restarted,
        "{report}"
    );
    assert_eq!(record(home.path(), None, &main_session()), original);
    assert_eq!(
        record(home.path(), None, &restarted),
        reference_record(&other, &main_session())
    );
}

/// Sends SIGINT and waits for the watch to end.
fn stop(mut child: Child) {
    let status = Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the watch did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the session holds `expected` messages.
fn wait_for_messages(home: &Path, data: &Path, session_id: &str, expected: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = record(home, Some(data), session_id)["num_messages"].as_u64();
        if got == Some(expected) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{session_id} holds {got:?} messages, not {expected}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_watch_stores_each_block_once_and_passes_over_a_fifo() {
    let lines = fixture_lines(&format!("{MAIN_LOG}.jsonl"));
    let home = tempfile::tempdir().expect("home");
    let folder = tempfile::tempdir().expect("folder");
    let log = folder.path().join(format!("{MAIN_LOG}.jsonl"));
    std::fs::write(&log, lines[..12].concat()).expect("write");
    let fifo = folder.path().join("pipe.jsonl");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let (_dir, data) = data_dir();
    let server = ServerProcess::start(&data, &[]);
    let url = format!("http://{}", server.address);
    let watch = command_at(
        home.path(),
        &[
            "import",
            folder.path().to_str().expect("utf-8"),
            "--user-id",
            "me",
            "--watch",
            "--server",
            &url,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("watch starts");

    wait_for_messages(home.path(), &data, &main_session(), 4);
    // The open response's next block: still held back, then its end.
    append(&log, &lines[12..13]);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        record(home.path(), Some(&data), &main_session())["num_messages"],
        4
    );
    append(&log, &lines[13..]);
    wait_for_messages(home.path(), &data, &main_session(), 6);
    stop(watch);
    assert_eq!(
        record(home.path(), Some(&data), &main_session()),
        reference_record(&lines.concat(), &main_session())
    );
    drop(server);
}

#[test]
fn links_to_a_device_or_a_fifo_are_refused_at_once() {
    let home = tempfile::tempdir().expect("home");
    let folder = tempfile::tempdir().expect("folder");
    std::fs::copy(
        fixture(&format!("{MAIN_LOG}.jsonl")),
        folder.path().join(format!("{MAIN_LOG}.jsonl")),
    )
    .expect("copy");
    let fifo = home.path().join("pipe");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    std::os::unix::fs::symlink("/dev/zero", folder.path().join("zero.jsonl")).expect("link");
    std::os::unix::fs::symlink(&fifo, folder.path().join("fifo.jsonl")).expect("link");

    let report = import(home.path(), &[folder.path()]);
    assert_eq!(report["files_read"], 1, "{report}");
    let reasons: Vec<(String, String)> = report["files_skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|skipped| {
            let path = skipped["path"].as_str().expect("path");
            let name = Path::new(path).file_name().expect("name");
            (
                name.to_string_lossy().to_string(),
                skipped["reason"].as_str().expect("reason").to_string(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        vec![
            (
                "fifo.jsonl".to_string(),
                "not a regular file (a FIFO)".to_string()
            ),
            (
                "zero.jsonl".to_string(),
                "not a regular file (a device)".to_string()
            ),
        ]
    );
    // Named alone: refused with the reason, nothing opened that blocks.
    for (path, reason) in [
        (
            folder.path().join("fifo.jsonl"),
            "not a regular file (a FIFO)",
        ),
        (
            folder.path().join("zero.jsonl"),
            "not a regular file (a device)",
        ),
    ] {
        let (code, _, err) = precedent_at(
            home.path(),
            &["import", path.to_str().expect("utf-8"), "--user-id", "me"],
        );
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains(reason), "{err}");
    }
}

#[test]
fn an_oversized_or_binary_file_named_says_so() {
    let home = tempfile::tempdir().expect("home");
    let big = home.path().join("big.jsonl");
    // Sparse: no disk used, and nothing is read.
    std::fs::File::create(&big)
        .expect("create")
        .set_len(1_100 * 1024 * 1024)
        .expect("set_len");
    let zeros = home.path().join("zeros.jsonl");
    std::fs::File::create(&zeros)
        .expect("create")
        .set_len(1_000 * 1024 * 1024)
        .expect("set_len");
    for (path, reason) in [
        (&big, "larger than 1024 MiB"),
        (&zeros, "holds binary data (NUL bytes)"),
    ] {
        let (code, _, err) = precedent_at(
            home.path(),
            &["import", path.to_str().expect("utf-8"), "--user-id", "me"],
        );
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains(reason), "{err}");
        assert!(!err.contains("not a git repository"), "{err}");
    }
}

#[test]
fn unreadable_lines_are_reported_with_their_numbers() {
    let lines = fixture_lines(&format!("{MAIN_LOG}.jsonl"));
    let home = tempfile::tempdir().expect("home");
    let folder = tempfile::tempdir().expect("folder");
    let log = folder.path().join(format!("{MAIN_LOG}.jsonl"));
    let mut content: Vec<u8> = lines[..4].concat().into_bytes();
    // Line 5: cut short; line 6: nested 100,000 deep.
    content.extend_from_slice(b"{\"type\": \"user\", \"message\": {\"content\": \"cut\n");
    content.extend_from_slice(
        format!(
            "{{\"a\": {}{}}}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        )
        .as_bytes(),
    );
    // Line 7: invalid UTF-8 in a message (kept, replaced); line 8: a
    // message larger than one message keeps (cut).
    content.extend_from_slice(b"{\"type\": \"user\", \"sessionId\": \"");
    content.extend_from_slice(MAIN_LOG.as_bytes());
    content.extend_from_slice(b"\", \"message\": {\"content\": \"caf\xff\xfe\"}}\n");
    let huge = json!({"type": "user", "sessionId": MAIN_LOG, "message": {"content": "x".repeat(5 * 1024 * 1024)}});
    content.extend_from_slice(format!("{huge}\n").as_bytes());
    // Line 9: longer than a line may be (skipped unread).
    let too_long = json!({"type": "user", "sessionId": MAIN_LOG, "message": {"content": "y".repeat(65 * 1024 * 1024)}});
    content.extend_from_slice(format!("{too_long}\n").as_bytes());
    content.extend_from_slice(lines[4..].concat().as_bytes());
    std::fs::write(&log, &content).expect("write");

    let report = import(home.path(), &[&log]);
    assert_eq!(report["num_lines_skipped"], 3, "{report}");
    let listed = &report["lines_skipped"][0];
    assert_eq!(listed["num_lines"], 3, "{report}");
    assert_eq!(listed["first"][0]["line"], 5, "{report}");
    assert_eq!(listed["first"][1]["line"], 6, "{report}");
    assert_eq!(listed["first"][2]["line"], 9, "{report}");
    assert!(
        listed["first"][2]["reason"]
            .as_str()
            .expect("reason")
            .starts_with("longer than 64 MiB"),
        "{report}"
    );
    assert!(
        listed["first"][1]["reason"]
            .as_str()
            .expect("reason")
            .contains("recursion limit"),
        "{report}"
    );
    assert_eq!(report["lines_with_invalid_utf8"], 1, "{report}");
    assert_eq!(report["messages_cut"], 1, "{report}");
    assert_eq!(report["messages_imported"], 8, "{report}");

    // The summary says the same.
    let other = tempfile::tempdir().expect("home");
    let (code, out, err) = precedent_at(
        other.path(),
        &["import", log.to_str().expect("utf-8"), "--user-id", "me"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("3 line(s) of"), "{out}");
    assert!(out.contains("line 5 (not JSON"), "{out}");
    assert!(out.contains("1 line(s) with invalid UTF-8"), "{out}");
    assert!(out.contains("1 message(s) cut"), "{out}");
}

#[test]
fn an_import_through_a_server_refusing_the_key_says_the_servers_reason() {
    use sha2::Digest;
    let home = tempfile::tempdir().expect("home");
    let (dir, data) = data_dir();
    let key = "key-for-bob-only";
    let digest: String = sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("{digest} bob\n")).expect("keys file");
    let server = ServerProcess::start(&data, &["--keys-file", keys.to_str().expect("utf-8")]);
    let bearer = format!("Bearer {key}");
    let (status, answer) = crate::support::http_request(
        server.address,
        "GET",
        &format!("/v1/sessions/claude-code%3A{MAIN_LOG}?user_id=me"),
        None,
        &[
            ("authorization", bearer.as_str()),
            ("x-precedent-user", "me"),
        ],
    );
    assert_eq!(status, 403, "{answer}");
    let reason = crate::support::reason(&answer);
    assert!(!reason.is_empty(), "{answer}");

    let url = format!("http://{}", server.address);
    let log = fixture(&format!("{MAIN_LOG}.jsonl"));
    let (code, _, err) = precedent_at(
        home.path(),
        &[
            "import",
            log.to_str().expect("utf-8"),
            "--user-id",
            "me",
            "--server",
            &url,
            "--api-key",
            key,
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("HTTP 403") && err.contains(&reason), "{err}");
}

#[test]
fn a_fault_inside_a_held_back_response_is_reported_once() {
    let lines = fixture_lines(&format!("{MAIN_LOG}.jsonl"));
    let home = tempfile::tempdir().expect("home");
    let folder = tempfile::tempdir().expect("folder");
    let log = folder.path().join(format!("{MAIN_LOG}.jsonl"));
    // The open response msg_013C..., then a broken line (line 13): both
    // are read again next time, as the response is held back.
    let mut content = lines[..12].concat();
    content.push_str("{\"type\": \"assistant\", \"message\": {\"id\"\n");
    std::fs::write(&log, &content).expect("write");
    let first = import(home.path(), &[&log]);
    assert_eq!(first["responses_held_back"], 1, "{first}");
    assert_eq!(first["num_lines_skipped"], 1, "{first}");
    assert_eq!(first["lines_skipped"][0]["first"][0]["line"], 13, "{first}");
    append(&log, &lines[12..]);
    let second = import(home.path(), &[&log]);
    assert_eq!(second["responses_held_back"], 0, "{second}");
    assert_eq!(second["num_lines_skipped"], 0, "{second}");
    assert_eq!(second["messages_imported"], 2, "{second}");
}
