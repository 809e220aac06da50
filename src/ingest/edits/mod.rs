//! Edits an agent made without writing a diff, turned into unified diffs
//! (rendered with `similar`) so that the diff path extracts their files and
//! enclosing definitions like any other change:
//!
//! - file-editor tool calls: `str_replace_editor` / OpenHands' file editor
//!   (`create`, `str_replace`, `insert`, `undo_edit`), Claude Code's `Edit`,
//!   `MultiEdit`, `Write` and `NotebookEdit`, and `apply_patch` calls;
//! - text formats: aider's SEARCH/REPLACE blocks and whole-file edits
//!   ([`aider`]), `*** Begin Patch` patches ([`apply_patch`]).
//!
//! [`Tracker`] follows one session: what the observations showed of each file
//! ([`workspace`]), the edits and the files they created or removed (scratch
//! files), and whether the run declared itself done (`submit` / `finish`
//! calls, aider's "Applied edit to" lines).
//!
//! Pure and bounded like the rest of ingest: caps on edits per message, bytes
//! diffed per edit, files and bytes remembered.

pub mod aider;
pub mod apply_patch;
pub mod outline;
pub mod render;
pub mod windowed;
pub mod workspace;

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::repo::{self, Placed};
use super::text::{contains_str, lines_with_offsets};
use super::toolcall::ToolCall;
use crate::tool::{self, ToolKind};

pub use self::render::Change;
pub use self::workspace::RenderedEdit;

/// Edits read per message.
const MAX_EDITS_PER_MESSAGE: usize = 64;
/// Lines of one observation read as a numbered file view.
const MAX_VIEW_LINES: usize = 20_000;

/// One edit operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditOp {
    /// The whole file's new text (`create`, `Write`, an added file);
    /// `create` when the tool says the file is new.
    Write {
        /// The new text.
        content: String,
        /// The tool created the file.
        create: bool,
    },
    /// Replace `old` by `new` (every occurrence when `all`).
    Replace {
        /// The text replaced.
        old: String,
        /// The replacement.
        new: String,
        /// Replace every occurrence.
        all: bool,
    },
    /// Insert `text` after line `after_line` (0 = at the top).
    Insert {
        /// The line after which the text goes.
        after_line: usize,
        /// The text inserted.
        text: String,
    },
    /// Replace lines `first..=last` by `text` (SWE-agent's `edit 12:14`).
    ReplaceLines {
        /// The first line replaced (1-based).
        first: usize,
        /// The last line replaced (`first - 1` inserts before `first`).
        last: usize,
        /// The new lines.
        text: String,
    },
    /// Revert the last edit of the file.
    Undo,
    /// Remove the file.
    Delete,
}

/// An edit of one file, with the byte range of the message it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEdit {
    /// The file, as the agent named it (normalized by [`Tracker`]).
    pub path: String,
    /// What is done to it.
    pub op: EditOp,
    /// Byte offset in the message where the edit starts.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

/// The edits one tool call makes (none for a call that only reads).
pub fn edits_of_call(call: &ToolCall, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let path = call.string(&tool::PATH_ARGUMENTS).unwrap_or("");
    match call.kind() {
        Some(ToolKind::Editor) => editor_edits(call, path, problems),
        Some(ToolKind::Patch) => patch_call_edits(call, problems),
        _ if path.is_empty() => Vec::new(),
        Some(ToolKind::Replace) => replace_edits(call, path, problems),
        Some(ToolKind::MultiReplace) => multi_replace_edits(call, path, problems),
        Some(ToolKind::Write) => vec![edit_at(
            call,
            path,
            EditOp::Write {
                content: string_argument(call, &["content", "file_text", "text"]),
                create: false,
            },
        )],
        Some(ToolKind::NotebookEdit) => vec![notebook_edit(call, path)],
        _ => Vec::new(),
    }
}

/// An edit of `path` that spans the whole call.
fn edit_at(call: &ToolCall, path: &str, op: EditOp) -> FileEdit {
    FileEdit {
        path: path.to_string(),
        op,
        start: call.start,
        end: call.end,
    }
}

/// The string argument under the first of `keys` that holds one, or "".
fn string_argument(call: &ToolCall, keys: &[&str]) -> String {
    call.string(keys).map(str::to_string).unwrap_or_default()
}

/// A file editor's edit, by its `command`.
fn editor_edits(call: &ToolCall, path: &str, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let command = call.string(&["command"]).unwrap_or("");
    if path.is_empty() {
        if command != "view" {
            problems.push(format!("{} {command} without a path: skipped", call.name));
        }
        return Vec::new();
    }
    match command {
        "create" | "write" => vec![edit_at(
            call,
            path,
            EditOp::Write {
                content: string_argument(call, &["file_text", "content"]),
                create: true,
            },
        )],
        "str_replace" if call.string(&["old_str"]).is_none() => {
            problems.push(format!(
                "{} str_replace of {path} without old_str: skipped",
                call.name
            ));
            Vec::new()
        }
        "str_replace" => vec![edit_at(
            call,
            path,
            EditOp::Replace {
                old: string_argument(call, &["old_str"]),
                new: string_argument(call, &["new_str"]),
                all: false,
            },
        )],
        "insert" => {
            let after_line = match call.arguments.get("insert_line") {
                Some(Value::Number(number)) => number.as_u64(),
                Some(Value::String(text)) => text.trim().parse().ok(),
                _ => None,
            };
            match after_line {
                Some(line) => vec![edit_at(
                    call,
                    path,
                    EditOp::Insert {
                        after_line: usize::try_from(line).unwrap_or(usize::MAX / 2),
                        text: string_argument(call, &["new_str", "text"]),
                    },
                )],
                None => {
                    problems.push(format!("insert into {path} without insert_line: skipped"));
                    Vec::new()
                }
            }
        }
        "undo_edit" => vec![edit_at(call, path, EditOp::Undo)],
        _ => Vec::new(),
    }
}

/// Claude Code's `Edit`: one replacement.
fn replace_edits(call: &ToolCall, path: &str, problems: &mut Vec<String>) -> Vec<FileEdit> {
    if let Some(missing) = ["old_string", "new_string"]
        .into_iter()
        .find(|key| call.string(&[key]).is_none())
    {
        problems.push(format!("Edit of {path} without {missing}: skipped"));
        return Vec::new();
    }
    vec![edit_at(
        call,
        path,
        EditOp::Replace {
            old: string_argument(call, &["old_string"]),
            new: string_argument(call, &["new_string"]),
            all: call
                .arguments
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        },
    )]
}

/// `MultiEdit`: a replacement per item of its `edits`.
fn multi_replace_edits(call: &ToolCall, path: &str, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let Some(Value::Array(items)) = call.arguments.get("edits") else {
        problems.push(format!(
            "MultiEdit of {path} without an edits list: skipped"
        ));
        return Vec::new();
    };
    items
        .iter()
        .take(MAX_EDITS_PER_MESSAGE)
        .filter_map(|item| {
            let old = item.get("old_string").and_then(Value::as_str)?;
            let new = item.get("new_string").and_then(Value::as_str).unwrap_or("");
            Some(edit_at(
                call,
                path,
                EditOp::Replace {
                    old: old.to_string(),
                    new: new.to_string(),
                    all: item
                        .get("replace_all")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                },
            ))
        })
        .collect()
}

