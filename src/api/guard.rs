//! guard: which requests a browser may have sent on someone else's behalf,
//! and which are refused before any route sees them.
//!
//! - **Host** (DNS rebinding): a page on `attacker.example` whose name is
//!   re-pointed at 127.0.0.1 talks to this server as same-origin, but its
//!   requests carry `Host: attacker.example`. Only the listen address
//!   (loopback names and IPs, with the port) and configured names
//!   ([`AllowedHosts`]) are served; anything else is 421.
//! - **Origin** (CSRF): unsafe methods from another origin are refused with
//!   403 by `tower_http::csrf` (the `Sec-Fetch-Site` / `Origin` scheme), so
//!   a page elsewhere cannot write memory or delete a user.
//! - **Content-Type**: the JSON routes take `application/json` only (415
//!   otherwise), so no HTML form can post to them, and a cross-origin
//!   `fetch` has to ask first (a CORS preflight, answered only for the
//!   configured trusted origins).
//!
//! What it leaves to others: keys are checked in [`super::auth`], bodies
//! read in [`super::limits`].

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The `Host` values served: the listen address and configured names.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    /// The address the server listens on; `None` (an app not bound to a
    /// socket, as in tests) accepts loopback names and IPs on any port.
    listen: Option<SocketAddr>,
    /// Configured names (`--allowed-host`), lowercase, each with the port
    /// it requires (none: any port).
    names: Vec<(String, Option<u16>)>,
    /// `*` was configured: any Host is served.
    any: bool,
}

impl AllowedHosts {
    /// The hosts served by a server listening on `listen`, plus `names`
    /// (`*` accepts any Host).
    pub fn new<I, S>(listen: Option<SocketAddr>, names: I) -> AllowedHosts
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut allowed = AllowedHosts {
            listen,
            ..AllowedHosts::default()
        };
        for name in names {
            let name = name.as_ref().trim();
            if name == "*" {
                allowed.any = true;
            } else if let Some(parsed) = split_host(name) {
                allowed.names.push(parsed);
            }
        }
        allowed
    }

    /// Whether a request naming `host` (a `Host` header value or the
    /// request-target's authority) is served.
    pub fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        if self.names.iter().any(|(allowed, allowed_port)| {
            *allowed == name && allowed_port.is_none_or(|allowed_port| port == Some(allowed_port))
        }) {
            return true;
        }
        let port_matches = match (self.listen, port) {
            (None, _) => true,
            (Some(listen), Some(port)) => listen.port() == port,
            // No port: the scheme's default, which a listen port of 80 or
            // 443 is.
            (Some(listen), None) => matches!(listen.port(), 80 | 443),
        };
        if !port_matches {
            return false;
        }
        if name == "localhost" {
            return self
                .listen
                .is_none_or(|listen| listen.ip().is_loopback() || listen.ip().is_unspecified());
        }
        let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        else {
            return false;
        };
        // An address literal cannot be re-pointed by DNS, so any address of
        // this machine is safe to serve; which ones those are is known only
        // for a specific listen address.
        match self.listen {
            None => ip.is_loopback(),
            Some(listen) if listen.ip().is_unspecified() => true,
            Some(listen) => ip == listen.ip() || (ip.is_loopback() && listen.ip().is_loopback()),
        }
    }
}

/// Splits `host[:port]` (`[v6]:port` for IPv6) into a lowercase name and
/// its port; `None` when it is not of that shape.
fn split_host(host: &str) -> Option<(String, Option<u16>)> {
    let host = host.trim();
    if host.is_empty() {
        return None;
    }
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?.parse().ok()?),
        };
        (format!("[{inside}]"), port)
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name.to_string(), Some(port.parse().ok()?)),
            None => (host.to_string(), None),
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-._[]:".contains(&byte));
    valid.then_some((name, port))
}

/// The authority a request names: its target's (HTTP/2, absolute form),
/// else its `Host` header. `Err` for several `Host` headers.
fn requested_host(request: &Request) -> Result<Option<String>, ()> {
    if let Some(authority) = request.uri().authority() {
        return Ok(Some(authority.as_str().to_string()));
    }
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err(());
    }
    Ok(first.map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()))
}

