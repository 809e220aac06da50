//! The real binary on a PostgreSQL store (`serve --store postgres://...`):
//! Adds and Searches, a restart on an empty data directory (the index
//! rebuilt from PostgreSQL), a user deletion, and an outage of the
//! database. Each test in a fresh schema of the database named by
//! `PRECEDENT_TEST_POSTGRES` when it is set (fast: one cluster for all),
//! else of a PostgreSQL the test starts for itself in a temporary
//! directory; a test that restarts the database always starts its own.
//! Skipped, with a note, where PostgreSQL is not installed.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::pg::OwnPostgres;
use crate::support::{ServerProcess, add_body, data_dir, http_request};

const POSTGRES_URL_VAR: &str = "PRECEDENT_TEST_POSTGRES";

/// A fresh schema in the test database, dropped at the end; its `url`
/// puts the server's tables there (`options=-csearch_path=...`).
struct Schema {
    base_url: String,
    name: String,
    url: String,
    /// The test's own server, when it has one (declared last: dropped
    /// after the schema).
    own: Option<OwnPostgres>,
}

impl Schema {
    /// In the database of `PRECEDENT_TEST_POSTGRES`, else of a server of
    /// the test's own.
    fn create(test: &str) -> Option<Schema> {
        match std::env::var(POSTGRES_URL_VAR) {
            Ok(base_url) => Some(Schema::in_database(test, base_url, None)),
            Err(_) => Schema::own(test),
        }
    }

    /// Always on a server of the test's own (one the test may stop).
    fn own(test: &str) -> Option<Schema> {
        let own = OwnPostgres::start(test)?;
        Some(Schema::in_database(test, own.url(), Some(own)))
    }

    fn in_database(test: &str, base_url: String, own: Option<OwnPostgres>) -> Schema {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "precedent_it_{}_{}_{test}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut client = postgres::Client::connect(&base_url, postgres::NoTls)
            .unwrap_or_else(|error| panic!("{POSTGRES_URL_VAR}: {error}"));
        client
            .batch_execute(&format!("CREATE SCHEMA \"{name}\""))
            .expect("create schema");
        let separator = if base_url.contains('?') { '&' } else { '?' };
        let url = format!("{base_url}{separator}options=-csearch_path%3D{name}");
        Schema {
            base_url,
            name,
            url,
            own,
        }
    }

    /// The same schema through another host and port (a proxy).
    fn url_via(&self, port: u16) -> String {
        let parsed: postgres::Config = self.base_url.parse().expect("test URL");
        let user = parsed.get_user().expect("a user in the test URL");
        let password = parsed
            .get_password()
            .map(|password| format!(":{}", String::from_utf8_lossy(password)))
            .unwrap_or_default();
        let dbname = parsed.get_dbname().expect("a database in the test URL");
        format!(
            "postgres://{user}{password}@127.0.0.1:{port}/{dbname}?options=-csearch_path%3D{}",
            self.name
        )
    }

    fn count(&self, sql: &str) -> i64 {
        let mut client = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect");
        client.query_one(sql, &[]).expect("query").get(0)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        // A server of the test's own goes with its directory.
        if self.own.is_some() {
            return;
        }
        if let Ok(mut client) = postgres::Client::connect(&self.base_url, postgres::NoTls) {
            let _ =
                client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name));
        }
    }
}

fn search(server: &ServerProcess, user_id: &str, query: &str) -> Vec<serde_json::Value> {
    let (status, body) = server.request(
        "POST",
        "/search",
        Some(&serde_json::json!({"query": query, "user_id": user_id, "top_k": 10})),
    );
    assert_eq!(status, 200, "{body}");
    body["data"].as_array().expect("data").clone()
}

fn found(items: &[serde_json::Value], marker: &str) -> bool {
    items
        .iter()
        .any(|item| item["content"].as_str().unwrap_or("").contains(marker))
}

