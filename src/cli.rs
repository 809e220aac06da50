//! The command line: arguments are parsed and checked here, once, and errors
//! become exit codes here only. `main.rs` only calls [`main`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::api::auth::ApiKeys;
use crate::api::{self, ApiOptions, DEFAULT_MAX_BODY_BYTES};
use crate::domain::SearchRequest;
use crate::import;
use crate::rank;
use crate::search::{self, Searcher};
use crate::service::{self, Service, ServiceOptions, SessionDetail, SessionSummary};
use crate::store;
use crate::time::rfc3339_from_ms;

/// codemem: a memory for coding agents. It remembers agent trajectories
/// (tasks, commands, tracebacks, diffs) and, given a new task, hands back
/// the past experience that helps.
#[derive(Debug, Parser)]
#[command(name = "codemem", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,

    /// How logs are written to stderr: `text` for people, `json` (one
    /// object per line) for log collectors. The level comes from RUST_LOG
    /// (or CODEMEM_LOG), `info` by default.
    #[arg(long, global = true, env = "CODEMEM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
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
    /// on an embedded store: SQLite and tantivy in one data directory.
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
    /// Import a git repository's history: each non-merge commit on the
    /// first-parent line becomes one session (task: its message; fix: its
    /// diff). Incremental: commits imported before are skipped. Writes to
    /// the data directory, or through a running server with --server.
    Import(ImportArgs),
    /// Serve the Model Context Protocol on stdin/stdout for a coding agent:
    /// tools search_memory, record_experience, list_sessions, get_session,
    /// scoped to one user (by default the enclosing git repository). Uses
    /// the data directory itself, or a running server with --server.
    Mcp(McpArgs),
    /// Benchmarks that print figures (build with --release to measure).
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Extraction of session records alone (no storage, no index) over a
    /// bench directory's sessions: MB/s over whole sessions, and per Add
    /// chunk the re-derivation the service does (p50, p99, max).
    Ingest {
        /// Bench directory holding sessions.jsonl.gz (or sessions.jsonl).
        #[arg(long, default_value = "../shared/eval/data/dev")]
        bench: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Also write each session's derived record, diagnostics and ranking
        /// profile here, one JSON line per session in bench order: two
        /// builds' files compare byte for byte (`scripts/compare-records`).
        #[arg(long)]
        records_out: Option<PathBuf>,
    },
    /// codemem at scale beside an SQLite FTS5 memory under the same
    /// workload: replays a bench directory's sessions (repeated under fresh
    /// ids up to --sessions) into each over HTTP on loopback, from 1 then 8
    /// clients, then searches a large scope and small per-task scopes;
    /// prints latencies, throughput, peak RSS, disk use and start-up time,
    /// side by side with their ratios.
    Scale {
        /// Bench directory holding sessions.jsonl.gz (or sessions.jsonl).
        #[arg(long, default_value = "../shared/eval/data/dev")]
        bench: PathBuf,
        /// Sessions in the corpus (default: the bench's own).
        #[arg(long)]
        sessions: Option<usize>,
        /// Sessions in the large scope (at most half the corpus).
        #[arg(long, default_value_t = 5000)]
        scope_sessions: usize,
        /// Searches per scope kind.
        #[arg(long, default_value_t = 300)]
        searches: usize,
        /// Keep the systems' data here (default: a temporary directory,
        /// removed at the end).
        #[arg(long)]
        work_dir: Option<PathBuf>,
        /// Measure codemem alone.
        #[arg(long)]
        no_reference: bool,
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write the JSON object to this file.
        #[arg(long)]
        json_out: Option<PathBuf>,
    },
    /// The FTS5 reference memory `bench scale` measures against.
    #[command(hide = true)]
    ReferenceServer {
        /// Its data directory.
        #[arg(long)]
        data_dir: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
    },
    /// Load on a running server: concurrent clients each sending an Add
    /// then a Search, and again, for a while; prints counts, errors and
    /// p50/p99 per endpoint.
    Load {
        /// The server (e.g. http://127.0.0.1:8080).
        #[arg(long)]
        url: String,
        /// Concurrent clients.
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// The server's API key (sent as a Bearer token).
        #[arg(long, env = "CODEMEM_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Options of `codemem inspect`.
#[derive(Debug, Args)]
struct InspectArgs {
    /// The data directory of the service.
    #[arg(long, env = "CODEMEM_DATA_DIR", default_value = "./codemem-data")]
    data_dir: PathBuf,

    /// The user whose memory to show.
    #[arg(long)]
    user_id: String,

    /// Show this session's whole record instead of the list.
    #[arg(long)]
    session: Option<String>,

    /// Print JSON (the same as GET /v1/sessions[/{id}]) instead of text.
    #[arg(long)]
    json: bool,
}

/// Options of `codemem search`.
#[derive(Debug, Args)]
struct SearchArgs {
    /// The data directory of the service.
    #[arg(long, env = "CODEMEM_DATA_DIR", default_value = "./codemem-data")]
    data_dir: PathBuf,

    /// The user whose memory to search.
    #[arg(long)]
    user_id: String,

    /// The most items to return.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    top_k: u32,

    /// The most characters of content to return.
    #[arg(long, env = "CODEMEM_SEARCH_BUDGET", default_value_t = rank::assemble::DEFAULT_BUDGET_CHARS)]
    max_chars: usize,

    /// Show every candidate session with its features, score and verdict
    /// instead of the answer.
    #[arg(long)]
    explain: bool,

    /// Print JSON (the same as POST /v1/search or /v1/search/explain).
    #[arg(long)]
    json: bool,

    /// The new task's text.
    query: String,
}

/// Options of `codemem import`.
#[derive(Debug, Args)]
struct ImportArgs {
    /// The repository: its work tree or its .git directory.
    repo_path: PathBuf,

    /// The user whose memory receives the history.
    #[arg(long)]
    user_id: String,

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

    /// The data directory to write to when no --server is given.
    #[arg(long, env = "CODEMEM_DATA_DIR", default_value = "./codemem-data")]
    data_dir: PathBuf,

    /// Import through a running server's Add endpoint (e.g.
    /// http://127.0.0.1:8080) instead of writing the data directory.
    #[arg(long)]
    server: Option<String>,

    /// The server's API key (sent as a Bearer token).
    #[arg(long, env = "CODEMEM_API_KEY", hide_env_values = true)]
    api_key: Option<String>,

    /// Adds in flight at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    parallelism: u32,

    /// Print the final report as JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `codemem mcp`.
#[derive(Debug, Args)]
struct McpArgs {
    /// The user scope of every tool. Default: the git repository enclosing
    /// the working directory, named by its `origin` remote
    /// (`github.com/owner/name`) or else by its root path.
    #[arg(long, env = "CODEMEM_USER_ID")]
    user_id: Option<String>,

    /// The data directory, when no --server is given (it must not be held
    /// by a running server: use --server then).
    #[arg(long, env = "CODEMEM_DATA_DIR", default_value = "./codemem-data")]
    data_dir: PathBuf,

    /// Go through a running server (e.g. http://127.0.0.1:8080) instead of
    /// opening the data directory.
    #[arg(long, env = "CODEMEM_SERVER")]
    server: Option<String>,

    /// The server's API key (sent as a Bearer token).
    #[arg(long, env = "CODEMEM_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
}

/// Options of `codemem serve`.
#[derive(Debug, Args)]
struct ServeArgs {
    /// Address to listen on (host:port; port 0 picks a free port).
    #[arg(long, env = "CODEMEM_LISTEN", default_value = "127.0.0.1:8080")]
    listen: String,

    /// Directory holding the store (codemem.sqlite3) and the index; created
    /// if missing. One process at a time may hold it.
    #[arg(long, env = "CODEMEM_DATA_DIR", default_value = "./codemem-data")]
    data_dir: PathBuf,

    /// API key that Add and Search require (Authorization: Bearer <key>,
    /// Authorization: Token <key> or X-Api-Key: <key>). Without any key the
    /// service runs without authentication. Health is never authenticated.
    #[arg(long, env = "CODEMEM_API_KEY", hide_env_values = true)]
    api_key: Option<String>,

    /// File of accepted API keys, one a line (blank lines and # comments
    /// skipped); combines with --api-key, so keys can be rotated.
    #[arg(long, env = "CODEMEM_API_KEY_FILE")]
    api_key_file: Option<PathBuf>,

    /// File of scoped keys: each line a key's SHA-256 digest (hex), the
    /// user ids it may use (comma-separated; `prefix*` and `*` allowed),
    /// and optionally `list-users`; # comments and blank lines skipped.
    /// Combines with --api-key and --api-key-file (whose keys reach every
    /// user). See the README.
    #[arg(long, env = "CODEMEM_KEYS_FILE")]
    keys_file: Option<PathBuf>,

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, env = "CODEMEM_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,

    /// Most Adds written together in one group commit.
    #[arg(long, env = "CODEMEM_MAX_BATCH", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    max_batch: u32,

    /// Purge sessions not added to for this many days, at start-up and then
    /// hourly (their messages, Adds, record and index documents). Off
    /// unless given.
    #[arg(long, env = "CODEMEM_RETENTION_DAYS", value_parser = clap::value_parser!(u64).range(1..=36_500))]
    retention_days: Option<u64>,

    /// Mask common credentials (cloud and API keys, tokens, private keys,
    /// Authorization headers, passwords in URLs and assignments) in message
    /// content before it is stored; see the README for the list.
    #[arg(long, env = "CODEMEM_REDACT_SECRETS")]
    redact_secrets: bool,

    /// Requests handled at once (health aside); past it, 503 with
    /// Retry-After.
    #[arg(long, env = "CODEMEM_MAX_IN_FLIGHT", default_value_t = api::DEFAULT_MAX_IN_FLIGHT as u32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    max_in_flight: u32,

    /// Seconds a request may take before it is answered 503 with
    /// Retry-After.
    #[arg(long, env = "CODEMEM_REQUEST_TIMEOUT_SECS", default_value_t = api::DEFAULT_REQUEST_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    request_timeout_secs: u64,

    /// Characters of content a Search answer holds at most, unless the
    /// request's `max_chars` says otherwise (the first item is always given).
    #[arg(long, env = "CODEMEM_SEARCH_BUDGET", default_value_t = rank::assemble::DEFAULT_BUDGET_CHARS as u64, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    search_budget: u64,

    /// A Host name served besides the listen address (loopback names and
    /// IPs with the port), e.g. the name a reverse proxy forwards;
    /// `name:port` requires that port. Repeatable; `*` serves any Host
    /// (no DNS-rebinding guard). Other Hosts get 421.
    #[arg(
        long = "allowed-host",
        env = "CODEMEM_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    allowed_hosts: Vec<String>,

    /// A browser origin (`https://app.example`) besides the server's own
    /// that may call the API: CSRF protection lets it through and CORS
    /// answers it. Repeatable.
    #[arg(
        long = "allowed-origin",
        env = "CODEMEM_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    allowed_origins: Vec<String>,

    /// Seconds a request body may take to arrive (408 past it); no
    /// in-flight slot is held meanwhile.
    #[arg(long, env = "CODEMEM_BODY_READ_TIMEOUT_SECS", default_value_t = api::DEFAULT_BODY_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    body_read_timeout_secs: u64,

    /// Seconds a request head may take to arrive, and a kept-alive
    /// connection may stay idle, before the connection is closed.
    #[arg(long, env = "CODEMEM_HEADER_READ_TIMEOUT_SECS", default_value_t = api::serve::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    header_read_timeout_secs: u64,

    /// Connections open at once; past it new ones are closed at once.
    #[arg(long, env = "CODEMEM_MAX_CONNECTIONS", default_value_t = api::serve::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: u32,

    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "CODEMEM_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, env = "CODEMEM_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

/// Parses the arguments, runs the command, maps errors to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let result = match cli.command {
        Command::Mcp(args) => mcp(args),
        Command::Serve(args) => serve(args),
        Command::Inspect(args) => inspect(args),
        Command::Search(args) => search(args),
        Command::Import(args) => import_history(args),
        Command::Bench(BenchCommand::Ingest {
            bench,
            json,
            records_out,
        }) => bench_ingest(&bench, json, records_out.as_deref()),
        Command::Bench(BenchCommand::ReferenceServer { data_dir, listen }) => {
            crate::bench::reference::serve(&data_dir, &listen)
        }
        Command::Bench(BenchCommand::Scale {
            bench,
            sessions,
            scope_sessions,
            searches,
            work_dir,
            no_reference,
            json,
            json_out,
        }) => {
            let options = crate::bench::scale::ScaleOptions {
                bench_dir: bench,
                sessions,
                scope_sessions: scope_sessions.max(1),
                searches: searches.max(1),
                work_dir,
                skip_reference: no_reference,
            };
            crate::bench::scale::run(&options, &|line| eprintln!("bench scale: {line}")).and_then(
                |report| {
                    let flat = report.flat_json().to_string();
                    if let Some(path) = &json_out {
                        std::fs::write(path, &flat)
                            .with_context(|| format!("cannot write {}", path.display()))?;
                    }
                    if json {
                        print_out(&flat);
                    } else {
                        print_out(&crate::bench::scale::render(&report));
                    }
                    Ok(())
                },
            )
        }
        Command::Bench(BenchCommand::Load {
            url,
            clients,
            seconds,
            api_key,
            json,
        }) => {
            let report = crate::bench::load(
                &url,
                clients.max(1),
                std::time::Duration::from_secs(seconds),
                api_key.as_deref(),
            );
            if json {
                serde_json::to_string(&report)
                    .map(|text| print_out(&text))
                    .map_err(Into::into)
            } else {
                print_out(&format!(
                    "load: {} clients for {:.1} s: {} Adds, {} Searches, {} errors{}\n  add    p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms\n  search p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                    report.clients,
                    report.seconds,
                    report.adds,
                    report.searches,
                    report.errors,
                    if report.error_examples.is_empty() {
                        String::new()
                    } else {
                        format!(" (e.g. {})", report.error_examples.join("; "))
                    },
                    report.add_ms[0],
                    report.add_ms[1],
                    report.add_ms[2],
                    report.search_ms[0],
                    report.search_ms[1],
                    report.search_ms[2],
                ));
                Ok(())
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CODEMEM_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

fn mcp(args: McpArgs) -> anyhow::Result<()> {
    let user_id = match args.user_id {
        Some(user_id) if !user_id.trim().is_empty() => user_id,
        Some(_) => anyhow::bail!("--user-id must not be empty"),
        None => {
            let directory = std::env::current_dir().context("cannot read the working directory")?;
            crate::mcp::repository_scope(&directory).with_context(|| {
                format!(
                    "{} is not inside a git repository: give the user scope with --user-id",
                    directory.display()
                )
            })?
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("codemem-mcp")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let backend = match &args.server {
            Some(url) => crate::mcp::Backend::Remote(crate::mcp::RemoteServer::new(
                url,
                args.api_key.clone(),
            )),
            None => {
                let options = ServiceOptions::new(&args.data_dir);
                let opened = tokio::task::spawn_blocking(move || Service::open(options))
                    .await
                    .context("start-up task failed")?;
                let service = match opened {
                    Ok(service) => service,
                    Err(error @ service::ServiceError::Locked(_)) => {
                        return Err(anyhow::anyhow!(
                            "{error}: a server holds it; run `codemem mcp --server URL` to go through that server"
                        ));
                    }
                    Err(error) => return Err(error.into()),
                };
                crate::mcp::Backend::Local(service)
            }
        };
        tracing::info!(user_id = %user_id, "codemem MCP server on stdio");
        let local = match &backend {
            crate::mcp::Backend::Local(service) => Some(service.clone()),
            crate::mcp::Backend::Remote(_) => None,
        };
        let served = crate::mcp::MemoryServer::new(backend, user_id)
            .serve_stdio()
            .await;
        if let Some(service) = local {
            service.shutdown().await;
        }
        served
    })
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    if args.api_key.is_some() && std::env::var_os("CODEMEM_API_KEY").is_none() {
        tracing::warn!(
            "--api-key on the command line is visible to every local user (ps); set CODEMEM_API_KEY or use --api-key-file or --keys-file instead"
        );
    }
    let mut keys = ApiKeys::new(args.api_key.iter());
    if let Some(path) = &args.api_key_file {
        keys.add_file(path)?;
    }
    if let Some(path) = &args.keys_file {
        keys.add_keys_file(path)?;
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(api::serve::tls_config(cert, key)?),
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("codemem-worker")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut options = ServiceOptions::new(&args.data_dir);
        options.search_budget_chars = usize::try_from(args.search_budget).unwrap_or(usize::MAX);
        options.redact_secrets = args.redact_secrets;
        options.max_batch = args.max_batch as usize;
        let service = tokio::task::spawn_blocking(move || Service::open(options))
            .await
            .context("start-up task failed")??;
        if let Some(days) = args.retention_days {
            // At start-up, then hourly: sessions idle for longer go.
            let service = service.clone();
            let age = std::time::Duration::from_secs(days.saturating_mul(86_400));
            tokio::spawn(async move {
                let mut every_hour = tokio::time::interval(std::time::Duration::from_secs(3600));
                loop {
                    every_hour.tick().await;
                    if let Err(error) = service.purge_older_than(age).await {
                        tracing::warn!(%error, "retention purge failed; retried in an hour");
                    }
                }
            });
            tracing::info!(
                days,
                "retention: sessions idle for longer are purged hourly"
            );
        }
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let address: SocketAddr = listener.local_addr()?;
        let auth = if keys.is_enabled() {
            format!("auth enabled ({} key(s))", keys.num_keys())
        } else {
            "auth disabled: no API key configured".to_string()
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        tracing::info!(
            data_dir = %args.data_dir.display(),
            "codemem listening on {scheme}://{address} ({auth})"
        );
        let app = api::app(
            service.clone(),
            ApiOptions {
                keys,
                max_body_bytes: args.max_body_bytes,
                max_in_flight: args.max_in_flight as usize,
                request_timeout: std::time::Duration::from_secs(args.request_timeout_secs),
                body_read_timeout: std::time::Duration::from_secs(args.body_read_timeout_secs),
                allowed_hosts: api::guard::AllowedHosts::new(Some(address), &args.allowed_hosts),
                trusted_origins: args.allowed_origins.clone(),
                refuse_secret_ids: args.redact_secrets,
            },
        );
        let serve_options = api::serve::ServeOptions {
            header_read_timeout: std::time::Duration::from_secs(args.header_read_timeout_secs),
            max_connections: args.max_connections as usize,
            shutdown_grace: std::time::Duration::from_secs(args.request_timeout_secs),
            tls,
        };
        api::serve::serve(listener, app, serve_options, shutdown_signal()).await;
        tracing::info!("no longer accepting requests; finishing queued adds");
        service.shutdown().await;
        tracing::info!("stopped");
        Ok(())
    })
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("received SIGINT, shutting down"),
        () = terminate => tracing::info!("received SIGTERM, shutting down"),
    }
}

fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let database = args.data_dir.join(store::DATABASE_FILE);
    if !database.exists() {
        anyhow::bail!(
            "no codemem store at {} (expected {})",
            args.data_dir.display(),
            database.display()
        );
    }
    let conn = store::open_reader(&args.data_dir)?;
    let mut out = String::new();
    match &args.session {
        None => {
            let summaries = service::session_summaries(&conn, &args.user_id)?;
            if args.json {
                let data: Vec<api::dto::SessionSummaryDto> =
                    summaries.into_iter().map(Into::into).collect();
                out = serde_json::to_string_pretty(&serde_json::json!({ "data": data }))?;
            } else {
                write_summaries(&mut out, &args.user_id, &summaries);
            }
        }
        Some(session_id) => {
            let detail =
                service::session_detail(&conn, &args.user_id, session_id)?.with_context(|| {
                    format!("user {:?} has no session {session_id:?}", args.user_id)
                })?;
            if args.json {
                out = serde_json::to_string_pretty(&api::dto::session_detail_json(&detail))?;
            } else {
                write_detail(&mut out, &detail);
            }
        }
    }
    print_out(out.trim_end());
    Ok(())
}

fn search(args: SearchArgs) -> anyhow::Result<()> {
    use std::fmt::Write;
    if args.query.trim().is_empty() {
        anyhow::bail!("the query is empty");
    }
    let searcher = Searcher::open_read_only(&args.data_dir, args.max_chars)
        .with_context(|| format!("cannot search {}", args.data_dir.display()))?;
    let request = SearchRequest {
        query: args.query.clone(),
        user_id: args.user_id.clone(),
        top_k: args.top_k as usize,
        max_chars: Some(args.max_chars.max(1)),
    };
    let mut out = String::new();
    if args.explain {
        let explained = searcher.explain(&request)?;
        if args.json {
            out = serde_json::to_string_pretty(&explained)?;
        } else {
            write_explained(&mut out, &explained);
        }
    } else {
        let items = searcher.search(&request)?;
        if args.json {
            let data: Vec<api::dto::ItemDto> = items.into_iter().map(Into::into).collect();
            out = serde_json::to_string_pretty(&serde_json::json!({ "data": data }))?;
        } else if items.is_empty() {
            out.push_str("nothing stored passes the noise gate for this query (try --explain)");
        } else {
            for (rank, item) in items.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "#{} {} score {:.3}  session {}  (request {}, message {})",
                    rank + 1,
                    item.kind,
                    item.score,
                    item.session_id,
                    item.request_id,
                    item.message_start
                );
                for line in item.content.lines() {
                    let _ = writeln!(out, "    {line}");
                }
                out.push('\n');
            }
        }
    }
    print_out(out.trim_end());
    Ok(())
}

/// Progress of an import: a bar on a terminal, else a line every few
/// seconds.
struct ImportProgress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    last_line: std::time::Instant,
}