/// `NotebookEdit`: the cell's new source, or its removal.
fn notebook_edit(call: &ToolCall, path: &str) -> FileEdit {
    let source = string_argument(call, &["new_source"]);
    let mode = call.string(&["edit_mode"]).unwrap_or("replace");
    let op = if mode == "delete" {
        EditOp::Replace {
            old: source,
            new: String::new(),
            all: false,
        }
    } else {
        // The cell's old source is not in the call: its new source is the change.
        EditOp::Insert {
            after_line: 0,
            text: source,
        }
    };
    edit_at(call, path, op)
}

/// `apply_patch`: the edits of its patch, each spanning the call.
fn patch_call_edits(call: &ToolCall, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let text = call
        .string(&tool::PATCH_ARGUMENTS)
        .map(str::to_string)
        .or_else(|| {
            call.arguments
                .get("cmd")
                .and_then(Value::as_array)
                .and_then(|parts| parts.last())
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default();
    apply_patch::patch_edits(&text, 0, problems)
        .into_iter()
        .map(|edit| FileEdit {
            start: call.start,
            end: call.end,
            ..edit
        })
        .collect()
}

/// The path a tool call reads with line numbers (`view`, `Read`, `cat -n`).
fn viewed_path(call: &ToolCall) -> Option<String> {
    match call.kind()? {
        ToolKind::Editor if call.string(&["command"]) == Some("view") => {
            call.string(&tool::PATH_ARGUMENTS).map(str::to_string)
        }
        ToolKind::Read => call.string(&tool::PATH_ARGUMENTS).map(str::to_string),
        ToolKind::Shell => call
            .string(&tool::COMMAND_ARGUMENTS)
            .and_then(numbered_cat_path),
        _ => None,
    }
}

/// What a tool answers when it did not apply an edit: SWE-agent's linter
/// ("Your changes have NOT been applied"), an editor that did not find the
/// text to replace.
fn is_refusal(observation: &str) -> bool {
    // The verdict opens or closes the answer (SWE-agent shows the refused
    // edit's window between its two sentences).
    const WINDOW: usize = 2_048;
    let refused = |text: &str| {
        contains_str!(text, "Your changes have NOT been applied")
            || contains_str!(text, "Your proposed edit has introduced new syntax error")
            || contains_str!(text, "No replacement was performed")
            || contains_str!(text, "String to replace not found")
    };
    if observation.len() <= 2 * WINDOW {
        return refused(observation);
    }
    let head = crate::ingest::text::truncate_to_bytes(observation, WINDOW);
    let tail_start = crate::ingest::text::ceil_char_boundary(
        observation,
        observation.len().saturating_sub(WINDOW),
    );
    refused(head) || refused(observation.get(tail_start..).unwrap_or(""))
}

/// An empty file made by SWE-agent's `create FILE`.
fn created_empty(path: &str, start: usize, end: usize) -> FileEdit {
    FileEdit {
        path: path.to_string(),
        op: EditOp::Write {
            content: String::new(),
            create: true,
        },
        start,
        end,
    }
}

/// A search call that answers numbered lines (`search_file`, a shell
/// `grep -n`): `Some(file searched)`, the file `None` when not named.
fn searched_file(call: &ToolCall) -> Option<Option<String>> {
    match call.kind()? {
        ToolKind::Search => Some(call.string(&tool::PATH_ARGUMENTS).map(str::to_string)),
        ToolKind::Shell => call
            .string(&tool::COMMAND_ARGUMENTS)
            .and_then(numbered_search),
        _ => None,
    }
}

/// A `search_file TERM [FILE]` or `grep -n ... [FILE]` command: `Some(the
/// file searched)` (`None` when the command names no single file).
fn numbered_search(command: &str) -> Option<Option<String>> {
    let command = command.trim();
    if let Some(rest) = command.strip_prefix("search_file ") {
        let words = shell_words(rest);
        return Some(words.get(1).cloned());
    }
    let rest = command.strip_prefix("grep ")?;
    if command.contains(['|', ';', '&', '>']) {
        return None;
    }
    let words = shell_words(rest);
    let flags: Vec<&String> = words.iter().filter(|word| word.starts_with('-')).collect();
    let numbered = flags
        .iter()
        .any(|flag| !flag.starts_with("--") && flag.contains('n'))
        || flags.iter().any(|flag| *flag == "--line-number");
    if !numbered {
        return None;
    }
    let recursive = flags.iter().any(|flag| {
        (!flag.starts_with("--") && flag.contains(['r', 'R'])) || *flag == "--recursive"
    });
    let operands: Vec<&String> = words.iter().filter(|word| !word.starts_with('-')).collect();
    Some(match operands.as_slice() {
        [_, file] if !recursive => Some((*file).clone()),
        _ => None,
    })
}

/// Words of a command, quotes removed (no escapes), an empty quoted word
/// left out.
fn shell_words(text: &str) -> Vec<String> {
    let mut words = crate::ingest::command::shell_words(text);
    words.retain(|word| !word.is_empty());
    words
}

/// `12:text` -> `(12, "text")`.
fn numbered_search_line(text: &str) -> Option<(usize, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let number = text.get(..digits)?.parse::<usize>().ok()?;
    let content = text.get(digits..)?.strip_prefix(':')?;
    (number >= 1).then_some((number, content))
}

/// The file of a `cat -n FILE` / `nl -ba FILE` command.
fn numbered_cat_path(command: &str) -> Option<String> {
    // Word by word, so that a long command (a heredoc) is not split whole.
    let mut words = command.split_whitespace();
    let flag = match words.next()? {
        "cat" => "-n",
        "nl" => "-ba",
        _ => return None,
    };
    if words.next()? != flag {
        return None;
    }
    let file = words.next()?;
    words.next().is_none().then(|| file.to_string())
}

/// The lines of a numbered view: `   12\ttext` (`cat -n`) or `    12→text`
/// (Claude Code's Read), the longest run of consecutive numbers.
pub fn numbered_lines(text: &str) -> Vec<(usize, &str)> {
    longest_numbered_run(lines_with_offsets(text).take(MAX_VIEW_LINES).map(|line| {
        let trimmed = line.text.trim_start();
        let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
        let rest = trimmed.get(digits..).unwrap_or("");
        let content = rest.strip_prefix('\t').or_else(|| rest.strip_prefix('→'))?;
        let number = trimmed
            .get(..digits)
            .and_then(|d| d.parse::<usize>().ok())?;
        Some((number, content))
    }))
}

/// The longest run of consecutively numbered lines among `lines` (`None`
/// for a line without a number, which ends a run); the first such run wins
/// a tie.
fn longest_numbered_run<'a>(
    lines: impl Iterator<Item = Option<(usize, &'a str)>>,
) -> Vec<(usize, &'a str)> {
    let mut best: Vec<(usize, &str)> = Vec::new();
    let mut run: Vec<(usize, &str)> = Vec::new();
    for line in lines {
        match line {
            Some((number, content))
                if run
                    .last()
                    .is_none_or(|(previous, _)| *previous + 1 == number) =>
            {
                run.push((number, content));
            }
            Some(numbered) => {
                if run.len() > best.len() {
                    best = std::mem::take(&mut run);
                }
                run = vec![numbered];
            }
            None => {
                if run.len() > best.len() {
                    best = std::mem::take(&mut run);
                }
                run.clear();
            }
        }
    }
    if run.len() > best.len() {
        best = run;
    }
    best
}

/// The file named in an editor's view header ("Here's the result of
/// running `cat -n` on /path:").
fn view_header_path(text: &str) -> Option<&str> {
    const MARKER: &str = "result of running `cat -n` on ";
    // Every observation is searched: memchr's SIMD search, built once, is
    // several times faster than `str::find` here.
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(MARKER));
    let at = FINDER.find(text.as_bytes())?;
    let rest = text.get(at + MARKER.len()..)?;
    let end = rest.find([':', '\n']).unwrap_or(rest.len());
    rest.get(..end)
        .map(str::trim)
        .filter(|path| !path.is_empty())
}

/// Follows the edits of one session.
#[derive(Debug, Default, Clone)]
pub struct Tracker {
    workspace: workspace::Workspace,
    /// The project root the task names (`<uploaded_files>`), with a final `/`.
    root: Option<String>,
    /// The file the last agent message asked to see with line numbers.
    pending_view: Option<String>,
    /// The last agent message searched with line numbers (`search_file`,
    /// `grep -n`): the file searched, when one is named.
    pending_search: Option<Option<String>>,
    /// Files created by edits (normalized).
    created: HashSet<String>,
    /// Files that existed before the session and were edited.
    edited_existing: HashSet<String>,
    /// Files removed after their creation (by an edit or `rm`).
    removed: HashSet<String>,
    /// Number of edits rendered.
    num_edits: usize,
    /// Edit count at each file's last edit, and at the last diff seen.
    last_edit_of: HashMap<String, usize>,
    /// The run said it was done (`submit`, `finish`, "Applied edit to").
    completed: bool,
    /// The file SWE-agent's windowed editor has open (normalized).
    open_file: Option<String>,
    /// The lines its `set_cursors` selected last.
    cursors: Option<(usize, usize)>,
    /// Files the last agent message's edits changed, until the next
    /// observation says whether the tool applied them.
    awaiting_verdict: Vec<String>,
    /// Per file, edits the tool applied and edits it refused.
    verdicts: HashMap<String, (usize, usize)>,
    /// Edits the tool refused.
    num_refused: usize,
    /// Directories the session moved to or ran git in (`cd`, `git -C`),
    /// candidates for the root when no message names it.
    root_candidates: Vec<String>,
    /// Files the session viewed (normalized).
    viewed: HashSet<String>,
    /// Files it viewed before its first edit.
    viewed_before_edits: HashSet<String>,
    /// Files the session ran as scripts (`python x.py`, `./x.sh`), normalized.
    run_as_scripts: HashSet<String>,
    /// Files the session handed to a test runner (`pytest x.py`), normalized.
    run_as_tests: HashSet<String>,
    /// Directories the session moved to (`cd DIR`, relative ones too), normalized.
    moved_to: HashSet<String>,
    /// The shell's directory as the session's `cd`s move it, from the
    /// transcript's working directory.
    shell_directory: Option<String>,
    /// Directories the session shows are git checkouts (git commands ran
    /// there, `git clone` made them, `git rev-parse --show-toplevel` named them).
    checkouts: Vec<String>,
    /// The last command asked git for its top level.
    awaiting_toplevel: bool,
    /// The transcript's working directory as it gave it.
    origin: Option<String>,
    /// Before the last command: the shell's directory and how many
    /// checkouts were known (a `cd` its answer says failed is undone).
    before_command: Option<(Option<String>, usize)>,
    /// Top levels git named (`git rev-parse --show-toplevel`).
    toplevels: Vec<String>,
    /// Per edited file, the module names its edits import.
    imports: HashMap<String, HashSet<String>>,
    /// Files aider said it applied an edit to (and committed).
    applied: HashSet<String>,
}

/// Files kept of what a session viewed, ran and imported.
const MAX_TRACKED_NAMES: usize = 1_024;
/// Interpreters whose first operand is a script it runs.
const SCRIPT_RUNNERS: &[&str] = &[
    "python", "python2", "python3", "node", "bash", "sh", "zsh", "ruby", "perl", "php", "tsx",
    "ts-node", "deno", "bun", "Rscript", "julia",
];
/// Extensions of what an agent writes as output (reports, logs, data).
const OUTPUT_EXTENSIONS: &[&str] = &["json", "jsonl", "log", "txt", "out", "csv", "md"];
/// Names of repository files with those extensions (never output).
const PROJECT_FILES: &[&str] = &[
    "README",
    "CHANGELOG",
    "CHANGES",
    "CONTRIBUTING",
    "LICENSE",
    "AGENTS",
    "CLAUDE",
    "HISTORY",
    "NEWS",
    "package",
    "tsconfig",
    "composer",
    "requirements",
    "constraints",
    "manifest",
    "deno",
    "jsconfig",
    "lerna",
    "nx",
    "turbo",
    "vercel",
    "app",
    "tslint",
    "eslintrc",
];
/// Words of a name that say it is output.
const OUTPUT_WORDS: &[&str] = &[
    "output",
    "result",
    "report",
    "summary",
    "prediction",
    "preds",
    "analysis",
    "notes",
    "solution",
    "changes_made",
    "fix_summary",
    "debug",
    "repro",
    "trace",
];

/// Whether a file the session created is an output artifact: a log, or
/// data and text (JSON, text, Markdown) written at the top of the tree or
/// named as output (`report.md`, `results.json`), not a project file.
fn is_output_artifact(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some((stem, extension)) = name.rsplit_once('.') else {
        return false;
    };
    let extension = extension.to_ascii_lowercase();
    if !OUTPUT_EXTENSIONS.contains(&extension.as_str()) {
        return false;
    }
    if matches!(extension.as_str(), "log" | "out") {
        return true;
    }
    let lowered = stem.to_ascii_lowercase();
    if stem.is_empty() || stem.starts_with('.') {
        // A dotfile (`.aidar.json`) configures a tool.
        return false;
    }
    if PROJECT_FILES
        .iter()
        .any(|project| lowered.trim_start_matches('.') == project.to_ascii_lowercase())
    {
        return false;
    }
    !path.contains('/') || OUTPUT_WORDS.iter().any(|word| lowered.contains(word))
}

/// Words that name a script written to reproduce, debug or check.
const SCRATCH_WORDS: &[&str] = &[
    "repro",
    "debug",
    "test_issue",
    "demo",
    "check_",
    "verify",
    "scratch",
    "tmp",
    "temp",
    "final_",
    "try_",
    "issue",
];

/// Whether a file's name says it is a reproduction or check script.
fn looks_like_scratch(path: &str) -> bool {
    let lowered = module_name(path).to_ascii_lowercase();
    SCRATCH_WORDS.iter().any(|word| lowered.contains(word))
}

/// The scripts a shell command runs: the first operand of an interpreter
/// (`python -u x.py`, `timeout 60 node x.js`) or a command that is a path
/// (`./x.sh`).
fn scripts_run(command: &str) -> Vec<String> {
    let mut scripts = Vec::new();
    for part in command.split(['\n', ';', '&', '|', '(', ')']) {
        let mut words = part
            .split_whitespace()
            .skip_while(|word| {
                word.contains('=')
                    || matches!(
                        *word,
                        "timeout"
                            | "time"
                            | "env"
                            | "exec"
                            | "uv"
                            | "poetry"
                            | "pipenv"
                            | "run"
                            | "npx"
                            | "sudo"
                    )
            })
            .skip_while(|word| {
                word.bytes()
                    .all(|byte| byte.is_ascii_digit() || byte == b's')
            });
        let Some(first) = words.next() else { continue };
        let runner = first.rsplit('/').next().unwrap_or(first);
        let runner = runner.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if first.starts_with("./") && !first.ends_with('/') {
            scripts.push(first.to_string());
            continue;
        }
        if !SCRIPT_RUNNERS.contains(&runner) && !SCRIPT_RUNNERS.contains(&first) {
            continue;
        }
        for word in words {
            if matches!(word, "-m" | "-c" | "-e" | "--eval" | "-lc" | "-n") {
                // A module, inline code, or a shell's syntax check.
                break;
            }
            if word.starts_with('-') {
                continue;
            }
            let word = word.trim_matches(['"', '\'']);
            if word.contains('.') || word.contains('/') {
                scripts.push(word.to_string());
            }
            break;
        }
        if scripts.len() >= 16 {
            break;
        }
    }
    scripts
}

/// The directories a shell command moves to (`cd DIR`, `pushd DIR`), as
/// written.
fn moved_to(command: &str) -> Vec<String> {
    let mut directories = Vec::new();
    if !command.contains("cd ") && !command.contains("pushd ") {
        return directories;
    }
    for part in command.split(['\n', ';', '&', '|', '(', ')']) {
        let mut words = part.split_whitespace();
        if matches!(words.next(), Some("cd" | "pushd"))
            && let Some(directory) = words.next()
        {
            let directory = directory.trim_matches(['"', '\'']).trim_end_matches('/');
            if !directory.is_empty()
                && !matches!(directory, "." | ".." | "-" | "~")
                && directories.len() < 16
            {
                directories.push(directory.to_string());
            }
        }
    }
    directories
}

/// The files a shell command hands to a test runner: the operands of
/// `pytest` / `py.test` and of `python -m pytest` / `-m unittest`, a test's
/// `::name` cut off.
fn test_files_run(command: &str) -> Vec<String> {
    let mut files = Vec::new();
    if !command.contains("py.test") && !command.contains("pytest") && !command.contains("unittest")
    {
        return files;
    }
    for part in command.split(['\n', ';', '&', '|', '(', ')']) {
        let words: Vec<&str> = part.split_whitespace().collect();
        let runner_at = words.iter().position(|word| {
            let name = word.rsplit('/').next().unwrap_or(word);
            matches!(name, "pytest" | "py.test")
        });
        let module_at = words
            .windows(2)
            .position(|pair| pair[0] == "-m" && matches!(pair[1], "pytest" | "unittest"))
            .map(|at| at + 1);
        let Some(at) = runner_at.or(module_at) else {
            continue;
        };
        for word in words.iter().skip(at + 1) {
            if matches!(*word, ">" | "2>&1" | ">>" | "<") {
                break;
            }
            if word.starts_with('-') {
                continue;
            }
            let word = word.trim_matches(['"', '\'']);
            let file = word.split("::").next().unwrap_or(word);
            if file.ends_with(".py") && files.len() < 16 {
                files.push(file.to_string());
            }
        }
    }
    files
}

/// The module names a text imports (`import a.b`, `from a import b, c`,
/// `require('./a')`, `from './a'`), each dotted or slashed part.
fn imported_names(text: &str) -> HashSet<String> {
    let mut names = HashSet::new();
    if !contains_str!(text, "import")
        && !contains_str!(text, "require")
        && !contains_str!(text, "source ")
        && !contains_str!(text, ". ")
    {
        return names;
    }
    for line in text.lines().take(20_000) {
        let line = line.trim();
        let spec = if let Some(rest) = line.strip_prefix("from ") {
            rest.replace(" import ", " ")
        } else if let Some(rest) = line.strip_prefix("import ") {
            rest.to_string()
        } else if let Some(rest) = line
            .strip_prefix("source ")
            .or_else(|| line.strip_prefix(". "))
        {
            rest.to_string()
        } else if let Some(at) = line.find("require(") {
            line.get(at + "require(".len()..).unwrap_or("").to_string()
        } else {
            continue;
        };
        for word in spec.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !word.is_empty() && names.len() < 256 {
                names.insert(word.to_string());
            }
        }
    }
    names
}

