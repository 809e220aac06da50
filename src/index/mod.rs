//! index: "here is a user and a question, which of their sessions and
//! messages match?"
//!
//! A tantivy index in `<data-dir>/index`, derived from the store. Each
//! stored message is one document: its scope (`user_id`, a raw term), its
//! `message_id` and `seq` (fast and indexed, to trace hits back to the store
//! and to replay idempotently), its session and its text under the
//! code-aware tokenizer. Each session record is one more document
//! (`doc_kind` = `session`): its whole text and its stored ranking profile
//! (the record's symbols, paths, error types, tests and outcome as match
//! keys, which ranking weighs), replaced whole whenever the record is
//! re-derived. The facts are not indexed as fields of their own: ranking
//! reads them from the profile of each candidate, and every indexed field
//! costs a term dictionary per segment, which every Add's commit builds.
//! Every commit carries a payload `{"schema": V, "seq": N}`: everything the
//! store holds up to `seq` N is in the index. At start-up the index replays
//! what it lacks; a missing, unreadable or outdated index is rebuilt from the
//! store.
//!
//! Architecture invariant: this module knows nothing of HTTP. Only the one
//! writer thread (see `service`) holds the `IndexWriter`; searches share the
//! reader, which is reloaded after every commit.

pub mod directory;
mod scope;

use std::path::{Path, PathBuf};

use tantivy::DocSet;
use tantivy::collector::TopDocs;
use tantivy::directory::error::OpenDirectoryError;
use tantivy::query::{Bm25Weight, BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing,
    TextOptions, Value,
};
use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use tantivy::{
    Index, IndexReader, IndexSettings, IndexWriter, ReloadPolicy, TantivyDocument, Term, doc,
};

use self::directory::{CLEAN_MARKER, DerivedDirectory};
use self::scope::{ScopeCache, SegmentScope};

use crate::store::StoredMessage;
use crate::tokenize;

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
const SCHEMA_VERSION: u64 = 11;
/// Memory the writer may buffer before it flushes a segment.
const WRITER_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// Decompressed document store blocks each segment's reader keeps (tantivy
/// keeps 100, 16 KB or more each). Stored fields are read for ranking
/// profiles only, and the searcher keeps the parsed profiles, so a block
/// is seldom read twice: the default cache held tens of MB per searcher for
/// nothing.
const DOC_STORE_CACHE_BLOCKS: usize = 8;

/// How segments are merged. Every Add commits, so segments start at a few
/// documents. tantivy's default puts every segment under 10,000 documents
/// in one level and merges all of them whenever eight are there, so the
/// largest of them is rewritten again and again: on a growing store, most
/// of the writer's time went to merges (FST building in profiles). Here
/// levels start at [`MERGE_MIN_LAYER_DOCS`] and each spans a factor of
/// about 2.8 in size, so a document is rewritten a few times over its life
/// and a reader sees a few dozen segments at most.
fn merge_policy() -> tantivy::indexer::LogMergePolicy {
    let mut policy = tantivy::indexer::LogMergePolicy::default();
    policy.set_min_layer_size(MERGE_MIN_LAYER_DOCS);
    policy.set_level_log_size(MERGE_LEVEL_LOG_SIZE);
    policy.set_min_num_segments(MERGE_MIN_SEGMENTS);
    policy
}

/// Segments smaller than this many documents count as this size.
const MERGE_MIN_LAYER_DOCS: u32 = 100;
/// log2 of the size ratio a merge level spans.
const MERGE_LEVEL_LOG_SIZE: f64 = 1.5;
/// Segments of one level merged together.
const MERGE_MIN_SEGMENTS: usize = 5;

/// Distinct query terms a session search uses: the first ones of a task
/// statement (title and opening) carry its subject; a long pasted log adds
/// time, not precision.
const MAX_SESSION_QUERY_TERMS: usize = 128;

/// Distinct query terms, the rarest, a search for the best-matching
/// message of known sessions uses.
const MAX_MESSAGE_QUERY_TERMS: usize = 16;

