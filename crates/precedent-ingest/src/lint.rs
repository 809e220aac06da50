//! Diagnostics of type checkers and linters, and `Error: TypeError: ...`
//! lines printed by scripts, as error records with their file and line:
//!
//! - mypy: `pkg/a.py:12: error: Incompatible types ...  [assignment]`
//! - pyright: `/r/pkg/a.py:12:5 - error: "x" is not defined (reportUndefinedVariable)`
//! - ruff / flake8 / pylint: `pkg/a.py:12:5: F401 'os' imported but unused`
//! - tsc: `src/a.ts(12,5): error TS2322: ...` and `src/a.ts:12:5 - error TS2322: ...`
//! - eslint (stylish): a path line, then `  12:5  error  Message  rule-name`
//!
//! The error type is the diagnostic's code (`assignment`, `F401`, `TS2322`,
//! `no-unused-vars`), or `error` when it has none. Tracebacks and compiler
//! errors are [`super::trace`]'s.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use regex::Captures;

use super::text::{Line, Pattern, contains_str, line_end, lines_with_offsets, truncate_to_bytes};
use super::trace::ParsedError;
use super::{ErrorRecord, Frame};

/// Diagnostics kept per text.
const MAX_DIAGNOSTICS: usize = 50;
/// Bytes kept of a diagnostic's message.
const MAX_MESSAGE_BYTES: usize = 300;

static MYPY: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(r"^\s*([\w./\\-]+\.pyi?):(\d+)(?::\d+)?: error: (.+?)(?:\s+\[([\w-]+)\])?\s*$")
});
static PYRIGHT: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(r"^\s*([\w./\\-]+\.pyi?):(\d+):\d+ - error: (.+?)(?:\s+\((report\w+)\))?\s*$")
});
static FLAKE8: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(r"^\s*([\w./\\-]+\.pyi?):(\d+):\d+: ([A-Z]{1,3}\d{2,4})(?: \[\*\])? (.+?)\s*$")
});
static TSC: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(
        r"^\s*([\w./\\-]+\.(?:ts|tsx|js|jsx|mts|cts))(?:\((\d+),\d+\)|:(\d+):\d+) ?[:-] error (TS\d+): (.+?)\s*$",
    )
});
static ESLINT_FILE: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^(/?[\w./\\-]+\.(?:js|jsx|ts|tsx|mjs|cjs|vue))\s*$"));
static ESLINT_ROW: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s+(\d+):\d+\s+error\s+(.+?)\s{2,}(@?[\w/-]+)\s*$"));
static SCRIPT_ERROR: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s*Error: ([A-Z]\w*(?:Error|Exception)): (.+?)\s*$"));

/// This module's patterns, each compiled at first use or by [`warm_up`].
fn patterns() -> [&'static Pattern; 7] {
    [
        &*MYPY,
        &*PYRIGHT,
        &*FLAKE8,
        &*TSC,
        &*ESLINT_FILE,
        &*ESLINT_ROW,
        &*SCRIPT_ERROR,
    ]
}

/// Compiles this module's patterns now rather than at first use (see
/// [`super::warm_up`]); answers whether every one compiled.
pub(super) fn warm_up() -> bool {
    patterns().iter().all(|pattern| pattern.is_valid())
}

fn record(error_type: &str, message: &str, file: Option<&str>, line: Option<u32>) -> ErrorRecord {
    ErrorRecord {
        error_type: error_type.to_string(),
        message: truncate_to_bytes(message.trim(), MAX_MESSAGE_BYTES).to_string(),
        frames: file
            .map(|file| Frame {
                file: file.to_string(),
                line,
                function: None,
            })
            .into_iter()
            .collect(),
    }
}

/// Cheap test: could `text` hold a diagnostic at all?
fn may_contain(text: &str) -> bool {
    contains_str!(text, "error")
        || contains_str!(text, "Error: ")
        || (contains_str!(text, ".py:") && text.bytes().any(|b| b.is_ascii_uppercase()))
}

