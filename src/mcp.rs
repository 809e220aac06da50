//! mcp: the Model Context Protocol face of the service, over stdio, for
//! coding agents (`precedent mcp`).
//!
//! Four tools: `search_memory`, `record_experience`, `list_sessions`,
//! `get_session`. Each builds the body of the matching HTTP route and hands
//! it to a [`Backend`]: the service opened on a data directory in this
//! process, or a running server reached over HTTP (`--server`). Either way
//! the request is validated by the same parser as the HTTP API and the
//! answer has the same JSON shape, so a tool result reads like the route's.
//!
//! The protocol itself (the handshake and version negotiation) is left to
//! the official SDK, `rmcp`; where a message ends on stdio, and the answer
//! to a line that is none (not JSON, or over 16 MiB), is [`framing`]'s.
//!
//! Architecture invariant: nothing here knows SQL or tantivy; stdout carries
//! protocol messages only (logs go to stderr).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

pub mod framing;

use crate::api::error::FieldError;
use crate::api::listing::{self, PageRequest};
use crate::api::{self, dto};
use crate::client::encode;
use crate::local::LocalServer;
use precedent_core::domain::{SessionId, UserId};
use precedent_service::Service;

/// Items `search_memory` returns unless asked otherwise.
pub const DEFAULT_TOP_K: u64 = 5;
/// The most items `search_memory` returns.
pub const MAX_TOP_K: u64 = 50;

/// Sessions `list_sessions` gives when the agent names no `limit`: a
/// page that an agent's tool-output budget holds (about 300 bytes each).
pub const MCP_PAGE_LIMIT: usize = 100;

/// Where the tools' requests go.
pub enum Backend {
    /// The service, opened on a data directory by this process.
    Local(Arc<Service>),
    /// A running precedent server.
    Remote(RemoteServer),
}

/// A running server reached over HTTP.
#[derive(Clone)]
pub struct RemoteServer {
    agent: ureq::Agent,
    target: Target,
}

/// Which server a [`RemoteServer`] calls.
#[derive(Clone)]
enum Target {
    /// The server at this address (`--server`).
    Fixed {
        base_url: String,
        api_key: Option<String>,
    },
    /// The local server of a data directory, started again when it is
    /// gone.
    Local(Arc<LocalServer>),
}

