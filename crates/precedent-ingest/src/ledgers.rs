//! The builder's small ledgers, each the owner of one kind of fact and its
//! caps: the evidence spans, the commands, the errors, the symbols
//! referenced, what written diffs show, the test outcomes, the votes for
//! the session's language.

use std::collections::{HashMap, HashSet};

use super::diff::{FileChange, FileDiff};
use super::testrun::{self, TestStatus};
use super::text::{TextView, truncate_to_bytes};
use super::toolcall::ToolCall;
use super::{
    CommandRecord, ErrorRecord, Evidence, MAX_COMMANDS, MAX_ERROR_EVIDENCE, MAX_ERRORS,
    MAX_EVIDENCE, MAX_EVIDENCE_TEXT_BYTES, MAX_FIX_EVIDENCE, MAX_LANGUAGE_MENTIONS,
    MAX_SYMBOLS_REFERENCED, MAX_TESTS_PER_STATUS, TestCounts, TestsRecord, UniqueList, mentions,
};
use precedent_core::language::Language;

/// The evidence spans of a session, by kind.
#[derive(Default, Clone)]
pub(super) struct EvidenceLedger {
    pub(super) task: Vec<Evidence>,
    pub(super) fix: Vec<Evidence>,
    /// The fix hunks seen (path and text): one shown again adds nothing.
    pub(super) fix_keys: HashSet<String>,
    pub(super) error: Vec<Evidence>,
    pub(super) step: Vec<Evidence>,
}

impl EvidenceLedger {
    /// Drops the fixes no selection keeps: only the latest are ever
    /// selected (the keys of the hunks seen stay).
    pub(super) fn keep_latest_fixes(&mut self) {
        Self::keep_latest(&mut self.fix);
    }

    /// The latest [`MAX_FIX_EVIDENCE`] of `fixes`.
    fn keep_latest(fixes: &mut Vec<Evidence>) {
        if fixes.len() > MAX_FIX_EVIDENCE {
            fixes.drain(..fixes.len() - MAX_FIX_EVIDENCE);
        }
    }

    /// Keeps the task, the latest fixes, the first errors and the latest
    /// steps within [`MAX_EVIDENCE`], in message order.
    pub(super) fn select(self) -> Vec<Evidence> {
        let EvidenceLedger {
            task,
            fix: mut fixes,
            error: mut errors,
            step: mut steps,
            ..
        } = self;
        let mut selected = task;
        Self::keep_latest(&mut fixes);
        errors.truncate(MAX_ERROR_EVIDENCE);
        selected.extend(fixes);
        selected.extend(errors);
        let room = MAX_EVIDENCE.saturating_sub(selected.len());
        if steps.len() > room {
            steps.drain(..steps.len() - room);
        }
        selected.extend(steps);
        selected.truncate(MAX_EVIDENCE);
        selected.sort_by_key(|evidence| (evidence.message_index, evidence.byte_start));
        for evidence in &mut selected {
            if evidence.text.len() > MAX_EVIDENCE_TEXT_BYTES * 2 {
                evidence.text =
                    truncate_to_bytes(&evidence.text, MAX_EVIDENCE_TEXT_BYTES * 2).to_string();
            }
        }
        selected
    }
}

/// The commands a session ran (at most [`MAX_COMMANDS`]), the one the
/// next observation answers, and whether an answer without an exit code
/// means success (the session's tools mark a failed result).
#[derive(Default, Clone)]
pub(super) struct CommandLedger {
    commands: Vec<CommandRecord>,
    /// (command index, step evidence index) of the previous agent message's last command.
    pending: Option<(usize, usize)>,
    /// Commands whose answer gave no exit code and was not marked failed.
    unmarked_answers: Vec<usize>,
    /// The session's tools mark a failed result (Claude Code's `is_error`,
    /// rendered with the error prefix): an unmarked answer is a success.
    tools_mark_failures: bool,
}

