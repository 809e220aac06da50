//! Query analysis: what a new task's text says about the code it concerns.
//!
//! The text goes through the same extractors as an Added message (paths,
//! identifiers in backticks and dotted prose, code blocks, tracebacks, test
//! ids), plus the code-like words of plain prose (`snake_case`,
//! `camelCase`), and dotted module paths become candidate files
//! (`astropy.modeling.separable` -> `astropy/modeling/separable`).

use std::collections::HashSet;

use std::collections::HashMap;
use std::time::Duration;

use precedent_core::language::Language;
use precedent_core::tokenize;
use precedent_ingest::symbols::{ParseBudget, code_definitions};
use precedent_ingest::{self as ingest, Clock, ErrorRecord, mentions, trace};

/// Bytes of query code parsed by tree-sitter (beyond, a line scan).
const QUERY_PARSE_BYTES: usize = 4 * 1024;
/// Time tree-sitter may spend on query code.
const QUERY_PARSE_TIME: Duration = Duration::from_millis(2);

/// Distinct items kept per kind: a task statement rarely names more, and a
/// pasted log would otherwise dominate the query.
const MAX_ITEMS: usize = 64;
/// Bytes of a query text analyzed.
const MAX_ANALYZED_BYTES: usize = 16 * 1024;
/// Distinct terms kept for BM25.
const MAX_TERMS: usize = 512;
/// Content words a query without code facts needs to name a task: one
/// rare word (an error code, a marker) is a task; the talk around the
/// work is not.
const MIN_TASK_WORDS: usize = 1;
/// Content words a prompt said to an agent without code facts needs to
/// be searched for by the hooks: most prompts of a session are its
/// follow-ups ("run cargo fmt and clippy", "create a new branch for this",
/// "that's not right, try a different approach"), which name no task of
/// their own; a task put in words takes more. An explicit search (API,
/// MCP) needs [`MIN_TASK_WORDS`] only.
pub const MIN_PROMPT_TASK_WORDS: usize = 4;
/// Words of the talk around the work, not of a task: replies, go-aheads,
/// version-control chores and words every task uses ("thanks, that looks
/// good", "commit and push", "what's next", "run the tests again", "fix
/// the bug").
const TALK_WORDS: &[&str] = &[
    "ahead", "alright", "awesome", "bug", "bugs", "bye", "change", "changes", "check", "code",
    "commit", "continue", "cool", "did", "done", "error", "errors", "explain", "file", "files",
    "fine", "finish", "fix", "get", "go", "going", "good", "great", "hello", "help", "hey", "hi",
    "issue", "keep", "let", "lets", "lgtm", "look", "looks", "make", "nice", "next", "ok", "okay",
    "perfect", "please", "problem", "proceed", "push", "rerun", "retry", "revert", "run", "s",
    "see", "ship", "show", "sounds", "start", "stop", "sure", "test", "tests", "thank", "thanks",
    "thx", "try", "undo", "wait", "well", "whats", "work", "works", "yes", "yep", "yeah",
];

/// Whether a lowercased word carries content of a task.
fn is_content_word(word: &str) -> bool {
    word.len() > 1 && !tokenize::is_function_word(word) && !TALK_WORDS.contains(&word)
}