/// What the first word of a line says it may be, looking no further: the
/// mypy, pyright, flake8 and tsc patterns start with `^\s*` and a path of
/// `[\w./\\-]` characters that runs up to the `:` or `(` after its
/// extension, so a line whose first word does not end that way cannot
/// match, whatever the rest holds (and most lines are told apart within a
/// few bytes, where a search of the whole line for a literal costs more than
/// the line's length). A superset of what the patterns match: any non-ASCII
/// byte counts as a path character (it may be a Unicode word character, or
/// whitespace `\s` would skip).
struct FirstWord {
    /// A path ending in `.py` / `.pyi` followed by `:`.
    python_row: bool,
    /// A path ending in a TypeScript / JavaScript extension followed by `(` or `:`.
    tsc_row: bool,
    /// `Error: ` after the whitespace (or a non-ASCII character there, which
    /// may be whitespace `\s` skips).
    script_error_row: bool,
}

impl FirstWord {
    fn of(line: &str) -> FirstWord {
        let bytes = line.as_bytes();
        let start = bytes
            .iter()
            .position(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
            .unwrap_or(bytes.len());
        let rest = bytes.get(start..).unwrap_or(&[]);
        let script_error_row =
            rest.first().is_some_and(|first| !first.is_ascii()) || rest.starts_with(b"Error: ");
        let length = rest
            .iter()
            .position(|&byte| {
                !(byte.is_ascii_alphanumeric()
                    || matches!(byte, b'_' | b'.' | b'/' | b'\\' | b'-')
                    || !byte.is_ascii())
            })
            .unwrap_or(rest.len());
        let (path, after) = rest.split_at(length);
        let next = after.first().copied();
        let ends_with_any =
            |extensions: &[&str]| extensions.iter().any(|ext| path.ends_with(ext.as_bytes()));
        FirstWord {
            python_row: next == Some(b':') && ends_with_any(&[".py", ".pyi"]),
            tsc_row: matches!(next, Some(b'(' | b':'))
                && ends_with_any(&[".ts", ".tsx", ".js", ".jsx", ".mts", ".cts"]),
            script_error_row,
        }
    }
}

/// Whether `line` may be an eslint file line: it ends in a script
/// extension (each pattern runs only on lines holding its literal part).
fn may_name_script(line: &str) -> bool {
    // Every extension ends in `s`, `x` or `e`: another last character that
    // `trim_end` keeps (ASCII, not whitespace) settles most lines at once.
    match line.as_bytes().last() {
        None => return false,
        Some(b's' | b'x' | b'e' | b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') => {}
        Some(last) if last.is_ascii() => return false,
        Some(_) => {}
    }
    let trimmed = line.trim_end();
    [".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".vue"]
        .iter()
        .any(|extension| trimmed.ends_with(extension))
}

/// The diagnostics in `text`, in order, each with the byte range of its line.
pub(crate) fn parse_diagnostics(text: &str) -> Vec<ParsedError> {
    if !may_contain(text) {
        return Vec::new();
    }
    if may_hold_eslint_row(text) {
        return parse_lines(lines_with_offsets(text), true);
    }
    // Without eslint rows, a line is read on its own, and only lines that
    // hold a pattern's literal part can match: those are visited alone.
    parse_lines(lines_holding_literals(text).into_iter(), false)
}

static ERROR_WORD: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("error"));
/// A literal part of every line the mypy, pyright, flake8, tsc and script
/// error patterns match (eslint rows aside).
static LINE_LITERALS: LazyLock<[Finder<'static>; 4]> = LazyLock::new(|| {
    [
        Finder::new(".py:"),
        Finder::new(".pyi:"),
        Finder::new(" error TS"),
        Finder::new("Error: "),
    ]
});

/// Whether some line of `text` may be an eslint row (`  12:5  error  ...`):
/// a word `error` after whitespace and a digit at the start of its line (or
/// after non-ASCII characters there, which may be Unicode whitespace or
/// digits).
fn may_hold_eslint_row(text: &str) -> bool {
    let bytes = text.as_bytes();
    ERROR_WORD.find_iter(bytes).any(|at| {
        let line_start =
            memchr::memrchr(b'\n', bytes.get(..at).unwrap_or(&[])).map_or(0, |newline| newline + 1);
        let prefix = bytes.get(line_start..at).unwrap_or(&[]);
        let is_space = |byte: &u8| matches!(byte, b' ' | b'\t' | b'\x0b' | b'\x0c' | b'\r');
        let starts_with_space = prefix
            .first()
            .is_some_and(|first| is_space(first) || !first.is_ascii());
        let after_space = prefix
            .iter()
            .position(|byte| !is_space(byte))
            .and_then(|index| prefix.get(index));
        starts_with_space
            && after_space.is_some_and(|next| next.is_ascii_digit() || !next.is_ascii())
    })
}

/// The lines of `text` that hold one of [`LINE_LITERALS`], in order (none of
/// them holds a line terminator, so each occurrence lies within one line).
fn lines_holding_literals(text: &str) -> Vec<Line<'_>> {
    let bytes = text.as_bytes();
    let mut starts: Vec<usize> = LINE_LITERALS
        .iter()
        .flat_map(|finder| finder.find_iter(bytes))
        .map(|at| {
            memchr::memrchr(b'\n', bytes.get(..at).unwrap_or(&[])).map_or(0, |newline| newline + 1)
        })
        .collect();
    starts.sort_unstable();
    starts.dedup();
    starts
        .into_iter()
        .filter_map(|start| Line::between(text, start, line_end(bytes, start)))
        .collect()
}

