//! Stale marks on a real repository: its history imported, then a file
//! deleted, a function renamed and a line edited in the working tree (each
//! file's content checked against the blob its diff recorded); a
//! Search that names the checkout marks each, through the CLI and through
//! a server on loopback, and a Search that names none marks nothing.

use std::path::Path;
use std::process::Command;

use git2::Repository;
use serde_json::{Value, json};

use crate::support::{ServerProcess, data_dir};

/// Commits `files` (text) on HEAD.
fn commit(repo: &Repository, files: &[(&str, &str)], message: &str, seconds: i64) {
    let files: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(path, content)| (*path, content.as_bytes()))
        .collect();
    crate::support::git_commit(repo, &files, message, seconds);
}

const PARSER_V1: &str = "class Parser:\n    def parse(self, text):\n        return text\n";
const PARSER_V2: &str =
    "class Parser:\n    def parse(self, text):\n        return text.strip().splitlines()\n";
const CACHE_V1: &str = "def lookup_entry(cache, key):\n    return cache[key]\n";
const CACHE_V2: &str =
    "def lookup_entry(cache, key):\n    return cache.get(key, default_entry())\n";
const LEGACY_V1: &str = "def legacy_loader(path):\n    return open(path).read()\n";
const LEGACY_V2: &str =
    "def legacy_loader(path):\n    with open(path) as handle:\n        return handle.read()\n";

/// A repository whose second commit fixes three files, then a working
/// tree where one is deleted, one has its function renamed (the fix's
/// line kept) and one has the fix's line edited.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    let repo = Repository::init(dir.path()).expect("init");
    commit(
        &repo,
        &[
            ("pkg/parser.py", PARSER_V1),
            ("pkg/cache.py", CACHE_V1),
            ("pkg/legacy.py", LEGACY_V1),
        ],
        "Initial parser, cache and loader",
        1_700_000_000,
    );
    commit(
        &repo,
        &[
            ("pkg/parser.py", PARSER_V2),
            ("pkg/cache.py", CACHE_V2),
            ("pkg/legacy.py", LEGACY_V2),
        ],
        "Fix KeyError in lookup_entry and strip parsed text\n\nlookup_entry raised KeyError for a missing key; legacy_loader leaked handles.",
        1_700_000_100,
    );
    let root = dir.path();
    std::fs::remove_file(root.join("pkg/legacy.py")).expect("delete");
    std::fs::write(
        root.join("pkg/cache.py"),
        CACHE_V2.replace("def lookup_entry", "def find_entry"),
    )
    .expect("rename");
    std::fs::write(
        root.join("pkg/parser.py"),
        PARSER_V2.replace(".strip().splitlines()", ".splitlines()"),
    )
    .expect("edit");
    dir
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

/// The experience item of the fix commit in a Search answer.
fn fix_item(answer: &Value) -> &Value {
    answer["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|item| {
            item["kind"] == "experience"
                && item["content"]
                    .as_str()
                    .unwrap_or("")
                    .contains("KeyError in lookup_entry")
        })
        .unwrap_or_else(|| panic!("no experience of the fix in {answer}"))
}

fn assert_marked(item: &Value) {
    let stale = &item["stale"];
    assert_eq!(stale["missing_files"], json!(["pkg/legacy.py"]), "{item}");
    let missing: Vec<&str> = stale["missing_symbols"]
        .as_array()
        .expect("missing_symbols")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(missing.contains(&"lookup_entry"), "{item}");
    assert!(missing.contains(&"legacy_loader"), "{item}");
    assert!(!missing.iter().any(|name| name.contains("parse")), "{item}");
    // Each file's git blob against the one the imported diff recorded:
    // both edited files changed since (a rename is a change too).
    assert_eq!(
        stale["changed_files"],
        json!(["pkg/cache.py", "pkg/parser.py"]),
        "{item}"
    );
    let content = item["content"].as_str().expect("content");
    assert!(content.contains("Stale in this checkout:"), "{content}");
    assert!(content.contains("deleted pkg/legacy.py"), "{content}");
}

