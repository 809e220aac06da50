//! Benchmarks that print figures: `precedent bench ingest` measures the
//! extraction of session records alone (no storage, no index) over a bench
//! directory's sessions, chunked the way the evaluation platform chunks them;
//! `bench load` drives a running server; `bench heldout` measures what
//! extraction finds on held-out sessions against their submitted patches
//! (`heldout`). Each report renders its own text (`render_ingest`,
//! `render_load`, `scale::render`, `heldout::render`).
//!
//! Speed figures are wall-clock on one thread of a release build; targets
//! are checked here, never by timed assertions in tests.

pub mod deletion;
pub mod heldout;
pub mod hook;
pub mod listing;
pub mod reference;
pub mod scale;

use std::io::BufRead;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Deserialize;

use precedent_core::domain::Role;
use precedent_ingest::{self as ingest, Clock, IngestMessage};

/// The platform's chunking: at most this many messages per Add.
const CHUNK_MAX_MESSAGES: usize = 20;
/// ... or this many words, whichever comes first.
const CHUNK_MAX_WORDS: usize = 2000;

#[derive(Deserialize)]
struct BenchSession {
    messages: Vec<BenchMessage>,
}

#[derive(Deserialize)]
struct BenchMessage {
    role: String,
    content: String,
}

/// What `bench ingest` measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IngestReport {
    /// Sessions read.
    pub num_sessions: usize,
    /// Add chunks the sessions make.
    pub num_chunks: usize,
    /// Bytes of message content.
    pub input_bytes: usize,
    /// Extraction of every whole session once: MB/s of content.
    pub whole_sessions_mb_per_s: f64,
    /// Per Add chunk, the re-derivation the service does (the session so
    /// far): median, ms.
    pub chunk_p50_ms: f64,
    /// ... 99th percentile, ms.
    pub chunk_p99_ms: f64,
    /// ... slowest, ms.
    pub chunk_max_ms: f64,
    /// Diagnostics the extractors reported over all whole sessions.
    pub num_diagnostics: usize,
    /// One-time compilation of the tag queries and extraction patterns
    /// before the timed passes (the service does it at start-up), ms.
    pub warm_up_ms: f64,
}

/// The report of `bench ingest` as text, one line per figure.
pub(crate) fn render_ingest(report: &IngestReport) -> String {
    [
        format!(
            "extraction over {} sessions ({:.1} MB, {} Add chunks), one thread",
            report.num_sessions,
            report.input_bytes as f64 / 1e6,
            report.num_chunks
        ),
        format!(
            "  whole sessions:  {:.1} MB/s",
            report.whole_sessions_mb_per_s
        ),
        format!(
            "  per Add chunk (session so far): p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms",
            report.chunk_p50_ms, report.chunk_p99_ms, report.chunk_max_ms
        ),
        format!("  diagnostics: {}", report.num_diagnostics),
        format!(
            "  tag queries and patterns compiled once before timing: {:.0} ms",
            report.warm_up_ms
        ),
    ]
    .join("\n")
}

/// Reads `sessions.jsonl.gz` (or `sessions.jsonl`) of a bench directory.
fn read_sessions(bench_dir: &Path) -> anyhow::Result<Vec<Vec<(Role, String)>>> {
    let gz = bench_dir.join("sessions.jsonl.gz");
    let plain = bench_dir.join("sessions.jsonl");
    let reader: Box<dyn BufRead> = if gz.exists() {
        let file = std::fs::File::open(&gz).with_context(|| format!("open {}", gz.display()))?;
        Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(file)))
    } else {
        let file =
            std::fs::File::open(&plain).with_context(|| format!("open {}", plain.display()))?;
        Box::new(std::io::BufReader::new(file))
    };
    let mut sessions = Vec::new();
    for (number, line) in reader.lines().enumerate() {
        let line = line.context("read sessions")?;
        if line.trim().is_empty() {
            continue;
        }
        let session: BenchSession =
            serde_json::from_str(&line).with_context(|| format!("sessions line {}", number + 1))?;
        let messages = session
            .messages
            .into_iter()
            .filter_map(|message| Some((Role::parse(&message.role)?, message.content)))
            .collect();
        sessions.push(messages);
    }
    Ok(sessions)
}

