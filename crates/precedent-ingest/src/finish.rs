//! What the record keeps at the end: scratch, refused and outside files
//! dropped with their symbols and evidence, paths made relative to the
//! root, and the record assembled with its outcome.

use std::collections::HashSet;

use super::edits::{is_under_folder, same_file};
use super::{
    Diagnostic, MAX_FILES_CHANGED, SessionBuilder, SessionRecord, UniqueList, outcome, scratch,
};

impl SessionBuilder {
    /// Files the session created and removed (or left out of its final
    /// diff) are not changes: their paths, the symbols found only in them and
    /// their fix evidence go.
    fn drop_scratch_files(&mut self) {
        let scratch = self.edits.scratch_files().clone();
        self.drop_files(&scratch);
    }

    /// Files the session created that are scratch by their use (scripts it
    /// ran, files outside the root, output artifacts; see
    /// [`super::edits::Tracker::scratch_by_use`]) and files edits changed outside
    /// the root go, unless a diff the session showed holds them.
    fn drop_scratch_by_use(&mut self) {
        let mut scratch = self.edits.scratch_by_use();
        scratch.extend(self.outside_files.iter().cloned());
        scratch.retain(|path| !self.written_diffs.changed(path));
        // The same script named another way (`reproduce.py` created, then
        // edited as `/sympy__sympy/reproduce.py` in the editor's window).
        let twins: Vec<String> = self
            .files_changed
            .values
            .iter()
            .filter(|path| !self.written_diffs.changed(path) && is_twin_of_any(path, &scratch))
            .cloned()
            .collect();
        scratch.extend(twins);
        self.drop_files(&scratch);
    }

    /// New files that are scratch by what the repository is (see
    /// [`scratch`]), even when a written diff holds them. Only for a
    /// session that shows files the repository had before it.
    fn drop_scratch_by_place(&mut self) {
        let git_root = scratch::root_from_git_diffs(
            &self.files_from_edits,
            &self.written_diffs.added_or_existing(),
        );
        let relative = |path: &str| -> Option<String> {
            match &git_root {
                Some(root) => path.strip_prefix(root.as_str()).map(str::to_string),
                None => Some(path.to_string()),
            }
        };
        let mut existing: HashSet<String> = self.written_diffs.existing().clone();
        existing.extend(
            self.edits
                .existing_files()
                .filter_map(|path| relative(path)),
        );
        // What git shows as new was not there, though the session viewed it.
        existing.retain(|path| !self.written_diffs.is_added(path));
        // Only a session that changed files the repository had (a new
        // project's files are all new).
        let changed_existing =
            self.edits.edits_existing() || !self.written_diffs.existing().is_empty();
        if existing.is_empty() || !changed_existing {
            return;
        }
        let folders = scratch::repository_folders(existing.iter().map(String::as_str));
        let created = self.edits.created_files();
        let written_by_edit = |path: &str| {
            created.iter().any(|created| {
                created == path
                    || git_root
                        .as_deref()
                        .is_some_and(|root| created.strip_prefix(root) == Some(path))
            })
        };
        let tests_in_folders = self.edits.saw_tests_in_folders()
            || existing.iter().any(|path| scratch::is_test_in_folder(path));
        let mut scratch = HashSet::new();
        for path in &self.files_changed.values {
            if let Some(root) = &git_root
                && !path.starts_with(root.as_str())
                && !self.written_diffs.changed(path)
            {
                // Edited outside the checkout git printed diffs of.
                scratch.insert(path.clone());
                continue;
            }
            let written = written_by_edit(path);
            let is_new = (written || self.written_diffs.is_added(path)) && !existing.contains(path);
            if !is_new {
                continue;
            }
            let Some(inside) = relative(path)
                .filter(|_| !self.written_diffs.is_added(path))
                .or_else(|| {
                    // A diff's path is already relative to the checkout.
                    self.written_diffs.is_added(path).then(|| path.clone())
                })
            else {
                // An edit outside the checkout git printed diffs of.
                scratch.insert(path.clone());
                continue;
            };
            let full = git_root
                .as_deref()
                .map_or_else(|| inside.clone(), |root| format!("{root}{inside}"));
            let imported = self.edits.importers_of(&full).iter().any(|importer| {
                relative(importer).is_some_and(|importer| existing.contains(&importer))
            });
            let file = scratch::NewFile {
                path: &inside,
                // No edit wrote it, where edits are how the agent writes
                // files: its runs made it.
                written_by_edit: written || !self.edits.has_edits(),
                run: self.edits.was_run(&full) || self.edits.was_run(&inside),
                binary: self.written_diffs.is_binary(path),
                imported,
                tests_in_folders,
            };
            if scratch::is_scratch(&file, &folders, &self.edits) {
                scratch.insert(path.clone());
            }
        }
        // The same files under the names edits gave them (a twin a diff's
        // name replaced in the list) hold their symbols and evidence too.
        let twins: Vec<String> = self
            .symbol_files
            .values()
            .flatten()
            .chain(
                self.evidence
                    .fix
                    .iter()
                    .filter_map(|evidence| evidence.file.as_ref()),
            )
            .filter(|file| !self.files_changed.values.contains(*file))
            .filter(|file| is_twin_of_any(file, &scratch))
            .cloned()
            .collect();
        scratch.extend(twins);
        self.drop_files(&scratch);
    }