#[test]
fn a_deleted_file_a_renamed_function_and_an_edited_line_are_marked() {
    let checkout = repository();
    let (_guard, data) = data_dir();
    let repo = checkout.path().to_str().expect("utf-8");
    let data = data.to_str().expect("utf-8");
    // Directly into the data directory: the server below opens it.
    let (code, out, err) = precedent(&[
        "import",
        repo,
        "--user-id",
        "u",
        "--data-dir",
        data,
        "--no-server",
    ]);
    assert_eq!(code, Some(0), "{out}{err}");

    let query = "KeyError in lookup_entry for a missing key";
    let (code, out, err) = precedent(&[
        "search",
        "--user-id",
        "u",
        "--data-dir",
        data,
        "--json",
        "--repo",
        repo,
        query,
    ]);
    assert_eq!(code, Some(0), "{err}");
    let answer: Value = serde_json::from_str(&out).expect("JSON");
    assert_marked(fix_item(&answer));

    // Without a checkout nothing is checked or said.
    let (code, out, err) = precedent(&[
        "search",
        "--user-id",
        "u",
        "--data-dir",
        data,
        "--json",
        query,
    ]);
    assert_eq!(code, Some(0), "{err}");
    let answer: Value = serde_json::from_str(&out).expect("JSON");
    let item = fix_item(&answer);
    assert!(item.get("stale").is_none(), "{item}");
    assert!(
        !item["content"].as_str().unwrap_or("").contains("Stale"),
        "{item}"
    );

    // A server started by hand reads no checkout unless told where they
    // are.
    let server = ServerProcess::start(Path::new(data), &[]);
    let body = json!({ "user_id": "u", "query": query, "top_k": 5, "repo": repo });
    let (status, refused) = server.request("POST", "/v1/search", Some(&body));
    assert_eq!(status, 403, "{refused}");
    assert!(refused.to_string().contains("--checkout-root"), "{refused}");
    assert_eq!(server.terminate(), Some(0));

    // The same through a server whose operator names the checkouts' root,
    // and in its explanation.
    let root = Path::new(repo)
        .parent()
        .expect("the checkout has a parent")
        .to_string_lossy()
        .into_owned();
    let server = ServerProcess::start(Path::new(data), &["--checkout-root", &root]);
    let body = json!({ "user_id": "u", "query": query, "top_k": 5, "repo": repo });
    let (status, answer) = server.request("POST", "/v1/search", Some(&body));
    assert_eq!(status, 200, "{answer}");
    assert_marked(fix_item(&answer));
    let (status, explained) = server.request("POST", "/v1/search/explain", Some(&body));
    assert_eq!(status, 200, "{explained}");
    let marks = explained["stale"].as_object().expect("stale marks");
    assert!(
        marks
            .values()
            .any(|mark| mark["missing_files"] == json!(["pkg/legacy.py"])),
        "{explained}"
    );

    // A checkout that is no directory, or one outside the roots (the
    // server's own disk), is refused with a reason.
    for (elsewhere, expected) in [("/no/such/checkout", 422), ("/", 403)] {
        let bad = json!({ "user_id": "u", "query": query, "top_k": 5, "repo": elsewhere });
        let (status, refused) = server.request("POST", "/v1/search", Some(&bad));
        assert_eq!(status, expected, "{refused}");
        assert!(refused.to_string().contains("repo"), "{refused}");
    }
    assert_eq!(server.terminate(), Some(0));
}

/// Issue 39 point 4: a message item showed a past session's code as it
/// was, with no stale mark: only experience items were checked. Every
/// item of a session now carries its session's mark.
#[test]
fn a_message_item_carries_its_sessions_stale_mark() {
    let checkout = repository();
    let (_guard, data) = data_dir();
    let repo = checkout.path().to_str().expect("utf-8");
    let root = checkout
        .path()
        .parent()
        .expect("the checkout has a parent")
        .to_string_lossy()
        .into_owned();
    let server = ServerProcess::start(&data, &["--checkout-root", &root]);
    let body = crate::support::add_body(
        "r1",
        "u",
        "trajectory",
        &[
            "lookup_entry raises KeyError for a missing key in pkg/cache.py",
            "The cache indexes the dict directly. The fix:\n```diff\ndiff --git a/pkg/cache.py b/pkg/cache.py\n--- a/pkg/cache.py\n+++ b/pkg/cache.py\n@@ -1,2 +1,2 @@\n def lookup_entry(cache, key):\n-    return cache[key]\n+    return cache.get(key)\n```",
            "run the tests",
            "Fixed: lookup_entry in pkg/cache.py returns cache.get(key) for a missing key instead of raising KeyError; the tests pass.",
        ],
    );
    let (status, answer) = server.request("POST", "/add", Some(&body));
    assert_eq!(status, 200, "{answer}");
    let query = json!({
        "user_id": "u",
        "query": "KeyError in lookup_entry for a missing key: cache.get(key)",
        "top_k": 10,
        "repo": repo,
    });
    let (status, answer) = server.request("POST", "/v1/search", Some(&query));
    assert_eq!(status, 200, "{answer}");
    let items: Vec<&Value> = answer["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|item| item["session_id"] == "trajectory")
        .collect();
    assert!(
        items.iter().any(|item| item["kind"] == "message"),
        "a message of the session is shown: {answer}"
    );
    for item in items {
        let stale = &item["stale"];
        assert!(
            stale["missing_symbols"]
                .as_array()
                .is_some_and(|names| names.contains(&json!("lookup_entry"))),
            "{item}"
        );
        assert!(
            item["content"]
                .as_str()
                .unwrap_or("")
                .contains("Stale in this checkout:"),
            "{item}"
        );
    }
}