const SESSIONS: [(&str, &str); 3] = [
    (
        "s1",
        "Fix the crash in parse_config when the toml file has no [server] section: KeyError 'server' in config/loader.py",
    ),
    (
        "s2",
        "The retry loop in http/client.py never stops on HTTP 429; add exponential backoff to fetch_with_retry",
    ),
    (
        "s3",
        "Flaky test test_cache_eviction in tests/test_lru.py fails when the clock moves backwards",
    ),
];

#[test]
fn serve_on_postgres_adds_searches_rebuilds_and_deletes() {
    let Some(schema) = Schema::create("end_to_end") else {
        return;
    };
    let (_guard, dir) = data_dir();
    let store = schema.url.clone();
    let server = ServerProcess::start(&dir, &["--store", &store]);
    let (status, health) = server.request("GET", "/health", None);
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["store"], "postgres");
    assert_eq!(health["store_reachable"], true);
    for (index, (session, task)) in SESSIONS.iter().enumerate() {
        let (status, body) = server.request(
            "POST",
            "/add",
            Some(&add_body(
                &format!("r{index}"),
                "alice",
                session,
                &[task, "I found it and fixed it; the tests pass now"],
            )),
        );
        assert_eq!(status, 200, "{body}");
        // Read-your-writes: searchable once acknowledged.
        assert!(
            found(&search(&server, "alice", task), task),
            "{task} not found right after its Add"
        );
    }
    let (status, _) = server.request(
        "POST",
        "/add",
        Some(&add_body("r0", "bob", "s1", &[SESSIONS[0].1])),
    );
    assert_eq!(status, 200);
    // The rows are in PostgreSQL, not in the data directory.
    assert_eq!(schema.count("SELECT COUNT(*) FROM requests"), 4);
    assert!(!dir.join("precedent.sqlite3").exists());
    assert_eq!(server.terminate(), Some(0));

    // A new node with an empty data directory: the index is rebuilt from
    // PostgreSQL and finds everything again.
    let (_guard2, empty_dir) = data_dir();
    let server = ServerProcess::start(&empty_dir, &["--store", &store]);
    for (_, task) in SESSIONS {
        assert!(
            found(&search(&server, "alice", task), task),
            "{task} not found after the rebuild"
        );
    }
    assert!(found(&search(&server, "bob", SESSIONS[0].1), SESSIONS[0].1));

    // A user deletion empties the store of that user and the index.
    let (status, body) = server.request("DELETE", "/v1/users/alice", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["deleted"]["requests"], 3, "{body}");
    for (_, task) in SESSIONS {
        assert!(search(&server, "alice", task).is_empty());
    }
    assert_eq!(
        schema.count("SELECT COUNT(*) FROM requests WHERE user_id = 'alice'"),
        0
    );
    assert!(found(&search(&server, "bob", SESSIONS[0].1), SESSIONS[0].1));
    assert_eq!(server.terminate(), Some(0));
}

