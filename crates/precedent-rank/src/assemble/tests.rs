use super::*;
use crate::Features;
use precedent_ingest::{Evidence, Outcome};

/// The record of a fixture session (`fixtures/sessions`), extracted.
fn fixture_record(fixture: &str) -> SessionRecord {
    let session: serde_json::Value = serde_json::from_str(fixture).expect("fixture JSON");
    let messages: Vec<(precedent_core::domain::Role, String)> = session["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| {
            let role = match message["role"].as_str() {
                Some("assistant") => precedent_core::domain::Role::Assistant,
                _ => precedent_core::domain::Role::User,
            };
            (role, message["content"].as_str().unwrap_or("").to_string())
        })
        .collect();
    let inputs = precedent_ingest::IngestMessage::in_order(
        messages
            .iter()
            .map(|(role, content)| (*role, content.as_str())),
    );
    precedent_ingest::extract_session(&inputs, precedent_ingest::Clock::Ignored).0
}

/// The first range line of each hunk, in the order `fix_hunks` gives.
fn hunk_order(record: &SessionRecord, query: &str) -> Vec<String> {
    fix_hunks(
        record,
        &super::super::query::analyze(query, precedent_ingest::Clock::Ignored),
    )
    .iter()
    .map(|hunk| {
        let range = hunk
            .text
            .lines()
            .find(|line| line.starts_with("@@"))
            .unwrap_or("");
        format!("{} {range}", hunk.file.as_deref().unwrap_or("?"))
    })
    .collect()
}

const TOKIO_5179: &str =
    include_str!("../../../../fixtures/sessions/resolution-rust-tokio-5179.json");

#[test]
fn fix_shows_the_hunk_of_the_named_function_first() {
    let record = fixture_record(TOKIO_5179);
    let order = hunk_order(
        &record,
        "has_budget_remaining panics when the thread-local is destroyed, in tokio/src/runtime/coop.rs",
    );
    // Every coop.rs hunk touches the file the query names; the one that
    // changes the function it names comes first (in diff order, an
    // import's removal would).
    assert_eq!(
        order[0],
        "tokio/src/runtime/coop.rs @@ -79,37 +77,42 @@ pub(crate) fn with_unconstrained<R>(f: impl FnOnce() -> R) -> R {",
        "{order:#?}"
    );
    let first_elsewhere = order
        .iter()
        .position(|hunk| !hunk.starts_with("tokio/src/runtime/coop.rs"))
        .expect("context.rs hunks");
    assert_eq!(first_elsewhere, 6, "{order:#?}");
}

#[test]
fn fix_shows_source_before_tests_among_equal_matches() {
    // The shape of xarray's fix of `as_compatible_data` (pydata/xarray
    // 2905), its test hunk first as `git diff` orders the files.
    let hunk = |file: &str, symbol: &str, change: &str| Evidence {
        kind: EvidenceKind::Fix,
        text: format!("--- a/{file}\n+++ b/{file}\n@@ -218,7 +218,8 @@\n{change}\n"),
        message_index: 1,
        byte_start: 0,
        byte_end: 1,
        file: Some(file.to_string()),
        symbols: vec![symbol.to_string()],
    };
    let record = SessionRecord {
        evidence: vec![
            hunk(
                "xarray/tests/test_variable.py",
                "TestAsCompatibleData.test_unsupported_type",
                "+        orig = Variable(dims=(), data=CustomWithValuesAttr())",
            ),
            hunk(
                "xarray/core/variable.py",
                "as_compatible_data",
                "-    data = getattr(data, \"values\", data)\n+    if isinstance(data, (pd.Series, pd.DataFrame)):",
            ),
        ],
        ..SessionRecord::default()
    };
    let order = hunk_order(
        &record,
        "Variable.__setitem__ coercing types on objects with a values property",
    );
    assert!(
        order[0].starts_with("xarray/core/variable.py"),
        "{order:#?}"
    );
    // What the query names comes first, a test or not.
    let order = hunk_order(&record, "test_unsupported_type fails");
    assert!(
        order[0].starts_with("xarray/tests/test_variable.py"),
        "{order:#?}"
    );
}

#[test]
fn fix_shows_the_hunk_holding_the_query_words_first() {
    let record = fixture_record(TOKIO_5179);
    let order = hunk_order(
        &record,
        "Poll should be Ready with RestoreOnPending and an unconstrained budget cell",
    );
    assert_eq!(order.len(), 8, "{order:#?}");
    // The query names no file and no changed definition: the hunk whose
    // change holds most of its words comes first, not the diff's first.
    assert_eq!(
        order[0], "tokio/src/runtime/coop.rs @@ -176,7 +180,7 @@ cfg_coop! {",
        "{order:#?}"
    );
}

