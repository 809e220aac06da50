//! The architecture's boundaries that crates cannot express, checked on
//! the source. Which crate may use which is each crate's manifest: a
//! dependency the map forbids does not compile (ARCHITECTURE.md, "Code
//! map"); the first test holds the manifests to that map. What is left is
//! finer than a crate:
//!
//! - extraction (`precedent-ingest`), ranking (`precedent-rank`) and the
//!   pure modules of `precedent-core` do no IO through `std` (files,
//!   sockets, processes) and read no clock: they are given a `Clock`;
//! - the pure modules of `precedent-core` name none of its IO modules
//!   (`files`, `time`);
//! - the read side (`precedent-service`'s `read`) names only the store's
//!   and the index's reading API: read writes nothing.
//!
//! The source is parsed (`syn`), not matched as text: every `use` (grouped,
//! renamed, `self::`, `super::` or `crate::`, at any depth) and every path
//! in code, types, attributes and comma-separated macro arguments is
//! resolved against the module it is written in, so `use super::files::X`
//! and `use crate::{files, ...}` are both seen.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};

/// The pure parts of the workspace, each with the folder of its crate's
/// `src` (module paths are resolved from there).
const PURE: &[(&str, &str)] = &[
    ("crates/precedent-ingest/src", ""),
    ("crates/precedent-rank/src", ""),
    ("crates/precedent-core/src", "language.rs"),
    ("crates/precedent-core/src", "tokenize.rs"),
    ("crates/precedent-core/src", "tool"),
    ("crates/precedent-core/src", "redact.rs"),
];

/// Modules of `precedent-core` that hold IO or read the clock.
const STATEFUL_MODULES: &[&str] = &["files", "time"];

/// What in `std` (and the one IO crate the pure crates' manifests allow a
/// crate beside them) does IO.
const IO_CRATES: &[&str] = &["std::fs", "std::net", "std::process", "tempfile"];

/// The crates of the workspace, each with the crates of the workspace it
/// may depend on: the map of ARCHITECTURE.md.
const MAP: &[(&str, &[&str])] = &[
    ("precedent-core", &[]),
    ("precedent-ingest", &["precedent-core"]),
    ("precedent-rank", &["precedent-core", "precedent-ingest"]),
    ("precedent-store", &["precedent-core"]),
    ("precedent-index", &["precedent-core", "precedent-store"]),
    (
        "precedent-service",
        &[
            "precedent-core",
            "precedent-ingest",
            "precedent-rank",
            "precedent-store",
            "precedent-index",
        ],
    ),
];

/// Crates that do IO, which no pure crate may list.
const IO_DEPENDENCIES: &[&str] = &[
    "axum", "git2", "hyper", "postgres", "rusqlite", "tantivy", "tempfile", "tokio", "ureq",
];

