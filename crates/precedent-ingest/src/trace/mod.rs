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
//!
//! Layout: this module scans the lines and dispatches; each family of traces
//! has its parsers and patterns in its own module: [`python`] (tracebacks,
//! pytest), [`rust`] (rustc errors, panics), [`stack`] (Go panics, Java and
//! JavaScript stacks).

mod python;
mod rust;
mod stack;

use regex::Captures;

use super::text::{
    Line, Pattern, contains_str, lines_with_offsets, some_line_may_start_with, truncate_to_bytes,
};
use super::{ErrorRecord, Frame};

use self::python::{parse_pytest_section, parse_pytest_short_failure, parse_python_traceback};
use self::rust::{parse_rust_panic, parse_rustc_error};
use self::stack::{is_stack_frame, parse_go_panic, parse_stack};

/// Frames kept per error (the innermost ones).
pub const MAX_FRAMES_PER_ERROR: usize = 200;
/// Errors kept per text.
const MAX_ERRORS_PER_TEXT: usize = 200;
/// Bytes kept of an error message.
const MAX_MESSAGE_BYTES: usize = 1_000;
/// Lines a single trace may span.
pub(super) const MAX_TRACE_LINES: usize = 20_000;

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

/// This module's patterns, each compiled at first use or by [`warm_up`].
fn patterns() -> impl Iterator<Item = &'static Pattern> {
    python::patterns()
        .into_iter()
        .chain(rust::patterns())
        .chain(stack::patterns())
}

/// Compiles this module's patterns now rather than at first use (see
/// [`super::warm_up`]); answers whether every one compiled.
pub(super) fn warm_up() -> bool {
    patterns().all(|pattern| pattern.is_valid())
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

pub(super) fn frame(file: &str, line: Option<u32>, function: Option<&str>) -> Frame {
    Frame {
        file: truncate_to_bytes(file.trim(), 500).to_string(),
        line,
        function: function
            .map(|name| truncate_to_bytes(name.trim(), 300).to_string())
            .filter(|name| !name.is_empty()),
    }
}

/// A frame whose file and line are groups 1 and 2 of a location pattern.
pub(super) fn located_frame(location: &Captures<'_>, function: Option<&str>) -> Frame {
    frame(
        location.get(1).map_or("", |m| m.as_str()),
        location.get(2).and_then(|m| m.as_str().parse().ok()),
        function,
    )
}

/// Keeps the innermost frames: the last ones when `innermost_last`, else the first ones.
pub(super) fn cap_frames(frames: &mut Vec<Frame>, innermost_last: bool) {
    if frames.len() > MAX_FRAMES_PER_ERROR {
        if innermost_last {
            let excess = frames.len() - MAX_FRAMES_PER_ERROR;
            frames.drain(..excess);
        } else {
            frames.truncate(MAX_FRAMES_PER_ERROR);
        }
    }
}

pub(super) fn make_error(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// (type, message, [(file, line, function)])
    pub(super) type Expected<'a> = (
        &'a str,
        &'a str,
        Vec<(&'a str, Option<u32>, Option<&'a str>)>,
    );

    /// The owned form of [`Expected`].
    type Owned = (String, String, Vec<(String, Option<u32>, Option<String>)>);

    pub(super) fn check(input: &str, expected: Vec<Expected<'_>>) {
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
