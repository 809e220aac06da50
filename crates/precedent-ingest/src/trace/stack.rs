//! Stack traces of other runtimes: Go panics with goroutine stacks, and
//! Java / JavaScript exceptions with their `at ...` frames (`Caused by:`
//! chains).

use std::sync::LazyLock;

use crate::Frame;
use crate::text::{Line, Pattern};

/// Lines looked back for the header of a Java / JavaScript stack.
const STACK_HEADER_LOOK_BACK: usize = 40;

use super::{MAX_TRACE_LINES, ParsedError, cap_frames, frame, located_frame, make_error};

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

/// This family's patterns, checked by [`super::warm_up`].
pub(super) fn patterns() -> [&'static Pattern; 5] {
    [
        &*GO_LOCATION,
        &*STACK_FRAME_PARENTHESIZED,
        &*STACK_FRAME_JAVA,
        &*STACK_FRAME_BARE,
        &*STACK_HEADER,
    ]
}

/// A Go panic (`panic: ...`) with the frames of its goroutine stacks.
pub(super) fn parse_go_panic(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
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
            frames.push(located_frame(&location, Some(function)));
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

pub(super) fn is_stack_frame(line: &str) -> bool {
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
pub(super) fn parse_stack(lines: &[Line<'_>], start: usize) -> Option<(ParsedError, usize)> {
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

#[cfg(test)]
mod tests {
    use crate::trace::tests::check;

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
}
