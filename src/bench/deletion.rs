//! `precedent bench delete`: "does deleting a huge user stall everyone
//! else?" One user is given many small sessions over HTTP; then the user is
//! deleted while another client keeps adding to its own memory, one Add
//! after another. Prints the other user's Add latencies before and during
//! the deletion, how long the deletion took, and the database file's size
//! before, right after, and once its free pages are given back.

use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;

use super::listing::{store_small_sessions, with_server};
use super::scale::{Server, agent};
use super::{max_ms, percentile};

/// What `bench delete` is asked to do.
#[derive(Debug, Clone)]
pub struct DeleteOptions {
    /// Sessions of the user deleted.
    pub sessions: usize,
    /// Clients sending its Adds.
    pub add_clients: usize,
}

/// What `bench delete` measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeleteReport {
    /// Sessions of the user deleted.
    pub num_sessions: usize,
    /// Adds per second while storing them.
    pub adds_per_s: f64,
    /// How long the DELETE took to answer, s.
    pub delete_s: f64,
    /// What the DELETE answered.
    pub deleted: serde_json::Value,
    /// The other user's Adds before the deletion: how many, median, 99th
    /// percentile, ms.
    pub before_adds: usize,
    /// ...
    pub before_p50_ms: f64,
    /// ...
    pub before_p99_ms: f64,
    /// The other user's Adds during the deletion: how many, median, 99th
    /// percentile, slowest, ms.
    pub during_adds: usize,
    /// ...
    pub during_p50_ms: f64,
    /// ...
    pub during_p99_ms: f64,
    /// ...
    pub during_max_ms: f64,
    /// The other user's Adds after the DELETE answered, while the free
    /// pages are given back: how many, median, 99th percentile, slowest, ms.
    pub reclaim_adds: usize,
    /// ...
    pub reclaim_p50_ms: f64,
    /// ...
    pub reclaim_p99_ms: f64,
    /// ...
    pub reclaim_max_ms: f64,
    /// The database file (with its write-ahead log) before the deletion, MB.
    pub file_before_mb: f64,
    /// ... as the DELETE answered, MB.
    pub file_deleted_mb: f64,
    /// ... once it stopped shrinking (at most a minute later), MB.
    pub file_after_mb: f64,
}

const USER: &str = "bench-delete";
const OTHER: &str = "bench-delete-other";

/// Stores the sessions, deletes them beside another user's Adds, and stops
/// the server.
pub fn run(options: &DeleteOptions, progress: &dyn Fn(&str)) -> anyhow::Result<DeleteReport> {
    with_server(|server, work_dir| measure(server, &work_dir.join("data"), options, progress))
}

fn measure(
    server: &Server,
    data_dir: &Path,
    options: &DeleteOptions,
    progress: &dyn Fn(&str),
) -> anyhow::Result<DeleteReport> {
    let base_url = server.base_url.as_str();
    progress(&format!("storing {} sessions", options.sessions));
    let adds_per_s = store_small_sessions(base_url, USER, options.sessions, options.add_clients)?;
    progress(&format!("stored at {adds_per_s:.0} Adds/s; deleting"));
    let file_before_mb = file_mb(data_dir);
    let mut counter = 0usize;
    let mut before = Vec::new();
    for _ in 0..200 {
        before.push(other_add(base_url, &mut counter)?);
    }
    // What the other user's client is sending beside: the deletion, then
    // the space given back; it stops once the file stopped shrinking.
    let phase = AtomicU8::new(DELETING);
    let (deleted, delete_took, file_deleted_mb, file_after_mb, beside) =
        std::thread::scope(|scope| {
            let adder = scope.spawn(|| -> anyhow::Result<Vec<(u8, Duration)>> {
                let mut beside = Vec::new();
                let mut counter = counter;
                loop {
                    let now = phase.load(Ordering::Acquire);
                    if now == STOPPED {
                        return Ok(beside);
                    }
                    beside.push((now, other_add(base_url, &mut counter)?));
                }
            });
            let started = Instant::now();
            let answer = agent()
                .delete(format!("{base_url}/v1/users/{USER}"))
                .call()
                .context("DELETE failed")
                .and_then(|mut response| {
                    response
                        .body_mut()
                        .read_json::<serde_json::Value>()
                        .context("DELETE answer unreadable")
                });
            let took = started.elapsed();
            phase.store(RECLAIMING, Ordering::Release);
            let file_deleted_mb = file_mb(data_dir);
            progress("deleted; waiting for the file to shrink");
            let file_after_mb = wait_for_shrinking(data_dir, file_deleted_mb);
            phase.store(STOPPED, Ordering::Release);
            let beside = adder
                .join()
                .map_err(|_| anyhow::anyhow!("the other user's client panicked"))?;
            anyhow::Ok((answer?, took, file_deleted_mb, file_after_mb, beside?))
        })?;
    let sorted_in = |wanted: u8| {
        let mut took: Vec<Duration> = beside
            .iter()
            .filter(|(phase, _)| *phase == wanted)
            .map(|(_, took)| *took)
            .collect();
        took.sort();
        took
    };
    let during_sorted = sorted_in(DELETING);
    let reclaim_sorted = sorted_in(RECLAIMING);
    before.sort();
    Ok(DeleteReport {
        num_sessions: options.sessions,
        adds_per_s,
        delete_s: delete_took.as_secs_f64(),
        deleted: deleted["deleted"].clone(),
        before_adds: before.len(),
        before_p50_ms: percentile(&before, 0.5),
        before_p99_ms: percentile(&before, 0.99),
        during_adds: during_sorted.len(),
        during_p50_ms: percentile(&during_sorted, 0.5),
        during_p99_ms: percentile(&during_sorted, 0.99),
        during_max_ms: max_ms(&during_sorted),
        reclaim_adds: reclaim_sorted.len(),
        reclaim_p50_ms: percentile(&reclaim_sorted, 0.5),
        reclaim_p99_ms: percentile(&reclaim_sorted, 0.99),
        reclaim_max_ms: max_ms(&reclaim_sorted),
        file_before_mb,
        file_deleted_mb,
        file_after_mb,
    })
}

