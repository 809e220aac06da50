//! `precedent bench heldout`: extraction measured on held-out sessions
//! (`fixtures/heldout/<format>/`, not used while extraction was developed).
//!
//! Each transcript lies beside the patch its run submitted
//! (`<file>.patch`), whether the run resolved its task and the issue's first
//! line when known (`<file>.meta.json`, `{"resolved": true|false|null,
//! "task_line": ...}`) and, where the task has one, its gold patch
//! (`<file>.gold.patch`: a file the run's patch adds that the gold patch
//! does not name, a reproduction script left behind, is not the
//! repository's change). Every message that shows a diff is removed, so the
//! record comes from the edit tool calls alone; the files and enclosing
//! definitions of the submitted patch, extracted by the same code from the
//! patch alone, are the truth. Each session is measured twice: as read
//! (`structured`) and with its tool calls rendered as text (`text`, see
//! [`rendered_as_text`]).
//!
//! The figures are compared with the targets: changed-file precision 0.90
//! and recall 0.92, changed-definition recall 0.75, resolved 0.85, task line
//! 0.95, text within 5 points of structured recall.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use precedent_core::domain::Role;
use precedent_ingest::{self as ingest, OutcomeStatus, SessionRecord};

/// Where to read and what to write besides the report.
#[derive(Debug, Clone)]
pub struct HeldoutOptions {
    /// The held-out folder: one folder per transcript format.
    pub fixtures_dir: PathBuf,
    /// Write each session's record (as read) here, `<file>.json`, to read a
    /// miss.
    pub records_dir: Option<PathBuf>,
}

/// What `bench heldout` measured: one group per format and rendering.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HeldoutReport {
    /// By format, then rendering (`structured` before `text`).
    pub groups: Vec<HeldoutGroup>,
}

/// The figures of one format in one rendering.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct HeldoutGroup {
    /// The transcript format (the folder under the held-out folder).
    pub format: String,
    /// `structured` (as read) or `text` (tool calls rendered as text).
    pub rendering: String,
    /// Sessions measured.
    pub num_sessions: usize,
    /// Files the submitted patches change.
    pub files_truth: usize,
    /// ... and how many of them the records name.
    pub files_found: usize,
    /// Files the records name as changed.
    pub files_named: usize,
    /// ... and how many of them the patches change.
    pub files_named_right: usize,
    /// Definitions the submitted patches change.
    pub symbols_truth: usize,
    /// ... and how many of them the records name.
    pub symbols_found: usize,
    /// Sessions whose run resolved its task.
    pub resolved_sessions: usize,
    /// ... and how many of them the records call resolved.
    pub resolved_found: usize,
    /// Sessions whose issue's first line is known.
    pub task_lines: usize,
    /// ... and how many records' task line is it.
    pub task_lines_right: usize,
    /// Changed-file precision.
    pub precision: f64,
    /// Changed-file recall.
    pub recall: f64,
    /// Changed-definition recall.
    pub definition_recall: f64,
    /// Share of resolved runs whose outcome is `resolved`.
    pub resolved: f64,
    /// Share of sessions whose task line is the issue's first line.
    pub task_line: f64,
    /// Sessions per outcome status.
    pub outcomes: BTreeMap<String, usize>,
    /// Files a record names that its patch does not change.
    pub outside_patch: Vec<String>,
    /// What a record missed, one line each.
    pub misses: Vec<String>,
    /// Which targets are met.
    pub targets: Targets,
}

/// The targets, met or not.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Targets {
    /// Changed-file precision at least 0.90.
    pub precision: bool,
    /// Changed-file recall at least 0.92.
    pub recall: bool,
    /// Changed-definition recall at least 0.75.
    pub definitions: bool,
    /// Resolved at least 0.85.
    pub resolved: bool,
    /// Task line at least 0.95.
    pub task_line: bool,
    /// Text recall within 5 points of the structured recall.
    pub text_as_structured: bool,
}

/// One held-out session, read with its truth.
struct HeldoutSession {
    /// The transcript's file name.
    name: String,
    /// The format folder it lies in.
    format: String,
    /// Its messages, those showing a diff removed.
    messages: Vec<(Role, String)>,
    /// The record of the submitted patch alone.
    truth: SessionRecord,
    /// `<file>.meta.json`, or null.
    meta: Value,
}

