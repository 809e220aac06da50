//! Rust error traces: compiler errors (`error[E0308]: ...` with their
//! `-->` locations) and panics, old and new formats, with backtraces.

use std::sync::LazyLock;

use crate::text::{Line, Pattern};

use super::{MAX_TRACE_LINES, ParsedError, cap_frames, frame, located_frame, make_error};

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

/// This family's patterns, checked by [`super::warm_up`].
pub(super) fn patterns() -> [&'static Pattern; 6] {
    [
        &*RUSTC_ERROR,
        &*RUSTC_LOCATION,
        &*RUST_PANIC_NEW,
        &*RUST_PANIC_OLD,
        &*RUST_BACKTRACE_SYMBOL,
        &*RUST_BACKTRACE_LOCATION,
    ]
}

/// A rustc error (`error[E0308]: ...`) with its `-->` locations.
pub(super) fn parse_rustc_error(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
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
            frames.push(located_frame(&location, None));
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

/// A Rust panic (`panicked at ...`) with its backtrace, if any.
pub(super) fn parse_rust_panic(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
    let line = lines[start].text;
    let mut frames = Vec::new();
    let mut message = String::new();
    let mut last = start;
    if let Some(captures) = RUST_PANIC_NEW.captures(line) {
        frames.push(located_frame(&captures, None));
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
                    frames.push(located_frame(&location, Some(function)));
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

#[cfg(test)]
mod tests {
    use crate::trace::tests::check;

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
}