impl import::Progress for ImportProgress {
    fn start(&mut self, total: usize) {
        use std::io::IsTerminal;
        self.total = total;
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} commits  {per_sec}  eta {eta}  {msg}",
            ) {
                bar.set_style(style);
            }
            self.bar = Some(bar);
        } else {
            eprintln!("import: {total} first-parent commit(s) to consider");
        }
    }

    fn update(&mut self, done: usize, report: &import::ImportReport) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(done as u64);
                bar.set_message(format!(
                    "{} imported, {} already there",
                    report.imported, report.already_imported
                ));
            }
            None if self.last_line.elapsed() >= std::time::Duration::from_secs(5) => {
                eprintln!(
                    "import: {done}/{} commits considered, {} imported ({:.1}/s), {} already there",
                    self.total,
                    report.imported,
                    report.rate(),
                    report.already_imported
                );
                self.last_line = std::time::Instant::now();
            }
            None => {}
        }
    }

    fn finish(&mut self, _: &import::ImportReport) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn import_history(args: ImportArgs) -> anyhow::Result<()> {
    let options = import::ImportOptions {
        repo_path: args.repo_path.clone(),
        user_id: args.user_id.clone(),
        rev: args.rev.clone(),
        since: args.since.clone(),
        max_commits: args.max_commits,
        max_diff_bytes: args.max_diff_bytes.max(1),
        parallelism: args.parallelism as usize,
    };
    // Checked before the data directory is opened (or created).
    import::check_repository(&args.repo_path)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let stop = std::sync::Arc::clone(&stop);
        runtime.spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("import: interrupted; finishing the commits in flight");
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    let mut progress = ImportProgress {
        bar: None,
        total: 0,
        last_line: std::time::Instant::now(),
    };
    let (report, service) = match &args.server {
        Some(url) => {
            let sink = std::sync::Arc::new(import::ServerSink::new(url, args.api_key.clone()));
            (import::import(&options, sink, &mut progress, &stop)?, None)
        }
        None => {
            let service = match Service::open(ServiceOptions::new(&args.data_dir)) {
                Ok(service) => service,
                Err(service::ServiceError::Locked(path)) => anyhow::bail!(
                    "{} is held by a running server; import through it instead: \
                     codemem import {} --user-id {} --server http://<its address> \
                     (add --api-key if it requires one)",
                    path.display(),
                    args.repo_path.display(),
                    args.user_id
                ),
                Err(error) => return Err(error.into()),
            };
            let sink = std::sync::Arc::new(import::DirectSink::new(
                std::sync::Arc::clone(&service),
                runtime.handle().clone(),
            )?);
            let report = import::import(&options, sink, &mut progress, &stop);
            (report?, Some(service))
        }
    };
    if let Some(service) = service {
        runtime.block_on(service.shutdown());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "imported {} commit(s) in {:.1} s ({:.1}/s); {} already imported; {} merge(s) skipped; \
             {} binary file(s) and {} oversized diff(s) left out{}",
            report.imported,
            report.seconds,
            report.rate(),
            report.already_imported,
            report.merges_skipped,
            report.binary_files_skipped,
            report.oversized_diffs_skipped,
            if report.interrupted {
                "; interrupted: run again to resume"
            } else {
                ""
            }
        );
    }
    Ok(())
}

