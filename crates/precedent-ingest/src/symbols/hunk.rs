//! The symbols of one diff hunk: the definitions enclosing its changed lines
//! (tree-sitter on each side's fragment, the line scan where that finds
//! nothing) and the names its added lines reference.

use std::borrow::Cow;

use crate::diff::{Hunk, HunkLineKind};
use precedent_core::language::{Grammar, LineScan};

use super::budget::ParseBudget;
use super::fragment_repair::{close_open_braces, open_python_blocks};
use super::grammar::GrammarExt;
use super::language::grammar_of_path_and_text;
use super::line_scan::{DefinitionKind, line_definition, scope_symbols};
use super::old_side::{ContextNeighbours, NewSide, may_define, removed_from_new_side};
use super::push_unique;
use super::references::is_interesting_reference;
use super::tags::{Definition, extract_tags_in_rows};

/// Symbols kept per hunk.
const MAX_SYMBOLS_PER_HUNK: usize = 64;

/// What one hunk says about symbols.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HunkSymbols {
    /// Innermost definitions enclosing the changed lines, qualified where known, in order.
    pub changed: Vec<String>,
    /// Names referenced by the added lines (calls, attributes, types).
    pub referenced: Vec<String>,
    /// True when a fragment was too large for tree-sitter and only the line scan ran.
    pub skipped_parse: bool,
}

/// One side (old or new) of a hunk as a source fragment.
pub(super) struct Fragment {
    pub(super) source: String,
    /// For each row of `source`: (index into hunk.lines, is a changed line).
    pub(super) rows: Vec<(usize, bool)>,
    /// For each hunk line, its row in `source` if it is on this side.
    pub(super) row_of_line: Vec<Option<usize>>,
}

pub(super) fn build_fragment(hunk: &Hunk, text: &str, changed_kind: HunkLineKind) -> Fragment {
    let mut source = String::new();
    let mut rows = Vec::new();
    let mut row_of_line = vec![None; hunk.lines.len()];
    for (line_index, line) in hunk.lines.iter().enumerate() {
        if line.kind != HunkLineKind::Context && line.kind != changed_kind {
            continue;
        }
        let content = text.get(line.start..line.end).unwrap_or("");
        source.push_str(content);
        source.push('\n');
        row_of_line[line_index] = Some(rows.len());
        rows.push((line_index, line.kind == changed_kind));
    }
    Fragment {
        source,
        rows,
        row_of_line,
    }
}

/// Symbols of one hunk of the file at `path`; `text` is the text the hunk's
/// byte ranges point into.
pub fn hunk_symbols(path: &str, hunk: &Hunk, text: &str, budget: &mut ParseBudget) -> HunkSymbols {
    let mut result = HunkSymbols::default();
    if !hunk.has_changes() {
        return result;
    }
    let context = HunkContext::of(path, hunk, text);
    let per_line = match context.language {
        Some(language) => {
            let mut parse = SidesParse::new(&context, language);
            for changed_kind in [HunkLineKind::Added, HunkLineKind::Removed] {
                parse.parse_side(changed_kind, budget);
            }
            result.referenced = parse.referenced;
            result.skipped_parse = parse.skipped_parse;
            parse.per_line
        }
        None => vec![None; hunk.lines.len()],
    };
    context.changed_symbols(per_line, &mut result.changed);
    result
}

/// What the path, the text and the hunk header say around a hunk's lines.
struct HunkContext<'a> {
    hunk: &'a Hunk,
    text: &'a str,
    scan: Option<LineScan>,
    language: Option<Grammar>,
    /// The definition the hunk header names.
    header: Option<(DefinitionKind, String)>,
    /// In Java, the file's class (the public class is named after its file).
    file_type: Option<(DefinitionKind, String)>,
}

