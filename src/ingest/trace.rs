//! Error traces: Python tracebacks (plain, IPython, chained), pytest failure
//! sections and short-summary lines, Rust compiler errors and panics (old and
//! new formats, with backtraces), Go panics with goroutine stacks, and Java /
//! JavaScript exceptions with their `at ...` frames (`Caused by:` chains).
//!
//! Each trace becomes an [`ErrorRecord`] (type, first message line, frames)
//! with the byte range it spans in the text. Scanning is one pass over the
//! lines with bounded look-back and look-ahead; frames per error and errors
//! per text are capped. Which errors matter for the session is left to the
//! caller.

use std::sync::LazyLock;

use super::text::{
    Line, Pattern, contains_str, lines_with_offsets, some_line_may_start_with, truncate_to_bytes,
};
use super::{ErrorRecord, Frame};

/// Frames kept per error (the innermost ones).
pub const MAX_FRAMES_PER_ERROR: usize = 200;
/// Errors kept per text.
const MAX_ERRORS_PER_TEXT: usize = 200;
/// Bytes kept of an error message.
const MAX_MESSAGE_BYTES: usize = 1_000;
/// Lines a single trace may span.
const MAX_TRACE_LINES: usize = 20_000;
/// Lines looked back for the header of a Java / JavaScript stack.
const STACK_HEADER_LOOK_BACK: usize = 40;

/// An error found in a text, with the byte range of its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedError {
    /// The error.
    pub record: ErrorRecord,
    /// Byte offset of the first line of the trace.
    pub start: usize,
    /// Byte offset just past the last line of the trace.
    pub end: usize,
}

static PYTHON_FRAME: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r#"^\s*File "([^"]+)", line (\d+)(?:, in (.+))?\s*$"#));
static IPYTHON_FRAME: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^File (\S.*?):(\d+)(?:, in ([^\s(]+))?"));
static IPYTHON_OLD_FRAME: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(
        r"^\[?(<ipython-input-[^>\s]+>|[^\s\[\]()]+\.pyx?)\]?(?:\([^)\s]*\))? in ([\w<>.]+)",
    )
});
static PYTHON_EXCEPTION: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$"));
static RUSTC_ERROR: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^error(?:\[(E\d{4})\])?: (.+)$"));
static RUSTC_LOCATION: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s*(?:-->|:::) (.+?):(\d+)(?::\d+)?\s*$"));
static RUST_PANIC_NEW: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"panicked at ([^\s']+?):(\d+):(\d+):?\s*$"));
static RUST_PANIC_OLD: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"panicked at '(.*)'(?:, ([^\s:]+):(\d+)(?::\d+)?)?"));
static RUST_BACKTRACE_SYMBOL: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s*\d+: (\S.*?)\s*$"));
static RUST_BACKTRACE_LOCATION: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s*at (.+?):(\d+)(?::\d+)?\s*$"));
static GO_LOCATION: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s+(\S+\.go):(\d+)(?:\s|$)"));
static STACK_FRAME_PARENTHESIZED: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s*at (?:async )?(?:new )?(.+?) \((.+?)\)\s*$"));
static STACK_FRAME_JAVA: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s*at ([\w$.<>/]+)\(([^()]*)\)\s*$"));
static STACK_FRAME_BARE: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\s*at (?:async )?(\S+:\d+(?::\d+)?)\s*$"));
static STACK_HEADER: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(
        r#"^\s*(?:.*?(?-u:\b)Uncaught\s+|Exception in thread "[^"]*"\s+|Caused by:\s+|Suppressed:\s+)?((?:[A-Za-z_$][\w$]*\.)*(?:[A-Za-z_$][\w$]*(?:Error|Exception|Throwable|Failure|Fault)|Error))(?:\s+\[[A-Z_]+\])?(?::\s*(.*))?$"#,
    )
});
static PYTEST_SECTION: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^_{3,} (.+?) _{3,}\s*$"));
static PYTEST_LOCATION: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^(\S+\.py):(\d+):(?: (\w+))?\s*$"));
static PYTEST_SHORT_FAILURE: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^(FAILED|ERROR) (\S+?\.py(?:::\S+?)?)(?: - (.*))?\s*$"));

/// This module's patterns, each compiled at first use or by [`warm_up`].
fn patterns() -> [&'static Pattern; 18] {
    [
        &*PYTHON_FRAME,
        &*IPYTHON_FRAME,
        &*IPYTHON_OLD_FRAME,
        &*PYTHON_EXCEPTION,
        &*RUSTC_ERROR,
        &*RUSTC_LOCATION,
        &*RUST_PANIC_NEW,
        &*RUST_PANIC_OLD,
        &*RUST_BACKTRACE_SYMBOL,
        &*RUST_BACKTRACE_LOCATION,
        &*GO_LOCATION,
        &*STACK_FRAME_PARENTHESIZED,
        &*STACK_FRAME_JAVA,
        &*STACK_FRAME_BARE,
        &*STACK_HEADER,
        &*PYTEST_SECTION,
        &*PYTEST_LOCATION,
        &*PYTEST_SHORT_FAILURE,
    ]
}