/// The module name of a file (`repro/a.py` -> `a`).
fn module_name(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.split_once('.').map_or(name, |(stem, _)| stem)
}

/// Whether `a` and `b` name one file, one perhaps seen from a subdirectory
/// (`a.py` after `cd repro`, beside `repro/a.py`), or one absolute and the
/// other relative to the repository root.
pub fn same_file(a: &str, b: &str) -> bool {
    a == b
        || a.strip_suffix(b).is_some_and(|head| head.ends_with('/'))
        || b.strip_suffix(a).is_some_and(|head| head.ends_with('/'))
}

impl crate::ingest::scratch::Workplace for Tracker {
    fn worked_in(&self, folder: &str) -> bool {
        Tracker::worked_in(self, folder)
    }
}

impl Tracker {
    /// A tracker of a new session, whose line diffs are timed by `clock`.
    pub fn new(clock: crate::ingest::Clock) -> Tracker {
        Tracker {
            workspace: workspace::Workspace::new(clock),
            ..Tracker::default()
        }
    }

    /// Bytes of file text the tracker holds (for callers that keep trackers).
    pub fn held_bytes(&self) -> usize {
        self.workspace.held_bytes()
    }

    /// Sets the project root named by the task (`/workspace/django__django__3.0`)
    /// or by the transcript's working directory.
    pub fn set_root(&mut self, root: &str) {
        if let Some(root) = repo::as_root(root) {
            self.root = Some(root);
        }
    }

