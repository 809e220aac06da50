//! API keys: `Authorization: Bearer <key>`, `Authorization: Token <key>` or
//! `X-Api-Key: <key>`. Keys are kept and compared as SHA-256 digests, in
//! constant time, so neither the key nor its length shows in timing; a key
//! is never logged or echoed.
//!
//! A key may be scoped ([`Scope`], from `--keys-file`): to some user ids
//! or id prefixes, to reading `GET /v1/users` or not, and to reading
//! `/metrics` or not. The middleware hands the matched key's scope to the
//! handlers in the request's extensions; a handler checks each user id it
//! touches ([`authorize`]). Keys of `--api-key` and `--api-key-file` reach
//! every user and hold every right.
//!
//! The keys file: one key a line, `#` comments and blank lines skipped:
//!
//! ```text
//! # digest (sha256 of the key, hex)                               users          rights
//! 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 team-a/*,bob  list-users
//! 60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752 *
//! 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae -             metrics
//! ```
//!
//! The second field lists user ids, comma-separated: an exact id, a
//! prefix ending in `*` (`team-a/*` is every id starting `team-a/`), `*`
//! for all, or `-` for none. The rights follow, each at most once:
//! `list-users` lets the key read `GET /v1/users`, which then lists only
//! the users in its scope; `metrics` lets it read `/metrics`, which needs
//! a key with that right whenever keys are configured. A right's name in
//! the users field, and a digest given twice, are errors naming the line:
//! either would otherwise grant something other than what was meant.
//!
//! With a rate ([`KeyRateLimit`], `--key-rate-limit`), each key may make
//! that many requests a second on the routes that take a key (a burst of
//! one second's worth); past it, 429 with `Retry-After`.

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
    /// Whether `/metrics` may be read.
    metrics: bool,
}

/// The rights a keys-file line may grant after its users, which are
/// therefore not accepted as user ids there.
const RIGHTS: [&str; 2] = ["list-users", "metrics"];

#[derive(Debug, Clone, PartialEq, Eq)]
enum UserPattern {
    Exact(String),
    Prefix(String),
}

