//! mcp_config: precedent's MCP server in an agent's own MCP configuration,
//! added and removed as text: Claude Code's user configuration
//! (`~/.claude.json`, the `mcpServers` object that `claude mcp add --scope
//! user` writes) and Codex's `config.toml` (a `[mcp_servers.precedent]`
//! table, as `codex mcp add` writes).
//!
//! As in [`super::settings`], a file is never serialized again: an entry is
//! inserted as one splice and removed by cutting the span it covers, so
//! every other byte stays as it was, and removing what was inserted gives
//! the file back byte for byte. An entry under precedent's name that runs
//! another program, or with other arguments, is someone else's: it is
//! neither replaced nor removed.
//!
//! Finding the files, reading and writing them, is the caller's; this
//! module works on text.

use super::jsonc::{self, Kind, Node};
use super::settings::{self, SettingsError};

/// The name precedent's server is registered under.
pub const SERVER_NAME: &str = "precedent";

/// The server to register: the program the agent starts, and its
/// arguments (`mcp` first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
}

/// The result of registering the server in a file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterOutcome {
    /// The same server is registered already.
    AlreadyRegistered,
    /// An entry of that name runs something else; it is left as it is.
    Taken {
        /// What the entry runs, as far as it could be read.
        command: String,
    },
    /// The file's new text.
    Changed(String),
}

/// The result of removing the server from a file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnregisterOutcome {
    /// No entry of that name is in the file.
    NothingToRemove,
    /// The entry of that name is not precedent's; it is left as it is.
    NotOurs {
        /// What the entry runs.
        command: String,
    },
    /// The file's new text.
    Changed(String),
}

/// Whether `command` is a precedent program (its file name `precedent`
/// or `precedent.exe`) and `args` start with `mcp`.
fn is_ours(command: &str, args: &[String]) -> bool {
    let name = std::path::Path::new(command)
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("");
    (name == "precedent" || name == "precedent.exe") && args.first().is_some_and(|a| a == "mcp")
}

// ---- Claude Code: JSON ------------------------------------------------

/// Registers `server` under `mcpServers` of Claude Code's configuration
/// text (`None` or blank: no file yet).
pub fn register_json(
    original: Option<&str>,
    server: &McpServer,
) -> Result<RegisterOutcome, SettingsError> {
    let text = original.unwrap_or("");
    if text.trim_start_matches(jsonc::BOM).trim().is_empty() {
        let unit = "  ";
        let entry = json_entry(server, &format!("{unit}{unit}"), unit);
        return Ok(RegisterOutcome::Changed(format!(
            "{text}{{\n{unit}\"mcpServers\": {{\n{unit}{unit}\"{SERVER_NAME}\": {entry}\n{unit}}}\n}}\n"
        )));
    }
    let root = jsonc::parse(text)?;
    let Kind::Object(members) = &root.kind else {
        return Err(SettingsError::Shape(
            "the configuration is not a JSON object".to_string(),
        ));
    };
    let unit = settings::indent_unit(text);
    let (position, insert) = match jsonc::member(members, "mcpServers") {
        None => {
            let indent = format!("{}{unit}", settings::line_indent(text, root.start));
            let inner = format!("{indent}{unit}");
            let entry = json_entry(server, &inner, &unit);
            let mut insert = format!(
                "\n{indent}\"mcpServers\": {{\n{inner}\"{SERVER_NAME}\": {entry}\n{indent}}}"
            );
            insert.push_str(&settings::closing(members.is_empty(), text, root.start));
            (root.start + 1, insert)
        }
        Some(servers) => {
            let Kind::Object(entries) = &servers.kind else {
                return Err(SettingsError::Shape(
                    "\"mcpServers\" is not a JSON object".to_string(),
                ));
            };
            if let Some(existing) = jsonc::member(entries, SERVER_NAME) {
                let (command, args) = json_command(existing);
                return Ok(if command == server.command && args == server.args {
                    RegisterOutcome::AlreadyRegistered
                } else {
                    RegisterOutcome::Taken {
                        command: describe(&command, &args),
                    }
                });
            }
            let indent = format!("{}{unit}", settings::line_indent(text, servers.start));
            let entry = json_entry(server, &indent, &unit);
            let mut insert = format!("\n{indent}\"{SERVER_NAME}\": {entry}");
            insert.push_str(&settings::closing(entries.is_empty(), text, servers.start));
            (servers.start + 1, insert)
        }
    };
    let mut result = String::with_capacity(text.len() + insert.len());
    result.push_str(&text[..position]);
    result.push_str(&insert);
    result.push_str(&text[position..]);
    // What is written must read back with the entry in it.
    let check = jsonc::parse(&result)?;
    if json_server(&check).is_none() {
        return Err(SettingsError::Shape(
            "the MCP server entry did not read back".to_string(),
        ));
    }
    Ok(RegisterOutcome::Changed(result))
}

