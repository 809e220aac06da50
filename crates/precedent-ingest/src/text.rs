//! Text helpers shared by the ingest parsers: lines with byte offsets,
//! char-boundary-safe truncation, fenced code blocks, and "views" of a
//! message (the raw text plus the decoded string literals of any JSON in it,
//! each mapped back to raw byte offsets).
//!
//! Nothing here knows about diffs, traces or commands; the parsers in the
//! sibling modules run over the views this module produces.

use std::borrow::Cow;

use regex::{Captures, Regex};

/// The deepest nesting of JSON-in-JSON-string that is decoded into a view.
const MAX_VIEW_DEPTH: usize = 2;
/// At most this many JSON parse attempts that fail, per text, before giving up.
const MAX_FAILED_JSON_ATTEMPTS: usize = 16;
/// At most this many JSON values are looked at per text.
const MAX_JSON_VALUES: usize = 256;
/// A decoded string literal becomes a view only from this many bytes on.
const MIN_DECODED_VIEW_BYTES: usize = 24;
/// At most this many views per message (the raw text included).
const MAX_VIEWS: usize = 512;

/// One line of a text: its content without the terminator, and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// The line without `\n` / `\r\n`.
    pub text: &'a str,
    /// Byte offset of the first byte of the line.
    pub start: usize,
    /// Byte offset just past the line's content (before its terminator).
    pub end: usize,
}

impl<'a> Line<'a> {
    /// The line of `text` from `start` to `end`, the offset of its `\n` (or
    /// of the text's end), without a `\r` before the `\n`.
    pub fn between(text: &'a str, start: usize, end: usize) -> Option<Line<'a>> {
        let mut content = text.get(start..end)?;
        if let Some(stripped) = content.strip_suffix('\r') {
            content = stripped;
        }
        Some(Line {
            text: content,
            start,
            end: start + content.len(),
        })
    }
}

/// The offset of the `\n` that ends the line holding `position` in `bytes`,
/// or the end of `bytes`.
pub fn line_end(bytes: &[u8], position: usize) -> usize {
    bytes
        .get(position..)
        .and_then(|rest| memchr::memchr(b'\n', rest))
        .map_or(bytes.len(), |newline| position + newline)
}

/// Iterator over the lines of a text with their byte ranges.
pub struct LineIterator<'a> {
    text: &'a str,
    position: usize,
}

impl<'a> Iterator for LineIterator<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        if self.position >= self.text.len() {
            return None;
        }
        let rest = self.text.get(self.position..)?;
        let start = self.position;
        // memchr's search is several times faster than `str::find` on the
        // short lines most messages are made of.
        let (content_length, advance) = match memchr::memchr(b'\n', rest.as_bytes()) {
            Some(newline) => (newline, newline + 1),
            None => (rest.len(), rest.len()),
        };
        self.position += advance;
        Line::between(self.text, start, start + content_length)
    }
}

/// The lines of `text` with their byte ranges (a trailing newline yields no empty last line).
pub fn lines_with_offsets(text: &str) -> LineIterator<'_> {
    LineIterator { text, position: 0 }
}

/// Whether `haystack` contains `needle`: memchr's SIMD substring search, much
/// faster over whole messages than `str::contains`. The searcher is built
/// once per call site (building one costs about as much as scanning a short
/// message).
macro_rules! contains_str {
    ($haystack:expr, $needle:literal) => {{
        static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new($needle));
        FINDER.find(str::as_bytes($haystack)).is_some()
    }};
}
pub(crate) use contains_str;

/// Whether the lines of a text, asked about in order, hold a literal: one
/// SIMD search runs ahead to the literal's next occurrence, so the text is
/// scanned about once however many lines ask (a search per line costs
/// several times more on short lines). The literal must hold no `\n` or
/// `\r`, so that an occurrence lies within one line.
pub struct LiteralCursor<'t> {
    finder: memchr::memmem::Finder<'static>,
    text: &'t [u8],
    /// The first occurrence at or after the last line asked about, if any.
    next: Option<usize>,
}

