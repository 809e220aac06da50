//! `precedent bench scale`: precedent at scale, side by side with an SQLite
//! FTS5 memory ([`super::reference`]) under the same workload.
//!
//! The corpus replays a bench directory's sessions, chunked the way the
//! evaluation platform chunks them, multiplied under fresh ids up to
//! `--sessions`. The first sessions (up to `--scope-sessions`) go to one
//! large user scope; the rest to small scopes of [`SMALL_SCOPE_SESSIONS`]
//! sessions each, like the per-task scopes of the benchmark.
//!
//! Each system runs as its own process (the real `precedent serve`, and
//! `precedent bench reference-server`) on a fresh directory and is driven
//! over HTTP on loopback by the same client code:
//! 1. Adds from one client (the first tenth of the sessions, at most
//!    [`MAX_SINGLE_CLIENT_SESSIONS`]), then from eight clients, each
//!    client sending whole sessions chunk by chunk in order;
//! 2. Searches, one at a time: task statements of stored sessions against
//!    the large scope, then against each one's small scope;
//! 3. peak RSS of the server process, bytes on disk, and the time a
//!    restart on the full store takes to answer its health check;
//! 4. on that restarted server, big Adds: whole trajectories
//!    ([`TRAJECTORY_MESSAGES`] messages, [`TRAJECTORY_BYTES`] bytes) in one
//!    Add each while another user sends one-message Adds, then one-message
//!    Adds to a session of [`BIG_SESSION_BYTES`] bytes. Their content is
//!    the bench sessions' messages, concatenated and cut to size.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::{chunk_ends, percentile, read_sessions};
use precedent_core::domain::Role;

/// Sessions per small scope.
pub const SMALL_SCOPE_SESSIONS: usize = 20;
/// Sessions sent by the single client at most.
pub const MAX_SINGLE_CLIENT_SESSIONS: usize = 500;
/// Concurrent clients of the second Add phase.
pub const CONCURRENT_CLIENTS: usize = 8;
/// Messages of one whole-trajectory Add.
pub const TRAJECTORY_MESSAGES: usize = 500;
/// Bytes of content of one whole-trajectory Add.
pub const TRAJECTORY_BYTES: usize = 5_000_000;
/// Whole-trajectory Adds measured (each its own session).
pub const TRAJECTORY_ADDS: usize = 3;
/// Bytes of content of the big session.
pub const BIG_SESSION_BYTES: usize = 50_000_000;
/// Adds that build the big session.
pub const BIG_SESSION_ADDS: usize = 5;
/// One-message Adds to the big session measured.
pub const BIG_SESSION_SMALL_ADDS: usize = 5;

/// What to run.
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    /// Bench directory with `sessions.jsonl.gz`.
    pub bench_dir: PathBuf,
    /// Sessions in the corpus (the bench's are repeated under fresh ids).
    pub sessions: Option<usize>,
    /// Sessions in the large scope.
    pub scope_sessions: usize,
    /// Searches per scope kind.
    pub searches: usize,
    /// Where the systems keep their data (a temporary directory if none).
    pub work_dir: Option<PathBuf>,
    /// Skip the FTS5 reference.
    pub skip_reference: bool,
    /// precedent's store, when not the data directory's SQLite (a
    /// PostgreSQL URL of an empty database); passed to the server in
    /// PRECEDENT_STORE.
    pub store: Option<String>,
}