/// Removes precedent's entry from `mcpServers` of Claude Code's
/// configuration text.
pub fn unregister_json(current: &str) -> Result<UnregisterOutcome, SettingsError> {
    if current.trim_start_matches(jsonc::BOM).trim().is_empty() {
        return Ok(UnregisterOutcome::NothingToRemove);
    }
    let root = jsonc::parse(current)?;
    let Kind::Object(members) = &root.kind else {
        return Ok(UnregisterOutcome::NothingToRemove);
    };
    let Some(servers) = jsonc::member(members, "mcpServers") else {
        return Ok(UnregisterOutcome::NothingToRemove);
    };
    let Kind::Object(entries) = &servers.kind else {
        return Ok(UnregisterOutcome::NothingToRemove);
    };
    let Some(index) = entries.iter().rposition(|(key, _, _)| key == SERVER_NAME) else {
        return Ok(UnregisterOutcome::NothingToRemove);
    };
    let (command, args) = json_command(&entries[index].2);
    if !is_ours(&command, &args) {
        return Ok(UnregisterOutcome::NotOurs {
            command: describe(&command, &args),
        });
    }
    // `mcpServers` itself stays, emptied when it held only precedent's:
    // an empty one is what Claude Code itself leaves, and the key may
    // have been the user's.
    let (start, end) = if entries.len() == 1 {
        only_member_span(current, servers, &entries[index].2)
    } else {
        settings::member_span(current, servers, entries, index)
    };
    let mut text = current.to_string();
    text.replace_range(start..end, "");
    Ok(UnregisterOutcome::Changed(text))
}

/// The span to cut to empty an object of its only member, whose value is
/// `value`: what register inserted into an empty object (the member, and
/// the line break to the closing bracket's line).
fn only_member_span(text: &str, object: &Node, value: &Node) -> (usize, usize) {
    let closing = format!("\n{}", settings::line_indent(text, object.start));
    let mut end = value.end;
    if text[end..].starts_with(&closing) {
        end += closing.len();
    }
    (object.start + 1, end)
}

/// The entry named precedent under `mcpServers`, if any.
fn json_server(root: &Node) -> Option<&Node> {
    let Kind::Object(members) = &root.kind else {
        return None;
    };
    let Kind::Object(entries) = &jsonc::member(members, "mcpServers")?.kind else {
        return None;
    };
    jsonc::member(entries, SERVER_NAME)
}

