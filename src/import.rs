//! import: a repository's past fixes become memory.
//!
//! `codemem import` walks the first-parent history of a git repository
//! (git2) and turns each non-merge commit into one session: the task is the
//! commit's subject and body (issue references such as `#123` or `fixes #123`
//! listed again on a line of their own), the fix is its diff, shown as an
//! agent's final patch so that the same ingest code extracts files and
//! symbols as for any trajectory; the author time is the timestamp. Binary
//! files and oversized diffs are left out and counted.
//!
//! Each commit is one Add whose `request_id` and `session_id` derive from the
//! repository's name and the commit id, so an import is idempotent: a second
//! run skips every commit whose session exists (and says how many), an
//! interrupted run resumes. Adds go to a [`Sink`]: the data directory
//! directly, or a running server's Add endpoint.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use git2::{DiffFormat, DiffOptions, Oid, Repository, Sort};

use crate::domain::{AddRequest, Message, Role};

/// What to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The repository (its work tree or its `.git` directory).
    pub repo_path: PathBuf,
    /// The scope the sessions are stored under.
    pub user_id: String,
    /// The revision whose first-parent history is walked.
    pub rev: String,
    /// Stop at this revision (not imported) or at commits older than this
    /// date (`YYYY-MM-DD`).
    pub since: Option<String>,
    /// Import at most this many of the newest commits.
    pub max_commits: Option<usize>,
    /// A commit's diff larger than this (bytes) is left out.
    pub max_diff_bytes: usize,
    /// Adds in flight at once.
    pub parallelism: usize,
}

/// The default `--max-diff-bytes`.
pub const DEFAULT_MAX_DIFF_BYTES: usize = 1024 * 1024;

