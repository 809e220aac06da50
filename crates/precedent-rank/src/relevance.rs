//! The relevance model: how a candidate ranks (a linear score fitted on
//! pairs of one query's candidates, the more relevant above the less) and
//! how likely it is to be relevant at all (a logistic regression over that
//! score, its distance from the best and what the query and its best
//! candidates share), which the gate reads ([`super::gate`]).
//!
//! The weights and thresholds between the `BEGIN`/`END` marks are written
//! by `scripts/relevance/fit.py --render` from `scripts/relevance/model.json`,
//! which `fit.py --write` fits from the features
//! `scripts/relevance/collect.py` reads off `POST /v1/search/explain` on
//! the dev benchmark (see `scripts/relevance/README.md`); a test below
//! fails when the two disagree. No weight names a repository. Ranking
//! reads only features whose sign an engineer can defend: fitted freely,
//! sessions without a diff and shared error types came out the wrong way
//! round, quirks of the dev data that another set of repositories would
//! not share.

use super::features::Features;
use super::weight;

// BEGIN written by `scripts/relevance/fit.py --render` from model.json: do not edit.
/// Ranking weights, in the order of [`rank_inputs`].
const RANK: [f32; NUM_RANK_INPUTS] = [
    0.99793,  // text_rel
    0.52296,  // text_coverage
    0.72551,  // term_coverage
    0.09231,  // symbols_changed
    0.50119,  // symbols_referenced
    0.32912,  // paths
    1.21084,  // stems
    0.48800,  // location_words
    1.19073,  // file_support
    -0.70272, // failed
    -0.38896, // other_language
    -0.09352, // text_rank
];
#[cfg(test)]
const RANK_INPUTS: [&str; NUM_RANK_INPUTS] = [
    "text_rel",
    "text_coverage",
    "term_coverage",
    "symbols_changed",
    "symbols_referenced",
    "paths",
    "stems",
    "location_words",
    "file_support",
    "failed",
    "other_language",
    "text_rank",
];

/// Gate weights, in the order of [`gate_inputs`].
const GATE: [f32; NUM_GATE_INPUTS] = [
    1.39474,  // bias
    0.48981,  // rank_score
    -0.27457, // below_best
    0.21524,  // best_rank_score
    -0.13333, // query_weight
    -1.61322, // other_language
    -1.10313, // num_candidates
];
#[cfg(test)]
const GATE_INPUTS: [&str; NUM_GATE_INPUTS] = [
    "bias",
    "rank_score",
    "below_best",
    "best_rank_score",
    "query_weight",
    "other_language",
    "num_candidates",
];

/// A candidate less likely relevant than this is dropped.
pub const KEEP_PROBABILITY: f32 = 0.05;
/// A kept session ranks at most this far below the best one.
pub(crate) const MAX_BELOW_BEST: f32 = 4.0;
/// Per unit of ranking score below the best, a session's room in the
/// answer shrinks by e^-this (see `assemble::room`).
pub(crate) const ROOM_DECAY: f32 = 6.0;
const NUM_RANK_INPUTS: usize = 12;
const NUM_GATE_INPUTS: usize = 7;
// END written by fit.py.

/// Text coverage past this adds nothing (BM25 saturates, and a long query
/// repeated verbatim would otherwise dominate).
const MAX_TEXT_COVERAGE: f32 = 2.0;

/// ln(1 + x): counts and IDF sums grow without bound; their first units
/// say the most.
fn squash(value: f32) -> f32 {
    value.max(0.0).ln_1p()
}

/// What ranking reads of a candidate besides its features.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CandidateFacts {
    /// Its attempt failed.
    pub failed: bool,
    /// Its code is in another language than the query's code base.
    pub other_language: bool,
    /// Its position among the candidates by BM25 over the whole text
    /// (0: the best).
    pub text_rank: usize,
}

fn rank_inputs(features: &Features, facts: CandidateFacts) -> [f32; NUM_RANK_INPUTS] {
    let flag = |value: bool| if value { 1.0 } else { 0.0 };
    [
        features.text_rel,
        features.text_coverage.min(MAX_TEXT_COVERAGE),
        features.term_coverage,
        squash(features.symbols_changed),
        squash(features.symbols_referenced),
        squash(features.paths),
        squash(features.stems),
        squash(features.location_words),
        squash(features.file_support),
        flag(facts.failed),
        flag(facts.other_language),
        squash(facts.text_rank as f32),
    ]
}

fn dot(weights: &[f32], inputs: &[f32]) -> f32 {
    weights.iter().zip(inputs).map(|(w, x)| w * x).sum()
}

/// The inputs of [`RANK`] that are code structure (symbols, paths,
/// stems, location words, file support), not text.
const STRUCTURE_INPUTS: std::ops::Range<usize> = 3..9;

