//! The command line: arguments are parsed and checked here, once, and errors
//! become exit codes here only. `main.rs` only calls [`main`].
//!
//! The commands: `serve` and `mcp` run a service (`serve`), `inspect` and
//! `search` read a data directory directly (`query`, printed with `render`),
//! `import` fills one from a git history (`history`), `hook` and `hooks`
//! put precedent into an agent's lifecycle (`hooks`), `setup` wires hooks
//! and MCP into an agent at once (`setup`), `bench` measures
//! (`bench`). Options several commands share are defined once (`options`).

mod bench;
mod history;
mod hooks;
mod legacy;
mod options;
mod query;
mod render;
mod serve;
mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use self::bench::BenchCommand;
use self::options::{
    ApiKeyArgs, BackendArgs, NoServerArgs, SearchBudgetArgs, StoreArgs, UserIdArgs,
};
use crate::api::{self, DEFAULT_MAX_BODY_BYTES};
use crate::import;

/// precedent: a memory for coding agents. It remembers agent trajectories
/// (tasks, commands, tracebacks, diffs) and, given a new task, hands back
/// the past experience that helps.
#[derive(Debug, Parser)]
#[command(name = "precedent", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,

    /// How logs are written to stderr: `text` for people, `json` (one
    /// object per line) for log collectors. The level comes from RUST_LOG
    /// (or PRECEDENT_LOG), `info` by default.
    #[arg(long, global = true, env = "PRECEDENT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// The format of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP service (Agent Memory Leaderboard Add/Search contract)
    /// on an embedded store: SQLite and tantivy in one data directory
    /// (created if missing), which one process at a time may hold.
    Serve(ServeArgs),
    /// Show what was extracted from stored sessions: a list of a user's
    /// sessions, or one session's whole record (files, symbols, errors,
    /// tests, commands, outcome, evidence with provenance). Reads the data
    /// directory directly; works while a server holds it.
    Inspect(InspectArgs),
    /// Search a user's memory as the service would answer, or with
    /// --explain every candidate session with its features, fused score and
    /// the noise gate's verdict. Reads the data directory directly; works
    /// while a server holds it.
    Search(SearchArgs),
    /// Import past work: a git repository's history (each first-parent
    /// commit, merged pull requests included, becomes one session: task
    /// its message, fix its diff), or agent transcripts (Claude Code and
    /// Codex CLI logs, SWE-agent and OpenHands trajectories, aider chat
    /// histories: each transcript one session). Incremental: what was
    /// imported before is skipped, a grown transcript adds its new tail.
    /// Writes to the data directory, or through a running server with
    /// --server.
    Import(ImportArgs),
    /// Serve the Model Context Protocol on stdin/stdout for a coding agent:
    /// tools search_memory, record_experience, list_sessions, get_session,
    /// scoped to one user (by default the enclosing git repository). Uses
    /// the data directory itself, or a running server with --server.
    Mcp(McpArgs),
    /// Run by Claude Code or Codex at a hook event, with the event's JSON
    /// on stdin: SessionStart and UserPromptSubmit answer with relevant
    /// past experience (as the agent's additionalContext), Stop and
    /// SessionEnd import the session's transcript in the background.
    /// Always exits 0: a hook never blocks the agent, and says what it did
    /// in the data directory's hooks.log (with --server too).
    Hook(hooks::HookArgs),
    /// Wire precedent's hooks into Claude Code's or Codex's settings, remove
    /// them, or show where they are.
    #[command(subcommand)]
    Hooks(hooks::HooksCommand),
    /// Wire precedent into Claude Code or Codex for every repository in one
    /// command: its hooks (as `hooks install`) and its MCP server (in the
    /// agent's user MCP configuration). Says what it wrote where; running
    /// it again changes nothing; --uninstall takes both out.
    Setup(setup::SetupArgs),
    /// Benchmarks that print figures (build with --release to measure).
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// Options of `precedent inspect`.
#[derive(Debug, Args)]
struct InspectArgs {
    #[command(flatten)]
    storage: StoreArgs,

    #[command(flatten)]
    user_id: UserIdArgs,

    /// Show this session's whole record instead of the list.
    #[arg(long)]
    session: Option<String>,

    /// Print JSON (the same as GET /v1/sessions[/{id}]) instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `precedent search`.
#[derive(Debug, Args)]
struct SearchArgs {
    #[command(flatten)]
    storage: StoreArgs,

    #[command(flatten)]
    user_id: UserIdArgs,

    /// Search every memory of this store (all repositories) and merge the
    /// answers by score, each item naming its memory.
    #[arg(long, conflicts_with_all = ["explain", "user_id"])]
    all: bool,

    /// The most items to return.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    top_k: u32,

    #[command(flatten)]
    budget: SearchBudgetArgs,

