//! The Claude Code plugin in the repository (`.claude-plugin/plugin.json`,
//! `.claude-plugin/marketplace.json`, `hooks/hooks.json`, `.mcp.json`):
//! each file against the fields the plugin format requires, and the hooks
//! and MCP server against what `hooks install` and `setup` write, so the
//! plugin cannot drift from the CLI.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn repository_file(relative: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{relative}: {error}"))
}

/// A plugin or marketplace name as the format accepts it: lowercase
/// letters and digits in hyphen-separated words.
fn is_kebab_case(name: &str) -> bool {
    !name.is_empty()
        && name.split('-').all(|word| {
            !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
        && name.starts_with(|c: char| c.is_ascii_lowercase())
}

/// One command hook: (event, command, timeout in seconds).
type Hook = (String, String, u64);

/// The command hooks of a settings or hooks.json file's `"hooks"` object,
/// each group and hook checked for the format's required fields.
fn command_hooks(file: &Value, label: &str) -> BTreeSet<Hook> {
    let events = file["hooks"]
        .as_object()
        .unwrap_or_else(|| panic!("{label}: \"hooks\" is an object"));
    let mut hooks = BTreeSet::new();
    for (event, groups) in events {
        let groups = groups
            .as_array()
            .unwrap_or_else(|| panic!("{label}: {event} is an array of groups"));
        for group in groups {
            let entries = group["hooks"]
                .as_array()
                .unwrap_or_else(|| panic!("{label}: a group of {event} has \"hooks\""));
            for hook in entries {
                assert_eq!(hook["type"], "command", "{label}: {event}");
                let command = hook["command"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{label}: {event} has a command"));
                let timeout = hook["timeout"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{label}: {event} has a timeout"));
                hooks.insert((event.clone(), command.to_string(), timeout));
            }
        }
    }
    hooks
}

/// A throwaway home, and precedent run in it.
fn run_in(home: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("PRECEDENT_DATA_DIR")
        .env_remove("PRECEDENT_SERVER")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .output()
        .expect("precedent runs");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

#[test]
fn the_plugin_manifest_and_marketplace_have_the_required_fields() {
    let manifest = repository_file(".claude-plugin/plugin.json");
    let name = manifest["name"].as_str().expect("plugin.json has a name");
    assert!(is_kebab_case(name), "{name}");
    // Claude Code updates an installed plugin when its version changes:
    // it moves with the binary's.
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        manifest["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    assert!(manifest["author"]["name"].is_string());
    // hooks/hooks.json and .mcp.json are read from their standard places;
    // naming them in the manifest too would load them twice.
    for field in ["hooks", "mcpServers"] {
        assert!(manifest.get(field).is_none(), "plugin.json names {field}");
    }

    let marketplace = repository_file(".claude-plugin/marketplace.json");
    let marketplace_name = marketplace["name"].as_str().expect("a name");
    assert!(is_kebab_case(marketplace_name), "{marketplace_name}");
    assert!(marketplace["owner"]["name"].is_string(), "an owner's name");
    let plugins = marketplace["plugins"].as_array().expect("plugins");
    assert_eq!(plugins.len(), 1);
    let entry = &plugins[0];
    assert_eq!(entry["name"], name);
    // The plugin is the marketplace's own root: a relative source starts
    // with ./ and stays inside the repository.
    let source = entry["source"].as_str().expect("a relative source");
    assert!(
        source.starts_with("./") && !source.contains(".."),
        "{source}"
    );
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(source)
            .join(".claude-plugin/plugin.json")
            .is_file()
    );
    if let Some(version) = entry.get("version") {
        assert_eq!(version, &manifest["version"]);
    }
}

#[test]
fn the_plugins_hooks_are_the_ones_hooks_install_writes() {
    let plugin = command_hooks(&repository_file("hooks/hooks.json"), "hooks/hooks.json");
    // Each runs `precedent hook <its event>` from PATH.
    for (event, command, _) in &plugin {
        assert_eq!(command, &format!("precedent hook {event}"));
    }

    let home = tempfile::tempdir().expect("home");
    run_in(
        home.path(),
        &[
            "hooks",
            "install",
            "--agent",
            "claude-code",
            "--scope",
            "user",
        ],
    );
    let text = std::fs::read_to_string(home.path().join(".claude/settings.json"))
        .expect("settings written");
    let settings: Value = serde_json::from_str(&text).expect("JSON");
    let prefix = format!("{} ", crate::support::resolved_binary());
    let installed: BTreeSet<Hook> = command_hooks(&settings, "settings.json")
        .into_iter()
        .map(|(event, command, timeout)| {
            let rest = command
                .strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("{command} runs {prefix}"));
            (event, format!("precedent {rest}"), timeout)
        })
        .collect();
    // The same events, commands and timeouts.
    assert_eq!(plugin, installed);
}

#[test]
fn the_plugins_mcp_server_is_the_one_setup_registers() {
    let plugin = repository_file(".mcp.json");
    let servers = plugin["mcpServers"].as_object().expect("mcpServers");
    assert_eq!(servers.len(), 1);
    let server = &servers["precedent"];
    assert_eq!(server["command"], "precedent");

    let home = tempfile::tempdir().expect("home");
    run_in(home.path(), &["setup", "--agent", "claude-code"]);
    let text = std::fs::read_to_string(home.path().join(".claude.json")).expect("written");
    let configuration: Value = serde_json::from_str(&text).expect("JSON");
    let registered = &configuration["mcpServers"]["precedent"];
    assert_eq!(
        registered["command"],
        crate::support::resolved_binary().as_str()
    );
    assert_eq!(registered["args"], server["args"]);
}
