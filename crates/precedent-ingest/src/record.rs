//! The session record extraction derives: what a trajectory's code facts
//! are (files, symbols, errors, tests, commands, outcome) and the evidence
//! spans that back them, with their provenance. Stored as JSON in the
//! sessions table and served by inspection, so every field's serde name is
//! part of the stored format.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{OutcomeStatus, outcome};
use precedent_core::language::Language;

/// One frame of an error trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Frame {
    /// The file as the trace names it.
    pub file: String,
    /// The line, when the trace gives one.
    pub line: Option<u32>,
    /// The function / method, when the trace gives one.
    pub function: Option<String>,
}

/// One error: a traceback, compiler error, panic or test failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorRecord {
    /// The error type (`ValueError`, `E0308`, `panic`, `java.lang.NullPointerException`).
    #[serde(rename = "type")]
    pub error_type: String,
    /// The first line of the message.
    pub message: String,
    /// The frames, as ordered in the trace (bounded).
    pub frames: Vec<Frame>,
}

/// Final test outcomes seen in the session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TestsRecord {
    /// Tests whose last seen outcome is a failure.
    pub failing: Vec<String>,
    /// Tests whose last seen outcome is a pass.
    pub passing: Vec<String>,
    /// The counts the last test run's summary line gives (`8 passed`,
    /// `test result: ok. 3 passed; 1 failed`, `Ran 5 tests`), when it
    /// gives them: runs that name no test still say how many passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<TestCounts>,
}

/// How many tests a run's summary line says passed and failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TestCounts {
    /// Tests passed.
    pub passed: u64,
    /// Tests failed or in error.
    pub failed: u64,
}

/// A command the agent ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CommandRecord {
    /// The command text (capped).
    pub command: String,
    /// The exit code the following observation reports, if any.
    pub exit_code: Option<i32>,
    /// The message the command is in.
    pub message_index: usize,
}

/// How the session ended, from what the trajectory shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Outcome {
    /// The last agent message carries a diff, or the run's edits stand as
    /// its fix (it declared itself done, or its tests passed at the end).
    pub final_diff: bool,
    /// Verdict of the last test run, if any ran.
    pub tests_passed_at_end: Option<bool>,
    /// `resolved`, `failed` or `unknown`.
    pub status: OutcomeStatus,
}

impl Default for Outcome {
    fn default() -> Self {
        outcome::decide(outcome::OutcomeSignals::default())
    }
}

/// What an evidence span shows; stored and answered as `task`, `fix`,
/// `error` or `step`.
// A stored name this build does not know fails to parse, and the error
// names the expected ones: readers treat the record as unreadable, as any
// corrupt record; nothing panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// The task statement.
    Task,
    /// One hunk of a diff, with its file header.
    Fix,
    /// An error trace, compiler error, panic or test failure.
    Error,
    /// A command the agent ran, with the output that followed it.
    Step,
}

impl EvidenceKind {
    /// Every kind, in declaration order.
    pub const ALL: [EvidenceKind; 4] = [
        EvidenceKind::Task,
        EvidenceKind::Fix,
        EvidenceKind::Error,
        EvidenceKind::Step,
    ];

    /// The wire name (as stored and as the API answers it).
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceKind::Task => "task",
            EvidenceKind::Fix => "fix",
            EvidenceKind::Error => "error",
            EvidenceKind::Step => "step",
        }
    }
}

impl fmt::Display for EvidenceKind {
    /// The wire name; honours width and alignment (`{:<5}`).
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.pad(self.as_str())
    }
}

/// A span of a message that supports a fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Evidence {
    /// `task`, `fix`, `error` or `step`.
    pub kind: EvidenceKind,
    /// The evidence as shown (decoded from JSON, capped, for `step` with output).
    pub text: String,
    /// The message it came from.
    pub message_index: usize,
    /// Byte range in that message's content (always valid to slice with).
    pub byte_start: usize,
    /// End of the byte range.
    pub byte_end: usize,
    /// The file it is about, if known.
    pub file: Option<String>,
    /// Symbols it is about.
    pub symbols: Vec<String>,
}

/// Everything extracted from one session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SessionRecord {
    /// The task statement: the first user message, trimmed and capped.
    pub task: String,
    /// Dominant language of the changed / viewed files.
    pub language: Option<Language>,
    /// Paths the diffs change (new side; old side for deletions), in order.
    pub files_changed: Vec<String>,
    /// Per changed file, the git blob id of its content as the session
    /// left it, where a diff's `index OLD..NEW` line gave it (abbreviated
    /// hex): what a stale check compares the working tree with.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub file_blobs: std::collections::BTreeMap<String, String>,
    /// Innermost definitions enclosing changed lines, qualified where known.
    pub symbols_changed: Vec<String>,
    /// Identifiers referenced by added lines, named in prose, or defined in viewed code.
    pub symbols_referenced: Vec<String>,
    /// Error traces, deduplicated.
    pub errors: Vec<ErrorRecord>,
    /// Final test outcomes.
    pub tests: TestsRecord,
    /// Commands the agent ran.
    pub commands: Vec<CommandRecord>,
    /// How the session ended.
    pub outcome: Outcome,
    /// Spans supporting the facts.
    pub evidence: Vec<Evidence>,
    /// When the session's latest dated message was written, Unix ms, as
    /// its source dated it (a transcript's timestamps, a commit's time);
    /// absent when no message is dated, and in records of older stores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_at_ms: Option<i64>,
}

/// Something in a message that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Diagnostic {
    /// The message concerned.
    pub message_index: usize,
    /// What went wrong.
    pub message: String,
}
