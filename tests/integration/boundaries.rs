//! The architecture's boundaries, checked on the source: extraction
//! (`ingest`), ranking (`rank`) and their helpers are pure, so they name no
//! store, index, service, HTTP or IO module of the crate and use no crate
//! that does IO. A module boundary inside one crate is otherwise only a
//! convention; this makes it a failing test.
//!
//! The source is parsed (`syn`), not matched as text: every `use` (grouped,
//! renamed, `self::`, `super::` or `crate::`, at any depth) and every path
//! in code, types, attributes and comma-separated macro arguments is
//! resolved against the module it is written in, so `use super::store::X`
//! in `rank` and `use crate::{store, ...}` are both seen.

use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};

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

/// The module a source file is, as segments after `crate`
/// (`src/ingest/symbols/mod.rs` -> `ingest::symbols`).
fn module_of(relative: &Path) -> Vec<String> {
    let mut segments: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|component| component.as_os_str().to_string_lossy().to_string())
        .collect();
    if segments.first().is_some_and(|first| first == "src") {
        segments.remove(0);
    }
    if segments
        .last()
        .is_some_and(|last| last == "mod" || last == "lib" || last == "main")
    {
        segments.pop();
    }
    segments
}

/// Walks one file's syntax tree, knowing which module it is in.
struct Checker {
    /// The module being walked (inline `mod` blocks included).
    module: Vec<String>,
    /// What breaks the boundary, one line each.
    violations: Vec<String>,
    /// Inside a `#[cfg(test)]` module: tests may time themselves.
    in_test: bool,
}

/// Clocks a pure module must be given, not read: `Type::now`.
const CLOCKS: &[&str] = &["Instant", "SystemTime"];

impl Checker {
    /// Checks a path as written (`leading_colon` for `::name`).
    fn check(&mut self, leading_colon: bool, segments: &[String]) {
        let written = format!(
            "{}{}",
            if leading_colon { "::" } else { "" },
            segments.join("::")
        );
        if let Some(problem) = problem(&self.module, leading_colon, segments) {
            self.violations.push(format!("{problem} ({written})"));
        }
        let reads_clock = match segments {
            [.., clock, now] => now == "now" && CLOCKS.contains(&clock.as_str()),
            _ => false,
        };
        if reads_clock && !self.in_test {
            self.violations
                .push(format!("reads the clock ({written}): take a Clock"));
        }
    }

    /// Checks every path a `use` tree names.
    fn use_tree(&mut self, leading_colon: bool, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(leading_colon, prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => self.use_leaf(leading_colon, prefix, &name.ident),
            syn::UseTree::Rename(rename) => self.use_leaf(leading_colon, prefix, &rename.ident),
            syn::UseTree::Glob(_) => self.check(leading_colon, prefix),
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    self.use_tree(leading_colon, prefix, item);
                }
            }
        }
    }

    /// `prefix::ident`, or `prefix` itself for `prefix::{self}`.
    fn use_leaf(&mut self, leading_colon: bool, prefix: &[String], ident: &syn::Ident) {
        let mut path = prefix.to_vec();
        if ident != "self" {
            path.push(ident.to_string());
        }
        self.check(leading_colon, &path);
    }
}

impl<'ast> Visit<'ast> for Checker {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let was_test = self.in_test;
        self.in_test |= item.attrs.iter().any(|attr| {
            attr.path().is_ident("cfg")
                && attr
                    .parse_args::<syn::Ident>()
                    .is_ok_and(|ident| ident == "test")
        });
        self.module.push(item.ident.to_string());
        visit::visit_item_mod(self, item);
        self.module.pop();
        self.in_test = was_test;
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(item.leading_colon.is_some(), &mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string())
            .collect();
        self.check(path.leading_colon.is_some(), &segments);
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Macro bodies are tokens to syn; those of the comma-separated
        // kind (`format!`, `assert!`, `vec!`, ...) are read as expressions.
        let body = mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated);
        if let Ok(expressions) = body {
            for expression in &expressions {
                self.visit_expr(expression);
            }
        }
        visit::visit_macro(self, mac);
    }
}

/// The path after `crate` that `segments`, written in `module`, names when
/// it starts at `crate`, `self` or `super`; `None` for any other start.
fn resolve(module: &[String], segments: &[String]) -> Option<Vec<String>> {
    let mut resolved = match segments.first()?.as_str() {
        "crate" => Vec::new(),
        "self" | "super" => module.to_vec(),
        _ => return None,
    };
    let mut rest = segments.iter().skip(usize::from(segments[0] == "crate"));
    for segment in rest.by_ref() {
        match segment.as_str() {
            "self" => {}
            // Above the crate root is not a module of the crate.
            "super" => {
                resolved.pop()?;
            }
            _ => {
                resolved.push(segment.clone());
                break;
            }
        }
    }
    resolved.extend(rest.cloned());
    Some(resolved)
}

