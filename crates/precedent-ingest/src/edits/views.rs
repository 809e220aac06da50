//! Which file an agent asked to see with line numbers, and which lines an
//! observation shows of it: numbered views (`cat -n`, `nl -ba`, an editor's
//! `view`, Claude Code's `Read`), numbered search results (`search_file`,
//! `grep -n`), and a tool's refusal of an edit.

use super::MAX_VIEW_LINES;
use crate::text::{contains_str, lines_with_offsets};
use crate::toolcall::ToolCall;
use precedent_core::tool::{self, ToolKind};

/// The path a tool call reads with line numbers (`view`, `Read`, `cat -n`).
pub(super) fn viewed_path(call: &ToolCall) -> Option<String> {
    match call.kind()? {
        ToolKind::Editor if call.string(&["command"]) == Some("view") => {
            call.string(&tool::PATH_ARGUMENTS).map(str::to_string)
        }
        ToolKind::Read => call.string(&tool::PATH_ARGUMENTS).map(str::to_string),
        ToolKind::Shell => call
            .string(&tool::COMMAND_ARGUMENTS)
            .and_then(numbered_cat_path),
        _ => None,
    }
}

/// What a tool answers when it did not apply an edit: SWE-agent's linter
/// ("Your changes have NOT been applied"), an editor that did not find the
/// text to replace.
pub(super) fn is_refusal(observation: &str) -> bool {
    // The verdict opens or closes the answer (SWE-agent shows the refused
    // edit's window between its two sentences).
    const WINDOW: usize = 2_048;
    let refused = |text: &str| {
        contains_str!(text, "Your changes have NOT been applied")
            || contains_str!(text, "Your proposed edit has introduced new syntax error")
            || contains_str!(text, "No replacement was performed")
            || contains_str!(text, "String to replace not found")
    };
    if observation.len() <= 2 * WINDOW {
        return refused(observation);
    }
    let head = crate::text::truncate_to_bytes(observation, WINDOW);
    let tail_start =
        crate::text::ceil_char_boundary(observation, observation.len().saturating_sub(WINDOW));
    refused(head) || refused(observation.get(tail_start..).unwrap_or(""))
}

/// A search call that answers numbered lines (`search_file`, a shell
/// `grep -n`): `Some(file searched)`, the file `None` when not named.
pub(super) fn searched_file(call: &ToolCall) -> Option<Option<String>> {
    match call.kind()? {
        ToolKind::Search => Some(call.string(&tool::PATH_ARGUMENTS).map(str::to_string)),
        ToolKind::Shell => call
            .string(&tool::COMMAND_ARGUMENTS)
            .and_then(numbered_search),
        _ => None,
    }
}

/// A `search_file TERM [FILE]` or `grep -n ... [FILE]` command: `Some(the
/// file searched)` (`None` when the command names no single file).
pub(super) fn numbered_search(command: &str) -> Option<Option<String>> {
    let command = command.trim();
    if let Some(rest) = command.strip_prefix("search_file ") {
        let words = shell_words(rest);
        return Some(words.get(1).cloned());
    }
    let rest = command.strip_prefix("grep ")?;
    if command.contains(['|', ';', '&', '>']) {
        return None;
    }
    let words = shell_words(rest);
    let flags: Vec<&String> = words.iter().filter(|word| word.starts_with('-')).collect();
    let numbered = flags
        .iter()
        .any(|flag| !flag.starts_with("--") && flag.contains('n'))
        || flags.iter().any(|flag| *flag == "--line-number");
    if !numbered {
        return None;
    }
    let recursive = flags.iter().any(|flag| {
        (!flag.starts_with("--") && flag.contains(['r', 'R'])) || *flag == "--recursive"
    });
    let operands: Vec<&String> = words.iter().filter(|word| !word.starts_with('-')).collect();
    Some(match operands.as_slice() {
        [_, file] if !recursive => Some((*file).clone()),
        _ => None,
    })
}

/// Words of a command, quotes removed (no escapes), an empty quoted word
/// left out.
fn shell_words(text: &str) -> Vec<String> {
    let mut words = crate::command::shell_words(text);
    words.retain(|word| !word.is_empty());
    words
}

/// `12:text` -> `(12, "text")`.
pub(super) fn numbered_search_line(text: &str) -> Option<(usize, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let number = text.get(..digits)?.parse::<usize>().ok()?;
    let content = text.get(digits..)?.strip_prefix(':')?;
    (number >= 1).then_some((number, content))
}

