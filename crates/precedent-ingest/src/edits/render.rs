//! Renders an edit as a unified diff with `similar`: `--- a/path` /
//! `+++ b/path` headers and `@@` hunks numbered from the line the old text
//! starts at. A hunk's context reaches back to the definition enclosing its
//! first change (when the text holds it, within a bound), and its header names
//! the type around that definition, as git's function context does, so the
//! diff path finds `Table.update_many` rather than `Table`.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use similar::{Algorithm, ChangeTag, TextDiff};

use crate::Clock;
use crate::symbols::{DefinitionKind, line_definition};
use precedent_core::language::LineScan;

/// Context lines around each change.
const CONTEXT_LINES: usize = 3;
/// Lines a hunk's context may reach back to include its enclosing definition.
const MAX_DEFINITION_LOOK_BACK: usize = 120;
/// Lines looked back for the type that encloses that definition.
const MAX_TYPE_LOOK_BACK: usize = 2_000;
/// Time the diff algorithm may take, when the caller passes a clock, before
/// it settles for a coarser diff: only for texts of more than
/// [`MAX_UNTIMED_DIFF_LINES`].
const MAX_DIFF_TIME: Duration = Duration::from_millis(20);
/// Lines of the two texts together up to which the diff runs to the end
/// whatever the clock says: its work is bounded by their square, and a
/// wall-clock limit would make a loaded machine record a coarser diff.
const MAX_UNTIMED_DIFF_LINES: usize = 2_000;

/// What the diff does to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// The file is new (`--- /dev/null`).
    Added,
    /// The file existed and is edited.
    Modified,
    /// The file is removed (`+++ /dev/null`).
    Deleted,
}

/// What is known of a file around the text diffed, from its outline: lines
/// seen above it, and functions tracebacks say enclose its lines.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Surroundings<'a> {
    /// Lines above the text (`(number, text)`, nearest first; gaps allowed).
    pub above: Vec<(usize, &'a str)>,
    /// `(line, function)`: a traceback ran line `line` of the old text inside `function`.
    pub anchors: Vec<(usize, &'a str)>,
}

/// The unified diff of `old` -> `new` for `path`, where `old` starts at line
/// `first_line` (1-based) of the file; the diff algorithm's time limit reads
/// `clock`. Empty when nothing changed.
pub(crate) fn unified_diff(
    path: &str,
    change: Change,
    old: &str,
    new: &str,
    first_line: usize,
    clock: Clock,
) -> String {
    unified_diff_in(
        path,
        change,
        old,
        new,
        first_line,
        &Surroundings::default(),
        clock,
    )
}

/// Lines of `text`, as the line diff splits it (a last line without its
/// newline counts).
fn line_count(text: &str) -> usize {
    let newlines = text.bytes().filter(|&byte| byte == b'\n').count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// [`unified_diff`], with what is known around the text: a hunk whose
/// enclosing definition or type is above the text takes its header from the
/// lines seen there, or from a traceback frame inside the text.
pub(crate) fn unified_diff_in(
    path: &str,
    change: Change,
    old: &str,
    new: &str,
    first_line: usize,
    surroundings: &Surroundings<'_>,
    clock: Clock,
) -> String {
    let mut config = TextDiff::configure();
    config.algorithm(Algorithm::Myers);
    if let Some(deadline) = clock.deadline(MAX_DIFF_TIME)
        && line_count(old) + line_count(new) > MAX_UNTIMED_DIFF_LINES
    {
        config.deadline(deadline);
    }
    let diff = config.diff_lines(old, new);
    let groups = diff.grouped_ops(CONTEXT_LINES);
    let mut out = String::new();
    if groups.is_empty() && change == Change::Modified {
        return out;
    }
    write_file_header(&mut out, path, change);
    let new_lines: Vec<&str> = diff.iter_new_slices().collect();
    let old_lines: Vec<&str> = diff.iter_old_slices().collect();
    let context = HunkContext {
        old_lines: &old_lines,
        new_lines: &new_lines,
        family: LineScan::from_path(path),
        first_line,
        surroundings,
    };
    let mut previous_new_end = 0usize;
    for group in &groups {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let mut old_start = first.old_range().start;
        let mut new_start = first.new_range().start;
        let old_end = last.old_range().end;
        let new_end = last.new_range().end;
        let (definition_row, type_line) = context.enclosing(group, new_start, old_start);
        // The context reaches back to the enclosing definition, within a
        // bound and not into the previous hunk.
        let mut extra: &[&str] = &[];
        if let Some(row) = definition_row
            && row < new_start
            && row >= previous_new_end
            && new_start - row <= MAX_DEFINITION_LOOK_BACK
        {
            extra = new_lines.get(row..new_start).unwrap_or(&[]);
            old_start -= extra.len().min(old_start);
            new_start = row;
        }
        previous_new_end = new_end;
        let header = type_line.as_deref().map(str::trim).unwrap_or("");
        write_hunk_header(
            &mut out,
            (
                old_start + first_line.saturating_sub(1),
                old_end - old_start,
            ),
            (
                new_start + first_line.saturating_sub(1),
                new_end - new_start,
            ),
            header,
        );
        for line in extra {
            push_line(&mut out, ' ', line);
        }
        for op in group {
            write_changes(&mut out, &diff, op);
        }
    }
    out
}

/// The lines of one operation of the diff, each with its marker.
fn write_changes(out: &mut String, diff: &TextDiff<'_, '_, str>, op: &similar::DiffOp) {
    for change in diff.iter_changes(op) {
        let marker = match change.tag() {
            ChangeTag::Equal => ' ',
            ChangeTag::Delete => '-',
            ChangeTag::Insert => '+',
        };
        push_line(out, marker, change.value());
    }
}

/// `diff --git`, the mode line of an added or deleted file, and the
/// `---` / `+++` lines.
fn write_file_header(out: &mut String, path: &str, change: Change) {
    let old_header = match change {
        Change::Added => "/dev/null".to_string(),
        _ => format!("a/{path}"),
    };
    let new_header = match change {
        Change::Deleted => "/dev/null".to_string(),
        _ => format!("b/{path}"),
    };
    let _ = writeln!(out, "diff --git a/{path} b/{path}");
    match change {
        Change::Added => out.push_str("new file mode 100644\n"),
        Change::Deleted => out.push_str("deleted file mode 100644\n"),
        Change::Modified => {}
    }
    let _ = writeln!(out, "--- {old_header}\n+++ {new_header}");
}

/// `@@ -a,b +c,d @@ header` for sides `(start row in the file, length)`
/// (a side's first line is numbered from 1 unless it is empty).
fn write_hunk_header(out: &mut String, old: (usize, usize), new: (usize, usize), header: &str) {
    let first_number = |(start, length): (usize, usize)| {
        if length == 0 { start } else { start + 1 }
    };
    let _ = writeln!(
        out,
        "@@ -{},{} +{},{} @@{}{}",
        first_number(old),
        old.1,
        first_number(new),
        new.1,
        if header.is_empty() { "" } else { " " },
        header,
    );
}

/// What a diff's hunks look through for their enclosing definition and type.
struct HunkContext<'d, 's> {
    old_lines: &'d [&'d str],
    new_lines: &'d [&'d str],
    /// How definitions are written in the file, if it is code.
    family: Option<LineScan>,
    /// The line of the file the old text starts at.
    first_line: usize,
    surroundings: &'d Surroundings<'s>,
}

