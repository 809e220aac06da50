//! Commands an agent ran: fenced shell blocks (```` ```bash ````, `sh`,
//! `shell`, `console`, ...), `$ ` prompt lines, and JSON tool calls
//! (`{"name": "bash", "arguments": {"command": ...}}`, OpenAI-style
//! `function.arguments` strings, moatless-style `{"name": "search", ...}`
//! actions), plus the exit code an observation reports (`<returncode>1</returncode>`,
//! `exit code: 1`, `returncode`, `Return Code: 0`).
//!
//! Each command carries the byte range it came from in the message. Pairing a
//! command with the observation that follows it is left to the caller.

use std::sync::LazyLock;

use serde_json::Value;

use super::text::{
    Pattern, contains_str, fenced_blocks, json_spans, lines_with_offsets, truncate_to_bytes,
};
use precedent_core::tool;

/// Bytes kept of a command.
pub(crate) const MAX_COMMAND_BYTES: usize = 2_000;
/// Commands kept per message.
const MAX_COMMANDS_PER_MESSAGE: usize = 64;
/// JSON nesting walked when looking for tool calls.
const MAX_JSON_DEPTH: usize = 6;

/// A command found in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedCommand {
    /// The command text (trimmed, capped).
    pub command: String,
    /// Byte offset in the message where it starts.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

const SHELL_FENCES: &[&str] = &[
    "bash",
    "sh",
    "shell",
    "console",
    "zsh",
    "terminal",
    "shell-session",
    "shellsession",
    "bash-session",
];

/// The commands in an agent message, in order.
pub(crate) fn parse_commands(message: &str) -> Vec<ParsedCommand> {
    let mut commands = Vec::new();
    let blocks = fenced_blocks(message);
    for block in &blocks {
        let info_word = block.info.split_whitespace().next().unwrap_or("");
        if !SHELL_FENCES.contains(&info_word) {
            continue;
        }
        let Some(content) = message.get(block.content_start..block.content_end) else {
            continue;
        };
        let prompt_lines = prompt_commands(content, block.content_start);
        let is_transcript = info_word == "console"
            || (!prompt_lines.is_empty()
                && content
                    .lines()
                    .find(|line| !line.trim().is_empty())
                    .is_some_and(|first| first.trim_start().starts_with("$ ")));
        if is_transcript {
            commands.extend(prompt_lines);
            continue;
        }
        let trimmed = content.trim();
        if trimmed.is_empty() {
            continue;
        }
        let leading = content.len() - content.trim_start().len();
        let start = block.content_start + leading;
        commands.push(ParsedCommand {
            command: truncate_to_bytes(trimmed, MAX_COMMAND_BYTES).to_string(),
            start,
            end: start + trimmed.len(),
        });
    }
    // `$ ` prompt lines outside any fence.
    let mut outside = prompt_commands(message, 0);
    outside.retain(|command| {
        !blocks
            .iter()
            .any(|block| block.fence_start <= command.start && command.start < block.fence_end)
    });
    commands.extend(outside);
    // JSON tool calls.
    for span in json_spans(message) {
        let Some(json_text) = message.get(span.start..span.end) else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<Value>(json_text) else {
            continue;
        };
        if let Value::Object(object) = &value
            && !is_named_call(object)
            && (super::toolcall::edit_tool_of_arguments(object).is_some()
                || is_editor_command(object)
                || super::toolcall::named_before(message, span.start)
                    .is_some_and(tool::is_file_tool))
        {
            // The arguments of an edit or a file view, not a command.
            continue;
        }
        let mut found = Vec::new();
        commands_from_json(&value, 0, &mut found);
        for command in found {
            commands.push(ParsedCommand {
                command: truncate_to_bytes(command.trim(), MAX_COMMAND_BYTES).to_string(),
                start: span.start,
                end: span.end,
            });
        }
    }
    // SWE-agent's XML function calls.
    for call in super::toolcall::xml_calls(message) {
        if tool::is_file_tool(&call.name) {
            continue;
        }
        let is_shell = tool::is_shell(&call.name);
        let command = match call.string(&tool::COMMAND_ARGUMENTS) {
            Some(command) if is_shell => command.to_string(),
            Some(command) => {
                let path = call.string(&tool::PATH_ARGUMENTS).unwrap_or("");
                format!("{} {command} {path}", call.name).trim().to_string()
            }
            None => call.name.clone(),
        };
        commands.push(ParsedCommand {
            command: truncate_to_bytes(command.trim(), MAX_COMMAND_BYTES).to_string(),
            start: call.start,
            end: call.end,
        });
    }
    commands.retain(|command| !command.command.is_empty());
    commands.sort_by_key(|command| command.start);
    commands.truncate(MAX_COMMANDS_PER_MESSAGE);
    commands
}

