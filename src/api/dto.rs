//! Wire shapes: request bodies are parsed once, here, into validated domain
//! types, collecting every bad field; responses are serialized from domain
//! types. Unknown fields are ignored, as the contract asks. This module
//! reads the JSON shape only: the limits, the checks and their reasons are
//! `domain`'s, which builds every request.

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::FieldError;
use precedent_core::domain::{self, AddRequest, Invalid, MemoryItem, Message, Role, SearchRequest};
use precedent_core::time::rfc3339_from_ms;
use precedent_service::read::inspect::{SessionDetail, SessionSummary};

/// Collects field errors while a body is read.
#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    /// The value a `domain` check let through, or `None` with the field it
    /// refused and why recorded.
    fn checked<T>(&mut self, result: Result<T, Invalid>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(invalid) => {
                self.push(invalid.field, invalid.reason);
                None
            }
        }
    }

    fn finish<T>(self, value: Option<T>) -> Result<T, Vec<FieldError>> {
        match value {
            Some(value) if self.0.is_empty() => Ok(value),
            _ if self.0.is_empty() => Err(vec![FieldError {
                field: String::new(),
                message: "invalid request".to_string(),
            }]),
            _ => Err(self.0),
        }
    }
}

fn as_object<'a>(body: &'a Value, errors: &mut Errors) -> Option<&'a Map<String, Value>> {
    let object = body.as_object();
    if object.is_none() {
        errors.push("body", "must be a JSON object");
    }
    object
}

fn required_id(object: &Map<String, Value>, name: &str, errors: &mut Errors) -> Option<String> {
    match object.get(name) {
        None | Some(Value::Null) => errors.push(name, "field required"),
        Some(Value::String(text)) => {
            return errors
                .checked(domain::check_id(name, text))
                .map(|()| text.clone());
        }
        Some(_) => errors.push(name, "must be a string"),
    }
    None
}

/// Part types whose content is not kept (precedent remembers text).
pub const SKIPPED_PART_TYPES: [&str; 4] =
    ["image_url", "image", "input_image", "redacted_thinking"];
/// Part types of a tool call (Anthropic `tool_use`, OpenAI Responses
/// `function_call` / `custom_tool_call`, `tool_call` objects): kept as the
/// call's JSON object on a line of its own.
pub const CALL_PART_TYPES: [&str; 5] = [
    "tool_use",
    "server_tool_use",
    "tool_call",
    "function_call",
    "custom_tool_call",
];
/// Part types of a tool result (Anthropic `tool_result`, OpenAI Responses
/// outputs): kept as their text, after `ERROR: ` when `is_error`.
pub const RESULT_PART_TYPES: [&str; 3] = [
    "tool_result",
    "function_call_output",
    "custom_tool_call_output",
];
/// The reasoning part, whose text is under `thinking`.
pub const THINKING_PART_TYPE: &str = "thinking";

/// Text of a `content` or `query`: a non-empty string, or an array of parts,
/// each rendered as text (see [`part_text`]) and joined by newlines.
fn text_or_parts(value: Option<&Value>, field: &str, errors: &mut Errors) -> Option<String> {
    match value {
        None | Some(Value::Null) => errors.push(field, "field required"),
        Some(Value::String(text)) if text.is_empty() => errors.push(field, "must not be empty"),
        Some(Value::String(text)) => return Some(text.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            let mut ok = true;
            for (index, part) in parts.iter().enumerate() {
                match part_text(part, &format!("{field}[{index}]")) {
                    Ok(Some(text)) => texts.push(text),
                    Ok(None) => {}
                    Err((part_field, message)) => {
                        errors.push(part_field, message);
                        ok = false;
                    }
                }
            }
            if ok && texts.iter().all(|text| text.is_empty()) {
                errors.push(field, "has no text: precedent stores text parts only");
            } else if ok {
                return Some(texts.join("\n"));
            }
        }
        Some(_) => errors.push(field, "must be a string or an array of parts"),
    }
    None
}

