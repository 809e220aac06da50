//! limits: how much a request may take of the service, and for how long.
//!
//! For the routes that do work, in this order:
//!
//! 1. a declared `Content-Length` over the body limit is 413 at once,
//!    before a byte of the body is read; a Search (and its explain) takes
//!    at most [`MAX_SEARCH_BODY_BYTES`], as only the first terms of a query
//!    are used and parsing more only takes time from others;
//! 2. the body is read whole, within the limit (413) and within the body
//!    read timeout (408), holding nothing but its connection;
//! 3. only then is an in-flight slot taken (503 with `Retry-After` when
//!    all are taken), so clients that stall their uploads cannot lock
//!    everyone else out;
//! 4. the request must be answered within the request timeout, counted
//!    from its start (503 with `Retry-After`).
//!
//! tower-http's `RequestBodyLimitLayer` and `RequestBodyDeadlineLayer` do
//! steps 1 and 2 as body wrappers, but answer a plain-text 413 and turn a
//! late body into a read error; read here, each case gets its own status
//! and a `{"detail": {"reason"}}` body, and the slot is taken after the
//! read, which a layer order alone cannot express. What it leaves to
//! others: header read and idle timeouts and the connection cap are the
//! connection's ([`super::serve`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use super::error::ApiError;

/// The largest body of a Search or an explain, in bytes (1 MiB), or the
/// body limit when that is smaller.
pub const MAX_SEARCH_BODY_BYTES: usize = 1024 * 1024;

/// The routes whose bodies [`MAX_SEARCH_BODY_BYTES`] caps.
const SEARCH_ROUTES: [&str; 3] = ["/search", "/v1/search", "/v1/search/explain"];

/// The limits of the routes that do work.
pub struct Limits {
    /// The largest body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The time a body may take to arrive.
    pub body_read_timeout: Duration,
    /// Requests handled at once.
    pub permits: Arc<tokio::sync::Semaphore>,
    /// The number of permits (for the reason given).
    pub max_in_flight: usize,
    /// The time a request may take, from its start to its answer.
    pub request_timeout: Duration,
}

impl Limits {
    /// The body limit of the route `request` matched.
    fn body_limit_of(&self, request: &Request) -> BodyLimit {
        let is_search = request
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .is_some_and(|path| SEARCH_ROUTES.contains(&path.as_str()));
        if is_search && MAX_SEARCH_BODY_BYTES < self.max_body_bytes {
            BodyLimit {
                max_bytes: MAX_SEARCH_BODY_BYTES,
                of_search: true,
            }
        } else {
            BodyLimit {
                max_bytes: self.max_body_bytes,
                of_search: false,
            }
        }
    }

    fn timed_out(&self) -> ApiError {
        ApiError::unavailable(
            format!(
                "not answered within the request timeout of {} s; retry (an Add retried with the same request_id is stored once)",
                self.request_timeout.as_secs_f64()
            ),
            1,
        )
    }
}

/// The body limit of one request.
#[derive(Clone, Copy)]
struct BodyLimit {
    max_bytes: usize,
    /// The Search cap, not the general limit.
    of_search: bool,
}

impl BodyLimit {
    fn too_large(self) -> ApiError {
        let reason = if self.of_search {
            format!(
                "a Search body may hold at most {} bytes (only the first terms of a query are used): shorten the query",
                self.max_bytes
            )
        } else {
            format!("request body exceeds the limit of {} bytes", self.max_bytes)
        };
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, reason)
    }
}

/// Middleware: the steps of the module documentation.
pub async fn limit_request(
    State(limits): State<Arc<Limits>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let body_limit = limits.body_limit_of(&request);
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > body_limit.max_bytes as u64) {
        return body_limit.too_large().into_response();
    }
    let (parts, body) = request.into_parts();
    let read_window = limits.body_read_timeout.min(limits.request_timeout);
    let limited = http_body_util::Limited::new(body, body_limit.max_bytes);
    let bytes = match tokio::time::timeout(read_window, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            return body_limit.too_large().into_response();
        }
        Ok(Err(_)) => {
            return ApiError::new(StatusCode::BAD_REQUEST, "could not read the request body")
                .into_response();
        }
        Err(_) if limits.body_read_timeout < limits.request_timeout => {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    limits.body_read_timeout.as_secs_f64()
                ),
            )
            .into_response();
        }
        Err(_) => return limits.timed_out().into_response(),
    };
    let Ok(_permit) = Arc::clone(&limits.permits).try_acquire_owned() else {
        return ApiError::unavailable(
            format!(
                "busy: {} requests in flight, the limit; retry shortly",
                limits.max_in_flight
            ),
            1,
        )
        .into_response();
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    let remaining = limits.request_timeout.saturating_sub(started.elapsed());
    match tokio::time::timeout(remaining, next.run(request)).await {
        Ok(response) => response,
        Err(_) => limits.timed_out().into_response(),
    }
}