#[derive(Debug, Clone, Copy)]
struct Fields {
    user_id: Field,
    /// `message` or `session`.
    doc_kind: Field,
    message_id: Field,
    seq: Field,
    /// Set on session documents only: replaced whole when re-derived.
    session_key: Field,
    /// Message documents: the key of their session (apart from
    /// `session_key`, which replacing a session record deletes by).
    message_session: Field,
    /// Session documents: the ranking profile (JSON, stored only).
    profile: Field,
    /// Session documents: task statement and evidence text (apart from
    /// `text`, so that session searches walk session postings only).
    session_text: Field,
    text: Field,
}

/// `doc_kind` of a raw message document.
const KIND_MESSAGE: &str = "message";
/// `doc_kind` of a session record document.
const KIND_SESSION: &str = "session";

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let code_text = || {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(CODE_TOKENIZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        )
    };
    let fields = Fields {
        user_id: builder.add_text_field("user_id", STRING),
        doc_kind: builder.add_text_field("doc_kind", STRING),
        message_id: builder.add_u64_field("message_id", INDEXED | FAST),
        seq: builder.add_u64_field("seq", INDEXED | FAST),
        session_key: builder.add_text_field("session_key", STRING),
        message_session: builder.add_text_field("message_session", STRING),
        profile: builder.add_text_field("profile", STORED),
        session_text: builder.add_text_field("session_text", code_text()),
        text: builder.add_text_field("text", code_text()),
    };
    (builder.build(), fields)
}

/// What the index keeps of a session record, one document per session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionDoc {
    /// Scope.
    pub user_id: String,
    /// The session.
    pub session_id: String,
    /// Last Add the record includes.
    pub last_seq: i64,
    /// The ranking profile, JSON.
    pub profile_json: String,
    /// Task statement, evidence and the messages no evidence came from.
    pub text: String,
}