/// Compiles this module's patterns now rather than at first use (see
/// [`super::warm_up`]); answers whether every one compiled.
pub(super) fn warm_up() -> bool {
    patterns().iter().all(|pattern| pattern.is_valid())
}

/// Finds every error trace in `text`.
pub fn parse_errors(text: &str) -> Vec<ParsedError> {
    let mut errors = Vec::new();
    // Substring searches once per text, not once per line.
    let has_traceback = contains_str!(text, "Traceback (most recent call last)");
    let has_panic = contains_str!(text, "panicked at");
    // Most texts have no line any parser below starts at: spare them the
    // line list.
    if !has_traceback
        && !has_panic
        && !some_line_may_start_with(
            text,
            &["error", "panic: ", "at ", "___", "FAILED ", "ERROR "],
        )
    {
        return errors;
    }
    let lines: Vec<Line<'_>> = lines_with_offsets(text).collect();
    let mut index = 0;
    while index < lines.len() && errors.len() < MAX_ERRORS_PER_TEXT {
        let line = lines[index].text;
        let trimmed = line.trim_start();
        let parsed = if has_traceback && line.contains("Traceback (most recent call last)") {
            parse_python_traceback(&lines, index)
        } else if line.starts_with("error") {
            parse_rustc_error(&lines, index)
        } else if has_panic && line.contains("panicked at") {
            parse_rust_panic(&lines, index)
        } else if trimmed.starts_with("panic: ") {
            parse_go_panic(&lines, index)
        } else if trimmed.starts_with("at ") && is_stack_frame(line) {
            parse_stack(&lines, index)
        } else if line.starts_with("___") {
            parse_pytest_section(&lines, index)
        } else if line.starts_with("FAILED ") || line.starts_with("ERROR ") {
            parse_pytest_short_failure(&lines, index)
        } else {
            None
        };
        match parsed {
            Some((error, next_index)) => {
                errors.push(error);
                index = next_index.max(index + 1);
            }
            None => index += 1,
        }
    }
    errors
}

fn clip_message(message: &str) -> String {
    truncate_to_bytes(message.trim(), MAX_MESSAGE_BYTES).to_string()
}

fn frame(file: &str, line: Option<u32>, function: Option<&str>) -> Frame {
    Frame {
        file: truncate_to_bytes(file.trim(), 500).to_string(),
        line,
        function: function
            .map(|name| truncate_to_bytes(name.trim(), 300).to_string())
            .filter(|name| !name.is_empty()),
    }
}

/// Keeps the innermost frames: the last ones when `innermost_last`, else the first ones.
fn cap_frames(frames: &mut Vec<Frame>, innermost_last: bool) {
    if frames.len() > MAX_FRAMES_PER_ERROR {
        if innermost_last {
            let excess = frames.len() - MAX_FRAMES_PER_ERROR;
            frames.drain(..excess);
        } else {
            frames.truncate(MAX_FRAMES_PER_ERROR);
        }
    }
}