impl RemoteServer {
    /// A client of the server at `base_url` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base_url: &str, api_key: Option<String>) -> RemoteServer {
        RemoteServer {
            agent: crate::client::agent(Duration::from_secs(600)),
            target: Target::Fixed {
                base_url: base_url.trim_end_matches('/').to_string(),
                api_key,
            },
        }
    }

    /// A client of the local server of a data directory: a call that
    /// cannot reach it attaches again (starting a server when it is gone)
    /// and is sent once more, which an Add's request id makes safe.
    pub fn local(server: Arc<LocalServer>) -> RemoteServer {
        RemoteServer {
            agent: crate::client::agent(Duration::from_secs(600)),
            target: Target::Local(server),
        }
    }

    /// Whether the server runs on this host (a loopback address, or the
    /// data directory's own local server), so that it can read the
    /// caller's checkout.
    pub fn is_local(&self) -> bool {
        let base_url = match &self.target {
            Target::Fixed { base_url, .. } => base_url.as_str(),
            Target::Local(_) => return true,
        };
        let rest = base_url
            .split_once("://")
            .map_or(base_url, |(_, rest)| rest);
        let host = rest.split('/').next().unwrap_or("");
        let host = match host.strip_prefix('[') {
            Some(bracketed) => bracketed.split(']').next().unwrap_or(""),
            None => host.rsplit_once(':').map_or(host, |(host, _)| host),
        };
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|address| address.is_loopback())
    }

    /// The server's address now (for the local server, the address it
    /// was last attached at).
    pub fn base_url(&self) -> String {
        match &self.target {
            Target::Fixed { base_url, .. } => base_url.clone(),
            Target::Local(server) => server.current().url().to_string(),
        }
    }

    /// The API key sent to the server, if any.
    pub fn api_key(&self) -> Option<String> {
        match &self.target {
            Target::Fixed { api_key, .. } => api_key.clone(),
            Target::Local(server) => server.current().api_key().map(str::to_string),
        }
    }

    /// `GET` or `POST` (with `body`) on `path` for `user_id`, through
    /// [`RemoteServer::call_at`], again after attaching anew when the
    /// local server could not be reached.
    fn call(
        &self,
        user_id: &UserId,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ToolFailure> {
        match &self.target {
            Target::Fixed { base_url, api_key } => {
                self.call_at(base_url, api_key.as_deref(), user_id, path, body)
            }
            Target::Local(server) => {
                // Proven before anything of value is sent.
                let attached = server.proven().map_err(|error| {
                    ToolFailure::Unavailable(format!("the local server is gone: {error}"))
                })?;
                let first = self.call_at(attached.url(), attached.api_key(), user_id, path, body);
                if !matches!(first, Err(ToolFailure::Unavailable(_))) {
                    return first;
                }
                let attached = server.reattach(&attached).map_err(|error| {
                    ToolFailure::Unavailable(format!("the local server is gone: {error}"))
                })?;
                self.call_at(attached.url(), attached.api_key(), user_id, path, body)
            }
        }
    }

    /// `GET` or `POST` (with `body`) on `path` of `base_url` for `user_id`
    /// (sent in [`crate::client::USER_HEADER`] too, for a load balancer in
    /// front of several nodes); the JSON answer, or the server's reason
    /// when it refused.
    fn call_at(
        &self,
        base_url: &str,
        api_key: Option<&str>,
        user_id: &UserId,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ToolFailure> {
        let url = format!("{base_url}{path}");
        let authorization = api_key.map(|key| format!("Bearer {key}"));
        let sent = match body {
            Some(body) => {
                let mut request = self
                    .agent
                    .post(&url)
                    .header(crate::client::USER_HEADER, user_id.as_str());
                if let Some(value) = &authorization {
                    request = request.header("Authorization", value);
                }
                request.send_json(body)
            }
            None => {
                let mut request = self
                    .agent
                    .get(&url)
                    .header(crate::client::USER_HEADER, user_id.as_str());
                if let Some(value) = &authorization {
                    request = request.header("Authorization", value);
                }
                request.call()
            }
        };
        let mut response = sent.map_err(|error| {
            ToolFailure::Unavailable(format!("cannot reach {base_url}: {error}"))
        })?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status == 200 {
            return Ok(value);
        }
        let reason = value
            .pointer("/detail/reason")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| text.chars().take(300).collect());
        let errors = value
            .pointer("/detail/errors")
            .cloned()
            .unwrap_or(Value::Null);
        Err(ToolFailure::Refused {
            status,
            reason,
            errors,
        })
    }
}

/// Why a tool call failed; shown to the agent as a tool error.
#[derive(Debug)]
pub enum ToolFailure {
    /// The request was refused (bad arguments, unknown session, ...).
    Refused {
        /// The HTTP status the same request gets from the API.
        status: u16,
        /// The reason, as the API words it.
        reason: String,
        /// Field errors, when the arguments were invalid.
        errors: Value,
    },
    /// The memory could not be reached or failed.
    Unavailable(String),
}

impl ToolFailure {
    fn invalid(errors: Vec<FieldError>) -> ToolFailure {
        let reason = errors
            .iter()
            .map(|error| format!("{}: {}", error.field, error.message))
            .collect::<Vec<_>>()
            .join("; ");
        ToolFailure::Refused {
            status: 422,
            reason: format!("invalid arguments: {reason}"),
            errors: serde_json::to_value(&errors).unwrap_or(Value::Null),
        }
    }

    fn into_result(self) -> CallToolResult {
        let body = match self {
            ToolFailure::Refused {
                status,
                reason,
                errors,
            } => json!({ "status": status, "reason": reason, "errors": errors }),
            ToolFailure::Unavailable(reason) => json!({ "status": 503, "reason": reason }),
        };
        let text = body["reason"].as_str().unwrap_or("failed").to_string();
        let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
        result.structured_content = Some(body);
        result
    }
}

impl From<precedent_service::ServiceError> for ToolFailure {
    fn from(error: precedent_service::ServiceError) -> ToolFailure {
        let api_error = crate::api::error::ApiError::from(error);
        ToolFailure::Refused {
            status: api_error.status().as_u16(),
            reason: api_error.reason().to_string(),
            errors: Value::Null,
        }
    }
}