impl<'t> LiteralCursor<'t> {
    /// A cursor over `text` for `literal`.
    pub fn new(literal: &'static str, text: &'t str) -> LiteralCursor<'t> {
        let finder = memchr::memmem::Finder::new(literal);
        let next = finder.find(text.as_bytes());
        LiteralCursor {
            finder,
            text: text.as_bytes(),
            next,
        }
    }

    /// Whether the literal occurs in `line`, a line of the text no earlier
    /// than the last one asked about.
    pub fn in_line(&mut self, line: &Line<'_>) -> bool {
        if self.next.is_some_and(|position| position < line.start) {
            self.next = self
                .text
                .get(line.start..)
                .and_then(|rest| self.finder.find(rest))
                .map(|offset| line.start + offset);
        }
        self.next
            .is_some_and(|position| line.start <= position && position < line.end)
    }
}

/// Whether `line`, leading whitespace skipped, starts with one of
/// `prefixes` or with a non-ASCII character (maybe whitespace `trim` would
/// skip): a cheap superset of what line parsers that trim look for.
pub fn line_may_start_with(line: &[u8], prefixes: &[&str]) -> bool {
    let start = line
        .iter()
        .position(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
        .unwrap_or(line.len());
    let rest = line.get(start..).unwrap_or(&[]);
    rest.first().is_some_and(|first| !first.is_ascii())
        || prefixes
            .iter()
            .any(|prefix| rest.starts_with(prefix.as_bytes()))
}

/// Whether some line of `text` passes [`line_may_start_with`].
pub fn some_line_may_start_with(text: &str, prefixes: &[&str]) -> bool {
    let bytes = text.as_bytes();
    let mut start = 0;
    loop {
        let end = bytes
            .get(start..)
            .and_then(|rest| memchr::memchr(b'\n', rest))
            .map_or(bytes.len(), |newline| start + newline);
        if line_may_start_with(bytes.get(start..end).unwrap_or(&[]), prefixes) {
            return true;
        }
        if end >= bytes.len() {
            return false;
        }
        start = end + 1;
    }
}

/// The largest char boundary of `text` that is `<= index`.
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    let mut boundary = index;
    while boundary > 0 && !text.is_char_boundary(boundary) {
        boundary -= 1;
    }
    boundary
}

/// The smallest char boundary of `text` that is `>= index`.
pub fn ceil_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    let mut boundary = index;
    while boundary < text.len() && !text.is_char_boundary(boundary) {
        boundary += 1;
    }
    boundary
}

/// The prefix of `text` of at most `max_bytes` bytes, cut on a char boundary.
pub fn truncate_to_bytes(text: &str, max_bytes: usize) -> &str {
    let end = floor_char_boundary(text, max_bytes);
    text.get(..end).unwrap_or("")
}

/// The prefix of `text` of at most `max_chars` characters.
pub fn truncate_to_chars(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => text.get(..cut).unwrap_or(text),
        None => text,
    }
}

/// `text` if it fits in `max_bytes`, else its head and tail joined by a marker.
pub fn head_and_tail(text: &str, max_bytes: usize) -> Cow<'_, str> {
    if text.len() <= max_bytes {
        return Cow::Borrowed(text);
    }
    let half = max_bytes / 2;
    let head_end = floor_char_boundary(text, half);
    let tail_start = ceil_char_boundary(text, text.len().saturating_sub(half));
    let head = text.get(..head_end).unwrap_or("");
    let tail = text.get(tail_start..).unwrap_or("");
    let omitted = tail_start.saturating_sub(head_end);
    Cow::Owned(format!("{head}\n[... {omitted} bytes omitted ...]\n{tail}"))
}