/// The facts of a query.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueryFacts {
    /// Distinct code-aware terms, for BM25.
    pub terms: Vec<String>,
    /// Symbol names (the last segment of an identifier, lowercased).
    pub names: Vec<String>,
    /// Words of the text that carry content of a task: neither function
    /// words nor the talk around the work.
    pub num_content_words: usize,
    /// Qualified names: the last two segments joined by `.`, lowercased
    /// (`Variable.__setitem__`, `tokio::spawn` -> `tokio.spawn`).
    pub qualified: Vec<String>,
    /// File paths and module paths (without extension), normalized.
    pub paths: Vec<String>,
    /// Exception and error types (the last dotted segment).
    pub error_types: Vec<String>,
    /// Test function names.
    pub tests: Vec<String>,
    /// The language the query's code is in, when it shows code or paths.
    pub language: Option<Language>,
    /// Lowercased words of the text (for file-stem matches).
    #[serde(skip)]
    pub words: HashSet<String>,
    /// The digest of the query as a task statement (see
    /// [`super::task_digest`]), to know a session of the same task.
    #[serde(skip)]
    pub task_digest: Option<String>,
    /// Whether the text names a task: a code fact, or at least
    /// [`MIN_TASK_WORDS`] words that are neither function words nor the
    /// talk around the work ("thanks, that looks good", "commit and
    /// push"). A query that names none is answered with nothing.
    pub names_task: bool,
}

impl QueryFacts {
    /// Whether the query names any code fact (beyond plain terms).
    pub fn has_code_facts(&self) -> bool {
        !(self.names.is_empty() && self.paths.is_empty() && self.error_types.is_empty())
    }
}

/// Pushes `value` unless present or the cap is reached.
fn push(values: &mut Vec<String>, value: String) {
    if values.len() < MAX_ITEMS && !value.is_empty() && !values.contains(&value) {
        values.push(value);
    }
}

/// The segments of an identifier, a dotted name or a `::` path.
fn segments(symbol: &str) -> Vec<&str> {
    symbol
        .trim_end_matches("()")
        .split("::")
        .flat_map(|part| part.split('.'))
        .map(|part| part.trim_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|part| !part.is_empty())
        .collect()
}

/// The name key of a symbol: its last segment, lowercased.
pub fn name_key(symbol: &str) -> Option<String> {
    segments(symbol).last().map(|last| last.to_lowercase())
}

/// The qualified key: the last two segments, lowercased, joined by `.`.
pub fn qualified_key(symbol: &str) -> Option<String> {
    let parts = segments(symbol);
    match parts.as_slice() {
        [.., owner, name] => Some(format!("{owner}.{name}").to_lowercase()),
        _ => None,
    }
}

/// Normalizes a path for suffix matching: forward slashes, no `./`, no
/// leading `/`, and nothing before a `site-packages/` or `dist-packages/`
/// (an installed copy of a package names the same module).
pub fn normalize_path(path: &str) -> String {
    let mut path = path.trim().replace('\\', "/");
    for marker in ["site-packages/", "dist-packages/"] {
        if let Some(position) = path.rfind(marker) {
            path = path[position + marker.len()..].to_string();
        }
    }
    let trimmed = path.trim_start_matches("./").trim_start_matches('/');
    trimmed.to_string()
}

/// Whether a word of prose looks like code: it has an inner underscore or
/// an inner capital after a lowercase letter (`parse_args`, `getValue`,
/// `PolyFit`), and is not a plain word.
fn is_code_like_word(word: &str) -> bool {
    if word.len() < 4 || !word.bytes().any(|byte| byte.is_ascii_alphabetic()) {
        return false;
    }
    let inner = word.trim_matches('_');
    if inner.contains('_') {
        return true;
    }
    let bytes = inner.as_bytes();
    bytes
        .windows(2)
        .any(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase())
}

/// The module path of a dotted name: its leading lowercase segments, when
/// there are at least two (`sklearn.linear_model.LogisticRegression` ->
/// `sklearn/linear_model`).
fn module_path(dotted: &str) -> Option<String> {
    if !dotted.contains('.') || dotted.contains("::") {
        return None;
    }
    // Attribute access on an object, not a module path.
    if ["self.", "cls.", "this."]
        .iter()
        .any(|prefix| dotted.starts_with(prefix))
    {
        return None;
    }
    let modules: Vec<&str> = dotted
        .trim_end_matches("()")
        .split('.')
        .take_while(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
        })
        .collect();
    (modules.len() >= 2).then(|| modules.join("/"))
}

