//! What the session changed: the builder's reading of diffs written out and
//! of edit operations rendered as diffs (files, changed and referenced
//! symbols, fix evidence), and of the tool's verdict on those edits.

use super::text::head_and_tail;
use super::{
    Evidence, EvidenceKind, Language, MAX_EVIDENCE_TEXT_BYTES, MAX_FILES_CHANGED,
    MAX_SYMBOLS_CHANGED, MAX_SYMBOLS_PER_EVIDENCE, SessionBuilder, TextView, diff, edits, repo,
    symbols, text, toolcall,
};

/// Files kept per changed definition (where a fix of it was seen).
const MAX_FILES_PER_SYMBOL: usize = 8;

impl SessionBuilder {
    /// Returns whether the view had at least one file diff.
    pub(super) fn add_diffs(
        &mut self,
        message_index: usize,
        content: &str,
        view: &TextView<'_>,
    ) -> bool {
        let paths = self.add_diff_text(message_index, &view.text, true, &|start, end| {
            view.raw_range(content, start, end)
        });
        self.edits.diff_seen(&paths);
        self.written_diffs.note_paths(&paths);
        !paths.is_empty()
    }

    /// The edits of an agent message (editor tool calls, SEARCH/REPLACE
    /// blocks, patches) rendered as diffs and read like any diff; returns
    /// whether there was one.
    pub(super) fn add_edits(
        &mut self,
        message_index: usize,
        content: &str,
        calls: &[toolcall::ToolCall],
    ) -> bool {
        let commands = self.commands.latest_of_message(message_index);
        let mut problems = Vec::new();
        let rendered = self
            .edits
            .agent_message(content, calls, &commands, &mut problems);
        for problem in problems {
            self.diagnose(message_index, problem);
        }
        let mut any = false;
        let mut edited = Vec::new();
        self.blind_replacements.clear();
        for (edit, result) in rendered {
            let symbols_before = self.symbols_changed.values.len();
            let range = (
                text::floor_char_boundary(content, edit.start),
                text::ceil_char_boundary(content, edit.end.max(edit.start)),
            );
            let paths = self.add_diff_text(message_index, &result.diff, false, &|_, _| range);
            any |= !paths.is_empty();
            for path in &paths {
                if self.edits.is_outside(path) && self.outside_files.insert(path.clone()) {
                    let root = self.edits.root().unwrap_or("").to_string();
                    self.diagnose(
                        message_index,
                        format!(
                            "{path} is outside the repository root {root}: not the repository's"
                        ),
                    );
                }
            }
            if self.symbols_changed.values.len() == symbols_before
                && let edits::EditOp::Replace { old, new, .. } = &edit.op
                && self.blind_replacements.len() < 16
            {
                self.blind_replacements
                    .push((result.path.clone(), old.clone(), new.clone()));
            }
            edited.extend(paths.iter().cloned());
            self.files_from_edits.extend(paths);
        }
        if !edited.is_empty() {
            self.unsettled_edits = Some((message_index, edited));
        }
        any
    }

    /// The tool's verdict on the last agent message's edits: applied ones
    /// are the files' latest edits.
    pub(super) fn settle_edits(&mut self, refused: bool) {
        let Some((message_index, paths)) = self.unsettled_edits.take() else {
            return;
        };
        if !refused {
            for path in paths {
                self.note_edit(path, message_index);
            }
        }
    }

    /// Claude Code answers an Edit with the edited region, numbered (`cat
    /// -n` of a snippet): the replacement's lines in it, with the lines
    /// around them as context, make a hunk whose enclosing definitions
    /// tree-sitter finds, when the edit's own diff knew no context.
    pub(super) fn definitions_from_edit_snippet(&mut self, content: &str) {
        if self.blind_replacements.is_empty()
            || !content.contains("`cat -n` on a snippet of the edited file")
        {
            return;
        }
        let lines = edits::numbered_lines(content);
        if lines.is_empty() {
            return;
        }
        for (path, old, new) in std::mem::take(&mut self.blind_replacements) {
            let new_lines: Vec<&str> = new.lines().collect();
            let Some(first) = new_lines.iter().find(|line| !line.trim().is_empty()) else {
                continue;
            };
            let Some(at) = lines.iter().position(|(_, text)| text == first) else {
                continue;
            };
            let lead = new_lines.iter().take_while(|line| *line != first).count();
            let Some(start) = at.checked_sub(lead) else {
                continue;
            };
            let end = (start + new_lines.len()).min(lines.len());
            let mut hunk = String::new();
            for (_, text) in lines.get(..start).unwrap_or(&[]) {
                hunk.push_str(&format!(" {text}\n"));
            }
            for line in old.lines() {
                hunk.push_str(&format!("-{line}\n"));
            }
            for line in &new_lines {
                hunk.push_str(&format!("+{line}\n"));
            }
            for (_, text) in lines.get(end..).unwrap_or(&[]) {
                hunk.push_str(&format!(" {text}\n"));
            }
            let first_number = lines.first().map_or(1, |(number, _)| *number);
            let old_count = start + old.lines().count() + lines.len().saturating_sub(end);
            let new_count = lines.len();
            let text = format!(
                "--- a/{path}\n+++ b/{path}\n@@ -{first_number},{old_count} +{first_number},{new_count} @@\n{hunk}"
            );
            let parsed = diff::parse_diffs(&text);
            for file in &parsed.files {
                for hunk in &file.hunks {
                    let found =
                        symbols::hunk_symbols(&path, hunk, &text, &mut self.hunk_parse_budget);
                    for symbol in &found.changed {
                        self.note_changed_symbol(symbol, &path);
                    }
                }
            }
        }
    }