/// A fenced code block (```` ```lang ```` ... ```` ``` ````) found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedBlock {
    /// The info string after the opening fence, lower-cased and trimmed (`bash`, `diff`, ``).
    pub info: String,
    /// Byte offset of the opening fence line.
    pub fence_start: usize,
    /// Byte offset just past the closing fence line (or the end of the text if unclosed).
    pub fence_end: usize,
    /// Byte range of the content between the fences.
    pub content_start: usize,
    /// End of the content between the fences.
    pub content_end: usize,
}

/// All fenced code blocks of `text` (backtick or tilde fences, possibly indented).
pub fn fenced_blocks(text: &str) -> Vec<FencedBlock> {
    let mut blocks = Vec::new();
    if !contains_str!(text, "```") && !contains_str!(text, "~~~") {
        return blocks;
    }
    let mut open: Option<(String, usize, usize, char, usize)> = None;
    for line in lines_starting_with(text, b'`', b'~') {
        let trimmed = line.text.trim_start();
        let fence_char = match trimmed.chars().next() {
            Some(character @ ('`' | '~')) => character,
            _ => continue,
        };
        let fence_length = trimmed.chars().take_while(|c| *c == fence_char).count();
        if fence_length < 3 {
            continue;
        }
        let after_fence = trimmed.get(fence_length..).unwrap_or("");
        match &open {
            None => {
                let info = after_fence.trim().to_ascii_lowercase();
                let content_start = (line.end + 1).min(text.len());
                open = Some((info, line.start, content_start, fence_char, fence_length));
            }
            Some((info, fence_start, content_start, open_char, open_length)) => {
                if fence_char == *open_char
                    && fence_length >= *open_length
                    && after_fence.trim().is_empty()
                {
                    blocks.push(FencedBlock {
                        info: info.clone(),
                        fence_start: *fence_start,
                        fence_end: (line.end + 1).min(text.len()),
                        content_start: *content_start,
                        content_end: line.start.max(*content_start),
                    });
                    open = None;
                }
            }
        }
    }
    if let Some((info, fence_start, content_start, _, _)) = open {
        blocks.push(FencedBlock {
            info,
            fence_start,
            fence_end: text.len(),
            content_start,
            content_end: text.len().max(content_start),
        });
    }
    blocks
}

/// The lines of `text` whose first non-whitespace character is the ASCII
/// `first` or `second`, in order: the characters are found with memchr and
/// their lines checked, rather than every line visited.
fn lines_starting_with(text: &str, first: u8, second: u8) -> impl Iterator<Item = Line<'_>> {
    let bytes = text.as_bytes();
    let mut search_from = 0usize;
    std::iter::from_fn(move || {
        while let Some(offset) = bytes
            .get(search_from..)
            .and_then(|rest| memchr::memchr2(first, second, rest))
        {
            let position = search_from + offset;
            let end = line_end(bytes, position);
            search_from = end + 1;
            let Some(start) = line_start_if_first(text, position) else {
                continue;
            };
            return Line::between(text, start, end);
        }
        None
    })
}

/// A text the parsers run over: the raw message, or a decoded JSON string
/// literal inside it, with the way back to raw byte offsets.
#[derive(Debug, Clone)]
pub struct TextView<'a> {
    /// The text to parse.
    pub text: Cow<'a, str>,
    /// For a decoded view: raw byte offset of every decoded byte (plus one past the end).
    raw_offsets: Option<Vec<usize>>,
}

