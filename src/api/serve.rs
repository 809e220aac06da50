//! serve: the connections of a listening socket, each served by hyper's
//! HTTP/1.1 connection with the limits `axum::serve` cannot set, so that
//! connections which do nothing cannot crowd out those that do.
//!
//! - First byte: a plain connection must send its first byte within
//!   `first_byte_timeout`, and a TLS one finish its handshake within
//!   `tls_handshake_timeout` (5 s each by default), else it is closed.
//! - Header read timeout: a request head (and, as hyper starts that timer
//!   whenever it waits for a head, the silence between requests on a
//!   kept-alive connection) must arrive within it, else the connection is
//!   closed. It is the idle timeout too.
//! - Caps ([`ConnectionTable`]): at most `max_connections` open, and at
//!   most `max_connections_per_address` from one client address (an IPv6
//!   address counts by its /64; loopback is not capped, as every local
//!   client shares it). At a cap, one connection of that set that is not
//!   working makes room: of those idle (waiting for a first byte, a
//!   handshake or a next request) and those whose request body is still
//!   arriving, the one that has waited longest, where every byte of a
//!   body received counts as the time it takes at the minimum body rate
//!   ([`super::limits::MIN_BODY_BYTES_PER_SEC`]). An idle one closes at
//!   once; one still receiving a body is cut, and its request never
//!   reaches a handler. Only when every connection is working (its body
//!   received) is the new one closed instead. A working request is never
//!   cut.
//! - Graceful shutdown: once `shutdown` resolves, no connection is
//!   accepted, idle ones close, and those in a request finish it.
//! - TLS (optional, [`tls_config`]): rustls with the ring provider, no
//!   OpenSSL.
//!
//! HTTP/2 is not served: hyper's HTTP/2 server has no header read or idle
//! timeout, and the contract's clients speak HTTP/1.1. What it leaves to
//! others: body limits and the in-flight limit ([`super::limits`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_rustls::rustls;
use tower::ServiceExt as _;

use super::limits::MIN_BODY_BYTES_PER_SEC;

/// Knobs of the connection layer.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// A request head must arrive within this, and a kept-alive connection
    /// is closed after this long without one.
    pub header_read_timeout: Duration,
    /// A plain connection must send its first byte within this.
    pub first_byte_timeout: Duration,
    /// A TLS connection must finish its handshake within this.
    pub tls_handshake_timeout: Duration,
    /// Connections open at once; at it, the longest idle one is closed for
    /// a new one (the new one when none is idle).
    pub max_connections: usize,
    /// Connections open at once from one client address (0: no cap;
    /// loopback is never capped).
    pub max_connections_per_address: usize,
    /// The longest wait, at shutdown, for requests being handled.
    pub shutdown_grace: Duration,
    /// Serve HTTPS with this configuration ([`tls_config`]).
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Why the TLS certificate or key could not be used. Each message holds
/// its cause, which is therefore no `source` (printed once, not twice).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("cannot read the {what} file {path}: {detail}")]
    Read {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: String,
        /// What went wrong.
        detail: std::io::Error,
    },
    /// A PEM file is larger than any certificate chain or key.
    #[error("the {what} file {path} is not a PEM file: larger than {MAX_PEM_BYTES} bytes")]
    TooLarge {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: String,
    },
    /// A PEM file could not be parsed.
    #[error("cannot read the {what} from {path}: {detail}")]
    Pem {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: String,
        /// What went wrong.
        detail: rustls_pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{0} holds no certificate (PEM, -----BEGIN CERTIFICATE-----)")]
    NoCertificate(String),
    /// The key file holds an encrypted key only.
    #[error(
        "the private key in {0} is encrypted, which is not supported: give it decrypted (openssl pkey -in KEY -out DECRYPTED)"
    )]
    EncryptedKey(String),
    /// rustls refused the pair (a key not matching the certificate, say).
    #[error("the TLS certificate and key cannot be used: {0}")]
    Rustls(rustls::Error),
}

