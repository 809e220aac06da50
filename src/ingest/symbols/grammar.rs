//! Grammars and tag queries: each language's tree-sitter grammar with its
//! query from `grammars/*-tags.scm`, compiled once per process (at start-up
//! by [`crate::ingest::warm_up`], else at first use), and what each capture
//! of the query marks.

use std::sync::OnceLock;

use tree_sitter::{Language, Query};

use super::language::CodeLanguage;

impl CodeLanguage {
    fn tree_sitter_language(self) -> Language {
        match self {
            CodeLanguage::Python => tree_sitter_python::LANGUAGE.into(),
            CodeLanguage::Rust => tree_sitter_rust::LANGUAGE.into(),
            CodeLanguage::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            CodeLanguage::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            CodeLanguage::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            CodeLanguage::Go => tree_sitter_go::LANGUAGE.into(),
            CodeLanguage::Java => tree_sitter_java::LANGUAGE.into(),
            CodeLanguage::C => tree_sitter_c::LANGUAGE.into(),
            CodeLanguage::Cpp => tree_sitter_cpp::LANGUAGE.into(),
        }
    }

    fn query_source(self) -> String {
        const PYTHON: &str = include_str!("../../../grammars/python-tags.scm");
        const RUST: &str = include_str!("../../../grammars/rust-tags.scm");
        const JAVASCRIPT: &str = include_str!("../../../grammars/javascript-tags.scm");
        const TYPESCRIPT: &str = include_str!("../../../grammars/typescript-tags.scm");
        const GO: &str = include_str!("../../../grammars/go-tags.scm");
        const JAVA: &str = include_str!("../../../grammars/java-tags.scm");
        const C: &str = include_str!("../../../grammars/c-tags.scm");
        const CPP: &str = include_str!("../../../grammars/cpp-tags.scm");
        // Patterns after this line of javascript-tags.scm are not valid for TypeScript.
        const JAVASCRIPT_ONLY_MARKER: &str = "; @javascript-only";
        match self {
            CodeLanguage::Python => PYTHON.to_string(),
            CodeLanguage::Rust => RUST.to_string(),
            CodeLanguage::JavaScript => JAVASCRIPT.to_string(),
            CodeLanguage::TypeScript | CodeLanguage::Tsx => {
                let shared = JAVASCRIPT
                    .split(JAVASCRIPT_ONLY_MARKER)
                    .next()
                    .unwrap_or(JAVASCRIPT);
                format!("{shared}\n{TYPESCRIPT}")
            }
            CodeLanguage::Go => GO.to_string(),
            CodeLanguage::Java => JAVA.to_string(),
            CodeLanguage::C => C.to_string(),
            CodeLanguage::Cpp => CPP.to_string(),
        }
    }

    fn index(self) -> usize {
        match self {
            CodeLanguage::Python => 0,
            CodeLanguage::Rust => 1,
            CodeLanguage::JavaScript => 2,
            CodeLanguage::TypeScript => 3,
            CodeLanguage::Tsx => 4,
            CodeLanguage::Go => 5,
            CodeLanguage::Java => 6,
            CodeLanguage::C => 7,
            CodeLanguage::Cpp => 8,
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

fn build_support(language: CodeLanguage) -> Result<LanguageSupport, String> {
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

static SUPPORT: [OnceLock<Result<LanguageSupport, String>>; CodeLanguage::ALL.len()] = [
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

pub(super) fn support(language: CodeLanguage) -> Result<&'static LanguageSupport, &'static str> {
    SUPPORT[language.index()]
        .get_or_init(|| build_support(language))
        .as_ref()
        .map_err(|error| error.as_str())
}

/// Checks that the tag query of `language` compiles (the error text if not).
pub fn check_query(language: CodeLanguage) -> Result<(), String> {
    support(language).map(|_| ()).map_err(str::to_string)
}