/// Measures every held-out session under `options.fixtures_dir`.
/// `progress` hears of each session's outcome.
pub fn run(options: &HeldoutOptions, progress: &dyn Fn(&str)) -> anyhow::Result<HeldoutReport> {
    let root = &options.fixtures_dir;
    let mut by_group: BTreeMap<(String, &str), HeldoutGroup> = BTreeMap::new();
    for path in patched_transcripts(root)? {
        let session = read_session(root, &path)?;
        let group = |rendering: &'static str| HeldoutGroup {
            format: session.format.clone(),
            rendering: rendering.to_string(),
            ..HeldoutGroup::default()
        };
        let structured = by_group
            .entry((session.format.clone(), "structured"))
            .or_insert_with(|| group("structured"));
        let record = measure(structured, &session, &session.messages);
        let fences_are_calls = session.format != "aider";
        let as_text = rendered_as_text(&session.messages, fences_are_calls);
        let text = by_group
            .entry((session.format.clone(), "text"))
            .or_insert_with(|| group("text"));
        measure(text, &session, &as_text);
        if let Some(directory) = &options.records_dir {
            let dump = directory.join(format!("{}.json", session.name));
            std::fs::write(&dump, serde_json::to_string_pretty(&record)?)
                .with_context(|| format!("cannot write {}", dump.display()))?;
        }
        progress(&format!("{}: {:?}", session.name, record.outcome));
    }
    anyhow::ensure!(
        !by_group.is_empty(),
        "no held-out sessions under {}",
        root.display()
    );
    let mut groups: Vec<HeldoutGroup> = by_group.into_values().collect();
    score(&mut groups);
    for group in &groups {
        anyhow::ensure!(
            group.files_truth > 0,
            "{}: no submitted patch names a file",
            group.format
        );
    }
    Ok(HeldoutReport { groups })
}

