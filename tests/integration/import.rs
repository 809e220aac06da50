//! `precedent import`: a repository built here with git2 (Python and Rust
//! files, fix commits, a merge, a binary file) becomes searchable memory,
//! directly into a data directory and through a running server.

use std::path::Path;
use std::process::Command;

use git2::{Oid, Repository, Signature, Time};
use serde_json::{Value, json};

use crate::support::{ServerProcess, data_dir};

use crate::support::git_commit as commit;

const OPS_V1: &str = "def add(a, b):\n    return a + b\n\n\ndef divide(a, b):\n    return a / b\n";
const OPS_V2: &str = "def add(a, b):\n    return a + b\n\n\ndef divide(a, b):\n    if b == 0:\n        raise ValueError(\"divide by zero\")\n    return a / b\n";
const OPS_V3: &str = "def add(a, b, *rest):\n    return a + b + sum(rest)\n\n\ndef divide(a, b):\n    if b == 0:\n        raise ValueError(\"divide by zero\")\n    return a / b\n";
const LIB_V1: &str = "pub fn parse_config(text: &str) -> Vec<String> {\n    text.lines().map(str::to_string).collect()\n}\n";
const LIB_V2: &str = "pub fn parse_config(text: &str) -> Vec<String> {\n    if text.trim().is_empty() {\n        return Vec::new();\n    }\n    text.lines().map(str::to_string).collect()\n}\n";

struct Built {
    repo_dir: tempfile::TempDir,
    divide_fix: Oid,
    config_fix: Oid,
}

/// main: initial -> divide fix -> config fix (+ a binary logo) -> merge of
/// a side branch -> add() change. The side branch's own commit is off the
/// first-parent line.
fn build_repository() -> Built {
    let repo_dir = tempfile::Builder::new()
        .prefix("calc-")
        .tempdir()
        .expect("tempdir");
    let repo = Repository::init(repo_dir.path()).expect("init");
    commit(
        &repo,
        &[
            ("calc/ops.py", OPS_V1.as_bytes()),
            ("src/lib.rs", LIB_V1.as_bytes()),
        ],
        "Initial calculator and config parser",
        1_700_000_000,
    );
    let divide_fix = commit(
        &repo,
        &[("calc/ops.py", OPS_V2.as_bytes())],
        "Fix ZeroDivisionError in divide (fixes #12)\n\ndivide(1, 0) crashed; raise a ValueError instead.",
        1_700_000_100,
    );
    let config_fix = commit(
        &repo,
        &[
            ("src/lib.rs", LIB_V2.as_bytes()),
            (
                "assets/logo.png",
                b"\x89PNG\r\n\x1a\n\x00\x00\x00binary\x00data",
            ),
        ],
        "parse_config returns one empty entry for an empty file",
        1_700_000_200,
    );
    // A side branch merged back.
    let main_tip = repo.head().expect("head").peel_to_commit().expect("commit");
    let signature =
        Signature::new("Dev", "dev@example.com", &Time::new(1_700_000_300, 0)).expect("sig");
    let side_tree = {
        let root = repo.workdir().expect("work tree");
        std::fs::write(root.join("README.md"), "calc\n").expect("write");
        let mut index = repo.index().expect("index");
        index.add_path(Path::new("README.md")).expect("add");
        index.write().expect("write");
        repo.find_tree(index.write_tree().expect("tree"))
            .expect("tree")
    };
    let side = repo
        .commit(
            None,
            &signature,
            &signature,
            "Side: add a README",
            &side_tree,
            &[&main_tip],
        )
        .expect("side commit");
    let side_commit = repo.find_commit(side).expect("side");
    repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        "Merge branch 'docs'",
        &side_tree,
        &[&main_tip, &side_commit],
    )
    .expect("merge");
    commit(
        &repo,
        &[("calc/ops.py", OPS_V3.as_bytes())],
        "add() takes any number of terms",
        1_700_000_400,
    );
    Built {
        repo_dir,
        divide_fix,
        config_fix,
    }
}

