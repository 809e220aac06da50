//! Git history: each first-parent commit becomes one session.
//!
//! The task is the commit's subject and body (issue references such as
//! `#123` or `fixes #123` listed again on a line of their own), the fix is
//! its diff, shown as an agent's final patch so that the same ingest code
//! extracts files and symbols as for any trajectory; the author time is the
//! timestamp. A merge (a merged pull request, most often) is one session
//! too: its diff against the first parent, its task the pull request's
//! title and the merge message; `--no-merges` skips them. Binary files and
//! oversized diffs are left out and counted.
//!
//! Each commit is one Add whose `request_id` and `session_id` derive from the
//! repository's name and the commit id, so an import is idempotent: a second
//! run skips every commit whose session exists (and says how many), an
//! interrupted run resumes.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use git2::{Commit, DiffFormat, DiffOptions, Oid, Repository, Sort};

use super::Progress;
use super::sink::{AddPool, Sink};
use precedent_core::domain::{AddRequest, Message, Role, SessionId, UserId};

/// What to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The repository (its work tree or its `.git` directory).
    pub repo_path: PathBuf,
    /// The scope the sessions are stored under.
    pub user_id: UserId,
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
    /// Import merge commits (each as its diff against the first parent).
    pub merges: bool,
}

/// The default `--max-diff-bytes`.
pub const DEFAULT_MAX_DIFF_BYTES: usize = 1024 * 1024;

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ImportReport {
    /// First-parent commits walked (merges included).
    pub commits_walked: usize,
    /// Commits stored now.
    pub imported: usize,
    /// Commits whose session was stored before.
    pub already_imported: usize,
    /// Merge commits imported (included in `imported`).
    pub merges_imported: usize,
    /// Merge commits not imported (`--no-merges`).
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
    days_from_civil_date(text).map(|days| days * 86_400)
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date.
pub(super) fn days_from_civil_date(text: &str) -> Option<i64> {
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
    Some(era * 146_097 + day_of_era - 719_468)
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
    merge: bool,
}

/// A commit's changes against its first parent as a unified diff.
struct CommitPatch {
    /// The diff (empty when oversized).
    patch: String,
    /// Binary files it changes.
    binary_files: usize,
    /// The diff is longer than the limit.
    oversized: bool,
}

fn commit_patch(
    repo: &Repository,
    commit: &Commit<'_>,
    max_diff_bytes: usize,
) -> anyhow::Result<CommitPatch> {
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
        if patch.len() > max_diff_bytes {
            oversized = true;
        }
        true
    })?;
    if oversized {
        patch.clear();
    }
    Ok(CommitPatch {
        patch,
        binary_files,
        oversized,
    })
}

fn commit_add(
    repo: &Repository,
    oid: Oid,
    repository: &str,
    options: &ImportOptions,
) -> anyhow::Result<Option<CommitAdd>> {
    let commit = repo.find_commit(oid)?;
    let merge = commit.parent_count() > 1;
    if merge && !options.merges {
        return Ok(None);
    }
    let CommitPatch {
        patch,
        binary_files,
        oversized,
    } = commit_patch(repo, &commit, options.max_diff_bytes)?;
    let message = String::from_utf8_lossy(commit.message_bytes())
        .trim()
        .to_string();
    let mut task = if message.is_empty() {
        format!("(commit {oid} has no message)")
    } else if merge {
        merge_task(&message)
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
    let mut fix = if merge {
        format!(
            "Merge {oid} in {repository} by {author_name}: the changes it brings onto the first parent.\n"
        )
    } else {
        format!("Commit {oid} in {repository} by {author_name}.\n")
    };
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
    let request = [(Role::User, task), (Role::Assistant, fix)]
        .into_iter()
        .map(|(role, content)| Message::new(role, content, Some(timestamp_ms)))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|messages| {
            let request_id = format!("import:{session_id}");
            AddRequest::new(
                request_id,
                options.user_id.to_string(),
                session_id,
                messages,
            )
        })
        .with_context(|| format!("commit {oid} cannot be imported"))?;
    Ok(Some(CommitAdd {
        request,
        binary_files,
        oversized,
        merge,
    }))
}

