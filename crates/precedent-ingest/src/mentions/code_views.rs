//! Code shown in observations: fenced code blocks with a known language,
//! SWE-agent `[File: path]` views with numbered lines, AutoCodeRover
//! `<file>`/`<code>` results, each as a snippet with the grammar to parse it
//! with, so its definitions can be tagged.

use std::sync::LazyLock;

use crate::text::{Pattern, contains_str, fenced_blocks, floor_char_boundary, lines_with_offsets};
use precedent_core::language::Grammar;

/// Code snippets kept per text.
const MAX_SNIPPETS_PER_TEXT: usize = 32;

static FILE_VIEW_HEADER: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^\[File: (\S+) \(\d+ lines total\)\]"));

/// This module's patterns, checked by [`super::warm_up`].
pub(super) fn patterns() -> [&'static Pattern; 1] {
    [&*FILE_VIEW_HEADER]
}

/// A piece of code shown in a text, with the grammar of its language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSnippet {
    /// The grammar to parse it with.
    pub grammar: Grammar,
    /// The code (line-number prefixes removed).
    pub code: String,
    /// The file it is from, when the view names one.
    pub path: Option<String>,
}

/// Code shown in `text`: fenced blocks with a known language, SWE-agent file
/// views, AutoCodeRover `<file>`/`<code>` results.
pub fn code_snippets(text: &str) -> Vec<CodeSnippet> {
    let mut snippets = Vec::new();
    for block in fenced_blocks(text) {
        if snippets.len() >= MAX_SNIPPETS_PER_TEXT {
            return snippets;
        }
        if let Some(grammar) = Grammar::from_fence_info(&block.info)
            && let Some(code) = text.get(block.content_start..block.content_end)
        {
            snippets.push(CodeSnippet {
                grammar,
                code: code.to_string(),
                path: None,
            });
        }
    }
    if contains_str!(text, "[File: ") {
        snippets.extend(file_views(text));
    }
    if contains_str!(text, "<code>") {
        for (path, code_start) in acr_file_and_code(text) {
            if snippets.len() >= MAX_SNIPPETS_PER_TEXT {
                break;
            }
            let Some(grammar) = Grammar::from_path(path) else {
                continue;
            };
            let Some(rest) = text.get(code_start..) else {
                continue;
            };
            let code = rest.split("</code>").next().unwrap_or(rest);
            snippets.push(CodeSnippet {
                grammar,
                code: code.to_string(),
                path: Some(path.to_string()),
            });
        }
    }
    snippets.truncate(MAX_SNIPPETS_PER_TEXT);
    snippets
}

/// AutoCodeRover results `<file>PATH</file> ... <code>`: the path (1 to 300
/// characters, no `<` or newline) and where the code starts (after the first
/// `<code>` within 400 characters of `</file>`), in order, not overlapping.
fn acr_file_and_code(text: &str) -> Vec<(&str, usize)> {
    const MAX_PATH_CHARS: usize = 300;
    const MAX_GAP_CHARS: usize = 400;
    let mut found = Vec::new();
    let mut position = 0;
    while let Some(relative) = text.get(position..).and_then(|rest| rest.find("<file>")) {
        let path_start = position + relative + "<file>".len();
        // Resume after this `<file>` unless a whole match is found.
        position = path_start;
        let Some(rest) = text.get(path_start..) else {
            break;
        };
        let Some(path_length) = rest.find(['<', '\n']) else {
            continue;
        };
        let path = rest.get(..path_length).unwrap_or("");
        let path_chars = path.chars().count();
        if path_chars == 0 || path_chars > MAX_PATH_CHARS {
            continue;
        }
        let Some(after_path) = rest.get(path_length..) else {
            continue;
        };
        let Some(after_close) = after_path.strip_prefix("</file>") else {
            continue;
        };
        let gap_start = path_start + path_length + "</file>".len();
        // A character is at most 4 bytes: look no further than that.
        let window_end = floor_char_boundary(after_close, MAX_GAP_CHARS * 4 + "<code>".len());
        let window = after_close.get(..window_end).unwrap_or("");
        let Some(code_relative) = window.find("<code>") else {
            continue;
        };
        let gap_chars = window
            .get(..code_relative)
            .map_or(usize::MAX, |gap| gap.chars().count());
        if gap_chars > MAX_GAP_CHARS {
            continue;
        }
        let code_start = gap_start + code_relative + "<code>".len();
        found.push((path, code_start));
        position = code_start;
    }
    found
}

