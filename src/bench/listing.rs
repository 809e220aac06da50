//! `precedent bench listing`: "what does listing a huge memory cost the
//! server?" One user is given many small sessions over HTTP; then parallel
//! clients read `GET /v1/sessions` (first pages, then whole walks by
//! cursor) while the server's resident memory is sampled. Prints answer
//! sizes, page latencies and the server's memory growth.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;

use super::percentile;
use super::scale::{Server, agent, tempfile_dir};

/// What `bench listing` is asked to do.
#[derive(Debug, Clone)]
pub struct ListingOptions {
    /// Sessions of the one user.
    pub sessions: usize,
    /// Clients reading at once.
    pub parallel: usize,
    /// Clients sending the Adds.
    pub add_clients: usize,
}

/// What `bench listing` measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ListingReport {
    /// Sessions stored for the user.
    pub num_sessions: usize,
    /// Adds per second while storing them.
    pub adds_per_s: f64,
    /// Clients reading at once.
    pub parallel: usize,
    /// The largest answer body of any page, bytes.
    pub max_answer_bytes: usize,
    /// First pages (default limit), all clients at once: median, ms.
    pub first_page_p50_ms: f64,
    /// ... 99th percentile, ms.
    pub first_page_p99_ms: f64,
    /// Whole walks by cursor at `limit=10000`: pages each walk read.
    pub pages_per_walk: usize,
    /// Whether every walk gave each session exactly once.
    pub walks_complete: bool,
    /// Page latency over all walks: median, ms.
    pub walk_page_p50_ms: f64,
    /// ... 99th percentile, ms.
    pub walk_page_p99_ms: f64,
    /// The server's resident memory before the readers, MB.
    pub rss_before_mb: f64,
    /// Its highest resident memory while the first pages were read, over
    /// the memory before, MB.
    pub first_pages_growth_mb: f64,
    /// ... while the whole walks were read, MB.
    pub walks_growth_mb: f64,
}

/// Stores the sessions, reads them as the options say, and stops the
/// server.
pub fn run(options: &ListingOptions, progress: &dyn Fn(&str)) -> anyhow::Result<ListingReport> {
    with_server(|server, _| measure(server, options, progress))
}

/// Runs `measure` against a server of [`start_server`] in a fresh work
/// directory, then stops the server and removes the directory; `measure`'s
/// error first, then the server's.
pub(super) fn with_server<T>(
    measure: impl FnOnce(&Server, &std::path::Path) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let work_dir = tempfile_dir()?;
    let server = start_server(&work_dir)?;
    let result = measure(&server, &work_dir);
    let stopped = server.stop();
    let _ = std::fs::remove_dir_all(&work_dir);
    let report = result?;
    stopped?;
    Ok(report)
}

/// `precedent serve` of this binary on a loopback port, its data
/// directory `data` in `work_dir`, on the embedded store.
fn start_server(work_dir: &std::path::Path) -> anyhow::Result<Server> {
    let binary = std::env::current_exe().context("cannot find the precedent binary")?;
    let mut command = std::process::Command::new(&binary);
    command
        .arg("serve")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(work_dir.join("data"))
        .env_remove("PRECEDENT_STORE");
    let (server, _) = Server::start(command, "precedent", &work_dir.join("server.log"))?;
    Ok(server)
}

const USER: &str = "bench-listing";

fn measure(
    server: &Server,
    options: &ListingOptions,
    progress: &dyn Fn(&str),
) -> anyhow::Result<ListingReport> {
    let base_url = server.base_url.as_str();
    progress(&format!("storing {} sessions", options.sessions));
    let adds_per_s = store_small_sessions(base_url, USER, options.sessions, options.add_clients)?;
    progress(&format!("stored at {adds_per_s:.0} Adds/s; reading"));

    let pid = server.child.id();
    let rss_before_mb = resident_mb(pid);
    let (first_pages, first_peak_mb) = sampled(pid, || {
        std::thread::scope(|scope| {
            (0..options.parallel)
                .map(|_| scope.spawn(|| read_page(base_url, "")))
                .collect::<Vec<_>>()
                .into_iter()
                .filter_map(|reader| reader.join().ok().flatten())
                .collect::<Vec<(Duration, usize)>>()
        })
    });
    let (walks, walk_peak_mb) = sampled(pid, || {
        std::thread::scope(|scope| {
            (0..options.parallel)
                .map(|_| scope.spawn(|| walk(base_url)))
                .collect::<Vec<_>>()
                .into_iter()
                .filter_map(|walker| walker.join().ok())
                .collect::<Vec<Walk>>()
        })
    });
    if first_pages.len() != options.parallel || walks.len() != options.parallel {
        anyhow::bail!("a reader failed");
    }
    let mut first: Vec<Duration> = first_pages.iter().map(|(took, _)| *took).collect();
    first.sort();
    let mut pages: Vec<Duration> = walks.iter().flat_map(|walk| walk.pages.clone()).collect();
    pages.sort();
    let max_answer_bytes = first_pages
        .iter()
        .map(|(_, bytes)| *bytes)
        .chain(walks.iter().map(|walk| walk.max_bytes))
        .max()
        .unwrap_or(0);
    Ok(ListingReport {
        num_sessions: options.sessions,
        adds_per_s,
        parallel: options.parallel,
        max_answer_bytes,
        first_page_p50_ms: percentile(&first, 0.5),
        first_page_p99_ms: percentile(&first, 0.99),
        pages_per_walk: walks.first().map_or(0, |walk| walk.pages.len()),
        walks_complete: walks
            .iter()
            .all(|walk| walk.sessions == options.sessions && walk.items == options.sessions),
        walk_page_p50_ms: percentile(&pages, 0.5),
        walk_page_p99_ms: percentile(&pages, 0.99),
        rss_before_mb,
        first_pages_growth_mb: (first_peak_mb - rss_before_mb).max(0.0),
        walks_growth_mb: (walk_peak_mb - rss_before_mb).max(0.0),
    })
}