fn scored(id: &str, score: f32) -> Scored {
    Scored {
        session_id: id.to_string(),
        task_line: format!("task of {id}"),
        outcome: OutcomeStatus::Resolved,
        language: None,
        updated_at_ms: 0,
        last_message_at_ms: None,
        files_changed: vec!["src/lib.rs".to_string()],
        symbols_changed: vec!["parse".to_string()],
        features: Features::default(),
        evidence: 0.0,
        probability: 1.0,
        score,
        fit_score: score,
        baseline_rank: 1,
        bm25_margin: None,
        dropped: None,
        candidate: 0,
    }
}

fn record(id: &str) -> SessionRecord {
    SessionRecord {
        task: format!("task of {id}\n{}", "details ".repeat(100)),
        files_changed: vec!["src/lib.rs".to_string(), "tests/parse.rs".to_string()],
        symbols_changed: vec!["parse".to_string()],
        outcome: Outcome {
            final_diff: true,
            tests_passed_at_end: Some(true),
            status: OutcomeStatus::Resolved,
        },
        evidence: vec![Evidence {
            kind: EvidenceKind::Fix,
            text: format!("@@ fn parse @@\n-old\n+new {}", "x".repeat(3000)),
            message_index: 1,
            byte_start: 0,
            byte_end: 10,
            file: Some("src/lib.rs".to_string()),
            symbols: vec!["parse".to_string()],
        }],
        ..SessionRecord::default()
    }
}

#[test]
fn budget_top_k_and_descending_scores_hold() {
    let query = crate::query::analyze("`parse` fails", precedent_ingest::Clock::Ignored);
    let rankings: Vec<Scored> = (0..6)
        .map(|i| scored(&format!("s{i}"), 2.0 - 0.1 * i as f32))
        .collect();
    let records: Vec<SessionRecord> = (0..6).map(|i| record(&format!("s{i}"))).collect();
    let sources = vec![("r".to_string(), 0usize), ("r".to_string(), 1)];
    let sessions: Vec<KeptSession<'_>> = rankings
        .iter()
        .zip(&records)
        .map(|(scored, record)| KeptSession {
            scored,
            record: Some(record),
            sources: &sources,
            created_at_ms: 0,
            room: room(rankings[0].score, scored.score),
            matched_messages: Vec::new(),
        })
        .collect();
    let items = assemble(&query, &sessions, 5_000, 100);
    let chars: usize = items.iter().map(|item| item.content.chars().count()).sum();
    assert!(chars <= 5_000, "{chars}");
    assert!(items.len() >= 2);
    assert!(items.windows(2).all(|pair| pair[0].score >= pair[1].score));
    assert_eq!(items[0].kind, MemoryKind::Experience);
    assert!(items[0].content.contains("Files changed: src/lib.rs"));
    assert!(
        !items[0].content.contains("tests/parse.rs"),
        "test files are not listed"
    );
    assert!(items[0].content.contains("Fix:"));
    assert_eq!(assemble(&query, &sessions, 5_000, 1).len(), 1);
    // A budget smaller than the first item still gives it, cut.
    let tiny = assemble(&query, &sessions, 100, 10);
    assert_eq!(tiny.len(), 1);
    assert!(tiny[0].content.chars().count() <= 100);
}

#[test]
fn the_message_holding_the_rarest_terms_is_shown() {
    let terms = vec!["overflow".to_string(), "parser".to_string()];
    let messages = [
        "the parser, the parser and the parser again",
        "an Overflow in the tokenizer",
        "an overflow in the parser",
        "an overflow in the parser, once more",
    ];
    // The rarest term weighs most, a repeat less than another term,
    // and the first of equals wins.
    assert_eq!(best_message(messages, &terms), Some(2));
    assert_eq!(best_message(messages[..2].iter().copied(), &terms), Some(1));
    assert_eq!(best_message([], &terms), None);
}

#[test]
fn shown_sessions_fit_the_budget_and_skip_dropped_ones() {
    let mut candidates: Vec<Scored> = (0..6)
        .map(|i| scored(&format!("s{i}"), 2.0 - 0.1 * i as f32))
        .collect();
    candidates[1].dropped = Some(super::super::DropReason::BelowFloor);
    let shown = shown_sessions(&candidates, 1_800, 10);
    let ids: Vec<&str> = shown
        .iter()
        .map(|session| session.scored.session_id.as_str())
        .collect();
    assert_eq!(ids, ["s0", "s2", "s3"]);
    assert!(shown[0].needs_record() && shown[0].shows_messages());
    assert_eq!(shown_sessions(&candidates, 100, 10).len(), 1);
    assert_eq!(shown_sessions(&candidates, 100_000, 2).len(), 2);
}

