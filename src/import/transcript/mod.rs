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

mod aider;
mod claude;
mod codex;
mod reader;
mod render;
mod resume;
mod trajectory;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::bail;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Progress;
use super::sink::{AddPool, Sink};
use crate::domain::{AddRequest, Message};
use reader::{Line, Lines, OpenedFile};
pub use reader::{MAX_FILE_BYTES, MAX_LINE_BYTES};
pub use render::Transcript;
use resume::{FileState, ResumeStates, SessionState};

/// Messages an imported Add holds at most: a tenth of what the API takes
/// ([`crate::domain::MAX_MESSAGES_PER_ADD`]), so an Add is one short
/// write turn.
const MESSAGES_PER_IMPORTED_ADD: usize = crate::domain::MAX_MESSAGES_PER_ADD / 10;
/// Bytes of content one Add holds at most (the API's body limit is 64 MiB).
const MAX_CONTENT_BYTES_PER_ADD: usize = 8 * 1024 * 1024;
/// Bytes one message keeps (the API allows 16 MiB); the rest is cut.
const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// How long a file must be quiet before its last, still-open response is
/// stored.
pub const SETTLE_TIME: Duration = Duration::from_secs(600);
/// The first JSON lines that tell a log's format and session.
const NUM_HEAD_EVENTS: usize = 50;
/// Bytes of those first lines kept at most.
const MAX_HEAD_BYTES: usize = 32 * 1024 * 1024;
/// Skipped lines listed per file (the rest are counted).
const NUM_LINES_LISTED: usize = 5;
/// How often `watch` looks at the files again.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// Folders never searched for transcripts.
const SKIPPED_DIRECTORIES: &[&str] = &[".git", "node_modules", "target", "__pycache__", ".venv"];

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
    Fixed(String),
    /// The key of the repository of the working directory the transcript
    /// records (Claude Code's and Codex's logs record one), else
    /// `fallback` (the key of the directory the import runs in); a
    /// transcript with neither is skipped.
    Recorded {
        /// The key for transcripts that record no directory in a git
        /// repository of this machine.
        fallback: Option<String>,
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

/// What reading a file noticed besides its messages.
#[derive(Debug, Default)]
struct Notes {
    /// Lines up to this one were reported by an earlier read.
    reported_through: u64,
    skipped: Vec<SkippedLine>,
    num_skipped: usize,
    invalid_utf8: usize,
    not_fully_read: bool,
    held_back: bool,
}

impl Notes {
    fn skip(&mut self, line: u64, reason: String) {
        if line <= self.reported_through {
            return;
        }
        self.num_skipped += 1;
        if self.skipped.len() < NUM_LINES_LISTED {
            self.skipped.push(SkippedLine { line, reason });
        }
    }
}

/// The names a file's sessions derive from when it names none.
struct Naming {
    path_hash: String,
    stem: String,
}

impl Naming {
    fn of(path: &Path, canonical: &str) -> Naming {
        let stem = path
            .file_name()
            .map(|name| name.to_string_lossy().to_string())
            .unwrap_or_default();
        let stem = stem
            .trim_end_matches(".jsonl")
            .trim_end_matches(".json")
            .trim_end_matches(".traj")
            .to_string();
        Naming {
            path_hash: render::short_hash(canonical),
            stem,
        }
    }
}

fn canonical_path(path: &Path) -> String {
    path.canonicalize()
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .to_string()
}

/// How a file is read: line by line, or whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    JsonLines,
    Document,
}

/// Tells the layout from the file's first line (binary data refused): a
/// JSON object that is no trajectory starts a JSON-lines log.
fn sniff(file: &File) -> Result<Layout, String> {
    reader::refuse_binary(file)?;
    let mut lines = Lines::new(file, 0, 0)?;
    while let Some(line) = lines.next_line()? {
        match line {
            Line::TooLong(_) => return Ok(Layout::JsonLines),
            Line::Unfinished(_) => return Ok(Layout::Document),
            Line::Complete if lines.bytes().trim_ascii().is_empty() => continue,
            Line::Complete => {
                let first = serde_json::from_slice::<Value>(lines.bytes());
                return Ok(match first {
                    Ok(value) if value.is_object() && trajectory::detect(&value).is_none() => {
                        Layout::JsonLines
                    }
                    _ => Layout::Document,
                });
            }
        }
    }
    Ok(Layout::Document)
}

/// A JSON line as an object, or why it is skipped (blank lines: `None`).
fn parse_line(bytes: &[u8], notes: &mut Notes, line: u64) -> Option<Value> {
    if bytes.trim_ascii().is_empty() {
        return None;
    }
    let parsed = match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str::<Value>(text),
        Err(_) => {
            if line > notes.reported_through {
                notes.invalid_utf8 += 1;
            }
            serde_json::from_str::<Value>(&String::from_utf8_lossy(bytes))
        }
    };
    match parsed {
        Ok(value) if value.is_object() => Some(value),
        Ok(_) => {
            notes.skip(line, "not a JSON object".to_string());
            None
        }
        Err(error) => {
            notes.skip(line, format!("not JSON ({error})"));
            None
        }
    }
}

/// Receives a file's transcripts as they are read.
trait Collector {
    /// A transcript starts: its format and session id as the file names
    /// them; false skips the rest of the file.
    fn begin(&mut self, format: Format, base_id: &str) -> bool;
    /// The transcript's next message; false stops reading.
    fn message(&mut self, message: Message) -> bool;
}

/// The reading error of a file its collector refused.
const LEFT_OUT: &str = "left out";

/// Where a JSON-lines read starts and what is known there.
struct Start {
    offset: u64,
    num_lines: u64,
    known: Option<(Format, String)>,
    /// Lines read (and reported) before: a held-back response's lines are
    /// read again, their faults not reported again.
    num_lines_reported: u64,
}

impl Start {
    fn beginning() -> Start {
        Start {
            offset: 0,
            num_lines: 0,
            known: None,
            num_lines_reported: 0,
        }
    }
}