impl CommandLedger {
    /// A new agent message: the previous one's command is no longer the
    /// one the next observation answers.
    pub(super) fn start_agent_message(&mut self) {
        self.pending = None;
    }

    /// Whether [`MAX_COMMANDS`] are recorded: no more will be.
    pub(super) fn is_full(&self) -> bool {
        self.commands.len() >= MAX_COMMANDS
    }

    /// Records `command` of agent message `message_index`, whose `step`
    /// evidence is at that index, as the one the next observation
    /// answers; false (and nothing recorded) once [`MAX_COMMANDS`] are.
    pub(super) fn push(&mut self, command: String, message_index: usize, step: usize) -> bool {
        if self.is_full() {
            return false;
        }
        self.commands.push(CommandRecord {
            command,
            exit_code: None,
            message_index,
        });
        self.pending = Some((self.commands.len() - 1, step));
        true
    }

    /// The command the next observation answers.
    pub(super) fn pending_command(&self) -> Option<usize> {
        self.pending.map(|(command, _)| command)
    }

    /// Takes the command the next observation answers, and its step evidence.
    pub(super) fn take_pending(&mut self) -> Option<(usize, usize)> {
        self.pending.take()
    }

    /// The observation answering `command` gave `exit_code`; `marked`, it
    /// says the tool failed.
    pub(super) fn answer(&mut self, command: usize, exit_code: Option<i32>, marked: bool) {
        if let Some(record) = self.commands.get_mut(command) {
            record.exit_code = exit_code;
        }
        if exit_code.is_none() && !marked && self.unmarked_answers.len() < MAX_COMMANDS {
            self.unmarked_answers.push(command);
        }
    }

    /// A tool result reported an error for `command`: its exit code is 1
    /// unless the output gave one. Returns whether it was set.
    pub(super) fn fail_unless_known(&mut self, command: usize) -> bool {
        match self.commands.get_mut(command) {
            Some(record) if record.exit_code.is_none() => {
                record.exit_code = Some(1);
                true
            }
            _ => false,
        }
    }

    /// Notes the tools a message calls: Claude Code's own mark failed results.
    pub(super) fn see_tool_calls(&mut self, calls: &[ToolCall]) {
        self.tools_mark_failures |= calls
            .iter()
            .any(|call| MARKING_TOOLS.contains(&call.name.as_str()));
    }

    /// The commands of agent message `message_index`, the latest first.
    pub(super) fn latest_of_message(&self, message_index: usize) -> Vec<String> {
        self.commands
            .iter()
            .rev()
            .take_while(|command| command.message_index == message_index)
            .map(|command| command.command.clone())
            .collect()
    }

    /// Bytes the commands hold, roughly.
    pub(super) fn approx_bytes(&self) -> usize {
        self.commands
            .iter()
            .map(|command| command.command.len() + 32)
            .sum()
    }

    /// The record's commands: where the tools mark failed results, an
    /// unmarked answer without an exit code is the command's success.
    pub(super) fn into_records(self) -> Vec<CommandRecord> {
        let mut commands = self.commands;
        if self.tools_mark_failures {
            for index in self.unmarked_answers {
                if let Some(command) = commands.get_mut(index) {
                    command.exit_code.get_or_insert(0);
                }
            }
        }
        commands
    }
}

/// Claude Code's own tools (besides Bash): a session that calls them ran
/// in Claude Code, whose tool results say `is_error` when they failed.
const MARKING_TOOLS: &[&str] = &[
    "Read",
    "Edit",
    "MultiEdit",
    "Write",
    "Glob",
    "Grep",
    "TodoWrite",
    "NotebookEdit",
    "LS",
];

/// The errors a session showed, each once (by type, message and frames),
/// at most [`MAX_ERRORS`].
#[derive(Default, Clone)]
pub(super) struct ErrorLedger {
    errors: Vec<ErrorRecord>,
    /// The keys of the errors kept.
    keys: HashSet<String>,
}

