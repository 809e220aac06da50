//! hooks: precedent inside an agent's lifecycle (Claude Code and Codex
//! hooks), with no integration work by the agent or the model.
//!
//! An agent runs `precedent hook <Event>` with the event's JSON on stdin.
//! This module reads that payload ([`HookPayload`]; fields it does not
//! know are ignored), says what to search for ([`session_start_query`],
//! or the prompt), turns search items into the agent's answer within a
//! character budget ([`context_answer`]), and keeps a log of what each
//! hook did ([`HookLog`]). Running the search or the import, and the
//! deadline, are the CLI's (`cli::hooks`); which entries go into the
//! agents' settings files is [`settings`]', and precedent's entry in their
//! MCP configuration [`mcp_config`]'s.
//!
//! Architecture invariant: nothing here may make a hook fail in a way
//! that blocks the agent; the answer is either the agent's JSON or
//! nothing.

mod jsonc;
pub mod mcp_config;
pub mod settings;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Characters of context a hook gives the agent unless told otherwise.
pub const DEFAULT_BUDGET_CHARS: usize = 4_000;
/// Characters of a prompt searched for at most (a pasted log is cut).
const MAX_QUERY_CHARS: usize = 16_000;
/// Bytes the log keeps before it starts over (the previous log is kept
/// as `hooks.log.1`).
const MAX_LOG_BYTES: u64 = 1024 * 1024;
/// The log file's name in the data directory.
pub const LOG_FILE: &str = "hooks.log";

/// The events precedent answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A session starts (or resumes, or is cleared or compacted).
    SessionStart,
    /// The user sent a prompt.
    UserPromptSubmit,
    /// The agent finished its turn.
    Stop,
    /// The session ended (Claude Code).
    SessionEnd,
}

impl Event {
    /// The event by the agent's name for it.
    pub fn parse(name: &str) -> Option<Event> {
        match name {
            "SessionStart" => Some(Event::SessionStart),
            "UserPromptSubmit" => Some(Event::UserPromptSubmit),
            "Stop" => Some(Event::Stop),
            "SessionEnd" => Some(Event::SessionEnd),
            _ => None,
        }
    }

    /// The agent's name for the event.
    pub fn name(self) -> &'static str {
        match self {
            Event::SessionStart => "SessionStart",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::Stop => "Stop",
            Event::SessionEnd => "SessionEnd",
        }
    }

    /// Whether the event asks for context (else it imports the
    /// transcript).
    pub fn gives_context(self) -> bool {
        matches!(self, Event::SessionStart | Event::UserPromptSubmit)
    }
}

/// The fields of a hook's stdin that precedent reads. Claude Code and
/// Codex send more (`hook_event_name`, `model`, `turn_id`,
/// `permission_mode`, `stop_hook_active`, ...): they are ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookPayload {
    /// The agent's session.
    pub session_id: Option<String>,
    /// The session's transcript (JSON lines).
    pub transcript_path: Option<PathBuf>,
    /// The directory the agent works in.
    pub cwd: Option<PathBuf>,
    /// The user's prompt (UserPromptSubmit).
    pub prompt: Option<String>,
    /// Why the session starts: `startup`, `resume`, `clear`, `compact`
    /// (SessionStart).
    pub source: Option<String>,
    /// The turn's last reply, as Stop reports it (Claude Code), which the
    /// transcript may not hold yet when the hook starts.
    pub last_assistant_message: Option<String>,
}

impl HookPayload {
    /// Reads a payload; a payload that is not a JSON object (or empty)
    /// is an error, its fields each optional.
    pub fn parse(bytes: &[u8]) -> Result<HookPayload, String> {
        let value: Value = serde_json::from_slice(bytes)
            .map_err(|error| format!("the hook input is not JSON: {error}"))?;
        if !value.is_object() {
            return Err("the hook input is not a JSON object".to_string());
        }
        // Fields of an unexpected type read as absent rather than failing
        // the whole payload.
        let text = |field: &str| value.get(field).and_then(Value::as_str).map(str::to_string);
        Ok(HookPayload {
            session_id: text("session_id"),
            transcript_path: text("transcript_path").map(PathBuf::from),
            cwd: text("cwd").map(PathBuf::from),
            prompt: text("prompt"),
            source: text("source"),
            last_assistant_message: text("last_assistant_message"),
        })
    }
}

/// The search text of a prompt: `None` when it names no task of its own
/// ([`precedent_rank::query::prompt_names_task`]: a follow-up, a go-ahead, a
/// chore); at most [`MAX_QUERY_CHARS`] characters.
pub fn prompt_query(prompt: &str) -> Option<String> {
    let query: String = prompt.trim().chars().take(MAX_QUERY_CHARS).collect();
    precedent_rank::query::prompt_names_task(&query).then_some(query)
}

