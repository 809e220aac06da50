//! Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`):
//! lines `{timestamp, type, payload}` where `session_meta` names the
//! session and `response_item` holds a `message`, a `function_call`
//! {name, arguments (a JSON string), call_id} or its `function_call_output`
//! {call_id, output}, a `custom_tool_call` (apply_patch) or a
//! `local_shell_call`. Older rollouts are flat: a first line `{id,
//! timestamp, instructions}`, then the items themselves. Event messages
//! (`event_msg`, which repeat the items), turn contexts, reasoning and the
//! instructions Codex injects as user messages are skipped.

use serde_json::Value;

use super::render::{Messages, content_text, parse_arguments, timestamp_of};
use precedent_core::domain::Role;
use precedent_core::tool::render::{render_call_or_command, render_result};

/// User messages Codex writes itself, not the person.
const INJECTED_PREFIXES: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
];

/// The messages of the lines of one rollout.
#[cfg(test)]
pub fn messages(lines: &[Value]) -> Messages {
    messages_after(lines, &mut Cwd::default())
}

/// The working directory of a rollout (`session_meta` / `turn_context`),
/// given to its first user message as Codex's own `<environment_context>`
/// form, across the parts a rollout is read in.
#[derive(Debug, Default)]
pub struct Cwd {
    cwd: Option<String>,
    /// The first user message was given (by this part or an earlier read).
    given: bool,
}

impl Cwd {
    /// For a read that resumes after the rollout's first user message.
    pub fn given() -> Cwd {
        Cwd {
            cwd: None,
            given: true,
        }
    }
}