impl ErrorLedger {
    /// Keeps `error` unless the cap is reached or the same error was kept
    /// before; answers the error kept.
    pub(super) fn add(&mut self, error: ErrorRecord) -> Option<&ErrorRecord> {
        if self.errors.len() >= MAX_ERRORS {
            return None;
        }
        let key = format!(
            "{}\u{0}{}\u{0}{:?}",
            error.error_type, error.message, error.frames
        );
        if !self.keys.insert(key) {
            return None;
        }
        self.errors.push(error);
        self.errors.last()
    }

    /// Errors kept.
    pub(super) fn len(&self) -> usize {
        self.errors.len()
    }

    /// The record's errors, in the order first seen.
    pub(super) fn into_records(self) -> Vec<ErrorRecord> {
        self.errors
    }
}

/// The symbols a session referenced, by where: its diffs, its task, the
/// agent's messages, the code it viewed; each source keeps at most
/// [`MAX_SYMBOLS_REFERENCED`], and so does their merge.
#[derive(Default, Clone)]
pub(super) struct ReferenceLedger {
    diffs: UniqueList,
    task: UniqueList,
    agent: UniqueList,
    code: UniqueList,
}

impl ReferenceLedger {
    /// A symbol a diff's hunk referenced.
    pub(super) fn add_from_diff(&mut self, symbol: &str) {
        self.diffs.push(symbol, MAX_SYMBOLS_REFERENCED);
    }

    /// A symbol the task named.
    pub(super) fn add_from_task(&mut self, symbol: &str) {
        self.task.push(symbol, MAX_SYMBOLS_REFERENCED);
    }

    /// A symbol an agent message named.
    pub(super) fn add_from_agent(&mut self, symbol: &str) {
        self.agent.push(symbol, MAX_SYMBOLS_REFERENCED);
    }

    /// A symbol code the session viewed defines.
    pub(super) fn add_from_code(&mut self, symbol: &str) {
        self.code.push(symbol, MAX_SYMBOLS_REFERENCED);
    }

    /// Whether viewed code can add no more symbols.
    pub(super) fn code_is_full(&self) -> bool {
        self.code.values.len() >= MAX_SYMBOLS_REFERENCED
    }

    /// The record's `symbols_referenced`: the diffs', then the task's, the
    /// agent's and the viewed code's, each once, at most
    /// [`MAX_SYMBOLS_REFERENCED`].
    pub(super) fn merged(&self) -> Vec<String> {
        let mut referenced = UniqueList::default();
        for source in [&self.diffs, &self.task, &self.agent, &self.code] {
            for symbol in &source.values {
                referenced.push(symbol, MAX_SYMBOLS_REFERENCED);
            }
        }
        referenced.values
    }
}

/// What the diffs written out (by the agent or a tool; not edits rendered
/// as diffs) show: the files they change, which of them were new (and
/// binary) and which existed, and the files of the last agent message's.
#[derive(Default, Clone)]
pub(super) struct WrittenDiffs {
    /// Files a written diff changed.
    files: HashSet<String>,
    /// Files a written diff shows as new (and none before as existing),
    /// and of them those shown as binary.
    added: HashSet<String>,
    binary: HashSet<String>,
    /// Files a written diff shows existed (changed, deleted, renamed),
    /// unless one showed them new before.
    existing: HashSet<String>,
    /// Files of the diffs written in the message being read.
    message_files: Vec<String>,
    /// Files of the diff the last agent message wrote.
    final_files: Vec<String>,
}

impl WrittenDiffs {
    /// A new message: no diff of it read yet.
    pub(super) fn start_message(&mut self) {
        self.message_files.clear();
    }

    /// The agent message read is the last one: its diffs' files are the
    /// final diff's.
    pub(super) fn end_agent_message(&mut self) {
        self.final_files = std::mem::take(&mut self.message_files);
    }