impl<'a> HunkContext<'a> {
    fn of(path: &str, hunk: &'a Hunk, text: &'a str) -> HunkContext<'a> {
        let scan = LineScan::from_path(path);
        let language = grammar_of_path_and_text(path, text.get(hunk.start..hunk.end).unwrap_or(""));
        let header = scan.and_then(|scan| line_definition(&hunk.context, scan, true));
        let file_type = (language == Some(Grammar::Java))
            .then(|| file_stem(path))
            .flatten()
            .map(|stem| (DefinitionKind::Type, stem));
        HunkContext {
            hunk,
            text,
            scan,
            language,
            header,
            file_type,
        }
    }

    /// The type an indented member belongs to: the header's, or the file's.
    fn type_context(&self) -> Option<&(DefinitionKind, String)> {
        self.header
            .as_ref()
            .filter(|(kind, _)| *kind == DefinitionKind::Type)
            .or(self.file_type.as_ref())
    }

    /// `definition`'s name, qualified by the type around the hunk when the
    /// fragment shows it without its container.
    fn qualify(&self, definition: &Definition, language: Grammar) -> String {
        qualify_with_header(definition, self.type_context(), language.separator())
    }

    /// The symbol of each non-blank changed line, in order, into `changed`:
    /// the parse's (`per_line`), else the line scan's, run only when some
    /// changed line has no symbol from the parse.
    fn changed_symbols(&self, mut per_line: Vec<Option<String>>, changed: &mut Vec<String>) {
        let mut fallback: Option<Vec<Option<String>>> = None;
        for (line_index, line) in self.hunk.lines.iter().enumerate() {
            let blank = self
                .text
                .get(line.start..line.end)
                .is_none_or(|content| content.trim().is_empty());
            if line.kind == HunkLineKind::Context || blank {
                continue;
            }
            let symbol = per_line[line_index].take().or_else(|| {
                let fallback = fallback.get_or_insert_with(|| {
                    self.scan
                        .map(|scan| scope_symbols(self.hunk, self.text, scan, self.header.as_ref()))
                        .unwrap_or_default()
                });
                let scanned = fallback.get(line_index).cloned().flatten()?;
                // A Java method known only from the hunk header belongs to the
                // file's class, as one shown in the fragment would.
                Some(match &self.file_type {
                    Some((_, class)) if !scanned.contains('.') && &scanned != class => {
                        format!("{class}.{scanned}")
                    }
                    _ => scanned,
                })
            });
            if let Some(symbol) = symbol {
                push_unique(changed, symbol, MAX_SYMBOLS_PER_HUNK);
            }
        }
    }
}

/// The tree-sitter reading of a hunk's two sides, new side first.
struct SidesParse<'c, 'a> {
    context: &'c HunkContext<'a>,
    language: Grammar,
    neighbours: ContextNeighbours,
    /// Per hunk line, the innermost definition enclosing it, qualified.
    per_line: Vec<Option<String>>,
    /// Names the added lines reference.
    referenced: Vec<String>,
    /// Whether a fragment was left to the line scan.
    skipped_parse: bool,
    /// The new side's parse, kept to place removed lines without parsing
    /// the old side when that is safe (see `removed_from_new_side`).
    new_side: Option<NewSide>,
}

impl<'c, 'a> SidesParse<'c, 'a> {
    fn new(context: &'c HunkContext<'a>, language: Grammar) -> SidesParse<'c, 'a> {
        SidesParse {
            context,
            language,
            neighbours: ContextNeighbours::of(context.hunk),
            per_line: vec![None; context.hunk.lines.len()],
            referenced: Vec::new(),
            skipped_parse: false,
            new_side: None,
        }
    }

    /// Reads the side whose changed lines are `changed_kind`.
    fn parse_side(&mut self, changed_kind: HunkLineKind, budget: &mut ParseBudget) {
        let (hunk, text, language) = (self.context.hunk, self.context.text, self.language);
        let fragment = build_fragment(hunk, text, changed_kind);
        if !fragment.rows.iter().any(|(_, changed)| *changed) {
            return;
        }
        if fragment.source.len() > language.max_parse_bytes() {
            self.skipped_parse = true;
            return;
        }
        if changed_kind == HunkLineKind::Removed {
            // Only definitions matter on the old side.
            if !may_define(language, &fragment.source) || self.place_removed_from_new_side() {
                return;
            }
        }
        let Some(parsed) = self.parse_fragment(changed_kind, fragment, budget) else {
            self.skipped_parse = true;
            return;
        };
        for (row, (line_index, changed)) in parsed.fragment.rows.iter().enumerate() {
            if *changed
                && let Some(definition) =
                    innermost_definition(&parsed.tags.definitions, row + parsed.offset)
            {
                self.per_line[*line_index] = Some(self.context.qualify(definition, language));
            }
        }
        if changed_kind == HunkLineKind::Added {
            for reference in &parsed.tags.references {
                let on_added_row = reference
                    .row
                    .checked_sub(parsed.offset)
                    .and_then(|row| parsed.fragment.rows.get(row))
                    .is_some_and(|(_, changed)| *changed);
                if on_added_row && is_interesting_reference(&reference.name) {
                    push_unique(
                        &mut self.referenced,
                        reference.name.clone(),
                        MAX_SYMBOLS_PER_HUNK,
                    );
                }
            }
            self.new_side = Some(parsed);
        }
    }

