//! The text renderers of `precedent inspect` and `precedent search` (the JSON
//! forms are the API's).

use precedent_core::domain::{MemoryItem, UserId};
use precedent_core::language::Language;
use precedent_core::time::rfc3339_from_ms;
use precedent_rank as rank;
use precedent_service::read::inspect::{SessionDetail, SessionSummary};
use precedent_service::read::search::Explained;

/// The items of a Search answer: a header line each, then the content
/// indented.
pub(super) fn write_items(out: &mut String, items: &[MemoryItem]) {
    for (rank, item) in items.iter().enumerate() {
        write_item(out, rank, None, item);
    }
}

/// Items of several memories, each headed with its memory's key.
pub(super) fn write_items_of_memories(out: &mut String, items: &[(String, MemoryItem)]) {
    for (rank, (user_id, item)) in items.iter().enumerate() {
        write_item(out, rank, Some(user_id), item);
    }
}

/// One item: its header line (with its memory's key when given), then its
/// content indented.
fn write_item(out: &mut String, rank: usize, memory: Option<&str>, item: &MemoryItem) {
    use std::fmt::Write;
    let memory = memory
        .map(|user_id| format!("  memory {user_id}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "#{} {} score {:.3}{memory}  session {}  (request {}, message {})",
        rank + 1,
        item.kind,
        item.score,
        item.session_id,
        item.request_id,
        item.message_start
    );
    for line in item.content.lines() {
        let _ = writeln!(out, "    {line}");
    }
    out.push('\n');
}

pub(super) fn write_explained(out: &mut String, explained: &Explained) {
    use std::fmt::Write;
    let query = &explained.query;
    let _ = writeln!(
        out,
        "query: {} terms; names {:?}; paths {:?}; errors {:?}; tests {:?}; language {}",
        query.terms.len(),
        query.names,
        query.paths,
        query.error_types,
        query.tests,
        query.language.map_or("-", Language::name)
    );
    let _ = writeln!(
        out,
        "{} candidate(s) of {} session(s) in scope\n",
        explained.candidates.len(),
        explained.num_sessions
    );
    let mut header = format!("{:<4} {:>5} {:<24} {:>6}", "#", "bm25#", "verdict", "score");
    for (_, label, _, _) in FEATURE_COLUMNS {
        header.push_str(&format!(" {label:>5}"));
    }
    let _ = writeln!(out, "{header}  session / task");
    for (rank, scored) in explained.candidates.iter().enumerate() {
        let verdict = match &scored.dropped {
            None => "kept".to_string(),
            Some(rank::DropReason::Duplicate { of }) => format!("duplicate of {of}"),
            Some(reason) => serde_json::to_value(reason)
                .ok()
                .and_then(|value| value.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{reason:?}")),
        };
        let mut line = format!(
            "{:<4} {:>5} {:<24} {:>6.3}",
            rank + 1,
            scored.baseline_rank,
            truncate(&verdict, 24),
            scored.score,
        );
        for (_, _, _, value) in FEATURE_COLUMNS {
            line.push_str(&format!(" {:>5}", feature_value(value(&scored.features))));
        }
        let _ = writeln!(
            out,
            "{line}  {}  {}",
            scored.session_id,
            truncate(&scored.task_line, 60)
        );
    }
    let _ = writeln!(
        out,
        "\n#: place in the answer's order (kept first); bm25#: place by plain session BM25 (the \
         baseline); verdict: kept, or why dropped; score: the ranking score. A candidate whose \
         session BM25 is {}x every other's is kept and the answer is not empty. Features (the \
         names /v1/search/explain and the page give them):",
        explained.standout_margin
    );
    for (name, label, meaning, _) in FEATURE_COLUMNS {
        let _ = writeln!(out, "  {label:<6} {name}: {meaning}");
    }
}

/// The features an explanation shows, as the inspection page shows them:
/// the API's name, the column's label, what it measures, its value.
type FeatureColumn = (
    &'static str,
    &'static str,
    &'static str,
    fn(&rank::Features) -> f32,
);

const FEATURE_COLUMNS: [FeatureColumn; 11] = [
    ("text_bm25", "bm25", "BM25 over the whole text", |f| {
        f.text_bm25
    }),
    (
        "text_rel",
        "rel",
        "BM25 relative to the best candidate (0..1)",
        |f| f.text_rel,
    ),
    (
        "text_coverage",
        "cov",
        "BM25 relative to the query's own weight: how much of the query the session covers",
        |f| f.text_coverage,
    ),
    (
        "symbols_changed",
        "sym",
        "IDF-weighted query names matching symbols the session changed",
        |f| f.symbols_changed,
    ),
    (
        "symbols_referenced",
        "ref",
        "IDF-weighted query names matching symbols it only referenced",
        |f| f.symbols_referenced,
    ),
    (
        "paths",
        "paths",
        "IDF-weighted query paths matching files it changed",
        |f| f.paths,
    ),
    (
        "stems",
        "stem",
        "IDF-weighted query words naming a changed file's stem",
        |f| f.stems,
    ),
    ("errors", "err", "IDF-weighted error types in common", |f| {
        f.errors
    }),
    ("tests", "tests", "test names in common", |f| f.tests),
    (
        "location_words",
        "loc",
        "IDF-weighted query words among the names of the changed code",
        |f| f.location_words,
    ),
    (
        "file_support",
        "fsup",
        "text similarity of other sessions that changed one of its files",
        |f| f.file_support,
    ),
];

/// A feature's value in five characters: `-` for zero.
fn feature_value(value: f32) -> String {
    if value == 0.0 {
        "-".to_string()
    } else if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let kept: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{kept}…")
    }
}

pub(super) fn write_summaries(out: &mut String, user_id: &UserId, summaries: &[SessionSummary]) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "{} session(s) of user {:?}",
        summaries.len(),
        user_id.as_str()
    );
    for summary in summaries {
        let _ = writeln!(
            out,
            "\n{}\n  {} | {} | {} file(s), {} symbol(s) changed, {} error(s), {} message(s) | updated {}\n  task: {}",
            summary.session_id,
            summary.status,
            summary.language.map_or("language unknown", Language::name),
            summary.num_files_changed,
            summary.num_symbols_changed,
            summary.num_errors,
            summary.num_messages,
            rfc3339_from_ms(summary.updated_at_ms),
            summary.task,
        );
    }
}

