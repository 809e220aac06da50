//! rank: "of the experience a user has stored, what helps with this task,
//! and in what order?"
//!
//! Pure: no HTTP, no SQL, no tantivy. The service hands in the candidate
//! sessions the index found (each with its [`SessionProfile`] and the BM25
//! scores of its task statement and of its whole text) and gets back every
//! candidate with its features, one fused score and the gate's verdict
//! ([`rank`]), then builds the answer from the kept ones ([`assemble`]).
//!
//! The features, the weights and the gate are written next to each other in
//! [`score`] with the reason for each.

pub mod assemble;
pub mod query;

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::ingest::SessionRecord;

use self::query::{QueryFacts, name_key, normalize_path, qualified_key};

/// Entries kept per list in a profile: enough for any real fix, small
/// enough that loading a few hundred profiles per search stays cheap.
const MAX_PROFILE_ENTRIES: usize = 100;
/// Files and symbols shown per candidate by explain.
const EXPLAINED_ENTRIES: usize = 20;
/// Characters of the task's first line kept in a profile.
const MAX_TASK_LINE_CHARS: usize = 200;

/// What ranking needs of a session, stored with its index document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionProfile {
    /// The session.
    pub session_id: String,
    /// First non-empty line of the task statement.
    pub task_line: String,
    /// Dominant language.
    pub language: Option<String>,
    /// Files the diffs changed (the first few, for display).
    pub files_changed: Vec<String>,
    /// Definitions enclosing changed lines (the first few, for display).
    pub symbols_changed: Vec<String>,
    /// Whether any file was changed.
    pub has_files: bool,
    /// What queries are matched against, computed once when the record is
    /// derived.
    pub keys: ProfileKeys,
    /// `resolved`, `failed` or `unknown`.
    pub outcome: String,
    /// Last Add of the session (recency).
    pub last_seq: i64,
    /// When its record was last derived, Unix ms.
    #[serde(default)]
    pub updated_at_ms: i64,
    /// Digest of the whitespace-normalized task statement: trajectories of
    /// the same task share it.
    pub task_digest: String,
    /// Digest of the last diff the session shows, if any.
    pub fix_digest: Option<String>,
}

/// The match keys of a session (see [`SessionProfile::keys`]), each list
/// deduplicated and lowercased.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileKeys {
    /// Name keys of the symbols changed.
    pub changed: Vec<String>,
    /// Name keys of the symbols referenced and not changed.
    pub referenced: Vec<String>,
    /// Qualified keys of the symbols changed.
    pub qualified_changed: Vec<String>,
    /// Stems of the changed non-test files.
    pub stems: Vec<String>,
    /// Words of the changed code's names.
    pub location_words: Vec<String>,
    /// Every changed file, normalized.
    pub files: Vec<String>,
    /// Changed non-test files, normalized.
    pub source_files: Vec<String>,
    /// Error types (last dotted segment).
    pub error_types: Vec<String>,
    /// Test names (last `::` segment, no parameters).
    pub tests: Vec<String>,
}

impl ProfileKeys {
    /// Sorts and deduplicates the keys ranking looks up by membership, so
    /// that a lookup is a binary search instead of a set built per query.
    /// Profiles are stored sorted (index schema 10 on).
    fn sort_lookups(&mut self) {
        for values in [
            &mut self.changed,
            &mut self.referenced,
            &mut self.qualified_changed,
            &mut self.error_types,
            &mut self.tests,
        ] {
            values.sort_unstable();
            values.dedup();
        }
    }
}

/// Whether sorted `values` hold `key`.
fn has(values: &[String], key: &str) -> bool {
    values
        .binary_search_by(|value| value.as_str().cmp(key))
        .is_ok()
}

/// Deduplicates in order.
fn unique(values: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    values
        .into_iter()
        .filter(|value| seen.insert(value.clone()))
        .collect()
}

fn digest(parts: &[&str]) -> String {
    // Collapsing duplicates only needs a stable, well-mixed 64-bit value.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for part in parts {
        part.hash(&mut hasher);
    }
    format!("{:016x}", hasher.finish())
}