    /// Places the removed lines in the new side's parse, when that is safe;
    /// answers whether it did.
    fn place_removed_from_new_side(&mut self) -> bool {
        let context = self.context;
        let Some(new_side) = &self.new_side else {
            return false;
        };
        let Some(placed) = removed_from_new_side(
            context.hunk,
            context.text,
            self.language,
            context.scan,
            &self.neighbours,
            new_side,
        ) else {
            return false;
        };
        for (line_index, definition) in placed {
            self.per_line[line_index] =
                definition.map(|definition| context.qualify(definition, self.language));
        }
        true
    }

    /// Tags of `fragment`, repaired to parse, over the rows that are used:
    /// the changed ones, and on the new side also the context lines around
    /// removed lines. `None` when the budget refuses.
    fn parse_fragment(
        &self,
        changed_kind: HunkLineKind,
        fragment: Fragment,
        budget: &mut ParseBudget,
    ) -> Option<NewSide> {
        // Rows of the parsed text are the fragment's plus `offset`.
        let (source, offset) = match self.language {
            Grammar::C | Grammar::Cpp => (close_open_braces(&fragment.source), 0),
            Grammar::Python => open_python_blocks(&fragment.source),
            _ => (Cow::Borrowed(fragment.source.as_str()), 0),
        };
        let around_removed = (changed_kind == HunkLineKind::Added)
            .then(|| {
                self.neighbours
                    .rows_around_removed(self.context.hunk, &fragment)
            })
            .into_iter()
            .flatten();
        let mut rows_used = fragment
            .rows
            .iter()
            .enumerate()
            .filter(|(_, (_, changed))| *changed)
            .map(|(row, _)| row)
            .chain(around_removed);
        let first_row = rows_used.next().unwrap_or(0);
        let (first_row, last_row) = rows_used.fold((first_row, first_row), |(low, high), row| {
            (low.min(row), high.max(row))
        });
        let tags = extract_tags_in_rows(
            self.language,
            &source,
            first_row + offset,
            last_row + offset,
            budget,
        )?;
        drop(source);
        Some(NewSide {
            tags,
            offset,
            fragment,
        })
    }
}

/// The innermost definition (smallest row span) covering `row`; module-level
/// constants count only when they start at column 0.
pub(super) fn innermost_definition(definitions: &[Definition], row: usize) -> Option<&Definition> {
    definitions
        .iter()
        .filter(|definition| definition.start_row <= row && row <= definition.end_row)
        .filter(|definition| definition.kind != "constant" || definition.start_column == 0)
        .min_by_key(|definition| {
            (
                definition.end_row - definition.start_row,
                usize::MAX - definition.start_row,
            )
        })
}

/// The file name without directories and extension (`Version` of `src/Version.java`).
fn file_stem(path: &str) -> Option<String> {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    crate::text::is_identifier(stem).then(|| stem.to_string())
}

/// Qualifies an indented member the fragment shows without its container by
/// the hunk header's type (or, for Java, the file's class).
fn qualify_with_header(
    definition: &Definition,
    header: Option<&(DefinitionKind, String)>,
    separator: &str,
) -> String {
    let unqualified = definition.qualified_name == definition.name;
    let is_member_kind = matches!(definition.kind.as_str(), "function" | "method" | "constant");
    if let Some((DefinitionKind::Type, type_name)) = header
        && unqualified
        && is_member_kind
        && definition.start_column > 0
        && type_name != &definition.name
    {
        return format!("{type_name}{separator}{}", definition.name);
    }
    definition.qualified_name.clone()
}

#[cfg(test)]
mod tests {
    use crate::diff::parse_diffs;

    use super::*;

    fn check_hunks(diff: &str, expected_changed: &[&[&str]]) {
        let parsed = parse_diffs(diff);
        let mut got: Vec<Vec<String>> = Vec::new();
        for file in &parsed.files {
            for hunk in &file.hunks {
                got.push(
                    hunk_symbols(
                        file.path().unwrap_or(""),
                        hunk,
                        diff,
                        &mut ParseBudget::default(),
                    )
                    .changed,
                );
            }
        }
        let expected: Vec<Vec<String>> = expected_changed
            .iter()
            .map(|symbols| symbols.iter().map(|s| s.to_string()).collect())
            .collect();
        assert_eq!(got, expected, "changed symbols of:\n{diff}");
    }

