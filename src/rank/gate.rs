//! The noise gate: which scored candidates an answer keeps. It drops a
//! session of another language, one with no code fact in common and too
//! little text, one far below the best, a duplicate of a task or a diff
//! kept already, and everything past the tenth; the same task met again
//! passes whatever its language or evidence.

use std::collections::HashMap;

use serde::Serialize;

use super::{Candidate, Scored};
use crate::language::Language;

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

/// Marks what the gate drops, in place; `scored` is best first.
pub(super) fn apply(scored: &mut [Scored], candidates: &[Candidate], language: Option<Language>) {
    let mut best_kept: Option<f32> = None;
    let mut num_kept = 0usize;
    // Digest -> the session kept with it.
    let mut seen_tasks: HashMap<&str, &str> = HashMap::new();
    let mut seen_fixes: HashMap<&str, &str> = HashMap::new();
    for entry in scored.iter_mut() {
        // The same task again is relevant whatever its language or evidence.
        if !entry.features.same_task {
            let other_language = match (language, entry.language.as_deref()) {
                (Some(query), Some(session)) => {
                    Language::from_name(session).map(Language::family) != Some(query.family())
                }
                _ => false,
            };
            if other_language
                && entry.evidence < OTHER_LANGUAGE_EVIDENCE
                && entry.features.text_coverage < OTHER_LANGUAGE_COVERAGE
            {
                entry.dropped = Some(DropReason::OtherCodeBase);
                continue;
            }
            if entry.evidence < MIN_EVIDENCE
                && (entry.features.text_rel < MIN_TEXT_REL_WITHOUT_EVIDENCE
                    || entry.features.text_coverage < MIN_TEXT_COVERAGE_WITHOUT_EVIDENCE)
            {
                entry.dropped = Some(DropReason::BelowFloor);
                continue;
            }
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
}