/// Every transcript under `dir` (recursively) beside a submitted patch
/// (`<file>.patch`), sorted.
fn patched_transcripts(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = std::fs::read_dir(&folder)
            .with_context(|| format!("cannot read {}", folder.display()))?;
        for entry in entries {
            let path = entry
                .with_context(|| format!("cannot read {}", folder.display()))?
                .path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let name = path.to_string_lossy();
            if let Some(transcript) = name.strip_suffix(".patch")
                && !transcript.ends_with(".gold")
            {
                found.push(PathBuf::from(transcript));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The session of the transcript at `path` with its truth.
fn read_session(root: &Path, path: &Path) -> anyhow::Result<HeldoutSession> {
    let patch_path = PathBuf::from(format!("{}.patch", path.display()));
    let patch = std::fs::read_to_string(&patch_path)
        .with_context(|| format!("cannot read {}", patch_path.display()))?;
    let patch = match std::fs::read_to_string(format!("{}.gold.patch", path.display())) {
        Ok(gold) => without_files_left_behind(&patch, &gold),
        Err(_) => patch,
    };
    let meta: Value = std::fs::read_to_string(format!("{}.meta.json", path.display()))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    let format = path
        .strip_prefix(root)
        .ok()
        .and_then(|relative| relative.components().next())
        .map(|folder| folder.as_os_str().to_string_lossy().to_string())
        .with_context(|| format!("{}: not in a format folder", path.display()))?;
    let truth = extract(&[(Role::Assistant, patch)]);
    anyhow::ensure!(
        !truth.files_changed.is_empty(),
        "{}: the patch names no file",
        patch_path.display()
    );
    let (_, transcripts) = crate::import::transcript::read_transcripts(path)
        .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
    let messages: Vec<(Role, String)> = transcripts
        .iter()
        .flat_map(|transcript| transcript.messages.iter())
        .filter(|message| {
            !(message.content.contains("diff --git") || message.content.contains("\n+++ "))
        })
        .map(|message| (message.role, message.content.clone()))
        .collect();
    Ok(HeldoutSession {
        name: path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string(),
        format,
        messages,
        truth,
        meta,
    })
}

/// `patch` without the files it adds that `gold` does not name.
fn without_files_left_behind(patch: &str, gold: &str) -> String {
    let (gold_files, _) = patch_files(gold);
    let (_, added) = patch_files(patch);
    let left_behind: Vec<&String> = added
        .iter()
        .filter(|file| !gold_files.contains(file))
        .collect();
    patch
        .split_inclusive('\n')
        .fold((String::new(), false), |(mut kept, mut skipping), line| {
            if let Some(header) = line.strip_prefix("diff --git ") {
                skipping = left_behind
                    .iter()
                    .any(|file| header.trim_end().ends_with(&format!(" b/{file}")));
            }
            if !skipping {
                kept.push_str(line);
            }
            (kept, skipping)
        })
        .0
}

/// The record of `messages`, extracted as an Add would.
fn extract(messages: &[(Role, String)]) -> SessionRecord {
    let inputs = ingest::IngestMessage::in_order(
        messages
            .iter()
            .map(|(role, content)| (*role, content.as_str())),
    );
    // The figures must not depend on how loaded the machine is.
    ingest::extract_session(&inputs, ingest::Clock::Ignored).0
}

/// A symbol's last segment (`Class.method` -> `method`).
fn symbol_leaf(symbol: &str) -> &str {
    symbol.rsplit(['.', ':']).next().unwrap_or(symbol)
}

/// Whether the definition `found` is the changed definition `truth` or lies
/// inside it: a patch alone often shows only the class around a changed
/// method (`TimeDelta`), where the session's view names the method itself
/// (`TimeDelta._serialize`).
fn same_definition(found: &str, truth: &str) -> bool {
    let leaf = symbol_leaf(truth);
    symbol_leaf(found) == leaf
        || found
            .split(['.', ':'])
            .filter(|segment| !segment.is_empty())
            .any(|segment| segment == leaf)
}

/// The files of a patch, and those it adds.
fn patch_files(patch: &str) -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    let mut added = Vec::new();
    for section in patch.split("diff --git ").skip(1) {
        let Some(path) = section
            .lines()
            .next()
            .and_then(|line| line.split_whitespace().last())
        else {
            continue;
        };
        let path = path.trim_start_matches("b/").to_string();
        if section
            .lines()
            .take(4)
            .any(|line| line.starts_with("new file mode"))
        {
            added.push(path.clone());
        }
        files.push(path);
    }
    (files, added)
}

/// A session's messages as an integrator renders tool calls as text: each
/// call (a JSON call object or a bash fence on its own lines) as the line
/// `Tool call: NAME` followed by its JSON arguments, each tool's answer (a
/// user message after a call) as `Tool result:` and its output.
/// `fences_are_calls` is false for aider, whose fences are only text.
fn rendered_as_text(messages: &[(Role, String)], fences_are_calls: bool) -> Vec<(Role, String)> {
    let mut rendered = Vec::new();
    let mut after_call = false;
    for (role, content) in messages {
        if *role != Role::Assistant {
            let text = if after_call {
                format!("Tool result:\n{content}")
            } else {
                content.clone()
            };
            rendered.push((*role, text));
            after_call = false;
            continue;
        }
        let mut out: Vec<String> = Vec::new();
        let mut lines = content.lines();
        while let Some(line) = lines.next() {
            if fences_are_calls && line == "```bash" {
                let mut command = Vec::new();
                for inner in lines.by_ref() {
                    if inner == "```" {
                        break;
                    }
                    command.push(inner);
                }
                let arguments = serde_json::json!({ "command": command.join("\n") });
                out.push(format!("Tool call: Bash\n{arguments}"));
                after_call = true;
                continue;
            }
            let call = line
                .starts_with("{\"name\"")
                .then(|| serde_json::from_str::<Value>(line).ok())
                .flatten()
                .filter(|value| value.get("arguments").is_some());
            match call {
                Some(value) => {
                    let name = value["name"].as_str().unwrap_or("tool");
                    out.push(format!("Tool call: {name}\n{}", value["arguments"]));
                    after_call = true;
                }
                None => out.push(line.to_string()),
            }
        }
        rendered.push((*role, out.join("\n")));
    }
    rendered
}

/// Compares the record of `messages` with the truth of `session`, counted
/// in `group`; answers the record.
fn measure(
    group: &mut HeldoutGroup,
    session: &HeldoutSession,
    messages: &[(Role, String)],
) -> SessionRecord {
    let record = extract(messages);
    let (name, truth) = (&session.name, &session.truth);
    group.num_sessions += 1;
    let missed = unmatched(
        &truth.files_changed,
        &record.files_changed,
        |truth, found| ingest::same_file(found, truth),
    );
    group.files_truth += truth.files_changed.len();
    group.files_found += truth.files_changed.len() - missed.len();
    for file in missed {
        group.misses.push(format!("{name}: file {file}"));
    }
    let outside = unmatched(
        &record.files_changed,
        &truth.files_changed,
        ingest::same_file,
    );
    group.files_named += record.files_changed.len();
    group.files_named_right += record.files_changed.len() - outside.len();
    for file in outside {
        group.outside_patch.push(format!("{name}: {file}"));
    }
    let missed = unmatched(
        &truth.symbols_changed,
        &record.symbols_changed,
        |truth, found| same_definition(found, truth),
    );
    group.symbols_truth += truth.symbols_changed.len();
    group.symbols_found += truth.symbols_changed.len() - missed.len();
    for symbol in missed {
        group.misses.push(format!(
            "{name}: definition {symbol} (found {:?})",
            record.symbols_changed
        ));
    }
    measure_task_and_outcome(group, session, &record);
    record
}

/// The items of `wanted` that `same(wanted, item)` finds in none of
/// `among`, in order.
fn unmatched<'a>(
    wanted: &'a [String],
    among: &[String],
    same: impl Fn(&str, &str) -> bool,
) -> Vec<&'a String> {
    wanted
        .iter()
        .filter(|wanted| !among.iter().any(|item| same(wanted, item)))
        .collect()
}

