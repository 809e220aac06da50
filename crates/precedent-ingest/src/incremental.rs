//! incremental: a session's extraction, resumable. [`SessionExtractor`]
//! holds what extraction keeps between messages (open evidence, the
//! pending command awaiting its output, test states, language votes, the
//! hunks seen, the parse budgets) so that an Add extracts only its new
//! messages: extending it message by message, in any chunks, gives the
//! same record as [`super::extract_session`] over all the messages at once
//! (a property test holds them equal byte for byte over the dev sessions
//! cut at random chunk boundaries). Keeping states is left to the caller.

use super::{Clock, Diagnostic, IngestMessage, SessionBuilder, SessionRecord};
use precedent_core::domain::Role;

/// The extraction state of one session, after its first
/// [`SessionExtractor::num_messages`] messages.
#[derive(Clone)]
pub struct SessionExtractor {
    builder: SessionBuilder,
    /// Whether the task statement (the first user message) was read.
    task_seen: bool,
    num_messages: usize,
}

impl SessionExtractor {
    /// The state of a session with no messages, whose time limits read `clock`.
    pub fn new(clock: Clock) -> SessionExtractor {
        SessionExtractor {
            builder: SessionBuilder::for_session(clock),
            task_seen: false,
            num_messages: 0,
        }
    }

    /// Messages read so far.
    pub fn num_messages(&self) -> usize {
        self.num_messages
    }

    /// Reads the next messages of the session, in order (undated).
    pub fn extend<'a>(&mut self, messages: impl IntoIterator<Item = (Role, &'a str)>) {
        self.extend_dated(
            messages
                .into_iter()
                .map(|(role, content)| (role, content, None)),
        );
    }

    /// Reads the next `(role, content, timestamp_ms)` messages of the
    /// session, in order.
    pub fn extend_dated<'a>(
        &mut self,
        messages: impl IntoIterator<Item = (Role, &'a str, Option<i64>)>,
    ) {
        for (role, content, timestamp_ms) in messages {
            let message = [IngestMessage {
                index: self.num_messages,
                role,
                content,
                timestamp_ms,
            }];
            let is_task =
                !self.task_seen && role == Role::User && !super::task::is_control(content);
            self.task_seen |= is_task;
            self.builder.add_message(&message, 0, is_task);
            self.num_messages += 1;
        }
        // Only the latest fixes are ever selected: older ones need not be
        // kept (the keys of the hunks seen are).
        self.builder.evidence.keep_latest_fixes();
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
        let keys: usize = builder.evidence.fix_keys.iter().map(String::len).sum();
        let evidence: usize = [
            &builder.evidence.task,
            &builder.evidence.fix,
            &builder.evidence.error,
            &builder.evidence.step,
        ]
        .iter()
        .flat_map(|list| list.iter())
        .map(|evidence| evidence.text.len() + 64)
        .sum();
        let commands = builder.commands.approx_bytes();
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
        // Dated as a transcript dates them: the result a little before the
        // command that ran it (clocks of two processes), the last undated.
        let messages = [
            (
                Role::User,
                "Fix parse_config in config.py: it fails on empty files",
                Some(1_704_067_200_000),
            ),
            (
                Role::Assistant,
                "```bash\npython -m pytest tests/test_config.py\n```",
                Some(1_704_067_260_000),
            ),
            (
                Role::User,
                "FAILED tests/test_config.py::test_empty - ValueError: empty\nTraceback (most recent call last):\n  File \"config.py\", line 3, in parse_config\nValueError: empty",
                Some(1_704_067_259_000),
            ),
            (
                Role::Assistant,
                "--- a/config.py\n+++ b/config.py\n@@ -1,3 +1,4 @@\n def parse_config(text):\n+    if not text:\n+        return {}\n     return load(text)\n",
                Some(1_704_067_320_000),
            ),
            (Role::User, "1 passed", None),
        ];
        let inputs = IngestMessage::in_order_dated(messages.iter().copied());
        let whole = super::super::extract_session(&inputs, Clock::Ignored);
        assert_eq!(whole.0.last_message_at_ms, Some(1_704_067_320_000));
        let whole = json(&whole);
        for cut in 0..=messages.len() {
            let mut extractor = SessionExtractor::new(Clock::Ignored);
            extractor.extend_dated(messages[..cut].iter().copied());
            let _ = extractor.record();
            extractor.extend_dated(messages[cut..].iter().copied());
            assert_eq!(json(&extractor.record()), whole, "cut at {cut}");
            assert_eq!(extractor.num_messages(), messages.len());
        }
    }

    #[test]
    fn a_session_without_dated_messages_has_no_message_time() {
        let mut extractor = SessionExtractor::new(Clock::Ignored);
        extractor.extend([(Role::User, "Fix parse_config in config.py")]);
        let (record, _) = extractor.record();
        assert_eq!(record.last_message_at_ms, None);
        let stored = serde_json::to_value(&record).expect("json");
        assert!(stored.get("last_message_at_ms").is_none(), "{stored}");
    }
}
