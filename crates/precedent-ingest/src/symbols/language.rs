//! Telling a `.h` header's C++ from C: the language table
//! ([`precedent_core::language`]) says a `.h` file is C; its text may say C++.

use precedent_core::language::Grammar;

/// The grammar of a file path whose text (a diff hunk, a file view) is
/// known: a `.h` header is C++ when the text looks like C++
/// ([`looks_like_cpp`], or a line, git's hunk context included, opens a
/// `class`), else as [`Grammar::from_path`].
pub(super) fn grammar_of_path_and_text(path: &str, text: &str) -> Option<Grammar> {
    let grammar = Grammar::from_path(path)?;
    if grammar == Grammar::C && is_header(path) && (looks_like_cpp(text) || opens_class(text)) {
        return Some(Grammar::Cpp);
    }
    Some(grammar)
}

/// Whether `path` names a `.h` header (any case).
fn is_header(path: &str) -> bool {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    name.rsplit_once('.')
        .is_some_and(|(stem, extension)| !stem.is_empty() && extension.eq_ignore_ascii_case("h"))
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
    let sample = crate::text::truncate_to_bytes(text, 64 * 1024);
    MARKERS.iter().any(|marker| sample.contains(marker))
}

/// Whether a line of `text` (diff markers, indentation and a hunk's `@@ ... @@`
/// prefix aside) starts with `class ` (C has no such keyword).
pub(super) fn opens_class(text: &str) -> bool {
    let sample = crate::text::truncate_to_bytes(text, 64 * 1024);
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
    use precedent_core::language::LineScan;

    #[test]
    fn c_family_paths_map_to_languages() {
        let cases = [
            ("src/a.c", "", Some(Grammar::C)),
            ("include/a.h", "int x;\n", Some(Grammar::C)),
            ("include/a.h", "std::string s;\n", Some(Grammar::Cpp)),
            ("include/a.h", "@@ -1 +1 @@ class A {\n", Some(Grammar::Cpp)),
            ("src/a.cc", "", Some(Grammar::Cpp)),
            ("src/a.cpp", "", Some(Grammar::Cpp)),
            ("src/a.cxx", "", Some(Grammar::Cpp)),
            ("src/a.hpp", "", Some(Grammar::Cpp)),
            ("src/a.hh", "", Some(Grammar::Cpp)),
            ("src/a.hxx", "", Some(Grammar::Cpp)),
            ("src/a.ipp", "", None),
        ];
        for (path, text, expected) in cases {
            assert_eq!(grammar_of_path_and_text(path, text), expected, "{path}");
        }
        assert_eq!(LineScan::from_path("src/a.cpp"), Some(LineScan::C));
        assert_eq!(LineScan::from_path("src/a.ipp"), Some(LineScan::C));
    }

    #[test]
    fn cpp_headers_are_told_from_c() {
        assert!(looks_like_cpp(
            "@@ -1 +1 @@\n-  FMT_CONSTEXPR void on_zero() {\n+  specs_.fill[0] = Char('0');\n   detail::x();\n"
        ));
        assert!(!looks_like_cpp("@@ -1 +1 @@\n-int x = 1;\n+int x = 2;\n"));
    }
}