/// Figures of one system.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SystemFigures {
    /// Adds sent.
    pub adds: usize,
    /// Adds answered otherwise than 200.
    pub add_errors: usize,
    /// Add latency with one client, ms.
    pub add_p50_ms: f64,
    /// ...
    pub add_p99_ms: f64,
    /// Add latency with eight clients, ms.
    pub add_p50_ms_8: f64,
    /// ...
    pub add_p99_ms_8: f64,
    /// Adds per second with one client.
    pub adds_per_s_1: f64,
    /// Adds per second with eight clients.
    pub adds_per_s_8: f64,
    /// Search latency on the large scope, ms.
    pub search_p50_ms: f64,
    /// ...
    pub search_p99_ms: f64,
    /// Search latency on small scopes, ms.
    pub small_search_p50_ms: f64,
    /// ...
    pub small_search_p99_ms: f64,
    /// Searches answered otherwise than 200.
    pub search_errors: usize,
    /// Searches whose first item comes from a session of the query's task
    /// (the query is a stored session's task statement).
    pub self_hit_rate: f64,
    /// Peak resident memory of the server process, MB.
    pub rss_peak_mb: f64,
    /// Bytes on disk per MB of Add content.
    pub disk_bytes_per_input_mb: f64,
    /// Time from a restart on the full store to a healthy answer, ms.
    pub startup_ms: f64,
    /// One whole-trajectory Add ([`TRAJECTORY_MESSAGES`] messages,
    /// [`TRAJECTORY_BYTES`] bytes), median of [`TRAJECTORY_ADDS`], ms.
    pub trajectory_add_ms: f64,
    /// Another user's one-message Adds while those trajectories are
    /// written: p99, ms.
    pub other_user_add_p99_ms: f64,
    /// A one-message Add to a session of [`BIG_SESSION_BYTES`] bytes:
    /// median of [`BIG_SESSION_SMALL_ADDS`], ms.
    pub big_session_add_ms: f64,
    /// Big Adds (trajectories, big session) answered otherwise than 200.
    pub big_add_errors: usize,
}

/// The whole report.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ScaleReport {
    /// Sessions in the corpus.
    pub sessions: usize,
    /// Sessions in the large scope.
    pub scope_sessions: usize,
    /// Small scopes.
    pub small_scopes: usize,
    /// Add chunks.
    pub chunks: usize,
    /// MB of message content sent.
    pub input_mb: f64,
    /// Evidence items precedent stored (from its session records).
    pub evidence_items: i64,
    /// precedent.
    pub precedent: SystemFigures,
    /// The FTS5 reference (absent when skipped).
    pub fts5: Option<SystemFigures>,
}

impl ScaleReport {
    /// The flat JSON object `--json` prints: precedent's figures, then the
    /// reference's with an `fts5_` prefix, then the corpus.
    pub fn flat_json(&self) -> Value {
        let mut object = serde_json::Map::new();
        if let Ok(Value::Object(precedent)) = serde_json::to_value(&self.precedent) {
            object.extend(precedent);
        }
        if let Some(fts5) = &self.fts5
            && let Ok(Value::Object(fts5)) = serde_json::to_value(fts5)
        {
            for (key, value) in fts5 {
                object.insert(format!("fts5_{key}"), value);
            }
        }
        for (key, value) in [
            ("sessions", json!(self.sessions)),
            ("scope_sessions", json!(self.scope_sessions)),
            ("small_scopes", json!(self.small_scopes)),
            ("chunks", json!(self.chunks)),
            ("input_mb", json!(self.input_mb)),
            ("evidence_items", json!(self.evidence_items)),
        ] {
            object.insert(key.to_string(), value);
        }
        Value::Object(object)
    }
}

/// One session of the corpus.
struct CorpusSession {
    user_id: String,
    session_id: String,
    /// Index into the bench sessions.
    source: usize,
}

/// One search of the workload.
struct Query {
    user_id: String,
    /// A stored session's task statement.
    text: String,
}

/// What both systems are sent.
struct Workload<'a> {
    corpus: &'a [CorpusSession],
    bench: &'a [Vec<(Role, String)>],
    large_queries: &'a [Query],
    small_queries: &'a [Query],
    input_mb: f64,
    /// Whether a session id names a session with the query's task (the
    /// query's own, or a copy or another trajectory of the same task).
    same_task: &'a dyn Fn(&Query, &str) -> bool,
}

/// A server process under measurement.
pub(super) struct Server {
    pub(super) child: Child,
    pub(super) base_url: String,
}

