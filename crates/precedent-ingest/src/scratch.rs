//! Scratch files by what the repository is: a file the session added is
//! the repository's change when it lands where the repository keeps such
//! files (under a folder that holds files the session shows existed before
//! it), or when a file of the repository imports it. A new file at the
//! root, or in a folder of its own outside the repository's folders, that
//! the agent only ran, is scratch even when a diff it printed holds it; so
//! is data its runs produced (a new file no edit wrote that git shows as
//! binary, or at the root).

use std::collections::HashSet;

/// What the session shows of one new file.
#[derive(Debug, Clone, Default)]
pub(crate) struct NewFile<'a> {
    /// Its path, relative to the checkout's root.
    pub path: &'a str,
    /// An edit of the session wrote it (else only a diff or listing shows it).
    pub written_by_edit: bool,
    /// The agent ran it (as a script or a test file).
    pub run: bool,
    /// A diff showed it as a binary file.
    pub binary: bool,
    /// A file of the repository (one that existed, or a kept new one) imports it.
    pub imported: bool,
    /// The session shows the repository keeps its tests in folders (a test
    /// module under a folder existed or was run).
    pub tests_in_folders: bool,
}

/// Whether a file's name is a test module's by the test runners'
/// conventions (`test_x.py`, `x_test.go`, `x.test.ts`, `x.spec.js`).
pub(crate) fn is_test_name(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some((stem, _)) = name.rsplit_once('.') else {
        return false;
    };
    stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with(".test")
        || stem.ends_with(".spec")
}

/// Whether `path` is a test module inside a folder.
pub(crate) fn is_test_in_folder(path: &str) -> bool {
    path.contains('/') && is_test_name(path)
}

/// What the session did in folders (relative to the root).
pub(crate) trait Workplace {
    /// Whether the agent ran a file under `folder` or moved into it.
    fn worked_in(&self, folder: &str) -> bool;
}

/// The folders (relative to the root, without the root itself) that hold
/// the `existing` files, each ancestor included.
pub(crate) fn repository_folders<'a>(
    existing: impl IntoIterator<Item = &'a str>,
) -> HashSet<String> {
    let mut folders = HashSet::new();
    for path in existing {
        let mut head = path;
        while let Some((parent, _)) = head.rsplit_once('/') {
            if parent.is_empty() || !folders.insert(parent.to_string()) {
                break;
            }
            head = parent;
        }
    }
    folders
}

/// Whether a new file is scratch, given the repository's folders: in a
/// folder of its own, when the agent worked in that folder (ran a file
/// there, moved there).
pub(crate) fn is_scratch(
    file: &NewFile<'_>,
    folders: &HashSet<String>,
    workplace: &dyn Workplace,
) -> bool {
    if file.binary && !file.written_by_edit {
        return true;
    }
    if file.imported {
        return false;
    }
    match file.path.rsplit_once('/') {
        // At the root: scratch when the agent only ran it, or its runs made
        // it, or it is a test module where the repository's tests live in
        // folders.
        None => {
            file.run || !file.written_by_edit || (file.tests_in_folders && is_test_name(file.path))
        }
        Some((folder, _)) => {
            let mut head = folder;
            loop {
                if folders.contains(head) {
                    return false;
                }
                match head.rsplit_once('/') {
                    Some((parent, _)) => head = parent,
                    // `head` is the folder of its own at the top.
                    None => return workplace.worked_in(head),
                }
            }
        }
    }
}

