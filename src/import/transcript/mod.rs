//! Agent transcripts on disk become sessions.
//!
//! A file's format is told from its content (its name only narrows which
//! files of a folder are read): Claude Code project logs (`claude`), Codex
//! CLI rollouts (`codex`), SWE-agent `.traj` and OpenHands trajectories
//! (`trajectory`), aider chat histories (`aider`). Each transcript (each
//! aider chat) is one session, its messages rendered as `render` says.
//!
//! The session id is the transcript's own (Claude Code's and Codex's
//! session ids) or a hash of the file's canonical path, and each Add's
//! request id is `<session>:<first>-<last>` (message indexes), so an import
//! is idempotent and a transcript that grew adds only its new tail: the
//! messages past those the session holds. A truncated last JSON line waits
//! for the next run. `watch` polls the files and imports what changed
//! until stopped. Files that cannot be read or are no transcript are
//! reported and skipped.

mod aider;
mod claude;
mod codex;
mod render;
mod trajectory;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::bail;
use serde_json::Value;

use super::Progress;
use super::sink::{AddPool, Sink};
use crate::domain::{AddRequest, Message};
pub use render::Transcript;

/// Messages one Add holds at most (the API allows 10,000).
const MAX_MESSAGES_PER_ADD: usize = 1_000;
/// Bytes of content one Add holds at most (the API's body limit is 64 MiB).
const MAX_CONTENT_BYTES_PER_ADD: usize = 8 * 1024 * 1024;
/// Bytes one message keeps (the API allows 16 MiB); the rest is cut.
const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Files larger than this are skipped.
const MAX_FILE_BYTES: u64 = 1024 * 1024 * 1024;
/// How often `watch` looks at the files again.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// Folders never searched for transcripts.
const SKIPPED_DIRECTORIES: &[&str] = &[".git", "node_modules", "target", "__pycache__", ".venv"];

/// What to import.
#[derive(Debug, Clone)]
pub struct TranscriptOptions {
    /// Transcript files, and folders searched for them.
    pub paths: Vec<PathBuf>,
    /// The scope the sessions are stored under.
    pub user_id: String,
    /// Adds in flight at once.
    pub parallelism: usize,
    /// Keep importing as transcripts appear and grow, until stopped.
    pub watch: bool,
}

/// A file left out, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SkippedFile {
    /// The file.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// What a transcript import did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TranscriptReport {
    /// Transcript files read (each time one changed, under `watch`).
    pub files_read: usize,
    /// Sessions found in them.
    pub sessions: usize,
    /// Sessions that received new messages.
    pub sessions_updated: usize,
    /// Messages stored now.
    pub messages_imported: usize,
    /// Messages found stored already.
    pub messages_already_imported: usize,
    /// Adds sent.
    pub adds: usize,
    /// Files that could not be read or are no transcript.
    pub files_skipped: Vec<SkippedFile>,
    /// The run was interrupted before the end.
    pub interrupted: bool,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// The formats, as named in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Claude Code project log.
    ClaudeCode,
    /// Codex CLI rollout.
    Codex,
    /// SWE-agent trajectory.
    SweAgent,
    /// OpenHands trajectory.
    OpenHands,
    /// aider chat history.
    Aider,
}

