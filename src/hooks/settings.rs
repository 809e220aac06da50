//! settings: precedent's hook entries in an agent's settings file (Claude
//! Code's `settings.json`, Codex's `hooks.json`), added and removed as text.
//!
//! The file is read as JSONC (`//` and `/* */` comments, trailing commas)
//! into a tree that keeps each value's byte span, and never serialized
//! again: an install inserts its entries as a few text splices and leaves
//! every other byte alone. What an install did is an [`Installed`] record
//! (the file's bytes before, the splices, a digest of the bytes after), so
//! that an uninstall of an untouched file restores it byte for byte; one
//! edited since removes the same splices where they still stand verbatim,
//! else removes precedent's entries by structure. Precedent's entries are
//! told by their command: `<path of precedent> hook <Event>`.
//!
//! Reading and writing files, and where the record is kept, is the
//! caller's; this module works on text.

use sha2::{Digest, Sha256};

use super::jsonc::{BOM, Kind, Node, member, parse, parse_counting, skip_blank};

/// Why a settings file could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The text is not JSON (comments and trailing commas aside).
    #[error("not parseable as JSON at line {line}, column {column}: {reason}")]
    Unparseable {
        /// 1-based line.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// What was expected.
        reason: String,
    },
    /// A value has a shape an agent would not accept either.
    #[error("{0}")]
    Shape(String),
}

/// One hook entry to write: the agent runs `command` on `event`, for at
/// most `timeout_secs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEntry {
    /// The agent's event name (`SessionStart`, `Stop`, ...).
    pub event: String,
    /// The shell command.
    pub command: String,
    /// The agent's deadline for the command, in seconds.
    pub timeout_secs: u32,
}

/// Text inserted by an install: `text` at byte `offset` of the file as
/// installed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Splice {
    /// Byte offset in the installed text.
    pub offset: usize,
    /// The inserted text.
    pub text: String,
}

/// What an install did to one file: the least that undoing it needs.
/// The file's own text is not kept (it may hold secrets): cutting the
/// splices out of the untouched installed text gives it back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Installed {
    /// Whether the file existed before (`false`: uninstall removes it).
    /// Read from `original` in records of earlier versions.
    #[serde(default)]
    pub existed: Option<bool>,
    /// The file's whole text before, as earlier versions recorded it;
    /// never written.
    #[serde(default, skip_serializing)]
    pub original: Option<String>,
    /// The inserted text, in file order.
    pub splices: Vec<Splice>,
    /// SHA-256 (hex) of the text as installed.
    pub installed_sha256: String,
}

impl Installed {
    /// Whether the file existed before the install.
    pub fn existed(&self) -> bool {
        self.existed.unwrap_or(self.original.is_some())
    }
}

/// The result of an install on a file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallOutcome {
    /// Every entry is there already.
    AlreadyInstalled,
    /// The new text, and what was done.
    Changed {
        /// The file's new text.
        text: String,
        /// The record for uninstall.
        installed: Installed,
        /// The events added.
        events_added: Vec<String>,
    },
}

/// The result of an uninstall on a file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UninstallOutcome {
    /// No precedent entry is in the file.
    NothingToRemove,
    /// The file should become this text.
    Write(String),
    /// The file held nothing but precedent's entries and did not exist
    /// before: it should be removed.
    Delete,
}

/// One precedent entry found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundEntry {
    /// The event it is under.
    pub event: String,
    /// Its command.
    pub command: String,
    /// The program the command runs (its first word).
    pub program: String,
}

