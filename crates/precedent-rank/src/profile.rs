//! The ranking profile of a session: what ranking needs of it (its task
//! line, language, outcome, first files and symbols, the digests that spot
//! duplicates) and the match keys queries are compared with, computed once
//! when its record is derived and stored with its index document.
//!
//! Matching keys against a query is left to [`super::features`].
//!
//! A profile is stored in postcard's binary form ([`SessionProfile::encode`]),
//! which a search reads back without parsing text. The form is not
//! self-describing: fields are read in order and enum variants by
//! position, so every field is always written (no `skip_serializing_if`),
//! and any change to these types needs the index schema version bumped.

use precedent_core::domain::SessionId;
use precedent_core::language::Language;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use precedent_ingest::{EvidenceKind, OutcomeStatus, SessionRecord};

use super::identifier_parts;
use super::paths::{file_stem, is_test_path, strip_extension};
use super::query::{name_key, normalize_path, qualified_key};

/// Entries kept per list in a profile: enough for any real fix, small
/// enough that loading a few hundred profiles per search stays cheap.
const MAX_PROFILE_ENTRIES: usize = 100;
/// Files and symbols shown per candidate by explain.
pub(super) const EXPLAINED_ENTRIES: usize = 20;
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
    pub language: Option<Language>,
    /// Files the diffs changed (the first few, for display).
    pub files_changed: Vec<String>,
    /// Definitions enclosing changed lines (the first few, for display).
    pub symbols_changed: Vec<String>,
    /// Whether any file was changed.
    pub has_files: bool,
    /// What queries are matched against, computed once when the record is
    /// derived.
    pub keys: ProfileKeys,
    /// How the session ended.
    pub outcome: OutcomeStatus,
    /// Last Add of the session (recency).
    pub last_seq: i64,
    /// When its record was last derived, Unix ms.
    pub updated_at_ms: i64,
    /// When its latest dated message was written, Unix ms (see
    /// `SessionRecord::last_message_at_ms`); `None` in profiles of older
    /// records.
    pub last_message_at_ms: Option<i64>,
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
pub(super) fn has(values: &[String], key: &str) -> bool {
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

/// The first 8 bytes of the SHA-256 of the parts (each length-prefixed, so
/// no two lists of parts collide by concatenation), in hex: stored in the
/// index, so it must not change between builds (`DefaultHasher` may, with
/// any Rust release).
fn digest(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let hash = hasher.finalize();
    hash[..8].iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The digest of a task statement as a session record keeps it (trimmed,
/// its first [`ingest::MAX_TASK_CHARS`] characters) with whitespace
/// collapsed: equal for a query that is the same statement again.
pub fn task_digest(text: &str) -> String {
    let kept =
        precedent_ingest::text::truncate_to_chars(text.trim(), precedent_ingest::MAX_TASK_CHARS);
    let normalized = kept.split_whitespace().collect::<Vec<_>>().join(" ");
    digest(&[&normalized])
}

fn capped(values: &[String]) -> Vec<String> {
    values.iter().take(MAX_PROFILE_ENTRIES).cloned().collect()
}

impl SessionProfile {
    /// The profile of a derived record.
    pub fn from_record(
        session_id: &SessionId,
        record: &SessionRecord,
        last_seq: i64,
        updated_at_ms: i64,
    ) -> SessionProfile {
        let files = capped(&record.files_changed);
        let symbols_changed = capped(&record.symbols_changed);
        let keys = ProfileKeys::of(record, &files, &symbols_changed);
        SessionProfile {
            session_id: session_id.as_str().to_string(),
            task_line: task_line(&record.task),
            language: record.language,
            has_files: !files.is_empty(),
            files_changed: files.into_iter().take(EXPLAINED_ENTRIES).collect(),
            symbols_changed: symbols_changed
                .into_iter()
                .take(EXPLAINED_ENTRIES)
                .collect(),
            keys,
            outcome: record.outcome.status,
            last_seq,
            updated_at_ms,
            last_message_at_ms: record.last_message_at_ms,
            task_digest: task_digest(&record.task),
            fix_digest: fix_digest(record),
        }
    }
}

impl SessionProfile {
    /// The profile in the binary form the index stores.
    pub fn encode(&self) -> Result<Vec<u8>, ProfileCodecError> {
        postcard::to_allocvec(self).map_err(ProfileCodecError)
    }

    /// A profile from the binary form [`SessionProfile::encode`] writes;
    /// an error when `bytes` are not one (cut short, written by another
    /// version of these types, or with bytes left over).
    pub fn decode(bytes: &[u8]) -> Result<SessionProfile, ProfileCodecError> {
        let (profile, rest) = postcard::take_from_bytes(bytes).map_err(ProfileCodecError)?;
        if rest.is_empty() {
            Ok(profile)
        } else {
            Err(ProfileCodecError(postcard::Error::DeserializeBadEncoding))
        }
    }
}

/// Why a profile could not be encoded or decoded.
#[derive(Debug)]
pub struct ProfileCodecError(postcard::Error);

impl std::fmt::Display for ProfileCodecError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "session profile encoding: {}", self.0)
    }
}

