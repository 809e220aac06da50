//! The `apply_patch` format (Codex and others): `*** Begin Patch`, then per
//! file `*** Add File: p` (lines with `+`), `*** Delete File: p`, or
//! `*** Update File: p` (optionally `*** Move to: q`) with `@@ [context]`
//! chunks of ` `, `-` and `+` lines, up to `*** End Patch`. An update chunk
//! becomes a replacement of its old lines by its new lines, placed by the
//! workspace in what the session showed of the file.

use super::{EditOp, FileEdit};
use crate::ingest::text::{contains_str, lines_with_offsets};

/// Files read of one patch.
const MAX_PATCH_FILES: usize = 64;
/// Chunks read per file.
const MAX_CHUNKS_PER_FILE: usize = 64;

/// The edits of every `*** Begin Patch` ... `*** End Patch` in `text`
/// (byte ranges relative to `text` plus `base`).
pub fn patch_edits(text: &str, base: usize, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let mut edits = Vec::new();
    if !contains_str!(text, "*** Begin Patch") {
        return edits;
    }
    #[derive(PartialEq)]
    enum State {
        Outside,
        Add,
        Update,
        Between,
    }
    let mut state = State::Outside;
    let mut path = String::new();
    let mut move_to: Option<String> = None;
    let mut added = String::new();
    let mut old = String::new();
    let mut new = String::new();
    let mut chunks = 0usize;
    let mut file_start = 0usize;
    let mut last_end = 0usize;
    let mut files = 0usize;
    let mut ended = true;

    let flush_chunk = |edits: &mut Vec<FileEdit>,
                       path: &str,
                       old: &mut String,
                       new: &mut String,
                       chunks: &mut usize,
                       start: usize,
                       end: usize| {
        if (!old.is_empty() || !new.is_empty()) && *chunks < MAX_CHUNKS_PER_FILE {
            *chunks += 1;
            let op = if old.is_empty() {
                EditOp::Insert {
                    after_line: 0,
                    text: std::mem::take(new),
                }
            } else {
                EditOp::Replace {
                    old: std::mem::take(old),
                    new: std::mem::take(new),
                    all: false,
                }
            };
            edits.push(FileEdit {
                path: path.to_string(),
                op,
                start: base + start,
                end: base + end,
            });
        }
        old.clear();
        new.clear();
    };

    for line in lines_with_offsets(text) {
        if files >= MAX_PATCH_FILES {
            break;
        }
        let content = line.text;
        if content.trim_end() == "*** Begin Patch" {
            state = State::Between;
            ended = false;
            continue;
        }
        if state == State::Outside {
            continue;
        }
        let header = content.strip_prefix("*** ");
        let is_file_header = header.is_some_and(|rest| {
            rest.starts_with("Add File:")
                || rest.starts_with("Update File:")
                || rest.starts_with("Delete File:")
                || rest.trim_end() == "End Patch"
        });
        if is_file_header || content.trim_end() == "*** End of File" {
            // Close what is open.
            match state {
                State::Add => {
                    edits.push(FileEdit {
                        path: path.clone(),
                        op: EditOp::Write {
                            content: std::mem::take(&mut added),
                            create: true,
                        },
                        start: base + file_start,
                        end: base + last_end,
                    });
                    files += 1;
                }
                State::Update if is_file_header => {
                    flush_chunk(
                        &mut edits,
                        &path,
                        &mut old,
                        &mut new,
                        &mut chunks,
                        file_start,
                        last_end,
                    );
                    if let Some(target) = move_to.take() {
                        edits.push(FileEdit {
                            path: target,
                            op: EditOp::Write {
                                content: String::new(),
                                create: true,
                            },
                            start: base + file_start,
                            end: base + last_end,
                        });
                    }
                    files += 1;
                }
                _ => {}
            }
            if content.trim_end() == "*** End of File" {
                continue;
            }
        }
        let Some(rest) = header else {
            match state {
                State::Add => {
                    added.push_str(content.strip_prefix('+').unwrap_or(content));
                    added.push('\n');
                }
                State::Update => {
                    if content.starts_with("@@") {
                        flush_chunk(
                            &mut edits,
                            &path,
                            &mut old,
                            &mut new,
                            &mut chunks,
                            file_start,
                            last_end,
                        );
                    } else if let Some(removed) = content.strip_prefix('-') {
                        old.push_str(removed);
                        old.push('\n');
                    } else if let Some(inserted) = content.strip_prefix('+') {
                        new.push_str(inserted);
                        new.push('\n');
                    } else {
                        let context = content.strip_prefix(' ').unwrap_or(content);
                        old.push_str(context);
                        old.push('\n');
                        new.push_str(context);
                        new.push('\n');
                    }
                }
                _ => {}
            }
            last_end = line.end;
            continue;
        };
        last_end = line.end;
        if let Some(target) = rest.strip_prefix("Add File:") {
            state = State::Add;
            path = target.trim().to_string();
            file_start = line.start;
        } else if let Some(target) = rest.strip_prefix("Update File:") {
            state = State::Update;
            path = target.trim().to_string();
            chunks = 0;
            file_start = line.start;
        } else if let Some(target) = rest.strip_prefix("Delete File:") {
            state = State::Between;
            edits.push(FileEdit {
                path: target.trim().to_string(),
                op: EditOp::Delete,
                start: base + line.start,
                end: base + line.end,
            });
            files += 1;
        } else if let Some(target) = rest.strip_prefix("Move to:") {
            move_to = Some(target.trim().to_string());
        } else if rest.trim_end() == "End Patch" {
            state = State::Outside;
            ended = true;
        }
    }
    if !ended {
        problems.push("apply_patch without *** End Patch: read up to the end".to_string());
        match state {
            State::Add => edits.push(FileEdit {
                path: path.clone(),
                op: EditOp::Write {
                    content: added,
                    create: true,
                },
                start: base + file_start,
                end: base + last_end,
            }),
            State::Update => flush_chunk(
                &mut edits,
                &path,
                &mut old,
                &mut new,
                &mut chunks,
                file_start,
                last_end,
            ),
            _ => {}
        }
    }
    edits.retain(|edit| !edit.path.is_empty());
    edits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_update_move_and_delete() {
        let patch = "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n*** Update File: src/app.py\n@@ def main():\n     x = 1\n-    return x\n+    return x + 1\n*** Delete File: old.txt\n*** End Patch\n";
        let mut problems = Vec::new();
        let edits = patch_edits(patch, 0, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let ops: Vec<(&str, &EditOp)> = edits.iter().map(|e| (e.path.as_str(), &e.op)).collect();
        assert_eq!(
            ops,
            vec![
                (
                    "docs/new.md",
                    &EditOp::Write {
                        content: "# New\n".to_string(),
                        create: true
                    }
                ),
                (
                    "src/app.py",
                    &EditOp::Replace {
                        old: "    x = 1\n    return x\n".to_string(),
                        new: "    x = 1\n    return x + 1\n".to_string(),
                        all: false
                    }
                ),
                ("old.txt", &EditOp::Delete),
            ]
        );
    }

    #[test]
    fn an_unterminated_patch_is_reported_and_kept() {
        let mut problems = Vec::new();
        let edits = patch_edits(
            "*** Begin Patch\n*** Update File: a.rs\n@@\n-fn a() {}\n+fn b() {}\n",
            0,
            &mut problems,
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(edits.len(), 1);
    }
}