fn make_error(
    lines: &[Line<'_>],
    first: usize,
    last: usize,
    error_type: &str,
    message: &str,
    frames: Vec<Frame>,
) -> ParsedError {
    ParsedError {
        record: ErrorRecord {
            error_type: truncate_to_bytes(error_type.trim(), 200).to_string(),
            message: clip_message(message),
            frames,
        },
        start: lines[first].start,
        end: lines[last.min(lines.len() - 1)].end,
    }
}

fn parse_python_traceback(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
    let header = lines[start].text;
    // IPython: "LinAlgError        Traceback (most recent call last)".
    let header_prefix = header
        .split("Traceback (most recent call last)")
        .next()
        .map(str::trim)
        .unwrap_or("");
    // A log prefix repeated on every line ("(main_task pid=2794522) ", "INFO | "),
    // or the indentation of a traceback quoted in a docstring.
    let indentation = header
        .get(..header.len() - header.trim_start().len())
        .unwrap_or("");
    let log_prefix = if header_prefix.is_empty() {
        Some(indentation).filter(|indentation| !indentation.is_empty())
    } else {
        lines
            .get(start + 1)
            .filter(|next| next.text.starts_with(header_prefix))
            .map(|_| header_prefix)
    };
    let ipython_type = Some(header_prefix)
        .filter(|prefix| log_prefix.is_none() && !prefix.is_empty() && !prefix.contains(' '))
        .map(str::to_string);
    let has_log_prefix = log_prefix.is_some_and(|prefix| !prefix.trim().is_empty());
    let mut frames = Vec::new();
    let mut index = start + 1;
    let limit = lines.len().min(start + MAX_TRACE_LINES);
    while index < limit {
        let raw_line = lines[index].text;
        let line = match log_prefix {
            Some(prefix) => match raw_line.strip_prefix(prefix) {
                Some(rest) if has_log_prefix => rest.strip_prefix(' ').unwrap_or(rest),
                Some(rest) => rest,
                // A docstring traceback ends where its indentation does.
                None if !has_log_prefix && !raw_line.trim().is_empty() => break,
                None => raw_line,
            },
            None => raw_line,
        };
        let trimmed = line.trim_start();
        if trimmed.starts_with("File ") {
            if let Some(captures) = PYTHON_FRAME.captures(line) {
                frames.push(frame(
                    captures.get(1).map_or("", |m| m.as_str()),
                    captures.get(2).and_then(|m| m.as_str().parse().ok()),
                    captures.get(3).map(|m| m.as_str()),
                ));
            } else if let Some(captures) = IPYTHON_FRAME.captures(trimmed) {
                frames.push(frame(
                    captures.get(1).map_or("", |m| m.as_str()),
                    captures.get(2).and_then(|m| m.as_str().parse().ok()),
                    captures.get(3).map(|m| m.as_str()),
                ));
            }
            index += 1;
            continue;
        }
        if line.contains("Traceback (most recent call last)") {
            // A new traceback began before this one named its exception.
            break;
        }
        if let Some(captures) = IPYTHON_OLD_FRAME.captures(line) {
            // Older IPython: "<ipython-input-3-81609fd8d2ca> in <module>",
            // "~/venv/sklearn/linear_model/logistic.py in fit(self, X, y)".
            frames.push(frame(
                captures.get(1).map_or("", |m| m.as_str()),
                None,
                captures.get(2).map(|m| m.as_str()),
            ));
            index += 1;
            continue;
        }
        if let Some(arrow) = trimmed.trim_start_matches('-').strip_prefix('>') {
            // "---> 52 test()": the line of the frame above.
            let number = arrow
                .trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|digits| digits.parse().ok());
            if let Some(last_frame) = frames.last_mut()
                && last_frame.line.is_none()
            {
                last_frame.line = number;
            }
            index += 1;
            continue;
        }
        if line.is_empty()
            || line.starts_with(char::is_whitespace)
            || trimmed.starts_with("Cell In[")
            || trimmed.chars().all(|c| c == '^' || c == '~')
            || trimmed.starts_with("...")
            || trimmed.starts_with("[Previous line repeated")
            || trimmed.starts_with("[... ")
        {
            if let Some(cell) = trimmed.strip_prefix("Cell In[") {
                let line_number = cell
                    .split("line ")
                    .nth(1)
                    .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|digits| digits.parse().ok());
                frames.push(frame("<ipython cell>", line_number, None));
            }
            index += 1;
            continue;
        }
        if let Some(captures) = PYTHON_EXCEPTION.captures(line) {
            let error_type = captures.get(1).map_or("", |m| m.as_str());
            let message = captures.get(2).map_or("", |m| m.as_str());
            cap_frames(&mut frames, true);
            return Some((
                make_error(lines, start, index, error_type, message, frames),
                index + 1,
            ));
        }
        // Some other unindented line: the exception line is missing.
        break;
    }
    let last = index.saturating_sub(1).max(start);
    cap_frames(&mut frames, true);
    let error_type = ipython_type.unwrap_or_else(|| "Traceback".to_string());
    Some((
        make_error(lines, start, last, &error_type, "", frames),
        last + 1,
    ))
}

fn parse_rustc_error(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
    let captures = RUSTC_ERROR.captures(lines[start].text)?;
    let message = captures.get(2).map_or("", |m| m.as_str());
    let code = captures.get(1).map(|m| m.as_str());
    let generic = message.starts_with("aborting due to")
        || message.starts_with("could not compile")
        || message.starts_with("test failed")
        || message.starts_with("Recipe");
    if generic {
        return None;
    }
    let mut frames = Vec::new();
    let mut index = start + 1;
    let limit = lines.len().min(start + 400);
    while index < limit {
        let line = lines[index].text;
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with("error") || line.starts_with("warning") {
            break;
        }
        if let Some(location) = RUSTC_LOCATION.captures(line) {
            frames.push(frame(
                location.get(1).map_or("", |m| m.as_str()),
                location.get(2).and_then(|m| m.as_str().parse().ok()),
                None,
            ));
        }
        index += 1;
    }
    // A bare "error: ..." with no location is only kept when it has an error code.
    if code.is_none() && frames.is_empty() {
        return None;
    }
    cap_frames(&mut frames, false);
    let last = index.saturating_sub(1).max(start);
    Some((
        make_error(lines, start, last, code.unwrap_or("error"), message, frames),
        last + 1,
    ))
}