    /// What `file`, the diff of `path` written as `file_text`, shows of it:
    /// new (binary) or existing.
    pub(super) fn note_file(&mut self, path: &str, file: &FileDiff, file_text: &str) {
        let binary = file.change == FileChange::Binary;
        let added = file.change == FileChange::Added
            || (binary
                && (file_text.contains("\nnew file mode")
                    || file_text.contains("Binary files /dev/null ")));
        if added {
            if !self.existing.contains(path) {
                self.added.insert(path.to_string());
            }
            if binary {
                self.binary.insert(path.to_string());
            }
        } else if !self.added.contains(path) {
            self.existing.insert(path.to_string());
        }
        if let Some(old) = file.old_path.as_deref()
            && file.change == FileChange::Renamed
        {
            self.existing.insert(old.to_string());
        }
    }

    /// The files a written diff of the message being read changed.
    pub(super) fn note_paths(&mut self, paths: &[String]) {
        self.files.extend(paths.iter().cloned());
        self.message_files.extend(paths.iter().cloned());
    }

    /// Whether a written diff changed `path`.
    pub(super) fn changed(&self, path: &str) -> bool {
        self.files.contains(path)
    }

    /// Whether a written diff shows `path` as new.
    pub(super) fn is_added(&self, path: &str) -> bool {
        self.added.contains(path)
    }

    /// Whether a written diff shows `path` as a new binary file.
    pub(super) fn is_binary(&self, path: &str) -> bool {
        self.binary.contains(path)
    }

    /// Files a written diff shows existed.
    pub(super) fn existing(&self) -> &HashSet<String> {
        &self.existing
    }

    /// Files a written diff shows as new or as existing.
    pub(super) fn added_or_existing(&self) -> HashSet<String> {
        self.added.union(&self.existing).cloned().collect()
    }

    /// Files of the diff the last agent message wrote.
    pub(super) fn final_files(&self) -> &[String] {
        &self.final_files
    }
}

/// The tests a session ran and its last test run.
#[derive(Default, Clone)]
pub(super) struct TestLedger {
    /// Per test, when it was last seen (in order of sight) and its status then.
    status: HashMap<String, (usize, TestStatus)>,
    order: usize,
    last_run: Option<bool>,
    /// The message that showed the last test run.
    last_run_at: Option<usize>,
    /// The counts of the last test run's summary line.
    last_run_counts: Option<TestCounts>,
}

impl TestLedger {
    /// Reads the test outcomes and runs a view shows.
    pub(super) fn add(&mut self, message_index: usize, view: &TextView<'_>) {
        let observations = testrun::parse_test_observations(&view.text);
        for result in observations.results {
            self.order += 1;
            self.status
                .insert(result.test_id, (self.order, result.status));
        }
        if let Some(run) = observations.runs.last() {
            self.last_run = Some(run.passed);
            self.last_run_at = Some(message_index);
            let line = view.text.get(run.offset..run.end).unwrap_or("");
            let next = view
                .text
                .get(run.end..)
                .unwrap_or("")
                .trim_start_matches(['\r', '\n'])
                .lines()
                .next()
                .unwrap_or("");
            self.last_run_counts = testrun::run_counts(line, next)
                .map(|(passed, failed)| TestCounts { passed, failed });
        }
    }

    /// The verdict of the last test run, unless a file was edited in a
    /// later message (`last_edit_at`): then it is unknown.
    pub(super) fn passed_at_end(&self, last_edit_at: Option<usize>) -> Option<bool> {
        let run_at = self.last_run_at?;
        if last_edit_at.is_some_and(|edit_at| edit_at > run_at) {
            return None;
        }
        self.last_run
    }

