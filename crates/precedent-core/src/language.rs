//! Programming languages: one table, [`DIALECTS`], says for every kind of
//! source file precedent knows which language it is, which file extensions and
//! fenced-block names mark it, which tree-sitter grammar (with its tag query
//! in `crates/precedent-ingest/grammars/`) parses it, which line-scan patterns find its definitions,
//! and which family it belongs to when ranking asks whether two sessions are
//! about the same code base. Every question about a language reads this
//! table; nothing else maps extensions or names.
//!
//! What a grammar or a line-scan family does with a text is left to
//! `ingest::symbols`; how ranking weighs a language to `rank`.

use serde::{Deserialize, Serialize};

/// A programming language, as session records name it (`"python"`, `"cpp"`,
/// `"objective-c"`, ...).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
pub enum Language {
    /// Python.
    #[serde(rename = "python")]
    Python,
    /// Rust.
    #[serde(rename = "rust")]
    Rust,
    /// JavaScript.
    #[serde(rename = "javascript")]
    JavaScript,
    /// TypeScript (TSX included).
    #[serde(rename = "typescript")]
    TypeScript,
    /// Go.
    #[serde(rename = "go")]
    Go,
    /// Java.
    #[serde(rename = "java")]
    Java,
    /// C.
    #[serde(rename = "c")]
    C,
    /// C++.
    #[serde(rename = "cpp")]
    Cpp,
    /// Kotlin.
    #[serde(rename = "kotlin")]
    Kotlin,
    /// Scala.
    #[serde(rename = "scala")]
    Scala,
    /// C#.
    #[serde(rename = "csharp")]
    CSharp,
    /// Ruby.
    #[serde(rename = "ruby")]
    Ruby,
    /// PHP.
    #[serde(rename = "php")]
    Php,
    /// Swift.
    #[serde(rename = "swift")]
    Swift,
    /// Objective-C.
    #[serde(rename = "objective-c")]
    ObjectiveC,
}

/// A tree-sitter grammar precedent parses with; its tag query is
/// `crates/precedent-ingest/grammars/<name>-tags.scm` (TypeScript and TSX share JavaScript's and
/// TypeScript's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grammar {
    /// tree-sitter-python.
    Python,
    /// tree-sitter-rust.
    Rust,
    /// tree-sitter-javascript (JSX included).
    JavaScript,
    /// tree-sitter-typescript's TypeScript.
    TypeScript,
    /// tree-sitter-typescript's TSX.
    Tsx,
    /// tree-sitter-go.
    Go,
    /// tree-sitter-java.
    Java,
    /// tree-sitter-c.
    C,
    /// tree-sitter-cpp.
    Cpp,
}

/// A family of line-scan definition patterns (`ingest::symbols::line_scan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LineScan {
    /// `def`, `class`.
    Python,
    /// `fn`, `struct`, `impl`, ...
    Rust,
    /// `func`, `type`.
    Go,
    /// `function`, `class`, arrow functions, methods.
    JavaScript,
    /// Java, Kotlin, Scala, C#: classes and typed method heads.
    Java,
    /// C, C++, Objective-C: types and function heads.
    C,
}

/// One kind of source file: a row of [`DIALECTS`].
#[derive(Debug)]
pub struct Dialect {
    /// The language files of this kind are in.
    pub language: Language,
    /// Lower-case file extensions, without the dot.
    pub extensions: &'static [&'static str],
    /// Lower-case names of fenced code blocks (the info string's first word).
    pub fence_names: &'static [&'static str],
    /// The grammar tree-sitter parses it with, if any.
    pub grammar: Option<Grammar>,
    /// The line-scan patterns that find its definitions, if any.
    pub line_scan: Option<LineScan>,
    /// The language whose family it belongs to: code bases mix C, C++ and
    /// Objective-C, and JavaScript and TypeScript, freely.
    pub family: Language,
}

