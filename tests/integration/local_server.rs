//! Many processes, one memory: `precedent mcp` and `precedent import`
//! without `--server` share the data directory's local server, started on
//! first use; and one memory per repository, the same key for every
//! command. Real processes, real files, loopback.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use git2::Repository;
use serde_json::{Value, json};

/// A repository with `origin` at `origin_url` and one commit per
/// `(file, content, message)`.
fn repository(origin_url: &str, commits: &[(&str, &str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = Repository::init(dir.path()).expect("init");
    repo.remote("origin", origin_url).expect("origin");
    for (number, (file, content, message)) in commits.iter().enumerate() {
        let seconds = 1_700_000_000 + i64::try_from(number).expect("few commits") * 60;
        crate::support::git_commit(&repo, &[(file, content.as_bytes())], message, seconds);
    }
    dir
}

/// `precedent ARGS` in `directory` on `data_dir`: exit code, stdout,
/// stderr.
fn precedent_in(directory: &Path, data_dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(args)
        .current_dir(directory)
        .env("PRECEDENT_DATA_DIR", data_dir)
        .env("PRECEDENT_LOG", "warn")
        .env_remove("PRECEDENT_NO_AUTOSTART")
        .env_remove("PRECEDENT_USER_ID")
        .output()
        .expect("precedent runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `precedent mcp` in a repository, driven over stdio with JSON-RPC lines.
struct McpProcess {
    child: Child,
    stdin: ChildStdin,
    answers: std::sync::mpsc::Receiver<Value>,
    next_id: u64,
}

impl McpProcess {
    fn start(directory: &Path, data_dir: &Path) -> McpProcess {
        McpProcess::start_with(directory, data_dir, &[])
    }

    /// The same, with more arguments of `precedent mcp`.
    fn start_with(directory: &Path, data_dir: &Path, args: &[&str]) -> McpProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_precedent"))
            .arg("mcp")
            .args(args)
            .current_dir(directory)
            .env("PRECEDENT_DATA_DIR", data_dir)
            .env("PRECEDENT_LOG", "warn")
            .env_remove("PRECEDENT_NO_AUTOSTART")
            .env_remove("PRECEDENT_USER_ID")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("precedent mcp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line)
                    && value.get("id").is_some()
                    && sender.send(value).is_err()
                {
                    return;
                }
            }
        });
        let mut mcp = McpProcess {
            child,
            stdin,
            answers,
            next_id: 0,
        };
        let initialized = mcp.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "integration", "version": "1"}
            }),
        );
        assert!(initialized.get("result").is_some(), "{initialized}");
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).expect("write");
        self.stdin.flush().expect("flush");
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self
            .answers
            .recv_timeout(Duration::from_secs(120))
            .expect("an answer");
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    /// A tool call's result (its `isError` false).
    fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        let result = answer["result"].clone();
        assert_eq!(result["isError"], false, "{name}: {answer}");
        result
    }

    fn record(&mut self, session_id: &str, note: &str) {
        self.tool(
            "record_experience",
            json!({"session_id": session_id, "note": note}),
        );
    }

    /// The session ids `search_memory` answers for `query`.
    fn sessions_found(&mut self, query: &str) -> Vec<String> {
        let result = self.tool("search_memory", json!({"query": query, "top_k": 10}));
        result["structuredContent"]["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["session_id"].as_str().map(str::to_string))
            .collect()
    }

    /// Closes stdin; the process exits cleanly.
    fn finish(mut self) {
        drop(self.stdin);
        let status = self.child.wait().expect("mcp exits");
        assert!(status.success(), "mcp exited with {status}");
    }
}

