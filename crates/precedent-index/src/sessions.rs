//! index::sessions: "which of this user's sessions hold these terms, and
//! how well do they match?", each session scored as one text (its
//! document's and its parts'), over one view.
//!
//! The stages, split as tantivy splits a search into a `Weight` (the
//! query's statistics), a `Scorer` (one document's score) and a
//! `Collector` (the best ones), each with its own type:
//!
//! 1. [`ScopeSlots`]: every document of the user's scope, committed and
//!    published, numbered (its slot), with its session and length.
//! 2. [`ScopeSessions`]: the slots grouped by session, one per live
//!    session document, its parts joining it.
//! 3. [`TermPostings`]: each query term's sessions, with its frequency in
//!    each, read once within the scope.
//! 4. [`SessionWeight`]: the scope's BM25 statistics (each term's IDF over
//!    the sessions, their average length) and each session's score
//!    ([`SessionScore`]).
//! 5. [`top_sessions`]: the best `limit`, then their hits with profiles.

use tantivy::fieldnorm::FieldNormReader;
use tantivy::schema::Value;
use tantivy::{TantivyDocument, Term};

use rustc_hash::FxHashMap;

use super::published::{PublishedKind, PublishedScope};
use super::search::{
    DocKey, MAX_MESSAGE_QUERY_TERMS, ScopeDocuments, bm25, bm25_idf, scope_postings,
};
use super::{IndexError, SearchIndex, View};
use precedent_core::domain::UserId;

/// Distinct query terms a session search uses, the first ones of a task
/// statement: enough for the whole of a usual issue (an issue template's
/// boilerplate can take the first hundred), while a long pasted log adds
/// time, not precision (every term's postings over the scope's parts are
/// read).
const MAX_SESSION_QUERY_TERMS: usize = 256;

/// Terms from which a query's postings are read on two threads, over a
/// scope of at least [`PARALLEL_MIN_SCOPE_DOCS`] documents: below either,
/// a thread costs more than it saves.
const PARALLEL_MIN_TERMS: usize = 32;
/// See [`PARALLEL_MIN_TERMS`].
const PARALLEL_MIN_SCOPE_DOCS: usize = 4_096;

/// Tests: every query of two terms or more reads on two threads (its
/// answer is the same as on one, which the tests check against tantivy).
#[cfg(test)]
pub(super) static READ_IN_PARALLEL_ALWAYS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether the postings of `num_terms` terms over a scope of
/// `num_scope_docs` documents are read on two threads.
fn reads_in_parallel(num_terms: usize, num_scope_docs: usize) -> bool {
    #[cfg(test)]
    if READ_IN_PARALLEL_ALWAYS.load(std::sync::atomic::Ordering::Relaxed) && num_terms > 1 {
        return true;
    }
    num_terms >= PARALLEL_MIN_TERMS
        && num_scope_docs >= PARALLEL_MIN_SCOPE_DOCS
        && std::thread::available_parallelism().is_ok_and(|cores| cores.get() > 1)
}

/// One session document found for a query.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHit {
    /// Names the document for as long as the index lives (segments never
    /// change; a merge makes new ones with new keys).
    pub key: DocKey,
    /// Its stored ranking profile (encoded); `None` when the caller knew the
    /// key already (see [`SearchIndex::search_sessions`]).
    pub profile: Option<Vec<u8>>,
    /// BM25 of the query terms over its whole text (its document's and
    /// its parts').
    pub text_score: f32,
    /// The summed IDF of the query terms its text holds, however often
    /// and however long the text: a rare term found in a long trajectory
    /// counts in full.
    pub matched_weight: f32,
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

/// One document of a scope, as a session search reads it.
#[derive(Debug, Clone, Copy)]
struct SlotDoc {
    /// Its `session_hash`.
    hash: u64,
    /// Its `session_text` length in tokens, as tantivy encodes it.
    length: u32,
    /// A part, else a session document.
    is_part: bool,
    /// False for a committed session document that a published one
    /// replaces.
    live: bool,
}

