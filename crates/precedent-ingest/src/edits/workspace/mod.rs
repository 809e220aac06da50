//! What the session has shown of each file, and edits placed in it: numbered
//! views (`cat -n`, an editor `view`, a `Read` result) are kept per file as one
//! run of lines with the number of its first line; an edit whose old text is
//! found in the run is diffed there (real line numbers, the real enclosing
//! definition) and the run updated, so later edits land in the edited text.
//! Without a view, an edit is diffed on its own text.
//!
//! A view that overlaps or touches the known run extends it; a view apart
//! from it replaces it, and the lines it held go to the file's [`Outline`]
//! (the sparse model of what else was seen: earlier windows, search results,
//! traceback frames), from which a later view that reaches them takes them
//! back and a diff takes the definition enclosing a change when the run does
//! not show it.
//!
//! Bounded: files kept, bytes kept per file and in all, undo depth.
//!
//! `apply` places an edit in the known text and renders its diff.

mod apply;

use std::collections::HashMap;

use super::outline::Outline;
use super::render::{Change, Surroundings, unified_diff_in};
use crate::Clock;

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
pub(crate) const MAX_EDIT_BYTES: usize = 256 * 1024;
/// Occurrences replaced by one `replace_all` edit.
const MAX_REPLACEMENTS: usize = 1_000;
/// Bytes kept of all files' outlines.
const MAX_TOTAL_OUTLINE_BYTES: usize = 4 * 1024 * 1024;
/// Outline lines above a text that a diff looks through.
const MAX_LINES_ABOVE: usize = 2_000;

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
pub(crate) struct RenderedEdit {
    /// The file (normalized path).
    pub path: String,
    /// The unified diff (may be empty when the edit changed nothing).
    pub diff: String,
    /// What the edit did to the file.
    pub change: Change,
}

/// The files the session has shown and edited.
#[derive(Debug, Default, Clone)]
pub(crate) struct Workspace {
    files: HashMap<String, KnownText>,
    undo: HashMap<String, Vec<KnownText>>,
    total_bytes: usize,
    /// What was seen of each file outside its known run.
    outlines: HashMap<String, Outline>,
    /// Bytes held by `outlines`.
    outline_bytes: usize,
    /// What the time limit of line diffs reads.
    clock: Clock,
}

impl Workspace {
    /// An empty workspace whose line diffs are timed by `clock`.
    pub(crate) fn new(clock: Clock) -> Workspace {
        Workspace {
            clock,
            ..Workspace::default()
        }
    }

    /// Bytes of file text held, undo copies included.
    pub(crate) fn held_bytes(&self) -> usize {
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
            + self.outline_bytes
    }

    /// Keeps a numbered view of `path` (lines `(number, text)` in order).
    pub(crate) fn observe_view(&mut self, path: &str, lines: &[(usize, &str)]) {
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
        let last_line = first_line + lines.len() - 1;
        // The known run, when it overlaps or touches the view, around it.
        let mut before: Vec<String> = Vec::new();
        let mut after: Vec<String> = Vec::new();
        let mut run = (first_line, last_line);
        if let Some(existing) = self.files.get(path).cloned()
            && !existing.whole
        {
            let existing_count = existing.text.lines().count();
            let existing_last = (existing.first_line + existing_count).saturating_sub(1);
            if existing_count > 0
                && existing.first_line <= last_line + 1
                && first_line <= existing_last + 1
            {
                for (row, line) in existing.text.lines().enumerate() {
                    let number = existing.first_line + row;
                    if number < first_line {
                        before.push(line.to_string());
                    } else if number > last_line {
                        after.push(line.to_string());
                    }
                }
                run = (
                    existing.first_line.min(first_line),
                    existing_last.max(last_line),
                );
            } else {
                let numbered: Vec<(usize, &str)> = existing
                    .text
                    .lines()
                    .enumerate()
                    .map(|(row, line)| (existing.first_line + row, line))
                    .collect();
                self.outline_lines(path, &numbered);
            }
        }
        // Lines of the outline that continue the run join it.
        let mut prefix: Vec<String> = Vec::new();
        let mut suffix: Vec<String> = Vec::new();
        self.with_outline(path, |outline| {
            while run.0 > 1
                && let Some(line) = outline.take_line(run.0 - 1)
            {
                prefix.push(line);
                run.0 -= 1;
            }
            while let Some(line) = outline.take_line(run.1 + 1) {
                suffix.push(line);
                run.1 += 1;
            }
            outline.forget_lines(run.0, run.1);
        });
        prefix.reverse();
        let view = lines.iter().map(|(_, line)| *line);
        let all = prefix
            .iter()
            .chain(&before)
            .map(String::as_str)
            .chain(view.clone())
            .chain(after.iter().chain(&suffix).map(String::as_str));
        let merged_bytes: usize = all.clone().map(|line| line.len() + 1).sum();
        let (first, text) = if merged_bytes <= MAX_FILE_BYTES {
            (run.0, lines_text(all))
        } else {
            (first_line, lines_text(view))
        };
        self.keep(
            path,
            KnownText {
                first_line: first,
                text,
                whole: false,
            },
        );
    }

