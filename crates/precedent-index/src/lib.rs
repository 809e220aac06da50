//! index: "here is a user and a question, which of their sessions and
//! messages match?"
//!
//! A tantivy index in `<data-dir>/index`, derived from the store, of two
//! kinds of documents, each with its scope (`user_id`, a raw term) and its
//! session's `session_hash` (fast):
//!
//! - a **part** (`doc_kind` = `part`) holds consecutive messages of one
//!   Add, up to 64 KB of their text: its `seq` (indexed and fast, to replay
//!   idempotently), its messages' range within the Add (`part_range`,
//!   fast, to trace hits back to the store) and their text under the
//!   code-aware tokenizer. Each message is indexed once, in the part the Add
//!   that brought it made; nothing later rewrites it.
//! - a **session document** (`doc_kind` = `session`) holds what the record
//!   makes of the whole session and is small: the task statement as text,
//!   and the stored ranking profile (bytes, the record's symbols, paths, error
//!   types, tests and outcome as match keys, which ranking weighs),
//!   replaced whole whenever the record is derived again.
//!
//! A session's text is then its document's and its parts' together, and a
//! session search scores it as one text (see [`sessions`]). The facts are not
//! indexed as fields of their own: ranking reads them from the profile of
//! each candidate, and every indexed field costs a term dictionary per
//! segment, which every commit builds.
//! Every commit carries a payload `{"schema": V, "seq": N}`: everything the
//! store holds up to `seq` N is in the index. At start-up the index replays
//! what it lacks; a missing, unreadable or outdated index is rebuilt from the
//! store.
//!
//! Architecture invariant: this module knows nothing of HTTP. Only the
//! committer thread ([`writer`]) holds the `IndexWriter`, and only the one
//! writer thread (see `service`) hands it work; searches read one view at a
//! time: the searcher of the last commit and the turns published since
//! ([`published`]).

mod directory;
mod parts;
mod published;
mod scope;
mod search;
mod sessions;
mod writer;

pub use self::parts::PartHit;
pub use self::search::DocKey;
use self::writer::CommitPayload;
pub use self::writer::{IndexWriterHandle, MessageToIndex};

use std::path::{Path, PathBuf};

use tantivy::directory::error::OpenDirectoryError;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use tantivy::{Index, IndexReader, IndexSettings, ReloadPolicy};

use self::directory::{CLEAN_MARKER, DerivedDirectory};
use self::published::PublishedBatch;
use self::scope::ScopeCache;

use precedent_core::domain::{SessionId, UserId};
use precedent_core::tokenize;

