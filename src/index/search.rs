//! index::search: "which of this user's sessions and messages match these
//! terms, and how well?", over one view (the committed segments and the
//! batches published since).
//!
//! A session's text is its document's (the task statement) and its parts'
//! (every message, each indexed once, by the Add that brought it): a
//! session search counts a term's frequency over all of them, and the
//! session's length as their sum, so the score is BM25 over the session as
//! one text, while an Add indexes only what it brought.

use tantivy::collector::TopDocs;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::{Bm25Weight, BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::{DocSet, TantivyDocument, Term};

use rustc_hash::FxHashMap;

use super::published::{PublishedBatch, PublishedKind, PublishedScope};
use super::scope::{ScopeColumns, SegmentScope};
use super::{IndexError, KIND_PART, KIND_SESSION, SearchIndex, View, part_bounds, session_key};

/// Distinct query terms a session search uses: the first ones of a task
/// statement (title and opening) carry its subject; a long pasted log adds
/// time, not precision. 64 rather than 128 halves a large scope's search
/// (every term's postings over the scope's parts are read) and, left out
/// by repository on dev, kept every condition within about .01 of nDCG and
/// lowered the repository condition's noise share (.451 to .417).
const MAX_SESSION_QUERY_TERMS: usize = 64;

/// Distinct query terms, the rarest, a search for the best-matching
/// parts of known sessions uses.
const MAX_MESSAGE_QUERY_TERMS: usize = 16;

/// One session document found for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHit {
    /// Names the document for as long as the index lives (segments never
    /// change; a merge makes new ones with new keys).
    pub key: DocKey,
    /// Its stored ranking profile (JSON); `None` when the caller knew the
    /// key already (see [`SearchIndex::search_sessions`]).
    pub profile_json: Option<String>,
    /// BM25 of the query terms over its whole text (its document's and
    /// its parts').
    pub text_score: f32,
    /// The summed IDF of the query terms its text holds, however often
    /// and however long the text: a rare term found in a long trajectory
    /// counts in full.
    pub matched_weight: f32,
}

/// BM25 statistics of the parts: the committed segments' (tantivy's own,
/// over every user's documents of the field, as a search of the index
/// alone counts them) plus the published batches' documents, as their
/// commit will add them.
struct PartStatistics<'a> {
    searcher: &'a tantivy::Searcher,
    recent: &'a [std::sync::Arc<PublishedBatch>],
}

impl tantivy::query::Bm25StatisticsProvider for PartStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let published: u64 = self.recent.iter().map(|batch| batch.num_tokens).sum();
        Ok(self.searcher.total_num_tokens(field)? + published)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        let published: u64 = self.recent.iter().map(|batch| batch.num_docs()).sum();
        Ok(tantivy::query::Bm25StatisticsProvider::total_num_docs(self.searcher)? + published)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let published: u64 = match term.value().as_str() {
            Some(text) => self
                .recent
                .iter()
                .filter_map(|batch| batch.postings.get(text))
                .map(|postings| postings.len() as u64)
                .sum(),
            None => 0,
        };
        Ok(self.searcher.doc_freq(term)? + published)
    }
}

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
fn scope_postings(
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

/// A part's score and address, with its Add and `part_range` when it is a
/// published one.
type ScoredPart = (f32, tantivy::DocAddress, Option<(i64, u64)>);

/// One matching part: its messages and BM25 score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartHit {
    /// The Add whose messages it holds.
    pub seq: i64,
    /// Its first message's index within the Add.
    pub first_index: usize,
    /// The index after its last message's.
    pub end_index: usize,
    /// BM25 over the code-aware terms.
    pub score: f32,
}