/// An entry's `command` and `args` (empty when absent or not strings).
fn json_command(entry: &Node) -> (String, Vec<String>) {
    let Kind::Object(fields) = &entry.kind else {
        return (String::new(), Vec::new());
    };
    let command = match jsonc::member(fields, "command") {
        Some(Node {
            kind: Kind::String(command),
            ..
        }) => command.clone(),
        _ => String::new(),
    };
    let args = match jsonc::member(fields, "args") {
        Some(Node {
            kind: Kind::Array(items),
            ..
        }) => items
            .iter()
            .filter_map(|item| match &item.kind {
                Kind::String(arg) => Some(arg.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    (command, args)
}

/// The entry `claude mcp add --scope user` writes for a stdio server, its
/// lines after the first indented by `indent`.
fn json_entry(server: &McpServer, indent: &str, unit: &str) -> String {
    let inner = format!("{indent}{unit}");
    let command = serde_json::Value::String(server.command.clone());
    let args = serde_json::Value::from(server.args.clone());
    format!(
        "{{\n{inner}\"type\": \"stdio\",\n{inner}\"command\": {command},\n{inner}\"args\": {args},\n{inner}\"env\": {{}}\n{indent}}}"
    )
}

fn describe(command: &str, args: &[String]) -> String {
    if command.is_empty() {
        return "no command".to_string();
    }
    let mut words = vec![settings::quote(command)];
    words.extend(args.iter().map(|arg| settings::quote(arg)));
    words.join(" ")
}

// ---- Codex: TOML ------------------------------------------------------

/// The table precedent's server is in.
const TOML_TABLE: &str = "mcp_servers.precedent";

/// Registers `server` as a `[mcp_servers.precedent]` table of Codex's
/// `config.toml` text (`None`: no file yet), appended at its end.
pub fn register_toml(original: Option<&str>, server: &McpServer) -> RegisterOutcome {
    let text = original.unwrap_or("");
    if let Some(found) = find_toml_table(text) {
        let (command, args) = toml_command(&text[found.start..found.end]);
        return if command == server.command && args == server.args {
            RegisterOutcome::AlreadyRegistered
        } else {
            RegisterOutcome::Taken {
                command: describe(&command, &args),
            }
        };
    }
    if let Some(line) = other_toml_definition(text) {
        return RegisterOutcome::Taken {
            command: format!("defined otherwise, at line {line}"),
        };
    }
    let mut result = text.to_string();
    if !result.is_empty() {
        if !result.ends_with('\n') {
            result.push('\n');
        }
        result.push('\n');
    }
    result.push_str(&toml_table(server));
    RegisterOutcome::Changed(result)
}

/// Removes precedent's `[mcp_servers.precedent]` table (with its
/// subtables, and the blank line register put before it) from Codex's
/// `config.toml` text.
pub fn unregister_toml(current: &str) -> UnregisterOutcome {
    let Some(found) = find_toml_table(current) else {
        return UnregisterOutcome::NothingToRemove;
    };
    let (command, args) = toml_command(&current[found.start..found.end]);
    if !is_ours(&command, &args) {
        return UnregisterOutcome::NotOurs {
            command: describe(&command, &args),
        };
    }
    let mut start = found.start;
    // The blank line register put before a table it appended at the end.
    if found.end == current.len() && current[..start].ends_with("\n\n") {
        start -= 1;
    }
    let mut text = current.to_string();
    text.replace_range(start..found.end, "");
    UnregisterOutcome::Changed(text)
}

/// The text `register_toml` appends.
fn toml_table(server: &McpServer) -> String {
    // A JSON string is a TOML basic string: the same escapes.
    let quoted = |word: &str| serde_json::Value::String(word.to_string()).to_string();
    let args: Vec<String> = server.args.iter().map(|arg| quoted(arg)).collect();
    format!(
        "[{TOML_TABLE}]\ncommand = {}\nargs = [{}]\n",
        quoted(&server.command),
        args.join(", ")
    )
}

/// A byte range of the text.
struct Span {
    start: usize,
    end: usize,
}

/// Lines of `text` with their byte offsets.
fn lines_with_offsets(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |line| {
        let start = offset;
        offset += line.len();
        (start, line)
    })
}

/// The name of the table a header line opens (`[a."b"]` is `a.b`);
/// `None` for other lines and for arrays of tables.
fn header_name(line: &str) -> Option<String> {
    let trimmed = line.trim();
    let inner = trimmed.strip_prefix('[')?;
    if inner.starts_with('[') {
        return Some(String::new());
    }
    let close = inner.find(']')?;
    Some(
        inner[..close]
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
            .collect(),
    )
}

/// The span of `[mcp_servers.precedent]` and its subtables: from its
/// header line to the next header of another table, or the end.
fn find_toml_table(text: &str) -> Option<Span> {
    let mut span: Option<Span> = None;
    for (offset, line) in lines_with_offsets(text) {
        let Some(name) = header_name(line) else {
            continue;
        };
        let ours = name == TOML_TABLE || name.starts_with(&format!("{TOML_TABLE}."));
        match (&mut span, ours) {
            (None, true) => {
                span = Some(Span {
                    start: offset,
                    end: text.len(),
                })
            }
            (Some(found), false) if found.end == text.len() => {
                found.end = offset;
            }
            _ => {}
        }
    }
    span
}

/// A line defining precedent's server other than by its own table (a
/// `precedent` key in `[mcp_servers]`, or a dotted `mcp_servers.precedent`
/// key), 1-based.
fn other_toml_definition(text: &str) -> Option<usize> {
    let mut table = String::new();
    for (number, line) in text.lines().enumerate() {
        if let Some(name) = header_name(line) {
            table = name;
            continue;
        }
        let key: String = line
            .split('=')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
            .collect();
        if !line.contains('=') {
            continue;
        }
        let full = if table.is_empty() {
            key
        } else {
            format!("{table}.{key}")
        };
        if full == TOML_TABLE || full.starts_with(&format!("{TOML_TABLE}.")) {
            return Some(number + 1);
        }
    }
    None
}

/// The `command` and `args` of a table's text (as far as they are plain
/// strings on one line each).
fn toml_command(table: &str) -> (String, Vec<String>) {
    let mut command = String::new();
    let mut args = Vec::new();
    for line in table.lines().skip(1) {
        if header_name(line).is_some() {
            break;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key.trim() {
            "command" => command = toml_strings(value).into_iter().next().unwrap_or_default(),
            "args" => args = toml_strings(value),
            _ => {}
        }
    }
    (command, args)
}

/// The strings of a TOML value on one line: basic (`"..."`, with JSON's
/// escapes) and literal (`'...'`) strings, in order.
fn toml_strings(value: &str) -> Vec<String> {
    let mut strings = Vec::new();
    let mut chars = value.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            '"' => {
                let mut end = None;
                while let Some((index, next)) = chars.next() {
                    match next {
                        '\\' => {
                            chars.next();
                        }
                        '"' => {
                            end = Some(index);
                            break;
                        }
                        _ => {}
                    }
                }
                let Some(end) = end else { break };
                if let Ok(text) = serde_json::from_str::<String>(&value[start..=end]) {
                    strings.push(text);
                }
            }
            '\'' => {
                let rest = &value[start + 1..];
                let Some(length) = rest.find('\'') else { break };
                strings.push(rest[..length].to_string());
                while chars
                    .peek()
                    .is_some_and(|(index, _)| *index <= start + 1 + length)
                {
                    chars.next();
                }
            }
            '#' => break,
            _ => {}
        }
    }
    strings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> McpServer {
        McpServer {
            command: "/opt/bin/precedent".to_string(),
            args: vec!["mcp".to_string()],
        }
    }

    fn changed(outcome: RegisterOutcome) -> String {
        match outcome {
            RegisterOutcome::Changed(text) => text,
            other => panic!("{other:?}"),
        }
    }

    fn removed(outcome: UnregisterOutcome) -> String {
        match outcome {
            UnregisterOutcome::Changed(text) => text,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_json_entry_goes_in_and_out_leaving_every_other_byte() {
        for original in [
            "{}",
            "{\n}\n",
            "{\n  \"numStartups\": 3,\n  \"projects\": {\"/a\": {\"mcpServers\": {}}}\n}\n",
            "{\n  \"mcpServers\": {}\n}\n",
            "{\n  \"mcpServers\": {\n    \"other\": {\"command\": \"x\"}\n  },\n  \"z\": [1]\n}\n",
            "{\n\t\"mcpServers\": {\n\t\t\"other\": {\"command\": \"x\"}\n\t}\n}",
        ] {
            let text = changed(register_json(Some(original), &server()).expect("parses"));
            let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            assert_eq!(
                value["mcpServers"]["precedent"]["command"], "/opt/bin/precedent",
                "{text}"
            );
            assert_eq!(value["mcpServers"]["precedent"]["args"][0], "mcp");
            assert_eq!(value["mcpServers"]["precedent"]["type"], "stdio");
            assert_eq!(
                register_json(Some(&text), &server()).expect("parses"),
                RegisterOutcome::AlreadyRegistered
            );
            let back = removed(unregister_json(&text).expect("parses"));
            let mut expected: serde_json::Value = serde_json::from_str(original).expect("JSON");
            if expected.get("mcpServers").is_some() {
                assert_eq!(back, original);
            } else {
                // The object register created stays, empty.
                expected["mcpServers"] = serde_json::json!({});
                let back: serde_json::Value = serde_json::from_str(&back).expect("JSON");
                assert_eq!(back, expected);
            }
        }
        let created = changed(register_json(None, &server()).expect("blank"));
        assert!(serde_json::from_str::<serde_json::Value>(&created).is_ok());
        assert_eq!(
            unregister_json("{\n  \"a\": 1\n}").expect("parses"),
            UnregisterOutcome::NothingToRemove
        );
    }

    #[test]
    fn someone_elses_entry_of_that_name_is_neither_replaced_nor_removed() {
        let theirs =
            "{\"mcpServers\": {\"precedent\": {\"command\": \"docker\", \"args\": [\"run\"]}}}";
        assert!(matches!(
            register_json(Some(theirs), &server()).expect("parses"),
            RegisterOutcome::Taken { .. }
        ));
        assert!(matches!(
            unregister_json(theirs).expect("parses"),
            UnregisterOutcome::NotOurs { .. }
        ));
        assert!(register_json(Some("[1]"), &server()).is_err());
        assert!(register_json(Some("{\"mcpServers\": []}"), &server()).is_err());
        assert!(register_json(Some("{\"a\": 1,,}"), &server()).is_err());
    }

    #[test]
    fn a_toml_table_goes_in_and_out_leaving_every_other_byte() {
        for original in [
            "",
            "model = \"o3\"\n",
            "model = \"o3\"",
            "# comment\n[features]\ncodex_hooks = true\n\n[mcp_servers.other]\ncommand = \"x\"\n",
        ] {
            let text = changed(register_toml(Some(original), &server()));
            assert!(
                text.contains(
                    "[mcp_servers.precedent]\ncommand = \"/opt/bin/precedent\"\nargs = [\"mcp\"]\n"
                ),
                "{text}"
            );
            assert_eq!(
                register_toml(Some(&text), &server()),
                RegisterOutcome::AlreadyRegistered
            );
            let back = removed(unregister_toml(&text));
            // A file without a final line break gets one.
            assert_eq!(back.trim_end(), original.trim_end(), "{text}");
            if original.ends_with('\n') || original.is_empty() {
                assert_eq!(back, original);
            }
        }
    }

    #[test]
    fn a_toml_table_in_the_middle_goes_with_its_subtables_only() {
        let text = "[mcp_servers.precedent]\ncommand = '/usr/bin/precedent'\nargs = [\"mcp\", \"--server\", \"http://x\"]  # ours\n[mcp_servers.precedent.env]\nA = \"1\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
        assert_eq!(
            removed(unregister_toml(text)),
            "[mcp_servers.other]\ncommand = \"x\"\n"
        );
        assert!(matches!(
            register_toml(Some(text), &server()),
            RegisterOutcome::Taken { .. }
        ));
        let theirs = "[mcp_servers.\"precedent\"]\ncommand = \"npx\"\n";
        assert!(matches!(
            unregister_toml(theirs),
            UnregisterOutcome::NotOurs { .. }
        ));
        let inline = "[mcp_servers]\nprecedent = { command = \"precedent\", args = [\"mcp\"] }\n";
        assert!(matches!(
            register_toml(Some(inline), &server()),
            RegisterOutcome::Taken { .. }
        ));
        assert_eq!(
            toml_strings(" [\"a\\\"b\", 'c\\d'] # \"e\""),
            vec!["a\"b".to_string(), "c\\d".to_string()]
        );
    }
}
