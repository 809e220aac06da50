//! The architecture's boundaries, checked on the source: extraction
//! (`ingest`), ranking (`rank`) and their helpers are pure, so they name no
//! store, index, service, HTTP or IO module of the crate and import no crate
//! that does IO. A module boundary inside one crate is otherwise only a
//! convention; this makes it a failing test.

use std::path::{Path, PathBuf};

/// The pure parts of the crate.
const PURE: &[&str] = &[
    "src/ingest",
    "src/rank",
    "src/language.rs",
    "src/tokenize.rs",
    "src/tool",
    "src/redact.rs",
];

/// Modules of the crate that hold IO or state.
const STATEFUL_MODULES: &[&str] = &[
    "api", "bench", "cli", "client", "hooks", "import", "index", "mcp", "metrics", "read",
    "service", "store",
];

/// Crates and std modules that do IO.
const IO_CRATES: &[&str] = &[
    "axum",
    "git2",
    "hyper",
    "rusqlite",
    "std::fs",
    "std::net",
    "std::process",
    "tantivy",
    "tokio",
    "ureq",
];

fn rust_files(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .expect("read source directory")
            .map(|entry| entry.expect("directory entry").path())
            .collect();
        entries.sort();
        for entry in entries {
            rust_files(&entry, files);
        }
    } else if path.extension().is_some_and(|extension| extension == "rs") {
        files.push(path.to_path_buf());
    }
}

/// What a source line breaks, if anything.
fn violation(line: &str) -> Option<String> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return None;
    }
    for module in STATEFUL_MODULES {
        for form in [format!("crate::{module}::"), format!("crate::{module};")] {
            if code.contains(&form) {
                return Some(format!("names crate::{module}"));
            }
        }
    }
    let imported = code
        .strip_prefix("use ")
        .or_else(|| code.strip_prefix("pub use "))
        .or_else(|| code.strip_prefix("pub(crate) use "))?;
    IO_CRATES
        .iter()
        .find(|name| {
            imported.starts_with(&format!("{name}::")) || imported.starts_with(&format!("{name};"))
        })
        .map(|name| format!("imports {name}"))
}

#[test]
fn extraction_and_ranking_do_no_io_and_name_no_stateful_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for part in PURE {
        rust_files(&root.join(part), &mut files);
    }
    assert!(
        files.len() > 20,
        "the pure modules are where this test looks"
    );
    let mut violations = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read source file");
        for (number, line) in text.lines().enumerate() {
            if let Some(problem) = violation(line) {
                violations.push(format!(
                    "{}:{}: {problem}",
                    file.strip_prefix(root).unwrap_or(file).display(),
                    number + 1
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "boundaries broken:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_check_catches_what_it_looks_for() {
    assert!(violation("use crate::store::{self, StoreError};").is_some());
    assert!(violation("    let conn = crate::index::open(dir);").is_some());
    assert!(violation("use std::fs::File;").is_some());
    assert!(violation("use tantivy::Index;").is_some());
    assert!(violation("// crate::store:: in a comment").is_none());
    assert!(violation("use crate::language::Language;").is_none());
    assert!(violation("    \"tokio::sync::Mutex\",").is_none());
}
