//! SWE-agent's windowed file editor, the tools its runs used before
//! `str_replace_editor`: `open` / `goto` / `create` show a window of the open
//! file (`[File: PATH (N lines total)]`, then `12:text` lines, then
//! `(Open file: PATH)`), and edits act on that open file: `edit START:END`
//! followed by the new lines and `end_of_edit` (line range replaced), or, as
//! function calls, `edit` with `search` / `replace` and `insert` with `text`
//! and `line`. What the window showed places the edit, as a `cat -n` view
//! does for other editors.

use super::views::longest_numbered_run;
use super::{EditOp, FileEdit};
use crate::text::{contains_str, lines_with_offsets};
use crate::toolcall::ToolCall;

/// Line-range edits read per message.
const MAX_RANGE_EDITS: usize = 16;
/// Window lines read per observation.
const MAX_WINDOW_LINES: usize = 2_000;

/// The path of a window header `[File: PATH (N lines total)]`, if the
/// observation shows one.
pub(crate) fn window_path(observation: &str) -> Option<&str> {
    if !contains_str!(observation, "[File: ") {
        return None;
    }
    lines_with_offsets(observation)
        .take(MAX_WINDOW_LINES)
        .find_map(|line| {
            let rest = line.text.trim().strip_prefix("[File: ")?;
            let rest = rest.strip_suffix(" lines total)]")?;
            let (path, _) = rest.rsplit_once(" (")?;
            Some(path.trim())
        })
        .filter(|path| !path.is_empty())
}

/// The file named by an `(Open file: PATH)` line (SWE-agent's prompt state).
pub(crate) fn open_file(observation: &str) -> Option<&str> {
    if !contains_str!(observation, "(Open file: ") {
        return None;
    }
    state_values(observation, "(Open file: ")
        .last()
        .map(str::trim)
        .filter(|path| !path.is_empty() && *path != "n/a")
}

/// The directory of a `(Current directory: DIR)` line, the first a session
/// shows being the repository's root.
pub(crate) fn current_directory(observation: &str) -> Option<&str> {
    if !contains_str!(observation, "(Current directory: ") {
        return None;
    }
    state_values(observation, "(Current directory: ")
        .next()
        .map(str::trim)
}

/// The values of the prompt state lines `LABEL VALUE)` (`label` from the
/// opening parenthesis to the space after the colon), in order.
fn state_values<'o>(observation: &'o str, label: &'static str) -> impl Iterator<Item = &'o str> {
    lines_with_offsets(observation)
        .filter_map(move |line| line.text.trim().strip_prefix(label)?.strip_suffix(')'))
}

/// The `12:text` lines after a window header: the longest run of
/// consecutive numbers.
pub(crate) fn window_lines(observation: &str) -> Vec<(usize, &str)> {
    let mut after_header = false;
    let lines = lines_with_offsets(observation)
        .take(MAX_WINDOW_LINES)
        .filter_map(|line| {
            // Lines up to a window header, and the header, take no part.
            if line.text.trim_start().starts_with("[File: ") {
                after_header = true;
                return None;
            }
            if !after_header || is_cursor_marker(line.text) {
                // The cursors variant marks the selected lines between
                // window lines: the run goes on across its markers.
                return None;
            }
            let digits = line.text.bytes().take_while(u8::is_ascii_digit).count();
            let number = line
                .text
                .get(..digits)
                .and_then(|digits| digits.parse::<usize>().ok());
            let content = line
                .text
                .get(digits..)
                .and_then(|rest| rest.strip_prefix(':'));
            Some(number.zip(content))
        });
    longest_numbered_run(lines)
}

/// A cursor marker line of the windowed editor's cursors variant
/// (`<<<<< START CURSOR >>>>>`, `<<<<< END CURSOR >>>>>`).
fn is_cursor_marker(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.starts_with("<<<<< ") && trimmed.ends_with(" CURSOR >>>>>")
}

/// The part of an observation that shows the file as it is: after a refused
/// edit, the linter shows the edit as it would have looked, then "the
/// original code before your edit", which is the file's text.
pub(crate) fn current_text_part(observation: &str) -> &str {
    if !contains_str!(observation, "This is the original code before your edit") {
        return observation;
    }
    observation
        .find("This is the original code before your edit")
        .and_then(|at| observation.get(at..))
        .unwrap_or(observation)
}

