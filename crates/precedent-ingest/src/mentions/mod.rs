//! Mentions in prose and tool output: source file paths (`src/foo/bar.py`,
//! `lib/x.rs:10`), test ids (`tests/x.py::test_y`), identifiers
//! (backticked `foo_bar`, dotted `astropy.modeling.separable`, `a::b::c`,
//! AutoCodeRover `search_method("x")` calls), and the code shown in
//! observations (SWE-agent `[File: path]` views with numbered lines,
//! AutoCodeRover `<file>`/`<code>` results, fenced code blocks) so its
//! definitions can be tagged.
//!
//! Everything is bounded per text. Ranking what is mentioned is left to the
//! caller. The code shown in observations is found in [`code_views`].

mod code_views;

pub use self::code_views::code_snippets;

use std::collections::HashSet;
use std::sync::LazyLock;

use super::text::{Pattern, contains_str, fenced_blocks, is_identifier};

/// Mentions kept per kind per text.
const MAX_MENTIONS_PER_TEXT: usize = 200;

/// What [`path_matches`] finds, as a pattern: the reference its scan is
/// tested against (a leading star makes the regex search twice per position).
/// Its extensions are those of word bytes only: the scan reads an
/// extension as the word after the dot, so `c++` is never one.
#[cfg(test)]
static PATH: LazyLock<Pattern> = LazyLock::new(|| {
    let extensions: Vec<&str> = precedent_core::language::DIALECTS
        .iter()
        .flat_map(|dialect| dialect.extensions.iter().copied())
        .filter(|extension| extension.bytes().all(is_word_byte))
        .collect();
    Pattern::new(&format!(
        r"[A-Za-z0-9_.~/\\-]*[A-Za-z0-9_]\.(?:{})(?-u:\b)(?::\d+)?",
        extensions.join("|")
    ))
});
/// The `:line` suffix of a path (`\d` is any Unicode digit, as in [`PATH`]).
static LINE_SUFFIX: LazyLock<Pattern> = LazyLock::new(|| Pattern::new(r"^:\d+"));
static TEST_ID: LazyLock<Pattern> = LazyLock::new(|| Pattern::new(r"[\w./-]+\.py::[\w:.\[\]-]+"));
static BACKTICKED: LazyLock<Pattern> = LazyLock::new(|| Pattern::new(r"`([^`\n]{2,120})`"));
static DOTTED: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"(?-u:\b)[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?-u:\b)\(?"));
static RUST_PATH: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"(?-u:\b)[A-Za-z_]\w*(?:::[A-Za-z_~]\w*)+"));
static SEARCH_CALL: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(
        r#"(?-u:\b)search_(?:method_in_class|method_in_file|class_in_file|code_in_file|method|class|code|callable|function)\(\s*"([^"\n]{1,120})"(?:\s*,\s*"([^"\n]{1,200})")?"#,
    )
});

static JSON_SYMBOL_FIELD: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(r#""(?:span_id|function_name|class_name)"\s*:\s*"([^"\n]{1,200})""#)
});
static JSON_SPAN_IDS: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r#""span_ids"\s*:\s*\[([^\]]{0,4000})\]"#));

/// This module's patterns, each compiled at first use or by [`warm_up`].
fn patterns() -> [&'static Pattern; 8] {
    [
        &*LINE_SUFFIX,
        &*TEST_ID,
        &*BACKTICKED,
        &*DOTTED,
        &*RUST_PATH,
        &*SEARCH_CALL,
        &*JSON_SYMBOL_FIELD,
        &*JSON_SPAN_IDS,
    ]
}

/// Compiles this module's patterns now rather than at first use (see
/// [`super::warm_up`]); answers whether every one compiled.
pub(super) fn warm_up() -> bool {
    patterns()
        .into_iter()
        .chain(code_views::patterns())
        .all(|pattern| pattern.is_valid())
}

const DOMAIN_ENDINGS: &[&str] = &[
    ".com", ".org", ".io", ".net", ".dev", ".html", ".htm", ".edu", ".gov",
];

