//! Whole-file JSON trajectories: SWE-agent `.traj` files and OpenHands
//! event lists.
//!
//! SWE-agent: `history[]` of role/content messages (system prompts and
//! demonstrations skipped, `tool` messages as the user's observations,
//! function calls rendered), or else `trajectory[]` of steps with
//! `thought`, `action` (a command) and `observation`.
//!
//! OpenHands: a list of events (or `{"history": [...]}`) with `source`,
//! and either an `action` (`message`, `run`, `edit`, `read`, `finish`,
//! ...) with its `args`, or an `observation` with its `content`.

use serde_json::Value;

use super::render::{Messages, content_text, parse_arguments, timestamp_of};
use precedent_core::domain::Role;
use precedent_core::tool::render::{render_call_or_command, render_command};

/// The two trajectory formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SWE-agent `.traj`.
    SweAgent,
    /// OpenHands events.
    OpenHands,
}

/// Which format a parsed JSON file is, if either.
pub fn detect(value: &Value) -> Option<Kind> {
    let events = openhands_events(value);
    if let Some(events) = events
        && events.iter().take(20).any(|event| {
            event.get("source").is_some()
                && (event.get("action").is_some() || event.get("observation").is_some())
        })
    {
        return Some(Kind::OpenHands);
    }
    let history_ok = value
        .get("history")
        .and_then(Value::as_array)
        .is_some_and(|history| history.iter().any(|message| message.get("role").is_some()));
    let trajectory_ok = value
        .get("trajectory")
        .and_then(Value::as_array)
        .is_some_and(|steps| steps.iter().any(|step| step.get("action").is_some()));
    (history_ok || trajectory_ok).then_some(Kind::SweAgent)
}

fn openhands_events(value: &Value) -> Option<&Vec<Value>> {
    match value {
        Value::Array(events) => Some(events),
        Value::Object(object) => object
            .get("history")
            .or_else(|| object.get("trajectory"))
            .and_then(Value::as_array),
        _ => None,
    }
}

/// The messages of a trajectory of the given kind.
pub fn messages(kind: Kind, value: &Value) -> Messages {
    match kind {
        Kind::SweAgent => swe_agent(value),
        Kind::OpenHands => openhands(openhands_events(value).map_or(&[][..], Vec::as_slice)),
    }
}

fn swe_agent(value: &Value) -> Messages {
    let mut messages = Messages::default();
    let history = value.get("history").and_then(Value::as_array);
    if let Some(history) = history.filter(|history| !history.is_empty()) {
        for message in history {
            if message.get("is_demo").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let text = content_text(message.get("content").unwrap_or(&Value::Null));
            match message.get("role").and_then(Value::as_str) {
                Some("user" | "tool") => messages.push(Role::User, &text, None),
                Some("assistant") => {
                    messages.push(Role::Assistant, &swe_agent_assistant(message, &text), None)
                }
                _ => {}
            }
        }
        return messages;
    }
    for step in value
        .get("trajectory")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let thought = step.get("thought").and_then(Value::as_str).unwrap_or("");
        let action = step.get("action").and_then(Value::as_str).unwrap_or("");
        messages.push(Role::Assistant, &thought_and_command(thought, action), None);
        let observation = content_text(step.get("observation").unwrap_or(&Value::Null));
        messages.push_result(&observation, false, None);
    }
    messages
}

/// An assistant message of SWE-agent's history: its thought, then its
/// action as a command, or its function calls rendered.
fn swe_agent_assistant(message: &Value, content: &str) -> String {
    if let Some(calls) = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .filter(|calls| !calls.is_empty())
    {
        let mut parts = vec![content.to_string()];
        for call in calls {
            let function = call.get("function").unwrap_or(call);
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("tool");
            let arguments = parse_arguments(function.get("arguments").unwrap_or(&Value::Null));
            parts.push(render_call_or_command(name, &arguments));
        }
        return join(&parts);
    }
    match (
        message.get("thought").and_then(Value::as_str),
        message.get("action").and_then(Value::as_str),
    ) {
        (Some(thought), Some(action)) if !action.trim().is_empty() => {
            thought_and_command(thought, action)
        }
        _ => content.to_string(),
    }
}

fn thought_and_command(thought: &str, command: &str) -> String {
    if command.trim().is_empty() {
        thought.to_string()
    } else {
        join(&[thought.to_string(), render_command(command.trim())])
    }
}