/// Stage 1: the documents of one user's scope, each at its slot: the
/// documents of the first segment, then of the next, each segment's
/// ascending, then the published ones (oldest batch first).
struct ScopeSlots<'a> {
    view: &'a View,
    scope: &'a ScopeDocuments,
    /// The user's published documents: the newest session document of
    /// each session, and every part.
    recent: &'a PublishedScope<'a>,
    /// The slot of each segment's first document.
    first_slots: Vec<usize>,
    /// The committed documents' slots come first, this many.
    num_committed: usize,
    /// Per slot.
    docs: Vec<SlotDoc>,
}

impl<'a> ScopeSlots<'a> {
    fn new(view: &'a View, scope: &'a ScopeDocuments, recent: &'a PublishedScope<'a>) -> Self {
        let mut first_slots = Vec::with_capacity(scope.segments.len());
        let mut num_committed = 0usize;
        for segment_scope in &scope.segments {
            first_slots.push(num_committed);
            num_committed += segment_scope.docs.len();
        }
        let length = |fieldnorm_id: u8| FieldNormReader::id_to_fieldnorm(fieldnorm_id);
        let mut docs = Vec::with_capacity(num_committed + recent.docs.len());
        for segment_scope in &scope.segments {
            docs.extend(
                segment_scope
                    .fieldnorm_ids
                    .iter()
                    .zip(&segment_scope.hashes)
                    .zip(&segment_scope.is_part)
                    .map(|((&fieldnorm_id, &hash), &is_part)| SlotDoc {
                        hash,
                        length: length(fieldnorm_id),
                        is_part,
                        live: true,
                    }),
            );
        }
        docs.extend(recent.docs.iter().map(|&(batch, doc)| {
            let document = &view.recent[batch].docs[doc as usize];
            SlotDoc {
                hash: document.hash,
                length: length(document.fieldnorm_id),
                is_part: !document.is_session(),
                live: true,
            }
        }));
        ScopeSlots {
            view,
            scope,
            recent,
            first_slots,
            num_committed,
            docs,
        }
    }

    /// Marks the committed session documents that published ones replace
    /// (the same session's `session_key`) as not live.
    fn retire_replaced(&mut self, index: &SearchIndex) -> Result<(), IndexError> {
        if self.recent.keys.is_empty() {
            return Ok(());
        }
        for ((segment, segment_scope), &first_slot) in self
            .view
            .searcher
            .segment_readers()
            .iter()
            .zip(&self.scope.segments)
            .zip(&self.first_slots)
        {
            if segment_scope.docs.is_empty() {
                continue;
            }
            let docs = &mut self.docs;
            index.session_documents_of(segment, &self.recent.keys, |doc| {
                if let Ok(position) = segment_scope.docs.binary_search(&doc) {
                    docs[first_slot + position].live = false;
                }
            })?;
        }
        Ok(())
    }

    /// The address of a slot's document: a published batch counts as a
    /// segment after every committed one, as its commit would add one.
    fn address(&self, slot: usize) -> tantivy::DocAddress {
        if slot >= self.num_committed {
            let (batch, doc) = self.recent.docs[slot - self.num_committed];
            tantivy::DocAddress::new((self.scope.segments.len() + batch) as u32, doc)
        } else {
            let segment_ord = self.first_slots.partition_point(|&first| first <= slot) - 1;
            let doc = self.scope.segments[segment_ord].docs[slot - self.first_slots[segment_ord]];
            tantivy::DocAddress::new(segment_ord as u32, doc)
        }
    }

    /// The key of a slot's session document at `address`, with its
    /// profile when it is a published one.
    fn key(&self, slot: usize, address: tantivy::DocAddress) -> (DocKey, Option<&'a [u8]>) {
        if slot < self.num_committed {
            let segment = self.view.searcher.segment_reader(address.segment_ord);
            let key = DocKey {
                segment: segment.segment_id(),
                doc: address.doc_id,
            };
            return (key, None);
        }
        let (batch, doc) = self.recent.docs[slot - self.num_committed];
        let batch = &self.view.recent[batch];
        let key = DocKey {
            segment: batch.id,
            doc,
        };
        let profile = match &batch.docs[doc as usize].kind {
            PublishedKind::Session { profile, .. } => Some(profile.as_slice()),
            PublishedKind::Part { .. } => None,
        };
        (key, profile)
    }
}

