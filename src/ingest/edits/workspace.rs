//! What the session has shown of each file, and edits placed in it: numbered
//! views (`cat -n`, an editor `view`, a `Read` result) are kept per file as one
//! run of lines with the number of its first line; an edit whose old text is
//! found in the run is diffed there (real line numbers, the real enclosing
//! definition) and the run updated, so later edits land in the edited text.
//! Without a view, an edit is diffed on its own text.
//!
//! Bounded: files kept, bytes kept per file and in all, undo depth.

use std::collections::HashMap;

use super::render::{Change, unified_diff};
use super::{EditOp, FileEdit};
use crate::ingest::text::lines_with_offsets;

/// Files whose text is kept.
const MAX_FILES: usize = 256;
/// Bytes kept of one file's text.
const MAX_FILE_BYTES: usize = 1024 * 1024;
/// Bytes kept of all files' texts.
const MAX_TOTAL_BYTES: usize = 8 * 1024 * 1024;
/// Earlier texts kept per file for `undo_edit`.
const MAX_UNDO_DEPTH: usize = 4;
/// Bytes of one edit's texts that are diffed (an edit beyond it is diffed
/// on its first lines, and a diagnostic says so).
pub const MAX_EDIT_BYTES: usize = 256 * 1024;
/// Occurrences replaced by one `replace_all` edit.
const MAX_REPLACEMENTS: usize = 1_000;

/// A run of a file's lines as last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KnownText {
    /// 1-based number of the first line of `text`.
    first_line: usize,
    /// The lines, each ending in `\n`.
    text: String,
    /// Whether `text` is the whole file.
    whole: bool,
}

/// The diff an edit rendered to, and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedEdit {
    /// The file (normalized path).
    pub path: String,
    /// The unified diff (may be empty when the edit changed nothing).
    pub diff: String,
    /// What the edit did to the file.
    pub change: Change,
}

/// The files the session has shown and edited.
#[derive(Debug, Default, Clone)]
pub struct Workspace {
    files: HashMap<String, KnownText>,
    undo: HashMap<String, Vec<KnownText>>,
    total_bytes: usize,
}

fn with_final_newline(text: &str) -> String {
    let mut owned = text.to_string();
    if !owned.is_empty() && !owned.ends_with('\n') {
        owned.push('\n');
    }
    owned
}

/// The text cut to [`MAX_EDIT_BYTES`] on a line boundary, and whether it was cut.
fn capped(text: &str) -> (&str, bool) {
    if text.len() <= MAX_EDIT_BYTES {
        return (text, false);
    }
    let head = crate::ingest::text::truncate_to_bytes(text, MAX_EDIT_BYTES);
    let cut = head.rfind('\n').map_or(head.len(), |newline| newline + 1);
    (head.get(..cut).unwrap_or(head), true)
}

impl Workspace {
    /// Bytes of file text held, undo copies included.
    pub fn held_bytes(&self) -> usize {
        let undo: usize = self
            .undo
            .values()
            .flat_map(|texts| texts.iter())
            .map(|known| known.text.len())
            .sum();
        self.files
            .values()
            .map(|known| known.text.len())
            .sum::<usize>()
            + undo
    }

    /// Keeps a numbered view of `path` (lines `(number, text)` in order).
    pub fn observe_view(&mut self, path: &str, lines: &[(usize, &str)]) {
        let Some(&(first_line, _)) = lines.first() else {
            return;
        };
        if let Some(existing) = self.files.get(path)
            && existing.whole
            && first_line > 1
        {
            // A snippet of a file known whole: the edits tracked keep it current.
            return;
        }
        let mut text = String::new();
        for (_, line) in lines {
            if text.len() + line.len() + 1 > MAX_FILE_BYTES {
                break;
            }
            text.push_str(line);
            text.push('\n');
        }
        self.keep(
            path,
            KnownText {
                first_line,
                text,
                whole: false,
            },
        );
    }

    fn keep(&mut self, path: &str, known: KnownText) {
        let released = self.files.get(path).map_or(0, |old| old.text.len());
        let needed = known.text.len();
        if self.total_bytes - released + needed > MAX_TOTAL_BYTES
            || (!self.files.contains_key(path) && self.files.len() >= MAX_FILES)
        {
            return;
        }
        self.total_bytes = self.total_bytes - released + needed;
        self.files.insert(path.to_string(), known);
    }

