//! The features of one candidate for one query: how much of the query's
//! text it shares, and which of the query's code facts (symbols, paths, file
//! stems, location words, errors, tests) it holds, each weighted by how rare
//! the fact is among the candidates.
//!
//! What the features are worth is left to [`super::weight`].

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::paths::path_matches;
use super::profile::has;
use super::query::QueryFacts;
use super::{Candidate, CandidateKeys};

/// The features of one candidate for one query.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Features {
    /// BM25 over the whole text.
    pub text_bm25: f32,
    /// ... relative to the best candidate's (0..1).
    pub text_rel: f32,
    /// ... relative to the query's own weight (the sum of its terms' IDF):
    /// how much of the query the session covers, comparable across
    /// queries.
    pub text_coverage: f32,
    /// The share of the query's weight (summed IDF) in terms its text
    /// holds at all: unlike BM25, not diluted by a long text.
    pub term_coverage: f32,
    /// IDF-weighted query names matching symbols the session changed.
    pub symbols_changed: f32,
    /// IDF-weighted query names matching symbols it only referenced.
    pub symbols_referenced: f32,
    /// IDF-weighted query paths matching files it changed.
    pub paths: f32,
    /// IDF-weighted query words naming a changed (non-test) file's stem.
    pub stems: f32,
    /// IDF-weighted error types in common.
    pub errors: f32,
    /// Test names in common.
    pub tests: f32,
    /// IDF-weighted query words among the names of the changed code.
    pub location_words: f32,
    /// Text similarity of other sessions that changed one of its files.
    pub file_support: f32,
    /// It changed no file.
    pub no_files: bool,
    /// Its task statement is the query itself: the same issue again.
    pub same_task: bool,
    /// What matched, for explain and for choosing the fix hunks to show.
    pub matched: Vec<String>,
}

/// How many of each kind of code fact a focused change holds: a fix of a
/// few files and definitions. A candidate holding more has each such
/// feature scaled by `focused / held`, a precision-like share, so that a
/// commit that changes 150 names or 36 files does not match better for
/// holding them: it matches any query a little.
const FOCUSED_FILES: f32 = 3.0;
/// See [`FOCUSED_FILES`]: changed definitions.
const FOCUSED_SYMBOLS: f32 = 8.0;
/// See [`FOCUSED_FILES`]: referenced names.
const FOCUSED_REFERENCED: f32 = 30.0;
/// See [`FOCUSED_FILES`]: words of the changed code's names.
const FOCUSED_LOCATION_WORDS: f32 = 16.0;
/// From this many changed source files, or [`BROAD_SYMBOLS`] changed
/// definitions, a change is broad: a merge spanning much of the tree, a
/// reformatting, a move. Only what the query names (its symbols and
/// paths) counts for it then; the words and files it spans do not.
const BROAD_FILES: usize = 20;
/// See [`BROAD_FILES`].
const BROAD_SYMBOLS: usize = 60;
/// Directory names of vendored or generated third-party code: a change
/// there alone is a dependency bump, broad whatever its size.
const VENDORED_DIRECTORIES: &[&str] = &[
    "vendor",
    "vendored",
    "_vendor",
    "third_party",
    "third-party",
    "thirdparty",
    "node_modules",
    "externals",
    "extern",
];

/// `focused / held`, at most 1.
fn share(held: usize, focused: f32) -> f32 {
    if held as f32 <= focused {
        1.0
    } else {
        focused / held as f32
    }
}

/// Whether `file` lies under a vendored directory.
fn is_vendored(file: &str) -> bool {
    file.split('/').rev().skip(1).any(|directory| {
        VENDORED_DIRECTORIES
            .iter()
            .any(|vendored| directory.eq_ignore_ascii_case(vendored))
    })
}

/// Whether a candidate's change is broad ([`BROAD_FILES`]) or vendored
/// code alone.
pub(super) fn is_broad(keys: &CandidateKeys<'_>) -> bool {
    keys.source_files.len() >= BROAD_FILES
        || keys.changed.len() >= BROAD_SYMBOLS
        || (!keys.source_files.is_empty() && keys.source_files.iter().all(|file| is_vendored(file)))
}

