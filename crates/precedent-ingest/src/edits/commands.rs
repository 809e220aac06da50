//! What a session's shell commands and file names say of its files:
//! scripts run, tests run, folders moved to, modules imported, and which
//! created files are output or scratch by their names.

use std::collections::HashSet;

use crate::text::contains_str;

/// Interpreters whose first operand is a script it runs.
const SCRIPT_RUNNERS: &[&str] = &[
    "python", "python2", "python3", "node", "bash", "sh", "zsh", "ruby", "perl", "php", "tsx",
    "ts-node", "deno", "bun", "Rscript", "julia",
];
/// Extensions of what an agent writes as output (reports, logs, data).
const OUTPUT_EXTENSIONS: &[&str] = &["json", "jsonl", "log", "txt", "out", "csv", "md"];
/// Names of repository files with those extensions (never output).
const PROJECT_FILES: &[&str] = &[
    "README",
    "CHANGELOG",
    "CHANGES",
    "CONTRIBUTING",
    "LICENSE",
    "AGENTS",
    "CLAUDE",
    "HISTORY",
    "NEWS",
    "package",
    "tsconfig",
    "composer",
    "requirements",
    "constraints",
    "manifest",
    "deno",
    "jsconfig",
    "lerna",
    "nx",
    "turbo",
    "vercel",
    "app",
    "tslint",
    "eslintrc",
];
/// Words of a name that say it is output.
const OUTPUT_WORDS: &[&str] = &[
    "output",
    "result",
    "report",
    "summary",
    "prediction",
    "preds",
    "analysis",
    "notes",
    "solution",
    "changes_made",
    "fix_summary",
    "debug",
    "repro",
    "trace",
];

/// Whether a file the session created is an output artifact: a log, or
/// data and text (JSON, text, Markdown) written at the top of the tree or
/// named as output (`report.md`, `results.json`), not a project file.
pub(super) fn is_output_artifact(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some((stem, extension)) = name.rsplit_once('.') else {
        return false;
    };
    let extension = extension.to_ascii_lowercase();
    if !OUTPUT_EXTENSIONS.contains(&extension.as_str()) {
        return false;
    }
    if matches!(extension.as_str(), "log" | "out") {
        return true;
    }
    let lowered = stem.to_ascii_lowercase();
    if stem.is_empty() || stem.starts_with('.') {
        // A dotfile (`.aidar.json`) configures a tool.
        return false;
    }
    if PROJECT_FILES
        .iter()
        .any(|project| lowered.trim_start_matches('.') == project.to_ascii_lowercase())
    {
        return false;
    }
    !path.contains('/') || OUTPUT_WORDS.iter().any(|word| lowered.contains(word))
}

/// Words that name a script written to reproduce, debug or check.
const SCRATCH_WORDS: &[&str] = &[
    "repro",
    "debug",
    "test_issue",
    "demo",
    "check_",
    "verify",
    "scratch",
    "tmp",
    "temp",
    "final_",
    "try_",
    "issue",
];

/// Whether a file's name says it is a reproduction or check script.
pub(super) fn looks_like_scratch(path: &str) -> bool {
    let lowered = module_name(path).to_ascii_lowercase();
    SCRATCH_WORDS.iter().any(|word| lowered.contains(word))
}

/// The scripts a shell command runs: the first operand of an interpreter
/// (`python -u x.py`, `timeout 60 node x.js`) or a command that is a path
/// (`./x.sh`).
pub(super) fn scripts_run(command: &str) -> Vec<String> {
    let mut scripts = Vec::new();
    for part in command.split(['\n', ';', '&', '|', '(', ')']) {
        let mut words = part
            .split_whitespace()
            .skip_while(|word| {
                word.contains('=')
                    || matches!(
                        *word,
                        "timeout"
                            | "time"
                            | "env"
                            | "exec"
                            | "uv"
                            | "poetry"
                            | "pipenv"
                            | "run"
                            | "npx"
                            | "sudo"
                    )
            })
            .skip_while(|word| {
                word.bytes()
                    .all(|byte| byte.is_ascii_digit() || byte == b's')
            });
        let Some(first) = words.next() else { continue };
        let runner = first.rsplit('/').next().unwrap_or(first);
        let runner = runner.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if first.starts_with("./") && !first.ends_with('/') {
            scripts.push(first.to_string());
            continue;
        }
        if !SCRIPT_RUNNERS.contains(&runner) && !SCRIPT_RUNNERS.contains(&first) {
            continue;
        }
        for word in words {
            if matches!(word, "-m" | "-c" | "-e" | "--eval" | "-lc" | "-n") {
                // A module, inline code, or a shell's syntax check.
                break;
            }
            if word.starts_with('-') {
                continue;
            }
            let word = word.trim_matches(['"', '\'']);
            if word.contains('.') || word.contains('/') {
                scripts.push(word.to_string());
            }
            break;
        }
        if scripts.len() >= 16 {
            break;
        }
    }
    scripts
}

