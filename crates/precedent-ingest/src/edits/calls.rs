//! Which edits one tool call makes: a file editor's command, a `Write`, an
//! `Edit` or `MultiEdit`, a `NotebookEdit`, an `apply_patch` call.

use serde_json::Value;

use super::{EditOp, FileEdit, MAX_EDITS_PER_MESSAGE, apply_patch};
use crate::toolcall::ToolCall;
use precedent_core::tool::{self, ToolKind};

/// The edits one tool call makes (none for a call that only reads).
pub(crate) fn edits_of_call(call: &ToolCall, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let path = call.string(&tool::PATH_ARGUMENTS).unwrap_or("");
    match call.kind() {
        Some(ToolKind::Editor) => editor_edits(call, path, problems),
        Some(ToolKind::Patch) => patch_call_edits(call, problems),
        _ if path.is_empty() => Vec::new(),
        Some(ToolKind::Replace) => replace_edits(call, path, problems),
        Some(ToolKind::MultiReplace) => multi_replace_edits(call, path, problems),
        Some(ToolKind::Write) => vec![edit_at(
            call,
            path,
            EditOp::Write {
                content: string_argument(call, &["content", "file_text", "text"]),
                create: false,
            },
        )],
        Some(ToolKind::NotebookEdit) => vec![notebook_edit(call, path)],
        _ => Vec::new(),
    }
}

/// An edit of `path` that spans the whole call.
fn edit_at(call: &ToolCall, path: &str, op: EditOp) -> FileEdit {
    FileEdit {
        path: path.to_string(),
        op,
        start: call.start,
        end: call.end,
    }
}

/// The string argument under the first of `keys` that holds one, or "".
fn string_argument(call: &ToolCall, keys: &[&str]) -> String {
    call.string(keys).map(str::to_string).unwrap_or_default()
}

/// A file editor's edit, by its `command`.
fn editor_edits(call: &ToolCall, path: &str, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let command = call.string(&["command"]).unwrap_or("");
    if path.is_empty() {
        if command != "view" {
            problems.push(format!("{} {command} without a path: skipped", call.name));
        }
        return Vec::new();
    }
    match command {
        "create" | "write" => vec![edit_at(
            call,
            path,
            EditOp::Write {
                content: string_argument(call, &["file_text", "content"]),
                create: true,
            },
        )],
        "str_replace" if call.string(&["old_str"]).is_none() => {
            problems.push(format!(
                "{} str_replace of {path} without old_str: skipped",
                call.name
            ));
            Vec::new()
        }
        "str_replace" => vec![edit_at(
            call,
            path,
            EditOp::Replace {
                old: string_argument(call, &["old_str"]),
                new: string_argument(call, &["new_str"]),
                all: false,
            },
        )],
        "insert" => {
            let after_line = match call.arguments.get("insert_line") {
                Some(Value::Number(number)) => number.as_u64(),
                Some(Value::String(text)) => text.trim().parse().ok(),
                _ => None,
            };
            match after_line {
                Some(line) => vec![edit_at(
                    call,
                    path,
                    EditOp::Insert {
                        after_line: usize::try_from(line).unwrap_or(usize::MAX / 2),
                        text: string_argument(call, &["new_str", "text"]),
                    },
                )],
                None => {
                    problems.push(format!("insert into {path} without insert_line: skipped"));
                    Vec::new()
                }
            }
        }
        "undo_edit" => vec![edit_at(call, path, EditOp::Undo)],
        _ => Vec::new(),
    }
}

/// Claude Code's `Edit`: one replacement.
fn replace_edits(call: &ToolCall, path: &str, problems: &mut Vec<String>) -> Vec<FileEdit> {
    if let Some(missing) = ["old_string", "new_string"]
        .into_iter()
        .find(|key| call.string(&[key]).is_none())
    {
        problems.push(format!("Edit of {path} without {missing}: skipped"));
        return Vec::new();
    }
    vec![edit_at(
        call,
        path,
        EditOp::Replace {
            old: string_argument(call, &["old_string"]),
            new: string_argument(call, &["new_string"]),
            all: call
                .arguments
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        },
    )]
}

/// `MultiEdit`: a replacement per item of its `edits`.
fn multi_replace_edits(call: &ToolCall, path: &str, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let Some(Value::Array(items)) = call.arguments.get("edits") else {
        problems.push(format!(
            "MultiEdit of {path} without an edits list: skipped"
        ));
        return Vec::new();
    };
    items
        .iter()
        .take(MAX_EDITS_PER_MESSAGE)
        .filter_map(|item| {
            let old = item.get("old_string").and_then(Value::as_str)?;
            let new = item.get("new_string").and_then(Value::as_str).unwrap_or("");
            Some(edit_at(
                call,
                path,
                EditOp::Replace {
                    old: old.to_string(),
                    new: new.to_string(),
                    all: item
                        .get("replace_all")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                },
            ))
        })
        .collect()
}

/// `NotebookEdit`: the cell's new source, or its removal.
fn notebook_edit(call: &ToolCall, path: &str) -> FileEdit {
    let source = string_argument(call, &["new_source"]);
    let mode = call.string(&["edit_mode"]).unwrap_or("replace");
    let op = if mode == "delete" {
        EditOp::Replace {
            old: source,
            new: String::new(),
            all: false,
        }
    } else {
        // The cell's old source is not in the call: its new source is the change.
        EditOp::Insert {
            after_line: 0,
            text: source,
        }
    };
    edit_at(call, path, op)
}

/// `apply_patch`: the edits of its patch, each spanning the call.
fn patch_call_edits(call: &ToolCall, problems: &mut Vec<String>) -> Vec<FileEdit> {
    let text = call
        .string(&tool::PATCH_ARGUMENTS)
        .map(str::to_string)
        .or_else(|| {
            call.arguments
                .get("cmd")
                .and_then(Value::as_array)
                .and_then(|parts| parts.last())
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default();
    apply_patch::patch_edits(&text, 0, problems)
        .into_iter()
        .map(|edit| FileEdit {
            start: call.start,
            end: call.end,
            ..edit
        })
        .collect()
}

/// An empty file made by SWE-agent's `create FILE`.
pub(super) fn created_empty(path: &str, start: usize, end: usize) -> FileEdit {
    FileEdit {
        path: path.to_string(),
        op: EditOp::Write {
            content: String::new(),
            create: true,
        },
        start,
        end,
    }
}
