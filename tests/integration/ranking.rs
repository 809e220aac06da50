//! Ranking end to end: real fixture trajectories stored through the API,
//! searched with new task statements; the answer's order, its noise gate,
//! its budget, and `POST /v1/search/explain`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestApp, fixture_messages, reason, store_fixtures};

const MEMORY: &[&str] = &[
    "mini-swe-agent-sympy-13480",
    "resolution-sympy-14976",
    "mini-swe-agent-scikit-learn-10844",
    "resolution-rust-ripgrep-954",
    "resolution-js-dayjs-1201",
    "resolution-cpp-fmt-3248",
];

#[tokio::test]
async fn the_session_that_changed_the_named_code_comes_first() {
    let app = TestApp::new();
    store_fixtures(&app, "team", MEMORY).await;
    let query = "lambdify with modules='mpmath' loses precision: `_print_Rational` in \
                 sympy/printing/pycode.py prints 1/3 as a float division";
    let items = app.search("team", query, 100).await;
    assert!(!items.is_empty());
    let first = &items[0];
    assert_eq!(first["session_id"], "resolution-sympy-14976", "{items:#?}");
    assert_eq!(first["kind"], "experience");
    let content = first["content"].as_str().expect("content");
    assert!(
        content.contains("Files changed: sympy/printing/pycode.py"),
        "{content}"
    );
    assert!(content.contains("_print_Rational"), "{content}");
    assert!(content.contains("Fix:"), "{content}");
    // Other languages' sessions stay out; scores descend; the budget holds.
    for item in &items {
        assert!(
            item["source"]["request_id"]
                .as_str()
                .is_some_and(|id| !id.is_empty()),
            "every item names its source: {item}"
        );
        let session = item["session_id"].as_str().expect("session");
        assert!(
            ![
                "resolution-rust-ripgrep-954",
                "resolution-js-dayjs-1201",
                "resolution-cpp-fmt-3248"
            ]
            .contains(&session),
            "{session} is another code base"
        );
    }
    let scores: Vec<f64> = items
        .iter()
        .map(|item| item["score"].as_f64().expect("score"))
        .collect();
    assert!(
        scores.windows(2).all(|pair| pair[0] >= pair[1]),
        "{scores:?}"
    );
    let chars: usize = items
        .iter()
        .map(|item| item["content"].as_str().expect("content").chars().count())
        .sum();
    assert!(chars <= 12_000, "{chars}");
}

#[tokio::test]
async fn a_task_about_code_the_memory_never_saw_gets_nothing() {
    let app = TestApp::new();
    store_fixtures(&app, "team", MEMORY).await;
    let items = app
        .search(
            "team",
            "Kubernetes ingress controller rejects wildcard TLS secrets after the helm upgrade",
            100,
        )
        .await;
    assert_eq!(items, Vec::<Value>::new());
}

