//! index::published: "what was written since the last commit?", searchable
//! at once.
//!
//! A tantivy commit serialises a new segment (term dictionaries, postings,
//! fast fields) and later merges rewrite it: too costly for every group of
//! Adds. So the index commits about once a second (see
//! `IndexWriterHandle::publish`), and what the writer wrote since is held
//! here too, in memory, as small inverted lists per writer turn
//! ([`PublishedBatch`]): the Adds are stored (the store is the source of
//! truth), then published here before they are answered, and a search reads
//! the committed segments and these batches together, as one index.
//!
//! The scores are the ones the committed index would give: a batch keeps
//! each document's term frequencies and its length as tantivy encodes it
//! (its fieldnorm id), and the statistics of a search count the batches'
//! documents. A session document here replaces the committed document of
//! the same session (and any older one here), as its commit would; parts
//! only add.
//!
//! A commit makes the batches' documents part of the segments; the view
//! that searches read then has the new searcher and no batch (see
//! `SearchIndex::view`). After a crash the batches are gone with the
//! uncommitted documents, and start-up indexes again every Add past the
//! committed sequence number.

use rustc_hash::FxHashMap;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::index::SegmentId;
use tantivy::tokenizer::Token;

use precedent_core::domain::UserId;

/// Term -> (document, term frequency), documents ascending.
pub(super) type Postings = FxHashMap<String, Vec<(u32, u32)>>;

/// What a published document is.
#[derive(Debug)]
pub(super) enum PublishedKind {
    /// A session record's document; `last_seq`: the last Add its record
    /// includes.
    Session { profile: Vec<u8>, last_seq: i64 },
    /// A part: messages `range` (see `part_range`) of the Add `seq`.
    Part { seq: i64, range: u64 },
}

/// A session document or a part written since the last commit.
#[derive(Debug)]
pub(super) struct PublishedDoc {
    pub user_id: UserId,
    /// The session's key (`session_key` of a session document,
    /// `part_session` of a part).
    pub key: String,
    /// `session_hash` of `key`.
    pub hash: u64,
    pub kind: PublishedKind,
    /// Its `session_text` length as tantivy encodes it.
    pub fieldnorm_id: u8,
}

impl PublishedDoc {
    /// A document of `user_id`'s session `key` (its length set when a
    /// batch takes it).
    pub(crate) fn new(user_id: &UserId, key: String, kind: PublishedKind) -> PublishedDoc {
        PublishedDoc {
            user_id: user_id.clone(),
            hash: super::session_hash(&key),
            key,
            kind,
            fieldnorm_id: 0,
        }
    }

    pub(crate) fn is_session(&self) -> bool {
        matches!(self.kind, PublishedKind::Session { .. })
    }
}

/// The documents of one writer turn, with their terms.
#[derive(Debug)]
pub(super) struct PublishedBatch {
    /// The committer's number of the hand-off holding these documents: a
    /// commit of every hand-off up to it drops the batch from the view.
    pub number: u64,
    /// Names the batch's documents in a `DocKey` (as a segment would).
    pub id: SegmentId,
    pub docs: Vec<PublishedDoc>,
    /// `session_text` term -> (document, term frequency).
    pub postings: Postings,
    /// Summed `session_text` tokens.
    pub num_tokens: u64,
    /// Bytes of text indexed, for the bound on what is held here.
    pub text_bytes: usize,
}

impl PublishedBatch {
    pub(crate) fn new(number: u64) -> PublishedBatch {
        PublishedBatch {
            number,
            id: SegmentId::generate_random(),
            docs: Vec::new(),
            postings: Postings::default(),
            num_tokens: 0,
            text_bytes: 0,
        }
    }

    /// Documents, as they count in tantivy's `max_doc`.
    pub(crate) fn num_docs(&self) -> u64 {
        self.docs.len() as u64
    }