/// `$ cmd` lines of a transcript (`base` = offset of `text` in the message).
fn prompt_commands(text: &str, base: usize) -> Vec<ParsedCommand> {
    let mut commands = Vec::new();
    if !contains_str!(text, "$ ") {
        return commands;
    }
    for line in lines_with_offsets(text) {
        let trimmed = line.text.trim_start();
        let Some(after_prompt) = trimmed.strip_prefix("$ ") else {
            continue;
        };
        let command = after_prompt.trim();
        if command.is_empty() {
            continue;
        }
        let leading = after_prompt.len() - after_prompt.trim_start().len();
        let start = base + line.end - after_prompt.len() + leading;
        commands.push(ParsedCommand {
            command: truncate_to_bytes(command, MAX_COMMAND_BYTES).to_string(),
            start,
            end: start + command.len(),
        });
        if commands.len() >= MAX_COMMANDS_PER_MESSAGE {
            break;
        }
    }
    commands
}

/// Whether a JSON object names its tool itself.
fn is_named_call(object: &serde_json::Map<String, Value>) -> bool {
    ["name", "tool", "tool_name", "recipient_name", "function"]
        .iter()
        .any(|key| object.contains_key(*key))
}

/// A file editor's arguments without its name (`{"command": "view", "path": ...}`).
fn is_editor_command(object: &serde_json::Map<String, Value>) -> bool {
    object.contains_key("path")
        && matches!(
            string_field(object, &["command"]),
            Some(command) if tool::EDITOR_COMMANDS.contains(&command)
        )
}

fn string_field<'v>(object: &'v serde_json::Map<String, Value>, keys: &[&str]) -> Option<&'v str> {
    keys.iter()
        .find_map(|key| object.get(*key).and_then(Value::as_str))
}

/// Tool-call arguments: an object, or a string holding a JSON object.
fn arguments_of(object: &serde_json::Map<String, Value>) -> Option<Value> {
    for key in [
        "arguments",
        "args",
        "input",
        "parameters",
        "params",
        "tool_input",
    ] {
        match object.get(key) {
            Some(Value::Object(map)) => return Some(Value::Object(map.clone())),
            Some(Value::String(text)) => {
                if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
                    return Some(value);
                }
                return Some(Value::String(text.clone()));
            }
            _ => {}
        }
    }
    None
}

/// `key="value"` summary of the short string/number fields of a tool call.
fn summarize_arguments(object: &serde_json::Map<String, Value>) -> String {
    const SKIPPED: &[&str] = &[
        "name",
        "tool",
        "tool_name",
        "state",
        "thoughts",
        "thought",
        "type",
        "id",
    ];
    let mut parts = Vec::new();
    for (key, value) in object {
        if SKIPPED.contains(&key.as_str()) {
            continue;
        }
        let text = match value {
            Value::String(text) => truncate_to_bytes(text, 200).to_string(),
            Value::Number(number) => number.to_string(),
            Value::Bool(flag) => flag.to_string(),
            _ => continue,
        };
        parts.push(format!("{key}={text:?}"));
        if parts.len() >= 6 {
            break;
        }
    }
    parts.join(" ")
}