/// Analyzes a query text. Code snippets in it are parsed within a small
/// allowance of bytes and, on `clock`, of time: a Search must answer in
/// milliseconds.
pub fn analyze(text: &str, clock: Clock) -> QueryFacts {
    let task_digest = (!text.trim().is_empty()).then(|| super::task_digest(text));
    // A task statement says what it is about in its first pages; a long
    // pasted log past them adds time, not precision.
    let text = ingest::text::truncate_to_bytes(text, MAX_ANALYZED_BYTES);
    let mut facts = QueryFacts {
        task_digest,
        terms: tokenize::distinct_terms(text)
            .into_iter()
            .take(MAX_TERMS)
            .collect(),
        ..QueryFacts::default()
    };
    // The same extractors as an Added message, with a tighter tree-sitter
    // allowance: a Search must answer in milliseconds.
    let mut budget = ParseBudget::new(QUERY_PARSE_BYTES, QUERY_PARSE_TIME, clock);
    let mut symbols: Vec<String> = mentions::identifiers(text);
    let mut language_votes: HashMap<Language, usize> = HashMap::new();
    for snippet in mentions::code_snippets(text) {
        *language_votes
            .entry(snippet.grammar.language())
            .or_default() += 1;
        symbols.extend(code_definitions(
            snippet.grammar,
            &snippet.code,
            64,
            &mut budget,
        ));
    }
    let errors: Vec<ErrorRecord> = trace::parse_errors(text)
        .into_iter()
        .map(|parsed| parsed.record)
        .collect();
    add_words(&mut facts, &mut symbols, text);
    for error in &errors {
        if let Some(name) = name_key(&error.error_type) {
            let original = segments(&error.error_type)
                .last()
                .map(|last| last.to_string())
                .unwrap_or(name);
            push(&mut facts.error_types, original);
        }
        for frame in &error.frames {
            push(&mut facts.paths, normalize_path(&frame.file));
            if let Some(function) = &frame.function {
                symbols.push(function.clone());
            }
        }
    }
    for path in mentions::file_paths(text) {
        if let Some(language) = Language::from_path(&path) {
            *language_votes.entry(language).or_default() += 1;
        }
        push(&mut facts.paths, normalize_path(&path));
    }
    facts.language = language_votes
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.name().cmp(a.0.name())))
        .map(|(language, _)| language);
    for test in mentions::test_ids(text) {
        if let Some(name) = test.rsplit("::").next() {
            let name = name.split('[').next().unwrap_or(name);
            push(&mut facts.tests, name.to_string());
        }
    }
    add_symbols(&mut facts, &symbols);
    facts.paths.retain(|path| {
        // Frames of the interpreter itself (`<stdin>`, `<string>`) and of
        // the standard library name no file of the project.
        !path.starts_with('<') && !path.contains("/lib/python")
    });
    facts.num_content_words = facts
        .terms
        .iter()
        .filter(|word| is_content_word(word))
        .count();
    facts.names_task = facts.has_code_facts() || facts.num_content_words >= MIN_TASK_WORDS;
    // Function words never make a match; a text that names no task
    // searches for nothing.
    if facts.names_task {
        facts.terms.retain(|term| !tokenize::is_function_word(term));
    } else {
        facts.terms.clear();
    }
    facts
}

/// Whether a prompt said to an agent names a task of its own, for the
/// hooks to search with it: code facts, a command-line option or a call
/// (`--iglob`, `rewrite(abs)`, `is<T>`), an issue's number or key (`#1234`,
/// `PROJ-482`), or [`MIN_PROMPT_TASK_WORDS`] content words.
pub fn prompt_names_task(prompt: &str) -> bool {
    let facts = analyze(prompt, Clock::Ignored);
    facts.has_code_facts()
        || facts.num_content_words >= MIN_PROMPT_TASK_WORDS
        || prompt.split_whitespace().any(is_code_token)
}

