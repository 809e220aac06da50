//! Relevance regressions: what a user's ranking may depend on, what it
//! must not lose, and the limits of an answer.

use axum::http::StatusCode;
use precedent::{SearchRequest, Searcher};
use serde_json::{Value, json};

use crate::support::{TestApp, add_body, store_fixtures};

async fn explain(app: &TestApp, user_id: &str, query: &str) -> Value {
    let (status, body) = app
        .post(
            "/v1/search/explain",
            &json!({"query": query, "user_id": user_id, "top_k": 100}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Stores short one-message sessions `name-0..count` about the parser.
async fn store_short_sessions(app: &TestApp, user_id: &str, name: &str, count: usize) {
    for index in 0..count {
        let text = format!(
            "The config parser rejects trailing commas in section {index}; \
             fixed the tokenizer of src/config/parse.rs"
        );
        let session = format!("{name}-{index}");
        let (status, answer) = app
            .add(&add_body(&session, user_id, &session, &[&text]))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
}

#[tokio::test]
async fn an_exact_marker_in_a_long_session_is_found() {
    let app = TestApp::new();
    // Short sessions make the long one far longer than the average.
    for index in 0..60 {
        let text = format!("Fix the typo in section {index} of the README");
        let session = format!("short-{index}");
        let (status, answer) = app
            .add(&add_body(&session, "team", &session, &[&text]))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let marker = |index: u64| format!("mk{:016x}", index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for index in 0..108u64 {
        let text = format!(
            "step {index}: ran the integration suite again after the retry change; \
             the worker pool drained, the queue was flushed and the log was rotated. \
             marker {} recorded for this run",
            marker(index)
        );
        let request_id = format!("long-{index}");
        let (status, answer) = app
            .add(&add_body(&request_id, "team", "long", &[&text]))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let query = marker(57);
    let items = app.search("team", &query, 10).await;
    assert!(
        !items.is_empty(),
        "{:#}",
        explain(&app, "team", &query).await
    );
    assert_eq!(items[0]["session_id"], "long");
}

#[tokio::test]
async fn one_users_statistics_never_move_another_users_ranking() {
    let app = TestApp::new();
    store_short_sessions(&app, "alpha", "alpha", 3).await;
    let query = "the config parser rejects trailing commas";
    let features = |body: &Value| -> Vec<(String, f64, f64)> {
        body["candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .map(|candidate| {
                (
                    candidate["session_id"].as_str().expect("id").to_string(),
                    candidate["features"]["text_bm25"].as_f64().expect("bm25"),
                    candidate["features"]["text_coverage"]
                        .as_f64()
                        .expect("coverage"),
                )
            })
            .collect::<Vec<_>>()
    };
    // Compared per session: candidates of equal score may be listed in
    // either order.
    let sorted = |mut features: Vec<(String, f64, f64)>| {
        features.sort_by(|a, b| a.0.cmp(&b.0));
        features
    };
    let before = sorted(features(&explain(&app, "alpha", query).await));
    assert_eq!(before.len(), 3);
    // Another user stores many sessions holding the same terms, and one
    // holding none of them.
    store_short_sessions(&app, "beta", "beta", 30).await;
    let (status, _) = app
        .add(&add_body(
            "other",
            "beta",
            "other",
            &["an unrelated note about the release calendar"],
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let after = sorted(features(&explain(&app, "alpha", query).await));
    assert_eq!(before, after, "alpha's scores moved with beta's memory");
}

#[tokio::test]
async fn a_cleared_profile_cache_loses_no_candidate() {
    let app = TestApp::new();
    store_short_sessions(&app, "team", "parser", 4).await;
    app.wait_for_index_commit().await;
    // A cache that holds two profiles is cleared within every search of
    // four candidates.
    let searcher = Searcher::open_read_only(app.dir.path(), 12_000)
        .expect("searcher")
        .with_max_cached_profiles(2);
    let request = SearchRequest::new(
        "the config parser rejects trailing commas".to_string(),
        "team".to_string(),
        10,
        None,
        None,
    )
    .expect("a valid search");
    for round in 0..3 {
        let explained = searcher.explain(&request).expect("explain");
        assert_eq!(explained.candidates.len(), 4, "round {round}");
    }
}

#[tokio::test]
async fn a_tiny_max_chars_is_honoured() {
    let app = TestApp::new();
    store_fixtures(&app, "team", &["resolution-sympy-14976"]).await;
    let query = "`_print_Rational` in sympy/printing/pycode.py";
    for max_chars in 1..=20usize {
        let (status, body) = app
            .post(
                "/v1/search",
                &json!({"query": query, "user_id": "team", "top_k": 10, "max_chars": max_chars}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let items = body["data"].as_array().expect("data");
        assert_eq!(items.len(), 1, "{body}");
        let chars: usize = items
            .iter()
            .map(|item| item["content"].as_str().expect("content").chars().count())
            .sum();
        assert!(chars <= max_chars, "max_chars {max_chars}: {chars} chars");
        assert!(chars > 0);
    }
}
