//! The noise gate: which scored candidates an answer keeps. It drops a
//! session of another language, one the relevance model finds unlikely
//! relevant ([`super::relevance`]), one far below the best, a duplicate of
//! a task or a diff kept already, and everything past the tenth. The same
//! task met again passes whatever its language or evidence, and so does a
//! candidate that stands out of the query's own list: its session BM25 at
//! least [`STANDOUT_MARGIN`] times every other candidate's. None among the
//! baseline's first [`BASELINE_PROTECTED`] (plain session BM25) is dropped
//! as below the floor, far below the best, as another task's diff again,
//! or as another code base when the query's language was only voted in,
//! so an answer keeps what the baseline would have put first.
//!
//! The gate never empties an answer for want of confidence: no signal a
//! query carries (the relevance probability, the best score's margin, the
//! spread of the scores) tells a memory of noise from one holding what the
//! task needs without dropping the latter's answers too. Each drop it
//! makes is one that wins against the answer without it on the measured
//! sets (`scripts/relevance/floor.py --variants`).

use std::collections::HashMap;

use serde::Serialize;

use super::relevance::{KEEP_PROBABILITY, MAX_BELOW_BEST};
use super::{Candidate, Scored};
use precedent_core::language::Language;

/// A session with no code fact in common ([`MIN_EVIDENCE`]), less than this
/// share of the best match's text similarity and less than
/// [`MIN_COVERAGE_WITHOUT_EVIDENCE`] of the query's weight in either
/// coverage shares nothing with the query worth showing.
pub(crate) const MIN_TEXT_REL_WITHOUT_EVIDENCE: f32 = 0.15;
/// Code evidence that counts as "a code fact in common".
pub(crate) const MIN_EVIDENCE: f32 = 0.1;
/// See [`MIN_TEXT_REL_WITHOUT_EVIDENCE`]. The larger of BM25 coverage and
/// term coverage: a rare term found in a long session (an error code, a
/// hash) covers the query in full however long the session is.
pub(crate) const MIN_COVERAGE_WITHOUT_EVIDENCE: f32 = 0.08;
/// A session with no code fact in common holding less than this share of
/// the query's weight (in either coverage) shares only words every text
/// has: it is dropped below the floor even among the baseline's first.
pub(crate) const MIN_COVERAGE_IN_COMMON: f32 = 0.01;
/// Code evidence that keeps a session of another language (a binding,
/// a generated file): it names what the query names.
pub(crate) const OTHER_LANGUAGE_EVIDENCE: f32 = 0.5;
/// Text coverage that keeps a session of another language too: it
/// tells the query's own story (the same issue, reported again), and the
/// query's language was only guessed from a few names in it. Far above
/// what distractors reach (on dev, the best distractor's coverage has a
/// median of 0.27 and rarely passes 0.45).
pub(crate) const OTHER_LANGUAGE_COVERAGE: f32 = 0.6;
/// A candidate whose session BM25 is at least this many times every
/// other candidate's stands out: the gate keeps it whatever the relevance
/// model says, and the answer is not empty.
pub const STANDOUT_MARGIN: f32 = 2.0;
/// The candidate first by plain session BM25 with at least this many
/// times every other's leads clearly: whatever structure says of the
/// others, it stays in the answer (it is not dropped below the floor, far
/// below the best, or past the limit). Structure may rank others above it.
pub(crate) const CLEAR_LEAD: f32 = 1.5;
/// Candidates among this many first by plain session BM25 (the
/// baseline) are not dropped as below the floor, far below the best, or
/// as the same diff as another task's:
/// an answer keeps what the baseline would have put first, so it is not
/// below the baseline where the relevance model misjudges a query (a
/// related issue naming no code).
pub(crate) const BASELINE_PROTECTED: usize = 5;
/// Sessions kept at most: nDCG@10-deep, and an agent reads no more.
pub(crate) const MAX_KEPT: usize = 10;

/// Why the gate dropped a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Less likely relevant than the gate keeps
    /// ([`super::relevance::KEEP_PROBABILITY`]), or nothing in common with
    /// the query worth showing.
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