    /// Show every candidate session with its features, score and verdict
    /// instead of the answer.
    #[arg(long)]
    explain: bool,

    /// Print JSON (the same as POST /v1/search or /v1/search/explain).
    #[arg(long)]
    json: bool,

    /// A checkout to check the answer against: each experience says
    /// whether the files it changed still exist, the definitions it
    /// changed are still defined, and what its fix wrote is still there.
    #[arg(long, value_name = "PATH")]
    repo: Option<PathBuf>,

    /// The new task's text.
    query: String,
}

/// Options of `precedent import`.
#[derive(Debug, Args)]
struct ImportArgs {
    /// A git repository (its work tree or its .git directory), or
    /// transcript files and folders (searched recursively; each file's
    /// format is told from its content).
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,

    #[command(flatten)]
    user_id: UserIdArgs,

    /// The revision whose first-parent history is imported.
    #[arg(long, default_value = "HEAD")]
    rev: String,

    /// Stop at this revision (not imported) or at commits older than this
    /// date (YYYY-MM-DD).
    #[arg(long)]
    since: Option<String>,

    /// Import at most this many of the newest commits.
    #[arg(long)]
    max_commits: Option<usize>,

    /// A commit whose diff is larger than this many bytes is imported
    /// without its diff (and counted).
    #[arg(long, default_value_t = import::DEFAULT_MAX_DIFF_BYTES)]
    max_diff_bytes: usize,

    /// Skip merge commits (by default each merge, e.g. a merged pull
    /// request, is one session: its diff against the first parent).
    #[arg(long)]
    no_merges: bool,

    /// Transcripts: keep importing as files appear and grow (polling
    /// every second) until Ctrl-C.
    #[arg(long)]
    watch: bool,

    #[command(flatten)]
    backend: BackendArgs,

    #[command(flatten)]
    no_server: NoServerArgs,

    /// Adds in flight at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    parallelism: u32,

    /// Print the final report as JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `precedent mcp`.
#[derive(Debug, Args)]
struct McpArgs {
    #[command(flatten)]
    user_id: UserIdArgs,

    #[command(flatten)]
    backend: BackendArgs,

    #[command(flatten)]
    no_server: NoServerArgs,
}

/// Options of `precedent serve`.
#[derive(Debug, Args)]
struct ServeArgs {
    /// Address to listen on (host:port; port 0 picks a free port).
    #[arg(long, env = "PRECEDENT_LISTEN", default_value = "127.0.0.1:8080")]
    listen: String,

    #[command(flatten)]
    storage: StoreArgs,

    #[command(flatten)]
    key: ApiKeyArgs,

    /// File of accepted API keys, one a line (blank lines and # comments
    /// skipped); combines with --api-key, so keys can be rotated.
    #[arg(long, env = "PRECEDENT_API_KEY_FILE")]
    api_key_file: Option<PathBuf>,

    /// File of scoped keys: each line a key's SHA-256 digest (hex), the
    /// user ids it may use (comma-separated; `prefix*`, `*` for all, `-`
    /// for none), then optionally the rights `list-users` and `metrics`;
    /// # comments and blank lines skipped. With any key configured,
    /// /metrics needs a key with the metrics right (keys of --api-key and
    /// --api-key-file hold it). Combines with --api-key and --api-key-file
    /// (whose keys reach every user). See docs/security.md.
    #[arg(long, env = "PRECEDENT_KEYS_FILE")]
    keys_file: Option<PathBuf>,

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, env = "PRECEDENT_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,

    /// Bytes of message content one session may hold; an Add that would
    /// take its session past it gets 413 and nothing of it is stored.
    #[arg(long, env = "PRECEDENT_MAX_SESSION_BYTES", default_value_t = precedent_service::DEFAULT_MAX_SESSION_BYTES)]
    max_session_bytes: usize,

    /// On a shared store (PostgreSQL), users whose index marks this node
    /// keeps; the least recently searched is dropped past it and filled
    /// again from the store on its next Search.
    #[arg(long, env = "PRECEDENT_MAX_CACHED_USERS", default_value_t = precedent_service::DEFAULT_MAX_CACHED_USERS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_cached_users: usize,

    /// Most Adds written together in one group commit.
    #[arg(long, env = "PRECEDENT_MAX_BATCH", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    max_batch: u32,

    /// Purge sessions not added to for this many days, at start-up and then
    /// hourly (their messages, Adds, record and index documents). Off
    /// unless given.
    #[arg(long, env = "PRECEDENT_RETENTION_DAYS", value_parser = clap::value_parser!(u64).range(1..=36_500))]
    retention_days: Option<u64>,

    /// Mask common credentials (cloud and API keys, tokens, private keys,
    /// Authorization headers, passwords in URLs and assignments) in message
    /// content before it is stored; docs/security.md lists what it covers.
    #[arg(long, env = "PRECEDENT_REDACT_SECRETS")]
    redact_secrets: bool,

