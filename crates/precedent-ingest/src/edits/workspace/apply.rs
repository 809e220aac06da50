//! How an edit lands in what is known of its file: a write, a replacement,
//! an insertion, a range of lines replaced, an undo or a removal, each
//! rendered to a unified diff and the known text updated.

use super::super::render::{Change, unified_diff, unified_diff_in};
use super::super::{EditOp, FileEdit};
use super::{KnownText, MAX_EDIT_BYTES, MAX_REPLACEMENTS, RenderedEdit, Workspace};
use crate::text::lines_with_offsets;

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
    let head = crate::text::truncate_to_bytes(text, MAX_EDIT_BYTES);
    let cut = head.rfind('\n').map_or(head.len(), |newline| newline + 1);
    (head.get(..cut).unwrap_or(head), true)
}

impl Workspace {
    /// Applies `edit` to what is known of its file and renders its diff;
    /// pushes what went wrong to `problems`.
    pub(crate) fn apply(
        &mut self,
        edit: &FileEdit,
        problems: &mut Vec<String>,
    ) -> Option<RenderedEdit> {
        let path = edit.path.as_str();
        let (diff, change) = match &edit.op {
            EditOp::Write { content, create } => self.apply_write(path, content, *create, problems),
            EditOp::Replace { old, new, all } => self.apply_replace(path, old, new, *all, problems),
            EditOp::Insert { after_line, text } => {
                self.apply_insert(path, *after_line, text, problems)
            }
            EditOp::ReplaceLines { first, last, text } => {
                self.apply_replace_lines(path, *first, *last, text, problems)
            }
            EditOp::Undo => self.apply_undo(path, problems)?,
            EditOp::Delete => self.apply_delete(path),
        };
        Some(RenderedEdit {
            path: path.to_string(),
            diff,
            change,
        })
    }

