//! The session outcome from what the trajectory shows: whether the last agent
//! message carries a diff, the verdict of the last test run, and whether the
//! run ended in an error.
//!
//! Gathering those signals is left to the caller ([`super::extract_session`]).

use super::Outcome;

/// The status of a session whose final diff stands and whose tests did not fail at the end.
pub const STATUS_RESOLVED: &str = "resolved";
/// The status of a session whose tests failed at the end, or that ended in an error without a diff.
pub const STATUS_FAILED: &str = "failed";
/// The status when the trajectory does not say.
pub const STATUS_UNKNOWN: &str = "unknown";

/// The signals the outcome is decided from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeSignals {
    /// The last agent message carries a diff.
    pub final_diff: bool,
    /// That diff edits, deletes or renames a file that existed (it does not
    /// only add new files).
    pub final_diff_edits_existing: bool,
    /// The verdict of the last test run, if any ran.
    pub last_test_run_passed: Option<bool>,
    /// The last messages show an error (a trace, or a failed last command).
    pub ended_in_error: bool,
}

/// Decides the outcome: "failed" when tests failed at the end; "resolved"
/// when there is a final diff that edits existing code, or whose tests
/// passed at the end; "unknown" for a final diff that only adds new files
/// (a reproduction script is not a fix); "failed" when there is no diff and
/// the run ended in an error; else "unknown".
pub fn decide(signals: OutcomeSignals) -> Outcome {
    let status = if signals.last_test_run_passed == Some(false) {
        STATUS_FAILED
    } else if signals.final_diff
        && (signals.final_diff_edits_existing || signals.last_test_run_passed == Some(true))
    {
        STATUS_RESOLVED
    } else if signals.final_diff {
        STATUS_UNKNOWN
    } else if signals.ended_in_error {
        STATUS_FAILED
    } else {
        STATUS_UNKNOWN
    };
    Outcome {
        final_diff: signals.final_diff,
        tests_passed_at_end: signals.last_test_run_passed,
        status: status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        final_diff: bool,
        edits_existing: bool,
        last: Option<bool>,
        error: bool,
        expected: &str,
    ) {
        let outcome = decide(OutcomeSignals {
            final_diff,
            final_diff_edits_existing: edits_existing,
            last_test_run_passed: last,
            ended_in_error: error,
        });
        assert_eq!(
            outcome.status, expected,
            "{final_diff} {edits_existing} {last:?} {error}"
        );
        assert_eq!(outcome.final_diff, final_diff);
        assert_eq!(outcome.tests_passed_at_end, last);
    }

    #[test]
    fn statuses() {
        check(true, true, Some(true), false, STATUS_RESOLVED);
        check(true, true, None, false, STATUS_RESOLVED);
        check(true, true, None, true, STATUS_RESOLVED);
        check(true, true, Some(false), false, STATUS_FAILED);
        check(false, false, Some(false), false, STATUS_FAILED);
        check(false, false, None, true, STATUS_FAILED);
        check(false, false, None, false, STATUS_UNKNOWN);
        check(false, false, Some(true), false, STATUS_UNKNOWN);
    }

    #[test]
    fn a_final_diff_of_new_files_only_is_not_a_fix_unless_tests_pass() {
        check(true, false, None, false, STATUS_UNKNOWN);
        check(true, false, None, true, STATUS_UNKNOWN);
        check(true, false, Some(true), false, STATUS_RESOLVED);
    }
}
