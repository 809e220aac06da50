//! stale: "does this past experience still describe the code at hand?"
//! Given the caller's checkout, each returned experience is checked against
//! the working tree: whether the files it changed still exist, whether the
//! definitions it changed are still defined there (read with the same
//! tree-sitter tags as extraction), and whether each file changed since:
//! its git blob against the one the session's diff recorded
//! (`index OLD..NEW`), or, where none was recorded, whether every line its
//! last diff added to the file is still there.
//!
//! Architecture invariant: a stale experience is marked, never hidden; the
//! check reads only files under the checkout's root, each within a size
//! bound, and a file it cannot read is reported as such, not as stale.

use std::collections::HashSet;
use std::path::{Component, Path};

pub use precedent_core::domain::Staleness;
use precedent_core::language::Grammar;
use precedent_ingest::symbols::{ParseBudget, code_definitions};
use precedent_ingest::{Clock, EvidenceKind, SessionRecord};

/// Files larger than this are not read: their marks say "not checked".
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Changed files checked per experience, at most.
const MAX_FILES: usize = 20;
/// Definitions read per file, at most.
const MAX_DEFINITIONS: usize = 5_000;
/// Added lines shorter than this (trimmed) prove nothing (`}`, `else:`).
const MIN_EVIDENT_LINE_CHARS: usize = 8;

/// The line an experience's text gains when it is stale.
pub fn line(staleness: &Staleness) -> Option<String> {
    if !staleness.is_stale() {
        return (!staleness.moved_files.is_empty())
            .then(|| format!("Moved in this checkout: {}", list(&staleness.moved_files)));
    }
    let mut parts = Vec::new();
    if !staleness.moved_files.is_empty() {
        parts.push(format!("moved {}", list(&staleness.moved_files)));
    }
    if !staleness.missing_files.is_empty() {
        parts.push(format!("deleted {}", list(&staleness.missing_files)));
    }
    if !staleness.missing_symbols.is_empty() {
        parts.push(format!(
            "no longer defined {}",
            list(&staleness.missing_symbols)
        ));
    }
    if !staleness.changed_files.is_empty() {
        parts.push(format!("changed since {}", list(&staleness.changed_files)));
    }
    Some(format!("Stale in this checkout: {}", parts.join("; ")))
}

fn list(items: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut text = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        text.push_str(&format!(" (+{} more)", items.len() - SHOWN));
    }
    text
}

/// Checks `record` against the working tree under `root`.
pub fn check(root: &Path, record: &SessionRecord) -> Staleness {
    let mut staleness = Staleness::default();
    // Files are read only inside the checkout's real path.
    let Ok(root) = std::fs::canonicalize(root) else {
        staleness
            .unchecked_files
            .extend(record.files_changed.iter().take(MAX_FILES).cloned());
        return staleness;
    };
    let root = root.as_path();
    let mut defined: HashSet<String> = HashSet::new();
    let mut read_any = false;
    let mut tracked: Option<Vec<String>> = None;
    for file in record.files_changed.iter().take(MAX_FILES) {
        let Some(relative) = inside(file) else {
            staleness.unchecked_files.push(file.clone());
            continue;
        };
        let mut path = root.join(relative);
        let mut read = read_bounded(root, &path);
        if matches!(read, Ok(None)) {
            // Moved under another folder (`src/` added in front, say)?
            let tracked = tracked.get_or_insert_with(|| tracked_files(root));
            if let Some(moved) = moved_to(tracked, file) {
                path = root.join(&moved);
                read = read_bounded(root, &path);
                if matches!(read, Ok(Some(_))) {
                    staleness.moved_files.push(format!("{file} -> {moved}"));
                }
            }
        }
        let (content, blob) = match read {
            Ok(Some(read)) => read,
            Ok(None) => {
                staleness.missing_files.push(file.clone());
                continue;
            }
            Err(()) => {
                staleness.unchecked_files.push(file.clone());
                continue;
            }
        };
        read_any = true;
        if let Some(grammar) = Grammar::from_path(file) {
            let mut budget = ParseBudget::for_hunks(Clock::Wall(std::time::Instant::now));
            for name in code_definitions(grammar, &content, MAX_DEFINITIONS, &mut budget) {
                for key in name_keys(&name) {
                    defined.insert(key);
                }
            }
        }
        // The content as the session left it, where its diff named its
        // blob; else what its fix wrote.
        let changed = match record.file_blobs.get(file) {
            Some(recorded) => !blob.to_string().starts_with(recorded.as_str()),
            None => !holds_fix(record, file, &content),
        };
        if changed {
            staleness.changed_files.push(file.clone());
        }
    }
    // Definitions are looked for only where the experience's files still
    // are: with every changed file gone, the files say it already.
    if read_any {
        for symbol in &record.symbols_changed {
            let present = name_keys(symbol).any(|key| defined.contains(&key));
            if !present {
                staleness.missing_symbols.push(symbol.clone());
            }
        }
    }
    staleness
}