#[tokio::test]
async fn max_chars_bounds_the_answer() {
    let app = TestApp::new();
    store_fixtures(&app, "team", MEMORY).await;
    let (status, body) = app
        .post(
            "/v1/search",
            &json!({"query": "sympy coth subs log tan errors", "user_id": "team", "top_k": 10, "max_chars": 300}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let items = body["data"].as_array().expect("data");
    assert_eq!(items.len(), 1, "{body}");
    assert!(
        items[0]["content"]
            .as_str()
            .expect("content")
            .chars()
            .count()
            <= 300
    );
    let (status, body) = app
        .post(
            "/v1/search",
            &json!({"query": "x", "user_id": "team", "top_k": 10, "max_chars": 0}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        reason(&body).contains("max_chars") || body.to_string().contains("max_chars"),
        "{body}"
    );
}

#[tokio::test]
async fn explain_shows_every_candidate_with_features_and_verdict() {
    let app = TestApp::new();
    store_fixtures(&app, "team", MEMORY).await;
    let query =
        "fowlkes_mallows_score overflows: RuntimeWarning in sklearn/metrics/cluster/supervised.py";
    let (status, body) = app
        .post(
            "/v1/search/explain",
            &json!({"query": query, "user_id": "team", "top_k": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["num_sessions"], MEMORY.len());
    assert!(
        body["query"]["names"]
            .as_array()
            .is_some_and(|names| names.contains(&json!("fowlkes_mallows_score")))
    );
    let candidates = body["candidates"].as_array().expect("candidates");
    let first = &candidates[0];
    assert_eq!(first["session_id"], "mini-swe-agent-scikit-learn-10844");
    assert_eq!(first["dropped"], Value::Null);
    assert!(
        first["features"]["symbols_changed"]
            .as_f64()
            .expect("feature")
            > 0.0
    );
    assert!(first["features"]["paths"].as_f64().expect("feature") > 0.0);
    for candidate in candidates {
        assert!(candidate["score"].is_number());
        assert!(candidate["features"]["text_rel"].is_number());
    }
    // Sessions of another code base are not kept (the query's function
    // words no longer find them at all).
    for candidate in candidates {
        assert!(
            candidate["language"] == "python" || !candidate["dropped"].is_null(),
            "{candidate:#}"
        );
    }
    // The same validation as Search.
    let (status, body) = app
        .post(
            "/v1/search/explain",
            &json!({"query": "x", "user_id": "team"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
}

#[tokio::test]
async fn one_users_experience_never_ranks_for_another() {
    let app = TestApp::new();
    store_fixtures(&app, "alpha", &["resolution-sympy-14976"]).await;
    let query = "`_print_Rational` in sympy/printing/pycode.py";
    assert!(!app.search("alpha", query, 10).await.is_empty());
    assert_eq!(app.search("beta", query, 10).await, Vec::<Value>::new());
    let (status, body) = app
        .post(
            "/v1/search/explain",
            &json!({"query": query, "user_id": "beta", "top_k": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["candidates"], json!([]));
}

#[test]
fn precedent_search_reads_a_data_directory_a_server_holds() {
    let (_guard, dir) = crate::support::data_dir();
    let server = crate::support::ServerProcess::start(&dir, &[]);
    for name in MEMORY {
        for (index, messages) in fixture_messages(name).chunks(20).enumerate() {
            let body = json!({
                "request_id": format!("{name}:{index}"),
                "user_id": "team",
                "session_id": name,
                "messages": messages,
            });
            assert_eq!(server.request("POST", "/add", Some(&body)).0, 200);
        }
    }
    // Another process reads what the server has committed.
    let (_, health) = server.request("GET", "/health", None);
    crate::support::wait_for_index_commit(&dir, health["indexed_seq"].as_i64().unwrap_or(i64::MAX));
    let run = |extra: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_precedent"))
            .args(["search", "--user-id", "team", "--data-dir"])
            .arg(&dir)
            .args(extra)
            .output()
            .expect("runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let query =
        "coth(log(tan(x))).subs(x, 2) raises NameError in sympy/functions/elementary/hyperbolic.py";
    let (code, answer, _) = run(&[query]);
    assert_eq!(code, Some(0));
    assert!(
        answer.starts_with("#1 experience") && answer.contains("mini-swe-agent-sympy-13480"),
        "{answer}"
    );
    let (code, explained, _) = run(&["--explain", query]);
    assert_eq!(code, Some(0));
    assert!(
        explained.contains("candidate(s) of 6 session(s)"),
        "{explained}"
    );
    assert!(explained.contains("other_code_base"), "{explained}");
    // Its columns are explained, the baseline's place among them.
    assert!(
        explained.contains("bm25#: place by plain session BM25"),
        "{explained}"
    );
    // Each feature column under the page's label, with the API's name.
    assert!(
        explained.contains("  sym    symbols_changed: "),
        "{explained}"
    );
    let (code, json, _) = run(&["--explain", "--json", query]);
    assert_eq!(code, Some(0));
    let json: Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(
        json["candidates"][0]["session_id"],
        "mini-swe-agent-sympy-13480"
    );
    // Clear errors for a directory without a store, and an empty query.
    let (code, _, error) = run(&["   "]);
    assert_eq!(code, Some(1));
    assert!(error.contains("the query is empty"), "{error}");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(["search", "--user-id", "team", "--data-dir"])
        .arg(elsewhere.path())
        .arg("anything")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot search"),
        "{output:?}"
    );
    drop(server);
}

/// Isolation as a property: random users share vocabulary, sessions and
/// even session ids; for random queries, no search item, explain entry,
/// count or inspection result of one user ever shows another's data.
#[tokio::test]
async fn no_answer_crosses_user_id() {
    let app = TestApp::new();
    let words = [
        "parser", "cache", "token", "divide", "overflow", "index", "merge", "config", "render",
        "socket", "retry", "vector", "matrix", "lambda", "buffer", "schema",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |bound: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % bound as u64) as usize
    };
    let users = ["alice", "bob", "carol", "alice2", "ALICE"];
    let mut owned: std::collections::HashMap<&str, std::collections::HashSet<String>> =
        std::collections::HashMap::new();
    for index in 0..60 {
        let user = users[next(users.len())];
        // Session ids repeat across users on purpose.
        let session = format!("s{}", next(12));
        let text: Vec<&str> = (0..6).map(|_| words[next(words.len())]).collect();
        let body = json!({
            "request_id": format!("r{index}"),
            "user_id": user,
            "session_id": session,
            "messages": [
                {"role": "user", "content": format!("{} fails in src/{}.py", text.join(" "), text[0])},
                {"role": "assistant", "content": format!("fixed `{}_{}` for {user}-marker-{index}", text[1], text[2])},
            ],
        });
        let (status, answer) = app.add(&body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        owned.entry(user).or_default().insert(session);
    }
    let mut returned = 0usize;
    for _ in 0..60 {
        let user = users[next(users.len())];
        let query: Vec<&str> = (0..3).map(|_| words[next(words.len())]).collect();
        let query = query.join(" ");
        let mine = owned.get(user).cloned().unwrap_or_default();
        for item in app.search(user, &query, 100).await {
            returned += 1;
            let session = item["session_id"].as_str().expect("session");
            assert!(mine.contains(session), "{user} got {session}: {item}");
            let content = item["content"].as_str().expect("content");
            for other in users.iter().filter(|other| **other != user) {
                assert!(
                    !content.contains(&format!(" for {other}-marker-")),
                    "{user} got {other}'s text: {content}"
                );
            }
        }
        let (status, explained) = app
            .post(
                "/v1/search/explain",
                &json!({"query": query, "user_id": user, "top_k": 100}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(explained["num_sessions"], mine.len(), "{user}");
        for candidate in explained["candidates"].as_array().expect("candidates") {
            let session = candidate["session_id"].as_str().expect("session");
            assert!(mine.contains(session), "{user} explained {session}");
        }
        let (status, list) = app
            .call("GET", &format!("/v1/sessions?user_id={user}"), None, &[])
            .await;
        assert_eq!(status, StatusCode::OK);
        let listed: std::collections::HashSet<String> = list["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|summary| summary["session_id"].as_str().expect("id").to_string())
            .collect();
        assert_eq!(listed, mine, "{user}'s inspection list");
    }
    assert!(returned > 60, "the searches found things: {returned} items");
    // A session id another user has is not found for this one.
    let (status, _) = app
        .call("GET", "/v1/sessions/s0?user_id=nobody", None, &[])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_session_whose_change_was_an_editor_tool_call_ranks_first_for_its_file_and_function() {
    // OpenHands edited app.py with str_replace_editor calls and never wrote a
    // diff: the edits, rendered as diffs, make its changed file and function.
    let app = TestApp::new();
    let mut names = MEMORY.to_vec();
    names.push("openhands-flask-table");
    store_fixtures(&app, "team", &names).await;
    let query = "the index() view in app.py returns str(numbers); render the numbers as a table";
    let items = app.search("team", query, 10).await;
    assert!(!items.is_empty());
    assert_eq!(
        items[0]["session_id"], "openhands-flask-table",
        "{items:#?}"
    );
    let content = items[0]["content"].as_str().expect("content");
    assert!(content.contains("Files changed: app.py"), "{content}");
    assert!(content.contains("index"), "{content}");
}