/// A word of prose that only code writes, or that names a task by its
/// number: a long option (`--train`), a name directly followed by a call's
/// or a generic's bracket, an issue number (`#1234`) or an issue key
/// (`PROJ-482`).
fn is_code_token(word: &str) -> bool {
    let word = word.trim_end_matches(['.', ',', ';', ':', '?', '!', ')']);
    if let Some(number) = word.strip_prefix('#') {
        return !number.is_empty() && number.chars().all(|c| c.is_ascii_digit());
    }
    if let Some((key, number)) = word.split_once('-')
        && key.len() >= 2
        && key.chars().all(|c| c.is_ascii_uppercase())
        && !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit())
    {
        return true;
    }
    if let Some(option) = word.strip_prefix("--") {
        return option.len() >= 2 && option.starts_with(|c: char| c.is_ascii_alphabetic());
    }
    word.find(['(', '<']).is_some_and(|bracket| {
        bracket >= 2
            && word[..bracket]
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == ':')
    })
}

/// The words of a query's prose: each lowercased into `facts.words`; error
/// types and test names into theirs; code-like words into `symbols`.
fn add_words(facts: &mut QueryFacts, symbols: &mut Vec<String>, text: &str) {
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if !word.is_empty() {
            facts.words.insert(word.to_lowercase());
        }
        let is_error_type = word.len() > 5
            && (word.ends_with("Error")
                || word.ends_with("Exception")
                || word.ends_with("Warning"))
            && word.starts_with(|c: char| c.is_ascii_uppercase());
        if is_error_type {
            push(&mut facts.error_types, word.to_string());
        } else if is_code_like_word(word) {
            symbols.push(word.to_string());
        }
        if word.starts_with("test_") {
            push(&mut facts.tests, word.to_string());
        }
    }
}

