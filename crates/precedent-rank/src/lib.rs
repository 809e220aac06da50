//! rank: "of the experience a user has stored, what helps with this task,
//! and in what order?"
//!
//! Pure: no HTTP, no SQL, no tantivy. The read side hands in the candidate
//! sessions the index found (each with its [`SessionProfile`], the BM25
//! score of its whole text and the weight of the query terms it holds) and
//! gets back every candidate with its features, its ranking score and the
//! gate's verdict ([`rank`]); [`assemble`] then says what to load for the
//! kept ones and builds the answer from it.
//!
//! Layout, in the order a candidate meets them: `profile` (what ranking
//! keeps of a session: [`SessionProfile`], its match keys and digests),
//! `paths` (what a path names), `features` (what a candidate shares with
//! the query), `weight` (what its code facts in common are worth: the code
//! evidence the gate reads), `relevance` (the ranking score and the
//! probability of relevance), `gate` (what an answer keeps), [`assemble`]
//! (the items an agent reads); [`query`] reads the task text. Each weight
//! and threshold is written with its reason.

pub mod assemble;
pub mod query;

mod features;
mod gate;
mod paths;
mod profile;
mod relevance;
mod weight;

use std::collections::HashMap;

use serde::Serialize;

use precedent_core::language::Language;
use precedent_ingest::OutcomeStatus;

use self::features::QueryContext;
use self::profile::EXPLAINED_ENTRIES;
use self::query::QueryFacts;

pub use self::features::Features;
pub use self::gate::{DropReason, STANDOUT_MARGIN};
pub use self::paths::is_test_path;
pub use self::profile::{ProfileCodecError, SessionProfile, task_digest};
pub use self::relevance::KEEP_PROBABILITY;

/// A session the index found for a query.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Its profile.
    pub profile: std::sync::Arc<SessionProfile>,
    /// BM25 of the query over its whole text (its task statement and
    /// every message).
    pub text_bm25: f32,
    /// The summed IDF of the query terms its text holds (see
    /// `index::SessionHit::matched_weight`).
    pub matched_weight: f32,
}

/// One candidate, scored.
#[derive(Debug, Clone, Serialize)]
pub struct Scored {
    /// The session.
    pub session_id: String,
    /// Its first task line.
    pub task_line: String,
    /// Its outcome.
    pub outcome: OutcomeStatus,
    /// Its dominant language.
    pub language: Option<Language>,
    /// When its record was last derived, Unix ms.
    pub updated_at_ms: i64,
    /// When its latest dated message was written, Unix ms.
    pub last_message_at_ms: Option<i64>,
    /// Files it changed (the first few).
    pub files_changed: Vec<String>,
    /// Symbols it changed (the first few).
    pub symbols_changed: Vec<String>,
    /// The features.
    pub features: Features,
    /// Code evidence: code facts in common with the query, weighted
    /// (`weight::evidence`); the gate reads it.
    pub evidence: f32,
    /// The answer score, by which an answer is ordered: session BM25
    /// relative to the best, scaled up by shared code structure at most
    /// twice (`relevance::Scores::answer`).
    pub score: f32,
    /// The fitted model's score (`relevance::Scores::fitted`): the gate reads
    /// it (the probability, the distance from the best), and an answer
    /// shares its room by it.
    pub fit_score: f32,
    /// The probability that it is relevant, which the gate reads.
    pub probability: f32,
    /// Its place in the baseline order, plain session BM25 over the whole
    /// text (1 = the best `text_bm25`).
    pub baseline_rank: usize,
    /// Its session BM25 over the best of the other candidates' (`None`
    /// when it is the only candidate with any): the gate reads it, a
    /// margin relative to the query's own list (see [`gate`]).
    pub bm25_margin: Option<f32>,
    /// `None` when kept.
    pub dropped: Option<DropReason>,
    /// Its position among the candidates `rank` was given.
    #[serde(skip)]
    candidate: usize,
}

impl Scored {
    /// Whether its session BM25 is at least `margin` times every other
    /// candidate's (the gate's standout and clear lead, the full size).
    pub fn bm25_lead(&self, margin: f32) -> bool {
        self.bm25_margin.is_some_and(|own| own >= margin)
    }

