//! Agent transcripts on disk become sessions.
//!
//! A file's format is told from its content (its name only narrows which
//! files of a folder are read): Claude Code project logs (`claude`), Codex
//! CLI rollouts (`codex`), SWE-agent `.traj` and OpenHands trajectories
//! (`trajectory`), aider chat histories (`aider`). Each transcript (each
//! aider chat) is one session, its messages rendered as `render` says.
//!
//! `reader` decides which bytes are read (regular files only, bounded,
//! lines streamed); JSON-lines logs are read line by line from where the
//! last import stopped, the other formats whole. The session id is the
//! transcript's own (Claude Code's and Codex's session ids) or a hash of
//! the file's canonical path, and each Add's request id is
//! `<session>:<first>-<last>` (message indexes), so an import is
//! idempotent. `resume` remembers per file its identity and the digest of
//! what was imported: a file that grew adds only its new lines, one
//! rewritten or replaced is imported again as a fresh session
//! (`<session>~2`), never mixed with the old one. A Claude Code response,
//! written a block a line, is held back while it is the file's last and the
//! file changed within [`SETTLE_TIME`]. A line still being written waits for
//! the next run; other unreadable lines are skipped and reported. `watch`
//! polls the files and imports what changed until stopped.
//!
//! `discovery` finds the files, `reading` reads each (`grouping` makes a
//! log's events messages), `batch` cuts a session's messages into Adds,
//! and `pass` is one look at the files, which `import_transcripts` repeats
//! under `watch`.

mod aider;
mod batch;
mod claude;
mod codex;
mod discovery;
mod grouping;
mod pass;
mod reader;
mod reading;
mod render;
mod resume;
mod trajectory;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use precedent_core::domain::UserId;
use sha2::Sha256;

use super::Progress;
use super::sink::Sink;
pub use discovery::holds_transcripts;
use pass::{NewState, import_pass};
pub use reader::{MAX_FILE_BYTES, MAX_LINE_BYTES};
pub use reading::read_transcripts;
pub use render::Transcript;
use resume::ResumeStates;

/// How long a file must be quiet before its last, still-open response is
/// stored.
pub const SETTLE_TIME: Duration = Duration::from_secs(600);
/// How often `watch` looks at the files again.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// What to import.
#[derive(Debug, Clone)]
pub struct TranscriptOptions {
    /// Transcript files, and folders searched for them.
    pub paths: Vec<PathBuf>,
    /// The memory the sessions are stored in.
    pub scope: TranscriptScope,
    /// Adds in flight at once.
    pub parallelism: usize,
    /// Keep importing as transcripts appear and grow, until stopped.
    pub watch: bool,
    /// Where what was imported of each file is remembered (the data
    /// directory); `None` remembers it for this run only.
    pub state_dir: Option<PathBuf>,
    /// The agent writing the transcripts has finished its turn (its Stop
    /// hook runs): a last response is complete, stored now rather than
    /// held back until the file is quiet.
    pub turn_finished: bool,
}

/// Which memory a transcript's sessions go to.
#[derive(Debug, Clone)]
pub enum TranscriptScope {
    /// This key for every transcript (`--user-id`).
    Fixed(UserId),
    /// The key of the repository of the working directory the transcript
    /// records (Claude Code's and Codex's logs record one), else
    /// `fallback` (the key of the directory the import runs in); a
    /// transcript with neither is skipped.
    Recorded {
        /// The key for transcripts that record no directory in a git
        /// repository of this machine.
        fallback: Option<UserId>,
    },
}

/// A file left out, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SkippedFile {
    /// The file.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// One line left out, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SkippedLine {
    /// Its number in the file (from 1).
    pub line: u64,
    /// Why.
    pub reason: String,
}

/// The lines of one file left out.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SkippedLines {
    /// The file.
    pub path: String,
    /// How many.
    pub num_lines: usize,
    /// The first few.
    pub first: Vec<SkippedLine>,
}

