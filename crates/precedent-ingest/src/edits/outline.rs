//! The sparse line model of one file: what the session saw of it outside the
//! run of lines the workspace places edits in. Earlier windows of the file,
//! `search_file` / `grep -n` results (`Line 12:text`, `path:12:text`) and
//! traceback frames (`line 293, in get_pixeldata`) each tell something
//! about numbered lines; kept here, and renumbered as edits add or remove
//! lines, they let a diff name the definition enclosing an edit whose header
//! line the window the edit was made from did not show.
//!
//! Bounded: bytes of lines kept per file, anchors kept per file.

use std::collections::BTreeMap;

/// Bytes of lines kept per file.
const MAX_OUTLINE_BYTES: usize = 256 * 1024;
/// Traceback anchors kept per file.
const MAX_ANCHORS: usize = 256;

/// Numbered lines and anchors of one file, in the file's current numbering.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Outline {
    /// Line number -> the line's text, for lines seen outside the known run.
    lines: BTreeMap<usize, String>,
    /// Line number -> the function a traceback says encloses that line.
    anchors: BTreeMap<usize, String>,
    /// Bytes of `lines`.
    bytes: usize,
}

impl Outline {
    /// Bytes held.
    pub(crate) fn held_bytes(&self) -> usize {
        self.bytes + self.anchors.values().map(String::len).sum::<usize>()
    }

    /// Whether nothing is known.
    pub(crate) fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.anchors.is_empty()
    }

    /// Keeps line `number` (replacing what was known of it); answers whether
    /// it fit within the bound.
    pub(crate) fn add_line(&mut self, number: usize, text: &str) -> bool {
        let released = self.lines.get(&number).map_or(0, String::len);
        if self.bytes - released + text.len() > MAX_OUTLINE_BYTES {
            return false;
        }
        self.bytes = self.bytes - released + text.len();
        self.lines.insert(number, text.to_string());
        true
    }

    /// Notes that line `number` lies inside function `name`.
    pub(crate) fn add_anchor(&mut self, number: usize, name: &str) {
        if self.anchors.len() < MAX_ANCHORS || self.anchors.contains_key(&number) {
            self.anchors.insert(number, name.to_string());
        }
    }

    /// Removes and answers the line `number`, if known.
    pub(crate) fn take_line(&mut self, number: usize) -> Option<String> {
        let text = self.lines.remove(&number)?;
        self.bytes -= text.len();
        Some(text)
    }

    /// Forgets the lines `first..=last` (a run now holds them).
    pub(crate) fn forget_lines(&mut self, first: usize, last: usize) {
        if first > last {
            return;
        }
        let inside: Vec<usize> = self.lines.range(first..=last).map(|(n, _)| *n).collect();
        for number in inside {
            self.take_line(number);
        }
    }

    /// Renumbers after an edit replaced `removed` lines starting at line
    /// `first` by `added` lines: what was on the removed lines is forgotten,
    /// what followed them moves.
    pub(crate) fn replaced(&mut self, first: usize, removed: usize, added: usize) {
        if removed == added {
            self.forget_range(first, removed);
            return;
        }
        self.forget_range(first, removed);
        let after = first + removed;
        let shift = |map_lines: &mut BTreeMap<usize, String>| {
            let moved: Vec<(usize, String)> = {
                let keys: Vec<usize> = map_lines.range(after..).map(|(n, _)| *n).collect();
                keys.into_iter()
                    .filter_map(|n| map_lines.remove(&n).map(|text| (n, text)))
                    .collect()
            };
            for (number, text) in moved {
                let renumbered = number - removed + added;
                map_lines.insert(renumbered, text);
            }
        };
        shift(&mut self.lines);
        shift(&mut self.anchors);
    }

    fn forget_range(&mut self, first: usize, removed: usize) {
        if removed == 0 {
            return;
        }
        let last = first + removed - 1;
        self.forget_lines(first, last);
        let inside: Vec<usize> = self.anchors.range(first..=last).map(|(n, _)| *n).collect();
        for number in inside {
            self.anchors.remove(&number);
        }
    }

    /// Up to `limit` known lines above line `first_line`, nearest first.
    pub(crate) fn above(&self, first_line: usize, limit: usize) -> Vec<(usize, &str)> {
        self.lines
            .range(..first_line)
            .rev()
            .take(limit)
            .map(|(number, text)| (*number, text.as_str()))
            .collect()
    }

    /// The anchors on lines `first..=last`.
    pub(crate) fn anchors_in(&self, first: usize, last: usize) -> Vec<(usize, &str)> {
        if first > last {
            return Vec::new();
        }
        self.anchors
            .range(first..=last)
            .map(|(number, name)| (*number, name.as_str()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_renumbers_what_follows_it_and_forgets_what_it_replaced() {
        let mut outline = Outline::default();
        outline.add_line(10, "class A:");
        outline.add_line(20, "    x = 1");
        outline.add_line(30, "class B:");
        outline.add_anchor(31, "f");
        // Lines 20..=21 replaced by five lines.
        outline.replaced(20, 2, 5);
        assert_eq!(
            outline.above(100, 10),
            vec![(33, "class B:"), (10, "class A:")]
        );
        assert_eq!(outline.anchors_in(1, 100), vec![(34, "f")]);
        // An insertion (nothing removed) before line 10 moves everything.
        outline.replaced(5, 0, 1);
        assert_eq!(outline.above(12, 10), vec![(11, "class A:")]);
        assert_eq!(outline.take_line(11).as_deref(), Some("class A:"));
        assert_eq!(outline.held_bytes(), "class B:".len() + 1);
    }
}