/// SHA-256 of a text, as hex.
pub fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Adds `entries` to a settings file's text (`None` or blank: no file
/// yet). Events that already hold a precedent entry are left as they are.
pub fn install(
    original: Option<&str>,
    entries: &[HookEntry],
) -> Result<InstallOutcome, SettingsError> {
    if original.is_none_or(|text| text.trim_start_matches(BOM).trim().is_empty()) {
        return Ok(install_into_blank(original, entries));
    }
    let text = original.unwrap_or("");
    let root = parse(text)?;
    let Kind::Object(members) = &root.kind else {
        return Err(SettingsError::Shape(
            "the settings are not a JSON object".to_string(),
        ));
    };
    let unit = indent_unit(text);
    // (position in the original, text to insert)
    let mut inserts: Vec<(usize, String)> = Vec::new();
    let mut events_added = Vec::new();
    match member(members, "hooks") {
        None => {
            let indent = format!("{}{unit}", line_indent(text, root.start));
            let mut insert = format!(
                "\n{indent}\"hooks\": {}",
                hooks_object(entries, &indent, &unit)
            );
            insert.push_str(&closing(members.is_empty(), text, root.start));
            inserts.push((root.start + 1, insert));
            events_added.extend(entries.iter().map(|entry| entry.event.clone()));
        }
        Some(hooks) => {
            inserts_into_hooks(text, hooks, entries, &unit, &mut inserts, &mut events_added)?
        }
    }
    if inserts.is_empty() {
        return Ok(InstallOutcome::AlreadyInstalled);
    }
    let (result, splices) = spliced(text, inserts);
    // What was written must read back as settings holding every entry.
    let check = parse(&result)?;
    for entry in entries {
        if find_in(&result, &check)
            .iter()
            .all(|found| found.event != entry.event)
        {
            return Err(SettingsError::Shape(format!(
                "the entry for {} did not read back",
                entry.event
            )));
        }
    }
    let installed = Installed {
        existed: Some(true),
        original: None,
        splices,
        installed_sha256: digest(&result),
    };
    Ok(InstallOutcome::Changed {
        text: result,
        installed,
        events_added,
    })
}

/// An install into a file that does not exist or holds only whitespace.
fn install_into_blank(original: Option<&str>, entries: &[HookEntry]) -> InstallOutcome {
    let unit = "  ";
    let mut text = String::from("{\n");
    text.push_str(unit);
    text.push_str("\"hooks\": ");
    text.push_str(&hooks_object(entries, unit, unit));
    text.push_str("\n}\n");
    // A blank file's whitespace is given back on uninstall from the
    // record; the splice is everything after it.
    let kept = original.unwrap_or("");
    let full = format!("{kept}{text}");
    let installed = Installed {
        existed: Some(original.is_some()),
        original: None,
        splices: vec![Splice {
            offset: kept.len(),
            text,
        }],
        installed_sha256: digest(&full),
    };
    InstallOutcome::Changed {
        text: full,
        installed,
        events_added: entries.iter().map(|entry| entry.event.clone()).collect(),
    }
}

/// The inserts that add `entries` to the `"hooks"` object `hooks` of
/// `text`: a group under each event it holds without one of precedent's,
/// the other events as new members; the events added, in `events_added`.
fn inserts_into_hooks(
    text: &str,
    hooks: &Node,
    entries: &[HookEntry],
    unit: &str,
    inserts: &mut Vec<(usize, String)>,
    events_added: &mut Vec<String>,
) -> Result<(), SettingsError> {
    let Kind::Object(events) = &hooks.kind else {
        return Err(SettingsError::Shape(
            "\"hooks\" is not a JSON object".to_string(),
        ));
    };
    let indent = format!("{}{unit}", line_indent(text, hooks.start));
    let mut missing = Vec::new();
    for entry in entries {
        let Some(groups) = member(events, &entry.event) else {
            missing.push(entry);
            continue;
        };
        let Kind::Array(items) = &groups.kind else {
            return Err(SettingsError::Shape(format!(
                "\"hooks\".\"{}\" is not a JSON array",
                entry.event
            )));
        };
        if items
            .iter()
            .any(|group| group_is_ours(text, group, &entry.event).is_some())
        {
            continue;
        }
        let group_indent = format!("{}{unit}", line_indent(text, groups.start));
        let mut insert = format!("\n{group_indent}{}", group(entry, &group_indent, unit));
        insert.push_str(&closing(items.is_empty(), text, groups.start));
        inserts.push((groups.start + 1, insert));
        events_added.push(entry.event.clone());
    }
    if !missing.is_empty() {
        let rendered: Vec<String> = missing
            .iter()
            .map(|entry| event_member(entry, &indent, unit))
            .collect();
        let mut insert = rendered.join(",");
        insert.push_str(&closing(events.is_empty(), text, hooks.start));
        inserts.push((hooks.start + 1, insert));
        events_added.extend(missing.iter().map(|entry| entry.event.clone()));
    }
    Ok(())
}

