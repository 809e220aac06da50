//! The per-thread cache of tags: the service re-derives a session from all
//! its messages on every Add, and agents show the same code again and again,
//! so most parses repeat.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use precedent_core::language::Grammar;

use super::tags::Tags;

thread_local! {
    /// Tags of recently parsed texts (see [`TagCache`]).
    pub(super) static TAG_CACHE: RefCell<TagCache> = RefCell::new(TagCache::default());
}

/// Source bytes the per-thread tag cache holds before it starts over.
const MAX_TAG_CACHE_BYTES: usize = 8 * 1024 * 1024;

/// Entries the per-thread tag cache holds before it starts over.
pub(super) const MAX_TAG_CACHE_ENTRIES: usize = 16_384;

/// A parsed text and its tags.
type CachedTags = (Box<str>, Rc<Tags>);

/// The rows a caller needs tags for, when not all: see [`extract_tags_in_rows`].
pub(super) type RowRange = Option<(usize, usize)>;

/// Tags of texts parsed before on this thread, by language, rows asked for and exact text.
/// The service re-derives a session from all its messages on every Add, and
/// agents show the same code again and again, so most parses repeat; the
/// cache is cleared when full, so its size stays bounded.
#[derive(Default)]
pub(super) struct TagCache {
    entries: HashMap<(Grammar, RowRange, u64), Vec<CachedTags>>,
    source_bytes: usize,
    entry_count: usize,
}

impl TagCache {
    fn key(language: Grammar, rows: RowRange, source: &str) -> (Grammar, RowRange, u64) {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        source.hash(&mut hasher);
        (language, rows, hasher.finish())
    }

    pub(super) fn get(&self, language: Grammar, rows: RowRange, source: &str) -> Option<Rc<Tags>> {
        self.entries
            .get(&Self::key(language, rows, source))?
            .iter()
            .find(|(cached, _)| cached.as_ref() == source)
            .map(|(_, tags)| tags.clone())
    }

    pub(super) fn insert(
        &mut self,
        language: Grammar,
        rows: RowRange,
        source: &str,
        tags: &Rc<Tags>,
    ) {
        if source.len() > MAX_TAG_CACHE_BYTES / 4 {
            return;
        }
        if self.source_bytes + source.len() > MAX_TAG_CACHE_BYTES
            || self.entry_count >= MAX_TAG_CACHE_ENTRIES
        {
            self.entries.clear();
            self.source_bytes = 0;
            self.entry_count = 0;
        }
        self.source_bytes += source.len();
        self.entry_count += 1;
        self.entries
            .entry(Self::key(language, rows, source))
            .or_default()
            .push((source.into(), tags.clone()));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::Clock;
    use crate::symbols::budget::ParseBudget;
    use crate::symbols::tags::{extract_tags, extract_tags_in_rows, extract_tags_within};

    use super::*;

    #[test]
    fn repeated_parses_come_from_the_cache_within_the_budget() {
        let source = "class Cached:\n    def method(self):\n        return helper()\n";
        let first = extract_tags(Grammar::Python, source).expect("parses");
        let again = extract_tags(Grammar::Python, source).expect("cached");
        assert_eq!(first, again);
        // A cached text is still refused when the budget does not allow it.
        assert_eq!(
            extract_tags_within(
                Grammar::Python,
                source,
                &mut ParseBudget::new(0, Duration::from_secs(1), Clock::Ignored)
            ),
            None
        );
        // Tags of some rows are kept apart from tags of the whole text.
        let rows =
            extract_tags_in_rows(Grammar::Python, source, 2, 2, &mut ParseBudget::generous())
                .expect("parses");
        let mut cache = TagCache::default();
        cache.insert(Grammar::Python, Some((2, 2)), source, &rows);
        assert_eq!(cache.get(Grammar::Python, None, source), None);
        assert_eq!(cache.get(Grammar::Python, Some((2, 2)), source), Some(rows));
        for index in 0..MAX_TAG_CACHE_ENTRIES + 10 {
            cache.insert(Grammar::Python, None, &format!("x{index} = 1\n"), &first);
        }
        assert!(cache.entry_count <= MAX_TAG_CACHE_ENTRIES);
        assert!(cache.get(Grammar::Python, None, "x0 = 1\n").is_none());
        assert!(cache.get(Grammar::Rust, None, "x9 = 1\n").is_none());
    }
}
