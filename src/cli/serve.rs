//! The commands that run a service: `serve` (HTTP until SIGINT/SIGTERM) and
//! `mcp` (the Model Context Protocol on stdio).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::options::BackendArgs;
use super::{McpArgs, ServeArgs};
use crate::api::auth::ApiKeys;
use crate::api::{self, ApiOptions};
use crate::local::{self, ServerRecord};
use precedent_service::{self as service, Service, ServiceOptions};

pub(super) fn mcp(args: McpArgs) -> anyhow::Result<()> {
    let user_id = match super::memory_key(args.user_id.as_deref(), None) {
        Ok(user_id) => user_id,
        // An agent opened outside any repository (MCP registered for
        // every project): the folder's own memory, said once, rather than
        // a server the agent shows as failed.
        Err(error) if args.user_id.is_none() => {
            let folder = std::env::current_dir()
                .and_then(std::fs::canonicalize)
                .with_context(|| format!("{error:#}"))?;
            let key = folder.to_string_lossy().trim_end_matches('/').to_string();
            tracing::warn!(
                "{} is in no git repository: this session uses the folder's own memory, {key} (give --user-id to choose one)",
                folder.display()
            );
            key
        }
        Err(error) => return Err(error),
    };
    let user_id = super::checked_user(user_id)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("precedent-mcp")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let backend = open_backend("mcp", &args.backend, args.no_server.no_server).await?;
        tracing::info!(user_id = %user_id, "precedent MCP server on stdio");
        let local = match &backend {
            crate::mcp::Backend::Local(service) => Some(service.clone()),
            crate::mcp::Backend::Remote(_) => None,
        };
        let mut server = crate::mcp::MemoryServer::new(backend, user_id);
        if let Some(root) = std::env::current_dir()
            .ok()
            .and_then(|directory| crate::mcp::checkout_root(&directory))
        {
            server = server.with_checkout(root);
        }
        let served = server.serve_stdio().await;
        if let Some(service) = local {
            service.shutdown().await;
        }
        served
    })
}

/// Where the requests of `command` (`mcp`, `hook`) go: the running
/// server `backend` names, if any; else the data directory's local
/// server, started if need be (unless `no_server`, the environment or a
/// PostgreSQL store says otherwise); else the service opened on the data
/// directory in this process.
pub(super) async fn open_backend(
    command: &str,
    backend: &BackendArgs,
    no_server: bool,
) -> anyhow::Result<crate::mcp::Backend> {
    if let Some(url) = &backend.server {
        return Ok(crate::mcp::Backend::Remote(crate::mcp::RemoteServer::new(
            url,
            backend.key.api_key.clone(),
        )));
    }
    let storage = &backend.storage;
    let store = storage.location()?;
    if super::options::attaches(no_server, &store) {
        let data_dir = storage.data_dir().to_path_buf();
        let server = tokio::task::spawn_blocking(move || local::LocalServer::attach(&data_dir))
            .await
            .context("start-up task failed")??;
        let attached = server.current();
        tracing::info!(url = %attached.url(), started = attached.started, "attached to the local server");
        return Ok(crate::mcp::Backend::Remote(
            crate::mcp::RemoteServer::local(Arc::new(server)),
        ));
    }
    let mut options = ServiceOptions::new(storage.data_dir());
    options.store = store;
    let opened = tokio::task::spawn_blocking(move || Service::open(options))
        .await
        .context("start-up task failed")?;
    match opened {
        Ok(service) => Ok(crate::mcp::Backend::Local(service)),
        Err(error @ service::ServiceError::Locked(_)) => Err(anyhow::anyhow!(
            "{error}: another process holds it; run `precedent {command}` without --no-server (and without {}) to share it through the local server",
            local::NO_AUTOSTART_ENV
        )),
        Err(error) => Err(error.into()),
    }
}

