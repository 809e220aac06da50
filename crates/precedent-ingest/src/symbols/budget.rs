//! How much tree-sitter work a caller allows ([`ParseBudget`]), and the one
//! bounded parse every tag extraction goes through: a per-thread parser, a
//! progress callback that gives up on garbage, and, when the caller passes
//! a clock, a time limit per parse, counted in the parsing thread's CPU
//! time.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::time::Duration;

use tree_sitter::{ParseOptions, ParseState, Parser, Tree};

use super::grammar::LanguageSupport;
use crate::Clock;

/// Bytes of input per allowed parser progress callback (tree-sitter calls back
/// every 100 parser operations; real code needs under one callback per 50
/// bytes, so this leaves about 5x headroom before giving up on garbage).
const PARSE_BYTES_PER_CALLBACK: usize = 10;

/// Parser progress callbacks always allowed (small fragments need under 30).
const PARSE_CALLBACKS_BASE: usize = 200;

/// Progress callbacks between two reads of the thread clock.
const CALLBACKS_PER_CLOCK_READ: usize = 8;

/// Time any single parse may take, before the per-size allowance.
const PARSE_TIME_BASE: Duration = Duration::from_millis(20);

/// Bytes of diff hunks parsed per session.
const HUNK_PARSE_BYTES: usize = 8 * 1024 * 1024;

/// Time spent parsing diff hunks per session (real sessions use a few ms to
/// a few tens of ms).
const HUNK_PARSE_TIME: Duration = Duration::from_millis(250);

/// How much tree-sitter work a caller allows: bytes handed to the parser and
/// time spent in it, as its clock measures. Parser operation counts alone do
/// not bound time (error recovery on garbage costs ~10x more per operation
/// than on code), so a server's clock guards against pathological input; on
/// real code neither limit is reached, and when one is, callers fall back to
/// the line scan. Without a clock ([`Clock::Ignored`]) only bytes and parser
/// progress count.
#[derive(Debug, Clone)]
pub struct ParseBudget {
    remaining_bytes: usize,
    remaining_time: Duration,
    per_parse_base: Duration,
    clock: Clock,
}

impl Default for ParseBudget {
    /// The per-session budget for diff hunks, without a clock.
    fn default() -> Self {
        ParseBudget::for_hunks(Clock::Ignored)
    }
}

impl ParseBudget {
    /// A budget of `bytes` parsed and `time` spent parsing, as `clock`
    /// measures it.
    pub fn new(bytes: usize, time: Duration, clock: Clock) -> ParseBudget {
        ParseBudget {
            remaining_bytes: bytes,
            remaining_time: time,
            per_parse_base: PARSE_TIME_BASE,
            clock,
        }
    }

    /// The per-session budget for diff hunks: 8 MB, 250 ms.
    pub fn for_hunks(clock: Clock) -> ParseBudget {
        ParseBudget::new(HUNK_PARSE_BYTES, HUNK_PARSE_TIME, clock)
    }

    /// A budget without a clock or a bound on bytes: for tests, where
    /// determinism matters more than latency.
    #[cfg(test)]
    pub fn generous() -> ParseBudget {
        ParseBudget::new(usize::MAX, Duration::MAX, Clock::Ignored)
    }

    /// Whether `length` more bytes may be parsed.
    pub fn allows(&self, length: usize) -> bool {
        length <= self.remaining_bytes
            && (self.clock.is_ignored() || !self.remaining_time.is_zero())
    }

    /// The time one parse of `length` bytes may take: a base plus 1 ms per
    /// 4 KB (real code parses at several MB/s), within what remains.
    fn time_limit(&self, length: usize) -> Duration {
        let per_parse = self.per_parse_base + Duration::from_millis((length / 4_096) as u64);
        per_parse.min(self.remaining_time)
    }

    /// Parses `source` within the budget (see [`parse_bounded`]) and spends
    /// its bytes and the time the parse took.
    pub(super) fn parse(&mut self, support: &LanguageSupport, source: &str) -> Option<Tree> {
        let started = self.clock.thread_now();
        let deadline =
            started.and_then(|started| started.checked_add(self.time_limit(source.len())));
        let tree = parse_bounded(support, source, self.clock, deadline);
        self.spend(source.len(), self.clock.thread_since(started));
        tree
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

/// Parses `source` with the thread's parser, giving up after a number of
/// progress callbacks proportional to its size, or when the thread's CPU
/// time (see [`Clock::thread_now`]) passes `deadline`.
fn parse_bounded(
    support: &LanguageSupport,
    source: &str,
    clock: Clock,
    deadline: Option<Duration>,
) -> Option<Tree> {
    PARSER.with(|parser| {
        let mut parser = parser.try_borrow_mut().ok()?;
        parse_bounded_with(&mut parser, support, source, clock, deadline)
    })
}

fn parse_bounded_with(
    parser: &mut Parser,
    support: &LanguageSupport,
    source: &str,
    clock: Clock,
    deadline: Option<Duration>,
) -> Option<Tree> {
    parser.reset();
    parser.set_language(&support.language).ok()?;
    let budget = PARSE_CALLBACKS_BASE + source.len() / PARSE_BYTES_PER_CALLBACK;
    let mut callbacks = 0usize;
    let mut progress = |_: &ParseState| {
        callbacks += 1;
        // The thread clock is a system call: read it every few callbacks.
        if callbacks > budget
            || (callbacks.is_multiple_of(CALLBACKS_PER_CLOCK_READ)
                && clock.thread_is_past(deadline))
        {
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
    use std::time::Instant;

    use crate::symbols::tags::extract_tags_within;
    use precedent_core::language::Grammar;

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
        let mut budget = ParseBudget::new(
            usize::MAX,
            Duration::from_millis(50),
            Clock::Wall(Instant::now),
        );
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