impl Backend {
    async fn add(&self, user_id: &UserId, body: Value) -> Result<Value, ToolFailure> {
        match self {
            Backend::Local(service) => {
                let request = dto::parse_add(&body).map_err(ToolFailure::invalid)?;
                let response = json!({
                    "success": true,
                    "request_id": request.request_id(),
                    "user_id": request.user_id(),
                    "session_id": request.session_id(),
                });
                service.add(request).await?;
                Ok(response)
            }
            Backend::Remote(server) => remote(server, user_id, "/v1/add", Some(body)).await,
        }
    }

    async fn search(&self, user_id: &UserId, body: Value) -> Result<Value, ToolFailure> {
        match self {
            Backend::Local(service) => {
                let request = dto::parse_search(&body).map_err(ToolFailure::invalid)?;
                let items = service.search(request).await?;
                let data: Vec<dto::ItemDto> = items.into_iter().map(Into::into).collect();
                Ok(json!({ "data": data }))
            }
            Backend::Remote(server) => remote(server, user_id, "/v1/search", Some(body)).await,
        }
    }

    async fn explain(&self, user_id: &UserId, body: Value) -> Result<Value, ToolFailure> {
        match self {
            Backend::Local(service) => {
                let request = dto::parse_search(&body).map_err(ToolFailure::invalid)?;
                let explained = service.explain(request).await?;
                serde_json::to_value(&explained)
                    .map_err(|error| ToolFailure::Unavailable(error.to_string()))
            }
            Backend::Remote(server) => {
                remote(server, user_id, "/v1/search/explain", Some(body)).await
            }
        }
    }

    async fn list_sessions(
        &self,
        user_id: &UserId,
        page: PageRequest,
    ) -> Result<Value, ToolFailure> {
        match self {
            Backend::Local(service) => {
                let page = api::sessions_page(service, user_id.clone(), page).await?;
                Ok(serde_json::from_slice(&page).unwrap_or(Value::Null))
            }
            Backend::Remote(server) => {
                let mut path = format!(
                    "/v1/sessions?user_id={}&limit={}",
                    encode(user_id),
                    page.limit
                );
                if let Some(after) = &page.after {
                    path.push_str("&cursor=");
                    path.push_str(&listing::encode_cursor(after));
                }
                remote(server, user_id, &path, None).await
            }
        }
    }

    async fn session(
        &self,
        user_id: &UserId,
        session_id: &SessionId,
    ) -> Result<Value, ToolFailure> {
        match self {
            Backend::Local(service) => {
                let detail = service
                    .session_detail(user_id.clone(), session_id.clone())
                    .await?
                    .ok_or_else(|| ToolFailure::Refused {
                        status: 404,
                        reason: format!("no session {:?} for this user_id", session_id.as_str()),
                        errors: Value::Null,
                    })?;
                Ok(dto::session_detail_json(&detail))
            }
            Backend::Remote(server) => {
                let path = format!(
                    "/v1/sessions/{}?user_id={}",
                    encode(session_id),
                    encode(user_id)
                );
                remote(server, user_id, &path, None).await
            }
        }
    }
}

/// A tool argument a `domain` check refused, as the API answers it (422).
fn invalid_argument(invalid: precedent_core::domain::Invalid) -> ToolFailure {
    ToolFailure::invalid(vec![invalid.into()])
}

/// A blocking HTTP call for `user_id`, off the async workers.
async fn remote(
    server: &RemoteServer,
    user_id: &UserId,
    path: &str,
    body: Option<Value>,
) -> Result<Value, ToolFailure> {
    let server = server.clone();
    let user_id = user_id.clone();
    let path = path.to_string();
    tokio::task::spawn_blocking(move || server.call(&user_id, &path, body.as_ref()))
        .await
        .map_err(|error| ToolFailure::Unavailable(error.to_string()))?
}

/// The MCP server: one user scope over one backend.
pub struct MemoryServer {
    backend: Backend,
    user_id: UserId,
    /// The agent's checkout, which answers are checked against.
    checkout: Option<std::path::PathBuf>,
    /// The backend refused to read the checkout (a server started by hand
    /// without --checkout-root): searches no longer name it, so each costs
    /// one request, not a refused one and its retry.
    checkout_refused: std::sync::atomic::AtomicBool,
}

