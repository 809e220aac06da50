//! Where each transcript's import stopped: per file (and destination and
//! user) its identity, the offset and SHA-256 of the bytes imported, and
//! per session the messages stored (with their digest for formats read
//! whole). Kept in one JSON file in the data directory, replaced whole on
//! each save. The store stays the authority on what is stored: a state
//! that disagrees with it is not trusted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::reader::{Identity, hex};
use precedent_core::domain::{Message, SessionId, UserId};

/// The state file's name inside the data directory.
const STATE_FILE: &str = "import-transcripts.json";

/// One session of a file as last imported.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SessionState {
    /// The session id the transcript names (or derives from its path).
    pub base_id: String,
    /// 1 for the first content seen under that id; more after a rewrite.
    pub generation: u32,
    /// Messages stored.
    pub num_messages: usize,
    /// SHA-256 of the stored messages (formats read whole).
    #[serde(default)]
    pub messages_sha256: String,
}

impl SessionState {
    /// The stored session's id: the base id, `~<generation>` after a
    /// rewrite.
    pub fn session_id(&self) -> String {
        session_id(&self.base_id, self.generation)
    }

    /// The session id, checked; the error names it.
    pub fn checked_session_id(&self) -> anyhow::Result<SessionId> {
        let session_id = self.session_id();
        SessionId::new(session_id.as_str()).map_err(|invalid| {
            anyhow::anyhow!("session {session_id:?} cannot be imported: {invalid}")
        })
    }
}

/// The session id of a generation.
pub fn session_id(base_id: &str, generation: u32) -> String {
    if generation <= 1 {
        base_id.to_string()
    } else {
        format!("{base_id}~{generation}")
    }
}

/// One file as last imported.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FileState {
    /// Device and inode.
    pub identity: Identity,
    /// The format, by name.
    pub format: String,
    /// Bytes imported (JSON lines: up to the last line stored).
    pub offset: u64,
    /// Lines before `offset`.
    pub num_lines: u64,
    /// Lines read (past `offset` when a response is held back), whose
    /// faults were reported.
    #[serde(default)]
    pub num_lines_read: u64,
    /// SHA-256 of the bytes before `offset`.
    pub prefix_sha256: String,
    /// SHA-256 of the last (at most 4 KiB) bytes before `offset`.
    pub window_sha256: String,
    /// The file's sessions.
    pub sessions: Vec<SessionState>,
}

/// Every file's state, by destination, user and path.
#[derive(Debug, Default)]
pub struct ResumeStates {
    path: Option<PathBuf>,
    files: BTreeMap<String, FileState>,
}

impl ResumeStates {
    /// The states kept in `directory` (none yet, or unreadable: empty);
    /// `None` keeps them in memory only.
    pub fn load(directory: Option<&Path>) -> ResumeStates {
        let path = directory.map(|directory| directory.join(STATE_FILE));
        let files = path
            .as_ref()
            .and_then(|path| std::fs::read(path).ok())
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        ResumeStates { path, files }
    }

    /// A file's state.
    pub fn get(&self, key: &str) -> Option<&FileState> {
        self.files.get(key)
    }

    /// Records a file's state (saved by [`ResumeStates::save`]).
    pub fn set(&mut self, key: String, state: FileState) {
        self.files.insert(key, state);
    }

    /// Writes the states (to a temporary file renamed over the old one).
    pub fn save(&self) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let temporary = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec(&self.files).map_err(std::io::Error::other)?;
        std::fs::write(&temporary, bytes)?;
        std::fs::rename(&temporary, path)
    }
}

/// The key of a file's state.
pub fn key(target: &str, user_id: &UserId, canonical_path: &str) -> String {
    format!("{target}\t{user_id}\t{canonical_path}")
}

/// SHA-256 of messages (role, content and timestamp of each).
pub fn messages_sha256<'a>(messages: impl IntoIterator<Item = &'a Message>) -> String {
    let mut hasher = Sha256::new();
    for message in messages {
        hasher.update(message.role.as_str().as_bytes());
        hasher.update([0]);
        hasher.update((message.content.len() as u64).to_le_bytes());
        hasher.update(message.content.as_bytes());
        hasher.update(message.timestamp_ms.unwrap_or(i64::MIN).to_le_bytes());
    }
    hex(&hasher.finalize())
}
