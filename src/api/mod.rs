//! api: the HTTP face of the service, speaking the Agent Memory Leaderboard
//! Add / Search contract (`POST /add`, `POST /search`, `GET /health`, and
//! the same under `/v1/`).
//!
//! Handlers are thin: read the body, parse it into a domain type
//! ([`dto`]), call the [`Service`], serialize. Every error body is an
//! [`error::ApiError`]; its status comes from `error`'s conversions of
//! service and parse errors, or from the handler, [`auth`], [`guard`] or
//! [`limits`] that builds it with `ApiError::new`.
//!
//! Architecture invariant: this module knows nothing of SQL or tantivy.

pub mod auth;
pub mod dto;
pub mod error;
pub mod guard;
pub mod limits;
pub mod listing;
pub mod openapi;
pub mod serve;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{Method, StatusCode, Uri};
use axum::routing::{MethodRouter, get, post};
use axum::{Extension, Json, Router, middleware};

/// The scope of the request's key; `None` when the service runs without
/// keys.
type KeyScope = Option<Extension<Arc<Scope>>>;

fn scope_of(scope: &KeyScope) -> Option<&Scope> {
    scope.as_ref().map(|Extension(scope)| scope.as_ref())
}
use serde_json::Value;

use self::auth::{ApiKeys, Scope, authorize};
#[allow(unused_imports)] // named by the OpenAPI annotations
use self::dto::ItemDto;
use self::dto::{AddResponse, SearchResponse, SessionSummaryDto};
use self::error::ApiError;
use self::listing::PageRequest;
use precedent_core::domain::{SessionId, UserId};
use precedent_service::read::search::Explained;
use precedent_service::{Health, Service};
use precedent_store as store;

/// Knobs of the HTTP layer.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// Accepted keys; none means no authentication.
    pub keys: ApiKeys,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Requests handled at once (health aside); past it, 503 with
    /// `Retry-After` (the platform retries 503).
    pub max_in_flight: usize,
    /// A request not answered within this is answered 503 with
    /// `Retry-After` (an Add retried with its request_id is stored once).
    pub request_timeout: std::time::Duration,
    /// A body not received within this is answered 408; no in-flight slot
    /// is held while it arrives.
    pub body_read_timeout: std::time::Duration,
    /// The `Host` values served (a guard against DNS rebinding).
    pub allowed_hosts: guard::AllowedHosts,
    /// Browser origins besides the server's own that may call the API
    /// (CSRF protection lets them through, CORS answers them); each
    /// `scheme://host[:port]`, as a browser sends it.
    pub trusted_origins: Vec<String>,
    /// Refuse an Add whose ids hold what looks like a credential (set with
    /// `--redact-secrets`: content is masked, but masking an id would merge
    /// distinct scopes).
    pub refuse_secret_ids: bool,
    /// Whose checkouts a Search's `repo` may name (read on this host to
    /// mark stale experience).
    pub checkouts: Checkouts,
}

/// Whose checkouts a server reads for a Search's `repo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Checkouts {
    /// None: `repo` is refused.
    #[default]
    None,
    /// Its owner's: the local server started for `mcp`, `hook` and
    /// `import`, whose clients hold its owner's key.
    Owners,
    /// Those under these directories (real paths): `--checkout-root`.
    Within(Vec<std::path::PathBuf>),
}

/// The default number of requests handled at once.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
/// The default request timeout: ten minutes (an Add of a long trajectory
/// on a loaded machine takes seconds, never minutes).
pub const DEFAULT_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The default time a request body may take to arrive.
pub const DEFAULT_BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The default body limit: 64 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