/// How far a JSON-lines read went: its transcript, and the offset (and
/// line count) up to which every message was given.
struct LinesRead {
    format: Format,
    base_id: String,
    offset: u64,
    num_lines: u64,
    /// Lines read to the end (held-back ones included).
    num_lines_read: u64,
    notes: Notes,
    stopped: bool,
}

fn detect_lines(head: &[Value], naming: &Naming) -> Result<(Format, String), String> {
    if codex::detect(head) {
        let session = codex::session_id(head)
            .filter(|id| id.len() <= 200)
            .unwrap_or_else(|| naming.path_hash.clone());
        return Ok((Format::Codex, format!("codex:{session}")));
    }
    if claude::detect(head) {
        // Subagent logs repeat their parent's session id: the file's own
        // name keeps them apart.
        let session = match claude::session_id(head).filter(|id| id.len() <= 200) {
            Some(id) if id == naming.stem => id,
            Some(id) => format!("{id}/{}", short(&naming.stem)),
            None => naming.path_hash.clone(),
        };
        return Ok((Format::ClaudeCode, format!("claude-code:{session}")));
    }
    Err(not_a_transcript())
}

/// Groups events into messages as they come: Claude Code's blocks of one
/// response into one message, each Codex item on its own.
struct Grouper {
    format: Format,
    open: Vec<Value>,
    open_response: Option<String>,
    /// Where the open response's first line starts (offset, lines before).
    open_at: (u64, u64),
    /// Whether a Claude Code log's working directory was given (with its
    /// first user message).
    claude_cwd_given: bool,
    /// A Codex rollout's working directory, and whether it was given.
    codex_cwd: codex::Cwd,
}

impl Grouper {
    /// `resumed`: the read starts after the log's first user message
    /// (which carried the working directory).
    fn new(format: Format, resumed: bool) -> Grouper {
        Grouper {
            format,
            open: Vec::new(),
            open_response: None,
            open_at: (0, 0),
            claude_cwd_given: resumed,
            codex_cwd: if resumed {
                codex::Cwd::given()
            } else {
                codex::Cwd::default()
            },
        }
    }

    /// Feeds one event (that starts at `at`); false when the collector
    /// stopped.
    fn event(&mut self, event: Value, at: (u64, u64), collector: &mut dyn Collector) -> bool {
        if self.format == Format::Codex {
            return give(
                codex::messages_after(std::slice::from_ref(&event), &mut self.codex_cwd),
                collector,
            );
        }
        match claude::unit_of(&event) {
            claude::Unit::Skipped => true,
            claude::Unit::Response(id)
                if !id.is_empty() && self.open_response.as_deref() == Some(id.as_str()) =>
            {
                self.open.push(event);
                true
            }
            claude::Unit::Response(id) => {
                let given = self.close(collector);
                self.open = vec![event];
                self.open_response = Some(id);
                self.open_at = at;
                given
            }
            claude::Unit::User => {
                self.close(collector)
                    && give(
                        claude::messages_after(&[event], &mut self.claude_cwd_given),
                        collector,
                    )
            }
        }
    }

    /// Gives the open response's message.
    fn close(&mut self, collector: &mut dyn Collector) -> bool {
        self.open_response = None;
        if self.open.is_empty() {
            return true;
        }
        let events = std::mem::take(&mut self.open);
        give(
            claude::messages_after(&events, &mut self.claude_cwd_given),
            collector,
        )
    }

    fn is_open(&self) -> bool {
        self.open_response.is_some()
    }
}

fn give(messages: render::Messages, collector: &mut dyn Collector) -> bool {
    messages
        .into_vec()
        .into_iter()
        .all(|message| collector.message(message))
}

/// Reads a JSON-lines log from `start`: each complete line once, a line
/// still being written left for later, the last open response held back
/// unless `settled`.
fn read_json_lines(
    file: &File,
    start: Start,
    settled: bool,
    naming: &Naming,
    collector: &mut dyn Collector,
) -> Result<LinesRead, String> {
    let start_reported = start.num_lines_reported;
    let mut lines = Lines::new(file, start.offset, start.num_lines)?;
    let mut notes = Notes {
        reported_through: start.num_lines_reported,
        ..Notes::default()
    };
    let mut head: Vec<(Value, (u64, u64))> = Vec::new();
    let mut head_bytes = 0usize;
    let mut known: Option<(Format, String, Grouper)> = None;
    if let Some((format, base_id)) = start.known {
        if !collector.begin(format, &base_id) {
            return Err(LEFT_OUT.to_string());
        }
        known = Some((format, base_id, Grouper::new(format, true)));
    }
    let mut stopped = false;
    loop {
        let at = (lines.offset(), lines.line_number());
        let Some(value) = next_value(&mut lines, &mut notes, settled)? else {
            break;
        };
        let Some(value) = value else {
            continue;
        };
        match &mut known {
            Some((_, _, grouper)) => {
                if !grouper.event(value, at, collector) {
                    stopped = true;
                    break;
                }
            }
            None => {
                head_bytes += lines.bytes().len();
                head.push((value, at));
                if head.len() >= NUM_HEAD_EVENTS || head_bytes >= MAX_HEAD_BYTES {
                    let (begun, given) = begin_transcript(&mut head, naming, collector)?;
                    known = Some(begun);
                    if !given {
                        stopped = true;
                        break;
                    }
                }
            }
        }
    }
    let (format, base_id, mut grouper) = match known {
        Some(known) => known,
        None => {
            let (begun, given) = begin_transcript(&mut head, naming, collector)?;
            stopped |= !given;
            begun
        }
    };
    notes.not_fully_read = lines.reached_limit();
    let (mut offset, mut num_lines) = (lines.offset(), lines.line_number());
    let num_lines_read = num_lines.max(start_reported);
    if !stopped && grouper.is_open() {
        if settled {
            stopped = !grouper.close(collector);
        } else {
            notes.held_back = true;
            (offset, num_lines) = grouper.open_at;
        }
    }
    Ok(LinesRead {
        format,
        base_id,
        offset,
        num_lines,
        num_lines_read,
        notes,
        stopped,
    })
}

