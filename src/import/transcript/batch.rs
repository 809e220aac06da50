//! Which Adds carry a session's messages: batches within the Add limits,
//! each message capped to the size one message keeps, the messages the
//! store holds already skipped.

use crate::import::sink::AddPool;
use precedent_core::domain::{AddRequest, Message, SessionId, UserId};

/// Messages an imported Add holds at most: a tenth of what the API takes
/// ([`precedent_core::domain::MAX_MESSAGES_PER_ADD`]), so an Add is one short
/// write turn.
const MESSAGES_PER_IMPORTED_ADD: usize = precedent_core::domain::MAX_MESSAGES_PER_ADD / 10;
/// Bytes of content one Add holds at most (the API's body limit is 64 MiB).
const MAX_CONTENT_BYTES_PER_ADD: usize = 8 * 1024 * 1024;
/// Bytes one message keeps (the API allows 16 MiB); the rest is cut.
const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// A message cut to [`MAX_MESSAGE_BYTES`], the cut marked (and counted).
pub(super) fn capped(message: Message, num_cut: &mut usize) -> Message {
    if message.content.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    *num_cut += 1;
    let mut end = MAX_MESSAGE_BYTES;
    while !message.content.is_char_boundary(end) {
        end -= 1;
    }
    let mut content = message.content[..end].to_string();
    content.push_str(&format!(
        "\n[... {} bytes cut by precedent import]",
        message.content.len() - end
    ));
    Message { content, ..message }
}

/// Batches one session's messages into Adds within the Add limits, each
/// with request id `<session>:<first>-<last>`, skipping the messages the
/// store holds already.
pub(super) struct Batcher<'a> {
    user_id: UserId,
    session_id: SessionId,
    pub(super) next_index: usize,
    skip: usize,
    batch: Vec<Message>,
    batch_first: usize,
    batch_bytes: usize,
    num_adds: usize,
    send: Box<dyn FnMut(AddRequest) -> bool + 'a>,
    failed: bool,
}

impl<'a> Batcher<'a> {
    fn new(
        user_id: &UserId,
        session_id: SessionId,
        skip: usize,
        send: Box<dyn FnMut(AddRequest) -> bool + 'a>,
    ) -> Batcher<'a> {
        Batcher {
            user_id: user_id.clone(),
            session_id,
            next_index: 0,
            skip,
            batch: Vec::new(),
            batch_first: 0,
            batch_bytes: 0,
            num_adds: 0,
            send,
            failed: false,
        }
    }

    /// Into the pool's workers, as one job streamed in order.
    pub(super) fn to_pool(
        user_id: &UserId,
        session_id: SessionId,
        skip: usize,
        pool: &'a AddPool,
    ) -> Batcher<'a> {
        let mut sender = None;
        let send = move |add: AddRequest| {
            if sender.is_none() {
                sender = pool.submit_stream();
            }
            sender
                .as_ref()
                .is_some_and(|sender: &std::sync::mpsc::SyncSender<AddRequest>| {
                    sender.send(add).is_ok()
                })
        };
        Batcher::new(user_id, session_id, skip, Box::new(send))
    }

    /// The session's next message (false once sending failed).
    pub(super) fn message(&mut self, message: Message) -> bool {
        let index = self.next_index;
        self.next_index += 1;
        if index < self.skip || self.failed {
            return !self.failed;
        }
        if !self.batch.is_empty()
            && (self.batch.len() >= MESSAGES_PER_IMPORTED_ADD
                || self.batch_bytes + message.content.len() > MAX_CONTENT_BYTES_PER_ADD)
            && !self.flush()
        {
            return false;
        }
        if self.batch.is_empty() {
            self.batch_first = index;
        }
        self.batch_bytes += message.content.len();
        self.batch.push(message);
        true
    }

    fn flush(&mut self) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        let first = self.batch_first;
        let last = first + self.batch.len() - 1;
        let add = AddRequest::new(
            format!("{}:{first}-{last}", self.session_id),
            self.user_id.to_string(),
            self.session_id.to_string(),
            std::mem::take(&mut self.batch),
        );
        self.batch_bytes = 0;
        self.num_adds += 1;
        let handed_over = match add {
            Ok(add) => (self.send)(add),
            Err(invalid) => {
                tracing::warn!(session_id = %self.session_id, %invalid, "session not imported");
                false
            }
        };
        if !handed_over {
            self.failed = true;
        }
        !self.failed
    }

    /// Sends the last batch: the messages seen, those the store held, and
    /// whether every Add was handed over.
    pub(super) fn finish(mut self) -> Batched {
        let handed_over = self.flush();
        Batched {
            num_messages: self.next_index,
            num_already: self.skip.min(self.next_index),
            num_adds: self.num_adds,
            handed_over,
        }
    }
}

/// What a [`Batcher`] did.
pub(super) struct Batched {
    pub(super) num_messages: usize,
    pub(super) num_already: usize,
    pub(super) num_adds: usize,
    pub(super) handed_over: bool,
}

#[cfg(test)]
mod tests {
    use super::super::Transcript;
    use super::*;
    use precedent_core::domain::Role;
    use precedent_core::domain::testing::{sid, uid};

    fn transcript(num_messages: usize) -> Transcript {
        Transcript {
            session_id: "claude-code:s1".to_string(),
            messages: (0..num_messages)
                .map(|index| Message {
                    role: if index % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    content: format!("message {index}"),
                    timestamp_ms: None,
                })
                .collect(),
        }
    }

    /// The Adds that bring a session from `stored` messages to all of the
    /// transcript's.
    fn tail_adds(user_id: &UserId, transcript: &Transcript, stored: usize) -> Vec<AddRequest> {
        let mut adds = Vec::new();
        let mut batcher = Batcher::new(
            user_id,
            sid(&transcript.session_id),
            stored,
            Box::new(|add| {
                adds.push(add);
                true
            }),
        );
        for message in &transcript.messages {
            assert!(batcher.message(message.clone()));
        }
        assert!(batcher.finish().handed_over);
        adds
    }

    #[test]
    fn the_tail_past_the_stored_messages_is_added_in_batches() {
        let adds = tail_adds(&uid("u"), &transcript(2_500), 300);
        let ids: Vec<&str> = adds.iter().map(|add| add.request_id().as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "claude-code:s1:300-1299",
                "claude-code:s1:1300-2299",
                "claude-code:s1:2300-2499"
            ]
        );
        assert_eq!(adds[0].messages()[0].content, "message 300");
        assert!(tail_adds(&uid("u"), &transcript(5), 5).is_empty());
        assert!(tail_adds(&uid("u"), &transcript(5), 9).is_empty());
    }

    #[test]
    fn oversized_messages_are_cut_on_a_character_boundary() {
        let message = Message {
            role: Role::User,
            content: "é".repeat(MAX_MESSAGE_BYTES),
            timestamp_ms: None,
        };
        let mut num_cut = 0;
        let cut = capped(message, &mut num_cut);
        assert_eq!(num_cut, 1);
        assert!(cut.content.len() < MAX_MESSAGE_BYTES + 100);
        assert!(cut.content.ends_with("bytes cut by precedent import]"));
    }
}
