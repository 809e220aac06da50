//! Aider's edit blocks in an agent message: a path line, then (usually in a
//! fence) `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE`, or the older
//! `<<<<<<< ORIGINAL` / `=======` / `>>>>>>> UPDATED`; and whole-file edits (a
//! path line followed by a fence holding the file). A block without its end
//! marker is reported, and what it holds is kept as far as it goes.

use super::{EditOp, FileEdit};
use crate::text::{contains_str, fenced_blocks, lines_with_offsets};

/// Edit blocks read per message.
const MAX_BLOCKS: usize = 64;

/// A block's marker line: seven or more `mark`s (ASCII), then one of
/// `words`.
fn is_marker(line: &str, mark: char, words: &[&str]) -> bool {
    let trimmed = line.trim();
    let rest = trimmed.trim_start_matches(mark);
    trimmed.len() - rest.len() >= 7 && words.contains(&rest.trim())
}

fn is_head(line: &str) -> bool {
    is_marker(line, '<', &["SEARCH", "ORIGINAL", "HEAD"])
}

fn is_divider(line: &str) -> bool {
    line.trim() == "======="
}

fn is_tail(line: &str) -> bool {
    is_marker(line, '>', &["REPLACE", "UPDATED", "updated"])
}

/// Whether `line` looks like a bare file path (what aider writes above a block).
pub(crate) fn looks_like_path(line: &str) -> bool {
    let trimmed = line.trim().trim_matches('`').trim_matches('*').trim();
    let trimmed = trimmed.strip_suffix(':').unwrap_or(trimmed);
    !trimmed.is_empty()
        && trimmed.len() <= 300
        && !trimmed.contains(' ')
        && !trimmed.starts_with('#')
        && !trimmed.starts_with("```")
        && trimmed.contains('.')
        && trimmed
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '\\' | '+' | '@'))
        && trimmed
            .rsplit('/')
            .next()
            .and_then(|name| name.rsplit_once('.'))
            .is_some_and(|(stem, extension)| {
                !extension.is_empty()
                    && extension.len() <= 8
                    && extension.chars().all(|c| c.is_ascii_alphanumeric())
                    && !stem.is_empty()
            })
}

fn clean_path(line: &str) -> String {
    let trimmed = line.trim().trim_matches('`').trim_matches('*').trim();
    trimmed.strip_suffix(':').unwrap_or(trimmed).to_string()
}

/// SEARCH/REPLACE edits in `message`; problems pushed to `problems`.
pub(crate) fn search_replace_edits(message: &str, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let mut edits = Vec::new();
    if !contains_str!(message, "<<<<<<<") {
        return edits;
    }
    let lines: Vec<_> = lines_with_offsets(message).collect();
    let mut last_path: Option<String> = None;
    let mut index = 0;
    while index < lines.len() && edits.len() < MAX_BLOCKS {
        let Some(line) = lines.get(index) else { break };
        if !is_head(line.text) {
            if looks_like_path(line.text) {
                last_path = Some(clean_path(line.text));
            }
            index += 1;
            continue;
        }
        let head = index;
        let mut divider = None;
        let mut tail = None;
        let mut cursor = index + 1;
        while let Some(candidate) = lines.get(cursor) {
            if divider.is_none() && is_divider(candidate.text) {
                divider = Some(cursor);
            } else if divider.is_some() && is_tail(candidate.text) {
                tail = Some(cursor);
                break;
            } else if is_head(candidate.text) {
                break;
            }
            cursor += 1;
        }
        let Some(path) = last_path.clone() else {
            problems.push("edit block without a file path above it: skipped".to_string());
            index = cursor.max(index + 1);
            continue;
        };
        let join = |from: usize, to: usize| -> String {
            let mut text = String::new();
            for line in lines.get(from..to).unwrap_or(&[]) {
                text.push_str(line.text);
                text.push('\n');
            }
            text
        };
        let start = lines.get(head).map_or(0, |line| line.start);
        match (divider, tail) {
            (Some(divider), Some(tail)) => {
                edits.push(FileEdit {
                    path: path.clone(),
                    op: edit_op(join(head + 1, divider), join(divider + 1, tail)),
                    start,
                    end: lines.get(tail).map_or(message.len(), |line| line.end),
                });
                index = tail + 1;
            }
            _ => {
                problems.push(format!(
                    "unterminated SEARCH/REPLACE block for {path}: kept up to where it stops"
                ));
                let end_row = cursor.min(lines.len());
                let (old, new) = match divider {
                    Some(divider) => (join(head + 1, divider), join(divider + 1, end_row)),
                    None => (join(head + 1, end_row), String::new()),
                };
                // Closing fence lines are not part of the code.
                let strip_fence = |text: String| -> String {
                    let trimmed = text.trim_end_matches('\n');
                    match trimmed.rsplit_once('\n') {
                        Some((before, last)) if last.trim_start().starts_with("```") => {
                            format!("{before}\n")
                        }
                        None if trimmed.trim_start().starts_with("```") => String::new(),
                        _ => text,
                    }
                };
                if divider.is_some() {
                    edits.push(FileEdit {
                        path,
                        op: edit_op(old, strip_fence(new)),
                        start,
                        end: lines
                            .get(end_row.saturating_sub(1))
                            .map_or(message.len(), |line| line.end),
                    });
                }
                index = end_row.max(index + 1);
            }
        }
    }
    edits
}