    /// Keeps numbered lines of `path` seen outside a view (search results):
    /// those outside the known run go to its outline.
    pub(crate) fn observe_lines(&mut self, path: &str, lines: &[(usize, &str)]) {
        let run = self.files.get(path).map(|known| {
            (
                known.first_line,
                known.first_line + known.text.lines().count(),
            )
        });
        let outside: Vec<(usize, &str)> = lines
            .iter()
            .filter(|(number, _)| run.is_none_or(|(first, end)| *number < first || *number >= end))
            .copied()
            .collect();
        self.outline_lines(path, &outside);
    }

    /// Notes that a traceback ran line `line` of `path` inside `function`.
    pub(crate) fn observe_frame(&mut self, path: &str, line: usize, function: &str) {
        self.with_outline(path, |outline| outline.add_anchor(line, function));
    }

    fn outline_lines(&mut self, path: &str, lines: &[(usize, &str)]) {
        let mut budget = MAX_TOTAL_OUTLINE_BYTES.saturating_sub(self.outline_bytes);
        self.with_outline(path, |outline| {
            for (number, line) in lines {
                if line.len() > budget || !outline.add_line(*number, line) {
                    break;
                }
                budget -= line.len();
            }
        });
    }

    /// Runs `change` on the outline of `path` (made if the bound on files
    /// allows), keeping the count of bytes held.
    fn with_outline(&mut self, path: &str, change: impl FnOnce(&mut Outline)) {
        if !self.outlines.contains_key(path) && self.outlines.len() >= MAX_FILES {
            return;
        }
        let outline = self.outlines.entry(path.to_string()).or_default();
        let held = outline.held_bytes();
        change(outline);
        self.outline_bytes = self.outline_bytes - held + outline.held_bytes();
    }

    /// What the outline of `path` knows around lines `first_line..first_line + count`.
    fn surroundings(&self, path: &str, first_line: usize, count: usize) -> Surroundings<'_> {
        self.outlines
            .get(path)
            .map(|outline| Surroundings {
                above: outline.above(first_line, MAX_LINES_ABOVE),
                anchors: outline.anchors_in(first_line, first_line + count.max(1) - 1),
            })
            .unwrap_or_default()
    }

    /// Renumbers the outline of `path` after `old` (starting at line
    /// `first_line`) became `new`.
    fn renumber_outline(&mut self, path: &str, first_line: usize, old: &str, new: &str) {
        if self.outlines.get(path).is_none_or(Outline::is_empty) {
            return;
        }
        let (first, removed, added) = changed_lines(old, new);
        self.with_outline(path, |outline| {
            outline.replaced(first_line + first, removed, added);
        });
    }

    fn forget_outline(&mut self, path: &str) {
        if let Some(outline) = self.outlines.remove(path) {
            self.outline_bytes -= outline.held_bytes().min(self.outline_bytes);
        }
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
        let diff = unified_diff_in(
            path,
            Change::Modified,
            &known.text,
            &replaced,
            known.first_line,
            &self.surroundings(path, known.first_line, known.text.lines().count()),
            self.clock,
        );
        self.renumber_outline(path, known.first_line, &known.text, &replaced);
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
    pub(crate) fn knows(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }
}

/// Lines joined, each ending in `\n`.
fn lines_text<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// The lines `old` -> `new` changed: `(first row, rows removed, rows added)`
/// between their common first and last lines.
fn changed_lines(old: &str, new: &str) -> (usize, usize, usize) {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let common_start = old_lines
        .iter()
        .zip(&new_lines)
        .take_while(|(a, b)| a == b)
        .count();
    let common_end = old_lines
        .iter()
        .rev()
        .zip(new_lines.iter().rev())
        .take_while(|(a, b)| a == b)
        .count()
        .min(old_lines.len().min(new_lines.len()) - common_start);
    (
        common_start,
        old_lines.len() - common_start - common_end,
        new_lines.len() - common_start - common_end,
    )
}

#[cfg(test)]
mod tests {
    use super::super::{EditOp, FileEdit};
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

    fn insert(path: &str, after_line: usize, text: &str) -> FileEdit {
        edit(
            path,
            EditOp::Insert {
                after_line,
                text: text.to_string(),
            },
        )
    }