/// Where the Adds go.
pub trait Sink: Send + Sync {
    /// Whether the session is stored already (then the commit is skipped).
    fn has_session(&self, user_id: &str, session_id: &str) -> anyhow::Result<bool>;
    /// Stores one Add, durably, before returning.
    fn add(&self, request: AddRequest) -> anyhow::Result<()>;
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ImportReport {
    /// First-parent commits walked (merges included).
    pub commits_walked: usize,
    /// Commits stored now.
    pub imported: usize,
    /// Commits whose session was stored before.
    pub already_imported: usize,
    /// Merge commits, not imported.
    pub merges_skipped: usize,
    /// Binary files left out of diffs.
    pub binary_files_skipped: usize,
    /// Commits whose diff exceeded the limit: imported without it.
    pub oversized_diffs_skipped: usize,
    /// The run was interrupted before the end.
    pub interrupted: bool,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl ImportReport {
    /// Commits imported per second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.imported as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// The name sessions of a repository are keyed by: its work tree's (or
/// bare directory's) name.
pub fn repository_name(repo: &Repository) -> String {
    let path = repo.workdir().unwrap_or_else(|| repo.path());
    let name = path
        .canonicalize()
        .ok()
        .and_then(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy().to_string())
        })
        .unwrap_or_default();
    let name = name.trim_end_matches(".git").to_string();
    if name.is_empty() {
        "repository".to_string()
    } else {
        name
    }
}

/// The session id of a commit.
pub fn session_id(repository: &str, commit: Oid) -> String {
    format!("git:{repository}:{commit}")
}

/// Unix seconds of a `YYYY-MM-DD` date (UTC midnight).
fn parse_date(text: &str) -> Option<i64> {
    let mut parts = text.split('-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: i64 = parts.next()?.parse().ok()?;
    let day: i64 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    Some((era * 146_097 + day_of_era - 719_468) * 86_400)
}

/// The first-parent commits to consider, oldest first.
fn first_parent_commits(repo: &Repository, options: &ImportOptions) -> anyhow::Result<Vec<Oid>> {
    let start = repo
        .revparse_single(&options.rev)
        .with_context(|| {
            format!(
                "no revision {:?} in {}",
                options.rev,
                options.repo_path.display()
            )
        })?
        .peel_to_commit()
        .with_context(|| format!("{:?} is not a commit", options.rev))?;
    let (stop_at, not_before) = match &options.since {
        None => (None, None),
        Some(since) => match parse_date(since) {
            Some(seconds) => (None, Some(seconds)),
            None => {
                let commit = repo
                    .revparse_single(since)
                    .with_context(|| {
                        format!("--since {since:?} is neither a revision nor a YYYY-MM-DD date")
                    })?
                    .peel_to_commit()?;
                (Some(commit.id()), None)
            }
        },
    };
    let mut walk = repo.revwalk()?;
    walk.push(start.id())?;
    walk.simplify_first_parent()?;
    walk.set_sorting(Sort::TOPOLOGICAL)?;
    let mut commits = Vec::new();
    for oid in walk {
        let oid = oid?;
        if Some(oid) == stop_at {
            break;
        }
        if let Some(not_before) = not_before {
            let commit = repo.find_commit(oid)?;
            if commit.time().seconds() < not_before {
                break;
            }
        }
        commits.push(oid);
        if options.max_commits.is_some_and(|max| commits.len() >= max) {
            break;
        }
    }
    commits.reverse();
    Ok(commits)
}

/// Issue references in a commit message: `#123`, `fixes #123`, `GH-123`.
fn issue_references(message: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let bytes = message.as_bytes();
    for (index, _) in message.match_indices('#') {
        let preceded_ok = index == 0
            || !bytes
                .get(index - 1)
                .is_some_and(|byte| byte.is_ascii_alphanumeric() || *byte == b'&');
        let digits: String = message[index + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if preceded_ok && !digits.is_empty() && digits.len() <= 9 {
            let reference = format!("#{digits}");
            if !found.contains(&reference) {
                found.push(reference);
            }
        }
    }
    found
}

/// One commit as an Add, with what was left out of it.
struct CommitAdd {
    request: AddRequest,
    binary_files: usize,
    oversized: bool,
}

fn commit_add(
    repo: &Repository,
    oid: Oid,
    repository: &str,
    options: &ImportOptions,
) -> anyhow::Result<Option<CommitAdd>> {
    let commit = repo.find_commit(oid)?;
    if commit.parent_count() > 1 {
        return Ok(None);
    }
    let tree = commit.tree()?;
    let parent_tree = match commit.parent(0) {
        Ok(parent) => Some(parent.tree()?),
        Err(_) => None,
    };
    let mut diff_options = DiffOptions::new();
    diff_options.context_lines(3);
    let diff =
        repo.diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), Some(&mut diff_options))?;
    let mut patch = String::new();
    let mut binary_files = 0usize;
    let mut oversized = false;
    diff.print(DiffFormat::Patch, |delta, _hunk, line| {
        if oversized {
            return true;
        }
        if delta.flags().is_binary() && line.origin() == 'B' {
            binary_files += 1;
        }
        match line.origin() {
            '+' | '-' | ' ' => patch.push(line.origin()),
            _ => {}
        }
        patch.push_str(&String::from_utf8_lossy(line.content()));
        if patch.len() > options.max_diff_bytes {
            oversized = true;
        }
        true
    })?;
    if oversized {
        patch.clear();
    }
    let message = String::from_utf8_lossy(commit.message_bytes())
        .trim()
        .to_string();
    let mut task = if message.is_empty() {
        format!("(commit {oid} has no message)")
    } else {
        message.clone()
    };
    let references = issue_references(&message);
    if !references.is_empty() {
        task.push_str(&format!("\n\nReferences: {}", references.join(", ")));
    }
    let author = commit.author();
    let author_name = String::from_utf8_lossy(author.name_bytes()).to_string();
    let timestamp_ms = commit.time().seconds().saturating_mul(1000);
    let mut fix = format!("Commit {oid} in {repository} by {author_name}.\n");
    if oversized {
        fix.push_str(&format!(
            "[diff left out: larger than {} bytes]\n",
            options.max_diff_bytes
        ));
    } else if patch.trim().is_empty() {
        fix.push_str("[no textual changes]\n");
    } else {
        fix.push_str("```diff\n");
        fix.push_str(&patch);
        if !patch.ends_with('\n') {
            fix.push('\n');
        }
        fix.push_str("```\n");
    }
    let session_id = session_id(repository, oid);
    Ok(Some(CommitAdd {
        request: AddRequest {
            request_id: format!("import:{session_id}"),
            user_id: options.user_id.clone(),
            session_id,
            messages: vec![
                Message {
                    role: Role::User,
                    content: task,
                    timestamp_ms: Some(timestamp_ms),
                },
                Message {
                    role: Role::Assistant,
                    content: fix,
                    timestamp_ms: Some(timestamp_ms),
                },
            ],
        },
        binary_files,
        oversized,
    }))
}

/// How the import reports progress.
pub trait Progress {
    /// The number of commits to consider is known.
    fn start(&mut self, total: usize);
    /// `done` commits considered so far.
    fn update(&mut self, done: usize, report: &ImportReport);
    /// The import ended.
    fn finish(&mut self, report: &ImportReport);
}

/// No progress output.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&mut self, _: usize) {}
    fn update(&mut self, _: usize, _: &ImportReport) {}
    fn finish(&mut self, _: &ImportReport) {}
}