    /// With no root named, the one the session's directories and files
    /// show: changed paths under it become relative, and absolute ones
    /// outside it are not the repository's (a diagnostic says so).
    fn relative_to_inferred_root(&mut self) {
        let Some(root) = self.edits.inferred_root(&self.files_changed.values) else {
            return;
        };
        let relative = |path: &str| path.strip_prefix(root.as_str()).map(str::to_string);
        let mut outside = HashSet::new();
        let mut kept = UniqueList::default();
        for path in std::mem::take(&mut self.files_changed.values) {
            match relative(&path) {
                Some(inside) => {
                    kept.push(&inside, MAX_FILES_CHANGED);
                }
                None if path.starts_with('/') && !self.written_diffs.changed(&path) => {
                    outside.insert(path);
                }
                None => {
                    kept.push(&path, MAX_FILES_CHANGED);
                }
            }
        }
        self.files_changed = kept;
        self.file_blobs = std::mem::take(&mut self.file_blobs)
            .into_iter()
            .map(|(path, blob)| (relative(&path).unwrap_or(path), blob))
            .collect();
        for files in self.symbol_files.values_mut() {
            for file in files.iter_mut() {
                if let Some(inside) = relative(file) {
                    *file = inside;
                }
            }
        }
        for evidence in &mut self.evidence.fix {
            if let Some(inside) = evidence.file.as_deref().and_then(relative) {
                evidence.file = Some(inside);
                for side in ["a", "b"] {
                    evidence.text =
                        evidence
                            .text
                            .replacen(&format!("{side}/{root}"), &format!("{side}/"), 1);
                }
            }
        }
        let mut outside: Vec<String> = outside.into_iter().collect();
        outside.sort();
        for path in &outside {
            let message_index = self
                .evidence
                .fix
                .iter()
                .find(|evidence| evidence.file.as_deref() == Some(path.as_str()))
                .map_or(0, |evidence| evidence.message_index);
            self.diagnose(
                message_index,
                format!("{path} is outside the repository root {root}: not the repository's"),
            );
        }
        self.drop_files(&outside.into_iter().collect());
    }

    /// Removes `scratch` files, the symbols only they hold and their fix
    /// evidence from the record.
    fn drop_files(&mut self, scratch: &HashSet<String>) {
        if scratch.is_empty() {
            return;
        }
        self.files_changed
            .values
            .retain(|path| !scratch.contains(path));
        self.last_edit_at.retain(|path, _| !scratch.contains(path));
        let symbol_files = &self.symbol_files;
        self.symbols_changed.values.retain(|symbol| {
            symbol_files
                .get(symbol)
                .is_none_or(|files| files.iter().any(|file| !scratch.contains(file)))
        });
        self.evidence.fix.retain(|evidence| {
            evidence
                .file
                .as_ref()
                .is_none_or(|file| !scratch.contains(file))
        });
    }

    /// Files changed only by edit operations that the diff the run ended
    /// with leaves out: edits the tool refused (SWE-agent's linter), undid or
    /// reverted. The written diff is the net change.
    fn drop_edits_outside_final_diff(&mut self) {
        if !self.last_agent_message_has_diff
            || self.last_agent_diff_from_edits_only
            || self.written_diffs.final_files().is_empty()
            || self.files_from_edits.is_empty()
        {
            return;
        }
        let dropped: HashSet<String> = self
            .files_from_edits
            .iter()
            .filter(|path| {
                !self.written_diffs.changed(path)
                    && !self
                        .written_diffs
                        .final_files()
                        .iter()
                        .any(|kept| same_file(path, kept))
            })
            .cloned()
            .collect();
        self.drop_files(&dropped);
    }