#[test]
fn weak_evidence_is_shown_compact_among_the_first_five_and_nothing_is_made_up() {
    let mut candidates: Vec<Scored> = (0..9)
        .map(|i| scored(&format!("s{i}"), 2.0 - 0.1 * i as f32))
        .collect();
    for (i, candidate) in candidates.iter_mut().enumerate() {
        // The first and the eighth are strong; the others weak.
        candidate.probability = if i == 0 || i == 7 { 0.9 } else { 0.2 };
        candidate.task_line = format!("{} {}", candidate.task_line, "long words ".repeat(40));
        candidate.baseline_rank = i + 1;
    }
    let shown = shown_sessions(&candidates, 12_000, 10);
    let sizes: Vec<(&str, Size)> = shown
        .iter()
        .map(|session| (session.scored.session_id.as_str(), size_of(session.scored)))
        .collect();
    assert_eq!(
        sizes,
        [
            ("s0", Size::Full),
            ("s1", Size::Compact),
            ("s2", Size::Compact),
            ("s3", Size::Compact),
            ("s4", Size::Compact),
            ("s7", Size::Full),
        ]
    );
    assert!(!shown[1].needs_record() && !shown[1].shows_messages());
    let kept: Vec<KeptSession> = shown
        .iter()
        .map(|session| KeptSession {
            scored: session.scored,
            record: None,
            sources: &[],
            created_at_ms: 0,
            room: session.room(),
            matched_messages: Vec::new(),
        })
        .collect();
    let query = super::super::query::analyze("parse", precedent_ingest::Clock::Ignored);
    let items = assemble(&query, &kept, 12_000, 10);
    let compact = &items[1].content;
    assert!(compact.chars().count() <= COMPACT_CHARS, "{compact}");
    assert!(
        compact.starts_with("Past task (resolved): task of s1"),
        "{compact}"
    );
    assert!(compact.ends_with("Session: s1"), "{compact}");
    // Nothing kept: nothing shown.
    for candidate in &mut candidates {
        candidate.dropped = Some(super::super::DropReason::BelowFloor);
    }
    assert!(shown_sessions(&candidates, 12_000, 10).is_empty());
}

#[test]
fn a_message_item_shows_the_agents_text_under_a_short_id() {
    let scored = scored("claude-code:4d56", 2.0);
    let shown = shown_sessions(std::slice::from_ref(&scored), 12_000, 10);
    assert!(shown[0].shows_messages());
    let content = "<environment_context><cwd>/tmp/x/inventory</cwd></environment_context>\n\
                   restock raises KeyError for a new sku; the fix reads stock.get(sku, 0)";
    // The items of the session with one matched message from `request_id`.
    let items_of = |request_id: &'static str, index_in_add: usize| {
        let kept = [KeptSession {
            scored: &scored,
            record: None,
            sources: &[],
            created_at_ms: 0,
            room: shown[0].room(),
            matched_messages: vec![MatchedMessage {
                content,
                request_id,
                index_in_add,
                created_at_ms: 0,
            }],
        }];
        let query =
            super::super::query::analyze("restock KeyError", precedent_ingest::Clock::Ignored);
        assemble(&query, &kept, 12_000, 10)
    };
    let items = items_of("claude-code:4d56:0-5", 2);
    let message = items
        .iter()
        .find(|item| item.kind == MemoryKind::Message)
        .expect("a message item");
    assert_eq!(message.id, "message:claude-code:4d56:0-5:2");
    assert!(
        message.content.starts_with("restock raises"),
        "{}",
        message.content
    );
    assert!(!message.content.contains("environment_context"));
    // An id that is not the importer's keeps its whole request id.
    let items = items_of("run-7", 0);
    assert!(
        items
            .iter()
            .any(|item| item.id == "message:claude-code:4d56:run-7:0")
    );
}

#[test]
fn room_shrinks_with_distance_from_the_best() {
    assert_eq!(room(1.0, 1.0), 1.0);
    assert!(room(1.0, 0.75) < 0.5);
    assert!(room(1.0, 0.0) < 0.05);
    let best = scored("best", 1.0);
    let shown = |score: f32| ShownSession {
        scored: &best,
        room: room(1.0, score),
    };
    assert!(shown(0.75).needs_record());
    assert!(!shown(0.0).needs_record());
}

/// Room is shared by fitted score: the best fitted score among the full
/// sessions has all of it, whatever the answer's order, and a session's
/// answer score does not enter it.
#[test]
fn room_is_measured_from_the_best_fitted_score_not_the_first_session() {
    let mut candidates: Vec<Scored> = ["first", "second"]
        .iter()
        .map(|id| scored(id, 2.0))
        .collect();
    candidates[0].score = 2.0;
    candidates[0].fit_score = 1.5;
    candidates[1].score = 1.9;
    candidates[1].fit_score = 1.8;
    let shown = shown_sessions(&candidates, 12_000, 10);
    let rooms: Vec<(&str, f32)> = shown
        .iter()
        .map(|session| (session.scored.session_id.as_str(), session.room()))
        .collect();
    assert_eq!(rooms, [("first", room(1.8, 1.5)), ("second", 1.0)]);
    assert!(rooms[0].1 < 0.5, "{rooms:?}");
}
