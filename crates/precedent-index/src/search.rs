//! index::search: what session and part searches share, over one view
//! (the committed segments and the batches published since): the view
//! itself, a user's scope of documents, a term's postings within it and
//! tantivy's BM25 formula.
//!
//! A session's text is its document's (the task statement) and its parts'
//! (every message, each indexed once, by the Add that brought it): a
//! session search ([`super::sessions`]) counts a term's frequency over all
//! of them, and the session's length as their sum, so the score is BM25
//! over the session as one text, while an Add indexes only what it brought.
//! A part search ([`super::parts`]) finds where a session's best-matching
//! messages are.

use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Term};

use super::scope::{ScopeColumns, SegmentScope};
use super::{IndexError, KIND_PART, KIND_SESSION, SearchIndex, View};
use precedent_core::domain::UserId;

/// Distinct query terms, the rarest, a search for the best-matching
/// parts of known sessions uses.
pub(super) const MAX_MESSAGE_QUERY_TERMS: usize = 16;

/// tantivy's BM25 constants.
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// BM25 of a term of IDF `idf` found `tf` times in a text of `length`
/// tokens, among texts of `average` tokens: tantivy's formula.
pub(super) fn bm25(idf: f32, tf: u32, length: u64, average: f32) -> f32 {
    let tf = tf as f32;
    let norm = K1 * (1.0 - B + B * length as f32 / average);
    idf * (1.0 + K1) * (tf / (tf + norm))
}

/// tantivy's BM25 IDF of a term held by `df` of `num_docs` documents.
pub(super) fn bm25_idf(num_docs: u64, df: u64) -> f32 {
    let num_docs = num_docs.max(df) as f32;
    let df = df as f32;
    (1.0 + (num_docs - df + 0.5) / (df + 0.5)).ln()
}

/// The live session documents and parts of one scope.
pub(super) struct ScopeDocuments {
    /// Per segment, in the searcher's order.
    pub(super) segments: Vec<std::sync::Arc<SegmentScope>>,
}

