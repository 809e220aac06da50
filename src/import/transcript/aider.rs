//! aider chat histories (`.aider.chat.history.md`): markdown where each
//! `# aider chat started at ...` line starts a new chat (one session),
//! `#### ` lines are the user's, `> ` lines are aider's own output (tool
//! output: edits applied, commands run, token counts) and everything else
//! is the assistant's reply. Lines inside a code fence stay with the text
//! around them.

use precedent_core::domain::Role;

use super::render::Messages;

/// The line that starts a chat.
pub const CHAT_START: &str = "# aider chat started at";

/// What a run of lines is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    User,
    Output,
    Assistant,
}

/// The chats of a history, each with its messages. Text before the first
/// chat start, if any, is a chat of its own.
pub fn chats(text: &str) -> Vec<Messages> {
    let mut chats = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut started = false;
    for line in text.lines() {
        if line.starts_with(CHAT_START) {
            if started || current.iter().any(|line| !line.trim().is_empty()) {
                chats.push(chat_messages(&current));
            }
            current.clear();
            started = true;
            continue;
        }
        current.push(line);
    }
    if started || current.iter().any(|line| !line.trim().is_empty()) {
        chats.push(chat_messages(&current));
    }
    chats
}

fn chat_messages(lines: &[&str]) -> Messages {
    let mut messages = Messages::default();
    let mut run: Vec<String> = Vec::new();
    let mut run_kind = Kind::Assistant;
    let mut in_fence = false;
    let mut seen_user = false;
    for line in lines {
        let (kind, text) = if in_fence {
            (run_kind, line.to_string())
        } else if let Some(rest) = line.strip_prefix("####") {
            (Kind::User, rest.trim().to_string())
        } else if *line == ">" || line.starts_with("> ") {
            (Kind::Output, line[1..].trim().to_string())
        } else if line.trim().is_empty() {
            (run_kind, String::new())
        } else {
            (Kind::Assistant, line.to_string())
        };
        if kind == Kind::Assistant && line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if kind != run_kind {
            flush(&mut messages, run_kind, &run, seen_user);
            run.clear();
            run_kind = kind;
        }
        seen_user |= kind == Kind::User;
        run.push(text);
    }
    flush(&mut messages, run_kind, &run, seen_user);
    messages
}

/// Adds a run of lines as one message. aider's output before the user's
/// first line (its start-up banner) is the assistant's, so that the
/// session's task is what the user asked.
fn flush(messages: &mut Messages, kind: Kind, run: &[String], seen_user: bool) {
    let text = run.join("\n");
    let role = match kind {
        Kind::Assistant => Role::Assistant,
        Kind::Output if !seen_user => Role::Assistant,
        Kind::User | Kind::Output => Role::User,
    };
    messages.push(role, text.trim_matches('\n'), None);
}

/// Whether a text looks like an aider chat history.
pub fn detect(text: &str) -> bool {
    text.lines()
        .take(200)
        .any(|line| line.starts_with(CHAT_START))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_outputs_and_replies_alternate_per_chat() {
        let text = "\n# aider chat started at 2025-05-04 17:02:36\n\n> Aider v0.82.2  \n\n#### fix the divide  \n\nHere:\n\n```python\n> not output\n#### not the user\n```\n\n> Applied edit to calc.py  \n\n# aider chat started at 2025-05-05 09:00:00\n\n#### and now?  \n";
        let chats: Vec<Vec<(Role, String)>> = chats(text)
            .into_iter()
            .map(|messages| messages.turns())
            .collect();
        assert_eq!(
            chats,
            vec![
                vec![
                    (Role::Assistant, "Aider v0.82.2".to_string()),
                    (Role::User, "fix the divide".to_string()),
                    (
                        Role::Assistant,
                        "Here:\n\n```python\n> not output\n#### not the user\n```".to_string()
                    ),
                    (Role::User, "Applied edit to calc.py".to_string()),
                ],
                vec![(Role::User, "and now?".to_string())],
            ]
        );
    }
}