impl MemoryServer {
    /// A server answering for `user_id` from `backend`.
    pub fn new(backend: Backend, user_id: UserId) -> MemoryServer {
        MemoryServer {
            backend,
            user_id,
            checkout: None,
            checkout_refused: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The same, marking each experience it answers with how it stands
    /// against the checkout at `root` (when the backend runs on this host).
    pub fn with_checkout(mut self, root: std::path::PathBuf) -> MemoryServer {
        let local = match &self.backend {
            Backend::Local(_) => true,
            Backend::Remote(server) => server.is_local(),
        };
        self.checkout = local.then_some(root);
        self
    }

    /// Serves MCP on stdin/stdout until the client closes them.
    pub async fn serve_stdio(self) -> anyhow::Result<()> {
        let running = self
            .serve(framing::LineTransport::new(
                tokio::io::stdin(),
                tokio::io::stdout(),
            ))
            .await
            .map_err(|error| anyhow::anyhow!("MCP handshake failed: {error}"))?;
        running
            .waiting()
            .await
            .map_err(|error| anyhow::anyhow!("MCP service stopped: {error}"))?;
        Ok(())
    }

    /// Runs one tool by name with its arguments.
    pub async fn call(&self, name: &str, arguments: &JsonObject) -> Result<Value, ToolFailure> {
        match name {
            "search_memory" => self.search_memory(arguments).await,
            "record_experience" => self.record_experience(arguments).await,
            "list_sessions" => {
                let page =
                    PageRequest::from_arguments(arguments, MCP_PAGE_LIMIT).map_err(|reason| {
                        ToolFailure::Refused {
                            status: 422,
                            reason,
                            errors: Value::Null,
                        }
                    })?;
                self.backend.list_sessions(&self.user_id, page).await
            }
            "get_session" => {
                let session_id = required_string(arguments, "session_id")?;
                let session_id = SessionId::new(session_id).map_err(invalid_argument)?;
                self.backend.session(&self.user_id, &session_id).await
            }
            _ => Err(ToolFailure::Refused {
                status: 404,
                reason: format!("no tool {name:?}"),
                errors: Value::Null,
            }),
        }
    }

    /// For a search that found nothing in a scope holding no session: says
    /// so, naming the scope (a new repository, or a mistyped --user-id),
    /// rather than "nothing relevant".
    async fn empty_scope_text(&self, name: &str, value: &Value) -> Option<String> {
        let found_nothing = name == "search_memory"
            && value
                .get("data")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty);
        if !found_nothing {
            return None;
        }
        let page = PageRequest {
            limit: 1,
            after: None,
        };
        let sessions = self.backend.list_sessions(&self.user_id, page).await.ok()?;
        let holds_none = sessions
            .get("data")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty);
        holds_none.then(|| no_memory_text(&self.user_id))
    }

