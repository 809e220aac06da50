//! limits: how much a request may take of the service, and for how long.
//!
//! For the routes that do work, in this order:
//!
//! 1. a declared `Content-Length` over the body limit is 413 at once,
//!    before a byte of the body is read; a Search (and its explain) takes
//!    at most [`MAX_SEARCH_BODY_BYTES`], as only the first terms of a query
//!    are used and parsing more only takes time from others;
//! 2. the body is read whole, within the limit (413), within the body
//!    read timeout, and at least at [`MIN_BODY_BYTES_PER_SEC`] after the
//!    first [`BODY_GRACE`] (408, and the connection is closed), holding
//!    nothing but its connection;
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

/// The slowest a request body may arrive, on average from its request's
/// start, once [`BODY_GRACE`] has passed: 4 KiB a second (a 1 MiB body
/// within the default body read timeout needs about 35 KiB a second).
pub const MIN_BODY_BYTES_PER_SEC: u64 = 4 * 1024;

/// The time a request body has before [`MIN_BODY_BYTES_PER_SEC`] applies.
pub const BODY_GRACE: Duration = Duration::from_secs(2);

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
    let bytes = match read_body(body, body_limit.max_bytes, started, read_window).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge) => return body_limit.too_large().into_response(),
        Err(BodyError::Unreadable) => {
            return ApiError::new(StatusCode::BAD_REQUEST, "could not read the request body")
                .into_response();
        }
        Err(BodyError::TooSlow { num_bytes }) => {
            return closing(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body arrived slower than {MIN_BODY_BYTES_PER_SEC} bytes a second ({num_bytes} bytes in {:.1} s): send it whole, faster",
                    started.elapsed().as_secs_f64()
                ),
            ));
        }
        Err(BodyError::Late) if limits.body_read_timeout < limits.request_timeout => {
            return closing(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    limits.body_read_timeout.as_secs_f64()
                ),
            ));
        }
        Err(BodyError::Late) => return closing(limits.timed_out()),
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

/// Why a request body was not read whole.
#[derive(Debug, PartialEq)]
enum BodyError {
    /// Over the body limit.
    TooLarge,
    /// The connection failed (or was cut to make room).
    Unreadable,
    /// Behind the minimum rate, with this much received.
    TooSlow { num_bytes: u64 },
    /// Not whole within the read window.
    Late,
}

/// Reads `body` whole: at most `max_bytes`, within `window` of `started`,
/// and, past [`BODY_GRACE`], at least [`MIN_BODY_BYTES_PER_SEC`] on
/// average (each byte received moves the deadline on by its share of a
/// second).
async fn read_body<B>(
    mut body: B,
    max_bytes: usize,
    started: Instant,
    window: Duration,
) -> Result<axum::body::Bytes, BodyError>
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Unpin,
{
    let latest = started + window;
    let mut received: Vec<u8> = Vec::new();
    loop {
        let earned = Duration::from_secs_f64(received.len() as f64 / MIN_BODY_BYTES_PER_SEC as f64);
        let behind = started + BODY_GRACE + earned;
        let deadline = behind.min(latest);
        let frame = match tokio::time::timeout_at(deadline.into(), body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(Some(Err(_))) => return Err(BodyError::Unreadable),
            Ok(None) => return Ok(received.into()),
            Err(_) if deadline < latest => {
                return Err(BodyError::TooSlow {
                    num_bytes: received.len() as u64,
                });
            }
            Err(_) => return Err(BodyError::Late),
        };
        if let Ok(data) = frame.into_data() {
            if received.len().saturating_add(data.len()) > max_bytes {
                return Err(BodyError::TooLarge);
            }
            received.extend_from_slice(&data);
        }
    }
}

/// `error`'s answer, closing the connection: the rest of a late body is
/// never read.
fn closing(error: ApiError) -> Response {
    let mut response = error.into_response();
    response.headers_mut().insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Now on the test's paused clock.
    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }

    /// A body sent in timed pieces, as a slow client does.
    fn trickled(
        pieces: Vec<(Duration, &'static [u8])>,
    ) -> http_body_util::StreamBody<
        impl futures::Stream<
            Item = Result<hyper::body::Frame<axum::body::Bytes>, std::convert::Infallible>,
        > + Unpin,
    > {
        let stream =
            futures::StreamExt::then(futures::stream::iter(pieces), |(pause, piece)| async move {
                tokio::time::sleep(pause).await;
                Ok(hyper::body::Frame::data(axum::body::Bytes::from_static(
                    piece,
                )))
            });
        http_body_util::StreamBody::new(Box::pin(stream))
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_behind_the_minimum_rate_is_refused_and_a_steady_one_read() {
        let window = Duration::from_secs(30);
        // One byte every 100 ms: behind the rate once the grace is over.
        let slow = trickled(vec![(Duration::from_millis(100), b"x" as &[u8]); 1000]);
        let clock = tokio::time::Instant::now();
        let read = read_body(slow, 1 << 20, clock.into_std(), window).await;
        assert_eq!(read, Err(BodyError::TooSlow { num_bytes: 20 }));
        let elapsed = clock.elapsed();
        assert!(elapsed >= BODY_GRACE && elapsed < BODY_GRACE + Duration::from_millis(200));
        // 8 KiB a second for 5 s: past the grace, and well within the rate.
        let steady = trickled(vec![
            (Duration::from_millis(125), &[b'y'; 1024] as &[u8]);
            40
        ]);
        let read = read_body(steady, 1 << 20, now(), window).await;
        assert_eq!(read.map(|bytes| bytes.len()), Ok(40 * 1024));
        // Within the rate, but not whole within the window.
        let long = trickled(vec![
            (Duration::from_millis(100), &[b'z'; 1024] as &[u8]);
            400
        ]);
        let read = read_body(long, 1 << 20, now(), window).await;
        assert_eq!(read, Err(BodyError::Late));
        let large = trickled(vec![(Duration::ZERO, &[b'w'; 1024] as &[u8]); 3]);
        let read = read_body(large, 2048, now(), window).await;
        assert_eq!(read, Err(BodyError::TooLarge));
    }
}
