//! The writer's index turns: the messages of the Adds a group stored, the
//! documents of their sessions, and a slice of the Adds indexed a slice per
//! turn, published together.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::adds::{SlicedAdd, answer_sliced};
use super::derive::session_docs;
use super::{INDEX_SLICE_BYTES, Writer};
use crate::ServiceError;
use precedent_core::domain::{AddRequest, SessionId, SessionKey, UserId};
use precedent_index::SessionDoc;
use precedent_store as store;

/// One message of an Add the writer stored, as the index takes it.
struct AddedMessage<'a> {
    seq: i64,
    user_id: &'a UserId,
    session_id: &'a SessionId,
    /// Its index within the Add.
    index: usize,
    content: &'a str,
}

impl precedent_index::MessageToIndex for AddedMessage<'_> {
    fn seq(&self) -> i64 {
        self.seq
    }

    fn user_id(&self) -> &UserId {
        self.user_id
    }

    fn session_id(&self) -> &SessionId {
        self.session_id
    }

    fn message_index(&self) -> usize {
        self.index
    }

    fn content(&self) -> &str {
        self.content
    }
}

impl Writer {
    /// A turn without new Adds: the next slice (or, with `all`, every
    /// remaining slice) of the sliced Adds, published. Answers the Adds it
    /// completes, and on failure every sliced Add (stored, not yet
    /// searchable).
    pub(super) fn index_slices(&mut self, all: bool) {
        match self.index_adds(&[], BTreeMap::new(), all) {
            Ok(done) => {
                answer_sliced(done);
                self.index_may_hold_unrecorded = false;
            }
            Err(error) => {
                tracing::error!(%error, "index update failed; the store holds the adds and a retry catches up");
                let error = Arc::new(error);
                for add in self.sliced.drain(..) {
                    let replies = std::iter::once(add.reply)
                        .chain(add.retries.into_iter().map(|(reply, _)| reply));
                    for reply in replies {
                        let _ = reply.send(Err(ServiceError::NotYetSearchable(Arc::clone(&error))));
                    }
                }
                self.index_may_hold_unrecorded = true;
            }
        }
    }

    /// An index turn ([`Writer::index_turn`]; on failure, what it queued is
    /// dropped), or, when the index may hold documents of an unrecorded
    /// commit, a catch-up from its published sequence number, replacing
    /// (which finishes every sliced Add). Answers the sliced Adds finished.
    pub(super) fn index_adds(
        &mut self,
        small: &[(i64, AddRequest)],
        sessions: BTreeMap<SessionKey, Option<SessionDoc>>,
        all: bool,
    ) -> Result<Vec<SlicedAdd>, ServiceError> {
        if self.index_may_hold_unrecorded {
            self.catch_up()?;
            return Ok(self.sliced.drain(..).collect());
        }
        let indexed = self.index_turn(small, sessions, all);
        self.roll_back_on_error(indexed)
    }

    /// One index turn, published (committed in the background): the parts
    /// of `small_seqs`, the documents of `sessions`, and the next
    /// [`INDEX_SLICE_BYTES`] (`all`: everything) of the sliced Adds, oldest
    /// first. The published sequence number is the one below the oldest
    /// sliced Add still unfinished (every Add up to it is indexed; Adds
    /// after it may be too, and a replay after a crash replaces their
    /// documents), else the store's last. Answers the sliced Adds it
    /// finished.
    fn index_turn(
        &mut self,
        small: &[(i64, AddRequest)],
        sessions: BTreeMap<SessionKey, Option<SessionDoc>>,
        all: bool,
    ) -> Result<Vec<SlicedAdd>, ServiceError> {
        for (seq, request) in small {
            let messages: Vec<AddedMessage<'_>> = request
                .messages()
                .iter()
                .enumerate()
                .map(|(index, message)| AddedMessage {
                    seq: *seq,
                    user_id: request.user_id(),
                    session_id: request.session_id(),
                    index,
                    content: &message.content,
                })
                .collect();
            self.index.add_messages(&messages, false)?;
        }
        self.index
            .upsert_sessions(session_docs(&self.conn, sessions)?)?;
        let mut room = if all { usize::MAX } else { INDEX_SLICE_BYTES };
        let mut done = Vec::new();
        while room > 0 {
            let Some(add) = self.sliced.front_mut() else {
                break;
            };
            if add.messages.is_none() {
                add.messages = Some(store::messages_of_add(&self.conn, add.seq)?);
            }
            let messages = add.messages.as_deref().unwrap_or_default();
            let start = add.next;
            let mut end = start;
            while end < messages.len() && (end == start || messages[end].content.len() <= room) {
                room = room.saturating_sub(messages[end].content.len());
                end += 1;
            }
            self.index.add_messages(&messages[start..end], false)?;
            add.next = end;
            if end >= messages.len() {
                done.extend(self.sliced.pop_front());
            } else {
                break;
            }
        }
        let published = match self.sliced.front() {
            Some(oldest) => (oldest.seq - 1).max(self.index.published_seq()),
            None => store::last_seq(&self.conn)?,
        };
        self.index.publish(published, &self.search_index)?;
        Ok(done)
    }
}