    async fn search_memory(&self, arguments: &JsonObject) -> Result<Value, ToolFailure> {
        let query = required_string(arguments, "query")?;
        let top_k = match arguments.get("top_k") {
            None | Some(Value::Null) => DEFAULT_TOP_K,
            Some(value) => match value.as_u64() {
                Some(top_k) if (1..=MAX_TOP_K).contains(&top_k) => top_k,
                _ => {
                    return Err(ToolFailure::invalid(vec![FieldError {
                        field: "top_k".to_string(),
                        message: format!("must be an integer from 1 to {MAX_TOP_K}"),
                    }]));
                }
            },
        };
        let explain = match arguments.get("explain") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(explain)) => *explain,
            Some(_) => {
                return Err(ToolFailure::invalid(vec![FieldError {
                    field: "explain".to_string(),
                    message: "must be a boolean".to_string(),
                }]));
            }
        };
        // A query past the Search body limit is refused here, as the API
        // would refuse it (413), instead of being cut off mid-send.
        let limit = crate::api::limits::MAX_SEARCH_BODY_BYTES - QUERY_BODY_OVERHEAD;
        if query.len() > limit {
            return Err(ToolFailure::Refused {
                status: 413,
                reason: format!(
                    "the query is {} bytes; a search takes at most {limit}: send the task's \
                     title, error and the names it involves",
                    query.len()
                ),
                errors: Value::Null,
            });
        }
        let mut body = json!({ "user_id": self.user_id, "query": query, "top_k": top_k });
        if let Some(max_chars) = arguments.get("max_chars") {
            body["max_chars"] = max_chars.clone();
        }
        if let Some(root) = &self.checkout
            && !self.checkout_refused.load(Ordering::Relaxed)
        {
            body["repo"] = Value::String(root.to_string_lossy().into_owned());
        }
        let answer = if explain {
            self.backend.explain(&self.user_id, body.clone()).await
        } else {
            self.backend.search(&self.user_id, body.clone()).await
        };
        match answer {
            // A server that reads no checkouts (one started by hand,
            // without --checkout-root) answers without the stale marks.
            Err(ToolFailure::Refused {
                status: 403,
                reason,
                ..
            }) if body.get("repo").is_some() && reason.starts_with("repo:") => {
                self.checkout_refused.store(true, Ordering::Relaxed);
                let mut body = body;
                if let Some(object) = body.as_object_mut() {
                    object.remove("repo");
                }
                if explain {
                    self.backend.explain(&self.user_id, body).await
                } else {
                    self.backend.search(&self.user_id, body).await
                }
            }
            answer => answer,
        }
    }

    async fn record_experience(&self, arguments: &JsonObject) -> Result<Value, ToolFailure> {
        let session_id = required_string(arguments, "session_id")?;
        let mut note_digest = None;
        let messages = match (arguments.get("messages"), arguments.get("note")) {
            (Some(messages @ Value::Array(_)), _) => messages.clone(),
            (None | Some(Value::Null), Some(Value::String(note))) if !note.trim().is_empty() => {
                note_digest = Some(note_request_id(&session_id, note));
                // The note is its own task: its first line names it.
                json!([{ "role": "user", "content": note }])
            }
            _ => {
                return Err(ToolFailure::invalid(vec![FieldError {
                    field: "messages".to_string(),
                    message: "give messages (an array of {role, content}) or a note (a string)"
                        .to_string(),
                }]));
            }
        };
        // Unique per call: a retried call is a new Add, as the agent meant;
        // but the same note for the same session is one Add, however often
        // it is recorded.
        let request_id = note_digest.unwrap_or_else(|| {
            format!(
                "mcp-{}-{}",
                precedent_core::time::now_ms(),
                NEXT_REQUEST.fetch_add(1, Ordering::Relaxed)
            )
        });
        let body = json!({
            "user_id": self.user_id,
            "session_id": session_id,
            "request_id": request_id,
            "messages": messages,
        });
        self.backend.add(&self.user_id, body).await
    }
}