    /// A path only edits named that is another changed path seen from
    /// elsewhere (an editor's `/pytest-dev__pytest/src/a.py`, or `a.py`
    /// created after a `cd`, beside the final diff's `src/a.py`) is that
    /// file: the name a written diff gave is kept, else the relative one.
    fn merge_path_twins(&mut self) {
        let values = &self.files_changed.values;
        let written = &self.written_diffs;
        let twins: HashSet<String> = values
            .iter()
            .filter(|path| !written.changed(path) && self.files_from_edits.contains(*path))
            .filter(|path| {
                values.iter().any(|other| {
                    other != *path
                        && (written.changed(other)
                            || (path.starts_with('/') && !other.starts_with('/')))
                        && same_file(path, other)
                })
            })
            .cloned()
            .collect();
        if !twins.is_empty() {
            self.files_changed
                .values
                .retain(|path| !twins.contains(path));
        }
    }

    /// The verdict of the last test run, unless a repository file the
    /// record keeps was edited in a later message: then the tests did not
    /// run on the end state and it is unknown. Called once scratch and
    /// refused files are dropped (their edits do not count).
    fn tests_passed_at_end(&self) -> Option<bool> {
        self.tests
            .passed_at_end(self.last_edit_at.values().copied().max())
    }

    pub(super) fn finish(mut self) -> (SessionRecord, Vec<Diagnostic>) {
        let symbols_referenced = self.references.merged();

        let record_tests = self.tests.take_record();

        let language = self.languages.winner();

        // Edits no observation answered stand (as the tracker takes them).
        self.settle_edits(false);
        self.drop_scratch_files();
        self.drop_scratch_by_use();
        let mut refused = self.edits.refused_files();
        refused.retain(|path| !self.written_diffs.changed(path));
        self.drop_files(&refused);
        self.drop_edits_outside_final_diff();
        self.merge_path_twins();
        self.relative_to_inferred_root();
        self.drop_scratch_by_place();
        let tests_passed_at_end = self.tests_passed_at_end();
        // Without a final written diff (the last message's edits rendered as
        // diffs do not count as one), the run's edits are its fix once it
        // says it is done or its tests pass at the end.
        let edits_are_fix = (!self.last_agent_message_has_diff
            || self.last_agent_diff_from_edits_only)
            && self.edits.has_edits()
            && (self.edits.completed() || tests_passed_at_end == Some(true));
        let outcome = outcome::decide(outcome::OutcomeSignals {
            final_diff: (self.last_agent_message_has_diff && !self.last_agent_diff_from_edits_only)
                || edits_are_fix,
            // A run that declared itself done stands by the files it
            // created too (scratch files are already dropped).
            final_diff_edits_existing: if edits_are_fix {
                self.edits.edits_existing()
                    || (self.edits.completed() && !self.files_changed.values.is_empty())
            } else {
                self.last_agent_diff_edits_existing
            },
            last_test_run_passed: tests_passed_at_end,
            ended_in_error: self.last_message_has_error || self.last_message_failed_command,
        });

        let evidence = self.evidence.select();

        let kept_files: HashSet<&String> = self.files_changed.values.iter().collect();
        let file_blobs = self
            .file_blobs
            .iter()
            .filter(|(path, _)| kept_files.contains(path))
            .map(|(path, blob)| (path.clone(), blob.clone()))
            .collect();
        let record = SessionRecord {
            task: self.task,
            language,
            file_blobs,
            files_changed: self.files_changed.values,
            symbols_changed: self.symbols_changed.values,
            symbols_referenced,
            errors: self.errors.into_records(),
            tests: record_tests,
            commands: self.commands.into_records(),
            outcome,
            evidence,
            last_message_at_ms: self.last_message_at_ms,
        };
        (record, self.diagnostics)
    }
}

/// Whether `path` is one of `names` under a folder more.
fn is_twin_of_any(path: &str, names: &HashSet<String>) -> bool {
    names.iter().any(|name| is_under_folder(path, name))
}