fn join(parts: &[String]) -> String {
    parts
        .iter()
        .map(|part| part.trim())
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Actions and observations that carry nothing a person would read.
const OPENHANDS_SKIPPED: &[&str] = &[
    "system",
    "recall",
    "change_agent_state",
    "agent_state_changed",
    "null",
    "condensation",
];

fn openhands(events: &[Value]) -> Messages {
    let mut messages = Messages::default();
    for event in events {
        let timestamp = timestamp_of(event.get("timestamp"));
        let source = event.get("source").and_then(Value::as_str).unwrap_or("");
        let message = event.get("message").and_then(Value::as_str).unwrap_or("");
        let args = event.get("args").unwrap_or(&Value::Null);
        if let Some(action) = event.get("action").and_then(Value::as_str) {
            if OPENHANDS_SKIPPED.contains(&action) {
                continue;
            }
            let thought = args.get("thought").and_then(Value::as_str).unwrap_or("");
            if action == "message" || source == "user" {
                let text = args
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or(message);
                let role = if source == "user" {
                    Role::User
                } else {
                    Role::Assistant
                };
                messages.push(role, text, timestamp);
                continue;
            }
            let text = match action {
                "run" | "run_ipython" => {
                    let command = args
                        .get("command")
                        .or_else(|| args.get("code"))
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    thought_and_command(thought, command)
                }
                "finish" => {
                    let final_thought = args
                        .get("final_thought")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    join(&[
                        thought.to_string(),
                        final_thought.to_string(),
                        message.to_string(),
                        render_call_or_command("finish", &Value::Object(serde_json::Map::new())),
                    ])
                }
                _ => join(&[
                    thought.to_string(),
                    openhands_tool_call(event, action, args),
                ]),
            };
            messages.push(Role::Assistant, &text, timestamp);
        } else if let Some(observation) = event.get("observation").and_then(Value::as_str) {
            if OPENHANDS_SKIPPED.contains(&observation) {
                continue;
            }
            let content = content_text(event.get("content").unwrap_or(&Value::Null));
            let exit_code = event
                .pointer("/extras/metadata/exit_code")
                .and_then(Value::as_i64);
            let text = match exit_code {
                Some(code) if observation == "run" => {
                    format!("<returncode>{code}</returncode>\n<output>\n{content}\n</output>")
                }
                _ if content.trim().is_empty() => message.to_string(),
                _ => content,
            };
            messages.push_result(&text, observation == "error", timestamp);
        }
    }
    messages
}

/// An OpenHands tool action as a JSON tool call: the function call the
/// model made when the event keeps it, else the action and its arguments.
fn openhands_tool_call(event: &Value, action: &str, args: &Value) -> String {
    let metadata = event.get("tool_call_metadata");
    let call_id = metadata
        .and_then(|metadata| metadata.get("tool_call_id"))
        .and_then(Value::as_str);
    let calls = metadata
        .and_then(|metadata| metadata.pointer("/model_response/choices/0/message/tool_calls"))
        .and_then(Value::as_array);
    if let (Some(call_id), Some(calls)) = (call_id, calls)
        && let Some(call) = calls
            .iter()
            .find(|call| call.get("id").and_then(Value::as_str) == Some(call_id))
    {
        let function = call.get("function").unwrap_or(&Value::Null);
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(action);
        let arguments = parse_arguments(function.get("arguments").unwrap_or(&Value::Null));
        return render_call_or_command(name, &arguments);
    }
    let mut arguments = args.as_object().cloned().unwrap_or_default();
    for key in [
        "thought",
        "impl_source",
        "translated_ipython_code",
        "security_risk",
    ] {
        arguments.remove(key);
    }
    render_call_or_command(action, &Value::Object(arguments))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn swe_agent_steps_become_commands_and_observations() {
        let value = json!({"trajectory": [
            {"thought": "Find it.", "action": "find_file missing_colon.py", "observation": "Found 1 matches"},
            {"thought": "Done.", "action": "submit", "observation": ""}
        ]});
        assert_eq!(detect(&value), Some(Kind::SweAgent));
        let got: Vec<String> = messages(Kind::SweAgent, &value).contents();
        assert_eq!(
            got,
            vec![
                "Find it.\n\n```bash\nfind_file missing_colon.py\n```",
                "Found 1 matches",
                "Done.\n\n```bash\nsubmit\n```",
                "(no output)"
            ]
        );
    }

    #[test]
    fn openhands_runs_carry_their_exit_code() {
        let value = json!([
            {"id": 0, "source": "user", "action": "message", "args": {"content": "rename it"}},
            {"id": 1, "source": "agent", "action": "run", "args": {"command": "mv a b", "thought": "Renaming."}},
            {"id": 2, "source": "agent", "observation": "run", "content": "", "extras": {"metadata": {"exit_code": 0}}},
            {"id": 3, "source": "environment", "observation": "agent_state_changed", "content": ""}
        ]);
        assert_eq!(detect(&value), Some(Kind::OpenHands));
        let got: Vec<String> = messages(Kind::OpenHands, &value).contents();
        assert_eq!(
            got,
            vec![
                "rename it",
                "Renaming.\n\n```bash\nmv a b\n```",
                "<returncode>0</returncode>\n<output>\n\n</output>"
            ]
        );
    }
}