static NEXT_REQUEST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The request id of a note: the same session and text give the same id,
/// so the store keeps the note once (Adds are idempotent by request id).
fn note_request_id(session_id: &str, note: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(session_id.as_bytes());
    hasher.update([0]);
    hasher.update(note.trim().as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("mcp-note-{hex}")
}

/// Bytes of a Search body beside its query (user id, checkout, options).
const QUERY_BODY_OVERHEAD: usize = 16 * 1024;

fn required_string(arguments: &JsonObject, field: &str) -> Result<String, ToolFailure> {
    match arguments.get(field) {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
        _ => Err(ToolFailure::invalid(vec![FieldError {
            field: field.to_string(),
            message: "required, a non-empty string".to_string(),
        }])),
    }
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The tools this server offers, with their input schemas.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "search_memory",
            "Search the memory of past coding sessions in this repository for experience \
             that helps with a task: give the task's text (an issue, an error message, a \
             traceback, file or function names). Returns the most relevant past sessions' \
             fixes, errors and steps, best first, each with the session it came from. With \
             explain=true, returns every candidate session with its ranking features and \
             the noise filter's verdict instead.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "The task, error or question, as text." },
                    "top_k": { "type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": DEFAULT_TOP_K, "description": "The most items to return." },
                    "explain": { "type": "boolean", "default": false, "description": "Return the ranking breakdown instead of the items." },
                    "max_chars": { "type": "integer", "minimum": 1, "description": "The most characters of content to return." }
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "record_experience",
            "Record experience for later tasks: a trajectory (messages: the task, reasoning, \
             commands, their output, tracebacks, diffs) or a short note. Messages sent under \
             the same session_id add to one session. It is stored durably and searchable \
             when this returns.",
            schema(json!({
                "type": "object",
                "properties": {
                    "session_id": { "type": "string", "description": "The session (task) this belongs to." },
                    "messages": {
                        "type": "array",
                        "description": "Messages in order; the first user message of a session is its task statement.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "role": { "type": "string", "enum": ["user", "assistant"] },
                                "content": { "type": "string" }
                            },
                            "required": ["role", "content"]
                        }
                    },
                    "note": { "type": "string", "description": "A note to keep, when there are no messages." }
                },
                "required": ["session_id"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "list_sessions",
            "List the sessions remembered for this repository, most recent first, each with \
             its task, outcome and the files, symbols and errors it touched; 100 at a time \
             unless `limit` says otherwise, with `next_cursor` to pass back for more.",
            schema(json!({
                "type": "object",
                "properties": {
                    "limit": { "type": "integer", "minimum": 1, "maximum": listing::MAX_PAGE_LIMIT, "description": "At most this many sessions (default 100)." },
                    "cursor": { "type": "string", "pattern": listing::CURSOR_PATTERN, "description": "The next_cursor of the page before." }
                },
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "get_session",
            "Read one remembered session's whole record: task, files and symbols changed, \
             errors, tests, commands, outcome, and its evidence with where each came from.",
            schema(json!({
                "type": "object",
                "properties": {
                    "session_id": { "type": "string", "description": "A session id from list_sessions or search_memory." }
                },
                "required": ["session_id"],
                "additionalProperties": false
            })),
        ),
    ]
}

/// What a search in a scope holding no session answers.
fn no_memory_text(user_id: &UserId) -> String {
    format!(
        "No memory for {user_id} yet: no session was recorded or imported under this key \
         (record_experience adds one; `precedent import` imports a repository's history \
         or agent transcripts)."
    )
}

/// Text for the agent: search items as readable blocks, anything else as
/// pretty JSON.
fn render(name: &str, value: &Value) -> String {
    if name == "search_memory"
        && let Some(items) = value.get("data").and_then(Value::as_array)
    {
        if items.is_empty() {
            return "No relevant past experience found.".to_string();
        }
        let mut text = String::new();
        for (rank, item) in items.iter().enumerate() {
            let kind = item.get("kind").and_then(Value::as_str).unwrap_or("memory");
            let session = item
                .get("session_id")
                .and_then(Value::as_str)
                .unwrap_or("?");
            let score = item.get("score").and_then(Value::as_f64).unwrap_or(0.0);
            let content = item.get("content").and_then(Value::as_str).unwrap_or("");
            text.push_str(&format!(
                "[{}] {kind} from session {session} (score {score:.3})\n{content}\n\n",
                rank + 1
            ));
        }
        return text.trim_end().to_string();
    }
    serde_json::to_string_pretty(value).unwrap_or_default()
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("precedent", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "precedent remembers past coding sessions of user scope {:?}. Before working on \
                 a task, call search_memory with the task's text; after finishing, call \
                 record_experience with what was done.",
                self.user_id.as_str()
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if !tools().iter().any(|tool| tool.name == request.name) {
            return Err(McpError::invalid_params(
                format!("no tool {:?}", request.name),
                None,
            ));
        }
        let arguments = request.arguments.unwrap_or_default();
        let result = match self.call(&request.name, &arguments).await {
            Ok(value) => {
                let text = match self.empty_scope_text(&request.name, &value).await {
                    Some(text) => text,
                    None => render(&request.name, &value),
                };
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(value);
                result
            }
            Err(failure) => failure.into_result(),
        };
        Ok(result.into())
    }
}

/// The root of the git work tree enclosing `directory`, if any.
pub fn checkout_root(directory: &std::path::Path) -> Option<std::path::PathBuf> {
    let repository = git2::Repository::discover(directory).ok()?;
    let root = repository.workdir()?;
    Some(root.canonicalize().unwrap_or_else(|_| root.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_schema_is_an_object_with_its_required_fields_declared() {
        for tool in tools() {
            let schema = Value::Object((*tool.input_schema).clone());
            assert_eq!(schema["type"], "object", "{}", tool.name);
            for required in schema["required"].as_array().into_iter().flatten() {
                let field = required.as_str().unwrap_or("");
                assert!(
                    schema["properties"].get(field).is_some(),
                    "{}: {field}",
                    tool.name
                );
            }
        }
    }

    #[test]
    fn search_items_render_as_numbered_blocks_and_an_empty_answer_says_so() {
        let value = json!({ "data": [
            { "kind": "experience", "session_id": "s1", "score": 1.5, "content": "fixed foo" }
        ]});
        let text = render("search_memory", &value);
        assert!(text.starts_with("[1] experience from session s1 (score 1.500)\nfixed foo"));
        assert_eq!(
            render("search_memory", &json!({ "data": [] })),
            "No relevant past experience found."
        );
    }
}