/// The most that code structure adds to the fitted score, in units of
/// relative text similarity (the best session by BM25 has 1.0 of it):
/// structure `s` (the fitted weights' sum over the structure inputs) adds
/// `MAX_STRUCTURE * s / (s + MAX_STRUCTURE)`, which grows like `s` for a
/// little structure and never reaches the bound.
pub(crate) const MAX_STRUCTURE: f32 = 3.0;

/// A candidate's two scores, from one reading of its inputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scores {
    /// The answer score, by which an answer is ordered: its session BM25
    /// relative to the best candidate's (`text_rel`), scaled up by the
    /// code structure it shares with the query, at most twice:
    /// `text_rel * (1 + saturated / MAX_STRUCTURE)`. Structure re-ranks
    /// candidates of comparable text and lifts one the query's code names;
    /// it never ranks a candidate above one with more than twice its BM25.
    pub answer: f32,
    /// The fitted score, which the gate reads (its probability of
    /// relevance, its distance from the best) and the answer's room is
    /// shared by: its text part, and its structure part saturating at
    /// [`MAX_STRUCTURE`].
    pub fitted: f32,
}

/// A candidate's scores (see [`Scores`]); the issue met again
/// ([`Features::same_task`]) lifted above every other in both.
pub(crate) fn scores(features: &Features, facts: CandidateFacts) -> Scores {
    let inputs = rank_inputs(features, facts);
    let structure = structure_of(&inputs);
    let saturated = saturated(structure);
    let mut scores = Scores {
        answer: features.text_rel * (1.0 + saturated.max(0.0) / MAX_STRUCTURE),
        fitted: dot(&RANK, &inputs) - structure + saturated,
    };
    if features.same_task {
        scores.answer += weight::SAME_TASK;
        scores.fitted += weight::SAME_TASK;
    }
    scores
}

/// The fitted score alone (see [`Scores::fitted`]).
#[cfg(test)]
fn rank_score(features: &Features, facts: CandidateFacts) -> f32 {
    scores(features, facts).fitted
}

/// The answer score alone (see [`Scores::answer`]).
#[cfg(test)]
fn answer_score(features: &Features, facts: CandidateFacts) -> f32 {
    scores(features, facts).answer
}

/// The fitted weights' sum over the structure inputs.
fn structure_of(inputs: &[f32; NUM_RANK_INPUTS]) -> f32 {
    dot(&RANK[STRUCTURE_INPUTS], &inputs[STRUCTURE_INPUTS])
}

/// Structure `s` saturating at [`MAX_STRUCTURE`] (negative `s` as is).
fn saturated(structure: f32) -> f32 {
    if structure > 0.0 {
        MAX_STRUCTURE * structure / (structure + MAX_STRUCTURE)
    } else {
        structure
    }
}

/// What the gate's model reads of the query as a whole.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QuerySummary {
    /// The best candidate's ranking score.
    pub best_rank_score: f32,
    /// The sum of the query terms' IDF in the user's scope.
    pub query_weight: f32,
    /// Candidates the index found.
    pub num_candidates: usize,
}

fn gate_inputs(facts: CandidateFacts, score: f32, query: &QuerySummary) -> [f32; NUM_GATE_INPUTS] {
    [
        1.0,
        score,
        query.best_rank_score - score,
        query.best_rank_score,
        squash(query.query_weight),
        if facts.other_language { 1.0 } else { 0.0 },
        squash(query.num_candidates as f32),
    ]
}