impl Default for ApiOptions {
    fn default() -> ApiOptions {
        ApiOptions {
            keys: ApiKeys::none(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            allowed_hosts: guard::AllowedHosts::default(),
            trusted_origins: Vec::new(),
            refuse_secret_ids: false,
            checkouts: Checkouts::None,
        }
    }
}

#[derive(Clone)]
struct AppState {
    service: Arc<Service>,
    max_body_bytes: usize,
    refuse_secret_ids: bool,
    checkouts: Arc<Checkouts>,
    http_metrics: Arc<precedent_service::metrics::HttpMetrics>,
}

/// The whole HTTP application over a running service.
pub fn app(service: Arc<Service>, options: ApiOptions) -> Router {
    let http_metrics = Arc::new(precedent_service::metrics::HttpMetrics::default());
    let state = AppState {
        service,
        max_body_bytes: options.max_body_bytes,
        refuse_secret_ids: options.refuse_secret_ids,
        checkouts: Arc::new(options.checkouts),
        http_metrics: Arc::clone(&http_metrics),
    };
    let keys = Arc::new(options.keys);
    let limits = Arc::new(limits::Limits {
        max_body_bytes: options.max_body_bytes,
        body_read_timeout: options.body_read_timeout,
        permits: Arc::new(tokio::sync::Semaphore::new(options.max_in_flight.max(1))),
        max_in_flight: options.max_in_flight.max(1),
        request_timeout: options.request_timeout,
    });
    let mut csrf = tower_http::csrf::CsrfLayer::new();
    for origin in &options.trusted_origins {
        match csrf.clone().add_trusted_origin(origin) {
            Ok(layer) => csrf = layer,
            Err(error) => tracing::warn!(%error, "trusted origin skipped"),
        }
    }
    let csrf = csrf.with_rejection_response(guard::cross_origin_refused);
    let cors = trusted_origins_cors(&options.trusted_origins);
    let allowed_hosts = Arc::new(options.allowed_hosts);
    let json_routes = Router::new();
    let json_routes = with_v1_alias(json_routes, "/add", post(add));
    let json_routes = with_v1_alias(json_routes, "/search", post(search))
        .route("/v1/search/explain", post(explain));
    let open_routes = with_v1_alias(Router::new(), "/health", get(health));
    Router::new()
        .merge(json_routes)
        .route("/v1/users", get(list_users))
        .route("/v1/sessions", get(list_sessions))
        .route("/v1/messages", get(session_messages))
        .route("/v1/sessions/{*session_id}", get(session_detail))
        .route("/v1/users/{*user_id}", axum::routing::delete(delete_user))
        // Outermost first: the key, the declared type, then the body read
        // and the in-flight slot.
        .route_layer(middleware::from_fn_with_state(
            limits,
            limits::limit_request,
        ))
        .route_layer(middleware::from_fn(guard::require_json))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&keys),
            auth::require_key,
        ))
        .merge(open_routes)
        .route("/ui", get(ui_page))
        .route("/ui/", get(ui_page))
        .route(
            "/metrics",
            get(metrics).layer(middleware::from_fn_with_state(
                keys,
                auth::require_metrics_key,
            )),
        )
        .route("/openapi.json", get(openapi_json))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(options.max_body_bytes))
        .layer(csrf)
        .layer(tower::util::option_layer(cors))
        .layer(middleware::from_fn_with_state(
            allowed_hosts,
            guard::check_host,
        ))
        .layer(middleware::from_fn_with_state(http_metrics, record_metrics))
        .with_state(state)
}

/// `router` with `handler` at `path` and at its `/v1` alias. The alias
/// must be one of [`openapi::V1_ALIASES`], whose document entries are
/// copied from `path`'s.
fn with_v1_alias(
    router: Router<AppState>,
    path: &str,
    handler: MethodRouter<AppState>,
) -> Router<AppState> {
    debug_assert!(
        openapi::V1_ALIASES.contains(&path),
        "{path} is documented under /v1"
    );
    router
        .route(path, handler.clone())
        .route(&openapi::v1_alias(path), handler)
}

/// CORS for the trusted origins alone (`tower_http::cors`); with none,
/// no CORS layer at all: no CORS header is ever sent, so browsers keep
/// other origins from reading answers.
fn trusted_origins_cors(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderName, HeaderValue, header};
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin).ok())
        .collect();
    if origins.is_empty() {
        return None;
    }
    let cors = tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            HeaderName::from_static("x-api-key"),
        ]);
    Some(cors)
}