/// Source file paths mentioned in `text` (`:line` suffix removed), deduped in order.
pub fn file_paths(text: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for (start, end) in path_matches(text) {
        let preceded_by_colon = start > 0
            && text
                .get(..start)
                .is_some_and(|before| before.ends_with(':'));
        let Some(raw) = text.get(start..end) else {
            continue;
        };
        if (preceded_by_colon && raw.starts_with("//")) || raw.contains("://") {
            continue; // a URL
        }
        let without_line = raw.split(':').next().unwrap_or(raw);
        let path = without_line.trim_start_matches("./");
        if path.is_empty() || path.len() > 300 || path.starts_with('.') && !path.contains('/') {
            continue;
        }
        if !paths.iter().any(|known| known == path) {
            paths.push(path.to_string());
            if paths.len() >= MAX_MENTIONS_PER_TEXT {
                break;
            }
        }
    }
    paths
}

/// A byte of a path: `[A-Za-z0-9_.~/\\-]`.
fn is_path_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'~' | b'/' | b'\\' | b'-')
}

/// An ASCII word byte: `[A-Za-z0-9_]`.
fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// Whether `extension` is one of the source extensions paths are found by
/// (a lower-case one of [`precedent_core::language::DIALECTS`]).
fn is_source_extension(extension: &[u8]) -> bool {
    // Most dots end here, before the table is read.
    (1..=precedent_core::language::MAX_EXTENSION_BYTES).contains(&extension.len())
        && std::str::from_utf8(extension).is_ok_and(precedent_core::language::is_source_extension)
}

/// If the `.` at `dot` ends a path (a word byte at or after `floor` before
/// it, a source extension after it up to a word boundary): where that
/// extension ends.
fn extension_end(bytes: &[u8], dot: usize, floor: usize) -> Option<usize> {
    if dot <= floor || !bytes.get(dot - 1).copied().is_some_and(is_word_byte) {
        return None;
    }
    let start = dot + 1;
    let length = bytes
        .get(start..)?
        .iter()
        .take_while(|byte| is_word_byte(**byte))
        .count();
    is_source_extension(bytes.get(start..start + length)?).then_some(start + length)
}

/// The byte ranges [`PATH`] matches in `text`, found by hand: the pattern's
/// leading star makes the regex search forward and back at every position.
/// A match starts where the run of path bytes does (not before the previous
/// match's end), ends at the run's last `word.ext` (the star is greedy), and
/// takes a `:line` suffix right after it.
fn path_matches(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut matches = Vec::new();
    // Where the last match ended: the next one starts no earlier.
    let mut floor = 0;
    let mut position = 0;
    while let Some(relative) = bytes
        .get(position..)
        .and_then(|rest| memchr::memchr(b'.', rest))
    {
        let dot = position + relative;
        let Some(mut end) = extension_end(bytes, dot, floor) else {
            position = dot + 1;
            continue;
        };
        let mut start = dot;
        while start > floor && bytes.get(start - 1).copied().is_some_and(is_path_byte) {
            start -= 1;
        }
        // The last `word.ext` of the run wins.
        let mut index = end;
        while let Some(&byte) = bytes.get(index) {
            if !is_path_byte(byte) {
                break;
            }
            if byte == b'.'
                && let Some(later_end) = extension_end(bytes, index, start)
            {
                end = later_end;
            }
            index += 1;
        }
        if bytes.get(end) == Some(&b':')
            && let Some(suffix) = text
                .get(end..)
                .and_then(|rest| LINE_SUFFIX.find_all(rest).next())
        {
            end += suffix.end();
        }
        matches.push((start, end));
        floor = end;
        position = end;
    }
    matches
}

/// pytest node ids mentioned in `text`, deduped in order.
pub fn test_ids(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    if !contains_str!(text, "::") {
        return ids;
    }
    for found in TEST_ID.find_all(text) {
        let id = found.as_str().trim_end_matches([':', '.']);
        if !ids.iter().any(|known| known == id) {
            ids.push(id.to_string());
            if ids.len() >= MAX_MENTIONS_PER_TEXT {
                break;
            }
        }
    }
    ids
}

/// Whether `candidate` is an identifier, a dotted name or a `::` path.
fn is_symbol_like(candidate: &str) -> bool {
    if candidate.len() < 2 || candidate.len() > 120 {
        return false;
    }
    candidate
        .split("::")
        .flat_map(|part| part.split('.'))
        .all(|part| is_identifier(part.trim_start_matches('~')))
}