impl From<rustls::Error> for TlsError {
    fn from(error: rustls::Error) -> TlsError {
        TlsError::Rustls(error)
    }
}

/// The largest certificate or key file read: 1 MiB, far more than a
/// chain of certificates takes, and a bound for a file that is no PEM
/// at all (a device, say).
pub const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// The bytes of a PEM file, at most [`MAX_PEM_BYTES`].
fn read_pem_file(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::io::Read as _;
    let shown = || path.display().to_string();
    let read_error = |detail| TlsError::Read {
        what,
        path: shown(),
        detail,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(TlsError::TooLarge {
            what,
            path: shown(),
        });
    }
    Ok(bytes)
}

/// A TLS configuration from a PEM certificate chain and a PEM private key
/// (PKCS#8, PKCS#1 or SEC1), offering HTTP/1.1 by ALPN.
pub fn tls_config(certificate: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let pem_error = |what, path: &Path| {
        let path = path.display().to_string();
        move |detail| TlsError::Pem { what, path, detail }
    };
    let certificate_pem = read_pem_file("certificate", certificate)?;
    let chain = CertificateDer::pem_slice_iter(&certificate_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error("certificate", certificate))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(certificate.display().to_string()));
    }
    let key_pem = read_pem_file("private key", key)?;
    let key = match PrivateKeyDer::from_pem_slice(&key_pem) {
        Ok(key) => key,
        Err(rustls_pki_types::pem::Error::NoItemsFound)
            if memchr::memmem::find(&key_pem, b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
                .is_some() =>
        {
            return Err(TlsError::EncryptedKey(key.display().to_string()));
        }
        Err(detail) => return Err(pem_error("private key", key)(detail)),
    };
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
/// The default time a plain connection may take to send its first byte.
pub const DEFAULT_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(5);
/// The default time a TLS handshake may take.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// The default connection cap.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// The default cap of connections from one client address.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 128;

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            first_byte_timeout: DEFAULT_FIRST_BYTE_TIMEOUT,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            shutdown_grace: super::DEFAULT_REQUEST_TIMEOUT,
            tls: None,
        }
    }
}

/// What every connection's task shares.
struct Shared {
    builder: hyper::server::conn::http1::Builder,
    app: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    first_byte_timeout: Duration,
    tls_handshake_timeout: Duration,
    /// A std mutex: each use is a few map operations (a scan of the open
    /// connections at a cap), never held across an await.
    connections: Mutex<ConnectionTable>,
}

