//! Fragment repair: a hunk's side is a piece of a file, not a program; these
//! make it parse as the blocks it shows (closing C braces it leaves open,
//! opening the Python blocks it starts inside).

use std::borrow::Cow;

/// A C or C++ fragment with the braces it leaves open closed on a last line
/// of its own: a hunk inside a class or namespace rarely shows the closing
/// brace, and tree-sitter's error recovery drops an unclosed class (and with
/// it the qualifier of its methods). Braces in comments and string or
/// character literals do not count; a stray closing brace (a fragment that
/// starts inside a body) is ignored.
pub(super) fn close_open_braces(source: &str) -> Cow<'_, str> {
    const MAX_CLOSED: usize = 64;
    let bytes = source.as_bytes();
    let mut depth = 0usize;
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        match byte {
            b'/' if bytes.get(index + 1) == Some(&b'/') => {
                while bytes.get(index).is_some_and(|byte| *byte != b'\n') {
                    index += 1;
                }
            }
            b'/' if bytes.get(index + 1) == Some(&b'*') => {
                index += 2;
                while let Some(&byte) = bytes.get(index) {
                    if byte == b'*' && bytes.get(index + 1) == Some(&b'/') {
                        index += 1;
                        break;
                    }
                    index += 1;
                }
            }
            b'"' | b'\'' => {
                let quote = byte;
                index += 1;
                while let Some(&byte) = bytes.get(index) {
                    if byte == b'\\' {
                        index += 1;
                    } else if byte == quote || byte == b'\n' {
                        break;
                    }
                    index += 1;
                }
            }
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        index += 1;
    }
    if depth == 0 {
        return Cow::Borrowed(source);
    }
    let mut closed = String::with_capacity(source.len() + MAX_CLOSED + 2);
    closed.push_str(source);
    if !closed.ends_with('\n') {
        closed.push('\n');
    }
    closed.push_str(&"}".repeat(depth.min(MAX_CLOSED)));
    closed.push('\n');
    Cow::Owned(closed)
}

/// A Python fragment that starts indented (inside a body, as most hunks do),
/// behind one `if 1:` line per indentation level it dedents to, so that it
/// parses as the blocks it shows rather than as an error (error recovery
/// also costs the parser several times more). The added lines define and
/// reference nothing; answers the text and how many lines were added.
pub(super) fn open_python_blocks(source: &str) -> (Cow<'_, str>, usize) {
    const MAX_LEVELS: usize = 32;
    let indentation = |line: &str| -> Option<usize> {
        let body = line.trim_start_matches([' ', '\t']);
        (!body.trim().is_empty() && !body.starts_with('#')).then(|| line.len() - body.len())
    };
    let mut lines = source
        .lines()
        .filter_map(|line| Some((line, indentation(line)?)));
    let Some((_, first)) = lines.next() else {
        return (Cow::Borrowed(source), 0);
    };
    if first == 0 {
        return (Cow::Borrowed(source), 0);
    }
    // Each level below the first line's, shallowest first, as written.
    let mut levels: Vec<&str> = vec![""];
    for (line, width) in lines {
        if width < first && !levels.iter().any(|level| level.len() == width) {
            levels.push(line.get(..width).unwrap_or(""));
        }
    }
    if levels.len() > MAX_LEVELS {
        return (Cow::Borrowed(source), 0);
    }
    levels.sort_by_key(|level| level.len());
    let mut opened = String::with_capacity(source.len() + levels.len() * 16);
    for level in &levels {
        opened.push_str(level);
        opened.push_str("if 1:\n");
    }
    opened.push_str(source);
    (Cow::Owned(opened), levels.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_braces_are_closed_outside_comments_and_literals() {
        assert_eq!(
            close_open_braces("class A {\n  void f() { g(\"{\", '{'); // {\n"),
            "class A {\n  void f() { g(\"{\", '{'); // {\n}}\n"
        );
        assert_eq!(close_open_braces("  x();\n}\n"), "  x();\n}\n");
        assert_eq!(
            close_open_braces("/* { */ \"\\\"{\" {"),
            "/* { */ \"\\\"{\" {\n}\n"
        );
        assert_eq!(
            close_open_braces("{".repeat(1_000).as_str())
                .matches('}')
                .count(),
            64
        );
    }
}
