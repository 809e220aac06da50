//! Options several commands take, each defined once and flattened into
//! the commands' arguments (`#[command(flatten)]`): a flag's name,
//! environment variable, default and help are written here only.
//!
//! `hooks install --data-dir` is not [`DataDirArgs`]: it has no default,
//! since the hooks' command names the data directory only when it is given.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::store::StoreLocation;

/// `--data-dir`: where precedent keeps its data.
#[derive(Debug, Args)]
pub(super) struct DataDirArgs {
    /// The data directory, holding the store (precedent.sqlite3), the index
    /// and the hooks' log (hooks.log). Default: $XDG_DATA_HOME/precedent,
    /// else ~/.local/share/precedent, shared by every command.
    #[arg(long, env = "PRECEDENT_DATA_DIR", default_value_os_t = super::default_data_dir())]
    pub(super) data_dir: PathBuf,
}

/// `--data-dir` and `--store`: the memory a command opens.
#[derive(Debug, Args)]
pub(super) struct StoreArgs {
    #[command(flatten)]
    data_dir: DataDirArgs,

    /// Where the store is: `sqlite` (the default: precedent.sqlite3 in the
    /// data directory) or a PostgreSQL URL (`postgres://user@host/db`).
    /// Give a URL with a password through PRECEDENT_STORE rather than on
    /// the command line, where every local user can read it.
    #[arg(long, env = "PRECEDENT_STORE", hide_env_values = true)]
    store: Option<String>,
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
        let location = StoreLocation::parse(self.store.as_deref(), self.data_dir())?;
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

    /// The server's API key (sent as a Bearer token).
    #[arg(long, env = "PRECEDENT_API_KEY", hide_env_values = true)]
    pub(super) api_key: Option<String>,
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
