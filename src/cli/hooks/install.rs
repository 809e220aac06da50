//! `precedent hooks install|uninstall|status`: precedent's entries in an
//! agent's settings file, where that file is for a scope, and the record
//! of what an install did, which an uninstall restores from.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{Agent, HooksArgs, Scope, StatusArgs};
use crate::cli::print_out;
use crate::hooks::settings::{self, HookEntry, InstallOutcome, Installed, UninstallOutcome};
use crate::hooks::{Event, HookLog};

/// What `hooks install` did to each settings file, in the data directory.
const INSTALLED_FILE: &str = "hooks-installed.json";

impl Agent {
    /// The agent's name, for messages.
    pub(in crate::cli) fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "Claude Code",
            Agent::Codex => "Codex",
        }
    }

    /// The events precedent hooks, with the agent's deadline for each.
    fn events(self) -> &'static [(Event, u32)] {
        match self {
            Agent::ClaudeCode => &[
                (Event::SessionStart, 10),
                (Event::UserPromptSubmit, 10),
                (Event::Stop, 10),
                (Event::SessionEnd, 10),
            ],
            // Codex has no SessionEnd.
            Agent::Codex => &[
                (Event::SessionStart, 10),
                (Event::UserPromptSubmit, 10),
                (Event::Stop, 10),
            ],
        }
    }

    /// The settings file of a scope.
    fn settings_path(self, scope: Scope) -> anyhow::Result<PathBuf> {
        let home = || {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|home| home.is_absolute())
                .context("HOME is not set: the user's settings cannot be found")
        };
        match (self, scope) {
            (Agent::ClaudeCode, Scope::User) => Ok(match std::env::var_os("CLAUDE_CONFIG_DIR") {
                Some(directory) if !directory.is_empty() => PathBuf::from(directory),
                _ => home()?.join(".claude"),
            }
            .join("settings.json")),
            (Agent::Codex, Scope::User) => Ok(match std::env::var_os("CODEX_HOME") {
                Some(directory) if !directory.is_empty() => PathBuf::from(directory),
                _ => home()?.join(".codex"),
            }
            .join("hooks.json")),
            (Agent::ClaudeCode, Scope::Project) => {
                Ok(repository_root()?.join(".claude").join("settings.json"))
            }
            (Agent::Codex, Scope::Project) => {
                Ok(repository_root()?.join(".codex").join("hooks.json"))
            }
        }
    }
}

fn repository_root() -> anyhow::Result<PathBuf> {
    let directory = std::env::current_dir().context("cannot read the working directory")?;
    let repository = git2::Repository::discover(&directory).with_context(|| {
        format!(
            "{} is not inside a git repository: --scope project writes the repository's settings",
            directory.display()
        )
    })?;
    repository
        .workdir()
        .map(Path::to_path_buf)
        .context("the repository has no work tree")
}

/// What install wrote, per settings file.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct InstalledFiles {
    files: std::collections::BTreeMap<String, InstalledFile>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct InstalledFile {
    installed: Installed,
    /// The directory install created for the file, removed with it.
    created_directory: Option<PathBuf>,
}

impl InstalledFile {
    /// What a file holds after an install that wrote `installed` into it,
    /// given what an earlier install recorded (`previous`).
    fn after(
        previous: Option<InstalledFile>,
        installed: Installed,
        created_directory: Option<PathBuf>,
    ) -> InstalledFile {
        match previous {
            // Installed before, and some entries were removed by hand
            // since: the file no longer is what the first install left, so
            // uninstall removes the entries of both installs by their text.
            Some(previous) => InstalledFile {
                installed: Installed {
                    existed: Some(previous.installed.existed()),
                    original: None,
                    splices: previous
                        .installed
                        .splices
                        .into_iter()
                        .chain(installed.splices)
                        .collect(),
                    installed_sha256: String::new(),
                },
                created_directory: previous.created_directory,
            },
            None => InstalledFile {
                installed,
                created_directory,
            },
        }
    }
}

impl InstalledFiles {
    fn load(data_dir: &Path) -> anyhow::Result<InstalledFiles> {
        let path = data_dir.join(INSTALLED_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not readable", path.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Ok(InstalledFiles::default())
            }
            Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    fn save(&self, data_dir: &Path) -> anyhow::Result<()> {
        precedent_core::files::private_dir(data_dir)
            .with_context(|| format!("cannot create {}", data_dir.display()))?;
        let bytes = serde_json::to_vec_pretty(self)?;
        let path = data_dir.join(INSTALLED_FILE);
        // Owner only, also when an earlier version left it wider.
        if let Ok(metadata) = std::fs::symlink_metadata(&path)
            && metadata.is_file()
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
        }
        precedent_core::files::write_replacing(&path, bytes.as_slice(), 0o600)?;
        Ok(())
    }
}

