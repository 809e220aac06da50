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
//! - TLS (optional, [`tls_config`]): rustls with the ring provider, no
//!   OpenSSL; the handshake must end within the header read timeout.
//!
//! HTTP/2 is not served: hyper's HTTP/2 server has no header read or idle
//! timeout, and the contract's clients speak HTTP/1.1. What it leaves to
//! others: body limits and the in-flight limit ([`super::limits`]).

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::rustls;

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
    /// Serve HTTPS with this configuration ([`tls_config`]).
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Why the TLS certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("cannot read {what} from {path}: {source}")]
    Pem {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: String,
        /// What went wrong.
        source: rustls_pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{0} holds no certificate (PEM, -----BEGIN CERTIFICATE-----)")]
    NoCertificate(String),
    /// rustls refused the pair (a key not matching the certificate, say).
    #[error("the TLS certificate and key cannot be used: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A TLS configuration from a PEM certificate chain and a PEM private key
/// (PKCS#8, PKCS#1 or SEC1), offering HTTP/1.1 by ALPN.
pub fn tls_config(certificate: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let pem_error = |what, path: &Path| {
        let path = path.display().to_string();
        move |source| TlsError::Pem { what, path, source }
    };
    let chain = CertificateDer::pem_file_iter(certificate)
        .map_err(pem_error("certificate", certificate))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error("certificate", certificate))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(certificate.display().to_string()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(pem_error("private key", key))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
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
            tls: None,
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
    let tls = options.tls.clone().map(tokio_rustls::TlsAcceptor::from);
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
        let service = TowerToHyperService::new(app.clone());
        let builder = Arc::clone(&builder);
        let watcher = graceful.watcher();
        let acceptor = tls.clone();
        let handshake_timeout = options.header_read_timeout;
        tokio::spawn(async move {
            let served = match acceptor {
                None => {
                    watcher
                        .watch(builder.serve_connection(TokioIo::new(stream), service))
                        .await
                }
                Some(acceptor) => {
                    let stream = match tokio::time::timeout(
                        handshake_timeout,
                        acceptor.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake not done within the header read timeout");
                            return;
                        }
                    };
                    watcher
                        .watch(builder.serve_connection(TokioIo::new(stream), service))
                        .await
                }
            };
            if let Err(error) = served {
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