impl<'a> TextView<'a> {
    /// The raw message itself.
    pub fn raw(text: &'a str) -> TextView<'a> {
        TextView {
            text: Cow::Borrowed(text),
            raw_offsets: None,
        }
    }

    /// Whether this view is a decoded string literal rather than the raw text.
    #[cfg(test)]
    pub fn is_decoded(&self) -> bool {
        self.raw_offsets.is_some()
    }

    /// Maps a byte offset of this view to a byte offset of the raw message.
    pub fn raw_offset(&self, view_offset: usize) -> usize {
        match &self.raw_offsets {
            None => view_offset,
            Some(offsets) => {
                let clamped = view_offset.min(offsets.len().saturating_sub(1));
                offsets.get(clamped).copied().unwrap_or(0)
            }
        }
    }

    /// Maps a byte range of this view to a byte range of the raw message that is
    /// valid to slice `raw` with (char boundaries, start <= end).
    pub fn raw_range(&self, raw: &str, start: usize, end: usize) -> (usize, usize) {
        let raw_start = floor_char_boundary(raw, self.raw_offset(start));
        let raw_end = ceil_char_boundary(raw, self.raw_offset(end)).max(raw_start);
        (raw_start, raw_end)
    }
}

/// A JSON value found in a text: its byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonSpan {
    /// First byte of the value (`{` or `[`).
    pub start: usize,
    /// One past the last byte of the value.
    pub end: usize,
}

/// The JSON objects/arrays in `text` that start a line (or the text), found
/// with a bounded number of parse attempts: a `{`, a `[{`, or a `[` on the
/// first line, as the line's first non-whitespace character.
pub fn json_spans(text: &str) -> Vec<JsonSpan> {
    let mut spans = Vec::new();
    let bytes = text.as_bytes();
    // memchr's SIMD search: `str::contains(char)` is several times slower.
    if memchr::memchr(b'{', bytes).is_none() {
        return spans;
    }
    let mut failed_attempts = 0usize;
    let mut resume_at = 0usize;
    let mut search_from = 0usize;
    // Only lines whose first character is `{` or `[` can start a value: the
    // brackets are found with memchr and their lines checked, rather than
    // every line of every message visited (most have no bracket at all).
    while let Some(offset) = bytes
        .get(search_from..)
        .and_then(|rest| memchr::memchr2(b'{', b'[', rest))
    {
        let start = search_from + offset;
        search_from = start + 1;
        let Some(line_start) = line_start_if_first(text, start) else {
            continue;
        };
        if line_start < resume_at {
            continue;
        }
        let is_candidate = bytes.get(start) == Some(&b'{')
            || line_start == 0
            || bytes.get(start + 1) == Some(&b'{');
        if !is_candidate {
            continue;
        }
        let Some(rest) = text.get(start..) else {
            continue;
        };
        let mut stream =
            serde_json::Deserializer::from_str(rest).into_iter::<serde::de::IgnoredAny>();
        match stream.next() {
            Some(Ok(_)) => {
                let end = start + stream.byte_offset();
                spans.push(JsonSpan { start, end });
                resume_at = end;
                search_from = search_from.max(end);
                if spans.len() >= MAX_JSON_VALUES {
                    break;
                }
            }
            _ => {
                failed_attempts += 1;
                if failed_attempts >= MAX_FAILED_JSON_ATTEMPTS {
                    break;
                }
            }
        }
    }
    spans
}

/// The start of the line holding byte `position` of `text`, when only
/// whitespace (as `str::trim_start` sees it) comes before it on its line.
fn line_start_if_first(text: &str, position: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut index = position;
    while index > 0 {
        match bytes.get(index - 1).copied()? {
            b'\n' => return Some(index),
            b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c' => index -= 1,
            byte if byte.is_ascii() => return None,
            _ => {
                // Non-ASCII before it: Unicode whitespace decides.
                let line_start =
                    memchr::memrchr(b'\n', bytes.get(..index)?).map_or(0, |newline| newline + 1);
                let before = text.get(line_start..position)?;
                return before.trim_start().is_empty().then_some(line_start);
            }
        }
    }
    Some(0)
}