/// The server's record in `data_dir`, if there is one that reads (a
/// server taking over writes it anew).
fn read_server_record(data_dir: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(data_dir.join("server.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The auto-started server's record in `data_dir`.
fn server_record(data_dir: &Path) -> Value {
    read_server_record(data_dir).expect("server.json holds a record")
}

/// A memory of the `acme/billing` repository holding one note, recorded
/// through `precedent mcp` (which starts the local server): the checkout
/// and the MCP process.
fn billing_memory_with_a_note(data_dir: &Path) -> (tempfile::TempDir, McpProcess) {
    let repo = repository("https://github.com/acme/billing.git", &[("a", "a", "init")]);
    let mut mcp = McpProcess::start(repo.path(), data_dir);
    mcp.record(
        "before",
        "Invoice totals were rounded twice: round once in invoice_total",
    );
    (repo, mcp)
}

/// Stops the server `data_dir` records (SIGTERM), and waits until it has
/// exited.
fn stop_server(data_dir: &Path) {
    let Ok(text) = std::fs::read_to_string(data_dir.join("server.json")) else {
        return;
    };
    let record: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if let Some(pid) = record["pid"]
        .as_i64()
        .and_then(|pid| i32::try_from(pid).ok())
        .filter(|pid| u32::try_from(*pid).ok() != Some(std::process::id()))
    {
        // SAFETY: signals the server this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        // Bounded so that a cleanup never hangs the suite.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while process_exists(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn process_exists(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.split(") ")
                .nth(1)
                .is_some_and(|rest| rest.starts_with('Z'))
        })
}

/// Stops the data directory's server when the test ends, passed or not.
struct ServerGuard(PathBuf);

impl Drop for ServerGuard {
    fn drop(&mut self) {
        stop_server(&self.0);
    }
}

const INVENTORY_COMMITS: &[(&str, &str, &str)] = &[
    (
        "stock.py",
        "def reserve_items(stock, sku):\n    return stock[sku]\n",
        "Add reserve_items",
    ),
    (
        "stock.py",
        "def reserve_items(stock, sku):\n    if sku not in stock:\n        raise MissingSku(sku)\n    return stock[sku]\n",
        "Raise MissingSku when reserve_items gets an unknown SKU",
    ),
];

#[test]
fn two_mcp_processes_and_an_import_share_one_data_directory_without_server() {
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().to_path_buf();
    let _server = ServerGuard(data_dir.clone());
    // One project checked out twice, its origin spelt in two cases.
    let upper = repository("https://github.com/Acme/Inventory.git", INVENTORY_COMMITS);
    let lower = repository(
        "git@github.com:acme/inventory.git",
        &[("README", "x", "init")],
    );

    let (first, second, imported) = std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            let mut mcp = McpProcess::start(upper.path(), &data_dir);
            mcp.record(
                "window-one",
                "Pagination of list_orders skipped the last page: fixed off-by-one in page_count",
            );
            mcp
        });
        let second = scope.spawn(|| {
            let mut mcp = McpProcess::start(lower.path(), &data_dir);
            mcp.record(
                "window-two",
                "Checkout timed out talking to the payment gateway: raised the client timeout in gateway_client",
            );
            mcp
        });
        let imported = scope.spawn(|| {
            let repo = upper.path().to_str().expect("utf-8").to_string();
            precedent_in(upper.path(), &data_dir, &["import", &repo, "--json"])
        });
        (
            first.join().expect("first mcp"),
            second.join().expect("second mcp"),
            imported.join().expect("import"),
        )
    });
    let (code, out, err) = imported;
    assert_eq!(code, Some(0), "import: {err}");
    let report: Value = serde_json::from_str(&out).expect("report");
    assert_eq!(report["imported"], 2, "{report}");

    // Each process sees the others' writes, under one key.
    let (mut first, mut second) = (first, second);
    assert!(
        first
            .sessions_found("checkout timed out payment gateway gateway_client timeout")
            .contains(&"window-two".to_string())
    );
    assert!(
        second
            .sessions_found("off-by-one in page_count pagination list_orders")
            .contains(&"window-one".to_string())
    );
    let found = second.sessions_found("reserve_items raises MissingSku for an unknown SKU");
    assert!(
        found.iter().any(|session| session.starts_with("git:")),
        "the imported history is the agent's memory: {found:?}"
    );
    first.finish();
    second.finish();

    // search and inspect in either checkout name the same memory.
    for checkout in [upper.path(), lower.path()] {
        let (code, out, err) = precedent_in(checkout, &data_dir, &["inspect", "--json"]);
        assert_eq!(code, Some(0), "{err}");
        let sessions: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(
            sessions["data"].as_array().map(Vec::len),
            Some(4),
            "{sessions}"
        );
        let (code, out, err) = precedent_in(
            checkout,
            &data_dir,
            &[
                "search",
                "--json",
                "checkout timed out payment gateway_client",
            ],
        );
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains("window-two"), "{out}");
    }
    let (_, out, _) = precedent_in(upper.path(), &data_dir, &["inspect"]);
    assert!(out.contains("github.com/acme/inventory"), "{out}");
}