/// Calls `found` with the position in the scope and the term frequency of
/// every document of `scope` that holds `term`: read block by block and
/// looked up in the scope's bit set when it has one (a large share of the
/// segment), else walked beside the scope's documents.
pub(super) fn scope_postings(
    inverted: &tantivy::InvertedIndexReader,
    term: &Term,
    scope: &SegmentScope,
    mut found: impl FnMut(usize, u32),
) -> tantivy::Result<()> {
    if let Some(dense) = &scope.dense {
        let Some(mut block) = inverted.read_block_postings(term, IndexRecordOption::WithFreqs)?
        else {
            return Ok(());
        };
        loop {
            let docs = block.docs();
            if docs.is_empty() {
                return Ok(());
            }
            for (doc, freq) in docs.iter().zip(block.freqs()) {
                if let Some(position) = dense.position(*doc) {
                    found(position, *freq);
                }
            }
            block.advance();
        }
    }
    if let Some(mut postings) = inverted.read_postings(term, IndexRecordOption::WithFreqs)? {
        intersect_postings(&mut postings, &scope.docs, found);
    }
    Ok(())
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
pub(super) fn gallop_to(docs: &[u32], position: usize, target: u32) -> usize {
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
    pub(super) segment: tantivy::index::SegmentId,
    pub(super) doc: u32,
}

impl SearchIndex {
    /// Everything stored up to this sequence number is visible to searches.
    pub fn visible_seq(&self) -> i64 {
        self.visible_seq.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(super) fn scoped(&self, user_id: &UserId, kind: &str) -> Vec<(Occur, Box<dyn Query>)> {
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
            (Occur::Must, constant(self.fields.user_id, user_id.as_str())),
            (Occur::Must, constant(self.fields.doc_kind, kind)),
        ]
    }

    /// Calls `found` with each live session document of `segment` whose
    /// `session_key` is one of `keys`.
    pub(super) fn session_documents_of(
        &self,
        segment: &tantivy::SegmentReader,
        keys: &[&str],
        mut found: impl FnMut(tantivy::DocId),
    ) -> tantivy::Result<()> {
        let inverted = segment.inverted_index(self.fields.session_key)?;
        let alive = segment.alive_bitset();
        for key in keys {
            let term = Term::from_field_text(self.fields.session_key, key);
            let Some(mut postings) = inverted.read_postings(&term, IndexRecordOption::Basic)?
            else {
                continue;
            };
            let mut doc = postings.doc();
            while doc != tantivy::TERMINATED {
                if alive.is_none_or(|alive| alive.is_alive(doc)) {
                    found(doc);
                }
                doc = postings.advance();
            }
        }
        Ok(())
    }

    /// The live session documents and parts of `user_id`, per segment,
    /// with their lengths and sessions: remembered per segment state (see
    /// [`scope`]), computed for the segments not seen yet.
    pub(super) fn scope_documents(
        &self,
        searcher: &tantivy::Searcher,
        user_id: &UserId,
    ) -> Result<ScopeDocuments, IndexError> {
        let segments = self.scopes.scopes(searcher, user_id, |ordinals| {
            let constant = |query: Box<dyn Query>| -> Box<dyn Query> {
                Box::new(ConstScoreQuery::new(query, 0.0))
            };
            let term = |field: Field, value: &str| -> Box<dyn Query> {
                Box::new(TermQuery::new(
                    Term::from_field_text(field, value),
                    IndexRecordOption::Basic,
                ))
            };
            let kinds = BooleanQuery::new(vec![
                (Occur::Should, term(self.fields.doc_kind, KIND_SESSION)),
                (Occur::Should, term(self.fields.doc_kind, KIND_PART)),
            ]);
            let scope = BooleanQuery::new(vec![
                (
                    Occur::Must,
                    constant(term(self.fields.user_id, user_id.as_str())),
                ),
                (Occur::Must, constant(Box::new(kinds))),
            ]);
            let weight = scope.weight(tantivy::query::EnableScoring::disabled_from_searcher(
                searcher,
            ))?;
            ordinals
                .iter()
                .map(|ordinal| {
                    let segment = searcher.segment_reader(*ordinal as u32);
                    let fieldnorms = segment.get_fieldnorms_reader(self.fields.session_text)?;
                    let fast = segment.fast_fields();
                    let hashes = fast.u64("session_hash")?;
                    let part_ranges = fast.u64("part_range")?;
                    let mut matching = weight.scorer(segment, 1.0)?;
                    Ok(SegmentScope::collect(
                        segment,
                        matching.as_mut(),
                        &ScopeColumns {
                            fieldnorms: &fieldnorms,
                            hashes: &hashes,
                            part_ranges: &part_ranges,
                        },
                    ))
                })
                .collect()
        })?;
        Ok(ScopeDocuments { segments })
    }

    /// Number of documents visible to searches: the committed ones, less
    /// those a published record replaces, plus the published ones (the
    /// newest record of each session, every part).
    pub fn num_docs(&self) -> u64 {
        let view = self.view();
        let mut keys: std::collections::HashSet<&str> = std::collections::HashSet::new();
        let mut published = 0u64;
        for batch in view.recent.iter().rev() {
            for document in batch.docs.iter().rev() {
                if !document.is_session() || keys.insert(document.key.as_str()) {
                    published += 1;
                }
            }
        }
        let mut replaced = 0u64;
        if !keys.is_empty() {
            let keys: Vec<&str> = keys.into_iter().collect();
            for segment in view.searcher.segment_readers() {
                // A segment that cannot be read counts nothing replaced.
                let _ = self.session_documents_of(segment, &keys, |_| replaced += 1);
            }
        }
        (view.searcher.num_docs() + published).saturating_sub(replaced)
    }

    /// The state searches read now.
    pub(super) fn view(&self) -> std::sync::Arc<View> {
        match self.view.lock() {
            Ok(view) => std::sync::Arc::clone(&view),
            Err(poisoned) => std::sync::Arc::clone(&poisoned.into_inner()),
        }
    }
}
