//! Naming and qualifying definitions: the name a definition node gives
//! (C++ `Foo::bar`, a Go method's receiver), and the enclosing containers
//! that qualify it (`Class.method`), found in one bounded walk of the tree.

use std::collections::HashMap;

use tree_sitter::{Node, Tree};

use precedent_core::language::Grammar;

use super::MAX_QUALIFIERS;
use super::tags::node_text;

/// Syntax nodes visited when qualifying definitions.
const MAX_QUALIFY_VISITS: usize = 2_000_000;

/// A definition found by the query, before qualification.
pub(super) struct PendingDefinition {
    pub(super) name: String,
    pub(super) own_name: String,
    pub(super) kind: String,
    /// Byte offset of the definition node.
    pub(super) start_byte: usize,
    /// Start of the definition (of its decorators, once qualified).
    pub(super) start: tree_sitter::Point,
    pub(super) end_row: usize,
    /// Enclosing container names, outermost first (at most [`MAX_QUALIFIERS`]).
    pub(super) containers: Vec<String>,
}

/// Walks the tree once (iteratively, bounded) keeping the stack of enclosing
/// containers, and records it for each pending definition; also extends a
/// decorated Python definition to its decorators. (`Node::parent` is not used:
/// it costs a descent from the root per call.)
pub(super) fn qualify_definitions(
    language: Grammar,
    source: &str,
    tree: &Tree,
    pending: &mut [PendingDefinition],
    pending_by_node: &HashMap<usize, Vec<usize>>,
) {
    if pending.is_empty() {
        return;
    }
    // Only subtrees holding a definition are walked.
    let mut definition_starts: Vec<usize> = pending
        .iter()
        .map(|definition| definition.start_byte)
        .collect();
    definition_starts.sort_unstable();
    let holds_definition = |node: Node<'_>| {
        let first_at_or_after =
            definition_starts.partition_point(|start| *start < node.start_byte());
        definition_starts
            .get(first_at_or_after)
            .is_some_and(|start| *start < node.end_byte())
    };
    let mut cursor = tree.walk();
    let mut containers: Vec<(usize, String)> = Vec::new();
    let mut depth = 0usize;
    let mut visited = 0usize;
    let mut decorated_starts: HashMap<usize, tree_sitter::Point> = HashMap::new();
    loop {
        let node = cursor.node();
        visited += 1;
        while containers
            .last()
            .is_some_and(|(container_depth, _)| *container_depth >= depth)
        {
            containers.pop();
        }
        if node.kind() == "decorated_definition"
            && let Some(definition) = node.child_by_field_name("definition")
        {
            decorated_starts.insert(definition.id(), node.start_position());
        }
        if let Some(indices) = pending_by_node.get(&node.id()) {
            let skip = containers.len().saturating_sub(MAX_QUALIFIERS);
            let names: Vec<String> = containers
                .iter()
                .skip(skip)
                .map(|(_, name)| name.clone())
                .collect();
            for index in indices {
                if let Some(definition) = pending.get_mut(*index) {
                    definition.containers = names.clone();
                    if let Some(start) = decorated_starts.get(&node.id()) {
                        definition.start = *start;
                    }
                }
            }
        }
        if let Some(name) = container_name(language, source, node) {
            containers.push((depth, name));
        }
        if visited < MAX_QUALIFY_VISITS && holds_definition(node) && cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
            depth = depth.saturating_sub(1);
        }
    }
}

/// The defined name and the name to qualify (`bar` and `bar`; for a C++
/// out-of-line member captured as a `qualified_identifier`, `bar` and
/// `Foo::bar`).
pub(super) fn definition_names(
    language: Grammar,
    source: &str,
    name_node: Node<'_>,
) -> Option<(String, String)> {
    if language == Grammar::Cpp && name_node.kind() == "qualified_identifier" {
        return cpp_qualified_name(source, name_node);
    }
    let name = node_text(source, name_node)?;
    Some((name.to_string(), name.to_string()))
}

/// The member and the qualified name (`bar`, `Foo::bar`) of a C++
/// `qualified_identifier`, template arguments dropped (`Foo<T>::bar` gives
/// `Foo::bar`) and a leading global `::` too; `None` when too deep.
fn cpp_qualified_name(source: &str, node: Node<'_>) -> Option<(String, String)> {
    const MAX_SEGMENTS: usize = 16;
    let mut segments: Vec<&str> = Vec::new();
    let mut current = node;
    while current.kind() == "qualified_identifier" {
        if segments.len() >= MAX_SEGMENTS {
            return None;
        }
        if let Some(scope) = current.child_by_field_name("scope")
            && let Some(segment) = cpp_base_name(source, scope)
        {
            segments.push(segment);
        }
        current = current.child_by_field_name("name")?;
    }
    let member = cpp_base_name(source, current)?;
    segments.push(member);
    Some((member.to_string(), segments.join("::")))
}