    /// A candidate of `profile`, its features and scores not set yet.
    fn of(profile: &SessionProfile) -> Scored {
        let shown = |values: &[String]| values.iter().take(EXPLAINED_ENTRIES).cloned().collect();
        Scored {
            session_id: profile.session_id.clone(),
            task_line: profile.task_line.clone(),
            outcome: profile.outcome,
            language: profile.language,
            updated_at_ms: profile.updated_at_ms,
            last_message_at_ms: profile.last_message_at_ms,
            files_changed: shown(&profile.files_changed),
            symbols_changed: shown(&profile.symbols_changed),
            features: Features::default(),
            evidence: 0.0,
            score: 0.0,
            fit_score: 0.0,
            probability: 0.0,
            baseline_rank: 0,
            bm25_margin: None,
            dropped: None,
            candidate: 0,
        }
    }
}

/// The lowercased identifier parts of a text, split as the tokenizer
/// splits them ([`precedent_core::tokenize::word_parts`]), so that the location
/// words of a session match the terms of a query.
fn identifier_parts(text: &str) -> Vec<String> {
    precedent_core::tokenize::word_parts(text)
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

/// Scores every candidate for the query, applies the noise gate and
/// collapses duplicates. `num_sessions` is the number of sessions in the
/// user's scope (for IDF). Kept candidates come first, best first; dropped
/// ones follow, best first.
pub fn rank(
    query: &QueryFacts,
    candidates: &[Candidate],
    num_sessions: usize,
    query_weight: f32,
    held_terms: &[String],
) -> Vec<Scored> {
    let keys: Vec<CandidateKeys> = candidates
        .iter()
        .map(|candidate| candidate_keys(&candidate.profile))
        .collect();
    let context = QueryContext::new(query, candidates, &keys, num_sessions, query_weight);
    let features: Vec<Features> = candidates
        .iter()
        .zip(&keys)
        .map(|(candidate, keys)| context.features(candidate, keys))
        .collect();
    // Positions by text similarity: a ranking input, and the order the
    // language of a query without explicit code is voted in.
    let by_text = by_session_bm25(candidates);
    let mut text_rank = vec![0usize; candidates.len()];
    for (position, &index) in by_text.iter().enumerate() {
        text_rank[index] = position;
    }
    let margins = bm25_margins(candidates, &by_text);
    let language = query.language.or_else(|| {
        voted_language(
            by_text
                .iter()
                .map(|&index| (candidates[index].profile.language, features[index].text_rel)),
        )
    });
    let facts: Vec<relevance::CandidateFacts> = candidates
        .iter()
        .zip(&text_rank)
        .map(|(candidate, &text_rank)| relevance::CandidateFacts {
            failed: candidate.profile.outcome == OutcomeStatus::Failed,
            other_language: gate::is_other_language(language, candidate.profile.language),
            text_rank,
        })
        .collect();
    let scores: Vec<relevance::Scores> = features
        .iter()
        .zip(&facts)
        .map(|(features, facts)| relevance::scores(features, *facts))
        .collect();
    let summary = relevance::QuerySummary {
        best_rank_score: scores
            .iter()
            .map(|score| score.fitted)
            .fold(f32::MIN, f32::max),
        query_weight,
        num_candidates: candidates.len(),
    };

    let mut scored: Vec<Scored> = candidates
        .iter()
        .zip(features)
        .enumerate()
        .map(|(position, (candidate, features))| {
            let score = scores[position];
            Scored {
                evidence: weight::evidence(&features),
                features,
                score: score.answer,
                fit_score: score.fitted,
                probability: relevance::probability(facts[position], score.fitted, &summary),
                baseline_rank: text_rank[position] + 1,
                bm25_margin: margins[position],
                candidate: position,
                ..Scored::of(&candidate.profile)
            }
        })
        .collect();
    // Recency only breaks ties.
    let newer = |s: &Scored| candidates[s.candidate].profile.last_seq;
    // The gate walks the candidates by the fitted score it is calibrated
    // on; the kept ones are then ordered by the answer score.
    scored.sort_by(|a, b| {
        b.fit_score
            .total_cmp(&a.fit_score)
            .then_with(|| newer(b).cmp(&newer(a)))
            .then(a.session_id.cmp(&b.session_id))
    });
    let language = match query.language {
        Some(language) => gate::QueryLanguage::Named(language),
        None => language.map_or(gate::QueryLanguage::Unknown, gate::QueryLanguage::Voted),
    };
    gate::apply(&mut scored, candidates, language, held_terms);
    stand_for_duplicates(&mut scored);
    // Kept first, then dropped, each by answer score.
    scored.sort_by(|a, b| {
        (a.dropped.is_some().cmp(&b.dropped.is_some()))
            .then(b.score.total_cmp(&a.score))
            .then(b.fit_score.total_cmp(&a.fit_score))
            .then_with(|| newer(b).cmp(&newer(a)))
            .then(a.session_id.cmp(&b.session_id))
    });
    scored
}

/// A kept session stands for the trajectories of its task (and the same
/// diffs) the gate dropped as its duplicates: it takes the best answer
/// score among them, so an answer places a task where its best-matching
/// trajectory would stand.
fn stand_for_duplicates(scored: &mut [Scored]) {
    let mut best: HashMap<String, f32> = HashMap::new();
    for entry in scored.iter() {
        if let Some(DropReason::Duplicate { of }) = &entry.dropped {
            let score = best.entry(of.clone()).or_insert(entry.score);
            *score = score.max(entry.score);
        }
    }
    for entry in scored.iter_mut().filter(|entry| entry.dropped.is_none()) {
        if let Some(&score) = best.get(&entry.session_id) {
            entry.score = entry.score.max(score);
        }
    }
}

/// Candidate positions by session BM25, best first (ties by position): the
/// baseline order.
fn by_session_bm25(candidates: &[Candidate]) -> Vec<usize> {
    let mut by_text: Vec<usize> = (0..candidates.len()).collect();
    by_text.sort_by(|&a, &b| {
        candidates[b]
            .text_bm25
            .total_cmp(&candidates[a].text_bm25)
            .then(a.cmp(&b))
    });
    by_text
}

/// Each candidate's session BM25 over the best of the others' (`by_text`:
/// positions, best first); `None` when the others have none.
fn bm25_margins(candidates: &[Candidate], by_text: &[usize]) -> Vec<Option<f32>> {
    let best = by_text
        .first()
        .map_or(0.0, |&index| candidates[index].text_bm25);
    let second = by_text
        .get(1)
        .map_or(0.0, |&index| candidates[index].text_bm25);
    by_text.iter().enumerate().fold(
        vec![None; candidates.len()],
        |mut margins, (place, &index)| {
            let others = if place == 0 { second } else { best };
            margins[index] = (others > 0.0).then(|| candidates[index].text_bm25 / others);
            margins
        },
    )
}

/// The language of the code base a query without explicit code is about:
/// the one of the sessions most similar to it by text (the best ten, each
/// weighted by its relative text similarity), when the vote is clear (at
/// least twice the runner-up's weight); a split vote decides nothing.
/// Languages vote by family ([`Language::family`]): C and C++ headers,
/// JavaScript and TypeScript share code bases. `by_text` is each
/// candidate's language and relative text similarity, most similar first.
fn voted_language(by_text: impl Iterator<Item = (Option<Language>, f32)>) -> Option<Language> {
    const VOTERS: usize = 10;
    const CLEAR_MARGIN: f32 = 2.0;
    let mut votes: HashMap<Language, f32> = HashMap::new();
    for (language, text_rel) in by_text.take(VOTERS) {
        if let Some(language) = language {
            *votes.entry(language.family()).or_default() += text_rel;
        }
    }
    let mut ranked: Vec<(Language, f32)> = votes.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.name().cmp(b.0.name())));
    match ranked.as_slice() {
        [] => None,
        [(winner, _)] => Some(*winner),
        [(winner, first), (_, second), ..] => (*first >= CLEAR_MARGIN * *second).then_some(*winner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use precedent_core::domain::testing::sid;
    use precedent_ingest::{Evidence, EvidenceKind, Outcome, SessionRecord};

    fn record(task: &str, files: &[&str], symbols: &[&str], language: &str) -> SessionRecord {
        SessionRecord {
            task: task.to_string(),
            language: Language::from_name(language),
            files_changed: files.iter().map(|file| file.to_string()).collect(),
            symbols_changed: symbols.iter().map(|symbol| symbol.to_string()).collect(),
            outcome: Outcome {
                final_diff: !files.is_empty(),
                tests_passed_at_end: None,
                status: OutcomeStatus::Resolved,
            },
            evidence: files
                .iter()
                .map(|file| Evidence {
                    kind: EvidenceKind::Fix,
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

    /// A session that says the semicolon bug's words, with no code.
    fn semicolon_session() -> SessionRecord {
        record(
            "links with a semicolon in their url are cut short",
            &[],
            &[],
            "python",
        )
    }

    /// A commit that changed `parse_header_links` in `requests/utils.py`.
    fn utils_commit(task: &str) -> SessionRecord {
        record(
            task,
            &["requests/utils.py"],
            &["parse_header_links"],
            "python",
        )
    }

    /// The ids of the kept candidates, in answer order.
    fn kept_ids(ranked: &[Scored]) -> Vec<String> {
        ranked
            .iter()
            .filter(|entry| entry.dropped.is_none())
            .map(|entry| entry.session_id.clone())
            .collect()
    }

    fn candidate(id: &str, record: &SessionRecord, text_bm25: f32) -> Candidate {
        Candidate {
            profile: std::sync::Arc::new(SessionProfile::from_record(&sid(id), record, 1, 0)),
            text_bm25,
            matched_weight: 0.0,
        }
    }

    #[test]
    fn changed_symbol_and_file_outrank_text_alone() {
        let query = query::analyze(
            "`separability_matrix` gives wrong results for nested models in astropy.modeling.separable",
            precedent_ingest::Clock::Ignored,
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
            &[],
        );
        assert_eq!(ranked[0].session_id, "fix", "{ranked:#?}");
        assert!(ranked[0].features.symbols_changed > 0.0);
        assert!(ranked[0].features.paths > 0.0);
        assert!(ranked[0].features.stems > 0.0);
    }

    #[test]
    fn gate_drops_other_language_duplicates_and_weak_text() {
        let query = query::analyze(
            "the parser in src/args.rs rejects trailing commas",
            precedent_ingest::Clock::Ignored,
        );
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
        let filler = |task: &str| record(task, &["src/main.rs"], &["main"], "rust");
        // Past the baseline's first five (see `gate::BASELINE_PROTECTED`).
        let fillers = [filler("commas in args"), filler("parser errors")];
        let ranked = rank(
            &query,
            &[
                candidate("rust", &rust, 10.0),
                candidate("rust-again", &rust_again, 9.0),
                candidate("python", &python, 4.0),
                candidate("python-same-story", &python_same_story, 9.5),
                candidate("filler-1", &fillers[0], 3.0),
                candidate("filler-2", &fillers[1], 2.0),
                candidate("faint", &faint, 0.5),
            ],
            7,
            10.0,
            &[],
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
        let query = query::analyze(
            "  Add pie chart style to the language card\n",
            precedent_ingest::Clock::Ignored,
        );
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
            &[],
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
        let query = query::analyze(
            "the cache drops entries when the ttl is zero",
            precedent_ingest::Clock::Ignored,
        );
        let fixed = record(
            "cache drops entries",
            &["cache/store.py"],
            &["Store.get"],
            "python",
        );
        let mut failed = fixed.clone();
        failed.task = "cache drops entries (another attempt)".to_string();
        failed.outcome.status = OutcomeStatus::Failed;
        failed.evidence[0].text.push_str(" attempt");
        let ranked = rank(
            &query,
            &[
                candidate("failed", &failed, 10.0),
                candidate("fixed", &fixed, 10.0),
            ],
            2,
            10.0,
            &[],
        );
        assert_eq!(ranked[0].session_id, "fixed", "{ranked:#?}");
    }

    #[test]
    fn identifier_parts_split_at_punctuation_and_case_changes() {
        assert_eq!(
            identifier_parts("LatexPrinter._print_Mul"),
            vec!["latex", "printer", "print", "mul"]
        );
    }

    #[test]
    fn location_words_split_acronyms_as_the_tokenizer_does() {
        // `HTTPServer` was one word, `httpserver`, which no query term
        // `http` or `server` matched.
        assert_eq!(
            identifier_parts("HTTPServer.handle"),
            vec!["http", "server", "handle"]
        );
        let query = query::analyze(
            "the http server drops keep-alive connections",
            precedent_ingest::Clock::Ignored,
        );
        let record = record(
            "keep-alive connections dropped",
            &["net/HTTPServer.go"],
            &["HTTPServer.serve"],
            "go",
        );
        let ranked = rank(&query, &[candidate("fix", &record, 5.0)], 1, 10.0, &[]);
        assert!(ranked[0].features.location_words > 0.0, "{ranked:#?}");
    }

    #[test]
    fn a_broad_merge_does_not_outrank_a_focused_fix_for_the_words_it_spans() {
        // psf/requests' history searched with an advisory's words: a merge
        // of 36 files and 150 names, and a version bump of vendored code,
        // matched more query words than the two-file fix, and led.
        let query = query::analyze(
            "Session.send leaks the Proxy-Authorization header to the destination host              when a request is redirected; rebuild_proxies should strip it",
            precedent_ingest::Clock::Ignored,
        );
        let fix = record(
            "Strip Proxy-Authorization on redirects",
            &["requests/sessions.py", "tests/test_requests.py"],
            &["SessionRedirectMixin.rebuild_proxies"],
            "python",
        );
        let merge_files: Vec<String> = (0..36)
            .map(|i| format!("requests/module_{i}/session_proxy_redirect.py"))
            .collect();
        let merge_symbols: Vec<String> = (0..150)
            .map(|i| format!("rebuild_proxies_{i}.send_request_header"))
            .collect();
        let merge = record(
            "Merge branch 'develop'",
            &merge_files.iter().map(String::as_str).collect::<Vec<_>>(),
            &merge_symbols.iter().map(String::as_str).collect::<Vec<_>>(),
            "python",
        );
        let bump = record(
            "Upgrade urllib3 to 1.22",
            &[
                "requests/packages/urllib3/vendor/proxy.py",
                "requests/packages/urllib3/vendor/redirect.py",
            ],
            &["ProxyManager.urlopen", "redirect_location"],
            "python",
        );
        let ranked = rank(
            &query,
            &[
                candidate("merge", &merge, 9.0),
                candidate("bump", &bump, 8.5),
                candidate("fix", &fix, 8.0),
            ],
            3,
            30.0,
            &[],
        );
        assert_eq!(ranked[0].session_id, "fix", "{ranked:#?}");
        let features = |id: &str| {
            ranked
                .iter()
                .find(|entry| entry.session_id == id)
                .map(|entry| entry.features.clone())
                .expect("scored")
        };
        let (fix, merge) = (features("fix"), features("merge"));
        assert!(merge.location_words <= fix.location_words, "{merge:?}");
        assert!(merge.file_support <= fix.file_support, "{merge:?}");
        assert_eq!(features("bump").stems, 0.0);
    }

    #[test]
    fn a_clear_bm25_leader_stays_in_the_answer_whatever_structure_says() {
        // A session the Stop hook recorded was first by plain BM25 for a
        // paraphrase of its task, yet ranked #93 and dropped past the
        // limit: a dozen commits naming the query's code outscored it.
        let query = query::analyze(
            "the `parse_header_links` helper drops links whose url holds a semicolon",
            precedent_ingest::Clock::Ignored,
        );
        let session = semicolon_session();
        let mut candidates = vec![candidate("hook-session", &session, 20.0)];
        let commits: Vec<SessionRecord> = (0..14)
            .map(|i| utils_commit(&format!("Tidy utils {i}")))
            .collect();
        for (i, commit) in commits.iter().enumerate() {
            candidates.push(candidate(
                &format!("commit-{i}"),
                commit,
                12.0 - i as f32 * 0.1,
            ));
        }
        let ranked = rank(&query, &candidates, candidates.len(), 30.0, &[]);
        let leader = ranked
            .iter()
            .find(|entry| entry.session_id == "hook-session")
            .expect("scored");
        assert_eq!(leader.dropped, None, "{leader:#?}");
        assert!(
            ranked
                .iter()
                .filter(|entry| entry.dropped.is_none())
                .count()
                <= gate::MAX_KEPT
        );
    }

    #[test]
    fn structure_never_ranks_a_session_above_one_with_twice_its_bm25() {
        // The real-history case of the rule: a commit that changed the
        // named helper in the named file, against a session that says the
        // query's words more than twice as well. Structure lifts the commit
        // above a session of comparable text, never above that one.
        let query = query::analyze(
            "the `parse_header_links` helper in requests/utils.py drops links whose url holds a semicolon",
            precedent_ingest::Clock::Ignored,
        );
        let session = semicolon_session();
        let commit = utils_commit("Tidy utils");
        let ranked_with = |bm25_of_commit: f32| {
            let candidates = vec![
                candidate("session", &session, 20.0),
                candidate("commit", &commit, bm25_of_commit),
            ];
            kept_ids(&rank(&query, &candidates, candidates.len(), 30.0, &[]))
        };
        assert_eq!(ranked_with(9.9), ["session", "commit"]);
        assert_eq!(ranked_with(16.0), ["commit", "session"]);
    }

    #[test]
    fn a_task_stands_where_its_best_matching_trajectory_would() {
        // Two runs of one task: the gate keeps the one naming the query's
        // code (the better fitted score) and drops the other, which says
        // the query's words best, as its duplicate. The kept run stands at
        // its task's best answer score, above a session of another task
        // that only its dropped sibling outscored.
        let query = query::analyze(
            "`parse_header_links` in requests/utils.py drops links whose url holds a semicolon",
            precedent_ingest::Clock::Ignored,
        );
        let named = record(
            "header links with a semicolon",
            &["requests/utils.py"],
            &["parse_header_links"],
            "python",
        );
        let worded = record("header links with a semicolon", &[], &[], "python");
        let other = record("cookies with a semicolon are split", &[], &[], "python");
        let candidates = vec![
            candidate("named-run", &named, 8.0),
            candidate("worded-run", &worded, 20.0),
            candidate("other-task", &other, 19.0),
        ];
        let ranked = rank(&query, &candidates, candidates.len(), 30.0, &[]);
        let kept = kept_ids(&ranked);
        let worded_run = ranked
            .iter()
            .find(|entry| entry.session_id == "worded-run")
            .expect("scored");
        assert_eq!(
            worded_run.dropped,
            Some(DropReason::Duplicate {
                of: "named-run".to_string()
            }),
            "{ranked:#?}"
        );
        assert_eq!(kept, ["named-run", "other-task"], "{ranked:#?}");
    }

    #[test]
    fn function_words_never_make_a_match() {
        // A real Claude Code prompt whose only words in common with a kept
        // session were "the", "to", "it" and "error" (the last from the
        // prefix precedent writes before a failed tool result).
        let query = query::analyze(
            "how do I get the widget to show it again after the error",
            precedent_ingest::Clock::Ignored,
        );
        for word in ["the", "to", "it", "after", "again"] {
            assert!(
                !query.terms.contains(&word.to_string()),
                "{:?}",
                query.terms
            );
        }
        for chatter in ["thanks, that looks good", "commit and push", "what's next?"] {
            let query = query::analyze(chatter, precedent_ingest::Clock::Ignored);
            assert!(!query.names_task, "{chatter}");
            assert!(query.terms.is_empty(), "{chatter}: {:?}", query.terms);
        }
        let named = query::analyze(
            "the widget flickers on resize",
            precedent_ingest::Clock::Ignored,
        );
        assert!(named.names_task);
        let code = query::analyze("`render_widget` again", precedent_ingest::Clock::Ignored);
        assert!(code.names_task);
    }

    #[test]
    fn nothing_in_nothing_out() {
        assert!(
            rank(
                &query::analyze("anything", precedent_ingest::Clock::Ignored),
                &[],
                0,
                0.0,
                &[]
            )
            .is_empty()
        );
    }
}