    /// `symbol` changed in `path`: a changed definition, and one of the
    /// first [`MAX_FILES_PER_SYMBOL`] files it changed in.
    fn note_changed_symbol(&mut self, symbol: &str, path: &str) {
        self.symbols_changed.push(symbol, MAX_SYMBOLS_CHANGED);
        let files = self.symbol_files.entry(symbol.to_string()).or_default();
        if files.len() < MAX_FILES_PER_SYMBOL && !files.iter().any(|file| file == path) {
            files.push(path.to_string());
        }
    }

    /// `path` changed in agent message `message_index`.
    fn note_edit(&mut self, path: String, message_index: usize) {
        if self.last_edit_at.len() < MAX_FILES_CHANGED || self.last_edit_at.contains_key(&path) {
            self.last_edit_at.insert(path, message_index);
        }
    }

    /// Reads the file diffs of `text` (`raw_range` maps its byte ranges to
    /// the message's); returns the paths of the files it changes.
    fn add_diff_text(
        &mut self,
        message_index: usize,
        text: &str,
        written: bool,
        raw_range: &dyn Fn(usize, usize) -> (usize, usize),
    ) -> Vec<String> {
        let parsed = diff::parse_diffs(text);
        for problem in parsed.problems {
            self.diagnose(message_index, problem);
        }
        let mut paths = Vec::new();
        for file in &parsed.files {
            let Some(path) = file.path() else { continue };
            if repo::resolve_dots(path).is_none() {
                self.diagnose(
                    message_index,
                    format!("diff of {path} climbs above the repository root: skipped"),
                );
                continue;
            }
            paths.push(path.to_string());
            let file_text = text.get(file.start..file.end).unwrap_or("");
            if written {
                self.written_diffs.note_file(path, file, file_text);
            }
            // A later diff without the id leaves the content unknown.
            match &file.new_blob {
                Some(blob) => {
                    self.file_blobs.insert(path.to_string(), blob.clone());
                }
                None => {
                    self.file_blobs.remove(path);
                }
            }
            self.message_diff_edits_existing |= file.change != diff::FileChange::Added;
            self.files_changed.push(path, MAX_FILES_CHANGED);
            if Language::from_path(path) == Some(Language::C) && symbols::looks_like_cpp(file_text)
            {
                self.languages.vote(Language::Cpp, 5);
            } else {
                self.languages.vote_path(path, 5);
            }
            let header = format!(
                "--- {}\n+++ {}\n",
                file.old_path
                    .as_deref()
                    .map_or("/dev/null".to_string(), |old| format!("a/{old}")),
                file.new_path
                    .as_deref()
                    .map_or("/dev/null".to_string(), |new| format!("b/{new}")),
            );
            for hunk in &file.hunks {
                let hunk_text = text.get(hunk.start..hunk.end).unwrap_or("");
                let key = format!("{path}\u{0}{hunk_text}");
                if !self.evidence.fix_keys.insert(key) {
                    // Seen before (the same hunk shown again): nothing new.
                    continue;
                }
                let hunk_symbols =
                    symbols::hunk_symbols(path, hunk, text, &mut self.hunk_parse_budget);
                if hunk_symbols.skipped_parse {
                    self.diagnose(
                        message_index,
                        format!("hunk of {path} not parsed by tree-sitter (too large or parser gave up); line scan only"),
                    );
                }
                for symbol in &hunk_symbols.changed {
                    self.note_changed_symbol(symbol, path);
                }
                for symbol in &hunk_symbols.referenced {
                    self.references.add_from_diff(symbol);
                }
                let (byte_start, byte_end) = raw_range(hunk.start, hunk.end);
                let full_text = format!("{header}{hunk_text}");
                self.evidence.fix.push(Evidence {
                    kind: EvidenceKind::Fix,
                    text: head_and_tail(&full_text, MAX_EVIDENCE_TEXT_BYTES).into_owned(),
                    message_index,
                    byte_start,
                    byte_end,
                    file: Some(path.to_string()),
                    symbols: hunk_symbols
                        .changed
                        .iter()
                        .take(MAX_SYMBOLS_PER_EVIDENCE)
                        .cloned()
                        .collect(),
                });
            }
        }
        paths
    }
}