/// Middleware: counts every answer by route template, method and status.
async fn record_metrics(
    State(metrics): State<Arc<precedent_service::metrics::HttpMetrics>>,
    request: axum::extract::Request,
    next: middleware::Next,
) -> axum::response::Response {
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_string();
    let method = precedent_service::metrics::method_label(request.method().as_str());
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    metrics.observe(
        &route,
        method,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// Bodies larger than this are parsed on the blocking pool: parsing a few
/// megabytes of JSON takes milliseconds, too long for an async worker.
const INLINE_PARSE_BYTES: usize = 64 * 1024;

/// Reads a body as JSON and validates it with `parse`: 413 past the limit,
/// 400 when it is not JSON, 422 when `parse` finds bad fields.
async fn read_request<T: Send + 'static>(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
    parse: fn(&Value) -> Result<T, Vec<error::FieldError>>,
) -> Result<T, ApiError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body exceeds the limit of {limit} bytes"),
            )
        } else {
            ApiError::new(rejection.status(), "could not read the request body")
        }
    })?;
    let is_small = bytes.len() <= INLINE_PARSE_BYTES;
    let parse_bytes = move || {
        let value = dto::parse_json(&bytes).map_err(ApiError::malformed_json)?;
        parse(&value).map_err(ApiError::invalid_fields)
    };
    if is_small {
        return parse_bytes();
    }
    tokio::task::spawn_blocking(parse_bytes)
        .await
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))?
}

/// Add: stores messages of a session; answers once they are durable and
/// searchable.
#[utoipa::path(post, path = "/add", tag = "contract", request_body = openapi::AddBody,
    responses((status = 200, description = "Stored (or stored before under this request_id), durable and searchable", body = AddResponse),
              (status = 409, description = "The request_id was used with a different body", body = openapi::ErrorBody),
              (status = 413, description = "The session would hold more message content than the per-session limit; nothing of the Add was stored", body = openapi::ErrorBody)))]
async fn add(
    State(state): State<AppState>,
    scope: KeyScope,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<AddResponse>, ApiError> {
    let request = read_request(body, state.max_body_bytes, dto::parse_add).await?;
    authorize(scope_of(&scope), request.user_id())?;
    if state.refuse_secret_ids {
        refuse_secret_ids(&request)?;
    }
    let response = AddResponse {
        success: true,
        request_id: request.request_id().to_string(),
        user_id: request.user_id().to_string(),
        session_id: request.session_id().to_string(),
    };
    let num_messages = request.messages().len();
    let outcome = state.service.add(request).await?;
    tracing::debug!(num_messages, ?outcome, "add answered");
    Ok(Json(response))
}

/// 422 when an id of the Add holds what looks like a credential.
fn refuse_secret_ids(request: &precedent_core::domain::AddRequest) -> Result<(), ApiError> {
    let errors: Vec<error::FieldError> = [
        ("request_id", request.request_id().as_str()),
        ("user_id", request.user_id().as_str()),
        ("session_id", request.session_id().as_str()),
    ]
    .into_iter()
    .filter_map(|(field, id)| {
        precedent_core::redact::find_secret(id).map(|kind| error::FieldError {
            field: field.to_string(),
            message: format!(
                "holds what looks like a credential ({kind}); ids are stored as sent, so it is refused"
            ),
        })
    })
    .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(errors))
    }
}

/// Search: the user's past experience that helps with the query, best
/// first, within the character budget.
#[utoipa::path(post, path = "/search", tag = "contract", request_body = openapi::SearchBody,
    responses((status = 200, description = "Items, best first (empty when nothing helps)", body = SearchResponse),
              (status = 413, description = "The body is over the Search limit (1 MiB)", body = openapi::ErrorBody),
              (status = 429, description = "The key's request rate is over --key-rate-limit", body = openapi::ErrorBody)))]
async fn search(
    State(state): State<AppState>,
    scope: KeyScope,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<SearchResponse>, ApiError> {
    let request = read_request(body, state.max_body_bytes, dto::parse_search).await?;
    authorize(scope_of(&scope), request.user_id())?;
    check_repo(&state, &request)?;
    let items = state.service.search(request).await?;
    Ok(Json(SearchResponse {
        data: items.into_iter().map(Into::into).collect(),
    }))
}

/// Every candidate session of a Search with its features, fused score and
/// the noise gate's verdict.
#[utoipa::path(post, path = "/v1/search/explain", tag = "inspection", request_body = openapi::SearchBody,
    responses((status = 200, description = "Candidates, kept ones first", body = openapi::Explanation),
              (status = 413, description = "The body is over the Search limit (1 MiB)", body = openapi::ErrorBody)))]