/// The digest of a task statement as a session record keeps it (trimmed,
/// its first [`ingest::MAX_TASK_CHARS`] characters) with whitespace
/// collapsed: equal for a query that is the same statement again.
pub fn task_digest(text: &str) -> String {
    let kept = crate::ingest::text::truncate_to_chars(text.trim(), crate::ingest::MAX_TASK_CHARS);
    let normalized = kept.split_whitespace().collect::<Vec<_>>().join(" ");
    digest(&[&normalized])
}

fn capped(values: &[String]) -> Vec<String> {
    values.iter().take(MAX_PROFILE_ENTRIES).cloned().collect()
}

impl SessionProfile {
    /// The profile of a derived record.
    pub fn from_record(
        session_id: &str,
        record: &SessionRecord,
        last_seq: i64,
        updated_at_ms: i64,
    ) -> SessionProfile {
        let task_line = record
            .task
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .unwrap_or("")
            .chars()
            .take(MAX_TASK_LINE_CHARS)
            .collect();
        let last_fix_message = record
            .evidence
            .iter()
            .filter(|evidence| evidence.kind == "fix")
            .map(|evidence| evidence.message_index)
            .max();
        let fix_digest = last_fix_message.map(|message| {
            let texts: Vec<&str> = record
                .evidence
                .iter()
                .filter(|evidence| evidence.kind == "fix" && evidence.message_index == message)
                .map(|evidence| evidence.text.as_str())
                .collect();
            digest(&texts)
        });
        let files = capped(&record.files_changed);
        let symbols_changed = capped(&record.symbols_changed);
        let changed = unique(symbols_changed.iter().filter_map(|symbol| name_key(symbol)));
        let changed_set: HashSet<&String> = changed.iter().collect();
        let referenced = unique(
            record
                .symbols_referenced
                .iter()
                .take(MAX_PROFILE_ENTRIES)
                .filter_map(|symbol| name_key(symbol))
                .filter(|name| !changed_set.contains(name)),
        );
        let mut keys =
            ProfileKeys {
                qualified_changed: unique(
                    symbols_changed
                        .iter()
                        .filter_map(|symbol| qualified_key(symbol)),
                ),
                referenced,
                stems: unique(
                    files
                        .iter()
                        .filter(|file| !is_test_path(file))
                        .filter_map(|file| file_stem(file))
                        .filter(|stem| stem.len() >= 4),
                ),
                location_words: {
                    let mut words: Vec<String> = location_words(&files, &symbols_changed)
                        .into_iter()
                        .collect();
                    words.sort();
                    words
                },
                files: unique(files.iter().map(|file| normalize_path(file))),
                source_files: unique(
                    files
                        .iter()
                        .filter(|file| !is_test_path(file))
                        .map(|file| normalize_path(file)),
                ),
                error_types: unique(record.errors.iter().take(MAX_PROFILE_ENTRIES).filter_map(
                    |error| error.error_type.rsplit('.').next().map(str::to_lowercase),
                )),
                tests: unique(
                    record
                        .tests
                        .failing
                        .iter()
                        .chain(&record.tests.passing)
                        .take(MAX_PROFILE_ENTRIES)
                        .map(|test| {
                            let name = test.rsplit("::").next().unwrap_or(test);
                            name.split('[').next().unwrap_or(name).to_lowercase()
                        }),
                ),
                changed,
            };
        keys.sort_lookups();
        SessionProfile {
            session_id: session_id.to_string(),
            task_line,
            language: record.language.clone(),
            has_files: !files.is_empty(),
            files_changed: files.into_iter().take(EXPLAINED_ENTRIES).collect(),
            symbols_changed: symbols_changed
                .into_iter()
                .take(EXPLAINED_ENTRIES)
                .collect(),
            keys,
            outcome: record.outcome.status.clone(),
            last_seq,
            updated_at_ms,
            task_digest: task_digest(&record.task),
            fix_digest,
        }
    }
}

/// A session the index found for a query.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Its profile.
    pub profile: std::sync::Arc<SessionProfile>,
    /// BM25 of the query over its whole text (task and evidence).
    pub text_bm25: f32,
    /// The summed IDF of the query terms its text holds (see
    /// `index::SessionHit::matched_weight`).
    pub matched_weight: f32,
}

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

/// Why the gate dropped a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// No code fact in common and too little text similarity.
    BelowFloor,
    /// Its code is in another language than the query's code base.
    OtherCodeBase,
    /// Past the number of sessions an answer holds.
    BeyondLimit,
    /// Far below the best session.
    FarBelowBest,
    /// Another trajectory of the same task, or the same diff, ranks higher.
    Duplicate {
        /// The session kept instead.
        of: String,
    },
}