/// The task line and the outcome of `record` against `session`'s meta.
fn measure_task_and_outcome(
    group: &mut HeldoutGroup,
    session: &HeldoutSession,
    record: &SessionRecord,
) {
    let name = &session.name;
    if let Some(task_line) = session.meta["task_line"].as_str() {
        group.task_lines += 1;
        let first = record.task.lines().next().unwrap_or("").trim();
        if first == task_line.trim() {
            group.task_lines_right += 1;
        } else {
            group
                .misses
                .push(format!("{name}: task line {first:?}, not {task_line:?}"));
        }
    }
    *group
        .outcomes
        .entry(record.outcome.status.to_string())
        .or_default() += 1;
    if session.meta["resolved"] == Value::Bool(true) {
        group.resolved_sessions += 1;
        if record.outcome.status == OutcomeStatus::Resolved {
            group.resolved_found += 1;
        } else {
            group
                .misses
                .push(format!("{name}: outcome {:?}", record.outcome.status));
        }
    }
}

/// The ratios and the targets of every group; a format's `text` group is
/// compared with its `structured` one, which comes first.
fn score(groups: &mut [HeldoutGroup]) {
    let ratio = |found: usize, total: usize| {
        if total == 0 {
            1.0
        } else {
            found as f64 / total as f64
        }
    };
    let mut structured_recall: BTreeMap<String, f64> = BTreeMap::new();
    for group in groups {
        group.recall = ratio(group.files_found, group.files_truth);
        group.precision = ratio(group.files_named_right, group.files_named);
        group.definition_recall = ratio(group.symbols_found, group.symbols_truth);
        group.resolved = ratio(group.resolved_found, group.resolved_sessions);
        group.task_line = ratio(group.task_lines_right, group.task_lines);
        let recall = group.recall.min(group.definition_recall);
        let text_as_structured = match group.rendering.as_str() {
            "structured" => {
                structured_recall.insert(group.format.clone(), recall);
                true
            }
            _ => structured_recall
                .get(&group.format)
                .is_none_or(|structured| recall >= structured - 0.05),
        };
        group.targets = Targets {
            precision: group.precision >= 0.90,
            recall: group.recall >= 0.92,
            definitions: group.definition_recall >= 0.75,
            resolved: group.resolved >= 0.85,
            task_line: group.task_line >= 0.95,
            text_as_structured,
        };
    }
}

/// The report of `bench heldout` as text: per format and rendering, the
/// figures, each file outside the patch, each miss and the targets.
pub(crate) fn render(report: &HeldoutReport) -> String {
    let mut lines = Vec::new();
    for group in &report.groups {
        lines.push(format!(
            "{} ({}): {} sessions; changed-file precision {:.2} ({}/{}), recall {:.2} ({}/{}); changed-definition recall {:.2} ({}/{}); resolved {:.2} ({}/{}); task line {:.2} ({}/{}); outcomes {:?}",
            group.format,
            group.rendering,
            group.num_sessions,
            group.precision,
            group.files_named_right,
            group.files_named,
            group.recall,
            group.files_found,
            group.files_truth,
            group.definition_recall,
            group.symbols_found,
            group.symbols_truth,
            group.resolved,
            group.resolved_found,
            group.resolved_sessions,
            group.task_line,
            group.task_lines_right,
            group.task_lines,
            group.outcomes,
        ));
        for line in &group.outside_patch {
            lines.push(format!("  outside the patch: {line}"));
        }
        for line in &group.misses {
            lines.push(format!("  {line}"));
        }
        let verdict = |met: bool| if met { "met" } else { "missed" };
        let targets = &group.targets;
        lines.push(format!(
            "  targets: precision {}, recall {}, definitions {}, resolved {}, task line {}, text as structured {}",
            verdict(targets.precision),
            verdict(targets.recall),
            verdict(targets.definitions),
            verdict(targets.resolved),
            verdict(targets.task_line),
            verdict(targets.text_as_structured),
        ));
    }
    lines.join("\n")
}
