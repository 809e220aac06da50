//! The line scan: light definition patterns per line-scan family (the
//! language table's [`LineScan`]) and scopes by indentation, for what
//! tree-sitter cannot parse (too large, budget spent, no grammar) and for
//! git's `@@` function context.

use std::sync::LazyLock;

use crate::diff::{Hunk, HunkLineKind};
use crate::text::Pattern;
use precedent_core::language::LineScan;

/// Separator between a container and a member in qualified names.
fn separator(scan: LineScan) -> &'static str {
    match scan {
        LineScan::Rust | LineScan::C => "::",
        _ => ".",
    }
}

/// Whether a line defines a function-like thing or a type-like thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionKind {
    /// Function or method.
    Function,
    /// Class, struct, trait, impl block, interface.
    Type,
}

const KEYWORDS: &[&str] = &[
    "if",
    "for",
    "while",
    "switch",
    "return",
    "else",
    "do",
    "sizeof",
    "catch",
    "case",
    "new",
    "delete",
    "throw",
    "typeof",
    "await",
    "yield",
    "elif",
    "with",
    "assert",
    "raise",
    "not",
    "and",
    "or",
    "in",
    "is",
    "lambda",
    "match",
    "loop",
    "defined",
    "using",
    "goto",
    "static_assert",
    "decltype",
    "alignof",
];

/// This module's patterns, each compiled at first use or by [`warm_up`].
fn patterns() -> impl Iterator<Item = &'static Pattern> {
    LINE_PATTERNS
        .iter()
        .flat_map(|(_, table)| table.iter().map(|(_, pattern)| pattern))
}

/// Compiles this module's patterns now rather than at first use (see
/// [`crate::warm_up`]); answers whether every one compiled.
pub(crate) fn warm_up() -> bool {
    patterns().all(Pattern::is_valid)
}

fn compile(pattern: &str) -> Pattern {
    Pattern::new(pattern)
}

/// The definition patterns of one line-scan family, tried in order.
type PatternTable = Vec<(DefinitionKind, Pattern)>;

