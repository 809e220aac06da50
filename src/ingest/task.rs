//! The issue inside a task prompt: agent frameworks wrap the issue in
//! instructions (`<uploaded_files>`, "I've uploaded a python code repository
//! in the directory ...", `<issue_description>`, `<pr_description>`), which
//! would otherwise make the task line. This module finds the issue's byte
//! range and the project root the wrapper names; it leaves a prompt without a
//! wrapper as it is.

use super::text::contains_str;

/// Tags whose content is the issue itself.
const ISSUE_TAGS: &[&str] = &[
    "issue_description",
    "pr_description",
    "issue",
    "problem_statement",
];

/// Where the issue is in a task message, and the root directory it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskText {
    /// Byte offset of the issue's first byte.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
    /// The uploaded repository's directory (`/workspace/django__django__3.0`).
    pub root: Option<String>,
}

/// The issue's range in `content` (the whole content when no wrapper is found).
pub fn issue_range(content: &str) -> TaskText {
    let mut task = TaskText {
        start: 0,
        end: content.len(),
        root: None,
    };
    if memchr::memchr(b'<', content.as_bytes()).is_none() && !contains_str!(content, "uploaded") {
        return task;
    }
    if let Some((start, end)) = tag_content(content, "uploaded_files") {
        task.root = content
            .get(start..end)
            .and_then(|inner| inner.split_whitespace().next())
            .map(str::to_string);
        task.start = end + "</uploaded_files>".len();
    }
    for tag in ISSUE_TAGS {
        if let Some((start, end)) = tag_content(content, tag) {
            task.start = start;
            task.end = end;
            return trimmed(content, task);
        }
    }
    // "I've uploaded a python code repository in the directory X. Consider
    // the following issue description:" and the like, up to the issue.
    let rest = content.get(task.start..).unwrap_or("");
    let lead = rest.trim_start();
    if lead.starts_with("I've uploaded") || lead.starts_with("I have uploaded") {
        let skipped = rest.len() - lead.len();
        let cut = lead
            .find(":\n")
            .map(|colon| colon + 2)
            .or_else(|| lead.find("\n\n").map(|blank| blank + 2));
        if let Some(cut) = cut.filter(|cut| *cut < 600) {
            if task.root.is_none() {
                task.root = lead
                    .find("directory ")
                    .and_then(|at| lead.get(at + "directory ".len()..))
                    .and_then(|tail| tail.split_whitespace().next())
                    .map(|word| word.trim_end_matches(['.', ',', ':']).to_string());
            }
            task.start += skipped + cut;
        }
    }
    trimmed(content, task)
}

fn trimmed(content: &str, mut task: TaskText) -> TaskText {
    let inner = content.get(task.start..task.end).unwrap_or("");
    let leading = inner.len() - inner.trim_start().len();
    let kept = inner.trim();
    if kept.is_empty() {
        return TaskText {
            start: 0,
            end: content.len(),
            root: task.root,
        };
    }
    task.start += leading;
    task.end = task.start + kept.len();
    task
}

/// The byte range inside `<tag>` ... `</tag>` (or to the end when unclosed).
fn tag_content(content: &str, tag: &str) -> Option<(usize, usize)> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    // memchr's SIMD search: task messages are long, and most tags are absent.
    let start = memchr::memmem::find(content.as_bytes(), open.as_bytes())? + open.len();
    let end = content
        .get(start..)
        .and_then(|rest| memchr::memmem::find(rest.as_bytes(), close.as_bytes()))
        .map_or(content.len(), |at| start + at);
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(content: &str, expected: &str, root: Option<&str>) {
        let task = issue_range(content);
        assert_eq!(&content[task.start..task.end], expected);
        assert_eq!(task.root.as_deref(), root);
    }

    #[test]
    fn openhands_prompt() {
        check(
            "<uploaded_files>\n/workspace/django__django__3.0\n</uploaded_files>\nI've uploaded a python code repository in the directory django__django__3.0. Consider the following issue description:\n\n<issue_description>\nQuerySet.update_many loses rows\n</issue_description>\n\nCan you help me implement the necessary changes?",
            "QuerySet.update_many loses rows",
            Some("/workspace/django__django__3.0"),
        );
    }

    #[test]
    fn swe_agent_prompt_without_tags_around_the_issue() {
        check(
            "<uploaded_files>\n/testbed\n</uploaded_files>\nI've uploaded a python code repository in the directory /testbed. Consider the following PR description:\n\nFix the parser.\n",
            "Fix the parser.",
            Some("/testbed"),
        );
    }

    #[test]
    fn a_plain_task_is_kept() {
        check(
            "  Fix <b>bold</b> rendering\n",
            "Fix <b>bold</b> rendering",
            None,
        );
    }
}
