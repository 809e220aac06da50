//! `precedent setup --agent claude-code|codex`: wires precedent into an
//! agent for every repository in one command, its hooks (through `hooks
//! install`, in the user's settings) and its MCP server (in the agent's
//! user MCP configuration), and says what it wrote where. `--uninstall`
//! takes both out again.
//!
//! The hooks are `cli::hooks`' to install and remove; the MCP entry's text
//! is `hooks::mcp_config`'s. This module finds the agent's MCP
//! configuration file and writes it through [`precedent_core::files::write_replacing`].

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::hooks::{self, Agent, HooksArgs};
use super::options::InstalledDataDirArgs;
use super::print_out;
use crate::hooks::mcp_config::{self, McpServer, RegisterOutcome, UnregisterOutcome};

/// The mode of an MCP configuration file setup creates (Claude Code's
/// holds the user's account state beside the servers).
const NEW_CONFIG_MODE: u32 = 0o600;

/// Options of `precedent setup`.
#[derive(Debug, Args)]
#[command(after_long_help = SETUP_AFTER_HELP)]
pub(super) struct SetupArgs {
    /// The agent to wire precedent into.
    #[arg(long, value_enum)]
    agent: Agent,

    #[command(flatten)]
    data_dir: InstalledDataDirArgs,

    /// A running server the hooks and the MCP server go through (e.g.
    /// http://127.0.0.1:8080), named in their commands; by default they go
    /// through the data directory's local server, started on first use.
    #[arg(long)]
    server: Option<String>,

    /// Take precedent out again: its hooks (as `hooks uninstall`) and its
    /// MCP server entry. Entries of that name that run something else are
    /// left alone.
    #[arg(long)]
    uninstall: bool,
}

const SETUP_AFTER_HELP: &str = "\
What setup writes (for the user, so every repository):
  claude-code  hooks SessionStart, UserPromptSubmit, Stop, SessionEnd in
               ~/.claude/settings.json; the MCP server `precedent` in
               ~/.claude.json (\"mcpServers\", as `claude mcp add --scope user`
               writes it). With CLAUDE_CONFIG_DIR set, both are in that
               folder.
  codex        hooks SessionStart, UserPromptSubmit, Stop in ~/.codex/hooks.json;
               the MCP server in ~/.codex/config.toml ([mcp_servers.precedent]).
               With CODEX_HOME set, both are in that folder.

Both commands name this precedent binary by its full path. Only precedent's
entries are added; every other byte of each file is kept. Running setup again
changes nothing; `setup --uninstall` removes what it added. Close the agent
first: Claude Code rewrites ~/.claude.json while it runs.

Examples:
  precedent setup --agent claude-code
  precedent setup --agent codex
  precedent setup --agent claude-code --uninstall";

/// Runs `precedent setup`.
pub(super) fn setup(args: SetupArgs) -> anyhow::Result<()> {
    let hooks_args = HooksArgs::user(
        args.agent,
        args.data_dir.data_dir.clone(),
        args.server.clone(),
    );
    if args.uninstall {
        hooks::uninstall(&hooks_args)?;
        unregister(args.agent)?;
        return Ok(());
    }
    hooks::install(&hooks_args)?;
    register(&args)?;
    if args.agent == Agent::ClaudeCode
        && let Some(plugin) = enabled_plugin()
    {
        print_out(&format!(
            "note: the Claude Code plugin {plugin} is enabled too, with the same hooks and MCP server; each hook would run twice: keep one (`/plugin uninstall {plugin}` in Claude Code, or `precedent setup --agent claude-code --uninstall`)"
        ));
    }
    print_out(match args.agent {
        Agent::ClaudeCode => {
            "start Claude Code again; `claude mcp list` shows precedent, and `precedent hooks status` the hooks"
        }
        // `hooks install` said how to trust the hooks.
        Agent::Codex => "start Codex again; `codex mcp list` shows precedent",
    });
    Ok(())
}

/// The precedent plugin (`precedent@<marketplace>`) when Claude Code's
/// user settings enable it.
fn enabled_plugin() -> Option<String> {
    let directory = match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|value| !value.is_empty()) {
        Some(directory) => PathBuf::from(directory),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".claude"),
    };
    let text = std::fs::read_to_string(directory.join("settings.json")).ok()?;
    let settings: serde_json::Value = serde_json::from_str(&text).ok()?;
    settings
        .get("enabledPlugins")?
        .as_object()?
        .iter()
        .find(|(name, enabled)| name.starts_with("precedent@") && enabled.as_bool() == Some(true))
        .map(|(name, _)| name.clone())
}

/// The agent's user MCP configuration file.
fn config_path(agent: Agent) -> anyhow::Result<PathBuf> {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|home| home.is_absolute())
            .context("HOME is not set: the user's configuration cannot be found")
    };
    let configured = |variable: &str| {
        std::env::var_os(variable)
            .filter(|directory| !directory.is_empty())
            .map(PathBuf::from)
    };
    Ok(match agent {
        Agent::ClaudeCode => match configured("CLAUDE_CONFIG_DIR") {
            Some(directory) => directory.join(".claude.json"),
            None => home()?.join(".claude.json"),
        },
        Agent::Codex => match configured("CODEX_HOME") {
            Some(directory) => directory,
            None => home()?.join(".codex"),
        }
        .join("config.toml"),
    })
}