/// One content part as the text ingest reads, `None` for a part not kept,
/// or the bad field and why: `text` and any other typed part carrying a
/// string `text` give it; `thinking` its `thinking`; a tool call (name in
/// `name` or `function.name`, arguments in `input`, `arguments` or
/// `function.arguments`) its `{"name", "arguments"}` JSON object; a tool
/// result the text of its `content` or `output`, after `ERROR: ` when its
/// `is_error` is true; images are not kept.
fn part_text(part: &Value, part_field: &str) -> Result<Option<String>, (String, String)> {
    let bad = |name: &str, message: &str| Err((format!("{part_field}{name}"), message.to_string()));
    let Some(object) = part.as_object() else {
        return bad("", "must be an object with a \"type\"");
    };
    let Some(kind) = object.get("type").and_then(Value::as_str) else {
        return bad(".type", "must be a string");
    };
    let string = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
    if SKIPPED_PART_TYPES.contains(&kind) {
        return Ok(None);
    }
    if kind == THINKING_PART_TYPE {
        return match string(object.get("thinking")) {
            Some(text) => Ok(Some(text)),
            None => bad(".thinking", "must be a string"),
        };
    }
    if CALL_PART_TYPES.contains(&kind) {
        let function = object.get("function").and_then(Value::as_object);
        let name = string(object.get("name"))
            .filter(|name| !name.is_empty())
            .or_else(|| string(function.and_then(|function| function.get("name"))))
            .filter(|name| !name.is_empty());
        let Some(name) = name else {
            return bad(".name", "must be a non-empty string (or function.name)");
        };
        let arguments = ["input", "arguments"]
            .iter()
            .find_map(|key| object.get(*key))
            .or_else(|| function.and_then(|function| function.get("arguments")))
            .unwrap_or(&Value::Null);
        return Ok(Some(precedent_core::tool::render::render_call_compact(
            &name,
            &precedent_core::tool::render::call_arguments(arguments),
        )));
    }
    if RESULT_PART_TYPES.contains(&kind) {
        let is_error = match object.get("is_error") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(flag)) => *flag,
            Some(_) => return bad(".is_error", "must be a boolean"),
        };
        let output = object
            .get("content")
            .or_else(|| object.get("output"))
            .map(precedent_core::tool::render::result_text)
            .unwrap_or_default();
        return Ok(Some(precedent_core::tool::render::render_result(
            &output, is_error,
        )));
    }
    match object.get("text") {
        Some(Value::String(text)) => Ok(Some(text.clone())),
        _ if kind == "text" => bad(".text", "must be a string"),
        _ => bad(
            ".type",
            &format!(
                "unknown part type {kind:?} without a string \"text\": parts are \"text\", images, \"thinking\", tool calls ({}), tool results ({}), or any type with a \"text\"",
                CALL_PART_TYPES.join(", "),
                RESULT_PART_TYPES.join(", ")
            ),
        ),
    }
}

fn optional_timestamp(value: Option<&Value>, field: &str, errors: &mut Errors) -> Option<i64> {
    let number = match value {
        None | Some(Value::Null) => return None,
        Some(Value::Number(number)) => number,
        Some(_) => {
            errors.push(field, "must be a number (Unix milliseconds)");
            return None;
        }
    };
    let millis = number.as_i64().or_else(|| {
        number
            .as_f64()
            .filter(|float| float.fract() == 0.0 && float.abs() < 9.0e15)
            .map(|float| float as i64)
    });
    errors.checked(domain::check_timestamp(field, millis))
}

