//! What a path names: whether a query path names a changed file (a file,
//! or a module by its file or package), whether a file holds tests, and the
//! stem a file is known by.

/// Whether `path` is `suffix` or ends with `/suffix`.
fn ends_with_segment(path: &str, suffix: &str) -> bool {
    path == suffix
        || (path.len() > suffix.len()
            && path.ends_with(suffix)
            && path.as_bytes()[path.len() - suffix.len() - 1] == b'/')
}

/// The file name without its extension.
pub(super) fn strip_extension(path: &str) -> &str {
    let name_start = path.rfind('/').map_or(0, |slash| slash + 1);
    match path[name_start..].rfind('.') {
        Some(dot) if dot > 0 => &path[..name_start + dot],
        _ => path,
    }
}

/// Whether a query path (a file, or a module without extension) names this
/// changed file (normalized, see [`super::query::normalize_path`]).
pub(super) fn path_matches(query_path: &str, file: &str) -> bool {
    let has_extension = query_path
        .rsplit('/')
        .next()
        .is_some_and(|name| name.contains('.'));
    if has_extension {
        return ends_with_segment(file, query_path) || ends_with_segment(query_path, file);
    }
    // A module: its file (`a/b/c.py`) or its package (`a/b/c/__init__.py`,
    // `a/b/c/mod.rs`); a module path names no file inside it.
    let without_extension = strip_extension(file);
    if ends_with_segment(without_extension, query_path) {
        return true;
    }
    let directory = without_extension
        .rsplit_once('/')
        .map_or("", |(dir, _)| dir);
    let name = &without_extension[directory.len()..].trim_start_matches('/');
    matches!(*name, "__init__" | "mod" | "index" | "lib")
        && ends_with_segment(directory, query_path)
}

/// Whether a path is a test file (tests do not make two fixes related).
pub fn is_test_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    lower
        .split('/')
        .any(|part| matches!(part, "test" | "tests" | "testing" | "__tests__" | "spec"))
        || name.starts_with("test_")
        || strip_extension(name).ends_with("_test")
        || strip_extension(name).ends_with("_tests")
        || strip_extension(name).ends_with(".test")
        || strip_extension(name).ends_with(".spec")
        || strip_extension(name).ends_with("test") && path.ends_with(".java")
}

/// The stem a changed file is known by: its name without extension, or
/// for a package's entry file its directory's name.
pub(super) fn file_stem(path: &str) -> Option<String> {
    let without_extension = strip_extension(path);
    let mut parts = without_extension.rsplit('/');
    let name = parts.next()?;
    let stem = if matches!(name, "__init__" | "mod" | "index" | "lib" | "main") {
        parts.next()?
    } else {
        name
    };
    Some(stem.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_files_modules_and_packages() {
        assert!(path_matches(
            "astropy/modeling/separable.py",
            "astropy/modeling/separable.py"
        ));
        assert!(path_matches(
            "testbed/astropy/modeling/separable.py",
            "astropy/modeling/separable.py"
        ));
        assert!(path_matches(
            "modeling/separable.py",
            "astropy/modeling/separable.py"
        ));
        assert!(path_matches(
            "astropy/modeling/separable",
            "astropy/modeling/separable.py"
        ));
        assert!(path_matches(
            "sklearn/linear_model",
            "sklearn/linear_model/__init__.py"
        ));
        assert!(!path_matches(
            "sklearn/linear_model",
            "sklearn/linear_model/_base.py"
        ));
        assert!(!path_matches(
            "separable.py",
            "astropy/modeling/inseparable.py"
        ));
        assert!(is_test_path("tests/test_parser.py"));
        assert!(is_test_path("src/parser_test.go"));
        assert!(!is_test_path("src/testament.rs"));
    }
}