fn commands_from_json(value: &Value, depth: usize, found: &mut Vec<String>) {
    if depth > MAX_JSON_DEPTH || found.len() >= MAX_COMMANDS_PER_MESSAGE {
        return;
    }
    match value {
        Value::Array(items) => {
            for item in items.iter().take(32) {
                commands_from_json(item, depth + 1, found);
            }
        }
        Value::Object(object) => {
            let function = object.get("function").and_then(Value::as_object);
            let name = string_field(object, &["name", "tool", "tool_name", "recipient_name"])
                .or_else(|| function.and_then(|f| string_field(f, &["name"])));
            let arguments = arguments_of(object).or_else(|| function.and_then(arguments_of));
            let command_in = |map: &serde_json::Map<String, Value>| {
                string_field(map, &tool::COMMAND_ARGUMENTS).map(str::to_string)
            };
            let command = match &arguments {
                Some(Value::Object(map)) => command_in(map).or_else(|| command_in(object)),
                _ => command_in(object),
            };
            let is_shell = name.is_some_and(tool::is_shell);
            match (name, command, &arguments) {
                // Edits and file views are not commands.
                (Some(name), _, _) if tool::is_file_tool(name) => {}
                (Some(_), Some(command), _) if is_shell => found.push(command),
                (None, Some(command), _) => found.push(command),
                (Some(name), Some(command), Some(Value::Object(map))) => {
                    // e.g. str_replace_editor {"command": "view", "path": ...}
                    let path = string_field(map, &tool::PATH_ARGUMENTS).unwrap_or("");
                    found.push(format!("{name} {command} {path}").trim().to_string());
                }
                (Some(name), Some(command), _) => found.push(format!("{name} {command}")),
                (Some(_), None, Some(Value::String(text))) if is_shell => found.push(text.clone()),
                (Some(name), None, Some(Value::Object(map))) => found.push(
                    format!("{name} {}", summarize_arguments(map))
                        .trim()
                        .to_string(),
                ),
                (Some(name), None, _) if name.len() <= 64 && !name.contains(' ') => found.push(
                    format!("{name} {}", summarize_arguments(object))
                        .trim()
                        .to_string(),
                ),
                _ => {}
            }
            for key in ["action", "tool_calls", "function_call", "actions"] {
                if let Some(inner) = object.get(key)
                    && (inner.is_object() || inner.is_array())
                {
                    commands_from_json(inner, depth + 1, found);
                }
            }
        }
        _ => {}
    }
}

static RETURNCODE_TAG: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"<returncode>\s*(-?\d+)\s*</returncode>"));
static EXIT_CODE_TEXT: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(
        r#"(?i)(?-u:\b)(?:exit[ _]code|exit status|return[ _]?code|returncode)(?-u:\b)["']?\s*(?:[:=]|is)?\s*(-?\d+)"#,
    )
});

/// This module's patterns, each compiled at first use or by [`warm_up`].
fn patterns() -> [&'static Pattern; 2] {
    [&*RETURNCODE_TAG, &*EXIT_CODE_TEXT]
}

/// Compiles this module's patterns now rather than at first use (see
/// [`super::warm_up`]); answers whether every one compiled.
pub(super) fn warm_up() -> bool {
    patterns().iter().all(|pattern| pattern.is_valid())
}

/// The exit code an observation reports, looked for near its start and end.
pub(crate) fn parse_exit_code(observation: &str) -> Option<i32> {
    const WINDOW: usize = 4_096;
    let head = truncate_to_bytes(observation, WINDOW);
    let tail_start =
        super::text::ceil_char_boundary(observation, observation.len().saturating_sub(WINDOW));
    let tail = observation.get(tail_start..).unwrap_or("");
    for window in [head, tail] {
        for pattern in [&*RETURNCODE_TAG, &*EXIT_CODE_TEXT] {
            if let Some(code) = pattern
                .captures(window)
                .and_then(|captures| captures.get(1))
                .and_then(|m| m.as_str().parse().ok())
            {
                return Some(code);
            }
        }
    }
    None
}