/// Every kind of source file precedent knows. An extension or a fence name
/// appears in one row only; a grammar gives one row, the first (`.pxd`,
/// `.ipp` and `.inl` are line-scanned only: tree-sitter's Python grammar does
/// not parse Cython, and the C++ query was only checked on ordinary
/// sources); all rows of one language have the same family.
pub static DIALECTS: [Dialect; 18] = [
    Dialect {
        language: Language::Python,
        extensions: &["py", "pyi", "pyx"],
        fence_names: &["python", "py", "python3", "pycon", "ipython"],
        grammar: Some(Grammar::Python),
        line_scan: Some(LineScan::Python),
        family: Language::Python,
    },
    Dialect {
        language: Language::Python,
        extensions: &["pxd"],
        fence_names: &[],
        grammar: None,
        line_scan: Some(LineScan::Python),
        family: Language::Python,
    },
    Dialect {
        language: Language::Rust,
        extensions: &["rs"],
        fence_names: &["rust", "rs"],
        grammar: Some(Grammar::Rust),
        line_scan: Some(LineScan::Rust),
        family: Language::Rust,
    },
    Dialect {
        language: Language::JavaScript,
        extensions: &["js", "jsx", "mjs", "cjs"],
        fence_names: &["javascript", "js", "jsx", "node", "mjs"],
        grammar: Some(Grammar::JavaScript),
        line_scan: Some(LineScan::JavaScript),
        family: Language::JavaScript,
    },
    Dialect {
        language: Language::TypeScript,
        extensions: &["ts", "mts", "cts"],
        fence_names: &["typescript", "ts"],
        grammar: Some(Grammar::TypeScript),
        line_scan: Some(LineScan::JavaScript),
        family: Language::JavaScript,
    },
    Dialect {
        language: Language::TypeScript,
        extensions: &["tsx"],
        fence_names: &["tsx"],
        grammar: Some(Grammar::Tsx),
        line_scan: Some(LineScan::JavaScript),
        family: Language::JavaScript,
    },
    Dialect {
        language: Language::Go,
        extensions: &["go"],
        fence_names: &["go", "golang"],
        grammar: Some(Grammar::Go),
        line_scan: Some(LineScan::Go),
        family: Language::Go,
    },
    Dialect {
        language: Language::Java,
        extensions: &["java"],
        fence_names: &["java"],
        grammar: Some(Grammar::Java),
        line_scan: Some(LineScan::Java),
        family: Language::Java,
    },
    Dialect {
        // A `.h` header may be C++: `ingest::symbols` tells from its text.
        language: Language::C,
        extensions: &["c", "h"],
        fence_names: &["c", "h"],
        grammar: Some(Grammar::C),
        line_scan: Some(LineScan::C),
        family: Language::C,
    },
    Dialect {
        language: Language::Cpp,
        extensions: &["cc", "cpp", "cxx", "c++", "hpp", "hh", "hxx", "h++"],
        fence_names: &["cpp", "c++", "cc", "cxx", "hpp"],
        grammar: Some(Grammar::Cpp),
        line_scan: Some(LineScan::C),
        family: Language::C,
    },
    Dialect {
        language: Language::Cpp,
        extensions: &["ipp", "inl"],
        fence_names: &[],
        grammar: None,
        line_scan: Some(LineScan::C),
        family: Language::C,
    },
    Dialect {
        language: Language::ObjectiveC,
        extensions: &["m", "mm"],
        fence_names: &[],
        grammar: None,
        line_scan: Some(LineScan::C),
        family: Language::C,
    },
    Dialect {
        language: Language::Kotlin,
        extensions: &["kt", "kts"],
        fence_names: &[],
        grammar: None,
        line_scan: Some(LineScan::Java),
        family: Language::Kotlin,
    },
    Dialect {
        language: Language::Scala,
        extensions: &["scala"],
        fence_names: &[],
        grammar: None,
        line_scan: Some(LineScan::Java),
        family: Language::Scala,
    },
    Dialect {
        language: Language::CSharp,
        extensions: &["cs"],
        fence_names: &[],
        grammar: None,
        line_scan: Some(LineScan::Java),
        family: Language::CSharp,
    },
    Dialect {
        language: Language::Ruby,
        extensions: &["rb"],
        fence_names: &[],
        grammar: None,
        line_scan: None,
        family: Language::Ruby,
    },
    Dialect {
        language: Language::Php,
        extensions: &["php"],
        fence_names: &[],
        grammar: None,
        line_scan: None,
        family: Language::Php,
    },
    Dialect {
        language: Language::Swift,
        extensions: &["swift"],
        fence_names: &[],
        grammar: None,
        line_scan: None,
        family: Language::Swift,
    },
];

