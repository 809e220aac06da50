//! Validated domain types: what an Add or a Search means once it has passed
//! the boundary. Inner code never re-checks what these types guarantee:
//! ids are non-empty, messages are non-empty with a known role and
//! non-empty content, `top_k` is in range. The limits and the validating
//! constructors are in [`check`].

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod check;
mod id;

pub use check::{
    Invalid, MAX_CHARS_LIMIT, MAX_CONTENT_BYTES, MAX_ID_BYTES, MAX_MESSAGES_PER_ADD, MAX_TOP_K,
    check_content, check_id, check_max_chars, check_num_messages, check_repo, check_timestamp,
    check_top_k,
};
#[cfg(any(test, feature = "testing"))]
pub use id::testing;
pub use id::{RequestId, SessionId, SessionKey, UserId};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The task giver, or a tool observation fed back to the agent.
    User,
    /// The agent: reasoning, commands, edits.
    Assistant,
}

impl Role {
    /// The wire name of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }

    /// Parses a wire name; `None` for anything but `user` / `assistant`.
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            _ => None,
        }
    }
}

/// One message of an Add, in source order, built by [`Message::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text, never empty.
    pub content: String,
    /// When it was written, Unix milliseconds, if the sender said.
    pub timestamp_ms: Option<i64>,
}

/// A validated Add: one logical write of an ordered chunk of messages.
/// Its fields are private: [`AddRequest::new`] is the only way to build
/// one, so every Add stored has passed the contract's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddRequest {
    request_id: RequestId,
    user_id: UserId,
    session_id: SessionId,
    messages: Vec<Message>,
    /// [`AddRequest::body_sha256`], computed once: the service checks the
    /// request log before the writer and again inside its transaction.
    /// Boxed, so that the writer's queued jobs stay small.
    body_sha256: std::sync::OnceLock<Box<[u8; 32]>>,
}

impl AddRequest {
    /// The idempotency key, unique per user.
    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }

    /// The isolation boundary.
    pub fn user_id(&self) -> &UserId {
        &self.user_id
    }

    /// The trajectory the messages belong to.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// The messages, non-empty, in source order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Masks the secrets in every message's content ([`crate::redact`]).
    /// A secret is replaced by a marker, so no content becomes empty.
    pub fn redact_secrets(&mut self) {
        for message in &mut self.messages {
            if let std::borrow::Cow::Owned(masked) = crate::redact::redact(&message.content) {
                message.content = masked;
                self.body_sha256 = std::sync::OnceLock::new();
            }
        }
    }

    /// SHA-256 of the canonical form of the request: the fields that are
    /// stored, in a fixed order, length-prefixed. Fields the contract says
    /// to ignore do not take part, so a retry that differs only in them is
    /// still the same request.
    pub fn body_sha256(&self) -> [u8; 32] {
        **self.body_sha256.get_or_init(|| Box::new(self.hash_body()))
    }

    fn hash_body(&self) -> [u8; 32] {
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(self.request_id.as_bytes());
        field(self.user_id.as_bytes());
        field(self.session_id.as_bytes());
        field(&(self.messages.len() as u64).to_le_bytes());
        for message in &self.messages {
            field(message.role.as_str().as_bytes());
            field(message.content.as_bytes());
            match message.timestamp_ms {
                Some(ms) => field(&ms.to_le_bytes()),
                None => field(b""),
            }
        }
        hasher.finalize().into()
    }
}

/// A validated Search. Its fields are private: [`SearchRequest::new`] is
/// the only way to build one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    query: String,
    user_id: UserId,
    top_k: usize,
    max_chars: Option<usize>,
    repo: Option<std::path::PathBuf>,
}

impl SearchRequest {
    /// The new task's text, never empty.
    pub fn query(&self) -> &str {
        &self.query
    }

    /// Search only inside this scope.
    pub fn user_id(&self) -> &UserId {
        &self.user_id
    }

