//! Test results in tool output: per-test outcomes (pytest `PASSED`/`FAILED`
//! lines in `-rA` and verbose form, cargo `test x ... ok`, Go `--- FAIL: TestX`,
//! Jest `✓`/`✕`, unittest `test_x (mod.Class) ... ok`), run summaries (pytest
//! and sympy `=== 1 failed, 2 passed in 0.1s ===`, `test result: ok.`, Go
//! `ok`/`FAIL` package lines, Jest `Tests:`, Maven `Tests run:`, unittest
//! `Ran N tests` + `OK`/`FAILED`, SWE-bench harness `>>>>> All Tests Passed`),
//! and the resolution marker `Tests that now pass: a, b`.
//!
//! It reports what each text says; which run is the last one of the session is
//! left to [`super::outcome`].

use std::sync::LazyLock;

use regex::Captures;

use super::text::{
    Line, LiteralCursor, Pattern, contains_str, line_may_start_with, lines_with_offsets,
};

/// Outcomes kept per text.
const MAX_RESULTS_PER_TEXT: usize = 5_000;

/// Outcome of one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TestStatus {
    /// The test passed.
    Passed,
    /// The test failed or errored.
    Failed,
}

/// A test outcome seen in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestResult {
    /// Test id (`tests/x.py::test_y`, `foo::bar::test_x`, `TestX`).
    pub test_id: String,
    /// Passed or failed.
    pub status: TestStatus,
    /// Byte offset of the line.
    pub offset: usize,
}

/// The verdict of one test run (a summary line or marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TestRun {
    /// True when the run had passing tests and no failures or errors.
    pub passed: bool,
    /// Byte offset of the summary line.
    pub offset: usize,
    /// Byte offset just past the summary line.
    pub end: usize,
}

/// Everything test-related in one text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TestObservations {
    /// Per-test outcomes in text order.
    pub results: Vec<TestResult>,
    /// Run verdicts in text order.
    pub runs: Vec<TestRun>,
}

static PYTEST_VERBOSE: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(r"^(\S+::\S+) (PASSED|FAILED|ERROR|XPASS|XFAIL|SKIPPED)(?-u:\b)")
});
static SUMMARY_COUNT: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(r"(\d+) (passed|failed|errors?|error|xfailed|xpassed|skipped|deselected)(?-u:\b)")
});
static CARGO_TEST: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^test (\S+) \.\.\. (ok|FAILED|ignored)(?-u:\b)"));
static CARGO_RESULT: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^test result: (ok|FAILED)\."));
static GO_TEST: LazyLock<Pattern> = LazyLock::new(|| Pattern::new(r"^\s*--- (PASS|FAIL): (\S+)"));
static GO_PACKAGE: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^(ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\)|\[)"));
static JEST_TEST: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s*(✓|√|✔|✕|×|✖) (.+?)(?: \(\d+(?:\.\d+)? ?m?s\))?\s*$"));
static JEST_SUMMARY: LazyLock<Pattern> = LazyLock::new(|| Pattern::new(r"^Tests:\s+(.*)$"));
static MAVEN_SUMMARY: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+)"));
static UNITTEST_TEST: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(r"^(test\w*) \(([\w.]+)\)(?:\s*\S.*?)? \.\.\. (ok|FAIL|ERROR)\s*$")
});
static UNITTEST_RAN: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^Ran \d+ tests? in [\d.]+s"));

/// This module's patterns, each compiled at first use or by [`warm_up`].
fn patterns() -> [&'static Pattern; 11] {
    [
        &*PYTEST_VERBOSE,
        &*SUMMARY_COUNT,
        &*CARGO_TEST,
        &*CARGO_RESULT,
        &*GO_TEST,
        &*GO_PACKAGE,
        &*JEST_TEST,
        &*JEST_SUMMARY,
        &*MAVEN_SUMMARY,
        &*UNITTEST_TEST,
        &*UNITTEST_RAN,
    ]
}