    /// The record's tests: passing and failing, in the order last seen,
    /// and the last run's counts (the statuses are taken).
    pub(super) fn take_record(&mut self) -> TestsRecord {
        let mut tests: Vec<(String, (usize, TestStatus))> = self.status.drain().collect();
        tests.sort_by_key(|(_, (order, _))| *order);
        let mut record_tests = TestsRecord {
            last_run: self.last_run_counts,
            ..TestsRecord::default()
        };
        for (test_id, (_, status)) in tests {
            let list = match status {
                TestStatus::Passed => &mut record_tests.passing,
                TestStatus::Failed => &mut record_tests.failing,
            };
            if list.len() < MAX_TESTS_PER_STATUS {
                list.push(test_id);
            }
        }
        record_tests
    }
}

/// Votes for the session's language: the languages of the files it
/// changed, showed and named.
#[derive(Default, Clone)]
pub(super) struct LanguageVotes {
    /// Per language, its weight and the order of its first vote.
    votes: HashMap<Language, (usize, usize)>,
    /// File paths named in messages that voted.
    mentions: usize,
    order: usize,
}

impl LanguageVotes {
    pub(super) fn vote(&mut self, language: Language, weight: usize) {
        self.order += 1;
        let order = self.order;
        let entry = self.votes.entry(language).or_insert((0, order));
        entry.0 += weight;
    }

    /// Votes for the language of `path`, if it is code.
    pub(super) fn vote_path(&mut self, path: &str, weight: usize) {
        if let Some(language) = Language::from_path(path) {
            self.vote(language, weight);
        }
    }

    /// Votes for the languages of the file paths a message names, up to
    /// [`MAX_LANGUAGE_MENTIONS`] in the session.
    pub(super) fn vote_mentions(&mut self, content: &str) {
        if self.mentions < MAX_LANGUAGE_MENTIONS {
            for path in mentions::file_paths(content) {
                if self.mentions >= MAX_LANGUAGE_MENTIONS {
                    break;
                }
                self.mentions += 1;
                self.vote_path(&path, 1);
            }
        }
    }

    /// The language with the most weight, the earliest voted on a tie.
    pub(super) fn winner(&self) -> Option<Language> {
        self.votes
            .iter()
            .max_by_key(|(_, (weight, order))| (*weight, usize::MAX - *order))
            .map(|(language, _)| *language)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str) -> ToolCall {
        ToolCall {
            name: name.to_string(),
            arguments: serde_json::Map::new(),
            start: 0,
            end: 0,
        }
    }

    fn error(message: &str, line: u32) -> ErrorRecord {
        ErrorRecord {
            error_type: "ValueError".to_string(),
            message: message.to_string(),
            frames: vec![super::super::Frame {
                file: "config.py".to_string(),
                line: Some(line),
                function: Some("parse".to_string()),
            }],
        }
    }

    #[test]
    fn an_error_is_kept_once() {
        let mut errors = ErrorLedger::default();
        assert!(errors.add(error("empty", 3)).is_some());
        assert!(errors.add(error("empty", 3)).is_none());
        // Another line is another error.
        assert!(errors.add(error("empty", 4)).is_some());
        assert!(errors.add(error("empty", 4)).is_none());
        let records = errors.into_records();
        assert_eq!(records, [error("empty", 3), error("empty", 4)]);
    }

    #[test]
    fn errors_stop_at_their_cap() {
        let mut errors = ErrorLedger::default();
        for index in 0..MAX_ERRORS {
            assert!(errors.add(error(&format!("e{index}"), 1)).is_some());
        }
        assert!(errors.add(error("over", 1)).is_none());
        assert_eq!(errors.len(), MAX_ERRORS);
        assert_eq!(errors.into_records().len(), MAX_ERRORS);
    }

    #[test]
    fn references_merge_diffs_task_agent_code_each_once() {
        let mut references = ReferenceLedger::default();
        references.add_from_code("load");
        references.add_from_agent("parse");
        references.add_from_agent("load");
        references.add_from_task("Config");
        references.add_from_task("parse");
        references.add_from_diff("read_file");
        assert_eq!(
            references.merged(),
            ["read_file", "Config", "parse", "load"]
        );
    }