impl<'d, 's> HunkContext<'d, 's> {
    /// The row (of the new text) of the definition enclosing the hunk's
    /// first change, and the line naming the type around it (from the text,
    /// the lines seen above it, or a traceback frame inside it).
    fn enclosing(
        &self,
        group: &[similar::DiffOp],
        new_start: usize,
        old_start: usize,
    ) -> (Option<usize>, Option<Cow<'d, str>>)
    where
        's: 'd,
    {
        let Some(family) = self.family else {
            return (None, None);
        };
        // The first changed line on the new side (or where removal happened).
        let change_row = group
            .iter()
            .find(|op| op.tag() != similar::DiffTag::Equal)
            .map_or(new_start, |op| op.new_range().start);
        let old_change_row = group
            .iter()
            .find(|op| op.tag() != similar::DiffTag::Equal)
            .map_or(old_start, |op| op.old_range().start);
        let (definition_row, found) = enclosing(self.new_lines, change_row, family);
        let header = match found {
            Found::Type(line) => Some(Cow::Borrowed(line)),
            Found::Open(limit) => {
                outer_header(self.surroundings, limit, definition_row.is_none(), family).or_else(
                    || {
                        definition_row
                            .is_none()
                            .then(|| {
                                anchored_function(
                                    self.old_lines,
                                    old_change_row,
                                    self.first_line,
                                    self.surroundings,
                                    family,
                                )
                            })
                            .flatten()
                    },
                )
            }
            Found::Closed => None,
        };
        (definition_row, header)
    }
}

fn push_line(out: &mut String, marker: char, line: &str) {
    out.push(marker);
    out.push_str(line.strip_suffix('\n').unwrap_or(line));
    out.push('\n');
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// A line that neither opens nor closes a scope for the look back: blank,
/// or a lone brace under a C-style header (`static int f(void)` then `{` at
/// column 0 is still inside `f`).
fn opens_nothing(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.is_empty() || trimmed == "{"
}

/// One step of a look back: a line less indented than `limit` (which it
/// lowers to its own indentation) encloses what is below it; what it
/// defines, if anything. Other lines enclose nothing.
fn enclosing_definition(line: &str, limit: &mut usize, family: LineScan) -> Option<DefinitionKind> {
    if opens_nothing(line) {
        return None;
    }
    let indent = indentation(line);
    if indent >= *limit {
        return None;
    }
    *limit = indent;
    line_definition(line, family, indent == 0).map(|(kind, _)| kind)
}

/// How the look back from a change ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found<'a> {
    /// The type enclosing the change (its line).
    Type(&'a str),
    /// The top of the text was reached with scopes still open: lines less
    /// indented than this may enclose the change.
    Open(usize),
    /// Nothing more encloses the change (column 0 reached, or the bound).
    Closed,
}

/// The row of the definition enclosing `row` (a line above it, less
/// indented, that defines something) and the line of the type enclosing
/// that definition, looking back a bounded number of lines.
fn enclosing<'a>(lines: &[&'a str], row: usize, family: LineScan) -> (Option<usize>, Found<'a>) {
    let Some(changed) = lines
        .iter()
        .skip(row)
        .take(8)
        .find(|line| !line.trim().is_empty())
    else {
        return (None, Found::Closed);
    };
    let mut limit = indentation(changed);
    let mut definition_row = None;
    let lowest = row.saturating_sub(MAX_TYPE_LOOK_BACK);
    let mut candidate = row;
    while candidate > lowest && limit > 0 {
        candidate -= 1;
        let Some(line) = lines.get(candidate) else {
            break;
        };
        match enclosing_definition(line, &mut limit, family) {
            Some(DefinitionKind::Type) => return (definition_row, Found::Type(line)),
            Some(DefinitionKind::Function) if definition_row.is_none() => {
                definition_row = Some(candidate);
            }
            _ => {}
        }
    }
    if candidate == 0 && limit > 0 {
        (definition_row, Found::Open(limit))
    } else {
        (definition_row, Found::Closed)
    }
}