/// `text` with each insert at its position, and where each landed.
fn spliced(text: &str, mut inserts: Vec<(usize, String)>) -> (String, Vec<Splice>) {
    inserts.sort_by_key(|(position, _)| *position);
    let mut result = String::with_capacity(text.len() + 1024);
    let mut splices = Vec::new();
    let mut copied = 0;
    for (position, insert) in inserts {
        result.push_str(&text[copied..position]);
        splices.push(Splice {
            offset: result.len(),
            text: insert.clone(),
        });
        result.push_str(&insert);
        copied = position;
    }
    result.push_str(&text[copied..]);
    (result, splices)
}

/// Removes precedent's entries from a settings file's text: with the
/// install's record, the file as it was when untouched since, else the
/// recorded splices where they stand verbatim, else every precedent entry
/// by structure (and the keys that held nothing else).
pub fn uninstall(
    current: &str,
    installed: Option<&Installed>,
) -> Result<UninstallOutcome, SettingsError> {
    if let Some(installed) = installed {
        if digest(current) == installed.installed_sha256 {
            if !installed.existed() {
                return Ok(UninstallOutcome::Delete);
            }
            if let Some(original) = &installed.original {
                return Ok(UninstallOutcome::Write(original.clone()));
            }
            if let Some(original) = cut_at_offsets(current, &installed.splices) {
                return Ok(UninstallOutcome::Write(original));
            }
        }
        // The splices cut where they stand, unless that leaves a comma
        // the edit put next to one of them dangling.
        let trailing_before = parse_counting(current).map_or(0, |(_, count)| count);
        if let Some(text) = remove_splices(current, &installed.splices)
            && parse_counting(&text).is_ok_and(|(_, count)| count <= trailing_before)
            && find(&text).is_ok_and(|found| found.is_empty())
        {
            return Ok(finish_removal(text, installed));
        }
    }
    let root = parse(current)?;
    if find_in(current, &root).is_empty() {
        return Ok(UninstallOutcome::NothingToRemove);
    }
    let mut text = current.to_string();
    // Each pass removes one span and reads the text again; a file holds a
    // handful of entries, so a bound this size is never reached.
    for _ in 0..1000 {
        let root = parse(&text)?;
        match next_removal(&text, &root) {
            Some((start, end)) => text.replace_range(start..end, ""),
            None => break,
        }
    }
    match installed {
        Some(installed) => Ok(finish_removal(text, installed)),
        None => Ok(UninstallOutcome::Write(text)),
    }
}

/// A file that did not exist before and now holds an empty object is
/// removed.
fn finish_removal(text: String, installed: &Installed) -> UninstallOutcome {
    if !installed.existed() {
        let bare: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if bare.is_empty() || bare == "{}" {
            return UninstallOutcome::Delete;
        }
    }
    UninstallOutcome::Write(text)
}

/// Every precedent entry in a settings file's text.
pub fn find(text: &str) -> Result<Vec<FoundEntry>, SettingsError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let root = parse(text)?;
    Ok(find_in(text, &root))
}

fn find_in(text: &str, root: &Node) -> Vec<FoundEntry> {
    let mut found = Vec::new();
    let Kind::Object(members) = &root.kind else {
        return found;
    };
    let Some(Node {
        kind: Kind::Object(events),
        ..
    }) = member(members, "hooks")
    else {
        return found;
    };
    for (event, _, groups) in events {
        let Kind::Array(groups) = &groups.kind else {
            continue;
        };
        for group in groups {
            for hook in group_hooks(group) {
                if let Some(command) = command_of(text, hook)
                    && let Some(program) = our_program(&command, event)
                {
                    found.push(FoundEntry {
                        event: event.clone(),
                        command,
                        program,
                    });
                }
            }
        }
    }
    found
}

