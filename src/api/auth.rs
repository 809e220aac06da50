//! API keys: `Authorization: Bearer <key>`, `Authorization: Token <key>` or
//! `X-Api-Key: <key>`. Keys are kept and compared as SHA-256 digests, in
//! constant time, so neither the key nor its length shows in timing; a key
//! is never logged or echoed.
//!
//! A key may be scoped ([`Scope`], from `--keys-file`): to some user ids
//! or id prefixes, and to reading `GET /v1/users` or not. The middleware
//! hands the matched key's scope to the handlers in the request's
//! extensions; a handler checks each user id it touches ([`authorize`]).
//! Keys of `--api-key` and `--api-key-file` reach every user.
//!
//! The keys file: one key a line, `#` comments and blank lines skipped:
//!
//! ```text
//! # digest (sha256 of the key, hex)                               users          users list
//! 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 team-a/*,bob  list-users
//! 60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752 *
//! ```
//!
//! The second field lists user ids, comma-separated: an exact id, a
//! prefix ending in `*` (`team-a/*` is every id starting `team-a/`), or
//! `*` for all. `list-users` lets the key read `GET /v1/users`, which then
//! lists only the users in its scope.

use std::path::Path;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::error::ApiError;

/// What one key may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// Exact ids and prefixes (`prefix*`); `None`: every user.
    users: Option<Vec<UserPattern>>,
    /// Whether `GET /v1/users` may be read.
    list_users: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum UserPattern {
    Exact(String),
    Prefix(String),
}

impl Scope {
    /// Every user, and the users list.
    pub fn everything() -> Scope {
        Scope {
            users: None,
            list_users: true,
        }
    }

    /// Whether this scope may read or write `user_id`.
    pub fn allows_user(&self, user_id: &str) -> bool {
        self.users.as_ref().is_none_or(|patterns| {
            patterns.iter().any(|pattern| match pattern {
                UserPattern::Exact(id) => id == user_id,
                UserPattern::Prefix(prefix) => user_id.starts_with(prefix.as_str()),
            })
        })
    }

    /// Whether this scope may read `GET /v1/users`.
    pub fn allows_user_list(&self) -> bool {
        self.list_users
    }

    /// Parses `users [list-users]` of a keys-file line.
    fn parse(fields: &[&str]) -> Result<Scope, String> {
        let (users, rest) = fields
            .split_first()
            .ok_or_else(|| "no users given (a list of ids, prefix*, or *)".to_string())?;
        let list_users = match rest {
            [] => false,
            ["list-users"] => true,
            _ => {
                return Err(format!(
                    "unknown fields {rest:?} (only list-users may follow the users)"
                ));
            }
        };
        let mut patterns = Vec::new();
        for pattern in users
            .split(',')
            .map(str::trim)
            .filter(|pattern| !pattern.is_empty())
        {
            if pattern == "*" {
                return Ok(Scope {
                    users: None,
                    list_users,
                });
            }
            patterns.push(match pattern.strip_suffix('*') {
                Some(prefix) => UserPattern::Prefix(prefix.to_string()),
                None => UserPattern::Exact(pattern.to_string()),
            });
        }
        if patterns.is_empty() {
            return Err("no users given (a list of ids, prefix*, or *)".to_string());
        }
        Ok(Scope {
            users: Some(patterns),
            list_users,
        })
    }
}

/// 403 unless the request's key (if any) may use `user_id`.
pub fn authorize(scope: Option<&Scope>, user_id: &str) -> Result<(), ApiError> {
    match scope {
        Some(scope) if !scope.allows_user(user_id) => Err(ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            "this API key may not use this user_id (outside the key's scope)",
        )),
        _ => Ok(()),
    }
}

