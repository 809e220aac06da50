//! Session records: derived on Add, re-derived per chunk, read back through
//! `GET /v1/sessions` and `GET /v1/sessions/{id}`.

use axum::http::StatusCode;
use precedent::{ApiKeys, ApiOptions};
use serde_json::{Value, json};

use crate::support::{TestApp, add_body, fixture_messages, reason};

/// Adds a fixture session in chunks of `chunk` messages.
async fn add_fixture(app: &TestApp, user_id: &str, session_id: &str, name: &str, chunk: usize) {
    for (index, messages) in fixture_messages(name).chunks(chunk).enumerate() {
        let body = json!({
            "request_id": format!("{session_id}:chunk-{index}"),
            "user_id": user_id,
            "session_id": session_id,
            "messages": messages,
        });
        let (status, answer) = app.add(&body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
}

#[tokio::test]
async fn a_trajectory_reads_back_as_a_structured_record() {
    let app = TestApp::new();
    add_fixture(
        &app,
        "u",
        "traj/sympy-13480",
        "mini-swe-agent-sympy-13480",
        4,
    )
    .await;

    let (status, list) = app.call("GET", "/v1/sessions?user_id=u", None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let summary = &list["data"][0];
    assert_eq!(summary["session_id"], "traj/sympy-13480");
    assert_eq!(summary["num_messages"], 10);
    assert_eq!(summary["language"], "python");
    assert_eq!(summary["status"], "resolved");

    let (status, record) = app
        .call("GET", "/v1/sessions/traj/sympy-13480?user_id=u", None, &[])
        .await;
    assert_eq!(status, StatusCode::OK, "{record}");
    assert_eq!(
        record["files_changed"],
        json!(["sympy/functions/elementary/hyperbolic.py"])
    );
    assert!(
        record["task"]
            .as_str()
            .is_some_and(|task| task.starts_with(".subs on coth(log(tan(x)))"))
    );
    let error = &record["errors"][0];
    assert_eq!(error["type"], "NameError");
    assert!(error["message"].as_str().unwrap_or("").contains("cotm"));
    assert!(
        error["frames"]
            .as_array()
            .expect("frames")
            .iter()
            .any(|frame| frame["file"]
                .as_str()
                .unwrap_or("")
                .ends_with("hyperbolic.py"))
    );
    assert_eq!(record["outcome"]["final_diff"], true);
    let fix = record["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .find(|item| item["kind"] == "fix")
        .expect("a fix evidence item");
    assert_eq!(fix["file"], "sympy/functions/elementary/hyperbolic.py");
    // Session message 9 is the third Add's second message.
    assert_eq!(fix["message_index"], 9);
    assert_eq!(
        fix["source"],
        json!({"request_id": "traj/sympy-13480:chunk-2", "message_index": 1})
    );
    assert!(record["commands"].as_array().is_some_and(|commands| {
        commands.iter().any(|command| {
            command["command"] == "python reproduce_issue.py" && command["exit_code"] == 1
        })
    }));
}

/// 2024-01-01T00:00:00Z, Unix ms: when the dated session below began.
const SESSION_START_MS: i64 = 1_704_067_200_000;

#[tokio::test]
async fn sessions_and_items_are_dated_by_their_messages_not_their_import() {
    let app = TestApp::new();
    // The transcript's own times, a minute apart, imported much later.
    let messages: Vec<Value> = fixture_messages("mini-swe-agent-sympy-13480")
        .into_iter()
        .enumerate()
        .map(|(index, mut message)| {
            message["timestamp"] = json!(SESSION_START_MS + 60_000 * index as i64);
            message
        })
        .collect();
    for (index, chunk) in messages.chunks(4).enumerate() {
        let body = json!({
            "request_id": format!("dated:chunk-{index}"),
            "user_id": "u",
            "session_id": "dated",
            "messages": chunk,
        });
        assert_eq!(app.add(&body).await.0, StatusCode::OK);
    }
    let undated = add_body("undated", "u", "undated", &["Fix the kiwi counter"]);
    assert_eq!(app.add(&undated).await.0, StatusCode::OK);
    // The tenth message's own time.
    let last_message = "2024-01-01T00:09:00.000Z";

    let (status, list) = app.call("GET", "/v1/sessions?user_id=u", None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let updated_at = |session_id: &str| -> String {
        list["data"]
            .as_array()
            .expect("data")
            .iter()
            .find(|summary| summary["session_id"] == session_id)
            .and_then(|summary| summary["updated_at"].as_str())
            .expect("updated_at")
            .to_string()
    };
    assert_eq!(updated_at("dated"), last_message);
    // Undated messages: the time the record was derived, today.
    assert!(updated_at("undated").as_str() > "2025", "{list}");

    let (_, record) = app
        .call("GET", "/v1/sessions/dated?user_id=u", None, &[])
        .await;
    assert_eq!(record["updated_at"], last_message, "{record}");

    let query = ".subs on coth(log(tan(x))) errors for certain integral values: \
                 NameError: name 'cotm' is not defined in sympy/functions/elementary/hyperbolic.py";
    let items = app.search("u", query, 5).await;
    let experience = items
        .iter()
        .find(|item| item["session_id"] == "dated" && item["kind"] == "experience")
        .unwrap_or_else(|| panic!("an experience of the dated session: {items:?}"));
    assert_eq!(experience["created_at"], last_message, "{experience}");
    for item in items.iter().filter(|item| item["session_id"] == "dated") {
        let created_at = item["created_at"].as_str().expect("created_at");
        assert!(created_at.starts_with("2024-01-01T00:0"), "{item}");
    }
    let (status, explained) = app
        .post(
            "/v1/search/explain",
            &json!({"query": query, "user_id": "u", "top_k": 5}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let candidate = explained["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .find(|candidate| candidate["session_id"] == "dated")
        .expect("the dated session is a candidate");
    assert_eq!(
        candidate["last_message_at_ms"],
        json!(SESSION_START_MS + 9 * 60_000),
        "the ranking profile, which compact items read, has the time too"
    );
}

#[tokio::test]
async fn a_new_chunk_re_derives_the_record() {
    let app = TestApp::new();
    let messages = fixture_messages("resolution-sympy-14976");
    let first =
        json!({"request_id": "c0", "user_id": "u", "session_id": "s", "messages": [messages[0]]});
    assert_eq!(app.add(&first).await.0, StatusCode::OK);
    let (_, record) = app.call("GET", "/v1/sessions/s?user_id=u", None, &[]).await;
    assert_eq!(record["files_changed"], json!([]));
    assert_eq!(record["num_messages"], 1);

    let second =
        json!({"request_id": "c1", "user_id": "u", "session_id": "s", "messages": [messages[1]]});
    assert_eq!(app.add(&second).await.0, StatusCode::OK);
    let (_, record) = app.call("GET", "/v1/sessions/s?user_id=u", None, &[]).await;
    assert_eq!(record["files_changed"], json!(["sympy/printing/pycode.py"]));
    assert_eq!(record["num_messages"], 2);
    assert!(
        record["symbols_changed"]
            .as_array()
            .expect("symbols")
            .iter()
            .any(|symbol| symbol
                .as_str()
                .is_some_and(|name| name.ends_with("_print_Rational"))),
        "{}",
        record["symbols_changed"]
    );
    assert_eq!(record["outcome"]["status"], "resolved");
}

#[tokio::test]
async fn inspection_is_scoped_validated_and_authenticated() {
    let app = TestApp::with_options(ApiOptions {
        keys: ApiKeys::new(["key"]),
        ..ApiOptions::default()
    });
    let auth = [("authorization", "Bearer key")];
    let body = add_body(
        "r",
        "owner",
        "private-session",
        &["owner's task about kiwis"],
    );
    let (status, _) = app
        .call("POST", "/add", Some(body.to_string().into_bytes()), &auth)
        .await;
    assert_eq!(status, StatusCode::OK);

    let (status, _) = app
        .call("GET", "/v1/sessions?user_id=owner", None, &[])
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, list) = app
        .call("GET", "/v1/sessions?user_id=other", None, &auth)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list, json!({"data": [], "next_cursor": null}));
    let (status, answer) = app
        .call(
            "GET",
            "/v1/sessions/private-session?user_id=other",
            None,
            &auth,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    reason(&answer);
    for path in [
        "/v1/sessions",
        "/v1/sessions?user_id=",
        "/v1/sessions/private-session",
    ] {
        let (status, answer) = app.call("GET", path, None, &auth).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}");
        assert_eq!(answer["detail"]["errors"][0]["field"], "user_id");
    }
    let (status, record) = app
        .call(
            "GET",
            "/v1/sessions/private-session?user_id=owner",
            None,
            &auth,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(record["task"], "owner's task about kiwis");
}

#[test]
fn precedent_inspect_reads_a_store_that_a_server_holds() {
    let (_guard, dir) = crate::support::data_dir();
    let server = crate::support::ServerProcess::start(&dir, &[]);
    for (index, messages) in fixture_messages("mini-swe-agent-sympy-13480")
        .chunks(5)
        .enumerate()
    {
        let body = json!({
            "request_id": format!("chunk-{index}"),
            "user_id": "u",
            "session_id": "traj-1",
            "messages": messages,
        });
        assert_eq!(server.request("POST", "/add", Some(&body)).0, 200);
    }
    let run = |extra: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_precedent"))
            .args(["inspect", "--user-id", "u", "--data-dir"])
            .arg(&dir)
            .args(extra)
            .output()
            .expect("runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let list = run(&[]);
    assert!(
        list.contains("1 session(s)") && list.contains("traj-1"),
        "{list}"
    );
    let detail = run(&["--session", "traj-1"]);
    assert!(
        detail.contains("files changed:      sympy/functions/elementary/hyperbolic.py"),
        "{detail}"
    );
    assert!(
        detail.contains("NameError: name 'cotm' is not defined"),
        "{detail}"
    );
    assert!(
        detail.contains("(chunk-1#"),
        "evidence names its Add: {detail}"
    );
    let json: Value = serde_json::from_str(&run(&["--session", "traj-1", "--json"])).expect("JSON");
    assert_eq!(json["errors"][0]["type"], "NameError");

    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args([
            "inspect",
            "--user-id",
            "u",
            "--session",
            "nope",
            "--data-dir",
        ])
        .arg(&dir)
        .output()
        .expect("runs");
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("has no session \"nope\""));

    // A misspelt user id is named as such, with the users the store holds,
    // by inspect and by search alike.
    for args in [
        vec!["inspect", "--user-id", "U"],
        vec!["search", "--user-id", "U", "cotm is not defined"],
    ] {
        let misspelt = std::process::Command::new(env!("CARGO_BIN_EXE_precedent"))
            .args(&args)
            .arg("--data-dir")
            .arg(&dir)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&misspelt.stderr);
        assert_eq!(misspelt.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("no memory for \"U\"") && stderr.contains("\"u\""),
            "{args:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_bad_id_on_the_inspection_and_deletion_routes_is_refused_and_changes_nothing() {
    let app = TestApp::new();
    let body = add_body("r", "owner", "kept", &["owner's task about kiwis"]);
    let (status, _) = app.add(&body).await;
    assert_eq!(status, StatusCode::OK);
    let (_, sessions_before) = app
        .call("GET", "/v1/sessions?user_id=owner", None, &[])
        .await;
    let (_, users_before) = app.call("GET", "/v1/users", None, &[]).await;

    // One byte past the contract's longest id (docs/api.md).
    let long = "i".repeat(4097);
    let refused = [
        ("GET", format!("/v1/sessions?user_id={long}"), "user_id"),
        (
            "GET",
            format!("/v1/sessions/kept?user_id={long}"),
            "user_id",
        ),
        (
            "GET",
            format!("/v1/sessions/{long}?user_id=owner"),
            "session_id",
        ),
        (
            "GET",
            format!("/v1/messages?user_id={long}&session_id=kept"),
            "user_id",
        ),
        (
            "GET",
            format!("/v1/messages?user_id=owner&session_id={long}"),
            "session_id",
        ),
        (
            "GET",
            "/v1/messages?user_id=owner&session_id=".to_string(),
            "session_id",
        ),
        ("DELETE", format!("/v1/users/{long}"), "user_id"),
    ];
    for (method, path, field) in refused {
        let (status, answer) = app.call(method, &path, None, &[]).await;
        let shown = &path[..path.len().min(60)];
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{method} {shown}");
        assert_eq!(
            answer["detail"]["errors"][0]["field"], field,
            "{method} {shown}"
        );
        assert!(
            reason(&answer).contains(field),
            "{method} {shown}: {answer}"
        );
    }

    let (_, sessions_after) = app
        .call("GET", "/v1/sessions?user_id=owner", None, &[])
        .await;
    let (_, users_after) = app.call("GET", "/v1/users", None, &[]).await;
    assert_eq!(sessions_after, sessions_before);
    assert_eq!(users_after, users_before);
    assert_eq!(sessions_after["data"][0]["session_id"], "kept");
}