    #[test]
    fn a_view_inside_the_known_run_keeps_the_function_header_above_it() {
        // ponyc-4588: the whole function was viewed, then lines 314..317
        // alone; the insert after 316 still names make_pattern_type (its
        // `{` on a line of its own closes no scope).
        let mut workspace = Workspace::default();
        let path = "src/libponyc/expr/match.c";
        workspace.observe_view(
            path,
            &[
                (
                    282,
                    "static ast_t* make_pattern_type(pass_opt_t* opt, ast_t* pattern)",
                ),
                (283, "{"),
                (284, "  switch(ast_id(pattern))"),
                (285, "  {"),
                (286, "    case TK_DONTCAREREF:"),
                (287, "    case TK_MATCH_DONTCARE:"),
                (288, "      return pattern_type;"),
                (289, ""),
            ],
        );
        workspace.observe_view(
            path,
            &[
                (286, "    case TK_DONTCAREREF:"),
                (287, "    case TK_MATCH_DONTCARE:"),
                (288, "      return pattern_type;"),
            ],
        );
        let rendered = workspace
            .apply(
                &insert(
                    path,
                    287,
                    "      if (iso) pattern_type = trn(pattern_type);",
                ),
                &mut Vec::new(),
            )
            .expect("rendered");
        assert!(
            rendered
                .diff
                .contains("@@ -282,8 +282,9 @@\n static ast_t* make_pattern_type("),
            "{}",
            rendered.diff
        );
    }

    #[test]
    fn a_class_line_seen_in_a_search_names_the_hunk_of_a_later_window() {
        // marshmallow-1867: the window the edit is made from starts inside
        // TimeDelta; `search_file` showed the class line earlier.
        let mut workspace = Workspace::default();
        let path = "src/marshmallow/fields.py";
        workspace.observe_lines(path, &[(1421, "class TimeDelta(Field):")]);
        workspace.observe_view(
            path,
            &[
                (1468, "        self.precision = precision"),
                (1469, ""),
                (
                    1470,
                    "    def _serialize(self, value, attr, obj, **kwargs):",
                ),
                (
                    1471,
                    "        base_unit = dt.timedelta(**{self.precision: 1})",
                ),
                (
                    1472,
                    "        return int(value.total_seconds() / base_unit.total_seconds())",
                ),
                (1473, ""),
            ],
        );
        let rendered = workspace
            .apply(
                &edit(
                    path,
                    EditOp::ReplaceLines {
                        first: 1472,
                        last: 1472,
                        text: "        return int(round(value.total_seconds()))".to_string(),
                    },
                ),
                &mut Vec::new(),
            )
            .expect("rendered");
        assert!(
            rendered
                .diff
                .contains(" @@ class TimeDelta(Field):\n \n     def _serialize("),
            "{}",
            rendered.diff
        );
    }

    #[test]
    fn a_traceback_frame_names_the_function_of_an_edit_below_its_header() {
        // pydicom-1458: the window starts inside get_pixeldata; the
        // traceback ran line 293 in it.
        let mut workspace = Workspace::default();
        let path = "pydicom/pixel_data_handlers/numpy_handler.py";
        workspace.observe_frame(path, 293, "get_pixeldata");
        workspace.observe_view(
            path,
            &[
                (287, "    required_elements = ["),
                (288, "        'BitsAllocated', 'PixelRepresentation',"),
                (289, "    ]"),
                (290, "    missing = [elem for elem in required_elements]"),
                (291, "    if missing:"),
                (292, "        raise AttributeError("),
                (293, "            'missing: ' + ', '.join(missing)"),
                (294, "        )"),
            ],
        );
        let rendered = workspace
            .apply(
                &edit(
                    path,
                    EditOp::ReplaceLines {
                        first: 288,
                        last: 288,
                        text: "        'BitsAllocated',".to_string(),
                    },
                ),
                &mut Vec::new(),
            )
            .expect("rendered");
        assert!(
            rendered.diff.contains("@@ def get_pixeldata(...)\n"),
            "{}",
            rendered.diff
        );
        // A frame in another function (a definition line between) names nothing.
        let mut workspace = Workspace::default();
        workspace.observe_frame(path, 4, "other");
        workspace.observe_view(
            path,
            &[
                (1, "    x = 1"),
                (2, "def other():"),
                (3, "    y = 2"),
                (4, "    return y"),
            ],
        );
        let rendered = workspace
            .apply(
                &edit(
                    path,
                    EditOp::ReplaceLines {
                        first: 1,
                        last: 1,
                        text: "    x = 2".to_string(),
                    },
                ),
                &mut Vec::new(),
            )
            .expect("rendered");
        assert!(!rendered.diff.contains("other(...)"), "{}", rendered.diff);
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