impl SearchIndex {
    /// Everything stored up to this sequence number is visible to searches.
    pub fn visible_seq(&self) -> i64 {
        self.visible_seq.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(super) fn scoped(&self, user_id: &str, kind: &str) -> Vec<(Occur, Box<dyn Query>)> {
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

    /// The sessions of `user_id` sharing a term with `terms`: the best
    /// `limit` by BM25 over their whole text (their document's and their
    /// parts'). Profiles are read only for documents `known` says no to (a
    /// caller may keep the parsed profiles of keys it saw).
    ///
    /// Each term's postings are read once, within the scope, and summed
    /// per session: the term's document frequency is the number of
    /// sessions holding it, and a session's length the sum of its
    /// documents' (as tantivy encodes each). The scores are tantivy's BM25
    /// formula with these statistics, summed per session in the order of
    /// `terms`, and the best kept by score, then the address of the
    /// session's document.
    pub fn search_sessions(
        &self,
        user_id: &str,
        terms: &[String],
        limit: usize,
        known: &dyn Fn(&DocKey) -> bool,
    ) -> Result<SessionCandidates, IndexError> {
        let view = self.view();
        let searcher = &view.searcher;
        let scope = self.scope_documents(searcher, user_id)?;
        // The user's documents published since the commit: the newest
        // session document of each session, every part, and the committed
        // session documents they replace.
        let recent = PublishedScope::of(&view.recent, user_id);
        // Every scope document has a slot: the documents of the first
        // segment, then of the next, each segment's ascending, then the
        // published ones.
        let mut first_slots = Vec::with_capacity(scope.segments.len());
        let mut num_slots = 0usize;
        for segment_scope in &scope.segments {
            first_slots.push(num_slots);
            num_slots += segment_scope.docs.len();
        }
        let num_committed_slots = num_slots;
        num_slots += recent.docs.len();
        let replaced = self.replaced_slots(searcher, &scope, &first_slots, &recent)?;
        let num_segments = scope.segments.len();
        // Per slot: its length, its session's hash, whether it is a part,
        // and its address.
        let mut lengths: Vec<u64> = Vec::with_capacity(num_slots);
        let mut hashes: Vec<u64> = Vec::with_capacity(num_slots);
        let mut is_part: Vec<bool> = Vec::with_capacity(num_slots);
        for segment_scope in &scope.segments {
            lengths.extend(
                segment_scope
                    .fieldnorm_ids
                    .iter()
                    .map(|&id| u64::from(FieldNormReader::id_to_fieldnorm(id))),
            );
            hashes.extend_from_slice(&segment_scope.hashes);
            is_part.extend_from_slice(&segment_scope.is_part);
        }
        for &(batch, doc) in &recent.docs {
            let document = &view.recent[batch].docs[doc as usize];
            lengths.push(u64::from(FieldNormReader::id_to_fieldnorm(
                document.fieldnorm_id,
            )));
            hashes.push(document.hash);
            is_part.push(!document.is_session());
        }
        let address = |slot: usize| -> tantivy::DocAddress {
            if slot >= num_committed_slots {
                let (batch, doc) = recent.docs[slot - num_committed_slots];
                tantivy::DocAddress::new((num_segments + batch) as u32, doc)
            } else {
                let segment_ord = first_slots.partition_point(|&first| first <= slot) - 1;
                let doc = scope.segments[segment_ord].docs[slot - first_slots[segment_ord]];
                tantivy::DocAddress::new(segment_ord as u32, doc)
            }
        };
        let mut live = vec![true; num_slots];
        for &slot in &replaced {
            live[slot] = false;
        }
        // One group per live session document; each part joins its
        // session's (a part whose session has no live document, as in the
        // moment between a purge's deletions, joins none).
        const NO_GROUP: u32 = u32::MAX;
        let mut group_of_hash: FxHashMap<u64, u32> = FxHashMap::default();
        let mut group_slots: Vec<usize> = Vec::new();
        for slot in 0..num_slots {
            if live[slot] && !is_part[slot] {
                group_of_hash.entry(hashes[slot]).or_insert_with(|| {
                    group_slots.push(slot);
                    (group_slots.len() - 1) as u32
                });
            }
        }
        let num_groups = group_slots.len();
        let mut slot_groups = vec![NO_GROUP; num_slots];
        let mut group_lengths = vec![0u64; num_groups];
        for slot in 0..num_slots {
            if !live[slot] {
                continue;
            }
            if let Some(&group) = group_of_hash.get(&hashes[slot]) {
                if !is_part[slot] && group_slots[group as usize] != slot {
                    continue;
                }
                slot_groups[slot] = group;
                group_lengths[group as usize] += lengths[slot];
            }
        }
        let scope_size = num_groups as u64;
        let num_tokens: u64 = group_lengths.iter().sum();
        let terms: Vec<&String> = terms.iter().take(MAX_SESSION_QUERY_TERMS).collect();
        if terms.is_empty() || limit == 0 || scope_size == 0 {
            return Ok(SessionCandidates {
                hits: Vec::new(),
                scope_size,
                query_weight: 0.0,
                rarest_terms: Vec::new(),
            });
        }
        let average_length = (num_tokens as f32 / scope_size as f32).max(f32::MIN_POSITIVE);
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
        // Each term's frequency per session: (group, term frequency), the
        // term's entries from `term_ends` of the previous term to its own.
        let mut held: Vec<(u32, u32)> = Vec::new();
        let mut term_ends: Vec<usize> = Vec::with_capacity(terms.len());
        let mut frequencies = vec![0u32; num_groups];
        let mut touched: Vec<u32> = Vec::new();
        for term in &terms {
            let key = Term::from_field_text(self.fields.session_text, term);
            let mut count = |slot: usize, freq: u32| {
                let group = slot_groups[slot];
                if group != NO_GROUP {
                    let frequency = &mut frequencies[group as usize];
                    if *frequency == 0 {
                        touched.push(group);
                    }
                    *frequency = frequency.saturating_add(freq);
                }
            };
            for ((inverted, segment_scope), first_slot) in
                inverted.iter().zip(&scope.segments).zip(&first_slots)
            {
                let Some(inverted) = inverted else {
                    continue;
                };
                scope_postings(inverted, &key, segment_scope, |position, freq| {
                    count(first_slot + position, freq);
                })?;
            }
            recent.postings(&view.recent, term, |position, freq| {
                count(num_committed_slots + position, freq);
            });
            for &group in &touched {
                held.push((group, frequencies[group as usize]));
                frequencies[group as usize] = 0;
            }
            touched.clear();
            term_ends.push(held.len());
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
        // Per session, summed term by term in query order: the BM25 score,
        // the matched weight, and whether any term is there at all.
        let mut text_scores = vec![0.0f32; num_groups];
        let mut matched_weights = vec![0.0f32; num_groups];
        let mut matched = vec![false; num_groups];
        for (range, idf) in term_ranges.iter().zip(&idfs) {
            for &(group, freq) in &held[range.clone()] {
                let group = group as usize;
                text_scores[group] += bm25(*idf, freq, group_lengths[group], average_length);
                matched_weights[group] += idf;
                matched[group] = true;
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
        // (score, address of the session's document, group) of every
        // session holding a term; then the best `limit`, ties to the lower
        // address (a published batch after every segment, as its commit
        // would add one).
        let mut found: Vec<(f32, tantivy::DocAddress, usize)> = (0..num_groups)
            .filter(|&group| matched[group])
            .map(|group| (text_scores[group], address(group_slots[group]), group))
            .collect();
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
        for (text_score, address, group) in found {
            let slot = group_slots[group];
            let (key, stored_profile) = if slot >= num_committed_slots {
                let (batch, doc) = recent.docs[slot - num_committed_slots];
                let batch = &view.recent[batch];
                let key = DocKey {
                    segment: batch.id,
                    doc,
                };
                let profile = match &batch.docs[doc as usize].kind {
                    PublishedKind::Session { profile_json, .. } => Some(profile_json),
                    PublishedKind::Part { .. } => None,
                };
                (key, profile)
            } else {
                let key = DocKey {
                    segment: searcher.segment_reader(address.segment_ord).segment_id(),
                    doc: address.doc_id,
                };
                (key, None)
            };
            let profile_json = if known(&key) {
                None
            } else if let Some(json) = stored_profile {
                Some(json.clone())
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
                matched_weight: matched_weights[group],
            });
        }
        Ok(SessionCandidates {
            hits,
            scope_size,
            query_weight,
            rarest_terms,
        })
    }

    /// The slots of the committed session documents that published ones
    /// replace (the same session's `session_key`).
    fn replaced_slots(
        &self,
        searcher: &tantivy::Searcher,
        scope: &ScopeDocuments,
        first_slots: &[usize],
        recent: &PublishedScope<'_>,
    ) -> Result<Vec<usize>, IndexError> {
        let mut replaced = Vec::new();
        if recent.keys.is_empty() {
            return Ok(replaced);
        }
        for ((segment, segment_scope), first_slot) in searcher
            .segment_readers()
            .iter()
            .zip(&scope.segments)
            .zip(first_slots)
        {
            if segment_scope.docs.is_empty() {
                continue;
            }
            self.session_documents_of(segment, &recent.keys, |doc| {
                if let Ok(position) = segment_scope.docs.binary_search(&doc) {
                    replaced.push(first_slot + position);
                }
            })?;
        }
        Ok(replaced)
    }

    /// Calls `found` with each live session document of `segment` whose
    /// `session_key` is one of `keys`.
    fn session_documents_of(
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
        user_id: &str,
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
                (Occur::Must, constant(term(self.fields.user_id, user_id))),
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

    /// The best `limit` parts of the given sessions of `user_id` for
    /// `terms` (the first few are used: pass the rarest, see
    /// [`SessionCandidates::rarest_terms`]), by BM25, best first: where a
    /// session's best-matching messages are.
    pub fn search_parts_in(
        &self,
        user_id: &str,
        session_ids: &[&str],
        terms: &[String],
        limit: usize,
    ) -> Result<Vec<PartHit>, IndexError> {
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
        let mut clauses = self.scoped(user_id, KIND_PART);
        let sessions = any_of(
            self.fields.part_session,
            &mut session_ids
                .iter()
                .map(|session| session_key(user_id, session)),
            IndexRecordOption::Basic,
        );
        clauses.push((Occur::Must, Box::new(ConstScoreQuery::new(sessions, 0.0))));
        clauses.push((
            Occur::Must,
            any_of(
                self.fields.session_text,
                &mut terms.iter().take(MAX_MESSAGE_QUERY_TERMS).cloned(),
                IndexRecordOption::WithFreqs,
            ),
        ));
        let view = self.view();
        let searcher = &view.searcher;
        let query = BooleanQuery::new(clauses);
        let collector = TopDocs::with_limit(limit).order_by_score();
        if view.recent.is_empty() {
            let top = searcher.search(&query, &collector)?;
            return self.part_hits(
                searcher,
                top.into_iter()
                    .map(|(score, address)| (score, address, None)),
            );
        }
        // With published batches, the statistics count their documents
        // as their commit will, and their parts are scored alike.
        let statistics = PartStatistics {
            searcher,
            recent: &view.recent,
        };
        let top = searcher.search_with_statistics_provider(&query, &collector, &statistics)?;
        let mut scored: Vec<ScoredPart> = top
            .into_iter()
            .map(|(score, address)| (score, address, None))
            .collect();
        let wanted: std::collections::HashSet<String> = session_ids
            .iter()
            .map(|session| session_key(user_id, session))
            .collect();
        let weights = terms
            .iter()
            .take(MAX_MESSAGE_QUERY_TERMS)
            .map(|term| {
                let key = Term::from_field_text(self.fields.session_text, term);
                let weight = Bm25Weight::for_terms(&statistics, std::slice::from_ref(&key))?;
                Ok((term.as_str(), weight))
            })
            .collect::<tantivy::Result<Vec<(&str, Bm25Weight)>>>()?;
        let num_segments = searcher.segment_readers().len();
        for (batch_ord, batch) in view.recent.iter().enumerate() {
            let mut scores: std::collections::HashMap<u32, f32> = std::collections::HashMap::new();
            for (term, weight) in &weights {
                let Some(postings) = batch.postings.get(*term) else {
                    continue;
                };
                for &(doc, freq) in postings {
                    let document = &batch.docs[doc as usize];
                    if !document.is_session()
                        && document.user_id == user_id
                        && wanted.contains(&document.key)
                    {
                        *scores.entry(doc).or_insert(0.0) +=
                            weight.score(document.fieldnorm_id, freq);
                    }
                }
            }
            for (doc, score) in scores {
                let address = tantivy::DocAddress::new((num_segments + batch_ord) as u32, doc);
                if let PublishedKind::Part { seq, range } = batch.docs[doc as usize].kind {
                    scored.push((score, address, Some((seq, range))));
                }
            }
        }
        scored
            .sort_unstable_by(|left, right| right.0.total_cmp(&left.0).then(left.1.cmp(&right.1)));
        scored.truncate(limit);
        self.part_hits(searcher, scored.into_iter())
    }

    /// The hits of scored parts: a committed one's Add and messages read
    /// from its fast fields, a published one's given.
    fn part_hits(
        &self,
        searcher: &tantivy::Searcher,
        scored: impl Iterator<Item = ScoredPart>,
    ) -> Result<Vec<PartHit>, IndexError> {
        let mut hits = Vec::new();
        for (score, address, published) in scored {
            let part = match published {
                Some(part) => Some(part),
                None => {
                    let segment = searcher.segment_reader(address.segment_ord);
                    let fast = segment.fast_fields();
                    let seq = fast.u64("seq")?.first(address.doc_id);
                    let range = fast.u64("part_range")?.first(address.doc_id);
                    seq.zip(range)
                        .map(|(seq, range)| (i64::try_from(seq).unwrap_or(0), range))
                }
            };
            if let Some((seq, range)) = part {
                let (first_index, end_index) = part_bounds(range);
                hits.push(PartHit {
                    seq,
                    first_index,
                    end_index,
                    score,
                });
            }
        }
        Ok(hits)
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
