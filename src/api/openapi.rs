//! The OpenAPI 3.1 document of the HTTP API (`GET /openapi.json`),
//! generated with `utoipa` from the response types and from the request
//! types below, which mirror what [`super::dto`]'s parsers accept (a test
//! holds the two together).
//!
//! Every operation also lists the error answers any route can give (bad
//! JSON, a missing key, a body too large, invalid fields, overload), so a
//! client generated from the document knows every status it can meet.

use serde::Deserialize;
use serde_json::Value;
use utoipa::OpenApi;
use utoipa::ToSchema;
use utoipa::openapi::{RefOr, Response, ResponseBuilder, content::ContentBuilder};

use super::dto;
use precedent_core::domain::{MAX_CONTENT_BYTES, MAX_ID_BYTES, MAX_MESSAGES_PER_ADD, MAX_TOP_K};

/// The body of an Add (`POST /add`, `POST /v1/add`).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = AddRequest)]
#[allow(dead_code)] // read by the document, not by the parser
pub struct AddBody {
    /// Unique per Add within a user: an Add retried with the same id and
    /// body is stored once; a different body under a used id is 409.
    #[schema(min_length = 1, max_length = 4096)]
    pub request_id: String,
    /// The memory scope; searches never cross it.
    #[schema(min_length = 1, max_length = 4096)]
    pub user_id: String,
    /// The trajectory these messages belong to; Adds under one session
    /// extend it.
    #[schema(min_length = 1, max_length = 4096)]
    pub session_id: String,
    /// Messages in order.
    #[schema(min_items = 1, max_items = 10000)]
    pub messages: Vec<MessageBody>,
}

/// One message of a trajectory.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = Message)]
#[allow(dead_code)]
pub struct MessageBody {
    /// Who wrote it.
    pub role: RoleName,
    /// Its text, or parts, kept as text.
    pub content: ContentBody,
    /// Unix milliseconds.
    #[schema(minimum = -62135596800000_i64, maximum = 253402300799999_i64)]
    pub timestamp: Option<i64>,
}

/// A message's author.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = Role)]
pub enum RoleName {
    /// The task giver or the environment.
    User,
    /// The agent.
    Assistant,
}

/// Text, or an array of parts (text, tool calls and results, images; images
/// are not kept).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(as = Content)]
#[allow(dead_code)]
pub enum ContentBody {
    /// Plain text.
    Text(NonEmptyText),
    /// Parts; at least one that gives text.
    Parts(Vec<ContentPart>),
}

/// Non-empty text.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(value_type = String, min_length = 1)]
#[allow(dead_code)]
pub struct NonEmptyText(pub String);

/// One part of a message's content: text, an image (not kept), reasoning,
/// a tool call, a tool result, or any other typed part carrying text. Its
/// schema in the document is [`content_part_schema`]; this type checks the
/// same rules when a test reads a body the way the document describes it.
#[derive(Debug, ToSchema)]
#[schema(as = ContentPart)]
#[allow(dead_code)]
pub struct ContentPart {
    /// The part's type.
    #[schema(rename = "type")]
    pub kind: String,
}

impl<'de> Deserialize<'de> for ContentPart {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| serde::de::Error::custom("a part needs a string type"))?;
        let is_string = |key: &str| value.get(key).is_some_and(Value::is_string);
        let is_name = |value: Option<&Value>| {
            value
                .and_then(Value::as_str)
                .is_some_and(|name| !name.is_empty())
        };
        let valid = if dto::SKIPPED_PART_TYPES.contains(&kind) {
            true
        } else if kind == dto::THINKING_PART_TYPE {
            is_string("thinking")
        } else if dto::CALL_PART_TYPES.contains(&kind) {
            is_name(value.get("name")) || is_name(value.pointer("/function/name"))
        } else if dto::RESULT_PART_TYPES.contains(&kind) {
            matches!(
                value.get("is_error"),
                None | Some(Value::Null | Value::Bool(_))
            )
        } else {
            is_string("text")
        };
        if valid {
            Ok(Self {
                kind: kind.to_string(),
            })
        } else {
            Err(serde::de::Error::custom(format!("invalid {kind} part")))
        }
    }
}