/// Drops `(...)` call parens and a leading `self.`/`cls.`/`this.`.
fn normalize_symbol(candidate: &str) -> Option<String> {
    let mut symbol = candidate.trim();
    if let Some(open) = symbol.find('(') {
        symbol = symbol.get(..open).unwrap_or(symbol);
    }
    for prefix in ["self.", "cls.", "this.", "Self::", "self::", "crate::"] {
        if let Some(stripped) = symbol.strip_prefix(prefix) {
            symbol = stripped;
        }
    }
    let symbol = symbol.trim_end_matches(['.', ':']);
    if !is_symbol_like(symbol) {
        return None;
    }
    let last = symbol.rsplit(['.', ':']).next().unwrap_or(symbol);
    let is_file_name = [
        "py", "rs", "js", "ts", "go", "java", "md", "txt", "toml", "json", "cfg",
    ]
    .contains(&last)
        && symbol.contains('.');
    if is_file_name || DOMAIN_ENDINGS.iter().any(|ending| symbol.ends_with(ending)) {
        return None;
    }
    // One plain word must look like code (snake_case, CamelCase inside, dunder).
    if !symbol.contains(['.', ':']) {
        let has_underscore = symbol.contains('_');
        let has_inner_upper = symbol.chars().skip(1).any(|c| c.is_ascii_uppercase())
            && symbol.chars().any(|c| c.is_ascii_lowercase());
        if !(has_underscore || has_inner_upper || symbol.len() >= 4) {
            return None;
        }
        if COMMON_WORDS.contains(&symbol.to_ascii_lowercase().as_str()) {
            return None;
        }
    }
    Some(symbol.to_string())
}

/// Single words that say nothing as identifiers: prose, language keywords, builtins.
const COMMON_WORDS: &[&str] = &[
    "true",
    "false",
    "none",
    "null",
    "self",
    "this",
    "that",
    "with",
    "from",
    "import",
    "return",
    "print",
    "list",
    "dict",
    "string",
    "value",
    "values",
    "error",
    "test",
    "tests",
    "code",
    "data",
    "file",
    "path",
    "name",
    "type",
    "init",
    "main",
    "else",
    "then",
    "when",
    "also",
    "here",
    "there",
    "what",
    "which",
    "some",
    "other",
    "into",
    "onto",
    "have",
    "break",
    "continue",
    "pass",
    "class",
    "struct",
    "enum",
    "impl",
    "async",
    "await",
    "yield",
    "raise",
    "assert",
    "lambda",
    "while",
    "elif",
    "except",
    "finally",
    "global",
    "nonlocal",
    "match",
    "static",
    "const",
    "public",
    "private",
    "protected",
    "void",
    "func",
    "package",
    "interface",
    "object",
    "super",
    "isinstance",
    "getattr",
    "setattr",
    "hasattr",
    "len",
    "range",
    "open",
    "sorted",
    "enumerate",
    "float",
    "bool",
    "tuple",
    "bytes",
    "unwrap",
    "clone",
    "undefined",
    "function",
    "default",
    "mut",
    "crate",
    "trait",
    "where",
    "loop",
    "throw",
    "throws",
    "catch",
    "typeof",
    "instanceof",
    "delete",
    "new",
    "var",
    "let",
    "goto",
    "defer",
    "chan",
    "select",
    "switch",
    "case",
    "master",
    "todo",
    "fixme",
    "note",
    "warning",
    "output",
    "input",
    "result",
    "results",
    "example",
    "issue",
    "expected",
    "actual",
];

/// `text` with the content of fenced code blocks replaced by blank lines.
fn text_outside_fences(text: &str) -> std::borrow::Cow<'_, str> {
    let blocks = fenced_blocks(text);
    if blocks.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut prose = String::with_capacity(text.len());
    let mut position = 0;
    for block in blocks {
        if block.fence_start < position {
            continue;
        }
        prose.push_str(text.get(position..block.fence_start).unwrap_or(""));
        prose.push('\n');
        position = block.fence_end;
    }
    prose.push_str(text.get(position..).unwrap_or(""));
    std::borrow::Cow::Owned(prose)
}

