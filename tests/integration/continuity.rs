//! The product was called codemem before: a data directory written by that
//! build (`fixtures/legacy-store`, made by its `make.py` with the last
//! codemem binary) opens under the old default and file names, and
//! answers every search from what that build stored: the same candidates
//! with the same features and scores, and every item it answered (the
//! gate's rules may since keep more); `CODEMEM_*` variables are still
//! read, with a warning.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::ServerProcess;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/legacy-store")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read fixture") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A home directory whose `$XDG_DATA_HOME` holds the old build's data
/// directory, `codemem/`, and no `precedent/`.
fn legacy_home() -> (tempfile::TempDir, PathBuf) {
    let home = tempfile::tempdir().expect("home");
    let data_home = home.path().join("data");
    copy_dir(&fixture().join("codemem"), &data_home.join("codemem"));
    (home, data_home)
}

fn recorded_searches() -> Vec<Value> {
    let text = std::fs::read_to_string(fixture().join("searches.json")).expect("searches");
    let recorded: Value = serde_json::from_str(&text).expect("JSON");
    recorded["searches"].as_array().expect("searches").clone()
}

fn assert_same_answers(server: &ServerProcess) {
    let searches = recorded_searches();
    assert!(searches.len() >= 10, "the fixture holds its searches");
    let mut answered = 0;
    for search in &searches {
        let body = json!({
            "user_id": search["user_id"],
            "query": search["query"],
            "top_k": search["top_k"],
        });
        let path = search["path"].as_str().expect("path");
        let (status, answer) = server.request("POST", path, Some(&body));
        assert_eq!(status, 200, "{answer}");
        let what = format!("{path} {:?}", search["query"]);
        if path.ends_with("/explain") {
            assert_same_candidates(&answer, &search["answer"], &what);
        } else {
            assert_items_kept(&answer, &search["answer"], &what);
        }
        answered += answer["data"].as_array().map_or(0, Vec::len);
    }
    assert!(answered > 0, "the old store's searches find something");
}

/// What the old store means is unchanged: every candidate found now was
/// found by the codemem build (the query's function words no longer find
/// any), and the same session is ranked first. Scores follow the current
/// ranking's rules.
fn assert_same_candidates(answer: &Value, recorded: &Value, what: &str) {
    let sessions = |value: &Value| -> Vec<String> {
        value["candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .map(|candidate| candidate["session_id"].to_string())
            .collect()
    };
    let then = sessions(recorded);
    let now = sessions(answer);
    assert!(
        now.iter().all(|session| then.contains(session)),
        "{what}: candidates the codemem build did not have: {now:?} against {then:?}"
    );
    assert_eq!(now.first(), then.first(), "{what}");
    assert_eq!(answer["num_sessions"], recorded["num_sessions"], "{what}");
}

/// The session the codemem build answered first is answered first again
/// (how much of it is shown follows the current sizes).
fn assert_items_kept(answer: &Value, recorded: &Value, what: &str) {
    let first_session = |value: &Value| {
        value["data"]
            .as_array()
            .expect("data")
            .first()
            .map(|item| item["session_id"].clone())
    };
    assert_eq!(
        first_session(answer),
        first_session(recorded),
        "{what}: answered otherwise than the codemem build did; now {answer}"
    );
}

#[test]
fn the_old_default_data_directory_opens_and_answers_the_same() {
    let (home, data_home) = legacy_home();
    let mut command = ServerProcess::command();
    command
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", &data_home)
        .env_remove("PRECEDENT_DATA_DIR")
        .env_remove("CODEMEM_DATA_DIR");
    let server = ServerProcess::spawn(command);
    assert_same_answers(&server);
    let stderr = server.stderr();
    let mentions = |needle: &str| stderr.iter().filter(|line| line.contains(needle)).count();
    assert_eq!(
        mentions("opening the data directory of codemem"),
        1,
        "{stderr:#?}"
    );
    assert_eq!(
        mentions("under its former name (codemem.sqlite3)"),
        1,
        "{stderr:#?}"
    );
    assert_eq!(server.terminate(), Some(0));
    // Nothing was created under the new names: the old directory is used.
    assert!(!data_home.join("precedent").exists());
    assert!(!data_home.join("codemem/precedent.sqlite3").exists());
}

#[test]
fn an_old_store_without_its_index_is_indexed_again_and_answers_the_same() {
    let (_home, data_home) = legacy_home();
    let data_dir = data_home.join("codemem");
    std::fs::remove_dir_all(data_dir.join("index")).expect("drop the index");
    let server = ServerProcess::start(&data_dir, &[]);
    assert_same_answers(&server);
    assert_eq!(server.terminate(), Some(0));
}

#[test]
fn a_new_data_directory_wins_over_the_old_one() {
    let (home, data_home) = legacy_home();
    std::fs::create_dir_all(data_home.join("precedent")).expect("mkdir");
    let output = Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(["inspect", "--user-id", "team-a"])
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", &data_home)
        .env_remove("PRECEDENT_DATA_DIR")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the new directory is empty");
    assert!(stderr.contains("precedent"), "{stderr}");
    assert!(!stderr.contains("data directory of codemem"), "{stderr}");
}

#[test]
fn old_environment_variables_are_read_with_a_warning() {
    let (home, data_home) = legacy_home();
    let elsewhere = home.path().join("elsewhere");
    std::fs::rename(data_home.join("codemem"), &elsewhere).expect("move");
    let inspect = |vars: &[(&str, &Path)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_precedent"));
        command
            .args(["inspect", "--user-id", "team-a", "--json"])
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", &data_home)
            .env_remove("PRECEDENT_DATA_DIR")
            .env_remove("CODEMEM_DATA_DIR");
        for (name, value) in vars {
            command.env(name, value);
        }
        command.output().expect("runs")
    };

    let output = inspect(&[("CODEMEM_DATA_DIR", &elsewhere)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let listed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(4), "{listed}");
    assert!(
        stderr.contains("CODEMEM_DATA_DIR is deprecated") && stderr.contains("PRECEDENT_DATA_DIR"),
        "{stderr}"
    );

    // Both set: the new name wins, and the old one is named as ignored.
    let empty = home.path().join("empty");
    let output = inspect(&[
        ("CODEMEM_DATA_DIR", &elsewhere),
        ("PRECEDENT_DATA_DIR", &empty),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("CODEMEM_DATA_DIR is ignored"), "{stderr}");
}