/// The next line of a log as JSON: `None` at the end of what can be read
/// now (a last line still being written included), `Some(None)` for a line
/// skipped.
fn next_value(
    lines: &mut Lines<'_>,
    notes: &mut Notes,
    settled: bool,
) -> Result<Option<Option<Value>>, String> {
    let number = lines.line_number() + 1;
    let Some(line) = lines.next_line()? else {
        return Ok(None);
    };
    let value = match line {
        Line::Complete => parse_line(lines.bytes(), notes, number),
        Line::TooLong(length) => {
            notes.skip(
                number,
                format!(
                    "longer than {} MiB ({length} bytes)",
                    MAX_LINE_BYTES / (1024 * 1024)
                ),
            );
            None
        }
        Line::Unfinished(length) => {
            // A last line that parses is complete; one that does not is
            // still being written, unless the file is quiet.
            let mut scratch = Notes {
                reported_through: notes.reported_through,
                ..Notes::default()
            };
            match parse_line(lines.bytes(), &mut scratch, number) {
                Some(value) => {
                    lines.accept_unfinished(length);
                    notes.invalid_utf8 += scratch.invalid_utf8;
                    Some(value)
                }
                None => {
                    if settled {
                        notes.skip(number, "the last line is unfinished".to_string());
                    }
                    return Ok(None);
                }
            }
        }
    };
    Ok(Some(value))
}

/// Tells a log's format and session from its first events, begins its
/// transcript and gives those events: the transcript's grouping, and
/// whether the collector took every message.
fn begin_transcript(
    head: &mut Vec<(Value, (u64, u64))>,
    naming: &Naming,
    collector: &mut dyn Collector,
) -> Result<((Format, String, Grouper), bool), String> {
    let (events, starts): (Vec<Value>, Vec<(u64, u64)>) = head.drain(..).unzip();
    let (format, base_id) = detect_lines(&events, naming)?;
    if !collector.begin(format, &base_id) {
        return Err(LEFT_OUT.to_string());
    }
    let mut grouper = Grouper::new(format, false);
    let given = events
        .into_iter()
        .zip(starts)
        .all(|(event, at)| grouper.event(event, at, collector));
    Ok(((format, base_id, grouper), given))
}

/// Reads a whole-file format (aider, trajectories): its transcripts, or
/// `None` when the file is none of them.
fn read_document(
    file: &File,
    naming: &Naming,
    notes: &mut Notes,
) -> Result<Option<(Format, Vec<Transcript>)>, String> {
    let (bytes, cut) = reader::read_whole(file)?;
    notes.not_fully_read = cut;
    if std::str::from_utf8(&bytes).is_err() {
        notes.invalid_utf8 += bytes
            .split(|byte| *byte == b'\n')
            .filter(|line| std::str::from_utf8(line).is_err())
            .count();
    }
    let text = String::from_utf8_lossy(&bytes);
    if aider::detect(&text) {
        let transcripts = aider::chats(&text)
            .into_iter()
            .enumerate()
            .map(|(index, messages)| Transcript {
                session_id: format!("aider:{}:{index}", naming.path_hash),
                messages: messages.into_vec(),
            })
            .collect();
        return Ok(Some((Format::Aider, transcripts)));
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
            session_id: format!("{prefix}:{}:{}", short(&naming.stem), naming.path_hash),
            messages: trajectory::messages(kind, &value).into_vec(),
        };
        return Ok(Some((format, vec![transcript])));
    }
    Ok(None)
}

/// Gathers a file's transcripts whole.
#[derive(Default)]
struct Gather {
    format: Option<Format>,
    transcripts: Vec<Transcript>,
}

impl Collector for Gather {
    fn begin(&mut self, format: Format, base_id: &str) -> bool {
        self.format = Some(format);
        self.transcripts.push(Transcript {
            session_id: base_id.to_string(),
            messages: Vec::new(),
        });
        true
    }

    fn message(&mut self, message: Message) -> bool {
        if let Some(transcript) = self.transcripts.last_mut() {
            transcript.messages.push(message);
        }
        true
    }
}

/// Reads one file whole: its format and transcripts, or why it holds none.
/// The last response of a log counts as finished.
pub fn read_transcripts(path: &Path) -> Result<(Format, Vec<Transcript>), String> {
    let opened = reader::open_regular(path)?;
    let naming = Naming::of(path, &canonical_path(path));
    let mut notes = Notes::default();
    if sniff(&opened.file)? == Layout::Document
        && let Some(found) = read_document(&opened.file, &naming, &mut notes)?
    {
        return Ok(found);
    }
    let mut gather = Gather::default();
    read_json_lines(&opened.file, Start::beginning(), true, &naming, &mut gather)?;
    match gather.format {
        Some(format) => Ok((format, gather.transcripts)),
        None => Err(not_a_transcript()),
    }
}