/// Where the platform cuts a session into Adds: the end index of each chunk.
fn chunk_ends(messages: &[(Role, String)]) -> Vec<usize> {
    let mut ends = Vec::new();
    let (mut count, mut words) = (0usize, 0usize);
    for (index, (_, content)) in messages.iter().enumerate() {
        let message_words = content.split_whitespace().count();
        if count > 0 && (count == CHUNK_MAX_MESSAGES || words + message_words > CHUNK_MAX_WORDS) {
            ends.push(index);
            count = 0;
            words = 0;
        }
        count += 1;
        words += message_words;
    }
    if count > 0 {
        ends.push(messages.len());
    }
    ends
}

fn inputs(messages: &[(Role, String)]) -> Vec<IngestMessage<'_>> {
    IngestMessage::in_order(
        messages
            .iter()
            .map(|(role, content)| (*role, content.as_str())),
    )
}

/// The longest of `sorted` durations, ms (0 for none).
fn max_ms(sorted: &[Duration]) -> f64 {
    sorted.last().map_or(0.0, |took| took.as_secs_f64() * 1e3)
}

fn percentile(sorted: &[Duration], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() - 1) as f64 * fraction).round() as usize;
    sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

/// Writes, for every session of a bench directory in order, one JSON line
/// with its derived record, its diagnostics and its ranking profile, so that
/// two builds' outputs compare byte for byte: extraction runs without a
/// clock, so a loaded machine cuts no parse short. Answers the number of
/// sessions.
pub fn write_records(bench_dir: &Path, out: &Path) -> anyhow::Result<usize> {
    use std::io::Write;
    let sessions = read_sessions(bench_dir)?;
    let file = std::fs::File::create(out).with_context(|| format!("create {}", out.display()))?;
    let mut writer = std::io::BufWriter::new(file);
    for (number, session) in sessions.iter().enumerate() {
        let (record, diagnostics) = ingest::extract_session(&inputs(session), Clock::Ignored);
        let session_id = precedent_core::domain::SessionId::new(format!("s{number}"))?;
        let profile = precedent_rank::SessionProfile::from_record(&session_id, &record, 0, 0);
        let line = serde_json::json!({
            "record": record,
            "diagnostics": diagnostics,
            "profile": profile,
        });
        serde_json::to_writer(&mut writer, &line)?;
        writer.write_all(b"\n")?;
    }
    writer.flush()?;
    Ok(sessions.len())
}

/// Runs the extraction benchmark over a bench directory.
pub fn ingest(bench_dir: &Path) -> anyhow::Result<IngestReport> {
    let sessions = read_sessions(bench_dir)?;
    let input_bytes: usize = sessions
        .iter()
        .flat_map(|session| session.iter().map(|(_, content)| content.len()))
        .sum();

    let warm_up_started = Instant::now();
    let query_errors = ingest::warm_up();
    if !query_errors.is_empty() {
        anyhow::bail!("tag queries do not compile: {}", query_errors.join("; "));
    }
    let warm_up_ms = warm_up_started.elapsed().as_secs_f64() * 1e3;

    let mut num_diagnostics = 0;
    let started = Instant::now();
    for session in &sessions {
        let (record, diagnostics) =
            ingest::extract_session(&inputs(session), Clock::Wall(Instant::now));
        num_diagnostics += diagnostics.len();
        std::hint::black_box(record);
    }
    let whole = started.elapsed();

    let mut chunk_times = Vec::new();
    for session in &sessions {
        let all = inputs(session);
        for end in chunk_ends(session) {
            let started = Instant::now();
            std::hint::black_box(ingest::extract_session(
                &all[..end],
                Clock::Wall(Instant::now),
            ));
            chunk_times.push(started.elapsed());
        }
    }
    chunk_times.sort();
    Ok(IngestReport {
        num_sessions: sessions.len(),
        num_chunks: chunk_times.len(),
        input_bytes,
        whole_sessions_mb_per_s: input_bytes as f64 / 1e6 / whole.as_secs_f64().max(1e-9),
        chunk_p50_ms: percentile(&chunk_times, 0.5),
        chunk_p99_ms: percentile(&chunk_times, 0.99),
        chunk_max_ms: max_ms(&chunk_times),
        num_diagnostics,
        warm_up_ms,
    })
}

