//! The tools of coding agents (not precedent's own MCP tools): one table,
//! [`TOOLS`], says for every tool name the agents' frameworks use which
//! kind of tool it is (a shell, a file editor, a reader, a finishing call,
//! a patch), and the constants beside it say which arguments hold a call's
//! command, file and patch. Extraction (`ingest`), the transcript importer
//! (`import`) and the API's content parts (`api`) read this table; nothing
//! else lists tool names.
//!
//! How a call and its result are written as text is [`render`]'s.

pub mod render;

/// What a tool does, as far as reading a session goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// Runs a shell command (under one of [`COMMAND_ARGUMENTS`]).
    Shell,
    /// A file editor whose `command` argument says what it does
    /// ([`EDITOR_COMMANDS`]): SWE-agent's and OpenHands' `str_replace_editor`,
    /// Anthropic's text editor.
    Editor,
    /// Replaces a string in a file (Claude Code's `Edit`: `old_string`,
    /// `new_string`, `replace_all`).
    Replace,
    /// Several replacements in one file (`MultiEdit`: `edits`).
    MultiReplace,
    /// Writes a whole file (`content`).
    Write,
    /// Edits a notebook cell (`new_source`, `edit_mode`).
    NotebookEdit,
    /// Applies a `*** Begin Patch` patch (under one of [`PATCH_ARGUMENTS`]).
    Patch,
    /// Reads a file and answers its lines numbered.
    Read,
    /// Reads or lists files otherwise (`cat`, `Glob`, `LS`).
    Browse,
    /// Searches a file and answers the matching lines numbered (SWE-agent's
    /// `search_file`); its calls are commands.
    Search,
    /// Says the run is done (`submit`, `finish`).
    Finish,
}

impl ToolKind {
    /// Whether tools of this kind edit files.
    pub fn edits_files(self) -> bool {
        matches!(
            self,
            ToolKind::Editor
                | ToolKind::Replace
                | ToolKind::MultiReplace
                | ToolKind::Write
                | ToolKind::NotebookEdit
                | ToolKind::Patch
        )
    }

    /// Whether tools of this kind edit, read or list files: their calls
    /// are not shell commands.
    pub fn handles_files(self) -> bool {
        self.edits_files() || matches!(self, ToolKind::Read | ToolKind::Browse)
    }
}

/// One tool: a row of [`TOOLS`].
#[derive(Debug)]
pub struct Tool {
    /// Its name as agents call it (matched ASCII case-insensitively).
    pub name: &'static str,
    /// What it does.
    pub kind: ToolKind,
}

const fn tool(name: &'static str, kind: ToolKind) -> Tool {
    Tool { name, kind }
}

/// Every tool precedent knows by name. A name appears in one row only
/// (case aside).
pub static TOOLS: &[Tool] = &[
    // Shells: SWE-agent, OpenHands, Claude Code, Codex CLI, Gemini CLI,
    // Cline and the generic names frameworks give one.
    tool("bash", ToolKind::Shell),
    tool("shell", ToolKind::Shell),
    tool("sh", ToolKind::Shell),
    tool("execute_bash", ToolKind::Shell),
    tool("run_command", ToolKind::Shell),
    tool("run_shell_command", ToolKind::Shell),
    tool("terminal", ToolKind::Shell),
    tool("execute_command", ToolKind::Shell),
    tool("exec", ToolKind::Shell),
    tool("exec_command", ToolKind::Shell),
    tool("local_shell", ToolKind::Shell),
    tool("container.exec", ToolKind::Shell),
    tool("run", ToolKind::Shell),
    tool("cmd", ToolKind::Shell),
    tool("command", ToolKind::Shell),
    // File editors.
    tool("str_replace_editor", ToolKind::Editor),
    tool("str_replace_based_edit_tool", ToolKind::Editor),
    tool("edit_file", ToolKind::Editor),
    tool("file_editor", ToolKind::Editor),
    tool("text_editor", ToolKind::Editor),
    tool("Edit", ToolKind::Replace),
    tool("MultiEdit", ToolKind::MultiReplace),
    tool("Write", ToolKind::Write),
    tool("write_file", ToolKind::Write),
    tool("create_file", ToolKind::Write),
    tool("NotebookEdit", ToolKind::NotebookEdit),
    tool("apply_patch", ToolKind::Patch),
    // Readers.
    tool("Read", ToolKind::Read),
    tool("read_file", ToolKind::Read),
    tool("view_file", ToolKind::Read),
    tool("view", ToolKind::Browse),
    tool("cat", ToolKind::Browse),
    tool("Glob", ToolKind::Browse),
    tool("Grep", ToolKind::Browse),
    tool("LS", ToolKind::Browse),
    tool("NotebookRead", ToolKind::Browse),
    tool("search_file", ToolKind::Search),
    // The end of a run.
    tool("submit", ToolKind::Finish),
    tool("finish", ToolKind::Finish),
    tool("attempt_completion", ToolKind::Finish),
    tool("task_complete", ToolKind::Finish),
];

