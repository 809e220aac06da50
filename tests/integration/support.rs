//! Helpers: an in-process app on a temporary data directory driven with
//! `tower::ServiceExt::oneshot`, and the real binary on a loopback port.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use precedent::{ApiOptions, Service, ServiceOptions};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A service on a temporary data directory, with its router.
pub struct TestApp {
    pub dir: tempfile::TempDir,
    pub service: Arc<Service>,
    pub router: Router,
}

impl TestApp {
    pub fn new() -> TestApp {
        TestApp::with_options(ApiOptions::default())
    }

    pub fn with_options(options: ApiOptions) -> TestApp {
        TestApp::with_service(|_| {}, options)
    }

    /// A service whose options `configure` adjusts.
    pub fn with_service(
        configure: impl FnOnce(&mut ServiceOptions),
        options: ApiOptions,
    ) -> TestApp {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut service_options = ServiceOptions::new(dir.path());
        configure(&mut service_options);
        let service = Service::open(service_options).expect("service opens");
        let router = precedent::app(service.clone(), options);
        TestApp {
            dir,
            service,
            router,
        }
    }

    /// Sends one request; answers the status and the JSON body (`Null`
    /// when the body is empty).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let mut builder = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        // A body is JSON unless the caller says otherwise, as a client sends it.
        let typed = headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"));
        if body.is_some() && !typed {
            builder = builder.header("content-type", "application/json");
        }
        let request = builder
            .body(body.map(Body::from).unwrap_or_else(Body::empty))
            .expect("request");
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                panic!("body is not JSON: {:?}", String::from_utf8_lossy(&bytes))
            })
        };
        (status, value)
    }

    pub async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.call("POST", path, Some(body.to_string().into_bytes()), &[])
            .await
    }

    pub async fn add(&self, body: &Value) -> (StatusCode, Value) {
        self.post("/add", body).await
    }

    /// Waits until the index has committed every Add this app made
    /// searchable: what a reader of the data directory sees.
    pub async fn wait_for_index_commit(&self) {
        let (_, health) = self.call("GET", "/health", None, &[]).await;
        let seq = health["indexed_seq"].as_i64().unwrap_or(i64::MAX);
        let dir = self.dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || wait_for_index_commit(&dir, seq))
            .await
            .expect("waits");
    }

    pub async fn search(&self, user_id: &str, query: &str, top_k: usize) -> Vec<Value> {
        let (status, body) = self
            .post(
                "/search",
                &json!({"query": query, "user_id": user_id, "top_k": top_k}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "search failed: {body}");
        body["data"].as_array().expect("data array").clone()
    }
}

/// An Add body with user/assistant turns alternating.
pub fn add_body(request_id: &str, user_id: &str, session_id: &str, contents: &[&str]) -> Value {
    let messages: Vec<Value> = contents
        .iter()
        .enumerate()
        .map(|(index, content)| {
            json!({
                "role": if index % 2 == 0 { "user" } else { "assistant" },
                "content": content,
            })
        })
        .collect();
    json!({
        "request_id": request_id,
        "user_id": user_id,
        "session_id": session_id,
        "messages": messages,
    })
}

