//! The command line: arguments are parsed and checked here, once, and errors
//! become exit codes here only. `main.rs` only calls [`main`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::api::auth::ApiKeys;
use crate::api::{self, ApiOptions, DEFAULT_MAX_BODY_BYTES};
use crate::service::{Service, ServiceOptions};

/// codemem: a memory for coding agents. It remembers agent trajectories
/// (tasks, commands, tracebacks, diffs) and, given a new task, hands back
/// the past experience that helps.
#[derive(Debug, Parser)]
#[command(name = "codemem", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP service (Agent Memory Leaderboard Add/Search contract)
    /// on an embedded store: SQLite and tantivy in one data directory.
    Serve(ServeArgs),
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

    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, env = "CODEMEM_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,

    /// Most Adds written together in one group commit.
    #[arg(long, env = "CODEMEM_MAX_BATCH", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    max_batch: u32,
}

/// Parses the arguments, runs the command, maps errors to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let result = match cli.command {
        Command::Serve(args) => serve(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CODEMEM_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut keys = ApiKeys::new(args.api_key.iter());
    if let Some(path) = &args.api_key_file {
        keys.add_file(path)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("codemem-worker")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut options = ServiceOptions::new(&args.data_dir);
        options.max_batch = args.max_batch as usize;
        let service = tokio::task::spawn_blocking(move || Service::open(options))
            .await
            .context("start-up task failed")??;
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let address: SocketAddr = listener.local_addr()?;
        let auth = if keys.is_enabled() {
            format!("auth enabled ({} key(s))", keys.num_keys())
        } else {
            "auth disabled: no API key configured".to_string()
        };
        tracing::info!(
            data_dir = %args.data_dir.display(),
            "codemem listening on http://{address} ({auth})"
        );
        let app = api::app(
            service.clone(),
            ApiOptions {
                keys,
                max_body_bytes: args.max_body_bytes,
            },
        );
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
            .context("server failed")?;
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