/// The directories a shell command moves to (`cd DIR`, `pushd DIR`), as
/// written.
pub(super) fn moved_to(command: &str) -> Vec<String> {
    let mut directories = Vec::new();
    if !command.contains("cd ") && !command.contains("pushd ") {
        return directories;
    }
    for part in command.split(['\n', ';', '&', '|', '(', ')']) {
        let mut words = part.split_whitespace();
        if matches!(words.next(), Some("cd" | "pushd"))
            && let Some(directory) = words.next()
        {
            let directory = directory.trim_matches(['"', '\'']).trim_end_matches('/');
            if !directory.is_empty()
                && !matches!(directory, "." | ".." | "-" | "~")
                && directories.len() < 16
            {
                directories.push(directory.to_string());
            }
        }
    }
    directories
}

/// The files a shell command hands to a test runner: the operands of
/// `pytest` / `py.test` and of `python -m pytest` / `-m unittest`, a test's
/// `::name` cut off.
pub(super) fn test_files_run(command: &str) -> Vec<String> {
    let mut files = Vec::new();
    if !command.contains("py.test") && !command.contains("pytest") && !command.contains("unittest")
    {
        return files;
    }
    for part in command.split(['\n', ';', '&', '|', '(', ')']) {
        let words: Vec<&str> = part.split_whitespace().collect();
        let runner_at = words.iter().position(|word| {
            let name = word.rsplit('/').next().unwrap_or(word);
            matches!(name, "pytest" | "py.test")
        });
        let module_at = words
            .windows(2)
            .position(|pair| pair[0] == "-m" && matches!(pair[1], "pytest" | "unittest"))
            .map(|at| at + 1);
        let Some(at) = runner_at.or(module_at) else {
            continue;
        };
        for word in words.iter().skip(at + 1) {
            if matches!(*word, ">" | "2>&1" | ">>" | "<") {
                break;
            }
            if word.starts_with('-') {
                continue;
            }
            let word = word.trim_matches(['"', '\'']);
            let file = word.split("::").next().unwrap_or(word);
            if file.ends_with(".py") && files.len() < 16 {
                files.push(file.to_string());
            }
        }
    }
    files
}

/// The module names a text imports (`import a.b`, `from a import b, c`,
/// `require('./a')`, `from './a'`), each dotted or slashed part.
pub(super) fn imported_names(text: &str) -> HashSet<String> {
    let mut names = HashSet::new();
    if !contains_str!(text, "import")
        && !contains_str!(text, "require")
        && !contains_str!(text, "source ")
        && !contains_str!(text, ". ")
    {
        return names;
    }
    for line in text.lines().take(20_000) {
        let line = line.trim();
        let spec = if let Some(rest) = line.strip_prefix("from ") {
            rest.replace(" import ", " ")
        } else if let Some(rest) = line.strip_prefix("import ") {
            rest.to_string()
        } else if let Some(rest) = line
            .strip_prefix("source ")
            .or_else(|| line.strip_prefix(". "))
        {
            rest.to_string()
        } else if let Some(at) = line.find("require(") {
            line.get(at + "require(".len()..).unwrap_or("").to_string()
        } else {
            continue;
        };
        for word in spec.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !word.is_empty() && names.len() < 256 {
                names.insert(word.to_string());
            }
        }
    }
    names
}

/// The module name of a file (`repro/a.py` -> `a`).
pub(super) fn module_name(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.split_once('.').map_or(name, |(stem, _)| stem)
}

/// Whether `a` and `b` name one file, one perhaps seen from a subdirectory
/// (`a.py` after `cd repro`, beside `repro/a.py`), or one absolute and the
/// other relative to the repository root.
pub fn same_file(a: &str, b: &str) -> bool {
    a == b || is_under_folder(a, b) || is_under_folder(b, a)
}

/// Whether `path` is `name` under a folder more (`/repo/x.py` for
/// `x.py`): the same file as the session named it another way.
pub(crate) fn is_under_folder(path: &str, name: &str) -> bool {
    path.strip_suffix(name)
        .is_some_and(|head| head.ends_with('/'))
}
