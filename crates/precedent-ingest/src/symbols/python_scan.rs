//! The Python scan: definitions of viewed Python code (file views, code
//! blocks) by a line scan that skips strings, comments and bracketed
//! continuations, finding what tree-sitter finds there far cheaper.

use super::{MAX_QUALIFIERS, push_unique};

/// Where a Python line scan stands at the end of a line: inside a string
/// literal, inside brackets, or after a backslash continuation.
#[derive(Debug, Default)]
struct PythonLexState {
    /// The open string's quote byte and whether it is triple-quoted.
    string: Option<(u8, bool)>,
    /// Open brackets (capped).
    brackets: usize,
    /// The line ended with a backslash outside a string.
    continued: bool,
}

impl PythonLexState {
    /// Whether the next line starts a logical line (a statement).
    fn at_statement_start(&self) -> bool {
        self.string.is_none() && self.brackets == 0 && !self.continued
    }

    /// Moves over one line: strings, comments, brackets, continuations.
    fn advance(&mut self, line: &str) {
        const MAX_BRACKETS: usize = 1_000;
        let bytes = line.as_bytes();
        let mut index = 0;
        self.continued = false;
        while let Some(&byte) = bytes.get(index) {
            if let Some((quote, triple)) = self.string {
                if byte == b'\\' {
                    index += 2;
                    continue;
                }
                if byte == quote {
                    if !triple {
                        self.string = None;
                    } else if bytes.get(index + 1) == Some(&quote)
                        && bytes.get(index + 2) == Some(&quote)
                    {
                        self.string = None;
                        index += 3;
                        continue;
                    }
                }
                index += 1;
                continue;
            }
            match byte {
                b'#' => break,
                b'"' | b'\'' => {
                    let triple =
                        bytes.get(index + 1) == Some(&byte) && bytes.get(index + 2) == Some(&byte);
                    self.string = Some((byte, triple));
                    index += if triple { 3 } else { 1 };
                    continue;
                }
                b'(' | b'[' | b'{' => self.brackets = (self.brackets + 1).min(MAX_BRACKETS),
                b')' | b']' | b'}' => self.brackets = self.brackets.saturating_sub(1),
                b'\\' if index + 1 == bytes.len() => self.continued = true,
                _ => {}
            }
            index += 1;
        }
        // Only triple-quoted strings span lines.
        if let Some((_, false)) = self.string {
            self.string = None;
        }
    }
}

/// The name a Python statement defines (`def name(`, `async def name(`,
/// `class Name:` / `class Name(`), from its text without indentation.
fn python_definition_name(statement: &str) -> Option<&str> {
    let after_async = match statement.strip_prefix("async") {
        Some(rest) if rest.starts_with([' ', '\t']) => rest.trim_start_matches([' ', '\t']),
        _ => statement,
    };
    let (rest, is_function) = if let Some(rest) = after_async.strip_prefix("def") {
        (rest, true)
    } else if let Some(rest) = statement.strip_prefix("class") {
        (rest, false)
    } else {
        return None;
    };
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let name_length = rest
        .char_indices()
        .find(|(_, character)| !(character.is_alphanumeric() || *character == '_'))
        .map_or(rest.len(), |(position, _)| position);
    let name = rest.get(..name_length)?;
    if name.is_empty() || name.starts_with(|character: char| character.is_ascii_digit()) {
        return None;
    }
    let after_name = rest.get(name_length..)?.trim_start_matches([' ', '\t']);
    let opens = if is_function {
        after_name.starts_with('(')
    } else {
        after_name.starts_with(['(', ':'])
    };
    opens.then_some(name)
}

/// Whether a Python line starts with a keyword that only starts statements
/// (never appears inside brackets).
fn starts_with_statement_keyword(statement: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "def", "class", "async", "return", "elif", "except", "finally", "try", "while", "raise",
        "pass", "import", "del", "assert", "global", "nonlocal", "continue", "break", "with",
    ];
    KEYWORDS.iter().any(|keyword| {
        statement
            .strip_prefix(keyword)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', ':', '(', ';']))
    })
}