impl Scope {
    /// Every user, the users list and the metrics.
    pub fn everything() -> Scope {
        Scope {
            users: None,
            list_users: true,
            metrics: true,
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

    /// Whether this scope may read `/metrics`.
    pub fn allows_metrics(&self) -> bool {
        self.metrics
    }

    /// Parses `users [rights]` of a keys-file line.
    fn parse(fields: &[&str]) -> Result<Scope, String> {
        let no_users = "no users given (a list of ids, prefix*, * for all, or - for none)";
        let (users, rights) = fields.split_first().ok_or_else(|| no_users.to_string())?;
        let mut scope = Scope {
            users: Some(Vec::new()),
            list_users: false,
            metrics: false,
        };
        for right in rights {
            let granted = match *right {
                "list-users" => &mut scope.list_users,
                "metrics" => &mut scope.metrics,
                _ => {
                    return Err(format!(
                        "unknown right {right:?} (only list-users and metrics may follow the users)"
                    ));
                }
            };
            if std::mem::replace(granted, true) {
                return Err(format!("the right {right} is given twice"));
            }
        }
        if *users == "-" {
            return Ok(scope);
        }
        let mut patterns = Vec::new();
        let mut everyone = false;
        for pattern in users
            .split(',')
            .map(str::trim)
            .filter(|pattern| !pattern.is_empty())
        {
            if RIGHTS.contains(&pattern) {
                return Err(format!(
                    "{pattern:?} is a right, not a user: give the users first (ids, prefix*, * for all, or - for none), then the rights, as in `<digest> - {pattern}`"
                ));
            }
            if pattern == "*" {
                everyone = true;
                continue;
            }
            patterns.push(match pattern.strip_suffix('*') {
                Some(prefix) => UserPattern::Prefix(prefix.to_string()),
                None => UserPattern::Exact(pattern.to_string()),
            });
        }
        if everyone {
            scope.users = None;
        } else if patterns.is_empty() {
            return Err(no_users.to_string());
        } else {
            scope.users = Some(patterns);
        }
        Ok(scope)
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
    /// The per-key request rate, when one is set.
    rate: Option<std::sync::Arc<KeyRateLimit>>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "ApiKeys({} configured)", self.digests.len())
    }
}

/// Requests a second each key may make: a token bucket per key, holding
/// one second's worth.
#[derive(Debug)]
pub struct KeyRateLimit {
    per_second: f64,
    /// Per key (by its place among the configured keys): the tokens left
    /// and when they were counted. A std mutex: held for a few arithmetic
    /// operations, never across an await.
    buckets: std::sync::Mutex<std::collections::HashMap<usize, (f64, std::time::Instant)>>,
}

impl KeyRateLimit {
    /// `per_second` requests a second for each key (at least one).
    pub fn new(per_second: u32) -> KeyRateLimit {
        KeyRateLimit {
            per_second: f64::from(per_second.max(1)),
            buckets: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Takes one request of key `key`; `Err` holds the seconds until the
    /// next one is allowed.
    fn take(&self, key: usize, now: std::time::Instant) -> Result<(), f64> {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (tokens, counted) = buckets.entry(key).or_insert((self.per_second, now));
        let refilled = now.saturating_duration_since(*counted).as_secs_f64() * self.per_second;
        *tokens = (*tokens + refilled).min(self.per_second);
        *counted = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            Err((1.0 - *tokens) / self.per_second)
        }
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
    /// A line of a keys file is not `digest users [rights]`, or repeats a
    /// digest.
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
        ApiKeys {
            digests,
            rate: None,
        }
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
        let mut lines_of_digests = std::collections::HashMap::new();
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
            if let Some(first) = lines_of_digests.insert(digest, index + 1) {
                return Err(bad(format!(
                    "the same digest as line {first}: one key, one line (which scope was meant?)"
                )));
            }
            if self.digests.iter().any(|(known, _)| *known == digest) {
                return Err(bad(
                    "the digest of a key given by --api-key or --api-key-file too: one key, one scope"
                        .to_string(),
                ));
            }
            self.digests.push((digest, std::sync::Arc::new(scope)));
            added += 1;
        }
        if added == 0 {
            return Err(KeyFileError::Empty(shown));
        }
        Ok(())
    }

    /// Limits each key to `rate` requests a second on the routes that
    /// take a key ([`require_key`]).
    pub fn limit_rate(&mut self, rate: KeyRateLimit) {
        self.rate = Some(std::sync::Arc::new(rate));
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
        self.matched_key(headers)
            .map(|index| std::sync::Arc::clone(&self.digests[index].1))
    }