#[test]
fn a_killed_auto_started_server_is_restarted_by_the_next_call_with_nothing_lost() {
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().to_path_buf();
    let _server = ServerGuard(data_dir.clone());
    let (_repo, mut mcp) = billing_memory_with_a_note(&data_dir);
    let killed = server_record(&data_dir);
    let pid = killed["pid"].as_i64().expect("pid");
    // SAFETY: kills the server this test's mcp started.
    unsafe { libc::kill(i32::try_from(pid).expect("pid"), libc::SIGKILL) };
    while process_exists(i32::try_from(pid).expect("pid")) {
        std::thread::sleep(Duration::from_millis(20));
    }

    mcp.record(
        "after",
        "Refunds posted to the wrong ledger: refund_ledger now reads the account's currency",
    );
    let restarted = server_record(&data_dir);
    assert_ne!(restarted["pid"], killed["pid"], "{restarted}");
    assert!(
        mcp.sessions_found("invoice totals rounded twice invoice_total")
            .contains(&"before".to_string())
    );
    assert!(
        mcp.sessions_found("refund posted to the wrong ledger refund_ledger")
            .contains(&"after".to_string())
    );
    mcp.finish();
}

#[test]
fn a_search_in_a_repository_with_no_memory_says_so_naming_its_key() {
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().to_path_buf();
    let _server = ServerGuard(data_dir.clone());
    let repo = repository("https://github.com/Acme/Empty.git", &[("a", "a", "init")]);
    let mut mcp = McpProcess::start(repo.path(), &data_dir);
    let result = mcp.tool("search_memory", json!({"query": "anything at all"}));
    let text = result["content"][0]["text"].as_str().expect("text");
    assert!(
        text.starts_with("No memory for github.com/acme/empty yet"),
        "{text}"
    );
    // A query over the Search limit is the agent's error, said as such,
    // not a broken connection.
    let huge = "parse_header ".repeat(100_000);
    let answer = mcp.request(
        "tools/call",
        json!({"name": "search_memory", "arguments": {"query": huge}}),
    );
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    assert!(text.contains("413") || text.contains("at most"), "{text}");
    assert!(!text.contains("cannot reach"), "{text}");
    mcp.finish();
}

/// An agent's MCP answer is checked against its own checkout through the
/// auto-started server: a function renamed since the imported fix is
/// marked stale in the item and its text.
#[test]
fn mcp_answers_are_marked_stale_against_the_agents_checkout() {
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().to_path_buf();
    let _server = ServerGuard(data_dir.clone());
    let repo = repository("https://github.com/Acme/Inventory.git", INVENTORY_COMMITS);
    let path = repo.path().to_str().expect("utf-8").to_string();
    let (code, out, err) = precedent_in(repo.path(), &data_dir, &["import", &path, "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    std::fs::write(
        repo.path().join("stock.py"),
        "def reserve_stock(stock, sku):\n    if sku not in stock:\n        raise MissingSku(sku)\n    return stock[sku]\n",
    )
    .expect("rename");

    let mut mcp = McpProcess::start(repo.path(), &data_dir);
    let result = mcp.tool(
        "search_memory",
        json!({"query": "reserve_items raises MissingSku for an unknown SKU", "top_k": 5}),
    );
    let items = result["structuredContent"]["data"]
        .as_array()
        .expect("data");
    let fix = items
        .iter()
        .find(|item| {
            item["content"]
                .as_str()
                .unwrap_or("")
                .contains("Raise MissingSku")
        })
        .unwrap_or_else(|| panic!("no item of the fix in {result}"));
    assert_eq!(
        fix["stale"]["missing_symbols"],
        json!(["reserve_items"]),
        "{fix}"
    );
    // Its content is not the blob the imported diff recorded either.
    assert_eq!(fix["stale"]["changed_files"], json!(["stock.py"]), "{fix}");
    let text = result["content"][0]["text"].as_str().expect("text");
    assert!(
        text.contains("Stale in this checkout: no longer defined reserve_items"),
        "{text}"
    );
    mcp.finish();
}

/// A listener that answers every request `200 {"status":"ok"}`, as
/// another user's process squatting a dead server's port would, and keeps
/// what it was sent.
struct ForeignListener {
    url: String,
    received: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl ForeignListener {
    fn bind(address: &str) -> ForeignListener {
        // The recorded port, unless another process took it since: then
        // any port, which the record is made to name.
        let listener = std::net::TcpListener::bind(address)
            .or_else(|_| std::net::TcpListener::bind("127.0.0.1:0"))
            .expect("a port");
        let address = listener.local_addr().expect("address");
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::clone(&received);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let kept = std::sync::Arc::clone(&kept);
                std::thread::spawn(move || {
                    use std::io::Read;
                    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
                    let mut buffer = [0u8; 65_536];
                    let mut request = Vec::new();
                    while let Ok(read) = stream.read(&mut buffer) {
                        if read == 0 {
                            break;
                        }
                        request.extend_from_slice(&buffer[..read]);
                        if request.windows(4).any(|window| window == b"\r\n\r\n") {
                            break;
                        }
                    }
                    kept.lock().expect("lock").extend_from_slice(&request);
                    let body = r#"{"status":"ok"}"#;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                });
            }
        });
        ForeignListener {
            url: format!("http://{address}"),
            received,
        }
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().expect("lock")).into_owned()
    }
}

