//! The clock that extraction's time limits read, passed in by the caller:
//! extraction never reads the wall clock itself. A server passes the wall
//! clock, which bounds latency on pathological input; a tool that compares
//! records passes none. With a clock, a tree-sitter parse's limit counts
//! the parsing thread's own CPU time ([`Clock::thread_now`]), not the
//! wall clock's, and only a line diff of large texts has a wall-clock
//! deadline, so that how loaded the machine is changes no record of
//! ordinary size.

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

    /// The calling thread's CPU time, if there is a clock: what a parse's
    /// limit counts. Time the thread waits for a core is not counted, so a
    /// parse that fits on an idle machine fits on a busy one. Where the
    /// platform has no thread clock, the caller's clock stands in.
    pub(crate) fn thread_now(self) -> Option<Duration> {
        match self {
            Clock::Ignored => None,
            Clock::Wall(now) => Some(thread_cpu_time().unwrap_or_else(|| {
                let epoch = *WALL_EPOCH.get_or_init(now);
                now().saturating_duration_since(epoch)
            })),
        }
    }

    /// Whether the thread has spent up to `deadline` (a
    /// [`Clock::thread_now`] plus a limit).
    pub(crate) fn thread_is_past(self, deadline: Option<Duration>) -> bool {
        match (self.thread_now(), deadline) {
            (Some(now), Some(deadline)) => now > deadline,
            _ => false,
        }
    }

    /// The thread CPU time spent since `started` (from
    /// [`Clock::thread_now`]); zero without a clock.
    pub(crate) fn thread_since(self, started: Option<Duration>) -> Duration {
        match (self.thread_now(), started) {
            (Some(now), Some(started)) => now.saturating_sub(started),
            _ => Duration::ZERO,
        }
    }
}

/// The origin of the stand-in thread clock where there is none.
static WALL_EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// The CPU time the calling thread has used.
#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    let mut spec = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `spec` is a valid, writable timespec for the call's duration.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut spec) } != 0 {
        return None;
    }
    let seconds = u64::try_from(spec.tv_sec).ok()?;
    let nanos = u32::try_from(spec.tv_nsec).ok()?;
    Some(Duration::new(seconds, nanos))
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_clock_counts_work_not_waiting() {
        let clock = Clock::Wall(Instant::now);
        let started = clock.thread_now();
        assert!(started.is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert!(
            clock.thread_since(started) < Duration::from_millis(30),
            "sleeping is not work"
        );
        let deadline = started.map(|started| started + Duration::from_millis(20));
        let mut spins = 0u64;
        while !clock.thread_is_past(deadline) {
            spins = std::hint::black_box(spins.wrapping_add(1));
        }
        assert!(clock.thread_since(started) >= Duration::from_millis(20));
        assert_eq!(Clock::Ignored.thread_now(), None);
        assert!(!Clock::Ignored.thread_is_past(Some(Duration::ZERO)));
    }
}
