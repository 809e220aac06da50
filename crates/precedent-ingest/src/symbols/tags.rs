//! Tag extraction: the definitions and references tree-sitter's tag query
//! finds in a text, over the whole tree or only the rows a caller needs,
//! within a [`ParseBudget`] and through the per-thread cache.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::time::Duration;

use tree_sitter::{Node, QueryCursor, QueryMatch, StreamingIterator, Tree};

use precedent_core::language::Grammar;

use super::budget::{ParseBudget, looks_like_code};
use super::cache::{RowRange, TAG_CACHE};
use super::grammar::GrammarExt;
use super::grammar::{CaptureRole, LanguageSupport, support};
use super::qualify::{PendingDefinition, definition_names, go_receiver_type, qualify_definitions};

/// At most this many definitions / references are kept per parsed text.
pub(super) const MAX_TAGS_PER_TEXT: usize = 5_000;

/// A definition found by the tag query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// The defined name (`method`).
    pub name: String,
    /// The name qualified by its enclosing containers in the parsed text (`Class.method`).
    pub qualified_name: String,
    /// The tag kind (`function`, `method`, `class`, `impl`, `constant`...).
    pub kind: String,
    /// First row (0-based) of the definition, decorators included.
    pub start_row: usize,
    /// Last row (0-based) of the definition.
    pub end_row: usize,
    /// Column of the definition's first byte.
    pub start_column: usize,
}

/// A referenced name found by the tag query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The referenced name.
    pub name: String,
    /// The tag kind (`call`, `type`, `attribute`...).
    pub kind: String,
    /// Row (0-based) of the reference.
    pub row: usize,
}

/// Definitions and references of one parsed text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tags {
    /// Definitions in text order.
    pub definitions: Vec<Definition>,
    /// References in text order.
    pub references: Vec<Reference>,
}

/// Definitions and references of `source` with a fresh default budget; see
/// [`extract_tags_within`].
#[cfg(test)]
pub(super) fn extract_tags(language: Grammar, source: &str) -> Option<Rc<Tags>> {
    extract_tags_within(language, source, &mut ParseBudget::default())
}

/// Definitions and references of `source`; `None` when it is too large or
/// does not look like code, the budget is spent, the query does not compile,
/// or the parser gave up.
pub fn extract_tags_within(
    language: Grammar,
    source: &str,
    budget: &mut ParseBudget,
) -> Option<Rc<Tags>> {
    extract_tags_for(language, source, None, budget)
}

/// Like [`extract_tags_within`], but only the tags of matches that touch rows
/// `first_row..=last_row`: every definition enclosing one of those rows and
/// every reference in them are there, as with [`extract_tags_within`]
/// (others may be missing). The query then skips the rest of the tree.
pub(super) fn extract_tags_in_rows(
    language: Grammar,
    source: &str,
    first_row: usize,
    last_row: usize,
    budget: &mut ParseBudget,
) -> Option<Rc<Tags>> {
    extract_tags_for(language, source, Some((first_row, last_row)), budget)
}

fn extract_tags_for(
    language: Grammar,
    source: &str,
    rows: RowRange,
    budget: &mut ParseBudget,
) -> Option<Rc<Tags>> {
    if source.len() > language.max_parse_bytes()
        || !budget.allows(source.len())
        || !looks_like_code(source)
    {
        return None;
    }
    if let Some(tags) = TAG_CACHE.with(|cache| cache.try_borrow().ok()?.get(language, rows, source))
    {
        budget.spend(source.len(), Duration::ZERO);
        return Some(tags);
    }
    let support = support(language).ok()?;
    let tree = budget.parse(support, source)?;
    let tags = Rc::new(tags_of_tree(language, support, source, &tree, rows));
    TAG_CACHE.with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            cache.insert(language, rows, source, &tags);
        }
    });
    Some(tags)
}

thread_local! {
    /// One query cursor per thread (see [`tags_of_tree`]).
    static CURSOR: RefCell<QueryCursor> = RefCell::new(new_cursor());
}

fn new_cursor() -> QueryCursor {
    let mut cursor = QueryCursor::new();
    cursor.set_match_limit(256);
    cursor
}

