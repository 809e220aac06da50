//! index::parts: "where in these sessions are the messages that best match
//! these terms?": the best parts (consecutive messages of one Add) of
//! sessions a search already chose, by BM25 over the committed segments and
//! the batches published since, scored alike.

use tantivy::collector::TopDocs;
use tantivy::query::{Bm25Weight, BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, Term};

use super::published::{PublishedBatch, PublishedKind};
use super::search::MAX_MESSAGE_QUERY_TERMS;
use super::{IndexError, KIND_PART, SearchIndex, View, part_bounds, session_key};
use precedent_core::domain::{SessionId, UserId};

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

/// A scored part: its score and address, with its Add and `part_range`
/// when it is a published one (a committed one's are in its fast fields).
#[derive(Debug, Clone, Copy)]
struct ScoredPart {
    score: f32,
    address: DocAddress,
    published: Option<(i64, u64)>,
}

impl ScoredPart {
    fn committed((score, address): (f32, DocAddress)) -> ScoredPart {
        ScoredPart {
            score,
            address,
            published: None,
        }
    }
}

impl SearchIndex {
    /// The best `limit` parts of the given sessions of `user_id` for
    /// `terms` (the first few are used: pass the rarest, see
    /// `SessionCandidates::rarest_terms`), by BM25, best first: where a
    /// session's best-matching messages are.
    pub fn search_parts_in(
        &self,
        user_id: &UserId,
        session_ids: &[SessionId],
        terms: &[String],
        limit: usize,
    ) -> Result<Vec<PartHit>, IndexError> {
        if session_ids.is_empty() || terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let terms = &terms[..terms.len().min(MAX_MESSAGE_QUERY_TERMS)];
        let query = self.part_query(user_id, session_ids, terms);
        let view = self.view();
        let searcher = &view.searcher;
        let collector = TopDocs::with_limit(limit).order_by_score();
        if view.recent.is_empty() {
            let top = searcher.search(&query, &collector)?;
            return self.part_hits(searcher, top.into_iter().map(ScoredPart::committed));
        }
        // With published batches, the statistics count their documents
        // as their commit will, and their parts are scored alike.
        let statistics = PartStatistics {
            searcher,
            recent: &view.recent,
        };
        let top = searcher.search_with_statistics_provider(&query, &collector, &statistics)?;
        let mut scored: Vec<ScoredPart> = top.into_iter().map(ScoredPart::committed).collect();
        scored.extend(self.published_parts(&view, &statistics, user_id, session_ids, terms)?);
        scored.sort_unstable_by(|left, right| {
            right
                .score
                .total_cmp(&left.score)
                .then(left.address.cmp(&right.address))
        });
        scored.truncate(limit);
        self.part_hits(searcher, scored.into_iter())
    }

    /// `user AND part AND (session OR ...) AND (term OR ...)`, scored by
    /// the terms alone.
    fn part_query(
        &self,
        user_id: &UserId,
        session_ids: &[SessionId],
        terms: &[String],
    ) -> BooleanQuery {
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
                &mut terms.iter().cloned(),
                IndexRecordOption::WithFreqs,
            ),
        ));
        BooleanQuery::new(clauses)
    }

    /// The published parts of the given sessions holding any of `terms`,
    /// scored as their commit will score them.
    fn published_parts(
        &self,
        view: &View,
        statistics: &PartStatistics<'_>,
        user_id: &UserId,
        session_ids: &[SessionId],
        terms: &[String],
    ) -> Result<Vec<ScoredPart>, IndexError> {
        let wanted: std::collections::HashSet<String> = session_ids
            .iter()
            .map(|session| session_key(user_id, session))
            .collect();
        let weights = terms
            .iter()
            .map(|term| {
                let key = Term::from_field_text(self.fields.session_text, term);
                let weight = Bm25Weight::for_terms(statistics, std::slice::from_ref(&key))?;
                Ok((term.as_str(), weight))
            })
            .collect::<tantivy::Result<Vec<(&str, Bm25Weight)>>>()?;
        let num_segments = view.searcher.segment_readers().len();
        let mut scored = Vec::new();
        for (batch_ord, batch) in view.recent.iter().enumerate() {
            let mut scores: std::collections::HashMap<u32, f32> = std::collections::HashMap::new();
            for (term, weight) in &weights {
                let Some(postings) = batch.postings.get(*term) else {
                    continue;
                };
                for &(doc, freq) in postings {
                    let document = &batch.docs[doc as usize];
                    if !document.is_session()
                        && document.user_id == *user_id
                        && wanted.contains(&document.key)
                    {
                        *scores.entry(doc).or_insert(0.0) +=
                            weight.score(document.fieldnorm_id, freq);
                    }
                }
            }
            for (doc, score) in scores {
                if let PublishedKind::Part { seq, range } = batch.docs[doc as usize].kind {
                    scored.push(ScoredPart {
                        score,
                        address: DocAddress::new((num_segments + batch_ord) as u32, doc),
                        published: Some((seq, range)),
                    });
                }
            }
        }
        Ok(scored)
    }

    /// The hits of scored parts: a committed one's Add and messages read
    /// from its fast fields, a published one's given.
    fn part_hits(
        &self,
        searcher: &tantivy::Searcher,
        scored: impl Iterator<Item = ScoredPart>,
    ) -> Result<Vec<PartHit>, IndexError> {
        let mut hits = Vec::new();
        for part in scored {
            let held = match part.published {
                Some(held) => Some(held),
                None => {
                    let address = part.address;
                    let segment = searcher.segment_reader(address.segment_ord);
                    let fast = segment.fast_fields();
                    let seq = fast.u64("seq")?.first(address.doc_id);
                    let range = fast.u64("part_range")?.first(address.doc_id);
                    seq.zip(range)
                        .map(|(seq, range)| (i64::try_from(seq).unwrap_or(0), range))
                }
            };
            if let Some((seq, range)) = held {
                let (first_index, end_index) = part_bounds(range);
                hits.push(PartHit {
                    seq,
                    first_index,
                    end_index,
                    score: part.score,
                });
            }
        }
        Ok(hits)
    }
}
