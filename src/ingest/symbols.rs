//! Code symbols: which definitions enclose the changed lines of a diff hunk,
//! which identifiers the added lines reference, and which definitions a code
//! block or file view shows.
//!
//! Parsing uses tree-sitter (Python, Rust, JavaScript, TypeScript/TSX, Go,
//! Java, C, C++) with the tag queries in `grammars/*-tags.scm` (aider's
//! `@name.definition.<kind>` / `@name.reference.<kind>` convention), run on
//! hunk fragments that need not be valid programs: tree-sitter recovers from
//! errors. A light line-based scan (definition patterns per language family,
//! scopes by indentation, git's `@@` function context) backs it up, and is all
//! there is for the other C-family files (`.ipp`, `.inl`, Objective-C).
//! A `.h` header is C++ when its hunk looks like C++ ([`looks_like_cpp`]).
//! Input size and parser work are bounded; nothing here allocates per byte
//! beyond the fragment text.
//!
//! Speed: the service re-derives a session from all its messages on every
//! Add, so each thread keeps one parser and a bounded cache of the tags of
//! texts it parsed; the old side of a Python hunk is parsed only when it can
//! define something; viewed Python code (file views, code blocks) is
//! line-scanned ([`python_scan_definitions`]), which finds what tree-sitter
//! finds there at a fraction of the cost.
//!
//! Finding hunks is left to [`super::diff`]; deciding what goes into the
//! session record is left to the caller.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::{LazyLock, OnceLock};
use std::time::{Duration, Instant};

use regex::Regex;
use tree_sitter::{
    Language, Node, ParseOptions, ParseState, Parser, Query, QueryCursor, StreamingIterator, Tree,
};

use super::diff::{Hunk, HunkLineKind};

/// Source texts larger than this are not handed to tree-sitter.
pub const MAX_PARSE_BYTES: usize = 200 * 1024;
/// The same for C and C++, whose grammars parse fragments several times
/// slower (about 2.5 MB/s against 16 here): larger C/C++ fragments, mostly
/// views of whole files and hunks of generated amalgamated headers, go to
/// the line scan.
pub const MAX_C_FAMILY_PARSE_BYTES: usize = 4 * 1024;
/// At most this many definitions / references are kept per parsed text.
const MAX_TAGS_PER_TEXT: usize = 5_000;
/// Enclosing containers kept in a qualified name (the innermost ones).
const MAX_QUALIFIERS: usize = 4;
/// Syntax nodes visited when qualifying definitions.
const MAX_QUALIFY_VISITS: usize = 2_000_000;
/// Bytes of input per allowed parser progress callback (tree-sitter calls back
/// every 100 parser operations; real code needs under one callback per 50
/// bytes, so this leaves about 5x headroom before giving up on garbage).
const PARSE_BYTES_PER_CALLBACK: usize = 10;
/// Parser progress callbacks always allowed (small fragments need under 30).
const PARSE_CALLBACKS_BASE: usize = 200;
/// Time any single parse may take, before the per-size allowance.
const PARSE_TIME_BASE: Duration = Duration::from_millis(20);
/// Symbols kept per hunk.
const MAX_SYMBOLS_PER_HUNK: usize = 64;

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

    fn tree_sitter_language(self) -> Language {
        match self {
            CodeLanguage::Python => tree_sitter_python::LANGUAGE.into(),
            CodeLanguage::Rust => tree_sitter_rust::LANGUAGE.into(),
            CodeLanguage::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            CodeLanguage::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            CodeLanguage::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            CodeLanguage::Go => tree_sitter_go::LANGUAGE.into(),
            CodeLanguage::Java => tree_sitter_java::LANGUAGE.into(),
            CodeLanguage::C => tree_sitter_c::LANGUAGE.into(),
            CodeLanguage::Cpp => tree_sitter_cpp::LANGUAGE.into(),
        }
    }

    fn query_source(self) -> String {
        const PYTHON: &str = include_str!("../../grammars/python-tags.scm");
        const RUST: &str = include_str!("../../grammars/rust-tags.scm");
        const JAVASCRIPT: &str = include_str!("../../grammars/javascript-tags.scm");
        const TYPESCRIPT: &str = include_str!("../../grammars/typescript-tags.scm");
        const GO: &str = include_str!("../../grammars/go-tags.scm");
        const JAVA: &str = include_str!("../../grammars/java-tags.scm");
        const C: &str = include_str!("../../grammars/c-tags.scm");
        const CPP: &str = include_str!("../../grammars/cpp-tags.scm");
        // Patterns after this line of javascript-tags.scm are not valid for TypeScript.
        const JAVASCRIPT_ONLY_MARKER: &str = "; @javascript-only";
        match self {
            CodeLanguage::Python => PYTHON.to_string(),
            CodeLanguage::Rust => RUST.to_string(),
            CodeLanguage::JavaScript => JAVASCRIPT.to_string(),
            CodeLanguage::TypeScript | CodeLanguage::Tsx => {
                let shared = JAVASCRIPT
                    .split(JAVASCRIPT_ONLY_MARKER)
                    .next()
                    .unwrap_or(JAVASCRIPT);
                format!("{shared}\n{TYPESCRIPT}")
            }
            CodeLanguage::Go => GO.to_string(),
            CodeLanguage::Java => JAVA.to_string(),
            CodeLanguage::C => C.to_string(),
            CodeLanguage::Cpp => CPP.to_string(),
        }
    }

    fn index(self) -> usize {
        match self {
            CodeLanguage::Python => 0,
            CodeLanguage::Rust => 1,
            CodeLanguage::JavaScript => 2,
            CodeLanguage::TypeScript => 3,
            CodeLanguage::Tsx => 4,
            CodeLanguage::Go => 5,
            CodeLanguage::Java => 6,
            CodeLanguage::C => 7,
            CodeLanguage::Cpp => 8,
        }
    }

    fn family(self) -> Family {
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
fn extension_of(path: &str) -> Option<String> {
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
    let sample = super::text::truncate_to_bytes(text, 64 * 1024);
    MARKERS.iter().any(|marker| sample.contains(marker))
}

/// Whether a line of `text` (diff markers, indentation and a hunk's `@@ ... @@`
/// prefix aside) starts with `class ` (C has no such keyword).
fn opens_class(text: &str) -> bool {
    let sample = super::text::truncate_to_bytes(text, 64 * 1024);
    sample.lines().any(|line| {
        let line = match line.strip_prefix("@@") {
            Some(rest) => rest.split_once("@@").map_or("", |(_, context)| context),
            None => line,
        };
        line.trim_start_matches(['+', '-', ' ', '\t'])
            .starts_with("class ")
    })
}

/// The kind of tag a capture marks.
#[derive(Debug, Clone)]
enum CaptureRole {
    DefinitionName(String),
    DefinitionNode,
    ReferenceName(String),
    Other,
}

/// A compiled language with its tag query.
struct LanguageSupport {
    language: Language,
    query: Query,
    roles: Vec<CaptureRole>,
}

fn build_support(language: CodeLanguage) -> Result<LanguageSupport, String> {
    let grammar = language.tree_sitter_language();
    let query = Query::new(&grammar, &language.query_source())
        .map_err(|error| format!("{language:?} tags query: {error}"))?;
    let roles = query
        .capture_names()
        .iter()
        .map(|name| {
            if let Some(kind) = name.strip_prefix("name.definition.") {
                CaptureRole::DefinitionName(kind.to_string())
            } else if let Some(kind) = name.strip_prefix("name.reference.") {
                CaptureRole::ReferenceName(kind.to_string())
            } else if name.starts_with("definition.") {
                CaptureRole::DefinitionNode
            } else {
                CaptureRole::Other
            }
        })
        .collect();
    Ok(LanguageSupport {
        language: grammar,
        query,
        roles,
    })
}

static SUPPORT: [OnceLock<Result<LanguageSupport, String>>; CodeLanguage::ALL.len()] = [
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
];

fn support(language: CodeLanguage) -> Result<&'static LanguageSupport, &'static str> {
    SUPPORT[language.index()]
        .get_or_init(|| build_support(language))
        .as_ref()
        .map_err(|error| error.as_str())
}

/// Checks that the tag query of `language` compiles (the error text if not).
pub fn check_query(language: CodeLanguage) -> Result<(), String> {
    support(language).map(|_| ()).map_err(str::to_string)
}

/// A definition found by the tag query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// The defined name (`method`).
    pub name: String,
    /// The name qualified by its enclosing containers in the parsed text (`Class.method`).
    pub qualified_name: String,
    /// The tag kind (`function`, `method`, `class`, `impl`, `constant`...).
    pub kind: String,
    /// First row (0-based) of the definition, decorators included.
    pub start_row: usize,
    /// Last row (0-based) of the definition.
    pub end_row: usize,
    /// Column of the definition's first byte.
    pub start_column: usize,
}

/// A referenced name found by the tag query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The referenced name.
    pub name: String,
    /// The tag kind (`call`, `type`, `attribute`...).
    pub kind: String,
    /// Row (0-based) of the reference.
    pub row: usize,
}

/// Definitions and references of one parsed text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tags {
    /// Definitions in text order.
    pub definitions: Vec<Definition>,
    /// References in text order.
    pub references: Vec<Reference>,
}

/// How much tree-sitter work a caller allows: bytes handed to the parser and
/// wall-clock time spent in it. Parser operation counts alone do not bound
/// time (error recovery on garbage costs ~10x more per operation than on code),
/// so a clock guards against pathological input; on real code neither limit is
/// reached, and when one is, callers fall back to the line scan.
#[derive(Debug, Clone)]
pub struct ParseBudget {
    remaining_bytes: usize,
    remaining_time: Duration,
    per_parse_base: Duration,
}

impl Default for ParseBudget {
    /// The per-session budget for diff hunks: 8 MB, 250 ms (real sessions
    /// use a few ms to a few tens of ms).
    fn default() -> Self {
        ParseBudget::new(8 * 1024 * 1024, Duration::from_millis(250))
    }
}

impl ParseBudget {
    /// A budget of `bytes` parsed and `time` spent parsing.
    pub fn new(bytes: usize, time: Duration) -> ParseBudget {
        ParseBudget {
            remaining_bytes: bytes,
            remaining_time: time,
            per_parse_base: PARSE_TIME_BASE,
        }
    }

    /// A budget whose clock only stops truly runaway parses (a minute each):
    /// for tests and offline tools, where determinism matters more than latency.
    pub fn generous() -> ParseBudget {
        ParseBudget {
            remaining_bytes: usize::MAX,
            remaining_time: Duration::from_secs(3_600),
            per_parse_base: Duration::from_secs(60),
        }
    }

    /// Whether `length` more bytes may be parsed.
    pub fn allows(&self, length: usize) -> bool {
        length <= self.remaining_bytes && !self.remaining_time.is_zero()
    }

    /// The time one parse of `length` bytes may take: a base plus 1 ms per
    /// 4 KB (real code parses at several MB/s), within what remains.
    fn time_limit(&self, length: usize) -> Duration {
        let per_parse = self.per_parse_base + Duration::from_millis((length / 4_096) as u64);
        per_parse.min(self.remaining_time)
    }

    fn spend(&mut self, length: usize, elapsed: Duration) {
        self.remaining_bytes = self.remaining_bytes.saturating_sub(length);
        self.remaining_time = self.remaining_time.saturating_sub(elapsed);
    }
}

/// Looks like text a parser can make sense of: at most 1% control or
/// replacement characters (lossy-decoded binary is refused outright).
fn looks_like_code(source: &str) -> bool {
    let mut characters = 0usize;
    let mut suspicious = 0usize;
    for character in source.chars() {
        characters += 1;
        if character == '\u{fffd}'
            || (character.is_control() && !matches!(character, '\n' | '\t' | '\r'))
        {
            suspicious += 1;
        }
    }
    suspicious * 100 <= characters
}

thread_local! {
    /// One parser per thread, reset before each parse (a cancelled parse
    /// would otherwise resume).
    static PARSER: RefCell<Parser> = RefCell::new(Parser::new());
    /// Tags of recently parsed texts (see [`TagCache`]).
    static TAG_CACHE: RefCell<TagCache> = RefCell::new(TagCache::default());
}

/// Source bytes the per-thread tag cache holds before it starts over.
const MAX_TAG_CACHE_BYTES: usize = 8 * 1024 * 1024;
/// Entries the per-thread tag cache holds before it starts over.
const MAX_TAG_CACHE_ENTRIES: usize = 16_384;

/// A parsed text and its tags.
type CachedTags = (Box<str>, Rc<Tags>);

/// The rows a caller needs tags for, when not all: see [`extract_tags_in_rows`].
type RowRange = Option<(usize, usize)>;