/// The language of the code base a query is about, and how it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum QueryLanguage {
    /// The query's own paths or code blocks name it.
    Named(Language),
    /// Voted by the sessions most similar to the query by text: a guess,
    /// which does not drop one of the baseline's first.
    Voted(Language),
    /// Neither.
    Unknown,
}

/// Drops every candidate below the floor when each query term the memory
/// holds (`held_terms`) is a function word: no session shares a word of
/// the task's own. A query holding no term at all has no candidates.
fn drop_if_only_common_words(scored: &mut [Scored], held_terms: &[String]) {
    let only_common = !held_terms.is_empty()
        && held_terms
            .iter()
            .all(|term| precedent_core::tokenize::is_function_word(term));
    if only_common {
        for entry in scored.iter_mut().filter(|entry| entry.dropped.is_none()) {
            entry.dropped = Some(DropReason::BelowFloor);
        }
    }
}

/// Whether a session's language is of another code base than the query's.
pub(super) fn is_other_language(query: Option<Language>, session: Option<Language>) -> bool {
    match (query, session) {
        (Some(query), Some(session)) => session.family() != query.family(),
        _ => false,
    }
}

/// Marks what the gate drops, in place; `scored` is best first.
/// `held_terms` are the query's terms the memory holds (the index's
/// rarest first).
pub(super) fn apply(
    scored: &mut [Scored],
    candidates: &[Candidate],
    language: QueryLanguage,
    held_terms: &[String],
) {
    let (language, voted) = match language {
        QueryLanguage::Named(language) => (Some(language), false),
        QueryLanguage::Voted(language) => (Some(language), true),
        QueryLanguage::Unknown => (None, false),
    };
    let mut best_kept: Option<f32> = None;
    let mut num_kept = 0usize;
    // Digest -> the session kept with it.
    let mut seen_tasks: HashMap<&str, &str> = HashMap::new();
    let mut seen_fixes: HashMap<&str, &str> = HashMap::new();
    for entry in scored.iter_mut() {
        // The same task again is relevant whatever its language or
        // evidence, and so is a candidate that stands out.
        let stands_out = entry.bm25_lead(STANDOUT_MARGIN);
        let protected = entry.baseline_rank <= BASELINE_PROTECTED;
        let leads = entry.baseline_rank == 1 && entry.bm25_lead(CLEAR_LEAD);
        if !(entry.features.same_task || stands_out) {
            if is_other_language(language, entry.language)
                && !(voted && protected)
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
            let nothing_in_common =
                entry.evidence < MIN_EVIDENCE && coverage < MIN_COVERAGE_IN_COMMON;
            if nothing_in_common
                || (!protected
                    && !leads
                    && (entry.probability < KEEP_PROBABILITY
                        || (entry.evidence < MIN_EVIDENCE
                            && entry.features.text_rel < MIN_TEXT_REL_WITHOUT_EVIDENCE
                            && coverage < MIN_COVERAGE_WITHOUT_EVIDENCE)))
            {
                entry.dropped = Some(DropReason::BelowFloor);
                continue;
            }
        }
        if let Some(best) = best_kept
            && entry.fit_score < best - MAX_BELOW_BEST
            && !stands_out
            && !protected
            && !leads
        {
            entry.dropped = Some(DropReason::FarBelowBest);
            continue;
        }
        let profile = &candidates[entry.candidate].profile;
        let task = profile.task_digest.as_str();
        let fix = profile.fix_digest.as_deref();
        // Another task with the same diff is an experience of its own when
        // the baseline puts it first: its issue tells what the diff fixed.
        if let Some(of) = seen_tasks.get(task).or_else(|| {
            fix.filter(|_| !protected)
                .and_then(|fix| seen_fixes.get(fix))
        }) {
            entry.dropped = Some(DropReason::Duplicate { of: of.to_string() });
            continue;
        }
        if num_kept >= MAX_KEPT && !leads {
            entry.dropped = Some(DropReason::BeyondLimit);
            continue;
        }
        seen_tasks.insert(task, profile.session_id.as_str());
        if let Some(fix) = fix {
            seen_fixes.insert(fix, profile.session_id.as_str());
        }
        best_kept.get_or_insert(entry.fit_score);
        num_kept += 1;
    }
    // A clear leader kept past the limit takes the place of the last kept.
    if num_kept > MAX_KEPT
        && let Some(last) = scored
            .iter_mut()
            .rev()
            .find(|entry| entry.dropped.is_none() && entry.baseline_rank != 1)
    {
        last.dropped = Some(DropReason::BeyondLimit);
    }
    drop_if_only_common_words(scored, held_terms);
}