/// Compiles this module's patterns now rather than at first use (see
/// [`super::warm_up`]); answers whether every one compiled.
pub(super) fn warm_up() -> bool {
    patterns().iter().all(|pattern| pattern.is_valid())
}

/// How the lines that [`parse_test_observations`] reads start, leading
/// whitespace skipped (a superset).
const OBSERVATION_STARTS: &[&str] = &[
    "Tests", ">>>>> ", "OK", "FAIL", "=", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "test",
    "--- ", "Ran ", "PASS", "XPASS", "ERROR ", "ok",
];

/// Reads the test outcomes and run verdicts of `text`.
pub(crate) fn parse_test_observations(text: &str) -> TestObservations {
    let hints = TextHints::of(text);
    let mut double_colon_lines = hints.double_colon.then(|| LiteralCursor::new("::", text));
    let mut maven_summary_lines = hints
        .maven_summary
        .then(|| LiteralCursor::new("Tests run: ", text));
    let mut reader = LineReader {
        hints,
        after_unittest_ran: false,
        observations: TestObservations::default(),
    };
    for line in lines_with_offsets(text) {
        if reader.observations.results.len() >= MAX_RESULTS_PER_TEXT {
            break;
        }
        // Every reading below starts with one of these (or a non-ASCII
        // mark), but the pytest and Maven lines, found by substring.
        let may_observe = line_may_start_with(line.text.as_bytes(), OBSERVATION_STARTS)
            || double_colon_lines
                .as_mut()
                .is_some_and(|lines| lines.in_line(&line))
            || maven_summary_lines
                .as_mut()
                .is_some_and(|lines| lines.in_line(&line));
        if may_observe {
            reader.read(&line);
        }
    }
    let mut observations = reader.observations;
    add_implied_run(&mut observations, text);
    observations
}

/// Which kinds of lines a text can hold, from substring searches once per
/// text rather than once per line.
#[derive(Debug, Clone, Copy)]
struct TextHints {
    /// The text holds `::` (pytest node ids).
    double_colon: bool,
    /// The text holds a Maven `Tests run: ` summary.
    maven_summary: bool,
    /// The text holds ` ... ` (unittest and cargo outcomes).
    unittest_result: bool,
}

impl TextHints {
    fn of(text: &str) -> TextHints {
        TextHints {
            double_colon: contains_str!(text, "::"),
            maven_summary: contains_str!(text, "Tests run: "),
            unittest_result: contains_str!(text, " ... "),
        }
    }
}

/// What one line says, when one of the readings claims it.
enum Reading {
    /// The verdict of a run: passed or not.
    Run(bool),
    /// The outcome of one test.
    Outcome(String, TestStatus),
    /// The line is of a known kind but says nothing usable.
    Nothing,
}

impl Reading {
    fn outcome(outcome: Option<(String, TestStatus)>) -> Reading {
        outcome.map_or(Reading::Nothing, |(test_id, status)| {
            Reading::Outcome(test_id, status)
        })
    }
}

/// Reads a text line by line into [`TestObservations`].
struct LineReader {
    hints: TextHints,
    /// A unittest `Ran N tests` line was read and its `OK` / `FAILED` not yet.
    after_unittest_ran: bool,
    observations: TestObservations,
}

