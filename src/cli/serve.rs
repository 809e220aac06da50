//! The commands that run a service: `serve` (HTTP until SIGINT/SIGTERM) and
//! `mcp` (the Model Context Protocol on stdio).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;

use super::{McpArgs, ServeArgs};
use crate::api::auth::ApiKeys;
use crate::api::{self, ApiOptions};
use crate::service::{self, Service, ServiceOptions};

pub(super) fn mcp(args: McpArgs) -> anyhow::Result<()> {
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
        .thread_name("precedent-mcp")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let backend = open_backend(
            "mcp",
            args.server.as_deref(),
            args.api_key.clone(),
            &args.data_dir,
            args.store.as_deref(),
        )
        .await?;
        tracing::info!(user_id = %user_id, "precedent MCP server on stdio");
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

/// Where the requests of `command` (`mcp`, `hook`) go: the running
/// server at `server` when one is given, else the service opened on the
/// data directory in this process.
pub(super) async fn open_backend(
    command: &str,
    server: Option<&str>,
    api_key: Option<String>,
    data_dir: &Path,
    store: Option<&str>,
) -> anyhow::Result<crate::mcp::Backend> {
    if let Some(url) = server {
        return Ok(crate::mcp::Backend::Remote(crate::mcp::RemoteServer::new(
            url, api_key,
        )));
    }
    let mut options = ServiceOptions::new(data_dir);
    options.store = super::store_location(store, data_dir)?;
    let opened = tokio::task::spawn_blocking(move || Service::open(options))
        .await
        .context("start-up task failed")?;
    match opened {
        Ok(service) => Ok(crate::mcp::Backend::Local(service)),
        Err(error @ service::ServiceError::Locked(_)) => Err(anyhow::anyhow!(
            "{error}: a server holds it; run `precedent {command} --server URL` to go through that server"
        )),
        Err(error) => Err(error.into()),
    }
}

pub(super) fn serve(args: ServeArgs) -> anyhow::Result<()> {
    if args.api_key.is_some() && std::env::var_os("PRECEDENT_API_KEY").is_none() {
        tracing::warn!(
            "--api-key on the command line is visible to every local user (ps); set PRECEDENT_API_KEY or use --api-key-file or --keys-file instead"
        );
    }
    let mut keys = ApiKeys::new(args.api_key.iter());
    if let Some(path) = &args.api_key_file {
        keys.add_file(path)?;
    }
    if let Some(path) = &args.keys_file {
        keys.add_keys_file(path)?;
    }
    if let Some(per_second) = args.key_rate_limit {
        if !keys.is_enabled() {
            anyhow::bail!(
                "--key-rate-limit limits each API key, and no key is configured (--api-key, --api-key-file or --keys-file)"
            );
        }
        keys.limit_rate(api::auth::KeyRateLimit::new(per_second));
    }
    let store = super::store_location(args.store.as_deref(), &args.data_dir)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(api::serve::tls_config(cert, key)?),
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("precedent-worker")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut options = ServiceOptions::new(&args.data_dir);
        let store_description = store.describe();
        options.store = store;
        options.search_budget_chars = usize::try_from(args.search_budget).unwrap_or(usize::MAX);
        options.redact_secrets = args.redact_secrets;
        options.max_batch = args.max_batch as usize;
        options.max_session_bytes = args.max_session_bytes;
        options.max_cached_users = args.max_cached_users;
        options.retention = args
            .retention_days
            .map(|days| std::time::Duration::from_secs(days.saturating_mul(86_400)));
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
        let scheme = if tls.is_some() { "https" } else { "http" };
        tracing::info!(
            data_dir = %args.data_dir.display(),
            store = %store_description,
            "precedent listening on {scheme}://{address} ({auth})"
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
            first_byte_timeout: std::time::Duration::from_secs(args.first_byte_timeout_secs),
            tls_handshake_timeout: std::time::Duration::from_secs(args.tls_handshake_timeout_secs),
            max_connections: args.max_connections as usize,
            max_connections_per_address: args.max_connections_per_address as usize,
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