    #[test]
    fn python_hunk_uses_header_function_when_fragment_has_no_definition() {
        check_hunks(
            "--- a/msal/application.py\n+++ b/msal/application.py\n@@ -170,3 +170,4 @@ def __init__(\n             exclude_scopes=None,\n+            http_cache=None,\n             ):\n         \"\"\"Create an instance of application.\n",
            &[&["__init__"]],
        );
    }

    #[test]
    fn python_hunk_method_qualified_by_header_class() {
        check_hunks(
            "--- a/src/_pytest/fixtures.py\n+++ b/src/_pytest/fixtures.py\n@@ -634,6 +634,7 @@ class FixtureRequest(FuncargnamesCompatAttr):\n         return node\n \n     def __repr__(self):\n+        return f\"{self.func.__name__} (scope='{self.scope}')\"\n         return \"<FixtureRequest for %r>\" % (self.node)\n \n \n",
            &[&["FixtureRequest.__repr__"]],
        );
    }

    #[test]
    fn python_hunk_new_function_and_class_body() {
        check_hunks(
            "--- a/x.py\n+++ b/x.py\n@@ -1,5 +1,8 @@\n class A:\n-    order = 1\n+    order = 2\n \n     def f(self):\n         pass\n+\n+def helper():\n+    return 1\n",
            &[&["A", "helper"]],
        );
    }

    #[test]
    fn python_hunk_starting_in_a_body_parses_the_blocks_after_it() {
        // The fragment starts inside a list in a class body; the class added
        // after it owns its methods (error recovery from the indented start
        // gave them to the header's class).
        check_hunks(
            "--- a/bench.py\n+++ b/bench.py\n@@ -106,5 +106,11 @@ class Neighbors(Benchmark):\n         [0.2, 0.5],\n     ]\n \n     def setup(self, n):\n         self.n = n\n+\n+class CNeighbors(Benchmark):\n+    def setup(self, m):\n+        self.m = m\n+\n+    def time_deep(self, m):\n+        self.run(m)\n",
            &[&["CNeighbors", "CNeighbors.setup", "CNeighbors.time_deep"]],
        );
        assert_eq!(
            open_python_blocks("        a = 1\n    def f(self):\n  b\n# c\n"),
            (
                Cow::Owned::<str>(
                    "if 1:\n  if 1:\n    if 1:\n        a = 1\n    def f(self):\n  b\n# c\n".into()
                ),
                3
            )
        );
        assert_eq!(open_python_blocks("x = 1\n    y\n").1, 0);
    }

    #[test]
    fn python_module_constant_is_a_symbol() {
        check_hunks(
            "--- a/src/_pytest/logging.py\n+++ b/src/_pytest/logging.py\n@@ -15,3 +15,3 @@ from _pytest.compat import dummy_context_manager\n \n-DEFAULT_LOG_FORMAT = \"%(filename)-25s %(message)s\"\n+DEFAULT_LOG_FORMAT = \"%(levelname)-8s %(message)s\"\n DEFAULT_LOG_DATE_FORMAT = \"%H:%M:%S\"\n",
            &[&["DEFAULT_LOG_FORMAT"]],
        );
    }

    #[test]
    fn rust_hunk_inside_impl_from_header() {
        check_hunks(
            "diff --git a/src/args.rs b/src/args.rs\n--- a/src/args.rs\n+++ b/src/args.rs\n@@ -10,4 +10,7 @@ impl ArgMatches {\n     fn overrides(&self) -> Result<Override> {\n         let mut builder = OverrideBuilder::new(env::current_dir()?);\n+        if self.is_present(\"glob-case-insensitive\") {\n+            builder.case_insensitive(true).unwrap();\n+        }\n         for glob in self.values_of_lossy_vec(\"glob\") {\n",
            &[&["ArgMatches::overrides"]],
        );
    }

    #[test]
    fn rust_hunk_header_function_only() {
        check_hunks(
            "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -3,2 +3,2 @@ fn run(args: Args) -> Result<()> {\n     let x = 1;\n-    old();\n+    new_call();\n",
            &[&["run"]],
        );
    }