impl Server {
    /// Starts `command`; its log goes to `log` (appended).
    pub(super) fn start(
        mut command: Command,
        what: &str,
        log: &Path,
    ) -> anyhow::Result<(Server, Duration)> {
        let started = Instant::now();
        let level = std::env::var("PRECEDENT_LOG").unwrap_or_else(|_| "warn,precedent=info".into());
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env("PRECEDENT_LOG", level)
            .spawn()
            .with_context(|| format!("cannot start {what}"))?;
        let stderr = child.stderr.take().context("stderr")?;
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::Write as _;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let address = rest.split_whitespace().next().unwrap_or("").to_string();
                    let _ = sender.send(address);
                }
            }
        });
        let address = receiver
            .recv_timeout(Duration::from_secs(600))
            .with_context(|| format!("{what} did not start"))?;
        let base_url = format!("http://{address}");
        let agent = agent();
        loop {
            if let Ok(response) = agent.get(format!("{base_url}/health")).call()
                && response.status().as_u16() == 200
            {
                break;
            }
            if started.elapsed() > Duration::from_secs(600) {
                bail!("{what} never answered its health check");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok((Server { child, base_url }, started.elapsed()))
    }

    /// Peak resident memory so far, MB (Linux; 0 elsewhere).
    pub(super) fn rss_peak_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }

    /// SIGTERM and wait (a clean stop syncs the index).
    pub(super) fn stop(mut self) -> anyhow::Result<()> {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()?;
        if !status.success() {
            self.child.kill()?;
        }
        self.child.wait()?;
        Ok(())
    }
}

pub(super) fn agent() -> ureq::Agent {
    crate::client::agent(Duration::from_secs(600))
}

/// Sends the Adds of `sessions` from `clients` threads, each taking whole
/// sessions in turn; answers the latencies, the errors and the wall time.
fn send_adds(
    base_url: &str,
    corpus: &[CorpusSession],
    bench: &[Vec<(Role, String)>],
    clients: usize,
) -> (Vec<Duration>, usize, Duration) {
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    let results: Vec<(Vec<Duration>, usize)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                let next = &next;
                scope.spawn(move || {
                    let agent = agent();
                    let mut latencies = Vec::new();
                    let mut errors = 0;
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(session) = corpus.get(index) else {
                            break;
                        };
                        let messages = &bench[session.source];
                        let mut start = 0;
                        for (chunk, end) in chunk_ends(messages).into_iter().enumerate() {
                            let body = json!({
                                "request_id": format!("{}-{chunk}", session.session_id),
                                "user_id": session.user_id,
                                "session_id": session.session_id,
                                "messages": messages[start..end].iter().map(|(role, content)| {
                                    json!({"role": role.as_str(), "content": content})
                                }).collect::<Vec<_>>(),
                            });
                            start = end;
                            let sent = Instant::now();
                            match agent
                                .post(format!("{base_url}/add"))
                                .header(crate::client::USER_HEADER, &session.user_id)
                                .send_json(&body)
                            {
                                Ok(response) if response.status().as_u16() == 200 => {
                                    latencies.push(sent.elapsed());
                                }
                                _ => errors += 1,
                            }
                        }
                    }
                    (latencies, errors)
                })
            })
            .collect();
        workers
            .into_iter()
            .filter_map(|worker| worker.join().ok())
            .collect()
    });
    let wall = started.elapsed();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for (client_latencies, client_errors) in results {
        latencies.extend(client_latencies);
        errors += client_errors;
    }
    latencies.sort();
    (latencies, errors, wall)
}