impl Dialect {
    /// The row of a file path, by its extension (case-insensitive).
    pub fn of_path(path: &str) -> Option<&'static Dialect> {
        Dialect::of_extension(&extension_of(path)?)
    }

    /// The row whose extensions hold `extension` (lower-case, without the
    /// dot), as written.
    pub fn of_extension(extension: &str) -> Option<&'static Dialect> {
        DIALECTS
            .iter()
            .find(|dialect| dialect.extensions.contains(&extension))
    }

    /// The row of a fenced code block's info string (`python`, `rs`, ...).
    pub fn of_fence_info(info: &str) -> Option<&'static Dialect> {
        let word = info
            .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        DIALECTS
            .iter()
            .find(|dialect| dialect.fence_names.contains(&word.as_str()))
    }
}

impl Language {
    /// Every language, in table order.
    pub const ALL: [Language; 15] = [
        Language::Python,
        Language::Rust,
        Language::JavaScript,
        Language::TypeScript,
        Language::Go,
        Language::Java,
        Language::C,
        Language::Cpp,
        Language::Kotlin,
        Language::Scala,
        Language::CSharp,
        Language::Ruby,
        Language::Php,
        Language::Swift,
        Language::ObjectiveC,
    ];

    /// The name session records give the language (its serde name).
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Rust => "rust",
            Language::JavaScript => "javascript",
            Language::TypeScript => "typescript",
            Language::Go => "go",
            Language::Java => "java",
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::Kotlin => "kotlin",
            Language::Scala => "scala",
            Language::CSharp => "csharp",
            Language::Ruby => "ruby",
            Language::Php => "php",
            Language::Swift => "swift",
            Language::ObjectiveC => "objective-c",
        }
    }

    /// The language a record names (`"cpp"`), if it is one.
    pub fn from_name(name: &str) -> Option<Language> {
        Language::ALL
            .into_iter()
            .find(|language| language.name() == name)
    }

    /// The language of a file path, from its extension; `None` for
    /// non-code files (a `.h` header is C here).
    pub fn from_path(path: &str) -> Option<Language> {
        Dialect::of_path(path).map(|dialect| dialect.language)
    }

    /// The language whose family this one belongs to (C for C++ and
    /// Objective-C, JavaScript for TypeScript, itself for most).
    pub fn family(self) -> Language {
        DIALECTS
            .iter()
            .find(|dialect| dialect.language == self)
            .map_or(self, |dialect| dialect.family)
    }
}

impl Grammar {
    /// Every grammar.
    pub const ALL: [Grammar; 9] = [
        Grammar::Python,
        Grammar::Rust,
        Grammar::JavaScript,
        Grammar::TypeScript,
        Grammar::Tsx,
        Grammar::Go,
        Grammar::Java,
        Grammar::C,
        Grammar::Cpp,
    ];

    /// The grammar of a file path, from its extension (a `.h` header is C;
    /// `ingest::symbols` tells a C++ one from its text).
    pub fn from_path(path: &str) -> Option<Grammar> {
        Dialect::of_path(path)?.grammar
    }

    /// The grammar of a fenced code block's info string (`python`, `rs`, ...).
    pub fn from_fence_info(info: &str) -> Option<Grammar> {
        Dialect::of_fence_info(info)?.grammar
    }

    /// The language this grammar parses.
    pub fn language(self) -> Language {
        DIALECTS
            .iter()
            .find(|dialect| dialect.grammar == Some(self))
            .map_or(Language::C, |dialect| dialect.language)
    }

    /// The line-scan patterns of the language this grammar parses.
    pub fn line_scan(self) -> LineScan {
        DIALECTS
            .iter()
            .find(|dialect| dialect.grammar == Some(self))
            .and_then(|dialect| dialect.line_scan)
            .unwrap_or(LineScan::C)
    }
}

impl LineScan {
    /// The line-scan patterns of a file path, from its extension.
    pub fn from_path(path: &str) -> Option<LineScan> {
        Dialect::of_path(path)?.line_scan
    }
}

/// The longest extension of [`DIALECTS`], in bytes: a longer one names no
/// source file, whatever it is.
pub const MAX_EXTENSION_BYTES: usize = 8;

/// Whether `extension` (lower-case, without the dot) marks a kind of source
/// file, as written: `PY` is not one.
pub fn is_source_extension(extension: &str) -> bool {
    Dialect::of_extension(extension).is_some()
}

