//! `codemem import`: a repository built here with git2 (Python and Rust
//! files, fix commits, a merge, a binary file) becomes searchable memory,
//! directly into a data directory and through a running server.

use std::path::Path;
use std::process::Command;

use git2::{Oid, Repository, Signature, Time};
use serde_json::{Value, json};

use crate::support::{ServerProcess, data_dir};

/// Writes `files` into the work tree and commits them on HEAD with the
/// given parents (HEAD's commit when `parents` is `None`).
fn commit(repo: &Repository, files: &[(&str, &[u8])], message: &str, seconds: i64) -> Oid {
    let root = repo.workdir().expect("work tree");
    let mut index = repo.index().expect("index");
    for (path, content) in files {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(&full, content).expect("write");
        index.add_path(Path::new(path)).expect("add");
    }
    index.write().expect("write index");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let signature = Signature::new("Dev", "dev@example.com", &Time::new(seconds, 0)).expect("sig");
    let parent = repo.head().ok().and_then(|head| head.peel_to_commit().ok());
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        message,
        &tree,
        &parents,
    )
    .expect("commit")
}

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

fn codemem(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_codemem"))
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
        let (code, out, err) = codemem(&[
            "import",
            &repo,
            "--user-id",
            "team",
            "--data-dir",
            &dir_arg,
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
        let (code, out, err) = codemem(&[
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
    let (code, out, err) = codemem(&[
        "import",
        &repo,
        "--user-id",
        "team",
        "--server",
        &url,
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
    let (code, out, _) = codemem(&[
        "import",
        &repo,
        "--user-id",
        "team",
        "--server",
        &url,
        "--json",
    ]);
    assert_eq!(code, Some(0));
    let again: Value = serde_json::from_str(&out).expect("report");
    assert_eq!(again["already_imported"], 4, "{again}");

    // A data directory a server holds: a clear message naming --server.
    let server_dir_arg = server_dir.to_str().expect("utf-8");
    let (code, _, err) = codemem(&[
        "import",
        &repo,
        "--user-id",
        "team",
        "--data-dir",
        server_dir_arg,
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("held by a running server") && err.contains("--server"),
        "{err}"
    );
    // Not a repository: a clear message too.
    let (code, _, err) = codemem(&[
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