fn session_key(user_id: &str, session_id: &str) -> String {
    // Length-prefixed: no choice of ids can make two pairs collide.
    format!("{}:{user_id}{session_id}", user_id.len())
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
        let tokens = tokenize::code_tokens(text)
            .into_iter()
            .map(|token| Token {
                offset_from: token.offset_from,
                offset_to: token.offset_to,
                position: token.position,
                text: token.text,
                position_length: 1,
            })
            .collect();
        CodeTokenStream { tokens, next: 0 }
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

/// BM25 statistics of one user's session documents: their number, their
/// summed text length and each query term's document frequency, all
/// counted within the scope. A user's ranking then depends on their own
/// memory only, and no score reveals what another user stores. Handed to
/// tantivy's [`Bm25Weight`], which would otherwise count over every user's
/// documents.
struct ScopeStatistics {
    num_docs: u64,
    num_tokens: u64,
    doc_freqs: std::collections::HashMap<Term, u64>,
}

impl tantivy::query::Bm25StatisticsProvider for ScopeStatistics {
    fn total_num_tokens(&self, _field: Field) -> tantivy::Result<u64> {
        Ok(self.num_tokens)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.num_docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(self.doc_freqs.get(term).copied().unwrap_or(0))
    }
}

/// tantivy's BM25 IDF of a term held by `df` of `num_docs` documents.
fn bm25_idf(num_docs: u64, df: u64) -> f32 {
    let num_docs = num_docs.max(df) as f32;
    let df = df as f32;
    (1.0 + (num_docs - df + 0.5) / (df + 0.5)).ln()
}

/// The searchable side of the index, shared by all searches.
pub struct SearchIndex {
    reader: IndexReader,
    fields: Fields,
    /// Everything stored up to this sequence number is visible to
    /// searches: set by the writer's commit right after the reload, before
    /// any Add it covers is answered.
    visible_seq: std::sync::atomic::AtomicI64,
    /// Each user's live session documents per segment state, so that a
    /// search walks only the segments it has not seen yet.
    scopes: ScopeCache,
}

/// Bytes the remembered scopes may hold: five bytes per session document
/// and segment, so room for about three million, far more than the
/// scopes of the users searching at one time.
const SCOPE_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// The writable side, owned by the one writer thread.
pub struct IndexWriterHandle {
    writer: IndexWriter<TantivyDocument>,
    fields: Fields,
    /// Everything stored up to this sequence number is committed.
    committed_seq: i64,
}

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
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .doc_store_cache_num_blocks(DOC_STORE_CACHE_BLOCKS)
        .try_into()?;
    Ok((
        SearchIndex {
            reader,
            fields,
            visible_seq: std::sync::atomic::AtomicI64::new(committed_seq),
            scopes: ScopeCache::new(SCOPE_CACHE_BYTES),
        },
        IndexWriterHandle {
            writer,
            fields,
            committed_seq,
        },
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
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .doc_store_cache_num_blocks(DOC_STORE_CACHE_BLOCKS)
        .try_into()?;
    Ok(SearchIndex {
        reader,
        fields,
        visible_seq: std::sync::atomic::AtomicI64::new(seq),
        scopes: ScopeCache::new(SCOPE_CACHE_BYTES),
    })
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

#[derive(serde::Serialize, serde::Deserialize)]
struct CommitPayload {
    schema: u64,
    seq: i64,
}

impl IndexWriterHandle {
    /// Everything stored up to this sequence number is committed.
    pub fn committed_seq(&self) -> i64 {
        self.committed_seq
    }

    /// Queues the documents of these messages. With `replace`, documents of
    /// the same Adds that an earlier, unrecorded commit may have left are
    /// deleted first, so a replay never duplicates.
    pub fn add_messages(
        &mut self,
        messages: &[StoredMessage],
        replace: bool,
    ) -> Result<(), IndexError> {
        let mut last_replaced = None;
        for message in messages {
            if replace && last_replaced != Some(message.seq) {
                self.writer
                    .delete_term(Term::from_field_u64(self.fields.seq, seq_term(message.seq)));
                last_replaced = Some(message.seq);
            }
            self.writer.add_document(doc!(
                self.fields.user_id => message.user_id.as_str(),
                self.fields.doc_kind => KIND_MESSAGE,
                self.fields.message_id => seq_term(message.message_id),
                self.fields.seq => seq_term(message.seq),
                self.fields.message_session => session_key(&message.user_id, &message.session_id),
                self.fields.text => message.content.as_str(),
            ))?;
        }
        Ok(())
    }

    /// Queues session documents, each replacing the one of the same session.
    pub fn upsert_sessions(&mut self, sessions: &[SessionDoc]) -> Result<(), IndexError> {
        let fields = self.fields;
        for session in sessions {
            let key = session_key(&session.user_id, &session.session_id);
            self.writer
                .delete_term(Term::from_field_text(fields.session_key, &key));
            self.writer.add_document(doc!(
                fields.user_id => session.user_id.as_str(),
                fields.doc_kind => KIND_SESSION,
                fields.seq => seq_term(session.last_seq),
                fields.session_key => key,
                fields.profile => session.profile_json.as_str(),
                fields.session_text => session.text.as_str(),
            ))?;
        }
        Ok(())
    }

    /// Commits what was queued, recording `seq` as applied, and makes it
    /// visible to `search_index`.
    pub fn commit(&mut self, seq: i64, search_index: &SearchIndex) -> Result<(), IndexError> {
        let payload = serde_json::json!({"schema": SCHEMA_VERSION, "seq": seq}).to_string();
        let mut prepared = self.writer.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        self.committed_seq = seq;
        search_index.reader.reload()?;
        search_index
            .visible_seq
            .store(seq, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Waits for merges, syncs every index file, and leaves the marker that
    /// lets the next start-up skip verification. Call after the last commit.
    pub fn close(self, data_dir: &Path) -> Result<(), IndexError> {
        self.writer.wait_merging_threads()?;
        let dir = data_dir.join(INDEX_DIR);
        directory::sync_tree(&dir).map_err(io_error(&dir))?;
        let marker = data_dir.join(CLEAN_MARKER);
        std::fs::File::create(&marker)
            .and_then(|file| file.sync_all())
            .map_err(io_error(&marker))?;
        directory::sync_dir(data_dir).map_err(io_error(data_dir))
    }

    /// Deletes every document of these users and of these `(user_id,
    /// session_id)` sessions (their records and their messages), then
    /// commits (the committed sequence number does not change).
    pub fn forget(
        &mut self,
        user_ids: &[String],
        sessions: &[(String, String)],
        search_index: &SearchIndex,
    ) -> Result<(), IndexError> {
        for user_id in user_ids {
            self.writer
                .delete_term(Term::from_field_text(self.fields.user_id, user_id));
        }
        for (user_id, session_id) in sessions {
            let key = session_key(user_id, session_id);
            self.writer
                .delete_term(Term::from_field_text(self.fields.session_key, &key));
            self.writer
                .delete_term(Term::from_field_text(self.fields.message_session, &key));
        }
        self.commit(self.committed_seq, search_index)
    }

    /// Queues the deletion of every document of these users (applied with
    /// the next commit, before the documents queued after it).
    pub fn delete_users(&mut self, user_ids: &[String]) {
        for user_id in user_ids {
            self.writer
                .delete_term(Term::from_field_text(self.fields.user_id, user_id));
        }
    }

    /// Drops everything queued since the last commit.
    pub fn rollback(&mut self) -> Result<(), IndexError> {
        self.writer.rollback()?;
        Ok(())
    }
}

fn seq_term(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// One session document found for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHit {
    /// Names the document for as long as the index lives (segments never
    /// change; a merge makes new ones with new keys).
    pub key: DocKey,
    /// Its stored ranking profile (JSON); `None` when the caller knew the
    /// key already (see [`SearchIndex::search_sessions`]).
    pub profile_json: Option<String>,
    /// BM25 of the query terms over its whole text.
    pub text_score: f32,
    /// The summed IDF of the query terms its text holds, however often
    /// and however long the text: a rare term found in a long trajectory
    /// counts in full.
    pub matched_weight: f32,
}

/// The live session documents of one scope.
struct ScopeDocuments {
    /// Per segment, in the searcher's order.
    segments: Vec<std::sync::Arc<SegmentScope>>,
    num_docs: u64,
    num_tokens: u64,
}

/// Calls `found` with the position in `docs` (ascending) and the term
/// frequency of every document of `docs` that `postings` holds: the two
/// lists walked together, each skipping ahead to the other's next document.
fn intersect_postings(
    postings: &mut tantivy::postings::SegmentPostings,
    docs: &[u32],
    mut found: impl FnMut(usize, u32),
) {
    use tantivy::postings::Postings;
    let mut position = 0;
    let mut doc = postings.doc();
    while position < docs.len() && doc != tantivy::TERMINATED {
        let wanted = docs[position];
        if doc < wanted {
            doc = postings.seek(wanted);
        } else if doc > wanted {
            position = gallop_to(docs, position, doc);
        } else {
            found(position, postings.term_freq());
            position += 1;
            doc = postings.advance();
        }
    }
}

/// The first position from `position` on whose document in `docs`
/// (ascending) is `target` or after: steps doubling from `position`, then a
/// binary search within the last step, so a near target costs a few
/// comparisons and a far one a logarithm.
fn gallop_to(docs: &[u32], position: usize, target: u32) -> usize {
    let mut low = position;
    let mut step = 1;
    while low + step < docs.len() && docs[low + step] < target {
        low += step;
        step *= 2;
    }
    let high = (low + step + 1).min(docs.len());
    low + docs[low..high].partition_point(|doc| *doc < target)
}

/// A document's segment and number within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DocKey {
    segment: tantivy::index::SegmentId,
    doc: u32,
}

/// The session documents of a scope that share terms with a query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionCandidates {
    /// Best first.
    pub hits: Vec<SessionHit>,
    /// Session documents in the scope.
    pub scope_size: u64,
    /// The sum of the query terms' IDF over the scope's session texts
    /// (document frequencies counted within the scope): the scale of a
    /// text score (a session holding every term scores about this much
    /// times k1 + 1), so that `text_score / query_weight` compares across
    /// queries. Terms no session holds count at full weight: a query made
    /// of words the memory never saw matches nothing.
    pub query_weight: f32,
    /// The query's rarest terms that some session holds, rarest first: what
    /// finds the best-matching message of a session.
    pub rarest_terms: Vec<String>,
}

/// One matching message: its store id and BM25 score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// The message's row id in the store.
    pub message_id: i64,
    /// BM25 over the code-aware terms.
    pub score: f32,
}

impl SearchIndex {
    /// Everything stored up to this sequence number is visible to searches.
    pub fn visible_seq(&self) -> i64 {
        self.visible_seq.load(std::sync::atomic::Ordering::Acquire)
    }

    fn scoped(&self, user_id: &str, kind: &str) -> Vec<(Occur, Box<dyn Query>)> {
        let constant = |field: Field, value: &str| -> Box<dyn Query> {
            Box::new(ConstScoreQuery::new(
                Box::new(TermQuery::new(
                    Term::from_field_text(field, value),
                    IndexRecordOption::Basic,
                )),
                0.0,
            ))
        };
        vec![
            (Occur::Must, constant(self.fields.user_id, user_id)),
            (Occur::Must, constant(self.fields.doc_kind, kind)),
        ]
    }

    /// The session documents of `user_id` sharing a term with `terms`: the
    /// best `limit` by BM25 over their whole text.
    /// Profiles are read only for documents `known` says no to (a caller
    /// may keep the parsed profiles of keys it saw).
    ///
    /// Each term's postings are read once, within the scope: its document
    /// frequency there, and its frequency in each document that holds it.
    /// The scores are then tantivy's BM25 (its [`Bm25Weight`] with the
    /// scope's statistics), summed per document in the order of `terms`,
    /// and the best kept by score, then document address, as tantivy's
    /// `TopDocs` over `scope AND (term OR term ...)` would.
    pub fn search_sessions(
        &self,
        user_id: &str,
        terms: &[String],
        limit: usize,
        known: &dyn Fn(&DocKey) -> bool,
    ) -> Result<SessionCandidates, IndexError> {
        let searcher = self.reader.searcher();
        let scope = self.scope_documents(&searcher, user_id)?;
        let scope_size = scope.num_docs;
        let terms: Vec<&String> = terms.iter().take(MAX_SESSION_QUERY_TERMS).collect();
        if terms.is_empty() || limit == 0 || scope_size == 0 {
            return Ok(SessionCandidates {
                hits: Vec::new(),
                scope_size,
                query_weight: 0.0,
                rarest_terms: Vec::new(),
            });
        }
        // Every scope document has a slot: the documents of the first
        // segment, then of the next, each segment's ascending.
        let mut first_slots = Vec::with_capacity(scope.segments.len());
        let mut num_slots = 0usize;
        for segment_scope in &scope.segments {
            first_slots.push(num_slots);
            num_slots += segment_scope.docs.len();
        }
        let inverted: Vec<Option<std::sync::Arc<tantivy::InvertedIndexReader>>> = searcher
            .segment_readers()
            .iter()
            .zip(&scope.segments)
            .map(|(segment, segment_scope)| {
                if segment_scope.docs.is_empty() {
                    Ok(None)
                } else {
                    segment.inverted_index(self.fields.session_text).map(Some)
                }
            })
            .collect::<tantivy::Result<_>>()?;
        // Each term's postings within the scope: (slot, term frequency),
        // the term's entries from `term_ends` of the previous term to its own.
        let mut statistics = ScopeStatistics {
            num_docs: scope_size,
            num_tokens: scope.num_tokens,
            doc_freqs: std::collections::HashMap::with_capacity(terms.len()),
        };
        let mut held: Vec<(u32, u32)> = Vec::new();
        let mut term_ends: Vec<usize> = Vec::with_capacity(terms.len());
        let mut term_keys: Vec<Term> = Vec::with_capacity(terms.len());
        for term in &terms {
            let key = Term::from_field_text(self.fields.session_text, term);
            let term_start = held.len();
            for ((inverted, segment_scope), first_slot) in
                inverted.iter().zip(&scope.segments).zip(&first_slots)
            {
                let Some(inverted) = inverted else {
                    continue;
                };
                let Some(mut postings) = inverted
                    .read_postings(&key, IndexRecordOption::WithFreqs)
                    .map_err(tantivy::TantivyError::from)?
                else {
                    continue;
                };
                intersect_postings(&mut postings, &segment_scope.docs, |position, freq| {
                    held.push(((first_slot + position) as u32, freq));
                });
            }
            statistics
                .doc_freqs
                .insert(key.clone(), (held.len() - term_start) as u64);
            term_ends.push(held.len());
            term_keys.push(key);
        }
        let term_ranges: Vec<std::ops::Range<usize>> = term_ends
            .iter()
            .scan(0, |start, end| {
                let range = *start..*end;
                *start = *end;
                Some(range)
            })
            .collect();
        let idfs: Vec<f32> = term_ranges
            .iter()
            .map(|range| bm25_idf(scope_size, range.len() as u64))
            .collect();
        let query_weight: f32 = idfs.iter().sum();
        let fieldnorm_ids: Vec<u8> = scope
            .segments
            .iter()
            .flat_map(|segment_scope| segment_scope.fieldnorm_ids.iter().copied())
            .collect();
        // Per slot, summed term by term in query order (as tantivy's union
        // sums its term scorers): the BM25 score, the matched weight, and
        // whether any term is there at all.
        let mut text_scores = vec![0.0f32; num_slots];
        let mut matched_weights = vec![0.0f32; num_slots];
        let mut matched = vec![false; num_slots];
        for ((range, key), idf) in term_ranges.iter().zip(&term_keys).zip(&idfs) {
            if range.is_empty() {
                continue;
            }
            let bm25 = Bm25Weight::for_terms(&statistics, std::slice::from_ref(key))?;
            for &(slot, freq) in &held[range.clone()] {
                let slot = slot as usize;
                text_scores[slot] += bm25.score(fieldnorm_ids[slot], freq);
                matched_weights[slot] += idf;
                matched[slot] = true;
            }
        }
        let mut by_rarity: Vec<(usize, &String)> = term_ranges
            .iter()
            .zip(&terms)
            .filter(|(range, _)| !range.is_empty())
            .map(|(range, term)| (range.len(), *term))
            .collect();
        by_rarity.sort();
        let rarest_terms: Vec<String> = by_rarity
            .iter()
            .take(MAX_MESSAGE_QUERY_TERMS)
            .map(|(_, term)| (*term).clone())
            .collect();
        // (score, address, slot) of every document holding a term,
        // ascending by address; then the best `limit`, ties to the lower
        // address.
        let mut found: Vec<(f32, tantivy::DocAddress, usize)> = Vec::new();
        for ((segment_ord, segment_scope), first_slot) in
            scope.segments.iter().enumerate().zip(&first_slots)
        {
            for (position, doc) in segment_scope.docs.iter().enumerate() {
                let slot = first_slot + position;
                if matched[slot] {
                    let address = tantivy::DocAddress::new(segment_ord as u32, *doc);
                    found.push((text_scores[slot], address, slot));
                }
            }
        }
        let best_first = |left: &(f32, tantivy::DocAddress, usize),
                          right: &(f32, tantivy::DocAddress, usize)| {
            right.0.total_cmp(&left.0).then(left.1.cmp(&right.1))
        };
        if found.len() > limit {
            found.select_nth_unstable_by(limit, best_first);
            found.truncate(limit);
        }
        found.sort_unstable_by(best_first);
        let mut hits = Vec::with_capacity(found.len());
        for (text_score, address, slot) in found {
            let key = DocKey {
                segment: searcher.segment_reader(address.segment_ord).segment_id(),
                doc: address.doc_id,
            };
            let profile_json = if known(&key) {
                None
            } else {
                let document: TantivyDocument = searcher.doc(address)?;
                let Some(json) = document
                    .get_first(self.fields.profile)
                    .and_then(|value| value.as_str())
                else {
                    continue;
                };
                Some(json.to_string())
            };
            hits.push(SessionHit {
                key,
                profile_json,
                text_score,
                matched_weight: matched_weights[slot],
            });
        }
        Ok(SessionCandidates {
            hits,
            scope_size,
            query_weight,
            rarest_terms,
        })
    }

    /// The live session documents of `user_id`, per segment, with their
    /// number and their summed `session_text` length: remembered per
    /// segment state (see [`scope`]), computed for the segments not seen
    /// yet.
    fn scope_documents(
        &self,
        searcher: &tantivy::Searcher,
        user_id: &str,
    ) -> Result<ScopeDocuments, IndexError> {
        let segments = self.scopes.scopes(searcher, user_id, |ordinals| {
            let scope = BooleanQuery::new(self.scoped(user_id, KIND_SESSION));
            let weight = scope.weight(tantivy::query::EnableScoring::disabled_from_searcher(
                searcher,
            ))?;
            ordinals
                .iter()
                .map(|ordinal| {
                    let segment = searcher.segment_reader(*ordinal as u32);
                    let fieldnorms = segment.get_fieldnorms_reader(self.fields.session_text)?;
                    let mut matching = weight.scorer(segment, 1.0)?;
                    Ok(SegmentScope::collect(
                        segment,
                        matching.as_mut(),
                        &fieldnorms,
                    ))
                })
                .collect()
        })?;
        Ok(ScopeDocuments {
            num_docs: segments
                .iter()
                .map(|segment| segment.docs.len() as u64)
                .sum(),
            num_tokens: segments.iter().map(|segment| segment.num_tokens).sum(),
            segments,
        })
    }

    /// The best `limit` messages of the given sessions of `user_id` for
    /// `terms` (the first few are used: pass the rarest, see
    /// [`SessionCandidates::rarest_terms`]), by BM25, best first.
    pub fn search_messages_in(
        &self,
        user_id: &str,
        session_ids: &[&str],
        terms: &[String],
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        if session_ids.is_empty() || terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let any_of = |field: Field, values: &mut dyn Iterator<Item = String>, option| {
            let clauses: Vec<(Occur, Box<dyn Query>)> = values
                .map(|value| {
                    let query: Box<dyn Query> =
                        Box::new(TermQuery::new(Term::from_field_text(field, &value), option));
                    (Occur::Should, query)
                })
                .collect();
            Box::new(BooleanQuery::new(clauses)) as Box<dyn Query>
        };
        let mut clauses = self.scoped(user_id, KIND_MESSAGE);
        let sessions = any_of(
            self.fields.message_session,
            &mut session_ids
                .iter()
                .map(|session| session_key(user_id, session)),
            IndexRecordOption::Basic,
        );
        clauses.push((Occur::Must, Box::new(ConstScoreQuery::new(sessions, 0.0))));
        clauses.push((
            Occur::Must,
            any_of(
                self.fields.text,
                &mut terms.iter().take(MAX_MESSAGE_QUERY_TERMS).cloned(),
                IndexRecordOption::WithFreqs,
            ),
        ));
        let searcher = self.reader.searcher();
        let top = searcher.search(
            &BooleanQuery::new(clauses),
            &TopDocs::with_limit(limit).order_by_score(),
        )?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let segment = searcher.segment_reader(address.segment_ord);
            let column = segment.fast_fields().u64("message_id")?;
            if let Some(message_id) = column.first(address.doc_id) {
                hits.push(Hit {
                    message_id: i64::try_from(message_id).unwrap_or(0),
                    score,
                });
            }
        }
        Ok(hits)
    }

    /// Number of documents visible to searches.
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}

#[cfg(test)]
mod tests;