/// The mode of a settings file install creates.
const NEW_SETTINGS_MODE: u32 = 0o644;

/// The settings file as it is: a symbolic link (settings kept with one's
/// dotfiles), or one in a linked directory, is resolved to the file it
/// names, and the caller says so. The file itself is never written through
/// a link ([`precedent_core::files::write_replacing`] refuses one).
pub(in crate::cli) fn resolve(path: &Path) -> PathBuf {
    if let Ok(resolved) = std::fs::canonicalize(path) {
        return resolved;
    }
    // Not there yet: its directory resolved, with the file's name.
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let mut directory = parent.to_path_buf();
            let mut missing = Vec::new();
            // The nearest existing ancestor resolves; the rest is created.
            while !directory.as_os_str().is_empty() && !directory.exists() {
                if let Some(last) = directory.file_name() {
                    missing.push(last.to_os_string());
                }
                if !directory.pop() {
                    break;
                }
            }
            let mut resolved = std::fs::canonicalize(&directory).unwrap_or(directory);
            resolved.extend(missing.iter().rev());
            resolved.join(name)
        }
        _ => path.to_path_buf(),
    }
}

/// A project's settings resolve inside the project: a repository whose
/// `.claude` or settings file links elsewhere (into the home directory,
/// say) is refused, not edited.
fn check_inside(path: &Path, resolved: &Path, root: &Path) -> anyhow::Result<()> {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    if resolved.starts_with(&root) {
        return Ok(());
    }
    anyhow::bail!(
        "{} resolves to {}, outside the repository {}; precedent does not follow a repository's links out of it: remove the link, or install with --scope user",
        path.display(),
        resolved.display(),
        root.display()
    )
}

