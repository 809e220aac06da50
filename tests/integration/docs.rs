//! The documentation against the program: `docs/configuration.md`'s
//! tables name exactly the flags and environment variables the real
//! binary's `--help` lists, command by command, and every variable the
//! code reads by name; every relative link of the README and `docs/`
//! leads to a file of the repository.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use syn::visit::{self, Visit};

/// The commands `docs/configuration.md` covers, as typed after `precedent`.
const COVERED_COMMANDS: &[&str] = &[
    "serve",
    "mcp",
    "import",
    "search",
    "inspect",
    "hook",
    "hooks install",
    "hooks uninstall",
    "hooks status",
    "setup",
];

/// The flags and variables of one command.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    flags: BTreeSet<String>,
    variables: BTreeSet<String>,
}

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What `precedent <command> --help` lists: each long flag (`--help` and
/// `--version` aside) and each `[env: NAME]`.
fn options_of(command: &str) -> Options {
    let output = Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(command.split(' '))
        .arg("--help")
        .output()
        .expect("run precedent --help");
    assert!(output.status.success(), "precedent {command} --help failed");
    options_in_help(&String::from_utf8(output.stdout).expect("utf-8 help"))
}

fn options_in_help(help: &str) -> Options {
    let mut options = Options::default();
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim_start();
        // An option's first line is indented 2 (with a short flag) or 6;
        // its description, further.
        if indent <= 6 && text.starts_with('-') {
            let long = text
                .split([' ', ','])
                .find(|word| word.starts_with("--"))
                .map(|word| word.trim_start_matches("--").to_string());
            if let Some(long) = long
                && long != "help"
                && long != "version"
            {
                options.flags.insert(long);
            }
        }
        if let Some(rest) = text.strip_prefix("[env: ") {
            let name: String = rest
                .chars()
                .take_while(|character| *character != '=' && *character != ']')
                .collect();
            options.variables.insert(name);
        }
    }
    options
}

/// The cells of each row of the table whose header is `header`.
fn table_rows(markdown: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = markdown.lines().skip_while(|line| line.trim() != header);
    assert!(lines.next().is_some(), "no table headed {header}");
    lines
        .skip(1) // the |---| line
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim()
                .trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_string())
                .collect()
        })
        .collect()
}

/// The backticked words of a cell that start with `prefix`.
fn code_words(cell: &str, prefix: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| word.starts_with(prefix) && !word.contains(' '))
        .map(str::to_string)
        .collect()
}

/// What the configuration table says of each command: its flags and
/// variables. Fails on a command it does not know and on a flag given
/// for one command in two rows.
fn documented_options(markdown: &str) -> BTreeMap<String, Options> {
    let mut documented: BTreeMap<String, Options> = BTreeMap::new();
    let header = "| flag | environment | commands | default | meaning |";
    for row in table_rows(markdown, header) {
        assert_eq!(row.len(), 5, "a row of five cells: {row:?}");
        let flags: Vec<String> = code_words(&row[0], "--")
            .into_iter()
            .map(|flag| flag.trim_start_matches("--").to_string())
            .collect();
        assert_eq!(flags.len(), 1, "one flag a row: {row:?}");
        let variables = code_words(&row[1], "");
        let commands: Vec<&str> = if row[2] == "every command" {
            COVERED_COMMANDS.to_vec()
        } else {
            row[2].split(',').map(str::trim).collect()
        };
        for command in commands {
            assert!(
                COVERED_COMMANDS.contains(&command),
                "the table names a command it does not cover: {command:?} in {row:?}"
            );
            let options = documented.entry(command.to_string()).or_default();
            assert!(
                options.flags.insert(flags[0].clone()),
                "--{} of `{command}` is described twice",
                flags[0]
            );
            options.variables.extend(variables.iter().cloned());
        }
    }
    documented
}

fn configuration_page() -> String {
    std::fs::read_to_string(repository().join("docs/configuration.md"))
        .expect("read docs/configuration.md")
}

/// What the table gets wrong about `command`, whose `--help` lists
/// `actual`: flags and variables it lacks, and those it names that the
/// command lacks.
fn differences(
    documented: &BTreeMap<String, Options>,
    command: &str,
    actual: &Options,
) -> Vec<String> {
    let empty = Options::default();
    let table = documented.get(command).unwrap_or(&empty);
    let mut differences = Vec::new();
    for flag in actual.flags.difference(&table.flags) {
        differences.push(format!(
            "`precedent {command}`: --{flag} is not in the table"
        ));
    }
    for flag in table.flags.difference(&actual.flags) {
        differences.push(format!(
            "`precedent {command}`: the table names --{flag}, which it lacks"
        ));
    }
    for variable in actual.variables.difference(&table.variables) {
        differences.push(format!(
            "`precedent {command}`: {variable} is not in the table"
        ));
    }
    for variable in table.variables.difference(&actual.variables) {
        differences.push(format!(
            "`precedent {command}`: the table names {variable}, which it lacks"
        ));
    }
    differences
}

