//! Claude Code project logs (`~/.claude/projects/<project>/<session>.jsonl`):
//! one JSON event per line. `user` and `assistant` events carry
//! `message.content`, a string or parts (`text`, `tool_use` {id, name,
//! input}, `tool_result` {tool_use_id, content, is_error}); summaries,
//! progress, snapshots, system events and meta lines (`isMeta`) are
//! skipped, and so are `thinking` parts.
//!
//! One event is one message, except that consecutive assistant events of
//! one model response (the same `message.id`, written a block a line) make
//! one message: a transcript that grows only appends messages.

use serde_json::Value;

use super::render::{Messages, content_text, timestamp_of};
use precedent_core::domain::Role;
use precedent_core::tool::render::{render_call_or_command, render_result};

/// The messages of the events (complete JSON lines) of one transcript.
#[cfg(test)]
pub fn messages(events: &[Value]) -> Messages {
    messages_after(events, &mut false)
}

/// The messages of some events of one transcript, read in turn:
/// `cwd_given` tells whether an earlier part gave the working directory
/// already (the first user message carries it), and is set once given.
pub fn messages_after(events: &[Value], cwd_given: &mut bool) -> Messages {
    let mut messages = Messages::default();
    let mut pending: Option<(String, Vec<String>, Option<i64>)> = None;
    for event in events {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(kind, "user" | "assistant")
            || event.get("isMeta").and_then(Value::as_bool) == Some(true)
        {
            continue;
        }
        let Some(message) = event.get("message") else {
            continue;
        };
        let timestamp = timestamp_of(event.get("timestamp"));
        let content = message.get("content").unwrap_or(&Value::Null);
        if kind == "assistant" {
            let response_id = message
                .get("id")
                .and_then(Value::as_str)
                .or_else(|| event.get("uuid").and_then(Value::as_str))
                .unwrap_or("")
                .to_string();
            let parts = assistant_parts(content);
            match &mut pending {
                Some((id, texts, _)) if !id.is_empty() && *id == response_id => {
                    texts.extend(parts);
                }
                _ => {
                    flush(&mut messages, pending.take());
                    pending = Some((response_id, parts, timestamp));
                }
            }
            continue;
        }
        flush(&mut messages, pending.take());
        let mut text = user_text(content);
        if !*cwd_given && let Some(cwd) = event.get("cwd").and_then(Value::as_str) {
            // The working directory, in the form Codex writes it, for ingest's root.
            text = format!("<environment_context><cwd>{cwd}</cwd></environment_context>\n{text}");
            *cwd_given = true;
        }
        messages.push(Role::User, &text, timestamp);
    }
    flush(&mut messages, pending.take());
    messages
}

/// What an event is to the grouping of events into messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unit {
    /// Not a message (progress, summaries, meta lines).
    Skipped,
    /// A user message of its own.
    User,
    /// A block of the model response with this id (blocks of one
    /// non-empty id in a row make one message).
    Response(String),
}

/// What `event` is to [`messages`]: the same rules, one event at a time.
pub fn unit_of(event: &Value) -> Unit {
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
    if !matches!(kind, "user" | "assistant")
        || event.get("isMeta").and_then(Value::as_bool) == Some(true)
    {
        return Unit::Skipped;
    }
    let Some(message) = event.get("message") else {
        return Unit::Skipped;
    };
    if kind == "user" {
        return Unit::User;
    }
    let response_id = message
        .get("id")
        .and_then(Value::as_str)
        .or_else(|| event.get("uuid").and_then(Value::as_str))
        .unwrap_or("");
    Unit::Response(response_id.to_string())
}

fn flush(messages: &mut Messages, pending: Option<(String, Vec<String>, Option<i64>)>) {
    if let Some((_, texts, timestamp)) = pending {
        messages.push(Role::Assistant, &texts.join("\n\n"), timestamp);
    }
}

/// An assistant event's parts as texts: text, and tool calls rendered.
fn assistant_parts(content: &Value) -> Vec<String> {
    let Value::Array(parts) = content else {
        return vec![content_text(content)];
    };
    parts
        .iter()
        .filter_map(|part| match part.get("type").and_then(Value::as_str) {
            Some("text") => part.get("text").and_then(Value::as_str).map(str::to_string),
            Some("tool_use" | "server_tool_use") => {
                let name = part.get("name").and_then(Value::as_str).unwrap_or("tool");
                Some(render_call_or_command(
                    name,
                    part.get("input").unwrap_or(&Value::Null),
                ))
            }
            _ => None,
        })
        .filter(|text| !text.trim().is_empty())
        .collect()
}