impl LineReader {
    /// Reads one line: the first reading that claims it decides.
    fn read(&mut self, line: &Line<'_>) {
        let content = line.text;
        let trimmed = content.trim();
        if trimmed.is_empty() {
            return;
        }
        if let Some(list) = trimmed.strip_prefix("Tests that now pass:") {
            self.read_resolved(list, line);
            return;
        }
        let hints = self.hints;
        let reading = harness_verdict(trimmed)
            .or_else(|| self.unittest_verdict(content, trimmed))
            .or_else(|| summary_verdict(trimmed).map(Reading::Run))
            .or_else(|| pytest_short_line(content).map(|(id, status)| Reading::Outcome(id, status)))
            .or_else(|| pytest_verbose_outcome(content, hints))
            .or_else(|| cargo_reading(content))
            .or_else(|| go_reading(content, trimmed))
            .or_else(|| jest_summary(trimmed))
            .or_else(|| maven_summary(content, hints))
            .or_else(|| mocha_verdict(trimmed).map(Reading::Run))
            .or_else(|| unittest_outcome(content, hints))
            .or_else(|| jest_outcome(content));
        match reading {
            Some(Reading::Run(passed)) => self.observations.runs.push(TestRun {
                passed,
                offset: line.start,
                end: line.end,
            }),
            Some(Reading::Outcome(test_id, status)) => self.observations.results.push(TestResult {
                test_id,
                status,
                offset: line.start,
            }),
            Some(Reading::Nothing) | None => {}
        }
    }

    /// `Tests that now pass: a, b`: each test passed, and so did the run.
    fn read_resolved(&mut self, list: &str, line: &Line<'_>) {
        let mut any = false;
        for test_id in split_test_list(list) {
            any = true;
            self.observations.results.push(TestResult {
                test_id,
                status: TestStatus::Passed,
                offset: line.start,
            });
        }
        if any {
            self.observations.runs.push(TestRun {
                passed: true,
                offset: line.start,
                end: line.end,
            });
        }
    }

    /// unittest's `Ran N tests` line, and the `OK` / `FAILED (...)` after it.
    fn unittest_verdict(&mut self, content: &str, trimmed: &str) -> Option<Reading> {
        if self.after_unittest_ran {
            if trimmed == "OK" || trimmed.starts_with("OK (") {
                self.after_unittest_ran = false;
                return Some(Reading::Run(true));
            }
            if trimmed.starts_with("FAILED (") {
                self.after_unittest_ran = false;
                return Some(Reading::Run(false));
            }
        }
        if content.starts_with("Ran ") && UNITTEST_RAN.is_match(content) {
            self.after_unittest_ran = true;
            return Some(Reading::Nothing);
        }
        None
    }
}

/// The SWE-bench harness's `>>>>> All Tests Passed` and its failures.
fn harness_verdict(trimmed: &str) -> Option<Reading> {
    let verdict = trimmed.strip_prefix(">>>>> ")?;
    if verdict.starts_with("All Tests Passed") {
        return Some(Reading::Run(true));
    }
    let failed = verdict.starts_with("Some Tests Failed")
        || verdict.starts_with("Tests Errored")
        || verdict.starts_with("Tests Timed Out");
    Some(if failed {
        Reading::Run(false)
    } else {
        Reading::Nothing
    })
}

/// pytest's verbose `path::test PASSED`.
fn pytest_verbose_outcome(content: &str, hints: TextHints) -> Option<Reading> {
    if !hints.double_colon || !content.contains("::") {
        return None;
    }
    let captures = PYTEST_VERBOSE.captures(content)?;
    let status_of = |word: &str| match word {
        "PASSED" | "XPASS" => Some(TestStatus::Passed),
        "FAILED" | "ERROR" => Some(TestStatus::Failed),
        _ => None,
    };
    Some(Reading::outcome(id_and_status(&captures, status_of)))
}

/// cargo's `test result: ok.` and `test x ... ok`.
fn cargo_reading(content: &str) -> Option<Reading> {
    if !content.starts_with("test ") {
        return None;
    }
    if let Some(captures) = CARGO_RESULT.captures(content) {
        return Some(Reading::Run(
            captures.get(1).is_some_and(|m| m.as_str() == "ok"),
        ));
    }
    let captures = CARGO_TEST.captures(content)?;
    let status_of = |word: &str| match word {
        "ok" => Some(TestStatus::Passed),
        "FAILED" => Some(TestStatus::Failed),
        _ => None,
    };
    Some(Reading::outcome(id_and_status(&captures, status_of)))
}