/// The program `hooks install` and `setup` name: this test's binary,
/// resolved as they resolve it.
pub fn resolved_binary() -> String {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_precedent"));
    std::fs::canonicalize(&path)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Asserts an error body of the contract's shape and answers its reason.
pub fn reason(body: &Value) -> String {
    body["detail"]["reason"]
        .as_str()
        .filter(|reason| !reason.is_empty())
        .unwrap_or_else(|| panic!("no detail.reason in {body}"))
        .to_string()
}

/// The `precedent` binary, started on a loopback port.
pub struct ServerProcess {
    child: Option<Child>,
    pub address: SocketAddr,
    stderr_lines: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ServerProcess {
    pub fn start(data_dir: &Path, extra_args: &[&str]) -> ServerProcess {
        let mut command = ServerProcess::command();
        command.arg("--data-dir").arg(data_dir).args(extra_args);
        ServerProcess::spawn(command)
    }

    /// `precedent serve` on a free loopback port, logging at `info`, for
    /// a test to add arguments and environment to before
    /// [`ServerProcess::spawn`].
    pub fn command() -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_precedent"));
        command
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .env("PRECEDENT_LOG", "info")
            .env("NO_COLOR", "1");
        command
    }

    /// Starts `command` (from [`ServerProcess::command`]) and waits for
    /// the address it listens on.
    pub fn spawn(mut command: Command) -> ServerProcess {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("precedent starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (address_sender, address_receiver) = std::sync::mpsc::channel();
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let address = line
                    .split("listening on http://")
                    .nth(1)
                    .or_else(|| line.split("listening on https://").nth(1))
                    .map(|rest| rest.split_whitespace().next().unwrap_or("").to_string());
                // Stored before the address is announced: a test that reads
                // the lines once start() returns must see this one.
                sink.lock().expect("lines").push(line);
                if let Some(address) = address {
                    let _ = address_sender.send(address);
                }
            }
        });
        let address = match address_receiver.recv_timeout(Duration::from_secs(60)) {
            Ok(address) => address.parse().expect("socket address"),
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "server did not report its address; stderr: {:?}",
                    lines.lock().expect("lines")
                );
            }
        };
        ServerProcess {
            child: Some(child),
            address,
            stderr_lines: lines,
        }
    }

    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        http_request(self.address, method, path, body, &[])
    }

    pub fn stderr(&self) -> Vec<String> {
        self.stderr_lines.lock().expect("lines").clone()
    }

    /// SIGTERM, then waits; answers the exit status code.
    pub fn terminate(mut self) -> Option<i32> {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status.code();
            }
            assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no chance to clean up.
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn kill(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A minimal HTTP/1.1 client over a fresh connection (`Connection: close`).
pub fn http_request(
    address: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let payload = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
        payload.len()
    );
    if body.is_some() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write head");
    stream.write_all(payload.as_bytes()).expect("write body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("response head");
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status code");
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "chunked responses are not expected"
    );
    let value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).expect("JSON body")
    };
    (status, value)
}

/// A fresh temporary directory that outlives a server restart.
pub fn data_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("data");
    (dir, path)
}

/// POSTs JSON and answers the status, or `None` when the connection fails
/// or breaks (a server being killed).
pub fn try_post(address: SocketAddr, path: &str, body: &Value) -> Option<u16> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    let payload = body.to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(payload.as_bytes()).ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    text.split_whitespace().nth(1)?.parse().ok()
}

/// The messages of a fixture session (`fixtures/sessions/<name>.json`).
pub fn fixture_messages(name: &str) -> Vec<Value> {
    let path = format!(
        "{}/fixtures/sessions/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("JSON");
    fixture["messages"].as_array().expect("messages").clone()
}

/// Stores fixture sessions under `user_id`, each as one session of chunks
/// of 20 messages (the platform's chunking).
pub async fn store_fixtures(app: &TestApp, user_id: &str, names: &[&str]) {
    for name in names {
        for (index, messages) in fixture_messages(name).chunks(20).enumerate() {
            let body = json!({
                "request_id": format!("{name}:chunk-{index}"),
                "user_id": user_id,
                "session_id": name,
                "messages": messages,
            });
            let (status, answer) = app.add(&body).await;
            assert_eq!(status, StatusCode::OK, "{answer}");
        }
    }
}

#[path = "support/pg.rs"]
pub mod pg;

/// The sequence number the index in `data_dir` has committed (its last
/// commit's payload), 0 when there is none yet.
pub fn committed_index_seq(data_dir: &Path) -> i64 {
    let Ok(meta) = std::fs::read_to_string(data_dir.join("index").join("meta.json")) else {
        return 0;
    };
    let meta: Value = serde_json::from_str(&meta).unwrap_or(Value::Null);
    meta["payload"]
        .as_str()
        .and_then(|payload| serde_json::from_str::<Value>(payload).ok())
        .and_then(|payload| payload["seq"].as_i64())
        .unwrap_or(0)
}

/// Waits until the index in `data_dir` has committed every Add up to
/// `seq`: what another process reading the data directory sees (a server
/// makes Adds searchable at once, and commits them within about a second).
pub fn wait_for_index_commit(data_dir: &Path, seq: i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while committed_index_seq(data_dir) < seq {
        assert!(
            std::time::Instant::now() < deadline,
            "the index did not commit seq {seq} within 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Writes `files` into `repo`'s work tree and commits them on HEAD (its
/// commit the parent, if any), authored at `seconds` (Unix time).
pub fn git_commit(
    repo: &git2::Repository,
    files: &[(&str, &[u8])],
    message: &str,
    seconds: i64,
) -> git2::Oid {
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
    let signature =
        git2::Signature::new("Dev", "dev@example.com", &git2::Time::new(seconds, 0)).expect("sig");
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