impl std::error::Error for ProfileCodecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// The first non-empty line of a task statement, at most
/// [`MAX_TASK_LINE_CHARS`] characters.
fn task_line(task: &str) -> String {
    task.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
        .chars()
        .take(MAX_TASK_LINE_CHARS)
        .collect()
}

/// The digest of the hunks of the last diff a record shows, if any.
fn fix_digest(record: &SessionRecord) -> Option<String> {
    let last_fix_message = record
        .evidence
        .iter()
        .filter(|evidence| evidence.kind == EvidenceKind::Fix)
        .map(|evidence| evidence.message_index)
        .max()?;
    let texts: Vec<&str> = record
        .evidence
        .iter()
        .filter(|evidence| {
            evidence.kind == EvidenceKind::Fix && evidence.message_index == last_fix_message
        })
        .map(|evidence| evidence.text.as_str())
        .collect();
    Some(digest(&texts))
}

impl ProfileKeys {
    /// The match keys of a record whose first changed files and symbols
    /// are `files` and `symbols_changed`.
    fn of(record: &SessionRecord, files: &[String], symbols_changed: &[String]) -> ProfileKeys {
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
        let source_files = || files.iter().filter(|file| !is_test_path(file));
        let mut location_words: Vec<String> =
            location_words(files, symbols_changed).into_iter().collect();
        location_words.sort();
        let mut keys =
            ProfileKeys {
                qualified_changed: unique(
                    symbols_changed
                        .iter()
                        .filter_map(|symbol| qualified_key(symbol)),
                ),
                referenced,
                stems: unique(
                    source_files()
                        .filter_map(|file| file_stem(file))
                        .filter(|stem| stem.len() >= 4),
                ),
                location_words,
                files: unique(files.iter().map(|file| normalize_path(file))),
                source_files: unique(source_files().map(|file| normalize_path(file))),
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
        keys
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_stable_across_builds() {
        // A fixed value: a digest stored in the index must mean the same
        // to every later build (`DefaultHasher` promises no such thing).
        assert_eq!(task_digest("  Fix the\n parser "), "1ec87f4ff1945679");
        assert_ne!(digest(&["a", "bc"]), digest(&["ab", "c"]));
    }

    /// A profile with every field set, lists and options included.
    fn full_profile() -> SessionProfile {
        let list = |prefix: &str| vec![format!("{prefix}_a"), format!("{prefix}_b")];
        SessionProfile {
            session_id: "s1".to_string(),
            task_line: "Fix the parser".to_string(),
            language: Some(Language::Rust),
            files_changed: list("file"),
            symbols_changed: list("symbol"),
            has_files: true,
            keys: ProfileKeys {
                changed: list("changed"),
                referenced: list("referenced"),
                qualified_changed: list("qualified"),
                stems: list("stem"),
                location_words: list("word"),
                files: list("files"),
                source_files: list("source"),
                error_types: list("error"),
                tests: list("test"),
            },
            outcome: OutcomeStatus::Resolved,
            last_seq: 42,
            updated_at_ms: -7,
            last_message_at_ms: Some(1_700_000_000_000),
            task_digest: task_digest("Fix the parser"),
            fix_digest: Some("00ff".to_string()),
        }
    }

    #[test]
    fn a_profile_reads_back_as_it_was_stored() {
        let full = full_profile();
        let bare = SessionProfile {
            language: None,
            last_message_at_ms: None,
            fix_digest: None,
            ..SessionProfile::default()
        };
        for profile in [full, bare] {
            let bytes = profile.encode().expect("encodable");
            assert_eq!(SessionProfile::decode(&bytes).expect("decodable"), profile);
        }
    }

    #[test]
    fn bytes_that_are_not_a_profile_do_not_decode() {
        let bytes = full_profile().encode().expect("encodable");
        assert!(SessionProfile::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(SessionProfile::decode(&longer).is_err());
        assert!(SessionProfile::decode(b"{\"session_id\":\"s1\"}").is_err());
        assert!(SessionProfile::decode(&[]).is_err());
    }
}