fn write_explained(out: &mut String, explained: &search::Explained) {
    use std::fmt::Write;
    let query = &explained.query;
    let _ = writeln!(
        out,
        "query: {} terms; names {:?}; paths {:?}; errors {:?}; tests {:?}; language {}",
        query.terms.len(),
        query.names,
        query.paths,
        query.error_types,
        query.tests,
        query.language.as_deref().unwrap_or("-")
    );
    let _ = writeln!(
        out,
        "{} candidate(s) of {} session(s) in scope\n",
        explained.candidates.len(),
        explained.num_sessions
    );
    let _ = writeln!(
        out,
        "{:<4} {:<24} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}  session / task",
        "#", "verdict", "score", "text", "cover", "symbol", "path", "stem", "words"
    );
    for (rank, scored) in explained.candidates.iter().enumerate() {
        let verdict = match &scored.dropped {
            None => "kept".to_string(),
            Some(rank::DropReason::Duplicate { of }) => format!("duplicate of {of}"),
            Some(reason) => serde_json::to_value(reason)
                .ok()
                .and_then(|value| value.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{reason:?}")),
        };
        let features = &scored.features;
        let _ = writeln!(
            out,
            "{:<4} {:<24} {:>6.3} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.2}  {}  {}",
            rank + 1,
            truncate(&verdict, 24),
            scored.score,
            features.text_rel,
            features.text_coverage,
            features.symbols_changed + features.symbols_referenced,
            features.paths,
            features.stems,
            features.location_words,
            scored.session_id,
            truncate(&scored.task_line, 60)
        );
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let kept: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{kept}…")
    }
}

/// Prints a command's output; a reader that went away (`| head`) ends the
/// output quietly instead of a panic.
fn print_out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = writeln!(stdout, "{text}").and_then(|()| stdout.flush())
        && error.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("error: cannot write the output: {error}");
    }
}