/// Errors of the index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// tantivy failed.
    #[error("tantivy: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// The index directory could not be opened.
    #[error("index directory: {0}")]
    OpenDirectory(#[from] OpenDirectoryError),
    /// The index cannot be used as it is.
    #[error("index {path}: {reason}")]
    Unusable {
        /// The index directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The index directory could not be prepared.
    #[error("index directory {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// Name of the index directory inside the data directory.
pub const INDEX_DIR: &str = "index";
/// The tokenizer name registered on every opened index.
const CODE_TOKENIZER: &str = "code";
/// Bumped whenever the schema, the tokenizer or the stored ranking profile
/// (`rank::SessionProfile`) changes: an index of another
/// version is rebuilt from the store.
/// 11: task and fix digests are SHA-256 based (stable across builds).
/// 12: message text is indexed once, in parts (consecutive messages of one
/// Add) that a session's text is the sum of; session documents hold the
/// task, and there are no message documents.
/// 13: the words precedent writes into stored text (a failed tool result's
/// prefix, the mark of no output) are not indexed.
/// 14: the ranking profile is stored as bytes in postcard's binary form
/// instead of JSON text.
const SCHEMA_VERSION: u64 = 14;
/// Memory the writer may buffer before it flushes a segment.
const WRITER_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// Decompressed document store blocks each segment's reader keeps (tantivy
/// keeps 100, 16 KB or more each). Stored fields are read for ranking
/// profiles only, and the searcher keeps the parsed profiles, so a block
/// is seldom read twice.
const DOC_STORE_CACHE_BLOCKS: usize = 8;

/// How segments are merged. Commits come about once a second, so segments
/// start at a second of Adds (a single Add's when idle). tantivy's default
/// puts every segment under 10,000 documents in one level and merges all of
/// them whenever eight are there, so the largest of them is rewritten again
/// and again on a growing store. Here levels start at
/// [`MERGE_MIN_LAYER_DOCS`] and each spans a factor of about 2.8 in size,
/// so a document is rewritten a few times over its life and a reader sees
/// a few dozen segments at most.
fn merge_policy() -> tantivy::indexer::LogMergePolicy {
    let mut policy = tantivy::indexer::LogMergePolicy::default();
    policy.set_min_layer_size(MERGE_MIN_LAYER_DOCS);
    policy.set_level_log_size(MERGE_LEVEL_LOG_SIZE);
    policy.set_min_num_segments(MERGE_MIN_SEGMENTS);
    policy.set_max_docs_before_merge(MERGE_MAX_DOCS);
    policy
}

/// Segments of more documents than this are not merged again. A merge
/// reads its segments through the memory map, and every page it reads
/// counts in the server's resident memory until the merge ends, so merges
/// read a few times this many documents at most, and a store keeps a
/// segment per hundred thousand documents or so.
const MERGE_MAX_DOCS: usize = 25_000;

/// Segments smaller than this many documents count as this size.
const MERGE_MIN_LAYER_DOCS: u32 = 100;
/// log2 of the size ratio a merge level spans.
const MERGE_LEVEL_LOG_SIZE: f64 = 1.5;
/// Segments of one level merged together.
const MERGE_MIN_SEGMENTS: usize = 5;

#[derive(Debug, Clone, Copy)]
struct Fields {
    user_id: Field,
    /// `session` or `part`.
    doc_kind: Field,
    /// Session documents: the last Add the record includes; parts: their
    /// Add (a replay deletes by it).
    seq: Field,
    /// Set on session documents only: replaced whole when re-derived.
    session_key: Field,
    /// Parts: the key of their session (apart from `session_key`, which
    /// replacing a session record deletes by).
    part_session: Field,
    /// Both kinds: [`session_hash`] of the session key, which groups a
    /// session's parts with its document.
    session_hash: Field,
    /// Parts: the messages they hold within their Add, first and end
    /// index ([`part_range`]).
    part_range: Field,
    /// Session documents: the ranking profile (bytes, stored only).
    profile: Field,
    /// Session documents: the task statement; parts: the text of their
    /// messages.
    session_text: Field,
}

/// `doc_kind` of a part: consecutive messages of one Add.
const KIND_PART: &str = "part";
/// `doc_kind` of a session record document.
const KIND_SESSION: &str = "session";

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let code_text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(CODE_TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        user_id: builder.add_text_field("user_id", STRING),
        doc_kind: builder.add_text_field("doc_kind", STRING),
        seq: builder.add_u64_field("seq", INDEXED | FAST),
        session_key: builder.add_text_field("session_key", STRING),
        part_session: builder.add_text_field("part_session", STRING),
        session_hash: builder.add_u64_field("session_hash", FAST),
        part_range: builder.add_u64_field("part_range", FAST),
        profile: builder.add_bytes_field("profile", STORED),
        session_text: builder.add_text_field("session_text", code_text),
    };
    (builder.build(), fields)
}

/// What the index keeps of a session record, one document per session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDoc {
    /// Scope.
    pub user_id: UserId,
    /// The session.
    pub session_id: SessionId,
    /// Last Add the record includes.
    pub last_seq: i64,
    /// The ranking profile, encoded (the index keeps the bytes as they
    /// are; `rank::SessionProfile::encode` makes them).
    pub profile: Vec<u8>,
    /// Task statement.
    pub text: String,
}

/// The `session_key` term of `session_id` of `user_id`.
fn session_key(user_id: &UserId, session_id: &SessionId) -> String {
    // Length-prefixed: no choice of ids can make two pairs collide.
    format!("{}:{user_id}{session_id}", user_id.len())
}

/// The `session_hash` of a session key: the first 8 bytes of its SHA-256.
/// Two sessions of one user sharing it would pool their parts' text (one
/// chance in 2^64 per pair); nothing else reads it.
fn session_hash(key: &str) -> u64 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// The `part_range` of the messages `first..end` of an Add.
fn part_range(first: usize, end: usize) -> u64 {
    let clamp = |index: usize| u64::from(u32::try_from(index).unwrap_or(u32::MAX));
    (clamp(first) << 32) | clamp(end)
}

