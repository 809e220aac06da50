//! The builder's small ledgers, each the owner of one kind of fact and its
//! caps: the evidence spans, the test outcomes, the votes for the session's
//! language.

use std::collections::{HashMap, HashSet};

use super::testrun::{self, TestStatus};
use super::text::{TextView, truncate_to_bytes};
use super::{
    Evidence, MAX_ERROR_EVIDENCE, MAX_EVIDENCE, MAX_EVIDENCE_TEXT_BYTES, MAX_FIX_EVIDENCE,
    MAX_LANGUAGE_MENTIONS, MAX_TESTS_PER_STATUS, TestCounts, TestsRecord, mentions,
};
use crate::language::Language;

/// The evidence spans of a session, by kind.
#[derive(Default, Clone)]
pub(super) struct EvidenceLedger {
    pub(super) task: Vec<Evidence>,
    pub(super) fix: Vec<Evidence>,
    /// The fix hunks seen (path and text): one shown again adds nothing.
    pub(super) fix_keys: HashSet<String>,
    pub(super) error: Vec<Evidence>,
    pub(super) step: Vec<Evidence>,
}

impl EvidenceLedger {
    /// Drops the fixes no selection keeps: only the latest are ever
    /// selected (the keys of the hunks seen stay).
    pub(super) fn keep_latest_fixes(&mut self) {
        if self.fix.len() > MAX_FIX_EVIDENCE {
            self.fix.drain(..self.fix.len() - MAX_FIX_EVIDENCE);
        }
    }

    /// Keeps the task, the latest fixes, the first errors and the latest
    /// steps within [`MAX_EVIDENCE`], in message order.
    pub(super) fn select(self) -> Vec<Evidence> {
        let EvidenceLedger {
            task,
            fix: mut fixes,
            error: mut errors,
            step: mut steps,
            ..
        } = self;
        let mut selected = task;
        if fixes.len() > MAX_FIX_EVIDENCE {
            fixes.drain(..fixes.len() - MAX_FIX_EVIDENCE);
        }
        errors.truncate(MAX_ERROR_EVIDENCE);
        selected.extend(fixes);
        selected.extend(errors);
        let room = MAX_EVIDENCE.saturating_sub(selected.len());
        if steps.len() > room {
            steps.drain(..steps.len() - room);
        }
        selected.extend(steps);
        selected.truncate(MAX_EVIDENCE);
        selected.sort_by_key(|evidence| (evidence.message_index, evidence.byte_start));
        for evidence in &mut selected {
            if evidence.text.len() > MAX_EVIDENCE_TEXT_BYTES * 2 {
                evidence.text =
                    truncate_to_bytes(&evidence.text, MAX_EVIDENCE_TEXT_BYTES * 2).to_string();
            }
        }
        selected
    }
}

/// The tests a session ran and its last test run.
#[derive(Default, Clone)]
pub(super) struct TestLedger {
    /// Per test, when it was last seen (in order of sight) and its status then.
    status: HashMap<String, (usize, TestStatus)>,
    order: usize,
    last_run: Option<bool>,
    /// The message that showed the last test run.
    last_run_at: Option<usize>,
    /// The counts of the last test run's summary line.
    last_run_counts: Option<TestCounts>,
}

impl TestLedger {
    /// Reads the test outcomes and runs a view shows.
    pub(super) fn add(&mut self, message_index: usize, view: &TextView<'_>) {
        let observations = testrun::parse_test_observations(&view.text);
        for result in observations.results {
            self.order += 1;
            self.status
                .insert(result.test_id, (self.order, result.status));
        }
        if let Some(run) = observations.runs.last() {
            self.last_run = Some(run.passed);
            self.last_run_at = Some(message_index);
            let line = view.text.get(run.offset..run.end).unwrap_or("");
            let next = view
                .text
                .get(run.end..)
                .unwrap_or("")
                .trim_start_matches(['\r', '\n'])
                .lines()
                .next()
                .unwrap_or("");
            self.last_run_counts = testrun::run_counts(line, next)
                .map(|(passed, failed)| TestCounts { passed, failed });
        }
    }

    /// The verdict of the last test run, unless a file was edited in a
    /// later message (`last_edit_at`): then it is unknown.
    pub(super) fn passed_at_end(&self, last_edit_at: Option<usize>) -> Option<bool> {
        let run_at = self.last_run_at?;
        if last_edit_at.is_some_and(|edit_at| edit_at > run_at) {
            return None;
        }
        self.last_run
    }

    /// The record's tests: passing and failing, in the order last seen,
    /// and the last run's counts (the statuses are taken).
    pub(super) fn take_record(&mut self) -> TestsRecord {
        let mut tests: Vec<(String, (usize, TestStatus))> = self.status.drain().collect();
        tests.sort_by_key(|(_, (order, _))| *order);
        let mut record_tests = TestsRecord {
            last_run: self.last_run_counts,
            ..TestsRecord::default()
        };
        for (test_id, (_, status)) in tests {
            let list = match status {
                TestStatus::Passed => &mut record_tests.passing,
                TestStatus::Failed => &mut record_tests.failing,
            };
            if list.len() < MAX_TESTS_PER_STATUS {
                list.push(test_id);
            }
        }
        record_tests
    }
}

/// Votes for the session's language: the languages of the files it
/// changed, showed and named.
#[derive(Default, Clone)]
pub(super) struct LanguageVotes {
    /// Per language, its weight and the order of its first vote.
    votes: HashMap<Language, (usize, usize)>,
    /// File paths named in messages that voted.
    mentions: usize,
    order: usize,
}

impl LanguageVotes {
    pub(super) fn vote(&mut self, language: Language, weight: usize) {
        self.order += 1;
        let order = self.order;
        let entry = self.votes.entry(language).or_insert((0, order));
        entry.0 += weight;
    }

    /// Votes for the language of `path`, if it is code.
    pub(super) fn vote_path(&mut self, path: &str, weight: usize) {
        if let Some(language) = Language::from_path(path) {
            self.vote(language, weight);
        }
    }

    /// Votes for the languages of the file paths a message names, up to
    /// [`MAX_LANGUAGE_MENTIONS`] in the session.
    pub(super) fn vote_mentions(&mut self, content: &str) {
        if self.mentions < MAX_LANGUAGE_MENTIONS {
            for path in mentions::file_paths(content) {
                if self.mentions >= MAX_LANGUAGE_MENTIONS {
                    break;
                }
                self.mentions += 1;
                self.vote_path(&path, 1);
            }
        }
    }

    /// The language with the most weight, the earliest voted on a tie.
    pub(super) fn winner(&self) -> Option<Language> {
        self.votes
            .iter()
            .max_by_key(|(_, (weight, order))| (*weight, usize::MAX - *order))
            .map(|(language, _)| *language)
    }
}