/// Reads one file: its format and transcripts, or why it holds none.
pub fn read_transcripts(path: &Path) -> Result<(Format, Vec<Transcript>), String> {
    let metadata = std::fs::metadata(path).map_err(|error| format!("cannot read it: {error}"))?;
    if metadata.len() > MAX_FILE_BYTES {
        return Err(format!(
            "larger than {} MiB",
            MAX_FILE_BYTES / (1024 * 1024)
        ));
    }
    let bytes = std::fs::read(path).map_err(|error| format!("cannot read it: {error}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let canonical = path
        .canonicalize()
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .to_string();
    let path_hash = render::short_hash(&canonical);
    let stem = path
        .file_name()
        .map(|name| name.to_string_lossy().to_string())
        .unwrap_or_default();
    let stem = stem
        .trim_end_matches(".jsonl")
        .trim_end_matches(".json")
        .trim_end_matches(".traj")
        .to_string();
    if aider::detect(&text) {
        let transcripts = aider::chats(&text)
            .into_iter()
            .enumerate()
            .map(|(index, messages)| Transcript {
                session_id: format!("aider:{path_hash}:{index}"),
                messages: messages.into_vec(),
            })
            .collect();
        return Ok((Format::Aider, transcripts));
    }
    let trimmed = text.trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return Err(not_a_transcript());
    }
    if let Ok(value) = serde_json::from_str::<Value>(trimmed)
        && let Some(kind) = trajectory::detect(&value)
    {
        let (format, prefix) = match kind {
            trajectory::Kind::SweAgent => (Format::SweAgent, "swe-agent"),
            trajectory::Kind::OpenHands => (Format::OpenHands, "openhands"),
        };
        let transcript = Transcript {
            session_id: format!("{prefix}:{}:{path_hash}", short(&stem)),
            messages: trajectory::messages(kind, &value).into_vec(),
        };
        return Ok((format, vec![transcript]));
    }
    let lines = json_lines(&text);
    if codex::detect(&lines) {
        let session = codex::session_id(&lines)
            .filter(|id| id.len() <= 200)
            .unwrap_or(path_hash);
        let transcript = Transcript {
            session_id: format!("codex:{session}"),
            messages: codex::messages(&lines).into_vec(),
        };
        return Ok((Format::Codex, vec![transcript]));
    }
    if claude::detect(&lines) {
        // Subagent logs repeat their parent's session id: the file's own
        // name keeps them apart.
        let session = match claude::session_id(&lines).filter(|id| id.len() <= 200) {
            Some(id) if id == stem => id,
            Some(id) => format!("{id}/{}", short(&stem)),
            None => path_hash,
        };
        let transcript = Transcript {
            session_id: format!("claude-code:{session}"),
            messages: claude::messages(&lines).into_vec(),
        };
        return Ok((Format::ClaudeCode, vec![transcript]));
    }
    Err(not_a_transcript())
}

fn not_a_transcript() -> String {
    "not a transcript of a known agent (Claude Code, Codex CLI, SWE-agent, OpenHands, aider)"
        .to_string()
}

/// At most 100 bytes of a name, cut on a character boundary.
fn short(name: &str) -> &str {
    let mut end = name.len().min(100);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// The JSON objects of a JSON-lines text. A last line without its newline
/// that does not parse is a line still being written: left for later.
/// Other lines that do not parse are skipped.
fn json_lines(text: &str) -> Vec<Value> {
    text.split('\n')
        .filter(|line| !line.trim().is_empty())
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(Value::is_object)
        .collect()
}

/// Whether a file found in a folder may be a transcript (its content
/// decides).
fn is_candidate(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.ends_with(".jsonl")
        || name.ends_with(".json")
        || name.ends_with(".traj")
        || name.ends_with(".chat.history.md")
}

/// Whether a file found in a folder that is no transcript is worth a
/// line in the report (a `.json` file rarely is a transcript, and folders
/// hold many).
fn is_reported(path: &Path) -> bool {
    is_candidate(path)
        && !path
            .to_string_lossy()
            .to_ascii_lowercase()
            .ends_with(".json")
}

/// A file to read: whether it was named on the command line.
#[derive(Debug, Clone)]
struct Source {
    path: PathBuf,
    explicit: bool,
}

/// The files the paths name or hold, sorted, and the paths that are
/// neither.
fn discover(paths: &[PathBuf]) -> (Vec<Source>, Vec<SkippedFile>) {
    let mut sources = Vec::new();
    let mut skipped = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(metadata) if metadata.is_dir() => {
                let mut found = Vec::new();
                walk(path, &mut found, 0);
                found.sort();
                sources.extend(found.into_iter().map(|path| Source {
                    path,
                    explicit: false,
                }));
            }
            Ok(_) => sources.push(Source {
                path: path.clone(),
                explicit: true,
            }),
            Err(error) => skipped.push(SkippedFile {
                path: path.display().to_string(),
                reason: format!("cannot read it: {error}"),
            }),
        }
    }
    (sources, skipped)
}

fn walk(directory: &Path, found: &mut Vec<PathBuf>, depth: usize) {
    if depth > 16 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            let name = entry.file_name();
            if !SKIPPED_DIRECTORIES.contains(&name.to_string_lossy().as_ref()) {
                walk(&path, found, depth + 1);
            }
        } else if (file_type.is_file() || file_type.is_symlink()) && is_candidate(&path) {
            found.push(path);
        }
    }
}

