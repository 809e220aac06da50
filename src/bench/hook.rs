//! `precedent bench hook`: "how long does an agent wait for the
//! UserPromptSubmit hook?" A server of this binary is started and warmed
//! with sessions of one repository scope; then `precedent hook
//! UserPromptSubmit --server` runs again and again as an agent runs it (a
//! new process, the hook input on stdin, the answer on stdout), each
//! prompt matching one stored session. Prints p50/p95/max of the whole
//! run: process start, reaching the server, search, answer, exit.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use serde_json::{Value, json};

use super::listing::with_server;
use super::scale::agent;
use super::{max_ms, percentile};

/// What `bench hook` is asked to do.
#[derive(Debug, Clone)]
pub struct HookBenchOptions {
    /// Hook runs measured.
    pub runs: usize,
    /// Sessions stored in the scope first.
    pub sessions: usize,
}

/// What `bench hook` measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HookBenchReport {
    /// Hook runs measured (after three unmeasured ones).
    pub runs: usize,
    /// Sessions in the searched scope.
    pub sessions: usize,
    /// Runs that answered with context.
    pub runs_with_context: usize,
    /// Characters of context per answering run, on average.
    pub mean_context_chars: f64,
    /// Whole hook run (spawn to exit): median, ms.
    pub p50_ms: f64,
    /// ... 95th percentile, ms.
    pub p95_ms: f64,
    /// ... slowest, ms.
    pub max_ms: f64,
}

const SCOPE: &str = "github.com/bench/hook";
/// Runs before the measured ones (the server's caches, the page cache).
const WARM_UP_RUNS: usize = 3;

/// A past session about one function of its own.
fn session_messages(index: usize) -> Value {
    json!([
        {"role": "user", "content": format!(
            "divide_{index} in calc/ops_{index}.py raises ZeroDivisionError when b is 0; make it raise ValueError")},
        {"role": "assistant", "content": format!(
            "Reproducing.\n$ python -m pytest tests/test_ops_{index}.py\nTraceback (most recent call last):\n  File \"calc/ops_{index}.py\", line 6, in divide_{index}\n    return a / b\nZeroDivisionError: division by zero\n1 failed")},
        {"role": "assistant", "content": format!(
            "--- a/calc/ops_{index}.py\n+++ b/calc/ops_{index}.py\n@@ -5,2 +5,4 @@\n def divide_{index}(a, b):\n+    if b == 0:\n+        raise ValueError(\"b must not be 0\")\n     return a / b\n")},
        {"role": "user", "content": format!("$ python -m pytest tests/test_ops_{index}.py\n1 passed")}
    ])
}

/// Starts the server, stores the sessions, runs the hook, stops the
/// server.
pub fn run(options: &HookBenchOptions, progress: &dyn Fn(&str)) -> anyhow::Result<HookBenchReport> {
    with_server(|server, work_dir| measure(&server.base_url, work_dir, options, progress))
}

fn measure(
    base_url: &str,
    work_dir: &std::path::Path,
    options: &HookBenchOptions,
    progress: &dyn Fn(&str),
) -> anyhow::Result<HookBenchReport> {
    let client = agent();
    progress(&format!("storing {} sessions", options.sessions));
    for index in 0..options.sessions {
        let body = json!({
            "request_id": format!("bench-hook-{index}"),
            "user_id": SCOPE,
            "session_id": format!("session-{index}"),
            "messages": session_messages(index),
        });
        let response = client
            .post(format!("{base_url}/add"))
            .send_json(&body)
            .with_context(|| format!("cannot reach {base_url}"))?;
        anyhow::ensure!(
            response.status().as_u16() == 200,
            "Add answered HTTP {}",
            response.status()
        );
    }
    let binary = std::env::current_exe().context("cannot find the precedent binary")?;
    let data_dir = work_dir.join("hook-data");
    progress(&format!("running the hook {} times", options.runs));
    let mut times = Vec::with_capacity(options.runs);
    let mut context_chars = Vec::new();
    for run in 0..options.runs + WARM_UP_RUNS {
        let index = run * 7 % options.sessions.max(1);
        let payload = json!({
            "session_id": format!("bench-{run}"),
            "transcript_path": work_dir.join("transcript.jsonl"),
            "cwd": work_dir,
            "hook_event_name": "UserPromptSubmit",
            "permission_mode": "default",
            "prompt": format!("divide_{index} raises ZeroDivisionError for b = 0 in calc/ops_{index}.py"),
        })
        .to_string();
        let started = Instant::now();
        let mut child = Command::new(&binary)
            .args([
                "hook",
                "UserPromptSubmit",
                "--server",
                base_url,
                "--user-id",
                SCOPE,
            ])
            .arg("--data-dir")
            .arg(&data_dir)
            .env_remove("PRECEDENT_LOG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start the hook")?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(payload.as_bytes())?;
        }
        let output = child.wait_with_output()?;
        let elapsed = started.elapsed();
        if run < WARM_UP_RUNS {
            continue;
        }
        times.push(elapsed);
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        if let Some(context) = answer
            .pointer("/hookSpecificOutput/additionalContext")
            .and_then(Value::as_str)
        {
            context_chars.push(context.chars().count());
        }
    }
    times.sort();
    let runs_with_context = context_chars.len();
    Ok(HookBenchReport {
        runs: times.len(),
        sessions: options.sessions,
        runs_with_context,
        mean_context_chars: if runs_with_context == 0 {
            0.0
        } else {
            context_chars.iter().sum::<usize>() as f64 / runs_with_context as f64
        },
        p50_ms: percentile(&times, 0.5),
        p95_ms: percentile(&times, 0.95),
        max_ms: max_ms(&times),
    })
}

/// The report as text.
pub fn render(report: &HookBenchReport) -> String {
    format!(
        "hook UserPromptSubmit against a warm server ({} sessions in scope), {} runs, each a new process:\n  p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms (target: p95 <= 150 ms)\n  {} of {} runs answered with context ({:.0} characters on average)",
        report.sessions,
        report.runs,
        report.p50_ms,
        report.p95_ms,
        report.max_ms,
        report.runs_with_context,
        report.runs,
        report.mean_context_chars
    )
}