/// The accepted keys; empty means the service runs without authentication.
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Vec<([u8; 32], std::sync::Arc<Scope>)>,
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
    /// A line of a keys file is not `digest users [list-users]`.
    #[error("keys file {path} line {line}: {reason}")]
    BadLine {
        /// The file.
        path: String,
        /// The line number, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
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
            .map(|key| {
                (
                    digest(key.as_ref().trim().as_bytes()),
                    std::sync::Arc::new(Scope::everything()),
                )
            })
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
        self.digests.extend(keys.iter().map(|key| {
            (
                digest(key.as_bytes()),
                std::sync::Arc::new(Scope::everything()),
            )
        }));
        Ok(())
    }

    /// Adds the scoped keys of a keys file (the format is in the module
    /// documentation).
    pub fn add_keys_file(&mut self, path: &Path) -> Result<(), KeyFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| KeyFileError::Read {
            path: shown.clone(),
            source,
        })?;
        let mut added = 0;
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: String| KeyFileError::BadLine {
                path: shown.clone(),
                line: index + 1,
                reason,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (hex, rest) = fields
                .split_first()
                .ok_or_else(|| bad("empty".to_string()))?;
            let digest = parse_digest(hex).ok_or_else(|| {
                bad("the first field must be a key's SHA-256 digest, 64 hex digits".to_string())
            })?;
            let scope = Scope::parse(rest).map_err(bad)?;
            self.digests.push((digest, std::sync::Arc::new(scope)));
            added += 1;
        }
        if added == 0 {
            return Err(KeyFileError::Empty(shown));
        }
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
        !self.is_enabled() || self.scope_of(headers).is_some()
    }

    /// The scope of the accepted key the headers carry, if any.
    pub fn scope_of(&self, headers: &HeaderMap) -> Option<std::sync::Arc<Scope>> {
        presented_keys(headers).find_map(|key| {
            let presented = digest(key.as_bytes());
            // Every configured key is compared, whatever matched before.
            self.digests.iter().fold(None, |found, (accepted, scope)| {
                if constant_time_eq(accepted, &presented) {
                    Some(std::sync::Arc::clone(scope))
                } else {
                    found
                }
            })
        })
    }
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut digest = [0u8; 32];
    for (index, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[index * 2..index * 2 + 2], 16).ok()?;
    }
    Some(digest)
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

/// Middleware: 401 unless the request carries an accepted key; the key's
/// [`Scope`] goes into the request's extensions.
pub async fn require_key(
    State(keys): State<std::sync::Arc<ApiKeys>>,
    mut request: Request,
    next: Next,
) -> Response {
    if !keys.is_enabled() {
        return next.run(request).await;
    }
    match keys.scope_of(request.headers()) {
        Some(scope) => {
            request.extensions_mut().insert(scope);
            next.run(request).await
        }
        None => ApiError::unauthorized().into_response(),
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
    fn a_keys_file_scopes_each_key() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("keys");
        let hex = |key: &str| {
            digest(key.as_bytes())
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect::<String>()
        };
        std::fs::write(
            &path,
            format!(
                "# team keys\n\n{} team-a/*,bob list-users\n  {} *\n",
                hex("ka"),
                hex("kall")
            ),
        )
        .expect("write");
        let mut keys = ApiKeys::none();
        keys.add_keys_file(&path).expect("valid file");
        let scope = keys
            .scope_of(&headers("x-api-key", "ka"))
            .expect("accepted");
        assert!(scope.allows_user("team-a/x") && scope.allows_user("bob"));
        assert!(!scope.allows_user("team-b/x") && !scope.allows_user("bobby"));
        assert!(scope.allows_user_list());
        let all = keys
            .scope_of(&headers("x-api-key", "kall"))
            .expect("accepted");
        assert!(all.allows_user("anyone") && !all.allows_user_list());
        assert!(keys.scope_of(&headers("x-api-key", "other")).is_none());
        for bad in [
            "zz users",
            "abcd users",
            &format!("{} ", hex("k")),
            &format!("{} u extra", hex("k")),
        ] {
            std::fs::write(&path, bad).expect("write");
            let error = ApiKeys::none()
                .add_keys_file(&path)
                .expect_err(bad)
                .to_string();
            assert!(error.contains("line 1"), "{error}");
        }
    }

    #[test]
    fn no_keys_means_open() {
        assert!(ApiKeys::none().allows(&HeaderMap::new()));
        assert!(!ApiKeys::new(["  "]).is_enabled());
    }
}