fn read_settings(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            anyhow::anyhow!("{} is not UTF-8 text; it is left as it is", path.display())
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The hook entries of `args.agent`'s events, each running `program`
/// (with `--data-dir` and `--server` when given).
fn hook_entries(args: &HooksArgs, program: &str) -> Vec<HookEntry> {
    args.agent
        .events()
        .iter()
        .map(|(event, timeout_secs)| {
            let mut command = format!("{} hook {}", settings::quote(program), event.name());
            if let Some(data_dir) = &args.data_dir.data_dir {
                command.push_str(" --data-dir ");
                command.push_str(&settings::quote(&data_dir.to_string_lossy()));
            }
            if let Some(server) = &args.server {
                command.push_str(" --server ");
                command.push_str(&settings::quote(server));
            }
            HookEntry {
                event: event.name().to_string(),
                command,
                timeout_secs: *timeout_secs,
            }
        })
        .collect()
}

/// The data directory and the agent's settings file a hooks command acts
/// on, resolved (and said so when it is a link).
fn places(args: &HooksArgs) -> anyhow::Result<(PathBuf, PathBuf)> {
    let data_dir = args
        .data_dir
        .data_dir
        .clone()
        .unwrap_or_else(crate::cli::default_data_dir);
    let given = args.agent.settings_path(args.scope)?;
    let path = resolve(&given);
    if args.scope == Scope::Project {
        check_inside(&given, &path, &repository_root()?)?;
    }
    if path != given && std::fs::symlink_metadata(&given).is_ok() {
        print_out(&format!(
            "{} is a link; acting on the file it names, {}",
            given.display(),
            path.display()
        ));
    }
    Ok((data_dir, path))
}

pub(in crate::cli) fn install(args: &HooksArgs) -> anyhow::Result<()> {
    let (data_dir, path) = places(args)?;
    let program = std::env::current_exe().context("cannot find precedent's own path")?;
    let program = std::fs::canonicalize(&program).unwrap_or(program);
    let program = program.to_string_lossy().into_owned();
    let entries = hook_entries(args, &program);
    let original = read_settings(&path)?;
    let outcome = settings::install(original.as_deref(), &entries).with_context(|| {
        format!(
            "cannot add hooks to {}; it is left as it is",
            path.display()
        )
    })?;
    let (text, installed, events_added) = match outcome {
        InstallOutcome::AlreadyInstalled => {
            print_out(&format!(
                "precedent's hooks are already in {}; nothing changed",
                path.display()
            ));
            return Ok(());
        }
        InstallOutcome::Changed {
            text,
            installed,
            events_added,
        } => (text, installed, events_added),
    };
    let mut state = InstalledFiles::load(&data_dir)?;
    let key = path.to_string_lossy().into_owned();
    let created_directory = match path.parent() {
        Some(parent) if !parent.exists() => {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
            Some(parent.to_path_buf())
        }
        _ => None,
    };
    precedent_core::files::write_replacing(&path, text.as_bytes(), NEW_SETTINGS_MODE)?;
    let record = InstalledFile::after(state.files.remove(&key), installed, created_directory);
    state.files.insert(key, record);
    state.save(&data_dir)?;
    let mut text = format!(
        "wired precedent into {} ({}): {}\ncommand: {} hook <event>\nthe hooks log to {}",
        path.display(),
        args.agent.name(),
        events_added.join(", "),
        settings::quote(&program),
        HookLog::new(&data_dir).path().display()
    );
    if args.agent == Agent::Codex {
        text.push_str(
            "\nCodex runs a new or changed hook only once trusted: start `codex`, type /hooks and trust precedent's hooks\nolder Codex versions run hooks only with this in ~/.codex/config.toml:\n  [features]\n  codex_hooks = true",
        );
    }
    print_out(&text);
    Ok(())
}

pub(in crate::cli) fn uninstall(args: &HooksArgs) -> anyhow::Result<()> {
    let (data_dir, path) = places(args)?;
    let key = path.to_string_lossy().into_owned();
    let mut state = InstalledFiles::load(&data_dir)?;
    let record = state.files.get(&key).cloned();
    let Some(current) = read_settings(&path)? else {
        if state.files.remove(&key).is_some() {
            state.save(&data_dir)?;
        }
        print_out(&format!(
            "{} does not exist; nothing to remove",
            path.display()
        ));
        return Ok(());
    };
    let outcome = settings::uninstall(&current, record.as_ref().map(|record| &record.installed))
        .with_context(|| {
            format!(
                "cannot remove hooks from {}; it is left as it is",
                path.display()
            )
        })?;
    let message = match outcome {
        UninstallOutcome::NothingToRemove => {
            format!(
                "{} holds no precedent hook; nothing changed",
                path.display()
            )
        }
        UninstallOutcome::Write(text) => {
            precedent_core::files::write_replacing(&path, text.as_bytes(), NEW_SETTINGS_MODE)?;
            format!("removed precedent's hooks from {}", path.display())
        }
        UninstallOutcome::Delete => {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
            if let Some(directory) = record
                .as_ref()
                .and_then(|record| record.created_directory.as_ref())
            {
                // Only when empty: anything else put there stays.
                let _ = std::fs::remove_dir(directory);
            }
            format!("removed {} (install had created it)", path.display())
        }
    };
    if state.files.remove(&key).is_some() {
        state.save(&data_dir)?;
    }
    print_out(&message);
    Ok(())
}

pub(super) fn status(args: &StatusArgs) -> anyhow::Result<()> {
    let mut lines = Vec::new();
    for agent in [Agent::ClaudeCode, Agent::Codex] {
        for scope in [Scope::User, Scope::Project] {
            let Ok(path) = agent.settings_path(scope) else {
                continue;
            };
            let path = resolve(&path);
            let scope_name = match scope {
                Scope::User => "user",
                Scope::Project => "project",
            };
            let label = format!("{} ({scope_name}): {}", agent.name(), path.display());
            let found = match read_settings(&path) {
                Ok(None) => {
                    lines.push(format!("{label}: no file"));
                    continue;
                }
                Ok(Some(text)) => settings::find(&text),
                Err(error) => {
                    lines.push(format!("{label}: {error:#}"));
                    continue;
                }
            };
            match found {
                Err(error) => lines.push(format!("{label}: {error}")),
                Ok(found) if found.is_empty() => lines.push(format!("{label}: no precedent hook")),
                Ok(found) => {
                    lines.push(format!("{label}:"));
                    for entry in found {
                        let exists = Path::new(&entry.program).exists();
                        lines.push(format!(
                            "  {:<17} {}{}",
                            entry.event,
                            entry.command,
                            if exists {
                                ""
                            } else {
                                "  (missing: this program no longer exists)"
                            }
                        ));
                    }
                }
            }
        }
    }
    lines.push(format!(
        "hooks log: {}",
        HookLog::new(&args.data_dir.data_dir).path().display()
    ));
    print_out(&lines.join("\n"));
    Ok(())
}
