//! The `apply_patch` format (Codex and others): `*** Begin Patch`, then per
//! file `*** Add File: p` (lines with `+`), `*** Delete File: p`, or
//! `*** Update File: p` (optionally `*** Move to: q`) with `@@ [context]`
//! chunks of ` `, `-` and `+` lines, up to `*** End Patch`. An update chunk
//! becomes a replacement of its old lines by its new lines, placed by the
//! workspace in what the session showed of the file.

use super::{EditOp, FileEdit};
use crate::text::{Line, contains_str, lines_with_offsets};

/// Files read of one patch.
const MAX_PATCH_FILES: usize = 64;
/// Chunks read per file.
const MAX_CHUNKS_PER_FILE: usize = 64;

/// The edits of every `*** Begin Patch` ... `*** End Patch` in `text`
/// (byte ranges relative to `text` plus `base`).
pub(crate) fn patch_edits(text: &str, base: usize, problems: &mut Vec<String>) -> Vec<FileEdit> {
    if !contains_str!(text, "*** Begin Patch") {
        return Vec::new();
    }
    let mut reader = PatchReader::new(base);
    for line in lines_with_offsets(text) {
        if reader.files >= MAX_PATCH_FILES {
            break;
        }
        reader.read(&line);
    }
    reader.finish(problems)
}

/// Where a [`PatchReader`] is in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Outside any patch.
    Outside,
    /// In the `+` lines of an `*** Add File:`.
    Add,
    /// In the chunks of an `*** Update File:`.
    Update,
    /// In a patch, between files.
    Between,
}

/// Reads patches line by line into edits.
struct PatchReader {
    base: usize,
    state: State,
    /// The file being read.
    path: String,
    /// Where an update moves its file (`*** Move to:`).
    move_to: Option<String>,
    /// The text of the file being added.
    added: String,
    /// Old and new lines of the chunk being read.
    old: String,
    new: String,
    /// Chunks read of the file being updated.
    chunks: usize,
    /// Offset of the header of the file being read.
    file_start: usize,
    /// Offset just past the last line read in a patch.
    last_end: usize,
    /// Files read.
    files: usize,
    /// Whether the last patch begun was ended.
    ended: bool,
    edits: Vec<FileEdit>,
}

impl PatchReader {
    fn new(base: usize) -> PatchReader {
        PatchReader {
            base,
            state: State::Outside,
            path: String::new(),
            move_to: None,
            added: String::new(),
            old: String::new(),
            new: String::new(),
            chunks: 0,
            file_start: 0,
            last_end: 0,
            files: 0,
            ended: true,
            edits: Vec::new(),
        }
    }

    fn read(&mut self, line: &Line<'_>) {
        let content = line.text;
        if content.trim_end() == "*** Begin Patch" {
            self.state = State::Between;
            self.ended = false;
            return;
        }
        if self.state == State::Outside {
            return;
        }
        let header = content.strip_prefix("*** ");
        let is_file_header = header.is_some_and(|rest| {
            rest.starts_with("Add File:")
                || rest.starts_with("Update File:")
                || rest.starts_with("Delete File:")
                || rest.trim_end() == "End Patch"
        });
        let is_end_of_file = content.trim_end() == "*** End of File";
        if is_file_header || is_end_of_file {
            self.close_file(is_file_header);
            if is_end_of_file {
                return;
            }
        }
        match header {
            Some(rest) => {
                self.last_end = line.end;
                self.read_header(rest, line);
            }
            None => {
                // A chunk closed by `@@` ends where the line before did.
                self.read_body(content);
                self.last_end = line.end;
            }
        }
    }

    /// Closes the file being read, at the next file header or (an added
    /// file only) at `*** End of File`.
    fn close_file(&mut self, is_file_header: bool) {
        match self.state {
            State::Add => {
                let content = std::mem::take(&mut self.added);
                self.push_write(self.path.clone(), content);
                self.files += 1;
            }
            State::Update if is_file_header => {
                self.flush_chunk();
                if let Some(target) = self.move_to.take() {
                    self.push_write(target, String::new());
                }
                self.files += 1;
            }
            _ => {}
        }
    }