    pub(crate) fn add(&mut self, mut document: PublishedDoc, tokens: &[Token], text_bytes: usize) {
        let doc = self.docs.len() as u32;
        let num_tokens = index_terms(tokens, doc, &mut self.postings);
        self.text_bytes += text_bytes;
        self.num_tokens += u64::from(num_tokens);
        if let PublishedKind::Session { profile, .. } = &document.kind {
            self.text_bytes += profile.len();
        }
        document.fieldnorm_id = FieldNormReader::fieldnorm_to_id(num_tokens);
        self.docs.push(document);
    }
}

/// Adds `tokens` (a text's, from the code tokenizer) as document `doc` to
/// `postings` the way tantivy's indexer counts them (a token longer than
/// tantivy's limit is dropped, as tantivy drops it). Returns the number of
/// tokens counted, the document's length.
fn index_terms(tokens: &[Token], doc: u32, postings: &mut Postings) -> u32 {
    let mut counts: FxHashMap<&str, u32> = FxHashMap::default();
    let mut num_tokens = 0u32;
    for token in tokens {
        if token.text.len() > tantivy::tokenizer::MAX_TOKEN_LEN {
            continue;
        }
        num_tokens = num_tokens.saturating_add(1);
        *counts.entry(token.text.as_str()).or_insert(0) += 1;
    }
    for (term, freq) in counts {
        match postings.get_mut(term) {
            Some(list) => list.push((doc, freq)),
            None => {
                postings.insert(term.to_string(), vec![(doc, freq)]);
            }
        }
    }
    num_tokens
}

/// One user's documents among the published batches: the newest session
/// document of each session, and every part.
pub(super) struct PublishedScope<'a> {
    /// (batch, document), ascending (oldest batch first).
    pub docs: Vec<(usize, u32)>,
    /// The keys of the session documents among them.
    pub keys: Vec<&'a str>,
    /// Per batch, per document, its position in `docs` ([`NOT_IN_SCOPE`]
    /// for another user's or a replaced one).
    positions: Vec<Vec<u32>>,
}

const NOT_IN_SCOPE: u32 = u32::MAX;

impl<'a> PublishedScope<'a> {
    pub(crate) fn of(
        batches: &'a [std::sync::Arc<PublishedBatch>],
        user_id: &UserId,
    ) -> PublishedScope<'a> {
        let mut seen: std::collections::HashSet<&'a str> = std::collections::HashSet::new();
        let mut docs = Vec::new();
        let mut keys = Vec::new();
        for (batch_ord, batch) in batches.iter().enumerate().rev() {
            for (doc, document) in batch.docs.iter().enumerate().rev() {
                if document.user_id != *user_id {
                    continue;
                }
                if !document.is_session() {
                    docs.push((batch_ord, doc as u32));
                } else if seen.insert(document.key.as_str()) {
                    docs.push((batch_ord, doc as u32));
                    keys.push(document.key.as_str());
                }
            }
        }
        docs.sort_unstable();
        let mut positions: Vec<Vec<u32>> = batches
            .iter()
            .map(|batch| {
                if docs.is_empty() {
                    Vec::new()
                } else {
                    vec![NOT_IN_SCOPE; batch.docs.len()]
                }
            })
            .collect();
        for (position, &(batch_ord, doc)) in docs.iter().enumerate() {
            positions[batch_ord][doc as usize] = position as u32;
        }
        PublishedScope {
            docs,
            keys,
            positions,
        }
    }

    /// Calls `found` with the position in `docs` and the term frequency of
    /// every document of the scope holding `term` in its `session_text`.
    pub(crate) fn postings(
        &self,
        batches: &[std::sync::Arc<PublishedBatch>],
        term: &str,
        mut found: impl FnMut(usize, u32),
    ) {
        if self.docs.is_empty() {
            return;
        }
        for (batch, positions) in batches.iter().zip(&self.positions) {
            let Some(postings) = batch.postings.get(term) else {
                continue;
            };
            for &(doc, freq) in postings {
                let position = positions[doc as usize];
                if position != NOT_IN_SCOPE {
                    found(position as usize, freq);
                }
            }
        }
    }
}