fn parse_rust_panic(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
    let line = lines[start].text;
    let mut frames = Vec::new();
    let mut message = String::new();
    let mut last = start;
    if let Some(captures) = RUST_PANIC_NEW.captures(line) {
        frames.push(frame(
            captures.get(1).map_or("", |m| m.as_str()),
            captures.get(2).and_then(|m| m.as_str().parse().ok()),
            None,
        ));
        if let Some(next) = lines.get(start + 1) {
            message = next.text.to_string();
            last = start + 1;
        }
    } else if let Some(captures) = RUST_PANIC_OLD.captures(line) {
        message = captures.get(1).map_or("", |m| m.as_str()).to_string();
        if let Some(file) = captures.get(2) {
            frames.push(frame(
                file.as_str(),
                captures.get(3).and_then(|m| m.as_str().parse().ok()),
                None,
            ));
        }
    } else {
        return None;
    }
    // Optional "stack backtrace:" with "N: symbol" / "at path:line:col" pairs.
    let mut index = last + 1;
    let limit = lines.len().min(start + MAX_TRACE_LINES);
    while index < limit {
        let text = lines[index].text;
        let trimmed = text.trim();
        if trimmed.starts_with("note: run with `RUST_BACKTRACE") || trimmed == "stack backtrace:" {
            last = index;
            index += 1;
            continue;
        }
        if let Some(symbol) = RUST_BACKTRACE_SYMBOL.captures(text) {
            let function = symbol.get(1).map_or("", |m| m.as_str());
            let location = lines
                .get(index + 1)
                .and_then(|next| RUST_BACKTRACE_LOCATION.captures(next.text));
            match location {
                Some(location) => {
                    frames.push(frame(
                        location.get(1).map_or("", |m| m.as_str()),
                        location.get(2).and_then(|m| m.as_str().parse().ok()),
                        Some(function),
                    ));
                    last = index + 1;
                    index += 2;
                }
                None => {
                    frames.push(frame("", None, Some(function)));
                    last = index;
                    index += 1;
                }
            }
            continue;
        }
        break;
    }
    cap_frames(&mut frames, false);
    Some((
        make_error(lines, start, last, "panic", &message, frames),
        last + 1,
    ))
}

fn parse_go_panic(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
    let message = lines[start].text.trim_start().strip_prefix("panic: ")?;
    let mut frames = Vec::new();
    let mut last = start;
    let mut index = start + 1;
    let limit = lines.len().min(start + MAX_TRACE_LINES);
    let mut in_goroutine = false;
    while index < limit {
        let text = lines[index].text;
        let trimmed = text.trim();
        if trimmed.starts_with("goroutine ") && trimmed.ends_with(':') {
            if in_goroutine {
                break; // only the first (panicking) goroutine
            }
            in_goroutine = true;
            last = index;
            index += 1;
            continue;
        }
        if !in_goroutine {
            // "[signal SIGSEGV ...]", blank lines, "[recovered]" before the stack.
            if index > start + 6 {
                break;
            }
            index += 1;
            continue;
        }
        if trimmed.is_empty() {
            break;
        }
        let location = lines
            .get(index + 1)
            .and_then(|next| GO_LOCATION.captures(next.text));
        if let Some(location) = location {
            let function = trimmed.strip_prefix("created by ").unwrap_or(trimmed);
            let function = match function.rfind('(') {
                Some(paren) if function.ends_with(')') => function.get(..paren).unwrap_or(function),
                _ => function,
            };
            frames.push(frame(
                location.get(1).map_or("", |m| m.as_str()),
                location.get(2).and_then(|m| m.as_str().parse().ok()),
                Some(function),
            ));
            last = index + 1;
            index += 2;
            continue;
        }
        break;
    }
    cap_frames(&mut frames, false);
    Some((
        make_error(lines, start, last, "panic", message, frames),
        last + 1,
    ))
}

fn is_stack_frame(line: &str) -> bool {
    STACK_FRAME_PARENTHESIZED.is_match(line)
        || STACK_FRAME_JAVA.is_match(line)
        || STACK_FRAME_BARE.is_match(line)
}

/// `path:line[:column]` → (path, line).
fn split_location(location: &str) -> (String, Option<u32>) {
    let mut parts: Vec<&str> = location.rsplitn(3, ':').collect();
    parts.reverse();
    // parts: [path, line, column] or [path, line] or [path]
    let numeric = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        [path, line, column] if numeric(line) && numeric(column) => {
            (path.to_string(), line.parse().ok())
        }
        [path, line, last] if numeric(last) => (format!("{path}:{line}"), last.parse().ok()),
        [path, line] if numeric(line) => (path.to_string(), line.parse().ok()),
        _ => (location.to_string(), None),
    }
}

fn stack_frame(line: &str) -> Option<Frame> {
    if let Some(captures) = STACK_FRAME_JAVA.captures(line) {
        let function = captures.get(1).map_or("", |m| m.as_str());
        let location = captures.get(2).map_or("", |m| m.as_str());
        let (file, line_number) = match location.split_once(':') {
            Some((file, number)) => (file, number.trim().parse().ok()),
            None => (location, None),
        };
        return Some(frame(file, line_number, Some(function)));
    }
    if let Some(captures) = STACK_FRAME_PARENTHESIZED.captures(line) {
        let function = captures.get(1).map_or("", |m| m.as_str());
        let (file, line_number) = split_location(captures.get(2).map_or("", |m| m.as_str()));
        return Some(frame(&file, line_number, Some(function)));
    }
    if let Some(captures) = STACK_FRAME_BARE.captures(line) {
        let (file, line_number) = split_location(captures.get(1).map_or("", |m| m.as_str()));
        return Some(frame(&file, line_number, None));
    }
    None
}

