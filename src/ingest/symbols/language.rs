//! Which language a file path or fenced code block is, and telling a `.h`
//! header's C++ from C.

use super::line_scan::Family;
use super::{MAX_C_FAMILY_PARSE_BYTES, MAX_PARSE_BYTES};

/// A language tree-sitter can parse here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeLanguage {
    /// Python (`.py`, `.pyi`, `.pyx`).
    Python,
    /// Rust (`.rs`).
    Rust,
    /// JavaScript (`.js`, `.jsx`, `.mjs`, `.cjs`).
    JavaScript,
    /// TypeScript (`.ts`, `.mts`, `.cts`).
    TypeScript,
    /// TypeScript with JSX (`.tsx`).
    Tsx,
    /// Go (`.go`).
    Go,
    /// Java (`.java`).
    Java,
    /// C (`.c`; `.h` unless it looks like C++).
    C,
    /// C++ (`.cc`, `.cpp`, `.cxx`, `.hpp`, `.hh`, `.hxx`).
    Cpp,
}

impl CodeLanguage {
    /// The largest text parsed with this language's grammar.
    pub fn max_parse_bytes(self) -> usize {
        match self {
            CodeLanguage::C | CodeLanguage::Cpp => MAX_C_FAMILY_PARSE_BYTES,
            _ => MAX_PARSE_BYTES,
        }
    }
    /// Every supported language.
    pub const ALL: [CodeLanguage; 9] = [
        CodeLanguage::Python,
        CodeLanguage::Rust,
        CodeLanguage::JavaScript,
        CodeLanguage::TypeScript,
        CodeLanguage::Tsx,
        CodeLanguage::Go,
        CodeLanguage::Java,
        CodeLanguage::C,
        CodeLanguage::Cpp,
    ];

    /// The language of a file path, from its extension (a `.h` header is C;
    /// see [`CodeLanguage::from_path_and_text`]).
    pub fn from_path(path: &str) -> Option<CodeLanguage> {
        match extension_of(path)?.as_str() {
            "py" | "pyi" | "pyx" => Some(CodeLanguage::Python),
            "rs" => Some(CodeLanguage::Rust),
            "js" | "jsx" | "mjs" | "cjs" => Some(CodeLanguage::JavaScript),
            "ts" | "mts" | "cts" => Some(CodeLanguage::TypeScript),
            "tsx" => Some(CodeLanguage::Tsx),
            "go" => Some(CodeLanguage::Go),
            "java" => Some(CodeLanguage::Java),
            "c" | "h" => Some(CodeLanguage::C),
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => Some(CodeLanguage::Cpp),
            _ => None,
        }
    }

    /// The language of a file path whose text (a diff hunk, a file view) is
    /// known: a `.h` header is C++ when the text looks like C++
    /// ([`looks_like_cpp`], or a line, git's hunk context included, opens a
    /// `class`), else as [`CodeLanguage::from_path`].
    pub fn from_path_and_text(path: &str, text: &str) -> Option<CodeLanguage> {
        let language = CodeLanguage::from_path(path)?;
        if language == CodeLanguage::C
            && extension_of(path).as_deref() == Some("h")
            && (looks_like_cpp(text) || opens_class(text))
        {
            return Some(CodeLanguage::Cpp);
        }
        Some(language)
    }

    /// The language of a fenced code block's info string (`python`, `rs`, ...).
    pub fn from_fence_info(info: &str) -> Option<CodeLanguage> {
        let word = info
            .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        match word.as_str() {
            "python" | "py" | "python3" | "pycon" | "ipython" => Some(CodeLanguage::Python),
            "rust" | "rs" => Some(CodeLanguage::Rust),
            "javascript" | "js" | "jsx" | "node" | "mjs" => Some(CodeLanguage::JavaScript),
            "typescript" | "ts" => Some(CodeLanguage::TypeScript),
            "tsx" => Some(CodeLanguage::Tsx),
            "go" | "golang" => Some(CodeLanguage::Go),
            "java" => Some(CodeLanguage::Java),
            "c" | "h" => Some(CodeLanguage::C),
            "cpp" | "c++" | "cc" | "cxx" | "hpp" => Some(CodeLanguage::Cpp),
            _ => None,
        }
    }

