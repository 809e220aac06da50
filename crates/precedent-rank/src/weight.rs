//! Weights of a candidate's code evidence: what it shares with the query
//! beyond text, in units of relative text similarity (the best-matching
//! session's BM25 over its whole text is 1.0). The gate reads the sum
//! ([`evidence`]); the ranking score is `relevance`'s. Their
//! ratios were fitted pairwise (a relevant session above an irrelevant one
//! of the same query) on the dev benchmark's features and rounded; every
//! one is positive where an engineer would expect it. [`SAME_TASK`] lifts
//! the ranking score of the issue met again.

use super::features::Features;

/// Per IDF unit of a query name the session changed: the strongest sign
/// that the new fix touches the same code.
pub(crate) const SYMBOL_CHANGED: f32 = 0.12;
/// Per IDF unit of a query name the session only referenced.
pub(crate) const SYMBOL_REFERENCED: f32 = 0.05;
/// Per IDF unit of a query path naming a file the session changed.
pub(crate) const PATH: f32 = 0.1;
/// Per IDF unit of a query word naming a changed file (`latex.py` for
/// "latex printing").
pub(crate) const STEM: f32 = 0.25;
/// Per IDF unit of a query word among the names of the changed code
/// (directories, files, symbol parts).
pub(crate) const LOCATION_WORD: f32 = 0.075;
/// Per unit of other sessions' text similarity on a file this one
/// changed.
pub(crate) const FILE_SUPPORT: f32 = 0.035;
/// Per IDF unit of an error type in common.
pub(crate) const ERROR: f32 = 0.02;
/// Per test name in common.
pub(crate) const TEST: f32 = 0.1;
/// The session's task statement is the query: the issue met again is
/// the strongest sign there is, above any mix of text and code evidence
/// (those reach 2 to 3 when a session names the query's code many
/// times over).
pub(crate) const SAME_TASK: f32 = 3.0;

/// The code evidence of a candidate: its code facts in common with the
/// query, weighted.
pub(super) fn evidence(features: &Features) -> f32 {
    SYMBOL_CHANGED * features.symbols_changed
        + SYMBOL_REFERENCED * features.symbols_referenced
        + PATH * features.paths
        + STEM * features.stems
        + LOCATION_WORD * features.location_words
        + FILE_SUPPORT * features.file_support
        + ERROR * features.errors
        + TEST * features.tests
}