/// One session of a scope: its live session document and its parts.
#[derive(Debug, Clone, Copy)]
struct ScopeSession {
    /// The slot of its session document.
    slot: usize,
    /// Tokens of its document and parts together.
    length: u64,
}

/// A slot of no session: not live, or a part whose session has no live
/// document (as in the moment between a purge's deletions).
const NO_SESSION: u32 = u32::MAX;

/// Stage 2: the scope's slots grouped by session.
struct ScopeSessions {
    sessions: Vec<ScopeSession>,
    /// Each slot's session, or [`NO_SESSION`].
    of_slot: Vec<u32>,
}

impl ScopeSessions {
    /// One session per live session document (the first of a hash); each
    /// live part joins its session's.
    fn group(slots: &ScopeSlots<'_>) -> ScopeSessions {
        let mut of_hash: FxHashMap<u64, u32> = FxHashMap::default();
        let mut sessions: Vec<ScopeSession> = Vec::new();
        for (slot, doc) in slots.docs.iter().enumerate() {
            if doc.live && !doc.is_part {
                of_hash.entry(doc.hash).or_insert_with(|| {
                    sessions.push(ScopeSession { slot, length: 0 });
                    (sessions.len() - 1) as u32
                });
            }
        }
        let mut of_slot = vec![NO_SESSION; slots.docs.len()];
        for (slot, doc) in slots.docs.iter().enumerate() {
            if !doc.live {
                continue;
            }
            if let Some(&session) = of_hash.get(&doc.hash) {
                let grouped = &mut sessions[session as usize];
                if !doc.is_part && grouped.slot != slot {
                    continue;
                }
                of_slot[slot] = session;
                grouped.length += u64::from(doc.length);
            }
        }
        ScopeSessions { sessions, of_slot }
    }

    fn len(&self) -> usize {
        self.sessions.len()
    }

    /// The average session length in tokens.
    fn average_length(&self) -> f32 {
        let num_tokens: u64 = self.sessions.iter().map(|session| session.length).sum();
        (num_tokens as f32 / self.sessions.len() as f32).max(f32::MIN_POSITIVE)
    }
}

/// A session holding a term, with the term's frequency over its text.
#[derive(Debug, Clone, Copy)]
struct SessionFrequency {
    session: u32,
    frequency: u32,
}

/// Stage 3: one query term's sessions within the scope.
struct TermPostings<'t> {
    term: &'t str,
    /// In the order first met (segments in order, then the published
    /// batches).
    sessions: Vec<SessionFrequency>,
}

/// Stage 4: the scope's BM25 statistics, as tantivy's `Weight` holds a
/// query's: each term's IDF over the scope's sessions (its document
/// frequency the number of sessions holding it) and the average session
/// length.
struct SessionWeight<'p> {
    terms: Vec<WeightedTerm<'p>>,
    average_length: f32,
}

/// A term's postings with its IDF.
struct WeightedTerm<'p> {
    postings: &'p TermPostings<'p>,
    idf: f32,
}

/// A session's match with the query, summed term by term in query order.
#[derive(Debug, Clone, Copy, Default)]
struct SessionScore {
    /// BM25 of the terms over its text.
    text_score: f32,
    /// The summed IDF of the terms it holds.
    matched_weight: f32,
}

impl<'p> SessionWeight<'p> {
    fn new(postings: &'p [TermPostings<'p>], sessions: &ScopeSessions) -> SessionWeight<'p> {
        let num_sessions = sessions.len() as u64;
        SessionWeight {
            terms: postings
                .iter()
                .map(|postings| WeightedTerm {
                    postings,
                    idf: bm25_idf(num_sessions, postings.sessions.len() as u64),
                })
                .collect(),
            average_length: sessions.average_length(),
        }
    }

    /// The summed IDF of every query term (see
    /// [`SessionCandidates::query_weight`]).
    fn query_weight(&self) -> f32 {
        self.terms.iter().map(|term| term.idf).sum()
    }

    /// Each session's score, `None` for a session holding no term.
    fn score(&self, sessions: &ScopeSessions) -> Vec<Option<SessionScore>> {
        let mut scores: Vec<Option<SessionScore>> = vec![None; sessions.len()];
        for term in &self.terms {
            for held in &term.postings.sessions {
                let session = held.session as usize;
                let score = scores[session].get_or_insert_default();
                score.text_score += bm25(
                    term.idf,
                    held.frequency,
                    sessions.sessions[session].length,
                    self.average_length,
                );
                score.matched_weight += term.idf;
            }
        }
        scores
    }
}

