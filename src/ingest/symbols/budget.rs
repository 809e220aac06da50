//! How much tree-sitter work a caller allows ([`ParseBudget`]), and the one
//! bounded parse every tag extraction goes through: a per-thread parser, a
//! progress callback that gives up on garbage, a clock per parse.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tree_sitter::{ParseOptions, ParseState, Parser, Tree};

use super::grammar::LanguageSupport;

/// Bytes of input per allowed parser progress callback (tree-sitter calls back
/// every 100 parser operations; real code needs under one callback per 50
/// bytes, so this leaves about 5x headroom before giving up on garbage).
const PARSE_BYTES_PER_CALLBACK: usize = 10;

/// Parser progress callbacks always allowed (small fragments need under 30).
const PARSE_CALLBACKS_BASE: usize = 200;

/// Time any single parse may take, before the per-size allowance.
const PARSE_TIME_BASE: Duration = Duration::from_millis(20);

/// Whether budgets ignore the wall clock (see [`ignore_wall_clock`]).
static CLOCK_FREE: AtomicBool = AtomicBool::new(false);

/// From now on, in this process, parse budgets count bytes and parser
/// progress only, and line diffs of edits run to the end, never stopped by
/// wall-clock time, so that extraction gives the same
/// records however loaded the machine is. For offline tools that compare
/// records (`precedent bench ingest --records-out`); a server keeps its clock,
/// which bounds latency on pathological input.
pub fn ignore_wall_clock() {
    CLOCK_FREE.store(true, Ordering::Relaxed);
}

/// Whether extraction ignores the wall clock (see [`ignore_wall_clock`]):
/// every time limit of extraction (parses, line diffs of edits) reads it.
pub fn clock_free() -> bool {
    CLOCK_FREE.load(Ordering::Relaxed)
}

/// The time one parse may take when budgets ignore the clock: it stops only
/// a truly runaway parse.
const CLOCK_FREE_PARSE_TIME: Duration = Duration::from_secs(60);

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
    /// for tests, where determinism matters more than latency (offline tools
    /// use [`ignore_wall_clock`]).
    #[cfg(test)]
    pub fn generous() -> ParseBudget {
        ParseBudget {
            remaining_bytes: usize::MAX,
            remaining_time: Duration::from_secs(3_600),
            per_parse_base: Duration::from_secs(60),
        }
    }

    /// Whether `length` more bytes may be parsed.
    pub fn allows(&self, length: usize) -> bool {
        length <= self.remaining_bytes && (clock_free() || !self.remaining_time.is_zero())
    }

    /// The time one parse of `length` bytes may take: a base plus 1 ms per
    /// 4 KB (real code parses at several MB/s), within what remains.
    pub(super) fn time_limit(&self, length: usize) -> Duration {
        if clock_free() {
            return CLOCK_FREE_PARSE_TIME;
        }
        let per_parse = self.per_parse_base + Duration::from_millis((length / 4_096) as u64);
        per_parse.min(self.remaining_time)
    }

    pub(super) fn spend(&mut self, length: usize, elapsed: Duration) {
        self.remaining_bytes = self.remaining_bytes.saturating_sub(length);
        self.remaining_time = self.remaining_time.saturating_sub(elapsed);
    }
}

/// Looks like text a parser can make sense of: at most 1% control or
/// replacement characters (lossy-decoded binary is refused outright).
pub(super) fn looks_like_code(source: &str) -> bool {
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
}

pub(super) fn parse_bounded(
    support: &LanguageSupport,
    source: &str,
    time_limit: Duration,
) -> Option<Tree> {
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

#[cfg(test)]
mod tests {
    use crate::ingest::symbols::tags::extract_tags_within;
    use crate::language::Grammar;

    use super::*;

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
        let _ = extract_tags_within(Grammar::Python, &printable, &mut budget);
        let _ = extract_tags_within(Grammar::Python, &printable, &mut budget);
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(!budget.allows(1), "the time budget is spent");
        // Lossy-decoded binary is refused outright.
        let binary = String::from_utf8_lossy(&[0xff, 0x00, 0x41, 0xfe].repeat(1000)).into_owned();
        assert!(!looks_like_code(&binary));
        assert!(looks_like_code("def f(x):\n    return x  # ok é\n"));
    }
}