/// The lines a `set_cursors START END` command of `message` selects (the
/// last one), which a bare `edit` then replaces.
pub(crate) fn cursors(message: &str) -> Option<(usize, usize)> {
    if !contains_str!(message, "set_cursors ") {
        return None;
    }
    lines_with_offsets(message)
        .filter_map(|line| {
            let mut words = line
                .text
                .trim()
                .strip_prefix("set_cursors ")?
                .split_whitespace();
            let first = words.next()?.parse::<usize>().ok()?;
            let last = words.next()?.parse::<usize>().ok()?;
            (first >= 1 && last + 1 >= first).then_some((first, last))
        })
        .last()
}

/// `edit START:END` ... `end_of_edit` blocks of an agent message (or a bare
/// `edit` over the lines `cursors` select), as edits of `open_file`.
pub(crate) fn range_edits(
    message: &str,
    open_file: &str,
    cursors: Option<(usize, usize)>,
) -> Vec<FileEdit> {
    let mut edits = Vec::new();
    if !contains_str!(message, "end_of_edit") {
        return edits;
    }
    let lines: Vec<_> = lines_with_offsets(message).collect();
    let mut index = 0;
    while index < lines.len() && edits.len() < MAX_RANGE_EDITS {
        let Some(line) = lines.get(index) else { break };
        let range = range_of(line.text)
            .or_else(|| (line.text.trim() == "edit").then_some(cursors).flatten());
        let Some((first, last)) = range else {
            index += 1;
            continue;
        };
        let Some(offset) = lines.get(index + 1..).and_then(|rest| {
            rest.iter()
                .position(|line| line.text.trim() == "end_of_edit")
        }) else {
            break;
        };
        let end_row = index + 1 + offset;
        let mut text = String::new();
        for body in lines.get(index + 1..end_row).unwrap_or(&[]) {
            text.push_str(body.text);
            text.push('\n');
        }
        edits.push(FileEdit {
            path: open_file.to_string(),
            op: EditOp::ReplaceLines { first, last, text },
            start: line.start,
            end: lines.get(end_row).map_or(message.len(), |line| line.end),
        });
        index = end_row + 1;
    }
    edits
}

/// `edit 12:14` -> `(12, 14)`.
fn range_of(line: &str) -> Option<(usize, usize)> {
    let range = line.trim().strip_prefix("edit ")?.trim();
    let (first, last) = range.split_once(':')?;
    let first = first.trim().parse::<usize>().ok()?;
    let last = last.trim().parse::<usize>().ok()?;
    (first >= 1 && last + 1 >= first).then_some((first, last))
}

/// A windowed editor's function call (`edit` with `search`, `insert` with
/// `text`) as an edit of `open_file`; `None` for any other call.
pub(crate) fn call_edit(call: &ToolCall, open_file: &str) -> Option<FileEdit> {
    let at = |op: EditOp| FileEdit {
        path: open_file.to_string(),
        op,
        start: call.start,
        end: call.end,
    };
    if call.is_named(&["edit"])
        && !call.arguments.contains_key("path")
        && let Some(search) = call.string(&["search"])
    {
        let replace = call.string(&["replace"]).unwrap_or("");
        let all = call
            .arguments
            .get("replace-all")
            .or_else(|| call.arguments.get("replace_all"))
            .is_some_and(|flag| flag.as_bool() == Some(true) || flag.as_str() == Some("true"));
        return Some(at(EditOp::Replace {
            old: search.to_string(),
            new: replace.to_string(),
            all,
        }));
    }
    if call.is_named(&["edit"])
        && let Some(text) = call.string(&["replacement_text"])
    {
        let line = |key: &str| {
            call.arguments.get(key).and_then(|line| {
                line.as_u64()
                    .or_else(|| line.as_str().and_then(|text| text.trim().parse().ok()))
                    .and_then(|line| usize::try_from(line).ok())
            })
        };
        let (first, last) = (line("start_line")?, line("end_line")?);
        return (first >= 1 && last + 1 >= first).then(|| {
            at(EditOp::ReplaceLines {
                first,
                last,
                text: text.to_string(),
            })
        });
    }
    if call.is_named(&["insert"]) && !call.arguments.contains_key("path") {
        let text = call.string(&["text"])?;
        let line = call.arguments.get("line").and_then(|line| {
            line.as_u64()
                .or_else(|| line.as_str().and_then(|text| text.trim().parse().ok()))
        })?;
        return Some(at(EditOp::Insert {
            after_line: usize::try_from(line).ok()?,
            text: text.to_string(),
        }));
    }
    None
}

