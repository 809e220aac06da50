//! Code symbols: which definitions enclose the changed lines of a diff hunk,
//! which identifiers the added lines reference, and which definitions a code
//! block or file view shows.
//!
//! Parsing uses tree-sitter (Python, Rust, JavaScript, TypeScript/TSX, Go,
//! Java, C, C++) with the tag queries in `crates/precedent-ingest/grammars/*-tags.scm` (aider's
//! `@name.definition.<kind>` / `@name.reference.<kind>` convention), run on
//! hunk fragments that need not be valid programs: tree-sitter recovers from
//! errors. A light line-based scan (definition patterns per language family,
//! scopes by indentation, git's `@@` function context) backs it up, and is all
//! there is for the other C-family files (`.ipp`, `.inl`, Objective-C).
//! A `.h` header is C++ when its hunk looks like C++ ([`looks_like_cpp`]).
//! Input size and parser work are bounded; nothing here allocates per byte
//! beyond the fragment text.
//!
//! Speed: the service re-derives a session from all its messages on every
//! Add, so each thread keeps one parser and a bounded cache of the tags of
//! texts it parsed; the old side of a Python hunk is parsed only when it can
//! define something; viewed Python code (file views, code blocks) is
//! line-scanned ([`python_scan_definitions`]), which finds what tree-sitter
//! finds there at a fraction of the cost.
//!
//! Which language a path or fenced block is, which grammar parses it and
//! which line-scan patterns it has, is the language table's
//! ([`precedent_core::language`]). Layout, one concept per module: [`language`]
//! (a `.h` header's C++ told from C), [`grammar`] (compiled grammars and tag queries), [`budget`]
//! (how much parsing a caller allows; the bounded parse), [`cache`] (the
//! per-thread cache of tags), [`tags`] (running a tag query), [`qualify`]
//! (naming and qualifying definitions), [`line_scan`] (definition patterns
//! and indentation scopes), [`python_scan`] (Python views), [`hunk`] (the
//! symbols of a diff hunk), [`fragment_repair`] (making a hunk fragment
//! parse), [`old_side`] (placing removed lines without parsing the old
//! side), [`references`] (names too common to keep).
//!
//! Finding hunks is left to [`super::diff`]; deciding what goes into the
//! session record is left to the caller.

mod budget;
mod cache;
mod fragment_repair;
mod grammar;
mod hunk;
mod language;
mod line_scan;
mod old_side;
mod python_scan;
mod qualify;
mod references;
mod tags;

pub use self::budget::ParseBudget;
pub use self::grammar::check_query;
pub use self::hunk::hunk_symbols;
pub use self::language::looks_like_cpp;
pub use self::line_scan::{DefinitionKind, line_definition};
pub use self::python_scan::python_scan_definitions;
pub use self::tags::extract_tags_within;

pub(super) use self::line_scan::warm_up;

use precedent_core::language::Grammar;

use self::language::opens_class;
use self::line_scan::advance_scopes;

/// Source texts larger than this are not handed to tree-sitter.
pub const MAX_PARSE_BYTES: usize = 200 * 1024;
/// The same for C and C++, whose grammars parse fragments several times
/// slower (about 2.5 MB/s against 16 here): larger C/C++ fragments, mostly
/// views of whole files and hunks of generated amalgamated headers, go to
/// the line scan.
pub const MAX_C_FAMILY_PARSE_BYTES: usize = 4 * 1024;
/// Enclosing containers kept in a qualified name (the innermost ones).
pub(super) const MAX_QUALIFIERS: usize = 4;

/// Pushes `value` into `values` unless present or the cap is reached.
pub(super) fn push_unique(values: &mut Vec<String>, value: String, cap: usize) {
    if values.len() < cap && !value.is_empty() && !values.contains(&value) {
        values.push(value);
    }
}

/// Definitions (qualified names) shown in a code text of a known language,
/// e.g. a fenced block or a file view: by tree-sitter within `budget`, else
/// (budget spent, text too large or not code-like) by the line scan. Python
/// is always line-scanned ([`python_scan_definitions`]): on views it finds
/// what tree-sitter finds (97% of the dev set's views alike; most of the
/// rest are fragments tree-sitter's error recovery loses definitions or
/// qualifiers of) at a fraction of the cost.
pub fn code_definitions(
    language: Grammar,
    source: &str,
    cap: usize,
    budget: &mut ParseBudget,
) -> Vec<String> {
    if language == Grammar::Python {
        return python_scan_definitions(source, cap);
    }
    // A C snippet (a `.h` view, a `c` fence) may well be C++.
    let language = match language {
        Grammar::C if looks_like_cpp(source) || opens_class(source) => Grammar::Cpp,
        _ => language,
    };
    let mut names = Vec::new();
    let tags = extract_tags_within(language, source, budget);
    match tags {
        Some(tags) => {
            for definition in &tags.definitions {
                if definition.kind != "constant" {
                    push_unique(&mut names, definition.qualified_name.clone(), cap);
                }
            }
        }
        None => {
            let scan = language.line_scan();
            let mut scopes = Vec::new();
            for line in super::text::lines_with_offsets(source) {
                let indentation = line.text.len() - line.text.trim_start_matches([' ', '\t']).len();
                let defines = line_definition(line.text, scan, indentation == 0).is_some();
                let symbol = advance_scopes(&mut scopes, line.text, scan);
                if defines && let Some(name) = symbol {
                    push_unique(&mut names, name, cap);
                }
                if names.len() >= cap {
                    break;
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::Clock;

    use super::*;

    #[test]
    fn code_definitions_by_parser_and_by_line_scan() {
        let code = "class FixtureDef(object):\n    def __init__(self):\n        pass\n\n    def finish(self, request):\n        pass\n\ndef helper():\n    pass\n";
        let expected = vec![
            "FixtureDef",
            "FixtureDef.__init__",
            "FixtureDef.finish",
            "helper",
        ];
        assert_eq!(
            code_definitions(Grammar::Python, code, 10, &mut ParseBudget::default()),
            expected
        );
        assert_eq!(
            code_definitions(
                Grammar::Python,
                code,
                10,
                &mut ParseBudget::new(0, Duration::ZERO, Clock::Ignored)
            ),
            expected
        );
        assert_eq!(
            code_definitions(
                Grammar::Python,
                code,
                2,
                &mut ParseBudget::new(0, Duration::ZERO, Clock::Ignored)
            )
            .len(),
            2
        );
    }
}