/// Go's `--- FAIL: TestX`, a bare `PASS` / `FAIL`, and `ok  pkg  0.1s`.
fn go_reading(content: &str, trimmed: &str) -> Option<Reading> {
    if trimmed.starts_with("--- ")
        && let Some(captures) = GO_TEST.captures(content)
    {
        let status = if captures.get(1).is_some_and(|m| m.as_str() == "PASS") {
            TestStatus::Passed
        } else {
            TestStatus::Failed
        };
        return Some(Reading::outcome(
            captures
                .get(2)
                .map(|test_id| (test_id.as_str().to_string(), status)),
        ));
    }
    if content == "PASS" || content == "FAIL" {
        return Some(Reading::Run(content == "PASS"));
    }
    if content.starts_with("ok") || content.starts_with("FAIL") {
        let captures = GO_PACKAGE.captures(content)?;
        return Some(Reading::Run(
            captures.get(1).is_some_and(|m| m.as_str() == "ok"),
        ));
    }
    None
}

/// Jest's `Tests: 1 failed, 2 passed, 3 total`.
fn jest_summary(trimmed: &str) -> Option<Reading> {
    if !trimmed.starts_with("Tests:") {
        return None;
    }
    let captures = JEST_SUMMARY.captures(trimmed)?;
    let counts = captures.get(1).map_or("", |m| m.as_str());
    Some(verdict_from_counts(counts).map_or(Reading::Nothing, Reading::Run))
}

/// Maven's `Tests run: 3, Failures: 0, Errors: 0`.
fn maven_summary(content: &str, hints: TextHints) -> Option<Reading> {
    if !hints.maven_summary || !content.contains("Tests run: ") {
        return None;
    }
    let captures = MAVEN_SUMMARY.captures(content)?;
    let number = |index: usize| -> u64 {
        captures
            .get(index)
            .and_then(|m| m.as_str().parse().ok())
            .unwrap_or(0)
    };
    Some(Reading::Run(
        number(1) > 0 && number(2) == 0 && number(3) == 0,
    ))
}

/// unittest's `test_x (mod.Class) ... ok`.
fn unittest_outcome(content: &str, hints: TextHints) -> Option<Reading> {
    if !hints.unittest_result || !content.starts_with("test") || !content.contains(" ... ") {
        return None;
    }
    let captures = UNITTEST_TEST.captures(content)?;
    let name = captures.get(1).map_or("", |m| m.as_str());
    let owner = captures.get(2).map_or("", |m| m.as_str());
    let test_id = if owner.ends_with(&format!(".{name}")) {
        owner.to_string()
    } else {
        format!("{owner}.{name}")
    };
    let status = if captures.get(3).is_some_and(|m| m.as_str() == "ok") {
        TestStatus::Passed
    } else {
        TestStatus::Failed
    };
    Some(Reading::Outcome(test_id, status))
}

/// Jest's `✓ name (5 ms)` / `✕ name`.
fn jest_outcome(content: &str) -> Option<Reading> {
    if !content
        .trim_start()
        .starts_with(['✓', '√', '✔', '✕', '×', '✖'])
    {
        return None;
    }
    let captures = JEST_TEST.captures(content)?;
    let passed = matches!(captures.get(1).map_or("", |m| m.as_str()), "✓" | "√" | "✔");
    let status = if passed {
        TestStatus::Passed
    } else {
        TestStatus::Failed
    };
    Some(Reading::outcome(
        captures
            .get(2)
            .map(|name| (name.as_str().trim().to_string(), status)),
    ))
}

/// Outcomes with no verdict line (a cut log): the outcomes are the verdict.
fn add_implied_run(observations: &mut TestObservations, text: &str) {
    if !observations.runs.is_empty() || observations.results.is_empty() {
        return;
    }
    let passed = observations
        .results
        .iter()
        .all(|result| result.status == TestStatus::Passed);
    let offset = observations
        .results
        .last()
        .map_or(0, |result| result.offset);
    let end = text
        .get(offset..)
        .and_then(|rest| rest.find('\n'))
        .map_or(text.len(), |newline| offset + newline);
    observations.runs.push(TestRun {
        passed,
        offset,
        end,
    });
}