/// Tags of texts parsed before on this thread, by language, rows asked for and exact text.
/// The service re-derives a session from all its messages on every Add, and
/// agents show the same code again and again, so most parses repeat; the
/// cache is cleared when full, so its size stays bounded.
#[derive(Default)]
struct TagCache {
    entries: HashMap<(CodeLanguage, RowRange, u64), Vec<CachedTags>>,
    source_bytes: usize,
    entry_count: usize,
}

impl TagCache {
    fn key(language: CodeLanguage, rows: RowRange, source: &str) -> (CodeLanguage, RowRange, u64) {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        source.hash(&mut hasher);
        (language, rows, hasher.finish())
    }

    fn get(&self, language: CodeLanguage, rows: RowRange, source: &str) -> Option<Rc<Tags>> {
        self.entries
            .get(&Self::key(language, rows, source))?
            .iter()
            .find(|(cached, _)| cached.as_ref() == source)
            .map(|(_, tags)| tags.clone())
    }

    fn insert(&mut self, language: CodeLanguage, rows: RowRange, source: &str, tags: &Rc<Tags>) {
        if source.len() > MAX_TAG_CACHE_BYTES / 4 {
            return;
        }
        if self.source_bytes + source.len() > MAX_TAG_CACHE_BYTES
            || self.entry_count >= MAX_TAG_CACHE_ENTRIES
        {
            self.entries.clear();
            self.source_bytes = 0;
            self.entry_count = 0;
        }
        self.source_bytes += source.len();
        self.entry_count += 1;
        self.entries
            .entry(Self::key(language, rows, source))
            .or_default()
            .push((source.into(), tags.clone()));
    }
}

fn parse_bounded(support: &LanguageSupport, source: &str, time_limit: Duration) -> Option<Tree> {
    PARSER.with(|parser| {
        let mut parser = parser.try_borrow_mut().ok()?;
        parse_bounded_with(&mut parser, support, source, time_limit)
    })
}

fn parse_bounded_with(
    parser: &mut Parser,
    support: &LanguageSupport,
    source: &str,
    time_limit: Duration,
) -> Option<Tree> {
    parser.reset();
    parser.set_language(&support.language).ok()?;
    let budget = PARSE_CALLBACKS_BASE + source.len() / PARSE_BYTES_PER_CALLBACK;
    let deadline = Instant::now() + time_limit;
    let mut callbacks = 0usize;
    let mut progress = |_: &ParseState| {
        callbacks += 1;
        if callbacks > budget || Instant::now() > deadline {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let bytes = source.as_bytes();
    let options = ParseOptions::new().progress_callback(&mut progress);
    parser.parse_with_options(
        &mut |offset, _| bytes.get(offset..).unwrap_or(&[]),
        None,
        Some(options),
    )
}

/// Definitions and references of `source` with a fresh default budget; see
/// [`extract_tags_within`].
pub fn extract_tags(language: CodeLanguage, source: &str) -> Option<Rc<Tags>> {
    extract_tags_within(language, source, &mut ParseBudget::default())
}

/// Definitions and references of `source`; `None` when it is too large or
/// does not look like code, the budget is spent, the query does not compile,
/// or the parser gave up.
pub fn extract_tags_within(
    language: CodeLanguage,
    source: &str,
    budget: &mut ParseBudget,
) -> Option<Rc<Tags>> {
    extract_tags_for(language, source, None, budget)
}

/// Like [`extract_tags_within`], but only the tags of matches that touch rows
/// `first_row..=last_row`: every definition enclosing one of those rows and
/// every reference in them are there, as with [`extract_tags_within`]
/// (others may be missing). The query then skips the rest of the tree.
pub fn extract_tags_in_rows(
    language: CodeLanguage,
    source: &str,
    first_row: usize,
    last_row: usize,
    budget: &mut ParseBudget,
) -> Option<Rc<Tags>> {
    extract_tags_for(language, source, Some((first_row, last_row)), budget)
}

fn extract_tags_for(
    language: CodeLanguage,
    source: &str,
    rows: RowRange,
    budget: &mut ParseBudget,
) -> Option<Rc<Tags>> {
    if source.len() > language.max_parse_bytes()
        || !budget.allows(source.len())
        || !looks_like_code(source)
    {
        return None;
    }
    if let Some(tags) = TAG_CACHE.with(|cache| cache.try_borrow().ok()?.get(language, rows, source))
    {
        budget.spend(source.len(), Duration::ZERO);
        return Some(tags);
    }
    let support = support(language).ok()?;
    let started = Instant::now();
    let parsed = parse_bounded(support, source, budget.time_limit(source.len()));
    budget.spend(source.len(), started.elapsed());
    let tree = parsed?;
    let tags = Rc::new(tags_of_tree(language, support, source, &tree, rows));
    TAG_CACHE.with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            cache.insert(language, rows, source, &tags);
        }
    });
    Some(tags)
}

/// Runs the tag query over a parsed tree, or over the matches touching
/// `rows` (first and last, inclusive), and qualifies the definitions.
fn tags_of_tree(
    language: CodeLanguage,
    support: &LanguageSupport,
    source: &str,
    tree: &Tree,
    rows: RowRange,
) -> Tags {
    let mut tags = Tags::default();
    // Definitions as matched, qualified afterwards in one walk of the tree.
    let mut pending: Vec<PendingDefinition> = Vec::new();
    let mut pending_by_node: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut seen_definitions: HashSet<(usize, usize, String)> = HashSet::new();
    let mut cursor = QueryCursor::new();
    cursor.set_match_limit(256);
    if let Some((first_row, last_row)) = rows {
        // Matches intersecting the range are returned whole, captures outside
        // it included (a definition's name above its changed body). A Python
        // definition counts from its decorators, which its node does not
        // cover: a changed decorator row belongs to a definition below it.
        let end_row = match language {
            CodeLanguage::Python => u32::MAX as usize,
            _ => last_row + 1,
        };
        cursor.set_point_range(
            tree_sitter::Point::new(first_row, 0)..tree_sitter::Point::new(end_row, 0),
        );
    }
    let mut matches = cursor.matches(&support.query, tree.root_node(), source.as_bytes());
    while let Some(found) = matches.next() {
        if pending.len() >= MAX_TAGS_PER_TEXT && tags.references.len() >= MAX_TAGS_PER_TEXT {
            break;
        }
        let mut definition_name: Option<(Node<'_>, &str)> = None;
        let mut definition_node: Option<Node<'_>> = None;
        let mut reference_name: Option<(Node<'_>, &str)> = None;
        for capture in found.captures() {
            match support.roles.get(capture.index as usize) {
                Some(CaptureRole::DefinitionName(kind)) => {
                    definition_name = Some((capture.node, kind.as_str()))
                }
                Some(CaptureRole::DefinitionNode) => definition_node = Some(capture.node),
                Some(CaptureRole::ReferenceName(kind)) => {
                    reference_name = Some((capture.node, kind.as_str()))
                }
                _ => {}
            }
        }
        if let Some((name_node, kind)) = definition_name
            && pending.len() < MAX_TAGS_PER_TEXT
            && let Some((name, own_name)) = definition_names(language, source, name_node)
        {
            let node = definition_node.unwrap_or(name_node);
            if seen_definitions.insert((node.start_byte(), node.end_byte(), name.clone())) {
                let own_name = match (language, node.kind()) {
                    (CodeLanguage::Go, "method_declaration") => {
                        match go_receiver_type(source, node) {
                            Some(receiver) => format!("{receiver}.{name}"),
                            None => own_name,
                        }
                    }
                    _ => own_name,
                };
                pending_by_node
                    .entry(node.id())
                    .or_default()
                    .push(pending.len());
                pending.push(PendingDefinition {
                    name,
                    own_name,
                    kind: kind.to_string(),
                    start_byte: node.start_byte(),
                    start: node.start_position(),
                    end_row: node.end_position().row,
                    containers: Vec::new(),
                });
            }
        }
        if let Some((name_node, kind)) = reference_name
            && tags.references.len() < MAX_TAGS_PER_TEXT
            && let Some(name) = node_text(source, name_node)
        {
            tags.references.push(Reference {
                name: name.to_string(),
                kind: kind.to_string(),
                row: name_node.start_position().row,
            });
        }
    }
    drop(matches);
    qualify_definitions(language, source, tree, &mut pending, &pending_by_node);
    let separator = language.separator();
    for definition in pending {
        let qualified_name = if definition.containers.is_empty() {
            definition.own_name
        } else {
            format!(
                "{}{separator}{}",
                definition.containers.join(separator),
                definition.own_name
            )
        };
        tags.definitions.push(Definition {
            name: definition.name,
            qualified_name,
            kind: definition.kind,
            start_row: definition.start.row,
            end_row: definition.end_row.max(definition.start.row),
            start_column: definition.start.column,
        });
    }
    tags.definitions
        .sort_by_key(|definition| (definition.start_row, definition.start_column));
    tags
}

/// A definition found by the query, before qualification.
struct PendingDefinition {
    name: String,
    own_name: String,
    kind: String,
    /// Byte offset of the definition node.
    start_byte: usize,
    /// Start of the definition (of its decorators, once qualified).
    start: tree_sitter::Point,
    end_row: usize,
    /// Enclosing container names, outermost first (at most [`MAX_QUALIFIERS`]).
    containers: Vec<String>,
}

/// Walks the tree once (iteratively, bounded) keeping the stack of enclosing
/// containers, and records it for each pending definition; also extends a
/// decorated Python definition to its decorators. (`Node::parent` is not used:
/// it costs a descent from the root per call.)
fn qualify_definitions(
    language: CodeLanguage,
    source: &str,
    tree: &Tree,
    pending: &mut [PendingDefinition],
    pending_by_node: &HashMap<usize, Vec<usize>>,
) {
    if pending.is_empty() {
        return;
    }
    // Only subtrees holding a definition are walked.
    let mut definition_starts: Vec<usize> = pending
        .iter()
        .map(|definition| definition.start_byte)
        .collect();
    definition_starts.sort_unstable();
    let holds_definition = |node: Node<'_>| {
        let first_at_or_after =
            definition_starts.partition_point(|start| *start < node.start_byte());
        definition_starts
            .get(first_at_or_after)
            .is_some_and(|start| *start < node.end_byte())
    };
    let mut cursor = tree.walk();
    let mut containers: Vec<(usize, String)> = Vec::new();
    let mut depth = 0usize;
    let mut visited = 0usize;
    let mut decorated_starts: HashMap<usize, tree_sitter::Point> = HashMap::new();
    loop {
        let node = cursor.node();
        visited += 1;
        while containers
            .last()
            .is_some_and(|(container_depth, _)| *container_depth >= depth)
        {
            containers.pop();
        }
        if node.kind() == "decorated_definition"
            && let Some(definition) = node.child_by_field_name("definition")
        {
            decorated_starts.insert(definition.id(), node.start_position());
        }
        if let Some(indices) = pending_by_node.get(&node.id()) {
            let skip = containers.len().saturating_sub(MAX_QUALIFIERS);
            let names: Vec<String> = containers
                .iter()
                .skip(skip)
                .map(|(_, name)| name.clone())
                .collect();
            for index in indices {
                if let Some(definition) = pending.get_mut(*index) {
                    definition.containers = names.clone();
                    if let Some(start) = decorated_starts.get(&node.id()) {
                        definition.start = *start;
                    }
                }
            }
        }
        if let Some(name) = container_name(language, source, node) {
            containers.push((depth, name));
        }
        if visited < MAX_QUALIFY_VISITS && holds_definition(node) && cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
            depth = depth.saturating_sub(1);
        }
    }
}

fn node_text<'s>(source: &'s str, node: Node<'_>) -> Option<&'s str> {
    let text = source.get(node.byte_range())?;
    if text.is_empty() || text.len() > 200 {
        return None;
    }
    Some(text)
}

/// The defined name and the name to qualify (`bar` and `bar`; for a C++
/// out-of-line member captured as a `qualified_identifier`, `bar` and
/// `Foo::bar`).
fn definition_names(
    language: CodeLanguage,
    source: &str,
    name_node: Node<'_>,
) -> Option<(String, String)> {
    if language == CodeLanguage::Cpp && name_node.kind() == "qualified_identifier" {
        return cpp_qualified_name(source, name_node);
    }
    let name = node_text(source, name_node)?;
    Some((name.to_string(), name.to_string()))
}