#[test]
fn the_configuration_table_names_every_flag_and_variable_of_each_command() {
    let documented = documented_options(&configuration_page());
    let wrong: Vec<String> = COVERED_COMMANDS
        .iter()
        .flat_map(|command| differences(&documented, command, &options_of(command)))
        .collect();
    assert!(
        wrong.is_empty(),
        "docs/configuration.md against --help: {wrong:#?}"
    );
}

#[test]
fn a_flag_missing_from_the_table_or_unknown_to_the_command_is_reported() {
    let page = configuration_page();
    let listen = page
        .lines()
        .find(|line| line.starts_with("| `--listen`"))
        .expect("the --listen row");
    let without_listen = page.replace(&format!("{listen}\n"), "");
    let with_unknown = page.replace(listen, &listen.replace("--listen", "--listen-here"));
    let serve = options_of("serve");
    assert_eq!(
        differences(&documented_options(&without_listen), "serve", &serve),
        [
            "`precedent serve`: --listen is not in the table",
            "`precedent serve`: PRECEDENT_LISTEN is not in the table",
        ]
    );
    assert_eq!(
        differences(&documented_options(&with_unknown), "serve", &serve),
        [
            "`precedent serve`: --listen is not in the table",
            "`precedent serve`: the table names --listen-here, which it lacks",
        ]
    );
}

/// Each Rust source of the workspace (`src/` and every crate's
/// `crates/*/src/`), with its path.
fn sources() -> Vec<(PathBuf, String)> {
    let mut sources = Vec::new();
    let mut pending = vec![repository().join("src")];
    for entry in std::fs::read_dir(repository().join("crates")).expect("read crates") {
        pending.push(entry.expect("entry").path().join("src"));
    }
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let text = std::fs::read_to_string(&path).expect("read source");
                sources.push((path, text));
            }
        }
    }
    sources
}

#[test]
fn every_variable_read_outside_the_command_line_is_one_the_code_names() {
    let sources: String = sources().into_iter().map(|(_, text)| text).collect();
    let rows = table_rows(&configuration_page(), "| environment | default | meaning |");
    assert!(!rows.is_empty());
    for row in rows {
        for variable in code_words(&row[0], "") {
            assert!(
                sources.contains(&variable),
                "docs/configuration.md names {variable}, which no source mentions"
            );
        }
    }
}

/// What a source reads of the environment: the names of `std::env::var`
/// and `var_os` calls, and of `EnvFilter::try_from_env` (`RUST_LOG` for
/// `try_from_default_env`), written in the call or as a `const` it names;
/// test code aside.
#[derive(Default)]
struct EnvironmentReads {
    names: BTreeSet<String>,
    /// Constants named in such a call, and every `const` of a string.
    named: BTreeSet<String>,
    constants: BTreeMap<String, String>,
}