/// Parses and validates an Add body.
pub fn parse_add(body: &Value) -> Result<AddRequest, Vec<FieldError>> {
    let mut errors = Errors::default();
    let Some(object) = as_object(body, &mut errors) else {
        return errors.finish(None);
    };
    let request_id = required_id(object, "request_id", &mut errors);
    let user_id = required_id(object, "user_id", &mut errors);
    let session_id = required_id(object, "session_id", &mut errors);
    let mut messages = Vec::new();
    match object.get("messages") {
        None | Some(Value::Null) => errors.push("messages", "field required"),
        Some(Value::Array(items)) => {
            if errors
                .checked(domain::check_num_messages(items.len()))
                .is_some()
            {
                for (index, item) in items.iter().enumerate() {
                    if let Some(message) = parse_message(item, index, &mut errors) {
                        messages.push(message);
                    }
                }
            }
        }
        Some(_) => errors.push("messages", "must be an array"),
    }
    let request = match (request_id, user_id, session_id) {
        (Some(request_id), Some(user_id), Some(session_id)) if errors.0.is_empty() => {
            errors.checked(AddRequest::new(request_id, user_id, session_id, messages))
        }
        _ => None,
    };
    errors.finish(request)
}

fn parse_message(item: &Value, index: usize, errors: &mut Errors) -> Option<Message> {
    let field = format!("messages[{index}]");
    let Some(object) = item.as_object() else {
        errors.push(field, "must be an object");
        return None;
    };
    let role = match object.get("role") {
        None | Some(Value::Null) => {
            errors.push(format!("{field}.role"), "field required");
            None
        }
        Some(Value::String(name)) => {
            let role = Role::parse(name);
            if role.is_none() {
                errors.push(format!("{field}.role"), "must be \"user\" or \"assistant\"");
            }
            role
        }
        Some(_) => {
            errors.push(format!("{field}.role"), "must be a string");
            None
        }
    };
    let content_field = format!("{field}.content");
    let content =
        text_or_parts(object.get("content"), &content_field, errors).and_then(|content| {
            errors
                .checked(domain::check_content(&content_field, &content))
                .map(|()| content)
        });
    let timestamp_ms = optional_timestamp(
        object.get("timestamp"),
        &format!("{field}.timestamp"),
        errors,
    );
    Some(Message {
        role: role?,
        content: content?,
        timestamp_ms,
    })
}

/// Parses and validates a Search body.
pub fn parse_search(body: &Value) -> Result<SearchRequest, Vec<FieldError>> {
    let mut errors = Errors::default();
    let Some(object) = as_object(body, &mut errors) else {
        return errors.finish(None);
    };
    let query = text_or_parts(object.get("query"), "query", &mut errors);
    let user_id = required_id(object, "user_id", &mut errors);
    let top_k = match object.get("top_k") {
        None | Some(Value::Null) => {
            errors.push("top_k", "field required");
            None
        }
        Some(Value::Number(number)) => {
            let integral = number.as_i64().or_else(|| {
                number
                    .as_f64()
                    .filter(|float| float.fract() == 0.0 && float.abs() < 1.0e15)
                    .map(|float| float as i64)
            });
            errors.checked(domain::check_top_k(integral))
        }
        Some(_) => errors.checked(domain::check_top_k(None)),
    };
    match object.get("options") {
        None | Some(Value::Null) | Some(Value::Array(_)) => {}
        Some(_) => errors.push("options", "must be an array of strings"),
    }
    // An extension: the most characters of content to return.
    let max_chars = match object.get("max_chars") {
        None | Some(Value::Null) => None,
        Some(value) => {
            let integral = value.as_u64().or_else(|| {
                value
                    .as_f64()
                    .filter(|float| {
                        float.fract() == 0.0
                            && (1.0..=domain::MAX_CHARS_LIMIT as f64).contains(float)
                    })
                    .map(|float| float as u64)
            });
            errors.checked(domain::check_max_chars(integral))
        }
    };
    // An extension: the caller's checkout, to mark stale experience.
    let repo = match object.get("repo") {
        None | Some(Value::Null) => None,
        Some(value) => {
            let path = value.as_str().map(std::path::Path::new);
            errors
                .checked(domain::check_repo(path))
                .and(path)
                .map(std::path::Path::to_path_buf)
        }
    };
    let request = match (query, user_id, top_k) {
        (Some(query), Some(user_id), Some(top_k)) if errors.0.is_empty() => {
            errors.checked(SearchRequest::new(query, user_id, top_k, max_chars, repo))
        }
        _ => None,
    };
    errors.finish(request)
}