/// `Foo` of `Foo`, `Foo<T>` (a template type, function or method name).
fn cpp_base_name<'s>(source: &'s str, node: Node<'_>) -> Option<&'s str> {
    match node.kind() {
        "template_type" | "template_function" | "template_method" => {
            node_text(source, node.child_by_field_name("name")?)
        }
        "decltype" | "dependent_name" => None,
        _ => node_text(source, node),
    }
}

fn container_name(language: Grammar, source: &str, node: Node<'_>) -> Option<String> {
    let kind = node.kind();
    let is_container = match language {
        Grammar::Python => matches!(kind, "class_definition" | "function_definition"),
        Grammar::Rust => matches!(
            kind,
            "impl_item" | "trait_item" | "mod_item" | "function_item"
        ),
        Grammar::JavaScript | Grammar::TypeScript | Grammar::Tsx => matches!(
            kind,
            "class_declaration"
                | "class"
                | "abstract_class_declaration"
                | "interface_declaration"
                | "function_declaration"
                | "method_definition"
                | "internal_module"
                | "module"
        ),
        Grammar::Go => false,
        Grammar::Java => matches!(
            kind,
            "class_declaration"
                | "interface_declaration"
                | "enum_declaration"
                | "record_declaration"
                | "method_declaration"
        ),
        Grammar::C => false,
        Grammar::Cpp => matches!(
            kind,
            "class_specifier" | "struct_specifier" | "union_specifier" | "namespace_definition"
        ),
    };
    if !is_container {
        return None;
    }
    if kind == "impl_item" {
        let type_node = node.child_by_field_name("type")?;
        return base_type_name(source, type_node);
    }
    let name_node = node.child_by_field_name("name")?;
    if language == Grammar::Cpp {
        return match name_node.kind() {
            "qualified_identifier" => {
                cpp_qualified_name(source, name_node).map(|(_, qualified)| qualified)
            }
            _ => cpp_base_name(source, name_node).map(str::to_string),
        };
    }
    node_text(source, name_node).map(str::to_string)
}

/// `Foo` of `Foo`, `Foo<T>`, `a::b::Foo`.
fn base_type_name(source: &str, node: Node<'_>) -> Option<String> {
    match node.kind() {
        "generic_type" => node
            .child_by_field_name("type")
            .and_then(|inner| base_type_name(source, inner)),
        "scoped_type_identifier" => node
            .child_by_field_name("name")
            .and_then(|inner| node_text(source, inner))
            .map(str::to_string),
        _ => node_text(source, node).map(str::to_string),
    }
}

/// The receiver type name of a Go method (`T` of `func (t *T) M()`).
pub(super) fn go_receiver_type(source: &str, method: Node<'_>) -> Option<String> {
    let receiver = method.child_by_field_name("receiver")?;
    let mut stack = vec![receiver];
    let mut visited = 0;
    while let Some(node) = stack.pop() {
        visited += 1;
        if visited > 64 {
            return None;
        }
        if node.kind() == "type_identifier" {
            return node_text(source, node).map(str::to_string);
        }
        let mut walker = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut walker).collect();
        for child in children.into_iter().rev() {
            stack.push(child);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::symbols::budget::ParseBudget;
    use crate::symbols::tags::{MAX_TAGS_PER_TEXT, extract_tags, extract_tags_within};

    use super::*;

    #[test]
    fn deeply_nested_definitions_are_qualified_in_one_walk() {
        let depth = 10_000;
        let mut source = String::new();
        for index in 0..depth {
            source.push_str(&format!("function f{index}(){{"));
        }
        source.push_str(&"}".repeat(depth));
        let tags = extract_tags_within(Grammar::JavaScript, &source, &mut ParseBudget::generous())
            .expect("parses");
        assert_eq!(tags.definitions.len(), MAX_TAGS_PER_TEXT);
        let last = MAX_TAGS_PER_TEXT - 1;
        let innermost = tags
            .definitions
            .iter()
            .find(|definition| definition.name == format!("f{last}"))
            .expect("innermost kept function");
        assert_eq!(
            innermost.qualified_name,
            format!(
                "f{}.f{}.f{}.f{}.f{last}",
                last - 4,
                last - 3,
                last - 2,
                last - 1
            )
        );
        let decorated = extract_tags(
            Grammar::Python,
            "class A:\n    @property\n    def x(self):\n        return 1\n",
        )
        .expect("parses");
        let method = decorated
            .definitions
            .iter()
            .find(|definition| definition.name == "x")
            .expect("method");
        assert_eq!(
            (method.qualified_name.as_str(), method.start_row),
            ("A.x", 1)
        );
    }
}