/// Whether a dotted name found in prose looks like code: called (`a.b(`),
/// two or more dots, or one dot with a `snake_case`/`camelCase` part or a
/// `Class.member` shape.
fn is_code_like_dotted(candidate: &str) -> bool {
    if candidate.ends_with('(') || candidate.matches('.').count() >= 2 {
        return true;
    }
    let Some((first, second)) = candidate.split_once('.') else {
        return false;
    };
    let has_snake = first.contains('_') || second.contains('_');
    let has_camel = [first, second].iter().any(|part| {
        part.chars().skip(1).any(|c| c.is_ascii_uppercase())
            && part.chars().any(|c| c.is_ascii_lowercase())
    });
    let class_member = first.len() >= 3
        && first.starts_with(|c: char| c.is_ascii_uppercase())
        && first.chars().any(|c| c.is_ascii_lowercase())
        && second.len() >= 3
        && second.starts_with(|c: char| c.is_ascii_lowercase());
    has_snake || has_camel || class_member
}

/// Identifiers named in prose: backticked names, code-like dotted names
/// (see [`is_code_like_dotted`]), `a::b` paths, and AutoCodeRover search-call arguments.
pub fn identifiers(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut push = |candidate: &str, found: &mut Vec<String>| {
        if found.len() >= MAX_MENTIONS_PER_TEXT {
            return;
        }
        if let Some(symbol) = normalize_symbol(candidate)
            && seen.insert(symbol.clone())
        {
            found.push(symbol);
        }
    };
    for inner in backticked(text) {
        push(inner, &mut found);
    }
    if contains_str!(text, "search_") {
        for captures in SEARCH_CALL.captures_all(text) {
            if let Some(name) = captures.get(1) {
                push(name.as_str(), &mut found);
            }
            // search_method_in_class("m", "C"): the class is the second argument.
            if let (Some(whole), Some(second)) = (captures.get(0), captures.get(2))
                && whole.as_str().contains("_in_class")
            {
                push(second.as_str(), &mut found);
            }
        }
    }
    // Dotted names and `::` paths only in prose: fenced code (repro scripts,
    // logs) is full of local variables.
    let prose = text_outside_fences(text);
    for line in lines_with_dotted_names(&prose) {
        for whole in DOTTED.find_all(line) {
            if is_code_like_dotted(whole.as_str()) {
                push(whole.as_str().trim_end_matches('('), &mut found);
            }
        }
    }
    if contains_str!(&prose, "::") {
        for whole in RUST_PATH.find_all(&prose) {
            push(whole.as_str(), &mut found);
        }
    }
    found
}

/// What [`BACKTICKED`] captures, in order, found without the regex: a match
/// starts at a backtick and ends at the next one, with 2 to 120 characters
/// and no line break between them; when that fails, the next backtick is
/// tried as a start (no match starts anywhere else).
fn backticked(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut next = memchr::memchr(b'`', bytes);
    std::iter::from_fn(move || {
        while let Some(open) = next {
            let close = memchr::memchr(b'`', bytes.get(open + 1..)?).map(|at| open + 1 + at);
            let Some(close) = close else {
                next = None;
                return None;
            };
            let inner = bytes.get(open + 1..close)?;
            let characters = inner.iter().filter(|&&byte| (byte as i8) >= -0x40).count();
            if (2..=120).contains(&characters) && memchr::memchr(b'\n', inner).is_none() {
                next = memchr::memchr(b'`', bytes.get(close + 1..)?).map(|at| close + 1 + at);
                return text.get(open + 1..close);
            }
            next = Some(close);
        }
        None
    })
}

/// The lines of `text` where [`DOTTED`] can match: those with a dot
/// between a word character (or any non-ASCII byte, which may end a Unicode
/// word character) and an ASCII letter or `_`. A match never spans lines, so
/// matching line by line finds what matching the whole text finds, and
/// sentence ends (`word. Next`) no longer cost a regex scan.
fn lines_with_dotted_names(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut next_line_start = 0usize;
    memchr::memchr_iter(b'.', bytes).filter_map(move |dot| {
        if dot < next_line_start || dot == 0 {
            return None;
        }
        let before = bytes[dot - 1];
        let after = bytes.get(dot + 1).copied().unwrap_or(b' ');
        let word_before = before.is_ascii_alphanumeric() || before == b'_' || before >= 0x80;
        let word_after = after.is_ascii_alphabetic() || after == b'_';
        if !(word_before && word_after) {
            return None;
        }
        let start = memchr::memrchr(b'\n', &bytes[..dot]).map_or(0, |newline| newline + 1);
        let end = memchr::memchr(b'\n', &bytes[dot..]).map_or(bytes.len(), |newline| dot + newline);
        next_line_start = end + 1;
        text.get(start..end)
    })
}

