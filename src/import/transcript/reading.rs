//! What a file holds: its layout, format and session, and its messages,
//! read line by line from where the last import stopped or whole, with
//! what reading noticed besides (lines skipped, invalid UTF-8, a response
//! held back).

use std::fs::File;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::grouping::Grouper;
use super::reader::{self, Line, Lines};
use super::{
    Format, MAX_LINE_BYTES, SkippedLine, Transcript, aider, claude, codex, render, trajectory,
};
use precedent_core::domain::Message;

/// The first JSON lines that tell a log's format and session.
const NUM_HEAD_EVENTS: usize = 50;
/// Bytes of those first lines kept at most.
const MAX_HEAD_BYTES: usize = 32 * 1024 * 1024;
/// Skipped lines listed per file (the rest are counted).
const NUM_LINES_LISTED: usize = 5;

/// What reading a file noticed besides its messages.
#[derive(Debug, Default)]
pub(super) struct Notes {
    /// Lines up to this one were reported by an earlier read.
    reported_through: u64,
    pub(super) skipped: Vec<SkippedLine>,
    pub(super) num_skipped: usize,
    pub(super) invalid_utf8: usize,
    pub(super) not_fully_read: bool,
    pub(super) held_back: bool,
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
pub(super) struct Naming {
    path_hash: String,
    stem: String,
}

impl Naming {
    pub(super) fn of(path: &Path, canonical: &str) -> Naming {
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

pub(super) fn canonical_path(path: &Path) -> String {
    path.canonicalize()
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .to_string()
}

/// How a file is read: line by line, or whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    JsonLines,
    Document,
}

/// Tells the layout from the file's first line (binary data refused): a
/// JSON object that is no trajectory starts a JSON-lines log.
pub(super) fn sniff(file: &File) -> Result<Layout, String> {
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
pub(super) trait Collector {
    /// A transcript starts: its format and session id as the file names
    /// them; false skips the rest of the file.
    fn begin(&mut self, format: Format, base_id: &str) -> bool;
    /// The transcript's next message; false stops reading.
    fn message(&mut self, message: Message) -> bool;
}

/// The reading error of a file its collector refused.
pub(super) const LEFT_OUT: &str = "left out";

/// Where a JSON-lines read starts and what is known there.
pub(super) struct Start {
    pub(super) offset: u64,
    pub(super) num_lines: u64,
    pub(super) known: Option<(Format, String)>,
    /// Lines read (and reported) before: a held-back response's lines are
    /// read again, their faults not reported again.
    pub(super) num_lines_reported: u64,
}

impl Start {
    pub(super) fn beginning() -> Start {
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
pub(super) struct LinesRead {
    pub(super) format: Format,
    pub(super) base_id: String,
    pub(super) offset: u64,
    pub(super) num_lines: u64,
    /// Lines read to the end (held-back ones included).
    pub(super) num_lines_read: u64,
    pub(super) notes: Notes,
    pub(super) stopped: bool,
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

/// Reads a JSON-lines log from `start`: each complete line once, a line
/// still being written left for later, the last open response held back
/// unless `settled`.
pub(super) fn read_json_lines(
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
pub(super) fn read_document(
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
pub(super) fn check_transcript(path: &Path) -> Result<(), String> {
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

pub(super) fn not_a_transcript() -> String {
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

/// The working directory a JSON-lines log records in its first lines
/// (Claude Code's `cwd` on each event, Codex's in `session_meta`).
pub(super) fn recorded_directory(path: &Path) -> Option<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use precedent_core::domain::Role;

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
}
