//! Tool calls and tool results in a message, whatever shape the agent's
//! framework gave them once flattened to text: SWE-agent's XML function calls
//! (`<function=bash><parameter=command>ls</parameter></function>`), OpenAI
//! `tool_calls` objects (`function.arguments` a JSON string), Anthropic
//! `tool_use` / `tool_result` content parts (`input`, `is_error`), and plain
//! JSON objects of a call (`{"name": ..., "arguments": {...}}`).
//!
//! A JSON object of arguments alone is a call too when the text beside it
//! names the tool (`Tool call: Edit` on the line above, `Calling Edit with
//! {...}`, `[tool_use: Edit]`, `Edit({...})`), or when its keys are an
//! edit's arguments whatever wraps it (`file_path` + `old_string` +
//! `new_string`, `path` + `old_str` + `new_str`, `command: create` +
//! `file_text`, `file_path` + `content`, a patch): integrators that render
//! tool calls as text write them so.
//!
//! Each call carries its name, its arguments as a JSON object and the byte
//! range it came from. What a call means (a shell command, an edit) is left to
//! [`super::command`] and [`super::edits`].

use serde_json::{Map, Value};

use super::text::{contains_str, json_spans};
use precedent_core::tool::ToolKind;
use precedent_core::tool::render::{ERROR_RESULT_PREFIX, result_text};

/// Tool calls kept per message.
pub(crate) const MAX_TOOL_CALLS_PER_MESSAGE: usize = 64;
/// Tool results kept per message.
const MAX_TOOL_RESULTS_PER_MESSAGE: usize = 64;
/// JSON nesting walked when looking for calls.
const MAX_JSON_DEPTH: usize = 8;
/// Parameters read of one XML call.
const MAX_XML_PARAMETERS: usize = 32;
/// Problems reported per message.
const MAX_PROBLEMS: usize = 8;
/// Bytes before a JSON object looked through for the tool's name.
const MAX_NAME_LOOKBACK: usize = 160;

/// One tool call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    /// The tool's name as the agent wrote it (`str_replace_editor`, `Edit`, `bash`).
    pub name: String,
    /// The arguments (empty when they were missing or did not parse).
    pub arguments: Map<String, Value>,
    /// Byte offset in the message where the call starts.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

impl ToolCall {
    /// The string argument under the first of `keys` that holds one.
    pub(crate) fn string(&self, keys: &[&str]) -> Option<&str> {
        keys.iter()
            .find_map(|key| self.arguments.get(*key).and_then(Value::as_str))
    }

    /// Whether the tool is named one of `names` (ASCII case-insensitive).
    pub(crate) fn is_named(&self, names: &[&str]) -> bool {
        names
            .iter()
            .any(|name| self.name.eq_ignore_ascii_case(name))
    }

    /// What kind of tool it calls, if [`precedent_core::tool::TOOLS`] knows it.
    pub(crate) fn kind(&self) -> Option<ToolKind> {
        precedent_core::tool::kind_of(&self.name)
    }
}

/// One tool result (an Anthropic `tool_result` part).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolResult {
    /// Its text (text parts joined by newlines).
    pub text: String,
    /// Whether the tool reported an error.
    pub is_error: bool,
}

/// The calls and results of one message, with what could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ToolCalls {
    /// Calls in message order.
    pub calls: Vec<ToolCall>,
    /// Results in message order.
    pub results: Vec<ToolResult>,
    /// What could not be read (bounded).
    pub problems: Vec<String>,
}

impl ToolCalls {
    fn problem(&mut self, text: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(text);
        }
    }
}