fn write_summaries(out: &mut String, user_id: &str, summaries: &[SessionSummary]) {
    use std::fmt::Write;
    let _ = writeln!(out, "{} session(s) of user {user_id:?}", summaries.len());
    for summary in summaries {
        let _ = writeln!(
            out,
            "\n{}\n  {} | {} | {} file(s), {} symbol(s) changed, {} error(s), {} message(s) | updated {}\n  task: {}",
            summary.session_id,
            summary.status,
            summary.language.as_deref().unwrap_or("language unknown"),
            summary.num_files_changed,
            summary.num_symbols_changed,
            summary.num_errors,
            summary.num_messages,
            rfc3339_from_ms(summary.updated_at_ms),
            summary.task,
        );
    }
}

fn write_detail(out: &mut String, detail: &SessionDetail) {
    use std::fmt::Write;
    let record = &detail.record;
    let list = |items: &[String]| {
        if items.is_empty() {
            "-".to_string()
        } else {
            items.join(", ")
        }
    };
    let _ = writeln!(out, "session {}", detail.session_id);
    let _ = writeln!(
        out,
        "  {} message(s), updated {}",
        detail.num_messages,
        rfc3339_from_ms(detail.updated_at_ms)
    );
    let task_line = record.task.lines().next().unwrap_or("");
    let _ = writeln!(out, "task:      {task_line}");
    let _ = writeln!(
        out,
        "language:  {}",
        record.language.as_deref().unwrap_or("-")
    );
    let outcome = &record.outcome;
    let tests_at_end = match outcome.tests_passed_at_end {
        Some(true) => "passed",
        Some(false) => "failed",
        None => "not seen",
    };
    let _ = writeln!(
        out,
        "outcome:   {} (final diff: {}, tests at end: {tests_at_end})",
        outcome.status,
        if outcome.final_diff { "yes" } else { "no" },
    );
    let _ = writeln!(out, "files changed:      {}", list(&record.files_changed));
    let _ = writeln!(out, "symbols changed:    {}", list(&record.symbols_changed));
    let _ = writeln!(
        out,
        "symbols referenced: {}",
        list(&record.symbols_referenced)
    );
    let _ = writeln!(out, "tests failing:      {}", list(&record.tests.failing));
    let _ = writeln!(out, "tests passing:      {}", list(&record.tests.passing));
    let _ = writeln!(out, "errors ({}):", record.errors.len());
    for error in &record.errors {
        let _ = writeln!(out, "  {}: {}", error.error_type, error.message);
        for frame in error.frames.iter().rev().take(3) {
            let _ = writeln!(
                out,
                "      at {}:{} in {}",
                frame.file,
                frame.line.map_or("?".to_string(), |line| line.to_string()),
                frame.function.as_deref().unwrap_or("?"),
            );
        }
    }
    let _ = writeln!(out, "commands ({}):", record.commands.len());
    for command in &record.commands {
        let first_line = command.command.lines().next().unwrap_or("");
        let exit = command
            .exit_code
            .map_or("?".to_string(), |code| code.to_string());
        let _ = writeln!(
            out,
            "  [msg {:>3}] exit {exit:>2}  {first_line}",
            command.message_index
        );
    }
    let _ = writeln!(out, "evidence ({}):", record.evidence.len());
    for evidence in &record.evidence {
        let source = detail
            .sources
            .get(evidence.message_index)
            .map_or("?".to_string(), |(request_id, index)| {
                format!("{request_id}#{index}")
            });
        let first_line = evidence.text.lines().next().unwrap_or("");
        let _ = writeln!(
            out,
            "  {:<5} msg {:>3} ({source}) {}{}\n        {first_line}",
            evidence.kind,
            evidence.message_index,
            evidence.file.as_deref().unwrap_or(""),
            if evidence.symbols.is_empty() {
                String::new()
            } else {
                format!(" [{}]", evidence.symbols.join(", "))
            },
        );
    }
    if !detail.diagnostics.is_empty() {
        let _ = writeln!(out, "diagnostics ({}):", detail.diagnostics.len());
        for diagnostic in &detail.diagnostics {
            let _ = writeln!(
                out,
                "  msg {}: {}",
                diagnostic.message_index, diagnostic.message
            );
        }
    }
}

fn bench_ingest(
    bench_dir: &std::path::Path,
    json: bool,
    records_out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; measure with cargo run --release");
    }
    if let Some(path) = records_out {
        let count = crate::bench::write_records(bench_dir, path)?;
        eprintln!(
            "bench ingest: {count} session records written to {}",
            path.display()
        );
    }
    let report = crate::bench::ingest(bench_dir)?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "extraction over {} sessions ({:.1} MB, {} Add chunks), one thread",
        report.num_sessions,
        report.input_bytes as f64 / 1e6,
        report.num_chunks
    );
    println!(
        "  whole sessions:  {:.1} MB/s",
        report.whole_sessions_mb_per_s
    );
    println!(
        "  per Add chunk (session so far): p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms",
        report.chunk_p50_ms, report.chunk_p99_ms, report.chunk_max_ms
    );
    println!("  diagnostics: {}", report.num_diagnostics);
    println!(
        "  tag queries and patterns compiled once before timing: {:.0} ms",
        report.warm_up_ms
    );
    Ok(())
}
