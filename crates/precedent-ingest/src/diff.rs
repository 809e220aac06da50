//! Unified-diff segmentation: finds git diffs (`diff --git`, extended headers,
//! renames, binary files) and plain unified diffs (`--- x` / `+++ y`) in a
//! text, several files per diff, and splits each file into hunks with their
//! `@@` header context and their context / added / removed lines.
//!
//! It only locates and classifies lines (byte ranges into the text it was
//! given); which definitions the changed lines sit in is left to
//! [`super::symbols`], and mapping offsets back to a raw message is left to the
//! caller.

use super::text::{Line, contains_str, lines_with_offsets};

/// At most this many file diffs per text.
const MAX_FILE_DIFFS: usize = 2_000;
/// At most this many problems reported per text.
const MAX_PROBLEMS: usize = 20;

/// What a file diff does to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileChange {
    /// Content edited in place.
    Modified,
    /// A new file (`new file mode` or `--- /dev/null`).
    Added,
    /// A deleted file (`deleted file mode` or `+++ /dev/null`).
    Deleted,
    /// Renamed (`rename from` / `rename to`), possibly with edits.
    Renamed,
    /// Copied (`copy from` / `copy to`).
    Copied,
    /// A binary file (`Binary files ... differ`, `GIT binary patch`).
    Binary,
}

/// The kind of one line in a hunk body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HunkLineKind {
    /// Unchanged line (` ` marker, or an empty line some tools leave).
    Context,
    /// Added line (`+`).
    Added,
    /// Removed line (`-`).
    Removed,
}

/// One line of a hunk body: its kind and the byte range of its content (marker excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HunkLine {
    /// Context, added or removed.
    pub kind: HunkLineKind,
    /// Start of the content after the marker.
    pub start: usize,
    /// End of the content.
    pub end: usize,
}

/// One `@@` hunk of a file diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// Byte offset of the `@@` line.
    pub start: usize,
    /// Byte offset just past the last body line.
    pub end: usize,
    /// First line number of the old side (0 when the header has none).
    pub old_start: u32,
    /// First line number of the new side (0 when the header has none).
    pub new_start: u32,
    /// The header context after the second `@@` (git's function context), trimmed.
    pub context: String,
    /// The body lines.
    pub lines: Vec<HunkLine>,
}

impl Hunk {
    /// Whether the hunk adds or removes at least one line.
    pub fn has_changes(&self) -> bool {
        self.lines
            .iter()
            .any(|line| line.kind != HunkLineKind::Context)
    }
}

/// The diff of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileDiff {
    /// Path on the old side (`a/` stripped); `None` for `/dev/null` or unknown.
    pub old_path: Option<String>,
    /// Path on the new side (`b/` stripped); `None` for `/dev/null` or unknown.
    pub new_path: Option<String>,
    /// What the diff does to the file.
    pub change: FileChange,
    /// Byte offset of the first header line (`diff --git` or `---`).
    pub start: usize,
    /// Byte offset of the first byte after the header (where hunks begin).
    pub header_end: usize,
    /// Byte offset just past the last hunk (or the header).
    pub end: usize,
    /// Whether it came from a `diff --git` header.
    pub is_git: bool,
    /// The new side's git blob id as the `index OLD..NEW` header gives it
    /// (abbreviated, lowercase hex); `None` without one.
    pub new_blob: Option<String>,
    /// The hunks in order.
    pub hunks: Vec<Hunk>,
}

impl FileDiff {
    /// The path the diff is about: the new side, or the old side for a deletion.
    pub(crate) fn path(&self) -> Option<&str> {
        match self.change {
            FileChange::Deleted => self.old_path.as_deref().or(self.new_path.as_deref()),
            _ => self.new_path.as_deref().or(self.old_path.as_deref()),
        }
    }
}

/// File diffs of a text plus the problems met while parsing it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ParsedDiffs {
    /// The file diffs in text order.
    pub files: Vec<FileDiff>,
    /// Human-readable notes on what could not be parsed (bounded).
    pub problems: Vec<String>,
}

/// Cheap test: could `text` contain a diff at all?
pub(crate) fn may_contain_diff(text: &str) -> bool {
    contains_str!(text, "@@")
        || contains_str!(text, "diff --git")
        || contains_str!(text, "Binary files")
}