/// The member and the qualified name (`bar`, `Foo::bar`) of a C++
/// `qualified_identifier`, template arguments dropped (`Foo<T>::bar` gives
/// `Foo::bar`) and a leading global `::` too; `None` when too deep.
fn cpp_qualified_name(source: &str, node: Node<'_>) -> Option<(String, String)> {
    const MAX_SEGMENTS: usize = 16;
    let mut segments: Vec<&str> = Vec::new();
    let mut current = node;
    while current.kind() == "qualified_identifier" {
        if segments.len() >= MAX_SEGMENTS {
            return None;
        }
        if let Some(scope) = current.child_by_field_name("scope")
            && let Some(segment) = cpp_base_name(source, scope)
        {
            segments.push(segment);
        }
        current = current.child_by_field_name("name")?;
    }
    let member = cpp_base_name(source, current)?;
    segments.push(member);
    Some((member.to_string(), segments.join("::")))
}

/// `Foo` of `Foo`, `Foo<T>` (a template type, function or method name).
fn cpp_base_name<'s>(source: &'s str, node: Node<'_>) -> Option<&'s str> {
    match node.kind() {
        "template_type" | "template_function" | "template_method" => {
            node_text(source, node.child_by_field_name("name")?)
        }
        "decltype" | "dependent_name" => None,
        _ => node_text(source, node),
    }
}

fn container_name(language: CodeLanguage, source: &str, node: Node<'_>) -> Option<String> {
    let kind = node.kind();
    let is_container = match language {
        CodeLanguage::Python => matches!(kind, "class_definition" | "function_definition"),
        CodeLanguage::Rust => matches!(
            kind,
            "impl_item" | "trait_item" | "mod_item" | "function_item"
        ),
        CodeLanguage::JavaScript | CodeLanguage::TypeScript | CodeLanguage::Tsx => matches!(
            kind,
            "class_declaration"
                | "class"
                | "abstract_class_declaration"
                | "interface_declaration"
                | "function_declaration"
                | "method_definition"
                | "internal_module"
                | "module"
        ),
        CodeLanguage::Go => false,
        CodeLanguage::Java => matches!(
            kind,
            "class_declaration"
                | "interface_declaration"
                | "enum_declaration"
                | "record_declaration"
                | "method_declaration"
        ),
        CodeLanguage::C => false,
        CodeLanguage::Cpp => matches!(
            kind,
            "class_specifier" | "struct_specifier" | "union_specifier" | "namespace_definition"
        ),
    };
    if !is_container {
        return None;
    }
    if kind == "impl_item" {
        let type_node = node.child_by_field_name("type")?;
        return base_type_name(source, type_node);
    }
    let name_node = node.child_by_field_name("name")?;
    if language == CodeLanguage::Cpp {
        return match name_node.kind() {
            "qualified_identifier" => {
                cpp_qualified_name(source, name_node).map(|(_, qualified)| qualified)
            }
            _ => cpp_base_name(source, name_node).map(str::to_string),
        };
    }
    node_text(source, name_node).map(str::to_string)
}

/// `Foo` of `Foo`, `Foo<T>`, `a::b::Foo`.
fn base_type_name(source: &str, node: Node<'_>) -> Option<String> {
    match node.kind() {
        "generic_type" => node
            .child_by_field_name("type")
            .and_then(|inner| base_type_name(source, inner)),
        "scoped_type_identifier" => node
            .child_by_field_name("name")
            .and_then(|inner| node_text(source, inner))
            .map(str::to_string),
        _ => node_text(source, node).map(str::to_string),
    }
}

/// The receiver type name of a Go method (`T` of `func (t *T) M()`).
fn go_receiver_type(source: &str, method: Node<'_>) -> Option<String> {
    let receiver = method.child_by_field_name("receiver")?;
    let mut stack = vec![receiver];
    let mut visited = 0;
    while let Some(node) = stack.pop() {
        visited += 1;
        if visited > 64 {
            return None;
        }
        if node.kind() == "type_identifier" {
            return node_text(source, node).map(str::to_string);
        }
        let mut walker = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut walker).collect();
        for child in children.into_iter().rev() {
            stack.push(child);
        }
    }
    None
}

// ------------------------------------------------------------------ line patterns

/// Language families for the line-based definition patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Python.
    Python,
    /// Rust.
    Rust,
    /// Go.
    Go,
    /// JavaScript and TypeScript.
    JavaScript,
    /// Java, Kotlin, Scala, C#.
    Java,
    /// C and C++.
    C,
}

impl Family {
    /// The family of a file path, from its extension.
    pub fn from_path(path: &str) -> Option<Family> {
        if let Some(language) = CodeLanguage::from_path(path) {
            return Some(language.family());
        }
        match extension_of(path)?.as_str() {
            "pxd" => Some(Family::Python),
            "kt" | "kts" | "scala" | "cs" => Some(Family::Java),
            "c" | "h" | "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" | "ipp" | "inl" | "m"
            | "mm" => Some(Family::C),
            _ => None,
        }
    }

    fn separator(self) -> &'static str {
        match self {
            Family::Rust | Family::C => "::",
            _ => ".",
        }
    }
}

/// Whether a line defines a function-like thing or a type-like thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionKind {
    /// Function or method.
    Function,
    /// Class, struct, trait, impl block, interface.
    Type,
}

const KEYWORDS: &[&str] = &[
    "if",
    "for",
    "while",
    "switch",
    "return",
    "else",
    "do",
    "sizeof",
    "catch",
    "case",
    "new",
    "delete",
    "throw",
    "typeof",
    "await",
    "yield",
    "elif",
    "with",
    "assert",
    "raise",
    "not",
    "and",
    "or",
    "in",
    "is",
    "lambda",
    "match",
    "loop",
    "defined",
    "using",
    "goto",
    "static_assert",
    "decltype",
    "alignof",
];

/// Compiles the line patterns now rather than at first use (see
/// [`super::warm_up`]).
pub(super) fn warm_up_line_patterns() {
    LazyLock::force(&LINE_PATTERNS);
}