/// Why a body is not the JSON precedent reads.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON at all, or not UTF-8 text.
    #[error("{0}")]
    Syntax(String),
}

/// Parses a request body as JSON, refusing what `serde_json::Value` would
/// silently accept or report unclearly: an object naming the same key
/// twice (which one counts is up to each reader, so `"user_id"` given twice
/// could scope a write to either), and unpaired UTF-16 surrogate escapes.
pub fn parse_json(bytes: &[u8]) -> Result<Value, JsonError> {
    use serde::Deserialize as _;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue::deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value.0))
        .map_err(|error| JsonError::Syntax(describe_json_error(&error)))?;
    Ok(value)
}

/// A clearer reason for the errors serde_json words for its own parser.
fn describe_json_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    if text.contains("hex escape") || text.contains("surrogate") {
        format!(
            "a string holds an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff not in a high-low pair) at line {} column {}; strings must be valid Unicode",
            error.line(),
            error.column()
        )
    } else {
        text
    }
}

/// A JSON value read with duplicate object keys refused.
struct StrictValue(Value);

impl<'de> serde::Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<StrictValue, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        serde::Deserialize::deserialize(deserializer).map(|StrictValue(value)| value)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(access.size_hint().unwrap_or(0).min(4096));
        while let Some(StrictValue(item)) = access.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let StrictValue(value) = access.next_value()?;
            if object.contains_key(&key) {
                let shown: String = key.chars().take(100).collect();
                return Err(serde::de::Error::custom(format!(
                    "the key {shown:?} appears twice in one object"
                )));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The Add answer: the three ids echoed byte for byte.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AddResponse {
    /// Always true on 200.
    pub success: bool,
    /// Echoed.
    pub request_id: String,
    /// Echoed.
    pub user_id: String,
    /// Echoed.
    pub session_id: String,
}

/// The Search answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SearchResponse {
    /// Items, best first.
    pub data: Vec<ItemDto>,
}

/// Where an item came from.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Source)]
pub struct SourceDto {
    /// The Add that brought it.
    pub request_id: String,
    /// First message index within that Add.
    pub message_start: usize,
    /// Last message index within that Add.
    pub message_end: usize,
}

/// One returned memory.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Item)]
pub struct ItemDto {
    /// Stable id.
    pub id: String,
    /// Remembered text.
    pub content: String,
    /// Higher is more relevant.
    pub score: f32,
    /// RFC 3339: when what it shows happened, as its source dated it (a
    /// transcript's timestamps, a commit's time): a message's own time; an
    /// experience's or error's, its session's latest dated message. When
    /// the source gave no time, when it was stored.
    pub created_at: String,
    /// The trajectory it came from.
    pub session_id: String,
    /// What kind of memory.
    pub kind: precedent_core::domain::MemoryKind,
    /// Provenance.
    pub source: SourceDto,
    /// How the experience stands against the checkout the Search named
    /// (`repo`); absent when it named none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<precedent_core::domain::Staleness>,
}

impl From<MemoryItem> for ItemDto {
    fn from(item: MemoryItem) -> ItemDto {
        ItemDto {
            id: item.id,
            content: item.content,
            score: item.score,
            created_at: rfc3339_from_ms(item.created_at_ms),
            session_id: item.session_id,
            kind: item.kind,
            source: SourceDto {
                request_id: item.request_id,
                message_start: item.message_start,
                message_end: item.message_end,
            },
            stale: item.stale,
        }
    }
}