/// Finds every file diff in `text`.
pub(crate) fn parse_diffs(text: &str) -> ParsedDiffs {
    if !may_contain_diff(text) {
        return ParsedDiffs::default();
    }
    let lines: Vec<Line<'_>> = lines_with_offsets(text).collect();
    let mut reader = DiffReader::default();
    let mut index = 0;
    while index < lines.len() {
        if reader.parsed.files.len() >= MAX_FILE_DIFFS {
            note(
                &mut reader.parsed,
                "too many file diffs; the rest were skipped".to_string(),
            );
            break;
        }
        index = reader.read(&lines, index);
    }
    reader.end_file();
    reader.parsed
}

/// Reads a text's lines into file diffs.
#[derive(Default)]
struct DiffReader {
    parsed: ParsedDiffs,
    /// The file diff being read.
    current: Option<FileDiff>,
    /// True while still in the header of `current` (before its first hunk).
    in_header: bool,
}

impl DiffReader {
    /// Reads the line at `index` and those it opens; answers the index of
    /// the next line to read.
    fn read(&mut self, lines: &[Line<'_>], index: usize) -> usize {
        let line = lines[index];
        if let Some(rest) = line.text.strip_prefix("diff --git ") {
            self.begin_git_diff(line, rest);
            return index + 1;
        }
        if line.text.starts_with("--- ")
            && let Some(&next_line) = lines
                .get(index + 1)
                .filter(|next| next.text.starts_with("+++ "))
        {
            self.read_file_markers(line, next_line);
            return index + 2;
        }
        if line.text.starts_with("@@") && self.current.is_some() {
            let (hunk, next_index, problem) = parse_hunk(lines, index);
            if let Some(problem) = problem {
                note(&mut self.parsed, problem);
            }
            if let Some(diff) = self.current.as_mut() {
                diff.end = diff.end.max(hunk.end);
                diff.hunks.push(hunk);
            }
            self.in_header = false;
            return next_index.max(index + 1);
        }
        // Any other line ends the current file diff.
        if !self.read_header_line(line) && self.current.is_some() {
            self.end_file();
            self.in_header = false;
        }
        index + 1
    }

    /// `diff --git a/x b/x` (`rest` follows `diff --git `) opens a file diff.
    fn begin_git_diff(&mut self, line: Line<'_>, rest: &str) {
        self.end_file();
        let (old_path, new_path) = parse_git_header_paths(rest);
        if old_path.is_none() && new_path.is_none() {
            note(
                &mut self.parsed,
                format!("unparsable diff --git header: {}", clip(line.text)),
            );
        }
        self.current = Some(FileDiff {
            old_path,
            new_path,
            change: FileChange::Modified,
            start: line.start,
            header_end: line.end,
            end: line.end,
            is_git: true,
            new_blob: None,
            hunks: Vec::new(),
        });
        self.in_header = true;
    }

    /// A `--- x` / `+++ y` pair: part of the git header being read, or the
    /// start of a plain unified diff.
    fn read_file_markers(&mut self, line: Line<'_>, next_line: Line<'_>) {
        let old_raw = line.text.get(4..).unwrap_or("");
        let new_raw = next_line.text.get(4..).unwrap_or("");
        let attach = self.in_header
            && self
                .current
                .as_ref()
                .is_some_and(|diff| diff.is_git && diff.hunks.is_empty());
        if attach {
            if let Some(diff) = self.current.as_mut() {
                apply_file_markers(diff, old_raw, new_raw, true);
                diff.header_end = next_line.end;
                diff.end = next_line.end;
            }
        } else {
            self.end_file();
            let mut diff = FileDiff {
                old_path: None,
                new_path: None,
                change: FileChange::Modified,
                start: line.start,
                header_end: next_line.end,
                end: next_line.end,
                is_git: false,
                new_blob: None,
                hunks: Vec::new(),
            };
            let strip_prefixes =
                old_raw.trim_start().starts_with("a/") && new_raw.trim_start().starts_with("b/");
            apply_file_markers(&mut diff, old_raw, new_raw, strip_prefixes);
            self.current = Some(diff);
        }
        self.in_header = true;
    }

    /// A line of the current file diff's header (a git extended header, or
    /// a blank line after a plain one); false when it is not one.
    fn read_header_line(&mut self, line: Line<'_>) -> bool {
        if !self.in_header {
            return false;
        }
        let Some(diff) = self.current.as_mut() else {
            return false;
        };
        if diff.is_git && apply_extended_header(diff, line.text) {
            diff.header_end = line.end;
            diff.end = diff.end.max(line.end);
            return true;
        }
        !diff.is_git && line.text.is_empty()
    }

    /// Keeps the file diff being read, if it is one.
    fn end_file(&mut self) {
        finish(&mut self.parsed, self.current.take());
    }
}

fn note(parsed: &mut ParsedDiffs, problem: String) {
    if parsed.problems.len() < MAX_PROBLEMS {
        parsed.problems.push(problem);
    }
}

fn clip(text: &str) -> &str {
    super::text::truncate_to_bytes(text, 120)
}

fn finish(parsed: &mut ParsedDiffs, diff: Option<FileDiff>) {
    let Some(diff) = diff else { return };
    if diff.old_path.is_none() && diff.new_path.is_none() {
        return;
    }
    // A plain `---`/`+++` pair without any hunk is most likely not a diff.
    if !diff.is_git && diff.hunks.is_empty() {
        return;
    }
    parsed.files.push(diff);
}

/// Handles a git extended header line; false when the line is not one.
fn apply_extended_header(diff: &mut FileDiff, line: &str) -> bool {
    if line.starts_with("new file mode") {
        diff.change = FileChange::Added;
    } else if line.starts_with("deleted file mode") {
        diff.change = FileChange::Deleted;
    } else if let Some(path) = line.strip_prefix("rename from ") {
        diff.old_path = clean_path(path, false);
        diff.change = FileChange::Renamed;
    } else if let Some(path) = line.strip_prefix("rename to ") {
        diff.new_path = clean_path(path, false);
        diff.change = FileChange::Renamed;
    } else if let Some(path) = line.strip_prefix("copy from ") {
        diff.old_path = clean_path(path, false);
        diff.change = FileChange::Copied;
    } else if let Some(path) = line.strip_prefix("copy to ") {
        diff.new_path = clean_path(path, false);
        diff.change = FileChange::Copied;
    } else if let Some(ids) = line.strip_prefix("index ") {
        // `index 686cc95d..3651d216 100644`: the blob after the change.
        diff.new_blob = ids
            .split_whitespace()
            .next()
            .and_then(|range| range.split_once(".."))
            .map(|(_, new)| new.to_ascii_lowercase())
            .filter(|new| {
                (4..=64).contains(&new.len())
                    && new.bytes().all(|byte| byte.is_ascii_hexdigit())
                    && new.bytes().any(|byte| byte != b'0')
            });
    } else if line.starts_with("Binary files ") || line.starts_with("GIT binary patch") {
        diff.change = FileChange::Binary;
    } else if !(line.starts_with("old mode")
        || line.starts_with("new mode")
        || line.starts_with("similarity index")
        || line.starts_with("dissimilarity index")
        || line.starts_with("literal ")
        || line.starts_with("delta "))
    {
        return false;
    }
    true
}

/// Applies a `---` / `+++` pair to a file diff.
fn apply_file_markers(diff: &mut FileDiff, old_raw: &str, new_raw: &str, strip_prefixes: bool) {
    let old_is_null = is_dev_null(old_raw);
    let new_is_null = is_dev_null(new_raw);
    if old_is_null {
        diff.change = FileChange::Added;
        diff.old_path = None;
    } else if let Some(path) = clean_path(old_raw, strip_prefixes)
        && diff.change != FileChange::Renamed
        && diff.change != FileChange::Copied
    {
        diff.old_path = Some(path);
    }
    if new_is_null {
        diff.change = FileChange::Deleted;
        diff.new_path = None;
    } else if let Some(path) = clean_path(new_raw, strip_prefixes)
        && diff.change != FileChange::Renamed
        && diff.change != FileChange::Copied
    {
        diff.new_path = Some(path);
    }
}

fn is_dev_null(raw: &str) -> bool {
    let path = raw.split('\t').next().unwrap_or("").trim();
    path == "/dev/null" || path == "a/dev/null" || path == "b/dev/null"
}

/// Cleans one path of a diff header: drops a trailing tab + timestamp, quotes,
/// and (when asked) the `a/` / `b/` prefix and a leading `./`.
fn clean_path(raw: &str, strip_prefix: bool) -> Option<String> {
    let mut path = raw.split('\t').next().unwrap_or("").trim();
    if path.len() >= 2 && path.starts_with('"') && path.ends_with('"') {
        path = path.get(1..path.len() - 1).unwrap_or("");
    }
    if strip_prefix {
        for prefix in ["a/", "b/", "i/", "w/", "c/", "o/"] {
            if let Some(stripped) = path.strip_prefix(prefix) {
                path = stripped;
                break;
            }
        }
    }
    while let Some(stripped) = path.strip_prefix("./") {
        path = stripped;
    }
    if path.is_empty() || path == "/dev/null" {
        return None;
    }
    Some(path.to_string())
}

/// Paths of a `diff --git a/x b/y` line (the text after `diff --git `).
fn parse_git_header_paths(rest: &str) -> (Option<String>, Option<String>) {
    let rest = rest.trim();
    if rest.starts_with('"') {
        // Quoted paths: "a/x y" "b/x y"
        let parts: Vec<&str> = rest
            .split('"')
            .filter(|part| !part.trim().is_empty())
            .collect();
        if parts.len() >= 2 {
            return (clean_path(parts[0], true), clean_path(parts[1], true));
        }
        return (None, None);
    }
    if let Some(after_a) = rest.strip_prefix("a/") {
        // Prefer the split where both sides name the same path.
        let mut first_split: Option<(&str, &str)> = None;
        let mut search_from = 0;
        while let Some(found) = after_a.get(search_from..).and_then(|tail| tail.find(" b/")) {
            let split_at = search_from + found;
            let old = after_a.get(..split_at).unwrap_or("");
            let new = after_a.get(split_at + 3..).unwrap_or("");
            if old == new {
                return (clean_path(old, false), clean_path(new, false));
            }
            first_split.get_or_insert((old, new));
            search_from = split_at + 3;
        }
        if let Some((old, new)) = first_split {
            return (clean_path(old, false), clean_path(new, false));
        }
        return (None, None);
    }
    // --no-prefix: "x y", the two halves usually equal.
    let words: Vec<&str> = rest.split(' ').collect();
    if words.len().is_multiple_of(2) && words.len() >= 2 {
        let half = words.len() / 2;
        let old = words[..half].join(" ");
        let new = words[half..].join(" ");
        return (clean_path(&old, false), clean_path(&new, false));
    }
    (None, None)
}

/// Parses `@@ -a[,b] +c[,d] @@ context`: (old start, old count, new start, new count, context).
fn parse_hunk_header(line: &str) -> Option<(u32, u32, u32, u32, String)> {
    let rest = line.strip_prefix("@@ -")?;
    let (old_range, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix('+')?;
    let (new_range, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix("@@")?;
    let (old_start, old_count) = parse_range(old_range)?;
    let (new_start, new_count) = parse_range(new_range)?;
    Some((
        old_start,
        old_count,
        new_start,
        new_count,
        rest.trim().to_string(),
    ))
}

fn parse_range(range: &str) -> Option<(u32, u32)> {
    match range.split_once(',') {
        Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
        None => Some((range.parse().ok()?, 1)),
    }
}

/// Parses the hunk whose header is `lines[header_index]`; returns it, the index
/// of the first line after it, and a problem note if it was malformed.
fn parse_hunk(lines: &[Line<'_>], header_index: usize) -> (Hunk, usize, Option<String>) {
    let header = lines[header_index];
    let mut hunk = Hunk {
        start: header.start,
        end: header.end,
        old_start: 0,
        new_start: 0,
        context: String::new(),
        lines: Vec::new(),
    };
    let body_index = header_index + 1;
    match parse_hunk_header(header.text) {
        Some((old_start, old_count, new_start, new_count, context)) => {
            hunk.old_start = old_start;
            hunk.new_start = new_start;
            hunk.context = context;
            let (index, (old_left, new_left)) =
                read_counted_body(&mut hunk, lines, body_index, (old_count, new_count));
            let problem = (old_left > 0 || new_left > 0).then(|| {
                format!(
                    "hunk `{}` ended early ({old_left} old and {new_left} new lines missing)",
                    clip(header.text)
                )
            });
            (hunk, index, problem)
        }
        None => {
            // No usable line numbers: take +/-/space lines until something else.
            hunk.context = header
                .text
                .trim_start_matches('@')
                .trim()
                .trim_end_matches('@')
                .trim()
                .to_string();
            let index = read_uncounted_body(&mut hunk, lines, body_index);
            (hunk, index, None)
        }
    }
}

/// Reads the body lines from `index` that the header's counts announce
/// (`(old, new)` lines), and a `\ No newline at end of file` after them;
/// answers the index after the body and the counts left unread.
fn read_counted_body(
    hunk: &mut Hunk,
    lines: &[Line<'_>],
    mut index: usize,
    (mut old_left, mut new_left): (u32, u32),
) -> (usize, (u32, u32)) {
    while (old_left > 0 || new_left > 0) && index < lines.len() {
        let line = lines[index];
        let kind = match line.text.as_bytes().first() {
            Some(b' ') | None => {
                if old_left == 0 || new_left == 0 {
                    break;
                }
                old_left -= 1;
                new_left -= 1;
                HunkLineKind::Context
            }
            Some(b'-') if old_left > 0 => {
                old_left -= 1;
                HunkLineKind::Removed
            }
            Some(b'+') if new_left > 0 => {
                new_left -= 1;
                HunkLineKind::Added
            }
            Some(b'\\') => {
                hunk.end = line.end;
                index += 1;
                continue;
            }
            _ => break,
        };
        push_line(hunk, line, kind);
        index += 1;
    }
    // A "\ No newline at end of file" right after the counted lines.
    while let Some(line) = lines.get(index) {
        if line.text.starts_with('\\') {
            hunk.end = line.end;
            index += 1;
        } else {
            break;
        }
    }
    (index, (old_left, new_left))
}

/// Reads `+`, `-` and ` ` body lines from `index` up to any other line or
/// the start of the next hunk or file; answers the index after them.
fn read_uncounted_body(hunk: &mut Hunk, lines: &[Line<'_>], mut index: usize) -> usize {
    while index < lines.len() {
        let line = lines[index];
        let text = line.text;
        let starts_next_file = text.starts_with("diff --git ")
            || (text.starts_with("--- ")
                && lines
                    .get(index + 1)
                    .is_some_and(|next| next.text.starts_with("+++ ")));
        if starts_next_file || text.starts_with("@@") {
            break;
        }
        let kind = match text.as_bytes().first() {
            Some(b' ') => HunkLineKind::Context,
            Some(b'+') => HunkLineKind::Added,
            Some(b'-') => HunkLineKind::Removed,
            Some(b'\\') => {
                index += 1;
                continue;
            }
            _ => break,
        };
        push_line(hunk, line, kind);
        index += 1;
    }
    index
}

fn push_line(hunk: &mut Hunk, line: Line<'_>, kind: HunkLineKind) {
    let content_start = if line.text.is_empty() {
        line.start
    } else {
        line.start + 1
    };
    hunk.lines.push(HunkLine {
        kind,
        start: content_start.min(line.end),
        end: line.end,
    });
    hunk.end = line.end;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_line_gives_the_new_blob() {
        let text = "diff --git a/x.py b/x.py\nindex 686cc95d..3651D216 100644\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\ndiff --git a/y.py b/y.py\ndeleted file mode 100644\nindex 686cc95..0000000\n--- a/y.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-b = 1\n";
        let parsed = parse_diffs(text);
        let blobs: Vec<Option<&str>> = parsed
            .files
            .iter()
            .map(|file| file.new_blob.as_deref())
            .collect();
        assert_eq!(blobs, vec![Some("3651d216"), None]);
    }

    /// (path, change, [(context, old_start, new_start, "+/-/ " kinds)])
    type ExpectedFile<'a> = (&'a str, FileChange, Vec<(&'a str, u32, u32, &'a str)>);

    /// (path, change, [(context, old_start, new_start, kinds)]) of each file diff.
    type Summary = Vec<(String, FileChange, Vec<(String, u32, u32, String)>)>;

    fn summarize(text: &str) -> Summary {
        parse_diffs(text)
            .files
            .into_iter()
            .map(|file| {
                let hunks = file
                    .hunks
                    .iter()
                    .map(|hunk| {
                        let kinds: String = hunk
                            .lines
                            .iter()
                            .map(|line| match line.kind {
                                HunkLineKind::Context => ' ',
                                HunkLineKind::Added => '+',
                                HunkLineKind::Removed => '-',
                            })
                            .collect();
                        (hunk.context.clone(), hunk.old_start, hunk.new_start, kinds)
                    })
                    .collect();
                (file.path().unwrap_or("").to_string(), file.change, hunks)
            })
            .collect()
    }

    fn check(input: &str, expected: Vec<ExpectedFile<'_>>) {
        let expected: Summary = expected
            .into_iter()
            .map(|(path, change, hunks)| {
                (
                    path.to_string(),
                    change,
                    hunks
                        .into_iter()
                        .map(|(context, old, new, kinds)| {
                            (context.to_string(), old, new, kinds.to_string())
                        })
                        .collect(),
                )
            })
            .collect();
        assert_eq!(summarize(input), expected, "diffs of:\n{input}");
    }

    #[test]
    fn git_diff_in_fence_with_two_hunks() {
        let input = "```diff\ndiff --git a/msal/application.py b/msal/application.py\nindex 686cc95d..3651d216 100644\n--- a/msal/application.py\n+++ b/msal/application.py\n@@ -170,3 +170,4 @@ def __init__(\n             exclude_scopes=None,\n+            http_cache=None,\n             ):\n         \"\"\"Create.\n@@ -370,2 +371,2 @@ def __init__(\n-            {}  # Hard code\n+            {} if http_cache is None else http_cache,\n```\n";
        check(
            input,
            vec![(
                "msal/application.py",
                FileChange::Modified,
                vec![
                    ("def __init__(", 170, 170, " +  "),
                    ("def __init__(", 370, 371, "-+"),
                ],
            )],
        );
    }

    #[test]
    fn plain_unified_diff_from_moatless() {
        let input = "--- src/_pytest/junitxml.py\n+++ src/_pytest/junitxml.py\n@@ -486,3 +486,4 @@\n         self.global_properties = []\n+        self.hostname = os.uname()[1]\n \n         # List\n";
        check(
            input,
            vec![(
                "src/_pytest/junitxml.py",
                FileChange::Modified,
                vec![("", 486, 486, " +  ")],
            )],
        );
    }

    #[test]
    fn new_deleted_renamed_and_binary_files() {
        let input = "diff --git a/new.py b/new.py\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+def f():\n+    pass\ndiff --git a/old.rs b/old.rs\ndeleted file mode 100644\n--- a/old.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-fn x() {}\ndiff --git a/src/a b.py b/src/c.py\nsimilarity index 90%\nrename from src/a b.py\nrename to src/c.py\ndiff --git a/logo.png b/logo.png\nBinary files a/logo.png and b/logo.png differ\n";
        check(
            input,
            vec![
                ("new.py", FileChange::Added, vec![("", 0, 1, "++")]),
                ("old.rs", FileChange::Deleted, vec![("", 1, 0, "-")]),
                ("src/c.py", FileChange::Renamed, vec![]),
                ("logo.png", FileChange::Binary, vec![]),
            ],
        );
    }

    #[test]
    fn empty_context_lines_and_no_newline_marker() {
        let input = "--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n a = 1\n\n-b = 2\n\\ No newline at end of file\n+b = 3\n\\ No newline at end of file\n";
        check(
            input,
            vec![("x.py", FileChange::Modified, vec![("", 1, 1, "  -+")])],
        );
    }

    #[test]
    fn short_hunk_is_reported_not_fatal() {
        let parsed = parse_diffs("--- a/x.py\n+++ b/x.py\n@@ -1,5 +1,5 @@\n-a\n+b\n```\n");
        assert_eq!(parsed.files.len(), 1);
        assert_eq!(parsed.files[0].hunks[0].lines.len(), 2);
        assert_eq!(parsed.problems.len(), 1, "{:?}", parsed.problems);
    }

    #[test]
    fn header_without_numbers_is_parsed_leniently() {
        check(
            "--- a/x.py\n+++ b/x.py\n@@ class Foo: @@\n def f():\n-    return 1\n+    return 2\n\nThat is the fix.\n",
            vec![(
                "x.py",
                FileChange::Modified,
                vec![("class Foo:", 0, 0, " -+")],
            )],
        );
    }

    #[test]
    fn prose_with_dashes_is_not_a_diff() {
        check("--- this is a rule\n+++ and this\nno hunk here\n", vec![]);
        check("Some text\n- item\n+ item\n", vec![]);
    }

    #[test]
    fn git_paths_with_spaces_prefer_matching_halves() {
        assert_eq!(
            parse_git_header_paths("a/dir b/x.py b/dir b/x.py"),
            (
                Some("dir b/x.py".to_string()),
                Some("dir b/x.py".to_string())
            )
        );
        assert_eq!(
            parse_git_header_paths("\"a/x y.py\" \"b/x y.py\""),
            (Some("x y.py".to_string()), Some("x y.py".to_string()))
        );
    }

    #[test]
    fn removed_line_looking_like_header_stays_in_hunk() {
        check(
            "--- a/x.md\n+++ b/x.md\n@@ -1,2 +1,2 @@\n--- old rule\n+++ new rule\n",
            vec![("x.md", FileChange::Modified, vec![("", 1, 1, "-+")])],
        );
    }
}