/// The JSON Schema of [`ContentPart`], the rules of `dto`'s part parser.
fn content_part_schema() -> Value {
    use serde_json::json;
    let known: Vec<&str> = ["text", dto::THINKING_PART_TYPE]
        .into_iter()
        .chain(dto::SKIPPED_PART_TYPES)
        .chain(dto::CALL_PART_TYPES)
        .chain(dto::RESULT_PART_TYPES)
        .collect();
    let name = json!({"type": "string", "minLength": 1});
    json!({
        "description": "One part of a message's content. `text` parts, and parts of any other type with a string `text` (`input_text`, `output_text`, ...), give their text; `thinking` parts their `thinking`; images (`image_url`, `image`, `input_image`) and `redacted_thinking` are not kept. A tool call (`tool_use`, `server_tool_use`, `tool_call`, `function_call`, `custom_tool_call`) is kept as the JSON object `{\"name\", \"arguments\"}` on a line of its own (name from `name` or `function.name`, arguments from `input`, `arguments` or `function.arguments`); a tool result (`tool_result`, `function_call_output`, `custom_tool_call_output`) as the text of its `content` or `output`, after `ERROR: ` when `is_error` is true. Parts are joined by newlines.",
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"type": "string"}},
        "anyOf": [
            {"properties": {"type": {"const": "text"}, "text": {"type": "string"}}, "required": ["text"]},
            {"properties": {"type": {"enum": dto::SKIPPED_PART_TYPES}}},
            {"properties": {"type": {"const": dto::THINKING_PART_TYPE}, "thinking": {"type": "string"}},
             "required": ["thinking"]},
            {"properties": {"type": {"enum": dto::CALL_PART_TYPES}, "name": name}, "required": ["name"]},
            {"properties": {"type": {"enum": dto::CALL_PART_TYPES},
                            "function": {"type": "object", "properties": {"name": name}, "required": ["name"]}},
             "required": ["function"]},
            {"properties": {"type": {"enum": dto::RESULT_PART_TYPES}, "is_error": {"type": ["boolean", "null"]}}},
            {"properties": {"type": {"not": {"enum": known}}, "text": {"type": "string"}}, "required": ["text"]}
        ]
    })
}

/// What an array of parts must contain: one part that gives text.
fn part_with_text_schema() -> Value {
    use serde_json::json;
    let not_plain: Vec<&str> = [dto::THINKING_PART_TYPE]
        .into_iter()
        .chain(dto::SKIPPED_PART_TYPES)
        .chain(dto::CALL_PART_TYPES)
        .chain(dto::RESULT_PART_TYPES)
        .collect();
    let tools: Vec<&str> = dto::CALL_PART_TYPES
        .into_iter()
        .chain(dto::RESULT_PART_TYPES)
        .collect();
    json!({
        "anyOf": [
            {"type": "object", "required": ["type", "text"],
             "properties": {"type": {"type": "string", "not": {"enum": not_plain}},
                            "text": {"type": "string", "minLength": 1}}},
            {"type": "object", "required": ["type", "thinking"],
             "properties": {"type": {"const": dto::THINKING_PART_TYPE},
                            "thinking": {"type": "string", "minLength": 1}}},
            {"type": "object", "required": ["type"], "properties": {"type": {"enum": tools}}}
        ]
    })
}

/// The body of a Search (`POST /search`, `POST /v1/search`,
/// `POST /v1/search/explain`).
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = SearchRequest)]
#[allow(dead_code)]
pub struct SearchBody {
    /// The new task's text.
    pub query: ContentBody,
    /// The memory scope to search.
    #[schema(min_length = 1, max_length = 4096)]
    pub user_id: String,
    /// The most items to return.
    #[schema(minimum = 1, maximum = 1000)]
    pub top_k: u32,
    /// Accepted and ignored (the platform's options).
    pub options: Option<Vec<Value>>,
    /// The most characters of content to return (default: the server's
    /// search budget).
    #[schema(minimum = 1, maximum = 10000000)]
    pub max_chars: Option<u64>,
    /// The caller's checkout (an absolute path on the server's host): each
    /// experience returned says, in `stale`, whether the files it changed
    /// still exist, the definitions it changed are still defined, and what
    /// its fix wrote is still there. Read by the local server `mcp`, `hook`
    /// and `import` start, and under a server's `--checkout-root`
    /// directories; elsewhere it is refused with 403.
    #[schema(max_length = 4096, pattern = "^/")]
    pub repo: Option<String>,
}

/// An error answer.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct ErrorBody {
    /// What went wrong.
    pub detail: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    /// In words.
    pub reason: String,
    /// Per field, when fields were invalid (422).
    pub errors: Option<Vec<FieldErrorBody>>,
}

