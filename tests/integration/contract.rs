//! Every rule of the Add / Search / Health contract, in process through
//! `tower::ServiceExt::oneshot`.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use precedent::{ApiKeys, ApiOptions};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::{TestApp, add_body, reason};

#[tokio::test]
async fn health_answers_on_both_paths_without_auth() {
    let app = TestApp::with_options(ApiOptions {
        keys: ApiKeys::new(["k"]),
        ..ApiOptions::default()
    });
    for path in ["/health", "/v1/health"] {
        let (status, body) = app.call("GET", path, None, &[]).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(body["status"], "ok");
    }
}

#[tokio::test]
async fn add_echoes_ids_byte_for_byte() {
    let app = TestApp::new();
    let request_id = format!("req:échø:{}", "r".repeat(1000));
    let user_id = "user-écho-用户-🚀";
    let session_id = format!("session-ünïcödé-{}", "s".repeat(300));
    let (status, body) = app
        .add(&add_body(
            &request_id,
            user_id,
            &session_id,
            &["naïve café, 東京"],
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"success": true, "request_id": request_id, "user_id": user_id, "session_id": session_id})
    );
}

#[tokio::test]
async fn search_right_after_add_finds_it_on_v1_paths() {
    let app = TestApp::new();
    let (status, _) = app
        .post(
            "/v1/add",
            &add_body("r1", "u", "s1", &["the frobnicator cache drops entries"]),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app
        .post(
            "/v1/search",
            &json!({"query": "frobnicator cache", "user_id": "u", "top_k": 5}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let first = &body["data"][0];
    assert_eq!(first["kind"], "experience");
    assert_eq!(
        first["content"],
        "Past task (unknown): the frobnicator cache drops entries"
    );
}

#[tokio::test]
async fn items_carry_score_time_and_provenance() {
    let app = TestApp::new();
    let mut body = add_body(
        "r-prov",
        "u",
        "session-a",
        &[
            "first: the tokenizer panics on empty input",
            "second: the quokka buffer was never flushed",
        ],
    );
    body["messages"][1]["timestamp"] = json!(1_704_067_200_000_i64);
    assert_eq!(app.add(&body).await.0, StatusCode::OK);
    let items = app.search("u", "tokenizer panics quokka buffer", 10).await;
    assert_eq!(items.len(), 2, "{items:?}");
    let scores: Vec<f64> = items
        .iter()
        .map(|item| item["score"].as_f64().expect("score"))
        .collect();
    assert!(scores[0] > scores[1], "scores descend: {scores:?}");
    // First the session's experience, sourced at its task message.
    let first = &items[0];
    assert_eq!(first["kind"], "experience");
    assert_eq!(first["session_id"], "session-a");
    assert!(
        first["content"]
            .as_str()
            .is_some_and(|text| text.contains("the tokenizer panics on empty input")),
        "{first}"
    );
    assert_eq!(
        first["source"],
        json!({"request_id": "r-prov", "message_start": 0, "message_end": 0})
    );
    assert!(first["id"].as_str().is_some_and(|id| !id.is_empty()));
    // No timestamp on the task: storage time, now-ish and RFC 3339.
    let stored = first["created_at"].as_str().expect("created_at");
    assert!(
        stored.starts_with("20") && stored.ends_with('Z'),
        "{stored}"
    );
    // Then the best-matching other message, as it was stored.
    let second = &items[1];
    assert_eq!(second["kind"], "message");
    assert_eq!(
        second["content"],
        "second: the quokka buffer was never flushed"
    );
    assert_eq!(second["created_at"], "2024-01-01T00:00:00.000Z");
    assert_eq!(second["source"]["message_start"], 1);
}

#[tokio::test]
async fn retry_with_same_body_stores_nothing_twice() {
    let app = TestApp::new();
    let body = add_body("r-retry", "u", "s", &["parser rejects trailing commas"]);
    let (first_status, first_echo) = app.add(&body).await;
    let mut retried = body.clone();
    retried["unknown_field"] = json!({"is": "ignored"});
    let (second_status, second_echo) = app.add(&retried).await;
    assert_eq!(
        (first_status, second_status),
        (StatusCode::OK, StatusCode::OK)
    );
    assert_eq!(first_echo, second_echo);
    let items = app.search("u", "trailing commas", 10).await;
    assert_eq!(items.len(), 1);
}

#[tokio::test]
async fn same_request_id_with_other_body_is_409_and_changes_nothing() {
    let app = TestApp::new();
    let (status, _) = app
        .add(&add_body("r-conflict", "u", "s", &["original zebra text"]))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app
        .add(&add_body(
            "r-conflict",
            "u",
            "s",
            &["replacement zebra text"],
        ))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(reason(&body).contains("r-conflict"));
    let items = app.search("u", "zebra", 10).await;
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0]["content"],
        "Past task (unknown): original zebra text"
    );
    // The same request_id under another user is another request.
    let (status, _) = app
        .add(&add_body(
            "r-conflict",
            "other",
            "s",
            &["replacement zebra text"],
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn concurrent_duplicates_are_stored_once() {
    let app = TestApp::new();
    let body = add_body("r-race", "u", "s", &["racing quokka add"]);
    let calls = (0..8).map(|_| app.add(&body));
    for (status, _) in futures::future::join_all(calls).await {
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(app.search("u", "quokka", 10).await.len(), 1);
}

#[tokio::test]
async fn top_k_bounds_results_and_out_of_range_is_422() {
    let app = TestApp::new();
    for index in 0..6 {
        let (status, _) = app
            .add(&add_body(
                &format!("r{index}"),
                "u",
                &format!("s{index}"),
                &[&format!(
                    "component {index} crashes with IndexError on empty input"
                )],
            ))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(app.search("u", "IndexError empty input", 1).await.len(), 1);
    assert_eq!(app.search("u", "IndexError empty input", 3).await.len(), 3);
    assert_eq!(
        app.search("u", "IndexError empty input", 1000).await.len(),
        6
    );
    for top_k in [json!(0), json!(-1), json!(1001), json!("3"), json!(2.5)] {
        let (status, body) = app
            .post(
                "/search",
                &json!({"query": "x", "user_id": "u", "top_k": top_k}),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "top_k {top_k}");
        assert_eq!(body["detail"]["errors"][0]["field"], "top_k");
        reason(&body);
    }
}

#[tokio::test]
async fn unknown_user_gets_empty_data() {
    let app = TestApp::new();
    app.add(&add_body("r", "known", "s", &["something stored"]))
        .await;
    let (status, body) = app
        .post(
            "/search",
            &json!({"query": "something stored", "user_id": "unknown", "top_k": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"data": []}));
}

#[tokio::test]
async fn users_are_isolated_exactly() {
    let app = TestApp::new();
    app.add(&add_body(
        "r",
        "team-a",
        "s",
        &["secret of A: orders table migration"],
    ))
    .await;
    app.add(&add_body(
        "r",
        "team-a2",
        "s",
        &["B's memory: users table migration"],
    ))
    .await;
    for user in ["team-a2", "team-", "team-a ", "TEAM-A"] {
        let items = app.search(user, "secret orders table migration", 100).await;
        assert!(
            items.iter().all(|item| !item["content"]
                .as_str()
                .unwrap_or("")
                .contains("secret of A")),
            "{user} saw team-a's memory"
        );
    }
    assert_eq!(app.search("team-a", "secret", 10).await.len(), 1);
}

#[tokio::test]
async fn ids_are_stable_and_identical_texts_collapse() {
    let app = TestApp::new();
    for (index, fix) in ["deduplicating the table", "sorting inputs", "renaming"]
        .iter()
        .enumerate()
    {
        app.add(&add_body(
            &format!("r{index}"),
            "u",
            &format!("s{index}"),
            &[
                "the linker fails on duplicate symbols",
                &format!("fixed by {fix}"),
            ],
        ))
        .await;
    }
    let first = app.search("u", "linker fails duplicate symbols", 10).await;
    let second = app.search("u", "linker fails duplicate symbols", 10).await;
    assert_eq!(first, second);
    // Three trajectories of one task collapse into one experience.
    let experiences: Vec<&Value> = first
        .iter()
        .filter(|item| item["kind"] == "experience")
        .collect();
    assert_eq!(experiences.len(), 1, "{first:?}");
    assert!(
        experiences[0]["content"]
            .as_str()
            .is_some_and(|text| text.contains("the linker fails on duplicate symbols"))
    );
}

#[tokio::test]
async fn code_aware_terms_match_parts_of_identifiers() {
    let app = TestApp::new();
    app.add(&add_body(
        "r",
        "u",
        "s",
        &["patched astropy/modeling/separable.py: _cstack now copies the right matrix"],
    ))
    .await;
    app.add(&add_body(
        "r2",
        "u",
        "s2",
        &["unrelated note about documentation"],
    ))
    .await;
    for query in [
        "astropy.modeling.separable",
        "separability_matrix in separable",
        "the `_cstack` helper",
        "modeling/separable.py",
    ] {
        let items = app.search("u", query, 10).await;
        assert_eq!(items.len(), 1, "query {query:?}");
        assert!(
            items[0]["content"]
                .as_str()
                .unwrap_or("")
                .contains("_cstack")
        );
    }
}

#[tokio::test]
async fn malformed_json_is_400_with_reason() {
    let app = TestApp::new();
    for path in ["/add", "/search"] {
        let (status, body) = app
            .call(
                "POST",
                path,
                Some(br#"{"request_id": "x", "messages": ["#.to_vec()),
                &[],
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        assert!(reason(&body).starts_with("malformed JSON"));
    }
    let deep = "[".repeat(100_000);
    let (status, _) = app.call("POST", "/add", Some(deep.into_bytes()), &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn invalid_adds_are_422_listing_fields_and_store_nothing() {
    let app = TestApp::new();
    let valid = add_body(
        "r-bad",
        "u",
        "s",
        &["kept text about walruses", "second walrus"],
    );
    let mut cases: Vec<(Value, &str)> = Vec::new();
    for field in ["request_id", "messages", "user_id", "session_id"] {
        let mut body = valid.clone();
        body.as_object_mut().expect("object").remove(field);
        cases.push((body, field));
    }
    let mut body = valid.clone();
    body["messages"] = json!([]);
    cases.push((body, "messages"));
    let mut body = valid.clone();
    body["messages"][1]["content"] = json!("");
    cases.push((body, "messages[1].content"));
    let mut body = valid.clone();
    body["messages"][1]
        .as_object_mut()
        .expect("object")
        .remove("content");
    cases.push((body, "messages[1].content"));
    for role in ["system", "tool", ""] {
        let mut body = valid.clone();
        body["messages"][1]["role"] = json!(role);
        cases.push((body, "messages[1].role"));
    }
    let mut body = valid.clone();
    body["session_id"] = json!("");
    cases.push((body, "session_id"));
    let mut body = valid.clone();
    body["user_id"] = json!(42);
    cases.push((body, "user_id"));
    cases.push((json!(["not", "an", "object"]), "body"));
    for (body, field) in cases {
        let (status, answer) = app.add(&body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{field}: {answer}"
        );
        reason(&answer);
        let fields: Vec<&str> = answer["detail"]["errors"]
            .as_array()
            .expect("errors listed")
            .iter()
            .filter_map(|error| error["field"].as_str())
            .collect();
        assert!(fields.contains(&field), "{field} not in {fields:?}");
    }
    assert!(app.search("u", "walruses walrus", 10).await.is_empty());
    // The same request_id is still free: nothing of the rejected bodies was kept.
    assert_eq!(app.add(&valid).await.0, StatusCode::OK);
}

#[tokio::test]
async fn invalid_searches_are_422() {
    let app = TestApp::new();
    for (body, field) in [
        (json!({"user_id": "u", "top_k": 5}), "query"),
        (json!({"query": "", "user_id": "u", "top_k": 5}), "query"),
        (json!({"query": "x", "top_k": 5}), "user_id"),
        (json!({"query": "x", "user_id": "", "top_k": 5}), "user_id"),
        (json!({"query": "x", "user_id": "u"}), "top_k"),
    ] {
        let (status, answer) = app.post("/search", &body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}");
        assert_eq!(answer["detail"]["errors"][0]["field"], field);
    }
}

#[tokio::test]
async fn body_over_the_limit_is_413() {
    let app = TestApp::with_options(ApiOptions {
        max_body_bytes: 1024,
        ..ApiOptions::default()
    });
    let big = "x".repeat(2048);
    let (status, body) = app.add(&add_body("r-big", "u", "s", &[big.as_str()])).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(reason(&body).contains("1024"));
    let (status, _) = app.add(&add_body("r-small", "u", "s", &["small"])).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn auth_accepts_three_schemes_and_refuses_the_rest() {
    let app = TestApp::with_options(ApiOptions {
        keys: ApiKeys::new(["key-one", "key-two"]),
        ..ApiOptions::default()
    });
    let body = add_body("r", "u", "s", &["authenticated memory"]).to_string();
    for headers in [
        vec![],
        vec![("authorization", "Bearer wrong-key")],
        vec![("authorization", "Basic key-one")],
        vec![("x-api-key", "key-on")],
    ] {
        let (status, answer) = app
            .call("POST", "/add", Some(body.clone().into_bytes()), &headers)
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{headers:?}");
        let text = answer.to_string();
        assert!(
            !text.contains("wrong-key") && !text.contains("key-one"),
            "{text}"
        );
    }
    for headers in [
        [("authorization", "Bearer key-one")],
        [("authorization", "Token key-two")],
        [("x-api-key", "key-one")],
    ] {
        let (status, _) = app
            .call("POST", "/add", Some(body.clone().into_bytes()), &headers)
            .await;
        assert_eq!(status, StatusCode::OK, "{headers:?}");
        let search = json!({"query": "authenticated", "user_id": "u", "top_k": 3}).to_string();
        let (status, _) = app
            .call("POST", "/search", Some(search.into_bytes()), &headers)
            .await;
        assert_eq!(status, StatusCode::OK, "{headers:?}");
    }
    let search = json!({"query": "authenticated", "user_id": "u", "top_k": 3}).to_string();
    let (status, _) = app
        .call("POST", "/search", Some(search.into_bytes()), &[])
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json_errors() {
    let app = TestApp::new();
    let (status, body) = app.call("GET", "/nope", None, &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    reason(&body);
    let (status, body) = app.call("GET", "/add", None, &[]).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    reason(&body);
}

#[tokio::test]
async fn a_real_trajectory_is_found_by_its_traceback() {
    let app = TestApp::new();
    for name in ["mini-swe-agent-sympy-13480", "resolution-sympy-14976"] {
        let path = format!(
            "{}/fixtures/sessions/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let fixture: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture"))
                .expect("fixture JSON");
        let messages = fixture["messages"].as_array().expect("messages");
        // Chunked as the platform does, several Adds per session.
        for (index, chunk) in messages.chunks(4).enumerate() {
            let body = json!({
                "request_id": format!("{name}:chunk-{index}"),
                "user_id": "u",
                "session_id": name,
                "messages": chunk,
            });
            let (status, answer) = app.add(&body).await;
            assert_eq!(status, StatusCode::OK, "{answer}");
        }
    }
    let items = app
        .search(
            "u",
            "NameError: name 'cotm' is not defined in coth eval (sympy/functions/elementary/hyperbolic.py)",
            5,
        )
        .await;
    assert_eq!(items[0]["session_id"], "mini-swe-agent-sympy-13480");
    let items = app
        .search(
            "u",
            "lambdify mpmath does not wrap Rational in _print_Rational",
            3,
        )
        .await;
    assert_eq!(items[0]["session_id"], "resolution-sympy-14976");
}

/// A request whose body arrives only when the returned sender is dropped:
/// it stays in flight as long as the test wants.
fn stalled_add() -> (
    Request<Body>,
    tokio::sync::mpsc::Sender<Result<axum::body::Bytes, std::io::Error>>,
) {
    let (sender, receiver) = tokio::sync::mpsc::channel(1);
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    });
    let request = Request::builder()
        .method("POST")
        .uri("/add")
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .expect("request");
    (request, sender)
}

#[tokio::test]
async fn a_saturated_server_answers_503_with_retry_after_and_health_stays_open() {
    let app = TestApp::with_options(ApiOptions {
        max_in_flight: 1,
        ..ApiOptions::default()
    });
    // A stalled upload holds no in-flight slot (it is taken once the body
    // is read), so it cannot saturate the server by itself.
    let (request, sender) = stalled_add();
    let router = app.router.clone();
    let in_flight = tokio::spawn(async move { router.oneshot(request).await });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    // Adds sent at once: while the writer stores one, it holds the slot.
    let adds: Vec<_> = (0..8)
        .map(|index| {
            let router = app.router.clone();
            let body = add_body(&format!("sat-{index}"), "other", "s", &["saturating add"]);
            tokio::spawn(async move {
                router
                    .oneshot(
                        Request::builder()
                            .method("POST")
                            .uri("/add")
                            .header("content-type", "application/json")
                            .body(Body::from(body.to_string()))
                            .expect("request"),
                    )
                    .await
                    .expect("infallible")
            })
        })
        .collect();
    let mut responses = Vec::new();
    for add in adds {
        responses.push(add.await.expect("task"));
    }
    let response = responses
        .iter()
        .find(|response| response.status() != StatusCode::OK)
        .expect("one Add found the server busy");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok()),
        Some("1")
    );
    let (status, _) = app.call("GET", "/health", None, &[]).await;
    assert_eq!(status, StatusCode::OK, "health is not limited");
    // The stalled request completes once its body ends; then there is room.
    sender
        .send(Ok(axum::body::Bytes::from(
            add_body("r1", "u", "s", &["the busy parser"]).to_string(),
        )))
        .await
        .expect("send");
    drop(sender);
    let finished = in_flight.await.expect("task").expect("infallible");
    assert_eq!(finished.status(), StatusCode::OK);
    assert_eq!(app.search("u", "busy parser", 5).await.len(), 1);
}

#[tokio::test]
async fn a_request_past_the_timeout_answers_503() {
    let app = TestApp::with_options(ApiOptions {
        request_timeout: std::time::Duration::from_millis(100),
        ..ApiOptions::default()
    });
    let (request, _sender) = stalled_add();
    let response = app
        .router
        .clone()
        .oneshot(request)
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let body: Value = serde_json::from_slice(&body).expect("JSON");
    assert!(reason(&body).contains("request timeout"), "{body}");
}

#[tokio::test]
async fn message_count_and_content_size_limits_are_422_naming_the_limit() {
    let app = TestApp::new();
    let many: Vec<String> = (0..10_001).map(|index| format!("m{index}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let (status, body) = app.add(&add_body("r-many", "u", "s", &many)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(reason(&body).contains("limit of 10000"), "{body}");
    let huge = "x".repeat(16 * 1024 * 1024 + 1);
    let (status, body) = app.add(&add_body("r-huge", "u", "s", &[&huge])).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(reason(&body).contains("limit of 16777216"), "{body}");
    let (_, stored) = app.call("GET", "/v1/sessions?user_id=u", None, &[]).await;
    assert_eq!(stored["data"], json!([]), "nothing stored");
}

#[tokio::test]
async fn deleting_a_user_removes_everything_of_theirs_and_nothing_else() {
    let app = TestApp::new();
    for (index, user_id) in ["gone", "gone", "kept"].iter().enumerate() {
        let body = add_body(
            &format!("r{index}"),
            user_id,
            &format!("s{index}"),
            &["the heron parser drops tokens", "fixed the heron parser"],
        );
        assert_eq!(app.add(&body).await.0, StatusCode::OK);
    }
    let (status, body) = app.call("DELETE", "/v1/users/gone", None, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"user_id": "gone", "deleted": {"requests": 2, "messages": 4, "sessions": 2}})
    );
    assert!(app.search("gone", "heron parser", 10).await.is_empty());
    let (_, explained) = app
        .post(
            "/v1/search/explain",
            &json!({"query": "heron parser", "user_id": "gone", "top_k": 10}),
        )
        .await;
    assert_eq!(explained["num_sessions"], 0);
    let (_, list) = app
        .call("GET", "/v1/sessions?user_id=gone", None, &[])
        .await;
    assert_eq!(list["data"], json!([]));
    let kept = app.search("kept", "heron parser", 10).await;
    assert!(!kept.is_empty());
    assert!(
        kept.iter().all(|item| item["session_id"] == "s2"),
        "{kept:?}"
    );
    // The same request_id is a new request now.
    let again = add_body("r0", "gone", "s0", &["a new heron"]);
    assert_eq!(app.add(&again).await.0, StatusCode::OK);
    assert_eq!(app.search("gone", "heron", 10).await.len(), 1);
    // An unknown user: nothing removed.
    let (status, body) = app.call("DELETE", "/v1/users/nobody", None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["deleted"],
        json!({"requests": 0, "messages": 0, "sessions": 0})
    );
}

#[tokio::test]
async fn deleting_a_user_needs_the_key() {
    let app = TestApp::with_options(ApiOptions {
        keys: ApiKeys::new(["k1"]),
        ..ApiOptions::default()
    });
    let (status, _) = app.call("DELETE", "/v1/users/u", None, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = app
        .call(
            "DELETE",
            "/v1/users/u",
            None,
            &[("authorization", "Bearer k1")],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn redact_secrets_masks_credentials_before_storage() {
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB";
    let body = add_body(
        "r-secret",
        "u",
        "s",
        &[
            &format!("the deploy script leaks {token} when the parser fails"),
            "export DB_PASSWORD=hunter2hunter2 and retry the parser",
        ],
    );
    let redacting = TestApp::with_service(
        |options| options.redact_secrets = true,
        ApiOptions::default(),
    );
    assert_eq!(redacting.add(&body).await.0, StatusCode::OK);
    // A retry is masked the same way: the same request, stored once.
    assert_eq!(redacting.add(&body).await.0, StatusCode::OK);
    let items = redacting.search("u", "deploy script parser", 10).await;
    assert!(!items.is_empty());
    let (_, record) = redacting
        .call("GET", "/v1/sessions/s?user_id=u", None, &[])
        .await;
    let shown = format!("{items:?} {record}");
    assert!(
        !shown.contains(token) && !shown.contains("hunter2hunter2"),
        "{shown}"
    );
    assert!(shown.contains("[REDACTED:github-token]"), "{shown}");
    for file in ["precedent.sqlite3", "precedent.sqlite3-wal"] {
        let bytes = std::fs::read(redacting.dir.path().join(file)).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(token),
            "the token reached {file}"
        );
    }

    // Off by default: stored as sent.
    let plain = TestApp::new();
    assert_eq!(plain.add(&body).await.0, StatusCode::OK);
    let items = plain.search("u", "deploy script parser", 10).await;
    assert!(format!("{items:?}").contains(token));
}

#[tokio::test]
async fn retention_purges_sessions_idle_for_longer_and_nothing_else() {
    let app = TestApp::new();
    for (index, session) in ["old", "new"].iter().enumerate() {
        let body = add_body(
            &format!("r{index}"),
            "u",
            session,
            &[&format!("the {session} heron parser drops tokens")],
        );
        assert_eq!(app.add(&body).await.0, StatusCode::OK);
    }
    {
        let conn =
            rusqlite::Connection::open(app.dir.path().join("precedent.sqlite3")).expect("store");
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .expect("busy timeout");
        let forty_days_ago = precedent::now_ms() - 40 * 86_400_000;
        conn.execute(
            "UPDATE sessions SET updated_at_ms = ?1 WHERE session_id = 'old'",
            [forty_days_ago],
        )
        .expect("age the session");
    }
    let deleted = app
        .service
        .purge_older_than(std::time::Duration::from_secs(30 * 86_400))
        .await
        .expect("purge");
    assert_eq!(
        (deleted.sessions, deleted.requests, deleted.messages),
        (1, 1, 1)
    );
    let items = app.search("u", "heron parser", 10).await;
    assert!(!items.is_empty());
    assert!(
        items.iter().all(|item| item["session_id"] == "new"),
        "{items:?}"
    );
    let (_, list) = app.call("GET", "/v1/sessions?user_id=u", None, &[]).await;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1));
    // Nothing is older now.
    let again = app
        .service
        .purge_older_than(std::time::Duration::from_secs(30 * 86_400))
        .await
        .expect("purge");
    assert_eq!(again.sessions, 0);
}

/// Retention is the service's policy: a service opened with a retention
/// age purges the sessions idle for longer at start-up, whoever opens it.
#[tokio::test]
async fn a_service_opened_with_retention_purges_idle_sessions_at_start_up() {
    let app = TestApp::new();
    for (index, session) in ["old", "new"].iter().enumerate() {
        let body = add_body(
            &format!("r{index}"),
            "u",
            session,
            &[&format!("the {session} ibis parser drops tokens")],
        );
        assert_eq!(app.add(&body).await.0, StatusCode::OK);
    }
    app.service.shutdown().await;
    let TestApp {
        dir,
        service,
        router,
    } = app;
    drop(router);
    drop(service);
    {
        let conn = rusqlite::Connection::open(dir.path().join("precedent.sqlite3")).expect("store");
        let forty_days_ago = precedent::now_ms() - 40 * 86_400_000;
        conn.execute(
            "UPDATE sessions SET updated_at_ms = ?1 WHERE session_id = 'old'",
            [forty_days_ago],
        )
        .expect("age the session");
    }
    let mut options = precedent::ServiceOptions::new(dir.path());
    options.retention = Some(std::time::Duration::from_secs(30 * 86_400));
    let service = precedent::Service::open(options).expect("service reopens");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (sessions, _) = service
            .list_sessions(
                precedent::UserId::new("u").expect("an id"),
                None,
                100,
                Vec::new(),
            )
            .await
            .expect("sessions");
        if sessions.len() == 1 {
            assert_eq!(sessions[0].session_id, "new");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "idle session not purged: {sessions:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    service.shutdown().await;
}