/// Whether any of the paths holds a transcript (reads files until one is).
pub fn holds_transcripts(paths: &[PathBuf]) -> bool {
    let (sources, _) = discover(paths);
    sources
        .iter()
        .any(|source| read_transcripts(&source.path).is_ok())
}

/// The Adds that bring a session from `stored` messages to all of
/// `messages`: batches within the Add limits, each with request id
/// `<session>:<first>-<last>`.
fn tail_adds(user_id: &str, transcript: &Transcript, stored: usize) -> Vec<AddRequest> {
    let mut adds = Vec::new();
    let mut batch: Vec<Message> = Vec::new();
    let mut batch_bytes = 0usize;
    let mut first = stored;
    let flush = |batch: &mut Vec<Message>, first: usize, adds: &mut Vec<AddRequest>| {
        if batch.is_empty() {
            return;
        }
        let last = first + batch.len() - 1;
        adds.push(AddRequest {
            request_id: format!("{}:{first}-{last}", transcript.session_id),
            user_id: user_id.to_string(),
            session_id: transcript.session_id.clone(),
            messages: std::mem::take(batch),
        });
    };
    for message in transcript.messages.iter().skip(stored) {
        let message = capped(message);
        if !batch.is_empty()
            && (batch.len() >= MAX_MESSAGES_PER_ADD
                || batch_bytes + message.content.len() > MAX_CONTENT_BYTES_PER_ADD)
        {
            let size = batch.len();
            flush(&mut batch, first, &mut adds);
            first += size;
            batch_bytes = 0;
        }
        batch_bytes += message.content.len();
        batch.push(message);
    }
    flush(&mut batch, first, &mut adds);
    adds
}