/// A session imported again from the start under a new id.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RestartedSession {
    /// The file.
    pub path: String,
    /// The new session id.
    pub session_id: String,
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
    /// Lines skipped, in all files.
    pub num_lines_skipped: usize,
    /// Lines skipped, per file.
    pub lines_skipped: Vec<SkippedLines>,
    /// Lines whose invalid UTF-8 was replaced (U+FFFD).
    pub lines_with_invalid_utf8: usize,
    /// Messages cut to the size one message keeps.
    pub messages_cut: usize,
    /// Claude Code responses held back: the file's last, still open.
    pub responses_held_back: usize,
    /// Files read only up to the size limit (they grew past it).
    pub files_not_fully_read: Vec<SkippedFile>,
    /// Sessions imported again from the start: their file was rewritten
    /// or replaced.
    pub sessions_restarted: Vec<RestartedSession>,
    /// Why what was imported could not be remembered, if so (the next run
    /// then compares with the store).
    pub state_not_saved: Option<String>,
    /// The run was interrupted before the end.
    pub interrupted: bool,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl TranscriptReport {
    fn absorb(&mut self, pass: TranscriptReport, reported: &mut HashSet<String>) {
        self.files_read += pass.files_read;
        self.sessions += pass.sessions;
        self.sessions_updated += pass.sessions_updated;
        self.messages_imported += pass.messages_imported;
        self.messages_already_imported += pass.messages_already_imported;
        self.adds += pass.adds;
        for skipped in pass.files_skipped {
            if reported.insert(format!("{}\n{}", skipped.path, skipped.reason)) {
                self.files_skipped.push(skipped);
            }
        }
        self.num_lines_skipped += pass.num_lines_skipped;
        self.lines_skipped.extend(pass.lines_skipped);
        self.lines_with_invalid_utf8 += pass.lines_with_invalid_utf8;
        self.messages_cut += pass.messages_cut;
        self.responses_held_back = pass.responses_held_back;
        self.files_not_fully_read.extend(pass.files_not_fully_read);
        self.sessions_restarted.extend(pass.sessions_restarted);
        if pass.state_not_saved.is_some() {
            self.state_not_saved = pass.state_not_saved;
        }
    }
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

impl Format {
    /// The format's name in the resume state.
    fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::SweAgent => "swe-agent",
            Format::OpenHands => "openhands",
            Format::Aider => "aider",
        }
    }

    fn from_name(name: &str) -> Option<Format> {
        [
            Format::ClaudeCode,
            Format::Codex,
            Format::SweAgent,
            Format::OpenHands,
            Format::Aider,
        ]
        .into_iter()
        .find(|format| format.name() == name)
    }
}

/// What `watch` knows of a file between looks: its length and change time.
type FileStamp = (u64, Option<SystemTime>);

/// Imports the transcripts the paths name or hold into `sink`; with
/// `watch`, keeps importing what changes until `stop` becomes true.
pub fn import_transcripts(
    options: &TranscriptOptions,
    sink: Arc<dyn Sink>,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
) -> anyhow::Result<TranscriptReport> {
    let started = Instant::now();
    let mut report = TranscriptReport::default();
    let mut watched = Watched {
        seen: HashMap::new(),
        held: HashSet::new(),
        states: ResumeStates::load(options.state_dir.as_deref()),
        hashed: HashMap::new(),
    };
    let mut reported: HashSet<String> = HashSet::new();
    let mut first_pass = true;
    loop {
        let pass = import_pass(options, &sink, progress, stop, &mut watched, first_pass);
        report.seconds = started.elapsed().as_secs_f64();
        let pass = pass?;
        let interrupted = pass.interrupted;
        report.absorb(pass, &mut reported);
        report.responses_held_back = watched.held.len();
        first_pass = false;
        if !options.watch {
            report.interrupted = interrupted;
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

/// What one run knows of the files between looks.
struct Watched {
    seen: HashMap<PathBuf, FileStamp>,
    /// Files whose last response is held back.
    held: HashSet<PathBuf>,
    states: ResumeStates,
    hashed: HashMap<String, (u64, Sha256)>,
}

/// Whether a file needs reading: it changed since the last look, or its
/// held-back response has settled.
fn needs_reading(watched: &Watched, path: &Path, stamp: &FileStamp) -> bool {
    if watched.seen.get(path) != Some(stamp) {
        return true;
    }
    watched.held.contains(path)
        && stamp
            .1
            .is_none_or(|modified| modified.elapsed().is_ok_and(|quiet| quiet >= SETTLE_TIME))
}

/// A file's size and modification time, as far as they can be read.
fn stamp_of(path: &Path) -> FileStamp {
    let metadata = std::fs::metadata(path).ok();
    metadata.map_or((0, None), |metadata| {
        (metadata.len(), metadata.modified().ok())
    })
}

impl Watched {
    /// Keeps how far files were imported, and writes it down; why it could
    /// not be written, if it could not.
    fn remember(&mut self, new_states: Vec<NewState>) -> Result<(), String> {
        for new_state in new_states {
            if let Some(hashed) = new_state.hashed {
                self.hashed.insert(new_state.key.clone(), hashed);
            }
            self.states.set(new_state.key, new_state.state);
        }
        self.states
            .save()
            .map_err(|error| format!("cannot write the import state: {error}"))
    }
}