/// Scales each code feature by the candidate's own size (see
/// [`FOCUSED_FILES`]); a broad change keeps only what the query names.
fn normalize_by_breadth(features: &mut Features, keys: &CandidateKeys<'_>) {
    let files = share(keys.files.len(), FOCUSED_FILES);
    let source_files = share(keys.source_files.len(), FOCUSED_FILES);
    features.symbols_changed *= share(keys.changed.len(), FOCUSED_SYMBOLS);
    features.symbols_referenced *= share(keys.referenced.len(), FOCUSED_REFERENCED);
    features.paths *= files;
    features.stems *= share(keys.stems.len(), FOCUSED_FILES);
    features.location_words *= share(keys.location_words.len(), FOCUSED_LOCATION_WORDS);
    features.file_support *= source_files;
    if is_broad(keys) {
        features.symbols_referenced = 0.0;
        features.stems = 0.0;
        features.location_words = 0.0;
        features.file_support = 0.0;
    }
}

/// BM25-style inverse document frequency, never negative.
fn idf(num_sessions: usize, df: usize) -> f32 {
    let n = num_sessions.max(df) as f32;
    let df = df as f32;
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Document frequencies of the query's facts among the candidates (the
/// sessions sharing any term with the query, so nearly every session that
/// holds one of the query's facts).
struct Frequencies<'q> {
    num_sessions: usize,
    names: HashMap<&'q str, usize>,
    paths: HashMap<&'q str, usize>,
    errors: HashMap<String, usize>,
    stems: HashMap<String, usize>,
    location_words: HashMap<String, usize>,
}

impl Frequencies<'_> {
    fn idf(&self, df: Option<&usize>) -> f32 {
        idf(self.num_sessions, df.copied().unwrap_or(0))
    }
}

fn frequencies<'q>(
    query: &'q QueryFacts,
    query_errors: &[String],
    query_terms: &HashSet<&str>,
    keys: &[CandidateKeys],
    num_sessions: usize,
) -> Frequencies<'q> {
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut paths: HashMap<&str, usize> = HashMap::new();
    let mut errors: HashMap<String, usize> = HashMap::new();
    let mut stems: HashMap<String, usize> = HashMap::new();
    let mut location_words: HashMap<String, usize> = HashMap::new();
    for keys in keys {
        for name in &query.names {
            if has(keys.changed, name) || has(keys.referenced, name) {
                *names.entry(name.as_str()).or_default() += 1;
            }
        }
        for path in &query.paths {
            if keys.files.iter().any(|file| path_matches(path, file)) {
                *paths.entry(path.as_str()).or_default() += 1;
            }
        }
        for name in query_errors {
            if has(keys.error_types, name) {
                *errors.entry(name.clone()).or_default() += 1;
            }
        }
        for stem in keys.stems {
            if query.words.contains(stem) {
                *stems.entry(stem.clone()).or_default() += 1;
            }
        }
        for word in keys.location_words {
            if query_terms.contains(word.as_str()) {
                *location_words.entry(word.clone()).or_default() += 1;
            }
        }
    }
    Frequencies {
        num_sessions,
        names,
        paths,
        errors,
        stems,
        location_words,
    }
}

/// What every candidate of one query is measured against: the query's facts
/// (errors and tests lowercased), their document frequencies among the
/// candidates, the best text similarity, and the text similarity of the
/// sessions that changed each file.
pub(super) struct QueryContext<'a> {
    query: &'a QueryFacts,
    query_errors: Vec<String>,
    query_tests: Vec<String>,
    frequencies: Frequencies<'a>,
    best_text: f32,
    query_weight: f32,
    file_support: HashMap<&'a str, f32>,
}