/// Errs, saying why, unless `path` is a git repository.
pub fn check_repository(path: &std::path::Path) -> anyhow::Result<()> {
    Repository::open(path)
        .map(|_| ())
        .with_context(|| format!("{} is not a git repository", path.display()))
}

/// Imports a repository's history into `sink`. Stops early, leaving
/// everything stored so far consistent, when `stop` becomes true.
pub fn import(
    options: &ImportOptions,
    sink: Arc<dyn Sink>,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
) -> anyhow::Result<ImportReport> {
    let started = Instant::now();
    let repo = Repository::open(&options.repo_path)
        .with_context(|| format!("{} is not a git repository", options.repo_path.display()))?;
    if options.user_id.is_empty() {
        bail!("--user-id must not be empty");
    }
    let repository = repository_name(&repo);
    let commits = first_parent_commits(&repo, options)?;
    let mut report = ImportReport {
        commits_walked: commits.len(),
        ..ImportReport::default()
    };
    progress.start(commits.len());

    // Commits are read here (git2 repositories are not shared between
    // threads) and stored by workers, so that many Adds are in flight and
    // the store commits them in groups.
    let (sender, receiver) = std::sync::mpsc::sync_channel::<AddRequest>(options.parallelism * 2);
    let receiver = Arc::new(std::sync::Mutex::new(receiver));
    let stored = Arc::new(AtomicUsize::new(0));
    let failure: Arc<std::sync::Mutex<Option<anyhow::Error>>> =
        Arc::new(std::sync::Mutex::new(None));
    let workers: Vec<_> = (0..options.parallelism.max(1))
        .map(|_| {
            let receiver = Arc::clone(&receiver);
            let sink = Arc::clone(&sink);
            let stored = Arc::clone(&stored);
            let failure = Arc::clone(&failure);
            std::thread::spawn(move || {
                loop {
                    let next = receiver
                        .lock()
                        .ok()
                        .and_then(|receiver| receiver.recv().ok());
                    let Some(request) = next else { break };
                    match sink.add(request) {
                        Ok(()) => {
                            stored.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => {
                            if let Ok(mut slot) = failure.lock() {
                                slot.get_or_insert(error);
                            }
                            break;
                        }
                    }
                }
            })
        })
        .collect();

    let mut last_update = Instant::now();
    for (done, oid) in commits.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            break;
        }
        if failure.lock().map(|slot| slot.is_some()).unwrap_or(true) {
            break;
        }
        let session = session_id(&repository, *oid);
        if sink.has_session(&options.user_id, &session)? {
            report.already_imported += 1;
        } else {
            match commit_add(&repo, *oid, &repository, options)? {
                None => report.merges_skipped += 1,
                Some(add) => {
                    report.binary_files_skipped += add.binary_files;
                    report.oversized_diffs_skipped += usize::from(add.oversized);
                    if sender.send(add.request).is_err() {
                        break;
                    }
                }
            }
        }
        if last_update.elapsed() >= Duration::from_millis(200) {
            report.imported = stored.load(Ordering::Relaxed);
            report.seconds = started.elapsed().as_secs_f64();
            progress.update(done + 1, &report);
            last_update = Instant::now();
        }
    }
    drop(sender);
    for worker in workers {
        let _ = worker.join();
    }
    report.imported = stored.load(Ordering::Relaxed);
    report.seconds = started.elapsed().as_secs_f64();
    progress.finish(&report);
    if let Some(error) = failure.lock().ok().and_then(|mut slot| slot.take()) {
        return Err(error.context(format!(
            "import stopped after {} commit(s); run it again to resume",
            report.imported
        )));
    }
    Ok(report)
}