/// Bytes of a transcript's end read to see whether it holds a reply.
const TRANSCRIPT_TAIL_BYTES: u64 = 256 * 1024;
/// Characters of a reply compared with the transcript's.
const COMPARED_REPLY_CHARS: usize = 200;

/// Whether the end of the JSON-lines transcript at `path` holds `reply`
/// (its first characters, spaces trimmed) in an assistant entry's text.
pub fn transcript_holds_reply(path: &Path, reply: &str) -> bool {
    use std::io::{Read as _, Seek as _};
    let wanted: String = reply.trim().chars().take(COMPARED_REPLY_CHARS).collect();
    if wanted.is_empty() {
        return true;
    }
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let length = file.metadata().map_or(0, |metadata| metadata.len());
    let start = length.saturating_sub(TRANSCRIPT_TAIL_BYTES);
    let mut tail = Vec::new();
    if file.seek(std::io::SeekFrom::Start(start)).is_err()
        || file
            .take(TRANSCRIPT_TAIL_BYTES)
            .read_to_end(&mut tail)
            .is_err()
    {
        return false;
    }
    tail.split(|byte| *byte == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .any(|entry| {
            // Claude Code's `message`, Codex's `payload`.
            [&entry["message"], &entry["payload"]]
                .into_iter()
                .filter(|message| message["role"] == "assistant")
                .any(|message| match &message["content"] {
                    Value::String(text) => text.trim().starts_with(wanted.as_str()),
                    Value::Array(blocks) => blocks
                        .iter()
                        .filter_map(|block| block["text"].as_str())
                        .any(|text| text.trim().starts_with(wanted.as_str())),
                    _ => false,
                })
        })
}

#[cfg(test)]
mod reply_tests {
    use super::transcript_holds_reply;

    #[test]
    fn a_reply_is_found_in_claude_code_and_codex_transcripts() {
        let dir = tempfile::tempdir().expect("dir");
        let claude = dir.path().join("claude.jsonl");
        std::fs::write(
            &claude,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Fixed restock. All tests pass."}]}}"#,
        )
        .expect("write");
        assert!(transcript_holds_reply(
            &claude,
            "  Fixed restock. All tests pass."
        ));
        assert!(!transcript_holds_reply(&claude, "Something else"));
        let codex = dir.path().join("codex.jsonl");
        std::fs::write(
            &codex,
            "{\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Done: the cache is fixed.\"}]}}\nnot json\n",
        )
        .expect("write");
        assert!(transcript_holds_reply(&codex, "Done: the cache is fixed."));
        assert!(!transcript_holds_reply(
            &dir.path().join("missing.jsonl"),
            "Done"
        ));
        assert!(
            transcript_holds_reply(&codex, "   "),
            "no reply to wait for"
        );
    }
}

/// Branch names that say nothing of the work on them.
const DEFAULT_BRANCHES: &[&str] = &["main", "master", "trunk", "develop", "dev", "HEAD"];
/// Files changed in the working tree named in a start query at most.
const MAX_CHANGED_FILES: usize = 20;

/// The search text at a session's start: what the checkout at `directory`
/// says of the work in progress: the branch's name (unless it is a
/// default branch), the files changed in the working tree, and the last
/// commit's subject. `None` outside a repository, or when all three are
/// empty.
pub fn session_start_query(directory: &Path) -> Option<String> {
    let repository = git2::Repository::discover(directory).ok()?;
    let mut parts: Vec<String> = Vec::new();
    if let Ok(head) = repository.head() {
        if let Ok(branch) = head.shorthand()
            && !DEFAULT_BRANCHES.contains(&branch)
        {
            // `fix/divide-by-zero` searches as its words.
            parts.push(branch.replace(['/', '-', '_'], " "));
        }
        if let Ok(commit) = head.peel_to_commit()
            && let Ok(Some(summary)) = commit.summary()
        {
            parts.push(summary.to_string());
        }
    }
    let mut options = git2::StatusOptions::new();
    options
        .include_untracked(false)
        .include_ignored(false)
        .exclude_submodules(true);
    if let Ok(statuses) = repository.statuses(Some(&mut options)) {
        let changed: Vec<String> = statuses
            .iter()
            .filter_map(|entry| entry.path().ok().map(str::to_string))
            .take(MAX_CHANGED_FILES)
            .collect();
        if !changed.is_empty() {
            parts.push(changed.join(" "));
        }
    }
    let query = parts.join("\n");
    (!query.trim().is_empty()).then_some(query)
}

#[cfg(test)]
mod prompt_tests {
    use super::prompt_query;

    /// Prompts of the kind said inside a session, none of them in the
    /// lists the talk words were chosen from: 30 follow-ups, go-aheads and
    /// chores. Before, 21 of the 30 searched (with "PR", "merge",
    /// "linter", "branch", "rebase", "status"...).
    const FOLLOW_UPS: [&str; 30] = [
        "great, now commit this",
        "looks good, can you open a PR?",
        "ok, merge it",
        "what did you change?",
        "summarize what you did",
        "go on",
        "yes, do that",
        "no, the other one",
        "can you undo the last change?",
        "run the linter",
        "run cargo fmt and clippy",
        "push to origin",
        "create a new branch for this",
        "that's not right, try a different approach",
        "why did you do that?",
        "option 2 please",
        "sounds good, go ahead",
        "perfect, thank you!",
        "can you double check?",
        "rebase on main",
        "squash the commits",
        "let's call it a day",
        "write a commit message",
        "what's the status?",
        "is it done?",
        "add tests for that",
        "clean up the code",
        "format everything",
        "resume",
        "same as before",
    ];

    #[test]
    fn a_follow_up_searches_nothing_and_a_task_searches() {
        for prompt in FOLLOW_UPS {
            assert_eq!(prompt_query(prompt), None, "{prompt}");
        }
        for prompt in [
            "the date picker shows the wrong month after a reload",
            "TypeError in parse_header",
            "crash in src/walk.rs",
            "fd ignores the .gitignore of a parent directory when run in a subfolder",
            "add a --json flag to the list command",
            "--train compression level",
            "rewrite(abs) should call rewrite(Abs)",
            "fix #1234",
            "look at PROJ-482 again",
            "  the retry loop never backs off when the server resets the connection  ",
        ] {
            assert!(prompt_query(prompt).is_some(), "{prompt}");
        }
    }
}

/// The first line of the context given to the agent.
const CONTEXT_HEADING: &str = "Relevant past experience from precedent (the memory of earlier coding sessions in this repository; check it against the current code before relying on it):";
/// Marks text cut to fit the budget.
const CUT_MARK: &str = "\n[... cut to fit the context budget]";

/// The hook's answer for `event` from search items (the `data` of a
/// Search answer), within `budget_chars` characters of context; `None`
/// when there is no item.
pub fn context_answer(event: Event, items: &[Value], budget_chars: usize) -> Option<Value> {
    let context = render_context(items, budget_chars)?;
    Some(json!({
        "hookSpecificOutput": {
            "hookEventName": event.name(),
            "additionalContext": context,
        }
    }))
}

/// Items as numbered blocks under a heading, cut to `budget_chars`
/// characters (whole items first; the first one cut when it alone is
/// over).
fn render_context(items: &[Value], budget_chars: usize) -> Option<String> {
    let mut text = String::from(CONTEXT_HEADING);
    let mut num_chars = text.chars().count();
    let mut num_items = 0;
    for (rank, item) in items.iter().enumerate() {
        let content = item
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        if content.is_empty() {
            continue;
        }
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or("memory");
        let session = item
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or("?");
        let block = format!(
            "\n\n[{}] {kind} from session {session}\n{content}",
            rank + 1
        );
        let block_chars = block.chars().count();
        if num_chars + block_chars <= budget_chars {
            text.push_str(&block);
            num_chars += block_chars;
            num_items += 1;
            continue;
        }
        if num_items == 0 {
            let room = budget_chars
                .saturating_sub(num_chars)
                .saturating_sub(CUT_MARK.chars().count());
            if room > 0 {
                text.extend(block.chars().take(room));
                text.push_str(CUT_MARK);
                num_items += 1;
            }
        }
        break;
    }
    (num_items > 0).then_some(text)
}

/// The hooks' log in the data directory: one line per hook run, what it
/// did and why it gave nothing. It never holds memory content or prompts.
pub struct HookLog {
    path: PathBuf,
}

impl HookLog {
    /// The log of data directory `data_dir`.
    pub fn new(data_dir: &Path) -> HookLog {
        HookLog {
            path: data_dir.join(LOG_FILE),
        }
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a line (`<RFC 3339 UTC time> <event> <message>`); a log that cannot
    /// be written is skipped, as a hook must not fail for it.
    pub fn write(&self, event: &str, message: &str) {
        if let Some(parent) = self.path.parent()
            && precedent_core::files::private_dir(parent).is_err()
        {
            return;
        }
        if std::fs::metadata(&self.path).is_ok_and(|metadata| metadata.len() > MAX_LOG_BYTES) {
            let _ = std::fs::rename(&self.path, self.path.with_extension("log.1"));
        }
        let line = format!(
            "{} {event} {}\n",
            precedent_core::time::rfc3339_from_ms(precedent_core::time::now_ms()),
            escape_controls(message)
        );
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// The folder of the item ids each agent session was given.
const GIVEN_DIR: &str = "hook-given";
/// A session's record of given items older than this is removed.
const GIVEN_KEPT: std::time::Duration = std::time::Duration::from_secs(2 * 24 * 3600);

/// The items one agent session was already given (SessionStart, earlier
/// prompts), so that a later hook of the session does not hand them
/// again: kept in the data directory, one file per session.
pub struct GivenItems {
    path: PathBuf,
    ids: std::collections::HashSet<String>,
}

impl GivenItems {
    /// The items given so far in the agent's session `agent_session` (the
    /// hook input's `session_id`, the agent's own text, not a precedent
    /// session id: only its digest names a file); none when `fresh` (the
    /// agent's context was cleared or compacted: everything may be given
    /// again).
    pub fn load(data_dir: &Path, agent_session: &str, fresh: bool) -> GivenItems {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(agent_session.as_bytes());
        let name: String = digest
            .iter()
            .take(16)
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let path = data_dir.join(GIVEN_DIR).join(name);
        let ids = if fresh {
            Default::default()
        } else {
            std::fs::read_to_string(&path)
                .map(|text| text.lines().map(str::to_string).collect())
                .unwrap_or_default()
        };
        GivenItems { path, ids }
    }

    /// `items` without those given before.
    pub fn new_ones(&self, items: &[Value]) -> Vec<Value> {
        items
            .iter()
            .filter(|item| {
                item.get("id")
                    .and_then(Value::as_str)
                    .is_none_or(|id| !self.ids.contains(id))
            })
            .cloned()
            .collect()
    }

    /// Records `items` as given; records of sessions untouched for two
    /// days go. A record that cannot be written is skipped: a hook must
    /// not fail for it.
    pub fn remember(mut self, items: &[Value]) {
        let Some(parent) = self.path.parent() else {
            return;
        };
        if precedent_core::files::private_dir(parent).is_err() {
            return;
        }
        if !self.path.exists() {
            prune_older_than(parent, GIVEN_KEPT);
        }
        for id in items
            .iter()
            .filter_map(|item| item.get("id").and_then(Value::as_str))
        {
            self.ids.insert(id.to_string());
        }
        let mut ids: Vec<&String> = self.ids.iter().collect();
        ids.sort();
        let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
        let _ = precedent_core::files::write_replacing(&self.path, text.as_bytes(), 0o600);
    }
}

/// Removes the files of `dir` not modified for `age`.
fn prune_older_than(dir: &Path, age: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|metadata| metadata.modified())
            .is_ok_and(|modified| modified.elapsed().is_ok_and(|elapsed| elapsed > age));
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A log line's text: control characters (a NUL, an escape sequence, a
/// line break) written as escapes, so that no input can forge or hide a
/// line of the log.
fn escape_controls(message: &str) -> String {
    let mut text = String::with_capacity(message.len());
    for character in message.chars() {
        match character {
            '\n' | '\r' | '\t' => text.push(' '),
            character if character.is_control() => {
                text.push_str(&format!("\\u{{{:x}}}", u32::from(character)));
            }
            character => text.push(character),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_with_fields_precedent_does_not_know_is_read() {
        let payload = HookPayload::parse(
            br#"{"session_id":"abc","transcript_path":"/t.jsonl","cwd":"/repo","hook_event_name":"UserPromptSubmit","prompt":"fix it","model":"gpt-5","turn_id":"t1","permission_mode":"default","extra":{"nested":[1]}}"#,
        )
        .expect("parses");
        assert_eq!(payload.session_id.as_deref(), Some("abc"));
        assert_eq!(payload.prompt.as_deref(), Some("fix it"));
        assert_eq!(payload.cwd, Some(PathBuf::from("/repo")));
        // A field of another type reads as absent.
        let payload = HookPayload::parse(br#"{"prompt": 3}"#).expect("parses");
        assert_eq!(payload.prompt, None);
        assert!(HookPayload::parse(b"").is_err());
        assert!(HookPayload::parse(b"[1]").is_err());
    }

    #[test]
    fn context_stays_within_its_budget_and_nothing_gives_no_answer() {
        let item =
            |content: &str| json!({"kind": "experience", "session_id": "s", "content": content});
        assert_eq!(context_answer(Event::UserPromptSubmit, &[], 4000), None);
        let items = vec![
            item(&"a".repeat(1500)),
            item(&"b".repeat(1500)),
            item(&"c".repeat(1500)),
        ];
        let answer = context_answer(Event::UserPromptSubmit, &items, 4000).expect("answer");
        assert_eq!(
            answer["hookSpecificOutput"]["hookEventName"],
            "UserPromptSubmit"
        );
        let context = answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .expect("text");
        assert!(context.chars().count() <= 4000);
        assert!(context.contains("bbbb") && !context.contains("cccc"));
        // One item over the budget is cut, never dropped.
        let cut = render_context(&[item(&"é".repeat(10_000))], 1000).expect("cut");
        assert_eq!(cut.chars().count(), 1000);
        assert!(cut.ends_with(CUT_MARK));
    }
}