pub(super) fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let keys = api_keys(&args)?;
    let store = args.storage.location()?;
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
        let store_description = store.describe();
        let options = service_options(&args, store);
        let auto_started = args.auto_started;
        let data_dir = args.storage.data_dir().to_path_buf();
        let service =
            tokio::task::spawn_blocking(move || open_taking_over(options, auto_started, &data_dir))
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
            data_dir = %args.storage.data_dir().display(),
            store = %store_description,
            "precedent listening on {scheme}://{address} ({auth})"
        );
        let app = api::app(service.clone(), api_options(&args, keys, address));
        let serves_tls = tls.is_some();
        let serve_options = serve_options(&args, tls);
        let activity = Activity::new();
        // The secret this process proves itself with to local clients
        // (`local`'s challenge); it leaves the process only in the record.
        let secret: Arc<str> = Arc::from(local::random_key().context("cannot draw a secret")?);
        let app = app.layer(axum::middleware::from_fn({
            let activity = Arc::clone(&activity);
            let secret = Arc::clone(&secret);
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let activity = Arc::clone(&activity);
                let secret = Arc::clone(&secret);
                async move {
                    let challenge = request
                        .headers()
                        .get(local::CHALLENGE_HEADER)
                        .and_then(|value| value.to_str().ok())
                        .filter(|value| value.len() <= local::MAX_CHALLENGE_LEN)
                        .map(str::to_string);
                    // A health check is no work: another user's polling
                    // does not keep an idle server up. Neither does a
                    // request its key does not admit.
                    let counts = request.uri().path() != "/health";
                    let in_flight = counts.then(|| activity.begin());
                    let mut response = next.run(request).await;
                    if let Some(in_flight) = in_flight
                        && response.status() == axum::http::StatusCode::UNAUTHORIZED
                    {
                        in_flight.forget();
                    }
                    if let Some(challenge) = challenge
                        && let Ok(value) = axum::http::HeaderValue::from_str(&local::proof(
                            &secret, &challenge,
                        ))
                    {
                        response.headers_mut().insert(local::PROOF_HEADER, value);
                    }
                    response
                }
            }
        }));
        // A server over TLS is left out: precedent's own clients speak
        // plain HTTP to the local server.
        let recorded = (!serves_tls).then(|| ServerRecord {
            url: format!("http://{}", connect_address(address)),
            pid: std::process::id(),
            auto_started: args.auto_started,
            api_key: args.key.api_key.clone().filter(|_| args.auto_started),
            secret: Some(secret.to_string()),
        });
        if let Some(record) = &recorded
            && let Err(error) = local::write_record(args.storage.data_dir(), record)
        {
            tracing::warn!(%error, "cannot record the address in the data directory; mcp and import will not find this server");
        }
        let stop = stop_when(
            activity,
            args.idle_exit,
            recorded
                .as_ref()
                .filter(|record| record.auto_started)
                .map(|_| args.storage.data_dir().to_path_buf()),
        );
        api::serve::serve(listener, app, serve_options, stop).await;
        tracing::info!("no longer accepting requests; finishing queued adds");
        if recorded.is_some() {
            local::remove_record(args.storage.data_dir(), std::process::id());
        }
        service.shutdown().await;
        tracing::info!("stopped");
        Ok(())
    })
}

/// The API keys `serve` accepts (`--api-key`, `--api-key-file`,
/// `--keys-file`), with `--key-rate-limit`; warns of a key on the command
/// line.
fn api_keys(args: &ServeArgs) -> anyhow::Result<ApiKeys> {
    if args.key.api_key.is_some() && std::env::var_os("PRECEDENT_API_KEY").is_none() {
        tracing::warn!(
            "--api-key on the command line is visible to every local user (ps); set PRECEDENT_API_KEY or use --api-key-file or --keys-file instead"
        );
    }
    let mut keys = ApiKeys::new(args.key.api_key.iter());
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
    Ok(keys)
}