/// What the symbols a query mentions name: module paths, name keys (three
/// characters or more, not all digits) and qualified keys.
fn add_symbols(facts: &mut QueryFacts, symbols: &[String]) {
    for symbol in symbols {
        if let Some(module) = module_path(symbol) {
            push(&mut facts.paths, module);
        }
        if let Some(name) = name_key(symbol)
            && name.len() >= 3
            && !name.bytes().all(|byte| byte.is_ascii_digit())
        {
            push(&mut facts.names, name);
        }
        if let Some(qualified) = qualified_key(symbol) {
            push(&mut facts.qualified, qualified);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prompts an agent's user types that name no task: a hook answers
    /// them with nothing.
    const NO_TASK_PROMPTS: [&str; 30] = [
        "thanks, that looks good",
        "commit and push",
        "what's next?",
        "ok",
        "yes",
        "go ahead",
        "continue",
        "please continue",
        "lgtm",
        "great, thanks!",
        "run the tests",
        "run the tests again",
        "now commit this",
        "push it",
        "undo that",
        "revert that change",
        "sounds good",
        "perfect",
        "looks good to me",
        "can you explain this?",
        "stop",
        "wait",
        "try again",
        "keep going",
        "fix it",
        "fix the bug",
        "hello",
        "hi there",
        "nice work",
        "ship it",
    ];

    #[test]
    fn prompts_that_name_no_task_search_for_nothing() {
        for prompt in NO_TASK_PROMPTS {
            let facts = analyze(prompt, Clock::Ignored);
            assert!(!facts.names_task, "{prompt}");
            assert!(facts.terms.is_empty(), "{prompt}: {:?}", facts.terms);
        }
        for prompt in [
            "the date picker shows the wrong month",
            "TypeError in parse_header",
            "crash in src/walk.rs",
            "mk9f3a2b7c",
        ] {
            assert!(analyze(prompt, Clock::Ignored).names_task, "{prompt}");
        }
    }

    #[test]
    fn finds_names_paths_and_errors() {
        let facts = analyze(
            "`separability_matrix` in astropy.modeling.separable gives wrong results \
             for nested CompoundModels.\n\n```python\nfrom astropy.modeling import models as m\n\
             cm = m.Linear1D(10) & m.Linear1D(5)\n```\nIt raises ValueError. See src/walk/dir.rs too.",
            Clock::Ignored,
        );
        assert!(facts.names.contains(&"separability_matrix".to_string()));
        assert!(facts.names.contains(&"compoundmodels".to_string()));
        assert!(
            facts
                .paths
                .contains(&"astropy/modeling/separable".to_string())
        );
        assert!(facts.paths.contains(&"src/walk/dir.rs".to_string()));
        assert!(facts.error_types.contains(&"ValueError".to_string()));
        assert!(facts.has_code_facts());
    }

    #[test]
    fn traceback_frames_give_paths_functions_and_type() {
        let facts = analyze(
            "Traceback (most recent call last):\n  File \"/testbed/xarray/core/variable.py\", line 10, in __setitem__\n    raise KeyError(key)\nKeyError: 'x'\n",
            Clock::Ignored,
        );
        assert!(
            facts
                .paths
                .contains(&"testbed/xarray/core/variable.py".to_string())
        );
        assert!(facts.names.contains(&"__setitem__".to_string()));
        assert!(facts.error_types.contains(&"KeyError".to_string()));
    }

    #[test]
    fn plain_prose_has_no_code_facts() {
        let facts = analyze(
            "How do I force the option for all my searches even if I specify another?",
            Clock::Ignored,
        );
        assert!(!facts.has_code_facts(), "{facts:?}");
        assert!(!facts.terms.is_empty());
    }

    #[test]
    fn keys_and_paths_normalize() {
        assert_eq!(
            name_key("Variable.__setitem__()").as_deref(),
            Some("__setitem__")
        );
        assert_eq!(
            qualified_key("tokio::sync::Mutex").as_deref(),
            Some("sync.mutex")
        );
        assert_eq!(qualified_key("spawn"), None);
        assert_eq!(
            normalize_path("/usr/lib/python3/site-packages/numpy/core/a.py"),
            "numpy/core/a.py"
        );
        assert_eq!(normalize_path("./src\\main.rs"), "src/main.rs");
        assert_eq!(
            module_path("sklearn.linear_model.LogisticRegression").as_deref(),
            Some("sklearn/linear_model")
        );
        assert_eq!(module_path("self.x"), None);
    }
}

#[cfg(test)]
mod robustness {
    use super::*;

    /// Random texts built from code-ish pieces, unicode and noise: analysis
    /// and redaction never panic, and analysis stays bounded.
    #[test]
    fn random_queries_never_panic() {
        let pieces = [
            "`a.b`",
            "::",
            "Traceback (most recent call last):\n",
            "  File \"x.py\", line 3, in f\n",
            "ValueError: x\n",
            "```python\ndef f(:\n",
            "```\n",
            "src/a.rs:10:5",
            "é",
            "漢字",
            "\u{0}",
            "a.b.c.d.e",
            "__init__",
            "#",
            "FAILED tests/t.py::test_x - E\n",
            "-----BEGIN",
            "sk-",
            "http://u:p@h/",
            "\n",
            " ",
            "ghp_",
            "Authorization: Bearer ",
            "camelCase",
            "snake_case",
        ];
        let mut seed: u64 = 0x1234_5678_9abc_def1;
        for _ in 0..2_000 {
            let mut text = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let length = (seed % 60) as usize;
            for _ in 0..length {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push_str(pieces[(seed % pieces.len() as u64) as usize]);
            }
            let facts = analyze(&text, Clock::Wall(std::time::Instant::now));
            assert!(facts.terms.len() <= MAX_TERMS);
            assert!(facts.names.len() <= MAX_ITEMS && facts.paths.len() <= MAX_ITEMS);
            let _ = precedent_core::redact::redact(&text);
        }
    }
}
