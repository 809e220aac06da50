//! Ingest: turns the raw messages of a coding agent's trajectory into
//! structured code facts — the task, the files and symbols a diff changed, the
//! symbols referenced, error traces, test outcomes, commands with exit codes,
//! the session outcome, and evidence spans pointing back into the messages.
//!
//! The module is pure: text in, a [`SessionRecord`] and [`Diagnostic`]s out;
//! no IO, no storage, no index. It never panics and its work is bounded on any
//! input (caps on frames, evidence, parsed fragment sizes; linear scans).
//! Storing or indexing the record is left to the caller.
//!
//! Layout: [`text`] (lines, fences, JSON string views), [`diff`] (unified
//! diffs), [`symbols`] (tree-sitter tags, enclosing definitions), [`trace`]
//! (error traces), [`testrun`] (test outcomes), [`command`] (commands, exit
//! codes), [`mentions`] (paths, identifiers, code views), [`outcome`],
//! [`toolcall`] (tool calls and results of any framework), [`edits`] (edit
//! operations rendered as diffs), [`lint`] (type-checker and linter
//! diagnostics), [`task`] (the issue inside a prompt wrapper).

/// What a session changed: the builder's reading of diffs and edits.
mod changes;
/// The clock extraction's time limits read, passed in by the caller.
mod clock;
/// Commands the agent ran and the exit codes observations report.
mod command;
/// Unified and git diffs: files, hunks, changed lines.
mod diff;
/// Edit operations (editor tools, SEARCH/REPLACE, apply_patch) as diffs.
mod edits;
/// What the record keeps at the end of the session.
mod finish;
/// A session's extraction, resumable: an Add extracts only its new messages.
pub mod incremental;
/// The builder's ledgers: evidence, commands, errors, references, written
/// diffs, tests, language votes.
mod ledgers;
/// Type-checker and linter diagnostics as error records.
mod lint;
/// Paths, test ids, identifiers and code views mentioned in text.
pub mod mentions;
/// The session outcome from its final diff, tests and errors.
mod outcome;
/// The repository root of a session, and paths relative to it.
pub mod repo;
/// Scratch files by what the repository is.
mod scratch;

mod record;
/// Tree-sitter tags and the definitions enclosing changed lines.
pub mod symbols;
/// The issue inside a task prompt's wrapper.
mod task;
/// Test outcomes and run verdicts in tool output.
mod testrun;
/// Lines, fences, truncation and decoded JSON views of a message.
pub mod text;
/// Tool calls and tool results in a message, whatever their shape.
mod toolcall;
/// Error traces of Python, pytest, Rust, Go, Java and JavaScript.
pub mod trace;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use precedent_core::domain::Role;
use precedent_core::language::{Grammar, Language};

pub use self::clock::Clock;
pub use self::edits::same_file;
use self::ledgers::{
    CommandLedger, ErrorLedger, EvidenceLedger, LanguageVotes, ReferenceLedger, TestLedger,
    WrittenDiffs,
};
pub use self::outcome::OutcomeStatus;
pub use self::record::{
    CommandRecord, Diagnostic, ErrorRecord, Evidence, EvidenceKind, Frame, Outcome, SessionRecord,
    TestCounts, TestsRecord,
};
use self::text::{TextView, head_and_tail, truncate_to_bytes, truncate_to_chars};