/// What the read side may name of the store and the index: their reading
/// API. A write function added here is a decision a reviewer sees.
const READ_API: &[&str] = &[
    // precedent-store
    "ListCursor",
    "ReaderPool",
    "StoreConn",
    "StoreError",
    "StoreLocation",
    "StoredMessage",
    "StoredSession",
    "StoredUser",
    "messages_of_add_in",
    "session",
    "session_first_source",
    "session_message_sources",
    "session_messages_page",
    "sessions_of_user",
    "user_deletion_pending",
    "users",
    // precedent-index
    "DocKey",
    "IndexError",
    "PartHit",
    "SearchIndex",
    "open_read_only",
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
    /// Every path named outside tests, as written.
    named: Vec<Vec<String>>,
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
        if !self.in_test {
            self.named.push(segments.to_vec());
        }
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

/// The walk of one file's source, as the module `module`.
fn walk(module: Vec<String>, source: &str) -> Checker {
    let file = syn::parse_file(source).expect("the source parses");
    let mut checker = Checker {
        module,
        violations: Vec::new(),
        in_test: false,
        named: Vec::new(),
    };
    checker.visit_file(&file);
    checker
}

/// What the source of `module` breaks, one line each.
fn violations(module: Vec<String>, source: &str) -> Vec<String> {
    walk(module, source).violations
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn extraction_and_ranking_do_no_io_and_read_no_clock() {
    let root = workspace_root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for (src, part) in PURE {
        let src = root.join(src);
        let mut files = Vec::new();
        rust_files(&src.join(part), &mut files);
        for file in &files {
            let relative = file.strip_prefix(&src).unwrap_or(file);
            let text = std::fs::read_to_string(file).expect("read source file");
            for problem in violations(module_of(relative), &text) {
                broken.push(format!("{}: {problem}", file.display()));
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "the pure crates are where this test looks");
    assert!(
        broken.is_empty(),
        "boundaries broken:\n{}",
        broken.join("\n")
    );
}

/// Every dependency a manifest's `[dependencies]` lists.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut listed = Vec::new();
    let mut in_dependencies = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if in_dependencies && !line.is_empty() && !line.starts_with('#') {
            let name = line
                .split(['=', '.', ' '])
                .next()
                .expect("a dependency line names a crate");
            listed.push(name.to_string());
        }
    }
    listed
}

#[test]
fn each_crate_depends_on_what_the_map_allows_and_the_map_is_documented() {
    let root = workspace_root();
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    for (name, allowed) in MAP {
        let manifest = std::fs::read_to_string(root.join("crates").join(name).join("Cargo.toml"))
            .expect("read a crate's manifest");
        let listed = dependencies(&manifest);
        let mut internal: Vec<&str> = listed
            .iter()
            .map(String::as_str)
            .filter(|dependency| dependency.starts_with("precedent"))
            .collect();
        internal.sort_unstable();
        let mut expected = allowed.to_vec();
        expected.sort_unstable();
        assert_eq!(internal, expected, "{name}'s crates of the workspace");
        if matches!(*name, "precedent-ingest" | "precedent-rank") {
            let io: Vec<&String> = listed
                .iter()
                .filter(|dependency| IO_DEPENDENCIES.contains(&dependency.as_str()))
                .collect();
            assert!(io.is_empty(), "{name} is pure but lists {io:?}");
        }
        assert!(
            architecture.contains(&format!("`{name}`")),
            "ARCHITECTURE.md's code map names {name}"
        );
    }
}

#[test]
fn the_read_side_names_only_the_reading_api_of_the_store_and_the_index() {
    let root = workspace_root();
    let src = root.join("crates/precedent-service/src");
    let mut files = Vec::new();
    rust_files(&src.join("read"), &mut files);
    assert!(files.len() >= 3, "the read side is where this test looks");
    let mut broken = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap_or(file);
        let text = std::fs::read_to_string(file).expect("read source file");
        for problem in writes_named(module_of(relative), &text) {
            broken.push(format!("{}: {problem}", file.display()));
        }
    }
    assert!(
        broken.is_empty(),
        "the read side names what writes:\n{}",
        broken.join("\n")
    );
}

/// What `source`, the module `module` of `precedent-service`, names
/// outside its tests of the writer's modules, and of the store's and the
/// index's items outside [`READ_API`].
fn writes_named(module: Vec<String>, source: &str) -> Vec<String> {
    let named = walk(module.clone(), source).named;
    let mut found = BTreeMap::new();
    for path in named {
        // Of its own crate, the read side names only itself and `metrics`,
        // never the writer's modules.
        let own = resolve(&module, &path);
        if let Some(first) = own.as_ref().and_then(|own| own.first())
            && !matches!(first.as_str(), "read" | "metrics")
        {
            found.insert(path.join("::"), ());
        }
        let [first, item, ..] = path.as_slice() else {
            continue;
        };
        let of_store_or_index = matches!(
            first.as_str(),
            "store" | "index" | "precedent_store" | "precedent_index"
        );
        if of_store_or_index && item != "self" && !READ_API.contains(&item.as_str()) {
            found.insert(path.join("::"), ());
        }
    }
    found.into_keys().collect()
}

#[test]
fn the_check_catches_what_it_looks_for() {
    let module = |path: &str| -> Vec<String> { path.split("::").map(String::from).collect() };
    let caught = |in_module: &str, source: &str| !violations(module(in_module), source).is_empty();
    // Each form of naming a stateful module, or using an IO crate.
    assert!(caught("rank", "use crate::files::{self, WriteError};"));
    assert!(caught("rank", "use super::files::private_dir;"));
    assert!(caught("ingest::symbols", "use super::super::time::now_ms;"));
    assert!(caught("rank", "use self::super::files;"));
    assert!(caught("rank", "use crate::{language, files};"));
    assert!(caught(
        "rank",
        "use crate::{language::Language, time::{now_ms}};"
    ));
    assert!(caught("rank::weight", "use super::super::{time};"));
    assert!(caught(
        "rank",
        "fn f() { let written = crate::files::write_replacing(path, text); }"
    ));
    assert!(caught(
        "rank",
        "fn f() -> crate::files::WriteError { todo!() }"
    ));
    assert!(caught(
        "rank",
        "fn f() { format!(\"{}\", crate::time::now_ms()); }"
    ));
    assert!(caught("rank", "mod inner { use super::super::files; }"));
    assert!(caught("rank", "use std::fs::File;"));
    assert!(caught("rank", "use std::{fs, io};"));
    assert!(caught("rank", "use ::std::net::TcpStream;"));
    assert!(caught("rank", "use tempfile::tempdir;"));
    assert!(caught("rank", "fn f() { let _ = std::fs::read(\"x\"); }"));
    // What it must leave alone.
    assert!(!caught("rank", "// crate::files:: in a comment\nfn f() {}"));
    assert!(!caught("rank", "use crate::language::Language;"));
    assert!(!caught(
        "rank",
        "const NAMES: &[&str] = &[\"tokio::sync::Mutex\"];"
    ));
    assert!(!caught("ingest::edits", "use super::files::Edit;"));
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
    assert_eq!(module_of(Path::new("symbols/mod.rs")), module("symbols"));
    assert_eq!(module_of(Path::new("src/language.rs")), module("language"));
    assert_eq!(
        resolve(&module("ingest::symbols"), &module("super::super::rank::x")),
        Some(module("rank::x"))
    );
    // The read side's check: the store's and the index's writing API.
    let writes = |source: &str| writes_named(module("read::search"), source);
    assert_eq!(
        writes("fn f(conn: &StoreConn) { store::upsert_session(conn, row); }"),
        vec!["store::upsert_session"]
    );
    assert_eq!(
        writes("use precedent_store::{self as store, admit, StoreConn};"),
        vec!["precedent_store::admit"]
    );
    assert_eq!(
        writes("fn f() -> index::IndexWriterHandle { todo!() }"),
        vec!["index::IndexWriterHandle"]
    );
    assert_eq!(
        writes("use crate::writer::Writer;"),
        vec!["crate::writer::Writer"]
    );
    assert_eq!(
        writes("use super::super::derive;"),
        vec!["super::super::derive"]
    );
    assert!(writes("use super::ReadError; use crate::metrics::Histogram;").is_empty());
    assert!(writes("fn f(conn: &StoreConn) { store::session(conn, key); }").is_empty());
    assert!(writes("#[cfg(test)]\nmod tests { use precedent_store::admit; }").is_empty());
}