/// Every tool call and tool result in `message`.
pub(crate) fn parse(message: &str) -> ToolCalls {
    let mut found = ToolCalls {
        calls: xml_calls(message),
        ..ToolCalls::default()
    };
    let body = message.trim_start();
    let body = body
        .strip_prefix("Tool result:")
        .map_or(body, str::trim_start);
    if body.starts_with(ERROR_RESULT_PREFIX) {
        // A failed result rendered as text; its text is the message itself.
        found.results.push(ToolResult {
            text: String::new(),
            is_error: true,
        });
    }
    if memchr::memchr(b'{', message.as_bytes()).is_some() {
        for span in json_spans(message) {
            let Some(json_text) = message.get(span.start..span.end) else {
                continue;
            };
            let Ok(value) = serde_json::from_str::<Value>(json_text) else {
                continue;
            };
            let before = found.calls.len();
            walk(&value, span.start, span.end, 0, &mut found);
            if found.calls.len() == before
                && let Value::Object(object) = &value
                && let Some(call) = call_of_arguments(
                    named_before(message, span.start),
                    object,
                    span.start,
                    span.end,
                )
            {
                found.calls.push(call);
            }
        }
        for (name, start, end, object) in inline_argument_objects(message) {
            if found.calls.len() >= MAX_TOOL_CALLS_PER_MESSAGE {
                break;
            }
            if found
                .calls
                .iter()
                .any(|call| call.start <= start && start < call.end)
            {
                continue;
            }
            if let Some(call) = call_of_arguments(Some(name), &object, start, end) {
                found.calls.push(call);
            }
        }
    }
    found.calls.sort_by_key(|call| call.start);
    found.calls.truncate(MAX_TOOL_CALLS_PER_MESSAGE);
    found
}

/// The tool an edit's arguments belong to, by their keys alone: `Edit`
/// (`file_path` with `old_string` or `new_string`), `MultiEdit` (`file_path`
/// with `edits`), `str_replace_editor` (`path` with `old_str` / `new_str`,
/// or `command: create` with `file_text`), `Write` (`file_path` with
/// `content`), `apply_patch` (a patch under one of
/// [`precedent_core::tool::PATCH_ARGUMENTS`]).
pub(crate) fn edit_tool_of_arguments(object: &Map<String, Value>) -> Option<&'static str> {
    let has = |key: &str| object.contains_key(key);
    let text = |key: &str| object.get(key).and_then(Value::as_str);
    if has("file_path") && (has("old_string") || has("new_string")) {
        return Some("Edit");
    }
    if has("file_path") && object.get("edits").is_some_and(Value::is_array) {
        return Some("MultiEdit");
    }
    if has("path") && (has("old_str") || has("new_str")) {
        return Some("str_replace_editor");
    }
    if text("command") == Some("create") && (has("file_text") || has("path")) {
        return Some("str_replace_editor");
    }
    if has("file_path") && has("content") && object.len() <= 3 {
        return Some("Write");
    }
    let is_patch = |key: &&str| {
        text(key).is_some_and(|patch| patch.trim_start().starts_with("*** Begin Patch"))
    };
    if precedent_core::tool::PATCH_ARGUMENTS.iter().any(is_patch) {
        return Some("apply_patch");
    }
    None
}

/// The call an object of arguments makes: an edit by its keys (the name
/// beside it only confirms it), else a call of the tool the text names.
fn call_of_arguments(
    named: Option<&str>,
    object: &Map<String, Value>,
    start: usize,
    end: usize,
) -> Option<ToolCall> {
    let mut arguments = object.clone();
    let name = match edit_tool_of_arguments(object) {
        Some("str_replace_editor") => {
            if !arguments.contains_key("command") {
                let command = if arguments.contains_key("old_str") {
                    "str_replace"
                } else {
                    "create"
                };
                arguments.insert("command".into(), Value::String(command.into()));
            }
            // A text name such as `str_replace_based_edit_tool` is kept.
            named
                .filter(|name| {
                    precedent_core::tool::kind_of(name).is_some_and(ToolKind::edits_files)
                })
                .unwrap_or("str_replace_editor")
        }
        Some(tool) => tool,
        None => named?,
    };
    Some(ToolCall {
        name: name.to_string(),
        arguments,
        start,
        end,
    })
}