fn compile(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

type PatternTable = Vec<(DefinitionKind, Option<Regex>)>;

static LINE_PATTERNS: LazyLock<[(Family, PatternTable); 6]> = LazyLock::new(|| {
    use DefinitionKind::{Function, Type};
    [
        (
            Family::Python,
            vec![
                (
                    Function,
                    compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\("),
                ),
                (Type, compile(r"^class\s+([A-Za-z_]\w*)\s*[(:]")),
            ],
        ),
        (
            Family::Rust,
            vec![
                (
                    Function,
                    compile(
                        r#"^(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|default)\s+)*(?:extern\s+"[^"]*"\s+)?fn\s+([A-Za-z_]\w*)"#,
                    ),
                ),
                (
                    Type,
                    compile(
                        r"^(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|union|mod)\s+([A-Za-z_]\w*)",
                    ),
                ),
                (
                    Type,
                    compile(
                        r"^(?:unsafe\s+)?impl(?-u:\b)(?:\s*<[^{]*?>)?\s+(?:[\w:]+(?:<[^{]*?>)?\s+for\s+)?(?:\w+::)*([A-Za-z_]\w*)",
                    ),
                ),
            ],
        ),
        (
            Family::Go,
            vec![
                (
                    Function,
                    compile(r"^func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)\s*[(\[]"),
                ),
                (
                    Type,
                    compile(r"^type\s+([A-Za-z_]\w*)\s+(?:struct|interface)(?-u:\b)"),
                ),
            ],
        ),
        (
            Family::JavaScript,
            vec![
                (
                    Function,
                    compile(
                        r"^(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)\s*[(<]",
                    ),
                ),
                (
                    Type,
                    compile(
                        r"^(?:export\s+)?(?:default\s+)?(?:abstract\s+)?(?:class|interface)\s+([A-Za-z_$][\w$]*)",
                    ),
                ),
                (
                    Function,
                    compile(
                        r"^(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function(?-u:\b)|\([^)]*\)\s*(?::[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>|\(\s*$)",
                    ),
                ),
                (
                    Function,
                    compile(
                        r"^(?:(?:public|private|protected|static|async|get|set|readonly)\s+)*([A-Za-z_$][\w$]*)\s*\([^;]*\)\s*(?::\s*[^{;]+)?\{\s*$",
                    ),
                ),
            ],
        ),
        (
            Family::Java,
            vec![
                (
                    Type,
                    compile(
                        r"^(?:(?:public|private|protected|static|final|abstract|sealed|partial|data|open)\s+)*(?:class|interface|enum|record|object)\s+([A-Za-z_]\w*)",
                    ),
                ),
                (
                    Function,
                    compile(
                        r"^(?:@\w+\s+)*(?:(?:public|private|protected|static|final|abstract|synchronized|native|default|override|suspend)\s+)+[\w<>\[\],.?\s]*?(?-u:\b)([A-Za-z_]\w*)\s*\(",
                    ),
                ),
                (
                    Function,
                    compile(r"^(?:[\w<>\[\],.?]+\s+)+([A-Za-z_]\w*)\s*\([^;]*$"),
                ),
            ],
        ),
        (
            Family::C,
            vec![
                (
                    Type,
                    compile(
                        r"^(?:template\s*<.*>\s*)?(?:typedef\s+)?(?:class|struct|union)\s+(?:[A-Z_][A-Z0-9_]*\s+)?([A-Za-z_]\w*)\s*(?:final\s*)?(?:[:{]|$)",
                    ),
                ),
                (
                    Function,
                    compile(
                        r"^(?:[\w:<>\[\],*&~]+\s+)*[*&]*(~?[A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)*)\s*\([^;]*$",
                    ),
                ),
            ],
        ),
    ]
});

/// What a source line defines, by the light patterns: (kind, name). The C
/// signature pattern fires on an indented line only when it has a return type.
pub fn line_definition(
    line: &str,
    family: Family,
    at_top_level: bool,
) -> Option<(DefinitionKind, String)> {
    let stripped = line.trim();
    if stripped.is_empty()
        || stripped.len() > 400
        || ["#", "//", "/*", "*", "@", "return ", "else"]
            .iter()
            .any(|prefix| stripped.starts_with(prefix))
    {
        return None;
    }
    if stripped.ends_with(';') && family != Family::Python {
        return None;
    }
    let first_word: String = stripped
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if KEYWORDS.contains(&first_word.as_str()) {
        return None;
    }
    if matches!(family, Family::C | Family::Java)
        && stripped.split('(').next().unwrap_or("").contains('=')
    {
        return None;
    }
    let table = LINE_PATTERNS.iter().find(|(entry, _)| *entry == family)?;
    for (kind, pattern) in &table.1 {
        let Some(pattern) = pattern else { continue };
        let Some(captures) = pattern.captures(stripped) else {
            continue;
        };
        let Some(name_match) = captures.get(1) else {
            continue;
        };
        let name = name_match.as_str();
        let leaf = name.rsplit("::").next().unwrap_or(name);
        if KEYWORDS.contains(&leaf) {
            continue;
        }
        if family == Family::C && !at_top_level && name_match.start() == 0 {
            continue;
        }
        return Some((*kind, name.to_string()));
    }
    None
}

// ------------------------------------------------------------------ hunks

/// What one hunk says about symbols.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HunkSymbols {
    /// Innermost definitions enclosing the changed lines, qualified where known, in order.
    pub changed: Vec<String>,
    /// Names referenced by the added lines (calls, attributes, types).
    pub referenced: Vec<String>,
    /// True when a fragment was too large for tree-sitter and only the line scan ran.
    pub skipped_parse: bool,
}

/// One side (old or new) of a hunk as a source fragment.
struct Fragment {
    source: String,
    /// For each row of `source`: (index into hunk.lines, is a changed line).
    rows: Vec<(usize, bool)>,
    /// For each hunk line, its row in `source` if it is on this side.
    row_of_line: Vec<Option<usize>>,
}

fn build_fragment(hunk: &Hunk, text: &str, changed_kind: HunkLineKind) -> Fragment {
    let mut source = String::new();
    let mut rows = Vec::new();
    let mut row_of_line = vec![None; hunk.lines.len()];
    for (line_index, line) in hunk.lines.iter().enumerate() {
        if line.kind != HunkLineKind::Context && line.kind != changed_kind {
            continue;
        }
        let content = text.get(line.start..line.end).unwrap_or("");
        source.push_str(content);
        source.push('\n');
        row_of_line[line_index] = Some(rows.len());
        rows.push((line_index, line.kind == changed_kind));
    }
    Fragment {
        source,
        rows,
        row_of_line,
    }
}

/// Pushes `value` into `values` unless present or the cap is reached.
fn push_unique(values: &mut Vec<String>, value: String, cap: usize) {
    if values.len() < cap && !value.is_empty() && !values.contains(&value) {
        values.push(value);
    }
}

/// Symbols of one hunk of the file at `path`; `text` is the text the hunk's
/// byte ranges point into.
pub fn hunk_symbols(path: &str, hunk: &Hunk, text: &str, budget: &mut ParseBudget) -> HunkSymbols {
    let mut result = HunkSymbols::default();
    if !hunk.has_changes() {
        return result;
    }
    let family = Family::from_path(path);
    let language =
        CodeLanguage::from_path_and_text(path, text.get(hunk.start..hunk.end).unwrap_or(""));
    let header = family.and_then(|family| line_definition(&hunk.context, family, true));
    // The type an indented member belongs to: the header's, or in Java the
    // file's (the public class is named after its file).
    let file_type = (language == Some(CodeLanguage::Java))
        .then(|| file_stem(path))
        .flatten()
        .map(|stem| (DefinitionKind::Type, stem));
    let type_context = header
        .as_ref()
        .filter(|(kind, _)| *kind == DefinitionKind::Type)
        .or(file_type.as_ref());
    let mut per_line: Vec<Option<String>> = vec![None; hunk.lines.len()];
    if let Some(language) = language {
        let neighbours = ContextNeighbours::of(hunk);
        // The new side's parse, kept to place removed lines without parsing
        // the old side when that is safe (see `removed_from_new_side`).
        let mut new_side: Option<NewSide> = None;
        for changed_kind in [HunkLineKind::Added, HunkLineKind::Removed] {
            let fragment = build_fragment(hunk, text, changed_kind);
            if !fragment.rows.iter().any(|(_, changed)| *changed) {
                continue;
            }
            if fragment.source.len() > language.max_parse_bytes() {
                result.skipped_parse = true;
                continue;
            }
            if changed_kind == HunkLineKind::Removed && !may_define(language, &fragment.source) {
                // Only definitions matter on the old side, and there are none.
                continue;
            }
            if changed_kind == HunkLineKind::Removed
                && let Some(new_side) = &new_side
                && let Some(placed) =
                    removed_from_new_side(hunk, text, language, family, &neighbours, new_side)
            {
                for (line_index, definition) in placed {
                    per_line[line_index] = definition.map(|definition| {
                        qualify_with_header(definition, type_context, language.separator())
                    });
                }
                continue;
            }
            // Rows of the parsed text are the fragment's plus `offset`.
            let (source, offset) = match language {
                CodeLanguage::C | CodeLanguage::Cpp => (close_open_braces(&fragment.source), 0),
                CodeLanguage::Python => open_python_blocks(&fragment.source),
                _ => (Cow::Borrowed(fragment.source.as_str()), 0),
            };
            // Only definitions enclosing changed rows and references in them
            // are used; on the new side also those enclosing the context
            // lines around removed lines.
            let around_removed = (changed_kind == HunkLineKind::Added)
                .then(|| neighbours.rows_around_removed(hunk, &fragment))
                .into_iter()
                .flatten();
            let mut rows_used = fragment
                .rows
                .iter()
                .enumerate()
                .filter(|(_, (_, changed))| *changed)
                .map(|(row, _)| row)
                .chain(around_removed);
            let first_row = rows_used.next().unwrap_or(0);
            let (first_row, last_row) = rows_used
                .fold((first_row, first_row), |(low, high), row| {
                    (low.min(row), high.max(row))
                });
            let Some(tags) = extract_tags_in_rows(
                language,
                &source,
                first_row + offset,
                last_row + offset,
                budget,
            ) else {
                result.skipped_parse = true;
                continue;
            };
            for (row, (line_index, changed)) in fragment.rows.iter().enumerate() {
                if !*changed {
                    continue;
                }
                if let Some(definition) = innermost_definition(&tags.definitions, row + offset) {
                    per_line[*line_index] = Some(qualify_with_header(
                        definition,
                        type_context,
                        language.separator(),
                    ));
                }
            }
            if changed_kind == HunkLineKind::Added {
                for reference in &tags.references {
                    let on_added_row = reference
                        .row
                        .checked_sub(offset)
                        .and_then(|row| fragment.rows.get(row))
                        .is_some_and(|(_, changed)| *changed);
                    if on_added_row && is_interesting_reference(&reference.name) {
                        push_unique(
                            &mut result.referenced,
                            reference.name.clone(),
                            MAX_SYMBOLS_PER_HUNK,
                        );
                    }
                }
                drop(source);
                new_side = Some(NewSide {
                    tags,
                    offset,
                    fragment,
                });
            }
        }
    }
    // The line scan, run only when some changed line has no symbol from the parse.
    let mut fallback: Option<Vec<Option<String>>> = None;
    for (line_index, line) in hunk.lines.iter().enumerate() {
        let blank = text
            .get(line.start..line.end)
            .is_none_or(|content| content.trim().is_empty());
        if line.kind == HunkLineKind::Context || blank {
            continue;
        }
        let symbol = per_line[line_index].take().or_else(|| {
            let fallback = fallback.get_or_insert_with(|| {
                family
                    .map(|family| scope_symbols(hunk, text, family, header.as_ref()))
                    .unwrap_or_default()
            });
            let scanned = fallback.get(line_index).cloned().flatten()?;
            // A Java method known only from the hunk header belongs to the
            // file's class, as one shown in the fragment would.
            Some(match &file_type {
                Some((_, class)) if !scanned.contains('.') && &scanned != class => {
                    format!("{class}.{scanned}")
                }
                _ => scanned,
            })
        });
        if let Some(symbol) = symbol {
            push_unique(&mut result.changed, symbol, MAX_SYMBOLS_PER_HUNK);
        }
    }
    result
}

/// A C or C++ fragment with the braces it leaves open closed on a last line
/// of its own: a hunk inside a class or namespace rarely shows the closing
/// brace, and tree-sitter's error recovery drops an unclosed class (and with
/// it the qualifier of its methods). Braces in comments and string or
/// character literals do not count; a stray closing brace (a fragment that
/// starts inside a body) is ignored.
fn close_open_braces(source: &str) -> Cow<'_, str> {
    const MAX_CLOSED: usize = 64;
    let bytes = source.as_bytes();
    let mut depth = 0usize;
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        match byte {
            b'/' if bytes.get(index + 1) == Some(&b'/') => {
                while bytes.get(index).is_some_and(|byte| *byte != b'\n') {
                    index += 1;
                }
            }
            b'/' if bytes.get(index + 1) == Some(&b'*') => {
                index += 2;
                while let Some(&byte) = bytes.get(index) {
                    if byte == b'*' && bytes.get(index + 1) == Some(&b'/') {
                        index += 1;
                        break;
                    }
                    index += 1;
                }
            }
            b'"' | b'\'' => {
                let quote = byte;
                index += 1;
                while let Some(&byte) = bytes.get(index) {
                    if byte == b'\\' {
                        index += 1;
                    } else if byte == quote || byte == b'\n' {
                        break;
                    }
                    index += 1;
                }
            }
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        index += 1;
    }
    if depth == 0 {
        return Cow::Borrowed(source);
    }
    let mut closed = String::with_capacity(source.len() + MAX_CLOSED + 2);
    closed.push_str(source);
    if !closed.ends_with('\n') {
        closed.push('\n');
    }
    closed.push_str(&"}".repeat(depth.min(MAX_CLOSED)));
    closed.push('\n');
    Cow::Owned(closed)
}

/// A Python fragment that starts indented (inside a body, as most hunks do),
/// behind one `if 1:` line per indentation level it dedents to, so that it
/// parses as the blocks it shows rather than as an error (error recovery
/// also costs the parser several times more). The added lines define and
/// reference nothing; answers the text and how many lines were added.
fn open_python_blocks(source: &str) -> (Cow<'_, str>, usize) {
    const MAX_LEVELS: usize = 32;
    let indentation = |line: &str| -> Option<usize> {
        let body = line.trim_start_matches([' ', '\t']);
        (!body.trim().is_empty() && !body.starts_with('#')).then(|| line.len() - body.len())
    };
    let mut lines = source
        .lines()
        .filter_map(|line| Some((line, indentation(line)?)));
    let Some((_, first)) = lines.next() else {
        return (Cow::Borrowed(source), 0);
    };
    if first == 0 {
        return (Cow::Borrowed(source), 0);
    }
    // Each level below the first line's, shallowest first, as written.
    let mut levels: Vec<&str> = vec![""];
    for (line, width) in lines {
        if width < first && !levels.iter().any(|level| level.len() == width) {
            levels.push(line.get(..width).unwrap_or(""));
        }
    }
    if levels.len() > MAX_LEVELS {
        return (Cow::Borrowed(source), 0);
    }
    levels.sort_by_key(|level| level.len());
    let mut opened = String::with_capacity(source.len() + levels.len() * 16);
    for level in &levels {
        opened.push_str(level);
        opened.push_str("if 1:\n");
    }
    opened.push_str(source);
    (Cow::Owned(opened), levels.len())
}

/// Whether tree-sitter could find a definition in `source`: for Python see
/// [`python_may_define`]; Rust and Go define only after a keyword, so
/// without one there is nothing to find. Other languages define without a
/// keyword (methods, C functions) and are always parsed.
fn may_define(language: CodeLanguage, source: &str) -> bool {
    const RUST: [&str; 11] = [
        "fn",
        "struct",
        "enum",
        "trait",
        "impl",
        "mod",
        "const",
        "static",
        "type",
        "union",
        "macro_rules",
    ];
    const GO: [&str; 3] = ["func", "type", "const"];
    match language {
        CodeLanguage::Python => python_may_define(source),
        CodeLanguage::Rust => RUST.iter().any(|keyword| has_word(source, keyword)),
        CodeLanguage::Go => GO.iter().any(|keyword| has_word(source, keyword)),
        _ => true,
    }
}

/// Whether `word` occurs in `source` as a whole word.
fn has_word(source: &str, word: &str) -> bool {
    let is_word_byte = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80;
    let bytes = source.as_bytes();
    memchr::memmem::find_iter(bytes, word.as_bytes()).any(|position| {
        let before = position.checked_sub(1).and_then(|index| bytes.get(index));
        let after = bytes.get(position + word.len());
        !before.is_some_and(|byte| is_word_byte(*byte))
            && !after.is_some_and(|byte| is_word_byte(*byte))
    })
}

/// Whether tree-sitter could find a Python definition in `source`: a
/// `def` or `class` keyword, or a line starting with a name at column 0 (a
/// module-level constant). When not, parsing it for definitions is wasted.
fn python_may_define(source: &str) -> bool {
    has_keyword(source, "def")
        || has_keyword(source, "class")
        || super::text::lines_with_offsets(source).any(|line| {
            line.text
                .starts_with(|character: char| character.is_alphabetic() || character == '_')
        })
}

/// Whether `keyword` occurs in `source` as a whole word followed by
/// whitespace (as it must be to define a name: `def name`, `class Name`).
fn has_keyword(source: &str, keyword: &str) -> bool {
    let is_word_character = |character: char| character.is_alphanumeric() || character == '_';
    source.match_indices(keyword).any(|(position, _)| {
        let before = source
            .get(..position)
            .and_then(|head| head.chars().next_back());
        let after = source
            .get(position + keyword.len()..)
            .and_then(|tail| tail.chars().next());
        !before.is_some_and(is_word_character)
            && after.is_some_and(|character| matches!(character, ' ' | '\t' | '\x0c' | '\\'))
    })
}

/// The new side of a hunk as parsed: its fragment, and its tags, whose rows
/// are the fragment's plus `offset`.
struct NewSide {
    tags: Rc<Tags>,
    offset: usize,
    fragment: Fragment,
}

impl NewSide {
    /// The parsed row of hunk line `line`, if it is on the new side.
    fn row(&self, line: Option<usize>) -> Option<usize> {
        let row = self.fragment.row_of_line.get(line?).copied().flatten()?;
        Some(row + self.offset)
    }

    /// Whether parsed row `row` holds a context line.
    fn is_context_row(&self, row: usize) -> bool {
        row.checked_sub(self.offset)
            .and_then(|row| self.fragment.rows.get(row))
            .is_some_and(|(_, changed)| !changed)
    }
}

/// For each hunk line, the nearest context line before and after it.
struct ContextNeighbours {
    before: Vec<Option<usize>>,
    after: Vec<Option<usize>>,
}

impl ContextNeighbours {
    fn of(hunk: &Hunk) -> ContextNeighbours {
        let count = hunk.lines.len();
        let mut before = vec![None; count];
        let mut after = vec![None; count];
        let mut last = None;
        for (index, line) in hunk.lines.iter().enumerate() {
            before[index] = last;
            if line.kind == HunkLineKind::Context {
                last = Some(index);
            }
        }
        last = None;
        for (index, line) in hunk.lines.iter().enumerate().rev() {
            after[index] = last;
            if line.kind == HunkLineKind::Context {
                last = Some(index);
            }
        }
        ContextNeighbours { before, after }
    }