    /// The transcript's working directory, whatever it looks like: where
    /// the shell starts.
    pub fn set_directory(&mut self, directory: &str) {
        if self.shell_directory.is_none() {
            let directory = repo::with_forward_slashes(directory);
            self.shell_directory = Some(directory.trim_end_matches('/').to_string());
            self.origin = self.shell_directory.clone();
        }
    }

    fn note_checkout(&mut self, directory: String) {
        if !directory.is_empty()
            && directory != "/"
            && self.checkouts.len() < repo::MAX_CANDIDATES
            && !self.checkouts.contains(&directory)
        {
            self.checkouts.push(directory);
        }
    }

    /// The root, when a message named it (with a final `/`).
    pub fn root(&self) -> Option<&str> {
        self.root.as_deref()
    }

    /// Where `path` falls relative to the root (see [`repo::place`]).
    pub fn place(&self, path: &str) -> Placed {
        repo::place(self.root.as_deref(), path)
    }

    /// The path as a diff would name it: relative to the root (the project
    /// root, a sandbox root), `./` and `..` resolved; a path outside the
    /// root (or climbing above it) as written.
    pub fn normalize(&self, path: &str) -> String {
        match self.place(path) {
            Placed::Inside(path) | Placed::Outside(path) | Placed::Climbs(path) => path,
        }
    }