/// Width of a line's indentation (a tab counts 8, as in Python).
fn python_indentation(line: &str) -> usize {
    let mut width = 0;
    for character in line.chars() {
        match character {
            ' ' => width += 1,
            '\t' => width = (width / 8 + 1) * 8,
            '\x0c' => width = 0,
            _ => break,
        }
    }
    width
}

/// Python definitions (classes and functions, qualified by their enclosing
/// classes and functions like the tree-sitter tags) of a code text, by a line
/// scan that skips string literals, comments and bracketed continuations.
/// Like tree-sitter on a fragment, it can be misled by a view that starts
/// inside a docstring.
pub fn python_scan_definitions(source: &str, cap: usize) -> Vec<String> {
    let mut state = PythonLexState::default();
    let mut names = Vec::new();
    let mut scopes: Vec<(usize, &str)> = Vec::new();
    for line in crate::text::lines_with_offsets(source) {
        let statement = line.text.trim_start_matches([' ', '\t', '\x0c']);
        let mut statement_start = state.at_statement_start();
        if !statement_start && state.string.is_none() && starts_with_statement_keyword(statement) {
            // Brackets left open by a cut or elided view: a statement keyword
            // cannot be inside brackets, so a new statement starts here.
            state.brackets = 0;
            state.continued = false;
            statement_start = true;
        }
        state.advance(line.text);
        if !statement_start {
            continue;
        }
        if statement.is_empty() || statement.starts_with('#') {
            continue;
        }
        let indentation = python_indentation(line.text);
        while scopes
            .last()
            .is_some_and(|(scope_indentation, _)| *scope_indentation >= indentation)
        {
            scopes.pop();
        }
        let Some(name) = python_definition_name(statement) else {
            continue;
        };
        let skip = scopes.len().saturating_sub(MAX_QUALIFIERS);
        let mut qualified = String::new();
        for (_, container) in scopes.iter().skip(skip) {
            qualified.push_str(container);
            qualified.push('.');
        }
        qualified.push_str(name);
        push_unique(&mut names, qualified, cap);
        if names.len() >= cap {
            break;
        }
        scopes.push((indentation, name));
    }
    names
}

#[cfg(test)]
mod tests {
    use crate::symbols::budget::ParseBudget;
    use crate::symbols::code_definitions;
    use crate::symbols::old_side::{may_define, python_may_define};
    use precedent_core::language::Grammar;

    use super::*;

    #[test]
    fn python_views_are_scanned_like_tree_sitter_tags_them() {
        let view = "        return x\n\n    @property\n    def name(self):\n        \"\"\"Doc.\n\ndef not_a_definition():\n        \"\"\"\n        return self._name\n\n\nclass Outer(Base):\n    value = call(a,\n  b)\n    async def run(self):\n        def inner():\n            pass\n        items = [x for x in (\n# cut view: the bracket never closes\n    def after_cut(self):\n        pass\n";
        let expected = vec![
            "name",
            "Outer",
            "Outer.run",
            "Outer.run.inner",
            "Outer.after_cut",
        ];
        assert_eq!(python_scan_definitions(view, 64), expected);
        assert_eq!(
            code_definitions(Grammar::Python, view, 2, &mut ParseBudget::default()),
            vec!["name", "Outer"]
        );
        assert!(!python_may_define(
            "    x = self.default\n    undefined(classes)\n"
        ));
        assert!(python_may_define("    def f(self):\n"));
        assert!(may_define(Grammar::Rust, "impl<T> Foo for T {"));
        assert!(may_define(Grammar::Rust, "macro_rules! m {"));
        assert!(!may_define(
            Grammar::Rust,
            "    let fnord = constant + 1;\n"
        ));
        assert!(may_define(Grammar::Go, "func (s *S) Run() {"));
        assert!(!may_define(Grammar::Go, "\treturn typed(funcs)\n"));
        assert!(may_define(Grammar::Cpp, "x = 1;"));
        assert!(python_may_define("CONSTANT = 1\n"));
    }
}