/// The tool the text just before a JSON object names: `Tool call: NAME`
/// (or `Tool use:`, `Calling tool NAME`) on the line above or on the same
/// line, `[tool_use: NAME]`, `Calling NAME with`.
pub(crate) fn named_before(message: &str, start: usize) -> Option<&str> {
    let from = super::text::floor_char_boundary(message, start.saturating_sub(MAX_NAME_LOOKBACK));
    let before = message.get(from..start)?.trim_end();
    let line = before.rsplit('\n').next().unwrap_or(before).trim();
    let line = if line.is_empty() {
        before.trim_end().rsplit('\n').next().unwrap_or("").trim()
    } else {
        line
    };
    tool_name_in_line(line)
}

/// The tool a line that introduces a call names.
fn tool_name_in_line(line: &str) -> Option<&str> {
    let line = line.trim().trim_end_matches(':').trim_end();
    let name = if let Some(rest) = line
        .strip_prefix("[tool_use:")
        .or_else(|| line.strip_prefix("[tool_call:"))
    {
        rest.trim_end_matches(']').trim()
    } else if let Some(rest) = line.strip_prefix("Calling ") {
        let rest = rest.strip_prefix("tool ").unwrap_or(rest);
        rest.strip_suffix(" with").unwrap_or(rest).trim()
    } else {
        let lowered_prefix = ["Tool call:", "Tool Call:", "Tool use:", "Tool:", "Action:"];
        let rest = lowered_prefix
            .iter()
            .find_map(|prefix| line.strip_prefix(prefix))?;
        rest.trim()
    };
    let name = name.trim_matches(['`', '"', '\'', '*']);
    is_plain_name(name).then_some(name)
}

/// JSON objects written inline after a tool's name: `Calling NAME with
/// {...}` and `NAME({...})`, each with the name, its byte range and the
/// object.
fn inline_argument_objects(message: &str) -> Vec<(&str, usize, usize, Map<String, Value>)> {
    let mut found = Vec::new();
    let bytes = message.as_bytes();
    for marker in [" with {", "({"] {
        let finder = memchr::memmem::Finder::new(marker);
        for at in finder.find_iter(bytes).take(MAX_TOOL_CALLS_PER_MESSAGE) {
            let brace = at + marker.len() - 1;
            let line_start = message
                .get(..at)
                .and_then(|head| head.rfind('\n'))
                .map_or(0, |newline| newline + 1);
            let Some(head) = message.get(line_start..at) else {
                continue;
            };
            let name = if marker == "({" {
                let word_start = head
                    .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(0, |position| position + 1);
                head.get(word_start..).filter(|name| is_plain_name(name))
            } else {
                tool_name_in_line(&format!("{} with", head.trim())).and_then(|name| {
                    head.find(name)
                        .and_then(|position| head.get(position..position + name.len()))
                })
            };
            let Some(name) = name else {
                continue;
            };
            let Some(rest) = message.get(brace..) else {
                continue;
            };
            let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            if let Some(Ok(Value::Object(object))) = values.next() {
                let end = brace + values.byte_offset();
                found.push((name, brace, end, object));
            }
        }
    }
    found
}

/// SWE-agent's XML function calls:
/// `<function=NAME>` then `<parameter=KEY>VALUE</parameter>` up to
/// `</function>` (or the end of the message when it is missing).
pub(crate) fn xml_calls(message: &str) -> Vec<ToolCall> {
    let mut calls = Vec::new();
    if !contains_str!(message, "<function=") {
        return calls;
    }
    let mut position = 0;
    while calls.len() < MAX_TOOL_CALLS_PER_MESSAGE {
        let Some(rest) = message.get(position..) else {
            break;
        };
        let Some(found) = rest.find("<function=") else {
            break;
        };
        let start = position + found;
        let name_start = start + "<function=".len();
        let Some((name, body, end)) = xml_element(message, name_start, "<function=", "</function>")
        else {
            break;
        };
        if is_plain_name(name) {
            calls.push(ToolCall {
                name: name.to_string(),
                arguments: xml_parameters(body),
                start,
                end,
            });
        }
        position = end.max(start + 1);
    }
    calls
}