    /// Whether `path` (normalized) lies outside a root a message named.
    pub fn is_outside(&self, path: &str) -> bool {
        matches!(self.place(path), Placed::Outside(_))
    }

    /// The root to infer when no message named one: of the directories the
    /// session moved to and the common directory of the files it viewed
    /// and edited, the one that holds most of `files` (absolute paths).
    pub fn inferred_root(&self, files: &[String]) -> Option<String> {
        if self.root.is_some() {
            return None;
        }
        // A checkout the session shows, wherever it is (`/tmp`, a path
        // with spaces, relative), that holds some of the files.
        let checkouts: Vec<String> = self
            .checkouts
            .iter()
            .map(|checkout| format!("{checkout}/"))
            .collect();
        let all: Vec<&str> = files.iter().map(String::as_str).collect();
        if let Some(root) =
            repo::choose_root(&self.toplevels, &all).or_else(|| repo::choose_root(&checkouts, &all))
        {
            return Some(root);
        }
        let absolute: Vec<&str> = files
            .iter()
            .map(String::as_str)
            .filter(|file| file.starts_with('/'))
            .collect();
        if absolute.is_empty() {
            return None;
        }
        let mut candidates = self.root_candidates.clone();
        let viewed_and_edited: Vec<&str> = absolute
            .iter()
            .copied()
            .filter(|file| self.viewed.contains(*file))
            .collect();
        candidates.extend(repo::common_directory(&viewed_and_edited));
        repo::choose_root(&candidates, &absolute)
    }

    fn note_viewed(&mut self, path: &str) {
        if self.viewed.len() < MAX_TRACKED_NAMES {
            self.viewed.insert(path.to_string());
        }
        if self.num_edits == 0 && self.viewed_before_edits.len() < MAX_TRACKED_NAMES {
            self.viewed_before_edits.insert(path.to_string());
        }
    }

    /// Reads an agent message: its edits rendered as diffs (in message
    /// order), the files it asks to view, `submit` / `finish` calls and `rm`
    /// of created files. Problems go to `problems`.
    pub fn agent_message(
        &mut self,
        message: &str,
        calls: &[ToolCall],
        commands: &[String],
        problems: &mut Vec<String>,
    ) -> Vec<(FileEdit, RenderedEdit)> {
        self.settle_verdict(false);
        self.pending_view = None;
        self.pending_search = None;
        let mut edits = self.call_edits(calls, problems);
        edits.extend(self.windowed_edits(message, calls));
        if calls.is_empty() {
            edits.extend(aider::search_replace_edits(message, problems));
            edits.extend(aider::whole_file_edits(message));
        }
        let in_calls = |at: usize| calls.iter().any(|call| call.start <= at && at < call.end);
        edits.extend(
            apply_patch::patch_edits(message, 0, problems)
                .into_iter()
                .filter(|edit| !in_calls(edit.start)),
        );
        for command in commands {
            self.read_command(message, command, &mut edits);
        }
        edits.sort_by_key(|edit| edit.start);
        edits.truncate(MAX_EDITS_PER_MESSAGE);
        let mut rendered = Vec::new();
        for mut edit in edits {
            edit.path = match self.place(&edit.path) {
                Placed::Climbs(path) => {
                    problems.push(format!(
                        "edit of {path} climbs above the repository root: skipped"
                    ));
                    continue;
                }
                Placed::Inside(path) | Placed::Outside(path) => path,
            };
            if let Some(result) = self.apply_edit(&edit, problems) {
                rendered.push((edit, result));
            }
        }
        rendered
    }

    /// The edits of an agent message's tool calls, in call order; notes the
    /// views, searches and `submit` / `finish` calls among them.
    fn call_edits(&mut self, calls: &[ToolCall], problems: &mut Vec<String>) -> Vec<FileEdit> {
        let mut edits = Vec::new();
        for call in calls {
            if let Some(searched) = searched_file(call) {
                self.pending_search = Some(searched.map(|path| self.normalize(&path)));
            }
            if call.kind() == Some(ToolKind::Finish) {
                self.completed = true;
            }
            if let Some(path) = viewed_path(call) {
                self.pending_view = Some(self.normalize(&path));
            }
            if let Some(file) = windowed::created_file(Some(call), None) {
                edits.push(created_empty(file, call.start, call.end));
                self.open_file = Some(self.normalize(file));
                continue;
            }
            if let Some(edit) = self
                .open_file
                .as_deref()
                .and_then(|open_file| windowed::call_edit(call, open_file))
            {
                edits.push(edit);
                continue;
            }
            edits.extend(edits_of_call(call, problems));
        }
        edits
    }

    /// The windowed editor's edits of the file it has open: those in the
    /// message's text, else those in its calls' commands.
    fn windowed_edits(&mut self, message: &str, calls: &[ToolCall]) -> Vec<FileEdit> {
        let mut edits = Vec::new();
        if let Some(selected) = windowed::cursors(message) {
            self.cursors = Some(selected);
        }
        if let Some(open_file) = self.open_file.clone() {
            let in_text = windowed::range_edits(message, &open_file, self.cursors);
            if in_text.is_empty() {
                // The windowed editor's commands inside JSON arguments
                // (`Tool call: bash` + `{"command": "edit 3:4\n..."}`).
                for call in calls {
                    let Some(command) = call.string(&tool::COMMAND_ARGUMENTS) else {
                        continue;
                    };
                    if let Some(selected) = windowed::cursors(command) {
                        self.cursors = Some(selected);
                    }
                    edits.extend(
                        windowed::range_edits(command, &open_file, self.cursors)
                            .into_iter()
                            .map(|edit| FileEdit {
                                start: call.start,
                                end: call.end,
                                ..edit
                            }),
                    );
                }
            }
            edits.extend(in_text);
        }
        edits
    }