impl Shared {
    fn table(&self) -> std::sync::MutexGuard<'_, ConnectionTable> {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
    let shared = Arc::new(Shared {
        builder,
        app,
        tls: options.tls.clone().map(tokio_rustls::TlsAcceptor::from),
        first_byte_timeout: options.first_byte_timeout,
        tls_handshake_timeout: options.tls_handshake_timeout,
        connections: Mutex::new(ConnectionTable::new(
            options.max_connections.max(1),
            options.max_connections_per_address,
        )),
    });
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, most likely: close the longest
                    // idle connection and let it go.
                    tracing::warn!(%error, "accept failed");
                    if shared.table().close_longest_waiting(None) {
                        tracing::debug!("longest idle connection closed to free a descriptor");
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            () = &mut shutdown => break,
        };
        let admission = shared.table().admit(peer.ip(), Instant::now());
        let (id, close) = match admission {
            Admission::Admitted { id, close } => (id, close),
            Admission::Refused(why) => {
                tracing::debug!(%peer, why, "connection closed at once");
                drop(stream);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tasks.spawn(run_connection(Arc::clone(&shared), stream, peer, id, close));
    }
    drop(listener);
    shared.table().close_all();
    let drained = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(options.shutdown_grace, drained)
        .await
        .is_err()
    {
        tracing::warn!("requests still open at the end of the shutdown grace period");
    }
}

/// How the table asks a connection to close.
#[derive(Default)]
struct CloseSignal {
    notify: Notify,
    /// Close at once, cutting the request whose body is arriving; else
    /// after the request in progress.
    cut: std::sync::atomic::AtomicBool,
}

impl CloseSignal {
    fn ask(&self, cut: bool) {
        self.cut.store(cut, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_one();
    }

    fn is_cut(&self) -> bool {
        self.cut.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Removes its connection from the table when the connection's task ends,
/// however it ends.
struct OpenGuard {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.shared.table().remove(self.id);
    }
}

/// One connection: its first byte or TLS handshake, then HTTP/1.1 until it
/// closes or `close` is notified (closed when idle, finishing a request in
/// progress).
async fn run_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    close: Arc<CloseSignal>,
) {
    let _open = OpenGuard {
        shared: Arc::clone(&shared),
        id,
    };
    let service = TrackedApp {
        shared: Arc::clone(&shared),
        id,
    };
    match &shared.tls {
        None => {
            let mut first = [0u8; 1];
            let peeked = tokio::select! {
                peeked = tokio::time::timeout(shared.first_byte_timeout, stream.peek(&mut first)) => peeked,
                () = close.notify.notified() => {
                    tracing::debug!(%peer, "connection closed before its first byte: room for another");
                    return;
                }
            };
            match peeked {
                Ok(Ok(read)) if read > 0 => {}
                Ok(_) => return,
                Err(_) => {
                    tracing::debug!(%peer, "connection closed: no byte within the first-byte timeout");
                    return;
                }
            }
            serve_http(&shared, TokioIo::new(stream), service, peer, &close).await;
        }
        Some(acceptor) => {
            let handshake = tokio::select! {
                handshake = tokio::time::timeout(shared.tls_handshake_timeout, acceptor.accept(stream)) => handshake,
                () = close.notify.notified() => {
                    tracing::debug!(%peer, "connection closed during its TLS handshake: room for another");
                    return;
                }
            };
            let stream = match handshake {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "connection closed: TLS handshake not done within its timeout");
                    return;
                }
            };
            serve_http(&shared, TokioIo::new(stream), service, peer, &close).await;
        }
    }
}

/// HTTP/1.1 on `io` until the connection ends; once `close` is asked it
/// ends after the request in progress (at once when idle), or at once when
/// asked to cut.
async fn serve_http<I>(
    shared: &Shared,
    io: TokioIo<I>,
    service: TrackedApp,
    peer: SocketAddr,
    close: &CloseSignal,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = shared.builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut closing = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(error) = served {
                    log_connection_error(peer, &error);
                }
                return;
            }
            () = close.notify.notified(), if !closing => {
                if close.is_cut() {
                    tracing::debug!(%peer, "connection cut while its request body arrived: room for another");
                    return;
                }
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The application, counting the requests in progress on its connection
/// (from the request's start until its answer's body is sent or dropped).
struct TrackedApp {
    shared: Arc<Shared>,
    id: u64,
}

impl hyper::service::Service<hyper::Request<Incoming>> for TrackedApp {
    type Response = hyper::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let body_received = request.body().is_end_stream();
        let in_progress =
            RequestInProgress::start(Arc::clone(&self.shared), self.id, body_received);
        let request = request.map(|body| {
            Body::new(ArrivingBody {
                body,
                shared: Arc::clone(&self.shared),
                id: self.id,
                received: body_received,
            })
        });
        let answer = self.shared.app.clone().oneshot(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| {
                Body::new(TrackedBody {
                    body,
                    _in_progress: in_progress,
                })
            }))
        })
    }
}

/// A request counted in progress on its connection until dropped.
struct RequestInProgress {
    shared: Arc<Shared>,
    id: u64,
}

impl RequestInProgress {
    fn start(shared: Arc<Shared>, id: u64, body_received: bool) -> RequestInProgress {
        shared
            .table()
            .request_started(id, body_received, Instant::now());
        RequestInProgress { shared, id }
    }
}