async fn explain(
    State(state): State<AppState>,
    scope: KeyScope,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Explained>, ApiError> {
    let request = read_request(body, state.max_body_bytes, dto::parse_search).await?;
    authorize(scope_of(&scope), request.user_id())?;
    check_repo(&state, &request)?;
    Ok(Json(state.service.explain(request).await?))
}

/// A Search's `repo` is read only by the local server its owner's clients
/// reach, or within the roots the operator named, and must be a directory
/// there.
fn check_repo(
    state: &AppState,
    request: &precedent_core::domain::SearchRequest,
) -> Result<(), ApiError> {
    let Some(repo) = &request.repo() else {
        return Ok(());
    };
    // A valid request this server may not act on: 403.
    let refused = |why: &str| Err(ApiError::new(StatusCode::FORBIDDEN, why.to_string()));
    match state.checkouts.as_ref() {
        Checkouts::None => refused(
            "repo: this server reads no checkouts (start it with --checkout-root DIR to let clients name checkouts under DIR); leave repo out",
        ),
        _ if !repo.is_dir() => Err(ApiError::invalid_fields(vec![error::FieldError {
            field: "repo".to_string(),
            message: "not a directory on the server's host".to_string(),
        }])),
        Checkouts::Within(roots)
            if !std::fs::canonicalize(repo)
                .is_ok_and(|real| roots.iter().any(|root| real.starts_with(root))) =>
        {
            refused("repo: not under a checkout root this server reads (--checkout-root)")
        }
        _ => Ok(()),
    }
}

/// The `user_id` of an inspection request's query pairs (required, given
/// once, a valid id), when the request's key may read that user.
fn authorized_user(scope: &KeyScope, pairs: &[(String, String)]) -> Result<UserId, ApiError> {
    let user_id = inspected_user_of(pairs)?;
    authorize(scope_of(scope), &user_id)?;
    Ok(user_id)
}

/// An inspection request's query string as name and value pairs.
fn query_pairs(query: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(query.unwrap_or("")).map_err(|_| {
        ApiError::invalid_fields(vec![error::FieldError {
            field: "user_id".to_string(),
            message: "the query string is not valid form encoding".to_string(),
        }])
    })
}

fn inspected_user_of(pairs: &[(String, String)]) -> Result<UserId, ApiError> {
    let field_error = |message: &str| {
        ApiError::invalid_fields(vec![error::FieldError {
            field: "user_id".to_string(),
            message: message.to_string(),
        }])
    };
    let mut values = pairs
        .iter()
        .filter(|(name, _)| name == "user_id")
        .map(|(_, value)| value.clone());
    match (values.next(), values.next()) {
        (None, _) => Err(field_error("query parameter required, non-empty")),
        (Some(_), Some(_)) => Err(field_error(
            "given more than once; give exactly one user_id",
        )),
        (Some(user_id), None) if user_id.is_empty() => {
            Err(field_error("query parameter required, non-empty"))
        }
        (Some(user_id), None) => Ok(UserId::new(user_id)?),
    }
}

/// Users holding sessions, with counts, in pages.
#[utoipa::path(get, path = "/v1/users", tag = "inspection",
    params(
        ("limit" = Option<usize>, Query, description = "At most this many users (default 1000, at most 10000)", minimum = 1, maximum = 10000),
        ("cursor" = Option<String>, Query, description = "The `next_cursor` of the page before (empty: the first page)", pattern = "^([0-9]{1,18}-([0-9a-f]{2}){0,1024})?$")),
    responses((status = 200, description = "Users, most recently active first; at most `limit` and about 2 MB of them, with `next_cursor` when more follow", body = openapi::UserList),
              (status = 422, description = "A bad limit or cursor", body = openapi::ErrorBody)))]
async fn list_users(
    State(state): State<AppState>,
    scope: KeyScope,
    RawQuery(query): RawQuery,
) -> Result<axum::response::Response, ApiError> {
    let scope = scope_of(&scope);
    if scope.is_some_and(|scope| !scope.allows_user_list()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "this API key may not list users (grant list-users in the keys file)",
        ));
    }
    let page = PageRequest::from_pairs(&query_pairs(query.as_deref())?)?;
    let users = state.service.list_users(page.after, page.limit).await?;
    // A key that sees some users only: a page may hold fewer than `limit`
    // of them, and goes on after the last user read, seen or not.
    let next = users.next;
    let items: Vec<store::StoredUser> = users
        .items
        .into_iter()
        .filter(|user| scope.is_none_or(|scope| scope.allows_user(&user.user_id)))
        .collect();
    Ok(json_bytes(listing::page_bytes(
        items,
        next,
        store::StoredUser::cursor,
        dto::UserSummaryDto::from,
    )))
}