/// Runs `queries` (user, session the query came from, text) one at a time;
/// answers sorted latencies, errors and how often the first item came from
/// the query's own session.
fn send_searches(
    base_url: &str,
    queries: &[Query],
    same_task: &dyn Fn(&Query, &str) -> bool,
) -> (Vec<Duration>, usize, f64) {
    let agent = agent();
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut self_hits = 0;
    for query in queries {
        let body = json!({"user_id": query.user_id, "query": query.text, "top_k": 10});
        let sent = Instant::now();
        match agent
            .post(format!("{base_url}/search"))
            .header(crate::client::USER_HEADER, &query.user_id)
            .send_json(&body)
        {
            Ok(mut response) if response.status().as_u16() == 200 => {
                latencies.push(sent.elapsed());
                let answer: Value = response.body_mut().read_json().unwrap_or(Value::Null);
                if answer["data"][0]["session_id"]
                    .as_str()
                    .is_some_and(|first| same_task(query, first))
                {
                    self_hits += 1;
                }
            }
            _ => errors += 1,
        }
    }
    latencies.sort();
    let rate = self_hits as f64 / queries.len().max(1) as f64;
    (latencies, errors, rate)
}

/// Measures one system: `start` launches its server on `data_dir`.
fn measure(
    what: &str,
    start: &dyn Fn() -> Command,
    data_dir: &Path,
    workload: &Workload<'_>,
    progress: &dyn Fn(&str),
) -> anyhow::Result<SystemFigures> {
    let Workload {
        corpus,
        bench,
        large_queries,
        small_queries,
        input_mb,
        same_task,
    } = *workload;
    let log = data_dir.with_extension("log");
    let (server, _) = Server::start(start(), what, &log)?;
    let single = (corpus.len() / 10)
        .clamp(1, MAX_SINGLE_CLIENT_SESSIONS)
        .min(corpus.len());
    progress(&format!("{what}: Adds of {single} sessions from 1 client"));
    let (one, errors_one, wall_one) = send_adds(&server.base_url, &corpus[..single], bench, 1);
    progress(&format!(
        "{what}: Adds of {} sessions from {CONCURRENT_CLIENTS} clients",
        corpus.len() - single
    ));
    let (eight, errors_eight, wall_eight) = send_adds(
        &server.base_url,
        &corpus[single..],
        bench,
        CONCURRENT_CLIENTS,
    );
    progress(&format!(
        "{what}: {} + {} Searches",
        large_queries.len(),
        small_queries.len()
    ));
    let (large, large_errors, self_hit_rate) =
        send_searches(&server.base_url, large_queries, same_task);
    let (small, small_errors, _) = send_searches(&server.base_url, small_queries, same_task);
    let rss_peak_mb = server.rss_peak_mb();
    server.stop()?;
    let disk = precedent_service::directory_bytes(data_dir, 8);
    progress(&format!("{what}: restart on the full store"));
    let (server, startup) = Server::start(start(), what, &log)?;
    progress(&format!(
        "{what}: {TRAJECTORY_ADDS} whole-trajectory Adds beside another user's Adds, then a {} MB session",
        BIG_SESSION_BYTES / 1_000_000
    ));
    let big = big_adds(&server.base_url, bench);
    server.stop()?;
    let per_second = |count: usize, wall: Duration| count as f64 / wall.as_secs_f64().max(1e-9);
    Ok(SystemFigures {
        adds: one.len() + eight.len() + errors_one + errors_eight,
        add_errors: errors_one + errors_eight,
        add_p50_ms: percentile(&one, 0.5),
        add_p99_ms: percentile(&one, 0.99),
        add_p50_ms_8: percentile(&eight, 0.5),
        add_p99_ms_8: percentile(&eight, 0.99),
        adds_per_s_1: per_second(one.len(), wall_one),
        adds_per_s_8: per_second(eight.len(), wall_eight),
        search_p50_ms: percentile(&large, 0.5),
        search_p99_ms: percentile(&large, 0.99),
        small_search_p50_ms: percentile(&small, 0.5),
        small_search_p99_ms: percentile(&small, 0.99),
        search_errors: large_errors + small_errors,
        self_hit_rate,
        rss_peak_mb,
        disk_bytes_per_input_mb: disk as f64 / input_mb.max(1e-9),
        startup_ms: startup.as_secs_f64() * 1e3,
        trajectory_add_ms: big.trajectory_add_ms,
        other_user_add_p99_ms: big.other_user_add_p99_ms,
        big_session_add_ms: big.big_session_add_ms,
        big_add_errors: big.errors,
    })
}