impl Drop for RequestInProgress {
    fn drop(&mut self) {
        self.shared.table().request_ended(self.id, Instant::now());
    }
}

/// A request's body as it arrives, telling the table how much has come
/// and when it is whole. A body whose connection was cut to make room
/// ends in an error, never as whole, so its request reaches no handler
/// that would do work.
struct ArrivingBody {
    body: Incoming,
    shared: Arc<Shared>,
    id: u64,
    /// Whole (the table has been told).
    received: bool,
}

impl HttpBody for ArrivingBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = std::task::ready!(Pin::new(&mut self.body).poll_frame(context));
        match polled {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    self.shared.table().body_arrived(self.id, data.len());
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(error)) => Poll::Ready(Some(Err(axum::Error::new(error)))),
            None if self.received => Poll::Ready(None),
            None => {
                self.received = true;
                if self.shared.table().body_received(self.id) {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Err(axum::Error::new(
                        "the connection was closed to make room while its body arrived",
                    ))))
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.received && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// An answer's body, holding its request in progress until it is sent.
struct TrackedBody {
    body: Body,
    _in_progress: RequestInProgress,
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The open connections, for the caps: which to admit, and which to close
/// to make room.
struct ConnectionTable {
    max_connections: usize,
    /// 0: no cap.
    max_per_address: usize,
    next_id: u64,
    open: HashMap<u64, OpenConnection>,
    /// Open connections by counted address ([`counted_address`]), capped
    /// ones only.
    num_per_address: HashMap<IpAddr, usize>,
}

struct OpenConnection {
    /// The counted address, when the per-address cap applies to it.
    capped_address: Option<IpAddr>,
    num_requests_in_progress: usize,
    /// When the last request ended (or the connection opened).
    idle_since: Instant,
    /// The body of the request in progress, while it arrives.
    arriving: Option<Arriving>,
    close: Arc<CloseSignal>,
}

/// A request body on its way.
#[derive(Clone, Copy)]
struct Arriving {
    /// When its request started.
    since: Instant,
    /// Bytes received so far.
    num_bytes: u64,
}

impl OpenConnection {
    /// When a connection that is not working started waiting, for the
    /// choice of one to close: an idle one since it went idle, one with a
    /// body arriving since its request started plus the time its bytes
    /// take at the minimum body rate. None: working, never closed.
    fn waiting_since(&self) -> Option<Instant> {
        if let Some(arriving) = self.arriving {
            let earned =
                Duration::from_secs_f64(arriving.num_bytes as f64 / MIN_BODY_BYTES_PER_SEC as f64);
            return Some(arriving.since + earned.min(Duration::from_secs(86_400)));
        }
        (self.num_requests_in_progress == 0).then_some(self.idle_since)
    }
}

/// Whether a new connection is served.
enum Admission {
    /// Served: its id and the signal that asks it to close.
    Admitted { id: u64, close: Arc<CloseSignal> },
    /// Closed at once: every connection of the full set is working.
    Refused(&'static str),
}

impl ConnectionTable {
    fn new(max_connections: usize, max_per_address: usize) -> ConnectionTable {
        ConnectionTable {
            max_connections,
            max_per_address,
            next_id: 0,
            open: HashMap::new(),
            num_per_address: HashMap::new(),
        }
    }