/// `PASSED path::test[params with spaces]` / `FAILED path::test - msg` (pytest -rA).
fn pytest_short_line(line: &str) -> Option<(String, TestStatus)> {
    let (status, rest) = if let Some(rest) = line.strip_prefix("PASSED ") {
        (TestStatus::Passed, rest)
    } else if let Some(rest) = line.strip_prefix("XPASS ") {
        (TestStatus::Passed, rest)
    } else if let Some(rest) = line.strip_prefix("FAILED ") {
        (TestStatus::Failed, rest)
    } else if let Some(rest) = line.strip_prefix("ERROR ") {
        (TestStatus::Failed, rest)
    } else {
        return None;
    };
    if !rest.contains("::") && !rest.contains(".py") {
        return None;
    }
    // Cut at " - " outside brackets (the failure message); any other space
    // outside brackets means this is not a node id.
    let mut depth = 0i32;
    let mut cut = rest.len();
    let bytes = rest.as_bytes();
    for (index, byte) in bytes.iter().enumerate() {
        match byte {
            b'[' => depth += 1,
            b']' => depth -= 1,
            b' ' if depth <= 0 => {
                if bytes.get(index..index + 3) == Some(b" - ") {
                    cut = index;
                    break;
                }
                if rest
                    .get(index..)
                    .is_some_and(|tail| !tail.trim().is_empty())
                {
                    return None;
                }
            }
            _ => {}
        }
    }
    let test_id = rest.get(..cut)?.trim();
    let file_part = test_id.split("::").next().unwrap_or(test_id);
    let looks_like_node_id = test_id.contains("::") || file_part.ends_with(".py");
    if !looks_like_node_id || test_id.len() > 500 {
        return None;
    }
    Some((test_id.to_string(), status))
}

/// A pytest / sympy summary line such as `=== 3 failed, 169 passed in 15.18 seconds ===`.
fn summary_verdict(line: &str) -> Option<bool> {
    let starts_like_summary = line.starts_with('=')
        || line.as_bytes().first().is_some_and(u8::is_ascii_digit)
        || line.starts_with("tests finished:");
    if !starts_like_summary || !line.contains(" in ") {
        return None;
    }
    if !(line.contains("passed") || line.contains("failed") || line.contains("error")) {
        return None;
    }
    verdict_from_counts(line)
}