fn precedent(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(args)
        .output()
        .expect("runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

fn repository_name(built: &Built) -> String {
    built
        .repo_dir
        .path()
        .canonicalize()
        .expect("canonical")
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string()
}

#[test]
fn history_imports_once_and_its_fixes_rank_first() {
    let built = build_repository();
    let repo = built.repo_dir.path().to_str().expect("utf-8").to_string();
    let (_guard, dir) = data_dir();
    let dir_arg = dir.to_str().expect("utf-8").to_string();
    let import = || {
        let (code, out, err) = precedent(&[
            "import",
            &repo,
            "--user-id",
            "team",
            "--data-dir",
            &dir_arg,
            "--no-merges",
            "--json",
        ]);
        assert_eq!(code, Some(0), "{err}");
        serde_json::from_str::<Value>(&out).expect("report")
    };
    let first = import();
    assert_eq!(first["commits_walked"], 5, "{first}");
    assert_eq!(first["imported"], 4, "{first}");
    assert_eq!(first["merges_skipped"], 1, "{first}");
    assert_eq!(first["binary_files_skipped"], 1, "{first}");
    let second = import();
    assert_eq!(second["imported"], 0, "{second}");
    assert_eq!(second["already_imported"], 4, "{second}");

    let name = repository_name(&built);
    let search = |query: &str| {
        let (code, out, err) = precedent(&[
            "search",
            "--data-dir",
            &dir_arg,
            "--user-id",
            "team",
            "--json",
            query,
        ]);
        assert_eq!(code, Some(0), "{err}");
        serde_json::from_str::<Value>(&out).expect("answer")
    };
    let answer = search("divide(4, 0) raises ZeroDivisionError in calc/ops.py");
    let top = &answer["data"][0];
    assert_eq!(
        top["session_id"],
        format!("git:{name}:{}", built.divide_fix),
        "{answer:#}"
    );
    // The commit's own time (1_700_000_100 s), not the import's.
    assert_eq!(top["created_at"], "2023-11-14T22:15:00.000Z", "{top}");
    let content = top["content"].as_str().expect("content");
    assert!(content.contains("Files changed: calc/ops.py"), "{content}");
    assert!(content.contains("Symbols changed: divide"), "{content}");
    assert!(content.contains("References: #12"), "{content}");
    let answer = search("`parse_config` should accept an empty file");
    assert_eq!(
        answer["data"][0]["session_id"],
        format!("git:{name}:{}", built.config_fix),
        "{answer:#}"
    );

    // Through a running server: the same sessions, the same ranking.
    let (_server_guard, server_dir) = data_dir();
    let server = ServerProcess::start(&server_dir, &[]);
    let url = format!("http://{}", server.address);
    let (code, out, err) = precedent(&[
        "import",
        &repo,
        "--user-id",
        "team",
        "--server",
        &url,
        "--no-merges",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let report: Value = serde_json::from_str(&out).expect("report");
    assert_eq!(report["imported"], 4, "{report}");
    let (status, body) = server.request(
        "POST",
        "/search",
        Some(&json!({"query": "divide(4, 0) raises ZeroDivisionError in calc/ops.py", "user_id": "team", "top_k": 5})),
    );
    assert_eq!(status, 200);
    assert_eq!(
        body["data"][0]["session_id"],
        format!("git:{name}:{}", built.divide_fix)
    );
    let (code, out, _) = precedent(&[
        "import",
        &repo,
        "--user-id",
        "team",
        "--server",
        &url,
        "--no-merges",
        "--json",
    ]);
    assert_eq!(code, Some(0));
    let again: Value = serde_json::from_str(&out).expect("report");
    assert_eq!(again["already_imported"], 4, "{again}");

    // A data directory a server holds: the import goes through the server
    // that the data directory records, without --server.
    let server_dir_arg = server_dir.to_str().expect("utf-8");
    let (code, out, err) = precedent(&[
        "import",
        &repo,
        "--user-id",
        "team",
        "--data-dir",
        server_dir_arg,
        "--no-merges",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let through_recorded: Value = serde_json::from_str(&out).expect("report");
    assert_eq!(
        through_recorded["already_imported"], 4,
        "{through_recorded}"
    );
    // Opened directly instead, it is refused with the way around.
    let (code, _, err) = precedent(&[
        "import",
        &repo,
        "--user-id",
        "team",
        "--data-dir",
        server_dir_arg,
        "--no-server",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("held by another process") && err.contains("--no-server"),
        "{err}"
    );
    // Not a repository: a clear message too.
    let (code, _, err) = precedent(&[
        "import",
        server_dir_arg,
        "--user-id",
        "team",
        "--data-dir",
        &dir_arg,
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("is not a git repository"), "{err}");
}

/// `precedent import` with `XDG_DATA_HOME` and `HOME` in a temporary
/// directory, so that nothing reaches the real home directory.
fn precedent_at(home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(args)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("HOME", home)
        .env_remove("PRECEDENT_DATA_DIR")
        .output()
        .expect("runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

fn fixture(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/transcripts")
        .join(path)
}

/// Copies fixture files into a fresh folder.
fn folder_with(files: &[&str]) -> tempfile::TempDir {
    let folder = tempfile::tempdir().expect("tempdir");
    for file in files {
        let source = fixture(file);
        let name = source.file_name().expect("name").to_owned();
        std::fs::copy(&source, folder.path().join(name)).expect("copy");
    }
    folder
}

fn report(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|_| panic!("not a JSON report: {out}"))
}

/// A session's record, read from the default data directory.
fn session(home: &Path, session_id: &str) -> Value {
    let (code, out, err) = precedent_at(
        home,
        &[
            "inspect",
            "--user-id",
            "me",
            "--session",
            session_id,
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    report(&out)
}

fn num_messages(home: &Path, session_id: &str) -> u64 {
    session(home, session_id)["num_messages"]
        .as_u64()
        .expect("num_messages")
}

#[test]
fn claude_code_folder_imports_once_then_only_its_new_tail() {
    let home = tempfile::tempdir().expect("home");
    let folder = folder_with(&[
        "claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
        "claude-code/55604662-cf2a-4331-851a-ec234028f8ca.jsonl",
    ]);
    // Not a transcript: a folder's stray JSON is ignored, a named file is
    // reported and skipped.
    std::fs::write(folder.path().join("settings.json"), "{\"theme\": \"dark\"}").expect("write");
    let stray = home.path().join("notes.jsonl");
    std::fs::write(&stray, "{\"hello\": 1}\nnot json\n").expect("write");
    let folder_arg = folder.path().to_str().expect("utf-8");
    let stray_arg = stray.to_str().expect("utf-8");
    let import = |paths: &[&str]| {
        let mut args = vec!["import", "--user-id", "me", "--json"];
        args.extend_from_slice(paths);
        let (code, out, err) = precedent_at(home.path(), &args);
        assert_eq!(code, Some(0), "{err}");
        report(&out)
    };

    let first = import(&[folder_arg, stray_arg]);
    assert_eq!(first["files_read"], 2, "{first}");
    assert_eq!(first["sessions"], 2, "{first}");
    let skipped = first["files_skipped"].as_array().expect("skipped");
    assert_eq!(skipped.len(), 1, "{first}");
    assert!(
        skipped[0]["path"]
            .as_str()
            .expect("path")
            .ends_with("notes.jsonl")
            && skipped[0]["reason"]
                .as_str()
                .expect("reason")
                .contains("not a transcript"),
        "{first}"
    );
    // The default data directory is under XDG_DATA_HOME.
    assert!(
        home.path()
            .join("data/precedent/precedent.sqlite3")
            .exists()
    );

    let main_session = "claude-code:4d5611e5-241a-462a-8d15-5122611a9569";
    let record = session(home.path(), main_session);
    assert_eq!(record["num_messages"], 6, "{record:#}");
    // The transcript's own times (its messages run from 16:02 to 16:06).
    assert!(
        record["updated_at"]
            .as_str()
            .is_some_and(|time| time.starts_with("2026-02-12T16:0")),
        "{}",
        record["updated_at"]
    );
    assert_eq!(
        record["task"].as_str().expect("task").lines().next(),
        Some(
            "Work on bead spotter-dov. Run bd show spotter-dov to see the issue details and bd ready to find available subtasks. Start with the first ready task."
        ),
        "{record:#}"
    );
    let commands: Vec<&str> = record["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .filter_map(|command| command["command"].as_str())
        .collect();
    assert!(commands.contains(&"bd show spotter-dov"), "{commands:?}");
    assert!(commands.contains(&"bd ready"), "{commands:?}");
    let imported = first["messages_imported"].as_u64().expect("count");
    assert_eq!(
        imported,
        6 + num_messages(
            home.path(),
            "claude-code:55604662-cf2a-4331-851a-ec234028f8ca"
        )
    );

    // A second run adds nothing.
    let second = import(&[folder_arg]);
    assert_eq!(second["messages_imported"], 0, "{second}");
    assert_eq!(second["adds"], 0, "{second}");
    assert_eq!(second["messages_already_imported"], imported, "{second}");

    // The transcript grows: a complete turn and a line still being written.
    let log = folder
        .path()
        .join("4d5611e5-241a-462a-8d15-5122611a9569.jsonl");
    let mut grown = std::fs::read_to_string(&log).expect("read");
    grown.push_str(&json!({"type": "user", "sessionId": "4d5611e5-241a-462a-8d15-5122611a9569", "message": {"role": "user", "content": "now run the tests"}}).to_string());
    grown.push('\n');
    grown.push_str(&json!({"type": "assistant", "sessionId": "4d5611e5-241a-462a-8d15-5122611a9569", "message": {"id": "msg_new", "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_new", "name": "Bash", "input": {"command": "mix test"}}]}}).to_string());
    grown.push('\n');
    let complete_line = json!({"type": "user", "sessionId": "4d5611e5-241a-462a-8d15-5122611a9569", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_new", "content": "3 tests, 1 failure", "is_error": true}]}}).to_string();
    let (head, tail) = complete_line.split_at(40);
    std::fs::write(&log, format!("{grown}{head}")).expect("write");
    // The response still open (the file's last) is held back.
    let third = import(&[folder_arg]);
    assert_eq!(third["messages_imported"], 1, "{third}");
    assert_eq!(third["adds"], 1, "{third}");
    assert_eq!(third["responses_held_back"], 1, "{third}");
    assert_eq!(num_messages(home.path(), main_session), 7);
    // The line completed: the response and it are added.
    std::fs::write(&log, format!("{grown}{head}{tail}\n")).expect("write");
    let fourth = import(&[folder_arg]);
    assert_eq!(fourth["messages_imported"], 2, "{fourth}");
    assert_eq!(fourth["responses_held_back"], 0, "{fourth}");
    let record = session(home.path(), main_session);
    assert_eq!(record["num_messages"], 9, "{record:#}");
    let last_command = record["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .find(|command| command["command"] == "mix test")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(last_command["message_index"], 7, "{record:#}");

    // Paths that are neither a repository nor hold transcripts: refused.
    let empty = tempfile::tempdir().expect("empty");
    let (code, _, err) = precedent_at(
        home.path(),
        &[
            "import",
            empty.path().to_str().expect("utf-8"),
            "--user-id",
            "me",
        ],
    );
    assert_eq!(code, Some(1));
    assert!(err.contains("is not a git repository"), "{err}");
}

#[test]
fn aider_history_is_one_session_per_chat() {
    let home = tempfile::tempdir().expect("home");
    let folder = folder_with(&["aider/.aider.chat.history.md"]);
    let history = folder.path().join(".aider.chat.history.md");
    let history_arg = history.to_str().expect("utf-8");
    let import = || {
        let (code, out, err) = precedent_at(
            home.path(),
            &["import", history_arg, "--user-id", "me", "--json"],
        );
        assert_eq!(code, Some(0), "{err}");
        report(&out)
    };
    let first = import();
    assert_eq!(first["sessions"], 1, "{first}");
    let (code, out, err) = precedent_at(home.path(), &["inspect", "--user-id", "me", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let sessions = report(&out);
    let session_id = sessions["data"][0]["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    assert!(
        session_id.starts_with("aider:") && session_id.ends_with(":0"),
        "{sessions}"
    );
    let record = session(home.path(), &session_id);
    assert_eq!(record["num_messages"], 11, "{record:#}");
    assert!(
        record["task"]
            .as_str()
            .expect("task")
            .starts_with("give me a quick summarized overview of this repo"),
        "{record:#}"
    );
    assert_eq!(import()["messages_imported"], 0);

    // A new chat starts in the same file: a second session; the first is
    // untouched.
    let mut text = std::fs::read_to_string(&history).expect("read");
    text.push_str("\n# aider chat started at 2025-05-05 09:00:00\n\n#### make the equals key green  \n\nDone: `.equals-btn` is green now.\n\n> Applied edit to src/styles.css  \n");
    std::fs::write(&history, text).expect("write");
    let grown = import();
    assert_eq!(grown["sessions"], 2, "{grown}");
    assert_eq!(grown["messages_imported"], 3, "{grown}");
    assert_eq!(num_messages(home.path(), &session_id), 11);
    let second_id = format!("{}1", session_id.trim_end_matches('0'));
    assert_eq!(num_messages(home.path(), &second_id), 3);
}

#[test]
fn codex_swe_agent_and_openhands_transcripts_import() {
    let home = tempfile::tempdir().expect("home");
    let (code, out, err) = precedent_at(
        home.path(),
        &[
            "import",
            fixture("codex").to_str().expect("utf-8"),
            fixture("swe-agent").to_str().expect("utf-8"),
            fixture("openhands").to_str().expect("utf-8"),
            "--user-id",
            "me",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let first = report(&out);
    assert_eq!(first["sessions"], 5, "{first}");
    assert_eq!(first["files_skipped"], json!([]), "{first}");
    let codex = session(home.path(), "codex:019c8bfe-ec25-79e0-97d7-bda6a9c575ff");
    assert_eq!(codex["num_messages"], 19, "{codex:#}");
    // The OpenHands rename: the command and its exit code.
    let (_, out, _) = precedent_at(home.path(), &["inspect", "--user-id", "me", "--json"]);
    let sessions = report(&out);
    let rename = sessions["data"]
        .as_array()
        .expect("sessions")
        .iter()
        .find_map(|session| {
            session["session_id"]
                .as_str()
                .filter(|id| id.starts_with("openhands:wrong_initial_state:"))
        })
        .expect("the rename session")
        .to_string();
    let record = session(home.path(), &rename);
    let rename_command = record["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .find(|command| command["command"] == "mv /workspace/game_2048.py /workspace/2048.py")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(rename_command["exit_code"], 0, "{record:#}");
}

/// main: initial -> a pull request merged (its branch adds `multiply`) ->
/// a direct fix. Each merge commit has the side branch as second parent.
fn repository_with_pull_requests() -> (tempfile::TempDir, Oid) {
    let repo_dir = tempfile::Builder::new()
        .prefix("merges-")
        .tempdir()
        .expect("tempdir");
    let repo = Repository::init(repo_dir.path()).expect("init");
    commit(
        &repo,
        &[("calc/ops.py", OPS_V1.as_bytes())],
        "Initial calculator",
        1_700_000_000,
    );
    let base = repo.head().expect("head").peel_to_commit().expect("commit");
    let signature =
        Signature::new("Dev", "dev@example.com", &Time::new(1_700_000_100, 0)).expect("sig");
    let branch_tree = {
        let root = repo.workdir().expect("work tree");
        std::fs::write(
            root.join("calc/ops.py"),
            format!("{OPS_V1}\n\ndef multiply(a, b):\n    return a * b\n"),
        )
        .expect("write");
        let mut index = repo.index().expect("index");
        index.add_path(Path::new("calc/ops.py")).expect("add");
        index.write().expect("write");
        repo.find_tree(index.write_tree().expect("tree"))
            .expect("tree")
    };
    let branch = repo
        .commit(None, &signature, &signature, "wip", &branch_tree, &[&base])
        .expect("branch commit");
    let branch_commit = repo.find_commit(branch).expect("branch");
    let merge = repo
        .commit(
            Some("HEAD"),
            &signature,
            &signature,
            "Merge pull request #7 from dev/multiply\n\nAdd multiply() to calc.ops",
            &branch_tree,
            &[&base, &branch_commit],
        )
        .expect("merge");
    commit(
        &repo,
        &[(
            "calc/ops.py",
            format!("{OPS_V2}\n\ndef multiply(a, b):\n    return a * b\n").as_bytes(),
        )],
        "Fix ZeroDivisionError in divide",
        1_700_000_200,
    );
    (repo_dir, merge)
}

#[test]
fn merged_pull_requests_are_sessions_unless_no_merges() {
    let (repo_dir, merge) = repository_with_pull_requests();
    let repo = repo_dir.path().to_str().expect("utf-8");
    let name = repo_dir
        .path()
        .canonicalize()
        .expect("canonical")
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string();

    let home = tempfile::tempdir().expect("home");
    let (code, out, err) = precedent_at(
        home.path(),
        &["import", repo, "--user-id", "me", "--no-merges", "--json"],
    );
    assert_eq!(code, Some(0), "{err}");
    let skipping = report(&out);
    assert_eq!(skipping["imported"], 2, "{skipping}");
    assert_eq!(skipping["merges_skipped"], 1, "{skipping}");
    assert_eq!(skipping["merges_imported"], 0, "{skipping}");

    let (code, out, err) =
        precedent_at(home.path(), &["import", repo, "--user-id", "me", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let with_merges = report(&out);
    assert_eq!(with_merges["imported"], 1, "{with_merges}");
    assert_eq!(with_merges["merges_imported"], 1, "{with_merges}");
    assert_eq!(with_merges["already_imported"], 2, "{with_merges}");

    let record = session(home.path(), &format!("git:{name}:{merge}"));
    let task = record["task"].as_str().expect("task");
    assert!(task.starts_with("Add multiply() to calc.ops"), "{task}");
    assert!(
        task.contains("Merge pull request #7 from dev/multiply"),
        "{task}"
    );
    let changed: Vec<&str> = record["symbols_changed"]
        .as_array()
        .expect("symbols")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        changed.iter().any(|symbol| symbol.contains("multiply")),
        "{record:#}"
    );
    assert!(
        !changed.iter().any(|symbol| symbol.contains("divide")),
        "{record:#}"
    );
}

/// Issue 37: a linked task's session. In SWE-ContextBench, sympy-18212's
/// issue (a later report of `nthroot_mod` missing the root 0) is linked by
/// real references to sympy-18199, which a real Claude Code run fixed.
/// Imported beside three unrelated real sessions (another sympy fix, an
/// Elixir app, an issue tracker's task), the linked session leads the
/// answer, in full, with the file and definition it changed.
#[test]
fn a_linked_tasks_session_leads_the_answer_with_its_fix() {
    let home = tempfile::tempdir().expect("home");
    let folder = folder_with(&[
        "claude-code/swe-contextbench-sympy-18199.jsonl",
        "claude-code/swe-contextbench-sympy-20049.jsonl",
        "claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
        "claude-code/55604662-cf2a-4331-851a-ec234028f8ca.jsonl",
    ]);
    let folder_arg = folder.path().to_str().expect("utf-8");
    let (code, out, err) = precedent_at(
        home.path(),
        &[
            "import",
            folder_arg,
            "--user-id",
            "u",
            "--no-server",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let query = "nthroot_mod function misses one root of x = 0 mod p.\nWhen in the equation x**n = a mod p , when a % p == 0. Then x = 0 mod p is also a root of this equation. But right now `nthroot_mod` does not check for this condition. `nthroot_mod(17*17, 5 , 17)` has a root `0 mod 17`. But it does not return it.\n";
    let (code, out, err) =
        precedent_at(home.path(), &["search", "--user-id", "u", "--json", query]);
    assert_eq!(code, Some(0), "{err}");
    let answer: Value = serde_json::from_str(&out).expect("JSON");
    let first = &answer["data"][0];
    assert!(
        first["session_id"]
            .as_str()
            .is_some_and(|id| id.contains("fd5f1dd2-83e1-486f-941b-bdd54ec880b6")),
        "{answer}"
    );
    assert_eq!(first["kind"], "experience", "{answer}");
    let content = first["content"].as_str().expect("content");
    assert!(
        content.contains("sympy/ntheory/residue_ntheory.py") && content.contains("nthroot_mod"),
        "{content}"
    );
    assert!(content.len() > 300, "shown in full, not compact: {content}");
}