fn edit_op(old: String, new: String) -> EditOp {
    if old.trim().is_empty() {
        // An empty SEARCH creates the file (or appends to it).
        EditOp::Write {
            content: new,
            create: true,
        }
    } else {
        EditOp::Replace {
            old,
            new,
            all: false,
        }
    }
}

/// The tag fences aider uses instead of backticks when a file holds them
/// (`<source>` ... `</source>`), opening and closing.
const TAG_FENCES: [(&str, &str); 5] = [
    ("<source>", "</source>"),
    ("<code>", "</code>"),
    ("<pre>", "</pre>"),
    ("<codeblock>", "</codeblock>"),
    ("<sourcecode>", "</sourcecode>"),
];

/// Whole-file edits: a path line right above a fence whose text is the
/// file (aider's `whole` format; the fence is backticks or one of aider's
/// tag fences such as `<source>`). Only used when the message has no
/// SEARCH/REPLACE block and the fence is not a shell or diff block.
pub(crate) fn whole_file_edits(message: &str) -> Vec<FileEdit> {
    let mut edits = Vec::new();
    if contains_str!(message, "<<<<<<<") {
        return edits;
    }
    if contains_str!(message, "</") && TAG_FENCES.iter().any(|(_, close)| message.contains(close)) {
        edits.extend(tag_fenced_files(message));
    }
    for block in fenced_blocks(message) {
        if edits.len() >= MAX_BLOCKS {
            break;
        }
        let info = block.info.split_whitespace().next().unwrap_or("");
        if matches!(
            info,
            "diff" | "patch" | "bash" | "sh" | "shell" | "console" | "text" | "json" | "output"
        ) {
            continue;
        }
        let before = message.get(..block.fence_start).unwrap_or("");
        let Some(path_line) = before.trim_end_matches('\n').rsplit('\n').next() else {
            continue;
        };
        // The path must be the line right above the fence.
        if !before.ends_with('\n') || !looks_like_path(path_line) {
            continue;
        }
        let content = message
            .get(block.content_start..block.content_end)
            .unwrap_or("");
        if content.trim().is_empty() {
            continue;
        }
        edits.push(FileEdit {
            path: clean_path(path_line),
            op: EditOp::Write {
                content: content.to_string(),
                create: false,
            },
            start: block.fence_start,
            end: block.fence_end,
        });
    }
    edits
}

