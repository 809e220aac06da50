//! API keys: `Authorization: Bearer <key>`, `Authorization: Token <key>` or
//! `X-Api-Key: <key>`. Keys are kept and compared as SHA-256 digests, in
//! constant time, so neither the key nor its length shows in timing; a key
//! is never logged or echoed.

use std::path::Path;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::error::ApiError;

/// The accepted keys; empty means the service runs without authentication.
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "ApiKeys({} configured)", self.digests.len())
    }
}

/// Why a key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// It could not be read.
    #[error("cannot read API key file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// It holds no key.
    #[error(
        "API key file {0} holds no key (one key a line; blank lines and # comments are skipped)"
    )]
    Empty(String),
}

impl ApiKeys {
    /// No authentication.
    pub fn none() -> ApiKeys {
        ApiKeys::default()
    }

    /// These keys; blank ones are skipped.
    pub fn new<I, S>(keys: I) -> ApiKeys
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let digests = keys
            .into_iter()
            .filter(|key| !key.as_ref().trim().is_empty())
            .map(|key| digest(key.as_ref().trim().as_bytes()))
            .collect();
        ApiKeys { digests }
    }

    /// Adds the keys of a file: one a line, blank lines and lines starting
    /// with `#` skipped.
    pub fn add_file(&mut self, path: &Path) -> Result<(), KeyFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeyFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let keys: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect();
        if keys.is_empty() {
            return Err(KeyFileError::Empty(path.display().to_string()));
        }
        self.digests
            .extend(keys.iter().map(|key| digest(key.as_bytes())));
        Ok(())
    }

    /// Whether any key is configured.
    pub fn is_enabled(&self) -> bool {
        !self.digests.is_empty()
    }

    /// How many keys are configured.
    pub fn num_keys(&self) -> usize {
        self.digests.len()
    }

    /// Whether the request's headers carry an accepted key (always true
    /// when no key is configured).
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        if !self.is_enabled() {
            return true;
        }
        presented_keys(headers).any(|key| {
            let presented = digest(key.as_bytes());
            // Every configured key is compared, whatever matched before.
            self.digests.iter().fold(false, |found, accepted| {
                found | constant_time_eq(accepted, &presented)
            })
        })
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn constant_time_eq(left: &[u8; 32], right: &[u8; 32]) -> bool {
    let difference = left
        .iter()
        .zip(right.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(difference) == 0
}

fn presented_keys(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    let from_authorization = headers
        .get_all(axum::http::header::AUTHORIZATION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| {
            let (scheme, key) = value.trim().split_once(' ')?;
            let scheme_ok =
                scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token");
            scheme_ok.then(|| key.trim())
        });
    let from_api_key = headers
        .get_all("x-api-key")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .map(str::trim);
    from_authorization
        .chain(from_api_key)
        .filter(|key| !key.is_empty())
}

/// Middleware: 401 unless the request carries an accepted key.
pub async fn require_key(
    State(keys): State<std::sync::Arc<ApiKeys>>,
    request: Request,
    next: Next,
) -> Response {
    if keys.allows(request.headers()) {
        next.run(request).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(name, HeaderValue::from_str(value).expect("header value"));
        map
    }

    #[test]
    fn accepts_all_three_schemes_and_rejects_others() {
        let keys = ApiKeys::new(["k1", "k2"]);
        assert!(keys.allows(&headers("authorization", "Bearer k1")));
        assert!(keys.allows(&headers("authorization", "token k2")));
        assert!(keys.allows(&headers("x-api-key", "k1")));
        assert!(!keys.allows(&headers("authorization", "Basic k1")));
        assert!(!keys.allows(&headers("authorization", "Bearer k3")));
        assert!(!keys.allows(&headers("authorization", "Bearer")));
        assert!(!keys.allows(&HeaderMap::new()));
    }

    #[test]
    fn no_keys_means_open() {
        assert!(ApiKeys::none().allows(&HeaderMap::new()));
        assert!(!ApiKeys::new(["  "]).is_enabled());
    }
}