/// The query's terms some session holds, the rarest (held by the fewest
/// sessions) first, ties by term: at most [`MAX_MESSAGE_QUERY_TERMS`].
fn rarest_terms(postings: &[TermPostings<'_>]) -> Vec<String> {
    let mut by_rarity: Vec<(usize, &str)> = postings
        .iter()
        .filter(|postings| !postings.sessions.is_empty())
        .map(|postings| (postings.sessions.len(), postings.term))
        .collect();
    by_rarity.sort();
    by_rarity
        .iter()
        .take(MAX_MESSAGE_QUERY_TERMS)
        .map(|(_, term)| (*term).to_string())
        .collect()
}

/// A session that holds a query term, with its score and its document's
/// address.
#[derive(Debug, Clone, Copy)]
struct FoundSession {
    score: SessionScore,
    address: tantivy::DocAddress,
    session: usize,
}

/// Stage 5, the collector: the best `limit` of `found`, best first, ties to
/// the lower address.
fn top_sessions(mut found: Vec<FoundSession>, limit: usize) -> Vec<FoundSession> {
    let best_first = |left: &FoundSession, right: &FoundSession| {
        right
            .score
            .text_score
            .total_cmp(&left.score.text_score)
            .then(left.address.cmp(&right.address))
    };
    if found.len() > limit {
        found.select_nth_unstable_by(limit, best_first);
        found.truncate(limit);
    }
    found.sort_unstable_by(best_first);
    found
}

impl SearchIndex {
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
        user_id: &UserId,
        terms: &[String],
        limit: usize,
        known: &dyn Fn(&DocKey) -> bool,
    ) -> Result<SessionCandidates, IndexError> {
        let view = self.view();
        let scope = self.scope_documents(&view.searcher, user_id)?;
        let recent = PublishedScope::of(&view.recent, user_id);
        let mut slots = ScopeSlots::new(&view, &scope, &recent);
        slots.retire_replaced(self)?;
        let sessions = ScopeSessions::group(&slots);
        let scope_size = sessions.len() as u64;
        let terms: Vec<&str> = terms
            .iter()
            .take(MAX_SESSION_QUERY_TERMS)
            .map(String::as_str)
            .collect();
        if terms.is_empty() || limit == 0 || scope_size == 0 {
            return Ok(SessionCandidates {
                scope_size,
                ..SessionCandidates::default()
            });
        }
        let postings = self.term_postings(&slots, &sessions, &terms)?;
        let weight = SessionWeight::new(&postings, &sessions);
        let found = weight
            .score(&sessions)
            .into_iter()
            .enumerate()
            .filter_map(|(session, score)| {
                Some(FoundSession {
                    score: score?,
                    address: slots.address(sessions.sessions[session].slot),
                    session,
                })
            })
            .collect();
        let mut hits = Vec::new();
        for found in top_sessions(found, limit) {
            let slot = sessions.sessions[found.session].slot;
            hits.extend(self.session_hit(&slots, slot, found, known)?);
        }
        Ok(SessionCandidates {
            hits,
            scope_size,
            query_weight: weight.query_weight(),
            rarest_terms: rarest_terms(&postings),
        })
    }

    /// Stage 3: each of `terms`' sessions within the scope, its postings
    /// read once per segment and published batch. A long query over a
    /// large scope reads its terms on two threads (each term's list is the
    /// same either way; only the time differs).
    fn term_postings<'t>(
        &self,
        slots: &ScopeSlots<'_>,
        sessions: &ScopeSessions,
        terms: &[&'t str],
    ) -> Result<Vec<TermPostings<'t>>, IndexError> {
        let searcher = &slots.view.searcher;
        let inverted: Vec<Option<std::sync::Arc<tantivy::InvertedIndexReader>>> = searcher
            .segment_readers()
            .iter()
            .zip(&slots.scope.segments)
            .map(|(segment, segment_scope)| {
                if segment_scope.docs.is_empty() {
                    Ok(None)
                } else {
                    segment.inverted_index(self.fields.session_text).map(Some)
                }
            })
            .collect::<tantivy::Result<_>>()?;
        let read = |terms: &mut dyn Iterator<Item = &'t str>| {
            self.read_term_postings(slots, sessions, &inverted, terms)
        };
        if !reads_in_parallel(terms.len(), slots.docs.len()) {
            return read(&mut terms.iter().copied());
        }
        // Alternate terms, so that both threads get long and short lists.
        let (even, odd) = std::thread::scope(|scope| {
            let odd = scope.spawn(|| read(&mut terms.iter().copied().skip(1).step_by(2)));
            let even = read(&mut terms.iter().copied().step_by(2));
            // A panic there is one here, as on one thread.
            let odd = odd
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (even, odd)
        });
        let (mut even, mut odd) = (even?.into_iter(), odd?.into_iter());
        let mut postings = Vec::with_capacity(terms.len());
        for index in 0..terms.len() {
            let next = if index % 2 == 0 {
                even.next()
            } else {
                odd.next()
            };
            postings.extend(next);
        }
        Ok(postings)
    }

    /// Reads the postings of `terms`, in order (see [`Self::term_postings`]).
    fn read_term_postings<'t>(
        &self,
        slots: &ScopeSlots<'_>,
        sessions: &ScopeSessions,
        inverted: &[Option<std::sync::Arc<tantivy::InvertedIndexReader>>],
        terms: &mut dyn Iterator<Item = &'t str>,
    ) -> Result<Vec<TermPostings<'t>>, IndexError> {
        // Each session's frequency of the current term, and the sessions
        // met, in order.
        let mut frequencies = vec![0u32; sessions.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut postings = Vec::new();
        for term in terms {
            let key = Term::from_field_text(self.fields.session_text, term);
            let mut count = |slot: usize, freq: u32| {
                let session = sessions.of_slot[slot];
                if session != NO_SESSION {
                    let frequency = &mut frequencies[session as usize];
                    if *frequency == 0 {
                        touched.push(session);
                    }
                    *frequency = frequency.saturating_add(freq);
                }
            };
            for ((inverted, segment_scope), first_slot) in inverted
                .iter()
                .zip(&slots.scope.segments)
                .zip(&slots.first_slots)
            {
                let Some(inverted) = inverted else {
                    continue;
                };
                scope_postings(inverted, &key, segment_scope, |position, freq| {
                    count(first_slot + position, freq);
                })?;
            }
            slots
                .recent
                .postings(&slots.view.recent, term, |position, freq| {
                    count(slots.num_committed + position, freq);
                });
            let held = touched
                .drain(..)
                .map(|session| SessionFrequency {
                    session,
                    frequency: std::mem::take(&mut frequencies[session as usize]),
                })
                .collect();
            postings.push(TermPostings {
                term,
                sessions: held,
            });
        }
        Ok(postings)
    }

    /// The hit of a found session whose document is at `slot`: its profile
    /// read unless `known` has it; `None` when its document holds none.
    fn session_hit(
        &self,
        slots: &ScopeSlots<'_>,
        slot: usize,
        found: FoundSession,
        known: &dyn Fn(&DocKey) -> bool,
    ) -> Result<Option<SessionHit>, IndexError> {
        let (key, stored_profile) = slots.key(slot, found.address);
        let profile = if known(&key) {
            None
        } else if let Some(bytes) = stored_profile {
            Some(bytes.to_vec())
        } else {
            let document: TantivyDocument = slots.view.searcher.doc(found.address)?;
            let Some(bytes) = document
                .get_first(self.fields.profile)
                .and_then(|value| value.as_bytes())
            else {
                return Ok(None);
            };
            Some(bytes.to_vec())
        };
        Ok(Some(SessionHit {
            key,
            profile,
            text_score: found.score.text_score,
            matched_weight: found.score.matched_weight,
        }))
    }
}