    #[test]
    fn go_and_java_and_js_hunks() {
        check_hunks(
            "--- a/clientconn.go\n+++ b/clientconn.go\n@@ -1,3 +1,4 @@\n func (cc *ClientConn) Close() error {\n+\tif cc == nil { return nil }\n \treturn cc.close()\n }\n",
            &[&["ClientConn.Close"]],
        );
        check_hunks(
            "--- a/src/main/java/com/fasterxml/jackson/core/Version.java\n+++ b/src/main/java/com/fasterxml/jackson/core/Version.java\n@@ -113,4 +113,4 @@ public String toFullString() {\n     }\n \n     @Override public int hashCode() {\n-        return _artifactId.hashCode();\n+        return _artifactId.hashCode() ^ _snapshotInfo.hashCode();\n",
            &[&["Version.hashCode"]],
        );
        check_hunks(
            "--- a/src/main/java/com/x/ReaderBasedJsonParser.java\n+++ b/src/main/java/com/x/ReaderBasedJsonParser.java\n@@ -884,4 +884,3 @@ public String nextFieldName() throws IOException\n         if (i == INT_RBRACKET) {\n-            _updateLocation();\n-            return null;\n+            return _closeArray();\n         }\n",
            &[&["ReaderBasedJsonParser.nextFieldName"]],
        );
        check_hunks(
            "--- a/src/Auth.java\n+++ b/src/Auth.java\n@@ -5,3 +5,3 @@ public class RegistryAuthenticator {\n   static RegistryAuthenticator fromAuthenticationMethod(String h) {\n-    if (h.matches(\"^(?i)(basic) .*\")) {\n+    if (h.matches(\"^(?i)(basic).*\")) {\n       return null;\n",
            &[&["RegistryAuthenticator.fromAuthenticationMethod"]],
        );
        check_hunks(
            "--- a/src/plugin/utc/index.js\n+++ b/src/plugin/utc/index.js\n@@ -1,3 +1,3 @@ export default (option, Dayjs, dayjs) => {\n   proto.diff = function (input, units, float) {\n-    const localThis = this.local()\n+    const localThis = this.local && this.local()\n     return oldDiff.call(localThis, input, units, float)\n",
            &[&["diff"]],
        );
    }

    #[test]
    fn cpp_uses_line_patterns() {
        check_hunks(
            "--- a/include/fmt/format.h\n+++ b/include/fmt/format.h\n@@ -10,3 +10,3 @@ class basic_writer {\n   void write_pointer(const void* p) {\n-    write(p);\n+    write_ptr(p);\n   }\n",
            &[&["basic_writer::write_pointer"]],
        );
    }

    #[test]
    fn cpp_hunks_are_qualified_by_class_and_scope() {
        // A hunk inside a class method whose class shows in the fragment.
        check_hunks(
            "--- a/include/fmt/format.h\n+++ b/include/fmt/format.h\n@@ -10,6 +10,6 @@ namespace internal {\n template <typename Range> class basic_writer {\n  public:\n   void write_pointer(const void* p) {\n-    write(p);\n+    write_ptr(p);\n   }\n",
            &[&["basic_writer::write_pointer"]],
        );
        // An out-of-line member definition.
        check_hunks(
            "--- a/src/os.cc\n+++ b/src/os.cc\n@@ -20,3 +20,4 @@ FMT_BEGIN_NAMESPACE\n void file::close() {\n   if (fd_ == -1) return;\n+  flush();\n   int result = FMT_POSIX_CALL(close(fd_));\n",
            &[&["file::close"]],
        );
        // A member known only from the hunk header's type.
        check_hunks(
            "--- a/src/a.cpp\n+++ b/src/a.cpp\n@@ -5,3 +5,3 @@ class parser {\n   int parse(const char* s) {\n-    return 0;\n+    return parse_int(s);\n   }\n",
            &[&["parser::parse"]],
        );
        // A C function.
        check_hunks(
            "--- a/src/buf.c\n+++ b/src/buf.c\n@@ -1,3 +1,3 @@\n static int grow(buf *b) {\n-  return 0;\n+  return resize(b);\n }\n",
            &[&["grow"]],
        );
    }

    #[test]
    fn references_from_added_lines() {
        let diff = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,3 @@\n def f(data):\n+    data = data.dropna()\n     return np.polyfit(data)\n";
        let parsed = parse_diffs(diff);
        let hunk = &parsed.files[0].hunks[0];
        let symbols = hunk_symbols("x.py", hunk, diff, &mut ParseBudget::default());
        assert_eq!(symbols.referenced, vec!["dropna".to_string()]);
    }
}