/// A shell command's words, quotes removed (`cd "My Projects"` is two
/// words); an empty quoted word (`''`) is a word of its own.
pub(crate) fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut quoted = false;
    for character in text.chars() {
        match (quote, character) {
            (Some(open), c) if c == open => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(character);
                quoted = true;
            }
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() || quoted {
                    words.push(std::mem::take(&mut word));
                }
                quoted = false;
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() || quoted {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &[&str]) {
        let commands = parse_commands(input);
        let got: Vec<&str> = commands.iter().map(|c| c.command.as_str()).collect();
        assert_eq!(got, expected, "commands of:\n{input}");
        for command in &commands {
            assert!(input.get(command.start..command.end).is_some());
        }
    }

    #[test]
    fn bash_fences_from_mini_swe_agent_and_swe_agent() {
        check(
            "I'll read the file.\n\n```bash\nnl -ba xarray/core/variable.py | sed -n '849,900p'\n```",
            &["nl -ba xarray/core/variable.py | sed -n '849,900p'"],
        );
        check(
            "Fix the indentation.\n```bash\nedit 22:34\n        x = data[\"x\"].dropna()\nend_of_edit\n```\n",
            &["edit 22:34\n        x = data[\"x\"].dropna()\nend_of_edit"],
        );
        check("```python\nsearch_method(\"x\")\n```\n", &[]);
    }

    #[test]
    fn console_transcripts_and_prompt_lines() {
        check(
            "```console\n$ cargo test\nrunning 1 test\n$ git status\n```\nThen:\n$ pytest -x tests/test_a.py\n",
            &["cargo test", "git status", "pytest -x tests/test_a.py"],
        );
    }

    #[test]
    fn prompt_command_ranges_are_exact() {
        let input = "text\n  $   é ls  \n";
        let commands = parse_commands(input);
        assert_eq!(commands.len(), 1);
        assert_eq!(&input[commands[0].start..commands[0].end], "é ls");
    }

    #[test]
    fn xml_function_calls() {
        check(
            "Run it.\n<function=bash>\n<parameter=command>python reproduce.py</parameter>\n</function>",
            &["python reproduce.py"],
        );
        // File views and edits are not commands.
        check(
            "<function=str_replace_editor>\n<parameter=command>view</parameter>\n<parameter=path>/testbed/a.py</parameter>\n</function>",
            &[],
        );
        check("<function=submit>\n</function>", &["submit"]);
    }

    #[test]
    fn calls_written_as_text_are_commands_unless_they_edit_or_read() {
        check(
            "Tool call: Bash\n{\"command\": \"python repro.py\"}",
            &["python repro.py"],
        );
        check("Tool call: Read\n{\"file_path\": \"/r/a.py\"}", &[]);
        check(
            "Tool call: Edit\n{\"file_path\": \"a.py\", \"old_string\": \"x\", \"new_string\": \"y\"}",
            &[],
        );
        check(
            "[tool_use: str_replace_editor]\n{\"command\": \"create\", \"path\": \"/testbed/a.py\", \"file_text\": \"x\"}",
            &[],
        );
    }

    #[test]
    fn json_tool_calls() {
        check(
            r#"{"name": "bash", "arguments": {"command": "ls -la"}}"#,
            &["ls -la"],
        );
        check(
            r#"{"type": "function", "function": {"name": "execute_bash", "arguments": "{\"command\": \"python reproduce.py\"}"}}"#,
            &["python reproduce.py"],
        );
        check(
            r#"{"name": "str_replace_editor", "arguments": {"command": "view", "path": "/testbed/x.py"}}"#,
            &[],
        );
        check(
            r#"{"name": "Read", "arguments": {"file_path": "/r/a.py"}}"#,
            &[],
        );
        check(
            "The LogXML class is responsible.\n\n{\"state\": \"SearchLoop_Searching\", \"name\": \"search\", \"query\": \"LogXML class\", \"file_pattern\": \"**/junitxml.py\"}",
            &["search file_pattern=\"**/junitxml.py\" query=\"LogXML class\""],
        );
        check(
            r#"{"state": "CodeLoop_Pending", "thoughts": "x", "action": {"file_path": "a.py", "instructions": "y", "span_id": "Z"}}"#,
            &[],
        );
    }

    fn check_exit(input: &str, expected: Option<i32>) {
        assert_eq!(parse_exit_code(input), expected, "{input}");
    }

    #[test]
    fn exit_codes() {
        check_exit("<returncode>0</returncode>\n<output>\n</output>", Some(0));
        check_exit("<returncode>1</returncode>", Some(1));
        check_exit("Traceback...\nExit code: 2", Some(2));
        check_exit("{\"returncode\": 127, \"stdout\": \"\"}", Some(127));
        check_exit(
            "[pytest] Return Code: 1 \n\n>>>>> Some Tests Failed",
            Some(1),
        );
        check_exit("no code here", None);
    }

    #[test]
    fn every_pattern_compiles() {
        assert!(RETURNCODE_TAG.is_valid());
        assert!(EXIT_CODE_TEXT.is_valid());
    }
}