#[cfg(test)]
mod tests {
    //! Each rule kept and dropped on a real case: the figures are those
    //! `/v1/search/explain` gave for real queries (the dev benchmark's
    //! and a related issue's over real Claude Code transcripts).
    use std::sync::Arc;

    use super::*;
    use crate::{Features, SessionProfile};
    use precedent_core::domain::testing::sid;
    use precedent_ingest::{OutcomeStatus, SessionRecord};

    /// A candidate as explain showed it: session BM25, relative text
    /// similarity, text coverage, code evidence, score, probability.
    struct Seen {
        id: &'static str,
        bm25: f32,
        text_rel: f32,
        coverage: f32,
        evidence: f32,
        score: f32,
        probability: f32,
        language: Option<Language>,
    }

    fn seen(id: &'static str, bm25: f32, text_rel: f32, score: f32, probability: f32) -> Seen {
        Seen {
            id,
            bm25,
            text_rel,
            coverage: 0.2,
            evidence: 0.0,
            score,
            probability,
            language: None,
        }
    }

    /// Ranks the candidates as `rank` does (by score; baseline rank and
    /// margin from their BM25) and applies the gate; answers each
    /// session's verdict.
    fn verdicts(seen: &[Seen], query: Option<Language>) -> Vec<(&'static str, Option<DropReason>)> {
        verdicts_as(
            seen,
            query.map_or(QueryLanguage::Unknown, QueryLanguage::Named),
        )
    }

    fn scored_of(seen: &[Seen]) -> Vec<Scored> {
        let (mut scored, candidates) = scored_and_candidates(seen);
        apply(&mut scored, &candidates, QueryLanguage::Unknown, &[]);
        scored
    }

    fn verdicts_as(seen: &[Seen], query: QueryLanguage) -> Vec<(&'static str, Option<DropReason>)> {
        let (mut scored, candidates) = scored_and_candidates(seen);
        apply(&mut scored, &candidates, query, &[]);
        seen.iter()
            .map(|seen| {
                let entry = scored.iter().find(|entry| entry.session_id == seen.id);
                (seen.id, entry.and_then(|entry| entry.dropped.clone()))
            })
            .collect()
    }

    fn scored_and_candidates(seen: &[Seen]) -> (Vec<Scored>, Vec<Candidate>) {
        let candidates: Vec<Candidate> = seen
            .iter()
            .map(|seen| Candidate {
                profile: Arc::new(SessionProfile::from_record(
                    &sid(seen.id),
                    &SessionRecord {
                        task: format!("the task of {}", seen.id),
                        ..SessionRecord::default()
                    },
                    1,
                    0,
                )),
                text_bm25: seen.bm25,
                matched_weight: 0.0,
            })
            .collect();
        let by_text = super::super::by_session_bm25(&candidates);
        let margins = super::super::bm25_margins(&candidates, &by_text);
        let mut scored: Vec<Scored> = seen
            .iter()
            .enumerate()
            .map(|(position, seen)| Scored {
                session_id: seen.id.to_string(),
                task_line: String::new(),
                outcome: OutcomeStatus::Resolved,
                language: seen.language,
                updated_at_ms: 0,
                last_message_at_ms: None,
                files_changed: Vec::new(),
                symbols_changed: Vec::new(),
                features: Features {
                    text_bm25: seen.bm25,
                    text_rel: seen.text_rel,
                    text_coverage: seen.coverage,
                    term_coverage: seen.coverage / 2.0,
                    ..Features::default()
                },
                evidence: seen.evidence,
                score: seen.score,
                fit_score: seen.score,
                probability: seen.probability,
                baseline_rank: by_text
                    .iter()
                    .position(|&index| index == position)
                    .unwrap_or(0)
                    + 1,
                bm25_margin: margins[position],
                dropped: None,
                candidate: position,
            })
            .collect();
        scored.sort_by(|a, b| b.score.total_cmp(&a.score));
        (scored, candidates)
    }