    /// Requests handled at once (health aside); past it, 503 with
    /// Retry-After.
    #[arg(long, env = "PRECEDENT_MAX_IN_FLIGHT", default_value_t = api::DEFAULT_MAX_IN_FLIGHT as u32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_in_flight: u32,

    /// Seconds a request may take before it is answered 503 with
    /// Retry-After.
    #[arg(long, env = "PRECEDENT_REQUEST_TIMEOUT_SECS", default_value_t = api::DEFAULT_REQUEST_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    request_timeout_secs: u64,

    #[command(flatten)]
    budget: SearchBudgetArgs,

    /// A Host name served besides the listen address (loopback names and
    /// IPs with the port), e.g. the name a reverse proxy forwards;
    /// `name:port` requires that port. Repeatable; `*` serves any Host
    /// (no DNS-rebinding guard). Other Hosts get 421.
    #[arg(
        long = "allowed-host",
        env = "PRECEDENT_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,

    /// A browser origin (`https://app.example`) besides the server's own
    /// that may call the API: CSRF protection lets it through and CORS
    /// answers it. Repeatable.
    #[arg(
        long = "allowed-origin",
        env = "PRECEDENT_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    allowed_origins: Vec<String>,

    /// Seconds a request body may take to arrive (408 past it); after its
    /// first 2 s it must also come at 4 KiB/s on average. No in-flight
    /// slot is held meanwhile.
    #[arg(long, env = "PRECEDENT_BODY_READ_TIMEOUT_SECS", default_value_t = api::DEFAULT_BODY_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    body_read_timeout_secs: u64,

    /// Seconds a request head may take to arrive, and a kept-alive
    /// connection may stay idle, before the connection is closed.
    #[arg(long, env = "PRECEDENT_HEADER_READ_TIMEOUT_SECS", default_value_t = api::serve::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    header_read_timeout_secs: u64,

    /// Seconds a plain connection may take to send its first byte before
    /// it is closed.
    #[arg(long, env = "PRECEDENT_FIRST_BYTE_TIMEOUT_SECS", default_value_t = api::serve::DEFAULT_FIRST_BYTE_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    first_byte_timeout_secs: u64,

    /// Seconds a TLS handshake may take before the connection is closed.
    #[arg(long, env = "PRECEDENT_TLS_HANDSHAKE_TIMEOUT_SECS", default_value_t = api::serve::DEFAULT_TLS_HANDSHAKE_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    tls_handshake_timeout_secs: u64,

    /// Connections open at once. At it, the connection waiting longest
    /// (idle, or its request body still arriving; each byte received
    /// counts as its time at 4 KiB/s) is closed to make room; only when
    /// every one is working is the new one closed. Each needs a file
    /// descriptor: keep `ulimit -n` above it.
    #[arg(long, env = "PRECEDENT_MAX_CONNECTIONS", default_value_t = api::serve::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: u32,

    /// Connections open at once from one client address (IPv6 by its
    /// /64), with the same rule at the cap as --max-connections; 0 for no
    /// cap. Loopback is not capped (every local client shares it); behind
    /// a reverse proxy, every client has the proxy's address.
    #[arg(long, env = "PRECEDENT_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = api::serve::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS as u32, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    max_connections_per_address: u32,

    /// Requests a second each API key may make on the routes that take a
    /// key (a burst of one second's worth); past it, 429 with Retry-After.
    /// Off unless given; needs keys.
    #[arg(long, env = "PRECEDENT_KEY_RATE_LIMIT", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    key_rate_limit: Option<u32>,

    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "PRECEDENT_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, env = "PRECEDENT_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Exit after no request for this long (`90s`, `30m`, `2h`). Off
    /// unless given: a server started by hand runs until stopped. The
    /// server `mcp` and `import` start on first use passes 30m (or
    /// PRECEDENT_IDLE_EXIT).
    #[arg(long, value_parser = crate::local::parse_duration)]
    idle_exit: Option<std::time::Duration>,

    /// Started by `mcp` or `import` on first use: also exits when its
    /// record in the data directory (server.json) is removed or names
    /// another server.
    #[arg(long, hide = true)]
    auto_started: bool,