/// The service `serve` opens on `store`.
fn service_options(args: &ServeArgs, store: precedent_store::StoreLocation) -> ServiceOptions {
    let mut options = ServiceOptions::new(args.storage.data_dir());
    options.store = store;
    options.search_budget_chars = args.budget.search_budget;
    options.redact_secrets = args.redact_secrets;
    options.max_batch = args.max_batch as usize;
    options.max_session_bytes = args.max_session_bytes;
    options.max_cached_users = args.max_cached_users;
    options.retention = args
        .retention_days
        .map(|days| std::time::Duration::from_secs(days.saturating_mul(86_400)));
    options
}

/// Whose checkouts a server reads: the auto-started local server its
/// owner's (on loopback, its clients hold its key), any other server those
/// under its `--checkout-root` directories, or none.
fn checkout_roots(args: &ServeArgs, address: SocketAddr) -> api::Checkouts {
    if !args.checkout_roots.is_empty() {
        let roots = args
            .checkout_roots
            .iter()
            .filter_map(|root| match std::fs::canonicalize(root) {
                Ok(root) => Some(root),
                Err(error) => {
                    tracing::warn!(root = %root.display(), %error, "--checkout-root is not readable; ignored");
                    None
                }
            })
            .collect();
        return api::Checkouts::Within(roots);
    }
    if args.auto_started && address.ip().is_loopback() {
        api::Checkouts::Owners
    } else {
        api::Checkouts::None
    }
}

/// The HTTP API's options for a server listening on `address`.
fn api_options(args: &ServeArgs, keys: ApiKeys, address: SocketAddr) -> ApiOptions {
    ApiOptions {
        keys,
        max_body_bytes: args.max_body_bytes,
        max_in_flight: args.max_in_flight as usize,
        request_timeout: std::time::Duration::from_secs(args.request_timeout_secs),
        body_read_timeout: std::time::Duration::from_secs(args.body_read_timeout_secs),
        allowed_hosts: api::guard::AllowedHosts::new(Some(address), &args.allowed_hosts),
        trusted_origins: args.allowed_origins.clone(),
        refuse_secret_ids: args.redact_secrets,
        checkouts: checkout_roots(args, address),
    }
}

/// The connection-level options: timeouts, caps and TLS.
fn serve_options(
    args: &ServeArgs,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
) -> api::serve::ServeOptions {
    api::serve::ServeOptions {
        header_read_timeout: std::time::Duration::from_secs(args.header_read_timeout_secs),
        first_byte_timeout: std::time::Duration::from_secs(args.first_byte_timeout_secs),
        tls_handshake_timeout: std::time::Duration::from_secs(args.tls_handshake_timeout_secs),
        max_connections: args.max_connections as usize,
        max_connections_per_address: args.max_connections_per_address as usize,
        shutdown_grace: std::time::Duration::from_secs(args.request_timeout_secs),
        tls,
    }
}

/// Opens the service. A server started by hand takes the data directory
/// over from the local server that `mcp`, `hook` and `import` started: it
/// asks it to exit and waits for it. A server started by hand that holds
/// it is named, never stopped.
fn open_taking_over(
    options: ServiceOptions,
    auto_started: bool,
    data_dir: &std::path::Path,
) -> anyhow::Result<Arc<Service>> {
    match open_service(options.clone(), auto_started) {
        Err(error @ service::ServiceError::Locked(_)) if !auto_started => {
            match local::stop_auto_started(data_dir, TAKE_OVER_WAIT) {
                Some(record) => {
                    tracing::info!(
                        pid = record.pid,
                        url = %record.url,
                        "took the data directory over from the local server that mcp, hook and import started"
                    );
                    Ok(open_service(options, true)?)
                }
                None => Err(held_by(error, data_dir)),
            }
        }
        opened => opened.map_err(|error| held_by(error, data_dir)),
    }
}

/// How long `serve` waits for the local server it asked to exit.
const TAKE_OVER_WAIT: Duration = Duration::from_secs(30);