    /// Notes what a command of an agent message does: ends the run, views
    /// or searches a file, creates one in the windowed editor (an edit),
    /// removes created files, moves to a directory, runs a script.
    fn read_command(&mut self, message: &str, command: &str, edits: &mut Vec<FileEdit>) {
        // SWE-agent's `submit` as a command rather than a call.
        if tool::names(ToolKind::Finish).any(|name| name == command.trim()) {
            self.completed = true;
        }
        if let Some(path) = numbered_cat_path(command) {
            self.pending_view = Some(self.normalize(&path));
        }
        if let Some(searched) = numbered_search(command) {
            self.pending_search = Some(searched.map(|path| self.normalize(&path)));
        }
        if let Some(file) = windowed::created_file(None, Some(command))
            && !edits.iter().any(|edit| {
                edit.path == file && matches!(edit.op, EditOp::Write { create: true, .. })
            })
        {
            let at = message.find(command).unwrap_or(0);
            edits.push(created_empty(file, at, at + command.len()));
            self.open_file = Some(self.normalize(file));
        }
        self.note_removals(command);
        if self.root_candidates.len() < repo::MAX_CANDIDATES {
            self.root_candidates
                .extend(repo::directory_targets(command));
        }
        for script in scripts_run(command) {
            if self.run_as_scripts.len() < MAX_TRACKED_NAMES {
                let script = self.normalize(&script);
                self.run_as_scripts.insert(script);
            }
        }
        self.before_command = Some((self.shell_directory.clone(), self.checkouts.len()));
        let (checkouts, after) = repo::checkouts_of_command(
            command,
            self.shell_directory.as_deref(),
            self.origin.as_deref(),
        );
        for checkout in checkouts {
            self.note_checkout(checkout);
        }
        if after.is_some() {
            self.shell_directory = after;
        }
        if contains_str!(command, "--show-toplevel") {
            self.awaiting_toplevel = true;
        }
        for directory in moved_to(command) {
            if self.moved_to.len() < MAX_TRACKED_NAMES {
                let directory = self.normalize(&directory);
                self.moved_to.insert(directory);
            }
        }
        for test_file in test_files_run(command) {
            if self.run_as_tests.len() < MAX_TRACKED_NAMES {
                let test_file = self.normalize(&test_file);
                self.run_as_tests.insert(test_file);
            }
        }
    }

    /// Applies an edit (its path placed) to the workspace, noting what it
    /// imports and whether it created, changed or removed its file.
    fn apply_edit(&mut self, edit: &FileEdit, problems: &mut Vec<String>) -> Option<RenderedEdit> {
        let path = edit.path.clone();
        let new_text = match &edit.op {
            EditOp::Write { content, .. } => Some(content.as_str()),
            EditOp::Replace { new, .. } => Some(new.as_str()),
            EditOp::Insert { text, .. } | EditOp::ReplaceLines { text, .. } => Some(text.as_str()),
            EditOp::Undo | EditOp::Delete => None,
        };
        if let Some(text) = new_text
            && (self.imports.contains_key(&path) || self.imports.len() < MAX_TRACKED_NAMES)
        {
            let names = imported_names(text);
            if !names.is_empty() {
                self.imports.entry(path.clone()).or_default().extend(names);
            }
        }
        self.awaiting_verdict.push(path.clone());
        let was_known = self.workspace.knows(&path);
        let result = self.workspace.apply(edit, problems)?;
        self.num_edits += 1;
        self.last_edit_of.insert(path.clone(), self.num_edits);
        match result.change {
            Change::Added if !was_known && !self.edited_existing.contains(&path) => {
                self.created.insert(path.clone());
                self.removed.remove(&path);
            }
            Change::Deleted if self.created.contains(&path) => {
                self.removed.insert(path.clone());
            }
            Change::Modified | Change::Deleted if !self.created.contains(&path) => {
                self.edited_existing.insert(path.clone());
            }
            _ => {}
        }
        Some(result)
    }

    /// `rm` of files the session created makes them scratch files.
    fn note_removals(&mut self, command: &str) {
        if !contains_str!(command, "rm ") {
            return;
        }
        for part in command.split(['\n', ';', '&', '|']) {
            let mut words = part.split_whitespace();
            if words.next() != Some("rm") {
                continue;
            }
            for word in words.filter(|word| !word.starts_with('-')).take(64) {
                let path = self.normalize(word.trim_matches(['"', '\'']));
                let matched: Vec<String> = self
                    .created
                    .iter()
                    .filter(|created| {
                        **created == path
                            || created.ends_with(&format!("/{path}"))
                            || path.ends_with(&format!("/{created}"))
                            // `rm -rf repro` of the directory it made.
                            || created.starts_with(&format!("{}/", path.trim_end_matches('/')))
                    })
                    .cloned()
                    .collect();
                self.removed.extend(matched);
            }
        }
    }

    /// Reads an observation: a numbered view of the file the last agent
    /// message asked for (or that the view's header names), and aider's
    /// "Applied edit to" confirmations.
    pub fn observation(&mut self, message: &str) {
        self.read_observation(message, true);
    }

    /// Reads the task message as an observation, except for the windowed
    /// editor's state: a task's demonstration shows another repository's
    /// windows and directory.
    pub fn task(&mut self, message: &str) {
        self.read_observation(message, false);
    }

    fn read_observation(&mut self, message: &str, windowed_state: bool) {
        if let Some((directory, num_checkouts)) = self.before_command.take()
            && contains_str!(message, "cd:")
            && (contains_str!(message, "no such file or directory")
                || contains_str!(message, "No such file or directory"))
        {
            // The shell did not move, nor did git run where the `cd` went.
            self.shell_directory = directory;
            self.checkouts.truncate(num_checkouts);
        }
        if std::mem::take(&mut self.awaiting_toplevel)
            && let Some(line) = message
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .take(3)
                .find(|line| line.starts_with('/'))
            && self.toplevels.len() < repo::MAX_CANDIDATES
        {
            self.toplevels
                .push(format!("{}/", line.trim_end_matches('/')));
        }
        if contains_str!(message, "Applied edit to ") {
            self.completed = true;
            for line in message.lines() {
                if let Some((_, path)) = line.split_once("Applied edit to ")
                    && self.applied.len() < MAX_TRACKED_NAMES
                {
                    let path = self.normalize(path.trim());
                    self.applied.insert(path);
                }
            }
        }
        self.settle_verdict(is_refusal(message));
        if let Some(searched) = self.pending_search.take() {
            self.search_results(message, searched);
        }
        if windowed_state && self.windowed_observation(message) {
            return;
        }
        let header_path = view_header_path(message).map(|path| self.normalize(path));
        let Some(path) = header_path.or_else(|| self.pending_view.take()) else {
            return;
        };
        let lines = numbered_lines(message);
        if !lines.is_empty() {
            self.workspace.observe_view(&path, &lines);
            self.note_viewed(&path);
        }
    }