    /// A line of a file's body: an added file's line or a chunk's line.
    fn read_body(&mut self, content: &str) {
        match self.state {
            State::Add => {
                self.added
                    .push_str(content.strip_prefix('+').unwrap_or(content));
                self.added.push('\n');
            }
            State::Update => {
                if content.starts_with("@@") {
                    self.flush_chunk();
                } else if let Some(removed) = content.strip_prefix('-') {
                    self.old.push_str(removed);
                    self.old.push('\n');
                } else if let Some(inserted) = content.strip_prefix('+') {
                    self.new.push_str(inserted);
                    self.new.push('\n');
                } else {
                    let context = content.strip_prefix(' ').unwrap_or(content);
                    self.old.push_str(context);
                    self.old.push('\n');
                    self.new.push_str(context);
                    self.new.push('\n');
                }
            }
            State::Outside | State::Between => {}
        }
    }

    /// A `*** ` line: `rest` is what follows the stars.
    fn read_header(&mut self, rest: &str, line: &Line<'_>) {
        if let Some(target) = rest.strip_prefix("Add File:") {
            self.state = State::Add;
            self.path = target.trim().to_string();
            self.file_start = line.start;
        } else if let Some(target) = rest.strip_prefix("Update File:") {
            self.state = State::Update;
            self.path = target.trim().to_string();
            self.chunks = 0;
            self.file_start = line.start;
        } else if let Some(target) = rest.strip_prefix("Delete File:") {
            self.state = State::Between;
            self.edits.push(FileEdit {
                path: target.trim().to_string(),
                op: EditOp::Delete,
                start: self.base + line.start,
                end: self.base + line.end,
            });
            self.files += 1;
        } else if let Some(target) = rest.strip_prefix("Move to:") {
            self.move_to = Some(target.trim().to_string());
        } else if rest.trim_end() == "End Patch" {
            self.state = State::Outside;
            self.ended = true;
        }
    }

    /// An edit writing `content` to `path`, spanning the file being read.
    fn push_write(&mut self, path: String, content: String) {
        self.edits.push(FileEdit {
            path,
            op: EditOp::Write {
                content,
                create: true,
            },
            start: self.base + self.file_start,
            end: self.base + self.last_end,
        });
    }

    /// The chunk read so far as an edit (within the bound on chunks).
    fn flush_chunk(&mut self) {
        if (!self.old.is_empty() || !self.new.is_empty()) && self.chunks < MAX_CHUNKS_PER_FILE {
            self.chunks += 1;
            let op = if self.old.is_empty() {
                EditOp::Insert {
                    after_line: 0,
                    text: std::mem::take(&mut self.new),
                }
            } else {
                EditOp::Replace {
                    old: std::mem::take(&mut self.old),
                    new: std::mem::take(&mut self.new),
                    all: false,
                }
            };
            self.edits.push(FileEdit {
                path: self.path.clone(),
                op,
                start: self.base + self.file_start,
                end: self.base + self.last_end,
            });
        }
        self.old.clear();
        self.new.clear();
    }

    /// The edits read; a patch left open is read up to the end of the text.
    fn finish(mut self, problems: &mut Vec<String>) -> Vec<FileEdit> {
        if !self.ended {
            problems.push("apply_patch without *** End Patch: read up to the end".to_string());
            match self.state {
                State::Add => {
                    let content = std::mem::take(&mut self.added);
                    self.push_write(self.path.clone(), content);
                }
                State::Update => self.flush_chunk(),
                State::Outside | State::Between => {}
            }
        }
        self.edits.retain(|edit| !edit.path.is_empty());
        self.edits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_update_move_and_delete() {
        let patch = "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n*** Update File: src/app.py\n@@ def main():\n     x = 1\n-    return x\n+    return x + 1\n*** Delete File: old.txt\n*** End Patch\n";
        let mut problems = Vec::new();
        let edits = patch_edits(patch, 0, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let ops: Vec<(&str, &EditOp)> = edits.iter().map(|e| (e.path.as_str(), &e.op)).collect();
        assert_eq!(
            ops,
            vec![
                (
                    "docs/new.md",
                    &EditOp::Write {
                        content: "# New\n".to_string(),
                        create: true
                    }
                ),
                (
                    "src/app.py",
                    &EditOp::Replace {
                        old: "    x = 1\n    return x\n".to_string(),
                        new: "    x = 1\n    return x + 1\n".to_string(),
                        all: false
                    }
                ),
                ("old.txt", &EditOp::Delete),
            ]
        );
    }

    #[test]
    fn an_unterminated_patch_is_reported_and_kept() {
        let mut problems = Vec::new();
        let edits = patch_edits(
            "*** Begin Patch\n*** Update File: a.rs\n@@\n-fn a() {}\n+fn b() {}\n",
            0,
            &mut problems,
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(edits.len(), 1);
    }
}