/// The inspection page: one self-contained HTML document (styles and script
/// inline, nothing fetched from elsewhere) that reads the JSON routes.
const UI_PAGE: &str = include_str!("ui.html");

/// The inspection page (HTML).
#[utoipa::path(get, path = "/ui", tag = "operations",
    responses((status = 200, description = "The page", content_type = "text/html", body = String)))]
async fn ui_page() -> impl axum::response::IntoResponse {
    (
        [
            (axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                axum::http::header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
            ),
        ],
        UI_PAGE,
    )
}

/// A user's sessions with summaries, in pages.
#[utoipa::path(get, path = "/v1/sessions", tag = "inspection",
    params(("user_id" = String, Query, description = "The user", min_length = 1),
        ("limit" = Option<usize>, Query, description = "At most this many sessions (default 1000, at most 10000)", minimum = 1, maximum = 10000),
        ("cursor" = Option<String>, Query, description = "The `next_cursor` of the page before (empty: the first page)", pattern = "^([0-9]{1,18}-([0-9a-f]{2}){0,1024})?$")),
    responses((status = 200, description = "Sessions, most recently updated first; at most `limit` and about 2 MB of them, with `next_cursor` when more follow", body = openapi::SessionList),
              (status = 422, description = "A bad user_id, limit or cursor", body = openapi::ErrorBody)))]
async fn list_sessions(
    State(state): State<AppState>,
    scope: KeyScope,
    RawQuery(query): RawQuery,
) -> Result<axum::response::Response, ApiError> {
    let pairs = query_pairs(query.as_deref())?;
    let user_id = authorized_user(&scope, &pairs)?;
    let page = PageRequest::from_pairs(&pairs)?;
    Ok(json_bytes(
        sessions_page(&state.service, user_id, page).await?,
    ))
}

/// A session's messages as stored, in pages.
#[utoipa::path(get, path = "/v1/messages", tag = "inspection",
    params(("user_id" = String, Query, description = "The user", min_length = 1),
        ("session_id" = String, Query, description = "The session", min_length = 1),
        ("limit" = Option<usize>, Query, description = "At most this many messages (default 1000, at most 10000)", minimum = 1, maximum = 10000),
        ("cursor" = Option<String>, Query, description = "The `next_cursor` of the page before (empty: the first page)", pattern = "^([0-9]{1,18}-([0-9a-f]{2}){0,1024})?$")),
    responses((status = 200, description = "Messages in session order (by Add, then within it), each cut at 65,536 characters; at most `limit` and about 2 MB of them, with `next_cursor` when more follow; none for a session the user does not have", body = openapi::MessageList),
              (status = 422, description = "A bad user_id, session_id, limit or cursor", body = openapi::ErrorBody)))]
async fn session_messages(
    State(state): State<AppState>,
    scope: KeyScope,
    RawQuery(query): RawQuery,
) -> Result<axum::response::Response, ApiError> {
    let pairs = query_pairs(query.as_deref())?;
    let user_id = authorized_user(&scope, &pairs)?;
    let session_id = SessionId::new(listing::required_single(&pairs, "session_id")?)?;
    let page = PageRequest::from_pairs(&pairs)?;
    let writer = listing::PageWriter::new(
        precedent_service::read::inspect::MessageView::cursor,
        dto::MessageDto::from,
    );
    let (writer, next) = state
        .service
        .session_messages(user_id, session_id, page.after, page.limit, writer)
        .await?;
    Ok(json_bytes(writer.finish(next)))
}

/// A JSON body already written.
fn json_bytes(body: Vec<u8>) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// A page of a user's session summaries as the wire carries it, written
/// as the summaries are read (the HTTP route's and MCP's).
pub async fn sessions_page(
    service: &Arc<Service>,
    user_id: UserId,
    page: PageRequest,
) -> Result<Vec<u8>, precedent_service::ServiceError> {
    let writer = listing::PageWriter::new(
        precedent_service::read::inspect::SessionSummary::cursor,
        SessionSummaryDto::from,
    );
    let (writer, next) = service
        .list_sessions(user_id, page.after, page.limit, writer)
        .await?;
    Ok(writer.finish(next))
}

/// A path segment that does not decode (`%FF` is no UTF-8): a 400 of
/// the contract's error shape, not axum's plain text.
fn path_error(field: &str, rejection: &PathRejection) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        format!("{field} in the path: {}", rejection.body_text()),
    )
}