/// The look back continued in the lines seen above the text (`limit`: the
/// indentation an enclosing line must be under): the enclosing type's line,
/// else, when `want_function`, the enclosing function's.
fn outer_header<'a>(
    surroundings: &Surroundings<'a>,
    mut limit: usize,
    want_function: bool,
    family: LineScan,
) -> Option<Cow<'a, str>> {
    let mut function = None;
    for (_, line) in surroundings.above.iter().take(MAX_TYPE_LOOK_BACK) {
        if limit == 0 {
            break;
        }
        match enclosing_definition(line, &mut limit, family) {
            Some(DefinitionKind::Type) => return Some(Cow::Borrowed(*line)),
            Some(DefinitionKind::Function) if want_function && function.is_none() => {
                function = Some(Cow::Borrowed(*line));
            }
            _ => {}
        }
    }
    function
}

/// The function a traceback frame places inside the text and that also
/// encloses the change: from the frame's line to the change's (rows of
/// `old`, the change indented) every line is indented and none defines
/// anything. Python only: the header is written `def NAME(...)`, its
/// signature not being known.
fn anchored_function<'a>(
    old: &[&str],
    change_row: usize,
    first_line: usize,
    surroundings: &Surroundings<'a>,
    family: LineScan,
) -> Option<Cow<'a, str>> {
    if family != LineScan::Python {
        return None;
    }
    let changed_indent = old
        .get(change_row..)?
        .iter()
        .take(8)
        .find(|line| !line.trim().is_empty())
        .map(|line| indentation(line))?;
    if changed_indent == 0 {
        return None;
    }
    surroundings.anchors.iter().find_map(|(line, name)| {
        let anchor_row = line.checked_sub(first_line)?;
        let (low, high) = (change_row.min(anchor_row), change_row.max(anchor_row));
        let between = old.get(low..=high)?;
        let same_scope = between.iter().all(|line| {
            line.trim().is_empty()
                || (indentation(line) > 0 && line_definition(line, family, false).is_none())
        });
        (same_scope && crate::text::is_identifier(name))
            .then(|| Cow::Owned(format!("def {name}(...)")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_in_a_method_reaches_back_to_it_and_names_its_class() {
        let old = "class Table:\n    def update_many(self, rows):\n        a = 1\n        b = 2\n        c = 3\n        d = 4\n        return rows\n";
        let new = old.replace("return rows", "return list(rows)");
        let diff = unified_diff(
            "pkg/table.py",
            Change::Modified,
            old,
            &new,
            10,
            Clock::Ignored,
        );
        assert_eq!(
            diff,
            "diff --git a/pkg/table.py b/pkg/table.py\n--- a/pkg/table.py\n+++ b/pkg/table.py\n@@ -11,6 +11,6 @@ class Table:\n     def update_many(self, rows):\n         a = 1\n         b = 2\n         c = 3\n         d = 4\n-        return rows\n+        return list(rows)\n"
        );
    }

    #[test]
    fn a_new_file_is_all_added() {
        let diff = unified_diff("x.py", Change::Added, "", "a = 1\n", 1, Clock::Ignored);
        assert!(
            diff.contains("--- /dev/null\n+++ b/x.py\n@@ -0,0 +1,1 @@\n+a = 1\n"),
            "{diff}"
        );
    }

    #[test]
    fn nothing_changed_renders_nothing() {
        assert_eq!(
            unified_diff("x.py", Change::Modified, "a\n", "a\n", 1, Clock::Ignored),
            ""
        );
    }
}
