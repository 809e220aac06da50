//! The old side of a hunk: whether a text may define anything at all, and
//! placing removed lines in the definitions of the new side's parse, so the
//! old side is parsed only when a removed line may start a definition.

use std::rc::Rc;

use crate::diff::{Hunk, HunkLineKind};
use precedent_core::language::{Grammar, LineScan};

use super::hunk::Fragment;
use super::line_scan::line_definition;
use super::tags::{Definition, Tags};

/// Whether tree-sitter could find a definition in `source`: for Python see
/// [`python_may_define`]; Rust and Go define only after a keyword, so
/// without one there is nothing to find. Other languages define without a
/// keyword (methods, C functions) and are always parsed.
pub(super) fn may_define(language: Grammar, source: &str) -> bool {
    const RUST: [&str; 11] = [
        "fn",
        "struct",
        "enum",
        "trait",
        "impl",
        "mod",
        "const",
        "static",
        "type",
        "union",
        "macro_rules",
    ];
    const GO: [&str; 3] = ["func", "type", "const"];
    match language {
        Grammar::Python => python_may_define(source),
        Grammar::Rust => RUST.iter().any(|keyword| has_word(source, keyword)),
        Grammar::Go => GO.iter().any(|keyword| has_word(source, keyword)),
        _ => true,
    }
}

/// Whether `word` occurs in `source` as a whole word.
fn has_word(source: &str, word: &str) -> bool {
    let is_word_byte = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80;
    let bytes = source.as_bytes();
    memchr::memmem::find_iter(bytes, word.as_bytes()).any(|position| {
        let before = position.checked_sub(1).and_then(|index| bytes.get(index));
        let after = bytes.get(position + word.len());
        !before.is_some_and(|byte| is_word_byte(*byte))
            && !after.is_some_and(|byte| is_word_byte(*byte))
    })
}

/// Whether tree-sitter could find a Python definition in `source`: a
/// `def` or `class` keyword, or a line starting with a name at column 0 (a
/// module-level constant). When not, parsing it for definitions is wasted.
pub(super) fn python_may_define(source: &str) -> bool {
    has_keyword(source, "def")
        || has_keyword(source, "class")
        || crate::text::lines_with_offsets(source).any(|line| {
            line.text
                .starts_with(|character: char| character.is_alphabetic() || character == '_')
        })
}

/// Whether `keyword` occurs in `source` as a whole word followed by
/// whitespace (as it must be to define a name: `def name`, `class Name`).
fn has_keyword(source: &str, keyword: &str) -> bool {
    let is_word_character = |character: char| character.is_alphanumeric() || character == '_';
    source.match_indices(keyword).any(|(position, _)| {
        let before = source
            .get(..position)
            .and_then(|head| head.chars().next_back());
        let after = source
            .get(position + keyword.len()..)
            .and_then(|tail| tail.chars().next());
        !before.is_some_and(is_word_character)
            && after.is_some_and(|character| matches!(character, ' ' | '\t' | '\x0c' | '\\'))
    })
}

/// The new side of a hunk as parsed: its fragment, and its tags, whose rows
/// are the fragment's plus `offset`.
pub(super) struct NewSide {
    pub(super) tags: Rc<Tags>,
    pub(super) offset: usize,
    pub(super) fragment: Fragment,
}

impl NewSide {
    /// The parsed row of hunk line `line`, if it is on the new side.
    fn row(&self, line: Option<usize>) -> Option<usize> {
        let row = self.fragment.row_of_line.get(line?).copied().flatten()?;
        Some(row + self.offset)
    }

    /// Whether parsed row `row` holds a context line.
    fn is_context_row(&self, row: usize) -> bool {
        row.checked_sub(self.offset)
            .and_then(|row| self.fragment.rows.get(row))
            .is_some_and(|(_, changed)| !changed)
    }
}

/// For each hunk line, the nearest context line before and after it.
pub(super) struct ContextNeighbours {
    before: Vec<Option<usize>>,
    after: Vec<Option<usize>>,
}

impl ContextNeighbours {
    pub(super) fn of(hunk: &Hunk) -> ContextNeighbours {
        let count = hunk.lines.len();
        let mut before = vec![None; count];
        let mut after = vec![None; count];
        let mut last = None;
        for (index, line) in hunk.lines.iter().enumerate() {
            before[index] = last;
            if line.kind == HunkLineKind::Context {
                last = Some(index);
            }
        }
        last = None;
        for (index, line) in hunk.lines.iter().enumerate().rev() {
            after[index] = last;
            if line.kind == HunkLineKind::Context {
                last = Some(index);
            }
        }
        ContextNeighbours { before, after }
    }