/// Runs the tag query over a parsed tree, or over the matches touching
/// `rows` (first and last, inclusive), and qualifies the definitions.
fn tags_of_tree(
    language: Grammar,
    support: &LanguageSupport,
    source: &str,
    tree: &Tree,
    rows: RowRange,
) -> Tags {
    // The thread's cursor, reused so that its match arrays keep their
    // capacity from one text to the next (a fresh one only if it is busy).
    CURSOR.with(|cursor| match cursor.try_borrow_mut() {
        Ok(mut cursor) => tags_with_cursor(&mut cursor, language, support, source, tree, rows),
        Err(_) => tags_with_cursor(&mut new_cursor(), language, support, source, tree, rows),
    })
}

fn tags_with_cursor(
    cursor: &mut QueryCursor,
    language: Grammar,
    support: &LanguageSupport,
    source: &str,
    tree: &Tree,
    rows: RowRange,
) -> Tags {
    cursor.set_point_range(point_range(language, rows));
    let mut matched = MatchedTags::default();
    let mut matches = cursor.matches(&support.query, tree.root_node(), source.as_bytes());
    while let Some(found) = matches.next() {
        if matched.is_full() {
            break;
        }
        matched.add(language, support, source, found);
    }
    drop(matches);
    qualify_definitions(
        language,
        source,
        tree,
        &mut matched.pending,
        &matched.pending_by_node,
    );
    let mut definitions: Vec<Definition> = matched
        .pending
        .into_iter()
        .map(|definition| qualified_definition(definition, language.separator()))
        .collect();
    definitions.sort_by_key(|definition| (definition.start_row, definition.start_column));
    Tags {
        definitions,
        references: matched.references,
    }
}

/// The points whose matches the query returns for `rows` (first and last,
/// inclusive): everything when `None`.
fn point_range(language: Grammar, rows: RowRange) -> std::ops::Range<tree_sitter::Point> {
    let Some((first_row, last_row)) = rows else {
        // An end point of (0, 0) is the whole text.
        return tree_sitter::Point::new(0, 0)..tree_sitter::Point::new(0, 0);
    };
    // Matches intersecting the range are returned whole, captures outside
    // it included (a definition's name above its changed body). A Python
    // definition counts from its decorators, which its node does not
    // cover: a changed decorator row belongs to a definition below it.
    let end_row = match language {
        Grammar::Python => u32::MAX as usize,
        _ => last_row + 1,
    };
    tree_sitter::Point::new(first_row, 0)..tree_sitter::Point::new(end_row, 0)
}

/// What the query's matches found: definitions as matched (qualified
/// afterwards in one walk of the tree) and references.
#[derive(Default)]
struct MatchedTags {
    pending: Vec<PendingDefinition>,
    /// Per definition node id, its entries in `pending`.
    pending_by_node: HashMap<usize, Vec<usize>>,
    /// (start byte, end byte, name) of the definitions in `pending`.
    seen_definitions: HashSet<(usize, usize, String)>,
    references: Vec<Reference>,
}

impl MatchedTags {
    fn is_full(&self) -> bool {
        self.pending.len() >= MAX_TAGS_PER_TEXT && self.references.len() >= MAX_TAGS_PER_TEXT
    }