/// One line of `GET /v1/sessions`.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = SessionSummary)]
pub struct SessionSummaryDto {
    /// The session.
    pub session_id: String,
    /// First line of the task statement.
    pub task: String,
    /// Dominant language.
    pub language: Option<String>,
    /// `resolved`, `failed` or `unknown`.
    pub status: precedent_ingest::OutcomeStatus,
    /// Files changed.
    pub num_files_changed: usize,
    /// Symbols changed.
    pub num_symbols_changed: usize,
    /// Errors met.
    pub num_errors: usize,
    /// Messages stored.
    pub num_messages: i64,
    /// RFC 3339: when the session's latest dated message was written (a
    /// transcript's timestamp, a commit's time); when no message is dated,
    /// when its record was last derived.
    pub updated_at: String,
    /// The first files changed (at most five).
    pub files_changed: Vec<String>,
    /// The first symbols changed (at most five).
    pub symbols_changed: Vec<String>,
    /// Types of the first errors met (distinct, at most five).
    pub error_types: Vec<String>,
}

impl From<SessionSummary> for SessionSummaryDto {
    fn from(summary: SessionSummary) -> SessionSummaryDto {
        SessionSummaryDto {
            session_id: summary.session_id,
            task: summary.task,
            language: summary.language.map(|language| language.name().to_string()),
            status: summary.status,
            num_files_changed: summary.num_files_changed,
            num_symbols_changed: summary.num_symbols_changed,
            num_errors: summary.num_errors,
            num_messages: summary.num_messages,
            updated_at: rfc3339_from_ms(summary.updated_at_ms),
            files_changed: summary.files_changed,
            symbols_changed: summary.symbols_changed,
            error_types: summary.error_types,
        }
    }
}

/// One line of `GET /v1/users`.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = UserSummary)]
pub struct UserSummaryDto {
    /// The scope.
    pub user_id: String,
    /// Sessions stored.
    pub num_sessions: i64,
    /// Messages over those sessions.
    pub num_messages: i64,
    /// RFC 3339: when a record of the user was last derived.
    pub updated_at: String,
}

impl From<precedent_store::StoredUser> for UserSummaryDto {
    fn from(user: precedent_store::StoredUser) -> UserSummaryDto {
        UserSummaryDto {
            user_id: user.user_id.into_string(),
            num_sessions: user.num_sessions,
            num_messages: user.num_messages,
            updated_at: rfc3339_from_ms(user.updated_at_ms),
        }
    }
}

