//! The wire contract's limits and the validating constructors of the
//! requests: every Add and Search is built here, whoever sends it (the API,
//! MCP, the importers, the CLI), so nothing stored or searched bypasses
//! these checks. The reasons are the texts the API answers with; `api::dto`
//! only reads the JSON shape and names the field.

use std::path::{Path, PathBuf};

use super::{AddRequest, Message, RequestId, Role, SearchRequest, SessionId, UserId};
use crate::time::{MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS};

/// The longest id (`request_id`, `user_id`, `session_id`) accepted, in bytes.
pub const MAX_ID_BYTES: usize = 4096;
/// The most messages one Add may carry (the platform sends at most 20);
/// importers send a tenth of it.
pub const MAX_MESSAGES_PER_ADD: usize = 10_000;
/// The longest message content, in bytes (whole files and logs fit).
pub const MAX_CONTENT_BYTES: usize = 16 * 1024 * 1024;
/// The largest `top_k` a Search may ask for.
pub const MAX_TOP_K: usize = 1000;
/// The largest `max_chars` a Search may ask for.
pub const MAX_CHARS_LIMIT: u64 = 10_000_000;
/// The longest `repo` path a Search may name, in bytes.
pub(super) const MAX_REPO_PATH_BYTES: usize = 4_096;

/// A field that breaks the contract, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct Invalid {
    /// Where in the request: `messages[2].content`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Invalid {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Invalid {
        Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The same reason, its field inside `prefix` (`messages[2]`).
    fn within(self, prefix: &str) -> Invalid {
        Invalid {
            field: format!("{prefix}.{}", self.field),
            reason: self.reason,
        }
    }
}

/// An id (`request_id`, `user_id`, `session_id`): not empty, at most
/// [`MAX_ID_BYTES`].
pub fn check_id(field: &str, id: &str) -> Result<(), Invalid> {
    if id.is_empty() {
        Err(Invalid::new(field, "must not be empty"))
    } else if id.len() > MAX_ID_BYTES {
        Err(Invalid::new(
            field,
            format!("longer than the limit of {MAX_ID_BYTES} bytes"),
        ))
    } else {
        Ok(())
    }
}

/// How many messages an Add carries: at least one, at most
/// [`MAX_MESSAGES_PER_ADD`].
pub fn check_num_messages(num_messages: usize) -> Result<(), Invalid> {
    if num_messages == 0 {
        Err(Invalid::new("messages", "must not be empty"))
    } else if num_messages > MAX_MESSAGES_PER_ADD {
        Err(Invalid::new(
            "messages",
            format!(
                "{num_messages} messages, more than the limit of {MAX_MESSAGES_PER_ADD} per Add"
            ),
        ))
    } else {
        Ok(())
    }
}

/// A message's content: not empty, at most [`MAX_CONTENT_BYTES`].
pub fn check_content(field: &str, content: &str) -> Result<(), Invalid> {
    if content.is_empty() {
        Err(Invalid::new(field, "must not be empty"))
    } else if content.len() > MAX_CONTENT_BYTES {
        Err(Invalid::new(
            field,
            format!(
                "{} bytes, more than the limit of {MAX_CONTENT_BYTES}",
                content.len()
            ),
        ))
    } else {
        Ok(())
    }
}

/// A message's time: Unix milliseconds between years 1 and 9999; `None`
/// when the wire value is not integral milliseconds.
pub fn check_timestamp(field: &str, timestamp_ms: Option<i64>) -> Result<i64, Invalid> {
    timestamp_ms
        .filter(|ms| (MIN_TIMESTAMP_MS..=MAX_TIMESTAMP_MS).contains(ms))
        .ok_or_else(|| {
            Invalid::new(
                field,
                "must be integral Unix milliseconds between years 1 and 9999",
            )
        })
}

/// A Search's `top_k`, in `1..=MAX_TOP_K`; `None` when the wire value is not
/// an integer.
pub fn check_top_k(top_k: Option<i64>) -> Result<usize, Invalid> {
    top_k
        .and_then(|top_k| usize::try_from(top_k).ok())
        .filter(|top_k| (1..=MAX_TOP_K).contains(top_k))
        .ok_or_else(|| Invalid::new("top_k", format!("must be an integer from 1 to {MAX_TOP_K}")))
}

/// A Search's `max_chars`, in `1..=MAX_CHARS_LIMIT`; `None` when the wire
/// value is not an integer.
pub fn check_max_chars(max_chars: Option<u64>) -> Result<usize, Invalid> {
    max_chars
        .filter(|chars| (1..=MAX_CHARS_LIMIT).contains(chars))
        .and_then(|chars| usize::try_from(chars).ok())
        .ok_or_else(|| {
            Invalid::new(
                "max_chars",
                format!("must be an integer from 1 to {MAX_CHARS_LIMIT}"),
            )
        })
}

/// A Search's `repo`: an absolute path of at most [`MAX_REPO_PATH_BYTES`]
/// without NUL; `None` when the wire value is not a path.
pub fn check_repo(repo: Option<&Path>) -> Result<(), Invalid> {
    let fits = |path: &Path| {
        let bytes = path.as_os_str().as_encoded_bytes();
        bytes.starts_with(b"/") && bytes.len() <= MAX_REPO_PATH_BYTES && !bytes.contains(&0)
    };
    match repo {
        Some(path) if fits(path) => Ok(()),
        _ => Err(Invalid::new(
            "repo",
            format!("must be an absolute path of at most {MAX_REPO_PATH_BYTES} bytes"),
        )),
    }
}

impl Message {
    /// A message whose content and time pass the contract's checks.
    pub fn new(role: Role, content: String, timestamp_ms: Option<i64>) -> Result<Message, Invalid> {
        let message = Message {
            role,
            content,
            timestamp_ms,
        };
        message.check()?;
        Ok(message)
    }