    /// Rows of the new-side `fragment` holding the context lines around removed lines.
    pub(super) fn rows_around_removed(&self, hunk: &Hunk, fragment: &Fragment) -> Vec<usize> {
        let row = |line: Option<usize>| fragment.row_of_line.get(line?).copied().flatten();
        hunk.lines
            .iter()
            .enumerate()
            .filter(|(_, line)| line.kind == HunkLineKind::Removed)
            .flat_map(|(index, _)| [row(self.before[index]), row(self.after[index])])
            .flatten()
            .collect()
    }
}

/// The old-side definition enclosing each non-blank removed line of a hunk
/// (or none), told from the new side's parse instead of parsing the old
/// side. Safe when no removed line may start a definition: then only
/// definitions starting on context lines can enclose it, and the text up to
/// the context line just before it is the same on both sides. Without such
/// a definition around that line, none encloses it; otherwise one that also
/// covers the context line just after it covers it on the old side too, the
/// text in between differing only in lines that define nothing. In Python,
/// where blocks are indentation, the line belongs to the innermost of them
/// indented less than the line. None when some line cannot be placed so
/// (the old side is parsed then).
pub(super) fn removed_from_new_side<'n>(
    hunk: &Hunk,
    text: &str,
    language: Grammar,
    scan: Option<LineScan>,
    neighbours: &ContextNeighbours,
    new_side: &'n NewSide,
) -> Option<Vec<(usize, Option<&'n Definition>)>> {
    let removed: Vec<(usize, &str)> = hunk
        .lines
        .iter()
        .enumerate()
        .filter(|(_, line)| line.kind == HunkLineKind::Removed)
        .map(|(index, line)| (index, text.get(line.start..line.end).unwrap_or("")))
        .filter(|(_, content)| !content.trim().is_empty())
        .collect();
    if lines_may_define(language, scan, removed.iter().map(|(_, content)| *content)) {
        return None;
    }
    let innermost = |definitions: &mut dyn Iterator<Item = &'n Definition>| {
        definitions.min_by_key(|definition| {
            (
                definition.end_row - definition.start_row,
                usize::MAX - definition.start_row,
            )
        })
    };
    let mut placed = Vec::with_capacity(removed.len());
    for (index, content) in removed {
        let before = new_side.row(neighbours.before[index])?;
        let mut around = new_side
            .tags
            .definitions
            .iter()
            .filter(|definition| definition.start_row <= before && before <= definition.end_row)
            .filter(|definition| definition.kind != "constant" || definition.start_column == 0)
            .filter(|definition| new_side.is_context_row(definition.start_row))
            .peekable();
        if around.peek().is_none() {
            placed.push((index, None));
            continue;
        }
        let definition = if language == Grammar::Python {
            let indentation = content.len() - content.trim_start_matches([' ', '\t']).len();
            innermost(&mut around.filter(|definition| definition.start_column < indentation))
        } else {
            let after = new_side.row(neighbours.after[index])?;
            Some(innermost(
                &mut around.filter(|definition| after <= definition.end_row),
            )?)
        };
        placed.push((index, definition));
    }
    Some(placed)
}