/// The recorded splices removed from `current`, each found exactly once
/// (searched from its recorded place, as text before it may have
/// changed); `None` when one is missing or ambiguous.
/// The installed text `current` without its splices, cut at their
/// recorded offsets; `None` unless each stands there verbatim.
fn cut_at_offsets(current: &str, splices: &[Splice]) -> Option<String> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for splice in splices {
        let end = splice.offset.checked_add(splice.text.len())?;
        (current.get(splice.offset..end)? == splice.text).then_some(())?;
        spans.push((splice.offset, end));
    }
    cut_spans(current, spans)
}

/// `current` without its splices, each found where it stands verbatim,
/// once; `None` when one is missing or found twice.
fn remove_splices(current: &str, splices: &[Splice]) -> Option<String> {
    let mut spans = Vec::new();
    for splice in splices {
        if splice.text.is_empty() {
            continue;
        }
        let mut matches = current.match_indices(&splice.text);
        let (start, _) = matches.next()?;
        if matches.next().is_some() {
            return None;
        }
        spans.push((start, start + splice.text.len()));
    }
    cut_spans(current, spans)
}

/// `text` without the byte ranges `spans`; `None` when two overlap.
fn cut_spans(text: &str, mut spans: Vec<(usize, usize)>) -> Option<String> {
    spans.sort_unstable();
    if spans.windows(2).any(|pair| pair[0].1 > pair[1].0) {
        return None;
    }
    let mut text = text.to_string();
    for (start, end) in spans.into_iter().rev() {
        text.replace_range(start..end, "");
    }
    Some(text)
}

/// The next span to cut in a structural removal: the whole `hooks` key
/// when it holds only precedent's entries, else an event key holding
/// only them, else one group of precedent's, else one hook of precedent's
/// inside a group shared with others.
fn next_removal(text: &str, root: &Node) -> Option<(usize, usize)> {
    let Kind::Object(members) = &root.kind else {
        return None;
    };
    let hooks_index = members.iter().position(|(key, _, _)| key == "hooks")?;
    let hooks = &members[hooks_index].2;
    let Kind::Object(events) = &hooks.kind else {
        return None;
    };
    let only_ours = |event: &str, groups: &Node| match &groups.kind {
        Kind::Array(items) => {
            !items.is_empty()
                && items
                    .iter()
                    .all(|group| group_is_ours(text, group, event) == Some(true))
        }
        _ => false,
    };
    if !events.is_empty()
        && events
            .iter()
            .all(|(event, _, groups)| only_ours(event, groups))
    {
        return Some(member_span(text, root, members, hooks_index));
    }
    for (index, (event, _, groups)) in events.iter().enumerate() {
        if only_ours(event, groups) {
            return Some(member_span(text, hooks, events, index));
        }
    }
    for (event, _, groups) in events {
        let Kind::Array(items) = &groups.kind else {
            continue;
        };
        let spans: Vec<(usize, usize)> = items.iter().map(|item| (item.start, item.end)).collect();
        for (index, group) in items.iter().enumerate() {
            match group_is_ours(text, group, event) {
                Some(true) => return Some(element_span(text, groups, &spans, index)),
                Some(false) => {
                    // A group shared with another tool's hooks: only ours go.
                    let Kind::Object(fields) = &group.kind else {
                        continue;
                    };
                    let Some(list) = member(fields, "hooks") else {
                        continue;
                    };
                    let Kind::Array(hooks) = &list.kind else {
                        continue;
                    };
                    let spans: Vec<(usize, usize)> =
                        hooks.iter().map(|hook| (hook.start, hook.end)).collect();
                    for (hook_index, hook) in hooks.iter().enumerate() {
                        if command_of(text, hook)
                            .is_some_and(|command| our_program(&command, event).is_some())
                        {
                            return Some(element_span(text, list, &spans, hook_index));
                        }
                    }
                }
                None => {}
            }
        }
    }
    None
}