/// The body of `GET /v1/sessions/{id}`: the record's own fields, each
/// evidence item with its `source` (the Add's request id and the message's
/// index within it), and the extractors' diagnostics.
pub fn session_detail_json(detail: &SessionDetail) -> Value {
    let mut body = serde_json::to_value(&detail.record).unwrap_or(Value::Null);
    if let Some(evidence) = body.get_mut("evidence").and_then(Value::as_array_mut) {
        for item in evidence.iter_mut() {
            let index = item
                .get("message_index")
                .and_then(Value::as_u64)
                .and_then(|index| usize::try_from(index).ok());
            let source = index.and_then(|index| detail.sources.get(index));
            if let (Some((request_id, message_index)), Some(object)) =
                (source, item.as_object_mut())
            {
                object.insert(
                    "source".to_string(),
                    serde_json::json!({"request_id": request_id, "message_index": message_index}),
                );
            }
        }
    }
    if let Some(object) = body.as_object_mut() {
        object.insert(
            "session_id".to_string(),
            Value::from(detail.session_id.clone()),
        );
        object.insert("num_messages".to_string(), Value::from(detail.num_messages));
        object.insert(
            "updated_at".to_string(),
            Value::from(rfc3339_from_ms(detail.updated_at_ms)),
        );
        object.insert(
            "diagnostics".to_string(),
            serde_json::to_value(&detail.diagnostics).unwrap_or(Value::Null),
        );
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(result: Result<impl std::fmt::Debug, Vec<FieldError>>) -> Vec<String> {
        result
            .expect_err("should be rejected")
            .into_iter()
            .map(|error| error.field)
            .collect()
    }

    #[test]
    fn add_collects_every_bad_field() {
        let body = json!({
            "request_id": "",
            "user_id": 7,
            "messages": [{"role": "system", "content": ""}, "x"],
        });
        assert_eq!(
            fields(parse_add(&body)),
            vec![
                "request_id",
                "user_id",
                "session_id",
                "messages[0].role",
                "messages[0].content",
                "messages[1]"
            ]
        );
    }

    #[test]
    fn add_accepts_parts_and_float_timestamps() {
        let body = json!({
            "request_id": "r", "user_id": "u", "session_id": "s",
            "messages": [{"role": "user", "timestamp": 1704067200000.0, "content": [
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                {"type": "text", "text": "b"}
            ]}],
            "unknown": {"ignored": true}
        });
        let request = parse_add(&body).expect("valid");
        assert_eq!(request.messages()[0].content, "a\nb");
        assert_eq!(request.messages()[0].timestamp_ms, Some(1_704_067_200_000));
    }

    #[test]
    fn tool_parts_become_text_ingest_reads() {
        let body = json!({
            "request_id": "r", "user_id": "u", "session_id": "s",
            "messages": [
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "look at a.py", "signature": "x"},
                    {"type": "text", "text": "Fixing it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Edit",
                     "input": {"file_path": "/r/a.py", "old_string": "x = 1", "new_string": "x = 2"}},
                    {"type": "function_call", "call_id": "c1", "name": "shell",
                     "arguments": "{\"command\": [\"bash\", \"-lc\", \"pytest\"]}"},
                    {"type": "tool_call", "id": "c2",
                     "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}},
                    {"type": "output_text", "text": "done", "annotations": []}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                     "content": [{"type": "text", "text": "String to replace not found"}]},
                    {"type": "function_call_output", "call_id": "c1", "output": "1 passed"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": []}
                ]}
            ]
        });
        let request = parse_add(&body).expect("valid");
        let assistant = &request.messages()[0].content;
        let lines: Vec<&str> = assistant.lines().collect();
        assert_eq!(lines[0], "look at a.py");
        assert_eq!(lines[1], "Fixing it.");
        // The form the API has always stored (part of the idempotency hash).
        assert_eq!(
            lines[2],
            r#"{"arguments":{"file_path":"/r/a.py","new_string":"x = 2","old_string":"x = 1"},"name":"Edit"}"#
        );
        let call: Value = serde_json::from_str(lines[2]).expect("a call on its own line");
        assert_eq!(call["name"], "Edit");
        assert_eq!(call["arguments"]["new_string"], "x = 2");
        let call: Value = serde_json::from_str(lines[3]).expect("a call on its own line");
        assert_eq!(call["arguments"]["command"][2], "pytest");
        let call: Value = serde_json::from_str(lines[4]).expect("a call on its own line");
        assert_eq!(
            (&call["name"], &call["arguments"]["command"]),
            (&json!("bash"), &json!("ls"))
        );
        assert_eq!(lines[5], "done");
        assert_eq!(
            request.messages()[1].content,
            "ERROR: String to replace not found\n1 passed\n(no output)"
        );
    }

    #[test]
    fn unknown_and_malformed_parts_are_rejected() {
        for (part, field) in [
            (
                json!({"type": "audio", "audio": {}}),
                "messages[0].content[0].type",
            ),
            (json!({"text": "no type"}), "messages[0].content[0].type"),
            (json!("bare string"), "messages[0].content[0]"),
            (
                json!({"type": "text", "text": 3}),
                "messages[0].content[0].text",
            ),
            (
                json!({"type": "tool_use", "input": {}}),
                "messages[0].content[0].name",
            ),
            (
                json!({"type": "tool_result", "is_error": "yes"}),
                "messages[0].content[0].is_error",
            ),
            (
                json!({"type": "thinking"}),
                "messages[0].content[0].thinking",
            ),
        ] {
            let body = json!({"request_id": "r", "user_id": "u", "session_id": "s",
                              "messages": [{"role": "user", "content": [part]}]});
            assert_eq!(fields(parse_add(&body)), vec![field], "{body}");
        }
        let images_only = json!({"request_id": "r", "user_id": "u", "session_id": "s",
            "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]});
        assert_eq!(fields(parse_add(&images_only)), vec!["messages[0].content"]);
    }

    #[test]
    fn add_rejects_out_of_range_timestamps_and_long_ids() {
        let body = json!({
            "request_id": "r".repeat(domain::MAX_ID_BYTES + 1), "user_id": "u", "session_id": "s",
            "messages": [{"role": "user", "content": "x", "timestamp": 1.5}],
        });
        assert_eq!(
            fields(parse_add(&body)),
            vec!["request_id", "messages[0].timestamp"]
        );
    }

    #[test]
    fn search_checks_top_k_range_and_query() {
        for top_k in [json!(0), json!(1001), json!(-3), json!(2.5), json!("5")] {
            let body = json!({"query": "q", "user_id": "u", "top_k": top_k});
            assert_eq!(fields(parse_search(&body)), vec!["top_k"], "top_k {top_k}");
        }
        let body = json!({"query": "", "user_id": "u", "top_k": 1});
        assert_eq!(fields(parse_search(&body)), vec!["query"]);
        let body = json!({"query": "q", "user_id": "u", "top_k": 1000, "options": ["A. x"]});
        assert_eq!(parse_search(&body).expect("valid").top_k(), 1000);
    }

    #[test]
    fn duplicate_keys_and_lone_surrogates_are_refused_with_a_reason() {
        let cases = [
            (r#"{"user_id":"u1","user_id":"u2"}"#, "appears twice"),
            (r#"{"a":{"b":1,"b":1}}"#, "\"b\" appears twice"),
            (r#"[{"x":1},{"x":1,"x":2}]"#, "appears twice"),
            (r#"{"query":"\ud800"}"#, "unpaired UTF-16 surrogate"),
            (r#"{"query":"\udc00x"}"#, "unpaired UTF-16 surrogate"),
            (r#"{"query":"\ud800\u0041"}"#, "unpaired UTF-16 surrogate"),
            (r#"{"a":1} x"#, "trailing characters"),
        ];
        for (body, expected) in cases {
            let error = parse_json(body.as_bytes()).expect_err(body).to_string();
            assert!(error.contains(expected), "{body}: {error}");
        }
        let ok = parse_json(r#"{"a":[{"b":1},{"b":2}],"c":"\ud83d\ude00","d":-1.5e3}"#.as_bytes())
            .expect("valid");
        assert_eq!(ok["c"], "\u{1f600}");
        assert_eq!(ok["a"][1]["b"], 2);
        assert_eq!(ok["d"], -1500.0);
        assert!(parse_json(&b"[".repeat(100_000)).is_err());
    }

    #[test]
    fn non_object_bodies_are_rejected() {
        assert_eq!(fields(parse_add(&json!([1, 2]))), vec!["body"]);
        assert_eq!(fields(parse_search(&json!("q"))), vec!["body"]);
    }
}

/// One message of `GET /v1/messages`.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = StoredMessage)]
pub struct MessageDto {
    /// The Add it came with.
    pub request_id: String,
    /// Its index within that Add.
    pub message_index: usize,
    /// `user` or `assistant`.
    pub role: String,
    /// Its text, at most 65,536 characters of it.
    pub content: String,
    /// The characters it holds (more than `content` shows when cut).
    pub content_chars: usize,
    /// Message time (RFC 3339), when the Add gave one.
    pub timestamp: Option<String>,
    /// When its Add was stored (RFC 3339).
    pub stored_at: String,
}

impl From<precedent_service::read::inspect::MessageView> for MessageDto {
    fn from(message: precedent_service::read::inspect::MessageView) -> MessageDto {
        MessageDto {
            request_id: message.request_id,
            message_index: message.message_index,
            role: message.role.as_str().to_string(),
            content: message.content,
            content_chars: message.content_chars,
            timestamp: message.timestamp_ms.map(rfc3339_from_ms),
            stored_at: rfc3339_from_ms(message.stored_at_ms),
        }
    }
}