/// Lower-cased extension of the last path component, if any.
fn extension_of(path: &str) -> Option<String> {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let (stem, extension) = name.rsplit_once('.')?;
    if stem.is_empty() || extension.is_empty() || extension.len() > MAX_EXTENSION_BYTES {
        return None;
    }
    Some(extension.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_extension_fits_the_longest() {
        for dialect in &DIALECTS {
            for extension in dialect.extensions {
                assert!(
                    (1..=MAX_EXTENSION_BYTES).contains(&extension.len()),
                    "{extension}"
                );
                assert!(is_source_extension(extension));
            }
        }
    }

    #[test]
    fn names_are_the_serde_names_and_round_trip() {
        for language in Language::ALL {
            let json = serde_json::to_string(&language).expect("serializes");
            assert_eq!(json, format!("\"{}\"", language.name()));
            let back: Language = serde_json::from_str(&json).expect("deserializes");
            assert_eq!(back, language);
            assert_eq!(Language::from_name(language.name()), Some(language));
        }
        assert_eq!(Language::from_name("cobol"), None);
    }

    #[test]
    fn the_table_is_consistent() {
        let mut extensions = HashSet::new();
        let mut fences = HashSet::new();
        for dialect in &DIALECTS {
            for extension in dialect.extensions {
                assert!(extensions.insert(*extension), "{extension} twice");
                assert_eq!(*extension, extension.to_ascii_lowercase());
            }
            for fence in dialect.fence_names {
                assert!(fences.insert(*fence), "{fence} twice");
            }
            assert_eq!(dialect.family, dialect.language.family());
            if let Some(grammar) = dialect.grammar {
                assert_eq!(grammar.language(), dialect.language);
                assert_eq!(Some(grammar.line_scan()), dialect.line_scan);
            }
        }
        for language in Language::ALL {
            assert!(
                DIALECTS.iter().any(|dialect| dialect.language == language),
                "{language:?} has no row"
            );
        }
        for grammar in Grammar::ALL {
            let rows = DIALECTS
                .iter()
                .filter(|dialect| dialect.grammar == Some(grammar))
                .count();
            assert_eq!(rows, 1, "{grammar:?}");
        }
    }

    #[test]
    fn paths_and_fences_map_to_languages() {
        let cases = [
            ("a/b.py", Some(Language::Python), Some(Grammar::Python)),
            ("a/b.PYX", Some(Language::Python), Some(Grammar::Python)),
            ("a/b.pxd", Some(Language::Python), None),
            ("x.tsx", Some(Language::TypeScript), Some(Grammar::Tsx)),
            (
                "x.mts",
                Some(Language::TypeScript),
                Some(Grammar::TypeScript),
            ),
            ("x.h", Some(Language::C), Some(Grammar::C)),
            ("x.c++", Some(Language::Cpp), Some(Grammar::Cpp)),
            ("x.h++", Some(Language::Cpp), Some(Grammar::Cpp)),
            ("x.inl", Some(Language::Cpp), None),
            ("x.mm", Some(Language::ObjectiveC), None),
            ("x.kts", Some(Language::Kotlin), None),
            ("README.md", None, None),
            (".py", None, None),
            ("Makefile", None, None),
        ];
        for (path, language, grammar) in cases {
            assert_eq!(Language::from_path(path), language, "{path}");
            assert_eq!(Grammar::from_path(path), grammar, "{path}");
        }
        assert_eq!(
            Grammar::from_fence_info("Python {linenos}"),
            Some(Grammar::Python)
        );
        assert_eq!(Grammar::from_fence_info("c++"), Some(Grammar::Cpp));
        assert_eq!(Grammar::from_fence_info("text"), None);
        assert_eq!(LineScan::from_path("x.scala"), Some(LineScan::Java));
        assert_eq!(LineScan::from_path("x.rb"), None);
    }

    #[test]
    fn families_group_languages_that_share_code_bases() {
        assert_eq!(Language::Cpp.family(), Language::C);
        assert_eq!(Language::ObjectiveC.family(), Language::C);
        assert_eq!(Language::TypeScript.family(), Language::JavaScript);
        assert_eq!(Language::Kotlin.family(), Language::Kotlin);
        assert_ne!(Language::Java.family(), Language::Kotlin.family());
    }
}
