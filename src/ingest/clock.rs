//! The clock that extraction's time limits read, passed in by the caller:
//! extraction never reads the wall clock itself. A server passes the wall
//! clock, which bounds latency on pathological input; a tool that compares
//! records passes none, so that they do not depend on how loaded the
//! machine is.

use std::time::{Duration, Instant};

/// What extraction's time limits (tree-sitter parses, line diffs of edits)
/// measure.
#[derive(Debug, Clone, Copy, Default)]
pub enum Clock {
    /// No clock: time is not limited, only bytes and parser progress are,
    /// and the same messages always give the same record.
    #[default]
    Ignored,
    /// The caller's clock (`Clock::Wall(Instant::now)`): work stops when
    /// its time is up.
    Wall(fn() -> Instant),
}

impl Clock {
    /// Whether time is limited at all.
    pub(crate) fn is_ignored(self) -> bool {
        matches!(self, Clock::Ignored)
    }

    /// The time now, if there is a clock.
    pub(crate) fn now(self) -> Option<Instant> {
        match self {
            Clock::Ignored => None,
            Clock::Wall(now) => Some(now()),
        }
    }

    /// The time `limit` from now, if there is a clock.
    pub(crate) fn deadline(self, limit: Duration) -> Option<Instant> {
        self.now().and_then(|now| now.checked_add(limit))
    }

    /// Whether `deadline` (from [`Clock::deadline`]) has passed.
    pub(crate) fn is_past(self, deadline: Option<Instant>) -> bool {
        match (self, deadline) {
            (Clock::Wall(now), Some(deadline)) => now() > deadline,
            _ => false,
        }
    }

    /// The time since `started` (from [`Clock::now`]); zero without a clock.
    pub(crate) fn since(self, started: Option<Instant>) -> Duration {
        match (self.now(), started) {
            (Some(now), Some(started)) => now.saturating_duration_since(started),
            _ => Duration::ZERO,
        }
    }
}