    /// Keeps the definition and the reference one match captures.
    fn add(
        &mut self,
        language: Grammar,
        support: &LanguageSupport,
        source: &str,
        found: &QueryMatch<'_, '_>,
    ) {
        let mut definition_name: Option<(Node<'_>, &str)> = None;
        let mut definition_node: Option<Node<'_>> = None;
        let mut reference_name: Option<(Node<'_>, &str)> = None;
        for capture in found.captures() {
            match support.roles.get(capture.index as usize) {
                Some(CaptureRole::DefinitionName(kind)) => {
                    definition_name = Some((capture.node, kind.as_str()))
                }
                Some(CaptureRole::DefinitionNode) => definition_node = Some(capture.node),
                Some(CaptureRole::ReferenceName(kind)) => {
                    reference_name = Some((capture.node, kind.as_str()))
                }
                _ => {}
            }
        }
        if let Some((name_node, kind)) = definition_name
            && self.pending.len() < MAX_TAGS_PER_TEXT
        {
            self.add_definition(language, source, name_node, definition_node, kind);
        }
        if let Some((name_node, kind)) = reference_name
            && self.references.len() < MAX_TAGS_PER_TEXT
            && let Some(name) = node_text(source, name_node)
        {
            self.references.push(Reference {
                name: name.to_string(),
                kind: kind.to_string(),
                row: name_node.start_position().row,
            });
        }
    }

    /// Keeps the definition named at `name_node` (its node `definition_node`
    /// when captured), once per node and name.
    fn add_definition(
        &mut self,
        language: Grammar,
        source: &str,
        name_node: Node<'_>,
        definition_node: Option<Node<'_>>,
        kind: &str,
    ) {
        let Some((name, own_name)) = definition_names(language, source, name_node) else {
            return;
        };
        let node = definition_node.unwrap_or(name_node);
        if !self
            .seen_definitions
            .insert((node.start_byte(), node.end_byte(), name.clone()))
        {
            return;
        }
        let own_name = match (language, node.kind()) {
            (Grammar::Go, "method_declaration") => match go_receiver_type(source, node) {
                Some(receiver) => format!("{receiver}.{name}"),
                None => own_name,
            },
            _ => own_name,
        };
        self.pending_by_node
            .entry(node.id())
            .or_default()
            .push(self.pending.len());
        self.pending.push(PendingDefinition {
            name,
            own_name,
            kind: kind.to_string(),
            start_byte: node.start_byte(),
            start: node.start_position(),
            end_row: node.end_position().row,
            containers: Vec::new(),
        });
    }
}

/// A matched definition, its name qualified by its containers.
fn qualified_definition(definition: PendingDefinition, separator: &str) -> Definition {
    let qualified_name = if definition.containers.is_empty() {
        definition.own_name
    } else {
        format!(
            "{}{separator}{}",
            definition.containers.join(separator),
            definition.own_name
        )
    };
    Definition {
        name: definition.name,
        qualified_name,
        kind: definition.kind,
        start_row: definition.start.row,
        end_row: definition.end_row.max(definition.start.row),
        start_column: definition.start.column,
    }
}

pub(super) fn node_text<'s>(source: &'s str, node: Node<'_>) -> Option<&'s str> {
    let text = source.get(node.byte_range())?;
    if text.is_empty() || text.len() > 200 {
        return None;
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use crate::symbols::grammar::check_query;
    use crate::symbols::hunk::innermost_definition;
    use crate::symbols::{MAX_C_FAMILY_PARSE_BYTES, MAX_PARSE_BYTES};

    use super::*;

    fn check_tags(language: Grammar, source: &str, definitions: &[&str], references: &[&str]) {
        assert_eq!(
            check_query(language),
            Ok(()),
            "{language:?} query must compile"
        );
        let tags = extract_tags(language, source).expect("parses");
        let got: Vec<&str> = tags
            .definitions
            .iter()
            .map(|definition| definition.qualified_name.as_str())
            .collect();
        assert_all_in(language, "", definitions, &got);
        let got_references: Vec<&str> = tags
            .references
            .iter()
            .map(|reference| reference.name.as_str())
            .collect();
        assert_all_in(language, "reference ", references, &got_references);
    }

    /// Each `expected` name is in `got` (`what` names their kind).
    fn assert_all_in(language: Grammar, what: &str, expected: &[&str], got: &[&str]) {
        for expected in expected {
            assert!(
                got.contains(expected),
                "{language:?}: {what}{expected} not in {got:?}"
            );
        }
    }

    #[test]
    fn tags_in_rows_keep_what_hunks_use() {
        // For every row: the innermost definition covering it and the
        // references on it are the same whether the query ran over the whole
        // tree or over that row only.
        let sources = [
            (
                Grammar::Python,
                "import os\nLIMIT = 3\n\nclass A(Base):\n    @property\n    @cached(\n        1)\n    def size(self):\n        return len(self.items)\n\n    def grow(self, n):\n        def inner():\n            return helper(n)\n        return inner()\n\n@decorate\ndef top(x):\n    return os.path.join(x)\n",
            ),
            (
                Grammar::Rust,
                "mod printer {\n    #[derive(Debug)]\n    pub struct Standard<W> { w: W }\n    impl<W: Write> Sink for Standard<W> {\n        fn matched(&mut self) -> bool {\n            self.write_line();\n            helper(1)\n        }\n    }\n}\nfn main() {\n    run();\n}\n",
            ),
            (
                Grammar::Cpp,
                "namespace ns {\nclass Foo {\n public:\n  int bar(int x) {\n    return baz(x);\n  }\n};\n}\nvoid Foo::qux() {\n  call();\n}\n",
            ),
            (
                Grammar::Go,
                "package p\n\ntype S struct{}\n\nfunc (s *S) Run() {\n\ts.step()\n}\n\nfunc main() {\n\tRun()\n}\n",
            ),
            (
                Grammar::JavaScript,
                "class A {\n  m() {\n    return f(1);\n  }\n}\nfunction g() {\n  h();\n}\n",
            ),
        ];
        for (language, source) in sources {
            let full = extract_tags_within(language, source, &mut ParseBudget::generous())
                .expect("parses");
            for row in 0..source.lines().count() {
                let restricted =
                    extract_tags_in_rows(language, source, row, row, &mut ParseBudget::generous())
                        .expect("parses");
                let name = |tags: &Tags| {
                    innermost_definition(&tags.definitions, row)
                        .map(|definition| definition.qualified_name.clone())
                };
                let on_row = |tags: &Tags| -> Vec<String> {
                    tags.references
                        .iter()
                        .filter(|reference| reference.row == row)
                        .map(|reference| reference.name.clone())
                        .collect()
                };
                assert_eq!(name(&restricted), name(&full), "{language:?} row {row}");
                assert_eq!(on_row(&restricted), on_row(&full), "{language:?} row {row}");
            }
        }
    }

    #[test]
    fn python_query_compiles_and_tags() {
        check_tags(
            Grammar::Python,
            "class PolyFit(Stat):\n    order: int = 2\n\n    def _fit_predict(self, data):\n        return np.polyfit(data)\n",
            &["PolyFit", "PolyFit._fit_predict"],
            &["polyfit", "Stat"],
        );
    }

    #[test]
    fn rust_query_compiles_and_tags() {
        check_tags(
            Grammar::Rust,
            "mod printer {\n    impl<W: Write> Sink for Standard<W> {\n        fn matched(&mut self) -> bool {\n            self.write_line()\n        }\n    }\n    pub struct Standard<W> { w: W }\n}\n",
            &["printer::Standard::matched", "printer::Standard", "printer"],
            &["write_line", "Sink"],
        );
    }

    #[test]
    fn javascript_query_compiles_and_tags() {
        check_tags(
            Grammar::JavaScript,
            "class Dayjs {\n  diff(input) {\n    return this.utcOffset()\n  }\n}\nproto.utc = function (keepLocalTime) {\n  return dayjs(this)\n}\n",
            &["Dayjs", "Dayjs.diff", "utc"],
            &["utcOffset", "dayjs"],
        );
    }

    #[test]
    fn typescript_query_compiles_and_tags() {
        check_tags(
            Grammar::TypeScript,
            "interface Options { a: number }\nexport class Parser {\n  parse(input: string): Options {\n    return build(input)\n  }\n}\n",
            &["Options", "Parser", "Parser.parse"],
            &["build", "Options"],
        );
        check_tags(
            Grammar::Tsx,
            "function App(props: Props) {\n  return <div>{render(props)}</div>\n}\n",
            &["App"],
            &["render"],
        );
    }

    #[test]
    fn go_query_compiles_and_tags() {
        check_tags(
            Grammar::Go,
            "package grpc\n\ntype ccBalancerWrapper struct { cc *ClientConn }\n\nfunc (ccb *ccBalancerWrapper) handleResolvedAddrs(addrs []Address) {\n\tccb.cc.updateState(addrs)\n}\n\nfunc newCCBalancerWrapper() {}\n",
            &[
                "ccBalancerWrapper",
                "ccBalancerWrapper.handleResolvedAddrs",
                "newCCBalancerWrapper",
            ],
            &["updateState", "ClientConn"],
        );
    }

    #[test]
    fn java_query_compiles_and_tags() {
        check_tags(
            Grammar::Java,
            "public class RegistryAuthenticator {\n  static RegistryAuthenticator fromAuthenticationMethod(String header) {\n    return header.matches(\"^(?i)(basic).*\") ? null : new RegistryAuthenticator();\n  }\n}\n",
            &[
                "RegistryAuthenticator",
                "RegistryAuthenticator.fromAuthenticationMethod",
            ],
            &["matches", "RegistryAuthenticator"],
        );
    }

    #[test]
    fn c_query_compiles_and_tags() {
        check_tags(
            Grammar::C,
            "typedef struct buffer { char *data; } buffer_t;\nenum mode { FAST, SLOW };\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\nint grow(buffer_t *b, size_t n);\nstatic char *buffer_grow(buffer_t *b, size_t n) {\n    return realloc(b->data, n);\n}\n",
            &["buffer", "buffer_t", "mode", "MAX", "grow", "buffer_grow"],
            &["realloc", "buffer_t"],
        );
    }

    #[test]
    fn cpp_query_compiles_and_tags() {
        check_tags(
            Grammar::Cpp,
            "namespace fmt {\ntemplate <typename Range> class basic_writer {\n public:\n  void write_pointer(const void* p) {\n    write_ptr(p);\n  }\n  void write(int value);\n  ~basic_writer() {}\n};\nstruct point { int x; };\nenum class color { red };\nusing writer = basic_writer<buffer>;\n}\nvoid Foo::bar() { detail::helper(); }\ntemplate <typename T> T& Box<T>::get() { return item; }\nFoo::~Foo() {}\nint main() { return run(new Widget()); }\n",
            &[
                "fmt",
                "fmt::basic_writer",
                "fmt::basic_writer::write_pointer",
                "fmt::basic_writer::write",
                "fmt::basic_writer::~basic_writer",
                "fmt::point",
                "fmt::color",
                "fmt::writer",
                "Foo::bar",
                "Box::get",
                "Foo::~Foo",
                "main",
            ],
            &["write_ptr", "helper", "run", "Widget", "buffer"],
        );
        let tags = extract_tags(Grammar::Cpp, "void Foo::bar() {}\n").expect("parses");
        let definition = tags.definitions.first().expect("a definition");
        assert_eq!(
            (
                definition.name.as_str(),
                definition.qualified_name.as_str(),
                definition.kind.as_str()
            ),
            ("bar", "Foo::bar", "method")
        );
    }

    #[test]
    fn deeply_nested_code_is_bounded() {
        let nested = format!("x = {}1{}\n", "(".repeat(5_000), ")".repeat(5_000));
        let tags = extract_tags_within(Grammar::Python, &nested, &mut ParseBudget::generous());
        assert!(tags.is_some());
        let brackets = format!("fn f() {{ {} }}", "[".repeat(5_000));
        assert!(
            extract_tags_within(Grammar::Rust, &brackets, &mut ParseBudget::generous()).is_some()
        );
        // C and C++ parse at most MAX_C_FAMILY_PARSE_BYTES: nest as deep as fits.
        let namespaces = format!("{}void f() {{}}", "namespace a { ".repeat(280));
        assert!(namespaces.len() <= MAX_C_FAMILY_PARSE_BYTES);
        let deeper = format!("{}void f() {{}}", "namespace a { ".repeat(3_000));
        for language in [Grammar::C, Grammar::Cpp] {
            assert!(
                extract_tags_within(language, &namespaces, &mut ParseBudget::generous()).is_some()
            );
            // Past the cap the caller falls back to the line scan.
            assert!(extract_tags_within(language, &deeper, &mut ParseBudget::generous()).is_none());
        }
        // Too many scopes to qualify: the definition is dropped, nothing panics.
        let scopes = format!("void {}f() {{}}\n", "a::".repeat(100));
        let tags = extract_tags_within(Grammar::Cpp, &scopes, &mut ParseBudget::generous())
            .expect("parses");
        assert!(
            tags.definitions
                .iter()
                .all(|definition| definition.name != "f")
        );
        let too_big = "a".repeat(MAX_PARSE_BYTES + 1);
        assert_eq!(extract_tags(Grammar::Python, &too_big), None);
    }
}