/// The probability that a candidate with this ranking `score` is relevant
/// to the query (grade 1 or 2 on the benchmark: it changed a file the
/// query's fix changes).
pub(crate) fn probability(facts: CandidateFacts, score: f32, query: &QuerySummary) -> f32 {
    let logit = dot(&GATE, &gate_inputs(facts, score, query));
    1.0 / (1.0 + (-logit).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model file `fit.py` writes, beside the region it renders here.
    fn model() -> serde_json::Value {
        serde_json::from_str(include_str!("../../../scripts/relevance/model.json"))
            .expect("model.json is JSON")
    }

    fn numbers(model: &serde_json::Value, key: &str) -> Vec<f32> {
        model[key]
            .as_array()
            .unwrap_or_else(|| panic!("model.json has no {key}"))
            .iter()
            .map(|value| value.as_f64().expect("a number") as f32)
            .collect()
    }

    fn names(model: &serde_json::Value, key: &str) -> Vec<String> {
        model[key]
            .as_array()
            .unwrap_or_else(|| panic!("model.json has no {key}"))
            .iter()
            .map(|value| value.as_str().expect("a name").to_string())
            .collect()
    }

    #[test]
    fn the_shipped_weights_are_the_fitting_scripts() {
        let model = model();
        assert_eq!(
            numbers(&model, "rank"),
            RANK.to_vec(),
            "run fit.py --render"
        );
        assert_eq!(
            numbers(&model, "gate"),
            GATE.to_vec(),
            "run fit.py --render"
        );
        assert_eq!(names(&model, "rank_inputs"), RANK_INPUTS.to_vec());
        assert_eq!(names(&model, "gate_inputs"), GATE_INPUTS.to_vec());
        let threshold = |key: &str| model[key].as_f64().map(|value| value as f32);
        assert_eq!(threshold("keep_probability"), Some(KEEP_PROBABILITY));
        assert_eq!(threshold("max_below_best"), Some(MAX_BELOW_BEST));
        assert_eq!(threshold("room_decay"), Some(ROOM_DECAY));
    }

    #[test]
    fn structure_adds_at_most_its_bound() {
        let facts = CandidateFacts {
            failed: false,
            other_language: false,
            text_rank: 0,
        };
        let text = Features {
            text_rel: 1.0,
            ..Features::default()
        };
        let named_everywhere = Features {
            symbols_changed: 50.0,
            paths: 50.0,
            stems: 50.0,
            location_words: 50.0,
            file_support: 50.0,
            ..Features::default()
        };
        let lifted = rank_score(&named_everywhere, facts) - rank_score(&Features::default(), facts);
        assert!(
            lifted < MAX_STRUCTURE && lifted > 0.5 * MAX_STRUCTURE,
            "{lifted}"
        );
        let little = Features {
            stems: 0.1,
            ..Features::default()
        };
        let small = rank_score(&little, facts) - rank_score(&Features::default(), facts);
        assert!(small > 0.0 && small < 0.2, "{small}");
        assert!(rank_score(&text, facts) > 0.9);
        for (index, name) in RANK_INPUTS.iter().enumerate() {
            assert_eq!(
                STRUCTURE_INPUTS.contains(&index),
                [
                    "symbols_changed",
                    "symbols_referenced",
                    "paths",
                    "stems",
                    "location_words",
                    "file_support"
                ]
                .contains(name),
                "{name}"
            );
        }
    }

    #[test]
    fn structure_at_most_doubles_the_answer_score() {
        let facts = CandidateFacts {
            failed: false,
            other_language: false,
            text_rank: 0,
        };
        let named_everywhere = |text_rel: f32| Features {
            text_rel,
            symbols_changed: 50.0,
            symbols_referenced: 50.0,
            paths: 50.0,
            stems: 50.0,
            location_words: 50.0,
            file_support: 50.0,
            ..Features::default()
        };
        let lifted = answer_score(&named_everywhere(0.5), facts);
        assert!(lifted > 0.9 && lifted < 1.0, "{lifted}");
        // Text alone: the answer score is the relative BM25.
        let text = Features {
            text_rel: 0.7,
            ..Features::default()
        };
        assert_eq!(answer_score(&text, facts), 0.7);
        // No amount of structure lifts a session over one with more than
        // twice its BM25, nor gives one with no text in common a score.
        for text_rel in [0.0, 0.1, 0.3, 0.49] {
            assert!(answer_score(&named_everywhere(text_rel), facts) < 2.0 * text_rel + 1e-6);
        }
        assert_eq!(answer_score(&named_everywhere(0.0), facts), 0.0);
    }

    #[test]
    fn each_input_is_read_under_its_name() {
        // A candidate holding only the feature an input is named after
        // moves that input alone: inputs built in another order than their
        // names (and so their fitted weights) fail here.
        for (index, name) in RANK_INPUTS.iter().enumerate() {
            let mut features = Features::default();
            let mut facts = CandidateFacts {
                failed: false,
                other_language: false,
                text_rank: 0,
            };
            match *name {
                "text_rel" => features.text_rel = 1.0,
                "text_coverage" => features.text_coverage = 1.0,
                "term_coverage" => features.term_coverage = 1.0,
                "symbols_changed" => features.symbols_changed = 1.0,
                "symbols_referenced" => features.symbols_referenced = 1.0,
                "paths" => features.paths = 1.0,
                "stems" => features.stems = 1.0,
                "location_words" => features.location_words = 1.0,
                "file_support" => features.file_support = 1.0,
                "failed" => facts.failed = true,
                "other_language" => facts.other_language = true,
                "text_rank" => facts.text_rank = 3,
                other => panic!("no feature for the input {other}"),
            }
            let inputs = rank_inputs(&features, facts);
            for (position, value) in inputs.iter().enumerate() {
                assert_eq!(
                    *value != 0.0,
                    position == index,
                    "{name} set, {} read",
                    RANK_INPUTS[position]
                );
            }
        }
    }
}
