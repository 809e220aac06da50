//! `precedent setup`, end to end through the real binary in a home
//! directory of its own: what it writes for each agent, that running it
//! again changes nothing, and that `--uninstall` gives every file back.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A throwaway home directory.
struct Home {
    directory: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            directory: tempfile::tempdir().expect("home"),
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.directory.path().join(relative)
    }

    /// Runs `precedent <args>` with this home: exit code, stdout, stderr.
    fn run_with(&self, args: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_precedent"));
        command
            .args(args)
            .current_dir(self.directory.path())
            .env("HOME", self.directory.path())
            .env("XDG_DATA_HOME", self.path("data"))
            .env_remove("PRECEDENT_DATA_DIR")
            .env_remove("PRECEDENT_SERVER")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME");
        for (name, value) in env {
            command.env(name, value);
        }
        let output = command.output().expect("precedent runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    }

    /// `precedent <args>`, which must succeed: its stdout.
    fn run(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run_with(args, &[]);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        out
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).expect("read")
    }
}

/// Claude Code's user configuration as it keeps it: state, a project's
/// own servers, and a server of the user's.
const CLAUDE_JSON: &str = r#"{
  "numStartups": 12,
  "projects": {
    "/work/app": {
      "mcpServers": {},
      "allowedTools": []
    }
  },
  "mcpServers": {
    "other": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "other-server"
      ],
      "env": {}
    }
  },
  "theme": "dark"
}
"#;

const CODEX_TOML: &str = r#"# my settings
model = "o3"

[features]
codex_hooks = true

[mcp_servers.other]
command = "npx"
args = ["-y", "other-server"]
"#;

#[test]
fn setup_wires_hooks_and_mcp_then_uninstall_gives_every_byte_back() {
    for (agent, settings, config, original) in [
        (
            "claude-code",
            ".claude/settings.json",
            ".claude.json",
            CLAUDE_JSON,
        ),
        (
            "codex",
            ".codex/hooks.json",
            ".codex/config.toml",
            CODEX_TOML,
        ),
    ] {
        let home = Home::new();
        home.write(config, original);

        let out = home.run(&["setup", "--agent", agent]);
        // It says what it wrote, and where.
        assert!(
            out.contains(&home.path(settings).display().to_string()),
            "{agent}: {out}"
        );
        assert!(
            out.contains(&format!(
                "registered the MCP server precedent in {}",
                home.path(config).display()
            )),
            "{agent}: {out}"
        );
        assert!(
            out.contains(&format!("{} mcp", crate::support::resolved_binary())),
            "{agent}: {out}"
        );
        let hooks = home.read(settings);
        assert!(hooks.contains(" hook Stop\""), "{agent}: {hooks}");
        let written = home.read(config);
        match agent {
            "claude-code" => {
                let value: Value = serde_json::from_str(&written).expect("JSON");
                let server = &value["mcpServers"]["precedent"];
                assert_eq!(server["type"], "stdio", "{written}");
                assert_eq!(
                    server["command"],
                    crate::support::resolved_binary().as_str(),
                    "{written}"
                );
                assert_eq!(server["args"], serde_json::json!(["mcp"]), "{written}");
                assert_eq!(value["mcpServers"]["other"]["command"], "npx");
                assert_eq!(value["numStartups"], 12);
            }
            _ => {
                assert!(written.starts_with(original), "{written}");
                assert!(
                    written.ends_with(&format!(
                        "\n[mcp_servers.precedent]\ncommand = \"{}\"\nargs = [\"mcp\"]\n",
                        crate::support::resolved_binary()
                    )),
                    "{written}"
                );
            }
        }

        // Again: nothing changes.
        let again = home.run(&["setup", "--agent", agent]);
        assert!(
            again.contains("hooks are already") && again.contains("is already in"),
            "{agent}: {again}"
        );
        assert_eq!(home.read(config), written, "{agent}");
        assert_eq!(home.read(settings), hooks, "{agent}");

        // Undone: the configuration as it was, the hooks file it created
        // gone.
        let out = home.run(&["setup", "--agent", agent, "--uninstall"]);
        assert!(out.contains("removed the MCP server precedent"), "{out}");
        assert_eq!(home.read(config), original, "{agent}");
        assert!(!home.path(settings).exists(), "{agent}");
        // Nothing left to undo.
        let out = home.run(&["setup", "--agent", agent, "--uninstall"]);
        assert!(out.contains("nothing changed"), "{out}");
        assert_eq!(home.read(config), original, "{agent}");
    }
}

#[test]
fn setup_creates_the_mcp_configuration_when_there_is_none() {
    for (agent, config) in [
        ("claude-code", "agent-config/.claude.json"),
        ("codex", "agent-config/config.toml"),
    ] {
        let home = Home::new();
        let directory = home.path("agent-config");
        let variable = match agent {
            "claude-code" => "CLAUDE_CONFIG_DIR",
            _ => "CODEX_HOME",
        };
        let (code, out, err) = home.run_with(
            &["setup", "--agent", agent],
            &[(variable, directory.as_path())],
        );
        assert_eq!(code, Some(0), "{agent}: {err}");
        assert!(
            out.contains(&home.path(config).display().to_string()),
            "{agent}: {out}"
        );
        let written = home.read(config);
        assert!(
            written.contains(&crate::support::resolved_binary()),
            "{agent}: {written}"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path(config))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{agent}: the configuration is private");
    }
}

#[test]
fn setup_leaves_someone_elses_server_named_precedent_alone() {
    let home = Home::new();
    let theirs = "{\n  \"mcpServers\": {\n    \"precedent\": {\"command\": \"docker\", \"args\": [\"run\", \"precedent\"]}\n  }\n}\n";
    home.write(".claude.json", theirs);
    let out = home.run(&["setup", "--agent", "claude-code"]);
    assert!(out.contains("it is left as it is"), "{out}");
    assert_eq!(home.read(".claude.json"), theirs);
    let out = home.run(&["setup", "--agent", "claude-code", "--uninstall"]);
    assert!(out.contains("not precedent's"), "{out}");
    assert_eq!(home.read(".claude.json"), theirs);

    // A file that is not JSON is refused and left untouched.
    let broken = "{ \"theme\": \"dark\",, }";
    home.write(".claude.json", broken);
    let (code, _, err) = home.run_with(&["setup", "--agent", "claude-code"], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("left as it is"), "{err}");
    assert_eq!(home.read(".claude.json"), broken);
}

#[test]
fn setup_says_when_the_claude_code_plugin_is_enabled_too() {
    let home = Home::new();
    home.write(
        ".claude/settings.json",
        "{\n  \"enabledPlugins\": {\n    \"precedent@precedent\": true\n  }\n}\n",
    );
    let out = home.run(&["setup", "--agent", "claude-code"]);
    assert!(
        out.contains("plugin precedent@precedent is enabled too"),
        "{out}"
    );
    let home = Home::new();
    let out = home.run(&["setup", "--agent", "claude-code"]);
    assert!(!out.contains("plugin"), "{out}");
}

#[test]
fn setup_help_says_what_it_writes_and_how_to_undo_it() {
    let home = Home::new();
    let help = home.run(&["setup", "--help"]);
    for needle in [
        "--agent",
        "--uninstall",
        "~/.claude/settings.json",
        "~/.claude.json",
        "~/.codex/hooks.json",
        "~/.codex/config.toml",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
    let top = home.run(&["--help"]);
    assert!(top.contains("setup"), "{top}");
}