    /// Admits a connection from `peer`, closing the one of a full set (its
    /// address's, then all) that has waited longest to make room.
    fn admit(&mut self, peer: IpAddr, now: Instant) -> Admission {
        let peer = peer.to_canonical();
        let capped_address =
            (self.max_per_address > 0 && !peer.is_loopback()).then(|| counted_address(peer));
        if let Some(address) = capped_address {
            let num_open = self.num_per_address.get(&address).copied().unwrap_or(0);
            if num_open >= self.max_per_address && !self.close_longest_waiting(Some(address)) {
                return Admission::Refused(
                    "at the per-address connection cap, every one of them working",
                );
            }
        }
        if self.open.len() >= self.max_connections && !self.close_longest_waiting(None) {
            return Admission::Refused("at the connection cap, every connection working");
        }
        let id = self.next_id;
        self.next_id += 1;
        let close = Arc::new(CloseSignal::default());
        if let Some(address) = capped_address {
            *self.num_per_address.entry(address).or_insert(0) += 1;
        }
        self.open.insert(
            id,
            OpenConnection {
                capped_address,
                num_requests_in_progress: 0,
                idle_since: now,
                arriving: None,
                close: Arc::clone(&close),
            },
        );
        Admission::Admitted { id, close }
    }

    /// Asks the connection that has waited longest
    /// ([`OpenConnection::waiting_since`]; of `address` only, when given)
    /// to close, cutting a body that is arriving, and stops counting it;
    /// false when every one is working.
    fn close_longest_waiting(&mut self, address: Option<IpAddr>) -> bool {
        let longest = self
            .open
            .iter()
            .filter(|(_, connection)| {
                address.is_none_or(|address| connection.capped_address == Some(address))
            })
            .filter_map(|(id, connection)| Some((connection.waiting_since()?, *id)))
            .min()
            .map(|(_, id)| id);
        match longest.and_then(|id| self.remove(id)) {
            Some(connection) => {
                connection.close.ask(connection.arriving.is_some());
                true
            }
            None => false,
        }
    }

    /// Asks every connection to close after its request (at shutdown).
    fn close_all(&mut self) {
        for connection in self.open.values() {
            connection.close.ask(false);
        }
    }

    /// Stops counting connection `id` (closed, or asked to close).
    fn remove(&mut self, id: u64) -> Option<OpenConnection> {
        let connection = self.open.remove(&id)?;
        if let Some(address) = connection.capped_address
            && let Some(num_open) = self.num_per_address.get_mut(&address)
        {
            *num_open -= 1;
            if *num_open == 0 {
                self.num_per_address.remove(&address);
            }
        }
        Some(connection)
    }

    fn request_started(&mut self, id: u64, body_received: bool, now: Instant) {
        if let Some(connection) = self.open.get_mut(&id) {
            connection.num_requests_in_progress += 1;
            connection.arriving = (!body_received).then_some(Arriving {
                since: now,
                num_bytes: 0,
            });
        }
    }

    fn body_arrived(&mut self, id: u64, num_bytes: usize) {
        if let Some(arriving) = self
            .open
            .get_mut(&id)
            .and_then(|connection| connection.arriving.as_mut())
        {
            arriving.num_bytes = arriving.num_bytes.saturating_add(num_bytes as u64);
        }
    }

    /// The body of connection `id`'s request is whole: it is working. False
    /// when the connection was closed to make room meanwhile.
    fn body_received(&mut self, id: u64) -> bool {
        match self.open.get_mut(&id) {
            Some(connection) => {
                connection.arriving = None;
                true
            }
            None => false,
        }
    }