    /// Separator between a container and a member in qualified names.
    pub fn separator(self) -> &'static str {
        match self {
            CodeLanguage::Rust | CodeLanguage::C | CodeLanguage::Cpp => "::",
            _ => ".",
        }
    }

    pub(super) fn family(self) -> Family {
        match self {
            CodeLanguage::Python => Family::Python,
            CodeLanguage::Rust => Family::Rust,
            CodeLanguage::JavaScript | CodeLanguage::TypeScript | CodeLanguage::Tsx => {
                Family::JavaScript
            }
            CodeLanguage::Go => Family::Go,
            CodeLanguage::Java => Family::Java,
            CodeLanguage::C | CodeLanguage::Cpp => Family::C,
        }
    }
}

/// Lower-cased extension of the last path component, if any.
pub(super) fn extension_of(path: &str) -> Option<String> {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let (stem, extension) = name.rsplit_once('.')?;
    if stem.is_empty() || extension.is_empty() || extension.len() > 8 {
        return None;
    }
    Some(extension.to_ascii_lowercase())
}

/// The language name (`python`, `rust`, `cpp`, ...) of a file path, for the
/// session's dominant language; `None` for non-code files.
pub fn language_name_for_path(path: &str) -> Option<&'static str> {
    let name = match extension_of(path)?.as_str() {
        "py" | "pyi" | "pyx" | "pxd" => "python",
        "rs" => "rust",
        "js" | "jsx" | "mjs" | "cjs" => "javascript",
        "ts" | "tsx" | "mts" | "cts" => "typescript",
        "go" => "go",
        "java" => "java",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" | "ipp" | "inl" | "c++" | "h++" => "cpp",
        "kt" | "kts" => "kotlin",
        "scala" => "scala",
        "cs" => "csharp",
        "rb" => "ruby",
        "php" => "php",
        "swift" => "swift",
        "m" | "mm" => "objective-c",
        _ => return None,
    };
    Some(name)
}

/// Whether C-family text (a `.h` header's diff) shows C++ constructs.
pub fn looks_like_cpp(text: &str) -> bool {
    const MARKERS: &[&str] = &[
        "::",
        "template <",
        "template<",
        "namespace ",
        "public:",
        "private:",
        "constexpr ",
        "nullptr",
        "std::",
    ];
    let sample = crate::ingest::text::truncate_to_bytes(text, 64 * 1024);
    MARKERS.iter().any(|marker| sample.contains(marker))
}

/// Whether a line of `text` (diff markers, indentation and a hunk's `@@ ... @@`
/// prefix aside) starts with `class ` (C has no such keyword).
pub(super) fn opens_class(text: &str) -> bool {
    let sample = crate::ingest::text::truncate_to_bytes(text, 64 * 1024);
    sample.lines().any(|line| {
        let line = match line.strip_prefix("@@") {
            Some(rest) => rest.split_once("@@").map_or("", |(_, context)| context),
            None => line,
        };
        line.trim_start_matches(['+', '-', ' ', '\t'])
            .starts_with("class ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_family_paths_map_to_languages() {
        let cases = [
            ("src/a.c", "", Some(CodeLanguage::C)),
            ("include/a.h", "int x;\n", Some(CodeLanguage::C)),
            ("include/a.h", "std::string s;\n", Some(CodeLanguage::Cpp)),
            (
                "include/a.h",
                "@@ -1 +1 @@ class A {\n",
                Some(CodeLanguage::Cpp),
            ),
            ("src/a.cc", "", Some(CodeLanguage::Cpp)),
            ("src/a.cpp", "", Some(CodeLanguage::Cpp)),
            ("src/a.cxx", "", Some(CodeLanguage::Cpp)),
            ("src/a.hpp", "", Some(CodeLanguage::Cpp)),
            ("src/a.hh", "", Some(CodeLanguage::Cpp)),
            ("src/a.hxx", "", Some(CodeLanguage::Cpp)),
            ("src/a.ipp", "", None),
        ];
        for (path, text, expected) in cases {
            assert_eq!(
                CodeLanguage::from_path_and_text(path, text),
                expected,
                "{path}"
            );
        }
        assert_eq!(Family::from_path("src/a.cpp"), Some(Family::C));
        assert_eq!(Family::from_path("src/a.ipp"), Some(Family::C));
    }

    #[test]
    fn cpp_headers_are_told_from_c() {
        assert!(looks_like_cpp(
            "@@ -1 +1 @@\n-  FMT_CONSTEXPR void on_zero() {\n+  specs_.fill[0] = Char('0');\n   detail::x();\n"
        ));
        assert!(!looks_like_cpp("@@ -1 +1 @@\n-int x = 1;\n+int x = 2;\n"));
    }
}