/// The files the checkout's git index tracks (none outside a repository).
fn tracked_files(root: &Path) -> Vec<String> {
    let Ok(repository) = git2::Repository::open(root) else {
        return Vec::new();
    };
    let Ok(index) = repository.index() else {
        return Vec::new();
    };
    index
        .iter()
        .filter_map(|entry| String::from_utf8(entry.path).ok())
        .collect()
}

/// The one tracked path that ends with `/file`: where a file moved when a
/// folder was put in front of it. `None` when none or several do.
fn moved_to(tracked: &[String], file: &str) -> Option<String> {
    let suffix = format!("/{file}");
    let mut found = tracked.iter().filter(|path| path.ends_with(&suffix));
    let first = found.next()?;
    found.next().is_none().then(|| first.clone())
}

/// A recorded path as a relative path that stays under the root.
fn inside(file: &str) -> Option<&Path> {
    let path = Path::new(file);
    let stays = path
        .components()
        .all(|component| matches!(component, Component::Normal(_) | Component::CurDir));
    stays.then_some(path)
}

/// The file's text and its git blob id; `Ok(None)` when there is no such
/// file, `Err` when it exists but is not read: it resolves outside `root`
/// (the checkout's real path; a link out of it), is not a regular file
/// (a device, a FIFO), is too large, unreadable or not UTF-8. The file is
/// opened without following a link and without blocking, and checked on
/// the open handle, so nothing swapped in after the check is read; the
/// read itself is bounded.
fn read_bounded(root: &Path, path: &Path) -> Result<Option<(String, git2::Oid)>, ()> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let resolved = match std::fs::canonicalize(path) {
        Ok(resolved) => resolved,
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
        Err(_) => return Err(()),
    };
    if !resolved.starts_with(root) {
        return Err(());
    }
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&resolved)
        .map_err(|_| ())?;
    let metadata = file.metadata().map_err(|_| ())?;
    if !metadata.is_file() || metadata.len() > MAX_FILE_BYTES {
        return Err(());
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| ())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(());
    }
    let blob = git2::Oid::hash_object(git2::ObjectType::Blob, &bytes).map_err(|_| ())?;
    String::from_utf8(bytes)
        .map(|text| Some((text, blob)))
        .map_err(|_| ())
}

/// The names a definition may be found under: the qualified name and its
/// last segment (`Class.method`, `method`; `module::item`, `item`).
fn name_keys(name: &str) -> impl Iterator<Item = String> + '_ {
    let last = name
        .rsplit(['.', ':'])
        .find(|segment| !segment.is_empty())
        .unwrap_or(name);
    std::iter::once(name.to_string()).chain((last != name).then(|| last.to_string()))
}