/// A message cut to [`MAX_MESSAGE_BYTES`], the cut marked.
fn capped(message: &Message) -> Message {
    if message.content.len() <= MAX_MESSAGE_BYTES {
        return message.clone();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !message.content.is_char_boundary(end) {
        end -= 1;
    }
    let mut content = message.content[..end].to_string();
    content.push_str(&format!(
        "\n[... {} bytes cut by precedent import]",
        message.content.len() - end
    ));
    Message {
        content,
        ..message.clone()
    }
}

/// Imports the transcripts the paths name or hold into `sink`; with
/// `watch`, keeps importing what changes until `stop` becomes true.
pub fn import_transcripts(
    options: &TranscriptOptions,
    sink: Arc<dyn Sink>,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
) -> anyhow::Result<TranscriptReport> {
    if options.user_id.is_empty() {
        bail!("--user-id must not be empty");
    }
    let started = Instant::now();
    let mut report = TranscriptReport::default();
    let mut seen: HashMap<PathBuf, (u64, Option<SystemTime>)> = HashMap::new();
    let mut reported: HashSet<String> = HashSet::new();
    let mut first_pass = true;
    loop {
        let pass = import_pass(options, &sink, progress, stop, &mut seen, first_pass);
        report.seconds = started.elapsed().as_secs_f64();
        let pass = pass?;
        report.files_read += pass.files_read;
        report.sessions += pass.sessions;
        report.sessions_updated += pass.sessions_updated;
        report.messages_imported += pass.messages_imported;
        report.messages_already_imported += pass.messages_already_imported;
        report.adds += pass.adds;
        for skipped in pass.files_skipped {
            if reported.insert(format!("{}\n{}", skipped.path, skipped.reason)) {
                report.files_skipped.push(skipped);
            }
        }
        first_pass = false;
        if !options.watch {
            report.interrupted = pass.interrupted;
            break;
        }
        let slept = Instant::now();
        while slept.elapsed() < WATCH_INTERVAL && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// One look at every file: reads those that changed, stores their new
/// messages, and waits until they are stored (so that the next look counts
/// them).
fn import_pass(
    options: &TranscriptOptions,
    sink: &Arc<dyn Sink>,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
    seen: &mut HashMap<PathBuf, (u64, Option<SystemTime>)>,
    first_pass: bool,
) -> anyhow::Result<TranscriptReport> {
    let mut report = TranscriptReport::default();
    let (sources, skipped) = discover(&options.paths);
    if first_pass {
        report.files_skipped = skipped;
    }
    let changed: Vec<(Source, (u64, Option<SystemTime>))> = sources
        .into_iter()
        .filter_map(|source| {
            let metadata = std::fs::metadata(&source.path).ok();
            let state = metadata.map_or((0, None), |metadata| {
                (metadata.len(), metadata.modified().ok())
            });
            (seen.get(&source.path) != Some(&state)).then_some((source, state))
        })
        .collect();
    if changed.is_empty() {
        return Ok(report);
    }
    progress.start(changed.len(), "transcript files");
    let pool = AddPool::new(Arc::clone(sink), options.parallelism);
    let mut sessions_seen: HashMap<String, PathBuf> = HashMap::new();
    let mut last_update = Instant::now();
    for (done, (source, state)) in changed.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            break;
        }
        if pool.failed() {
            break;
        }
        match read_transcripts(&source.path) {
            Err(reason) => {
                if source.explicit || is_reported(&source.path) {
                    report.files_skipped.push(SkippedFile {
                        path: source.path.display().to_string(),
                        reason,
                    });
                }
            }
            Ok((_, transcripts)) => {
                report.files_read += 1;
                for transcript in transcripts {
                    if let Some(other) = sessions_seen.get(&transcript.session_id) {
                        report.files_skipped.push(SkippedFile {
                            path: source.path.display().to_string(),
                            reason: format!(
                                "the same session ({}) as {}",
                                transcript.session_id,
                                other.display()
                            ),
                        });
                        continue;
                    }
                    sessions_seen.insert(transcript.session_id.clone(), source.path.clone());
                    if transcript.messages.is_empty() {
                        continue;
                    }
                    report.sessions += 1;
                    let stored = sink.stored_messages(&options.user_id, &transcript.session_id)?;
                    let already = stored.min(transcript.messages.len());
                    report.messages_already_imported += already;
                    let adds = tail_adds(&options.user_id, &transcript, stored);
                    if adds.is_empty() {
                        continue;
                    }
                    report.sessions_updated += 1;
                    if !pool.submit(adds) {
                        break;
                    }
                }
            }
        }
        seen.insert(source.path.clone(), *state);
        if last_update.elapsed() >= Duration::from_millis(200) {
            let status = format!(
                "{} message(s) imported, {} already there",
                pool.messages_stored(),
                report.messages_already_imported
            );
            progress.update(done + 1, &status);
            last_update = Instant::now();
        }
    }
    let outcome = pool.finish();
    report.adds = outcome.adds_stored;
    report.messages_imported = outcome.messages_stored;
    progress.finish();
    if let Err(error) = outcome.result {
        // What failed is read again at the next run.
        seen.clear();
        return Err(error.context(format!(
            "import stopped after {} message(s); run it again to resume",
            report.messages_imported
        )));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;

    fn transcript(num_messages: usize) -> Transcript {
        Transcript {
            session_id: "claude-code:s1".to_string(),
            messages: (0..num_messages)
                .map(|index| Message {
                    role: if index % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    content: format!("message {index}"),
                    timestamp_ms: None,
                })
                .collect(),
        }
    }

    #[test]
    fn the_tail_past_the_stored_messages_is_added_in_batches() {
        let adds = tail_adds("u", &transcript(2_500), 300);
        let ids: Vec<&str> = adds.iter().map(|add| add.request_id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "claude-code:s1:300-1299",
                "claude-code:s1:1300-2299",
                "claude-code:s1:2300-2499"
            ]
        );
        assert_eq!(adds[0].messages[0].content, "message 300");
        assert!(tail_adds("u", &transcript(5), 5).is_empty());
        assert!(tail_adds("u", &transcript(5), 9).is_empty());
    }

    #[test]
    fn a_line_still_being_written_waits() {
        let lines = json_lines("{\"a\": 1}\n{\"b\": 2}\n{\"c\": ");
        assert_eq!(lines.len(), 2);
    }

    #[test]
    fn oversized_messages_are_cut_on_a_character_boundary() {
        let message = Message {
            role: Role::User,
            content: "é".repeat(MAX_MESSAGE_BYTES),
            timestamp_ms: None,
        };
        let cut = capped(&message);
        assert!(cut.content.len() < MAX_MESSAGE_BYTES + 100);
        assert!(cut.content.ends_with("bytes cut by precedent import]"));
    }
}
