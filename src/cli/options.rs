//! Options several commands take, each defined once and flattened into
//! the commands' arguments (`#[command(flatten)]`): a flag's name,
//! environment variable, default and help are written here only.
//!
//! `--data-dir` comes in two forms: [`DataDirArgs`] for the commands that
//! open the data directory (with its default), and [`InstalledDataDirArgs`]
//! for those that install commands into an agent (`hooks install`,
//! `setup`), which name the directory in what they write only when given.

use std::path::{Path, PathBuf};

use clap::Args;

use precedent_store::StoreLocation;

/// `--data-dir`: where precedent keeps its data.
#[derive(Debug, Args)]
pub(super) struct DataDirArgs {
    /// The data directory, holding the store (precedent.sqlite3), the index
    /// and the hooks' log (hooks.log). Default: $XDG_DATA_HOME/precedent,
    /// else ~/.local/share/precedent, shared by every command.
    #[arg(long, env = "PRECEDENT_DATA_DIR", default_value_os_t = super::default_data_dir())]
    pub(super) data_dir: PathBuf,
}

/// `--data-dir` of the commands that install precedent into an agent: no
/// default, since what they write names the data directory only when it is
/// given.
#[derive(Debug, Clone, Args)]
pub(super) struct InstalledDataDirArgs {
    /// The data directory the installed commands (the hooks, and the MCP
    /// server `setup` adds) use, named in their commands when given.
    /// Default: $XDG_DATA_HOME/precedent, else ~/.local/share/precedent.
    #[arg(long, env = "PRECEDENT_DATA_DIR")]
    pub(super) data_dir: Option<PathBuf>,
}

/// `--store`: where the store is.
#[derive(Debug, Args)]
pub(super) struct StoreFlag {
    /// Where the store is: `sqlite` (the default: precedent.sqlite3 in the
    /// data directory, or `bench scale`'s work directory) or a PostgreSQL
    /// URL (`postgres://user@host/db`; for `bench scale`, of an empty
    /// database). Give a URL with a password through PRECEDENT_STORE
    /// rather than on the command line, where every local user can read
    /// it.
    #[arg(long, env = "PRECEDENT_STORE", hide_env_values = true)]
    pub(super) store: Option<String>,
}

/// `--data-dir` and `--store`: the memory a command opens.
#[derive(Debug, Args)]
pub(super) struct StoreArgs {
    #[command(flatten)]
    data_dir: DataDirArgs,

    #[command(flatten)]
    store: StoreFlag,
}

impl StoreArgs {
    /// The data directory.
    pub(super) fn data_dir(&self) -> &Path {
        &self.data_dir.data_dir
    }

    /// The store these options name (`--store` or PRECEDENT_STORE), the
    /// data directory's SQLite database by default. Warns when a password
    /// came on the command line.
    pub(super) fn location(&self) -> anyhow::Result<StoreLocation> {
        super::legacy::announce_if_legacy(self.data_dir());
        let location = StoreLocation::parse(self.store.store.as_deref(), self.data_dir())?;
        if location.has_password() && std::env::var_os("PRECEDENT_STORE").is_none() {
            tracing::warn!(
                "--store with a password on the command line is visible to every local user (ps); set PRECEDENT_STORE instead"
            );
        }
        Ok(location)
    }
}

/// Where the requests of a command that may go through a server go: a
/// running server (`--server`, `--api-key`), else the data directory
/// (`--data-dir`, `--store`).
#[derive(Debug, Args)]
pub(super) struct BackendArgs {
    #[command(flatten)]
    pub(super) storage: StoreArgs,

    /// Go through a running server (e.g. http://127.0.0.1:8080) instead of
    /// the data directory (by default shared through its local server,
    /// started on first use).
    #[arg(long, env = "PRECEDENT_SERVER")]
    pub(super) server: Option<String>,

    #[command(flatten)]
    pub(super) key: ApiKeyArgs,
}

/// `--api-key`: the key a server and its clients share.
#[derive(Debug, Args)]
pub(super) struct ApiKeyArgs {
    /// The API key. A client sends it to the server (as a Bearer token).
    /// `serve` requires it of Add, Search and inspection (Authorization:
    /// Bearer <key>, Authorization: Token <key> or X-Api-Key: <key>);
    /// without any key there, the service runs without authentication.
    /// Health is never authenticated; with any key configured, /metrics
    /// needs a key with the metrics right (this key holds it). Prefer
    /// PRECEDENT_API_KEY: the command line is visible to every local user.
    #[arg(long, env = "PRECEDENT_API_KEY", hide_env_values = true)]
    pub(super) api_key: Option<String>,
}

/// `--user-id`: the memory a command works in. Reads as the
/// `Option<String>` it holds.
#[derive(Debug, Args)]
pub(super) struct UserIdArgs {
    /// The memory (user scope) to work in. Default: the key of the git
    /// repository enclosing the working directory (its origin, lowercased,
    /// e.g. `github.com/owner/name`, else its root path); for `hook`, the
    /// agent's working directory (`cwd` in the hook input); for `import`,
    /// the imported repository, or for a transcript the repository it
    /// records as its working directory.
    #[arg(long, env = "PRECEDENT_USER_ID")]
    user_id: Option<String>,
}

impl std::ops::Deref for UserIdArgs {
    type Target = Option<String>;

    fn deref(&self) -> &Option<String> {
        &self.user_id
    }
}

/// `--search-budget` (also `--max-chars`): how much content a Search
/// answer holds.
#[derive(Debug, Args)]
pub(super) struct SearchBudgetArgs {
    /// Characters of content a Search answer holds at most (the first item
    /// is always given, cut if need be). For `serve`, the budget of a
    /// request that gives no `max_chars`.
    #[arg(
        long,
        visible_alias = "max-chars",
        env = "PRECEDENT_SEARCH_BUDGET",
        value_name = "CHARS",
        default_value_t = precedent_rank::assemble::DEFAULT_BUDGET_CHARS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
            .range(1..=precedent_core::domain::MAX_CHARS_LIMIT)
    )]
    pub(super) search_budget: usize,
}

/// `--no-server`: the data directory opened in this process.
#[derive(Debug, Args)]
pub(super) struct NoServerArgs {
    /// Open the data directory in this process instead of sharing it
    /// through its local server (then no other process may use it at the
    /// same time). Also set by PRECEDENT_NO_AUTOSTART=1.
    #[arg(long, conflicts_with = "server")]
    pub(super) no_server: bool,
}

/// Whether a command without `--server` goes through the data directory's
/// local server (started on first use) rather than opening it itself: not
/// with `--no-server` or PRECEDENT_NO_AUTOSTART, nor on PostgreSQL, which
/// any number of processes open directly.
pub(super) fn attaches(no_server: bool, store: &StoreLocation) -> bool {
    !no_server && !crate::local::autostart_disabled() && matches!(store, StoreLocation::Sqlite(_))
}