/// The raw text of `message` plus a decoded view of every long JSON string
/// literal (one with a newline in it) inside the JSON values of the message,
/// recursively up to a small depth. In the first (raw) view, JSON values that
/// produced decoded views are blanked out (same length, so offsets still
/// match), so nothing is found twice.
pub fn message_views(message: &str) -> Vec<TextView<'_>> {
    let mut decoded = Vec::new();
    let spans_with_views = collect_decoded_views(message, None, 1, &mut decoded);
    let raw = if spans_with_views.is_empty() {
        TextView::raw(message)
    } else {
        let mut bytes = message.as_bytes().to_vec();
        for span in spans_with_views {
            if let Some(region) = bytes.get_mut(span.start..span.end) {
                for byte in region.iter_mut() {
                    if *byte != b'\n' {
                        *byte = b' ';
                    }
                }
            }
        }
        // Whole multi-byte characters were blanked (spans start and end on
        // ASCII delimiters), so the text stays valid UTF-8.
        let masked = String::from_utf8(bytes)
            .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned());
        TextView {
            text: Cow::Owned(masked),
            raw_offsets: None,
        }
    };
    let mut views = Vec::with_capacity(decoded.len() + 1);
    views.push(raw);
    views.extend(decoded);
    views
}

/// Pushes the decoded views of the JSON in `text` and returns the JSON spans
/// of `text` that yielded at least one view.
fn collect_decoded_views<'a>(
    text: &str,
    parent_offsets: Option<&[usize]>,
    depth: usize,
    views: &mut Vec<TextView<'a>>,
) -> Vec<JsonSpan> {
    let mut productive = Vec::new();
    if depth > MAX_VIEW_DEPTH {
        return productive;
    }
    for span in json_spans(text) {
        let Some(json_text) = text.get(span.start..span.end) else {
            continue;
        };
        let views_before = views.len();
        for literal in string_literals(json_text) {
            if views.len() >= MAX_VIEWS {
                break;
            }
            let Some((decoded, local_offsets)) = decode_json_string(json_text, literal) else {
                continue;
            };
            let looks_like_json = {
                let start = decoded.trim_start();
                start.starts_with('{') || start.starts_with('[')
            };
            let is_multiline = decoded.contains('\n') && decoded.len() >= MIN_DECODED_VIEW_BYTES;
            if !is_multiline && !looks_like_json {
                continue;
            }
            let raw_offsets: Vec<usize> = local_offsets
                .iter()
                .map(|local| {
                    let in_text = span.start + local;
                    match parent_offsets {
                        Some(parent) => parent
                            .get(in_text.min(parent.len().saturating_sub(1)))
                            .copied()
                            .unwrap_or(0),
                        None => in_text,
                    }
                })
                .collect();
            if looks_like_json {
                collect_decoded_views(&decoded, Some(&raw_offsets), depth + 1, views);
            }
            if is_multiline {
                views.push(TextView {
                    text: Cow::Owned(decoded),
                    raw_offsets: Some(raw_offsets),
                });
            }
        }
        if views.len() > views_before {
            productive.push(span);
        }
    }
    productive
}

/// Byte ranges (including the quotes) of the string literals of a JSON text.
fn string_literals(json_text: &str) -> Vec<(usize, usize)> {
    let bytes = json_text.as_bytes();
    let mut literals = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] != b'"' {
            index += 1;
            continue;
        }
        let start = index;
        index += 1;
        while index < bytes.len() {
            match bytes[index] {
                b'\\' => index += 2,
                b'"' => break,
                _ => index += 1,
            }
        }
        let end = (index + 1).min(bytes.len());
        literals.push((start, end));
        index = end;
    }
    literals
}