/// The passed and failed counts a run's summary line gives: pytest's and
/// jest's `N passed, M failed`, cargo's `test result: ok. N passed; M
/// failed`, unittest's `Ran N tests` (all passed unless `FAILED
/// (failures=M)` follows on `next`).
pub(crate) fn run_counts(line: &str, next: &str) -> Option<(u64, u64)> {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix("Ran ") {
        let total: u64 = rest.split_whitespace().next()?.parse().ok()?;
        let failed: u64 = next
            .trim()
            .strip_prefix("FAILED (")
            .map(|inner| {
                inner
                    .split([',', ')'])
                    .filter_map(|part| part.split_once('='))
                    .filter(|(name, _)| matches!(name.trim(), "failures" | "errors"))
                    .filter_map(|(_, count)| count.trim().parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0);
        return Some((total.saturating_sub(failed), failed));
    }
    let mut passed = 0u64;
    let mut failed = 0u64;
    let mut seen = false;
    for captures in SUMMARY_COUNT.captures_all(line) {
        let count: u64 = captures
            .get(1)
            .and_then(|m| m.as_str().parse().ok())
            .unwrap_or(0);
        match captures.get(2).map_or("", |m| m.as_str()) {
            "passed" | "xpassed" => passed += count,
            "failed" | "error" | "errors" => failed += count,
            _ => continue,
        }
        seen = true;
    }
    seen.then_some((passed, failed))
}

/// Pass/fail from `N passed, M failed, K errors` counts; `None` without any.
fn verdict_from_counts(text: &str) -> Option<bool> {
    let mut passed = 0u64;
    let mut failed = 0u64;
    let mut seen = false;
    for captures in SUMMARY_COUNT.captures_all(text) {
        let count: u64 = captures
            .get(1)
            .and_then(|m| m.as_str().parse().ok())
            .unwrap_or(0);
        match captures.get(2).map_or("", |m| m.as_str()) {
            "passed" | "xpassed" => {
                passed += count;
                seen = true;
            }
            "failed" | "error" | "errors" => {
                failed += count;
                seen = true;
            }
            _ => {}
        }
    }
    seen.then_some(failed == 0 && passed > 0)
}

/// Mocha's `N passing` / `N failing`.
fn mocha_verdict(line: &str) -> Option<bool> {
    let (number, word) = line.split_once(' ')?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let word = word.split_whitespace().next()?;
    match word {
        "passing" => Some(true),
        "failing" => Some(false),
        _ => None,
    }
}

/// Splits `a, b[x, y], c` on commas outside brackets.
fn split_test_list(list: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for character in list.chars() {
        match character {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            _ => {}
        }
        if character == ',' && depth <= 0 {
            let item = current.trim();
            if !item.is_empty() {
                items.push(item.to_string());
            }
            current.clear();
        } else {
            current.push(character);
        }
    }
    let item = current.trim();
    if !item.is_empty() {
        items.push(item.to_string());
    }
    items.truncate(MAX_RESULTS_PER_TEXT);
    items
}

/// The result of a line whose pattern captures the test id as group 1 and
/// a status word as group 2; `None` when `status_of` does not know the word.
fn id_and_status(
    captures: &Captures<'_>,
    status_of: impl Fn(&str) -> Option<TestStatus>,
) -> Option<(String, TestStatus)> {
    let status = status_of(captures.get(2).map_or("", |m| m.as_str()))?;
    Some((captures.get(1)?.as_str().to_string(), status))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected_results: &[(&str, TestStatus)], expected_runs: &[bool]) {
        let observations = parse_test_observations(input);
        let results: Vec<(&str, TestStatus)> = observations
            .results
            .iter()
            .map(|result| (result.test_id.as_str(), result.status))
            .collect();
        assert_eq!(results, expected_results, "results of:\n{input}");
        let runs: Vec<bool> = observations.runs.iter().map(|run| run.passed).collect();
        assert_eq!(runs, expected_runs, "runs of:\n{input}");
    }

    use TestStatus::{Failed, Passed};

    #[test]
    fn pytest_ra_log_from_swe_bench_harness() {
        check(
            "PASSED testing/python/fixtures.py::TestRequestScopeAccess::test_setup[session--fspath class function module]\nFAILED testing/code/test_excinfo.py::test_excinfo_exconly - AttributeError: '...\nFAILED testing/code/test_excinfo.py::TestX::test_y[cause-The above exception - x]\n================ 9 failed, 84 passed, 2 skipped in 2.26 seconds ================\n[pytest-dev__pytest__4.6] [pytest-dev__pytest-5413] Return Code: 1 \n\n>>>>> Some Tests Failed\n",
            &[
                (
                    "testing/python/fixtures.py::TestRequestScopeAccess::test_setup[session--fspath class function module]",
                    Passed,
                ),
                ("testing/code/test_excinfo.py::test_excinfo_exconly", Failed),
                (
                    "testing/code/test_excinfo.py::TestX::test_y[cause-The above exception - x]",
                    Failed,
                ),
            ],
            &[false, false],
        );
        check(
            "========================== 34 passed in 2.50 seconds ===========================\n>>>>> All Tests Passed\n",
            &[],
            &[true, true],
        );
    }

    #[test]
    fn pytest_verbose_and_quiet_summaries() {
        check(
            "tests/test_a.py::test_one PASSED                                   [ 50%]\ntests/test_a.py::test_two FAILED                                   [100%]\n1 failed, 1 passed in 0.12s\n",
            &[
                ("tests/test_a.py::test_one", Passed),
                ("tests/test_a.py::test_two", Failed),
            ],
            &[false],
        );
        check(
            "= tests finished: 37 passed, 1 expected to fail, in 2.34 seconds =\n",
            &[],
            &[true],
        );
        check(
            "============ no tests ran in 0.01s ============\n",
            &[],
            &[],
        );
    }

    #[test]
    fn resolution_marker() {
        check(
            "```\n\nTests that now pass: misc::glob_always_case_insensitive, tests/x.py::test_a[1, 2]\n",
            &[
                ("misc::glob_always_case_insensitive", Passed),
                ("tests/x.py::test_a[1, 2]", Passed),
            ],
            &[true],
        );
    }

    #[test]
    fn cargo_go_jest_maven_unittest_mocha() {
        check(
            "running 2 tests\ntest printer::tests::replace ... ok\ntest regression::r1319 ... FAILED\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored\n",
            &[
                ("printer::tests::replace", Passed),
                ("regression::r1319", Failed),
            ],
            &[false],
        );
        check(
            "=== RUN   TestDial\n--- FAIL: TestDial (0.00s)\n    dial_test.go:12: expected nil\nFAIL\nFAIL\tgoogle.golang.org/grpc\t0.015s\n",
            &[("TestDial", Failed)],
            &[false, false],
        );
        check(
            "  ✓ parses ISO strings (3 ms)\n  ✕ handles null\nTests:       1 failed, 1 passed, 2 total\n",
            &[("parses ISO strings", Passed), ("handles null", Failed)],
            &[false],
        );
        check(
            "[INFO] Tests run: 12, Failures: 0, Errors: 0, Skipped: 1\n",
            &[],
            &[true],
        );
        check(
            "test_basic (tests.test_x.TestX) ... ok\n----------------------------------------------------------------------\nRan 1 test in 0.001s\n\nOK\n",
            &[("tests.test_x.TestX.test_basic", Passed)],
            &[true],
        );
        check("  3 passing (12ms)\n  1 failing\n", &[], &[true, false]);
    }

    #[test]
    fn summary_lines_give_counts() {
        // The hand-written Claude Code session of issue 40: `8 passed`.
        assert_eq!(run_counts("8 passed in 0.12s", ""), Some((8, 0)));
        assert_eq!(
            run_counts("=== 3 failed, 169 passed in 15.18 seconds ===", ""),
            Some((169, 3))
        );
        assert_eq!(
            run_counts(
                "test result: FAILED. 184 passed; 1 failed; 0 ignored; 0 measured",
                ""
            ),
            Some((184, 1))
        );
        assert_eq!(
            run_counts("Tests:       1 failed, 7 passed, 8 total", ""),
            Some((7, 1))
        );
        assert_eq!(run_counts("Ran 5 tests in 0.003s", "OK"), Some((5, 0)));
        assert_eq!(
            run_counts("Ran 5 tests in 0.003s", "FAILED (failures=1, errors=1)"),
            Some((3, 2))
        );
        assert_eq!(run_counts("ok  \tgithub.com/a/b\t0.01s", ""), None);
    }

    #[test]
    fn outcomes_without_summary_make_a_verdict() {
        check(
            "FAILED tests/x.py::test_y - ValueError: bad\n",
            &[("tests/x.py::test_y", Failed)],
            &[false],
        );
    }

    #[test]
    fn harness_error_lines_are_not_tests() {
        check(
            "ERROR conda.cli.main_run:execute(124): `conda run pytest -rA testing/python/fixtures.py` failed. (See above for error)\n",
            &[],
            &[],
        );
    }

    #[test]
    fn prose_has_no_tests() {
        check(
            "We ran the tests in CI and 2 passed.\nThe test passed.\n",
            &[],
            &[],
        );
    }

    #[test]
    fn every_pattern_compiles() {
        for pattern in patterns() {
            assert!(pattern.is_valid(), "{pattern:?}");
        }
    }
}
