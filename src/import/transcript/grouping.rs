//! Which events of a log make one message: a Claude Code response, written
//! a block a line, is grouped into one message as its lines come; each
//! Codex item is a message of its own.

use serde_json::Value;

use super::reading::Collector;
use super::{Format, claude, codex, render};

/// Groups events into messages as they come: Claude Code's blocks of one
/// response into one message, each Codex item on its own.
pub(super) struct Grouper {
    format: Format,
    open: Vec<Value>,
    open_response: Option<String>,
    /// Where the open response's first line starts (offset, lines before).
    pub(super) open_at: (u64, u64),
    /// Whether a Claude Code log's working directory was given (with its
    /// first user message).
    claude_cwd_given: bool,
    /// A Codex rollout's working directory, and whether it was given.
    codex_cwd: codex::Cwd,
}

impl Grouper {
    /// `resumed`: the read starts after the log's first user message
    /// (which carried the working directory).
    pub(super) fn new(format: Format, resumed: bool) -> Grouper {
        Grouper {
            format,
            open: Vec::new(),
            open_response: None,
            open_at: (0, 0),
            claude_cwd_given: resumed,
            codex_cwd: if resumed {
                codex::Cwd::given()
            } else {
                codex::Cwd::default()
            },
        }
    }

    /// Feeds one event (that starts at `at`); false when the collector
    /// stopped.
    pub(super) fn event(
        &mut self,
        event: Value,
        at: (u64, u64),
        collector: &mut dyn Collector,
    ) -> bool {
        if self.format == Format::Codex {
            return give(
                codex::messages_after(std::slice::from_ref(&event), &mut self.codex_cwd),
                collector,
            );
        }
        match claude::unit_of(&event) {
            claude::Unit::Skipped => true,
            claude::Unit::Response(id)
                if !id.is_empty() && self.open_response.as_deref() == Some(id.as_str()) =>
            {
                self.open.push(event);
                true
            }
            claude::Unit::Response(id) => {
                let given = self.close(collector);
                self.open = vec![event];
                self.open_response = Some(id);
                self.open_at = at;
                given
            }
            claude::Unit::User => {
                self.close(collector)
                    && give(
                        claude::messages_after(&[event], &mut self.claude_cwd_given),
                        collector,
                    )
            }
        }
    }

    /// Gives the open response's message.
    pub(super) fn close(&mut self, collector: &mut dyn Collector) -> bool {
        self.open_response = None;
        if self.open.is_empty() {
            return true;
        }
        let events = std::mem::take(&mut self.open);
        give(
            claude::messages_after(&events, &mut self.claude_cwd_given),
            collector,
        )
    }

    pub(super) fn is_open(&self) -> bool {
        self.open_response.is_some()
    }
}

fn give(messages: render::Messages, collector: &mut dyn Collector) -> bool {
    messages
        .into_vec()
        .into_iter()
        .all(|message| collector.message(message))
}