    fn request_ended(&mut self, id: u64, now: Instant) {
        if let Some(connection) = self.open.get_mut(&id) {
            connection.arriving = None;
            connection.num_requests_in_progress =
                connection.num_requests_in_progress.saturating_sub(1);
            if connection.num_requests_in_progress == 0 {
                connection.idle_since = now;
            }
        }
    }
}

/// The address a connection counts under for the per-address cap: IPv4 as
/// is, IPv6 by its /64 (one site's addresses, which a client may pick from
/// at will).
fn counted_address(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => {
            let segments = v6.segments();
            IpAddr::V6(Ipv6Addr::new(
                segments[0],
                segments[1],
                segments[2],
                segments[3],
                0,
                0,
                0,
                0,
            ))
        }
    }
}

fn log_connection_error(peer: SocketAddr, error: &hyper::Error) {
    if error.is_timeout() {
        tracing::debug!(%peer, "connection closed: no request head within the header read timeout");
    } else {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cosmetic findings of issue 29: TLS errors printed their cause
    /// twice, an encrypted key said "no items found", and `--tls-cert
    /// /dev/zero` read until memory ran out.
    #[test]
    fn tls_files_are_read_within_bounds_and_their_errors_said_once() {
        let dir = tempfile::tempdir().expect("dir");
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(&cert, certified.cert.pem()).expect("cert");
        std::fs::write(&key, certified.signing_key.serialize_pem()).expect("key");
        assert!(tls_config(&cert, &key).is_ok());
        let shown = |error: TlsError| format!("{:#}", anyhow::Error::from(error));
        let error = shown(tls_config(Path::new("/dev/zero"), &key).expect_err("a device"));
        assert!(error.contains("larger than 1048576 bytes"), "{error}");
        let encrypted = dir.path().join("encrypted.pem");
        std::fs::write(
            &encrypted,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkq\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .expect("key");
        let error = shown(tls_config(&cert, &encrypted).expect_err("encrypted"));
        assert!(error.contains("is encrypted"), "{error}");
        let missing = dir.path().join("missing.pem");
        let error = shown(tls_config(&missing, &key).expect_err("missing"));
        assert_eq!(error.matches("No such file").count(), 1, "{error}");
        let error = shown(tls_config(&key, &key).expect_err("a key as certificate"));
        assert!(error.contains("holds no certificate"), "{error}");
        let other = rcgen::generate_simple_self_signed(vec!["other".to_string()]).expect("other");
        let other_key = dir.path().join("other-key.pem");
        std::fs::write(&other_key, other.signing_key.serialize_pem()).expect("key");
        let error = shown(tls_config(&cert, &other_key).expect_err("a key of another"));
        let cause_starts = error.find("cannot be used: ").expect("reason") + 16;
        let cause = &error[cause_starts..];
        assert_eq!(error.matches(cause).count(), 1, "{error}");
    }

    fn admitted(table: &mut ConnectionTable, peer: &str, now: Instant) -> (u64, Arc<CloseSignal>) {
        match table.admit(peer.parse().expect("address"), now) {
            Admission::Admitted { id, close } => (id, close),
            Admission::Refused(why) => panic!("{peer} refused: {why}"),
        }
    }

    /// Whether `close` was asked (a notified permit is waiting).
    fn asked_to_close(close: &CloseSignal) -> bool {
        use std::future::Future as _;
        let notified = close.notify.notified();
        tokio::pin!(notified);
        let waker = std::task::Waker::noop();
        notified
            .as_mut()
            .poll(&mut Context::from_waker(waker))
            .is_ready()
    }

    #[test]
    fn at_the_cap_the_longest_idle_connection_makes_room() {
        let start = Instant::now();
        let mut table = ConnectionTable::new(3, 0);
        let at = |millis| start + Duration::from_millis(millis);
        let (first, first_close) = admitted(&mut table, "127.0.0.1", at(0));
        let (second, second_close) = admitted(&mut table, "127.0.0.1", at(1));
        let (_, third_close) = admitted(&mut table, "127.0.0.1", at(2));
        // The first is in a request, the second went idle after one.
        table.request_started(first, true, at(3));
        table.request_started(second, true, at(3));
        table.request_ended(second, at(5));
        admitted(&mut table, "127.0.0.1", at(6));
        assert!(asked_to_close(&third_close), "idle since 2 ms: the longest");
        assert!(!asked_to_close(&first_close) && !asked_to_close(&second_close));
        assert_eq!(table.open.len(), 3);
        admitted(&mut table, "127.0.0.1", at(7));
        assert!(asked_to_close(&second_close));
        assert!(
            !asked_to_close(&first_close),
            "a request in progress is never cut"
        );
    }

    /// Issue 38 M4: 1,100 connections that sent a head and trickled their
    /// bodies were all "in a request", so at the cap every new connection
    /// was closed: nobody else was served, `/health` included.
    #[test]
    fn at_the_cap_a_trickling_body_is_cut_before_a_fresh_or_working_connection() {
        let start = Instant::now();
        let at = |millis| start + Duration::from_millis(millis);
        let mut table = ConnectionTable::new(3, 0);
        let (trickling, trickling_close) = admitted(&mut table, "127.0.0.1", at(0));
        table.request_started(trickling, false, at(0));
        table.body_arrived(trickling, 10);
        let (uploading, uploading_close) = admitted(&mut table, "127.0.0.1", at(1));
        table.request_started(uploading, false, at(1));
        // A megabyte at the minimum rate earns minutes: an older trickle
        // goes first.
        table.body_arrived(uploading, 1024 * 1024);
        let (working, working_close) = admitted(&mut table, "127.0.0.1", at(2));
        table.request_started(working, false, at(2));
        table.body_arrived(working, 100);
        assert!(table.body_received(working));
        let (fresh, fresh_close) = admitted(&mut table, "127.0.0.1", at(5_000));
        assert!(asked_to_close(&trickling_close) && trickling_close.is_cut());
        assert!(
            !table.body_received(trickling),
            "a cut body never reaches a handler as whole"
        );
        // The fresh connection has waited less than the upload has earned.
        admitted(&mut table, "127.0.0.1", at(5_001));
        assert!(asked_to_close(&fresh_close) && !fresh_close.is_cut());
        assert!(!asked_to_close(&uploading_close) && !asked_to_close(&working_close));
        assert!(table.open.contains_key(&uploading) && !table.open.contains_key(&fresh));
    }

    #[test]
    fn at_the_cap_with_every_connection_in_a_request_the_new_one_is_refused() {
        let now = Instant::now();
        let mut table = ConnectionTable::new(2, 0);
        for _ in 0..2 {
            let (id, _) = admitted(&mut table, "10.0.0.1", now);
            table.request_started(id, true, now);
        }
        assert!(matches!(
            table.admit("10.0.0.2".parse().expect("address"), now),
            Admission::Refused(_)
        ));
    }

    #[test]
    fn one_address_is_capped_by_itself_and_loopback_is_not() {
        let now = Instant::now();
        let mut table = ConnectionTable::new(100, 2);
        let (busy, _) = admitted(&mut table, "192.0.2.7", now);
        table.request_started(busy, true, now);
        let (_, idle_close) = admitted(&mut table, "192.0.2.7", now);
        let (_, other_close) = admitted(&mut table, "192.0.2.8", now);
        // A third from the same address closes that address's idle one.
        let (third, _) = admitted(&mut table, "192.0.2.7", now);
        assert!(asked_to_close(&idle_close) && !asked_to_close(&other_close));
        table.request_started(third, true, now);
        assert!(matches!(
            table.admit("192.0.2.7".parse().expect("address"), now),
            Admission::Refused(_)
        ));
        // IPv6 counts by /64; an IPv4-mapped address as its IPv4 one.
        admitted(&mut table, "2001:db8::1", now);
        admitted(&mut table, "2001:db8::2", now);
        let (_, v6_close) = admitted(&mut table, "2001:db8::3", now);
        assert_eq!(table.num_per_address.len(), 3);
        assert!(!asked_to_close(&v6_close));
        assert!(matches!(
            table.admit("::ffff:192.0.2.7".parse().expect("address"), now),
            Admission::Refused(_)
        ));
        for _ in 0..10 {
            admitted(&mut table, "127.0.0.1", now);
        }
        assert!(
            !table
                .num_per_address
                .contains_key(&"127.0.0.1".parse().expect("address"))
        );
        table.remove(busy);
        table.remove(third);
        assert!(
            !table
                .num_per_address
                .contains_key(&"192.0.2.7".parse().expect("address"))
        );
    }
}
