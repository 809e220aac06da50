//! index::scope: "which session documents and parts are this user's, and
//! how long are they?", remembered per segment.
//!
//! Every search needs the live session documents and parts of its user (BM25
//! statistics and candidates are counted within them, never over other
//! users' documents). Walking them is the same work for every search of a
//! user until the index changes, so it is kept per segment state: a
//! segment's documents never change, and its live documents change only
//! with a new delete file, which a new delete opstamp names. A commit that
//! adds a segment or deletes from one leaves every other entry valid; a
//! deleted user's documents are gone from every segment state the next
//! searcher sees, so no entry of theirs is ever looked up again (and entries
//! of segment states no reader holds any more are dropped when a newer
//! searcher generation is seen). Entries hold document numbers and lengths
//! only, within a byte budget, the least recently used dropped first.
//!
//! What a scope is made of (the query) is left to the caller, and so is
//! what is done with it (see `SearchIndex::search_sessions`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tantivy::index::SegmentId;
use tantivy::{DocId, DocSet, Opstamp, SegmentReader};

use precedent_core::domain::UserId;

/// The live session documents and parts of one user in one segment state.
#[derive(Debug, Default)]
pub(super) struct SegmentScope {
    /// Ascending.
    pub docs: Vec<DocId>,
    /// Each document's `session_text` fieldnorm id (its length as tantivy
    /// encodes it), in the order of `docs`.
    pub fieldnorm_ids: Vec<u8>,
    /// Each document's `session_hash`, in the order of `docs`.
    pub hashes: Vec<u64>,
    /// Whether each document is a part (else a session document).
    pub is_part: Vec<bool>,
    /// For a scope holding a large share of its segment: which documents
    /// it holds, as a bit set with ranks, so that a term's postings are
    /// read block by block and looked up instead of walked beside `docs`.
    pub dense: Option<DenseScope>,
}

/// A scope's documents as a bit set over the segment, with the number of
/// documents before each 64-bit word: a document's position in `docs` in
/// two loads.
#[derive(Debug, Default)]
pub(super) struct DenseScope {
    words: Vec<u64>,
    ranks: Vec<u32>,
}

/// A scope holding more than one in this many of its segment's documents
/// is kept dense too (the bit set then costs at most 16 bytes per scope
/// document, and reading every posting of a term is cheaper than seeking).
const DENSE_SHARE: usize = 8;

impl DenseScope {
    fn of(docs: &[DocId], max_doc: u32) -> DenseScope {
        let mut words = vec![0u64; (max_doc as usize).div_ceil(64)];
        for &doc in docs {
            words[doc as usize / 64] |= 1 << (doc % 64);
        }
        let mut ranks = Vec::with_capacity(words.len());
        let mut before = 0u32;
        for word in &words {
            ranks.push(before);
            before += word.count_ones();
        }
        DenseScope { words, ranks }
    }

    /// The position of `doc` in the scope's `docs`, if it is there.
    #[inline]
    pub(crate) fn position(&self, doc: DocId) -> Option<usize> {
        let index = doc as usize / 64;
        let word = *self.words.get(index)?;
        let bit = 1u64 << (doc % 64);
        if word & bit == 0 {
            return None;
        }
        Some(self.ranks[index] as usize + (word & (bit - 1)).count_ones() as usize)
    }

    fn num_bytes(&self) -> usize {
        self.words.capacity() * 8 + self.ranks.capacity() * 4
    }
}

/// The fast fields a scope reads of each document.
pub(super) struct ScopeColumns<'a> {
    pub fieldnorms: &'a tantivy::fieldnorm::FieldNormReader,
    pub hashes: &'a tantivy::columnar::Column<u64>,
    pub part_ranges: &'a tantivy::columnar::Column<u64>,
}