/// Gives `user` `sessions` one-message sessions over HTTP from `clients`
/// clients at once; answers the Adds per second.
pub(super) fn store_small_sessions(
    base_url: &str,
    user: &str,
    sessions: usize,
    clients: usize,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let failures = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..clients.max(1) {
            scope.spawn(|| {
                let agent = agent();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= sessions {
                        break;
                    }
                    let body = json!({
                        "user_id": user,
                        "session_id": format!("s{index:07}"),
                        "request_id": format!("r{index:07}"),
                        "messages": [{
                            "role": "user",
                            "content": format!("Fix the TypeError in parse_{index} of src/module_{}.py", index % 97),
                        }],
                    });
                    let sent = agent
                        .post(format!("{base_url}/v1/add"))
                        .header(crate::client::USER_HEADER, user)
                        .send_json(&body);
                    if !matches!(sent, Ok(response) if response.status().as_u16() == 200) {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let failed = failures.load(Ordering::Relaxed);
    if failed > 0 {
        anyhow::bail!("{failed} Adds failed");
    }
    Ok(sessions as f64 / started.elapsed().as_secs_f64())
}

struct Walk {
    pages: Vec<Duration>,
    /// Distinct sessions listed.
    sessions: usize,
    /// Items listed, repeats included.
    items: usize,
    max_bytes: usize,
}

/// One page: its latency and body size; `None` when it failed.
fn read_page(base_url: &str, rest: &str) -> Option<(Duration, usize)> {
    let sent = Instant::now();
    let mut response = agent()
        .get(format!("{base_url}/v1/sessions?user_id={USER}{rest}"))
        .call()
        .ok()?;
    let body = response.body_mut().read_to_string().ok()?;
    Some((sent.elapsed(), body.len()))
}

/// Every page by cursor at the largest limit; counts distinct sessions.
fn walk(base_url: &str) -> Walk {
    let agent = agent();
    let mut seen = std::collections::HashSet::new();
    let mut items = 0;
    let mut pages = Vec::new();
    let mut max_bytes = 0;
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base_url}/v1/sessions?user_id={USER}&limit=10000");
        if let Some(cursor) = &cursor {
            url.push_str("&cursor=");
            url.push_str(cursor);
        }
        let sent = Instant::now();
        let Ok(mut response) = agent.get(url).call() else {
            break;
        };
        let Ok(body) = response.body_mut().read_to_string() else {
            break;
        };
        pages.push(sent.elapsed());
        max_bytes = max_bytes.max(body.len());
        let Ok(page) = serde_json::from_str::<serde_json::Value>(&body) else {
            break;
        };
        for item in page["data"].as_array().into_iter().flatten() {
            if let Some(id) = item["session_id"].as_str() {
                items += 1;
                seen.insert(id.to_string());
            }
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    Walk {
        pages,
        sessions: seen.len(),
        items,
        max_bytes,
    }
}

/// Runs `work` while sampling the process's resident memory; answers its
/// result and the highest memory seen, MB.
fn sampled<T>(pid: u32, work: impl FnOnce() -> T) -> (T, f64) {
    let sampling = AtomicBool::new(true);
    let peak_kb = AtomicUsize::new((resident_mb(pid) * 1024.0) as usize);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            while sampling.load(Ordering::Relaxed) {
                let kb = (resident_mb(pid) * 1024.0) as usize;
                peak_kb.fetch_max(kb, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let result = work();
        sampling.store(false, Ordering::Relaxed);
        result
    });
    (result, peak_kb.load(Ordering::Relaxed) as f64 / 1024.0)
}

/// A process's resident memory now, MB (Linux; 0 elsewhere).
pub(super) fn resident_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The report as text.
pub fn render(report: &ListingReport) -> String {
    format!(
        "bench listing: {sessions} sessions of one user (stored at {adds:.0} Adds/s), {parallel} readers at once\n\
         largest answer        {bytes} bytes\n\
         first pages           p50 {fp50:.1} ms  p99 {fp99:.1} ms\n\
         whole walks           {pages} pages each, complete: {complete}; page p50 {wp50:.1} ms  p99 {wp99:.1} ms\n\
         server memory         {before:.0} MB before; at peak +{first:.0} MB for the first pages, +{walks:.0} MB for the walks",
        sessions = report.num_sessions,
        adds = report.adds_per_s,
        parallel = report.parallel,
        bytes = report.max_answer_bytes,
        fp50 = report.first_page_p50_ms,
        fp99 = report.first_page_p99_ms,
        pages = report.pages_per_walk,
        complete = report.walks_complete,
        wp50 = report.walk_page_p50_ms,
        wp99 = report.walk_page_p99_ms,
        before = report.rss_before_mb,
        first = report.first_pages_growth_mb,
        walks = report.walks_growth_mb,
    )
}
