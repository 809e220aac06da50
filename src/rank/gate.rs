//! The noise gate: which scored candidates an answer keeps. It drops a
//! session of another language, one the relevance model finds unlikely
//! relevant ([`super::relevance`]), one far below the best, a duplicate of
//! a task or a diff kept already, and everything past the tenth; when no
//! candidate is likely enough relevant, it keeps nothing. The same task
//! met again passes whatever its language or evidence.

use std::collections::HashMap;

use serde::Serialize;

use super::relevance::{ANSWER_PROBABILITY, KEEP_PROBABILITY, MAX_BELOW_BEST};
use super::{Candidate, Scored};
use crate::language::Language;

/// A session with no code fact in common ([`MIN_EVIDENCE`]), less than this
/// share of the best match's text similarity and less than
/// [`MIN_COVERAGE_WITHOUT_EVIDENCE`] of the query's weight in either
/// coverage shares nothing with the query worth showing.
pub const MIN_TEXT_REL_WITHOUT_EVIDENCE: f32 = 0.15;
/// Code evidence that counts as "a code fact in common".
pub const MIN_EVIDENCE: f32 = 0.1;
/// See [`MIN_TEXT_REL_WITHOUT_EVIDENCE`]. The larger of BM25 coverage and
/// term coverage: a rare term found in a long session (an error code, a
/// hash) covers the query in full however long the session is.
pub const MIN_COVERAGE_WITHOUT_EVIDENCE: f32 = 0.08;
/// Term coverage that grounds an answer on its own: the session holds
/// most of the query's weight (a rare exact term, an error code).
pub const GROUNDING_TERM_COVERAGE: f32 = 0.5;
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

/// Why the gate dropped a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Less likely relevant than the gate keeps
    /// ([`super::relevance::KEEP_PROBABILITY`]), or nothing in common with
    /// the query worth showing.
    BelowFloor,
    /// No candidate of the query is likely enough relevant
    /// ([`super::relevance::ANSWER_PROBABILITY`]): the answer is empty.
    NotConfident,
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

/// Whether a session's language is of another code base than the query's.
pub(super) fn is_other_language(query: Option<Language>, session: Option<Language>) -> bool {
    match (query, session) {
        (Some(query), Some(session)) => session.family() != query.family(),
        _ => false,
    }
}

/// Marks what the gate drops, in place; `scored` is best first.
pub(super) fn apply(scored: &mut [Scored], candidates: &[Candidate], language: Option<Language>) {
    let mut best_kept: Option<f32> = None;
    let mut num_kept = 0usize;
    // Whether a candidate past the language and probability checks is
    // likely enough relevant for the answer to say anything.
    let mut confident = false;
    // Digest -> the session kept with it.
    let mut seen_tasks: HashMap<&str, &str> = HashMap::new();
    let mut seen_fixes: HashMap<&str, &str> = HashMap::new();
    for entry in scored.iter_mut() {
        // The same task again is relevant whatever its language or evidence.
        if entry.features.same_task {
            confident = true;
        } else {
            if is_other_language(language, entry.language)
                && entry.evidence < OTHER_LANGUAGE_EVIDENCE
                && entry.features.text_coverage < OTHER_LANGUAGE_COVERAGE
            {
                entry.dropped = Some(DropReason::OtherCodeBase);
                continue;
            }
            let coverage = entry
                .features
                .text_coverage
                .max(entry.features.term_coverage);
            if entry.probability < KEEP_PROBABILITY
                || (entry.evidence < MIN_EVIDENCE
                    && entry.features.text_rel < MIN_TEXT_REL_WITHOUT_EVIDENCE
                    && coverage < MIN_COVERAGE_WITHOUT_EVIDENCE)
            {
                entry.dropped = Some(DropReason::BelowFloor);
                continue;
            }
            // An answer needs a likely candidate that shares code facts or
            // enough of the query's text with it.
            confident |= entry.probability >= ANSWER_PROBABILITY
                && (entry.evidence >= MIN_EVIDENCE
                    || entry.features.text_coverage >= MIN_COVERAGE_WITHOUT_EVIDENCE
                    || entry.features.term_coverage >= GROUNDING_TERM_COVERAGE);
        }
        if let Some(best) = best_kept
            && entry.score < best - MAX_BELOW_BEST
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
        if num_kept >= MAX_KEPT {
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
    if !confident {
        for entry in scored.iter_mut().filter(|entry| entry.dropped.is_none()) {
            entry.dropped = Some(DropReason::NotConfident);
        }
    }
}
