//! Which files the paths name or hold, and whether any of them is a
//! transcript: folders are walked for the names a transcript may have,
//! and their content decides.

use std::path::{Path, PathBuf};

use super::SkippedFile;
use super::reading::check_transcript;

/// Folders never searched for transcripts.
const SKIPPED_DIRECTORIES: &[&str] = &[".git", "node_modules", "target", "__pycache__", ".venv"];

/// Whether a file found in a folder may be a transcript (its content
/// decides).
fn is_candidate(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.ends_with(".jsonl")
        || name.ends_with(".json")
        || name.ends_with(".traj")
        || name.ends_with(".chat.history.md")
}

/// Whether a file found in a folder that is no transcript is worth a
/// line in the report (a `.json` file rarely is a transcript, and folders
/// hold many).
pub(super) fn is_reported(path: &Path) -> bool {
    is_candidate(path)
        && !path
            .to_string_lossy()
            .to_ascii_lowercase()
            .ends_with(".json")
}

/// A file to read: whether it was named on the command line.
#[derive(Debug, Clone)]
pub(super) struct Source {
    pub(super) path: PathBuf,
    pub(super) explicit: bool,
}

/// The files the paths name or hold, sorted, and the paths that are
/// neither.
pub(super) fn discover(paths: &[PathBuf]) -> (Vec<Source>, Vec<SkippedFile>) {
    let mut sources = Vec::new();
    let mut skipped = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(metadata) if metadata.is_dir() => {
                let mut found = Vec::new();
                walk(path, &mut found, 0);
                found.sort();
                sources.extend(found.into_iter().map(|path| Source {
                    path,
                    explicit: false,
                }));
            }
            Ok(_) => sources.push(Source {
                path: path.clone(),
                explicit: true,
            }),
            Err(error) => skipped.push(SkippedFile {
                path: path.display().to_string(),
                reason: format!("cannot read it: {error}"),
            }),
        }
    }
    (sources, skipped)
}

fn walk(directory: &Path, found: &mut Vec<PathBuf>, depth: usize) {
    if depth > 16 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            let name = entry.file_name();
            if !SKIPPED_DIRECTORIES.contains(&name.to_string_lossy().as_ref()) {
                walk(&path, found, depth + 1);
            }
        } else if (file_type.is_file() || file_type.is_symlink()) && is_candidate(&path) {
            found.push(path);
        }
    }
}

/// Whether any of the paths holds a transcript (reads files until one
/// is); else why each path holds none.
pub fn holds_transcripts(paths: &[PathBuf]) -> Result<(), Vec<SkippedFile>> {
    let mut reasons = Vec::new();
    for path in paths {
        let reason = match std::fs::metadata(path) {
            Err(error) => format!("cannot read it: {error}"),
            Ok(metadata) if metadata.is_dir() => {
                let mut found = Vec::new();
                walk(path, &mut found, 0);
                found.sort();
                if found.iter().any(|file| check_transcript(file).is_ok()) {
                    return Ok(());
                }
                format!(
                    "this folder is not a git repository and holds no transcripts ({KNOWN_AGENTS})"
                )
            }
            Ok(_) => match check_transcript(path) {
                Ok(()) => return Ok(()),
                Err(reason) => reason,
            },
        };
        reasons.push(SkippedFile {
            path: path.display().to_string(),
            reason,
        });
    }
    Err(reasons)
}

/// The agents whose transcripts are read, as named in reasons.
const KNOWN_AGENTS: &str = "Claude Code, Codex CLI, SWE-agent, OpenHands or aider";