    /// Rows of the new-side `fragment` holding the context lines around removed lines.
    fn rows_around_removed(&self, hunk: &Hunk, fragment: &Fragment) -> Vec<usize> {
        let row = |line: Option<usize>| fragment.row_of_line.get(line?).copied().flatten();
        hunk.lines
            .iter()
            .enumerate()
            .filter(|(_, line)| line.kind == HunkLineKind::Removed)
            .flat_map(|(index, _)| [row(self.before[index]), row(self.after[index])])
            .flatten()
            .collect()
    }
}

/// The old-side definition enclosing each non-blank removed line of a hunk
/// (or none), told from the new side's parse instead of parsing the old
/// side. Safe when no removed line may start a definition: then only
/// definitions starting on context lines can enclose it, and the text up to
/// the context line just before it is the same on both sides. Without such
/// a definition around that line, none encloses it; otherwise one that also
/// covers the context line just after it covers it on the old side too, the
/// text in between differing only in lines that define nothing. In Python,
/// where blocks are indentation, the line belongs to the innermost of them
/// indented less than the line. None when some line cannot be placed so
/// (the old side is parsed then).
fn removed_from_new_side<'n>(
    hunk: &Hunk,
    text: &str,
    language: CodeLanguage,
    family: Option<Family>,
    neighbours: &ContextNeighbours,
    new_side: &'n NewSide,
) -> Option<Vec<(usize, Option<&'n Definition>)>> {
    let removed: Vec<(usize, &str)> = hunk
        .lines
        .iter()
        .enumerate()
        .filter(|(_, line)| line.kind == HunkLineKind::Removed)
        .map(|(index, line)| (index, text.get(line.start..line.end).unwrap_or("")))
        .filter(|(_, content)| !content.trim().is_empty())
        .collect();
    if lines_may_define(
        language,
        family,
        removed.iter().map(|(_, content)| *content),
    ) {
        return None;
    }
    let innermost = |definitions: &mut dyn Iterator<Item = &'n Definition>| {
        definitions.min_by_key(|definition| {
            (
                definition.end_row - definition.start_row,
                usize::MAX - definition.start_row,
            )
        })
    };
    let mut placed = Vec::with_capacity(removed.len());
    for (index, content) in removed {
        let before = new_side.row(neighbours.before[index])?;
        let mut around = new_side
            .tags
            .definitions
            .iter()
            .filter(|definition| definition.start_row <= before && before <= definition.end_row)
            .filter(|definition| definition.kind != "constant" || definition.start_column == 0)
            .filter(|definition| new_side.is_context_row(definition.start_row))
            .peekable();
        if around.peek().is_none() {
            placed.push((index, None));
            continue;
        }
        let definition = if language == CodeLanguage::Python {
            let indentation = content.len() - content.trim_start_matches([' ', '\t']).len();
            innermost(&mut around.filter(|definition| definition.start_column < indentation))
        } else {
            let after = new_side.row(neighbours.after[index])?;
            Some(innermost(
                &mut around.filter(|definition| after <= definition.end_row),
            )?)
        };
        placed.push((index, definition));
    }
    Some(placed)
}

/// Whether one of `lines` may start a definition: the line scan finds one,
/// or (Python, Rust, Go) a defining keyword or a decorator is there; in the other languages
/// a declaring keyword, an arrow function, or a line with parentheses that
/// is not a statement (a function head, `foo(x) {`) or that declares (`int
/// foo(int);`). Errs towards yes: a yes only costs a parse.
fn lines_may_define<'l>(
    language: CodeLanguage,
    family: Option<Family>,
    lines: impl Iterator<Item = &'l str> + Clone,
) -> bool {
    const DECLARING: [&str; 16] = [
        "class",
        "struct",
        "union",
        "enum",
        "namespace",
        "typedef",
        "using",
        "template",
        "interface",
        "function",
        "define",
        "type",
        "record",
        "module",
        "operator",
        "macro",
    ];
    const CONTROL: [&str; 14] = [
        "if",
        "else",
        "for",
        "while",
        "do",
        "switch",
        "case",
        "return",
        "throw",
        "catch",
        "try",
        "delete",
        "new",
        "co_return",
    ];
    if let Some(family) = family
        && lines.clone().any(|line| {
            let at_top_level = !line.starts_with([' ', '\t']);
            line_definition(line, family, at_top_level).is_some()
        })
    {
        return true;
    }
    let mut joined = String::new();
    for line in lines.clone() {
        joined.push_str(line);
        joined.push('\n');
    }
    match language {
        // A decorator starts the definition it decorates.
        CodeLanguage::Python => {
            may_define(language, &joined)
                || lines
                    .into_iter()
                    .any(|line| line.trim_start().starts_with('@'))
        }
        CodeLanguage::Rust | CodeLanguage::Go => may_define(language, &joined),
        _ => {
            DECLARING.iter().any(|keyword| has_word(&joined, keyword))
                || joined.contains("=>")
                || lines.into_iter().any(|line| {
                    let trimmed = line.trim();
                    let first_word = trimmed
                        .split(|character: char| !character.is_alphanumeric() && character != '_')
                        .next()
                        .unwrap_or("");
                    let Some(paren) = trimmed.find('(') else {
                        return false;
                    };
                    if CONTROL.contains(&first_word) {
                        return false;
                    }
                    let head = trimmed.get(..paren).unwrap_or("");
                    !trimmed.ends_with(';')
                        || (!head.contains(['=', '.', '!', '"', '\''])
                            && !head.contains("->")
                            && head.split_whitespace().count() >= 2)
                })
        }
    }
}

/// The innermost definition (smallest row span) covering `row`; module-level
/// constants count only when they start at column 0.
fn innermost_definition(definitions: &[Definition], row: usize) -> Option<&Definition> {
    definitions
        .iter()
        .filter(|definition| definition.start_row <= row && row <= definition.end_row)
        .filter(|definition| definition.kind != "constant" || definition.start_column == 0)
        .min_by_key(|definition| {
            (
                definition.end_row - definition.start_row,
                usize::MAX - definition.start_row,
            )
        })
}

/// The file name without directories and extension (`Version` of `src/Version.java`).
fn file_stem(path: &str) -> Option<String> {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    super::text::is_identifier(stem).then(|| stem.to_string())
}

/// Qualifies an indented member the fragment shows without its container by
/// the hunk header's type (or, for Java, the file's class).
fn qualify_with_header(
    definition: &Definition,
    header: Option<&(DefinitionKind, String)>,
    separator: &str,
) -> String {
    let unqualified = definition.qualified_name == definition.name;
    let is_member_kind = matches!(definition.kind.as_str(), "function" | "method" | "constant");
    if let Some((DefinitionKind::Type, type_name)) = header
        && unqualified
        && is_member_kind
        && definition.start_column > 0
        && type_name != &definition.name
    {
        return format!("{type_name}{separator}{}", definition.name);
    }
    definition.qualified_name.clone()
}

/// The line-based scan: for each hunk line, the innermost definition seen
/// earlier in the hunk at a smaller indentation, else the header's.
fn scope_symbols(
    hunk: &Hunk,
    text: &str,
    family: Family,
    header: Option<&(DefinitionKind, String)>,
) -> Vec<Option<String>> {
    // (indentation, kind, qualified name) innermost last; the header has indentation 0.
    let mut old_scopes: Vec<(usize, DefinitionKind, String)> = Vec::new();
    if let Some((kind, name)) = header {
        old_scopes.push((0, *kind, name.clone()));
    }
    let mut new_scopes = old_scopes.clone();
    let mut symbols = Vec::with_capacity(hunk.lines.len());
    for line in &hunk.lines {
        let content = text.get(line.start..line.end).unwrap_or("");
        let changed = line.kind != HunkLineKind::Context;
        let mut symbol = None;
        for (scopes, applies) in [
            (&mut old_scopes, line.kind != HunkLineKind::Added),
            (&mut new_scopes, line.kind != HunkLineKind::Removed),
        ] {
            if !applies {
                continue;
            }
            let found = advance_scopes(scopes, content, family);
            if changed && symbol.is_none() {
                symbol = found;
            }
        }
        symbols.push(symbol);
    }
    symbols
}

/// Updates the scope stack with one line and returns the symbol the line belongs to.
fn advance_scopes(
    scopes: &mut Vec<(usize, DefinitionKind, String)>,
    content: &str,
    family: Family,
) -> Option<String> {
    let stripped = content.trim();
    if stripped.is_empty() {
        return scopes.last().map(|scope| scope.2.clone());
    }
    let indentation = content.len() - content.trim_start_matches([' ', '\t']).len();
    if stripped.starts_with('#') || stripped.starts_with('@') || stripped == "{" {
        return scopes.last().map(|scope| scope.2.clone());
    }
    while scopes
        .last()
        .is_some_and(|(scope_indentation, _, _)| *scope_indentation >= indentation)
    {
        scopes.pop();
    }
    if let Some((kind, name)) = line_definition(content, family, indentation == 0) {
        let qualified = match scopes.last() {
            Some((_, DefinitionKind::Type, container)) => {
                format!("{container}{}{name}", family.separator())
            }
            _ => name,
        };
        scopes.push((indentation, kind, qualified));
    }
    scopes.last().map(|scope| scope.2.clone())
}

/// Filters out names too generic to say anything (builtins, one letter).
fn is_interesting_reference(name: &str) -> bool {
    const COMMON: &[&str] = &[
        "print",
        "len",
        "str",
        "int",
        "float",
        "bool",
        "list",
        "dict",
        "set",
        "tuple",
        "range",
        "isinstance",
        "super",
        "self",
        "append",
        "extend",
        "get",
        "items",
        "keys",
        "values",
        "format",
        "join",
        "split",
        "strip",
        "replace",
        "startswith",
        "endswith",
        "lower",
        "upper",
        "new",
        "unwrap",
        "expect",
        "clone",
        "to_string",
        "into",
        "push",
        "map",
        "iter",
        "collect",
        "Some",
        "None",
        "Ok",
        "Err",
        "Self",
        "String",
        "Vec",
        "Option",
        "Result",
        "println",
        "format_args",
        "vec",
        "assert",
        "assert_eq",
        "panic",
        "log",
        "push_str",
        "toString",
        "length",
        "forEach",
        "require",
        "Error",
        "Println",
        "Printf",
        "Sprintf",
        "Errorf",
        "equals",
        "add",
        "put",
        "size",
        "is_empty",
        "hasattr",
        "getattr",
        "setattr",
        "sorted",
        "enumerate",
        "zip",
        "min",
        "max",
        "any",
        "all",
        "open",
        "next",
        "id",
        "abs",
        "sum",
        "repr",
        "type",
        "object",
        "callable",
        "issubclass",
        "bytes",
        "pop",
        "update",
        "copy",
        "insert",
        "remove",
        "write",
        "read",
        "close",
        "Exception",
        "ValueError",
        "TypeError",
        "KeyError",
        "RuntimeError",
        "NotImplementedError",
        "AttributeError",
        "IndexError",
        "to_owned",
        "as_str",
        "as_ref",
        "unwrap_or",
        "ok",
        "err",
        "is_some",
        "is_none",
        "fmt",
        "from",
        "default",
        "then",
        "catch",
        "slice",
        "concat",
        "indexOf",
        "includes",
        "filter",
        "reduce",
        "parseInt",
        "Number",
        "Object",
        "Array",
        "Promise",
        "JSON",
        "stringify",
        "parse",
    ];
    name.len() >= 2 && !COMMON.contains(&name)
}

/// Definitions (qualified names) shown in a code text of a known language,
/// e.g. a fenced block or a file view: by tree-sitter within `budget`, else
/// (budget spent, text too large or not code-like) by the line scan. Python
/// is always line-scanned ([`python_scan_definitions`]): on views it finds
/// what tree-sitter finds (97% of the dev set's views alike; most of the
/// rest are fragments tree-sitter's error recovery loses definitions or
/// qualifiers of) at a fraction of the cost.
pub fn code_definitions(
    language: CodeLanguage,
    source: &str,
    cap: usize,
    budget: &mut ParseBudget,
) -> Vec<String> {
    if language == CodeLanguage::Python {
        return python_scan_definitions(source, cap);
    }
    // A C snippet (a `.h` view, a `c` fence) may well be C++.
    let language = match language {
        CodeLanguage::C if looks_like_cpp(source) || opens_class(source) => CodeLanguage::Cpp,
        _ => language,
    };
    let mut names = Vec::new();
    let tags = extract_tags_within(language, source, budget);
    match tags {
        Some(tags) => {
            for definition in &tags.definitions {
                if definition.kind != "constant" {
                    push_unique(&mut names, definition.qualified_name.clone(), cap);
                }
            }
        }
        None => {
            let family = language.family();
            let mut scopes = Vec::new();
            for line in super::text::lines_with_offsets(source) {
                let indentation = line.text.len() - line.text.trim_start_matches([' ', '\t']).len();
                let defines = line_definition(line.text, family, indentation == 0).is_some();
                let symbol = advance_scopes(&mut scopes, line.text, family);
                if defines && let Some(name) = symbol {
                    push_unique(&mut names, name, cap);
                }
                if names.len() >= cap {
                    break;
                }
            }
        }
    }
    names
}