/// What [`big_adds`] measured.
struct BigAdds {
    trajectory_add_ms: f64,
    other_user_add_p99_ms: f64,
    big_session_add_ms: f64,
    errors: usize,
}

/// `count` messages of `bytes` bytes in all, cut from the bench sessions'
/// messages taken in order from `offset` (the first one a user's task).
fn synthetic_messages(
    bench: &[Vec<(Role, String)>],
    offset: usize,
    count: usize,
    bytes: usize,
) -> Vec<(Role, String)> {
    let mut source = bench
        .iter()
        .flat_map(|session| session.iter())
        .filter(|(_, content)| !content.trim().is_empty())
        .cycle()
        .skip(offset);
    let per_message = (bytes / count.max(1)).max(1);
    (0..count)
        .map(|index| {
            let mut content = String::with_capacity(per_message + 64);
            let mut role = Role::User;
            let mut first = true;
            while content.len() < per_message {
                let Some((source_role, text)) = source.next() else {
                    break;
                };
                if first {
                    role = *source_role;
                    first = false;
                } else {
                    content.push('\n');
                }
                content.push_str(text);
            }
            let mut end = per_message.min(content.len());
            while !content.is_char_boundary(end) {
                end -= 1;
            }
            content.truncate(end);
            (if index == 0 { Role::User } else { role }, content)
        })
        .collect()
}

fn add_body(
    user_id: &str,
    session_id: &str,
    request_id: &str,
    messages: &[(Role, String)],
) -> Value {
    json!({
        "request_id": request_id,
        "user_id": user_id,
        "session_id": session_id,
        "messages": messages.iter().map(|(role, content)| {
            json!({"role": role.as_str(), "content": content})
        }).collect::<Vec<_>>(),
    })
}

/// Sends one Add; answers its latency when it was answered 200.
fn timed_add(agent: &ureq::Agent, base_url: &str, body: &Value) -> Option<Duration> {
    let sent = Instant::now();
    let mut request = agent.post(format!("{base_url}/add"));
    if let Some(user) = body["user_id"].as_str() {
        request = request.header(crate::client::USER_HEADER, user);
    }
    match request.send_json(body) {
        Ok(response) if response.status().as_u16() == 200 => Some(sent.elapsed()),
        _ => None,
    }
}