/// The MCP server entry: this binary, `mcp`, and the data directory and
/// server when given.
fn server_entry(args: &SetupArgs) -> anyhow::Result<McpServer> {
    let program = std::env::current_exe().context("cannot find precedent's own path")?;
    let program = std::fs::canonicalize(&program).unwrap_or(program);
    let mut server_args = vec!["mcp".to_string()];
    if let Some(data_dir) = &args.data_dir.data_dir {
        server_args.push("--data-dir".to_string());
        server_args.push(data_dir.to_string_lossy().into_owned());
    }
    if let Some(server) = &args.server {
        server_args.push("--server".to_string());
        server_args.push(server.clone());
    }
    Ok(McpServer {
        command: program.to_string_lossy().into_owned(),
        args: server_args,
    })
}

fn read_config(path: &std::path::Path) -> anyhow::Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            anyhow::anyhow!("{} is not UTF-8 text; it is left as it is", path.display())
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The configuration file, resolved when it is a link (and said so).
fn resolved_config_path(agent: Agent) -> anyhow::Result<PathBuf> {
    let given = config_path(agent)?;
    let path = hooks::resolve(&given);
    if path != given && std::fs::symlink_metadata(&given).is_ok() {
        print_out(&format!(
            "{} is a link; acting on the file it names, {}",
            given.display(),
            path.display()
        ));
    }
    Ok(path)
}

fn register(args: &SetupArgs) -> anyhow::Result<()> {
    let path = resolved_config_path(args.agent)?;
    let server = server_entry(args)?;
    let original = read_config(&path)?;
    let refused = || {
        format!(
            "cannot add the MCP server to {}; it is left as it is",
            path.display()
        )
    };
    let outcome = match args.agent {
        Agent::ClaudeCode => {
            mcp_config::register_json(original.as_deref(), &server).with_context(refused)?
        }
        Agent::Codex => mcp_config::register_toml(original.as_deref(), &server),
    };
    let where_in = match args.agent {
        Agent::ClaudeCode => "\"mcpServers\"",
        Agent::Codex => "[mcp_servers.precedent]",
    };
    let mut words = vec![crate::hooks::settings::quote(&server.command)];
    words.extend(
        server
            .args
            .iter()
            .map(|arg| crate::hooks::settings::quote(arg)),
    );
    let command = words.join(" ");
    match outcome {
        RegisterOutcome::AlreadyRegistered => print_out(&format!(
            "the MCP server {} is already in {}; nothing changed",
            mcp_config::SERVER_NAME,
            path.display()
        )),
        RegisterOutcome::Taken { command: theirs } => print_out(&format!(
            "{} already has an MCP server named {} ({theirs}); it is left as it is: remove it to let setup add {command}",
            path.display(),
            mcp_config::SERVER_NAME
        )),
        RegisterOutcome::Changed(text) => {
            if let Some(parent) = path.parent()
                && !parent.as_os_str().is_empty()
                && !parent.exists()
            {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            precedent_core::files::write_replacing(&path, text.as_bytes(), NEW_CONFIG_MODE)?;
            print_out(&format!(
                "registered the MCP server {} in {} ({where_in}): {command}",
                mcp_config::SERVER_NAME,
                path.display()
            ));
        }
    }
    Ok(())
}

fn unregister(agent: Agent) -> anyhow::Result<()> {
    let path = resolved_config_path(agent)?;
    let Some(current) = read_config(&path)? else {
        print_out(&format!(
            "{} does not exist; no MCP server to remove",
            path.display()
        ));
        return Ok(());
    };
    let outcome = match agent {
        Agent::ClaudeCode => mcp_config::unregister_json(&current).with_context(|| {
            format!(
                "cannot remove the MCP server from {}; it is left as it is",
                path.display()
            )
        })?,
        Agent::Codex => mcp_config::unregister_toml(&current),
    };
    match outcome {
        UnregisterOutcome::NothingToRemove => print_out(&format!(
            "{} holds no MCP server named {}; nothing changed",
            path.display(),
            mcp_config::SERVER_NAME
        )),
        UnregisterOutcome::NotOurs { command } => print_out(&format!(
            "the MCP server {} in {} runs {command}, not precedent's; it is left as it is",
            mcp_config::SERVER_NAME,
            path.display()
        )),
        UnregisterOutcome::Changed(text) => {
            precedent_core::files::write_replacing(&path, text.as_bytes(), NEW_CONFIG_MODE)?;
            print_out(&format!(
                "removed the MCP server {} from {}",
                mcp_config::SERVER_NAME,
                path.display()
            ));
        }
    }
    Ok(())
}
