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
//! `calls` reads the edits of tool calls, `views` the numbered views and
//! searches a message asks for, `observe` what the tool answered, and
//! `commands` what shell commands and file names say of the files.
//!
//! Pure and bounded like the rest of ingest: caps on edits per message, bytes
//! diffed per edit, files and bytes remembered.

pub(crate) mod aider;
pub(crate) mod apply_patch;
mod calls;
mod commands;
mod observe;
pub(crate) mod outline;
pub(crate) mod render;
mod views;
pub(crate) mod windowed;
pub(crate) mod workspace;

use std::collections::{HashMap, HashSet};

use super::repo::{self, Placed};
use super::text::contains_str;
use super::toolcall::ToolCall;
use precedent_core::tool::{self, ToolKind};

use self::calls::created_empty;
pub(crate) use self::calls::edits_of_call;
pub(crate) use self::commands::is_under_folder;
pub use self::commands::same_file;
use self::commands::{
    imported_names, is_output_artifact, looks_like_scratch, module_name, moved_to, scripts_run,
    test_files_run,
};
pub(crate) use self::render::Change;
pub(crate) use self::views::numbered_lines;
use self::views::{numbered_cat_path, numbered_search, searched_file, viewed_path};
pub(crate) use self::workspace::RenderedEdit;

/// Edits read per message.
const MAX_EDITS_PER_MESSAGE: usize = 64;
/// Lines of one observation read as a numbered file view.
const MAX_VIEW_LINES: usize = 20_000;

/// One edit operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EditOp {
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
pub(crate) struct FileEdit {
    /// The file, as the agent named it (normalized by [`Tracker`]).
    pub path: String,
    /// What is done to it.
    pub op: EditOp,
    /// Byte offset in the message where the edit starts.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

/// Follows the edits of one session.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tracker {
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

impl crate::scratch::Workplace for Tracker {
    fn worked_in(&self, folder: &str) -> bool {
        Tracker::worked_in(self, folder)
    }
}

impl Tracker {
    /// A tracker of a new session, whose line diffs are timed by `clock`.
    pub(crate) fn new(clock: crate::Clock) -> Tracker {
        Tracker {
            workspace: workspace::Workspace::new(clock),
            ..Tracker::default()
        }
    }

    /// Bytes of file text the tracker holds (for callers that keep trackers).
    pub(crate) fn held_bytes(&self) -> usize {
        self.workspace.held_bytes()
    }

    /// Sets the project root named by the task (`/workspace/django__django__3.0`)
    /// or by the transcript's working directory.
    pub(crate) fn set_root(&mut self, root: &str) {
        if let Some(root) = repo::as_root(root) {
            self.root = Some(root);
        }
    }

    /// The transcript's working directory, whatever it looks like: where
    /// the shell starts.
    pub(crate) fn set_directory(&mut self, directory: &str) {
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
    pub(crate) fn root(&self) -> Option<&str> {
        self.root.as_deref()
    }

    /// Where `path` falls relative to the root (see [`repo::place`]).
    pub(crate) fn place(&self, path: &str) -> Placed {
        repo::place(self.root.as_deref(), path)
    }

    /// The path as a diff would name it: relative to the root (the project
    /// root, a sandbox root), `./` and `..` resolved; a path outside the
    /// root (or climbing above it) as written.
    pub(crate) fn normalize(&self, path: &str) -> String {
        match self.place(path) {
            Placed::Inside(path) | Placed::Outside(path) | Placed::Climbs(path) => path,
        }
    }

    /// Whether `path` (normalized) lies outside a root a message named.
    pub(crate) fn is_outside(&self, path: &str) -> bool {
        matches!(self.place(path), Placed::Outside(_))
    }

    /// The root to infer when no message named one: of the directories the
    /// session moved to and the common directory of the files it viewed
    /// and edited, the one that holds most of `files` (absolute paths).
    pub(crate) fn inferred_root(&self, files: &[String]) -> Option<String> {
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
    pub(crate) fn agent_message(
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

    /// Files every edit of which the tool refused.
    pub(crate) fn refused_files(&self) -> HashSet<String> {
        self.verdicts
            .iter()
            .filter(|(_, (applied, refused))| *applied == 0 && *refused > 0)
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// Files the session created and then removed (or left out of its final diff).
    pub(crate) fn scratch_files(&self) -> &HashSet<String> {
        &self.removed
    }

    /// Files the session created that are scratch by what they are, unless
    /// a final diff holds them (the caller decides): a script it ran that
    /// no repository file imports (nor a file only such scripts import), a
    /// file outside the root, an output artifact (a log, a report, data
    /// written at the top of the tree).
    pub(crate) fn scratch_by_use(&self) -> HashSet<String> {
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
    pub(crate) fn created_files(&self) -> &HashSet<String> {
        &self.created
    }

    /// Files the session shows existed before it: those its edits changed
    /// in place and those it viewed before its first edit (a file viewed
    /// later may be one its runs wrote).
    pub(crate) fn existing_files(&self) -> impl Iterator<Item = &String> {
        self.edited_existing.iter().chain(
            self.viewed_before_edits
                .iter()
                .filter(|path| !self.created.contains(*path)),
        )
    }

    /// Whether the session ran `path` (as a script or a test file).
    pub(crate) fn was_run(&self, path: &str) -> bool {
        self.run_as_scripts
            .iter()
            .chain(&self.run_as_tests)
            .any(|script| same_file(script, path))
    }

    /// Whether the session ran a file under `folder` (relative to the
    /// root) or moved into it, however it named the folder.
    pub(crate) fn worked_in(&self, folder: &str) -> bool {
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
    pub(crate) fn saw_tests_in_folders(&self) -> bool {
        self.viewed
            .iter()
            .chain(&self.edited_existing)
            .chain(&self.run_as_tests)
            .filter(|path| !self.created.contains(*path))
            .any(|path| crate::scratch::is_test_in_folder(path))
    }

    /// The files whose edits import `path`'s module.
    pub(crate) fn importers_of(&self, path: &str) -> Vec<&String> {
        let module = module_name(path);
        self.imports
            .iter()
            .filter(|(importer, names)| !same_file(importer, path) && names.contains(module))
            .map(|(importer, _)| importer)
            .collect()
    }

    /// Whether the edits change a file that existed before the session.
    pub(crate) fn edits_existing(&self) -> bool {
        !self.edited_existing.is_empty()
    }

    /// Edits the tool refused so far (an observation that refuses the
    /// last agent message's edits raises it).
    pub(crate) fn num_refused(&self) -> usize {
        self.num_refused
    }

    /// Whether any edit was rendered that the tool did not refuse.
    pub(crate) fn has_edits(&self) -> bool {
        self.num_edits > self.num_refused
    }

    /// Whether the run said it was done.
    pub(crate) fn completed(&self) -> bool {
        self.completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolcall;

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
}