/// One session's whole record with evidence and provenance.
#[utoipa::path(get, path = "/v1/sessions/{session_id}", tag = "inspection",
    params(("session_id" = String, Path, description = "The session"),
           ("user_id" = String, Query, description = "The user", min_length = 1)),
    responses((status = 200, description = "The record", body = openapi::SessionDetailBody),
              (status = 404, description = "The user has no such session", body = openapi::ErrorBody)))]
async fn session_detail(
    State(state): State<AppState>,
    session_id: Result<Path<String>, PathRejection>,
    scope: KeyScope,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let Path(session_id) = session_id.map_err(|rejection| path_error("session_id", &rejection))?;
    let user_id = authorized_user(&scope, &query_pairs(query.as_deref())?)?;
    let session_id = SessionId::new(session_id)?;
    let detail = state
        .service
        .session_detail(user_id, session_id.clone())
        .await?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no session {:?} for this user_id", session_id.as_str()),
            )
        })?;
    Ok(Json(dto::session_detail_json(&detail)))
}

/// `DELETE /v1/users/{user_id}`: everything of that user, from store and
/// index; answers what was removed (zeros for an unknown user).
#[utoipa::path(delete, path = "/v1/users/{user_id}", tag = "inspection",
    params(("user_id" = String, Path, description = "The user")),
    responses((status = 200, description = "What was removed (zeros for an unknown user)", body = openapi::UserDeleted)))]
async fn delete_user(
    State(state): State<AppState>,
    scope: KeyScope,
    user_id: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(user_id) = user_id.map_err(|rejection| path_error("user_id", &rejection))?;
    authorize(scope_of(&scope), &user_id)?;
    let user_id = UserId::new(user_id)?;
    let deleted = state.service.delete_user(user_id.clone()).await?;
    Ok(Json(
        serde_json::json!({ "user_id": user_id, "deleted": deleted }),
    ))
}

/// Health: the writer runs, the store answers, and what the index holds;
/// 503 when the writer cannot take Adds or the store is unreachable (the
/// platform takes any 2xx as healthy).
#[utoipa::path(get, path = "/health", tag = "contract",
    responses((status = 200, description = "Up", body = Health),
              (status = 503, description = "The writer cannot take Adds (stopping or stopped), or the store is unreachable", body = openapi::ErrorBody)))]
async fn health(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    let health = state.service.health().await;
    if health.status != "ok" {
        let reason = if health.store_reachable {
            format!("{}: the writer cannot take Adds", health.status)
        } else {
            format!(
                "{}: the {} store does not answer, so Adds and Searches cannot be served",
                health.status, health.store
            )
        };
        return Err(ApiError::unavailable(reason, 1));
    }
    Ok(Json(health))
}

/// Prometheus metrics: requests and latency per route and status, the Add
/// queue, commit latency, documents, store size, sessions per user.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain", body = String),
              (status = 401, description = "Keys are configured and none was given", body = openapi::ErrorBody),
              (status = 403, description = "The key has not the metrics right", body = openapi::ErrorBody)))]