/// The messages of some lines of one rollout, read in turn.
pub fn messages_after(lines: &[Value], state: &mut Cwd) -> Messages {
    let mut messages = Messages::default();
    for line in lines {
        if state.cwd.is_none()
            && matches!(
                line.get("type").and_then(Value::as_str),
                Some("session_meta" | "turn_context")
            )
        {
            state.cwd = line
                .pointer("/payload/cwd")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        let (item, timestamp) = match line.get("type").and_then(Value::as_str) {
            Some("response_item") => (
                line.get("payload").unwrap_or(&Value::Null),
                timestamp_of(line.get("timestamp")),
            ),
            Some("session_meta" | "event_msg" | "turn_context" | "compacted") => continue,
            _ => (line, timestamp_of(line.get("timestamp"))),
        };
        let cwd_for_user = if state.given {
            None
        } else {
            state.cwd.as_deref()
        };
        state.given |= add_item(&mut messages, item, timestamp, cwd_for_user);
    }
    messages
}

/// Adds the item's message; answers whether it was the person's (which
/// `cwd`, when given, opens).
fn add_item(
    messages: &mut Messages,
    item: &Value,
    timestamp: Option<i64>,
    cwd: Option<&str>,
) -> bool {
    let text_field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
    match item.get("type").and_then(Value::as_str) {
        Some("message") => {
            let text = content_text(item.get("content").unwrap_or(&Value::Null));
            match text_field("role") {
                "user" => {
                    let trimmed = text.trim_start();
                    if !INJECTED_PREFIXES
                        .iter()
                        .any(|prefix| trimmed.starts_with(prefix))
                    {
                        let text = match cwd {
                            Some(cwd) => format!(
                                "<environment_context><cwd>{cwd}</cwd></environment_context>\n{text}"
                            ),
                            None => text,
                        };
                        messages.push(Role::User, &text, timestamp);
                        return true;
                    }
                }
                "assistant" => messages.push(Role::Assistant, &text, timestamp),
                _ => {}
            }
        }
        Some("function_call") => {
            let arguments = parse_arguments(item.get("arguments").unwrap_or(&Value::Null));
            let name = match text_field("name") {
                "" => "tool",
                name => name,
            };
            messages.push(
                Role::Assistant,
                &render_call_or_command(name, &arguments),
                timestamp,
            );
        }
        Some("custom_tool_call") => {
            let name = match text_field("name") {
                "" => "tool",
                name => name,
            };
            let input = item.get("input").cloned().unwrap_or(Value::Null);
            let arguments = serde_json::json!({ "input": input });
            messages.push(
                Role::Assistant,
                &render_call_or_command(name, &arguments),
                timestamp,
            );
        }
        Some("local_shell_call") => {
            let command = item
                .pointer("/action/command")
                .cloned()
                .unwrap_or(Value::Null);
            let arguments = serde_json::json!({ "command": command });
            messages.push(
                Role::Assistant,
                &render_call_or_command("shell", &arguments),
                timestamp,
            );
        }
        Some("function_call_output" | "custom_tool_call_output" | "local_shell_call_output") => {
            let (output, is_error) = output_text(item.get("output").unwrap_or(&Value::Null));
            messages.push_result(&output, is_error, timestamp);
        }
        _ => {}
    }
    false
}

/// A tool output: a string, or a JSON string `{"output": ..., "metadata":
/// {"exit_code": N}}`, shown as mini-swe-agent shows an observation when
/// the exit code is known.
fn output_text(output: &Value) -> (String, bool) {
    let parsed = match output {
        Value::String(text) => serde_json::from_str::<Value>(text).ok(),
        Value::Object(_) => Some(output.clone()),
        _ => None,
    };
    if let Some(object) = parsed
        .as_ref()
        .filter(|value| value.get("output").is_some())
    {
        let text = content_text(object.get("output").unwrap_or(&Value::Null));
        let exit_code = object
            .pointer("/metadata/exit_code")
            .and_then(Value::as_i64);
        return match exit_code {
            Some(code) => (
                format!("<returncode>{code}</returncode>\n<output>\n{text}\n</output>"),
                false,
            ),
            None => (text, false),
        };
    }
    match output {
        Value::Object(object) => {
            let failed = object.get("success").and_then(Value::as_bool) == Some(false);
            (
                content_text(object.get("content").unwrap_or(output)),
                failed,
            )
        }
        other => (tool_result_text(other), false),
    }
}

fn tool_result_text(value: &Value) -> String {
    let text = content_text(value);
    if text.is_empty() {
        render_result("", false)
    } else {
        text
    }
}

/// Whether the lines look like a Codex rollout.
pub fn detect(lines: &[Value]) -> bool {
    lines
        .iter()
        .take(50)
        .any(|line| match line.get("type").and_then(Value::as_str) {
            Some("session_meta" | "response_item" | "turn_context") => true,
            Some("function_call" | "function_call_output" | "reasoning") => true,
            Some("message") => line.get("role").is_some() && line.get("content").is_some(),
            _ => false,
        })
}

/// The session id the rollout names (`session_meta.payload.id`, or the
/// first line's `id` in older rollouts).
pub fn session_id(lines: &[Value]) -> Option<String> {
    let first = lines.first()?;
    let id = if first.get("type").and_then(Value::as_str) == Some("session_meta") {
        first.pointer("/payload/id")
    } else if first.get("type").is_none() {
        first.get("id")
    } else {
        None
    };
    id.and_then(Value::as_str)
        .filter(|id| !id.trim().is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_session_working_directory_opens_the_first_user_message() {
        let lines = [
            json!({"type": "session_meta", "payload": {"id": "019a", "cwd": "/home/ann/shop"}}),
            json!({"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the build"}]}}),
            json!({"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and the test"}]}}),
        ];
        let got: Vec<String> = messages(&lines).contents();
        assert_eq!(
            got,
            vec![
                "<environment_context><cwd>/home/ann/shop</cwd></environment_context>\nfix the build".to_string(),
                "and the test".to_string(),
            ]
        );
    }

    #[test]
    fn calls_outputs_and_messages_in_order() {
        let lines = [
            json!({"type": "session_meta", "payload": {"id": "019a"}}),
            json!({"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]}}),
            json!({"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the build"}]}}),
            json!({"type": "event_msg", "payload": {"type": "user_message", "message": "fix the build"}}),
            json!({"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"bash\",\"-lc\",\"cargo build\"]}", "call_id": "c1"}}),
            json!({"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "{\"output\":\"error[E0425]\",\"metadata\":{\"exit_code\":101}}"}}),
            json!({"type": "response_item", "payload": {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"}}),
            json!({"type": "response_item", "payload": {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done!"}}),
            json!({"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]}}),
        ];
        assert_eq!(session_id(&lines).as_deref(), Some("019a"));
        let got: Vec<(Role, String)> = messages(&lines).turns();
        assert_eq!(
            got,
            vec![
                (Role::User, "fix the build".to_string()),
                (Role::Assistant, "```bash\ncargo build\n```".to_string()),
                (
                    Role::User,
                    "<returncode>101</returncode>\n<output>\nerror[E0425]\n</output>".to_string()
                ),
                (
                    Role::Assistant,
                    r#"{"name": "apply_patch", "arguments": {"input":"*** Begin Patch"}}"#
                        .to_string()
                ),
                (Role::User, "Done!".to_string()),
                (Role::Assistant, "Fixed.".to_string()),
            ]
        );
    }
}