static LINE_PATTERNS: LazyLock<[(LineScan, PatternTable); 6]> = LazyLock::new(|| {
    use DefinitionKind::{Function, Type};
    [
        (
            LineScan::Python,
            vec![
                (
                    Function,
                    compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\("),
                ),
                (Type, compile(r"^class\s+([A-Za-z_]\w*)\s*[(:]")),
            ],
        ),
        (
            LineScan::Rust,
            vec![
                (
                    Function,
                    compile(
                        r#"^(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|default)\s+)*(?:extern\s+"[^"]*"\s+)?fn\s+([A-Za-z_]\w*)"#,
                    ),
                ),
                (
                    Type,
                    compile(
                        r"^(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|union|mod)\s+([A-Za-z_]\w*)",
                    ),
                ),
                (
                    Type,
                    compile(
                        r"^(?:unsafe\s+)?impl(?-u:\b)(?:\s*<[^{]*?>)?\s+(?:[\w:]+(?:<[^{]*?>)?\s+for\s+)?(?:\w+::)*([A-Za-z_]\w*)",
                    ),
                ),
            ],
        ),
        (
            LineScan::Go,
            vec![
                (
                    Function,
                    compile(r"^func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)\s*[(\[]"),
                ),
                (
                    Type,
                    compile(r"^type\s+([A-Za-z_]\w*)\s+(?:struct|interface)(?-u:\b)"),
                ),
            ],
        ),
        (
            LineScan::JavaScript,
            vec![
                (
                    Function,
                    compile(
                        r"^(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)\s*[(<]",
                    ),
                ),
                (
                    Type,
                    compile(
                        r"^(?:export\s+)?(?:default\s+)?(?:abstract\s+)?(?:class|interface)\s+([A-Za-z_$][\w$]*)",
                    ),
                ),
                (
                    Function,
                    compile(
                        r"^(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function(?-u:\b)|\([^)]*\)\s*(?::[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>|\(\s*$)",
                    ),
                ),
                (
                    Function,
                    compile(
                        r"^(?:(?:public|private|protected|static|async|get|set|readonly)\s+)*([A-Za-z_$][\w$]*)\s*\([^;]*\)\s*(?::\s*[^{;]+)?\{\s*$",
                    ),
                ),
            ],
        ),
        (
            LineScan::Java,
            vec![
                (
                    Type,
                    compile(
                        r"^(?:(?:public|private|protected|static|final|abstract|sealed|partial|data|open)\s+)*(?:class|interface|enum|record|object)\s+([A-Za-z_]\w*)",
                    ),
                ),
                (
                    Function,
                    compile(
                        r"^(?:@\w+\s+)*(?:(?:public|private|protected|static|final|abstract|synchronized|native|default|override|suspend)\s+)+[\w<>\[\],.?\s]*?(?-u:\b)([A-Za-z_]\w*)\s*\(",
                    ),
                ),
                (
                    Function,
                    compile(r"^(?:[\w<>\[\],.?]+\s+)+([A-Za-z_]\w*)\s*\([^;]*$"),
                ),
            ],
        ),
        (
            LineScan::C,
            vec![
                (
                    Type,
                    compile(
                        r"^(?:template\s*<.*>\s*)?(?:typedef\s+)?(?:class|struct|union)\s+(?:[A-Z_][A-Z0-9_]*\s+)?([A-Za-z_]\w*)\s*(?:final\s*)?(?:[:{]|$)",
                    ),
                ),
                (
                    Function,
                    compile(
                        r"^(?:[\w:<>\[\],*&~]+\s+)*[*&]*(~?[A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)*)\s*\([^;]*$",
                    ),
                ),
            ],
        ),
    ]
});

/// What a source line defines, by the light patterns: (kind, name). The C
/// signature pattern fires on an indented line only when it has a return type.
pub fn line_definition(
    line: &str,
    scan: LineScan,
    at_top_level: bool,
) -> Option<(DefinitionKind, String)> {
    let stripped = line.trim();
    if stripped.is_empty()
        || stripped.len() > 400
        || ["#", "//", "/*", "*", "@", "return ", "else"]
            .iter()
            .any(|prefix| stripped.starts_with(prefix))
    {
        return None;
    }
    if stripped.ends_with(';') && scan != LineScan::Python {
        return None;
    }
    let first_word: String = stripped
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if KEYWORDS.contains(&first_word.as_str()) {
        return None;
    }
    if matches!(scan, LineScan::C | LineScan::Java)
        && stripped.split('(').next().unwrap_or("").contains('=')
    {
        return None;
    }
    let table = LINE_PATTERNS.iter().find(|(entry, _)| *entry == scan)?;
    for (kind, pattern) in &table.1 {
        let Some(captures) = pattern.captures(stripped) else {
            continue;
        };
        let Some(name_match) = captures.get(1) else {
            continue;
        };
        let name = name_match.as_str();
        let leaf = name.rsplit("::").next().unwrap_or(name);
        if KEYWORDS.contains(&leaf) {
            continue;
        }
        if scan == LineScan::C && !at_top_level && name_match.start() == 0 {
            continue;
        }
        return Some((*kind, name.to_string()));
    }
    None
}

/// The line-based scan: for each hunk line, the innermost definition seen
/// earlier in the hunk at a smaller indentation, else the header's.
pub(super) fn scope_symbols(
    hunk: &Hunk,
    text: &str,
    scan: LineScan,
    header: Option<&(DefinitionKind, String)>,
) -> Vec<Option<String>> {
    // (indentation, kind, qualified name) innermost last; the header has indentation 0.
    let mut old_scopes: Vec<(usize, DefinitionKind, String)> = Vec::new();
    if let Some((kind, name)) = header {
        old_scopes.push((0, *kind, name.clone()));
    }
    let mut new_scopes = old_scopes.clone();
    let mut symbols = Vec::with_capacity(hunk.lines.len());
    for line in &hunk.lines {
        let content = text.get(line.start..line.end).unwrap_or("");
        let changed = line.kind != HunkLineKind::Context;
        let mut symbol = None;
        for (scopes, applies) in [
            (&mut old_scopes, line.kind != HunkLineKind::Added),
            (&mut new_scopes, line.kind != HunkLineKind::Removed),
        ] {
            if !applies {
                continue;
            }
            let found = advance_scopes(scopes, content, scan);
            if changed && symbol.is_none() {
                symbol = found;
            }
        }
        symbols.push(symbol);
    }
    symbols
}

/// Updates the scope stack with one line and returns the symbol the line belongs to.
pub(super) fn advance_scopes(
    scopes: &mut Vec<(usize, DefinitionKind, String)>,
    content: &str,
    scan: LineScan,
) -> Option<String> {
    let stripped = content.trim();
    if stripped.is_empty() {
        return scopes.last().map(|scope| scope.2.clone());
    }
    let indentation = content.len() - content.trim_start_matches([' ', '\t']).len();
    if stripped.starts_with('#') || stripped.starts_with('@') || stripped == "{" {
        return scopes.last().map(|scope| scope.2.clone());
    }
    while scopes
        .last()
        .is_some_and(|(scope_indentation, _, _)| *scope_indentation >= indentation)
    {
        scopes.pop();
    }
    if let Some((kind, name)) = line_definition(content, scan, indentation == 0) {
        let qualified = match scopes.last() {
            Some((_, DefinitionKind::Type, container)) => {
                format!("{container}{}{name}", separator(scan))
            }
            _ => name,
        };
        scopes.push((indentation, kind, qualified));
    }
    scopes.last().map(|scope| scope.2.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for pattern in patterns() {
            assert!(pattern.is_valid(), "{pattern:?}");
        }
        assert!(warm_up());
    }

    #[test]
    fn header_line_patterns() {
        type Case<'a> = (&'a str, LineScan, Option<(DefinitionKind, &'a str)>);
        let cases: &[Case<'_>] = &[
            (
                "def __init__(",
                LineScan::Python,
                Some((DefinitionKind::Function, "__init__")),
            ),
            (
                "class Foo(Bar):",
                LineScan::Python,
                Some((DefinitionKind::Type, "Foo")),
            ),
            (
                "impl Bar for Baz {",
                LineScan::Rust,
                Some((DefinitionKind::Type, "Baz")),
            ),
            (
                "pub fn x(",
                LineScan::Rust,
                Some((DefinitionKind::Function, "x")),
            ),
            (
                "func (s *Server) Serve(l net.Listener) error {",
                LineScan::Go,
                Some((DefinitionKind::Function, "Serve")),
            ),
            ("if (x) {", LineScan::C, None),
            ("from x import y", LineScan::Python, None),
        ];
        for (line, scan, expected) in cases {
            let got = line_definition(line, *scan, true);
            let expected = expected.map(|(kind, name)| (kind, name.to_string()));
            assert_eq!(got, expected, "{line}");
        }
    }
}