/// What [`check_incremental`] found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct IncrementalReport {
    /// Sessions read.
    pub num_sessions: usize,
    /// Chunks extracted by resuming (over every cutting).
    pub num_chunks: usize,
    /// Chunks after which the resumed record (or its diagnostics) differed
    /// from extraction of the whole prefix.
    pub num_mismatches: usize,
    /// The first few mismatches: session number (in bench order), cutting
    /// and the messages read.
    pub mismatch_examples: Vec<String>,
}

/// Extraction resumed chunk by chunk ([`ingest::incremental`]) against
/// extraction of the whole: every session of a bench directory is cut
/// `cuttings` times at pseudo-random chunk boundaries (1 to 20 messages a
/// chunk, from `seed`); after each chunk, the resumed record and
/// diagnostics must equal those of the whole prefix byte for byte. Both run
/// without a clock, as [`write_records`] does: a parse cut short by a loaded
/// machine on one side only is not a difference of the two paths.
pub fn check_incremental(
    bench_dir: &Path,
    cuttings: usize,
    seed: u64,
) -> anyhow::Result<IncrementalReport> {
    let sessions = read_sessions(bench_dir)?;
    let mut state = seed | 1;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound.max(1) as u64) as usize
    };
    let mut report = IncrementalReport {
        num_sessions: sessions.len(),
        ..IncrementalReport::default()
    };
    const MAX_EXAMPLES: usize = 10;
    for (number, session) in sessions.iter().enumerate() {
        let all = inputs(session);
        for cutting in 0..cuttings {
            let mut extractor = ingest::incremental::SessionExtractor::new(Clock::Ignored);
            let mut start = 0;
            while start < session.len() {
                let end = (start + 1 + next(20)).min(session.len());
                extractor.extend(
                    session[start..end]
                        .iter()
                        .map(|(role, content)| (*role, content.as_str())),
                );
                start = end;
                report.num_chunks += 1;
                let resumed = serde_json::to_string(&extractor.record())?;
                let whole =
                    serde_json::to_string(&ingest::extract_session(&all[..end], Clock::Ignored))?;
                if resumed != whole {
                    report.num_mismatches += 1;
                    if report.mismatch_examples.len() < MAX_EXAMPLES {
                        report.mismatch_examples.push(format!(
                            "session {number}, cutting {cutting}, after {end} messages"
                        ));
                    }
                }
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cut_at_twenty_messages_or_two_thousand_words() {
        let message = |words: usize| (Role::User, "w ".repeat(words));
        let short: Vec<_> = (0..45).map(|_| message(1)).collect();
        assert_eq!(chunk_ends(&short), vec![20, 40, 45]);
        let long = vec![message(1500), message(600), message(10), message(3000)];
        assert_eq!(chunk_ends(&long), vec![1, 3, 4]);
        assert!(chunk_ends(&[]).is_empty());
    }
}

/// What `bench load` measured.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LoadReport {
    /// Concurrent clients.
    pub clients: usize,
    /// Seconds the load ran.
    pub seconds: f64,
    /// Adds answered 200.
    pub adds: usize,
    /// Searches answered 200.
    pub searches: usize,
    /// Requests answered otherwise, or not at all.
    pub errors: usize,
    /// The first few errors, as text.
    pub error_examples: Vec<String>,
    /// Add latency, ms: p50, p99, max.
    pub add_ms: [f64; 3],
    /// Search latency, ms: p50, p99, max.
    pub search_ms: [f64; 3],
}

/// The report of `bench load` as text: counts, then latencies per endpoint.
pub(crate) fn render_load(report: &LoadReport) -> String {
    format!(
        "load: {} clients for {:.1} s: {} Adds, {} Searches, {} errors{}\n  add    p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms\n  search p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        report.clients,
        report.seconds,
        report.adds,
        report.searches,
        report.errors,
        if report.error_examples.is_empty() {
            String::new()
        } else {
            format!(" (e.g. {})", report.error_examples.join("; "))
        },
        report.add_ms[0],
        report.add_ms[1],
        report.add_ms[2],
        report.search_ms[0],
        report.search_ms[1],
        report.search_ms[2],
    )
}

/// Words the load's messages and queries are made of.
const LOAD_WORDS: &[&str] = &[
    "parser",
    "cache",
    "token",
    "divide",
    "overflow",
    "index",
    "merge",
    "config",
    "render",
    "socket",
    "retry",
    "vector",
    "matrix",
    "lambda",
    "buffer",
    "schema",
    "Traceback",
    "ValueError",
    "src/parse.rs",
    "lib/cache.py",
    "fn",
    "def",
    "return",
    "None",
];

/// Runs `clients` concurrent clients against a live server for
/// `duration`: each sends an Add (a two-message chunk of its own session,
/// 4 users) then a Search, and again. Answers counts and latencies.
pub fn load(
    base_url: &str,
    clients: usize,
    duration: Duration,
    api_key: Option<&str>,
) -> LoadReport {
    load_across(&[base_url.to_string()], clients, duration, api_key)
}

/// [`load`] spread over several servers (nodes of one store): client `i`
/// sends to server `i % n`, so each user is sent to one node, as a load
/// balancer hashing the user would.
pub fn load_across(
    base_urls: &[String],
    clients: usize,
    duration: Duration,
    api_key: Option<&str>,
) -> LoadReport {
    let base_urls: Vec<String> = base_urls
        .iter()
        .map(|url| url.trim_end_matches('/').to_string())
        .collect();
    let started = Instant::now();
    let results: Vec<(Vec<Duration>, Vec<Duration>, Vec<String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|client| {
                let base_url = base_urls
                    .get(client % base_urls.len().max(1))
                    .cloned()
                    .unwrap_or_default();
                scope.spawn(move || {
                    let agent = crate::client::agent(Duration::from_secs(60));
                    let mut adds = Vec::new();
                    let mut searches = Vec::new();
                    let mut errors = Vec::new();
                    let mut seed = 0x9e37_79b9_u64 ^ (client as u64 + 1).wrapping_mul(0x2545_f491);
                    let mut word = move || {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        LOAD_WORDS[(seed % LOAD_WORDS.len() as u64) as usize]
                    };
                    let mut round = 0usize;
                    while started.elapsed() < duration {
                        let user = format!("load-user-{}", client % 4);
                        let text: Vec<&str> = (0..40).map(|_| word()).collect();
                        let body = serde_json::json!({
                            "request_id": format!("load-{client}-{round}"),
                            "user_id": user,
                            "session_id": format!("load-{client}-{}", round / 5),
                            "messages": [
                                {"role": "user", "content": text[..20].join(" ")},
                                {"role": "assistant", "content": text[20..].join(" ")},
                            ],
                        });
                        let query = serde_json::json!({
                            "query": (0..8).map(|_| word()).collect::<Vec<_>>().join(" "),
                            "user_id": user,
                            "top_k": 10,
                        });
                        for (path, payload, latencies) in [
                            ("/add", &body, &mut adds),
                            ("/search", &query, &mut searches),
                        ] {
                            let mut request = agent
                                .post(format!("{base_url}{path}"))
                                .header(crate::client::USER_HEADER, &user);
                            if let Some(key) = api_key {
                                request = request.header("Authorization", format!("Bearer {key}"));
                            }
                            let sent = Instant::now();
                            match request.send_json(payload) {
                                Ok(response) if response.status().as_u16() == 200 => {
                                    latencies.push(sent.elapsed());
                                }
                                Ok(response) => errors
                                    .push(format!("{path}: HTTP {}", response.status().as_u16())),
                                Err(error) => errors.push(format!("{path}: {error}")),
                            }
                        }
                        round += 1;
                    }
                    (adds, searches, errors)
                })
            })
            .collect();
        workers
            .into_iter()
            .filter_map(|worker| worker.join().ok())
            .collect()
    });
    let mut adds: Vec<Duration> = Vec::new();
    let mut searches: Vec<Duration> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for (client_adds, client_searches, client_errors) in results {
        adds.extend(client_adds);
        searches.extend(client_searches);
        errors.extend(client_errors);
    }
    adds.sort();
    searches.sort();
    let summary = |values: &[Duration]| {
        [
            percentile(values, 0.50),
            percentile(values, 0.99),
            max_ms(values),
        ]
    };
    LoadReport {
        clients,
        seconds: started.elapsed().as_secs_f64(),
        adds: adds.len(),
        searches: searches.len(),
        errors: errors.len(),
        error_examples: errors.into_iter().take(5).collect(),
        add_ms: summary(&adds),
        search_ms: summary(&searches),
    }
}
