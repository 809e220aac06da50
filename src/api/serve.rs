//! serve: the connections of a listening socket, each served by hyper's
//! HTTP/1.1 connection with the limits `axum::serve` cannot set.
//!
//! - Header read timeout: a request head (and, as hyper starts that timer
//!   whenever it waits for a head, the silence between requests on a
//!   kept-alive connection) must arrive within it, else the connection is
//!   closed. It is the idle timeout too.
//! - Connection cap: past it, new connections are closed at once.
//! - Graceful shutdown: once `shutdown` resolves, no connection is
//!   accepted, idle ones close, and those in a request finish it.
//!
//! HTTP/2 is not served: hyper's HTTP/2 server has no header read or idle
//! timeout, and the contract's clients speak HTTP/1.1. What it leaves to
//! others: body limits and the in-flight limit ([`super::limits`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Knobs of the connection layer.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// A request head must arrive within this, and a kept-alive connection
    /// is closed after this long without one.
    pub header_read_timeout: Duration,
    /// Connections open at once; past it new ones are closed at once.
    pub max_connections: usize,
    /// The longest wait, at shutdown, for requests being handled.
    pub shutdown_grace: Duration,
}

/// The default header read (and idle) timeout.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The default connection cap.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            shutdown_grace: super::DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then waits (at
/// most `shutdown_grace`) for the requests being handled.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .keep_alive(true);
    let builder = Arc::new(builder);
    let connections = Arc::new(tokio::sync::Semaphore::new(options.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, most likely: let some close.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            tracing::debug!(%peer, "connection closed: at the connection cap");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let connection =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                log_connection_error(peer, &error);
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(options.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still open at the end of the shutdown grace period");
    }
}

fn log_connection_error(peer: SocketAddr, error: &hyper::Error) {
    if error.is_timeout() {
        tracing::debug!(%peer, "connection closed: no request head within the header read timeout");
    } else {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}