/// The messages `first..end` of a `part_range`.
fn part_bounds(range: u64) -> (usize, usize) {
    (
        (range >> 32) as usize,
        (range & u64::from(u32::MAX)) as usize,
    )
}

/// [`tokenize::code_tokens`] as tantivy's tokens: what the code tokenizer
/// gives tantivy.
fn tantivy_tokens(text: &str) -> Vec<Token> {
    tokenize::code_tokens(text)
        .into_iter()
        .map(|token| Token {
            offset_from: token.offset_from,
            offset_to: token.offset_to,
            position: token.position,
            text: token.text,
            position_length: 1,
        })
        .collect()
}

/// The tantivy face of [`tokenize::code_tokens`].
#[derive(Clone, Default)]
pub struct CodeTokenizer;

/// Token stream over pre-computed code tokens.
pub struct CodeTokenStream {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for CodeTokenizer {
    type TokenStream<'a> = CodeTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> CodeTokenStream {
        CodeTokenStream {
            tokens: tantivy_tokens(text),
            next: 0,
        }
    }
}

impl TokenStream for CodeTokenStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

/// The searchable side of the index, shared by all searches.
pub struct SearchIndex {
    /// What searches read: the searcher of the last commit and the writer
    /// turns published since (see [`published`]). Replaced whole; the lock is
    /// held only to clone or swap it.
    view: SharedView,
    fields: Fields,
    /// Everything stored up to this sequence number is visible to
    /// searches: set by the writer when it publishes (or commits), before
    /// any Add it covers is answered.
    visible_seq: std::sync::atomic::AtomicI64,
    /// Each user's live session documents per segment state, so that a
    /// search walks only the segments it has not seen yet.
    scopes: ScopeCache,
}

/// The view searches read, shared by the searches, the writer thread
/// (which publishes) and the committer (which replaces it at each commit).
type SharedView = std::sync::Arc<std::sync::Mutex<std::sync::Arc<View>>>;

/// One consistent state of the index for a search: the committed segments
/// and the documents written since their commit.
struct View {
    searcher: tantivy::Searcher,
    /// Oldest first.
    recent: Vec<std::sync::Arc<PublishedBatch>>,
}

impl View {
    fn committed(reader: &IndexReader) -> std::sync::Arc<View> {
        std::sync::Arc::new(View {
            searcher: reader.searcher(),
            recent: Vec::new(),
        })
    }
}

/// Bytes the remembered scopes may hold: 14 bytes per session document or
/// part and segment, so room for about a million, more than the scopes of
/// the users searching at one time.
const SCOPE_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// How the index was found at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenState {
    /// Opened as it was.
    Opened,
    /// Created empty: there was none.
    Created,
    /// Recreated empty: the one found was unreadable or of another version.
    Recreated,
}

/// Maps an IO error on `path` to [`IndexError::Directory`].
fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> IndexError {
    let path = path.to_path_buf();
    move |source| IndexError::Directory { path, source }
}

/// Opens the index in `data_dir`, creating or recreating it when needed.
/// After anything but a clean shutdown, every index file's checksum is
/// verified first (see [`directory`]).
pub fn open(data_dir: &Path) -> Result<(SearchIndex, IndexWriterHandle, OpenState), IndexError> {
    let dir = data_dir.join(INDEX_DIR);
    let marker = data_dir.join(CLEAN_MARKER);
    let was_clean = marker.exists();
    if was_clean {
        // Gone while this process runs, so a crash is noticed next time.
        std::fs::remove_file(&marker).map_err(io_error(&marker))?;
        directory::sync_dir(data_dir).map_err(io_error(data_dir))?;
    }
    let (index, state, committed_seq) = match try_open_existing(&dir, !was_clean) {
        Some(Ok((index, seq))) => (index, OpenState::Opened, seq),
        Some(Err(reason)) => {
            tracing::warn!(%reason, path = %dir.display(), "index unusable, rebuilding from the store");
            std::fs::remove_dir_all(&dir).map_err(io_error(&dir))?;
            (create(&dir)?, OpenState::Recreated, 0)
        }
        None => (create(&dir)?, OpenState::Created, 0),
    };
    index.tokenizers().register(CODE_TOKENIZER, CodeTokenizer);
    let (_, fields) = schema();
    let writer = index.writer_with_num_threads(1, WRITER_MEMORY_BYTES)?;
    writer.set_merge_policy(Box::new(merge_policy()));
    let reader: IndexReader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .doc_store_cache_num_blocks(DOC_STORE_CACHE_BLOCKS)
        .try_into()?;
    let view = std::sync::Arc::new(std::sync::Mutex::new(View::committed(&reader)));
    Ok((
        SearchIndex {
            view: std::sync::Arc::clone(&view),
            fields,
            visible_seq: std::sync::atomic::AtomicI64::new(committed_seq),
            scopes: ScopeCache::new(SCOPE_CACHE_BYTES),
        },
        IndexWriterHandle::new(writer, fields, committed_seq, reader, view),
        state,
    ))
}