/// Whole-trajectory Adds with another user's small Adds beside them, then
/// one-message Adds to a big session.
fn big_adds(base_url: &str, bench: &[Vec<(Role, String)>]) -> BigAdds {
    let client = agent();
    let mut errors = 0;
    let trajectories: Vec<Value> = (0..TRAJECTORY_ADDS)
        .map(|index| {
            let messages = synthetic_messages(
                bench,
                index * TRAJECTORY_MESSAGES,
                TRAJECTORY_MESSAGES,
                TRAJECTORY_BYTES,
            );
            add_body(
                "bench-big-trajectories",
                &format!("bench-trajectory-{index}"),
                &format!("bench-trajectory-{index}"),
                &messages,
            )
        })
        .collect();
    let small: Vec<(Role, String)> = synthetic_messages(bench, 7, 1, 2_000);
    let writing = std::sync::atomic::AtomicBool::new(true);
    let (mut trajectory, other) = std::thread::scope(|scope| {
        let other = scope.spawn(|| {
            let client = agent();
            let mut latencies = Vec::new();
            let mut errors = 0;
            let mut round = 0usize;
            while writing.load(Ordering::Acquire) {
                let body = add_body(
                    "bench-other-user",
                    &format!("bench-other-{}", round / 20),
                    &format!("bench-other-{round}"),
                    &small,
                );
                round += 1;
                match timed_add(&client, base_url, &body) {
                    Some(latency) => latencies.push(latency),
                    None => errors += 1,
                }
            }
            (latencies, errors)
        });
        // Let the other user's Adds start first.
        std::thread::sleep(Duration::from_millis(200));
        let mut latencies = Vec::new();
        for body in &trajectories {
            match timed_add(&client, base_url, body) {
                Some(latency) => latencies.push(latency),
                None => errors += 1,
            }
        }
        writing.store(false, Ordering::Release);
        let other = other.join().unwrap_or_default();
        (latencies, other)
    });
    drop(trajectories);
    let (mut other_latencies, other_errors) = other;
    errors += other_errors;
    trajectory.sort();
    other_latencies.sort();

    let per_add = BIG_SESSION_BYTES / BIG_SESSION_ADDS;
    for index in 0..BIG_SESSION_ADDS {
        let messages = synthetic_messages(bench, 3_000 + index * 1_000, 100, per_add);
        let body = add_body(
            "bench-big-session",
            "bench-big-session",
            &format!("bench-big-session-{index}"),
            &messages,
        );
        if timed_add(&client, base_url, &body).is_none() {
            errors += 1;
        }
    }
    let mut one_message = Vec::new();
    for index in 0..BIG_SESSION_SMALL_ADDS {
        let body = add_body(
            "bench-big-session",
            "bench-big-session",
            &format!("bench-big-session-small-{index}"),
            &small,
        );
        match timed_add(&client, base_url, &body) {
            Some(latency) => one_message.push(latency),
            None => errors += 1,
        }
    }
    one_message.sort();
    BigAdds {
        trajectory_add_ms: percentile(&trajectory, 0.5),
        other_user_add_p99_ms: percentile(&other_latencies, 0.99),
        big_session_add_ms: percentile(&one_message, 0.5),
        errors,
    }
}

/// The sessions of a bench directory that hold messages.
fn bench_sessions(bench_dir: &Path) -> anyhow::Result<Vec<Vec<(Role, String)>>> {
    let bench: Vec<Vec<(Role, String)>> = read_sessions(bench_dir)?
        .into_iter()
        .filter(|session| !session.is_empty())
        .collect();
    if bench.is_empty() {
        bail!("{} holds no sessions", bench_dir.display());
    }
    Ok(bench)
}

/// The corpus: `total` sessions, the first `scope_sessions` of them in the
/// large scope and the rest in small scopes, each replaying bench session
/// `index % num_bench`.
fn corpus(total: usize, scope_sessions: usize, num_bench: usize) -> Vec<CorpusSession> {
    (0..total)
        .map(|index| CorpusSession {
            user_id: if index < scope_sessions {
                "bench-scope-large".to_string()
            } else {
                format!(
                    "bench-scope-{:06}",
                    (index - scope_sessions) / SMALL_SCOPE_SESSIONS
                )
            },
            session_id: format!("bench-{index:07}"),
            source: index % num_bench,
        })
        .collect()
}

/// The Adds the corpus makes, and its content in MB.
fn corpus_size(bench: &[Vec<(Role, String)>], corpus: &[CorpusSession]) -> (usize, f64) {
    let chunks: usize = corpus
        .iter()
        .map(|session| chunk_ends(&bench[session.source]).len())
        .sum();
    let input_bytes: usize = corpus
        .iter()
        .flat_map(|session| {
            bench[session.source]
                .iter()
                .map(|(_, content)| content.len())
        })
        .sum();
    (chunks, input_bytes as f64 / 1e6)
}

/// `precedent serve` on `data_dir` (and `store`, else SQLite there) on a
/// free loopback port.
fn serve_command(binary: &Path, data_dir: &Path, store: Option<&str>) -> Command {
    let mut command = Command::new(binary);
    command
        .arg("serve")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(data_dir);
    match store {
        Some(store) => command.env("PRECEDENT_STORE", store),
        None => command.env_remove("PRECEDENT_STORE"),
    };
    command
}