/// A TCP proxy to the PostgreSQL server that can be cut (every connection
/// closed, new ones refused) and restored: an outage of the database as a
/// node sees it, without stopping the shared server.
struct Proxy {
    port: u16,
    up: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(target: std::net::SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let up = Arc::new(AtomicBool::new(true));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
        let (thread_up, thread_open) = (Arc::clone(&up), Arc::clone(&open));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if !thread_up.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let mut open = thread_open.lock().expect("open");
                for stream in [&client, &server] {
                    open.push(stream.try_clone().expect("clone"));
                }
                drop(open);
                for (mut from, mut to) in [
                    (
                        client.try_clone().expect("clone"),
                        server.try_clone().expect("clone"),
                    ),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let mut buffer = [0u8; 16 * 1024];
                        while let Ok(read) = from.read(&mut buffer) {
                            if read == 0 || to.write_all(&buffer[..read]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, up, open }
    }

    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for stream in self.open.lock().expect("open").drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_database_outage_answers_503_stores_nothing_and_recovers() {
    let Some(schema) = Schema::create("outage") else {
        return;
    };
    let parsed: postgres::Config = schema.base_url.parse().expect("test URL");
    let port = parsed.get_ports().first().copied().unwrap_or(5432);
    let proxy = Proxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &["--store", &schema.url_via(proxy.port)]);
    let (status, body) = server.request(
        "POST",
        "/add",
        Some(&add_body(
            "before",
            "u",
            "s",
            &["stored before the outage: walrus"],
        )),
    );
    assert_eq!(status, 200, "{body}");

    proxy.cut();
    let (status, health) = server.request("GET", "/health", None);
    assert_eq!(status, 503, "{health}");
    for attempt in 0..3 {
        let (status, headers, body) = post_with_headers(
            server.address,
            &add_body(
                &format!("during-{attempt}"),
                "u",
                "s",
                &["sent during the outage: narwhal"],
            ),
        );
        assert_eq!(status, 503, "{body}");
        assert!(
            headers.to_ascii_lowercase().contains("retry-after:"),
            "{headers}"
        );
    }
    assert_eq!(
        schema.count("SELECT COUNT(*) FROM requests WHERE request_id LIKE 'during-%'"),
        0,
        "nothing of an Add answered 503 is stored"
    );

    proxy.restore();
    // The node reconnects by itself: the next Add and Search succeed.
    let mut status = 0;
    for _ in 0..50 {
        (status, _) = server.request(
            "POST",
            "/add",
            Some(&add_body(
                "after",
                "u",
                "s",
                &["sent after the outage: narwhal"],
            )),
        );
        if status == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(status, 200);
    let (status, health) = server.request("GET", "/health", None);
    assert_eq!(status, 200, "{health}");
    let items = search(&server, "u", "walrus narwhal outage");
    assert!(found(&items, "walrus"), "{items:?}");
    assert!(found(&items, "after the outage"), "{items:?}");
    assert_eq!(server.terminate(), Some(0));
}

/// POSTs an Add; answers the status, the response head and the body.
fn post_with_headers(
    address: std::net::SocketAddr,
    body: &serde_json::Value,
) -> (u16, String, String) {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let payload = body.to_string();
    let head = format!(
        "POST /add HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    );
    stream.write_all(head.as_bytes()).expect("write");
    stream.write_all(payload.as_bytes()).expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

#[test]
fn a_password_on_the_command_line_is_warned_about_and_never_logged() {
    let Some(schema) = Schema::create("password_warning") else {
        return;
    };
    let parsed: postgres::Config = schema.base_url.parse().expect("test URL");
    let Some(password) = parsed
        .get_password()
        .map(|p| String::from_utf8_lossy(p).to_string())
    else {
        eprintln!("a_password_on_the_command_line: skipped (the test URL has no password)");
        return;
    };
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &["--store", &schema.url]);
    let lines = server.stderr();
    assert!(
        lines.iter().any(|line| line.contains("PRECEDENT_STORE")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .all(|line| !line.contains(&format!(":{password}@"))),
        "{lines:?}"
    );
    let _ = http_request(server.address, "GET", "/health", None, &[]);
    assert_eq!(server.terminate(), Some(0));
}

/// Items of a Search holding `marker`.
fn count_found(items: &[serde_json::Value], marker: &str) -> usize {
    items
        .iter()
        .filter(|item| item["content"].as_str().unwrap_or("").contains(marker))
        .count()
}

/// Asserts that a Search of `node` for each acknowledged `(user_id,
/// marker)` finds it exactly once.
fn assert_each_found_once(node: &ServerProcess, acknowledged: &[(String, String)], what: &str) {
    for (user_id, marker) in acknowledged {
        let (status, body) = node.request(
            "POST",
            "/search",
            Some(&serde_json::json!({"query": marker, "user_id": user_id, "top_k": 100})),
        );
        assert_eq!(status, 200, "{body}");
        let items = body["data"].as_array().expect("data");
        assert_eq!(
            count_found(items, marker),
            1,
            "{marker} of {user_id} {what}"
        );
    }
}

#[test]
fn two_nodes_on_one_database_read_each_others_writes_and_deletions() {
    let Some(schema) = Schema::create("two_nodes") else {
        return;
    };
    let (_guard_a, dir_a) = data_dir();
    let (_guard_b, dir_b) = data_dir();
    let node_a = ServerProcess::start(&dir_a, &["--store", &schema.url]);
    let node_b = ServerProcess::start(&dir_b, &["--store", &schema.url]);

    // Add on A, Search on B at once; and back.
    let (status, body) = node_a.request(
        "POST",
        "/add",
        Some(&add_body("a1", "carol", "s1", &[SESSIONS[0].1, "fixed"])),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        found(&search(&node_b, "carol", SESSIONS[0].1), SESSIONS[0].1),
        "an Add taken by A is not found through B"
    );
    let (status, body) = node_b.request(
        "POST",
        "/add",
        Some(&add_body("b1", "carol", "s2", &[SESSIONS[1].1, "fixed"])),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        found(&search(&node_a, "carol", SESSIONS[1].1), SESSIONS[1].1),
        "an Add taken by B is not found through A"
    );
    // Adds to one session through both nodes: each node finds every
    // message once.
    for (index, node) in [&node_a, &node_b, &node_a].into_iter().enumerate() {
        let (status, body) = node.request(
            "POST",
            "/add",
            Some(&add_body(
                &format!("mixed{index}"),
                "carol",
                "s3",
                &[&format!(
                    "alternating nodes mixedmarker{index}x in one session"
                )],
            )),
        );
        assert_eq!(status, 200, "{body}");
    }
    for node in [&node_a, &node_b] {
        for index in 0..3 {
            let marker = format!("mixedmarker{index}x");
            assert_eq!(
                count_found(&search(node, "carol", &marker), &marker),
                1,
                "{marker}"
            );
        }
    }
    // B has a cache of carol now; a deletion on A empties it.
    let (status, body) = node_a.request("DELETE", "/v1/users/carol", None);
    assert_eq!(status, 200, "{body}");
    for node in [&node_a, &node_b] {
        for (_, task) in SESSIONS {
            assert!(search(node, "carol", task).is_empty());
        }
    }
    // The user comes back with a new Add: only that is found.
    let (status, _) = node_a.request(
        "POST",
        "/add",
        Some(&add_body("again", "carol", "s9", &[SESSIONS[2].1])),
    );
    assert_eq!(status, 200);
    let items = search(
        &node_b,
        "carol",
        &format!("{} {}", SESSIONS[0].1, SESSIONS[2].1),
    );
    assert!(found(&items, SESSIONS[2].1), "{items:?}");
    assert!(!found(&items, SESSIONS[0].1), "{items:?}");

    let (status, metrics) = http_metrics(&node_b);
    assert_eq!(status, 200);
    assert!(
        metrics.contains("precedent_cache_catch_ups_total"),
        "{metrics}"
    );
    assert!(metrics.contains("precedent_cache_users 1"), "{metrics}");
    assert_eq!(node_a.terminate(), Some(0));
    assert_eq!(node_b.terminate(), Some(0));
}

fn http_metrics(server: &ServerProcess) -> (u16, String) {
    let mut stream = TcpStream::connect(server.address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let head = format!(
        "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.address
    );
    stream.write_all(head.as_bytes()).expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

#[test]
fn sigkill_of_one_node_during_adds_loses_and_duplicates_nothing_through_the_other() {
    let Some(schema) = Schema::create("two_nodes_kill") else {
        return;
    };
    let (_guard_a, dir_a) = data_dir();
    let (_guard_b, dir_b) = data_dir();
    let node_a = ServerProcess::start(&dir_a, &["--store", &schema.url]);
    let node_b = ServerProcess::start(&dir_b, &["--store", &schema.url]);
    let address = node_a.address;
    let marker = |index: usize| format!("killmarker{index:04}q");
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..6)
        .map(|client| {
            let acknowledged = Arc::clone(&acknowledged);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for round in 0..200 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let index = client * 1000 + round;
                    let user_id = format!("user-{}", client % 3);
                    let body = add_body(
                        &format!("req-{index}"),
                        &user_id,
                        &format!("session-{client}"),
                        &[&format!("acknowledged {} text", marker(index)), "reply"],
                    );
                    match crate::support::try_post(address, "/add", &body) {
                        Some(200) => acknowledged
                            .lock()
                            .expect("acknowledged")
                            .push((user_id, marker(index))),
                        Some(_) => {}
                        None => break,
                    }
                }
            })
        })
        .collect();
    // Kill A once some Adds are acknowledged, while the clients send more.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while acknowledged.lock().expect("acknowledged").len() < 40 {
        assert!(std::time::Instant::now() < deadline, "no Adds acknowledged");
        std::thread::sleep(Duration::from_millis(5));
    }
    node_a.kill();
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.join().expect("client thread");
    }
    let acknowledged = acknowledged.lock().expect("acknowledged").clone();
    assert!(acknowledged.len() >= 40);
    let check =
        |node: &ServerProcess, what: &str| assert_each_found_once(node, &acknowledged, what);
    check(&node_b, "through B after A was killed");

    // A restarts (no clean shutdown: it fills each user again) and catches
    // up, Adds taken by B since included.
    let (status, _) = node_b.request(
        "POST",
        "/add",
        Some(&add_body(
            "after-kill",
            "user-0",
            "session-b",
            &["killmarkerafterq text"],
        )),
    );
    assert_eq!(status, 200);
    let node_a = ServerProcess::start(&dir_a, &["--store", &schema.url]);
    check(&node_a, "through A after its restart");
    assert_eq!(
        count_found(
            &search(&node_a, "user-0", "killmarkerafterq"),
            "killmarkerafterq"
        ),
        1
    );
    assert_eq!(node_a.terminate(), Some(0));
    assert_eq!(node_b.terminate(), Some(0));
}

/// Four clients sending 40 Adds each (the text holds the marker
/// `{prefix}NNNNq`; two users), each Add retried with the same request id on
/// 503 until acknowledged, for at most `patience`; what they saw is counted
/// as they go.
struct RetryingClients {
    /// `(user_id, marker)` of every acknowledged Add.
    acknowledged: Arc<Mutex<Vec<(String, String)>>>,
    /// 503 answers.
    refused: Arc<AtomicUsize>,
    /// 503 answers without Retry-After.
    without_retry_after: Arc<AtomicUsize>,
    clients: Vec<std::thread::JoinHandle<()>>,
}

impl RetryingClients {
    const CLIENTS: usize = 4;
    const ADDS_PER_CLIENT: usize = 40;