impl<'a> QueryContext<'a> {
    /// The context of `candidates` (with their `keys`, in the same order)
    /// for `query`; `num_sessions` is the number of sessions in the user's
    /// scope (for IDF), `query_weight` the sum of the query terms' IDF.
    pub(super) fn new(
        query: &'a QueryFacts,
        candidates: &[Candidate],
        keys: &[CandidateKeys<'a>],
        num_sessions: usize,
        query_weight: f32,
    ) -> QueryContext<'a> {
        let query_errors: Vec<String> = query
            .error_types
            .iter()
            .map(|name| name.to_lowercase())
            .collect();
        let query_tests: Vec<String> = query.tests.iter().map(|name| name.to_lowercase()).collect();
        let query_terms: HashSet<&str> = query.terms.iter().map(String::as_str).collect();
        let frequencies = frequencies(
            query,
            &query_errors,
            &query_terms,
            keys,
            num_sessions.max(candidates.len()),
        );
        let best_text = candidates
            .iter()
            .map(|candidate| candidate.text_bm25)
            .fold(0.0f32, f32::max);
        let mut context = QueryContext {
            query,
            query_errors,
            query_tests,
            frequencies,
            best_text,
            query_weight,
            file_support: HashMap::new(),
        };
        // How much text similarity other sessions that changed the same file
        // carry: a file several similar tasks touched is likely where this one
        // lives too.
        for (candidate, keys) in candidates.iter().zip(keys) {
            let text_rel = context.text_rel(candidate);
            for file in keys.source_files {
                *context.file_support.entry(file.as_str()).or_default() += text_rel;
            }
        }
        context
    }

    /// The candidate's BM25 relative to the best candidate's (0..1).
    fn text_rel(&self, candidate: &Candidate) -> f32 {
        if self.best_text > 0.0 {
            candidate.text_bm25 / self.best_text
        } else {
            0.0
        }
    }

    /// The features of one candidate, with its keys.
    pub(super) fn features(&self, candidate: &Candidate, keys: &CandidateKeys<'_>) -> Features {
        let query = self.query;
        let frequencies = &self.frequencies;
        let mut features = Features {
            text_bm25: candidate.text_bm25,
            text_rel: self.text_rel(candidate),
            text_coverage: if self.query_weight > 0.0 {
                candidate.text_bm25 / self.query_weight
            } else {
                0.0
            },
            term_coverage: if self.query_weight > 0.0 {
                (candidate.matched_weight / self.query_weight).min(1.0)
            } else {
                0.0
            },
            ..Features::default()
        };
        for name in &query.names {
            let weight = frequencies.idf(frequencies.names.get(name.as_str()));
            if has(keys.changed, name) {
                features.symbols_changed += weight;
                features.matched.push(name.clone());
            } else if has(keys.referenced, name) {
                features.symbols_referenced += weight;
            }
        }
        for qualified in &query.qualified {
            if has(keys.qualified_changed, qualified) {
                // A qualified match (`Class.method`) is worth more than
                // the bare name: half again.
                let name = qualified.rsplit('.').next().unwrap_or(qualified);
                features.symbols_changed += 0.5 * frequencies.idf(frequencies.names.get(name));
            }
        }
        for path in &query.paths {
            if let Some(file) = keys.files.iter().find(|file| path_matches(path, file)) {
                features.paths += frequencies.idf(frequencies.paths.get(path.as_str()));
                features.matched.push(file.clone());
            }
        }
        for stem in keys.stems {
            if let Some(df) = frequencies.stems.get(stem.as_str()) {
                features.stems += frequencies.idf(Some(df));
                features.matched.push(stem.clone());
            }
        }
        for word in keys.location_words {
            if let Some(df) = frequencies.location_words.get(word.as_str()) {
                features.location_words += frequencies.idf(Some(df));
            }
        }
        let own = self.text_rel(candidate);
        features.file_support = keys
            .source_files
            .iter()
            .map(|file| self.file_support.get(file.as_str()).copied().unwrap_or(0.0) - own)
            .fold(0.0f32, f32::max);
        for name in &self.query_errors {
            if has(keys.error_types, name) {
                features.errors += frequencies.idf(frequencies.errors.get(name));
            }
        }
        for name in &self.query_tests {
            if has(keys.tests, name) {
                features.tests += 1.0;
            }
        }
        normalize_by_breadth(&mut features, keys);
        features.no_files = !candidate.profile.has_files;
        features.same_task = query
            .task_digest
            .as_deref()
            .is_some_and(|digest| digest == candidate.profile.task_digest);
        features
    }
}