#[test]
fn a_listener_squatting_a_dead_servers_port_is_sent_nothing_of_value() {
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().to_path_buf();
    let _server = ServerGuard(data_dir.clone());
    let repo = repository("https://github.com/acme/billing.git", &[("a", "a", "init")]);
    let mut mcp = McpProcess::start(repo.path(), &data_dir);
    mcp.record("before", "Invoice totals were rounded twice");
    let killed = server_record(&data_dir);
    let pid = i32::try_from(killed["pid"].as_i64().expect("pid")).expect("pid");
    // SAFETY: kills the server this test's mcp started, as an OOM kill would.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    while process_exists(pid) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another process takes the dead server's port, and the record is made
    // to name a live process: only the challenge can tell them apart.
    let url = killed["url"].as_str().expect("url");
    let foreign = ForeignListener::bind(url.trim_start_matches("http://"));
    let mut planted = killed.clone();
    planted["pid"] = json!(std::process::id());
    planted["url"] = json!(foreign.url);
    std::fs::write(data_dir.join("server.json"), planted.to_string()).expect("planted");

    mcp.record(
        "after",
        "Refunds posted to the wrong ledger: refund_ledger reads the currency",
    );
    assert!(
        mcp.sessions_found("refund posted to the wrong ledger refund_ledger")
            .contains(&"after".to_string()),
        "the note reached the real memory"
    );
    let restarted = server_record(&data_dir);
    assert_ne!(restarted["url"], planted["url"], "{restarted}");
    let received = foreign.received();
    assert!(received.contains("x-precedent-challenge"), "{received}");
    let key = killed["api_key"].as_str().expect("key");
    for secret in [key, "authorization", "refund", "ledger", "billing"] {
        assert!(
            !received.to_lowercase().contains(&secret.to_lowercase()),
            "{secret:?} reached the foreign listener: {received}"
        );
    }
    mcp.finish();
}

#[test]
fn the_data_directory_and_its_files_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().join("fresh");
    let _server = ServerGuard(data_dir.clone());
    let repo = repository("https://github.com/acme/billing.git", &[("a", "a", "init")]);
    // SAFETY: the test process's own mask, inherited by precedent.
    let previous = unsafe { libc::umask(0o022) };
    let mut mcp = McpProcess::start(repo.path(), &data_dir);
    // SAFETY: restores the mask.
    unsafe { libc::umask(previous) };
    mcp.record("private", "Invoice totals were rounded twice");
    let mut wide = Vec::new();
    let mut pending = vec![data_dir.clone()];
    while let Some(path) = pending.pop() {
        let metadata = std::fs::symlink_metadata(&path).expect("metadata");
        if metadata.permissions().mode() & 0o077 != 0 {
            wide.push(format!(
                "{} {:o}",
                path.display(),
                metadata.permissions().mode()
            ));
        }
        if metadata.is_dir() {
            for entry in std::fs::read_dir(&path).expect("list").flatten() {
                pending.push(entry.path());
            }
        }
    }
    assert!(wide.is_empty(), "readable by others: {wide:?}");
    mcp.finish();
}