/// Writes straight into a data directory no server holds.
pub struct DirectSink {
    service: Arc<crate::service::Service>,
    runtime: tokio::runtime::Handle,
    reader: std::sync::Mutex<rusqlite::Connection>,
}

impl DirectSink {
    /// A sink over an opened service, driven on `runtime`.
    pub fn new(
        service: Arc<crate::service::Service>,
        runtime: tokio::runtime::Handle,
    ) -> anyhow::Result<DirectSink> {
        let reader = crate::store::open_reader(service.data_dir())?;
        Ok(DirectSink {
            service,
            runtime,
            reader: std::sync::Mutex::new(reader),
        })
    }
}

impl Sink for DirectSink {
    fn has_session(&self, user_id: &str, session_id: &str) -> anyhow::Result<bool> {
        let reader = self
            .reader
            .lock()
            .map_err(|_| anyhow::anyhow!("store reader poisoned"))?;
        Ok(crate::store::session_exists(&reader, user_id, session_id)?)
    }

    fn add(&self, request: AddRequest) -> anyhow::Result<()> {
        self.runtime.block_on(self.service.add(request))?;
        Ok(())
    }
}

/// Writes through a running server's Add endpoint.
pub struct ServerSink {
    agent: ureq::Agent,
    base_url: String,
    api_key: Option<String>,
}

impl ServerSink {
    /// A sink posting to `base_url` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base_url: &str, api_key: Option<String>) -> ServerSink {
        let agent = crate::client::agent(Duration::from_secs(600));
        ServerSink {
            agent,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
        }
    }

    fn authorization(&self) -> Option<String> {
        self.api_key.as_ref().map(|key| format!("Bearer {key}"))
    }
}

impl Sink for ServerSink {
    fn has_session(&self, user_id: &str, session_id: &str) -> anyhow::Result<bool> {
        let url = format!(
            "{}/v1/sessions/{}?user_id={}",
            self.base_url,
            crate::client::encode(session_id),
            crate::client::encode(user_id)
        );
        let mut request = self.agent.get(&url);
        if let Some(value) = self.authorization() {
            request = request.header("Authorization", value);
        }
        let response = request
            .call()
            .with_context(|| format!("cannot reach {}", self.base_url))?;
        match response.status().as_u16() {
            200 => Ok(true),
            404 => Ok(false),
            status => bail!("GET {url} answered HTTP {status}"),
        }
    }

    fn add(&self, request: AddRequest) -> anyhow::Result<()> {
        let messages: Vec<serde_json::Value> = request
            .messages
            .iter()
            .map(|message| {
                serde_json::json!({
                    "role": message.role.as_str(),
                    "content": message.content,
                    "timestamp": message.timestamp_ms,
                })
            })
            .collect();
        let body = serde_json::json!({
            "request_id": request.request_id,
            "user_id": request.user_id,
            "session_id": request.session_id,
            "messages": messages,
        });
        let url = format!("{}/add", self.base_url);
        // Transient answers are retried a few times, as the platform does.
        let mut attempt = 0;
        loop {
            let mut post = self.agent.post(&url);
            if let Some(value) = self.authorization() {
                post = post.header("Authorization", value);
            }
            let mut response = post
                .send_json(&body)
                .with_context(|| format!("cannot reach {}", self.base_url))?;
            let status = response.status().as_u16();
            if status == 200 {
                return Ok(());
            }
            attempt += 1;
            if attempt < 5 && matches!(status, 408 | 409 | 425 | 429 | 500 | 502 | 503 | 504) {
                std::thread::sleep(Duration::from_millis(200 * attempt));
                continue;
            }
            let text = response.body_mut().read_to_string().unwrap_or_default();
            bail!(
                "POST {url} answered HTTP {status}: {}",
                text.chars().take(300).collect::<String>()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_references_are_found_once() {
        assert_eq!(
            issue_references("Fix overflow (fixes #123, see #45 and #123); not a&#39; nor C#"),
            vec!["#123", "#45"]
        );
        assert!(issue_references("no refs here").is_empty());
    }

    #[test]
    fn dates_parse_to_unix_seconds() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2024-01-01"), Some(1_704_067_200));
        assert_eq!(parse_date("2024-13-01"), None);
        assert_eq!(parse_date("HEAD~3"), None);
    }
}