    fn verdict_of(verdicts: &[(&'static str, Option<DropReason>)], id: &str) -> Option<DropReason> {
        verdicts
            .iter()
            .find(|(seen, _)| *seen == id)
            .and_then(|(_, verdict)| verdict.clone())
    }

    /// The fitting script simulates this gate: its copies of the rules'
    /// constants are these.
    #[test]
    fn the_fitting_script_simulates_these_rules() {
        let script = include_str!("../../../scripts/relevance/fit.py");
        let constant = |name: &str| {
            script
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{name} = ")))
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("fit.py has no {name}"))
                .to_string()
        };
        assert_eq!(
            constant("STANDOUT_MARGIN").parse::<f32>().ok(),
            Some(STANDOUT_MARGIN)
        );
        assert_eq!(
            constant("BASELINE_PROTECTED").parse::<usize>().ok(),
            Some(BASELINE_PROTECTED)
        );
        assert_eq!(
            constant("MIN_COVERAGE_IN_COMMON").parse::<f32>().ok(),
            Some(MIN_COVERAGE_IN_COMMON)
        );
    }

    #[test]
    fn a_candidate_that_stands_out_is_kept_and_the_answer_is_not_empty() {
        // A related issue over real transcripts: the linked session's
        // BM25 is 42.6, the next 14.7, and no candidate reaches the
        // answer probability (the issue names no code).
        let related = [
            seen("linked", 42.6, 1.0, 0.9, 0.10),
            seen("next", 14.7, 0.345, 0.5, 0.08),
            seen("third", 11.2, 0.263, 0.4, 0.07),
        ];
        let verdicts = verdicts(&related, Some(Language::Python));
        assert_eq!(verdict_of(&verdicts, "linked"), None);
    }

    #[test]
    fn a_memory_of_noise_keeps_its_own_language_and_drops_another() {
        // Dev noise_only (a dayjs query; memory of other tasks): the best
        // BM25 is another language's at 12.3, the next 8.1, under two
        // times. The other code base goes; the rest stays, as no signal of
        // the query tells this memory from one holding the task's code.
        let noise = [
            Seen {
                language: Some(Language::Python),
                evidence: 0.22,
                coverage: 0.116,
                ..seen("other-language", 12.3, 1.0, 1.4, 0.2)
            },
            Seen {
                coverage: 0.076,
                evidence: 0.074,
                ..seen("same-repo", 8.1, 0.659, 1.0, 0.48)
            },
            Seen {
                coverage: 0.048,
                ..seen("weaker", 5.1, 0.416, 0.36, 0.361)
            },
        ];
        let verdicts = verdicts(&noise, Some(Language::JavaScript));
        assert_eq!(
            verdict_of(&verdicts, "other-language"),
            Some(DropReason::OtherCodeBase)
        );
        assert_eq!(verdict_of(&verdicts, "same-repo"), None);
        assert_eq!(verdict_of(&verdicts, "weaker"), None);
    }

    #[test]
    fn a_lone_candidate_sharing_little_text_is_answered() {
        // Dev relevant, a query of one line (fmtlib/fmt 2292): the only
        // session is the relevant one, BM25 0.49, coverage 0.043, no code
        // fact in common. An answer that waited for confidence was empty.
        let lone = [Seen {
            coverage: 0.043,
            ..seen("relevant", 0.49, 1.0, 1.04, 0.736)
        }];
        let verdicts = verdicts(&lone, None);
        assert_eq!(verdict_of(&verdicts, "relevant"), None);
    }

    #[test]
    fn a_voted_language_does_not_drop_the_baselines_first() {
        // Dev noisy, a one-line query (BurntSushi/ripgrep 1294) naming no
        // code: two Python sessions lead by text, so Python is voted in;
        // the relevant Rust sessions are fourth and fifth by BM25. A
        // guess keeps them; the Rust session seventh by BM25 still goes,
        // and so would they were Python named by the query itself.
        let rust = |id: &'static str, bm25: f32, score: f32| Seen {
            language: Some(Language::Rust),
            coverage: 0.044,
            ..seen(id, bm25, bm25 / 2.46, score, 0.039)
        };
        let python = |id: &'static str, bm25: f32, score: f32, probability: f32| Seen {
            language: Some(Language::Python),
            coverage: 0.34,
            ..seen(id, bm25, bm25 / 2.46, score, probability)
        };
        let memory = [
            python("first", 2.46, 1.82, 0.494),
            python("second", 2.45, 1.25, 0.387),
            python("third", 0.33, 0.07, 0.204),
            rust("fourth", 0.32, -0.21),
            rust("fifth", 0.30, -0.23),
            python("sixth", 0.299, -0.01, 0.194),
            rust("seventh", 0.298, -0.41),
        ];
        let voted = verdicts_as(&memory, QueryLanguage::Voted(Language::Python));
        assert_eq!(verdict_of(&voted, "fourth"), None);
        assert_eq!(verdict_of(&voted, "fifth"), None);
        assert_eq!(
            verdict_of(&voted, "seventh"),
            Some(DropReason::OtherCodeBase)
        );
        let named = verdicts(&memory, Some(Language::Python));
        assert_eq!(
            verdict_of(&named, "fourth"),
            Some(DropReason::OtherCodeBase)
        );
    }

    #[test]
    fn a_question_whose_held_words_are_all_function_words_gets_nothing() {
        // A hook's prompt over a memory of one Claude Code session: the
        // memory holds "what", "is", "the" and "of", not "capital" or
        // "France". A prompt naming the session's bead keeps it.
        let memory = [Seen {
            coverage: 0.085,
            ..seen("session", 0.57, 1.0, 1.07, 0.2)
        }];
        let held = |terms: &[&str]| terms.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        let mut scored = scored_of(&memory);
        drop_if_only_common_words(&mut scored, &held(&["what", "is", "the", "of"]));
        assert_eq!(scored[0].dropped, Some(DropReason::BelowFloor));
        let mut scored = scored_of(&memory);
        drop_if_only_common_words(&mut scored, &held(&["spotter", "the"]));
        assert_eq!(scored[0].dropped, None);
    }

    #[test]
    fn a_task_sharing_only_common_words_gets_nothing() {
        // The integration memory (sympy, scikit-learn, ripgrep, dayjs, fmt)
        // asked about a Kubernetes ingress: every session matches only
        // "the" and "after", 0.6% of the query's weight, at equal BM25.
        let junk = [
            Seen {
                coverage: 0.006,
                ..seen("first", 0.15, 1.0, 0.4, 0.381)
            },
            Seen {
                coverage: 0.005,
                ..seen("second", 0.12, 0.81, 0.3, 0.319)
            },
        ];
        let verdicts = verdicts(&junk, None);
        assert_eq!(verdict_of(&verdicts, "first"), Some(DropReason::BelowFloor));
        assert_eq!(
            verdict_of(&verdicts, "second"),
            Some(DropReason::BelowFloor)
        );
    }

    #[test]
    fn below_the_floor_goes_unless_the_baseline_puts_it_first() {
        // Dev noisy: past the baseline's first five, a session with no code
        // fact in common and little of the query's text is dropped; the
        // same session among the first five stays.
        let mut sessions = vec![seen("best", 30.0, 1.0, 3.0, 0.9)];
        for (index, id) in ["s2", "s3", "s4", "s5"].into_iter().enumerate() {
            sessions.push(seen(id, 29.0 - index as f32, 0.9, 2.8, 0.6));
        }
        sessions.push(Seen {
            coverage: 0.05,
            ..seen("thin", 3.0, 0.1, 2.5, 0.3)
        });
        let past_five = verdicts(&sessions, None);
        assert_eq!(verdict_of(&past_five, "thin"), Some(DropReason::BelowFloor));
        sessions.truncate(4);
        sessions.push(Seen {
            coverage: 0.05,
            ..seen("thin", 3.0, 0.1, 2.5, 0.3)
        });
        let among_five = verdicts(&sessions, None);
        assert_eq!(verdict_of(&among_five, "thin"), None);
    }

    #[test]
    fn the_baselines_first_five_are_not_dropped_far_below_the_best() {
        // Dev relevant (a ripgrep query, five relevant sessions): the
        // fifth by score is 4.3 below the best but third by BM25 (24.0),
        // and relevant. In the noisy memory of the same query a session
        // seventh by BM25, as far below the best, is noise and goes.
        let sessions = [
            seen("best", 25.6, 1.0, 6.36, 0.966),
            seen("second", 21.9, 0.856, 2.75, 0.645),
            seen("third", 24.1, 0.942, 2.49, 0.598),
            seen("fourth", 6.4, 0.25, 2.4, 0.581),
            seen("third-by-bm25", 24.0, 0.938, 2.02, 0.51),
        ];
        let relevant = verdicts(&sessions, Some(Language::Rust));
        assert_eq!(verdict_of(&relevant, "third-by-bm25"), None);

        let mut noisy = vec![seen("best", 43.0, 1.0, 6.36, 0.966)];
        for (index, id) in ["n2", "n3", "n4", "n5", "n6"].into_iter().enumerate() {
            let bm25 = 42.0 - index as f32;
            noisy.push(seen(id, bm25, bm25 / 43.0, 4.0 - index as f32 * 0.3, 0.6));
        }
        noisy.push(seen("seventh-by-bm25", 35.1, 0.816, 0.98, 0.095));
        let noisy = verdicts(&noisy, Some(Language::Rust));
        assert_eq!(
            verdict_of(&noisy, "seventh-by-bm25"),
            Some(DropReason::FarBelowBest)
        );
    }

    /// How far below the best a session is counts in fitted scores: an
    /// answer score far below the best with a fitted score close to it
    /// keeps the session, and an answer score close with a fitted score far
    /// below drops it.
    #[test]
    fn distance_from_the_best_is_measured_in_fitted_scores() {
        let mut sessions = vec![seen("best", 43.0, 1.0, 6.36, 0.966)];
        for (index, id) in ["n2", "n3", "n4", "n5", "n6"].into_iter().enumerate() {
            let bm25 = 42.0 - index as f32;
            sessions.push(seen(id, bm25, bm25 / 43.0, 4.0 - index as f32 * 0.3, 0.6));
        }
        sessions.push(seen("seventh-by-bm25", 35.1, 0.816, 0.98, 0.095));
        let verdict = |answer: f32, fitted: f32| {
            let (mut scored, candidates) = scored_and_candidates(&sessions);
            for entry in scored
                .iter_mut()
                .filter(|entry| entry.session_id == "seventh-by-bm25")
            {
                entry.score = answer;
                entry.fit_score = fitted;
            }
            scored.sort_by(|a, b| b.score.total_cmp(&a.score));
            apply(
                &mut scored,
                &candidates,
                QueryLanguage::Named(Language::Rust),
                &[],
            );
            scored
                .iter()
                .find(|entry| entry.session_id == "seventh-by-bm25")
                .and_then(|entry| entry.dropped.clone())
        };
        assert_eq!(verdict(0.98, 0.98), Some(DropReason::FarBelowBest));
        assert_ne!(verdict(0.98, 6.0), Some(DropReason::FarBelowBest));
        assert_eq!(verdict(6.0, 0.98), Some(DropReason::FarBelowBest));
    }
}