/// One invalid field.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = FieldError)]
#[allow(dead_code)]
pub struct FieldErrorBody {
    /// The field's path (`messages[2].role`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// A list answer.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct UserList {
    /// Users holding sessions, most recently active first.
    pub data: Vec<dto::UserSummaryDto>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A list answer.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct SessionList {
    /// Sessions of the user, most recently updated first.
    pub data: Vec<dto::SessionSummaryDto>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A page of a session's messages.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct MessageList {
    /// Messages of the session, in session order.
    pub data: Vec<dto::MessageDto>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// `GET /v1/sessions/{session_id}`: the record's own fields (each evidence
/// item also carries `source`: the Add's request id and the message's index
/// within it), with the session's id, size, time and diagnostics.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct SessionDetailBody {
    /// The record.
    #[serde(flatten)]
    pub record: precedent_ingest::SessionRecord,
    /// The session.
    pub session_id: String,
    /// Messages stored.
    pub num_messages: i64,
    /// RFC 3339: when the session's latest dated message was written (a
    /// transcript's timestamp, a commit's time); when no message is dated,
    /// when its record was last derived.
    pub updated_at: String,
    /// What the extractors could not parse.
    pub diagnostics: Vec<precedent_ingest::Diagnostic>,
}

/// Every candidate of a search with its features and the gate's verdict.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct Explanation {
    /// The facts read from the query (terms, names, paths, errors, tests,
    /// language).
    pub query: Value,
    /// Sessions in the user's scope.
    pub num_sessions: u64,
    /// Kept candidates first, best first; each with `session_id`,
    /// `features`, `score`, `baseline_rank` (its place by plain session
    /// BM25, 1 the best), `bm25_margin` (its session BM25 over the best
    /// other candidate's) and `dropped` (null when kept, else why).
    pub candidates: Vec<Value>,
    /// A candidate less likely relevant than this is dropped.
    pub keep_probability: f32,
    /// A candidate whose `bm25_margin` is at least this stands out: kept
    /// whatever its language or probability.
    pub standout_margin: f32,
    /// With `repo`: how each kept candidate stands against the checkout,
    /// by session id (the same fields as an item's `stale`).
    pub stale: Option<std::collections::BTreeMap<String, precedent_core::domain::Staleness>>,
}

/// What a user deletion removed.
#[derive(Debug, Deserialize, ToSchema)]
#[allow(dead_code)]
pub struct UserDeleted {
    /// The user.
    pub user_id: String,
    /// Counts of what was removed.
    pub deleted: Value,
}

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "precedent",
        description = "A memory for coding agents: Add stores agent trajectories, Search returns the past experience that helps with a new task. Speaks the Agent Memory Leaderboard Add/Search contract.",
    ),
    paths(
        super::add, super::search, super::explain,
        super::list_users, super::list_sessions, super::session_detail, super::session_messages, super::delete_user,
        super::health, super::metrics, super::ui_page, super::openapi_json,
    ),
    components(schemas(AddBody, MessageBody, RoleName, ContentBody, ContentPart, SearchBody, ErrorBody)),
    modifiers(&V1Aliases, &SecurityAndErrors),
    tags((name = "contract", description = "The Add/Search contract"),
         (name = "inspection", description = "What was stored and derived"),
         (name = "operations", description = "Health, metrics, the page, this document")),
)]
pub struct ApiDoc;

/// The contract's routes also served under `/v1`, by the same handlers.
pub const V1_ALIASES: [&str; 3] = ["/add", "/search", "/health"];

/// The `/v1` alias of `path`.
pub fn v1_alias(path: &str) -> String {
    format!("/v1{path}")
}

/// Documents each of [`V1_ALIASES`] under `/v1` by a copy of its entry:
/// each operation the same but for its id (`_v1` appended) and its
/// summary, which names the original.
struct V1Aliases;

impl utoipa::Modify for V1Aliases {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for path in V1_ALIASES {
            let Some(mut item) = openapi.paths.paths.get(path).cloned() else {
                continue;
            };
            for (method, operation) in [
                ("GET", &mut item.get),
                ("POST", &mut item.post),
                ("PUT", &mut item.put),
                ("DELETE", &mut item.delete),
            ] {
                if let Some(operation) = operation {
                    operation.operation_id = operation.operation_id.take().map(|id| id + "_v1");
                    operation.summary = Some(format!("The same as `{method} {path}`."));
                    operation.description = None;
                }
            }
            openapi.paths.paths.insert(v1_alias(path), item);
        }
    }
}