/// Whether `content` still holds every evident line the record's last fix
/// of `file` added (true when the record shows no such line).
fn holds_fix(record: &SessionRecord, file: &str, content: &str) -> bool {
    let Some(last) = record
        .evidence
        .iter()
        .filter(|evidence| {
            evidence.kind == EvidenceKind::Fix && evidence.file.as_deref() == Some(file)
        })
        .map(|evidence| evidence.message_index)
        .max()
    else {
        return true;
    };
    let present: HashSet<&str> = content.lines().map(str::trim).collect();
    record
        .evidence
        .iter()
        .filter(|evidence| {
            evidence.kind == EvidenceKind::Fix
                && evidence.message_index == last
                && evidence.file.as_deref() == Some(file)
        })
        .flat_map(|evidence| added_lines(&evidence.text))
        .all(|line| present.contains(line))
}

/// The added lines of a hunk's text worth checking, trimmed.
fn added_lines(hunk: &str) -> impl Iterator<Item = &str> {
    hunk.lines()
        .filter(|line| line.starts_with('+') && !line.starts_with("+++"))
        .map(|line| line[1..].trim())
        .filter(|line| line.chars().count() >= MIN_EVIDENT_LINE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use precedent_ingest::Evidence;

    fn fix(file: &str, message_index: usize, text: &str) -> Evidence {
        Evidence {
            kind: EvidenceKind::Fix,
            text: text.to_string(),
            message_index,
            byte_start: 0,
            byte_end: 0,
            file: Some(file.to_string()),
            symbols: Vec::new(),
        }
    }

    fn record() -> SessionRecord {
        SessionRecord {
            files_changed: vec!["pkg/core.py".to_string(), "pkg/util.py".to_string()],
            symbols_changed: vec!["Parser.parse".to_string(), "helper".to_string()],
            evidence: vec![
                fix(
                    "pkg/core.py",
                    3,
                    "@@ -1,3 +1,3 @@ class Parser:\n     def parse(self, text):\n-        return text\n+        return text.strip()\n",
                ),
                fix(
                    "pkg/util.py",
                    3,
                    "@@ -1 +1 @@\n-x = 1\n+def helper():\n+    return 'value'\n",
                ),
            ],
            ..SessionRecord::default()
        }
    }

    fn checkout(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("dir");
        for (path, content) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
            std::fs::write(path, content).expect("file");
        }
        dir
    }

    const CORE: &str = "class Parser:\n    def parse(self, text):\n        return text.strip()\n";
    const UTIL: &str = "def helper():\n    return 'value'\n";

    #[test]
    fn a_checkout_as_the_session_left_it_is_current() {
        let dir = checkout(&[("pkg/core.py", CORE), ("pkg/util.py", UTIL)]);
        let staleness = check(dir.path(), &record());
        assert_eq!(staleness, Staleness::default());
        assert_eq!(line(&staleness), None);
    }

    #[test]
    fn a_deleted_file_a_renamed_definition_and_an_edited_line_are_each_marked() {
        let renamed =
            "class Parser:\n    def parse_all(self, text):\n        return text.strip()\n";
        let edited = "def helper():\n    return 'other value'\n";
        let dir = checkout(&[("pkg/core.py", renamed), ("pkg/util.py", edited)]);
        let staleness = check(dir.path(), &record());
        assert_eq!(staleness.missing_symbols, vec!["Parser.parse".to_string()]);
        assert_eq!(staleness.changed_files, vec!["pkg/util.py".to_string()]);
        assert!(staleness.missing_files.is_empty());

        let dir = checkout(&[("pkg/core.py", CORE)]);
        let staleness = check(dir.path(), &record());
        assert_eq!(staleness.missing_files, vec!["pkg/util.py".to_string()]);
        // `helper` lived in the deleted file: no longer defined either.
        assert_eq!(staleness.missing_symbols, vec!["helper".to_string()]);
        let line = line(&staleness).expect("stale");
        assert!(line.contains("deleted pkg/util.py"), "{line}");
        assert!(line.contains("no longer defined helper"), "{line}");
    }

    #[test]
    fn a_recorded_blob_tells_any_change_of_the_file() {
        let dir = checkout(&[("pkg/core.py", CORE), ("pkg/util.py", UTIL)]);
        let blob = git2::Oid::hash_file(git2::ObjectType::Blob, dir.path().join("pkg/util.py"))
            .expect("hash")
            .to_string();
        let mut recorded = record();
        recorded
            .file_blobs
            .insert("pkg/util.py".to_string(), blob[..10].to_string());
        assert!(check(dir.path(), &recorded).changed_files.is_empty());
        // A change the fix's lines do not show: a line added elsewhere.
        std::fs::write(dir.path().join("pkg/util.py"), format!("{UTIL}# note\n")).expect("edit");
        assert_eq!(
            check(dir.path(), &recorded).changed_files,
            vec!["pkg/util.py".to_string()]
        );
        assert!(check(dir.path(), &record()).changed_files.is_empty());
    }

    #[test]
    fn paths_that_leave_the_checkout_are_not_read() {
        let dir = checkout(&[("pkg/core.py", CORE)]);
        let record = SessionRecord {
            files_changed: vec!["../outside.py".to_string(), "/etc/passwd".to_string()],
            ..SessionRecord::default()
        };
        let staleness = check(dir.path(), &record);
        assert_eq!(staleness.unchecked_files.len(), 2);
        assert!(!staleness.is_stale());
    }

    #[test]
    fn links_out_of_the_checkout_devices_and_fifos_are_not_read() {
        let dir = checkout(&[("pkg/core.py", CORE)]);
        let outside = tempfile::tempdir().expect("outside");
        std::fs::write(outside.path().join("secret.py"), "password = 1\n").expect("secret");
        std::os::unix::fs::symlink(
            outside.path().join("secret.py"),
            dir.path().join("pkg/x.py"),
        )
        .expect("link");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub")).expect("link");
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("pkg/zero.py")).expect("link");
        let fifo = dir.path().join("pkg/fifo.py");
        let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: creates a FIFO at a path the test owns.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        let record = SessionRecord {
            files_changed: vec![
                "pkg/x.py".to_string(),
                "sub/secret.py".to_string(),
                "pkg/zero.py".to_string(),
                "pkg/fifo.py".to_string(),
            ],
            ..SessionRecord::default()
        };
        // A FIFO with no writer would block a plain open: this returns.
        let staleness = check(dir.path(), &record);
        assert_eq!(staleness.unchecked_files, record.files_changed);
        assert!(!staleness.is_stale());
    }

    #[test]
    fn a_file_moved_under_a_new_folder_is_checked_where_it_is_now() {
        // psf/requests moved to src/: answers said "deleted
        // requests/sessions.py; no longer defined SessionRedirectMixin"
        // of a class at src/requests/sessions.py.
        let dir = checkout(&[("src/pkg/core.py", CORE), ("src/pkg/util.py", UTIL)]);
        let repository = git2::Repository::init(dir.path()).expect("init");
        let mut index = repository.index().expect("index");
        for file in ["src/pkg/core.py", "src/pkg/util.py"] {
            index.add_path(Path::new(file)).expect("add");
        }
        index.write().expect("write");
        let staleness = check(dir.path(), &record());
        assert!(staleness.missing_files.is_empty(), "{staleness:?}");
        assert!(staleness.missing_symbols.is_empty(), "{staleness:?}");
        assert_eq!(
            staleness.moved_files,
            [
                "pkg/core.py -> src/pkg/core.py",
                "pkg/util.py -> src/pkg/util.py"
            ]
        );
        assert!(!staleness.is_stale());
        let said = line(&staleness).expect("a line");
        assert!(
            said.starts_with("Moved in this checkout: pkg/core.py -> src/pkg/core.py"),
            "{said}"
        );
        // Two candidates: neither is guessed.
        assert_eq!(
            moved_to(&["a/x.py".to_string(), "b/x.py".to_string()], "x.py"),
            None
        );
    }
}