    fn check(&self) -> Result<(), Invalid> {
        check_content("content", &self.content)?;
        if let Some(ms) = self.timestamp_ms {
            check_timestamp("timestamp", Some(ms))?;
        }
        Ok(())
    }
}

impl AddRequest {
    /// An Add whose ids, message count and messages pass the contract's
    /// checks; the first field that does not is the error.
    pub fn new(
        request_id: String,
        user_id: String,
        session_id: String,
        messages: Vec<Message>,
    ) -> Result<AddRequest, Invalid> {
        let request_id = RequestId::new(request_id)?;
        let user_id = UserId::new(user_id)?;
        let session_id = SessionId::new(session_id)?;
        check_num_messages(messages.len())?;
        for (index, message) in messages.iter().enumerate() {
            message
                .check()
                .map_err(|invalid| invalid.within(&format!("messages[{index}]")))?;
        }
        Ok(AddRequest {
            request_id,
            user_id,
            session_id,
            messages,
            body_sha256: std::sync::OnceLock::new(),
        })
    }
}

impl SearchRequest {
    /// A Search whose query, scope and limits pass the contract's checks;
    /// the first field that does not is the error.
    pub fn new(
        query: String,
        user_id: String,
        top_k: usize,
        max_chars: Option<usize>,
        repo: Option<PathBuf>,
    ) -> Result<SearchRequest, Invalid> {
        if query.is_empty() {
            return Err(Invalid::new("query", "must not be empty"));
        }
        let user_id = UserId::new(user_id)?;
        check_top_k(i64::try_from(top_k).ok())?;
        if let Some(max_chars) = max_chars {
            check_max_chars(u64::try_from(max_chars).ok())?;
        }
        if let Some(repo) = &repo {
            check_repo(Some(repo))?;
        }
        Ok(SearchRequest {
            query,
            user_id,
            top_k,
            max_chars,
            repo,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(content: &str, timestamp_ms: Option<i64>) -> Message {
        Message {
            role: Role::User,
            content: content.to_string(),
            timestamp_ms,
        }
    }

    fn add(ids: [&str; 3], messages: Vec<Message>) -> Result<AddRequest, Invalid> {
        let [request_id, user_id, session_id] = ids.map(str::to_string);
        AddRequest::new(request_id, user_id, session_id, messages)
    }

    #[test]
    fn an_add_is_built_only_from_valid_fields() {
        assert!(add(["r", "u", "s"], vec![message("x", Some(0))]).is_ok());
        let long_id = "i".repeat(MAX_ID_BYTES + 1);
        let cases = [
            (add(["", "u", "s"], vec![message("x", None)]), "request_id"),
            (
                add(["r", &long_id, "s"], vec![message("x", None)]),
                "user_id",
            ),
            (add(["r", "u", ""], vec![message("x", None)]), "session_id"),
            (add(["r", "u", "s"], Vec::new()), "messages"),
            (
                add(
                    ["r", "u", "s"],
                    vec![message("x", None); MAX_MESSAGES_PER_ADD + 1],
                ),
                "messages",
            ),
            (
                add(["r", "u", "s"], vec![message("x", None), message("", None)]),
                "messages[1].content",
            ),
            (
                add(
                    ["r", "u", "s"],
                    vec![message("x", Some(MAX_TIMESTAMP_MS + 1))],
                ),
                "messages[0].timestamp",
            ),
        ];
        for (result, field) in cases {
            assert_eq!(result.expect_err(field).field, field);
        }
        let huge = "x".repeat(MAX_CONTENT_BYTES + 1);
        let invalid = Message::new(Role::Assistant, huge, None).expect_err("too long");
        assert_eq!(
            invalid.to_string(),
            format!(
                "content: {} bytes, more than the limit of {MAX_CONTENT_BYTES}",
                MAX_CONTENT_BYTES + 1
            )
        );
    }

    #[test]
    fn the_body_hash_is_that_of_the_messages_as_stored() {
        let secret = "key AKIAABCDEFGHIJKLMNOP here";
        let mut request = add(["r", "u", "s"], vec![message(secret, None)]).expect("valid");
        let before = request.body_sha256();
        request.redact_secrets();
        let masked = request.messages()[0].content.clone();
        assert_ne!(masked, secret);
        let fresh = add(["r", "u", "s"], vec![message(&masked, None)]).expect("valid");
        assert_eq!(request.body_sha256(), fresh.body_sha256());
        assert_ne!(request.body_sha256(), before);
    }

    #[test]
    fn a_search_is_built_only_from_valid_fields() {
        let search = |query: &str, top_k: usize, max_chars: Option<usize>, repo: Option<&str>| {
            SearchRequest::new(
                query.to_string(),
                "u".to_string(),
                top_k,
                max_chars,
                repo.map(PathBuf::from),
            )
            .map_err(|invalid| invalid.field)
        };
        assert!(search("q", 1, Some(1), Some("/r")).is_ok());
        assert!(search("q", MAX_TOP_K, None, None).is_ok());
        assert_eq!(search("", 1, None, None).unwrap_err(), "query");
        assert_eq!(search("q", 0, None, None).unwrap_err(), "top_k");
        assert_eq!(search("q", MAX_TOP_K + 1, None, None).unwrap_err(), "top_k");
        assert_eq!(search("q", 1, Some(0), None).unwrap_err(), "max_chars");
        assert_eq!(search("q", 1, None, Some("r")).unwrap_err(), "repo");
        assert_eq!(search("q", 1, None, Some("/r\0")).unwrap_err(), "repo");
    }
}