    /// Numbered lines of a search's answer (`Line 12:text` under SWE-agent's
    /// `Found N matches for "X" in PATH:`, `PATH:12:text` or, when one file
    /// was searched, `12:text` from `grep -n`) go to the files' outlines.
    fn search_results(&mut self, message: &str, searched: Option<String>) {
        let mut found: HashMap<String, Vec<(usize, &str)>> = HashMap::new();
        let mut current = searched;
        for line in lines_with_offsets(message).take(MAX_VIEW_LINES) {
            let text = line.text;
            if let Some(rest) = text.strip_prefix("Found ")
                && let Some((_, path)) = rest.rsplit_once(" in ")
            {
                current = Some(self.normalize(path.trim_end().trim_end_matches(':')));
                continue;
            }
            let numbered = text.strip_prefix("Line ").unwrap_or(text);
            if let Some((number, content)) = numbered_search_line(numbered)
                && let Some(path) = &current
            {
                found
                    .entry(path.clone())
                    .or_default()
                    .push((number, content));
                continue;
            }
            if let Some((path, rest)) = text.split_once(':')
                && !path.is_empty()
                && !path.contains(char::is_whitespace)
                && crate::language::Language::from_path(path).is_some()
                && let Some((number, content)) = numbered_search_line(rest)
            {
                found
                    .entry(self.normalize(path))
                    .or_default()
                    .push((number, content));
            }
        }
        for (path, lines) in found {
            self.workspace.observe_lines(&path, &lines);
        }
    }

    /// Notes a traceback frame of an observation: line `line` of `file`
    /// ran inside `function`.
    pub fn frame_seen(&mut self, file: &str, line: usize, function: &str) {
        let path = self.normalize(file);
        self.workspace.observe_frame(&path, line, function);
    }

    /// SWE-agent's windowed editor state in an observation: the root (the
    /// first current directory), the open file and the window shown; answers
    /// whether the observation was a window.
    fn windowed_observation(&mut self, message: &str) -> bool {
        if self.root.is_none()
            && let Some(directory) = windowed::current_directory(message)
        {
            self.set_root(directory);
        }
        if let Some(path) = windowed::open_file(message) {
            self.open_file = Some(self.normalize(path));
        }
        let Some(path) = windowed::window_path(message) else {
            return false;
        };
        let path = self.normalize(path);
        let lines = windowed::window_lines(windowed::current_text_part(message));
        if !lines.is_empty() {
            self.workspace.observe_view(&path, &lines);
            self.note_viewed(&path);
        }
        self.open_file = Some(path);
        self.pending_view = None;
        true
    }

    /// Notes that a diff of these files was shown after the edits so far: a
    /// file created by an edit and absent from it is a scratch file.
    pub fn diff_seen(&mut self, paths: &[String]) {
        if self.created.is_empty() || paths.is_empty() {
            return;
        }
        let shown: HashSet<&str> = paths.iter().map(String::as_str).collect();
        // Only a diff that holds some edited file is a diff of the work.
        if !self
            .last_edit_of
            .keys()
            .any(|path| shown.contains(path.as_str()))
        {
            return;
        }
        let absent: Vec<String> = self
            .created
            .iter()
            .filter(|path| !shown.contains(path.as_str()))
            .cloned()
            .collect();
        self.removed.extend(absent);
    }

    /// Records whether the tool applied the edits awaiting its verdict; a
    /// refused edit is undone in the workspace.
    fn settle_verdict(&mut self, refused: bool) {
        for path in std::mem::take(&mut self.awaiting_verdict) {
            let counts = self.verdicts.entry(path.clone()).or_default();
            if refused {
                counts.1 += 1;
                self.num_refused += 1;
                let undo = FileEdit {
                    path,
                    op: EditOp::Undo,
                    start: 0,
                    end: 0,
                };
                self.workspace.apply(&undo, &mut Vec::new());
            } else {
                counts.0 += 1;
            }
        }
    }