    /// The place among the configured keys of the accepted key the headers
    /// carry, if any.
    fn matched_key(&self, headers: &HeaderMap) -> Option<usize> {
        presented_keys(headers).find_map(|key| {
            let presented = digest(key.as_bytes());
            // Every configured key is compared, whatever matched before.
            self.digests
                .iter()
                .enumerate()
                .fold(None, |found, (index, (accepted, _))| {
                    if constant_time_eq(accepted, &presented) {
                        Some(index)
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

/// Middleware: 401 unless the request carries an accepted key, 429 with
/// `Retry-After` past the key's rate (when one is set); the key's
/// [`Scope`] goes into the request's extensions.
pub async fn require_key(
    State(keys): State<std::sync::Arc<ApiKeys>>,
    mut request: Request,
    next: Next,
) -> Response {
    if !keys.is_enabled() {
        return next.run(request).await;
    }
    let Some(index) = keys.matched_key(request.headers()) else {
        return ApiError::unauthorized().into_response();
    };
    if let Some(rate) = &keys.rate
        && let Err(wait_seconds) = rate.take(index, std::time::Instant::now())
    {
        return too_many_requests(rate.per_second, wait_seconds);
    }
    request
        .extensions_mut()
        .insert(std::sync::Arc::clone(&keys.digests[index].1));
    next.run(request).await
}

/// 429: the key is past its rate; retry after `wait_seconds` (rounded up).
fn too_many_requests(per_second: f64, wait_seconds: f64) -> Response {
    let mut response = ApiError::new(
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        format!(
            "this API key is past its rate of {per_second} requests a second (--key-rate-limit); retry shortly"
        ),
    )
    .into_response();
    let retry_after = wait_seconds.ceil().max(1.0) as u64;
    response.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(retry_after),
    );
    response
}

/// Middleware of `/metrics`: when keys are configured, 401 without an
/// accepted key and 403 for a key without the `metrics` right (keys of
/// `--api-key` and `--api-key-file` hold it).
pub async fn require_metrics_key(
    State(keys): State<std::sync::Arc<ApiKeys>>,
    request: Request,
    next: Next,
) -> Response {
    if !keys.is_enabled() {
        return next.run(request).await;
    }
    match keys.scope_of(request.headers()) {
        Some(scope) if scope.allows_metrics() => next.run(request).await,
        Some(_) => ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            "this API key may not read /metrics (grant metrics in the keys file)",
        )
        .into_response(),
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

    fn hex(key: &str) -> String {
        digest(key.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// The error of a keys file holding `text`.
    fn keys_file_error(text: &str) -> String {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("keys");
        std::fs::write(&path, text).expect("write");
        ApiKeys::none()
            .add_keys_file(&path)
            .expect_err(text)
            .to_string()
    }

    /// Finding 9: `<digest> list-users` scoped the key to a user named
    /// `list-users`, and two lines of one digest started fine (the last won).
    #[test]
    fn a_right_in_the_users_field_and_a_repeated_digest_are_errors() {
        for users in ["list-users", "metrics", "bob,list-users"] {
            let error = keys_file_error(&format!(
                "# keys
{} {users}
",
                hex("k")
            ));
            assert!(
                error.contains("line 2") && error.contains("is a right, not a user"),
                "{error}"
            );
        }
        let error = keys_file_error(&format!(
            "{} team-a/*

{} *
",
            hex("k"),
            hex("k")
        ));
        assert!(
            error.contains("line 3") && error.contains("same digest as line 1"),
            "{error}"
        );
        let error = keys_file_error(&format!(
            "{} * metrics metrics
",
            hex("k")
        ));
        assert!(error.contains("given twice"), "{error}");
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("keys");
        std::fs::write(
            &path,
            format!(
                "{} *
",
                hex("k")
            ),
        )
        .expect("write");
        let mut keys = ApiKeys::new(["k"]);
        let error = keys.add_keys_file(&path).expect_err("repeats --api-key");
        assert!(error.to_string().contains("--api-key"), "{error}");
    }

    #[test]
    fn the_metrics_right_is_granted_alone_or_beside_users() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("keys");
        std::fs::write(
            &path,
            format!(
                "{} - metrics
{} bob metrics list-users
{} *
",
                hex("km"),
                hex("kb"),
                hex("ka")
            ),
        )
        .expect("write");
        let mut keys = ApiKeys::new(["admin"]);
        keys.add_keys_file(&path).expect("valid file");
        let scope = |key: &str| keys.scope_of(&headers("x-api-key", key)).expect("accepted");
        let metrics_only = scope("km");
        assert!(metrics_only.allows_metrics());
        assert!(!metrics_only.allows_user("bob") && !metrics_only.allows_user_list());
        let bob = scope("kb");
        assert!(bob.allows_metrics() && bob.allows_user_list() && bob.allows_user("bob"));
        assert!(!scope("ka").allows_metrics());
        assert!(scope("admin").allows_metrics());
    }

    #[test]
    fn a_key_rate_refills_at_its_rate_and_keeps_keys_apart() {
        let rate = KeyRateLimit::new(2);
        let start = std::time::Instant::now();
        assert!(rate.take(0, start).is_ok());
        assert!(rate.take(0, start).is_ok());
        let wait = rate.take(0, start).expect_err("past the burst");
        assert!((wait - 0.5).abs() < 1e-9, "{wait}");
        assert!(
            rate.take(1, start).is_ok(),
            "another key has its own bucket"
        );
        let later = start + std::time::Duration::from_millis(500);
        assert!(rate.take(0, later).is_ok());
        assert!(rate.take(0, later).is_err());
    }

    #[test]
    fn no_keys_means_open() {
        assert!(ApiKeys::none().allows(&HeaderMap::new()));
        assert!(!ApiKeys::new(["  "]).is_enabled());
    }
}
