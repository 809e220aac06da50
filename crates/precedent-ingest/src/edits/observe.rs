//! What the tool answered: the views, search results and frames an
//! observation shows, and whether it applied the edits it was asked for.

use std::collections::{HashMap, HashSet};

use super::views::{is_refusal, numbered_lines, numbered_search_line, view_header_path};
use super::{EditOp, FileEdit, MAX_TRACKED_NAMES, MAX_VIEW_LINES, Tracker, windowed};
use crate::repo;
use crate::text::{contains_str, lines_with_offsets};

impl Tracker {
    /// Reads an observation: a numbered view of the file the last agent
    /// message asked for (or that the view's header names), and aider's
    /// "Applied edit to" confirmations.
    pub(crate) fn observation(&mut self, message: &str) {
        self.read_observation(message, true);
    }

    /// Reads the task message as an observation, except for the windowed
    /// editor's state: a task's demonstration shows another repository's
    /// windows and directory.
    pub(crate) fn task(&mut self, message: &str) {
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
                && precedent_core::language::Language::from_path(path).is_some()
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
    pub(crate) fn frame_seen(&mut self, file: &str, line: usize, function: &str) {
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
    pub(crate) fn diff_seen(&mut self, paths: &[String]) {
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
    pub(super) fn settle_verdict(&mut self, refused: bool) {
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
}
