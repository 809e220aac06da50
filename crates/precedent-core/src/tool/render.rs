//! Tool calls and results written as the text of messages, in the shapes
//! extraction reads back (`ingest::toolcall`, `ingest::command`): a call is
//! the JSON object `{"name": ..., "arguments": {...}}` on a line of its own,
//! or, where a transcript is rendered, a shell tool's command as a
//! ```` ```bash ```` fence (as mini-swe-agent trajectories hold them); a
//! result is its output, after [`ERROR_RESULT_PREFIX`] when the tool failed.
//!
//! The API renders the content parts of an Add with it and the importer
//! whole transcripts; which tools are shells is [`super::TOOLS`]'s.

use serde_json::{Map, Value};

use super::COMMAND_ARGUMENTS;

/// What starts a tool result the tool reported as failed, once rendered as
/// text ([`render_result`]); a message that starts with it is a failed result.
pub const ERROR_RESULT_PREFIX: &str = "ERROR: ";
/// A result without output, so that a call keeps its answer.
pub const NO_OUTPUT: &str = "(no output)";

/// A tool call as the JSON object `{"name": ..., "arguments": ...}` (meant
/// to stand on a line of its own), its arguments as given.
pub fn render_call(name: &str, arguments: &Value) -> String {
    let name = Value::String(name.to_string());
    format!("{{\"name\": {name}, \"arguments\": {arguments}}}")
}

/// The same call as one compact JSON object (serde_json's own form),
/// as the API has always stored an Add's tool-call part. Stored text takes
/// part in an Add's idempotency hash, so the API keeps this form and the
/// importer [`render_call`]'s: a retry, or a re-import, renders byte for
/// byte what was stored before.
pub fn render_call_compact(name: &str, arguments: &Value) -> String {
    serde_json::json!({ "name": name, "arguments": arguments }).to_string()
}

/// A call's arguments as an object: a string is parsed when it holds a JSON
/// object, and kept under `input` otherwise (a free-form tool's input,
/// such as a patch); missing ones are `{}`.
pub fn call_arguments(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => Value::Object(Map::new()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => object,
            _ if text.trim().is_empty() => Value::Object(Map::new()),
            _ => serde_json::json!({ "input": text }),
        },
        other => serde_json::json!({ "input": other }),
    }
}

/// A tool call as a transcript holds it: a shell tool's command as a bash
/// fence ([`render_command`]), any other call as [`render_call`]'s object.
pub fn render_call_or_command(name: &str, arguments: &Value) -> String {
    match shell_command(name, arguments) {
        Some(command) => render_command(&command),
        None => render_call(name, arguments),
    }
}

/// A tool result as text: its output, after [`ERROR_RESULT_PREFIX`] when the
/// tool reported an error, and `(no output)` when it gave none.
pub fn render_result(output: &str, is_error: bool) -> String {
    let output = if output.trim().is_empty() {
        NO_OUTPUT
    } else {
        output
    };
    if is_error {
        format!("{ERROR_RESULT_PREFIX}{output}")
    } else {
        output.to_string()
    }
}

/// The text of each part of a content array: a string part as it is, an
/// object's `text` field; other parts are left out.
pub fn part_texts(parts: &[Value]) -> impl Iterator<Item = &str> {
    parts.iter().filter_map(|part| match part {
        Value::String(text) => Some(text.as_str()),
        other => other.get("text").and_then(Value::as_str),
    })
}

/// Text of a tool result's `content` or `output`: a string, or its parts'
/// text (strings, `text` fields) joined by newlines.
pub fn result_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => part_texts(parts).collect::<Vec<_>>().join(
            "
",
        ),
        _ => String::new(),
    }
}

/// A command as a bash fence (a longer fence when the command holds one).
pub fn render_command(command: &str) -> String {
    let mut fence = "```".to_string();
    while command.contains(fence.as_str()) {
        fence.push('`');
    }
    format!("{fence}bash\n{}\n{fence}", command.trim_end())
}

/// The command of a shell tool's call, if it is one: its arguments when
/// they are a string, else the first of [`COMMAND_ARGUMENTS`], a string or
/// a list of words (`["bash", "-lc", "script"]` gives the script).
fn shell_command(name: &str, arguments: &Value) -> Option<String> {
    if !super::is_shell(name) {
        return None;
    }
    let field = match arguments {
        Value::String(text) => return Some(text.clone()),
        Value::Object(object) => COMMAND_ARGUMENTS.iter().find_map(|key| object.get(*key))?,
        _ => return None,
    };
    match field {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            let words: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
            if words.len() != parts.len() || words.is_empty() {
                return None;
            }
            if words.len() == 3
                && matches!(words[0], "bash" | "sh" | "zsh" | "/bin/bash" | "/bin/sh")
                && matches!(words[1], "-c" | "-lc" | "-c -l")
            {
                return Some(words[2].to_string());
            }
            Some(words.join(" "))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shell_calls_become_bash_fences_and_others_json_objects() {
        assert_eq!(
            render_call_or_command(
                "Bash",
                &json!({"command": "pytest -q", "description": "run"})
            ),
            "```bash\npytest -q\n```"
        );
        assert_eq!(
            render_call_or_command("shell", &json!({"command": ["bash", "-lc", "ls src"]})),
            "```bash\nls src\n```"
        );
        assert_eq!(
            render_call_or_command("exec_command", &json!({"cmd": "cargo test"})),
            "```bash\ncargo test\n```"
        );
        assert_eq!(
            render_call_or_command(
                "Edit",
                &json!({"file_path": "a.py", "old_string": "x", "new_string": "y"})
            ),
            r#"{"name": "Edit", "arguments": {"file_path":"a.py","new_string":"y","old_string":"x"}}"#
        );
        assert_eq!(
            render_command("cat <<EOF\n```\nEOF"),
            "````bash\ncat <<EOF\n```\nEOF\n````"
        );
    }

    #[test]
    fn arguments_are_an_object_whatever_form_they_came_in() {
        assert_eq!(call_arguments(&Value::Null), json!({}));
        assert_eq!(call_arguments(&json!("  ")), json!({}));
        assert_eq!(
            call_arguments(&json!("{\"command\": \"ls\"}")),
            json!({"command": "ls"})
        );
        assert_eq!(
            call_arguments(&json!("*** Begin Patch")),
            json!({"input": "*** Begin Patch"})
        );
        assert_eq!(
            render_call("finish", &call_arguments(&Value::Null)),
            r#"{"name": "finish", "arguments": {}}"#
        );
    }

    #[test]
    fn results_keep_their_place_and_errors_say_so() {
        assert_eq!(render_result("", false), "(no output)");
        assert_eq!(render_result("  ", false), "(no output)");
        assert_eq!(render_result("exit 1", true), "ERROR: exit 1");
    }
}