/// Opens the index of `data_dir` for searching only, as it is (no
/// verification, no rebuild, no writer): for tools that read a data
/// directory a server may hold.
pub fn open_read_only(data_dir: &Path) -> Result<SearchIndex, IndexError> {
    let dir = data_dir.join(INDEX_DIR);
    let (index, seq) = match try_open_existing(&dir, false) {
        Some(Ok(opened)) => opened,
        Some(Err(reason)) => {
            return Err(IndexError::Unusable {
                path: dir,
                reason: format!("{reason}; start the server on it once to rebuild"),
            });
        }
        None => {
            return Err(IndexError::Unusable {
                path: dir,
                reason: "no index here; start the server on this data directory first".to_string(),
            });
        }
    };
    index.tokenizers().register(CODE_TOKENIZER, CodeTokenizer);
    let (_, fields) = schema();
    let reader: IndexReader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .doc_store_cache_num_blocks(DOC_STORE_CACHE_BLOCKS)
        .try_into()?;
    Ok(SearchIndex {
        view: std::sync::Arc::new(std::sync::Mutex::new(View::committed(&reader))),
        fields,
        visible_seq: std::sync::atomic::AtomicI64::new(seq),
        scopes: ScopeCache::new(SCOPE_CACHE_BYTES),
    })
}

/// The sequence number the index of `data_dir` has committed, read from
/// its commit payload alone (no index is opened); 0 when there is none or
/// it cannot be read. What a reader of the data directory sees.
pub fn committed_seq(data_dir: &Path) -> i64 {
    #[derive(serde::Deserialize)]
    struct Metas {
        payload: Option<String>,
    }
    std::fs::read(data_dir.join(INDEX_DIR).join("meta.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Metas>(&bytes).ok())
        .and_then(|metas| metas.payload)
        .and_then(|payload| serde_json::from_str::<CommitPayload>(&payload).ok())
        .map_or(0, |payload| payload.seq)
}

/// `None` when there is no index; `Some(Err)` when there is one that cannot
/// be used; `Some(Ok)` with the index and its committed sequence number.
fn try_open_existing(dir: &Path, verify: bool) -> Option<Result<(Index, i64), String>> {
    if !dir.join("meta.json").exists() {
        return None;
    }
    let opened = (|| {
        let directory = DerivedDirectory::open(dir).map_err(|error| error.to_string())?;
        let index = Index::open(directory).map_err(|error| error.to_string())?;
        if index.schema() != schema().0 {
            return Err("schema differs from this build's".to_string());
        }
        let metas = index.load_metas().map_err(|error| error.to_string())?;
        let payload: CommitPayload = match metas.payload.as_deref() {
            Some(text) => serde_json::from_str(text).map_err(|error| error.to_string())?,
            None => CommitPayload {
                schema: SCHEMA_VERSION,
                seq: 0,
            },
        };
        if payload.schema != SCHEMA_VERSION {
            return Err(format!(
                "index version {} differs from this build's {SCHEMA_VERSION}",
                payload.schema
            ));
        }
        if verify {
            let corrupt = index
                .validate_checksum()
                .map_err(|error| format!("checksum verification failed: {error}"))?;
            if !corrupt.is_empty() {
                return Err(format!(
                    "{} index file(s) fail their checksum",
                    corrupt.len()
                ));
            }
            tracing::info!("index verified after an unclean shutdown");
        }
        Ok((index, payload.seq))
    })();
    Some(opened)
}

fn create(dir: &Path) -> Result<Index, IndexError> {
    std::fs::create_dir_all(dir).map_err(|source| IndexError::Directory {
        path: dir.to_path_buf(),
        source,
    })?;
    let directory = DerivedDirectory::open(dir)?;
    Ok(Index::create(
        directory,
        schema().0,
        IndexSettings::default(),
    )?)
}

#[cfg(test)]
mod tests;