impl SegmentScope {
    /// Collects the documents `matching` yields that are alive in `segment`.
    pub(crate) fn collect(
        segment: &SegmentReader,
        matching: &mut dyn DocSet,
        columns: &ScopeColumns<'_>,
    ) -> SegmentScope {
        let alive = segment.alive_bitset();
        let mut scope = SegmentScope::default();
        let mut doc = matching.doc();
        while doc != tantivy::TERMINATED {
            if alive.is_none_or(|alive| alive.is_alive(doc)) {
                scope.docs.push(doc);
                scope
                    .fieldnorm_ids
                    .push(columns.fieldnorms.fieldnorm_id(doc));
                scope.hashes.push(columns.hashes.first(doc).unwrap_or(0));
                scope.is_part.push(columns.part_ranges.first(doc).is_some());
            }
            doc = matching.advance();
        }
        let max_doc = segment.max_doc();
        if !scope.docs.is_empty() && scope.docs.len() * DENSE_SHARE >= max_doc as usize {
            scope.dense = Some(DenseScope::of(&scope.docs, max_doc));
        }
        scope
    }

    /// Approximate heap bytes held, for the cache's budget.
    fn num_bytes(&self) -> usize {
        self.docs.capacity() * std::mem::size_of::<DocId>()
            + self.fieldnorm_ids.capacity()
            + self.hashes.capacity() * std::mem::size_of::<u64>()
            + self.is_part.capacity()
            + self.dense.as_ref().map_or(0, DenseScope::num_bytes)
    }
}

/// Names one segment state of one user's scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ScopeKey {
    user_id: UserId,
    segment: SegmentId,
    /// `None` while the segment has no deletes.
    delete_opstamp: Option<Opstamp>,
}

impl ScopeKey {
    fn new(user_id: &UserId, segment: &SegmentReader) -> ScopeKey {
        ScopeKey {
            user_id: user_id.clone(),
            segment: segment.segment_id(),
            delete_opstamp: segment.delete_opstamp(),
        }
    }

    fn num_bytes(&self) -> usize {
        std::mem::size_of::<ScopeKey>() + self.user_id.len()
    }
}

struct CachedScope {
    scope: Arc<SegmentScope>,
    /// The cache's clock when a search last used it.
    last_used: u64,
    num_bytes: usize,
}

/// Bookkeeping overhead counted per entry beyond its key and documents.
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// Scopes per segment state, within a byte budget.
pub(super) struct ScopeCache {
    /// A plain mutex: it is held for map lookups and inserts only, never
    /// while postings or documents are read, so searches barely contend.
    inner: Mutex<CacheState>,
    max_bytes: usize,
}

#[derive(Default)]
struct CacheState {
    entries: HashMap<ScopeKey, CachedScope>,
    num_bytes: usize,
    clock: u64,
    /// The newest searcher generation whose segments the entries were
    /// checked against.
    swept_generation: Option<u64>,
}

impl ScopeCache {
    /// An empty cache that holds at most about `max_bytes`.
    pub(crate) fn new(max_bytes: usize) -> ScopeCache {
        ScopeCache {
            inner: Mutex::new(CacheState::default()),
            max_bytes,
        }
    }

