//! Code-aware tokenization: the terms that text is indexed and searched by.
//!
//! Code text names things in compound ways: `astropy.modeling.separable`,
//! `tokio::sync::mpsc`, `src/walk/dir.rs`, `parse_args`, `HttpServerConfig`.
//! A query may name the whole compound or any part of it, so each compound is
//! emitted whole, then each identifier in it, then the parts of each
//! identifier (`snake_case`, `camelCase`, `HTTPServer`). All terms are
//! lowercased.
//!
//! Architecture invariant: this module is pure. It knows nothing of tantivy;
//! `index` wraps it as a tantivy tokenizer, and query analysis calls it
//! directly, so indexing and searching always agree on the terms.

/// Terms longer than this (in bytes) are dropped: they are hashes, base64
/// blobs or minified code, never something a query names.
pub const MAX_TERM_BYTES: usize = 80;

/// One term and the byte range of the text it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeToken {
    /// The lowercased term.
    pub text: String,
    /// Byte offset of the first character the term covers.
    pub offset_from: usize,
    /// Byte offset one past the last character the term covers.
    pub offset_to: usize,
    /// Ordinal of the identifier the term belongs to; the parts of one
    /// identifier share it.
    pub position: usize,
}

/// Splits `text` into code-aware terms, in text order.
pub fn code_tokens(text: &str) -> Vec<CodeToken> {
    let mut tokens = Vec::with_capacity(text.len() / 5);
    let mut position = 0usize;
    let (compounds, segments) = compounds(text);
    let mut parts = Vec::new();
    for compound in compounds {
        let segments = &segments[compound.segments.clone()];
        if segments.len() > 1 {
            push_term(
                &mut tokens,
                &text[compound.start..compound.end],
                compound.start,
                position,
            );
        }
        for &(start, end) in segments {
            let word = &text[start..end];
            push_term(&mut tokens, word, start, position);
            identifier_parts(word, &mut parts);
            if parts.len() > 1 {
                for &(part_start, part_end) in &parts {
                    push_term(
                        &mut tokens,
                        &word[part_start..part_end],
                        start + part_start,
                        position,
                    );
                }
            }
            position += 1;
        }
    }
    tokens
}

/// English function words: they carry no content of a task, so they never
/// make a match (a query's terms leave them out) nor make a session look
/// covered.
const FUNCTION_WORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "each", "for", "from", "had", "has", "have", "having", "he", "her", "here", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "more", "most", "my",
    "no", "nor", "not", "now", "of", "on", "once", "only", "or", "other", "our", "out", "over",
    "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your",
];

/// Whether a lowercased term is an English function word.
pub fn is_function_word(term: &str) -> bool {
    FUNCTION_WORDS.contains(&term)
}

/// The distinct terms of `text`, in order of first appearance.
pub fn distinct_terms(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    code_tokens(text)
        .into_iter()
        .filter_map(|token| seen.insert(token.text.clone()).then_some(token.text))
        .collect()
}

fn push_term(tokens: &mut Vec<CodeToken>, raw: &str, offset_from: usize, position: usize) {
    if raw.is_empty() || raw.len() > MAX_TERM_BYTES {
        return;
    }
    let text = if raw.is_ascii() {
        raw.to_ascii_lowercase()
    } else {
        raw.to_lowercase()
    };
    tokens.push(CodeToken {
        text,
        offset_from,
        offset_to: offset_from + raw.len(),
        position,
    });
}

/// The lowercased parts of every identifier in `text`, split as the
/// tokenizer splits them (`LatexPrinter._print_Mul` -> latex, printer,
/// print, mul; `HTTPServer` -> http, server): the words other modules
/// match against indexed terms.
pub fn word_parts(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut parts = Vec::new();
    for word in text.split(|c: char| !is_word_char(c)) {
        if word.is_empty() {
            continue;
        }
        identifier_parts(word, &mut parts);
        words.extend(
            parts
                .iter()
                .map(|&(start, end)| word[start..end].to_lowercase()),
        );
    }
    words
}

fn is_word_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// A run of identifiers joined by `.`, `/` or `::`, each connector directly
/// followed by another identifier.
struct Compound {
    start: usize,
    end: usize,
    /// Its identifiers: a range of the segment list [`compounds`] answers.
    segments: std::ops::Range<usize>,
}