/// Adds the key schemes and the error answers every route shares.
struct SecurityAndErrors;

/// Error answers any protected route may give.
const SHARED_ERRORS: [(&str, &str); 9] = [
    ("400", "The body is not JSON."),
    (
        "401",
        "A key is required and none, or a wrong one, was given.",
    ),
    (
        "403",
        "A browser page of another origin sent it, or the key may not touch this user.",
    ),
    ("408", "The body did not arrive in time."),
    ("413", "The body is larger than the limit."),
    ("415", "The body is not declared `application/json`."),
    (
        "421",
        "The Host named is not served (neither the listen address nor an allowed host).",
    ),
    (
        "422",
        "Fields are missing or invalid; `detail.errors` lists them.",
    ),
    (
        "503",
        "Overloaded, timed out or shutting down; retry after `Retry-After` seconds.",
    ),
];

/// Answers only a request with a body can get.
const BODY_ERRORS: [&str; 3] = ["408", "413", "415"];

impl utoipa::Modify for SecurityAndErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            utoipa::openapi::security::SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build(),
            ),
        );
        components.add_security_scheme(
            "x_api_key",
            utoipa::openapi::security::SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new(
                "X-Api-Key",
            ))),
        );
        let error = |description: &str| -> RefOr<Response> {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                                "ErrorBody",
                            ))))
                            .build(),
                    )
                    .build(),
            )
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            let open = matches!(
                path.as_str(),
                "/health" | "/v1/health" | "/metrics" | "/ui" | "/openapi.json"
            );
            for operation in [
                &mut item.get,
                &mut item.post,
                &mut item.delete,
                &mut item.put,
            ]
            .into_iter()
            .flatten()
            {
                if open {
                    // Open routes still check the Host.
                    for (status, description) in SHARED_ERRORS {
                        if status == "421" {
                            operation
                                .responses
                                .responses
                                .entry(status.to_string())
                                .or_insert_with(|| error(description));
                        }
                    }
                    continue;
                }
                for (status, description) in SHARED_ERRORS {
                    if BODY_ERRORS.contains(&status) && operation.request_body.is_none() {
                        continue;
                    }
                    operation
                        .responses
                        .responses
                        .entry(status.to_string())
                        .or_insert_with(|| error(description));
                }
                operation.security = Some(vec![
                    utoipa::openapi::security::SecurityRequirement::new(
                        "bearer",
                        Vec::<String>::new(),
                    ),
                    utoipa::openapi::security::SecurityRequirement::new(
                        "x_api_key",
                        Vec::<String>::new(),
                    ),
                    // Without a configured key, no authentication.
                    utoipa::openapi::security::SecurityRequirement::default(),
                ]);
            }
        }
    }
}

/// The document as JSON.
pub fn document() -> Value {
    let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap_or(Value::Null);
    // What utoipa's types cannot say: which parts are accepted, and that an
    // array of parts holds at least one that gives text (the parsers refuse
    // content without text).
    if let Some(part) = document.pointer_mut("/components/schemas/ContentPart") {
        *part = content_part_schema();
    }
    if let Some(branches) = document
        .pointer_mut("/components/schemas/Content/oneOf")
        .and_then(Value::as_array_mut)
    {
        for branch in branches.iter_mut() {
            if branch.get("type").and_then(Value::as_str) == Some("array")
                && let Some(branch) = branch.as_object_mut()
            {
                branch.insert("minItems".to_string(), Value::from(1));
                branch.insert("contains".to_string(), part_with_text_schema());
            }
        }
    }
    document
}