    /// Files every edit of which the tool refused.
    pub fn refused_files(&self) -> HashSet<String> {
        self.verdicts
            .iter()
            .filter(|(_, (applied, refused))| *applied == 0 && *refused > 0)
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// Files the session created and then removed (or left out of its final diff).
    pub fn scratch_files(&self) -> &HashSet<String> {
        &self.removed
    }

    /// Files the session created that are scratch by what they are, unless
    /// a final diff holds them (the caller decides): a script it ran that
    /// no repository file imports (nor a file only such scripts import), a
    /// file outside the root, an output artifact (a log, a report, data
    /// written at the top of the tree).
    pub fn scratch_by_use(&self) -> HashSet<String> {
        let mut scratch: HashSet<String> = self
            .created
            .iter()
            .filter(|path| !self.applied.contains(*path))
            .filter(|path| {
                self.is_outside(path)
                    || path.starts_with('~')
                    || path.starts_with("/tmp/")
                    || is_output_artifact(path)
            })
            .cloned()
            .collect();
        let importers = |path: &str| -> Vec<&String> {
            let module = module_name(path);
            self.imports
                .iter()
                .filter(|(importer, names)| *importer != path && names.contains(module))
                .map(|(importer, _)| importer)
                .collect()
        };
        for path in self
            .created
            .iter()
            .filter(|path| !self.applied.contains(*path))
        {
            let run = self
                .run_as_scripts
                .iter()
                .any(|script| same_file(script, path));
            // A script beside the work: the session also edited files that
            // were there, or the name says it reproduces or checks.
            let beside_work = !self.edited_existing.is_empty() || looks_like_scratch(path);
            if run && beside_work && importers(path).is_empty() {
                scratch.insert(path.clone());
            }
        }
        // Modules only scratch scripts import are part of them.
        for _ in 0..2 {
            let more: Vec<String> = self
                .created
                .iter()
                .filter(|path| !scratch.contains(*path) && !self.applied.contains(*path))
                .filter(|path| {
                    let by = importers(path);
                    !by.is_empty() && by.iter().all(|importer| scratch.contains(*importer))
                })
                .cloned()
                .collect();
            if more.is_empty() {
                break;
            }
            scratch.extend(more);
        }
        scratch
    }

    /// Files the session's edits created (normalized).
    pub fn created_files(&self) -> &HashSet<String> {
        &self.created
    }

    /// Files the session shows existed before it: those its edits changed
    /// in place and those it viewed before its first edit (a file viewed
    /// later may be one its runs wrote).
    pub fn existing_files(&self) -> impl Iterator<Item = &String> {
        self.edited_existing.iter().chain(
            self.viewed_before_edits
                .iter()
                .filter(|path| !self.created.contains(*path)),
        )
    }

    /// Whether the session ran `path` (as a script or a test file).
    pub fn was_run(&self, path: &str) -> bool {
        self.run_as_scripts
            .iter()
            .chain(&self.run_as_tests)
            .any(|script| same_file(script, path))
    }

    /// Whether the session ran a file under `folder` (relative to the
    /// root) or moved into it, however it named the folder.
    pub fn worked_in(&self, folder: &str) -> bool {
        let inside = format!("{folder}/");
        let nested = format!("/{folder}/");
        let under = |path: &str| {
            same_file(path, folder) || path.starts_with(&inside) || path.contains(&nested)
        };
        self.moved_to
            .iter()
            .chain(&self.run_as_scripts)
            .chain(&self.run_as_tests)
            .any(|path| under(path))
    }

    /// Whether the session shows a test module inside a folder: one it
    /// viewed, edited in place or ran.
    pub fn saw_tests_in_folders(&self) -> bool {
        self.viewed
            .iter()
            .chain(&self.edited_existing)
            .chain(&self.run_as_tests)
            .filter(|path| !self.created.contains(*path))
            .any(|path| crate::ingest::scratch::is_test_in_folder(path))
    }

    /// The files whose edits import `path`'s module.
    pub fn importers_of(&self, path: &str) -> Vec<&String> {
        let module = module_name(path);
        self.imports
            .iter()
            .filter(|(importer, names)| !same_file(importer, path) && names.contains(module))
            .map(|(importer, _)| importer)
            .collect()
    }

    /// Whether the edits change a file that existed before the session.
    pub fn edits_existing(&self) -> bool {
        !self.edited_existing.is_empty()
    }

    /// Edits the tool refused so far (an observation that refuses the
    /// last agent message's edits raises it).
    pub fn num_refused(&self) -> usize {
        self.num_refused
    }

    /// Whether any edit was rendered that the tool did not refuse.
    pub fn has_edits(&self) -> bool {
        self.num_edits > self.num_refused
    }

    /// Whether the run said it was done.
    pub fn completed(&self) -> bool {
        self.completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::toolcall;

    #[test]
    fn numbered_views_are_cat_n_or_nl_ba_of_one_file() {
        assert_eq!(
            numbered_cat_path("cat -n src/a.py"),
            Some("src/a.py".into())
        );
        assert_eq!(numbered_cat_path("  nl\t-ba  a.py\n"), Some("a.py".into()));
        for command in [
            "cat -n",
            "cat a.py",
            "cat -n a.py b.py",
            "nl -n a.py",
            "less -n a.py",
            "",
        ] {
            assert_eq!(numbered_cat_path(command), None, "{command:?}");
        }
    }

    fn agent(tracker: &mut Tracker, message: &str) -> Vec<RenderedEdit> {
        let calls = toolcall::parse(message).calls;
        let mut problems = Vec::new();
        tracker
            .agent_message(message, &calls, &[], &mut problems)
            .into_iter()
            .map(|(_, rendered)| rendered)
            .collect()
    }

    #[test]
    fn an_editor_view_places_a_later_str_replace() {
        let mut tracker = Tracker::default();
        tracker.set_root("/workspace/pkg__pkg__1.0");
        agent(
            &mut tracker,
            r#"{"name": "str_replace_editor", "arguments": {"command": "view", "path": "/workspace/pkg__pkg__1.0/pkg/table.py"}}"#,
        );
        tracker.observation("Here's the result of running `cat -n` on /workspace/pkg__pkg__1.0/pkg/table.py:\n    40\tclass Table:\n    41\t    def update_many(self, rows):\n    42\t        a = 1\n    43\t        b = 2\n    44\t        c = 3\n    45\t        d = 4\n    46\t        return rows\n");
        let rendered = agent(
            &mut tracker,
            "<function=str_replace_editor>\n<parameter=command>str_replace</parameter>\n<parameter=path>/workspace/pkg__pkg__1.0/pkg/table.py</parameter>\n<parameter=old_str>        return rows</parameter>\n<parameter=new_str>        return list(rows)</parameter>\n</function>",
        );
        assert_eq!(rendered.len(), 1);
        assert_eq!(rendered[0].path, "pkg/table.py");
        assert!(
            rendered[0]
                .diff
                .contains("@@ -41,6 +41,6 @@ class Table:\n     def update_many"),
            "{}",
            rendered[0].diff
        );
        assert!(tracker.edits_existing());
    }

    #[test]
    fn a_created_then_removed_file_is_scratch() {
        let mut tracker = Tracker::default();
        agent(
            &mut tracker,
            r#"{"type": "tool_use", "name": "Write", "input": {"file_path": "/testbed/repro.py", "content": "print(1)\n"}}"#,
        );
        let mut problems = Vec::new();
        tracker.agent_message(
            "",
            &[],
            &["rm /testbed/repro.py".to_string()],
            &mut problems,
        );
        assert!(tracker.scratch_files().contains("repro.py"));
    }

    #[test]
    fn search_commands_that_answer_numbered_lines() {
        assert_eq!(
            numbered_search("search_file \"class TimeDelta\" src/fields.py"),
            Some(Some("src/fields.py".to_string()))
        );
        assert_eq!(
            numbered_search("grep -n 'def get' pkg/a.py"),
            Some(Some("pkg/a.py".to_string()))
        );
        assert_eq!(numbered_search("grep -rn 'def get' pkg"), Some(None));
        assert_eq!(numbered_search("grep 'def get' pkg/a.py"), None);
        assert_eq!(numbered_search("grep -n x a.py | head"), None);
    }

    #[test]
    fn a_search_result_names_the_class_of_a_later_window_edit() {
        // marshmallow-1867 (windowed editor): `search_file` shows the class
        // line, the window the edit is made from starts below it.
        let mut tracker = Tracker::default();
        let mut problems = Vec::new();
        tracker.agent_message(
            "```\nsearch_file \"class TimeDelta\" src/marshmallow/fields.py\n```",
            &[],
            &["search_file \"class TimeDelta\" src/marshmallow/fields.py".to_string()],
            &mut problems,
        );
        tracker.observation("Found 1 matches for \"class TimeDelta\" in /repo/src/marshmallow/fields.py:\nLine 1421:class TimeDelta(Field):\nEnd of matches for \"class TimeDelta\" in /repo/src/marshmallow/fields.py\n(Open file: n/a)\n(Current directory: /repo)\nbash-$");
        tracker.observation("[File: /repo/src/marshmallow/fields.py (1997 lines total)]\n(1469 more lines above)\n1470:    def _serialize(self, value, attr, obj, **kwargs):\n1471:        return int(value.total_seconds())\n1472:\n(525 more lines below)\n(Open file: /repo/src/marshmallow/fields.py)\n(Current directory: /repo)\nbash-$");
        let rendered = agent(
            &mut tracker,
            "```\nedit 1471:1471\n        return int(round(value.total_seconds()))\nend_of_edit\n```",
        );
        assert_eq!(rendered.len(), 1);
        assert!(
            rendered[0].diff.contains("@@ class TimeDelta(Field):\n"),
            "{}",
            rendered[0].diff
        );
    }

    #[test]
    fn numbered_views_of_claude_code_reads() {
        let lines = numbered_lines("     1→import os\n     2→\n     3→def f():\n");
        assert_eq!(lines, vec![(1, "import os"), (2, ""), (3, "def f():")]);
    }
}