/// A Java / JavaScript stack: consecutive `at ...` lines, with the exception
/// header looked for just above.
fn parse_stack(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
    let mut frames = Vec::new();
    let mut index = start;
    let limit = lines.len().min(start + MAX_TRACE_LINES);
    while index < limit {
        let text = lines[index].text;
        let trimmed = text.trim_start();
        if trimmed.starts_with("at ") {
            if let Some(found) = stack_frame(text) {
                frames.push(found);
                index += 1;
                continue;
            }
            break;
        }
        if trimmed.starts_with("... ") && trimmed.ends_with("more") {
            index += 1;
            continue;
        }
        break;
    }
    let last = index.saturating_sub(1).max(start);
    let mut first = start;
    let mut error_type = String::from("Error");
    let mut message = String::new();
    let look_back_floor = start.saturating_sub(STACK_HEADER_LOOK_BACK);
    let mut back = start;
    while back > look_back_floor {
        back -= 1;
        let text = lines[back].text;
        if text.trim_start().starts_with("at ") && is_stack_frame(text) {
            break; // the previous stack
        }
        if let Some(captures) = STACK_HEADER.captures(text) {
            error_type = captures.get(1).map_or("Error", |m| m.as_str()).to_string();
            message = captures.get(2).map_or("", |m| m.as_str()).to_string();
            first = back;
            break;
        }
    }
    cap_frames(&mut frames, false);
    Some((
        make_error(lines, first, last, &error_type, &message, frames),
        last + 1,
    ))
}

/// A pytest failure section: `____ test_name ____` up to the next section or `====` line.
fn parse_pytest_section(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
    let captures = PYTEST_SECTION.captures(lines[start].text)?;
    let test_name = captures.get(1).map_or("", |m| m.as_str()).to_string();
    let mut frames = Vec::new();
    let mut first_e_line: Option<String> = None;
    let mut location_type: Option<String> = None;
    let mut index = start + 1;
    let limit = lines.len().min(start + MAX_TRACE_LINES);
    while index < limit {
        let text = lines[index].text;
        if text.starts_with("___") && PYTEST_SECTION.is_match(text) {
            break;
        }
        if text.starts_with("===") || text.starts_with("---") && text.contains(" Captured ") {
            break;
        }
        if let Some(content) = text.strip_prefix("E ") {
            if first_e_line.is_none() {
                first_e_line = Some(content.trim().to_string());
            }
        } else if let Some(location) = PYTEST_LOCATION.captures(text) {
            frames.push(frame(
                location.get(1).map_or("", |m| m.as_str()),
                location.get(2).and_then(|m| m.as_str().parse().ok()),
                None,
            ));
            if let Some(error_type) = location.get(3) {
                location_type = Some(error_type.as_str().to_string());
            }
        }
        index += 1;
    }
    if first_e_line.is_none() && frames.is_empty() {
        return None;
    }
    // pytest lists the test function's own location first.
    if let Some(first_frame) = frames.first_mut() {
        first_frame
            .function
            .get_or_insert(test_name.replace("::", "."));
    }
    let e_line = first_e_line.unwrap_or_default();
    let (mut error_type, message) = split_exception_text(&e_line);
    if let Some(location_type) = location_type {
        error_type = location_type;
    }
    cap_frames(&mut frames, true);
    let last = index.saturating_sub(1).max(start);
    Some((
        make_error(lines, start, last, &error_type, &message, frames),
        last + 1,
    ))
}

/// `ValueError: msg` → (ValueError, msg); `assert x == y` → (AssertionError, text).
fn split_exception_text(text: &str) -> (String, String) {
    let text = text.trim();
    if let Some((name, rest)) = text.split_once(':') {
        let name = name.trim();
        let looks_like_type = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
        if looks_like_type && name != "assert" {
            return (name.to_string(), rest.trim().to_string());
        }
    }
    ("AssertionError".to_string(), text.to_string())
}