async fn metrics(State(state): State<AppState>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut out = String::with_capacity(8 * 1024);
    state.http_metrics.write(&mut out);
    let writer = state.service.writer_metrics();
    out.push_str(
        "# HELP precedent_index_commit_duration_seconds Time to store, index and publish one group of Adds.\n\
         # TYPE precedent_index_commit_duration_seconds histogram\n",
    );
    writer
        .write_turn
        .write(&mut out, "precedent_index_commit_duration_seconds", "");
    precedent_service::metrics::write_single(
        &mut out,
        "precedent_adds_written_total",
        "counter",
        "Adds handed to the writer.",
        writer
            .adds_written
            .load(std::sync::atomic::Ordering::Relaxed) as f64,
    );
    for (name, kind, help, value) in [
        (
            "precedent_adds_derived_again_total",
            "counter",
            "Adds derived again because another Add of their session landed first.",
            &writer.adds_rederived_stale,
        ),
        (
            "precedent_sessions_to_rederive",
            "gauge",
            "Session records of an older extractor still to derive again.",
            &writer.sessions_to_rederive,
        ),
        (
            "precedent_sessions_rederived_total",
            "counter",
            "Session records derived again by a newer extractor since start-up.",
            &writer.sessions_rederived,
        ),
        (
            "precedent_cache_catch_ups_total",
            "counter",
            "Users whose index documents were caught up with the shared store before a Search.",
            &writer.catch_ups,
        ),
        (
            "precedent_cache_catch_up_adds_total",
            "counter",
            "Adds indexed by those catch-ups (Adds the index was behind).",
            &writer.catch_up_adds,
        ),
        (
            "precedent_cache_evictions_total",
            "counter",
            "Users whose index marks were dropped to stay within --max-cached-users (filled again on their next Search).",
            &writer.cache_evictions,
        ),
    ] {
        precedent_service::metrics::write_single(
            &mut out,
            name,
            kind,
            help,
            value.load(std::sync::atomic::Ordering::Relaxed) as f64,
        );
    }
    out.push_str(
        "# HELP precedent_cache_catch_up_lag_seconds Age of the oldest Add a catch-up indexed: how long the index was behind the store for that user.\n\
         # TYPE precedent_cache_catch_up_lag_seconds histogram\n",
    );
    writer
        .catch_up_lag
        .write(&mut out, "precedent_cache_catch_up_lag_seconds", "");
    match state.service.figures().await {
        Ok(figures) => write_figures(&mut out, &figures),
        Err(error) => {
            tracing::warn!(%error, "metrics: figures not read");
            return ApiError::unavailable("figures could not be read now", 1).into_response();
        }
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
        .into_response()
}

/// Bounds of the sessions-per-user histogram.
const SESSIONS_PER_USER_BUCKETS: [i64; 7] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000];

fn write_figures(out: &mut String, figures: &precedent_service::ServiceFigures) {
    use precedent_service::metrics::write_single;
    use std::fmt::Write as _;
    write_single(
        out,
        "precedent_add_queue_depth",
        "gauge",
        "Jobs waiting for the writer.",
        figures.queue_depth as f64,
    );
    write_single(
        out,
        "precedent_add_queue_capacity",
        "gauge",
        "Jobs the writer's queue holds.",
        figures.queue_capacity as f64,
    );
    write_single(
        out,
        "precedent_index_documents",
        "gauge",
        "Documents visible to searches.",
        figures.num_docs as f64,
    );
    if let Some(num_users) = figures.num_users_indexed {
        write_single(
            out,
            "precedent_cache_users",
            "gauge",
            "Users this node's index follows (a shared store; the documents are precedent_index_documents).",
            num_users as f64,
        );
    }
    write_single(
        out,
        "precedent_store_bytes",
        "gauge",
        "Bytes of the data directory (store and index).",
        figures.store_bytes as f64,
    );
    write_single(
        out,
        "precedent_users",
        "gauge",
        "Users holding sessions.",
        figures.sessions_per_user.len() as f64,
    );
    out.push_str(
        "# HELP precedent_sessions_per_user How many sessions users hold (no user ids).\n\
         # TYPE precedent_sessions_per_user histogram\n",
    );
    for bound in SESSIONS_PER_USER_BUCKETS {
        let count = figures
            .sessions_per_user
            .iter()
            .filter(|sessions| **sessions <= bound)
            .count();
        let _ = writeln!(
            out,
            "precedent_sessions_per_user_bucket{{le=\"{bound}\"}} {count}"
        );
    }
    let total: i64 = figures.sessions_per_user.iter().sum();
    let _ = writeln!(
        out,
        "precedent_sessions_per_user_bucket{{le=\"+Inf\"}} {}\nprecedent_sessions_per_user_sum {total}\nprecedent_sessions_per_user_count {}",
        figures.sessions_per_user.len(),
        figures.sessions_per_user.len()
    );
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", body = Object)))]
async fn openapi_json() -> Json<Value> {
    Json(OPENAPI.clone())
}

/// The document, built once.
static OPENAPI: std::sync::LazyLock<Value> = std::sync::LazyLock::new(openapi::document);

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "no route for {} {}",
            echoed(method.as_str()),
            echoed(uri.path())
        ),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} is not allowed on {}",
            echoed(method.as_str()),
            echoed(uri.path())
        ),
    )
}

/// The longest piece of a request (method, path) echoed in a reason.
const MAX_ECHOED_CHARS: usize = 200;

/// `text` as echoed in an error reason: cut at [`MAX_ECHOED_CHARS`], so a
/// client cannot make every answer as large as its request line.
fn echoed(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(MAX_ECHOED_CHARS) {
        Some((end, _)) => format!("{}...", &text[..end]).into(),
        None => text.into(),
    }
}