/// The FTS5 reference memory on `data_dir` on a free loopback port.
fn reference_command(binary: &Path, data_dir: &Path) -> Command {
    let mut command = Command::new(binary);
    command
        .arg("bench")
        .arg("reference-server")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(data_dir);
    command
}

/// A corpus session's task statement (its first user message).
fn task_of(bench: &[Vec<(Role, String)>], session: &CorpusSession) -> String {
    bench[session.source]
        .iter()
        .find(|(role, _)| *role == Role::User)
        .map(|(_, content)| content.clone())
        .unwrap_or_default()
}

/// Queries: the task statements of `sessions`, at most `searches` of them,
/// spread evenly.
fn spread_queries(
    bench: &[Vec<(Role, String)>],
    sessions: &[CorpusSession],
    searches: usize,
) -> Vec<Query> {
    let step = (sessions.len() / searches.max(1)).max(1);
    sessions
        .iter()
        .step_by(step)
        .take(searches)
        .map(|session| Query {
            user_id: session.user_id.clone(),
            text: task_of(bench, session),
        })
        .filter(|query| !query.text.trim().is_empty())
        .collect()
}

/// The work directory (`options.work_dir`, else a fresh temporary one)
/// with its `precedent` and `fts5` data of an earlier run cleared.
fn prepare_work_dir(options: &ScaleOptions) -> anyhow::Result<PathBuf> {
    let work_dir = match &options.work_dir {
        Some(dir) => dir.clone(),
        None => tempfile_dir()?,
    };
    std::fs::create_dir_all(&work_dir)
        .with_context(|| format!("cannot create {}", work_dir.display()))?;
    for dir in [work_dir.join("precedent"), work_dir.join("fts5")] {
        let _ = std::fs::remove_file(dir.with_extension("log"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot clear {}", dir.display()))?;
        }
    }
    Ok(work_dir)
}

/// Runs the whole benchmark; `progress` hears what it is doing.
pub fn run(options: &ScaleOptions, progress: &dyn Fn(&str)) -> anyhow::Result<ScaleReport> {
    let bench = bench_sessions(&options.bench_dir)?;
    let total = options.sessions.unwrap_or(bench.len()).max(1);
    let scope_sessions = options.scope_sessions.min(total.div_ceil(2)).max(1);
    let corpus = corpus(total, scope_sessions, bench.len());
    let (chunks, input_mb) = corpus_size(&bench, &corpus);
    let large_queries = spread_queries(&bench, &corpus[..scope_sessions], options.searches);
    let small_queries = spread_queries(&bench, &corpus[scope_sessions..], options.searches);

    let work_dir = prepare_work_dir(options)?;
    let binary = std::env::current_exe().context("cannot find the precedent binary")?;
    let precedent_dir = work_dir.join("precedent");
    let fts5_dir = work_dir.join("fts5");
    progress(&format!(
        "corpus: {total} sessions ({scope_sessions} in the large scope), {chunks} Adds, {input_mb:.1} MB; data under {}",
        work_dir.display()
    ));
    let start_precedent = || serve_command(&binary, &precedent_dir, options.store.as_deref());
    let same_task = |query: &Query, session_id: &str| {
        session_id
            .strip_prefix("bench-")
            .and_then(|index| index.parse::<usize>().ok())
            .and_then(|index| corpus.get(index))
            .is_some_and(|session| task_of(&bench, session) == query.text)
    };
    let workload = Workload {
        corpus: &corpus,
        bench: &bench,
        large_queries: &large_queries,
        small_queries: &small_queries,
        input_mb,
        same_task: &same_task,
    };
    let precedent = measure(
        "precedent",
        &start_precedent,
        &precedent_dir,
        &workload,
        progress,
    )?;
    let location = precedent_store::StoreLocation::parse(options.store.as_deref(), &precedent_dir)?;
    let evidence_items = count_evidence(&location).unwrap_or(0);
    let fts5 = if options.skip_reference {
        None
    } else {
        let start_reference = || reference_command(&binary, &fts5_dir);
        Some(measure(
            "fts5",
            &start_reference,
            &fts5_dir,
            &workload,
            progress,
        )?)
    };
    if options.work_dir.is_none() {
        let _ = std::fs::remove_dir_all(&work_dir);
    }
    Ok(ScaleReport {
        sessions: total,
        scope_sessions,
        small_scopes: (total - scope_sessions).div_ceil(SMALL_SCOPE_SESSIONS),
        chunks,
        input_mb,
        evidence_items,
        precedent,
        fts5,
    })
}

/// A fresh directory under the system's temporary directory.
pub(super) fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "precedent-bench-scale-{}-{}",
        std::process::id(),
        precedent_core::time::now_ms()
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Evidence items of every stored session record.
fn count_evidence(location: &precedent_store::StoreLocation) -> anyhow::Result<i64> {
    let conn = location.open_reader()?;
    Ok(precedent_store::count_evidence(&conn)?)
}

/// A line of the table: its label and the figure it shows.
type Row = (&'static str, fn(&SystemFigures) -> f64);

/// The report as a table: precedent, the reference, and their ratio.
pub fn render(report: &ScaleReport) -> String {
    let mut out = format!(
        "corpus: {} sessions ({} in the large scope, {} small scopes of {}), {} Adds, {:.1} MB of content; precedent holds {} evidence items\n\n",
        report.sessions,
        report.scope_sessions,
        report.small_scopes,
        SMALL_SCOPE_SESSIONS,
        report.chunks,
        report.input_mb,
        report.evidence_items
    );
    out.push_str(&format!(
        "{:<34} {:>12} {:>12} {:>10}\n",
        "", "precedent", "fts5", "fts5/precedent"
    ));
    let fts5 = report.fts5.clone();
    let rows: [Row; 20] = [
        ("Add p50, 1 client (ms)", |f| f.add_p50_ms),
        ("Add p99, 1 client (ms)", |f| f.add_p99_ms),
        ("Add p50, 8 clients (ms)", |f| f.add_p50_ms_8),
        ("Add p99, 8 clients (ms)", |f| f.add_p99_ms_8),
        ("Adds/s, 1 client", |f| f.adds_per_s_1),
        ("Adds/s, 8 clients", |f| f.adds_per_s_8),
        ("Search p50, large scope (ms)", |f| f.search_p50_ms),
        ("Search p99, large scope (ms)", |f| f.search_p99_ms),
        ("Search p50, small scopes (ms)", |f| f.small_search_p50_ms),
        ("Search p99, small scopes (ms)", |f| f.small_search_p99_ms),
        ("first item is of the query's task", |f| f.self_hit_rate),
        ("peak RSS (MB)", |f| f.rss_peak_mb),
        ("disk bytes per input MB", |f| f.disk_bytes_per_input_mb),
        ("start-up on the full store (ms)", |f| f.startup_ms),
        ("whole-trajectory Add (ms)", |f| f.trajectory_add_ms),
        ("other user's Add p99 beside it (ms)", |f| {
            f.other_user_add_p99_ms
        }),
        ("1-message Add, 50 MB session (ms)", |f| {
            f.big_session_add_ms
        }),
        ("big Add errors", |f| f.big_add_errors as f64),
        ("Add errors", |f| f.add_errors as f64),
        ("Search errors", |f| f.search_errors as f64),
    ];
    for (label, value) in rows {
        let ours = value(&report.precedent);
        match &fts5 {
            Some(reference) => {
                let theirs = value(reference);
                let ratio = if ours > 0.0 {
                    format!("{:.2}x", theirs / ours)
                } else {
                    "-".to_string()
                };
                out.push_str(&format!(
                    "{label:<34} {ours:>12.2} {theirs:>12.2} {ratio:>10}\n"
                ));
            }
            None => out.push_str(&format!("{label:<34} {ours:>12.2}\n")),
        }
    }
    out
}