/// Where a Python line scan stands at the end of a line: inside a string
/// literal, inside brackets, or after a backslash continuation.
#[derive(Debug, Default)]
struct PythonLexState {
    /// The open string's quote byte and whether it is triple-quoted.
    string: Option<(u8, bool)>,
    /// Open brackets (capped).
    brackets: usize,
    /// The line ended with a backslash outside a string.
    continued: bool,
}

impl PythonLexState {
    /// Whether the next line starts a logical line (a statement).
    fn at_statement_start(&self) -> bool {
        self.string.is_none() && self.brackets == 0 && !self.continued
    }

    /// Moves over one line: strings, comments, brackets, continuations.
    fn advance(&mut self, line: &str) {
        const MAX_BRACKETS: usize = 1_000;
        let bytes = line.as_bytes();
        let mut index = 0;
        self.continued = false;
        while let Some(&byte) = bytes.get(index) {
            if let Some((quote, triple)) = self.string {
                if byte == b'\\' {
                    index += 2;
                    continue;
                }
                if byte == quote {
                    if !triple {
                        self.string = None;
                    } else if bytes.get(index + 1) == Some(&quote)
                        && bytes.get(index + 2) == Some(&quote)
                    {
                        self.string = None;
                        index += 3;
                        continue;
                    }
                }
                index += 1;
                continue;
            }
            match byte {
                b'#' => break,
                b'"' | b'\'' => {
                    let triple =
                        bytes.get(index + 1) == Some(&byte) && bytes.get(index + 2) == Some(&byte);
                    self.string = Some((byte, triple));
                    index += if triple { 3 } else { 1 };
                    continue;
                }
                b'(' | b'[' | b'{' => self.brackets = (self.brackets + 1).min(MAX_BRACKETS),
                b')' | b']' | b'}' => self.brackets = self.brackets.saturating_sub(1),
                b'\\' if index + 1 == bytes.len() => self.continued = true,
                _ => {}
            }
            index += 1;
        }
        // Only triple-quoted strings span lines.
        if let Some((_, false)) = self.string {
            self.string = None;
        }
    }
}

/// The name a Python statement defines (`def name(`, `async def name(`,
/// `class Name:` / `class Name(`), from its text without indentation.
fn python_definition_name(statement: &str) -> Option<&str> {
    let after_async = match statement.strip_prefix("async") {
        Some(rest) if rest.starts_with([' ', '\t']) => rest.trim_start_matches([' ', '\t']),
        _ => statement,
    };
    let (rest, is_function) = if let Some(rest) = after_async.strip_prefix("def") {
        (rest, true)
    } else if let Some(rest) = statement.strip_prefix("class") {
        (rest, false)
    } else {
        return None;
    };
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let name_length = rest
        .char_indices()
        .find(|(_, character)| !(character.is_alphanumeric() || *character == '_'))
        .map_or(rest.len(), |(position, _)| position);
    let name = rest.get(..name_length)?;
    if name.is_empty() || name.starts_with(|character: char| character.is_ascii_digit()) {
        return None;
    }
    let after_name = rest.get(name_length..)?.trim_start_matches([' ', '\t']);
    let opens = if is_function {
        after_name.starts_with('(')
    } else {
        after_name.starts_with(['(', ':'])
    };
    opens.then_some(name)
}

/// Whether a Python line starts with a keyword that only starts statements
/// (never appears inside brackets).
fn starts_with_statement_keyword(statement: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "def", "class", "async", "return", "elif", "except", "finally", "try", "while", "raise",
        "pass", "import", "del", "assert", "global", "nonlocal", "continue", "break", "with",
    ];
    KEYWORDS.iter().any(|keyword| {
        statement
            .strip_prefix(keyword)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', ':', '(', ';']))
    })
}

/// Width of a line's indentation (a tab counts 8, as in Python).
fn python_indentation(line: &str) -> usize {
    let mut width = 0;
    for character in line.chars() {
        match character {
            ' ' => width += 1,
            '\t' => width = (width / 8 + 1) * 8,
            '\x0c' => width = 0,
            _ => break,
        }
    }
    width
}