#[test]
fn mcp_outside_any_repository_starts_on_the_folders_own_memory() {
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().to_path_buf();
    let _server = ServerGuard(data_dir.clone());
    let folder = tempfile::tempdir().expect("folder");
    let mut mcp = McpProcess::start(folder.path(), &data_dir);
    mcp.record(
        "notes",
        "The staging deploy needs the VPN: connect before deploy_staging",
    );
    assert!(
        mcp.sessions_found("deploy_staging needs the VPN")
            .contains(&"notes".to_string())
    );
    mcp.finish();
}

/// Issue 39 point 2: `serve` after `import` (or `mcp`, or a hook) failed
/// with "in use by another precedent process". It now asks the
/// auto-started local server to exit and serves the same memory; a server
/// started by hand is named, never stopped.
#[test]
fn serve_takes_over_from_the_auto_started_server_and_names_one_started_by_hand() {
    let data = tempfile::tempdir().expect("temp dir");
    let data_dir = data.path().to_path_buf();
    let _server = ServerGuard(data_dir.clone());
    let (repo, mcp) = billing_memory_with_a_note(&data_dir);
    mcp.finish();
    let auto_started = server_record(&data_dir);
    assert_eq!(auto_started["auto_started"], true, "{auto_started}");
    let auto_pid = i32::try_from(auto_started["pid"].as_i64().expect("pid")).expect("pid");

    let serve = |data_dir: &Path| {
        Command::new(env!("CARGO_BIN_EXE_precedent"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .env("PRECEDENT_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("PRECEDENT_NO_AUTOSTART")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve starts")
    };
    let mut by_hand = serve(&data_dir);
    let by_hand_pid = by_hand.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let recorded_pid = || read_server_record(&data_dir).and_then(|record| record["pid"].as_u64());
    while recorded_pid() != Some(u64::from(by_hand_pid)) {
        assert!(
            std::time::Instant::now() < deadline,
            "serve did not take over: {:?}",
            recorded_pid()
        );
        assert!(
            by_hand.try_wait().expect("wait").is_none(),
            "serve exited instead of taking over"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!process_exists(auto_pid), "the auto-started server is gone");
    assert_eq!(server_record(&data_dir)["auto_started"], false);
    let mut mcp = McpProcess::start(repo.path(), &data_dir);
    assert!(
        mcp.sessions_found("invoice totals rounded twice invoice_total")
            .contains(&"before".to_string()),
        "the memory the auto-started server held is served"
    );
    mcp.finish();

    let second = serve(&data_dir).wait_with_output().expect("second serve");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{stderr}");
    assert!(
        stderr.contains("a server started by hand holds it")
            && stderr.contains(&format!("pid {by_hand_pid}")),
        "{stderr}"
    );
    assert!(
        by_hand.try_wait().expect("wait").is_none(),
        "a server started by hand is never stopped"
    );
}

/// A server started by hand reads no checkout: `mcp` in a repository is
/// refused its `repo` once (403), searches without it, and stops naming
/// it: every later search is one request, not a refused one and a retry.
#[test]
fn mcp_stops_naming_its_checkout_to_a_server_that_reads_none() {
    let (_guard, data_dir) = crate::support::data_dir();
    let server = crate::support::ServerProcess::start(&data_dir, &[]);
    let url = format!("http://{}", server.address);
    let repo = repository("https://github.com/acme/billing.git", &[("a", "a", "init")]);
    let mut mcp = McpProcess::start_with(repo.path(), &data_dir, &["--server", &url]);
    mcp.record(
        "before",
        "Invoice totals were rounded twice: round once in invoice_total",
    );
    for _ in 0..3 {
        assert!(
            mcp.sessions_found("invoice totals rounded twice invoice_total")
                .contains(&"before".to_string())
        );
    }
    mcp.finish();
    let mut stream = std::net::TcpStream::connect(server.address).expect("connect");
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.address
    )
    .expect("request");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut stream, &mut text).expect("metrics");
    let refused: u64 = text
        .lines()
        .filter(|line| {
            line.starts_with("precedent_http_requests_total") && line.contains("status=\"403\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(refused, 1, "{text}");
}