/// A user event's text: what the person wrote, and tool results (each its
/// output, `ERROR:` first when the tool failed).
fn user_text(content: &Value) -> String {
    let Value::Array(parts) = content else {
        return content_text(content);
    };
    parts
        .iter()
        .filter_map(|part| match part.get("type").and_then(Value::as_str) {
            Some("text") => part.get("text").and_then(Value::as_str).map(str::to_string),
            Some("tool_result") => {
                let output = content_text(part.get("content").unwrap_or(&Value::Null));
                let is_error = part.get("is_error").and_then(Value::as_bool) == Some(true);
                Some(render_result(&output, is_error))
            }
            _ => None,
        })
        .filter(|text| !text.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Whether the events look like a Claude Code log.
pub fn detect(events: &[Value]) -> bool {
    events.iter().take(50).any(|event| {
        matches!(
            event.get("type").and_then(Value::as_str),
            Some("user" | "assistant")
        ) && event.get("message").is_some_and(Value::is_object)
    })
}

/// The session id the log names (`sessionId`), if any.
pub fn session_id(events: &[Value]) -> Option<String> {
    events.iter().find_map(|event| {
        event
            .get("sessionId")
            .and_then(Value::as_str)
            .filter(|id| !id.trim().is_empty())
            .map(str::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(events: &[Value], expected: &[(Role, &str)]) {
        let got: Vec<(Role, String)> = messages(events).turns();
        let expected: Vec<(Role, String)> = expected
            .iter()
            .map(|(role, text)| (*role, text.to_string()))
            .collect();
        assert_eq!(got, expected);
    }

    /// The record extracted from a Claude Code fixture, as the importer
    /// renders its messages.
    fn fixture_record(name: &str) -> precedent_ingest::SessionRecord {
        let path = format!(
            "{}/fixtures/transcripts/claude-code/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(path).expect("fixture");
        let events: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("json line"))
            .collect();
        let messages = messages(&events).turns();
        let ingest: Vec<precedent_ingest::IngestMessage<'_>> =
            precedent_ingest::IngestMessage::in_order(
                messages.iter().map(|(role, text)| (*role, text.as_str())),
            );
        precedent_ingest::extract_session(&ingest, precedent_ingest::Clock::Ignored).0
    }

    /// Issue 40's hand-written session (`fixtures/transcripts/claude-code/
    /// issue-40-tmp-inventory.jsonl`): a checkout under `/tmp` where `git
    /// status` ran, an Edit inside `restock` with no Read before it, a
    /// pytest run printing `8 passed`, a failed `ls`.
    #[test]
    fn a_session_under_tmp_records_definitions_tests_and_exit_codes() {
        let record = fixture_record("issue-40-tmp-inventory.jsonl");
        assert_eq!(record.files_changed, vec!["inventory/stock.py"]);
        assert_eq!(record.symbols_changed, vec!["restock"]);
        assert_eq!(
            record.tests.last_run,
            Some(precedent_ingest::TestCounts {
                passed: 8,
                failed: 0
            })
        );
        let exit_codes: Vec<Option<i32>> = record
            .commands
            .iter()
            .map(|command| command.exit_code)
            .collect();
        assert_eq!(exit_codes, vec![Some(0), Some(0), Some(2)]);
    }

    /// A real Claude Code run (SWE-ContextBench, sympy-20049): it clones
    /// the repository into `testbed`, writes and runs `test_issue.py` and
    /// `test_debug.py` at the checkout's root, and its `git add -A` + `git
    /// diff --cached` shows them beside the fix. Only the fix is recorded,
    /// without the scripts' names among the changed definitions.
    #[test]
    fn a_real_session_records_the_fix_not_the_scripts_its_diff_showed() {
        let record = fixture_record("swe-contextbench-sympy-20049.jsonl");
        assert_eq!(record.files_changed, vec!["sympy/physics/vector/point.py"]);
        assert!(
            record
                .symbols_changed
                .iter()
                .all(|symbol| symbol.contains("vel") || symbol == "Point"),
            "{:?}",
            record.symbols_changed
        );
    }

    #[test]
    fn the_working_directory_opens_the_first_user_message() {
        check(
            &[
                json!({"type": "user", "cwd": "/home/ann/shop", "message": {"content": "fix it"}}),
                json!({"type": "user", "cwd": "/home/ann/shop", "message": {"content": "and the test"}}),
            ],
            &[
                (
                    Role::User,
                    "<environment_context><cwd>/home/ann/shop</cwd></environment_context>\nfix it",
                ),
                (Role::User, "and the test"),
            ],
        );
    }

    #[test]
    fn one_response_written_a_block_a_line_is_one_message() {
        check(
            &[
                json!({"type": "summary", "summary": "Fix it"}),
                json!({"type": "user", "message": {"role": "user", "content": "tests fail"}}),
                json!({"type": "assistant", "message": {"id": "m1", "content": [{"type": "thinking", "thinking": "hm"}]}}),
                json!({"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": "Running them."}]}}),
                json!({"type": "assistant", "message": {"id": "m1", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -x"}}]}}),
                json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1 failed", "is_error": true}]}}),
                json!({"type": "user", "isMeta": true, "message": {"content": "<local-command-caveat>"}}),
                json!({"type": "assistant", "message": {"id": "m2", "content": [{"type": "tool_use", "id": "t2", "name": "Edit", "input": {"file_path": "a.py", "old_string": "x", "new_string": "y"}}]}}),
                json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "ok"}]}]}}),
            ],
            &[
                (Role::User, "tests fail"),
                (Role::Assistant, "Running them.\n\n```bash\npytest -x\n```"),
                (Role::User, "ERROR: 1 failed"),
                (
                    Role::Assistant,
                    r#"{"name": "Edit", "arguments": {"file_path":"a.py","new_string":"y","old_string":"x"}}"#,
                ),
                (Role::User, "ok"),
            ],
        );
    }
}