/// SWE-agent `[File: /repo/x.py (47 lines total)]` views followed by `N:code` lines.
fn file_views(text: &str) -> Vec<CodeSnippet> {
    let mut snippets = Vec::new();
    let mut current: Option<CodeSnippet> = None;
    for line in lines_with_offsets(text) {
        if line.text.starts_with("[File: ")
            && let Some(captures) = FILE_VIEW_HEADER.captures(line.text)
        {
            if let Some(snippet) = current.take() {
                snippets.push(snippet);
            }
            let path = captures.get(1).map_or("", |m| m.as_str());
            current = Grammar::from_path(path).map(|grammar| CodeSnippet {
                grammar,
                code: String::new(),
                path: Some(path.to_string()),
            });
            continue;
        }
        let Some(snippet) = current.as_mut() else {
            continue;
        };
        let digits = line.text.bytes().take_while(u8::is_ascii_digit).count();
        match line.text.get(digits..) {
            Some(rest) if digits > 0 && rest.starts_with(':') => {
                snippet.code.push_str(rest.get(1..).unwrap_or(""));
                snippet.code.push('\n');
            }
            _ if line.text.starts_with('(') => {} // "(15 more lines above)"
            _ => {
                if let Some(done) = current.take() {
                    snippets.push(done);
                }
            }
        }
        if snippets.len() >= MAX_SNIPPETS_PER_TEXT {
            break;
        }
    }
    if let Some(snippet) = current {
        snippets.push(snippet);
    }
    snippets.retain(|snippet| !snippet.code.is_empty());
    snippets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_from_views() {
        let swe_agent = "[File: /mwaskom__seaborn/seaborn/_stats/regression.py (47 lines total)]\n10:@dataclass\n11:class PolyFit(Stat):\n22:    def _fit_predict(self, data):\n23:        return 1\n(24 more lines below)\n";
        let snippets = code_snippets(swe_agent);
        assert_eq!(snippets.len(), 1);
        assert_eq!(snippets[0].grammar, Grammar::Python);
        assert_eq!(
            snippets[0].code,
            "@dataclass\nclass PolyFit(Stat):\n    def _fit_predict(self, data):\n        return 1\n"
        );
        let acr = "Search result 1: <file>src/_pytest/fixtures.py</file> <class>FixtureDef</class> <code>class FixtureDef(object):\n    def __init__(self):\n        pass\n</code>";
        let snippets = code_snippets(acr);
        assert_eq!(snippets.len(), 1);
        assert_eq!(snippets[0].path.as_deref(), Some("src/_pytest/fixtures.py"));
        assert!(snippets[0].code.starts_with("class FixtureDef(object):"));
        let fenced = code_snippets("```rust\nfn main() {}\n```\n```text\nx\n```");
        assert_eq!(fenced.len(), 1);
        assert_eq!(fenced[0].grammar, Grammar::Rust);
    }

    #[test]
    fn acr_results_are_found_like_the_pattern_they_replace() {
        let pattern = regex::Regex::new(r"(?s)<file>([^<\n]{1,300})</file>.{0,400}?<code>")
            .expect("compiles");
        let far = format!("<file>a.py</file>{}<code>x", "é".repeat(401));
        let near = format!("<file>a.py</file>{}<code>x", "é".repeat(400));
        let inputs = [
            "Search result 1: <file>sympy/a.py</file> <class>A</class> <code>class A:\n</code>",
            "<file>a.py</file><code>1</code> <file>b.rs</file>\n<func>f</func><code>2<code>",
            "<file></file><code>x</code><file>a\nb.py</file><code>y</code>",
            "<file>x<file>c.py</file> <code>z",
            far.as_str(),
            near.as_str(),
        ];
        for input in inputs {
            let expected: Vec<(&str, usize)> = pattern
                .captures_iter(input)
                .map(|captures| {
                    (
                        captures.get(1).unwrap().as_str(),
                        captures.get(0).unwrap().end(),
                    )
                })
                .collect();
            assert_eq!(acr_file_and_code(input), expected, "{input}");
        }
    }
}