    #[test]
    fn merged_references_stop_at_their_cap() {
        let mut references = ReferenceLedger::default();
        for index in 0..MAX_SYMBOLS_REFERENCED + 5 {
            references.add_from_code(&format!("code_{index}"));
        }
        assert!(references.code_is_full());
        references.add_from_task("task_symbol");
        let merged = references.merged();
        assert_eq!(merged.len(), MAX_SYMBOLS_REFERENCED);
        assert_eq!(merged.first().map(String::as_str), Some("task_symbol"));
        assert!(!merged.contains(&format!("code_{}", MAX_SYMBOLS_REFERENCED - 1)));
    }

    fn note_diffs(written: &mut WrittenDiffs, text: &str) {
        let parsed = super::super::diff::parse_diffs(text);
        for file in &parsed.files {
            let path = file.path().unwrap_or("");
            written.note_file(path, file, text.get(file.start..file.end).unwrap_or(""));
        }
    }

    #[test]
    fn a_file_shown_existing_first_is_never_new() {
        let mut written = WrittenDiffs::default();
        note_diffs(
            &mut written,
            "--- a/lib.py\n+++ b/lib.py\n@@ -1 +1 @@\n-a\n+b\n",
        );
        for path in ["lib.py", "new.py"] {
            let text = format!(
                "diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+b\n"
            );
            note_diffs(&mut written, &text);
        }
        note_diffs(
            &mut written,
            "--- a/new.py\n+++ b/new.py\n@@ -1 +1 @@\n-c\n+d\n",
        );
        assert!(!written.is_added("lib.py"));
        assert!(written.existing().contains("lib.py"));
        // Shown new first, it stays new and not existing.
        assert!(written.is_added("new.py"));
        assert!(!written.existing().contains("new.py"));
        assert_eq!(written.added_or_existing().len(), 2);
    }

    #[test]
    fn the_final_files_are_the_last_agent_messages() {
        let mut written = WrittenDiffs::default();
        written.start_message();
        written.note_paths(&["a.py".to_string()]);
        written.end_agent_message();
        written.start_message();
        written.note_paths(&["b.py".to_string()]);
        assert_eq!(written.final_files(), ["a.py"]);
        written.end_agent_message();
        assert_eq!(written.final_files(), ["b.py"]);
        assert!(written.changed("a.py") && written.changed("b.py"));
    }

    #[test]
    fn commands_stop_at_their_cap() {
        let mut commands = CommandLedger::default();
        for index in 0..MAX_COMMANDS {
            assert!(commands.push(format!("echo {index}"), 1, index));
        }
        assert!(!commands.push("echo over".to_string(), 2, MAX_COMMANDS));
        // The last command kept is still the one answered.
        assert_eq!(
            commands.take_pending(),
            Some((MAX_COMMANDS - 1, MAX_COMMANDS - 1))
        );
        let records = commands.into_records();
        assert_eq!(records.len(), MAX_COMMANDS);
        assert!(records.iter().all(|record| record.message_index == 1));
    }

    #[test]
    fn an_unmarked_answer_is_a_success_only_where_tools_mark_failures() {
        let answered = |marking: bool| {
            let mut commands = CommandLedger::default();
            if marking {
                commands.see_tool_calls(&[call("Read")]);
            }
            commands.push("ls".to_string(), 1, 0);
            commands.push("make".to_string(), 1, 1);
            commands.push("cargo test".to_string(), 3, 2);
            commands.answer(0, None, false);
            commands.answer(1, None, true);
            commands.answer(2, Some(101), false);
            commands
                .into_records()
                .into_iter()
                .map(|record| record.exit_code)
                .collect::<Vec<_>>()
        };
        assert_eq!(answered(true), [Some(0), None, Some(101)]);
        assert_eq!(answered(false), [None, None, Some(101)]);
    }
}