/// Whole files in aider's tag fences: a path line, the opening tag on the
/// next line, the file, the closing tag on a line of its own.
fn tag_fenced_files(message: &str) -> Vec<FileEdit> {
    let mut edits = Vec::new();
    let lines: Vec<_> = lines_with_offsets(message).collect();
    let mut index = 1;
    while index < lines.len() && edits.len() < MAX_BLOCKS {
        let (Some(path_line), Some(open)) = (lines.get(index - 1), lines.get(index)) else {
            break;
        };
        let Some((_, close)) = TAG_FENCES
            .iter()
            .find(|(opening, _)| open.text.trim() == *opening)
        else {
            index += 1;
            continue;
        };
        if !looks_like_path(path_line.text) {
            index += 1;
            continue;
        }
        let Some(offset) = lines
            .get(index + 1..)
            .and_then(|rest| rest.iter().position(|line| line.text.trim() == *close))
        else {
            break;
        };
        let close_row = index + 1 + offset;
        let content_start = lines
            .get(index + 1)
            .map_or(message.len(), |line| line.start);
        let content_end = lines
            .get(close_row)
            .map_or(message.len(), |line| line.start);
        let content = message.get(content_start..content_end).unwrap_or("");
        if !content.trim().is_empty() {
            edits.push(FileEdit {
                path: clean_path(path_line.text),
                op: EditOp::Write {
                    content: content.to_string(),
                    create: false,
                },
                start: open.start,
                end: lines.get(close_row).map_or(message.len(), |line| line.end),
            });
        }
        index = close_row + 1;
    }
    edits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_files_in_tag_fences() {
        let message = "Here it is.\n\nbackend/main.sh\n<source>\n#!/usr/bin/env bash\nexec uvicorn app:app\n</source>\n\nbackend/app.py\n<source>\nx = 1\n</source>\n";
        let edits = whole_file_edits(message);
        assert_eq!(edits.len(), 2);
        assert_eq!(edits[0].path, "backend/main.sh");
        assert_eq!(
            edits[1].op,
            EditOp::Write {
                content: "x = 1\n".to_string(),
                create: false
            }
        );
        // No path above the tag, or no closing tag: nothing.
        assert!(whole_file_edits("Look:\n<source>\nx = 1\n</source>\n").is_empty());
        assert!(whole_file_edits("a.py\n<source>\nx = 1\n").is_empty());
    }

    #[test]
    fn search_replace_blocks_with_their_path() {
        let message = "Change it.\n\nsympy/core/add.py\n```python\n<<<<<<< SEARCH\n    def f(self):\n        return 1\n=======\n    def f(self):\n        return 2\n>>>>>>> REPLACE\n```\n";
        let mut problems = Vec::new();
        let edits = search_replace_edits(message, &mut problems);
        assert!(problems.is_empty());
        assert_eq!(edits.len(), 1);
        assert_eq!(edits[0].path, "sympy/core/add.py");
        assert_eq!(
            edits[0].op,
            EditOp::Replace {
                old: "    def f(self):\n        return 1\n".to_string(),
                new: "    def f(self):\n        return 2\n".to_string(),
                all: false
            }
        );
    }

    #[test]
    fn the_older_original_updated_form() {
        let message = "app/models.py\n<<<<<<< ORIGINAL\nx = 1\n=======\nx = 2\n>>>>>>> UPDATED\n";
        let edits = search_replace_edits(message, &mut Vec::new());
        assert_eq!(edits.len(), 1);
        assert_eq!(edits[0].path, "app/models.py");
    }

    #[test]
    fn an_unterminated_block_is_reported_and_kept() {
        let message = "a.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n```\n";
        let mut problems = Vec::new();
        let edits = search_replace_edits(message, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            edits[0].op,
            EditOp::Replace {
                old: "x = 1\n".to_string(),
                new: "x = 2\n".to_string(),
                all: false
            }
        );
        // Without even a divider: reported, nothing invented.
        let mut problems = Vec::new();
        assert!(search_replace_edits("a.py\n<<<<<<< SEARCH\nx = 1\n", &mut problems).is_empty());
        assert_eq!(problems.len(), 1);
    }

    #[test]
    fn whole_file_edits_need_a_path_right_above_the_fence() {
        let message = "Here is the file:\n\nsrc/util.js\n```javascript\nexport const a = 1;\n```\n\n```bash\nnpm test\n```\n";
        let edits = whole_file_edits(message);
        assert_eq!(edits.len(), 1);
        assert_eq!(edits[0].path, "src/util.js");
        assert!(whole_file_edits("Run this:\n```python\nprint(1)\n```\n").is_empty());
    }
}