    /// The most items to return, in `1..=MAX_TOP_K`.
    pub fn top_k(&self) -> usize {
        self.top_k
    }

    /// The most characters of content to return (an extension of the
    /// contract); the service's default when absent.
    pub fn max_chars(&self) -> Option<usize> {
        self.max_chars
    }

    /// The caller's checkout (its root): each experience returned is
    /// checked against its working tree and marked when stale.
    pub fn repo(&self) -> Option<&std::path::Path> {
        self.repo.as_deref()
    }
}

/// What an accepted Add did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// The messages were stored and indexed now.
    Stored,
    /// The same request was stored before; nothing was stored again.
    AlreadyStored,
}

/// What a remembered item returned by Search is; answered as `experience`,
/// `error` or `message`, the name that also opens the item's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// A past session in brief: its task, outcome, what it changed and the
    /// fix hunks that matter to the query.
    Experience,
    /// An error trace of a past session whose error type the query names.
    Error,
    /// A stored message shown as it is.
    Message,
}

impl MemoryKind {
    /// Every kind, in declaration order.
    pub const ALL: [MemoryKind; 3] = [
        MemoryKind::Experience,
        MemoryKind::Error,
        MemoryKind::Message,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Experience => "experience",
            MemoryKind::Error => "error",
            MemoryKind::Message => "message",
        }
    }
}

impl fmt::Display for MemoryKind {
    /// The wire name; honours width and alignment.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.pad(self.as_str())
    }
}

/// One remembered item returned by Search, with its provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryItem {
    /// Stable id of the memory.
    pub id: String,
    /// The remembered text.
    pub content: String,
    /// Relevance, higher is better.
    pub score: f32,
    /// Message time when given, else storage time, Unix ms.
    pub created_at_ms: i64,
    /// The trajectory it came from.
    pub session_id: String,
    /// What kind of memory it is.
    pub kind: MemoryKind,
    /// The Add that brought it.
    pub request_id: String,
    /// First message index (within that Add) the item covers.
    pub message_start: usize,
    /// Last message index (within that Add) the item covers.
    pub message_end: usize,
    /// How the experience stands against the caller's checkout, when the
    /// Search named one.
    pub stale: Option<Staleness>,
}

/// How a past experience stands against the caller's working tree
/// (`read::stale` checks it).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct Staleness {
    /// Changed files that no longer exist.
    pub missing_files: Vec<String>,
    /// Changed definitions no longer defined in the changed files that
    /// still exist (renamed or removed).
    pub missing_symbols: Vec<String>,
    /// Changed files whose content is no longer what the session left:
    /// their git blob differs from the one its diff recorded, or, where it
    /// recorded none, they no longer hold every line its fix added.
    pub changed_files: Vec<String>,
    /// Changed files that could not be read (too large, not text, no
    /// permission, outside the checkout): neither current nor stale.
    pub unchecked_files: Vec<String>,
    /// Changed files that moved, as `OLD -> NEW`: the checkout tracks no
    /// file at the old path and one file at a path ending with it
    /// (`requests/sessions.py -> src/requests/sessions.py`), which was
    /// checked in its place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved_files: Vec<String>,
}

impl Staleness {
    /// Whether anything the experience changed is gone or different.
    pub fn is_stale(&self) -> bool {
        !(self.missing_files.is_empty()
            && self.missing_symbols.is_empty()
            && self.changed_files.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_kinds_keep_their_wire_names() {
        for (kind, name) in MemoryKind::ALL
            .into_iter()
            .zip(["experience", "error", "message"])
        {
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.to_string(), name);
            let json = serde_json::to_string(&kind).expect("serializes");
            assert_eq!(json, format!("\"{name}\""));
            let parsed: MemoryKind = serde_json::from_str(&json).expect("parses");
            assert_eq!(parsed, kind);
        }
        assert!(serde_json::from_str::<MemoryKind>("\"fix\"").is_err());
    }
}