/// A mypy or pyright error row's groups: file, line, message and code.
fn python_checker_row(content: &str) -> Option<Captures<'_>> {
    if content.contains(": error: ")
        && let Some(captures) = MYPY.captures(content)
    {
        return Some(captures);
    }
    if content.contains(" - error: ") {
        PYRIGHT.captures(content)
    } else {
        None
    }
}

/// The diagnostics of `lines`, in order; eslint's file lines and rows are
/// read only when `eslint`.
fn parse_lines<'t>(lines: impl Iterator<Item = Line<'t>>, eslint: bool) -> Vec<ParsedError> {
    let mut found = Vec::new();
    let mut eslint_file: Option<&str> = None;
    for line in lines {
        if found.len() >= MAX_DIAGNOSTICS {
            break;
        }
        let content = line.text;
        if content.len() > 2_000 {
            continue;
        }
        let first_word = FirstWord::of(content);
        let python_row = first_word.python_row;
        let parsed = if python_row && let Some(captures) = python_checker_row(content) {
            Some(record(
                captures.get(4).map_or("error", |m| m.as_str()),
                captures.get(3).map_or("", |m| m.as_str()),
                captures.get(1).map(|m| m.as_str()),
                captures.get(2).and_then(|m| m.as_str().parse().ok()),
            ))
        } else if python_row && let Some(captures) = FLAKE8.captures(content) {
            Some(record(
                captures.get(3).map_or("error", |m| m.as_str()),
                captures.get(4).map_or("", |m| m.as_str()),
                captures.get(1).map(|m| m.as_str()),
                captures.get(2).and_then(|m| m.as_str().parse().ok()),
            ))
        } else if first_word.tsc_row
            && content.contains(" error TS")
            && let Some(captures) = TSC.captures(content)
        {
            Some(record(
                captures.get(4).map_or("error", |m| m.as_str()),
                captures.get(5).map_or("", |m| m.as_str()),
                captures.get(1).map(|m| m.as_str()),
                captures
                    .get(2)
                    .or_else(|| captures.get(3))
                    .and_then(|m| m.as_str().parse().ok()),
            ))
        } else if eslint
            && may_name_script(content)
            && let Some(captures) = ESLINT_FILE.captures(content)
        {
            eslint_file = captures.get(1).map(|m| m.as_str());
            None
        } else if let Some(file) = eslint_file
            && content.contains("error")
            && let Some(captures) = ESLINT_ROW.captures(content)
        {
            Some(record(
                captures.get(3).map_or("error", |m| m.as_str()),
                captures.get(2).map_or("", |m| m.as_str()),
                Some(file),
                captures.get(1).and_then(|m| m.as_str().parse().ok()),
            ))
        } else if first_word.script_error_row
            && let Some(captures) = SCRIPT_ERROR.captures(content)
        {
            Some(record(
                captures.get(1).map_or("Error", |m| m.as_str()),
                captures.get(2).map_or("", |m| m.as_str()),
                None,
                None,
            ))
        } else {
            if eslint_file.is_some() && content.trim().is_empty() {
                eslint_file = None;
            }
            None
        };
        if let Some(record) = parsed {
            found.push(ParsedError {
                record,
                start: line.start,
                end: line.end,
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (error type, message, (file, line)).
    type Expected<'a> = (&'a str, &'a str, Option<(&'a str, u32)>);
    type Got = (String, String, Option<(String, u32)>);

    fn check(text: &str, expected: &[Expected<'_>]) {
        let got: Vec<Got> = parse_diagnostics(text)
            .into_iter()
            .map(|error| {
                let frame = error
                    .record
                    .frames
                    .first()
                    .map(|frame| (frame.file.clone(), frame.line.unwrap_or(0)));
                (error.record.error_type, error.record.message, frame)
            })
            .collect();
        let expected: Vec<Got> = expected
            .iter()
            .map(|(kind, message, frame)| {
                (
                    kind.to_string(),
                    message.to_string(),
                    frame.map(|(file, line)| (file.to_string(), line)),
                )
            })
            .collect();
        assert_eq!(got, expected, "{text}");
    }

    #[test]
    fn mypy_and_pyright() {
        check(
            "pkg/a.py:12: error: Incompatible return value type (got \"int\", expected \"str\")  [return-value]\npkg/a.py:13: note: see here\nFound 1 error in 1 file",
            &[(
                "return-value",
                "Incompatible return value type (got \"int\", expected \"str\")",
                Some(("pkg/a.py", 12)),
            )],
        );
        check(
            "  /repo/pkg/b.py:7:5 - error: \"foo\" is not defined (reportUndefinedVariable)",
            &[(
                "reportUndefinedVariable",
                "\"foo\" is not defined",
                Some(("/repo/pkg/b.py", 7)),
            )],
        );
    }

    #[test]
    fn ruff_flake8_tsc_and_eslint() {
        check(
            "pkg/c.py:3:1: F401 [*] `os` imported but unused\npkg/c.py:9:80: E501 line too long (88 > 79 characters)",
            &[
                ("F401", "`os` imported but unused", Some(("pkg/c.py", 3))),
                (
                    "E501",
                    "line too long (88 > 79 characters)",
                    Some(("pkg/c.py", 9)),
                ),
            ],
        );
        check(
            "src/a.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'.\nsrc/b.tsx:3:1 - error TS2304: Cannot find name 'React'.",
            &[
                (
                    "TS2322",
                    "Type 'string' is not assignable to type 'number'.",
                    Some(("src/a.ts", 12)),
                ),
                (
                    "TS2304",
                    "Cannot find name 'React'.",
                    Some(("src/b.tsx", 3)),
                ),
            ],
        );
        check(
            "/home/u/app/src/index.js\n  4:7   error  'x' is assigned a value but never used  no-unused-vars\n\n✖ 1 problem",
            &[(
                "no-unused-vars",
                "'x' is assigned a value but never used",
                Some(("/home/u/app/src/index.js", 4)),
            )],
        );
    }

    #[test]
    fn script_errors_and_grep_lines_that_are_not_diagnostics() {
        check(
            "Error: TypeError: cannot read property 'x' of undefined",
            &[("TypeError", "cannot read property 'x' of undefined", None)],
        );
        check("pkg/a.py:12:    def error(self): pass\n", &[]);
    }

    #[test]
    fn unicode_paths_and_leading_unicode_whitespace_are_still_read() {
        check(
            "\u{3000}pkg/a.py:12: error: Bad value  [misc]\npkg/é.py:3:1: F401 unused\n\u{a0}src/ü.ts(1,2): error TS2304: Cannot find name 'x'.\n\u{3000}Error: ValueError: bad",
            &[
                ("misc", "Bad value", Some(("pkg/a.py", 12))),
                ("F401", "unused", Some(("pkg/é.py", 3))),
                ("TS2304", "Cannot find name 'x'.", Some(("src/ü.ts", 1))),
                ("ValueError", "bad", None),
            ],
        );
    }

    /// The first-word test only skips work: on lines built from the
    /// patterns' pieces, whatever a pattern matches passes its test.
    #[test]
    fn the_first_word_test_passes_every_line_a_pattern_matches() {
        const SLOTS: &[&[&str]] = &[
            &["", " ", "\t", "\u{3000}", "\u{a0}", "\u{3000}x"],
            &[
                "pkg/a", "é", "/r/b-c", "a\\b", "x.y/z", "", "pkg a", "Error",
            ],
            &[
                ".py", ".pyi", ".ts", ".tsx", ".js", ".mts", ".vue", ".mjs", ".txt", "",
            ],
            &[":12", ":12:5", "(3,4)", ":", "", "(3", "é"],
            &[
                ": error: ",
                " - error: ",
                ": F401 ",
                ": E501 [*] ",
                ": error TS2304: ",
                " - error TS2322: ",
                " ",
                ": ",
                "",
            ],
            &[
                "msg",
                "Bad  [misc]",
                "x (reportUndefinedVariable)",
                "",
                "TypeError: y",
                "\u{a0}",
                "\x0b",
                "\t",
            ],
        ];
        let mut next = crate::text::pseudo_random_below(0x2545_f491_4f6c_dd1du64);
        let mut matched = [0usize; 6];
        for _ in 0..50_000 {
            let mut line = String::new();
            for slot in SLOTS {
                line.push_str(slot[next(slot.len())]);
            }
            if next(4) == 0 {
                // A script error after the leading whitespace.
                let at = line.len() - line.trim_start().len();
                line.insert_str(at, "Error: ValueError: ");
            }
            let first_word = FirstWord::of(&line);
            for (number, (pattern, gate)) in [
                (&*MYPY, first_word.python_row),
                (&*PYRIGHT, first_word.python_row),
                (&*FLAKE8, first_word.python_row),
                (&*TSC, first_word.tsc_row),
                (&*SCRIPT_ERROR, first_word.script_error_row),
                (&*ESLINT_FILE, may_name_script(&line)),
            ]
            .into_iter()
            .enumerate()
            {
                if pattern.is_match(&line) {
                    matched[number] += 1;
                    assert!(gate, "pattern {number} matches {line:?}");
                }
            }
        }
        // Each pattern matched some lines, so the test can fail.
        assert!(matched.iter().all(|&count| count > 0), "{matched:?}");
    }

    /// Visiting only the lines that hold a literal (when no line may be an
    /// eslint row) finds what visiting every line finds.
    #[test]
    fn lines_holding_literals_give_what_every_line_gives() {
        const LINES: &[&str] = &[
            "pkg/a.py:12: error: Bad value  [misc]",
            "  /r/b.py:7:5 - error: \"x\" is not defined (reportUndefinedVariable)",
            "pkg/c.py:3:1: F401 [*] `os` imported but unused",
            "pkg/a.py:12:    def error(self): pass",
            "src/a.ts(12,5): error TS2322: Type 'string' is not assignable.",
            "/home/u/app/src/index.js",
            "src/b.vue  ",
            "  4:7   error  'x' is assigned a value but never used  no-unused-vars",
            "\u{3000}12:1  error  Missing semicolon  semi",
            "Error: TypeError: cannot read property 'x' of undefined",
            "\u{a0}Error: ValueError: bad",
            "an error occurred",
            "    raise ValueError(\"error\")",
            "",
            "   ",
            "x = 1",
            "é.py:1:1: E1 msg",
        ];
        let mut next = crate::text::pseudo_random_below(0x0bad_5eed_1234_5678u64);
        let (mut num_texts_without_rows, mut num_found) = (0, 0);
        for _ in 0..5_000 {
            let mut text = String::new();
            for _ in 0..1 + next(10) {
                text.push_str(LINES[next(LINES.len())]);
                text.push_str(["\n", "\r\n", "\n\n"][next(3)]);
            }
            let every_line = if may_contain(&text) {
                parse_lines(lines_with_offsets(&text), true)
            } else {
                Vec::new()
            };
            num_found += every_line.len();
            if !may_hold_eslint_row(&text) {
                num_texts_without_rows += 1;
            }
            assert_eq!(parse_diagnostics(&text), every_line, "{text:?}");
        }
        assert!(num_texts_without_rows > 1_000, "{num_texts_without_rows}");
        assert!(num_found > 5_000, "{num_found}");
    }

    #[test]
    fn every_pattern_compiles() {
        assert!(warm_up());
    }
}