    /// Replaces the known text of `path` (`known`) with `replaced`, keeping
    /// the old text for an undo; answers the diff between them.
    fn replace_known(&mut self, path: &str, known: KnownText, replaced: String) -> String {
        let diff = unified_diff(
            path,
            Change::Modified,
            &known.text,
            &replaced,
            known.first_line,
        );
        self.push_undo(path);
        self.keep(
            path,
            KnownText {
                text: replaced,
                ..known
            },
        );
        diff
    }

    fn push_undo(&mut self, path: &str) {
        if let Some(current) = self.files.get(path).cloned() {
            let stack = self.undo.entry(path.to_string()).or_default();
            if stack.len() >= MAX_UNDO_DEPTH {
                stack.remove(0);
            }
            stack.push(current);
        }
    }

    /// Whether the session showed any of `path`.
    pub fn knows(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    /// Applies `edit` to what is known of its file and renders its diff;
    /// pushes what went wrong to `problems`.
    pub fn apply(&mut self, edit: &FileEdit, problems: &mut Vec<String>) -> Option<RenderedEdit> {
        let path = edit.path.as_str();
        let rendered = |diff: String, change: Change| {
            Some(RenderedEdit {
                path: path.to_string(),
                diff,
                change,
            })
        };
        match &edit.op {
            EditOp::Write { content, create } => {
                if content.contains('\0') {
                    problems.push(format!(
                        "binary content written to {path}: recorded as a binary change, not diffed"
                    ));
                    return rendered(
                        format!(
                            "diff --git a/{path} b/{path}\nBinary files /dev/null and b/{path} differ\n"
                        ),
                        Change::Added,
                    );
                }
                let (content, was_cut) = capped(content);
                if was_cut {
                    problems.push(format!(
                        "write to {path} longer than {MAX_EDIT_BYTES} bytes: its first lines diffed"
                    ));
                }
                let new = with_final_newline(content);
                let previous = self.files.get(path).cloned();
                self.push_undo(path);
                self.keep(
                    path,
                    KnownText {
                        first_line: 1,
                        text: new.clone(),
                        whole: !was_cut,
                    },
                );
                match previous {
                    Some(old) if old.first_line == 1 && !*create => {
                        let diff = unified_diff(path, Change::Modified, &old.text, &new, 1);
                        rendered(diff, Change::Modified)
                    }
                    _ => rendered(
                        unified_diff(path, Change::Added, "", &new, 1),
                        Change::Added,
                    ),
                }
            }
            EditOp::Replace { old, new, all } => {
                let (old_capped, old_cut) = capped(old);
                let (new_capped, new_cut) = capped(new);
                if old_cut || new_cut {
                    problems.push(format!(
                        "edit of {path} longer than {MAX_EDIT_BYTES} bytes: its first lines diffed"
                    ));
                }
                if let Some(known) = self.files.get(path).cloned()
                    && !old_capped.is_empty()
                    && let Some(first_at) = known.text.find(old_capped)
                {
                    let replaced = if *all {
                        let mut text = String::with_capacity(known.text.len());
                        let mut rest = known.text.as_str();
                        let mut count = 0;
                        while let Some(at) = rest.find(old_capped) {
                            if count >= MAX_REPLACEMENTS {
                                break;
                            }
                            text.push_str(rest.get(..at).unwrap_or(""));
                            text.push_str(new_capped);
                            rest = rest.get(at + old_capped.len()..).unwrap_or("");
                            count += 1;
                        }
                        text.push_str(rest);
                        text
                    } else {
                        splice(
                            &known.text,
                            first_at,
                            first_at + old_capped.len(),
                            new_capped,
                        )
                    };
                    let diff = self.replace_known(path, known, replaced);
                    return rendered(diff, Change::Modified);
                }
                if self.files.contains_key(path) && !old_capped.is_empty() {
                    problems.push(format!(
                        "old text of an edit to {path} not found in the viewed file: diffed on its own"
                    ));
                }
                let diff = unified_diff(
                    path,
                    Change::Modified,
                    &with_final_newline(old_capped),
                    &with_final_newline(new_capped),
                    1,
                );
                rendered(diff, Change::Modified)
            }
            EditOp::Insert { after_line, text } => {
                let (text, was_cut) = capped(text);
                if was_cut {
                    problems.push(format!(
                        "insert into {path} longer than {MAX_EDIT_BYTES} bytes: its first lines diffed"
                    ));
                }
                let inserted = with_final_newline(text);
                if let Some(known) = self.files.get(path).cloned()
                    && *after_line + 1 >= known.first_line
                    && *after_line < known.first_line + known.text.lines().count()
                {
                    let keep_lines = after_line + 1 - known.first_line;
                    let split = lines_with_offsets(&known.text)
                        .nth(keep_lines)
                        .map_or(known.text.len(), |line| line.start);
                    let replaced = splice(&known.text, split, split, &inserted);
                    let diff = self.replace_known(path, known, replaced);
                    return rendered(diff, Change::Modified);
                }
                let diff = unified_diff(path, Change::Modified, "", &inserted, after_line + 1);
                rendered(diff, Change::Modified)
            }
            EditOp::ReplaceLines { first, last, text } => {
                let (text, was_cut) = capped(text);
                if was_cut {
                    problems.push(format!(
                        "edit of {path} longer than {MAX_EDIT_BYTES} bytes: its first lines diffed"
                    ));
                }
                let inserted = with_final_newline(text);
                if let Some(known) = self.files.get(path).cloned()
                    && *first >= known.first_line
                    && *last < known.first_line + known.text.lines().count()
                {
                    let offset_of = |row: usize| {
                        lines_with_offsets(&known.text)
                            .nth(row)
                            .map_or(known.text.len(), |line| line.start)
                    };
                    let from = offset_of(first - known.first_line);
                    let to = offset_of((last + 1).saturating_sub(known.first_line));
                    let replaced = splice(&known.text, from, to.max(from), &inserted);
                    let diff = self.replace_known(path, known, replaced);
                    return rendered(diff, Change::Modified);
                }
                // Lines not shown: the new lines alone, where they go.
                let diff = unified_diff(path, Change::Modified, "", &inserted, *first);
                rendered(diff, Change::Modified)
            }
            EditOp::Undo => {
                let previous = self.undo.get_mut(path).and_then(Vec::pop);
                match (previous, self.files.get(path).cloned()) {
                    (Some(previous), Some(current))
                        if previous.first_line == current.first_line =>
                    {
                        let diff = unified_diff(
                            path,
                            Change::Modified,
                            &current.text,
                            &previous.text,
                            current.first_line,
                        );
                        self.keep(path, previous);
                        rendered(diff, Change::Modified)
                    }
                    _ => {
                        problems.push(format!(
                            "undo of an edit to {path} whose earlier text is not known: ignored"
                        ));
                        None
                    }
                }
            }
            EditOp::Delete => {
                let old = self
                    .files
                    .remove(path)
                    .filter(|known| known.first_line == 1 && known.whole);
                if let Some(known) = &old {
                    self.total_bytes -= known.text.len().min(self.total_bytes);
                }
                let old_text = old.map(|known| known.text).unwrap_or_default();
                let diff = if old_text.is_empty() {
                    format!(
                        "diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n"
                    )
                } else {
                    unified_diff(path, Change::Deleted, &old_text, "", 1)
                };
                rendered(diff, Change::Deleted)
            }
        }
    }
}

/// `text` with its bytes `from..to` replaced by `inserted` (out-of-range or
/// mid-character bounds keep nothing of that side).
fn splice(text: &str, from: usize, to: usize, inserted: &str) -> String {
    let mut spliced = String::with_capacity(text.len() + inserted.len());
    spliced.push_str(text.get(..from).unwrap_or(""));
    spliced.push_str(inserted);
    spliced.push_str(text.get(to..).unwrap_or(""));
    spliced
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(path: &str, op: EditOp) -> FileEdit {
        FileEdit {
            path: path.to_string(),
            op,
            start: 0,
            end: 0,
        }
    }

    #[test]
    fn a_line_range_edit_replaces_the_viewed_lines() {
        let mut workspace = Workspace::default();
        let view: Vec<(usize, &str)> = vec![
            (20, "class Table:"),
            (21, "    def update_many(self, rows):"),
            (22, "        return None"),
            (23, ""),
        ];
        workspace.observe_view("db/table.py", &view);
        let mut problems = Vec::new();
        let replace = |first, last, text: &str| {
            edit(
                "db/table.py",
                EditOp::ReplaceLines {
                    first,
                    last,
                    text: text.to_string(),
                },
            )
        };
        let rendered = workspace
            .apply(&replace(22, 22, "        return len(rows)"), &mut problems)
            .expect("rendered");
        assert!(problems.is_empty(), "{problems:?}");
        assert!(
            rendered
                .diff
                .contains("-        return None\n+        return len(rows)"),
            "{}",
            rendered.diff
        );
        assert!(rendered.diff.contains("@@ -20,"), "{}", rendered.diff);
        // Lines never shown: the new lines alone, at their place.
        let rendered = workspace
            .apply(&replace(90, 91, "x = 1"), &mut problems)
            .expect("rendered");
        assert!(rendered.diff.contains("+x = 1"), "{}", rendered.diff);
    }

    #[test]
    fn an_edit_is_placed_in_the_viewed_text_and_the_text_follows_it() {
        let mut workspace = Workspace::default();
        let view: Vec<(usize, &str)> = vec![
            (20, "class Table:"),
            (21, "    def update_many(self, rows):"),
            (22, "        for row in rows:"),
            (23, "            self.update(row)"),
            (24, "        return None"),
        ];
        workspace.observe_view("db/table.py", &view);
        let mut problems = Vec::new();
        let rendered = workspace
            .apply(
                &edit(
                    "db/table.py",
                    EditOp::Replace {
                        old: "        return None".to_string(),
                        new: "        return len(rows)".to_string(),
                        all: false,
                    },
                ),
                &mut problems,
            )
            .expect("rendered");
        assert!(problems.is_empty(), "{problems:?}");
        assert!(
            rendered
                .diff
                .contains("@@ -21,4 +21,4 @@ class Table:\n     def update_many"),
            "{}",
            rendered.diff
        );
        // A second edit lands in the edited text.
        let second = workspace
            .apply(
                &edit(
                    "db/table.py",
                    EditOp::Replace {
                        old: "return len(rows)".to_string(),
                        new: "return 0".to_string(),
                        all: false,
                    },
                ),
                &mut problems,
            )
            .expect("rendered");
        assert!(
            second
                .diff
                .contains("-        return len(rows)\n+        return 0\n")
        );
        // Undo restores it.
        let undone = workspace
            .apply(&edit("db/table.py", EditOp::Undo), &mut problems)
            .expect("rendered");
        assert!(
            undone
                .diff
                .contains("-        return 0\n+        return len(rows)\n")
        );
    }

    #[test]
    fn old_text_not_in_the_view_is_diffed_on_its_own_with_a_problem() {
        let mut workspace = Workspace::default();
        workspace.observe_view("a.py", &[(1, "x = 1")]);
        let mut problems = Vec::new();
        let rendered = workspace
            .apply(
                &edit(
                    "a.py",
                    EditOp::Replace {
                        old: "y = 1".to_string(),
                        new: "y = 2".to_string(),
                        all: false,
                    },
                ),
                &mut problems,
            )
            .expect("rendered");
        assert_eq!(problems.len(), 1);
        assert!(rendered.diff.contains("-y = 1\n+y = 2\n"));
    }

    #[test]
    fn binary_and_huge_writes_are_bounded_and_diagnosed() {
        let mut workspace = Workspace::default();
        let mut problems = Vec::new();
        let binary = workspace
            .apply(
                &edit(
                    "logo.png",
                    EditOp::Write {
                        content: "\u{0}PNG".to_string(),
                        create: true,
                    },
                ),
                &mut problems,
            )
            .expect("rendered");
        assert!(binary.diff.contains("Binary files"));
        let huge = "x = 1\n".repeat(5 * 1024 * 1024 / 6);
        let rendered = workspace
            .apply(
                &edit(
                    "big.py",
                    EditOp::Write {
                        content: huge,
                        create: false,
                    },
                ),
                &mut problems,
            )
            .expect("rendered");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(rendered.diff.len() < 2 * MAX_EDIT_BYTES);
    }
}