/// Whether a file is a transcript, read only as far as needed to tell.
fn check_transcript(path: &Path) -> Result<(), String> {
    /// Stops at the first transcript.
    struct Found;
    impl Collector for Found {
        fn begin(&mut self, _: Format, _: &str) -> bool {
            false
        }
        fn message(&mut self, _: Message) -> bool {
            false
        }
    }
    let opened = reader::open_regular(path)?;
    let naming = Naming::of(path, &canonical_path(path));
    let mut notes = Notes::default();
    if sniff(&opened.file)? == Layout::Document
        && read_document(&opened.file, &naming, &mut notes)?.is_some()
    {
        return Ok(());
    }
    match read_json_lines(&opened.file, Start::beginning(), true, &naming, &mut Found) {
        Err(reason) if reason != LEFT_OUT => Err(reason),
        _ => Ok(()),
    }
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

/// Whether any of the paths holds a transcript (reads files until one
/// is); else why each path holds none.
pub fn holds_transcripts(paths: &[PathBuf]) -> Result<(), Vec<SkippedFile>> {
    let mut reasons = Vec::new();
    for path in paths {
        let reason = match std::fs::metadata(path) {
            Err(error) => format!("cannot read it: {error}"),
            Ok(metadata) if metadata.is_dir() => {
                let mut found = Vec::new();
                walk(path, &mut found, 0);
                found.sort();
                if found.iter().any(|file| check_transcript(file).is_ok()) {
                    return Ok(());
                }
                format!(
                    "this folder is not a git repository and holds no transcripts ({KNOWN_AGENTS})"
                )
            }
            Ok(_) => match check_transcript(path) {
                Ok(()) => return Ok(()),
                Err(reason) => reason,
            },
        };
        reasons.push(SkippedFile {
            path: path.display().to_string(),
            reason,
        });
    }
    Err(reasons)
}

/// The agents whose transcripts are read, as named in reasons.
const KNOWN_AGENTS: &str = "Claude Code, Codex CLI, SWE-agent, OpenHands or aider";

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

/// A message cut to [`MAX_MESSAGE_BYTES`], the cut marked (and counted).
fn capped(message: Message, num_cut: &mut usize) -> Message {
    if message.content.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    *num_cut += 1;
    let mut end = MAX_MESSAGE_BYTES;
    while !message.content.is_char_boundary(end) {
        end -= 1;
    }
    let mut content = message.content[..end].to_string();
    content.push_str(&format!(
        "\n[... {} bytes cut by precedent import]",
        message.content.len() - end
    ));
    Message { content, ..message }
}

/// Batches one session's messages into Adds within the Add limits, each
/// with request id `<session>:<first>-<last>`, skipping the messages the
/// store holds already.
struct Batcher<'a> {
    user_id: String,
    session_id: String,
    next_index: usize,
    skip: usize,
    batch: Vec<Message>,
    batch_first: usize,
    batch_bytes: usize,
    num_adds: usize,
    send: Box<dyn FnMut(AddRequest) -> bool + 'a>,
    failed: bool,
}

impl<'a> Batcher<'a> {
    fn new(
        user_id: &str,
        session_id: String,
        skip: usize,
        send: Box<dyn FnMut(AddRequest) -> bool + 'a>,
    ) -> Batcher<'a> {
        Batcher {
            user_id: user_id.to_string(),
            session_id,
            next_index: 0,
            skip,
            batch: Vec::new(),
            batch_first: 0,
            batch_bytes: 0,
            num_adds: 0,
            send,
            failed: false,
        }
    }

    /// Into the pool's workers, as one job streamed in order.
    fn to_pool(user_id: &str, session_id: String, skip: usize, pool: &'a AddPool) -> Batcher<'a> {
        let mut sender = None;
        let send = move |add: AddRequest| {
            if sender.is_none() {
                sender = pool.submit_stream();
            }
            sender
                .as_ref()
                .is_some_and(|sender: &std::sync::mpsc::SyncSender<AddRequest>| {
                    sender.send(add).is_ok()
                })
        };
        Batcher::new(user_id, session_id, skip, Box::new(send))
    }

    /// The session's next message (false once sending failed).
    fn message(&mut self, message: Message) -> bool {
        let index = self.next_index;
        self.next_index += 1;
        if index < self.skip || self.failed {
            return !self.failed;
        }
        if !self.batch.is_empty()
            && (self.batch.len() >= MESSAGES_PER_IMPORTED_ADD
                || self.batch_bytes + message.content.len() > MAX_CONTENT_BYTES_PER_ADD)
            && !self.flush()
        {
            return false;
        }
        if self.batch.is_empty() {
            self.batch_first = index;
        }
        self.batch_bytes += message.content.len();
        self.batch.push(message);
        true
    }

    fn flush(&mut self) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        let first = self.batch_first;
        let last = first + self.batch.len() - 1;
        let add = AddRequest::new(
            format!("{}:{first}-{last}", self.session_id),
            self.user_id.clone(),
            self.session_id.clone(),
            std::mem::take(&mut self.batch),
        );
        self.batch_bytes = 0;
        self.num_adds += 1;
        let handed_over = match add {
            Ok(add) => (self.send)(add),
            Err(invalid) => {
                tracing::warn!(session_id = %self.session_id, %invalid, "session not imported");
                false
            }
        };
        if !handed_over {
            self.failed = true;
        }
        !self.failed
    }

    /// Sends the last batch: the messages seen, those the store held, and
    /// whether every Add was handed over.
    fn finish(mut self) -> Batched {
        let handed_over = self.flush();
        Batched {
            num_messages: self.next_index,
            num_already: self.skip.min(self.next_index),
            num_adds: self.num_adds,
            handed_over,
        }
    }
}

/// What a [`Batcher`] did.
struct Batched {
    num_messages: usize,
    num_already: usize,
    num_adds: usize,
    handed_over: bool,
}

/// How a log is imported: from where its last import stopped, or from its
/// start (the previous session if the state knew one, and why it is not
/// continued, when it is not).
enum LogPlan {
    Resume(SessionState),
    Fresh {
        previous: Option<SessionState>,
        restart_reason: Option<String>,
    },
}

/// Imports one JSON-lines log as it is read.
struct LogImport<'a, 's> {
    user_id: &'a str,
    sink: &'a dyn Sink,
    pool: &'a AddPool,
    path: &'a Path,
    sessions_seen: &'s mut HashMap<String, PathBuf>,
    plan: LogPlan,
    session: Option<SessionState>,
    batcher: Option<Batcher<'a>>,
    messages_cut: usize,
    refused: Option<String>,
    error: Option<anyhow::Error>,
}