/// What a path written in `module` breaks, if anything.
fn problem(module: &[String], leading_colon: bool, segments: &[String]) -> Option<String> {
    let local = (!leading_colon)
        .then(|| resolve(module, segments))
        .flatten();
    match local {
        Some(local) => {
            let named = local.first()?;
            STATEFUL_MODULES
                .contains(&named.as_str())
                .then(|| format!("names crate::{named}"))
        }
        // `name::...` without an anchor is an external crate, or an item
        // of this module (which is not a stateful module of the crate).
        None => IO_CRATES
            .iter()
            .find(|name| {
                let io: Vec<&str> = name.split("::").collect();
                segments.len() >= io.len() && segments.iter().zip(&io).all(|(a, b)| a == b)
            })
            .map(|name| format!("uses {name}")),
    }
}

/// What the source of `module` breaks, one line each.
fn violations(module: Vec<String>, source: &str) -> Vec<String> {
    let file = syn::parse_file(source).expect("the source parses");
    let mut checker = Checker {
        module,
        violations: Vec::new(),
        in_test: false,
    };
    checker.visit_file(&file);
    checker.violations
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
    let mut broken = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(root).unwrap_or(file);
        let text = std::fs::read_to_string(file).expect("read source file");
        for problem in violations(module_of(relative), &text) {
            broken.push(format!("{}: {problem}", relative.display()));
        }
    }
    assert!(
        broken.is_empty(),
        "boundaries broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_check_catches_what_it_looks_for() {
    let module = |path: &str| -> Vec<String> { path.split("::").map(String::from).collect() };
    let caught = |in_module: &str, source: &str| !violations(module(in_module), source).is_empty();
    // Each form of naming a stateful module, or using an IO crate.
    assert!(caught("rank", "use crate::store::{self, StoreError};"));
    assert!(caught("rank", "use super::store::StoredSession;"));
    assert!(caught("ingest::symbols", "use super::super::index::Index;"));
    assert!(caught("rank", "use self::super::store;"));
    assert!(caught("rank", "use crate::{language, store};"));
    assert!(caught(
        "rank",
        "use crate::{language::Language, service::{Service}};"
    ));
    assert!(caught("rank::weight", "use super::super::{read};"));
    assert!(caught(
        "rank",
        "fn f() { let conn = crate::index::open(dir); }"
    ));
    assert!(caught("rank", "fn f() -> crate::store::Conn { todo!() }"));
    assert!(caught(
        "rank",
        "fn f() { format!(\"{}\", crate::store::NAME); }"
    ));
    assert!(caught("rank", "mod inner { use super::super::store; }"));
    assert!(caught("rank", "use std::fs::File;"));
    assert!(caught("rank", "use std::{fs, io};"));
    assert!(caught("rank", "use ::tokio::sync::Mutex;"));
    assert!(caught("rank", "use tantivy::Index;"));
    assert!(caught("rank", "fn f() { let _ = std::fs::read(\"x\"); }"));
    // What it must leave alone.
    assert!(!caught("rank", "// crate::store:: in a comment\nfn f() {}"));
    assert!(!caught("rank", "use crate::language::Language;"));
    assert!(!caught(
        "rank",
        "const NAMES: &[&str] = &[\"tokio::sync::Mutex\"];"
    ));
    assert!(!caught("ingest::edits", "use super::store::Edit;"));
    assert!(!caught("rank", "use std::io::Read;"));
    assert!(caught(
        "rank",
        "fn f() { let _ = std::time::Instant::now(); }"
    ));
    assert!(caught(
        "ingest",
        "fn f() { let _ = Clock::Wall(Instant::now); }"
    ));
    assert!(caught("rank", "fn f() { let _ = SystemTime::now(); }"));
    assert!(!caught(
        "rank",
        "#[cfg(test)]\nmod tests { fn f() { let _ = Instant::now(); } }"
    ));
    assert!(!caught(
        "rank",
        "fn f(clock: Clock) { let _ = clock.now(); }"
    ));
    assert_eq!(
        module_of(Path::new("src/ingest/symbols/mod.rs")),
        module("ingest::symbols")
    );
    assert_eq!(module_of(Path::new("src/language.rs")), module("language"));
    assert_eq!(
        resolve(&module("ingest::symbols"), &module("super::super::rank::x")),
        Some(module("rank::x"))
    );
}