/// Python definitions (classes and functions, qualified by their enclosing
/// classes and functions like the tree-sitter tags) of a code text, by a line
/// scan that skips string literals, comments and bracketed continuations.
/// Like tree-sitter on a fragment, it can be misled by a view that starts
/// inside a docstring.
pub fn python_scan_definitions(source: &str, cap: usize) -> Vec<String> {
    let mut state = PythonLexState::default();
    let mut names = Vec::new();
    let mut scopes: Vec<(usize, &str)> = Vec::new();
    for line in super::text::lines_with_offsets(source) {
        let statement = line.text.trim_start_matches([' ', '\t', '\x0c']);
        let mut statement_start = state.at_statement_start();
        if !statement_start && state.string.is_none() && starts_with_statement_keyword(statement) {
            // Brackets left open by a cut or elided view: a statement keyword
            // cannot be inside brackets, so a new statement starts here.
            state.brackets = 0;
            state.continued = false;
            statement_start = true;
        }
        state.advance(line.text);
        if !statement_start {
            continue;
        }
        if statement.is_empty() || statement.starts_with('#') {
            continue;
        }
        let indentation = python_indentation(line.text);
        while scopes
            .last()
            .is_some_and(|(scope_indentation, _)| *scope_indentation >= indentation)
        {
            scopes.pop();
        }
        let Some(name) = python_definition_name(statement) else {
            continue;
        };
        let skip = scopes.len().saturating_sub(MAX_QUALIFIERS);
        let mut qualified = String::new();
        for (_, container) in scopes.iter().skip(skip) {
            qualified.push_str(container);
            qualified.push('.');
        }
        qualified.push_str(name);
        push_unique(&mut names, qualified, cap);
        if names.len() >= cap {
            break;
        }
        scopes.push((indentation, name));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::diff::parse_diffs;

    fn check_tags(language: CodeLanguage, source: &str, definitions: &[&str], references: &[&str]) {
        assert_eq!(
            check_query(language),
            Ok(()),
            "{language:?} query must compile"
        );
        let tags = extract_tags(language, source).expect("parses");
        let got: Vec<&str> = tags
            .definitions
            .iter()
            .map(|definition| definition.qualified_name.as_str())
            .collect();
        for expected in definitions {
            assert!(
                got.contains(expected),
                "{language:?}: {expected} not in {got:?}"
            );
        }
        let got_references: Vec<&str> = tags
            .references
            .iter()
            .map(|reference| reference.name.as_str())
            .collect();
        for expected in references {
            assert!(
                got_references.contains(expected),
                "{language:?}: reference {expected} not in {got_references:?}"
            );
        }
    }

    #[test]
    fn tags_in_rows_keep_what_hunks_use() {
        // For every row: the innermost definition covering it and the
        // references on it are the same whether the query ran over the whole
        // tree or over that row only.
        let sources = [
            (
                CodeLanguage::Python,
                "import os\nLIMIT = 3\n\nclass A(Base):\n    @property\n    @cached(\n        1)\n    def size(self):\n        return len(self.items)\n\n    def grow(self, n):\n        def inner():\n            return helper(n)\n        return inner()\n\n@decorate\ndef top(x):\n    return os.path.join(x)\n",
            ),
            (
                CodeLanguage::Rust,
                "mod printer {\n    #[derive(Debug)]\n    pub struct Standard<W> { w: W }\n    impl<W: Write> Sink for Standard<W> {\n        fn matched(&mut self) -> bool {\n            self.write_line();\n            helper(1)\n        }\n    }\n}\nfn main() {\n    run();\n}\n",
            ),
            (
                CodeLanguage::Cpp,
                "namespace ns {\nclass Foo {\n public:\n  int bar(int x) {\n    return baz(x);\n  }\n};\n}\nvoid Foo::qux() {\n  call();\n}\n",
            ),
            (
                CodeLanguage::Go,
                "package p\n\ntype S struct{}\n\nfunc (s *S) Run() {\n\ts.step()\n}\n\nfunc main() {\n\tRun()\n}\n",
            ),
            (
                CodeLanguage::JavaScript,
                "class A {\n  m() {\n    return f(1);\n  }\n}\nfunction g() {\n  h();\n}\n",
            ),
        ];
        for (language, source) in sources {
            let full = extract_tags_within(language, source, &mut ParseBudget::generous())
                .expect("parses");
            for row in 0..source.lines().count() {
                let restricted =
                    extract_tags_in_rows(language, source, row, row, &mut ParseBudget::generous())
                        .expect("parses");
                let name = |tags: &Tags| {
                    innermost_definition(&tags.definitions, row)
                        .map(|definition| definition.qualified_name.clone())
                };
                let on_row = |tags: &Tags| -> Vec<String> {
                    tags.references
                        .iter()
                        .filter(|reference| reference.row == row)
                        .map(|reference| reference.name.clone())
                        .collect()
                };
                assert_eq!(name(&restricted), name(&full), "{language:?} row {row}");
                assert_eq!(on_row(&restricted), on_row(&full), "{language:?} row {row}");
            }
        }
    }

    #[test]
    fn python_query_compiles_and_tags() {
        check_tags(
            CodeLanguage::Python,
            "class PolyFit(Stat):\n    order: int = 2\n\n    def _fit_predict(self, data):\n        return np.polyfit(data)\n",
            &["PolyFit", "PolyFit._fit_predict"],
            &["polyfit", "Stat"],
        );
    }

    #[test]
    fn rust_query_compiles_and_tags() {
        check_tags(
            CodeLanguage::Rust,
            "mod printer {\n    impl<W: Write> Sink for Standard<W> {\n        fn matched(&mut self) -> bool {\n            self.write_line()\n        }\n    }\n    pub struct Standard<W> { w: W }\n}\n",
            &["printer::Standard::matched", "printer::Standard", "printer"],
            &["write_line", "Sink"],
        );
    }

    #[test]
    fn javascript_query_compiles_and_tags() {
        check_tags(
            CodeLanguage::JavaScript,
            "class Dayjs {\n  diff(input) {\n    return this.utcOffset()\n  }\n}\nproto.utc = function (keepLocalTime) {\n  return dayjs(this)\n}\n",
            &["Dayjs", "Dayjs.diff", "utc"],
            &["utcOffset", "dayjs"],
        );
    }

    #[test]
    fn typescript_query_compiles_and_tags() {
        check_tags(
            CodeLanguage::TypeScript,
            "interface Options { a: number }\nexport class Parser {\n  parse(input: string): Options {\n    return build(input)\n  }\n}\n",
            &["Options", "Parser", "Parser.parse"],
            &["build", "Options"],
        );
        check_tags(
            CodeLanguage::Tsx,
            "function App(props: Props) {\n  return <div>{render(props)}</div>\n}\n",
            &["App"],
            &["render"],
        );
    }

    #[test]
    fn go_query_compiles_and_tags() {
        check_tags(
            CodeLanguage::Go,
            "package grpc\n\ntype ccBalancerWrapper struct { cc *ClientConn }\n\nfunc (ccb *ccBalancerWrapper) handleResolvedAddrs(addrs []Address) {\n\tccb.cc.updateState(addrs)\n}\n\nfunc newCCBalancerWrapper() {}\n",
            &[
                "ccBalancerWrapper",
                "ccBalancerWrapper.handleResolvedAddrs",
                "newCCBalancerWrapper",
            ],
            &["updateState", "ClientConn"],
        );
    }

    #[test]
    fn java_query_compiles_and_tags() {
        check_tags(
            CodeLanguage::Java,
            "public class RegistryAuthenticator {\n  static RegistryAuthenticator fromAuthenticationMethod(String header) {\n    return header.matches(\"^(?i)(basic).*\") ? null : new RegistryAuthenticator();\n  }\n}\n",
            &[
                "RegistryAuthenticator",
                "RegistryAuthenticator.fromAuthenticationMethod",
            ],
            &["matches", "RegistryAuthenticator"],
        );
    }

    #[test]
    fn c_query_compiles_and_tags() {
        check_tags(
            CodeLanguage::C,
            "typedef struct buffer { char *data; } buffer_t;\nenum mode { FAST, SLOW };\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\nint grow(buffer_t *b, size_t n);\nstatic char *buffer_grow(buffer_t *b, size_t n) {\n    return realloc(b->data, n);\n}\n",
            &["buffer", "buffer_t", "mode", "MAX", "grow", "buffer_grow"],
            &["realloc", "buffer_t"],
        );
    }

    #[test]
    fn cpp_query_compiles_and_tags() {
        check_tags(
            CodeLanguage::Cpp,
            "namespace fmt {\ntemplate <typename Range> class basic_writer {\n public:\n  void write_pointer(const void* p) {\n    write_ptr(p);\n  }\n  void write(int value);\n  ~basic_writer() {}\n};\nstruct point { int x; };\nenum class color { red };\nusing writer = basic_writer<buffer>;\n}\nvoid Foo::bar() { detail::helper(); }\ntemplate <typename T> T& Box<T>::get() { return item; }\nFoo::~Foo() {}\nint main() { return run(new Widget()); }\n",
            &[
                "fmt",
                "fmt::basic_writer",
                "fmt::basic_writer::write_pointer",
                "fmt::basic_writer::write",
                "fmt::basic_writer::~basic_writer",
                "fmt::point",
                "fmt::color",
                "fmt::writer",
                "Foo::bar",
                "Box::get",
                "Foo::~Foo",
                "main",
            ],
            &["write_ptr", "helper", "run", "Widget", "buffer"],
        );
        let tags = extract_tags(CodeLanguage::Cpp, "void Foo::bar() {}\n").expect("parses");
        let definition = tags.definitions.first().expect("a definition");
        assert_eq!(
            (
                definition.name.as_str(),
                definition.qualified_name.as_str(),
                definition.kind.as_str()
            ),
            ("bar", "Foo::bar", "method")
        );
    }

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

    fn check_hunks(diff: &str, expected_changed: &[&[&str]]) {
        let parsed = parse_diffs(diff);
        let mut got: Vec<Vec<String>> = Vec::new();
        for file in &parsed.files {
            for hunk in &file.hunks {
                got.push(
                    hunk_symbols(
                        file.path().unwrap_or(""),
                        hunk,
                        diff,
                        &mut ParseBudget::default(),
                    )
                    .changed,
                );
            }
        }
        let expected: Vec<Vec<String>> = expected_changed
            .iter()
            .map(|symbols| symbols.iter().map(|s| s.to_string()).collect())
            .collect();
        assert_eq!(got, expected, "changed symbols of:\n{diff}");
    }

    #[test]
    fn python_hunk_uses_header_function_when_fragment_has_no_definition() {
        check_hunks(
            "--- a/msal/application.py\n+++ b/msal/application.py\n@@ -170,3 +170,4 @@ def __init__(\n             exclude_scopes=None,\n+            http_cache=None,\n             ):\n         \"\"\"Create an instance of application.\n",
            &[&["__init__"]],
        );
    }

    #[test]
    fn python_hunk_method_qualified_by_header_class() {
        check_hunks(
            "--- a/src/_pytest/fixtures.py\n+++ b/src/_pytest/fixtures.py\n@@ -634,6 +634,7 @@ class FixtureRequest(FuncargnamesCompatAttr):\n         return node\n \n     def __repr__(self):\n+        return f\"{self.func.__name__} (scope='{self.scope}')\"\n         return \"<FixtureRequest for %r>\" % (self.node)\n \n \n",
            &[&["FixtureRequest.__repr__"]],
        );
    }

    #[test]
    fn python_hunk_new_function_and_class_body() {
        check_hunks(
            "--- a/x.py\n+++ b/x.py\n@@ -1,5 +1,8 @@\n class A:\n-    order = 1\n+    order = 2\n \n     def f(self):\n         pass\n+\n+def helper():\n+    return 1\n",
            &[&["A", "helper"]],
        );
    }

    #[test]
    fn python_hunk_starting_in_a_body_parses_the_blocks_after_it() {
        // The fragment starts inside a list in a class body; the class added
        // after it owns its methods (error recovery from the indented start
        // gave them to the header's class).
        check_hunks(
            "--- a/bench.py\n+++ b/bench.py\n@@ -106,5 +106,11 @@ class Neighbors(Benchmark):\n         [0.2, 0.5],\n     ]\n \n     def setup(self, n):\n         self.n = n\n+\n+class CNeighbors(Benchmark):\n+    def setup(self, m):\n+        self.m = m\n+\n+    def time_deep(self, m):\n+        self.run(m)\n",
            &[&["CNeighbors", "CNeighbors.setup", "CNeighbors.time_deep"]],
        );
        assert_eq!(
            open_python_blocks("        a = 1\n    def f(self):\n  b\n# c\n"),
            (
                Cow::Owned::<str>(
                    "if 1:\n  if 1:\n    if 1:\n        a = 1\n    def f(self):\n  b\n# c\n".into()
                ),
                3
            )
        );
        assert_eq!(open_python_blocks("x = 1\n    y\n").1, 0);
    }

    #[test]
    fn removed_lines_are_placed_from_the_new_side_as_the_old_side_parse_would() {
        // (diff, whether the new side may place its removed lines): each
        // placement must be what parsing the old side gives.
        let hunks = [
            // Python: inside a method, in a nested function, and past it.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,10 +1,10 @@\n class A:\n     def f(self):\n         x = 1\n-        y = 2\n+        y = 3\n         def inner():\n             return x\n-            pass\n+            return y\n         z = inner\n-        del x\n+        del z\n         return inner\n",
                true,
            ),
            // Python: the top level after a function.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,4 +1,4 @@\n def f():\n     return 1\n if x:\n-    run(1)\n+    run(2)\n",
                true,
            ),
            // Python: a line after a nested function, dedented out of it.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,6 +1,6 @@\n class A:\n     def f(self):\n         def inner():\n             return 1\n-        y = inner()\n+        y = inner() + 1\n         return y\n",
                true,
            ),
            // Python: a line at the top level may define a constant.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,4 +1,4 @@\n def f():\n     return 1\n-X = 2\n+X = 3\n",
                false,
            ),
            // Python: a removed decorator belongs to the definition below it.
            (
                "--- a/m.py\n+++ b/m.py\n@@ -1,6 +1,6 @@\n class A:\n     def f(self):\n         pass\n-    @property\n+    @cached\n     def g(self):\n         pass\n",
                false,
            ),
            // Rust: inside a method, with no definition in the fragment.
            (
                "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,7 +1,7 @@\n impl Foo {\n     fn run(&self) {\n-        old();\n+        new();\n     }\n }\n fn other() {}\n",
                true,
            ),
            (
                "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -9,3 +9,3 @@\n         let x = 1;\n-        old(x);\n+        new(x);\n     }\n",
                true,
            ),
            // C++: a member declaration removed in a class body.
            (
                "--- a/a.h\n+++ b/a.h\n@@ -1,6 +1,6 @@\n class document {\n  public:\n-  element_result<array> as_array() const noexcept;\n+  array_result as_array() const noexcept;\n   int size() const;\n };\n",
                false,
            ),
            // Go: a statement in a method.
            (
                "--- a/a.go\n+++ b/a.go\n@@ -1,5 +1,5 @@\n func (s *S) Run() {\n-\ts.old()\n+\ts.step()\n \treturn\n }\n",
                true,
            ),
        ];
        let parse = |language: CodeLanguage, source: &str| -> (Rc<Tags>, usize) {
            let (source, offset) = match language {
                CodeLanguage::Python => open_python_blocks(source),
                _ => (Cow::Borrowed(source), 0),
            };
            let tags = extract_tags_within(language, &source, &mut ParseBudget::generous());
            (tags.expect("parses"), offset)
        };
        for (diff, placeable) in hunks {
            let parsed = parse_diffs(diff);
            let file = &parsed.files[0];
            let hunk = &file.hunks[0];
            let path = file.path().unwrap_or("");
            let language = CodeLanguage::from_path(path).expect("a language");
            let new_fragment = build_fragment(hunk, diff, HunkLineKind::Added);
            let (tags, offset) = parse(language, &new_fragment.source);
            let new_side = NewSide {
                tags,
                offset,
                fragment: new_fragment,
            };
            let placed = removed_from_new_side(
                hunk,
                diff,
                language,
                Family::from_path(path),
                &ContextNeighbours::of(hunk),
                &new_side,
            );
            assert_eq!(placed.is_some(), placeable, "{diff}");
            let old_fragment = build_fragment(hunk, diff, HunkLineKind::Removed);
            let (old_tags, old_offset) = parse(language, &old_fragment.source);
            for (line_index, definition) in placed.unwrap_or_default() {
                let row = old_fragment
                    .rows
                    .iter()
                    .position(|(index, _)| *index == line_index)
                    .expect("a removed line is on the old side");
                assert_eq!(
                    definition.map(|definition| &definition.qualified_name),
                    innermost_definition(&old_tags.definitions, row + old_offset)
                        .map(|definition| &definition.qualified_name),
                    "line {line_index} of:\n{diff}"
                );
            }
        }
    }

    #[test]
    fn python_module_constant_is_a_symbol() {
        check_hunks(
            "--- a/src/_pytest/logging.py\n+++ b/src/_pytest/logging.py\n@@ -15,3 +15,3 @@ from _pytest.compat import dummy_context_manager\n \n-DEFAULT_LOG_FORMAT = \"%(filename)-25s %(message)s\"\n+DEFAULT_LOG_FORMAT = \"%(levelname)-8s %(message)s\"\n DEFAULT_LOG_DATE_FORMAT = \"%H:%M:%S\"\n",
            &[&["DEFAULT_LOG_FORMAT"]],
        );
    }

    #[test]
    fn rust_hunk_inside_impl_from_header() {
        check_hunks(
            "diff --git a/src/args.rs b/src/args.rs\n--- a/src/args.rs\n+++ b/src/args.rs\n@@ -10,4 +10,7 @@ impl ArgMatches {\n     fn overrides(&self) -> Result<Override> {\n         let mut builder = OverrideBuilder::new(env::current_dir()?);\n+        if self.is_present(\"glob-case-insensitive\") {\n+            builder.case_insensitive(true).unwrap();\n+        }\n         for glob in self.values_of_lossy_vec(\"glob\") {\n",
            &[&["ArgMatches::overrides"]],
        );
    }

    #[test]
    fn rust_hunk_header_function_only() {
        check_hunks(
            "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -3,2 +3,2 @@ fn run(args: Args) -> Result<()> {\n     let x = 1;\n-    old();\n+    new_call();\n",
            &[&["run"]],
        );
    }

    #[test]
    fn go_and_java_and_js_hunks() {
        check_hunks(
            "--- a/clientconn.go\n+++ b/clientconn.go\n@@ -1,3 +1,4 @@\n func (cc *ClientConn) Close() error {\n+\tif cc == nil { return nil }\n \treturn cc.close()\n }\n",
            &[&["ClientConn.Close"]],
        );
        check_hunks(
            "--- a/src/main/java/com/fasterxml/jackson/core/Version.java\n+++ b/src/main/java/com/fasterxml/jackson/core/Version.java\n@@ -113,4 +113,4 @@ public String toFullString() {\n     }\n \n     @Override public int hashCode() {\n-        return _artifactId.hashCode();\n+        return _artifactId.hashCode() ^ _snapshotInfo.hashCode();\n",
            &[&["Version.hashCode"]],
        );
        check_hunks(
            "--- a/src/main/java/com/x/ReaderBasedJsonParser.java\n+++ b/src/main/java/com/x/ReaderBasedJsonParser.java\n@@ -884,4 +884,3 @@ public String nextFieldName() throws IOException\n         if (i == INT_RBRACKET) {\n-            _updateLocation();\n-            return null;\n+            return _closeArray();\n         }\n",
            &[&["ReaderBasedJsonParser.nextFieldName"]],
        );
        check_hunks(
            "--- a/src/Auth.java\n+++ b/src/Auth.java\n@@ -5,3 +5,3 @@ public class RegistryAuthenticator {\n   static RegistryAuthenticator fromAuthenticationMethod(String h) {\n-    if (h.matches(\"^(?i)(basic) .*\")) {\n+    if (h.matches(\"^(?i)(basic).*\")) {\n       return null;\n",
            &[&["RegistryAuthenticator.fromAuthenticationMethod"]],
        );
        check_hunks(
            "--- a/src/plugin/utc/index.js\n+++ b/src/plugin/utc/index.js\n@@ -1,3 +1,3 @@ export default (option, Dayjs, dayjs) => {\n   proto.diff = function (input, units, float) {\n-    const localThis = this.local()\n+    const localThis = this.local && this.local()\n     return oldDiff.call(localThis, input, units, float)\n",
            &[&["diff"]],
        );
    }

    #[test]
    fn cpp_uses_line_patterns() {
        check_hunks(
            "--- a/include/fmt/format.h\n+++ b/include/fmt/format.h\n@@ -10,3 +10,3 @@ class basic_writer {\n   void write_pointer(const void* p) {\n-    write(p);\n+    write_ptr(p);\n   }\n",
            &[&["basic_writer::write_pointer"]],
        );
    }

    #[test]
    fn cpp_hunks_are_qualified_by_class_and_scope() {
        // A hunk inside a class method whose class shows in the fragment.
        check_hunks(
            "--- a/include/fmt/format.h\n+++ b/include/fmt/format.h\n@@ -10,6 +10,6 @@ namespace internal {\n template <typename Range> class basic_writer {\n  public:\n   void write_pointer(const void* p) {\n-    write(p);\n+    write_ptr(p);\n   }\n",
            &[&["basic_writer::write_pointer"]],
        );
        // An out-of-line member definition.
        check_hunks(
            "--- a/src/os.cc\n+++ b/src/os.cc\n@@ -20,3 +20,4 @@ FMT_BEGIN_NAMESPACE\n void file::close() {\n   if (fd_ == -1) return;\n+  flush();\n   int result = FMT_POSIX_CALL(close(fd_));\n",
            &[&["file::close"]],
        );
        // A member known only from the hunk header's type.
        check_hunks(
            "--- a/src/a.cpp\n+++ b/src/a.cpp\n@@ -5,3 +5,3 @@ class parser {\n   int parse(const char* s) {\n-    return 0;\n+    return parse_int(s);\n   }\n",
            &[&["parser::parse"]],
        );
        // A C function.
        check_hunks(
            "--- a/src/buf.c\n+++ b/src/buf.c\n@@ -1,3 +1,3 @@\n static int grow(buf *b) {\n-  return 0;\n+  return resize(b);\n }\n",
            &[&["grow"]],
        );
    }

    #[test]
    fn open_braces_are_closed_outside_comments_and_literals() {
        assert_eq!(
            close_open_braces("class A {\n  void f() { g(\"{\", '{'); // {\n"),
            "class A {\n  void f() { g(\"{\", '{'); // {\n}}\n"
        );
        assert_eq!(close_open_braces("  x();\n}\n"), "  x();\n}\n");
        assert_eq!(
            close_open_braces("/* { */ \"\\\"{\" {"),
            "/* { */ \"\\\"{\" {\n}\n"
        );
        assert_eq!(
            close_open_braces("{".repeat(1_000).as_str())
                .matches('}')
                .count(),
            64
        );
    }

    #[test]
    fn references_from_added_lines() {
        let diff = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,3 @@\n def f(data):\n+    data = data.dropna()\n     return np.polyfit(data)\n";
        let parsed = parse_diffs(diff);
        let hunk = &parsed.files[0].hunks[0];
        let symbols = hunk_symbols("x.py", hunk, diff, &mut ParseBudget::default());
        assert_eq!(symbols.referenced, vec!["dropna".to_string()]);
    }

    #[test]
    fn code_definitions_by_parser_and_by_line_scan() {
        let code = "class FixtureDef(object):\n    def __init__(self):\n        pass\n\n    def finish(self, request):\n        pass\n\ndef helper():\n    pass\n";
        let expected = vec![
            "FixtureDef",
            "FixtureDef.__init__",
            "FixtureDef.finish",
            "helper",
        ];
        assert_eq!(
            code_definitions(CodeLanguage::Python, code, 10, &mut ParseBudget::default()),
            expected
        );
        assert_eq!(
            code_definitions(
                CodeLanguage::Python,
                code,
                10,
                &mut ParseBudget::new(0, Duration::ZERO)
            ),
            expected
        );
        assert_eq!(
            code_definitions(
                CodeLanguage::Python,
                code,
                2,
                &mut ParseBudget::new(0, Duration::ZERO)
            )
            .len(),
            2
        );
    }

    #[test]
    fn python_views_are_scanned_like_tree_sitter_tags_them() {
        let view = "        return x\n\n    @property\n    def name(self):\n        \"\"\"Doc.\n\ndef not_a_definition():\n        \"\"\"\n        return self._name\n\n\nclass Outer(Base):\n    value = call(a,\n  b)\n    async def run(self):\n        def inner():\n            pass\n        items = [x for x in (\n# cut view: the bracket never closes\n    def after_cut(self):\n        pass\n";
        let expected = vec![
            "name",
            "Outer",
            "Outer.run",
            "Outer.run.inner",
            "Outer.after_cut",
        ];
        assert_eq!(python_scan_definitions(view, 64), expected);
        assert_eq!(
            code_definitions(CodeLanguage::Python, view, 2, &mut ParseBudget::default()),
            vec!["name", "Outer"]
        );
        assert!(!python_may_define(
            "    x = self.default\n    undefined(classes)\n"
        ));
        assert!(python_may_define("    def f(self):\n"));
        assert!(may_define(CodeLanguage::Rust, "impl<T> Foo for T {"));
        assert!(may_define(CodeLanguage::Rust, "macro_rules! m {"));
        assert!(!may_define(
            CodeLanguage::Rust,
            "    let fnord = constant + 1;\n"
        ));
        assert!(may_define(CodeLanguage::Go, "func (s *S) Run() {"));
        assert!(!may_define(CodeLanguage::Go, "\treturn typed(funcs)\n"));
        assert!(may_define(CodeLanguage::Cpp, "x = 1;"));
        assert!(python_may_define("CONSTANT = 1\n"));
    }

    #[test]
    fn repeated_parses_come_from_the_cache_within_the_budget() {
        let source = "class Cached:\n    def method(self):\n        return helper()\n";
        let first = extract_tags(CodeLanguage::Python, source).expect("parses");
        let again = extract_tags(CodeLanguage::Python, source).expect("cached");
        assert_eq!(first, again);
        // A cached text is still refused when the budget does not allow it.
        assert_eq!(
            extract_tags_within(
                CodeLanguage::Python,
                source,
                &mut ParseBudget::new(0, Duration::from_secs(1))
            ),
            None
        );
        // Tags of some rows are kept apart from tags of the whole text.
        let rows = extract_tags_in_rows(
            CodeLanguage::Python,
            source,
            2,
            2,
            &mut ParseBudget::generous(),
        )
        .expect("parses");
        let mut cache = TagCache::default();
        cache.insert(CodeLanguage::Python, Some((2, 2)), source, &rows);
        assert_eq!(cache.get(CodeLanguage::Python, None, source), None);
        assert_eq!(
            cache.get(CodeLanguage::Python, Some((2, 2)), source),
            Some(rows)
        );
        for index in 0..MAX_TAG_CACHE_ENTRIES + 10 {
            cache.insert(
                CodeLanguage::Python,
                None,
                &format!("x{index} = 1\n"),
                &first,
            );
        }
        assert!(cache.entry_count <= MAX_TAG_CACHE_ENTRIES);
        assert!(cache.get(CodeLanguage::Python, None, "x0 = 1\n").is_none());
        assert!(cache.get(CodeLanguage::Rust, None, "x9 = 1\n").is_none());
    }

    #[test]
    fn cpp_headers_are_told_from_c() {
        assert!(looks_like_cpp(
            "@@ -1 +1 @@\n-  FMT_CONSTEXPR void on_zero() {\n+  specs_.fill[0] = Char('0');\n   detail::x();\n"
        ));
        assert!(!looks_like_cpp("@@ -1 +1 @@\n-int x = 1;\n+int x = 2;\n"));
    }

    #[test]
    fn header_line_patterns() {
        type Case<'a> = (&'a str, Family, Option<(DefinitionKind, &'a str)>);
        let cases: &[Case<'_>] = &[
            (
                "def __init__(",
                Family::Python,
                Some((DefinitionKind::Function, "__init__")),
            ),
            (
                "class Foo(Bar):",
                Family::Python,
                Some((DefinitionKind::Type, "Foo")),
            ),
            (
                "impl Bar for Baz {",
                Family::Rust,
                Some((DefinitionKind::Type, "Baz")),
            ),
            (
                "pub fn x(",
                Family::Rust,
                Some((DefinitionKind::Function, "x")),
            ),
            (
                "func (s *Server) Serve(l net.Listener) error {",
                Family::Go,
                Some((DefinitionKind::Function, "Serve")),
            ),
            ("if (x) {", Family::C, None),
            ("from x import y", Family::Python, None),
        ];
        for (line, family, expected) in cases {
            let got = line_definition(line, *family, true);
            let expected = expected.map(|(kind, name)| (kind, name.to_string()));
            assert_eq!(got, expected, "{line}");
        }
    }

    #[test]
    fn deeply_nested_definitions_are_qualified_in_one_walk() {
        let depth = 10_000;
        let mut source = String::new();
        for index in 0..depth {
            source.push_str(&format!("function f{index}(){{"));
        }
        source.push_str(&"}".repeat(depth));
        let tags = extract_tags_within(
            CodeLanguage::JavaScript,
            &source,
            &mut ParseBudget::generous(),
        )
        .expect("parses");
        assert_eq!(tags.definitions.len(), MAX_TAGS_PER_TEXT);
        let last = MAX_TAGS_PER_TEXT - 1;
        let innermost = tags
            .definitions
            .iter()
            .find(|definition| definition.name == format!("f{last}"))
            .expect("innermost kept function");
        assert_eq!(
            innermost.qualified_name,
            format!(
                "f{}.f{}.f{}.f{}.f{last}",
                last - 4,
                last - 3,
                last - 2,
                last - 1
            )
        );
        let decorated = extract_tags(
            CodeLanguage::Python,
            "class A:\n    @property\n    def x(self):\n        return 1\n",
        )
        .expect("parses");
        let method = decorated
            .definitions
            .iter()
            .find(|definition| definition.name == "x")
            .expect("method");
        assert_eq!(
            (method.qualified_name.as_str(), method.start_row),
            ("A.x", 1)
        );
    }

    #[test]
    fn garbage_is_not_parsed_and_time_is_bounded() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut printable = String::new();
        while printable.len() < 150_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            printable.push(char::from(b' ' + (state % 95) as u8));
            if state.is_multiple_of(40) {
                printable.push('\n');
            }
        }
        // Printable garbage passes the code-likeness check: the clock stops it.
        let mut budget = ParseBudget::new(usize::MAX, Duration::from_millis(50));
        let started = Instant::now();
        let _ = extract_tags_within(CodeLanguage::Python, &printable, &mut budget);
        let _ = extract_tags_within(CodeLanguage::Python, &printable, &mut budget);
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(!budget.allows(1), "the time budget is spent");
        // Lossy-decoded binary is refused outright.
        let binary = String::from_utf8_lossy(&[0xff, 0x00, 0x41, 0xfe].repeat(1000)).into_owned();
        assert!(!looks_like_code(&binary));
        assert!(looks_like_code("def f(x):\n    return x  # ok é\n"));
    }

    #[test]
    fn deeply_nested_code_is_bounded() {
        let nested = format!("x = {}1{}\n", "(".repeat(5_000), ")".repeat(5_000));
        let tags = extract_tags_within(CodeLanguage::Python, &nested, &mut ParseBudget::generous());
        assert!(tags.is_some());
        let brackets = format!("fn f() {{ {} }}", "[".repeat(5_000));
        assert!(
            extract_tags_within(CodeLanguage::Rust, &brackets, &mut ParseBudget::generous())
                .is_some()
        );
        // C and C++ parse at most MAX_C_FAMILY_PARSE_BYTES: nest as deep as fits.
        let namespaces = format!("{}void f() {{}}", "namespace a { ".repeat(280));
        assert!(namespaces.len() <= MAX_C_FAMILY_PARSE_BYTES);
        let deeper = format!("{}void f() {{}}", "namespace a { ".repeat(3_000));
        for language in [CodeLanguage::C, CodeLanguage::Cpp] {
            assert!(
                extract_tags_within(language, &namespaces, &mut ParseBudget::generous()).is_some()
            );
            // Past the cap the caller falls back to the line scan.
            assert!(extract_tags_within(language, &deeper, &mut ParseBudget::generous()).is_none());
        }
        // Too many scopes to qualify: the definition is dropped, nothing panics.
        let scopes = format!("void {}f() {{}}\n", "a::".repeat(100));
        let tags = extract_tags_within(CodeLanguage::Cpp, &scopes, &mut ParseBudget::generous())
            .expect("parses");
        assert!(
            tags.definitions
                .iter()
                .all(|definition| definition.name != "f")
        );
        let too_big = "a".repeat(MAX_PARSE_BYTES + 1);
        assert_eq!(extract_tags(CodeLanguage::Python, &too_big), None);
    }
}