impl Collector for LogImport<'_, '_> {
    fn begin(&mut self, _: Format, base_id: &str) -> bool {
        let (session, skip) = match &self.plan {
            LogPlan::Resume(session) => (session.clone(), session.num_messages),
            LogPlan::Fresh {
                previous,
                restart_reason,
            } => {
                let generation = match previous {
                    Some(previous) if previous.base_id == base_id => {
                        previous.generation + u32::from(restart_reason.is_some())
                    }
                    _ => 1,
                };
                let session = SessionState {
                    base_id: base_id.to_string(),
                    generation,
                    num_messages: 0,
                    messages_sha256: String::new(),
                };
                match self
                    .sink
                    .stored_messages(self.user_id, &session.session_id())
                {
                    Ok(stored) => (session, stored),
                    Err(error) => {
                        self.error = Some(error);
                        return false;
                    }
                }
            }
        };
        let session_id = session.session_id();
        if let Some(other) = self.sessions_seen.get(&session_id) {
            self.refused = Some(format!(
                "the same session ({session_id}) as {}",
                other.display()
            ));
            return false;
        }
        self.sessions_seen
            .insert(session_id.clone(), self.path.to_path_buf());
        let mut batcher = Batcher::to_pool(self.user_id, session_id, skip, self.pool);
        if let LogPlan::Resume(session) = &self.plan {
            batcher.next_index = session.num_messages;
        }
        self.batcher = Some(batcher);
        self.session = Some(session);
        true
    }

    fn message(&mut self, message: Message) -> bool {
        let message = capped(message, &mut self.messages_cut);
        self.batcher
            .as_mut()
            .is_some_and(|batcher| batcher.message(message))
    }
}

/// Whether a log's bytes up to the state's offset are those imported: a
/// hasher over them if so. Within a watch, where they were hashed already,
/// the same file and the bytes just before the offset suffice.
fn verify(
    state: &FileState,
    opened: &OpenedFile,
    hashed: Option<&(u64, Sha256)>,
) -> Option<Sha256> {
    if state.offset > opened.len || state.prefix_sha256.is_empty() {
        return None;
    }
    if let Some((offset, hasher)) = hashed
        && *offset == state.offset
        && state.identity == opened.identity
    {
        let window = reader::digest_range(
            &opened.file,
            state.offset.saturating_sub(reader::WINDOW_BYTES),
            state.offset,
        )
        .ok()?;
        return (window == state.window_sha256).then(|| hasher.clone());
    }
    let mut hasher = Sha256::new();
    reader::hash_range(&opened.file, &mut hasher, 0, state.offset).ok()?;
    (reader::hex(&hasher.clone().finalize()) == state.prefix_sha256).then_some(hasher)
}

/// A file's new state, and the hasher over its imported bytes.
struct NewState {
    key: String,
    state: FileState,
    hashed: Option<(u64, Sha256)>,
}

/// One look at the files: what it found and what it leaves for the next.
struct Pass<'a> {
    scope: &'a TranscriptScope,
    /// Keys already derived, by recorded working directory.
    keys_by_directory: HashMap<PathBuf, Option<String>>,
    sink: &'a dyn Sink,
    pool: &'a AddPool,
    target: String,
    turn_finished: bool,
    states: &'a ResumeStates,
    hashed: &'a HashMap<String, (u64, Sha256)>,
    new_states: Vec<NewState>,
    sessions_seen: HashMap<String, PathBuf>,
    held: HashSet<PathBuf>,
    report: TranscriptReport,
    error: Option<anyhow::Error>,
}