/// The file of a `cat -n FILE` / `nl -ba FILE` command.
pub(super) fn numbered_cat_path(command: &str) -> Option<String> {
    // Word by word, so that a long command (a heredoc) is not split whole.
    let mut words = command.split_whitespace();
    let flag = match words.next()? {
        "cat" => "-n",
        "nl" => "-ba",
        _ => return None,
    };
    if words.next()? != flag {
        return None;
    }
    let file = words.next()?;
    words.next().is_none().then(|| file.to_string())
}

/// The lines of a numbered view: `   12\ttext` (`cat -n`) or `    12→text`
/// (Claude Code's Read), the longest run of consecutive numbers.
pub(crate) fn numbered_lines(text: &str) -> Vec<(usize, &str)> {
    longest_numbered_run(lines_with_offsets(text).take(MAX_VIEW_LINES).map(|line| {
        let trimmed = line.text.trim_start();
        let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
        let rest = trimmed.get(digits..).unwrap_or("");
        let content = rest.strip_prefix('\t').or_else(|| rest.strip_prefix('→'))?;
        let number = trimmed
            .get(..digits)
            .and_then(|d| d.parse::<usize>().ok())?;
        Some((number, content))
    }))
}

/// The longest run of consecutively numbered lines among `lines` (`None`
/// for a line without a number, which ends a run); the first such run wins
/// a tie.
pub(super) fn longest_numbered_run<'a>(
    lines: impl Iterator<Item = Option<(usize, &'a str)>>,
) -> Vec<(usize, &'a str)> {
    let mut best: Vec<(usize, &str)> = Vec::new();
    let mut run: Vec<(usize, &str)> = Vec::new();
    for line in lines {
        match line {
            Some((number, content))
                if run
                    .last()
                    .is_none_or(|(previous, _)| *previous + 1 == number) =>
            {
                run.push((number, content));
            }
            Some(numbered) => {
                if run.len() > best.len() {
                    best = std::mem::take(&mut run);
                }
                run = vec![numbered];
            }
            None => {
                if run.len() > best.len() {
                    best = std::mem::take(&mut run);
                }
                run.clear();
            }
        }
    }
    if run.len() > best.len() {
        best = run;
    }
    best
}

/// The file named in an editor's view header ("Here's the result of
/// running `cat -n` on /path:").
pub(super) fn view_header_path(text: &str) -> Option<&str> {
    const MARKER: &str = "result of running `cat -n` on ";
    // Every observation is searched: memchr's SIMD search, built once, is
    // several times faster than `str::find` here.
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(MARKER));
    let at = FINDER.find(text.as_bytes())?;
    let rest = text.get(at + MARKER.len()..)?;
    let end = rest.find([':', '\n']).unwrap_or(rest.len());
    rest.get(..end)
        .map(str::trim)
        .filter(|path| !path.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_views_are_cat_n_or_nl_ba_of_one_file() {
        assert_eq!(
            numbered_cat_path("cat -n src/a.py"),
            Some("src/a.py".into())
        );
        assert_eq!(numbered_cat_path("  nl\t-ba  a.py\n"), Some("a.py".into()));
        for command in [
            "cat -n",
            "cat a.py",
            "cat -n a.py b.py",
            "nl -n a.py",
            "less -n a.py",
            "",
        ] {
            assert_eq!(numbered_cat_path(command), None, "{command:?}");
        }
    }

    #[test]
    fn search_commands_that_answer_numbered_lines() {
        assert_eq!(
            numbered_search("search_file \"class TimeDelta\" src/fields.py"),
            Some(Some("src/fields.py".to_string()))
        );
        assert_eq!(
            numbered_search("grep -n 'def get' pkg/a.py"),
            Some(Some("pkg/a.py".to_string()))
        );
        assert_eq!(numbered_search("grep -rn 'def get' pkg"), Some(None));
        assert_eq!(numbered_search("grep 'def get' pkg/a.py"), None);
        assert_eq!(numbered_search("grep -n x a.py | head"), None);
    }

    #[test]
    fn numbered_views_of_claude_code_reads() {
        let lines = numbered_lines("     1→import os\n     2→\n     3→def f():\n");
        assert_eq!(lines, vec![(1, "import os"), (2, ""), (3, "def f():")]);
    }
}