/// Decodes the JSON string literal at `literal` (quotes included) of `json_text`,
/// returning the decoded text and, for each decoded byte (plus one past the
/// end), the offset in `json_text` it came from.
fn decode_json_string(json_text: &str, literal: (usize, usize)) -> Option<(String, Vec<usize>)> {
    let (start, end) = literal;
    let inner_start = start + 1;
    let inner_end = end.checked_sub(1)?.max(inner_start);
    let inner = json_text.get(inner_start..inner_end)?;
    if !inner.contains('\\') {
        // Nothing escaped: no newline, and no JSON with strings inside.
        return None;
    }
    let mut decoded = String::with_capacity(inner.len());
    let mut offsets = Vec::with_capacity(inner.len() + 1);
    let mut characters = inner.char_indices().peekable();
    while let Some((position, character)) = characters.next() {
        let raw_position = inner_start + position;
        if character != '\\' {
            let before = decoded.len();
            decoded.push(character);
            offsets.extend(std::iter::repeat_n(raw_position, decoded.len() - before));
            continue;
        }
        let Some((_, escape)) = characters.next() else {
            break;
        };
        let replacement = match escape {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            '/' => '/',
            '\\' => '\\',
            '"' => '"',
            'u' => {
                let mut code = 0u32;
                let mut digits = 0;
                while digits < 4 {
                    match characters.peek() {
                        Some((_, hex)) if hex.is_ascii_hexdigit() => {
                            code = code * 16 + hex.to_digit(16).unwrap_or(0);
                            characters.next();
                            digits += 1;
                        }
                        _ => break,
                    }
                }
                char::from_u32(code).unwrap_or('\u{fffd}')
            }
            other => other,
        };
        let before = decoded.len();
        decoded.push(replacement);
        offsets.extend(std::iter::repeat_n(raw_position, decoded.len() - before));
    }
    offsets.push(inner_end);
    Some((decoded, offsets))
}

/// A regular expression compiled from a constant pattern. A pattern that does
/// not compile (caught by the unit tests) matches nothing instead of panicking.
#[derive(Debug)]
pub struct Pattern(Option<Regex>);

impl Pattern {
    /// Compiles `pattern`.
    pub fn new(pattern: &str) -> Pattern {
        Pattern(Regex::new(pattern).ok())
    }

    /// Whether the pattern compiled.
    pub fn is_valid(&self) -> bool {
        self.0.is_some()
    }

    /// The captures of the first match in `text`.
    pub fn captures<'t>(&self, text: &'t str) -> Option<Captures<'t>> {
        self.0.as_ref()?.captures(text)
    }

    /// Whether the pattern matches somewhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.0.as_ref().is_some_and(|regex| regex.is_match(text))
    }

    /// Every non-overlapping match in `text` (cheaper than
    /// [`Pattern::captures_all`] when only the whole match is needed).
    pub fn find_all<'r, 't>(&'r self, text: &'t str) -> impl Iterator<Item = regex::Match<'t>> + 'r
    where
        't: 'r,
    {
        self.0.iter().flat_map(move |regex| regex.find_iter(text))
    }

    /// The captures of every non-overlapping match in `text`.
    pub fn captures_all<'r, 't>(&'r self, text: &'t str) -> impl Iterator<Item = Captures<'t>> + 'r
    where
        't: 'r,
    {
        self.0
            .iter()
            .flat_map(move |regex| regex.captures_iter(text))
    }
}

/// Whether `word` looks like a plain identifier (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_identifier(word: &str) -> bool {
    let mut characters = word.chars();
    match characters.next() {
        Some(first) if first.is_ascii_alphabetic() || first == '_' => {}
        _ => return false,
    }
    characters.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// For tests: a deterministic xorshift generator of numbers below the bound