    /// The scope of `user_id` in each of `searcher`'s segments, in its
    /// order: remembered ones, and the others computed with `compute`
    /// (given the segments' ordinals) and remembered.
    pub(crate) fn scopes(
        &self,
        searcher: &tantivy::Searcher,
        user_id: &UserId,
        compute: impl FnOnce(&[usize]) -> tantivy::Result<Vec<SegmentScope>>,
    ) -> tantivy::Result<Vec<Arc<SegmentScope>>> {
        let segments = searcher.segment_readers();
        let keys: Vec<ScopeKey> = segments
            .iter()
            .map(|segment| ScopeKey::new(user_id, segment))
            .collect();
        let mut found: Vec<Option<Arc<SegmentScope>>> = {
            let mut state = self.lock();
            state.sweep(searcher.generation());
            state.clock += 1;
            let clock = state.clock;
            keys.iter()
                .map(|key| {
                    state.entries.get_mut(key).map(|cached| {
                        cached.last_used = clock;
                        Arc::clone(&cached.scope)
                    })
                })
                .collect()
        };
        let missing: Vec<usize> = (0..found.len())
            .filter(|ordinal| found[*ordinal].is_none())
            .collect();
        if missing.is_empty() {
            return Ok(found.into_iter().flatten().collect());
        }
        let computed = compute(&missing)?;
        let mut state = self.lock();
        let clock = state.clock;
        for (ordinal, scope) in missing.iter().zip(computed) {
            let scope = Arc::new(scope);
            let key = keys[*ordinal].clone();
            let num_bytes = key.num_bytes() + scope.num_bytes() + ENTRY_OVERHEAD_BYTES;
            let cached = CachedScope {
                scope: Arc::clone(&scope),
                last_used: clock,
                num_bytes,
            };
            state.num_bytes += num_bytes;
            if let Some(replaced) = state.entries.insert(key, cached) {
                state.num_bytes -= replaced.num_bytes;
            }
            found[*ordinal] = Some(scope);
        }
        state.evict(self.max_bytes);
        drop(state);
        // `compute` gave one scope per missing segment; a short answer
        // would be a bug there, not a reason to search fewer segments.
        if found.iter().any(Option::is_none) {
            return Err(tantivy::TantivyError::InternalError(
                "scope computed for fewer segments than asked".to_string(),
            ));
        }
        Ok(found.into_iter().flatten().collect())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        // The state stays consistent at every await-free step, so a panic
        // elsewhere while it was held leaves it usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Number of entries and their approximate bytes.
    #[cfg(test)]
    pub(crate) fn usage(&self) -> (usize, usize) {
        let state = self.lock();
        (state.entries.len(), state.num_bytes)
    }
}

impl CacheState {
    /// Drops entries of segment states a newer searcher generation no
    /// longer holds (merged away, or superseded by new deletes).
    fn sweep(&mut self, generation: &tantivy::SearcherGeneration) {
        let id = generation.generation_id();
        if self.swept_generation.is_some_and(|swept| swept >= id) {
            return;
        }
        self.swept_generation = Some(id);
        let live: HashSet<(SegmentId, Option<Opstamp>)> = generation
            .segments()
            .iter()
            .map(|(segment, opstamp)| (*segment, *opstamp))
            .collect();
        let mut freed = 0;
        self.entries.retain(|key, cached| {
            let keep = live.contains(&(key.segment, key.delete_opstamp));
            if !keep {
                freed += cached.num_bytes;
            }
            keep
        });
        self.num_bytes -= freed;
    }

    /// Drops the least recently used entries until about a quarter of
    /// `max_bytes` is free again.
    fn evict(&mut self, max_bytes: usize) {
        if self.num_bytes <= max_bytes {
            return;
        }
        let target = max_bytes - max_bytes / 4;
        let mut by_age: Vec<(u64, ScopeKey)> = self
            .entries
            .iter()
            .map(|(key, cached)| (cached.last_used, key.clone()))
            .collect();
        by_age.sort_unstable_by_key(|(last_used, _)| *last_used);
        for (_, key) in by_age {
            if self.num_bytes <= target {
                break;
            }
            if let Some(removed) = self.entries.remove(&key) {
                self.num_bytes -= removed.num_bytes;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DenseScope;

    #[test]
    fn a_dense_scope_finds_each_documents_position_and_nothing_else() {
        let mut state = 3u64;
        for max_doc in [1u32, 63, 64, 65, 200, 1000] {
            let docs: Vec<u32> = (0..max_doc)
                .filter(|_| {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1);
                    (state >> 60).is_multiple_of(3)
                })
                .collect();
            let dense = DenseScope::of(&docs, max_doc);
            for doc in 0..max_doc + 70 {
                assert_eq!(
                    dense.position(doc),
                    docs.binary_search(&doc).ok(),
                    "doc {doc} of {max_doc}"
                );
            }
        }
    }
}