/// The version of extraction: bump it with any change that changes the
/// records `extract_session` gives. Stored records of an older version are
/// derived again from their messages (by the service, at start-up).
pub const EXTRACTOR_VERSION: i64 = 7;
/// Characters kept of the task statement.
pub const MAX_TASK_CHARS: usize = 4_000;
/// Evidence items kept per session.
pub const MAX_EVIDENCE: usize = 500;
/// `fix` evidence items kept per session (the latest diffs first).
const MAX_FIX_EVIDENCE: usize = 300;
/// `error` evidence items kept per session.
const MAX_ERROR_EVIDENCE: usize = 100;
/// Entries kept in `symbols_referenced`.
pub const MAX_SYMBOLS_REFERENCED: usize = 200;
/// Entries kept in `symbols_changed`.
const MAX_SYMBOLS_CHANGED: usize = 500;
/// Entries kept in `files_changed`.
const MAX_FILES_CHANGED: usize = 1_000;
/// Error records kept per session.
const MAX_ERRORS: usize = 200;
/// Test ids kept per status.
const MAX_TESTS_PER_STATUS: usize = 300;
/// Command records kept per session.
const MAX_COMMANDS: usize = 1_000;
/// Diagnostics kept per session.
const MAX_DIAGNOSTICS: usize = 100;
/// Bytes of observed code (file views, code blocks) parsed by tree-sitter per
/// session; beyond it, the cheaper line scan finds their definitions.
const MAX_SNIPPET_PARSE_BYTES: usize = 32 * 1024;
/// Time tree-sitter may spend on observed code per session.
const MAX_SNIPPET_PARSE_TIME: Duration = Duration::from_millis(50);
/// Bytes of observed code scanned for definitions per session.
const MAX_SNIPPET_SCAN_BYTES: usize = 4 * 1024 * 1024;
/// Bytes kept of one evidence text.
const MAX_EVIDENCE_TEXT_BYTES: usize = 6_000;
/// Bytes of command output kept in a `step` evidence.
const MAX_STEP_OUTPUT_BYTES: usize = 1_500;
/// Symbols attached to one evidence item.
const MAX_SYMBOLS_PER_EVIDENCE: usize = 20;
/// Mentioned paths counted for the language vote per session.
const MAX_LANGUAGE_MENTIONS: usize = 400;

/// One message of a session, as the caller has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestMessage<'a> {
    /// Position of the message in the session (0-based).
    pub index: usize,
    /// Who wrote it.
    pub role: Role,
    /// The raw content.
    pub content: &'a str,
    /// When it was written, Unix ms, if its source said.
    pub timestamp_ms: Option<i64>,
}