/// The span of an object's member `index` with one separating comma.
pub(super) fn member_span(
    text: &str,
    object: &Node,
    members: &[(String, usize, Node)],
    index: usize,
) -> (usize, usize) {
    let spans: Vec<(usize, usize)> = members
        .iter()
        .map(|(_, key_start, value)| (*key_start, value.end))
        .collect();
    element_span(text, object, &spans, index)
}

/// The span to cut to remove element `index` of a container (whose
/// elements span `spans`) with its separator: up to the next element, or
/// from the previous one, or the container's whole inside when it is the
/// only one.
fn element_span(
    text: &str,
    container: &Node,
    spans: &[(usize, usize)],
    index: usize,
) -> (usize, usize) {
    let (start, end) = spans[index];
    if index + 1 < spans.len() {
        return (start, spans[index + 1].0);
    }
    if index > 0 {
        return (spans[index - 1].1, end);
    }
    // The only element: the inside goes, up to a trailing comma, keeping
    // the text before the closing bracket's line.
    let inside_end = container.end - 1;
    let after = skip_blank(text.as_bytes(), end).unwrap_or(end);
    let cut_end = if text.as_bytes().get(after) == Some(&b',') {
        after + 1
    } else {
        end
    };
    let cut_end = cut_end.min(inside_end);
    let line_start = text[..start].rfind('\n').map_or(start, |newline| newline);
    let cut_start = if line_start > container.start {
        line_start
    } else {
        container.start + 1
    };
    (cut_start, cut_end)
}

/// Whether a matcher group is precedent's: `Some(true)` when every hook of
/// it is precedent's for `event`, `Some(false)` when some are,
/// `None` when none is.
fn group_is_ours(text: &str, group: &Node, event: &str) -> Option<bool> {
    let hooks = group_hooks(group);
    let ours = hooks
        .iter()
        .filter(|hook| {
            command_of(text, hook).is_some_and(|command| our_program(&command, event).is_some())
        })
        .count();
    match ours {
        0 => None,
        count => Some(count == hooks.len()),
    }
}

fn group_hooks(group: &Node) -> Vec<&Node> {
    let Kind::Object(fields) = &group.kind else {
        return Vec::new();
    };
    match member(fields, "hooks") {
        Some(Node {
            kind: Kind::Array(hooks),
            ..
        }) => hooks.iter().collect(),
        _ => Vec::new(),
    }
}

fn command_of(_text: &str, hook: &Node) -> Option<String> {
    let Kind::Object(fields) = &hook.kind else {
        return None;
    };
    match member(fields, "command") {
        Some(Node {
            kind: Kind::String(command),
            ..
        }) => Some(command.clone()),
        _ => None,
    }
}

/// The program of a command `<program> hook <event>` whose program is
/// precedent (its file name `precedent`, or `precedent.exe`).
pub fn our_program(command: &str, event: &str) -> Option<String> {
    let words = shell_words(command);
    let [program, hook, named, ..] = words.as_slice() else {
        return None;
    };
    let name = std::path::Path::new(program)
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("");
    let is_precedent = name == "precedent" || name == "precedent.exe";
    (is_precedent && hook == "hook" && named == event).then(|| program.clone())
}