/// Symbol names in structured agent actions (moatless `span_id`,
/// `span_ids`, `function_name`, `class_name` fields), deduped in order.
pub fn json_symbol_fields(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    if !contains_str!(text, "span_id") && !contains_str!(text, "_name\"") {
        return found;
    }
    let push = |name: &str, found: &mut Vec<String>| {
        // span ids look like `Class.method`, `impl`, `impl:3`, `imports`.
        let name = name.trim();
        let is_structural = name == "imports"
            || name == "docstring"
            || name.starts_with("impl")
            || name.contains(':');
        if found.len() < MAX_MENTIONS_PER_TEXT
            && !is_structural
            && is_symbol_like(name)
            && !found.iter().any(|known| known == name)
        {
            found.push(name.to_string());
        }
    };
    for captures in JSON_SYMBOL_FIELD.captures_all(text) {
        if let Some(name) = captures.get(1) {
            push(name.as_str(), &mut found);
        }
    }
    for captures in JSON_SPAN_IDS.captures_all(text) {
        let Some(list) = captures.get(1) else {
            continue;
        };
        for item in list.as_str().split(',') {
            push(item.trim().trim_matches('"'), &mut found);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The next number of a xorshift sequence (test texts made of pieces).
    fn next_random(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// The backtick scan finds what [`BACKTICKED`] captures.
    #[test]
    fn backticked_spans_are_those_of_the_pattern() {
        let pieces = [
            "`", "``", "a", "bc", " ", "\n", "\r", "é", "日本", "x_y", "`ab`", "(", "🦀",
        ];
        let long = "z".repeat(119);
        let mut seed = 0x9e37_79b9_u64;
        for case in 0..4000 {
            let mut text = String::new();
            for _ in 0..(case % 50) {
                let random = next_random(&mut seed);
                if random.is_multiple_of(17) {
                    text.push_str(&long);
                } else {
                    text.push_str(pieces[(random % pieces.len() as u64) as usize]);
                }
            }
            let expected: Vec<&str> = BACKTICKED
                .captures_all(&text)
                .filter_map(|captures| captures.get(1).map(|inner| inner.as_str()))
                .collect();
            let scanned: Vec<&str> = backticked(&text).collect();
            assert_eq!(scanned, expected, "{text:?}");
        }
    }

    /// Matching [`DOTTED`] line by line on the lines the prefilter keeps
    /// finds exactly what matching the whole text finds.
    #[test]
    fn dotted_names_are_found_line_by_line_as_in_the_whole_text() {
        let pieces = [
            "a.b",
            " ",
            "\n",
            ".",
            "x",
            "é",
            "_",
            "(",
            "1",
            "Foo.bar(",
            "ü.v",
            "end.",
            "\r\n",
            "os.path.join",
            "..",
            "a",
            "Z",
            "::",
            "`",
            "ß",
        ];
        let mut seed = 0x2545_f491_u64;
        for case in 0..3000 {
            let mut text = String::new();
            for _ in 0..(case % 40) {
                let random = next_random(&mut seed);
                text.push_str(pieces[(random % pieces.len() as u64) as usize]);
            }
            let whole: Vec<&str> = DOTTED.find_all(&text).map(|found| found.as_str()).collect();
            let by_line: Vec<&str> = lines_with_dotted_names(&text)
                .flat_map(|line| DOTTED.find_all(line).map(|found| found.as_str()))
                .collect();
            assert_eq!(whole, by_line, "{text:?}");
        }
    }

    #[test]
    fn paths_in_prose_and_locations() {
        let text = "See `xarray/core/variable.py` and lib/x.rs:10, also https://github.com/a/b/blob/main/msal/authority.py#L83 and ./setup.py. Day one.";
        assert_eq!(
            file_paths(text),
            vec!["xarray/core/variable.py", "lib/x.rs", "setup.py"]
        );
    }

    #[test]
    fn paths_of_every_source_extension_the_language_table_knows() {
        assert_eq!(
            file_paths("src/a.mts, build.gradle.kts and include/v.ipp, not a.PY"),
            vec!["src/a.mts", "build.gradle.kts", "include/v.ipp"]
        );
    }

    /// A small deterministic generator (no dependency for tests).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) as usize
        }
    }

    #[test]
    fn path_scan_matches_like_the_pattern() {
        let pieces = [
            "a",
            "Z",
            "0",
            "7",
            "_",
            ".",
            "..",
            "~",
            "/",
            "\\",
            "-",
            ":",
            ":12",
            "py",
            "pyi",
            "pyc",
            "rs",
            "c",
            "cc",
            "h",
            "mm",
            "java",
            "x.py",
            "./",
            "://",
            " ",
            "\n",
            "é",
            "٣",
            "a.b",
            ".py",
            "setup.py",
            "lib/x.rs:10",
            "(",
            ")",
            "`",
            "#",
            "Ü",
        ];
        let fixtures = [
            "See `xarray/core/variable.py` and lib/x.rs:10, also https://github.com/a/b/blob/main/msal/authority.py#L83 and ./setup.py. Day one.",
            "a.b.py a.py.bak a.py/b.rs a.py:10/foo.rs a.py:1٣2b.py x.pyi.c .py _.h",
            "C:\\src\\main.cpp:42: error; ~/x/y.go; --file=a-b.ts, é.py a.é.py",
        ];
        let mut random = Lcg(7);
        let mut inputs: Vec<String> = fixtures.iter().map(|text| text.to_string()).collect();
        for _ in 0..3_000 {
            let length = random.next() % 24;
            inputs.push(
                (0..length)
                    .map(|_| pieces[random.next() % pieces.len()])
                    .collect(),
            );
        }
        for input in &inputs {
            let expected: Vec<(usize, usize)> = PATH
                .find_all(input)
                .map(|found| (found.start(), found.end()))
                .collect();
            assert_eq!(path_matches(input), expected, "{input:?}");
        }
    }

    #[test]
    fn test_ids_in_text() {
        assert_eq!(
            test_ids("run tests/test_a.py::TestX::test_y and tests/b.py::test_z."),
            vec!["tests/test_a.py::TestX::test_y", "tests/b.py::test_z"]
        );
    }

    fn check_identifiers(input: &str, expected: &[&str]) {
        assert_eq!(identifiers(input), expected, "identifiers of: {input}");
    }

    #[test]
    fn identifiers_in_prose() {
        check_identifiers(
            "`Variable.__setitem__` coercing types; see astropy.modeling.separable and `PolyFit` in `np.polyfit(x)`.",
            &[
                "Variable.__setitem__",
                "PolyFit",
                "np.polyfit",
                "astropy.modeling.separable",
            ],
        );
        check_identifiers(
            "Search with search_method_in_class(\"parse_args\", \"MyOptionParser\") and tokio::runtime::Builder.",
            &["parse_args", "MyOptionParser", "tokio::runtime::Builder"],
        );
        check_identifiers(
            "Use `ls -la` or `the value`, e.g. i.e. `x`, file `setup.py`, `break`",
            &[],
        );
        check_identifiers(
            "Repro:\n```python\ngood_indexed.loc[0] = HasValues()\n```\nSee `HasValues` and xr.DataArray.loc.",
            &["HasValues", "xr.DataArray.loc"],
        );
    }

    #[test]
    fn symbols_in_structured_actions() {
        let action = r#"{"state": "SearchLoop_Searching", "name": "identify", "files_with_spans": [{"file_path": "src/_pytest/junitxml.py", "span_ids": ["LogXML", "LogXML.finalize", "impl:16"]}]} {"function_name": "pytest_addoption", "class_name": null}"#;
        assert_eq!(
            json_symbol_fields(action),
            vec!["pytest_addoption", "LogXML", "LogXML.finalize"]
        );
    }

    #[test]
    fn every_pattern_compiles() {
        for pattern in patterns()
            .into_iter()
            .chain(code_views::patterns())
            .chain([&*PATH])
        {
            assert!(pattern.is_valid(), "{pattern:?}");
        }
    }
}