/// A data directory in use says by whom, when a server's record names a
/// live one, and how to go on.
fn held_by(error: service::ServiceError, data_dir: &std::path::Path) -> anyhow::Error {
    if let service::ServiceError::Locked(_) = &error {
        if let Some(record) = local::proven_record(data_dir) {
            let started = if record.auto_started {
                "the local server that mcp, hook and import share, which did not exit when asked"
            } else {
                "a server started by hand"
            };
            return anyhow::anyhow!(
                "{error}: {started} holds it (pid {}, {}); stop it with `kill {}`, or give this one another --data-dir",
                record.pid,
                record.url,
                record.pid
            );
        }
        if let Some(record) = local::read_record(data_dir) {
            return anyhow::anyhow!(
                "{error}: its record names pid {} at {}, which does not answer as that server; another precedent process (an import or mcp with --no-server?) holds it",
                record.pid,
                record.url
            );
        }
    }
    error.into()
}

/// How long an auto-started server waits for the data directory while
/// another process still holds it (a server that is shutting down).
const AUTO_START_LOCK_WAIT: Duration = Duration::from_secs(10);

/// Opens the service; with `wait_for_lock` (an auto-started server, or
/// one taking over) it waits up to [`AUTO_START_LOCK_WAIT`] for a server
/// that is leaving the data directory.
fn open_service(
    options: ServiceOptions,
    wait_for_lock: bool,
) -> Result<Arc<Service>, service::ServiceError> {
    let started = Instant::now();
    loop {
        match Service::open(options.clone()) {
            Err(service::ServiceError::Locked(_))
                if wait_for_lock && started.elapsed() < AUTO_START_LOCK_WAIT =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            opened => return opened,
        }
    }
}

/// Requests in flight and when the last one ended: what idle means.
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds from `started` to the last request's start or end.
    last_ms: AtomicU64,
}

/// One request in flight; its end counts as activity unless forgotten.
struct InFlight {
    activity: Arc<Activity>,
    counts: bool,
}

impl InFlight {
    /// Ends the request without counting it as activity (one refused).
    fn forget(mut self) {
        self.counts = false;
    }
}

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_ms: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.fetch_max(now, Ordering::Relaxed);
    }

    /// A request in flight: no idle exit until it ends.
    fn begin(self: &Arc<Activity>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight {
            activity: Arc::clone(self),
            counts: true,
        }
    }

    /// How long no request has been in flight (zero while one is).
    fn idle_for(&self) -> Duration {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return Duration::ZERO;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.counts {
            self.activity.touch();
        }
        self.activity.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The address a local client connects to: the listen address, loopback
/// for an unspecified one (`0.0.0.0`, `::`).
fn connect_address(address: SocketAddr) -> SocketAddr {
    match address.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, address.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, address.port()))
        }
        _ => address,
    }
}

/// Resolves on SIGINT or SIGTERM; after `idle_exit` without a request,
/// when given; when the record in `watched_data_dir` is gone or names
/// another process, when given (an auto-started server whose data
/// directory was removed or taken over).
async fn stop_when(
    activity: Arc<Activity>,
    idle_exit: Option<Duration>,
    watched_data_dir: Option<std::path::PathBuf>,
) {
    let watch = async move {
        if idle_exit.is_none() && watched_data_dir.is_none() {
            return std::future::pending::<()>().await;
        }
        let pid = std::process::id();
        let tick = idle_exit
            .map_or(Duration::from_secs(2), |idle| idle / 10)
            .clamp(Duration::from_millis(100), Duration::from_secs(2));
        loop {
            tokio::time::sleep(tick).await;
            if let Some(idle) = idle_exit
                && activity.idle_for() >= idle
            {
                tracing::info!(
                    idle_secs = idle.as_secs(),
                    "no request for the idle time, shutting down"
                );
                return;
            }
            if let Some(data_dir) = &watched_data_dir {
                let data_dir = data_dir.clone();
                let ours = tokio::task::spawn_blocking(move || {
                    local::read_record(&data_dir).is_some_and(|record| record.pid == pid)
                })
                .await
                .unwrap_or(true);
                if !ours {
                    tracing::info!(
                        "the data directory no longer records this server, shutting down"
                    );
                    return;
                }
            }
        }
    };
    tokio::select! {
        () = shutdown_signal() => {}
        () = watch => {}
    }
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