/// One session's whole record, as `inspect --session` prints it.
pub(super) fn write_detail(out: &mut String, detail: &SessionDetail) {
    use std::fmt::Write;
    let record = &detail.record;
    let list = |items: &[String]| {
        if items.is_empty() {
            "-".to_string()
        } else {
            items.join(", ")
        }
    };
    let _ = writeln!(out, "session {}", detail.session_id);
    let _ = writeln!(
        out,
        "  {} message(s), updated {}",
        detail.num_messages,
        rfc3339_from_ms(detail.updated_at_ms)
    );
    let task_line = record.task.lines().next().unwrap_or("");
    let _ = writeln!(out, "task:      {task_line}");
    let _ = writeln!(
        out,
        "language:  {}",
        record.language.map_or("-", Language::name)
    );
    let outcome = &record.outcome;
    let tests_at_end = match outcome.tests_passed_at_end {
        Some(true) => "passed",
        Some(false) => "failed",
        None => "not seen",
    };
    let _ = writeln!(
        out,
        "outcome:   {} (final diff: {}, tests at end: {tests_at_end})",
        outcome.status,
        if outcome.final_diff { "yes" } else { "no" },
    );
    let _ = writeln!(out, "files changed:      {}", list(&record.files_changed));
    let _ = writeln!(out, "symbols changed:    {}", list(&record.symbols_changed));
    let _ = writeln!(
        out,
        "symbols referenced: {}",
        list(&record.symbols_referenced)
    );
    let _ = writeln!(out, "tests failing:      {}", list(&record.tests.failing));
    let _ = writeln!(out, "tests passing:      {}", list(&record.tests.passing));
    if let Some(last_run) = &record.tests.last_run {
        let _ = writeln!(
            out,
            "last test run:      {} passed, {} failed",
            last_run.passed, last_run.failed
        );
    }
    write_errors_and_commands(out, record);
    write_evidence(out, detail);
}

/// A record's errors (with their innermost frames) and commands.
fn write_errors_and_commands(out: &mut String, record: &precedent_ingest::SessionRecord) {
    use std::fmt::Write;
    let _ = writeln!(out, "errors ({}):", record.errors.len());
    for error in &record.errors {
        let _ = writeln!(out, "  {}: {}", error.error_type, error.message);
        for frame in error.frames.iter().rev().take(3) {
            let _ = writeln!(
                out,
                "      at {}:{} in {}",
                frame.file,
                frame.line.map_or("?".to_string(), |line| line.to_string()),
                frame.function.as_deref().unwrap_or("?"),
            );
        }
    }
    let _ = writeln!(out, "commands ({}):", record.commands.len());
    for command in &record.commands {
        let first_line = command.command.lines().next().unwrap_or("");
        let exit = command
            .exit_code
            .map_or("?".to_string(), |code| code.to_string());
        let _ = writeln!(
            out,
            "  [msg {:>3}] exit {exit:>2}  {first_line}",
            command.message_index
        );
    }
}

/// A session's evidence with its provenance, and its diagnostics.
fn write_evidence(out: &mut String, detail: &SessionDetail) {
    use std::fmt::Write;
    let record = &detail.record;
    let _ = writeln!(out, "evidence ({}):", record.evidence.len());
    for evidence in &record.evidence {
        let source = detail
            .sources
            .get(evidence.message_index)
            .map_or("?".to_string(), |(request_id, index)| {
                format!("{request_id}#{index}")
            });
        let first_line = evidence.text.lines().next().unwrap_or("");
        let _ = writeln!(
            out,
            "  {:<5} msg {:>3} ({source}) {}{}\n        {first_line}",
            evidence.kind,
            evidence.message_index,
            evidence.file.as_deref().unwrap_or(""),
            if evidence.symbols.is_empty() {
                String::new()
            } else {
                format!(" [{}]", evidence.symbols.join(", "))
            },
        );
    }
    if !detail.diagnostics.is_empty() {
        let _ = writeln!(out, "diagnostics ({}):", detail.diagnostics.len());
        for diagnostic in &detail.diagnostics {
            let _ = writeln!(
                out,
                "  msg {}: {}",
                diagnostic.message_index, diagnostic.message
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The terminal's feature columns are the inspection page's: the same
    /// API names under the same labels, in the same order.
    #[test]
    fn feature_columns_are_named_as_the_page_names_them() {
        let page = include_str!("../api/ui.html");
        let table = page
            .split("const FEATURES = [")
            .nth(1)
            .and_then(|rest| rest.split("];").next())
            .expect("the page's FEATURES table");
        let on_page: Vec<(String, String)> = table
            .lines()
            .filter_map(|line| {
                let mut quoted = line.split('\'').skip(1).step_by(2);
                Some((quoted.next()?.to_string(), quoted.next()?.to_string()))
            })
            .collect();
        let in_terminal: Vec<(String, String)> = FEATURE_COLUMNS
            .iter()
            .map(|(name, label, _, _)| (name.to_string(), label.to_string()))
            .collect();
        assert_eq!(in_terminal, on_page);
    }
}