/// Middleware: 421 unless the request names a served host. A request with
/// no Host at all (HTTP/1.0) comes from no browser and is served.
pub async fn check_host(
    State(allowed): State<std::sync::Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Response {
    match requested_host(&request) {
        Ok(None) => next.run(request).await,
        Ok(Some(host)) if allowed.allows(&host) => next.run(request).await,
        Ok(Some(host)) => {
            let shown: String = host.chars().take(100).collect();
            ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "Host {shown:?} is not served here: use the listen address, or start the server with --allowed-host NAME (a guard against DNS rebinding)"
                ),
            )
            .into_response()
        }
        Err(()) => {
            ApiError::new(StatusCode::BAD_REQUEST, "more than one Host header").into_response()
        }
    }
}

/// The answer to a request refused by the CSRF layer.
pub fn cross_origin_refused(_error: tower_http::csrf::ProtectionError) -> Response {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "cross-origin request refused: a browser page from another origin may not change this service (start the server with --allowed-origin ORIGIN to trust one)",
    )
    .into_response()
}

/// Whether the headers declare a JSON body (`application/json`, any
/// parameters).
fn declares_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Middleware of the routes that do work: a POST (the JSON routes) is 415
/// unless its body is declared `application/json`.
pub async fn require_json(request: Request, next: Next) -> Response {
    if request.method() != axum::http::Method::POST || declares_json(request.headers()) {
        next.run(request).await
    } else {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be sent as Content-Type: application/json",
        )
        .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(listen: Option<&str>, names: &[&str], host: &str) -> bool {
        let listen = listen.map(|listen| listen.parse().expect("address"));
        AllowedHosts::new(listen, names.iter()).allows(host)
    }

    #[test]
    fn the_listen_address_and_loopback_names_are_served() {
        let cases = [
            (Some("127.0.0.1:8080"), &[][..], "127.0.0.1:8080", true),
            (Some("127.0.0.1:8080"), &[], "localhost:8080", true),
            (Some("127.0.0.1:8080"), &[], "LOCALHOST:8080", true),
            (Some("127.0.0.1:8080"), &[], "[::1]:8080", true),
            (Some("127.0.0.1:8080"), &[], "127.0.0.1:8081", false),
            (Some("127.0.0.1:8080"), &[], "127.0.0.1", false),
            (Some("127.0.0.1:8080"), &[], "attacker.example:8080", false),
            (Some("127.0.0.1:8080"), &[], "attacker.example", false),
            (
                Some("127.0.0.1:8080"),
                &[],
                "localhost.attacker.example:8080",
                false,
            ),
            (Some("127.0.0.1:8080"), &[], "10.0.0.1:8080", false),
            (Some("0.0.0.0:8080"), &[], "10.0.0.1:8080", true),
            (Some("0.0.0.0:8080"), &[], "attacker.example:8080", false),
            (
                Some("127.0.0.1:8080"),
                &["mem.example.com"],
                "mem.example.com",
                true,
            ),
            (
                Some("127.0.0.1:8080"),
                &["mem.example.com"],
                "MEM.example.com:443",
                true,
            ),
            (
                Some("127.0.0.1:8080"),
                &["mem.example.com:8443"],
                "mem.example.com:8443",
                true,
            ),
            (
                Some("127.0.0.1:8080"),
                &["mem.example.com:8443"],
                "mem.example.com:9000",
                false,
            ),
            (Some("127.0.0.1:8080"), &["*"], "anything.example", true),
            (None, &[], "127.0.0.1:1234", true),
            (None, &[], "localhost", true),
            (None, &[], "attacker.example", false),
            (Some("127.0.0.1:8080"), &[], "", false),
            (Some("127.0.0.1:8080"), &[], "a b:8080", false),
        ];
        for (listen, names, host, expected) in cases {
            assert_eq!(
                check(listen, names, host),
                expected,
                "{listen:?} {names:?} {host:?}"
            );
        }
    }

    #[test]
    fn json_is_recognised_with_parameters_only() {
        let mut headers = HeaderMap::new();
        assert!(!declares_json(&headers));
        for (value, expected) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
            ("multipart/form-data; boundary=x", false),
            ("application/jsonp", false),
        ] {
            headers.insert(header::CONTENT_TYPE, value.parse().expect("value"));
            assert_eq!(declares_json(&headers), expected, "{value}");
        }
    }
}