/// The phases of the other user's Adds.
const DELETING: u8 = 1;
const RECLAIMING: u8 = 2;
const STOPPED: u8 = 0;

/// The database's size once it stopped shrinking (unchanged for three
/// seconds, a minute at most), MB.
fn wait_for_shrinking(data_dir: &Path, from_mb: f64) -> f64 {
    let mut smallest = from_mb;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut stable_since = Instant::now();
    while Instant::now() < deadline && stable_since.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(250));
        let now = file_mb(data_dir);
        if now < smallest {
            stable_since = Instant::now();
        }
        smallest = smallest.min(now);
    }
    smallest
}

/// One Add of the other user; its latency.
fn other_add(base_url: &str, counter: &mut usize) -> anyhow::Result<Duration> {
    *counter += 1;
    let body = json!({
        "user_id": OTHER,
        "session_id": format!("o{counter:07}"),
        "request_id": format!("o{counter:07}"),
        "messages": [{"role": "user", "content": format!("Fix the KeyError in load_{counter}")}],
    });
    let sent = Instant::now();
    let response = agent()
        .post(format!("{base_url}/v1/add"))
        .header(crate::client::USER_HEADER, OTHER)
        .send_json(&body)
        .context("the other user's Add failed")?;
    anyhow::ensure!(
        response.status().as_u16() == 200,
        "the other user's Add answered {}",
        response.status()
    );
    Ok(sent.elapsed())
}

/// The database file and its write-ahead log, MB.
fn file_mb(data_dir: &Path) -> f64 {
    let bytes: u64 = [precedent_store::DATABASE_FILE, "precedent.sqlite3-wal"]
        .iter()
        .filter_map(|name| std::fs::metadata(data_dir.join(name)).ok())
        .map(|metadata| metadata.len())
        .sum();
    bytes as f64 / 1e6
}

/// The report as text.
pub fn render(report: &DeleteReport) -> String {
    format!(
        "bench delete: one user of {sessions} sessions (stored at {adds:.0} Adds/s) deleted beside another user's Adds\n\
         delete                {delete:.2} s, answered {deleted}\n\
         other user's Adds     before: {bn} Adds, p50 {bp50:.1} ms  p99 {bp99:.1} ms\n\
         \x20                     during: {dn} Adds, p50 {dp50:.1} ms  p99 {dp99:.1} ms  max {dmax:.1} ms\n\
         \x20                     while the space is given back: {rn} Adds, p50 {rp50:.1} ms  p99 {rp99:.1} ms  max {rmax:.1} ms\n\
         database file         {fb:.1} MB before, {fd:.1} MB as the delete answered, {fa:.1} MB after",
        sessions = report.num_sessions,
        adds = report.adds_per_s,
        delete = report.delete_s,
        deleted = report.deleted,
        bn = report.before_adds,
        bp50 = report.before_p50_ms,
        bp99 = report.before_p99_ms,
        dn = report.during_adds,
        dp50 = report.during_p50_ms,
        dp99 = report.during_p99_ms,
        dmax = report.during_max_ms,
        rn = report.reclaim_adds,
        rp50 = report.reclaim_p50_ms,
        rp99 = report.reclaim_p99_ms,
        rmax = report.reclaim_max_ms,
        fb = report.file_before_mb,
        fd = report.file_deleted_mb,
        fa = report.file_after_mb,
    )
}
