//! Grammars and tag queries: each tree-sitter grammar with its
//! query from `crates/precedent-ingest/grammars/*-tags.scm`, compiled once per process (at start-up
//! by [`crate::warm_up`], else at first use), and what each capture
//! of the query marks.

use std::sync::OnceLock;

use tree_sitter::{Language, Query};

use precedent_core::language::Grammar;

use super::{MAX_C_FAMILY_PARSE_BYTES, MAX_PARSE_BYTES};

/// What extraction knows of a grammar beyond the language table: its parse
/// limit, its qualified-name separator, its tree-sitter language and tag
/// query. A trait because [`Grammar`] is the shared vocabulary's type.
pub(crate) trait GrammarExt: Copy {
    /// The largest text parsed with this grammar.
    fn max_parse_bytes(self) -> usize;
    /// Separator between a container and a member in qualified names.
    fn separator(self) -> &'static str;
    /// The tree-sitter language.
    fn tree_sitter_language(self) -> Language;
    /// The tag query's source.
    fn query_source(self) -> String;
    /// The grammar's slot in per-grammar tables.
    fn index(self) -> usize;
}

impl GrammarExt for Grammar {
    fn max_parse_bytes(self) -> usize {
        match self {
            Grammar::C | Grammar::Cpp => MAX_C_FAMILY_PARSE_BYTES,
            _ => MAX_PARSE_BYTES,
        }
    }

    fn separator(self) -> &'static str {
        match self {
            Grammar::Rust | Grammar::C | Grammar::Cpp => "::",
            _ => ".",
        }
    }

    fn tree_sitter_language(self) -> Language {
        match self {
            Grammar::Python => tree_sitter_python::LANGUAGE.into(),
            Grammar::Rust => tree_sitter_rust::LANGUAGE.into(),
            Grammar::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Grammar::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Grammar::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Grammar::Go => tree_sitter_go::LANGUAGE.into(),
            Grammar::Java => tree_sitter_java::LANGUAGE.into(),
            Grammar::C => tree_sitter_c::LANGUAGE.into(),
            Grammar::Cpp => tree_sitter_cpp::LANGUAGE.into(),
        }
    }

    fn query_source(self) -> String {
        const PYTHON: &str = include_str!("../../grammars/python-tags.scm");
        const RUST: &str = include_str!("../../grammars/rust-tags.scm");
        const JAVASCRIPT: &str = include_str!("../../grammars/javascript-tags.scm");
        const TYPESCRIPT: &str = include_str!("../../grammars/typescript-tags.scm");
        const GO: &str = include_str!("../../grammars/go-tags.scm");
        const JAVA: &str = include_str!("../../grammars/java-tags.scm");
        const C: &str = include_str!("../../grammars/c-tags.scm");
        const CPP: &str = include_str!("../../grammars/cpp-tags.scm");
        // Patterns after this line of javascript-tags.scm are not valid for TypeScript.
        const JAVASCRIPT_ONLY_MARKER: &str = "; @javascript-only";
        match self {
            Grammar::Python => PYTHON.to_string(),
            Grammar::Rust => RUST.to_string(),
            Grammar::JavaScript => JAVASCRIPT.to_string(),
            Grammar::TypeScript | Grammar::Tsx => {
                let shared = JAVASCRIPT
                    .split(JAVASCRIPT_ONLY_MARKER)
                    .next()
                    .unwrap_or(JAVASCRIPT);
                format!("{shared}\n{TYPESCRIPT}")
            }
            Grammar::Go => GO.to_string(),
            Grammar::Java => JAVA.to_string(),
            Grammar::C => C.to_string(),
            Grammar::Cpp => CPP.to_string(),
        }
    }

    fn index(self) -> usize {
        match self {
            Grammar::Python => 0,
            Grammar::Rust => 1,
            Grammar::JavaScript => 2,
            Grammar::TypeScript => 3,
            Grammar::Tsx => 4,
            Grammar::Go => 5,
            Grammar::Java => 6,
            Grammar::C => 7,
            Grammar::Cpp => 8,
        }
    }
}

/// The kind of tag a capture marks.
#[derive(Debug, Clone)]
pub(super) enum CaptureRole {
    DefinitionName(String),
    DefinitionNode,
    ReferenceName(String),
    Other,
}

/// A compiled language with its tag query.
pub(super) struct LanguageSupport {
    pub(super) language: Language,
    pub(super) query: Query,
    pub(super) roles: Vec<CaptureRole>,
}

fn build_support(language: Grammar) -> Result<LanguageSupport, String> {
    let grammar = language.tree_sitter_language();
    let query = Query::new(&grammar, &language.query_source())
        .map_err(|error| format!("{language:?} tags query: {error}"))?;
    let roles = query
        .capture_names()
        .iter()
        .map(|name| {
            if let Some(kind) = name.strip_prefix("name.definition.") {
                CaptureRole::DefinitionName(kind.to_string())
            } else if let Some(kind) = name.strip_prefix("name.reference.") {
                CaptureRole::ReferenceName(kind.to_string())
            } else if name.starts_with("definition.") {
                CaptureRole::DefinitionNode
            } else {
                CaptureRole::Other
            }
        })
        .collect();
    Ok(LanguageSupport {
        language: grammar,
        query,
        roles,
    })
}

static SUPPORT: [OnceLock<Result<LanguageSupport, String>>; Grammar::ALL.len()] = [
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
];

pub(super) fn support(language: Grammar) -> Result<&'static LanguageSupport, &'static str> {
    SUPPORT[language.index()]
        .get_or_init(|| build_support(language))
        .as_ref()
        .map_err(|error| error.as_str())
}

/// Checks that the tag query of `language` compiles (the error text if not).
pub fn check_query(language: Grammar) -> Result<(), String> {
    support(language).map(|_| ()).map_err(str::to_string)
}