/// One candidate, scored.
#[derive(Debug, Clone, Serialize)]
pub struct Scored {
    /// The session.
    pub session_id: String,
    /// Its first task line.
    pub task_line: String,
    /// Its outcome.
    pub outcome: String,
    /// Its dominant language.
    pub language: Option<String>,
    /// When its record was last derived, Unix ms.
    pub updated_at_ms: i64,
    /// Files it changed (the first few).
    pub files_changed: Vec<String>,
    /// Symbols it changed (the first few).
    pub symbols_changed: Vec<String>,
    /// The features.
    pub features: Features,
    /// Code evidence: the part of the score from code facts in common.
    pub evidence: f32,
    /// The fused score.
    pub score: f32,
    /// `None` when kept.
    pub dropped: Option<DropReason>,
    /// Its position among the candidates `rank` was given.
    #[serde(skip)]
    candidate: usize,
}

/// BM25-style inverse document frequency, never negative.
fn idf(num_sessions: usize, df: usize) -> f32 {
    let n = num_sessions.max(df) as f32;
    let df = df as f32;
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Whether `path` is `suffix` or ends with `/suffix`.
fn ends_with_segment(path: &str, suffix: &str) -> bool {
    path == suffix
        || (path.len() > suffix.len()
            && path.ends_with(suffix)
            && path.as_bytes()[path.len() - suffix.len() - 1] == b'/')
}

/// The file name without its extension.
fn strip_extension(path: &str) -> &str {
    let name_start = path.rfind('/').map_or(0, |slash| slash + 1);
    match path[name_start..].rfind('.') {
        Some(dot) if dot > 0 => &path[..name_start + dot],
        _ => path,
    }
}

/// Whether a query path (a file, or a module without extension) names this
/// changed file (normalized, see [`normalize_path`]).
fn path_matches(query_path: &str, file: &str) -> bool {
    let has_extension = query_path
        .rsplit('/')
        .next()
        .is_some_and(|name| name.contains('.'));
    if has_extension {
        return ends_with_segment(file, query_path) || ends_with_segment(query_path, file);
    }
    // A module: its file (`a/b/c.py`) or its package (`a/b/c/__init__.py`,
    // `a/b/c/mod.rs`); a module path names no file inside it.
    let without_extension = strip_extension(file);
    if ends_with_segment(without_extension, query_path) {
        return true;
    }
    let directory = without_extension
        .rsplit_once('/')
        .map_or("", |(dir, _)| dir);
    let name = &without_extension[directory.len()..].trim_start_matches('/');
    matches!(*name, "__init__" | "mod" | "index" | "lib")
        && ends_with_segment(directory, query_path)
}

/// Whether a path is a test file (tests do not make two fixes related).
pub fn is_test_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    lower
        .split('/')
        .any(|part| matches!(part, "test" | "tests" | "testing" | "__tests__" | "spec"))
        || name.starts_with("test_")
        || strip_extension(name).ends_with("_test")
        || strip_extension(name).ends_with("_tests")
        || strip_extension(name).ends_with(".test")
        || strip_extension(name).ends_with(".spec")
        || strip_extension(name).ends_with("test") && path.ends_with(".java")
}

/// The stem a changed file is known by: its name without extension, or
/// for a package's entry file its directory's name.
fn file_stem(path: &str) -> Option<String> {
    let without_extension = strip_extension(path);
    let mut parts = without_extension.rsplit('/');
    let name = parts.next()?;
    let stem = if matches!(name, "__init__" | "mod" | "index" | "lib" | "main") {
        parts.next()?
    } else {
        name
    };
    Some(stem.to_lowercase())
}

/// Words of the code a session changed: its changed (non-test) files'
/// directory and file names and its changed symbols, split into their
/// identifier parts, lowercased; parts too short or too generic to tell two
/// places apart are left out.
fn location_words(files: &[String], symbols_changed: &[String]) -> HashSet<String> {
    const GENERIC: &[&str] = &[
        "src", "lib", "include", "test", "tests", "docs", "doc", "pkg", "cmd", "internal",
        "crates", "packages", "source", "app", "main", "index", "mod", "init", "core", "utils",
        "util", "common",
    ];
    let mut words = HashSet::new();
    let mut add_parts = |text: &str| {
        for part in identifier_parts(text) {
            if part.len() >= 3 && !GENERIC.contains(&part.as_str()) {
                words.insert(part);
            }
        }
    };
    for file in files.iter().filter(|file| !is_test_path(file)) {
        add_parts(strip_extension(file));
    }
    for symbol in symbols_changed {
        add_parts(symbol);
    }
    words
}