    fn spawn(
        address: std::net::SocketAddr,
        prefix: &'static str,
        patience: Duration,
    ) -> RetryingClients {
        let marker = move |index: usize| format!("{prefix}{index:04}q");
        let acknowledged = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(AtomicUsize::new(0));
        let without_retry_after = Arc::new(AtomicUsize::new(0));
        let clients = (0..Self::CLIENTS)
            .map(|client| {
                let acknowledged = Arc::clone(&acknowledged);
                let refused = Arc::clone(&refused);
                let without_retry_after = Arc::clone(&without_retry_after);
                std::thread::spawn(move || {
                    for round in 0..Self::ADDS_PER_CLIENT {
                        let index = client * 1000 + round;
                        let user_id = format!("user-{}", client % 2);
                        let body = add_body(
                            &format!("req-{index}"),
                            &user_id,
                            &format!("session-{client}"),
                            &[&format!("acknowledged {} text", marker(index)), "reply"],
                        );
                        let deadline = std::time::Instant::now() + patience;
                        loop {
                            let (status, headers, body) = post_with_headers(address, &body);
                            if status == 200 {
                                acknowledged
                                    .lock()
                                    .expect("acknowledged")
                                    .push((user_id.clone(), marker(index)));
                                break;
                            }
                            assert_eq!(status, 503, "{body}");
                            refused.fetch_add(1, Ordering::SeqCst);
                            if !headers.to_ascii_lowercase().contains("retry-after:") {
                                without_retry_after.fetch_add(1, Ordering::SeqCst);
                            }
                            assert!(
                                std::time::Instant::now() < deadline,
                                "req-{index} not acknowledged in time"
                            );
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                })
            })
            .collect();
        RetryingClients {
            acknowledged,
            refused,
            without_retry_after,
            clients,
        }
    }

    /// Acknowledged Adds so far.
    fn num_acknowledged(&self) -> usize {
        self.acknowledged.lock().expect("acknowledged").len()
    }

    /// Waits (a minute at most) until `count` Adds are acknowledged.
    fn wait_for_acknowledged(&self, count: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while self.num_acknowledged() < count {
            assert!(std::time::Instant::now() < deadline, "no Adds acknowledged");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for every client, then checks what an outage (`outage`, which
    /// began when `acknowledged_before` Adds were acknowledged) must leave:
    /// every Add acknowledged, some refused with 503 and Retry-After, the
    /// node healthy again, each acknowledged Add found once and stored once.
    fn check_after(
        self,
        outage: &str,
        acknowledged_before: usize,
        server: &ServerProcess,
        schema: &Schema,
    ) {
        for client in self.clients {
            client.join().expect("client thread");
        }
        let acknowledged = self.acknowledged.lock().expect("acknowledged").clone();
        assert_eq!(acknowledged.len(), Self::CLIENTS * Self::ADDS_PER_CLIENT);
        assert!(
            acknowledged_before < acknowledged.len(),
            "Adds went on after {outage}"
        );
        assert!(
            self.refused.load(Ordering::SeqCst) > 0,
            "Adds during {outage} were answered 503"
        );
        assert_eq!(
            self.without_retry_after.load(Ordering::SeqCst),
            0,
            "every 503 carries Retry-After"
        );
        let (status, health) = server.request("GET", "/health", None);
        assert_eq!(status, 200, "{health}");
        assert_each_found_once(server, &acknowledged, &format!("after {outage}"));
        assert_eq!(
            schema.count("SELECT COUNT(*) FROM requests"),
            i64::try_from(Self::CLIENTS * Self::ADDS_PER_CLIENT).expect("count"),
            "one stored Add per acknowledged request, none of an Add answered 503"
        );
    }
}

/// The database going away and coming back while clients keep adding, as
/// a network cut: the proxy between node and database is cut *during*
/// concurrent Adds, so that every connection of the node (writer, readers)
/// breaks mid-use, Adds in flight included, without the orderly shutdown a
/// restart gives them, and new ones are refused until it is restored (the
/// real restart is the next test). Clients retry an Add answered 503 (same
/// request id, as a client following Retry-After does) until it is
/// acknowledged: every acknowledged Add is then found once, none twice
/// (an Add whose COMMIT landed as the connection broke is answered by its
/// retry from the request log), and the node recovers by itself.
#[test]
fn a_database_outage_during_concurrent_adds_loses_and_duplicates_nothing() {
    let Some(schema) = Schema::create("outage_during_adds") else {
        return;
    };
    let parsed: postgres::Config = schema.base_url.parse().expect("test URL");
    let port = parsed.get_ports().first().copied().unwrap_or(5432);
    let proxy = Proxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &["--store", &schema.url_via(proxy.port)]);
    let address = server.address;
    let clients = RetryingClients::spawn(address, "outagemark", Duration::from_secs(60));
    // Cut once some Adds are acknowledged, while the clients send more.
    clients.wait_for_acknowledged(20);
    proxy.cut();
    let acknowledged_at_cut = clients.num_acknowledged();
    std::thread::sleep(Duration::from_millis(1500));
    let (status, health) = server.request("GET", "/health", None);
    assert_eq!(status, 503, "{health}");
    proxy.restore();
    clients.check_after("the outage", acknowledged_at_cut, &server, &schema);
    assert_eq!(server.terminate(), Some(0));
}

/// The "restart PostgreSQL during Adds", for real: a server of
/// the test's own is stopped (`pg_ctl stop -m fast`, every session of the
/// node ended) while clients keep adding, answered 503 with Retry-After
/// while it is down, then started again on the same port. Clients retry an
/// Add answered 503 with the same request id until it is acknowledged:
/// every acknowledged Add is then found exactly once and stored once, and
/// the node recovers by itself, without a restart of its own.
#[test]
fn a_postgres_restart_during_concurrent_adds_loses_and_duplicates_nothing() {
    let Some(mut schema) = Schema::own("restart_during_adds") else {
        return;
    };
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &["--store", &schema.url]);
    let address = server.address;
    let clients = RetryingClients::spawn(address, "restartmark", Duration::from_secs(90));
    // Stop once some Adds are acknowledged, while the clients send more.
    clients.wait_for_acknowledged(20);
    let own = schema.own.as_mut().expect("a server of the test's own");
    own.stop();
    let acknowledged_at_stop = clients.num_acknowledged();
    std::thread::sleep(Duration::from_millis(1500));
    let (status, health) = server.request("GET", "/health", None);
    assert_eq!(status, 503, "{health}");
    let (status, headers, body) = post_with_headers(
        address,
        &add_body(
            "while-down",
            "user-0",
            "s",
            &["sent while the database is down"],
        ),
    );
    assert_eq!(status, 503, "{body}");
    assert!(
        headers.to_ascii_lowercase().contains("retry-after:"),
        "{headers}"
    );
    own.start_server();
    clients.check_after("the restart", acknowledged_at_stop, &server, &schema);
    assert_eq!(server.terminate(), Some(0));
}

/// The value of one unlabelled metric in a `/metrics` body.
fn metric(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in {body}"))
}

#[test]
fn searches_for_users_with_nothing_stored_cost_no_catch_up_and_marks_stay_bounded() {
    let Some(schema) = Schema::create("bounded_marks") else {
        return;
    };
    let (_guard_a, dir_a) = data_dir();
    let (_guard_b, dir_b) = data_dir();
    let node_a = ServerProcess::start(&dir_a, &["--store", &schema.url]);
    let node_b = ServerProcess::start(&dir_b, &["--store", &schema.url, "--max-cached-users", "2"]);

    // Users who never wrote: answered empty, no catch-up, no mark.
    for index in 0..20 {
        assert!(search(&node_b, &format!("ghost-{index}"), "anything at all").is_empty());
    }
    let (status, explained) = node_b.request(
        "POST",
        "/v1/search/explain",
        Some(&serde_json::json!({"query": "parse_config", "user_id": "ghost-x", "top_k": 5})),
    );
    assert_eq!(status, 200, "{explained}");
    assert_eq!(explained["num_sessions"], 0, "{explained}");
    assert_eq!(
        explained["candidates"],
        serde_json::json!([]),
        "{explained}"
    );
    let (_, metrics) = http_metrics(&node_b);
    assert_eq!(metric(&metrics, "precedent_cache_catch_ups_total"), 0.0);
    assert_eq!(metric(&metrics, "precedent_cache_users"), 0.0);

    // Three users written through A, searched through B, which keeps two.
    let marker = |user: usize, round: usize| format!("boundmark{user}r{round}z");
    for user in 0..3 {
        let (status, body) = node_a.request(
            "POST",
            "/add",
            Some(&add_body(
                &format!("first-{user}"),
                &format!("user-{user}"),
                "s",
                &[&format!("task {} in lib.rs", marker(user, 0)), "done"],
            )),
        );
        assert_eq!(status, 200, "{body}");
    }
    for user in 0..3 {
        let items = search(&node_b, &format!("user-{user}"), &marker(user, 0));
        assert_eq!(count_found(&items, &marker(user, 0)), 1, "{items:?}");
    }
    let (_, metrics) = http_metrics(&node_b);
    assert_eq!(metric(&metrics, "precedent_cache_users"), 2.0);
    assert_eq!(metric(&metrics, "precedent_cache_evictions_total"), 1.0);

    // user-0 was dropped (least recently used) while its documents stayed
    // in B's index; a new Add through A, then B fills user-0 from nothing:
    // every message once, the new one included.
    let (status, body) = node_a.request(
        "POST",
        "/add",
        Some(&add_body(
            "second-0",
            "user-0",
            "s",
            &[&format!("then {}", marker(0, 1))],
        )),
    );
    assert_eq!(status, 200, "{body}");
    for round in 0..2 {
        let items = search(&node_b, "user-0", &marker(0, round));
        assert_eq!(count_found(&items, &marker(0, round)), 1, "{items:?}");
    }
    let (_, metrics) = http_metrics(&node_b);
    assert_eq!(metric(&metrics, "precedent_cache_users"), 2.0);
    assert_eq!(node_a.terminate(), Some(0));
    assert_eq!(node_b.terminate(), Some(0));
}

#[test]
fn an_unreadable_stored_record_during_a_catch_up_is_derived_again_not_a_failed_search() {
    let Some(schema) = Schema::create("unreadable_catch_up") else {
        return;
    };
    let (_guard_a, dir_a) = data_dir();
    let (_guard_b, dir_b) = data_dir();
    let node_a = ServerProcess::start(&dir_a, &["--store", &schema.url]);
    for (index, (session, task)) in SESSIONS.iter().enumerate() {
        let (status, body) = node_a.request(
            "POST",
            "/add",
            Some(&add_body(
                &format!("r{index}"),
                "dave",
                session,
                &[task, "fixed"],
            )),
        );
        assert_eq!(status, 200, "{body}");
    }
    // As an older extractor would have left it: a record this build cannot
    // read.
    let mut client = postgres::Client::connect(&schema.url, postgres::NoTls).expect("connect");
    let changed = client
        .execute(
            "UPDATE sessions SET record_json = '{\"renamed_task\": \"old\"}' WHERE session_id = 's2'",
            &[],
        )
        .expect("old shape");
    assert_eq!(changed, 1);

    // B has never seen dave: its catch-up meets the record on a read-only
    // snapshot. The Search answers, s2 included (derived again).
    let node_b = ServerProcess::start(&dir_b, &["--store", &schema.url]);
    for (session, task) in SESSIONS {
        let (status, body) = node_b.request(
            "POST",
            "/search",
            Some(&serde_json::json!({"query": task, "user_id": "dave", "top_k": 10})),
        );
        assert_eq!(status, 200, "{body}");
        assert!(
            body["data"]
                .as_array()
                .expect("data")
                .iter()
                .any(|item| item["session_id"] == session),
            "{session} is searchable through B: {body}"
        );
    }
    assert_eq!(
        schema.count("SELECT COUNT(*) FROM sessions WHERE record_json LIKE '%renamed_task%'"),
        0,
        "the unreadable record was derived again and stored"
    );
    let lines = node_b.stderr();
    assert!(
        lines.iter().any(|line| line.contains("unreadable")),
        "{lines:?}"
    );
    assert_eq!(node_a.terminate(), Some(0));
    assert_eq!(node_b.terminate(), Some(0));
}