impl<'a> Pass<'a> {
    /// A pass over files whose states `watched` holds, storing through `pool`.
    fn new(
        options: &'a TranscriptOptions,
        sink: &'a dyn Sink,
        pool: &'a AddPool,
        watched: &'a Watched,
        report: TranscriptReport,
    ) -> Pass<'a> {
        Pass {
            scope: &options.scope,
            keys_by_directory: HashMap::new(),
            sink,
            pool,
            target: sink.target(),
            turn_finished: options.turn_finished,
            states: &watched.states,
            hashed: &watched.hashed,
            new_states: Vec::new(),
            sessions_seen: HashMap::new(),
            held: HashSet::new(),
            report,
            error: None,
        }
    }

    /// Imports one file; why it is skipped, if it is.
    fn import_file(&mut self, path: &Path) -> Result<(), String> {
        let opened = reader::open_regular(path)?;
        let layout = sniff(&opened.file)?;
        let user_id = self.user_for(path, layout)?;
        let canonical = canonical_path(path);
        let naming = Naming::of(path, &canonical);
        let key = resume::key(&self.target, &user_id, &canonical);
        let previous = self.states.get(&key).cloned();
        if layout == Layout::Document {
            let mut notes = Notes::default();
            if let Some((format, transcripts)) = read_document(&opened.file, &naming, &mut notes)? {
                self.note(path, &notes);
                return self.import_document(
                    &user_id,
                    path,
                    &opened,
                    key,
                    previous,
                    format,
                    transcripts,
                );
            }
        }
        let settled = self.turn_finished
            || opened
                .modified
                .is_none_or(|modified| modified.elapsed().is_ok_and(|quiet| quiet >= SETTLE_TIME));
        self.import_log(&user_id, path, &opened, key, previous, settled, &naming)
    }

    /// The memory a file's sessions go to (see [`TranscriptScope`]).
    fn user_for(&mut self, path: &Path, layout: Layout) -> Result<String, String> {
        let fallback = match self.scope {
            TranscriptScope::Fixed(user_id) => return Ok(user_id.clone()),
            TranscriptScope::Recorded { fallback } => fallback,
        };
        let recorded = (layout != Layout::Document)
            .then(|| recorded_directory(path))
            .flatten();
        if let Some(directory) = recorded {
            let key = self
                .keys_by_directory
                .entry(directory.clone())
                .or_insert_with(|| crate::scope::repository_scope(&directory));
            if let Some(key) = key {
                return Ok(key.clone());
            }
        }
        fallback.clone().ok_or_else(|| {
            "records no working directory inside a git repository of this machine, and the \
             import runs outside one: give the memory's key with --user-id"
                .to_string()
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn import_log(
        &mut self,
        user_id: &str,
        path: &Path,
        opened: &OpenedFile,
        key: String,
        previous: Option<FileState>,
        settled: bool,
        naming: &Naming,
    ) -> Result<(), String> {
        let Some((plan, start, hashed_from)) = self.log_plan(user_id, opened, &key, previous)
        else {
            return Ok(());
        };
        let restarted = match &plan {
            LogPlan::Fresh {
                restart_reason: Some(reason),
                ..
            } => Some(reason.clone()),
            _ => None,
        };
        let mut log = LogImport {
            user_id,
            sink: self.sink,
            pool: self.pool,
            path,
            sessions_seen: &mut self.sessions_seen,
            plan,
            session: None,
            batcher: None,
            messages_cut: 0,
            refused: None,
            error: None,
        };
        let read = read_json_lines(&opened.file, start, settled, naming, &mut log);
        let LogImport {
            session,
            batcher,
            messages_cut,
            refused,
            error,
            ..
        } = log;
        let batched = batcher.map(Batcher::finish);
        self.report.messages_cut += messages_cut;
        if let Some(error) = error {
            self.error = Some(error);
            return Ok(());
        }
        let read = match read {
            Err(reason) if reason == LEFT_OUT => return Err(refused.unwrap_or(reason)),
            Err(reason) => return Err(reason),
            Ok(read) => read,
        };
        let (Some(mut session), Some(batched)) = (session, batched) else {
            return Err(not_a_transcript());
        };
        self.report.files_read += 1;
        self.note(path, &read.notes);
        if read.notes.held_back {
            self.held.insert(path.to_path_buf());
        }
        if batched.num_messages > 0 {
            self.report.sessions += 1;
        }
        self.report.messages_already_imported += batched.num_already;
        if batched.num_adds > 0 {
            self.report.sessions_updated += 1;
        }
        if let Some(reason) = restarted {
            self.report.sessions_restarted.push(RestartedSession {
                path: path.display().to_string(),
                session_id: session.session_id(),
                reason,
            });
        }
        if read.stopped || !batched.handed_over {
            return Ok(());
        }
        session.num_messages = batched.num_messages;
        self.remember_log(key, opened, read, session, hashed_from);
        Ok(())
    }

    /// Where to read a log from: where the file's state says it was left
    /// when the file is unchanged up to there and the store holds what the
    /// state says, else from its start; with the prefix hashed so far.
    /// `None` when the store could not say (the error is kept).
    fn log_plan(
        &mut self,
        user_id: &str,
        opened: &OpenedFile,
        key: &str,
        previous: Option<FileState>,
    ) -> Option<(LogPlan, Start, (u64, Sha256))> {
        let verified = previous
            .as_ref()
            .and_then(|state| verify(state, opened, self.hashed.get(key)));
        let restart_reason = "rewritten or replaced since it was imported".to_string();
        let planned = match (&previous, verified) {
            (Some(state), Some(hasher))
                if state.sessions.len() == 1 && Format::from_name(&state.format).is_some() =>
            {
                let session = state.sessions[0].clone();
                let stored = match self.sink.stored_messages(user_id, &session.session_id()) {
                    Ok(stored) => stored,
                    Err(error) => {
                        self.error = Some(error);
                        return None;
                    }
                };
                let format = Format::from_name(&state.format).unwrap_or(Format::ClaudeCode);
                if stored == session.num_messages {
                    let start = Start {
                        offset: state.offset,
                        num_lines: state.num_lines,
                        known: Some((format, session.base_id.clone())),
                        num_lines_reported: state.num_lines_read,
                    };
                    (LogPlan::Resume(session), start, (state.offset, hasher))
                } else {
                    // The store and the state disagree: the store says
                    // where the file's messages stop.
                    let plan = LogPlan::Fresh {
                        previous: Some(session),
                        restart_reason: None,
                    };
                    (plan, Start::beginning(), (0, Sha256::new()))
                }
            }
            (Some(state), _) => {
                let plan = LogPlan::Fresh {
                    previous: state.sessions.first().cloned(),
                    restart_reason: Some(restart_reason),
                };
                (plan, Start::beginning(), (0, Sha256::new()))
            }
            (None, _) => {
                let plan = LogPlan::Fresh {
                    previous: None,
                    restart_reason: None,
                };
                (plan, Start::beginning(), (0, Sha256::new()))
            }
        };
        Some(planned)
    }

    /// Remembers how far a log was imported: its offset, line counts, the
    /// hash of what was read and of the window before its end.
    fn remember_log(
        &mut self,
        key: String,
        opened: &OpenedFile,
        read: LinesRead,
        session: SessionState,
        hashed_from: (u64, Sha256),
    ) {
        let (hashed_offset, mut hasher) = hashed_from;
        let window = reader::hash_range(&opened.file, &mut hasher, hashed_offset, read.offset)
            .and_then(|()| {
                reader::digest_range(
                    &opened.file,
                    read.offset.saturating_sub(reader::WINDOW_BYTES),
                    read.offset,
                )
            });
        let Ok(window_sha256) = window else {
            return;
        };
        let state = FileState {
            identity: opened.identity,
            format: read.format.name().to_string(),
            offset: read.offset,
            num_lines: read.num_lines,
            num_lines_read: read.num_lines_read,
            prefix_sha256: reader::hex(&hasher.clone().finalize()),
            window_sha256,
            sessions: vec![SessionState {
                base_id: read.base_id,
                ..session
            }],
        };
        self.new_states.push(NewState {
            key,
            state,
            hashed: Some((read.offset, hasher)),
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn import_document(
        &mut self,
        user_id: &str,
        path: &Path,
        opened: &OpenedFile,
        key: String,
        previous: Option<FileState>,
        format: Format,
        transcripts: Vec<Transcript>,
    ) -> Result<(), String> {
        self.report.files_read += 1;
        let mut sessions = Vec::new();
        let mut handed_over = true;
        for transcript in transcripts {
            if let Some(other) = self.sessions_seen.get(&transcript.session_id) {
                self.report.files_skipped.push(SkippedFile {
                    path: path.display().to_string(),
                    reason: format!(
                        "the same session ({}) as {}",
                        transcript.session_id,
                        other.display()
                    ),
                });
                continue;
            }
            self.sessions_seen
                .insert(transcript.session_id.clone(), path.to_path_buf());
            if transcript.messages.is_empty() {
                continue;
            }
            self.report.sessions += 1;
            let messages: Vec<Message> = transcript
                .messages
                .into_iter()
                .map(|message| capped(message, &mut self.report.messages_cut))
                .collect();
            let prior = previous.as_ref().and_then(|state| {
                state
                    .sessions
                    .iter()
                    .find(|session| session.base_id == transcript.session_id)
            });
            let generation = self.generation(path, &transcript.session_id, prior, &messages);
            let session = SessionState {
                base_id: transcript.session_id.clone(),
                generation,
                num_messages: messages.len(),
                messages_sha256: resume::messages_sha256(&messages),
            };
            let Some(session_handed_over) = self.store_session(user_id, &session, messages) else {
                return Ok(());
            };
            handed_over &= session_handed_over;
            sessions.push(session);
        }
        if handed_over {
            self.new_states.push(NewState {
                key,
                state: FileState {
                    identity: opened.identity,
                    format: format.name().to_string(),
                    offset: opened.len,
                    num_lines: 0,
                    num_lines_read: 0,
                    prefix_sha256: String::new(),
                    window_sha256: String::new(),
                    sessions,
                },
                hashed: None,
            });
        }
        Ok(())
    }

    /// The generation a document's session is stored under: its prior one
    /// when the messages imported then still start the transcript, the next
    /// (a restarted session, reported) when they do not, 1 for a new one.
    fn generation(
        &mut self,
        path: &Path,
        base_id: &str,
        prior: Option<&SessionState>,
        messages: &[Message],
    ) -> u32 {
        match prior {
            Some(prior)
                if prior.num_messages <= messages.len()
                    && resume::messages_sha256(&messages[..prior.num_messages])
                        == prior.messages_sha256 =>
            {
                prior.generation
            }
            Some(prior) => {
                let session_id = resume::session_id(base_id, prior.generation + 1);
                self.report.sessions_restarted.push(RestartedSession {
                    path: path.display().to_string(),
                    session_id,
                    reason: "rewritten or replaced since it was imported".to_string(),
                });
                prior.generation + 1
            }
            None => 1,
        }
    }

    /// Hands a session's messages not stored yet to the pool: whether all
    /// were handed over; `None` when the store could not say how many it
    /// holds (the error is kept).
    fn store_session(
        &mut self,
        user_id: &str,
        session: &SessionState,
        messages: Vec<Message>,
    ) -> Option<bool> {
        let stored = match self.sink.stored_messages(user_id, &session.session_id()) {
            Ok(stored) => stored,
            Err(error) => {
                self.error = Some(error);
                return None;
            }
        };
        let mut batcher = Batcher::to_pool(user_id, session.session_id(), stored, self.pool);
        for message in messages {
            if !batcher.message(message) {
                break;
            }
        }
        let batched = batcher.finish();
        self.report.messages_already_imported += batched.num_already;
        if batched.num_adds > 0 {
            self.report.sessions_updated += 1;
        }
        Some(batched.handed_over)
    }

    /// Adds what reading a file noticed to the report.
    fn note(&mut self, path: &Path, notes: &Notes) {
        if notes.num_skipped > 0 {
            self.report.num_lines_skipped += notes.num_skipped;
            self.report.lines_skipped.push(SkippedLines {
                path: path.display().to_string(),
                num_lines: notes.num_skipped,
                first: notes.skipped.clone(),
            });
        }
        self.report.lines_with_invalid_utf8 += notes.invalid_utf8;
        if notes.not_fully_read {
            self.report.files_not_fully_read.push(SkippedFile {
                path: path.display().to_string(),
                reason: format!(
                    "grew past {} MiB while read: read up to there",
                    MAX_FILE_BYTES / (1024 * 1024)
                ),
            });
        }
    }
}

/// What `watch` knows of a file between looks: its length and change time.
type FileStamp = (u64, Option<SystemTime>);

/// The working directory a JSON-lines log records in its first lines
/// (Claude Code's `cwd` on each event, Codex's in `session_meta`).
fn recorded_directory(path: &Path) -> Option<PathBuf> {
    let opened = reader::open_regular(path).ok()?;
    let mut lines = Lines::new(&opened.file, 0, 0).ok()?;
    for _ in 0..NUM_HEAD_EVENTS {
        if !matches!(lines.next_line().ok()??, Line::Complete) {
            continue;
        }
        let Ok(value) = serde_json::from_slice::<Value>(lines.bytes()) else {
            continue;
        };
        let cwd = value
            .get("cwd")
            .or_else(|| value.pointer("/payload/cwd"))
            .and_then(Value::as_str);
        if let Some(cwd) = cwd
            && cwd.starts_with('/')
        {
            return Some(PathBuf::from(cwd));
        }
    }
    None
}

/// Imports the transcripts the paths name or hold into `sink`; with
/// `watch`, keeps importing what changes until `stop` becomes true.
pub fn import_transcripts(
    options: &TranscriptOptions,
    sink: Arc<dyn Sink>,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
) -> anyhow::Result<TranscriptReport> {
    if let TranscriptScope::Fixed(user_id) = &options.scope
        && user_id.is_empty()
    {
        bail!("--user-id must not be empty");
    }
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

/// One look at every file: reads those that changed, stores their new
/// messages, and waits until they are stored (so that the next look counts
/// them); then remembers how far each file was imported.
fn import_pass(
    options: &TranscriptOptions,
    sink: &Arc<dyn Sink>,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
    watched: &mut Watched,
    first_pass: bool,
) -> anyhow::Result<TranscriptReport> {
    let (sources, skipped) = discover(&options.paths);
    let changed: Vec<(Source, FileStamp)> = sources
        .into_iter()
        .filter_map(|source| {
            let stamp = stamp_of(&source.path);
            needs_reading(watched, &source.path, &stamp).then_some((source, stamp))
        })
        .collect();
    let mut report = TranscriptReport::default();
    if first_pass {
        report.files_skipped = skipped;
    }
    if changed.is_empty() {
        return Ok(report);
    }
    progress.start(changed.len(), "transcript files");
    let pool = AddPool::new(Arc::clone(sink), options.parallelism);
    let mut pass = Pass::new(options, sink.as_ref(), &pool, watched, report);
    let mut read_paths = Vec::new();
    let mut last_update = Instant::now();
    for (done, (source, stamp)) in changed.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            pass.report.interrupted = true;
            break;
        }
        if pass.pool.failed() || pass.error.is_some() {
            break;
        }
        if let Err(reason) = pass.import_file(&source.path)
            && (source.explicit || is_reported(&source.path))
        {
            pass.report.files_skipped.push(SkippedFile {
                path: source.path.display().to_string(),
                reason,
            });
        }
        read_paths.push((source.path.clone(), *stamp));
        if last_update.elapsed() >= Duration::from_millis(200) {
            let status = format!(
                "{} message(s) imported, {} already there",
                pass.pool.messages_stored(),
                pass.report.messages_already_imported
            );
            progress.update(done + 1, &status);
            last_update = Instant::now();
        }
    }
    let Pass {
        new_states,
        held,
        mut report,
        error,
        ..
    } = pass;
    let outcome = pool.finish();
    report.adds = outcome.adds_stored;
    report.messages_imported = outcome.messages_stored;
    progress.finish();
    let result = match error {
        Some(error) => Err(error),
        None => outcome.result,
    };
    if let Err(error) = result {
        // What failed is read again at the next run.
        watched.seen.clear();
        return Err(error.context(format!(
            "import stopped after {} message(s); run it again to resume",
            report.messages_imported
        )));
    }
    for (path, stamp) in read_paths {
        watched.held.remove(&path);
        watched.seen.insert(path, stamp);
    }
    watched.held.extend(held);
    if !new_states.is_empty() {
        report.state_not_saved = watched.remember(new_states).err();
    }
    Ok(report)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;

    /// The user messages of the one transcript of `lines`, written to
    /// `path` as a log and read back.
    fn user_messages(path: &Path, lines: &[serde_json::Value]) -> Vec<String> {
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        std::fs::write(path, text).expect("write");
        let (_, transcripts) = read_transcripts(path).expect("read");
        transcripts[0]
            .messages
            .iter()
            .filter(|message| message.role == Role::User)
            .map(|message| message.content.clone())
            .collect()
    }

    /// Logs are read event by event: the working directory opens the
    /// first user message only, in Claude Code logs and Codex rollouts.
    #[test]
    fn a_streamed_log_gives_its_working_directory_once() {
        let dir = tempfile::tempdir().expect("dir");
        let claude = dir.path().join("s1.jsonl");
        let lines = [
            serde_json::json!({"type": "user", "sessionId": "s1", "cwd": "/home/ann/shop", "message": {"role": "user", "content": "fix the cart"}}),
            serde_json::json!({"type": "assistant", "sessionId": "s1", "cwd": "/home/ann/shop", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "looking"}]}}),
            serde_json::json!({"type": "user", "sessionId": "s1", "cwd": "/home/ann/shop", "message": {"role": "user", "content": "and the test"}}),
        ];
        assert_eq!(
            user_messages(&claude, &lines),
            [
                "<environment_context><cwd>/home/ann/shop</cwd></environment_context>\nfix the cart",
                "and the test"
            ]
        );

        let codex = dir.path().join("rollout.jsonl");
        let lines = [
            serde_json::json!({"type": "session_meta", "payload": {"id": "r1", "cwd": "/work/api"}}),
            serde_json::json!({"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the route"}]}}),
            serde_json::json!({"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and the docs"}]}}),
        ];
        assert_eq!(
            user_messages(&codex, &lines),
            [
                "<environment_context><cwd>/work/api</cwd></environment_context>\nfix the route",
                "and the docs"
            ]
        );
    }

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

    /// The Adds that bring a session from `stored` messages to all of the
    /// transcript's.
    fn tail_adds(user_id: &str, transcript: &Transcript, stored: usize) -> Vec<AddRequest> {
        let mut adds = Vec::new();
        let mut batcher = Batcher::new(
            user_id,
            transcript.session_id.clone(),
            stored,
            Box::new(|add| {
                adds.push(add);
                true
            }),
        );
        for message in &transcript.messages {
            assert!(batcher.message(message.clone()));
        }
        assert!(batcher.finish().handed_over);
        adds
    }

    #[test]
    fn the_tail_past_the_stored_messages_is_added_in_batches() {
        let adds = tail_adds("u", &transcript(2_500), 300);
        let ids: Vec<&str> = adds.iter().map(|add| add.request_id().as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "claude-code:s1:300-1299",
                "claude-code:s1:1300-2299",
                "claude-code:s1:2300-2499"
            ]
        );
        assert_eq!(adds[0].messages()[0].content, "message 300");
        assert!(tail_adds("u", &transcript(5), 5).is_empty());
        assert!(tail_adds("u", &transcript(5), 9).is_empty());
    }

    #[test]
    fn oversized_messages_are_cut_on_a_character_boundary() {
        let message = Message {
            role: Role::User,
            content: "é".repeat(MAX_MESSAGE_BYTES),
            timestamp_ms: None,
        };
        let mut num_cut = 0;
        let cut = capped(message, &mut num_cut);
        assert_eq!(num_cut, 1);
        assert!(cut.content.len() < MAX_MESSAGE_BYTES + 100);
        assert!(cut.content.ends_with("bytes cut by precedent import]"));
    }
}