/// The lowercased identifier parts of a text: split at every character
/// that is not a letter or digit and at lower-to-upper case changes
/// (`LatexPrinter._print_Mul` -> latex, printer, print, mul).
fn identifier_parts(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for character in text.chars() {
        if !character.is_ascii_alphanumeric() {
            if !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if character.is_ascii_uppercase() && previous_lower && !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        previous_lower = character.is_ascii_lowercase() || character.is_ascii_digit();
        current.push(character.to_ascii_lowercase());
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Languages that share a code base often (C and C++ headers, JavaScript
/// and TypeScript) count as one.
fn language_family(language: &str) -> &str {
    match language {
        "c" | "cpp" | "objective-c" => "c-family",
        "javascript" | "typescript" => "javascript",
        other => other,
    }
}

/// Per-candidate sets used to match the query, borrowed from its profile.
/// A candidate's keys as ranking reads them; the membership lists are
/// sorted ([`ProfileKeys::sort_lookups`]).
struct CandidateKeys<'p> {
    changed: &'p [String],
    referenced: &'p [String],
    qualified_changed: &'p [String],
    stems: &'p [String],
    location_words: &'p [String],
    files: &'p [String],
    source_files: &'p [String],
    error_types: &'p [String],
    tests: &'p [String],
}

fn candidate_keys(profile: &SessionProfile) -> CandidateKeys<'_> {
    let keys = &profile.keys;
    CandidateKeys {
        changed: &keys.changed,
        referenced: &keys.referenced,
        qualified_changed: &keys.qualified_changed,
        stems: &keys.stems,
        location_words: &keys.location_words,
        files: &keys.files,
        source_files: &keys.source_files,
        error_types: &keys.error_types,
        tests: &keys.tests,
    }
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

/// Scores every candidate for the query, applies the noise gate and
/// collapses duplicates. `num_sessions` is the number of sessions in the
/// user's scope (for IDF). Kept candidates come first, best first; dropped
/// ones follow, best first.
pub fn rank(
    query: &QueryFacts,
    candidates: &[Candidate],
    num_sessions: usize,
    query_weight: f32,
) -> Vec<Scored> {
    let keys: Vec<CandidateKeys> = candidates
        .iter()
        .map(|candidate| candidate_keys(&candidate.profile))
        .collect();
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
        &keys,
        num_sessions.max(candidates.len()),
    );

    let best_text = candidates
        .iter()
        .map(|candidate| candidate.text_bm25)
        .fold(0.0f32, f32::max);
    let text_rel = |candidate: &Candidate| {
        if best_text > 0.0 {
            candidate.text_bm25 / best_text
        } else {
            0.0
        }
    };
    // How much text similarity other sessions that changed the same file
    // carry: a file several similar tasks touched is likely where this one
    // lives too.
    let mut file_support: HashMap<&str, f32> = HashMap::new();
    for (candidate, keys) in candidates.iter().zip(&keys) {
        for file in keys.source_files {
            *file_support.entry(file.as_str()).or_default() += text_rel(candidate);
        }
    }

    let mut scored: Vec<Scored> = candidates
        .iter()
        .zip(&keys)
        .enumerate()
        .map(|(position, (candidate, keys))| {
            let mut features = Features {
                text_bm25: candidate.text_bm25,
                text_rel: text_rel(candidate),
                text_coverage: if query_weight > 0.0 {
                    candidate.text_bm25 / query_weight
                } else {
                    0.0
                },
                term_coverage: if query_weight > 0.0 {
                    (candidate.matched_weight / query_weight).min(1.0)
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
            let own = text_rel(candidate);
            features.file_support = keys
                .source_files
                .iter()
                .map(|file| file_support.get(file.as_str()).copied().unwrap_or(0.0) - own)
                .fold(0.0f32, f32::max);
            for name in &query_errors {
                if has(keys.error_types, name) {
                    features.errors += frequencies.idf(frequencies.errors.get(name));
                }
            }
            for name in &query_tests {
                if has(keys.tests, name) {
                    features.tests += 1.0;
                }
            }
            features.no_files = !candidate.profile.has_files;
            features.same_task = query
                .task_digest
                .as_deref()
                .is_some_and(|digest| digest == candidate.profile.task_digest);
            let (evidence, score) = score(&features, &candidate.profile.outcome);
            Scored {
                session_id: candidate.profile.session_id.clone(),
                task_line: candidate.profile.task_line.clone(),
                outcome: candidate.profile.outcome.clone(),
                language: candidate.profile.language.clone(),
                updated_at_ms: candidate.profile.updated_at_ms,
                files_changed: candidate
                    .profile
                    .files_changed
                    .iter()
                    .take(EXPLAINED_ENTRIES)
                    .cloned()
                    .collect(),
                symbols_changed: candidate
                    .profile
                    .symbols_changed
                    .iter()
                    .take(EXPLAINED_ENTRIES)
                    .cloned()
                    .collect(),
                features,
                evidence,
                score,
                dropped: None,
                candidate: position,
            }
        })
        .collect();
    scored.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then_with(|| {
            // Recency only breaks ties.
            let newer = |s: &Scored| candidates[s.candidate].profile.last_seq;
            newer(b)
                .cmp(&newer(a))
                .then(a.session_id.cmp(&b.session_id))
        })
    });
    let language = query.language.clone().or_else(|| voted_language(&scored));
    gate(&mut scored, candidates, language.as_deref());
    // Kept first (in score order), then dropped (in score order).
    scored.sort_by_key(|scored| scored.dropped.is_some());
    scored
}

/// The language of the code base a query without explicit code is about:
/// the one of the sessions most similar to it (the best ten, each weighted
/// by its text similarity), when the vote is clear (at least twice the
/// runner-up's weight); a split vote decides nothing.
fn voted_language(scored: &[Scored]) -> Option<String> {
    const VOTERS: usize = 10;
    const CLEAR_MARGIN: f32 = 2.0;
    let mut votes: HashMap<&str, f32> = HashMap::new();
    for entry in scored.iter().take(VOTERS) {
        if let Some(language) = &entry.language {
            *votes.entry(language_family(language)).or_default() += entry.features.text_rel;
        }
    }
    let mut ranked: Vec<(&str, f32)> = votes.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    match ranked.as_slice() {
        [] => None,
        [(winner, _)] => Some(winner.to_string()),
        [(winner, first), (_, second), ..] => {
            (*first >= CLEAR_MARGIN * *second).then(|| winner.to_string())
        }
    }
}

/// Weights of the fused score, in units of relative text similarity (the
/// best-matching session's BM25 over its whole text is 1.0). Their ratios
/// were fitted pairwise (a relevant session above an irrelevant one of the
/// same query) on the dev benchmark's features and rounded; every one is
/// positive where an engineer would expect it.
mod weight {
    /// Relative BM25 over the whole session text (task, fix hunks, errors,
    /// commands): the base signal.
    pub const TEXT: f32 = 1.0;
    /// Per IDF unit of a query name the session changed: the strongest sign
    /// that the new fix touches the same code.
    pub const SYMBOL_CHANGED: f32 = 0.12;
    /// Per IDF unit of a query name the session only referenced.
    pub const SYMBOL_REFERENCED: f32 = 0.05;
    /// Per IDF unit of a query path naming a file the session changed.
    pub const PATH: f32 = 0.1;
    /// Per IDF unit of a query word naming a changed file (`latex.py` for
    /// "latex printing").
    pub const STEM: f32 = 0.25;
    /// Per IDF unit of a query word among the names of the changed code
    /// (directories, files, symbol parts).
    pub const LOCATION_WORD: f32 = 0.075;
    /// Per unit of other sessions' text similarity on a file this one
    /// changed.
    pub const FILE_SUPPORT: f32 = 0.035;
    /// Per IDF unit of an error type in common.
    pub const ERROR: f32 = 0.02;
    /// Per test name in common.
    pub const TEST: f32 = 0.1;
    /// A session without any diff shows no fix to learn from.
    pub const NO_FILES: f32 = -0.4;
    /// A failed attempt whose code evidence is below
    /// [`STRONG_EVIDENCE`] loses this much: it may still show where the
    /// problem lives, but it must not outrank a fix on text alone.
    pub const FAILED: f32 = -0.15;
    /// Code evidence above which a failed attempt is not demoted.
    pub const STRONG_EVIDENCE: f32 = 0.5;
    /// The session's task statement is the query: the issue met again is
    /// the strongest sign there is, above any mix of text and code evidence
    /// (those reach 2 to 3 when a session names the query's code many
    /// times over).
    pub const SAME_TASK: f32 = 3.0;
}

/// Gate thresholds.
mod gate {
    /// A session with no code fact in common with the query and less
    /// relative text similarity than this shares only common words.
    pub const MIN_TEXT_REL_WITHOUT_EVIDENCE: f32 = 0.15;
    /// Code evidence that counts as "a code fact in common".
    pub const MIN_EVIDENCE: f32 = 0.1;
    /// A session with no code fact in common whose text covers less of the
    /// query than this (its BM25 over the sum of the query terms' IDF)
    /// matches only a few common words. On the dev benchmark every relevant
    /// session covers at least 0.089 (98% at least 0.12), while the best
    /// match for a task of another repository covers less than 0.08 in
    /// about a fifth of cases.
    pub const MIN_TEXT_COVERAGE_WITHOUT_EVIDENCE: f32 = 0.08;
    /// A kept session scores at least the best one's minus this: when the
    /// best names the query's code many times over (several units of code
    /// evidence), a session sharing only words with the query is its tail.
    /// Kept generous: sessions below the best already get little room (see
    /// `assemble::room`), and a tighter cut lost relevant sessions on dev
    /// (2.5: noisy nDCG@10 0.818, repo 0.583; 4.0: 0.822, 0.596).
    pub const MAX_BELOW_BEST: f32 = 4.0;
    /// Code evidence that keeps a session of another language (a binding,
    /// a generated file): it names what the query names.
    pub const OTHER_LANGUAGE_EVIDENCE: f32 = 0.5;
    /// Text coverage that keeps a session of another language too: it
    /// tells the query's own story (the same issue, reported again), and the
    /// query's language was only guessed from a few names in it. Far above
    /// what distractors reach (on dev, the best distractor's coverage has a
    /// median of 0.27 and rarely passes 0.45).
    pub const OTHER_LANGUAGE_COVERAGE: f32 = 0.6;
    /// Sessions kept at most: nDCG@10-deep, and an agent reads no more.
    pub const MAX_KEPT: usize = 10;
}

/// The code evidence and the fused score of a candidate.
fn score(features: &Features, outcome: &str) -> (f32, f32) {
    let evidence = weight::SYMBOL_CHANGED * features.symbols_changed
        + weight::SYMBOL_REFERENCED * features.symbols_referenced
        + weight::PATH * features.paths
        + weight::STEM * features.stems
        + weight::LOCATION_WORD * features.location_words
        + weight::FILE_SUPPORT * features.file_support
        + weight::ERROR * features.errors
        + weight::TEST * features.tests;
    let mut score = weight::TEXT * features.text_rel + evidence;
    if features.same_task {
        score += weight::SAME_TASK;
    }
    if features.no_files {
        score += weight::NO_FILES;
    }
    if outcome == "failed" && evidence < weight::STRONG_EVIDENCE {
        score += weight::FAILED;
    }
    (evidence, score)
}

/// Marks what the gate drops, in place; `scored` is best first.
fn gate(scored: &mut [Scored], candidates: &[Candidate], language: Option<&str>) {
    let mut best_kept: Option<f32> = None;
    let mut num_kept = 0usize;
    // Digest -> the session kept with it.
    let mut seen_tasks: HashMap<&str, &str> = HashMap::new();
    let mut seen_fixes: HashMap<&str, &str> = HashMap::new();
    for entry in scored.iter_mut() {
        // The same task again is relevant whatever its language or evidence.
        if !entry.features.same_task {
            let other_language = match (language, entry.language.as_deref()) {
                (Some(query), Some(session)) => language_family(session) != language_family(query),
                _ => false,
            };
            if other_language
                && entry.evidence < gate::OTHER_LANGUAGE_EVIDENCE
                && entry.features.text_coverage < gate::OTHER_LANGUAGE_COVERAGE
            {
                entry.dropped = Some(DropReason::OtherCodeBase);
                continue;
            }
            if entry.evidence < gate::MIN_EVIDENCE
                && (entry.features.text_rel < gate::MIN_TEXT_REL_WITHOUT_EVIDENCE
                    || entry.features.text_coverage < gate::MIN_TEXT_COVERAGE_WITHOUT_EVIDENCE)
            {
                entry.dropped = Some(DropReason::BelowFloor);
                continue;
            }
        }
        if let Some(best) = best_kept
            && entry.score < best - gate::MAX_BELOW_BEST
        {
            entry.dropped = Some(DropReason::FarBelowBest);
            continue;
        }
        let profile = &candidates[entry.candidate].profile;
        let task = profile.task_digest.as_str();
        let fix = profile.fix_digest.as_deref();
        if let Some(of) = seen_tasks
            .get(task)
            .or_else(|| fix.and_then(|fix| seen_fixes.get(fix)))
        {
            entry.dropped = Some(DropReason::Duplicate { of: of.to_string() });
            continue;
        }
        if num_kept >= gate::MAX_KEPT {
            entry.dropped = Some(DropReason::BeyondLimit);
            continue;
        }
        seen_tasks.insert(task, profile.session_id.as_str());
        if let Some(fix) = fix {
            seen_fixes.insert(fix, profile.session_id.as_str());
        }
        best_kept.get_or_insert(entry.score);
        num_kept += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{Evidence, Outcome, SessionRecord};

    fn record(task: &str, files: &[&str], symbols: &[&str], language: &str) -> SessionRecord {
        SessionRecord {
            task: task.to_string(),
            language: Some(language.to_string()),
            files_changed: files.iter().map(|file| file.to_string()).collect(),
            symbols_changed: symbols.iter().map(|symbol| symbol.to_string()).collect(),
            outcome: Outcome {
                final_diff: !files.is_empty(),
                tests_passed_at_end: None,
                status: "resolved".to_string(),
            },
            evidence: files
                .iter()
                .map(|file| Evidence {
                    kind: "fix".to_string(),
                    text: format!("--- a/{file}\n+++ b/{file}\n@@ -1 +1 @@\n-old\n+new {task}"),
                    message_index: 1,
                    byte_start: 0,
                    byte_end: 1,
                    file: Some(file.to_string()),
                    symbols: Vec::new(),
                })
                .collect(),
            ..SessionRecord::default()
        }
    }

    fn candidate(id: &str, record: &SessionRecord, text_bm25: f32) -> Candidate {
        Candidate {
            profile: std::sync::Arc::new(SessionProfile::from_record(id, record, 1, 0)),
            text_bm25,
            matched_weight: 0.0,
        }
    }

    #[test]
    fn changed_symbol_and_file_outrank_text_alone() {
        let query = query::analyze(
            "`separability_matrix` gives wrong results for nested models in astropy.modeling.separable",
        );
        let fix = record(
            "separability of compound models",
            &["astropy/modeling/separable.py"],
            &["separability_matrix"],
            "python",
        );
        let chatter = record(
            "nested models print wrong results",
            &["astropy/io/fits/header.py"],
            &["Header.__repr__"],
            "python",
        );
        let ranked = rank(
            &query,
            &[
                candidate("chatter", &chatter, 10.0),
                candidate("fix", &fix, 8.0),
            ],
            2,
            10.0,
        );
        assert_eq!(ranked[0].session_id, "fix", "{ranked:#?}");
        assert!(ranked[0].features.symbols_changed > 0.0);
        assert!(ranked[0].features.paths > 0.0);
        assert!(ranked[0].features.stems > 0.0);
    }

    #[test]
    fn gate_drops_other_language_duplicates_and_weak_text() {
        let query = query::analyze("the parser in src/args.rs rejects trailing commas");
        let rust = record(
            "parser rejects commas",
            &["src/args.rs"],
            &["parse"],
            "rust",
        );
        let rust_again = record(
            "parser rejects commas",
            &["src/args.rs"],
            &["parse"],
            "rust",
        );
        let python = record(
            "parser rejects commas",
            &["lib/parse.py"],
            &["parse"],
            "python",
        );
        let python_same_story = record(
            "the parser rejects commas",
            &["lib/parse.py"],
            &["parse"],
            "python",
        );
        let faint = record("unrelated docs", &["docs/intro.rs"], &[], "rust");
        let ranked = rank(
            &query,
            &[
                candidate("rust", &rust, 10.0),
                candidate("rust-again", &rust_again, 9.0),
                candidate("python", &python, 4.0),
                candidate("python-same-story", &python_same_story, 9.5),
                candidate("faint", &faint, 0.5),
            ],
            5,
            10.0,
        );
        let verdict = |id: &str| {
            ranked
                .iter()
                .find(|entry| entry.session_id == id)
                .and_then(|entry| entry.dropped.clone())
        };
        assert_eq!(verdict("rust"), None);
        assert_eq!(
            verdict("rust-again"),
            Some(DropReason::Duplicate {
                of: "rust".to_string()
            })
        );
        assert_eq!(verdict("python"), Some(DropReason::OtherCodeBase));
        assert_eq!(
            verdict("python-same-story"),
            None,
            "another language, but nearly all of the query's text"
        );
        assert_eq!(verdict("faint"), Some(DropReason::BelowFloor));
        assert_eq!(ranked[0].session_id, "rust", "kept ones first");
    }

    #[test]
    fn the_same_task_again_ranks_first_and_passes_the_gate() {
        let statement = "Add pie chart style to the\n  language card";
        let query = query::analyze("  Add pie chart style to the language card\n");
        let same = record(statement, &["src/app.js"], &[], "javascript");
        let rich = record(
            "language card layout",
            &["src/cards/language-card.js", "src/pie_chart.js"],
            &["renderLanguageCard", "pie_chart"],
            "javascript",
        );
        let ranked = rank(
            &query,
            &[
                candidate("same", &same, 2.0),
                candidate("rich", &rich, 10.0),
            ],
            2,
            40.0,
        );
        let same_entry = ranked
            .iter()
            .find(|entry| entry.session_id == "same")
            .expect("scored");
        assert!(same_entry.features.same_task);
        assert_eq!(same_entry.dropped, None, "kept though its text is weaker");
        assert_eq!(ranked[0].session_id, "same");
        assert_eq!(
            task_digest(statement),
            task_digest("Add pie chart style to the language card")
        );
        assert_ne!(task_digest(statement), task_digest("Add pie chart style"));
    }

    #[test]
    fn failed_attempts_rank_below_an_equal_fix() {
        let query = query::analyze("the cache drops entries when the ttl is zero");
        let fixed = record(
            "cache drops entries",
            &["cache/store.py"],
            &["Store.get"],
            "python",
        );
        let mut failed = fixed.clone();
        failed.task = "cache drops entries (another attempt)".to_string();
        failed.outcome.status = "failed".to_string();
        failed.evidence[0].text.push_str(" attempt");
        let ranked = rank(
            &query,
            &[
                candidate("failed", &failed, 10.0),
                candidate("fixed", &fixed, 10.0),
            ],
            2,
            10.0,
        );
        assert_eq!(ranked[0].session_id, "fixed", "{ranked:#?}");
    }

    #[test]
    fn paths_match_files_modules_and_packages() {
        assert!(path_matches(
            "astropy/modeling/separable.py",
            "astropy/modeling/separable.py"
        ));
        assert!(path_matches(
            "testbed/astropy/modeling/separable.py",
            "astropy/modeling/separable.py"
        ));
        assert!(path_matches(
            "modeling/separable.py",
            "astropy/modeling/separable.py"
        ));
        assert!(path_matches(
            "astropy/modeling/separable",
            "astropy/modeling/separable.py"
        ));
        assert!(path_matches(
            "sklearn/linear_model",
            "sklearn/linear_model/__init__.py"
        ));
        assert!(!path_matches(
            "sklearn/linear_model",
            "sklearn/linear_model/_base.py"
        ));
        assert!(!path_matches(
            "separable.py",
            "astropy/modeling/inseparable.py"
        ));
        assert!(is_test_path("tests/test_parser.py"));
        assert!(is_test_path("src/parser_test.go"));
        assert!(!is_test_path("src/testament.rs"));
        assert_eq!(
            identifier_parts("LatexPrinter._print_Mul"),
            vec!["latex", "printer", "print", "mul"]
        );
    }

    #[test]
    fn nothing_in_nothing_out() {
        assert!(rank(&query::analyze("anything"), &[], 0, 0.0).is_empty());
    }
}
