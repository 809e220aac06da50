//! The session outcome from what the trajectory shows: whether the last agent
//! message carries a diff, the verdict of the last test run, and whether the
//! run ended in an error.
//!
//! Gathering those signals is left to the caller ([`super::extract_session`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Outcome;

/// How a session ended, as far as its trajectory shows; stored and
/// answered as `resolved`, `failed` or `unknown`.
// A stored name this build does not know fails to parse, and the error
// names the expected ones: readers treat the record as unreadable, as any
// corrupt record (search shows the session compact, inspection answers
// that the record is corrupt); nothing panics.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    /// The final diff stands and the tests did not fail at the end.
    Resolved,
    /// The tests failed at the end, or the run ended in an error without a
    /// diff.
    Failed,
    /// The trajectory does not say.
    #[default]
    Unknown,
}

impl OutcomeStatus {
    /// Every status, in declaration order.
    pub const ALL: [OutcomeStatus; 3] = [
        OutcomeStatus::Resolved,
        OutcomeStatus::Failed,
        OutcomeStatus::Unknown,
    ];

    /// The wire name (as stored and as the API answers it).
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeStatus::Resolved => "resolved",
            OutcomeStatus::Failed => "failed",
            OutcomeStatus::Unknown => "unknown",
        }
    }
}

impl fmt::Display for OutcomeStatus {
    /// The wire name; honours width and alignment (`{:<8}`).
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.pad(self.as_str())
    }
}

/// The signals the outcome is decided from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OutcomeSignals {
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

/// Decides the outcome: failed when tests failed at the end; resolved when
/// there is a final diff that edits existing code, or whose tests passed at
/// the end; unknown for a final diff that only adds new files (a
/// reproduction script is not a fix); failed when there is no diff and the
/// run ended in an error; else unknown.
pub(crate) fn decide(signals: OutcomeSignals) -> Outcome {
    let status = if signals.last_test_run_passed == Some(false) {
        OutcomeStatus::Failed
    } else if signals.final_diff
        && (signals.final_diff_edits_existing || signals.last_test_run_passed == Some(true))
    {
        OutcomeStatus::Resolved
    } else if signals.final_diff {
        OutcomeStatus::Unknown
    } else if signals.ended_in_error {
        OutcomeStatus::Failed
    } else {
        OutcomeStatus::Unknown
    };
    Outcome {
        final_diff: signals.final_diff,
        tests_passed_at_end: signals.last_test_run_passed,
        status,
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
        expected: OutcomeStatus,
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
        check(true, true, Some(true), false, OutcomeStatus::Resolved);
        check(true, true, None, false, OutcomeStatus::Resolved);
        check(true, true, None, true, OutcomeStatus::Resolved);
        check(true, true, Some(false), false, OutcomeStatus::Failed);
        check(false, false, Some(false), false, OutcomeStatus::Failed);
        check(false, false, None, true, OutcomeStatus::Failed);
        check(false, false, None, false, OutcomeStatus::Unknown);
        check(false, false, Some(true), false, OutcomeStatus::Unknown);
    }

    #[test]
    fn a_final_diff_of_new_files_only_is_not_a_fix_unless_tests_pass() {
        check(true, false, None, false, OutcomeStatus::Unknown);
        check(true, false, None, true, OutcomeStatus::Unknown);
        check(true, false, Some(true), false, OutcomeStatus::Resolved);
    }

    #[test]
    fn statuses_keep_their_wire_names() {
        for (status, name) in OutcomeStatus::ALL
            .into_iter()
            .zip(["resolved", "failed", "unknown"])
        {
            assert_eq!(status.as_str(), name);
            assert_eq!(status.to_string(), name);
            let json = serde_json::to_string(&status).expect("serializes");
            assert_eq!(json, format!("\"{name}\""));
            let parsed: OutcomeStatus = serde_json::from_str(&json).expect("parses");
            assert_eq!(parsed, status);
        }
        assert_eq!(format!("{:<9}|", OutcomeStatus::Failed), "failed   |");
    }

    #[test]
    fn an_unknown_stored_status_fails_to_parse_and_names_the_expected_ones() {
        let error = serde_json::from_str::<OutcomeStatus>("\"fixed\"")
            .expect_err("not a status")
            .to_string();
        assert!(
            error.contains("fixed") && error.contains("resolved"),
            "{error}"
        );
    }
}