/// Whether one of `lines` may start a definition: the line scan finds one,
/// or (Python, Rust, Go) a defining keyword or a decorator is there; in the other languages
/// a declaring keyword, an arrow function, or a line with parentheses that
/// is not a statement (a function head, `foo(x) {`) or that declares (`int
/// foo(int);`). Errs towards yes: a yes only costs a parse.
fn lines_may_define<'l>(
    language: Grammar,
    scan: Option<LineScan>,
    lines: impl Iterator<Item = &'l str> + Clone,
) -> bool {
    const DECLARING: [&str; 16] = [
        "class",
        "struct",
        "union",
        "enum",
        "namespace",
        "typedef",
        "using",
        "template",
        "interface",
        "function",
        "define",
        "type",
        "record",
        "module",
        "operator",
        "macro",
    ];
    const CONTROL: [&str; 14] = [
        "if",
        "else",
        "for",
        "while",
        "do",
        "switch",
        "case",
        "return",
        "throw",
        "catch",
        "try",
        "delete",
        "new",
        "co_return",
    ];
    if let Some(scan) = scan
        && lines.clone().any(|line| {
            let at_top_level = !line.starts_with([' ', '\t']);
            line_definition(line, scan, at_top_level).is_some()
        })
    {
        return true;
    }
    let mut joined = String::new();
    for line in lines.clone() {
        joined.push_str(line);
        joined.push('\n');
    }
    match language {
        // A decorator starts the definition it decorates.
        Grammar::Python => {
            may_define(language, &joined)
                || lines
                    .into_iter()
                    .any(|line| line.trim_start().starts_with('@'))
        }
        Grammar::Rust | Grammar::Go => may_define(language, &joined),
        _ => {
            DECLARING.iter().any(|keyword| has_word(&joined, keyword))
                || joined.contains("=>")
                || lines.into_iter().any(|line| {
                    let trimmed = line.trim();
                    let first_word = trimmed
                        .split(|character: char| !character.is_alphanumeric() && character != '_')
                        .next()
                        .unwrap_or("");
                    let Some(paren) = trimmed.find('(') else {
                        return false;
                    };
                    if CONTROL.contains(&first_word) {
                        return false;
                    }
                    let head = trimmed.get(..paren).unwrap_or("");
                    !trimmed.ends_with(';')
                        || (!head.contains(['=', '.', '!', '"', '\''])
                            && !head.contains("->")
                            && head.split_whitespace().count() >= 2)
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use crate::diff::parse_diffs;
    use crate::symbols::budget::ParseBudget;
    use crate::symbols::fragment_repair::open_python_blocks;
    use crate::symbols::hunk::{build_fragment, innermost_definition};
    use crate::symbols::tags::extract_tags_within;

    use super::*;

    #[test]
    fn removed_lines_are_placed_from_the_new_side_as_the_old_side_parse_would() {
        // (diff, whether the new side may place its removed lines): each
        // placement must be what parsing the old side gives.
        let hunks = [
            // Python: inside a method, in a nested function, and past it.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,10 +1,10 @@\n class A:\n     def f(self):\n         x = 1\n-        y = 2\n+        y = 3\n         def inner():\n             return x\n-            pass\n+            return y\n         z = inner\n-        del x\n+        del z\n         return inner\n",
                true,
            ),
            // Python: the top level after a function.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,4 +1,4 @@\n def f():\n     return 1\n if x:\n-    run(1)\n+    run(2)\n",
                true,
            ),
            // Python: a line after a nested function, dedented out of it.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,6 +1,6 @@\n class A:\n     def f(self):\n         def inner():\n             return 1\n-        y = inner()\n+        y = inner() + 1\n         return y\n",
                true,
            ),
            // Python: a line at the top level may define a constant.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,4 +1,4 @@\n def f():\n     return 1\n-X = 2\n+X = 3\n",
                false,
            ),
            // Python: a removed decorator belongs to the definition below it.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,6 +1,6 @@\n class A:\n     def f(self):\n         pass\n-    @property\n+    @cached\n     def g(self):\n         pass\n",
                false,
            ),
            // Rust: inside a method, with no definition in the fragment.
            (
                "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,7 +1,7 @@\n impl Foo {\n     fn run(&self) {\n-        old();\n+        new();\n     }\n }\n fn other() {}\n",
                true,
            ),
            (
                "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -9,3 +9,3 @@\n         let x = 1;\n-        old(x);\n+        new(x);\n     }\n",
                true,
            ),
            // C++: a member declaration removed in a class body.
            (
                "--- a/a.h\n+++ b/a.h\n@@ -1,6 +1,6 @@\n class document {\n  public:\n-  element_result<array> as_array() const noexcept;\n+  array_result as_array() const noexcept;\n   int size() const;\n };\n",
                false,
            ),
            // Go: a statement in a method.
            (
                "--- a/a.go\n+++ b/a.go\n@@ -1,5 +1,5 @@\n func (s *S) Run() {\n-\ts.old()\n+\ts.step()\n \treturn\n }\n",
                true,
            ),
        ];
        let parse = |language: Grammar, source: &str| -> (Rc<Tags>, usize) {
            let (source, offset) = match language {
                Grammar::Python => open_python_blocks(source),
                _ => (Cow::Borrowed(source), 0),
            };
            let tags = extract_tags_within(language, &source, &mut ParseBudget::generous());
            (tags.expect("parses"), offset)
        };
        for (diff, placeable) in hunks {
            let parsed = parse_diffs(diff);
            let file = &parsed.files[0];
            let hunk = &file.hunks[0];
            let path = file.path().unwrap_or("");
            let language = Grammar::from_path(path).expect("a language");
            let new_fragment = build_fragment(hunk, diff, HunkLineKind::Added);
            let (tags, offset) = parse(language, &new_fragment.source);
            let new_side = NewSide {
                tags,
                offset,
                fragment: new_fragment,
            };
            let placed = removed_from_new_side(
                hunk,
                diff,
                language,
                LineScan::from_path(path),
                &ContextNeighbours::of(hunk),
                &new_side,
            );
            assert_eq!(placed.is_some(), placeable, "{diff}");
            let old_fragment = build_fragment(hunk, diff, HunkLineKind::Removed);
            let (old_tags, old_offset) = parse(language, &old_fragment.source);
            for (line_index, definition) in placed.unwrap_or_default() {
                let row = old_fragment
                    .rows
                    .iter()
                    .position(|(index, _)| *index == line_index)
                    .expect("a removed line is on the old side");
                assert_eq!(
                    definition.map(|definition| &definition.qualified_name),
                    innermost_definition(&old_tags.definitions, row + old_offset)
                        .map(|definition| &definition.qualified_name),
                    "line {line_index} of:\n{diff}"
                );
            }
        }
    }
}