/// Arguments that name the file a tool reads or edits, the first present
/// wins.
pub const PATH_ARGUMENTS: [&str; 5] = ["path", "file_path", "notebook_path", "file", "filename"];
/// Arguments that hold a shell tool's command, the first present wins.
pub const COMMAND_ARGUMENTS: [&str; 3] = ["command", "cmd", "script"];
/// Arguments that hold an `apply_patch` call's patch, the first present wins.
pub const PATCH_ARGUMENTS: [&str; 3] = ["input", "patch", "content"];
/// What a file editor's `command` argument says it does.
pub const EDITOR_COMMANDS: [&str; 5] = ["view", "create", "str_replace", "insert", "undo_edit"];

/// The kind of the tool named `name` (ASCII case-insensitive), if precedent
/// knows it.
pub fn kind_of(name: &str) -> Option<ToolKind> {
    TOOLS
        .iter()
        .find(|tool| tool.name.eq_ignore_ascii_case(name))
        .map(|tool| tool.kind)
}

/// Whether `name` names a tool that edits, reads or lists files (ASCII
/// case-insensitive): its calls are not shell commands.
pub fn is_file_tool(name: &str) -> bool {
    kind_of(name).is_some_and(ToolKind::handles_files)
}

/// Whether `name` names a shell tool (ASCII case-insensitive).
pub fn is_shell(name: &str) -> bool {
    kind_of(name) == Some(ToolKind::Shell)
}

/// The names of the tools of one kind, as the table spells them.
pub fn names(kind: ToolKind) -> impl Iterator<Item = &'static str> {
    TOOLS
        .iter()
        .filter(move |tool| tool.kind == kind)
        .map(|tool| tool.name)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_name_is_in_one_row() {
        let mut seen = HashSet::new();
        for tool in TOOLS {
            assert!(!tool.name.is_empty());
            assert!(
                seen.insert(tool.name.to_ascii_lowercase()),
                "{} twice",
                tool.name
            );
        }
    }

    #[test]
    fn names_are_matched_whatever_their_case() {
        assert_eq!(kind_of("Bash"), Some(ToolKind::Shell));
        assert_eq!(kind_of("EXEC_COMMAND"), Some(ToolKind::Shell));
        assert_eq!(kind_of("edit"), Some(ToolKind::Replace));
        assert_eq!(kind_of("read"), Some(ToolKind::Read));
        assert_eq!(kind_of("search"), None);
        assert!(is_shell("container.exec"));
        assert!(!is_shell("str_replace_editor"));
    }

    #[test]
    fn file_tools_are_the_editors_and_readers() {
        for tool in TOOLS {
            let expected = !matches!(
                tool.kind,
                ToolKind::Shell | ToolKind::Search | ToolKind::Finish
            );
            assert_eq!(tool.kind.handles_files(), expected, "{}", tool.name);
        }
        assert_eq!(
            names(ToolKind::Finish).collect::<Vec<_>>(),
            ["submit", "finish", "attempt_completion", "task_complete"]
        );
    }
}