/// Limits the document states, kept equal to the parser's (checked below).
const _: () = {
    assert!(MAX_ID_BYTES == 4096);
    assert!(MAX_MESSAGES_PER_ADD == 10_000);
    assert!(MAX_TOP_K == 1000);
    assert!(MAX_CONTENT_BYTES == 16 * 1024 * 1024);
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_document_is_openapi_3_1_and_covers_every_route() {
        let document = document();
        assert!(
            document["openapi"]
                .as_str()
                .is_some_and(|version| version.starts_with("3.1"))
        );
        for path in [
            "/add",
            "/v1/add",
            "/search",
            "/v1/search",
            "/v1/search/explain",
            "/v1/users",
            "/v1/sessions",
            "/v1/sessions/{session_id}",
            "/v1/users/{user_id}",
            "/health",
            "/v1/health",
            "/metrics",
            "/ui",
            "/openapi.json",
        ] {
            assert!(document["paths"].get(path).is_some(), "{path} missing");
        }
        let add = &document["paths"]["/v1/add"]["post"]["responses"];
        for status in [
            "200", "400", "401", "403", "408", "413", "415", "421", "422", "503",
        ] {
            assert!(add.get(status).is_some(), "add lacks {status}");
        }
        let users = &document["paths"]["/v1/users"]["get"]["responses"];
        assert!(users.get("403").is_some() && users.get("415").is_none());
        assert!(document["paths"]["/health"]["get"]["responses"]["421"].is_object());
    }

    #[test]
    fn a_v1_alias_is_documented_as_its_original() {
        let document = document();
        for path in V1_ALIASES {
            let original = &document["paths"][path];
            let alias = &document["paths"][v1_alias(path).as_str()];
            let (method, operation) = original
                .as_object()
                .and_then(|item| item.iter().next())
                .unwrap_or_else(|| panic!("{path} has no operation"));
            let mut expected = operation.clone();
            expected["operationId"] = json!(format!(
                "{}_v1",
                operation["operationId"].as_str().unwrap_or_default()
            ));
            expected["summary"] = json!(format!("The same as `{} {path}`.", method.to_uppercase()));
            assert_eq!(alias[method], expected, "{path}");
            assert_eq!(alias.as_object().map(|item| item.len()), Some(1), "{path}");
        }
    }

    /// Bodies the document describes are what the parsers accept, and
    /// bodies the document rules out the parsers refuse.
    #[test]
    fn documented_request_types_agree_with_the_parsers() {
        let accepted = [
            json!({"request_id": "r", "user_id": "u", "session_id": "s",
                   "messages": [{"role": "user", "content": "text", "timestamp": 1}]}),
            json!({"request_id": "r", "user_id": "u", "session_id": "s",
                   "messages": [{"role": "assistant", "content": [{"type": "text", "text": "t"},
                                                                  {"type": "image_url", "image_url": {"url": "x"}}]}]}),
            json!({"request_id": "r", "user_id": "u", "session_id": "s",
                   "messages": [{"role": "assistant", "content": [
                       {"type": "thinking", "thinking": "t"},
                       {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                       {"type": "function_call", "name": "", "function": {"name": "f"}},
                       {"type": "output_text", "text": "x"},
                       {"type": "image", "source": {}}]},
                       {"role": "user", "content": [
                       {"type": "tool_result", "tool_use_id": "t1", "is_error": true, "content": "boom"},
                       {"type": "function_call_output", "output": [{"type": "input_text", "text": "ok"}]}]}]}),
        ];
        for body in accepted {
            assert!(serde_json::from_value::<AddBody>(body.clone()).is_ok());
            assert!(dto::parse_add(&body).is_ok(), "{body}");
        }
        let refused = [
            json!({"request_id": "r", "user_id": "u", "session_id": "s",
                   "messages": [{"role": "system", "content": "text"}]}),
            json!({"request_id": "r", "user_id": "u", "session_id": "s", "messages": [{"role": "user"}]}),
            json!({"user_id": "u", "session_id": "s", "messages": [{"role": "user", "content": "t"}]}),
        ];
        let parts_refused = [
            json!({"type": "audio", "audio": {}}),
            json!({"type": "text", "text": 1}),
            json!({"type": "tool_use", "name": "", "input": {}}),
            json!({"type": "tool_call", "function": {"arguments": "{}"}}),
            json!({"type": "tool_result", "is_error": 1}),
            json!({"type": "thinking", "signature": "s"}),
            json!({"text": "t"}),
        ];
        let refused = refused.into_iter().chain(parts_refused.into_iter().map(|part| {
            json!({"request_id": "r", "user_id": "u", "session_id": "s",
                   "messages": [{"role": "user", "content": [{"type": "text", "text": "t"}, part]}]})
        }));
        for body in refused {
            assert!(serde_json::from_value::<AddBody>(body.clone()).is_err());
            assert!(dto::parse_add(&body).is_err(), "{body}");
        }
        let search =
            json!({"query": "q", "user_id": "u", "top_k": 5, "options": ["x"], "max_chars": 100});
        assert!(serde_json::from_value::<SearchBody>(search.clone()).is_ok());
        assert!(dto::parse_search(&search).is_ok());
    }
}