/// `FAILED tests/x.py::test_y - ValueError: msg` (pytest -rA short summary).
fn parse_pytest_short_failure(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
    let captures = PYTEST_SHORT_FAILURE.captures(lines[start].text)?;
    let detail = captures.get(3)?.as_str();
    let node_id = captures.get(2).map_or("", |m| m.as_str());
    let (file, test) = match node_id.split_once("::") {
        Some((file, test)) => (file, Some(test)),
        None => (node_id, None),
    };
    let test = test.map(|name| {
        let without_params = name.split('[').next().unwrap_or(name);
        without_params.replace("::", ".")
    });
    let (error_type, message) = split_exception_text(detail);
    let frames = vec![frame(file, None, test.as_deref())];
    Some((
        make_error(lines, start, start, &error_type, &message, frames),
        start + 1,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (type, message, [(file, line, function)])
    type Expected<'a> = (
        &'a str,
        &'a str,
        Vec<(&'a str, Option<u32>, Option<&'a str>)>,
    );

    /// The owned form of [`Expected`].
    type Owned = (String, String, Vec<(String, Option<u32>, Option<String>)>);

    fn check(input: &str, expected: Vec<Expected<'_>>) {
        let got: Vec<Owned> = parse_errors(input)
            .into_iter()
            .map(|error| {
                (
                    error.record.error_type,
                    error.record.message,
                    error
                        .record
                        .frames
                        .into_iter()
                        .map(|frame| (frame.file, frame.line, frame.function))
                        .collect(),
                )
            })
            .collect();
        let expected: Vec<Owned> = expected
            .into_iter()
            .map(|(error_type, message, frames)| {
                (
                    error_type.to_string(),
                    message.to_string(),
                    frames
                        .into_iter()
                        .map(|(file, line, function)| {
                            (file.to_string(), line, function.map(str::to_string))
                        })
                        .collect(),
                )
            })
            .collect();
        assert_eq!(got, expected, "errors of:\n{input}");
    }

    #[test]
    fn python_traceback() {
        check(
            "But raises\n```python\nTraceback (most recent call last):\n  File \"mre.py\", line 13, in <module>\n    my_flow.validate_parameters(flow_run_params)\n  File \"/usr/lib/python3.10/abc.py\", line 123, in __subclasscheck__\n    return _abc_subclasscheck(cls, subclass)\n           ^^^^^^^^^^^^^^^^\nTypeError: issubclass() arg 1 must be a class\n```\n",
            vec![(
                "TypeError",
                "issubclass() arg 1 must be a class",
                vec![
                    ("mre.py", Some(13), Some("<module>")),
                    (
                        "/usr/lib/python3.10/abc.py",
                        Some(123),
                        Some("__subclasscheck__"),
                    ),
                ],
            )],
        );
    }

    #[test]
    fn chained_python_tracebacks_are_separate_errors() {
        check(
            "Traceback (most recent call last):\n  File \"/u/decoder.py\", line 340, in decode\n    raise JSONDecodeError(\"Extra data\", s, end)\njson.decoder.JSONDecodeError: Extra data: line 1 column 9378\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"/u/common.py\", line 1091, in _parse_json\n    return json.loads(\nyt_dlp.utils.ExtractorError: Failed to parse JSON\n",
            vec![
                (
                    "json.decoder.JSONDecodeError",
                    "Extra data: line 1 column 9378",
                    vec![("/u/decoder.py", Some(340), Some("decode"))],
                ),
                (
                    "yt_dlp.utils.ExtractorError",
                    "Failed to parse JSON",
                    vec![("/u/common.py", Some(1091), Some("_parse_json"))],
                ),
            ],
        );
    }

    #[test]
    fn ipython_traceback_and_syntax_error_frame() {
        check(
            "LinAlgError                               Traceback (most recent call last)\nFile ~/code/seaborn/seaborn/_core/plot.py:265, in Plot._repr_png_(self)\n    263 def _repr_png_(self):\n--> 265     return self.plot()._repr_png_()\n\nLinAlgError: SVD did not converge in Linear Least Squares\n",
            vec![(
                "LinAlgError",
                "SVD did not converge in Linear Least Squares",
                vec![(
                    "~/code/seaborn/seaborn/_core/plot.py",
                    Some(265),
                    Some("Plot._repr_png_"),
                )],
            )],
        );
        check(
            "Traceback (most recent call last):\n  File \"x.py\", line 3\n    def f(\n         ^\nSyntaxError: invalid syntax\n",
            vec![(
                "SyntaxError",
                "invalid syntax",
                vec![("x.py", Some(3), None)],
            )],
        );
    }

    #[test]
    fn ipython_arrows_and_array_function_frames() {
        check(
            "LinAlgError                               Traceback (most recent call last)\nFile ~/code/seaborn/seaborn/_core/plot.py:1110, in Plotter._compute_stats(self, spec, layers)\n   1109 groupby = GroupBy(grouper)\n-> 1110 res = stat(df, groupby, orient, scales)\n\nFile ~/code/seaborn/seaborn/_stats/regression.py:41, in PolyFit.__call__(self, data)\n---> 41     return groupby.apply(data, self._fit_predict)\n\nFile <__array_function__ internals>:180, in polyfit(*args, **kwargs)\n\nLinAlgError: SVD did not converge in Linear Least Squares\n",
            vec![(
                "LinAlgError",
                "SVD did not converge in Linear Least Squares",
                vec![
                    (
                        "~/code/seaborn/seaborn/_core/plot.py",
                        Some(1110),
                        Some("Plotter._compute_stats"),
                    ),
                    (
                        "~/code/seaborn/seaborn/_stats/regression.py",
                        Some(41),
                        Some("PolyFit.__call__"),
                    ),
                    ("<__array_function__ internals>", Some(180), Some("polyfit")),
                ],
            )],
        );
    }

    #[test]
    fn pytest_section_names_the_test_on_its_first_frame() {
        check(
            "_______________ TestDataArray.test_from_series_multiindex _______________\n\n    def test_from_series_multiindex(self):\n>       actual = DataArray.from_series(series)\n\nxarray/tests/test_dataarray.py:3403: \n_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n\n>           raise ImportError(msg)\nE           ImportError: Pandas requires version '0.19.0' or newer of 'xarray'\n\n/opt/envs/testbed/lib/python3.10/site-packages/pandas/compat/_optional.py:171: ImportError\n",
            vec![(
                "ImportError",
                "Pandas requires version '0.19.0' or newer of 'xarray'",
                vec![
                    (
                        "xarray/tests/test_dataarray.py",
                        Some(3403),
                        Some("TestDataArray.test_from_series_multiindex"),
                    ),
                    (
                        "/opt/envs/testbed/lib/python3.10/site-packages/pandas/compat/_optional.py",
                        Some(171),
                        None,
                    ),
                ],
            )],
        );
    }

    #[test]
    fn old_ipython_frames_take_arrow_lines() {
        check(
            "IndexError                                Traceback (most recent call last)\n<ipython-input-3-81609fd8d2ca> in <module>\n----> 1 LogisticRegressionCV(refit=False).fit(X, y)\n\n~/.pyenv/versions/3.6.7/lib/python3.6/site-packages/sklearn/linear_model/logistic.py in fit(self, X, y, sample_weight)\n   2192                 else:\n-> 2193                 w = np.mean([coefs_paths[:, i, best_indices[i], :]\n\nIndexError: too many indices for array\n",
            vec![(
                "IndexError",
                "too many indices for array",
                vec![
                    ("<ipython-input-3-81609fd8d2ca>", Some(1), Some("<module>")),
                    (
                        "~/.pyenv/versions/3.6.7/lib/python3.6/site-packages/sklearn/linear_model/logistic.py",
                        Some(2193),
                        Some("fit"),
                    ),
                ],
            )],
        );
    }

    #[test]
    fn log_prefixed_traceback() {
        check(
            "(main_task pid=2794522) Traceback (most recent call last):\n(main_task pid=2794522)   File \"/ray/compiled_dag_ref.py\", line 93, in __del__\n(main_task pid=2794522)     self.get()\n(main_task pid=2794522) ValueError: boom\n",
            vec![(
                "ValueError",
                "boom",
                vec![("/ray/compiled_dag_ref.py", Some(93), Some("__del__"))],
            )],
        );
    }

    #[test]
    fn doctest_traceback_in_a_docstring() {
        check(
            "    >>> limit(1/x, x, 0, dir=\"+-\")\n    Traceback (most recent call last):\n        ...\n    ValueError: The limit does not exist\n\n    >>> limit(1/x, x, oo)\n",
            vec![("ValueError", "The limit does not exist", vec![])],
        );
    }

    #[test]
    fn truncated_traceback_keeps_frames() {
        check(
            "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n[... 500 characters omitted ...]\n",
            vec![("Traceback", "", vec![("a.py", Some(1), Some("f"))])],
        );
    }

    #[test]
    fn pytest_short_summary_and_section() {
        check(
            "FAILED testing/code/test_excinfo.py::test_excinfo_exconly - AttributeError: '...\nFAILED testing/code/test_excinfo.py::test_no_recursion_index_on_recursion_error\n",
            vec![(
                "AttributeError",
                "'...",
                vec![(
                    "testing/code/test_excinfo.py",
                    None,
                    Some("test_excinfo_exconly"),
                )],
            )],
        );
        check(
            "________________________________ test_all_even ________________________________\n\n    def test_all_even():\n>       assert all([is_even(n) for n in range(1, 100, 2)])\nE       assert False\n\ntest_all_any.py:7: AssertionError\n=========================== 1 failed in 0.02s ===========================\n",
            vec![(
                "AssertionError",
                "assert False",
                vec![("test_all_any.py", Some(7), Some("test_all_even"))],
            )],
        );
    }

    #[test]
    fn rust_compiler_error_and_panics() {
        check(
            "error[E0308]: mismatched types\n  --> src/main.rs:4:18\n   |\n4  |     let x: i32 = \"a\";\n   |                  ^^^ expected `i32`, found `&str`\n\nerror: aborting due to 1 previous error\n",
            vec![(
                "E0308",
                "mismatched types",
                vec![("src/main.rs", Some(4), None)],
            )],
        );
        check(
            "thread 'main' panicked at src/main.rs:3:5:\nindex out of bounds: the len is 3 but the index is 5\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
            vec![(
                "panic",
                "index out of bounds: the len is 3 but the index is 5",
                vec![("src/main.rs", Some(3), None)],
            )],
        );
        check(
            "thread 'main' panicked at 'cannot access a Thread Local Storage value during or after destruction: AccessError'\n",
            vec![(
                "panic",
                "cannot access a Thread Local Storage value during or after destruction: AccessError",
                vec![],
            )],
        );
        check(
            "thread 'tests::it' panicked at 'boom', src/lib.rs:10:9\nstack backtrace:\n   0: rust_begin_unwind\n   1: mycrate::tests::it\n             at ./src/lib.rs:10:9\n",
            vec![(
                "panic",
                "boom",
                vec![
                    ("src/lib.rs", Some(10), None),
                    ("", None, Some("rust_begin_unwind")),
                    ("./src/lib.rs", Some(10), Some("mycrate::tests::it")),
                ],
            )],
        );
    }

    #[test]
    fn go_panic() {
        check(
            "panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x20 pc=0x910846]\n\ngoroutine 5513264 [running]:\nmyapp/vendor/google.golang.org/grpc.(*ccBalancerWrapper).handleResolvedAddrs(0x0, 0xc448770280)\n        /opt/gopath/src/grpc/balancer_conn_wrappers.go:182 +0x26\ncreated by myapp/grpc.(*ccResolverWrapper).start\n        /opt/gopath/src/grpc/resolver_conn_wrapper.go:125 +0x2d6\n",
            vec![(
                "panic",
                "runtime error: invalid memory address or nil pointer dereference",
                vec![
                    (
                        "/opt/gopath/src/grpc/balancer_conn_wrappers.go",
                        Some(182),
                        Some(
                            "myapp/vendor/google.golang.org/grpc.(*ccBalancerWrapper).handleResolvedAddrs",
                        ),
                    ),
                    (
                        "/opt/gopath/src/grpc/resolver_conn_wrapper.go",
                        Some(125),
                        Some("myapp/grpc.(*ccResolverWrapper).start"),
                    ),
                ],
            )],
        );
    }

    #[test]
    fn java_exception_with_cause() {
        check(
            "Exception in thread \"main\" java.lang.IllegalStateException: outer\n\tat com.x.Y.z(Y.java:10)\n\tat com.x.Main.main(Main.java:3)\nCaused by: java.lang.NullPointerException: inner\n\tat com.x.Y.w(Y.java:20)\n\t... 2 more\n",
            vec![
                (
                    "java.lang.IllegalStateException",
                    "outer",
                    vec![
                        ("Y.java", Some(10), Some("com.x.Y.z")),
                        ("Main.java", Some(3), Some("com.x.Main.main")),
                    ],
                ),
                (
                    "java.lang.NullPointerException",
                    "inner",
                    vec![("Y.java", Some(20), Some("com.x.Y.w"))],
                ),
            ],
        );
    }

    #[test]
    fn javascript_stack() {
        check(
            "dayjs('2020-11-02T02:58:28.000-08:00').diff()\nTypeError: Cannot read property '$u' of undefined\n    at diff (/home/circleci/project/node_modules/dayjs/plugin/utc.js:1:1941)\n    at /a/b.js:10:5\n    at new M (dayjs.min.js:1:2038)\n",
            vec![(
                "TypeError",
                "Cannot read property '$u' of undefined",
                vec![
                    (
                        "/home/circleci/project/node_modules/dayjs/plugin/utc.js",
                        Some(1),
                        Some("diff"),
                    ),
                    ("/a/b.js", Some(10), None),
                    ("dayjs.min.js", Some(1), Some("M")),
                ],
            )],
        );
        check(
            "11:11:19.151 objectSupport.js:1 Uncaught TypeError: Cannot read properties of null (reading 'constructor')\n    at M.r (objectSupport.js:1:412)\n",
            vec![(
                "TypeError",
                "Cannot read properties of null (reading 'constructor')",
                vec![("objectSupport.js", Some(1), Some("M.r"))],
            )],
        );
    }

    #[test]
    fn every_pattern_compiles() {
        for pattern in patterns() {
            assert!(pattern.is_valid(), "{pattern:?}");
        }
    }

    #[test]
    fn prose_is_not_an_error() {
        check(
            "The error handling is at line 3.\nWe should look at this.\n",
            vec![],
        );
        check("error: could not compile `x`\n", vec![]);
    }

    #[test]
    fn thousand_frame_traceback_is_capped() {
        let mut input = String::from("Traceback (most recent call last):\n");
        for index in 0..1_000 {
            input.push_str(&format!(
                "  File \"m{index}.py\", line {index}, in f{index}\n    f()\n"
            ));
        }
        input.push_str("RecursionError: maximum recursion depth exceeded\n");
        let errors = parse_errors(&input);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].record.error_type, "RecursionError");
        assert_eq!(errors[0].record.frames.len(), MAX_FRAMES_PER_ERROR);
        assert_eq!(errors[0].record.frames.last().unwrap().file, "m999.py");
        assert_eq!(&input[errors[0].start..errors[0].end], input.trim_end());
    }
}