    /// A directory under which clients' checkouts may be read (repeat for
    /// several): a Search's `repo` names the caller's checkout, which the
    /// server reads to mark stale experience. Without it, only the local
    /// server that `mcp`, `hook` and `import` start reads checkouts (its
    /// clients hold its owner's key); any other server refuses `repo`.
    #[arg(long = "checkout-root", value_name = "DIR")]
    checkout_roots: Vec<PathBuf>,
}

/// The memory a command works in: `--user-id` when given, else the key
/// of the git repository enclosing `directory` (the working directory
/// when `None`): its normalised origin, else its root path.
pub(crate) fn memory_key(
    user_id: Option<&str>,
    directory: Option<&std::path::Path>,
) -> anyhow::Result<String> {
    match user_id {
        Some(user_id) if user_id.trim().is_empty() => anyhow::bail!("--user-id must not be empty"),
        Some(user_id) => Ok(user_id.to_string()),
        None => Ok(match directory {
            Some(directory) => crate::scope::of_directory(directory)?,
            None => crate::scope::of_working_directory()?,
        }),
    }
}

/// [`memory_key`] checked as a user id: the scope every command below the
/// command line is given.
pub(crate) fn memory_user(
    user_id: Option<&str>,
    directory: Option<&std::path::Path>,
) -> anyhow::Result<precedent_core::domain::UserId> {
    checked_user(memory_key(user_id, directory)?)
}

/// A memory key checked as a user id; the error says why it is not one.
pub(crate) fn checked_user(key: String) -> anyhow::Result<precedent_core::domain::UserId> {
    precedent_core::domain::UserId::new(key)
        .map_err(|invalid| anyhow::anyhow!("invalid memory key: {invalid}"))
}

/// Parses the arguments, runs the command, maps errors to an exit code.
pub fn main() -> ExitCode {
    let deprecations = legacy::adopt_legacy_environment();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            use clap::error::ErrorKind;
            let informational = matches!(
                error.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            );
            // Exit code 2 tells Claude Code to block the prompt or the
            // stop: a hook whose arguments are wrong says so and exits 0.
            if !informational && std::env::args().nth(1).as_deref() == Some("hook") {
                eprintln!("precedent hook: {error}");
                return ExitCode::SUCCESS;
            }
            error.exit()
        }
    };
    // A hook's stderr may be shown to the agent's user: quiet unless
    // PRECEDENT_LOG asks (the hooks' own log is in the data directory).
    let default_level = if matches!(cli.command, Command::Hook(_)) {
        "off"
    } else {
        "info"
    };
    init_logging(cli.log_format, default_level);
    // What precedent creates (the data directory's store, index, logs and
    // records) is its user's alone, whatever the umask.
    precedent_core::files::restrict_umask();
    for warning in deprecations {
        tracing::warn!("{warning}");
    }
    let result = match cli.command {
        Command::Mcp(args) => serve::mcp(args),
        Command::Serve(args) => serve::serve(args),
        Command::Inspect(args) => query::inspect(args),
        Command::Search(args) => query::search(args),
        Command::Import(args) => history::import(args),
        Command::Hook(args) => hooks::hook(args),
        Command::Hooks(command) => hooks::hooks_command(command),
        Command::Setup(args) => setup::setup(args),
        Command::Bench(command) => bench::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The data directory every command uses unless told otherwise: the
/// user's data directory (`$XDG_DATA_HOME/precedent`, else
/// `~/.local/share/precedent`), not the directory a command starts in, so
/// that no data directory lands inside a repository; `./precedent-data` only
/// when neither variable is set.
pub(crate) fn default_data_dir() -> PathBuf {
    legacy::default_or_legacy(data_dir_from(
        std::env::var_os("XDG_DATA_HOME"),
        std::env::var_os("HOME"),
    ))
}

fn data_dir_from(
    xdg_data_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> PathBuf {
    // The XDG specification ignores a relative XDG_DATA_HOME.
    let absolute = |value: Option<std::ffi::OsString>| {
        value.map(PathBuf::from).filter(|path| path.is_absolute())
    };
    if let Some(data_home) = absolute(xdg_data_home) {
        return data_home.join("precedent");
    }
    if let Some(home) = absolute(home) {
        return home.join(".local").join("share").join("precedent");
    }
    PathBuf::from("./precedent-data")
}

fn init_logging(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PRECEDENT_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    // Colour codes only for a terminal: server.log, an agent's MCP log
    // and a pipe get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

/// Prints a command's output; a reader that went away (`| head`) ends the
/// output quietly instead of a panic.
pub(super) fn print_out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = writeln!(stdout, "{text}").and_then(|()| stdout.flush())
        && error.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("error: cannot write the output: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_directory_is_the_users_not_the_working_directorys() {
        assert_eq!(
            data_dir_from(Some("/data".into()), Some("/home/me".into())),
            PathBuf::from("/data/precedent")
        );
        assert_eq!(
            data_dir_from(Some("relative".into()), Some("/home/me".into())),
            PathBuf::from("/home/me/.local/share/precedent")
        );
        assert_eq!(
            data_dir_from(None, Some("/home/me".into())),
            PathBuf::from("/home/me/.local/share/precedent")
        );
        assert_eq!(data_dir_from(None, None), PathBuf::from("./precedent-data"));
    }
}