/// The file a windowed `create` makes (and opens): a call with `filename`, or
/// a `create FILE` command.
pub(crate) fn created_file<'a>(
    call: Option<&'a ToolCall>,
    command: Option<&'a str>,
) -> Option<&'a str> {
    if let Some(call) = call {
        return call
            .is_named(&["create"])
            .then(|| call.string(&["filename"]))
            .flatten();
    }
    let mut words = command?.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        // `create filename="x.py"` is a call's summary, not the command.
        (Some("create"), Some(file), None) if !file.contains('=') => {
            Some(file.trim_matches(['"', '\'']))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: &str = "[File: /repo/src/fields.py (1997 lines total)]\n(1456 more lines above)\n1457:    def f(self):\n1458:        return 1\n1459:\n(538 more lines below)\n(Open file: /repo/src/fields.py)\n(Current directory: /repo)\nbash-$";

    #[test]
    fn window_views_and_the_open_file() {
        assert_eq!(window_path(WINDOW), Some("/repo/src/fields.py"));
        assert_eq!(open_file(WINDOW), Some("/repo/src/fields.py"));
        assert_eq!(
            window_lines(WINDOW),
            vec![
                (1457, "    def f(self):"),
                (1458, "        return 1"),
                (1459, "")
            ]
        );
        assert_eq!(open_file("(Open file: n/a)"), None);
        assert!(window_lines("12:not a window\n13:either").is_empty());
    }

    #[test]
    fn cursor_markers_do_not_cut_the_window() {
        // marshmallow-1867, cursors variant: the markers sit between window lines.
        let window = "[File: /repo/src/marshmallow/fields.py (1997 lines total)]\n(1373 more lines above)\n1421:class TimeDelta(Field):\n1422:    def _serialize(self, value, attr, obj, **kwargs):\n<<<<< START CURSOR >>>>>\n1423:        return int(value.total_seconds())\n<<<<< END CURSOR >>>>>\n1424:\n(573 more lines below)";
        let lines = window_lines(window);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[0], (1421, "class TimeDelta(Field):"));
        assert_eq!(lines[3], (1424, ""));
    }

    #[test]
    fn a_refused_edit_shows_the_original_code_as_the_file() {
        // pydicom-1458: the linter refused the edit; the first window is the
        // edit as it would have looked, the second the file as it is.
        let observation = "Your proposed edit has introduced new syntax error(s).\n\nThis is how your edit would have looked if applied\n-------------------------------------------------\n[File: /repo/numpy_handler.py (373 lines total)]\n(285 more lines above)\n286:\n287:        'BitsAllocated', 'Rows'\n288:    ]\n(85 more lines below)\n-------------------------------------------------\n\nThis is the original code before your edit\n-------------------------------------------------\n[File: /repo/numpy_handler.py (372 lines total)]\n(285 more lines above)\n286:\n287:    required_elements = [\n288:        'BitsAllocated', 'Rows',\n(84 more lines below)\n-------------------------------------------------\nYour changes have NOT been applied.";
        assert_eq!(
            window_lines(current_text_part(observation)),
            vec![
                (286, ""),
                (287, "    required_elements = ["),
                (288, "        'BitsAllocated', 'Rows',")
            ]
        );
        assert_eq!(current_text_part(WINDOW), WINDOW);
    }

    #[test]
    fn line_range_edits_of_the_open_file() {
        let message = "Fix the return.\n```\nedit 1458:1458\n        return 2\nend_of_edit\n```";
        let edits = range_edits(message, "/repo/src/fields.py", None);
        assert_eq!(edits.len(), 1);
        assert_eq!(
            edits[0].op,
            EditOp::ReplaceLines {
                first: 1458,
                last: 1458,
                text: "        return 2\n".to_string()
            }
        );
        // No end marker, or no range: nothing.
        assert!(range_edits("edit 3:4\nx = 1\n", "a.py", None).is_empty());
        assert!(range_edits("edit the file\nend_of_edit\n", "a.py", None).is_empty());
        // A bare `edit` replaces the lines the cursors select.
        let message = "set_cursors 7 8\n```\nedit\ny = 2\nend_of_edit\n```";
        let edits = range_edits(message, "a.py", cursors(message));
        assert_eq!(
            edits[0].op,
            EditOp::ReplaceLines {
                first: 7,
                last: 8,
                text: "y = 2\n".to_string()
            }
        );
        assert!(range_edits("edit\ny = 2\nend_of_edit\n", "a.py", None).is_empty());
    }
}
