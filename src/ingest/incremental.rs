//! incremental: a session's extraction, resumable. [`SessionExtractor`]
//! holds what extraction keeps between messages (open evidence, the
//! pending command awaiting its output, test states, language votes, the
//! hunks seen, the parse budgets) so that an Add extracts only its new
//! messages: extending it message by message, in any chunks, gives the
//! same record as [`super::extract_session`] over all the messages at once
//! (a property test holds them equal byte for byte over the dev sessions
//! cut at random chunk boundaries). Keeping states is left to the caller.

use super::{Diagnostic, IngestMessage, MAX_FIX_EVIDENCE, SessionBuilder, SessionRecord};
use crate::domain::Role;

/// The extraction state of one session, after its first
/// [`SessionExtractor::num_messages`] messages.
#[derive(Clone)]
pub struct SessionExtractor {
    builder: SessionBuilder,
    /// Whether the task statement (the first user message) was read.
    task_seen: bool,
    num_messages: usize,
}

impl Default for SessionExtractor {
    fn default() -> Self {
        SessionExtractor::new()
    }
}

impl SessionExtractor {
    /// The state of a session with no messages.
    pub fn new() -> SessionExtractor {
        SessionExtractor {
            builder: SessionBuilder::for_session(),
            task_seen: false,
            num_messages: 0,
        }
    }

    /// Messages read so far.
    pub fn num_messages(&self) -> usize {
        self.num_messages
    }

    /// Reads the next messages of the session, in order.
    pub fn extend<'a>(&mut self, messages: impl IntoIterator<Item = (Role, &'a str)>) {
        for (role, content) in messages {
            let message = [IngestMessage {
                index: self.num_messages,
                role,
                content,
            }];
            let is_task =
                !self.task_seen && role == Role::User && !super::task::is_control(content);
            self.task_seen |= is_task;
            self.builder.add_message(&message, 0, is_task);
            self.num_messages += 1;
        }
        // Only the latest fixes are ever selected: older ones need not be
        // kept (the keys of the hunks seen are).
        let fixes = &mut self.builder.fix_evidence;
        if fixes.len() > MAX_FIX_EVIDENCE {
            fixes.drain(..fixes.len() - MAX_FIX_EVIDENCE);
        }
    }

    /// The record of the messages read so far, and its diagnostics.
    pub fn record(&self) -> (SessionRecord, Vec<Diagnostic>) {
        self.builder.clone().finish()
    }

    /// Bytes the state holds, roughly (for callers that bound how many
    /// states they keep).
    pub fn approx_bytes(&self) -> usize {
        const OVERHEAD_BYTES: usize = 16 * 1024;
        let builder = &self.builder;
        let keys: usize = builder.fix_keys.iter().map(String::len).sum();
        let evidence: usize = [
            &builder.task_evidence,
            &builder.fix_evidence,
            &builder.error_evidence,
            &builder.step_evidence,
        ]
        .iter()
        .flat_map(|list| list.iter())
        .map(|evidence| evidence.text.len() + 64)
        .sum();
        let commands: usize = builder
            .commands
            .iter()
            .map(|command| command.command.len() + 32)
            .sum();
        OVERHEAD_BYTES
            + keys
            + evidence
            + commands
            + builder.errors.len() * 512
            + builder.edits.held_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(record: &(SessionRecord, Vec<Diagnostic>)) -> String {
        serde_json::to_string(record).expect("json")
    }

    #[test]
    fn chunks_give_the_record_of_the_whole() {
        let messages = [
            (
                Role::User,
                "Fix parse_config in config.py: it fails on empty files",
            ),
            (
                Role::Assistant,
                "```bash\npython -m pytest tests/test_config.py\n```",
            ),
            (
                Role::User,
                "FAILED tests/test_config.py::test_empty - ValueError: empty\nTraceback (most recent call last):\n  File \"config.py\", line 3, in parse_config\nValueError: empty",
            ),
            (
                Role::Assistant,
                "--- a/config.py\n+++ b/config.py\n@@ -1,3 +1,4 @@\n def parse_config(text):\n+    if not text:\n+        return {}\n     return load(text)\n",
            ),
            (Role::User, "1 passed"),
        ];
        let inputs = IngestMessage::in_order(messages.iter().copied());
        let whole = json(&super::super::extract_session(&inputs));
        for cut in 0..=messages.len() {
            let mut extractor = SessionExtractor::new();
            extractor.extend(messages[..cut].iter().copied());
            let _ = extractor.record();
            extractor.extend(messages[cut..].iter().copied());
            assert_eq!(json(&extractor.record()), whole, "cut at {cut}");
            assert_eq!(extractor.num_messages(), messages.len());
        }
    }
}