/// The element of `text` whose name starts at `name_start`, just past its
/// `open` tag (`<function=`): `NAME>BODY` then `close` (`</function>`); one
/// left unclosed runs to the next `open` or the end. Its trimmed name, its
/// body and where it ends; `None` when no `>` ends the name.
fn xml_element<'t>(
    text: &'t str,
    name_start: usize,
    open: &str,
    close: &str,
) -> Option<(&'t str, &'t str, usize)> {
    let name_length = text.get(name_start..)?.find('>')?;
    let name = text
        .get(name_start..name_start + name_length)
        .unwrap_or("")
        .trim();
    let body_start = name_start + name_length + 1;
    let tail = text.get(body_start..).unwrap_or("");
    let (body_length, end) = match tail.find(close) {
        Some(found) => (found, body_start + found + close.len()),
        None => {
            let next = tail.find(open).unwrap_or(tail.len());
            (next, body_start + next)
        }
    };
    Some((name, tail.get(..body_length).unwrap_or(""), end))
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `<parameter=KEY>VALUE</parameter>` pairs; a value without its closing tag
/// runs to the next parameter or the end of the body.
fn xml_parameters(body: &str) -> Map<String, Value> {
    let mut arguments = Map::new();
    let mut position = 0;
    while arguments.len() < MAX_XML_PARAMETERS {
        let Some(found) = body
            .get(position..)
            .and_then(|rest| rest.find("<parameter="))
        else {
            break;
        };
        let key_start = position + found + "<parameter=".len();
        let Some((key, mut value, next)) =
            xml_element(body, key_start, "<parameter=", "</parameter>")
        else {
            break;
        };
        // The tags usually stand on their own lines.
        value = value.strip_prefix('\n').unwrap_or(value);
        value = value.strip_suffix('\n').unwrap_or(value);
        if is_plain_name(key) {
            arguments.insert(key.to_string(), Value::String(value.to_string()));
        }
        position = next.max(key_start);
    }
    arguments
}

/// Arguments of a call: an object, or a string holding one.
fn arguments_of(
    name: &str,
    value: Option<&Value>,
    found: &mut ToolCalls,
) -> Option<Map<String, Value>> {
    match value? {
        Value::Object(map) => Some(map.clone()),
        Value::String(text) if text.trim().is_empty() => Some(Map::new()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Some(map),
            _ => {
                found.problem(format!(
                    "arguments of tool call {name} are not a JSON object; call kept without them"
                ));
                Some(Map::new())
            }
        },
        _ => None,
    }
}

fn walk(value: &Value, start: usize, end: usize, depth: usize, found: &mut ToolCalls) {
    if depth > MAX_JSON_DEPTH || found.calls.len() >= MAX_TOOL_CALLS_PER_MESSAGE {
        return;
    }
    match value {
        Value::Array(items) => {
            for item in items.iter().take(256) {
                walk(item, start, end, depth + 1, found);
            }
        }
        Value::Object(object) => {
            let kind = object.get("type").and_then(Value::as_str);
            if kind == Some("tool_result") {
                if found.results.len() < MAX_TOOL_RESULTS_PER_MESSAGE {
                    found.results.push(ToolResult {
                        text: object.get("content").map(result_text).unwrap_or_default(),
                        is_error: object
                            .get("is_error")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    });
                }
                return;
            }
            let function = object.get("function").and_then(Value::as_object);
            let name = object
                .get("name")
                .and_then(Value::as_str)
                .or_else(|| function.and_then(|f| f.get("name")).and_then(Value::as_str));
            if let Some(name) = name.filter(|name| is_plain_name(name)) {
                let arguments = ["input", "arguments", "parameters", "args"]
                    .iter()
                    .find_map(|key| object.get(*key))
                    .or_else(|| function.and_then(|f| f.get("arguments")));
                if let Some(arguments) = arguments_of(name, arguments, found) {
                    found.calls.push(ToolCall {
                        name: name.to_string(),
                        arguments,
                        start,
                        end,
                    });
                    return;
                }
            }
            for key in [
                "tool_calls",
                "content",
                "message",
                "function_call",
                "messages",
            ] {
                if let Some(inner) = object.get(key)
                    && (inner.is_object() || inner.is_array())
                {
                    walk(inner, start, end, depth + 1, found);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &[(&str, &[(&str, &str)])]) {
        let parsed = parse(input);
        let got: Vec<(String, Vec<(String, String)>)> = parsed
            .calls
            .iter()
            .map(|call| {
                let mut arguments: Vec<(String, String)> = call
                    .arguments
                    .iter()
                    .map(|(key, value)| {
                        let text = value
                            .as_str()
                            .map_or_else(|| value.to_string(), str::to_string);
                        (key.clone(), text)
                    })
                    .collect();
                arguments.sort();
                (call.name.clone(), arguments)
            })
            .collect();
        let expected: Vec<(String, Vec<(String, String)>)> = expected
            .iter()
            .map(|(name, arguments)| {
                let mut arguments: Vec<(String, String)> = arguments
                    .iter()
                    .map(|(key, value)| (key.to_string(), value.to_string()))
                    .collect();
                arguments.sort();
                (name.to_string(), arguments)
            })
            .collect();
        assert_eq!(got, expected, "calls of:\n{input}");
        for call in &parsed.calls {
            assert!(input.get(call.start..call.end).is_some());
        }
    }

    #[test]
    fn swe_agent_xml_calls() {
        check(
            "Let me look.\n\n<function=bash>\n<parameter=command>grep -rn update_many src/</parameter>\n</function>",
            &[("bash", &[("command", "grep -rn update_many src/")])],
        );
        check(
            "<function=str_replace_editor>\n<parameter=command>str_replace</parameter>\n<parameter=path>/testbed/a.py</parameter>\n<parameter=old_str>\nx = 1\n</parameter>\n<parameter=new_str>\nx = 2\n</parameter>\n</function>",
            &[(
                "str_replace_editor",
                &[
                    ("command", "str_replace"),
                    ("new_str", "x = 2"),
                    ("old_str", "x = 1"),
                    ("path", "/testbed/a.py"),
                ],
            )],
        );
        // Unclosed tags: the value runs to the end.
        check("<function=submit>\n", &[("submit", &[])]);
        check(
            "<function=bash><parameter=command>ls -la",
            &[("bash", &[("command", "ls -la")])],
        );
    }

    #[test]
    fn openai_and_anthropic_calls() {
        check(
            r#"{"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "str_replace_editor", "arguments": "{\"command\": \"view\", \"path\": \"/workspace/a.py\"}"}}]}"#,
            &[(
                "str_replace_editor",
                &[("command", "view"), ("path", "/workspace/a.py")],
            )],
        );
        check(
            r#"{"type": "tool_use", "id": "toolu_1", "name": "Edit", "input": {"file_path": "/r/a.py", "old_string": "a", "new_string": "b"}}"#,
            &[(
                "Edit",
                &[
                    ("file_path", "/r/a.py"),
                    ("new_string", "b"),
                    ("old_string", "a"),
                ],
            )],
        );
        let parsed = parse(
            r#"{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true, "content": [{"type": "text", "text": "String to replace not found"}]}"#,
        );
        assert_eq!(
            parsed.results,
            vec![ToolResult {
                text: "String to replace not found".to_string(),
                is_error: true
            }]
        );
    }

    #[test]
    fn rendered_calls_and_results_read_back() {
        use precedent_core::tool::render::{call_arguments, render_call, render_result};
        // As the API writes a call: its arguments made an object.
        let api_call =
            |name: &str, arguments: &Value| render_call(name, &call_arguments(arguments));
        let call = api_call(
            "Edit",
            &serde_json::json!({"file_path": "/r/a.py", "old_string": "a", "new_string": "b"}),
        );
        check(
            &format!("Editing.\n{call}"),
            &[(
                "Edit",
                &[
                    ("file_path", "/r/a.py"),
                    ("new_string", "b"),
                    ("old_string", "a"),
                ],
            )],
        );
        let call = api_call("bash", &Value::String(r#"{"command": "ls"}"#.to_string()));
        check(&call, &[("bash", &[("command", "ls")])]);
        let patch = "*** Begin Patch\n*** End Patch";
        let call = api_call("apply_patch", &Value::String(patch.to_string()));
        check(&call, &[("apply_patch", &[("input", patch)])]);

        assert_eq!(render_result("  ", false), "(no output)");
        let failed = parse(&render_result("Traceback (most recent call last):", true));
        assert_eq!(failed.results.len(), 1);
        assert!(failed.results[0].is_error);
        assert!(parse(&render_result("fine", false)).results.is_empty());
    }

    #[test]
    fn argument_objects_are_calls_whatever_text_wraps_them() {
        let edit = r#"{"file_path": "/r/a.py", "old_string": "a", "new_string": "b"}"#;
        let expected: &[(&str, &[(&str, &str)])] = &[(
            "Edit",
            &[
                ("file_path", "/r/a.py"),
                ("new_string", "b"),
                ("old_string", "a"),
            ],
        )];
        for wrapped in [
            format!("Tool call: Edit\n{edit}"),
            format!("[tool_use: Edit]\n{edit}"),
            format!("Calling Edit with {edit}"),
            format!("Edit({edit})"),
            format!("Now the fix:\n{edit}"),
        ] {
            check(&wrapped, expected);
        }
        check(
            "Tool call: str_replace_based_edit_tool\n{\"path\": \"/testbed/a.py\", \"old_str\": \"x\", \"new_str\": \"y\"}",
            &[(
                "str_replace_based_edit_tool",
                &[
                    ("command", "str_replace"),
                    ("new_str", "y"),
                    ("old_str", "x"),
                    ("path", "/testbed/a.py"),
                ],
            )],
        );
        check(
            "{\"command\": \"create\", \"path\": \"/testbed/b.py\", \"file_text\": \"x = 1\"}",
            &[(
                "str_replace_editor",
                &[
                    ("command", "create"),
                    ("file_text", "x = 1"),
                    ("path", "/testbed/b.py"),
                ],
            )],
        );
        check(
            "Tool call: Write\n{\"file_path\": \"a.md\", \"content\": \"# A\"}",
            &[("Write", &[("content", "# A"), ("file_path", "a.md")])],
        );
        check(
            "Tool call: Bash\n{\"command\": \"pytest -x\"}",
            &[("Bash", &[("command", "pytest -x")])],
        );
        // Arguments that are no edit and name no tool are no call.
        check("The config:\n{\"command\": \"ls\", \"x\": 1}", &[]);
        // A failed result written after `Tool result:`.
        let parsed = parse("Tool result:\nERROR: String to replace not found");
        assert!(parsed.results.iter().any(|result| result.is_error));
    }

    #[test]
    fn invalid_json_arguments_give_a_problem_and_keep_the_call() {
        let parsed = parse(
            r#"{"type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls"}}"#,
        );
        assert_eq!(parsed.calls.len(), 1);
        assert!(parsed.calls[0].arguments.is_empty());
        assert_eq!(parsed.problems.len(), 1, "{:?}", parsed.problems);
    }
}