/// The folder a checkout's root is at, as the session's edits name it,
/// when diffs git printed name the same files relative to that root
/// (`./work/testbed/a/b.py` edited, `a/b.py` in `git diff`): the prefix
/// most such pairs agree on.
pub(crate) fn root_from_git_diffs<'a>(
    edited: impl IntoIterator<Item = &'a String>,
    diffed: &HashSet<String>,
) -> Option<String> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for path in edited {
        if diffed.contains(path) {
            continue;
        }
        let mut rest = path.as_str();
        while let Some((_, tail)) = rest.split_once('/') {
            if diffed.contains(tail) {
                if let Some(prefix) = path.get(..path.len() - tail.len()) {
                    *counts.entry(prefix).or_default() += 1;
                }
                break;
            }
            rest = tail;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(prefix, count)| (*count, prefix.len()))
        .map(|(prefix, _)| prefix.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the agent worked: these folders.
    struct Worked(&'static [&'static str]);

    impl Workplace for Worked {
        fn worked_in(&self, folder: &str) -> bool {
            self.0.contains(&folder)
        }
    }

    fn new_file(path: &str) -> NewFile<'_> {
        NewFile {
            path,
            written_by_edit: true,
            ..NewFile::default()
        }
    }

    #[test]
    fn a_script_run_at_the_root_is_scratch_a_module_beside_sources_is_not() {
        // sympy__sympy-20049 (SWE-ContextBench, Claude Code): `test_issue.py`
        // written at the checkout's root and run; `git diff --cached` held it.
        let folders = repository_folders(["sympy/physics/vector/point.py"]);
        let script = NewFile {
            run: true,
            ..new_file("test_issue.py")
        };
        assert!(is_scratch(&script, &folders, &Worked(&[])));
        assert!(!is_scratch(&new_file("setup.cfg"), &folders, &Worked(&[])));
        // sklearn-25570: `test_empty_columns_pandas.py` written at the root,
        // never run, where the tests live in `sklearn/*/tests/`.
        let unrun = NewFile {
            tests_in_folders: true,
            ..new_file("test_empty_columns_pandas.py")
        };
        assert!(is_scratch(&unrun, &folders, &Worked(&[])));
        let go_test = new_file("main_test.go");
        assert!(!is_scratch(&go_test, &folders, &Worked(&[])));
        assert!(!is_scratch(
            &new_file("sympy/physics/vector/frame_utils.py"),
            &folders,
            &Worked(&[])
        ));
        assert!(!is_scratch(
            &new_file("sympy/physics/new/a.py"),
            &folders,
            &Worked(&["sympy"])
        ));
        // A test module the agent ran in the repository's test folder stays.
        let test = NewFile {
            run: true,
            ..new_file("sympy/physics/vector/tests/test_fix.py")
        };
        assert!(!is_scratch(&test, &folders, &Worked(&[])));
    }

    #[test]
    fn a_folder_of_its_own_and_run_output_are_scratch() {
        // sphinx-doc__sphinx-8282: a Sphinx project written in `test_fix/`,
        // built there, and `git add -A` showing its `_build` output.
        let folders = repository_folders(["sphinx/ext/autodoc/__init__.py"]);
        let worked = Worked(&["test_fix"]);
        assert!(is_scratch(&new_file("test_fix/conf.py"), &folders, &worked));
        // A new folder the agent only wrote (aider adding `tools/`) stays.
        assert!(!is_scratch(&new_file("tools/run.py"), &folders, &worked));
        let built = NewFile {
            path: "sphinx/.doctrees/environment.pickle",
            binary: true,
            ..NewFile::default()
        };
        assert!(is_scratch(&built, &folders, &worked));
        let produced = NewFile {
            path: "junit_report.xml",
            ..NewFile::default()
        };
        assert!(is_scratch(&produced, &folders, &worked));
        let imported = NewFile {
            imported: true,
            ..new_file("helpers/a.py")
        };
        assert!(!is_scratch(&imported, &folders, &worked));
    }

    #[test]
    fn the_root_is_where_the_edited_paths_meet_the_diffed_ones() {
        let edited = [
            "swebench/testbed/sympy/core/power.py".to_string(),
            "swebench/testbed/test_fix.py".to_string(),
            "swebench/notes.py".to_string(),
        ];
        let diffed: HashSet<String> = ["sympy/core/power.py", "test_fix.py"]
            .iter()
            .map(|path| path.to_string())
            .collect();
        assert_eq!(
            root_from_git_diffs(&edited, &diffed).as_deref(),
            Some("swebench/testbed/")
        );
        assert_eq!(root_from_git_diffs(&edited[2..], &diffed), None);
    }
}