fn is_test_code(attributes: &[syn::Attribute]) -> bool {
    attributes.iter().any(|attribute| {
        attribute.path().is_ident("cfg")
            && attribute
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

fn string_literal(expression: &syn::Expr) -> Option<String> {
    match expression {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) => Some(text.value()),
        _ => None,
    }
}

impl<'ast> Visit<'ast> for EnvironmentReads {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test_code(&item.attrs) {
            visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_test_code(&item.attrs) {
            visit::visit_item_fn(self, item);
        }
    }

    fn visit_item_const(&mut self, item: &'ast syn::ItemConst) {
        if let Some(text) = string_literal(&item.expr) {
            self.constants.insert(item.ident.to_string(), text);
        }
        visit::visit_item_const(self, item);
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let syn::Expr::Path(function) = call.func.as_ref() {
            let segments: Vec<String> = function
                .path
                .segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect();
            let reads = match segments.as_slice() {
                [.., owner, name] if owner == "env" => name == "var" || name == "var_os",
                [.., owner, name] if owner == "EnvFilter" => {
                    if name == "try_from_default_env" {
                        self.names.insert("RUST_LOG".to_string());
                    }
                    name == "try_from_env"
                }
                _ => false,
            };
            match call.args.first() {
                Some(argument) if reads => {
                    if let Some(name) = string_literal(argument) {
                        self.names.insert(name);
                    } else if let syn::Expr::Path(constant) = argument
                        && let Some(ident) = constant.path.get_ident()
                    {
                        self.named.insert(ident.to_string());
                    }
                }
                _ => {}
            }
        }
        visit::visit_expr_call(self, call);
    }
}

/// The environment variables the product's code reads by name (a test's
/// own, in `tests.rs` files and `#[cfg(test)]` code, aside). A name passed
/// through a parameter is not seen.
fn variables_read(sources: &[(PathBuf, String)]) -> BTreeSet<String> {
    let mut reads = EnvironmentReads::default();
    for (path, text) in sources {
        if path.file_name().is_some_and(|name| name == "tests.rs") {
            continue;
        }
        let file = syn::parse_file(text).expect("the source parses");
        reads.visit_file(&file);
    }
    let mut names = reads.names;
    for constant in &reads.named {
        // A name that is no constant is a variable or parameter: unseen.
        if let Some(name) = reads.constants.get(constant) {
            names.insert(name.clone());
        }
    }
    names
}

/// The variables of `read` that no environment cell of `page`'s tables
/// names: a flag's variable, or a row of the environment-only table.
fn undocumented(read: &BTreeSet<String>, page: &str) -> Vec<String> {
    let flags = table_rows(
        page,
        "| flag | environment | commands | default | meaning |",
    );
    let environment = table_rows(page, "| environment | default | meaning |");
    let named: BTreeSet<String> = flags
        .iter()
        .filter_map(|row| row.get(1))
        .chain(environment.iter().filter_map(|row| row.first()))
        .flat_map(|cell| code_words(cell, ""))
        .collect();
    read.iter()
        .filter(|variable| !named.contains(*variable))
        .cloned()
        .collect()
}

#[test]
fn every_variable_the_code_reads_is_on_the_configuration_page() {
    let read = variables_read(&sources());
    for expected in ["PRECEDENT_IDLE_EXIT", "PRECEDENT_LOG", "RUST_LOG", "HOME"] {
        assert!(read.contains(expected), "{expected} not seen in {read:?}");
    }
    let page = configuration_page();
    assert_eq!(
        undocumented(&read, &page),
        Vec::<String>::new(),
        "read by the code, missing from docs/configuration.md"
    );
    let idle_exit = page
        .lines()
        .find(|line| line.starts_with("| `PRECEDENT_IDLE_EXIT`"))
        .expect("the PRECEDENT_IDLE_EXIT row");
    let without = page.replace(&format!("{idle_exit}\n"), "");
    assert_eq!(undocumented(&read, &without), ["PRECEDENT_IDLE_EXIT"]);
}

/// The relative links (`](target)`) of a Markdown text, anchors cut.
fn relative_links(markdown: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut rest = markdown;
    while let Some(start) = rest.find("](") {
        rest = &rest[start + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = &rest[..end];
        if !target.starts_with("http://") && !target.starts_with("https://") {
            links.push(target.to_string());
        }
        rest = &rest[end..];
    }
    links
}

/// The anchors GitHub gives a page's headings.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut in_fence = false;
    let mut anchors = BTreeSet::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim().to_lowercase();
        let anchor: String = heading
            .chars()
            .filter(|character| {
                character.is_alphanumeric()
                    || *character == ' '
                    || *character == '-'
                    || *character == '_'
            })
            .map(|character| if character == ' ' { '-' } else { character })
            .collect();
        anchors.insert(anchor);
    }
    anchors
}

#[test]
fn every_link_of_the_readme_and_docs_stays_in_the_repository_and_resolves() {
    let root = repository();
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("read docs") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|extension| extension == "md") {
            pages.push(path);
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("read page");
        for link in relative_links(&text) {
            let (file, anchor) = link.split_once('#').unwrap_or((link.as_str(), ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().expect("parent").join(file)
            };
            let resolved = target.canonicalize().ok();
            let inside = resolved
                .as_deref()
                .is_some_and(|path| path.starts_with(&root));
            let markdown = target
                .extension()
                .is_some_and(|extension| extension == "md");
            let anchored = anchor.is_empty()
                || !markdown
                || resolved.as_deref().is_some_and(|path| {
                    anchors(&std::fs::read_to_string(path).unwrap_or_default()).contains(anchor)
                });
            if !inside || !anchored {
                broken.push(format!("{}: {link}", relative(page, &root)));
            }
        }
    }
    assert!(broken.is_empty(), "links that lead nowhere: {broken:#?}");
}

fn relative(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}