impl<'a> IngestMessage<'a> {
    /// Numbers `(role, content)` pairs in session order (undated).
    pub fn in_order(messages: impl IntoIterator<Item = (Role, &'a str)>) -> Vec<IngestMessage<'a>> {
        IngestMessage::in_order_dated(
            messages
                .into_iter()
                .map(|(role, content)| (role, content, None)),
        )
    }

    /// Numbers `(role, content, timestamp_ms)` triples in session order.
    pub fn in_order_dated(
        messages: impl IntoIterator<Item = (Role, &'a str, Option<i64>)>,
    ) -> Vec<IngestMessage<'a>> {
        messages
            .into_iter()
            .enumerate()
            .map(|(index, (role, content, timestamp_ms))| IngestMessage {
                index,
                role,
                content,
                timestamp_ms,
            })
            .collect()
    }
}

/// Compiles every tag query and every extraction pattern now, a one-time
/// cost (a few hundred milliseconds, most of it C++'s query), so that the
/// first extraction does not pay it. Answers the error of each query or
/// pattern set that does not compile.
pub fn warm_up() -> Vec<String> {
    let mut errors: Vec<String> = Grammar::ALL
        .iter()
        .filter_map(|grammar| symbols::check_query(*grammar).err())
        .collect();
    for (module, compiled) in [
        ("symbols", symbols::warm_up()),
        ("command", command::warm_up()),
        ("lint", lint::warm_up()),
        ("mentions", mentions::warm_up()),
        ("testrun", testrun::warm_up()),
        ("trace", trace::warm_up()),
    ] {
        if !compiled {
            errors.push(format!("a pattern of ingest::{module} does not compile"));
        }
    }
    errors
}

/// Extracts the session record from every message of a session, in order;
/// its time limits read `clock`.
pub fn extract_session(
    messages: &[IngestMessage<'_>],
    clock: Clock,
) -> (SessionRecord, Vec<Diagnostic>) {
    let mut builder = SessionBuilder::for_session(clock);
    let task_position = messages
        .iter()
        .position(|message| message.role == Role::User && !task::is_control(message.content));
    for position in 0..messages.len() {
        builder.add_message(messages, position, task_position == Some(position));
    }
    builder.finish()
}

/// Pushes `value` unless present (per `seen`) or the cap is reached.
fn push_unique(
    values: &mut Vec<String>,
    seen: &mut HashSet<String>,
    value: &str,
    cap: usize,
) -> bool {
    if values.len() >= cap || value.is_empty() || seen.contains(value) {
        return false;
    }
    seen.insert(value.to_string());
    values.push(value.to_string());
    true
}

/// A list of unique strings with a cap.
#[derive(Default, Clone)]
struct UniqueList {
    values: Vec<String>,
    seen: HashSet<String>,
}

impl UniqueList {
    fn push(&mut self, value: &str, cap: usize) -> bool {
        push_unique(&mut self.values, &mut self.seen, value, cap)
    }
}

/// Accumulates facts message by message (cloned to keep a session's state,
/// see [`incremental`]).
#[derive(Default, Clone)]
struct SessionBuilder {
    task: String,
    /// The latest time a message of the session says it was written.
    last_message_at_ms: Option<i64>,
    files_changed: UniqueList,
    symbols_changed: UniqueList,
    references: ReferenceLedger,
    errors: ErrorLedger,
    tests: TestLedger,
    /// Per file edit operations changed, the last agent message whose edit
    /// changed it (an edit the tool refused does not count; a diff written
    /// out shows changes, it does not make them).
    last_edit_at: HashMap<String, usize>,
    /// Files the edit operations of the last agent message changed, and
    /// that message, until the next observation says whether the tool
    /// applied them (no observation: applied).
    unsettled_edits: Option<(usize, Vec<String>)>,
    commands: CommandLedger,
    evidence: EvidenceLedger,
    languages: LanguageVotes,
    snippet_bytes_scanned: usize,
    /// Tree-sitter allowance for diff hunks.
    hunk_parse_budget: symbols::ParseBudget,
    /// Tree-sitter allowance for observed code.
    snippet_parse_budget: symbols::ParseBudget,
    last_agent_message_has_diff: bool,
    /// Whether the last agent message's diff edits a file that existed
    /// (not only new files: a run that only adds a reproduction script has
    /// not fixed anything).
    last_agent_diff_edits_existing: bool,
    /// That diff came only from edit operations (none written as a diff).
    last_agent_diff_from_edits_only: bool,
    /// Files that edit operations changed.
    files_from_edits: HashSet<String>,
    /// What the diffs written out (by the agent or a tool) show.
    written_diffs: WrittenDiffs,
    /// Set by `add_diffs` for the message being read.
    message_diff_edits_existing: bool,
    last_message_has_error: bool,
    last_message_failed_command: bool,
    diagnostics: Vec<Diagnostic>,
    /// Edit operations of the session, rendered as diffs.
    edits: edits::Tracker,
    /// The files each changed symbol was found in (to drop scratch files' symbols).
    symbol_files: HashMap<String, Vec<String>>,
    /// Per changed file, the git blob id of its content after the last
    /// diff that showed one (`index OLD..NEW`).
    file_blobs: std::collections::BTreeMap<String, String>,
    /// Files edits changed outside the repository root.
    outside_files: HashSet<String>,
    /// Replacements of the last agent message whose diff named no changed
    /// definition (the file's text unknown around them): path, old, new.
    blind_replacements: Vec<(String, String, String)>,
}

impl SessionBuilder {
    /// The builder of a new session, with its parse budgets and edit
    /// tracker timed by `clock`.
    fn for_session(clock: Clock) -> SessionBuilder {
        SessionBuilder {
            hunk_parse_budget: symbols::ParseBudget::for_hunks(clock),
            snippet_parse_budget: symbols::ParseBudget::new(
                MAX_SNIPPET_PARSE_BYTES,
                MAX_SNIPPET_PARSE_TIME,
                clock,
            ),
            edits: edits::Tracker::new(clock),
            ..SessionBuilder::default()
        }
    }

    fn diagnose(&mut self, message_index: usize, message: String) {
        if self.diagnostics.len() < MAX_DIAGNOSTICS {
            self.diagnostics.push(Diagnostic {
                message_index,
                message,
            });
        }
    }

    fn add_message(&mut self, messages: &[IngestMessage<'_>], position: usize, is_task: bool) {
        let Some(message) = messages.get(position) else {
            return;
        };
        let content = message.content;
        let message_index = message.index;
        let is_agent = message.role == Role::Assistant;
        // `None` orders below any time: an undated message changes nothing.
        self.last_message_at_ms = self.last_message_at_ms.max(message.timestamp_ms);

        if !is_agent
            && self.edits.root().is_none()
            && let Some(cwd) = repo::environment_cwd(content)
        {
            // The transcript's working directory, on whichever user message
            // the importer put it (a `/clear` line may come first).
            self.edits.set_root(cwd);
        }
        if !is_agent && let Some(directory) = repo::environment_directory(content) {
            self.edits.set_directory(directory);
        }
        if is_task {
            self.add_task(message);
        }
        let tool_calls = toolcall::parse(content);
        self.commands.see_tool_calls(&tool_calls.calls);
        for problem in &tool_calls.problems {
            self.diagnose(message_index, problem.clone());
        }
        if is_agent {
            // The tracker takes the previous edits as applied, too.
            self.settle_edits(false);
        } else {
            let refused_before = self.edits.num_refused();
            let answered = self.commands.pending_command();
            self.attach_observation(message);
            self.add_tool_results(answered, &tool_calls.results);
            if is_task {
                self.edits.task(content);
            } else {
                self.edits.observation(content);
                self.definitions_from_edit_snippet(content);
            }
            self.settle_edits(self.edits.num_refused() > refused_before);
        }

        let views = text::message_views(content);
        let mut message_has_diff = false;
        let mut message_has_error = false;
        self.message_diff_edits_existing = false;
        self.written_diffs.start_message();
        for view in &views {
            message_has_diff |= self.add_diffs(message_index, content, view);
            message_has_error |=
                self.add_errors(message_index, content, view, !is_agent && !is_task);
            if !is_task {
                self.tests.add(message_index, view);
            }
            if !is_agent && !is_task {
                self.add_code_snippets(view);
            }
        }
        if is_agent {
            self.add_commands(message_index, content);
            let written_diff = message_has_diff;
            message_has_diff |= self.add_edits(message_index, content, &tool_calls.calls);
            self.last_agent_message_has_diff = message_has_diff;
            self.last_agent_diff_from_edits_only = message_has_diff && !written_diff;
            self.written_diffs.end_agent_message();
            self.last_agent_diff_edits_existing = self.message_diff_edits_existing;
            if content.trim_start().starts_with('{') && text::json_spans(content).is_empty() {
                self.diagnose(
                    message_index,
                    "agent message looks like JSON but did not parse".to_string(),
                );
            }
            for symbol in mentions::identifiers(content) {
                self.references.add_from_agent(&symbol);
            }
            for symbol in mentions::json_symbol_fields(content) {
                self.references.add_from_agent(&symbol);
            }
        }

        self.languages.vote_mentions(content);
        self.last_message_has_error = message_has_error;
        if is_agent {
            self.last_message_failed_command = false;
        }
    }

    fn add_task(&mut self, message: &IngestMessage<'_>) {
        let issue = task::issue_range(message.content);
        if let Some(root) = &issue.root {
            self.edits.set_root(root);
        }
        for problem in &issue.problems {
            self.diagnose(message.index, problem.clone());
        }
        // A decoded JSON field: its span is the whole message.
        let content = match &issue.text {
            Some(text) => text.as_str(),
            None => message.content.get(issue.start..issue.end).unwrap_or(""),
        };
        let trimmed_start = if issue.text.is_some() {
            0
        } else {
            issue.start + content.len() - content.trim_start().len()
        };
        let trimmed = content.trim();
        let task = truncate_to_chars(trimmed, MAX_TASK_CHARS);
        self.task = task.to_string();
        if task.is_empty() {
            return;
        }
        let identifiers = mentions::identifiers(content);
        for symbol in &identifiers {
            self.references.add_from_task(symbol);
        }
        let symbols: Vec<String> = identifiers
            .into_iter()
            .take(MAX_SYMBOLS_PER_EVIDENCE)
            .collect();
        self.evidence.task.push(Evidence {
            kind: EvidenceKind::Task,
            text: task.to_string(),
            message_index: message.index,
            byte_start: trimmed_start,
            byte_end: if issue.text.is_some() {
                message.content.len()
            } else {
                trimmed_start + task.len()
            },
            file: preferred_path(mentions::file_paths(task)),
            symbols,
        });
    }

    /// An observation after an agent message: exit code and output of its last command.
    fn attach_observation(&mut self, message: &IngestMessage<'_>) {
        let Some((command_index, step_index)) = self.commands.take_pending() else {
            return;
        };
        let exit_code = command::parse_exit_code(message.content);
        let marked = message
            .content
            .trim_start()
            .starts_with(precedent_core::tool::render::ERROR_RESULT_PREFIX);
        self.commands.answer(command_index, exit_code, marked);
        self.last_message_failed_command = exit_code.is_some_and(|code| code != 0);
        if let Some(evidence) = self.evidence.step.get_mut(step_index) {
            let output = head_and_tail(message.content.trim(), MAX_STEP_OUTPUT_BYTES);
            evidence.text.push('\n');
            evidence.text.push_str(&output);
        }
    }

    fn add_commands(&mut self, message_index: usize, content: &str) {
        self.commands.start_agent_message();
        if self.commands.is_full() {
            return;
        }
        for parsed in command::parse_commands(content) {
            let step = Evidence {
                kind: EvidenceKind::Step,
                text: format!("$ {}", truncate_to_bytes(&parsed.command, 500)),
                message_index,
                byte_start: parsed.start,
                byte_end: parsed.end,
                file: mentions::file_paths(&parsed.command).into_iter().next(),
                symbols: Vec::new(),
            };
            if !self
                .commands
                .push(parsed.command, message_index, self.evidence.step.len())
            {
                break;
            }
            self.evidence.step.push(step);
        }
    }

    /// An error reported by a tool result is the exit code of the command
    /// it answers when the output gives none.
    fn add_tool_results(&mut self, answered: Option<usize>, results: &[toolcall::ToolResult]) {
        let failed = results.iter().any(|result| result.is_error);
        if failed
            && let Some(command) = answered
            && self.commands.fail_unless_known(command)
        {
            self.last_message_failed_command = true;
        }
        for result in results {
            self.edits.observation(&result.text);
        }
    }

    /// Returns whether the view had at least one error; the frames of an
    /// `observed` one (a tool's answer) tell the edit tracker which
    /// function ran each line.
    fn add_errors(
        &mut self,
        message_index: usize,
        content: &str,
        view: &TextView<'_>,
        observed: bool,
    ) -> bool {
        let mut parsed = trace::parse_errors(&view.text);
        parsed.extend(lint::parse_diagnostics(&view.text));
        let any = !parsed.is_empty();
        for error in parsed {
            if observed {
                for frame in &error.record.frames {
                    if let (Some(line), Some(function)) = (frame.line, &frame.function)
                        && Language::from_path(&frame.file) == Some(Language::Python)
                    {
                        self.edits.frame_seen(&frame.file, line as usize, function);
                    }
                }
            }
            if error.record.error_type == "Traceback" && error.record.frames.is_empty() {
                self.diagnose(
                    message_index,
                    "traceback without frames or exception line".to_string(),
                );
            }
            let Some(record) = self.errors.add(error.record) else {
                continue;
            };
            let (byte_start, byte_end) = view.raw_range(content, error.start, error.end);
            let error_text = view.text.get(error.start..error.end).unwrap_or("");
            let mut symbols = UniqueList::default();
            for frame in record.frames.iter().rev() {
                if let Some(function) = &frame.function {
                    symbols.push(function, MAX_SYMBOLS_PER_EVIDENCE);
                }
            }
            let file = record
                .frames
                .iter()
                .rev()
                .find(|frame| !frame.file.is_empty())
                .map(|frame| frame.file.clone());
            self.evidence.error.push(Evidence {
                kind: EvidenceKind::Error,
                text: head_and_tail(error_text, MAX_EVIDENCE_TEXT_BYTES).into_owned(),
                message_index,
                byte_start,
                byte_end,
                file,
                symbols: symbols.values,
            });
        }
        any
    }

    fn add_code_snippets(&mut self, view: &TextView<'_>) {
        if self.references.code_is_full() || self.snippet_bytes_scanned >= MAX_SNIPPET_SCAN_BYTES {
            return;
        }
        for snippet in mentions::code_snippets(&view.text) {
            self.snippet_bytes_scanned += snippet.code.len();
            if let Some(path) = &snippet.path {
                self.languages.vote_path(path, 1);
            }
            let names = symbols::code_definitions(
                snippet.grammar,
                &snippet.code,
                64,
                &mut self.snippet_parse_budget,
            );
            for name in names {
                self.references.add_from_code(&name);
            }
            if self.snippet_bytes_scanned >= MAX_SNIPPET_SCAN_BYTES {
                break;
            }
        }
    }
}

/// The first project-looking path (relative, not in site-packages or
/// node_modules), else the first path.
fn preferred_path(paths: Vec<String>) -> Option<String> {
    let is_project = |path: &&String| {
        !path.starts_with('/')
            && !path.starts_with('~')
            && !path.contains("site-packages")
            && !path.contains("node_modules")
            && !path.contains(":\\")
    };
    paths
        .iter()
        .find(is_project)
        .cloned()
        .or_else(|| paths.into_iter().next())
}

#[cfg(test)]
mod tests;