/// Words of a command as a POSIX shell splits them, for the forms
/// [`quote`] writes: bare words, single-quoted words and `\'`.
fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for quoted in chars.by_ref() {
                    if quoted == '\'' {
                        break;
                    }
                    word.push(quoted);
                }
            }
            '\\' => {
                in_word = true;
                if let Some(escaped) = chars.next() {
                    word.push(escaped);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// A word for a POSIX shell (the data directory's messages quote with it too).
pub use precedent_core::files::quote;

// ---- rendering -------------------------------------------------------

/// A matcher group holding one command hook, its lines after the first
/// indented by `indent`, `unit` per level.
fn group(entry: &HookEntry, indent: &str, unit: &str) -> String {
    let level1 = format!("{indent}{unit}");
    let level2 = format!("{level1}{unit}");
    let level3 = format!("{level2}{unit}");
    let command = serde_json::Value::String(entry.command.clone());
    format!(
        "{{\n{level1}\"hooks\": [\n{level2}{{\n{level3}\"type\": \"command\",\n{level3}\"command\": {command},\n{level3}\"timeout\": {}\n{level2}}}\n{level1}]\n{indent}}}",
        entry.timeout_secs
    )
}

/// `"<event>": [<group>]` on a line of its own at `indent`.
fn event_member(entry: &HookEntry, indent: &str, unit: &str) -> String {
    let inner = format!("{indent}{unit}");
    format!(
        "\n{indent}{}: [\n{inner}{}\n{indent}]",
        serde_json::Value::String(entry.event.clone()),
        group(entry, &inner, unit)
    )
}

fn hooks_object(entries: &[HookEntry], indent: &str, unit: &str) -> String {
    let inner = format!("{indent}{unit}");
    let members: Vec<String> = entries
        .iter()
        .map(|entry| event_member(entry, &inner, unit))
        .collect();
    format!("{{{}\n{indent}}}", members.join(","))
}

/// What follows an insertion at the start of a container: a comma before
/// the existing first element, or for an empty container a line break to
/// its closing bracket's indentation.
pub(super) fn closing(empty: bool, text: &str, container_start: usize) -> String {
    if empty {
        format!("\n{}", line_indent(text, container_start))
    } else {
        ",".to_string()
    }
}

/// The leading whitespace of the line holding `position`.
pub(super) fn line_indent(text: &str, position: usize) -> String {
    let line_start = text[..position]
        .rfind('\n')
        .map_or(0, |newline| newline + 1);
    text[line_start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// The file's indentation unit: the leading whitespace of its first
/// indented line, two spaces when none is.
pub(super) fn indent_unit(text: &str) -> String {
    text.lines()
        .map(|line| {
            line.chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect::<String>()
        })
        .find(|indent| !indent.is_empty())
        .unwrap_or_else(|| "  ".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<HookEntry> {
        ["SessionStart", "UserPromptSubmit", "Stop"]
            .iter()
            .map(|event| HookEntry {
                event: event.to_string(),
                command: format!("/opt/bin/precedent hook {event}"),
                timeout_secs: 5,
            })
            .collect()
    }

    fn installed(original: Option<&str>) -> (String, Installed) {
        match install(original, &entries()).expect("installs") {
            InstallOutcome::Changed {
                text, installed, ..
            } => (text, installed),
            InstallOutcome::AlreadyInstalled => panic!("nothing installed"),
        }
    }

    const WITH_COMMENTS: &str = r#"{
  // the model
  "model": "opus", /* block */
  "hooks": {
    "Stop": [
      { "hooks": [ { "type": "command", "command": "say done" } ] },
    ],
    "PreToolUse": [],
  },
  "unknown": {"nested": [1, 2, 3]}
}
"#;

    #[test]
    fn an_install_reads_back_and_an_uninstall_restores_every_byte() {
        for original in [
            None,
            Some(""),
            Some("  \n"),
            Some("{}"),
            Some("{\n}\n"),
            Some("{\n\t\"a\": 1\n}"),
            Some("{\"hooks\": {}}"),
            Some(WITH_COMMENTS),
            Some("\u{feff}{\n  \"env\": {\"API_KEY\": \"sk-secret\"}\n}\n"),
        ] {
            let (text, record) = installed(original);
            // The record keeps what was inserted, never the file's own text.
            let kept = serde_json::to_string(&record).expect("serializes");
            assert!(
                !kept.contains("sk-secret") && !kept.contains("the model"),
                "{kept}"
            );
            let record: Installed = serde_json::from_str(&kept).expect("reads back");
            assert_eq!(find(&text).expect("parses").len(), 3, "{text}");
            // Installing again adds nothing.
            assert_eq!(
                install(Some(&text), &entries()).expect("parses"),
                InstallOutcome::AlreadyInstalled
            );
            let expected = match original {
                Some(original) => UninstallOutcome::Write(original.to_string()),
                None => UninstallOutcome::Delete,
            };
            assert_eq!(uninstall(&text, Some(&record)).expect("removes"), expected);
            // Edited since: the splices go, the edit stays.
            let edited = text.replacen('{', "{\n  \"added\": true,", 1);
            let outcome = uninstall(&edited, Some(&record)).expect("removes");
            let UninstallOutcome::Write(left) = outcome else {
                panic!("{outcome:?}");
            };
            assert!(left.contains("\"added\": true"), "{left}");
            assert!(find(&left).expect("parses").is_empty(), "{left}");
            // No record: removal by structure.
            let outcome = uninstall(&text, None).expect("removes");
            let UninstallOutcome::Write(left) = outcome else {
                panic!("{outcome:?}");
            };
            assert!(find(&left).expect("parses").is_empty(), "{left}");
            if original == Some(WITH_COMMENTS) {
                assert!(
                    left.contains("// the model") && left.contains("say done"),
                    "{left}"
                );
            }
        }
    }

    #[test]
    fn a_record_of_an_earlier_version_still_undoes_its_install() {
        let (text, record) = installed(Some(WITH_COMMENTS));
        let mut old = serde_json::to_value(&record).expect("serializes");
        old["original"] = serde_json::Value::String(WITH_COMMENTS.to_string());
        old.as_object_mut().expect("object").remove("existed");
        let old: Installed = serde_json::from_value(old).expect("reads");
        assert!(old.existed());
        assert_eq!(
            uninstall(&text, Some(&old)).expect("removes"),
            UninstallOutcome::Write(WITH_COMMENTS.to_string())
        );
        let mut absent = serde_json::to_value(&record).expect("serializes");
        absent.as_object_mut().expect("object").remove("existed");
        let absent: Installed = serde_json::from_value(absent).expect("reads");
        assert!(!absent.existed());
    }

    #[test]
    fn a_reformatted_file_loses_only_precedents_entries_by_structure() {
        let (text, record) = installed(Some(WITH_COMMENTS));
        // Re-indented by an editor: the splices no longer stand verbatim.
        let reformatted = text.replace("      ", "    ");
        let UninstallOutcome::Write(left) =
            uninstall(&reformatted, Some(&record)).expect("removes")
        else {
            panic!("not written");
        };
        assert!(find(&left).expect("parses").is_empty(), "{left}");
        assert!(
            left.contains("say done")
                && left.contains("\"PreToolUse\"")
                && left.contains("\"unknown\""),
            "{left}"
        );
        let parsed = parse(&left).expect("parses");
        let Kind::Object(members) = parsed.kind else {
            panic!("object");
        };
        assert!(member(&members, "hooks").is_some());
    }

    #[test]
    fn a_file_that_is_not_json_is_refused_with_where() {
        let error = install(Some("{\n  \"a\": 1,\n  oops\n}"), &entries()).expect_err("refused");
        assert!(
            matches!(error, SettingsError::Unparseable { line: 3, .. }),
            "{error}"
        );
        assert!(install(Some("[1]"), &entries()).is_err());
        assert!(install(Some("{\"hooks\": []}"), &entries()).is_err());
        assert!(install(Some("{ /* open"), &entries()).is_err());
    }

    #[test]
    fn commands_are_recognized_by_program_and_event() {
        assert_eq!(
            our_program("'/my dir/precedent' hook Stop", "Stop").as_deref(),
            Some("/my dir/precedent")
        );
        assert_eq!(
            our_program("/usr/bin/precedent hook Stop", "SessionEnd"),
            None
        );
        assert_eq!(our_program("/usr/bin/other hook Stop", "Stop"), None);
        assert_eq!(quote("/my dir/it's"), "'/my dir/it'\\''s'");
        assert_eq!(shell_words(&quote("/my dir/it's")), vec!["/my dir/it's"]);
    }
}
