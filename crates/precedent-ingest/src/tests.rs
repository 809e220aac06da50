//! Session-level tests of [`super::extract_session`]: minimized real sessions
//! of each agent kind, and robustness on hostile input.

use super::*;

fn session(messages: &[(Role, &str)]) -> (SessionRecord, Vec<Diagnostic>) {
    let messages =
        IngestMessage::in_order(messages.iter().map(|(role, content)| (*role, *content)));
    let (record, diagnostics) = extract_session(&messages, Clock::Ignored);
    assert_evidence_is_valid(&record, &messages);
    (record, diagnostics)
}

fn assert_evidence_is_valid(record: &SessionRecord, messages: &[IngestMessage<'_>]) {
    assert!(record.evidence.len() <= MAX_EVIDENCE);
    for evidence in &record.evidence {
        let message = messages
            .get(evidence.message_index)
            .expect("evidence points at a message");
        assert!(
            message
                .content
                .get(evidence.byte_start..evidence.byte_end)
                .is_some(),
            "invalid range {}..{} in message {}",
            evidence.byte_start,
            evidence.byte_end,
            evidence.message_index
        );
    }
}

fn kinds(record: &SessionRecord) -> Vec<(&str, usize)> {
    record
        .evidence
        .iter()
        .map(|evidence| (evidence.kind.as_str(), evidence.message_index))
        .collect()
}

const RESOLUTION_TASK: &str = "Variable.__setitem__ coercing types on objects with a values property\n#### Minimal example\n```python\nimport xarray as xr\ngood_indexed.loc[{'dim_0': 0}] = set()\n```\nThe use case is `ModelResult` from `lmfit`; see xarray/core/variable.py.\n";

const RESOLUTION_PATCH: &str = "```diff\ndiff --git a/xarray/core/variable.py b/xarray/core/variable.py\nindex 45553eb9..b31fec62 100644\n--- a/xarray/core/variable.py\n+++ b/xarray/core/variable.py\n@@ -218,7 +218,8 @@ def as_compatible_data(data, fastpath=False):\n         data = np.timedelta64(getattr(data, \"value\", data), \"ns\")\n \n     # we don't want nested self-described arrays\n-    data = getattr(data, \"values\", data)\n+    if isinstance(data, (pd.Series, pd.DataFrame)):\n+        data = data.values\n \n     if isinstance(data, np.ma.MaskedArray):\n         mask = np.ma.getmaskarray(data)\n```\n\nTests that now pass: xarray/tests/test_variable.py::TestAsCompatibleData::test_unsupported_type";

#[test]
fn resolution_session() {
    let (record, diagnostics) = session(&[
        (Role::User, RESOLUTION_TASK),
        (Role::Assistant, RESOLUTION_PATCH),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert!(
        record
            .task
            .starts_with("Variable.__setitem__ coercing types")
    );
    assert_eq!(record.language, Some(Language::Python));
    assert_eq!(record.files_changed, vec!["xarray/core/variable.py"]);
    assert_eq!(record.symbols_changed, vec!["as_compatible_data"]);
    assert_eq!(
        record.tests.passing,
        vec!["xarray/tests/test_variable.py::TestAsCompatibleData::test_unsupported_type"]
    );
    assert!(record.tests.failing.is_empty());
    assert_eq!(
        record.outcome,
        Outcome {
            final_diff: true,
            tests_passed_at_end: Some(true),
            status: OutcomeStatus::Resolved
        }
    );
    assert!(
        record
            .symbols_referenced
            .contains(&"Variable.__setitem__".to_string())
    );
    assert!(
        record
            .symbols_referenced
            .contains(&"ModelResult".to_string())
    );
    assert_eq!(kinds(&record), vec![("task", 0), ("fix", 1)]);
    let fix = &record.evidence[1];
    assert_eq!(fix.file.as_deref(), Some("xarray/core/variable.py"));
    assert_eq!(fix.symbols, vec!["as_compatible_data"]);
    assert!(
        fix.text
            .starts_with("--- a/xarray/core/variable.py\n+++ b/xarray/core/variable.py\n@@ -218,7")
    );
    assert!(RESOLUTION_PATCH[fix.byte_start..fix.byte_end].starts_with("@@ -218,7 +218,8 @@"));
}

#[test]
fn mini_swe_agent_session() {
    let (record, _) = session(&[
        (
            Role::User,
            "Variable.__setitem__ coercing types on objects with a values property",
        ),
        (
            Role::Assistant,
            "I'll run the reproduction script.\n\n```bash\npython reproduce_issue.py\n```",
        ),
        (
            Role::User,
            "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"/testbed/reproduce_issue.py\", line 9, in <module>\n    bad_indexed.loc[{'dim_0': 0}] = HasValues()\n  File \"/testbed/xarray/core/dataarray.py\", line 213, in __setitem__\n    self.data_array[pos_indexers] = value\nValueError: cannot set an array element with a sequence\n</output>",
        ),
        (
            Role::Assistant,
            "Now the tests.\n\n```bash\npython -m pytest xarray/tests/test_variable.py -q -k setitem\n```",
        ),
        (
            Role::User,
            "<returncode>0</returncode>\n<output>\n..                                                                       [100%]\n2 passed, 450 deselected in 1.23s\n</output>",
        ),
        (
            Role::Assistant,
            "```diff\ndiff --git a/xarray/core/variable.py b/xarray/core/variable.py\n--- a/xarray/core/variable.py\n+++ b/xarray/core/variable.py\n@@ -218,2 +218,3 @@ def as_compatible_data(data, fastpath=False):\n-    data = getattr(data, \"values\", data)\n+    if hasattr(data, \"values\") and hasattr(data, \"ndim\"):\n+        data = data.values\n```",
        ),
    ]);
    assert_eq!(
        record.commands,
        vec![
            CommandRecord {
                command: "python reproduce_issue.py".to_string(),
                exit_code: Some(1),
                message_index: 1
            },
            CommandRecord {
                command: "python -m pytest xarray/tests/test_variable.py -q -k setitem".to_string(),
                exit_code: Some(0),
                message_index: 3
            },
        ]
    );
    assert_eq!(record.errors.len(), 1);
    assert_eq!(record.errors[0].error_type, "ValueError");
    assert_eq!(record.errors[0].frames.len(), 2);
    assert_eq!(
        record.errors[0].frames[1].function.as_deref(),
        Some("__setitem__")
    );
    assert_eq!(record.files_changed, vec!["xarray/core/variable.py"]);
    assert_eq!(record.symbols_changed, vec!["as_compatible_data"]);
    assert_eq!(record.outcome.status, OutcomeStatus::Resolved);
    assert_eq!(record.outcome.tests_passed_at_end, Some(true));
    assert_eq!(
        kinds(&record),
        vec![
            ("task", 0),
            ("step", 1),
            ("error", 2),
            ("step", 3),
            ("fix", 5)
        ]
    );
    let step = &record.evidence[1];
    assert!(
        step.text
            .starts_with("$ python reproduce_issue.py\n<returncode>1</returncode>")
    );
    assert_eq!(step.file.as_deref(), Some("reproduce_issue.py"));
    let error = &record.evidence[2];
    assert_eq!(
        error.file.as_deref(),
        Some("/testbed/xarray/core/dataarray.py")
    );
    assert_eq!(error.symbols, vec!["__setitem__", "<module>"]);
}

#[test]
fn moatless_session_with_json_actions_and_diff_observation() {
    let observation = r#"{"diff": "--- src/_pytest/junitxml.py\n+++ src/_pytest/junitxml.py\n@@ -486,3 +486,4 @@\n         self.global_properties = []\n+        self.hostname = os.uname()[1]\n \n         # List of reports\n", "updated": true, "error": null, "new_span_ids": []}"#;
    let (record, diagnostics) = session(&[
        (
            Role::User,
            "Hostname and timestamp properties in generated JUnit XML reports",
        ),
        (
            Role::Assistant,
            r#"{"state": "SearchLoop_Searching", "name": "search", "query": "LogXML class", "file_pattern": "**/junitxml.py"}"#,
        ),
        (
            Role::User,
            r#"{"file_context": [{"file_path": "src/_pytest/junitxml.py", "spans": [{"span_id": "LogXML", "tokens": 265}]}]}"#,
        ),
        (
            Role::Assistant,
            "The LogXML class is responsible.\n\n{\"state\": \"SearchLoop_Searching\", \"name\": \"identify\", \"files_with_spans\": [{\"file_path\": \"src/_pytest/junitxml.py\", \"span_ids\": [\"LogXML\", \"LogXML.pytest_sessionfinish\"]}]}",
        ),
        (Role::User, observation),
        (
            Role::Assistant,
            r#"{"state": "CodeLoop_Pending", "name": "finish", "reason": "Added hostname."}"#,
        ),
        (Role::User, "null"),
        (
            Role::Assistant,
            "```diff\ndiff --git a/src/_pytest/junitxml.py b/src/_pytest/junitxml.py\nindex 15c630b1d..085c4fa9e 100644\n--- a/src/_pytest/junitxml.py\n+++ b/src/_pytest/junitxml.py\n@@ -486,2 +486,3 @@ class LogXML:\n         self.node_reporters = {}  # nodeid -> _NodeReporter\n+        self.hostname = os.uname()[1]\n         self.global_properties = []\n```",
        ),
    ]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    assert_eq!(record.files_changed, vec!["src/_pytest/junitxml.py"]);
    assert_eq!(record.symbols_changed, vec!["LogXML"]);
    let commands: Vec<&str> = record
        .commands
        .iter()
        .map(|command| command.command.as_str())
        .collect();
    assert_eq!(
        commands,
        vec![
            "search file_pattern=\"**/junitxml.py\" query=\"LogXML class\"",
            "identify",
            "finish reason=\"Added hostname.\""
        ]
    );
    assert!(
        record
            .symbols_referenced
            .contains(&"LogXML.pytest_sessionfinish".to_string())
    );
    // The diff inside the JSON observation is a fix whose range points into the raw JSON.
    let json_fix = record
        .evidence
        .iter()
        .find(|evidence| evidence.kind == EvidenceKind::Fix && evidence.message_index == 4)
        .expect("fix from the JSON observation");
    assert!(
        observation[json_fix.byte_start..json_fix.byte_end].starts_with("@@ -486,3 +486,4 @@\\n")
    );
    assert!(
        json_fix
            .text
            .contains("\n+        self.hostname = os.uname()[1]\n")
    );
    assert_eq!(record.outcome.status, OutcomeStatus::Resolved);
    assert_eq!(record.outcome.tests_passed_at_end, None);
}

#[test]
fn autocoderover_session_with_test_log() {
    let (record, _) = session(&[
        (Role::User, "Display fixture scope with `pytest --fixtures`"),
        (
            Role::Assistant,
            "Search:\n```python\nsearch_class(\"FixtureDef\")\nsearch_method_in_class(\"__init__\", \"FixtureDef\")\n```",
        ),
        (
            Role::User,
            "Search result 1: <file>src/_pytest/fixtures.py</file> <class>FixtureDef</class> <code>class FixtureDef(object):\n    def __init__(self, fixturemanager):\n        self._fixturemanager = fixturemanager\n    def addfinalizer(self, finalizer):\n        pass\n</code>",
        ),
        (
            Role::Assistant,
            "```diff\ndiff --git a/src/_pytest/fixtures.py b/src/_pytest/fixtures.py\n--- a/src/_pytest/fixtures.py\n+++ b/src/_pytest/fixtures.py\n@@ -634,3 +634,4 @@ class FixtureRequest(FuncargnamesCompatAttr):\n     def __repr__(self):\n+        return f\"{self.func.__name__} (scope='{self.scope}')\"\n         return \"<FixtureRequest for %r>\" % (self.node)\n```",
        ),
        (
            Role::User,
            "PASSED testing/python/fixtures.py::TestShowFixtures::test_show_fixtures\nFAILED testing/python/fixtures.py::TestShowFixtures::test_show_fixtures_verbose - AssertionError: assert 'scope' in out\n=============== 3 failed, 169 passed, 1 xfailed in 15.18 seconds ===============\n[pytest-dev__pytest__4.4] [pytest-dev__pytest-5221] Return Code: 1 \n\n>>>>> Some Tests Failed\n",
        ),
    ]);
    assert_eq!(record.symbols_changed, vec!["FixtureRequest.__repr__"]);
    assert!(record.commands.is_empty());
    assert_eq!(
        record.tests.failing,
        vec!["testing/python/fixtures.py::TestShowFixtures::test_show_fixtures_verbose"]
    );
    assert_eq!(
        record.tests.passing,
        vec!["testing/python/fixtures.py::TestShowFixtures::test_show_fixtures"]
    );
    assert_eq!(record.errors.len(), 1);
    assert_eq!(record.errors[0].error_type, "AssertionError");
    assert_eq!(
        record.outcome,
        Outcome {
            final_diff: true,
            tests_passed_at_end: Some(false),
            status: OutcomeStatus::Failed
        }
    );
    for expected in ["FixtureDef", "__init__", "FixtureDef.addfinalizer"] {
        assert!(
            record.symbols_referenced.contains(&expected.to_string()),
            "{expected} in {:?}",
            record.symbols_referenced
        );
    }
}

#[test]
fn swe_agent_session_ending_without_diff() {
    let (record, _) = session(&[
        (Role::User, "PolyFit is not robust to missing data"),
        (
            Role::Assistant,
            "Let me look.\n```bash\nopen seaborn/_stats/regression.py\n```",
        ),
        (
            Role::User,
            "[File: /mwaskom__seaborn/seaborn/_stats/regression.py (47 lines total)]\n10:@dataclass\n11:class PolyFit(Stat):\n22:    def _fit_predict(self, data):\n23:        return data\n",
        ),
        (Role::Assistant, "Submitting.\n```bash\nsubmit\n```"),
    ]);
    assert_eq!(
        record
            .commands
            .iter()
            .map(|c| c.command.as_str())
            .collect::<Vec<_>>(),
        vec!["open seaborn/_stats/regression.py", "submit"]
    );
    assert!(
        record
            .symbols_referenced
            .contains(&"PolyFit._fit_predict".to_string())
    );
    assert_eq!(record.language, Some(Language::Python));
    assert_eq!(record.outcome.status, OutcomeStatus::Unknown);
    assert!(!record.outcome.final_diff);
}

#[test]
fn run_ending_in_error_without_diff_failed() {
    let (record, _) = session(&[
        (Role::User, "Fix the crash"),
        (Role::Assistant, "```bash\ncargo run\n```"),
        (
            Role::User,
            "thread 'main' panicked at src/main.rs:3:5:\nindex out of bounds\nExit code: 101",
        ),
    ]);
    assert_eq!(record.commands[0].exit_code, Some(101));
    assert_eq!(record.errors[0].error_type, "panic");
    assert_eq!(record.language, Some(Language::Rust));
    assert_eq!(record.outcome.status, OutcomeStatus::Failed);
}

#[test]
fn later_test_outcome_overrides_earlier() {
    let (record, _) = session(&[
        (Role::User, "task"),
        (Role::Assistant, "```bash\npytest\n```"),
        (
            Role::User,
            "FAILED tests/test_a.py::test_x - ValueError: no\n1 failed in 0.1s\n",
        ),
        (Role::Assistant, "```bash\npytest\n```"),
        (
            Role::User,
            "PASSED tests/test_a.py::test_x\n1 passed in 0.1s\n",
        ),
    ]);
    assert_eq!(record.tests.passing, vec!["tests/test_a.py::test_x"]);
    assert!(record.tests.failing.is_empty());
    assert_eq!(record.outcome.tests_passed_at_end, Some(true));
}

#[test]
fn task_is_capped_on_a_char_boundary_and_serializes() {
    let long_task = "é".repeat(MAX_TASK_CHARS + 10);
    let (record, _) = session(&[(Role::User, &long_task)]);
    assert_eq!(record.task.chars().count(), MAX_TASK_CHARS);
    let json = serde_json::to_value(&record).expect("serializes");
    for field in [
        "task",
        "language",
        "files_changed",
        "symbols_changed",
        "symbols_referenced",
        "errors",
        "tests",
        "commands",
        "outcome",
        "evidence",
    ] {
        assert!(json.get(field).is_some(), "{field} missing");
    }
    let error = ErrorRecord {
        error_type: "ValueError".to_string(),
        message: "m".to_string(),
        frames: vec![],
    };
    let value = serde_json::to_value(&error).expect("serializes");
    assert_eq!(value["type"], "ValueError");
    let back: SessionRecord = serde_json::from_value(json).expect("deserializes");
    assert_eq!(back, record);
}

#[test]
fn empty_and_agent_only_sessions() {
    let (record, diagnostics) = session(&[]);
    assert_eq!(record.task, "");
    assert_eq!(record.outcome.status, OutcomeStatus::Unknown);
    assert!(diagnostics.is_empty());
    let (record, _) = session(&[(Role::Assistant, "{\"broken\": ")]);
    assert_eq!(record.task, "");
}

#[test]
fn malformed_json_is_diagnosed() {
    let (_, diagnostics) = session(&[
        (Role::User, "task"),
        (
            Role::Assistant,
            "{\"name\": \"bash\", \"arguments\": {\"command\": \"ls",
        ),
    ]);
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].message_index, 1);
}

// ---------------------------------------------------------------- robustness

/// A deterministic pseudo-random byte generator (xorshift).
fn pseudo_random_bytes(length: usize, mut state: u64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(length);
    while bytes.len() < length {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(length);
    bytes
}

#[test]
fn two_megabytes_of_garbage() {
    let bytes = pseudo_random_bytes(2 * 1024 * 1024, 0x9e37_79b9_7f4a_7c15);
    let garbage = String::from_utf8_lossy(&bytes).into_owned();
    let (record, _) = session(&[
        (Role::User, &garbage),
        (Role::Assistant, &garbage),
        (Role::User, &garbage),
    ]);
    assert!(record.evidence.len() <= MAX_EVIDENCE);
}

#[test]
fn random_bytes_sprinkled_with_markers() {
    let markers = [
        "diff --git a/x b/y\n",
        "@@ -1,3 +1,2 @@ def f(\n",
        "--- a/é.py\n+++ b/é.py\n",
        "Traceback (most recent call last):\n",
        "  File \"x.py\", line 99999999999999, in \n",
        "thread 'main' panicked at ",
        "panic: ",
        "goroutine 1 [running]:\n",
        "    at foo (x.js:1:2)\n",
        "```bash\n",
        "{\"name\": \"bash\", \"arguments\": \"{\\\"command\\\": \\\"",
        "<returncode>99999999999</returncode>",
        "FAILED x.py::t - ",
        "Tests that now pass: ",
        "____ t ____\nE   ",
        "error[E0308]: x\n  --> a.rs:1:1\n",
        "[File: a.py (3 lines total)]\n1:def f(\n",
        "<file>a.py</file><code>class",
        "\u{feff}",
        "é",
        "\n",
    ];
    for seed in 1..40u64 {
        let bytes = pseudo_random_bytes(8_000, seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
        let mut text = String::new();
        for chunk in bytes.chunks(16) {
            let pick = chunk[0] as usize % (markers.len() + 4);
            match markers.get(pick) {
                Some(marker) => text.push_str(marker),
                None => text.push_str(&String::from_utf8_lossy(&chunk[1..])),
            }
        }
        let _ = session(&[
            (Role::User, &text),
            (Role::Assistant, &text),
            (Role::User, &text),
        ]);
    }
}

#[test]
fn printable_garbage_posing_as_code() {
    // Printable noise passes the code-likeness check; only the parse clock
    // bounds tree-sitter on it.
    let bytes = pseudo_random_bytes(2 * 1024 * 1024, 0x1234_5678_9abc_def1);
    let mut message = String::new();
    for (index, chunk) in bytes.chunks(100).enumerate() {
        if index.is_multiple_of(400) {
            message.push_str(if index.is_multiple_of(800) {
                "```python\n"
            } else {
                "--- a/noise.py\n+++ b/noise.py\n@@ -1,0 +1,399 @@ def noise(\n"
            });
        }
        message.push('+');
        message.extend(chunk.iter().map(|byte| char::from(b' ' + byte % 95)));
        message.push('\n');
    }
    let (record, _) = session(&[
        (Role::User, "task"),
        (Role::User, &message),
        (Role::Assistant, &message),
    ]);
    assert!(record.files_changed.contains(&"noise.py".to_string()));
}

#[test]
fn ten_thousand_line_diff() {
    let mut diff = String::from(
        "```diff\ndiff --git a/big.py b/big.py\nnew file mode 100644\n--- /dev/null\n+++ b/big.py\n@@ -0,0 +1,10000 @@\n",
    );
    for index in 0..10_000usize {
        if index.is_multiple_of(10) {
            diff.push_str(&format!("+def function_{index}(x):\n"));
        } else {
            diff.push_str(&format!("+    x = x + call_{index}(x)\n"));
        }
    }
    diff.push_str("```\n");
    let (record, _) = session(&[(Role::User, "task"), (Role::Assistant, &diff)]);
    assert_eq!(record.files_changed, vec!["big.py"]);
    assert!(record.symbols_changed.contains(&"function_0".to_string()));
    assert!(record.symbols_changed.len() <= MAX_SYMBOLS_CHANGED);
    // Only a new file and no test run: not evidence of a fix.
    assert_eq!(record.outcome.status, OutcomeStatus::Unknown);
}

#[test]
fn traceback_with_a_thousand_frames() {
    let mut trace = String::from("Traceback (most recent call last):\n");
    for index in 0..1_000 {
        trace.push_str(&format!(
            "  File \"pkg/m{index}.py\", line {index}, in f{index}\n    f()\n"
        ));
    }
    trace.push_str("RecursionError: maximum recursion depth exceeded\n");
    let (record, _) = session(&[(Role::User, "task"), (Role::User, &trace)]);
    assert_eq!(record.errors.len(), 1);
    assert_eq!(record.errors[0].frames.len(), trace::MAX_FRAMES_PER_ERROR);
    assert_eq!(record.errors[0].error_type, "RecursionError");
}

#[test]
fn deeply_nested_code_in_a_diff_and_a_view() {
    let nested = format!("{}0{}", "(".repeat(5_000), ")".repeat(5_000));
    let diff =
        format!("--- a/x.py\n+++ b/x.py\n@@ -1,1 +1,2 @@\n def f():\n+    return {nested}\n");
    let view = format!("```python\nx = {}\n```\n", "[".repeat(5_000));
    let (record, _) = session(&[
        (Role::User, "task"),
        (Role::Assistant, &diff),
        (Role::User, &view),
    ]);
    assert_eq!(record.symbols_changed, vec!["f"]);
}

#[test]
fn huge_single_line_and_many_json_candidates() {
    let line = "x".repeat(3 * 1024 * 1024);
    let braces = "{\n".repeat(100_000);
    let quotes = "\"a\\nb\" ".repeat(50_000);
    let json_like = format!("{{\"k\": [{quotes}\"\"]}}");
    let _ = session(&[
        (Role::User, &line),
        (Role::Assistant, &braces),
        (Role::User, &json_like),
        (Role::Assistant, &json_like),
    ]);
}

#[test]
fn evidence_kinds_keep_their_wire_names() {
    for (kind, name) in EvidenceKind::ALL
        .into_iter()
        .zip(["task", "fix", "error", "step"])
    {
        assert_eq!(kind.as_str(), name);
        let json = serde_json::to_string(&kind).expect("serializes");
        assert_eq!(json, format!("\"{name}\""));
        let parsed: EvidenceKind = serde_json::from_str(&json).expect("parses");
        assert_eq!(parsed, kind);
    }
    assert_eq!(format!("{:<5}|", EvidenceKind::Fix), "fix  |");
}

#[test]
fn a_stored_record_with_an_unknown_evidence_kind_fails_to_parse_clearly() {
    let (record, _) = session(&[(Role::User, "the parser rejects trailing commas")]);
    let mut json = serde_json::to_value(&record).expect("serializes");
    json["evidence"][0]["kind"] = serde_json::Value::from("trace");
    let error = serde_json::from_value::<SessionRecord>(json)
        .expect_err("an unknown kind")
        .to_string();
    assert!(
        error.contains("unknown variant `trace`") && error.contains("`task`"),
        "{error}"
    );
}

/// An OpenHands run whose task was to create a file, which it did and then
/// called `finish`, ended `unknown`: a created file was never taken as a fix.
#[test]
fn run_that_created_a_file_and_finished_is_resolved() {
    let create = r#"{"name": "str_replace_editor", "arguments": {"command": "create", "path": "/workspace/game.py", "file_text": "class Game:\n    def move(self):\n        return 1\n"}}"#;
    let messages = [
        (Role::User, "Write a 2048 game in game.py."),
        (Role::Assistant, create),
        (
            Role::User,
            "File created successfully at: /workspace/game.py",
        ),
        (Role::Assistant, r#"{"name": "finish", "arguments": {}}"#),
    ];
    let (record, _) = session(&messages);
    assert_eq!(record.files_changed, vec!["game.py"]);
    assert_eq!(record.outcome.status, OutcomeStatus::Resolved);
    // Without the finish call the run does not say it is done.
    let (record, _) = session(&messages[..3]);
    assert_eq!(record.outcome.status, OutcomeStatus::Unknown);
}

/// A Claude Code session as an integrator renders it: the working
/// directory as an `<environment_context>` prefix, calls as `Tool call:`
/// lines with their JSON arguments.
fn claude_code_session(cwd: &str) -> Vec<(Role, String)> {
    let edit = format!(
        "Tool call: Edit\n{}",
        serde_json::json!({"file_path": format!("{cwd}/shop/cart.py"), "old_string": "    return total\n", "new_string": "    return round(total, 2)\n"})
    );
    let repro = format!(
        "Tool call: Write\n{}",
        serde_json::json!({"file_path": format!("{cwd}/test_issue.py"), "content": "from shop.cart import total\nobj = total([1.005])\nprint(obj)\n"})
    );
    let outside = format!(
        "Tool call: Write\n{}",
        serde_json::json!({"file_path": "/home/ann/desktop/run1/debug_cart.py", "content": "t1 = 1\n"})
    );
    let report = format!(
        "Tool call: Write\n{}",
        serde_json::json!({"file_path": format!("{cwd}/results.json"), "content": "{\"fixed\": true}\n"})
    );
    vec![
        (
            Role::User,
            format!(
                "<environment_context><cwd>{cwd}</cwd></environment_context>\n<command-name>/clear</command-name>"
            ),
        ),
        (
            Role::User,
            "Cart totals are off by a cent\nSee shop/cart.py".to_string(),
        ),
        (Role::Assistant, repro),
        (Role::User, "Tool result:\nFile created".to_string()),
        (
            Role::Assistant,
            "Tool call: Bash\n{\"command\": \"cd /home/ann/src/shop-app && python test_issue.py\"}"
                .to_string(),
        ),
        (Role::User, "Tool result:\n1.0".to_string()),
        (Role::Assistant, edit),
        (
            Role::User,
            "Tool result:\nThe file has been updated".to_string(),
        ),
        (Role::Assistant, outside),
        (Role::User, "Tool result:\nok".to_string()),
        (Role::Assistant, report),
        (Role::User, "Tool result:\nok".to_string()),
        (
            Role::Assistant,
            "Tool call: Bash\n{\"command\": \"python test_issue.py\"}".to_string(),
        ),
        (Role::User, "Tool result:\n1.01".to_string()),
    ]
}

fn owned_session(messages: &[(Role, String)]) -> (SessionRecord, Vec<Diagnostic>) {
    let borrowed: Vec<(Role, &str)> = messages
        .iter()
        .map(|(role, content)| (*role, content.as_str()))
        .collect();
    session(&borrowed)
}

#[test]
fn scratch_scripts_outputs_and_outside_files_are_not_changes() {
    let (record, diagnostics) = owned_session(&claude_code_session("/home/ann/src/shop-app"));
    // The cwd prefix and the `/clear` line are not the task.
    assert_eq!(
        record.task.lines().next(),
        Some("Cart totals are off by a cent")
    );
    assert_eq!(record.files_changed, vec!["shop/cart.py"]);
    for name in ["obj", "t1", "test_issue", "debug_cart"] {
        assert!(
            !record.symbols_changed.iter().any(|symbol| symbol == name),
            "{name} in {:?}",
            record.symbols_changed
        );
    }
    assert!(
        record
            .evidence
            .iter()
            .filter(|evidence| evidence.kind == EvidenceKind::Fix)
            .all(|evidence| evidence.file.as_deref() == Some("shop/cart.py")),
        "{:?}",
        record.evidence
    );
    assert!(
        diagnostics.iter().any(|diagnostic| diagnostic
            .message
            .contains("/home/ann/desktop/run1/debug_cart.py is outside the repository root")),
        "{diagnostics:?}"
    );
    // The scripts' runs stay as evidence.
    assert!(
        record
            .commands
            .iter()
            .any(|command| command.command.contains("python test_issue.py"))
    );
    // Edits are not commands.
    assert!(
        record
            .commands
            .iter()
            .all(|command| !command.command.starts_with("Edit"))
    );
}

/// Issue 40: a reproduction script the agent wrote at the root and ran is
/// scratch even when the diff it printed holds it (`git add -A` then `git
/// diff --cached`, as real Claude Code runs of SWE-bench tasks do); a new
/// module that diff holds beside the repository's sources is the change.
#[test]
fn a_scratch_script_a_final_diff_holds_is_still_scratch() {
    let mut messages = claude_code_session("/home/ann/src/shop-app");
    messages.push((
        Role::Assistant,
        "```diff\ndiff --git a/shop/cart.py b/shop/cart.py\n--- a/shop/cart.py\n+++ b/shop/cart.py\n@@ -1,1 +1,1 @@\n-    return total\n+    return round(total, 2)\ndiff --git a/shop/discount.py b/shop/discount.py\nnew file mode 100644\n--- /dev/null\n+++ b/shop/discount.py\n@@ -0,0 +1,1 @@\n+RATE = 1\ndiff --git a/test_issue.py b/test_issue.py\nnew file mode 100644\n--- /dev/null\n+++ b/test_issue.py\n@@ -0,0 +1,1 @@\n+print(1)\n```".to_string(),
    ));
    let (record, _) = owned_session(&messages);
    assert_eq!(
        record.files_changed,
        vec!["shop/cart.py".to_string(), "shop/discount.py".to_string()]
    );
}

#[test]
fn module_level_assignments_of_scripts_are_not_definitions_but_constants_are() {
    let (record, _) = session(&[
        (Role::User, "Raise the limit"),
        (
            Role::Assistant,
            "```diff\ndiff --git a/pkg/limits.py b/pkg/limits.py\n--- a/pkg/limits.py\n+++ b/pkg/limits.py\n@@ -1,3 +1,3 @@\n-MAX_ROWS = 10\n+MAX_ROWS = 20\n-obj = make()\n+obj = make(2)\n def f():\n```",
        ),
    ]);
    assert!(
        record.symbols_changed.contains(&"MAX_ROWS".to_string()),
        "{:?}",
        record.symbols_changed
    );
    assert!(
        !record.symbols_changed.contains(&"obj".to_string()),
        "{:?}",
        record.symbols_changed
    );
}

#[test]
fn malformed_wrappers_edits_and_paths_give_diagnostics() {
    // An empty problem_statement: the prompt stays the task.
    let (record, diagnostics) = session(&[
        (
            Role::User,
            "Fix this bug to solve the issue based on manual.yaml:\nproblem_statement:\nhints: none",
        ),
        (Role::Assistant, "Looking."),
    ]);
    assert!(record.task.starts_with("Fix this bug"));
    assert!(
        diagnostics
            .iter()
            .any(|diagnostic| diagnostic.message.contains("empty problem_statement")),
        "{diagnostics:?}"
    );
    // An edit object missing an argument, a path climbing above the root.
    let (record, diagnostics) = session(&[
        (
            Role::User,
            "<uploaded_files>\n/testbed\n</uploaded_files>\nFix it",
        ),
        (
            Role::Assistant,
            "Tool call: Edit\n{\"file_path\": \"/testbed/a.py\", \"old_string\": \"x = 1\"}",
        ),
        (Role::User, "Tool result:\nok"),
        (
            Role::Assistant,
            "Tool call: Write\n{\"file_path\": \"../../etc/passwd\", \"content\": \"root::0:0\"}",
        ),
        (Role::User, "Tool result:\nok"),
        (
            Role::Assistant,
            "```diff\n--- a/../../etc/shadow\n+++ b/../../etc/shadow\n@@ -1 +1 @@\n-a\n+b\n```",
        ),
    ]);
    assert!(
        record.files_changed.is_empty(),
        "{:?}",
        record.files_changed
    );
    for expected in [
        "Edit of /testbed/a.py without new_string",
        "../../etc/passwd climbs above the repository root",
        "../../etc/shadow climbs above the repository root",
    ] {
        assert!(
            diagnostics
                .iter()
                .any(|diagnostic| diagnostic.message.contains(expected)),
            "{expected}: {diagnostics:?}"
        );
    }
}

#[test]
fn absolute_and_relative_paths_to_one_file_are_one_file() {
    let (record, _) = session(&[
        (
            Role::User,
            "<environment_context><cwd>/home/ann/src/shop-app</cwd></environment_context>\nFix the cart",
        ),
        (
            Role::Assistant,
            "Tool call: Edit\n{\"file_path\": \"/home/ann/src/shop-app/shop/cart.py\", \"old_string\": \"a = 1\", \"new_string\": \"a = 2\"}",
        ),
        (Role::User, "Tool result:\nok"),
        (
            Role::Assistant,
            "Tool call: Edit\n{\"file_path\": \"shop/cart.py\", \"old_string\": \"b = 1\", \"new_string\": \"b = 2\"}",
        ),
        (Role::User, "Tool result:\nok"),
        (
            Role::Assistant,
            "Tool call: Edit\n{\"file_path\": \"./shop/../shop/cart.py\", \"old_string\": \"c = 1\", \"new_string\": \"c = 2\"}",
        ),
    ]);
    assert_eq!(record.files_changed, vec!["shop/cart.py"]);
}

#[test]
fn the_root_is_inferred_from_cd_and_the_files_viewed_and_edited() {
    let read = |path: &str| format!("Tool call: Read\n{{\"file_path\": \"{path}\"}}");
    let (record, diagnostics) = session(&[
        (Role::User, "Fix the cart"),
        (
            Role::Assistant,
            &read("/home/ann/src/shop-app/shop/cart.py"),
        ),
        (Role::User, "     1→a = 1\n"),
        (
            Role::Assistant,
            &read("/home/ann/src/shop-app/tests/test_cart.py"),
        ),
        (Role::User, "     1→b = 1\n"),
        (
            Role::Assistant,
            "Tool call: Edit\n{\"file_path\": \"/home/ann/src/shop-app/shop/cart.py\", \"old_string\": \"a = 1\", \"new_string\": \"a = 2\"}",
        ),
        (Role::User, "ok"),
        (
            Role::Assistant,
            "Tool call: Edit\n{\"file_path\": \"/home/ann/src/shop-app/tests/test_cart.py\", \"old_string\": \"b = 1\", \"new_string\": \"b = 2\"}",
        ),
        (Role::User, "ok"),
        (
            Role::Assistant,
            "Tool call: Edit\n{\"file_path\": \"/home/ann/.claude/plans/plan.md\", \"old_string\": \"x\", \"new_string\": \"y\"}",
        ),
    ]);
    assert_eq!(
        record.files_changed,
        vec!["shop/cart.py", "tests/test_cart.py"]
    );
    assert!(
        diagnostics.iter().any(|diagnostic| diagnostic
            .message
            .contains("plan.md is outside the repository root /home/ann/src/shop-app/")),
        "{diagnostics:?}"
    );
}

/// The minimized SWE-agent 1.x run of `getmoto__moto.694ce1f4.pr_6159`
/// (`fixtures/sessions/swe-agent-xml-moto-6159.json`): `str_replace_editor`
/// calls in XML, a reproduction script, the fix of the path part's regex
/// in `moto/apigateway/models.py` (message 35), a second regex (43), `submit`
/// (55).
fn moto_run() -> Vec<(Role, String)> {
    let fixture: serde_json::Value = serde_json::from_str(include_str!(
        "../../../fixtures/sessions/swe-agent-xml-moto-6159.json"
    ))
    .expect("fixture parses");
    fixture["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| {
            let role = Role::parse(message["role"].as_str().expect("role")).expect("known role");
            (
                role,
                message["content"].as_str().expect("content").to_string(),
            )
        })
        .collect()
}

/// The messages of `run` at `positions`, with `inserted` put after the
/// position it names.
fn spliced(
    run: &[(Role, String)],
    positions: &[usize],
    inserted: &[(usize, Role, &str)],
) -> Vec<(Role, String)> {
    let mut messages = Vec::new();
    for &position in positions {
        messages.push(run[position].clone());
        for (after, role, content) in inserted {
            if *after == position {
                messages.push((*role, content.to_string()));
            }
        }
    }
    messages
}

const MOTO_PYTEST: &str = "Let's run the API Gateway tests:\n\n<function=bash>\n<parameter=command>cd /testbed && python -m pytest tests/test_apigateway/test_apigateway.py -q -k resource</parameter>\n</function>";

/// Extraction of `messages` chunk by chunk, cut anywhere, equals the whole.
fn assert_resumable(messages: &[(Role, String)]) {
    let borrowed: Vec<(Role, &str)> = messages
        .iter()
        .map(|(role, content)| (*role, content.as_str()))
        .collect();
    let whole = serde_json::to_string(&extract_session(
        &IngestMessage::in_order(borrowed.iter().copied()),
        Clock::Ignored,
    ))
    .expect("json");
    for cut in 0..=borrowed.len() {
        let mut extractor = incremental::SessionExtractor::new(Clock::Ignored);
        extractor.extend(borrowed[..cut].iter().copied());
        let _ = extractor.record();
        extractor.extend(borrowed[cut..].iter().copied());
        let resumed = serde_json::to_string(&extractor.record()).expect("json");
        assert_eq!(resumed, whole, "cut at {cut}");
    }
}

/// Tests pass after the fix, then the run edits the fix again and stops:
/// the tests did not run on the end state, their verdict is not the
/// outcome's (it was `resolved` on the stale pass).
#[test]
fn a_test_pass_before_the_last_edit_is_not_the_end_state() {
    let run = moto_run();
    let passed = "OBSERVATION:\n........                                                                 [100%]\n=============== 8 passed, 173 deselected in 4.21s ===============";
    let mut positions: Vec<usize> = (0..=36).collect();
    positions.extend([43, 44]);
    let messages = spliced(
        &run,
        &positions,
        &[(36, Role::Assistant, MOTO_PYTEST), (36, Role::User, passed)],
    );
    let (record, _) = owned_session(&messages);
    assert_eq!(record.files_changed, vec!["moto/apigateway/models.py"]);
    assert_eq!(
        record.outcome,
        Outcome {
            final_diff: false,
            tests_passed_at_end: None,
            status: OutcomeStatus::Unknown
        }
    );
    assert_resumable(&messages);

    // Ending on the run, the pass is the end state's.
    let (record, _) = owned_session(&messages[..messages.len() - 2]);
    assert_eq!(record.outcome.tests_passed_at_end, Some(true));
    assert_eq!(record.outcome.status, OutcomeStatus::Resolved);

    // Edits of the reproduction script (scratch) after the run do not count.
    let mut positions: Vec<usize> = (0..=36).collect();
    positions.extend([39, 40]);
    let messages = spliced(
        &run,
        &positions,
        &[(36, Role::Assistant, MOTO_PYTEST), (36, Role::User, passed)],
    );
    let (record, _) = owned_session(&messages);
    assert_eq!(record.files_changed, vec!["moto/apigateway/models.py"]);
    assert_eq!(record.outcome.tests_passed_at_end, Some(true));
    assert_eq!(record.outcome.status, OutcomeStatus::Resolved);
    assert_resumable(&messages);

    // Nor does an edit the tool refused: the file is as the tests saw it.
    let refused = "OBSERVATION:\nNo replacement was performed, old_str `        if not re.match(\"^\\\\{?[a-zA-Z0-9._:-]+\\\\+?\\\\}?$\", path_part):` did not appear verbatim in /testbed/moto/apigateway/models.py.";
    let mut positions: Vec<usize> = (0..=36).collect();
    positions.push(43);
    let messages = spliced(
        &run,
        &positions,
        &[
            (36, Role::Assistant, MOTO_PYTEST),
            (36, Role::User, passed),
            (43, Role::User, refused),
        ],
    );
    let (record, _) = owned_session(&messages);
    assert_eq!(record.outcome.tests_passed_at_end, Some(true));
    assert_eq!(record.outcome.status, OutcomeStatus::Resolved);
    assert_resumable(&messages);
}

/// The reproduction test fails, the run fixes the code and submits without
/// running it again: its final diff stands and the failure is not the end
/// state (it was `failed`).
#[test]
fn a_test_failure_before_the_fix_is_not_the_end_state() {
    let run = moto_run();
    let failed = "OBSERVATION:\nF                                                                        [100%]\n=================================== FAILURES ===================================\n________________________ test_create_resource_with_colon ________________________\nE       botocore.errorfactory.BadRequestException: An error occurred (BadRequestException) when calling the CreateResource operation: Resource's path part only allow a-zA-Z0-9._- and curly braces at the beginning and the end and an optional plus sign before the closing brace.\n=========================== short test summary info ============================\nFAILED tests/test_apigateway/test_apigateway.py::test_create_resource_with_colon - botocore.errorfactory.BadRequestException: An error occurred (BadRequestException)\n1 failed, 172 deselected in 3.87s";
    let messages = spliced(
        &run,
        &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 35, 36, 55],
        &[(14, Role::Assistant, MOTO_PYTEST), (14, Role::User, failed)],
    );
    let (record, _) = owned_session(&messages);
    assert_eq!(record.files_changed, vec!["moto/apigateway/models.py"]);
    assert_eq!(
        record.tests.failing,
        vec!["tests/test_apigateway/test_apigateway.py::test_create_resource_with_colon"]
    );
    assert_eq!(
        record.outcome,
        Outcome {
            final_diff: true,
            tests_passed_at_end: None,
            status: OutcomeStatus::Resolved
        }
    );
    assert_resumable(&messages);

    // Before the fix, the failure is the end state.
    let (record, _) = owned_session(&messages[..17]);
    assert_eq!(record.outcome.tests_passed_at_end, Some(false));
    assert_eq!(record.outcome.status, OutcomeStatus::Failed);
}

/// Issue 40: a checkout under `/tmp` or under a path with a space is the
/// root once a git command ran there (`as_root` alone refuses both); the
/// changed file is then relative, as in any other clone.
#[test]
fn a_checkout_under_tmp_or_with_a_space_records_relative_paths() {
    for cwd in [
        "/tmp/demo-x1/shop-app",
        "/home/ann/My Projects/shop-app",
        "C:\\Users\\ann\\My Projects\\shop-app",
    ] {
        let mut messages = claude_code_session(cwd);
        messages.insert(
            2,
            (
                Role::Assistant,
                "Tool call: Bash\n{\"command\": \"git status --short\"}".to_string(),
            ),
        );
        messages.insert(3, (Role::User, "Tool result:\n".to_string()));
        let (record, _) = owned_session(&messages);
        assert_eq!(record.files_changed, vec!["shop/cart.py"], "{cwd}");
        assert!(
            record
                .evidence
                .iter()
                .filter(|evidence| evidence.kind == EvidenceKind::Fix)
                .all(|evidence| evidence.text.starts_with("--- a/shop/cart.py")),
            "{cwd}: {:?}",
            record.evidence
        );
    }
    // `git rev-parse --show-toplevel` names the root from a subdirectory.
    let mut messages = claude_code_session("/tmp/demo-x2/shop-app/shop");
    messages.insert(
        2,
        (
            Role::Assistant,
            "Tool call: Bash\n{\"command\": \"git rev-parse --show-toplevel\"}".to_string(),
        ),
    );
    messages.insert(
        3,
        (
            Role::User,
            "Tool result:\n/tmp/demo-x2/shop-app".to_string(),
        ),
    );
    let edit = format!(
        "Tool call: Edit\n{}",
        serde_json::json!({"file_path": "/tmp/demo-x2/shop-app/shop/tax.py", "old_string": "RATE = 1\n", "new_string": "RATE = 2\n"})
    );
    messages.push((Role::Assistant, edit));
    messages.push((
        Role::User,
        "Tool result:\nThe file has been updated".to_string(),
    ));
    let (record, _) = owned_session(&messages);
    assert!(
        record.files_changed.contains(&"shop/tax.py".to_string()),
        "{:?}",
        record.files_changed
    );
}