/// The compounds of `text`, and the byte ranges of all their identifiers
/// (one list for all, not one allocation per word).
fn compounds(text: &str) -> (Vec<Compound>, Vec<(usize, usize)>) {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut all_segments = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if !is_word_char(c) {
            chars.next();
            continue;
        }
        let first_segment = all_segments.len();
        let mut segment_start = start;
        let mut end;
        loop {
            // Consume one identifier.
            end = segment_start;
            while let Some(&(i, c)) = chars.peek() {
                if !is_word_char(c) {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            all_segments.push((segment_start, end));
            // A connector continues the compound only when an identifier
            // follows it directly.
            let connector_len = match bytes.get(end) {
                Some(b'.') | Some(b'/') => 1,
                Some(b':') if bytes.get(end + 1) == Some(&b':') => 2,
                _ => 0,
            };
            if connector_len == 0 {
                break;
            }
            let next_start = end + connector_len;
            let next_is_word = text[next_start..].chars().next().is_some_and(is_word_char);
            if !next_is_word {
                break;
            }
            for _ in 0..connector_len {
                chars.next();
            }
            segment_start = next_start;
        }
        out.push(Compound {
            start,
            end,
            segments: first_segment..all_segments.len(),
        });
    }
    (out, all_segments)
}

/// Byte ranges of the parts of one identifier: split at `_`, at a
/// lower-to-upper case change (`parseArgs`), and before the last capital of
/// an acronym followed by lowercase (`HTTPServer` -> `HTTP`, `Server`).
/// Written into `parts` (cleared first); a word of lowercase ASCII letters
/// and digits, most words, is one part without further work.
fn identifier_parts(word: &str, parts: &mut Vec<(usize, usize)>) {
    parts.clear();
    if word
        .bytes()
        .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit())
    {
        parts.push((0, word.len()));
        return;
    }
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut part_start: Option<usize> = None;
    for (k, &(i, c)) in chars.iter().enumerate() {
        if c == '_' {
            if let Some(s) = part_start.take() {
                parts.push((s, i));
            }
            continue;
        }
        let boundary = match (k.checked_sub(1).map(|p| chars[p].1), chars.get(k + 1)) {
            (Some(prev), _) if prev.is_lowercase() && c.is_uppercase() => true,
            (Some(prev), Some(&(_, next)))
                if prev.is_uppercase() && c.is_uppercase() && next.is_lowercase() =>
            {
                true
            }
            _ => false,
        };
        if boundary && let Some(s) = part_start.take() {
            parts.push((s, i));
        }
        if part_start.is_none() {
            part_start = Some(i);
        }
    }
    if let Some(s) = part_start {
        parts.push((s, word.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: &[&str]) {
        let terms: Vec<String> = code_tokens(text).into_iter().map(|t| t.text).collect();
        assert_eq!(terms, expected, "terms of {text:?}");
    }

    #[test]
    fn word_parts_split_as_the_tokenizer_does() {
        assert_eq!(
            word_parts("LatexPrinter._print_Mul"),
            vec!["latex", "printer", "print", "mul"]
        );
        assert_eq!(
            word_parts("src/HTTPServer.rs"),
            vec!["src", "http", "server", "rs"]
        );
    }

    #[test]
    fn plain_words_are_lowercased() {
        check("Fix the Bug", &["fix", "the", "bug"]);
    }

    #[test]
    fn snake_case_gives_whole_and_parts() {
        check("parse_args()", &["parse_args", "parse", "args"]);
        check("__init__", &["__init__"]);
    }

    #[test]
    fn camel_case_and_acronyms_split() {
        check("parseArgs", &["parseargs", "parse", "args"]);
        check("HTTPServer", &["httpserver", "http", "server"]);
        check(
            "XMLHttpRequest2",
            &["xmlhttprequest2", "xml", "http", "request2"],
        );
    }

    #[test]
    fn dotted_paths_give_compound_and_segments() {
        check(
            "astropy.modeling.separable",
            &[
                "astropy.modeling.separable",
                "astropy",
                "modeling",
                "separable",
            ],
        );
    }

    #[test]
    fn rust_paths_give_compound_and_segments() {
        check(
            "tokio::sync::Mutex",
            &["tokio::sync::mutex", "tokio", "sync", "mutex"],
        );
    }

    #[test]
    fn file_paths_give_compound_and_segments() {
        check(
            "see src/walk_dir.rs:10",
            &[
                "see",
                "src/walk_dir.rs",
                "src",
                "walk_dir",
                "walk",
                "dir",
                "rs",
                "10",
            ],
        );
    }

    #[test]
    fn trailing_connectors_do_not_join() {
        check("end. Next", &["end", "next"]);
        check("a::", &["a"]);
        check("dir/ file", &["dir", "file"]);
    }

    #[test]
    fn offsets_point_back_into_the_text() {
        let text = "x = foo.barBaz";
        for token in code_tokens(text) {
            assert_eq!(
                text[token.offset_from..token.offset_to].to_lowercase(),
                token.text
            );
        }
    }

    #[test]
    fn overlong_terms_are_dropped() {
        let blob = "a".repeat(MAX_TERM_BYTES + 1);
        check(&format!("{blob} ok"), &["ok"]);
    }

    #[test]
    fn unicode_does_not_panic() {
        check(
            "Größe_änderung ünïcödé.名前",
            &[
                "größe_änderung",
                "größe",
                "änderung",
                "ünïcödé.名前",
                "ünïcödé",
                "名前",
            ],
        );
        check("é::", &["é"]);
    }

    #[test]
    fn distinct_terms_keep_first_order() {
        assert_eq!(distinct_terms("b a b_a"), vec!["b", "a", "b_a"]);
    }
}