/// it is given, from `seed` (generated inputs that compare a fast scan with
/// the plain one).
#[cfg(test)]
pub(crate) fn pseudo_random_below(mut state: u64) -> impl FnMut(usize) -> usize {
    move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as usize % bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_lines(input: &str, expected: &[(&str, usize, usize)]) {
        let got: Vec<(&str, usize, usize)> = lines_with_offsets(input)
            .map(|line| (line.text, line.start, line.end))
            .collect();
        assert_eq!(got, expected, "lines of {input:?}");
    }

    #[test]
    fn lines_carry_offsets() {
        check_lines(
            "a\nbc\r\n\nd",
            &[("a", 0, 1), ("bc", 2, 4), ("", 6, 6), ("d", 7, 8)],
        );
        check_lines("x\n", &[("x", 0, 1)]);
        check_lines("", &[]);
    }

    fn check_truncate(input: &str, max_bytes: usize, expected: &str) {
        assert_eq!(truncate_to_bytes(input, max_bytes), expected);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        check_truncate("héllo", 2, "h");
        check_truncate("héllo", 3, "hé");
        check_truncate("abc", 10, "abc");
        assert_eq!(truncate_to_chars("héllo", 2), "hé");
        assert_eq!(
            head_and_tail("abcdefghij", 4),
            "ab\n[... 6 bytes omitted ...]\nij"
        );
    }

    fn check_fences(input: &str, expected: &[(&str, &str)]) {
        let got: Vec<(String, &str)> = fenced_blocks(input)
            .into_iter()
            .map(|block| {
                let content = &input[block.content_start..block.content_end];
                (block.info, content)
            })
            .collect();
        let expected: Vec<(String, &str)> = expected
            .iter()
            .map(|(info, content)| (info.to_string(), *content))
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn fences_are_found() {
        check_fences(
            "text\n```bash\nls -R\n```\nmore\n```diff\n-a\n+b\n```\n",
            &[("bash", "ls -R\n"), ("diff", "-a\n+b\n")],
        );
        check_fences("```python\nx = 1\n", &[("python", "x = 1\n")]);
        check_fences("no fences", &[]);
    }

    #[test]
    fn json_string_views_map_back_to_raw_offsets() {
        let raw = r#"{"diff": "--- a.py\n+++ a.py\n@@ -1 +1 @@\n-x\n+y\n", "updated": true}"#;
        let views = message_views(raw);
        assert_eq!(views.len(), 2);
        assert_eq!(
            views[0].text.trim(),
            "",
            "the raw view blanks the decoded JSON"
        );
        assert_eq!(views[0].text.len(), raw.len());
        let decoded = &views[1];
        assert!(decoded.is_decoded());
        assert_eq!(decoded.text, "--- a.py\n+++ a.py\n@@ -1 +1 @@\n-x\n+y\n");
        let at = decoded.text.find("+y").unwrap();
        let (start, end) = decoded.raw_range(raw, at, at + 2);
        assert_eq!(&raw[start..end], "+y");
    }

    #[test]
    fn nested_json_arguments_are_decoded() {
        let raw = r#"{"name": "bash", "arguments": "{\"command\": \"cat <<EOF > x.py\\nprint(1)\\nEOF\\n\"}"}"#;
        let views = message_views(raw);
        let texts: Vec<&str> = views.iter().map(|view| view.text.as_ref()).collect();
        assert!(
            texts.contains(&"cat <<EOF > x.py\nprint(1)\nEOF\n"),
            "{texts:?}"
        );
    }

    /// `json_spans` as it was written first, visiting every line.
    fn json_spans_line_by_line(text: &str) -> Vec<JsonSpan> {
        let mut spans = Vec::new();
        if !text.contains('{') {
            return spans;
        }
        let mut failed_attempts = 0usize;
        let mut resume_at = 0usize;
        for line in lines_with_offsets(text) {
            if line.start < resume_at {
                continue;
            }
            let trimmed = line.text.trim_start();
            let is_candidate = trimmed.starts_with('{')
                || (line.start == 0 && trimmed.starts_with('['))
                || (trimmed.starts_with("[{"));
            if !is_candidate {
                continue;
            }
            let start = line.end - trimmed.len();
            let rest = &text[start..];
            let mut stream =
                serde_json::Deserializer::from_str(rest).into_iter::<serde::de::IgnoredAny>();
            match stream.next() {
                Some(Ok(_)) => {
                    let end = start + stream.byte_offset();
                    spans.push(JsonSpan { start, end });
                    resume_at = end;
                    if spans.len() >= MAX_JSON_VALUES {
                        break;
                    }
                }
                _ => {
                    failed_attempts += 1;
                    if failed_attempts >= MAX_FAILED_JSON_ATTEMPTS {
                        break;
                    }
                }
            }
        }
        spans
    }

    #[test]
    fn json_spans_found_by_brackets_are_those_of_every_line() {
        const PIECES: &[&str] = &[
            "{",
            "[",
            "[{",
            "}",
            "]",
            " ",
            "\t",
            "\u{a0}",
            "\u{3000}",
            "\u{85}",
            "\n",
            "\r\n",
            "\r",
            "x",
            "é",
            "\"a\"",
            ":",
            ",",
            "1",
            "{\"k\": [1, {\"n\": 2}]}",
            "[{\"a\": 1}]\n",
            "\n{\"name\": \"bash\"}\n",
            "{not json",
            "[1, 2]",
        ];
        let mut next = pseudo_random_below(0x9e37_79b9_7f4a_7c15u64);
        let mut num_spans = 0;
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..1 + next(24) {
                text.push_str(PIECES[next(PIECES.len())]);
            }
            let expected = json_spans_line_by_line(&text);
            num_spans += expected.len();
            assert_eq!(json_spans(&text), expected, "{text:?}");
        }
        // Many texts held values, so the comparison can fail.
        assert!(num_spans > 1_000, "{num_spans}");
    }

    #[test]
    fn fence_lines_found_by_their_characters_are_those_of_every_line() {
        const PIECES: &[&str] = &[
            "```", "~~~", "````", "`", "~", "``", " ", "\t", "\u{a0}", "\u{3000}", "\n", "\r\n",
            "\r", "x", "é", "python", "```py\n", "\n```\n", "~~~~\n", "  ```",
        ];
        let mut next = pseudo_random_below(0x1234_5678_9abc_def1u64);
        let mut num_lines = 0;
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..1 + next(24) {
                text.push_str(PIECES[next(PIECES.len())]);
            }
            let expected: Vec<(&str, usize, usize)> = lines_with_offsets(&text)
                .filter(|line| line.text.trim_start().starts_with(['`', '~']))
                .map(|line| (line.text, line.start, line.end))
                .collect();
            num_lines += expected.len();
            let got: Vec<(&str, usize, usize)> = lines_starting_with(&text, b'`', b'~')
                .map(|line| (line.text, line.start, line.end))
                .collect();
            assert_eq!(got, expected, "{text:?}");
        }
        assert!(num_lines > 10_000, "{num_lines}");
    }

    #[test]
    fn literal_cursors_answer_as_contains_does() {
        const PIECES: &[&str] = &["::", ":", " ", "x", "\n", "\r\n", "é", "a::b", "\n::\n"];
        let mut next = pseudo_random_below(0x5555_aaaa_1234_4321u64);
        for _ in 0..5_000 {
            let mut text = String::new();
            for _ in 0..1 + next(20) {
                text.push_str(PIECES[next(PIECES.len())]);
            }
            let mut cursor = LiteralCursor::new("::", &text);
            for line in lines_with_offsets(&text) {
                // Lines are sometimes skipped, as callers do.
                if next(3) == 0 {
                    continue;
                }
                assert_eq!(cursor.in_line(&line), line.text.contains("::"), "{text:?}");
            }
        }
    }

    #[test]
    fn json_spans_skip_prose() {
        let text = "Thoughts first.\n{\"name\": \"search\", \"query\": \"x\"}\n{not json\n";
        let spans = json_spans(text);
        assert_eq!(spans.len(), 1);
        assert_eq!(
            &text[spans[0].start..spans[0].end],
            "{\"name\": \"search\", \"query\": \"x\"}"
        );
    }
}