/// A merge's task: the pull request's title (the body GitHub and GitLab
/// write under "Merge pull request #N from ...") first, as a person would
/// state the task, then the merge line.
fn merge_task(message: &str) -> String {
    let (subject, body) = match message.split_once('\n') {
        Some((subject, body)) => (subject.trim(), body.trim()),
        None => (message.trim(), ""),
    };
    if body.is_empty() {
        subject.to_string()
    } else {
        format!("{body}\n\n({subject})")
    }
}

/// Errs, saying why, unless `path` is a git repository.
pub fn check_repository(path: &std::path::Path) -> anyhow::Result<()> {
    // A repository is a folder; a file (a FIFO, a device) is never opened.
    if !path.is_dir() {
        bail!("{} is not a git repository", path.display());
    }
    Repository::open(path)
        .map(|_| ())
        .with_context(|| format!("{} is not a git repository", path.display()))
}

/// Imports a repository's history into `sink`. Stops early, leaving
/// everything stored so far consistent, when `stop` becomes true.
pub fn import_history(
    options: &ImportOptions,
    sink: Arc<dyn Sink>,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
) -> anyhow::Result<ImportReport> {
    let started = Instant::now();
    let repo = Repository::open(&options.repo_path)
        .with_context(|| format!("{} is not a git repository", options.repo_path.display()))?;
    let repository = repository_name(&repo);
    let commits = first_parent_commits(&repo, options)?;
    let mut report = ImportReport {
        commits_walked: commits.len(),
        ..ImportReport::default()
    };
    progress.start(commits.len(), "commits");

    // Commits are read here (git2 repositories are not shared between
    // threads) and stored by the pool's workers.
    let pool = AddPool::new(sink.clone(), options.parallelism);
    let mut last_update = Instant::now();
    let mut num_merges_queued = 0usize;
    for (done, oid) in commits.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            break;
        }
        if pool.failed() {
            break;
        }
        let session = SessionId::new(session_id(&repository, *oid))
            .with_context(|| format!("commit {oid} cannot be imported"))?;
        if sink.stored_messages(&options.user_id, &session)? > 0 {
            report.already_imported += 1;
        } else {
            match commit_add(&repo, *oid, &repository, options)? {
                None => report.merges_skipped += 1,
                Some(add) => {
                    report.binary_files_skipped += add.binary_files;
                    report.oversized_diffs_skipped += usize::from(add.oversized);
                    num_merges_queued += usize::from(add.merge);
                    if !pool.submit(vec![add.request]) {
                        break;
                    }
                }
            }
        }
        if last_update.elapsed() >= Duration::from_millis(200) {
            report.imported = pool.adds_stored();
            report.seconds = started.elapsed().as_secs_f64();
            progress.update(done + 1, &status(&report));
            last_update = Instant::now();
        }
    }
    let outcome = pool.finish();
    report.imported = outcome.adds_stored;
    report.seconds = started.elapsed().as_secs_f64();
    progress.finish();
    if let Err(error) = outcome.result {
        return Err(error.context(format!(
            "import stopped after {} commit(s); run it again to resume",
            report.imported
        )));
    }
    report.merges_imported = num_merges_queued;
    Ok(report)
}

/// The progress line's status.
fn status(report: &ImportReport) -> String {
    format!(
        "{} imported ({:.1}/s), {} already there",
        report.imported,
        report.rate(),
        report.already_imported
    )
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
    fn merge_tasks_lead_with_the_pull_request_title() {
        assert_eq!(
            merge_task(
                "Merge pull request #123 from user/fix-divide\n\nRaise ValueError on divide by zero"
            ),
            "Raise ValueError on divide by zero\n\n(Merge pull request #123 from user/fix-divide)"
        );
        assert_eq!(merge_task("Merge branch 'docs'"), "Merge branch 'docs'");
    }

    #[test]
    fn dates_parse_to_unix_seconds() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2024-01-01"), Some(1_704_067_200));
        assert_eq!(parse_date("2024-13-01"), None);
        assert_eq!(parse_date("HEAD~3"), None);
    }
}