    /// A whole file written: diffed against its earlier text when that was
    /// known from its first line and the tool did not create the file.
    fn apply_write(
        &mut self,
        path: &str,
        content: &str,
        create: bool,
        problems: &mut Vec<String>,
    ) -> (String, Change) {
        if content.contains('\0') {
            problems.push(format!(
                "binary content written to {path}: recorded as a binary change, not diffed"
            ));
            return (
                format!(
                    "diff --git a/{path} b/{path}\nBinary files /dev/null and b/{path} differ\n"
                ),
                Change::Added,
            );
        }
        let (content, was_cut) = capped_noting(content, "write to", path, problems);
        let new = with_final_newline(content);
        let previous = self.files.get(path).cloned();
        self.forget_outline(path);
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
            Some(old) if old.first_line == 1 && !create => (
                unified_diff(path, Change::Modified, &old.text, &new, 1, self.clock),
                Change::Modified,
            ),
            _ => (
                unified_diff(path, Change::Added, "", &new, 1, self.clock),
                Change::Added,
            ),
        }
    }

    /// `old` replaced by `new` (every occurrence when `all`): in the known
    /// text when it holds `old`, else diffed on the two texts alone.
    fn apply_replace(
        &mut self,
        path: &str,
        old: &str,
        new: &str,
        all: bool,
        problems: &mut Vec<String>,
    ) -> (String, Change) {
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
            let replaced = if all {
                replace_all(&known.text, old_capped, new_capped)
            } else {
                splice(
                    &known.text,
                    first_at,
                    first_at + old_capped.len(),
                    new_capped,
                )
            };
            return (self.replace_known(path, known, replaced), Change::Modified);
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
            self.clock,
        );
        (diff, Change::Modified)
    }

    /// `text` inserted after line `after_line`: into the known run when it
    /// holds that line, else diffed alone where it goes.
    fn apply_insert(
        &mut self,
        path: &str,
        after_line: usize,
        text: &str,
        problems: &mut Vec<String>,
    ) -> (String, Change) {
        let (text, _) = capped_noting(text, "insert into", path, problems);
        let inserted = with_final_newline(text);
        if let Some(known) = self.files.get(path).cloned()
            && after_line + 1 >= known.first_line
            && after_line < known.first_line + known.text.lines().count()
        {
            let keep_lines = after_line + 1 - known.first_line;
            let split = lines_with_offsets(&known.text)
                .nth(keep_lines)
                .map_or(known.text.len(), |line| line.start);
            let replaced = splice(&known.text, split, split, &inserted);
            return (self.replace_known(path, known, replaced), Change::Modified);
        }
        (
            self.diff_unseen_lines(path, after_line + 1, 0, &inserted),
            Change::Modified,
        )
    }

    /// Lines `first..=last` replaced by `text`: in the known run when it
    /// holds them, else the new lines diffed alone where they go.
    fn apply_replace_lines(
        &mut self,
        path: &str,
        first: usize,
        last: usize,
        text: &str,
        problems: &mut Vec<String>,
    ) -> (String, Change) {
        let (text, _) = capped_noting(text, "edit of", path, problems);
        let inserted = with_final_newline(text);
        if let Some(known) = self.files.get(path).cloned()
            && first >= known.first_line
            && last < known.first_line + known.text.lines().count()
        {
            let offset_of = |row: usize| {
                lines_with_offsets(&known.text)
                    .nth(row)
                    .map_or(known.text.len(), |line| line.start)
            };
            let from = offset_of(first - known.first_line);
            let to = offset_of((last + 1).saturating_sub(known.first_line));
            let replaced = splice(&known.text, from, to.max(from), &inserted);
            return (self.replace_known(path, known, replaced), Change::Modified);
        }
        let removed = (last + 1).saturating_sub(first);
        (
            self.diff_unseen_lines(path, first, removed, &inserted),
            Change::Modified,
        )
    }

    /// The diff of `inserted` replacing `removed` lines at line `at` of
    /// `path`, where the session did not show them: the new lines alone,
    /// and the outline renumbered after them.
    fn diff_unseen_lines(
        &mut self,
        path: &str,
        at: usize,
        removed: usize,
        inserted: &str,
    ) -> String {
        let diff = unified_diff_in(
            path,
            Change::Modified,
            "",
            inserted,
            at,
            &self.surroundings(path, at, 0),
            self.clock,
        );
        self.with_outline(path, |outline| {
            outline.replaced(at, removed, inserted.lines().count());
        });
        diff
    }

    /// The last edit of `path` undone, when the text before it is known.
    fn apply_undo(&mut self, path: &str, problems: &mut Vec<String>) -> Option<(String, Change)> {
        let previous = self.undo.get_mut(path).and_then(Vec::pop);
        match (previous, self.files.get(path).cloned()) {
            (Some(previous), Some(current)) if previous.first_line == current.first_line => {
                let diff = unified_diff(
                    path,
                    Change::Modified,
                    &current.text,
                    &previous.text,
                    current.first_line,
                    self.clock,
                );
                self.renumber_outline(path, current.first_line, &current.text, &previous.text);
                self.keep(path, previous);
                Some((diff, Change::Modified))
            }
            _ => {
                problems.push(format!(
                    "undo of an edit to {path} whose earlier text is not known: ignored"
                ));
                None
            }
        }
    }

    /// The file removed: its whole text diffed away when known.
    fn apply_delete(&mut self, path: &str) -> (String, Change) {
        self.forget_outline(path);
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
            unified_diff(path, Change::Deleted, &old_text, "", 1, self.clock)
        };
        (diff, Change::Deleted)
    }
}

/// [`capped`], noting a cut text in `problems` (`what` names the edit:
/// "write to", "insert into").
fn capped_noting<'t>(
    text: &'t str,
    what: &str,
    path: &str,
    problems: &mut Vec<String>,
) -> (&'t str, bool) {
    let (text, was_cut) = capped(text);
    if was_cut {
        problems.push(format!(
            "{what} {path} longer than {MAX_EDIT_BYTES} bytes: its first lines diffed"
        ));
    }
    (text, was_cut)
}

/// `text` with each occurrence of `old` replaced by `new`, the first
/// [`MAX_REPLACEMENTS`] of them.
fn replace_all(text: &str, old: &str, new: &str) -> String {
    let mut replaced = String::with_capacity(text.len());
    let mut rest = text;
    let mut count = 0;
    while let Some(at) = rest.find(old) {
        if count >= MAX_REPLACEMENTS {
            break;
        }
        replaced.push_str(rest.get(..at).unwrap_or(""));
        replaced.push_str(new);
        rest = rest.get(at + old.len()..).unwrap_or("");
        count += 1;
    }
    replaced.push_str(rest);
    replaced
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
