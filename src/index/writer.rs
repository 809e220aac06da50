//! index::writer: "queue these documents; make them searchable; commit."
//!
//! The one writer thread's side of the index: documents queued in
//! tantivy's writer, published to the view searches read (see
//! [`super::recent`]), committed about once a second with the payload that
//! records how far the store is indexed.

use tantivy::{IndexWriter, TantivyDocument, Term, doc};

use super::directory::CLEAN_MARKER;
use super::recent::{RecentBatch, RecentMessage, RecentSession};
use super::{
    Fields, INDEX_DIR, IndexError, KIND_MESSAGE, KIND_SESSION, SCHEMA_VERSION, SearchIndex,
    SessionDoc, View, directory, io_error, session_key,
};
use crate::store::StoredMessage;
use std::path::Path;

/// The writable side, owned by the one writer thread.
pub struct IndexWriterHandle {
    writer: IndexWriter<TantivyDocument>,
    fields: Fields,
    /// Everything stored up to this sequence number is searchable:
    /// committed, or published since the last commit.
    committed_seq: i64,
    /// Everything stored up to this sequence number is in the committed
    /// segments (the payload of the last commit).
    durable_seq: i64,
    /// The documents queued since the last publish or commit.
    pending: Vec<PendingDoc>,
    /// When the oldest document published since the last commit was.
    first_published: Option<std::time::Instant>,
    /// Text bytes published since the last commit.
    published_bytes: usize,
}

/// How long published documents wait at most for their commit. Commits
/// this far apart make segments of a second of Adds instead of one per
/// writer turn.
const COMMIT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(1000);

/// Text bytes published since the last commit that make the next turn
/// commit: what the batches held in memory may reach.
const MAX_PUBLISHED_BYTES: usize = 32 * 1024 * 1024;

#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct CommitPayload {
    pub(super) schema: u64,
    pub(super) seq: i64,
}

impl IndexWriterHandle {
    pub(super) fn new(
        writer: IndexWriter<TantivyDocument>,
        fields: Fields,
        committed_seq: i64,
    ) -> IndexWriterHandle {
        IndexWriterHandle {
            writer,
            fields,
            committed_seq,
            durable_seq: committed_seq,
            pending: Vec::new(),
            first_published: None,
            published_bytes: 0,
        }
    }

    /// Everything stored up to this sequence number is committed.
    pub fn committed_seq(&self) -> i64 {
        self.committed_seq
    }

    /// Queues the documents of these messages. With `replace`, documents of
    /// the same Adds that an earlier, unrecorded commit may have left are
    /// deleted first, so a replay never duplicates.
    pub fn add_messages(
        &mut self,
        messages: &[StoredMessage],
        replace: bool,
    ) -> Result<(), IndexError> {
        let mut last_replaced = None;
        for message in messages {
            if replace && last_replaced != Some(message.seq) {
                self.writer
                    .delete_term(Term::from_field_u64(self.fields.seq, seq_term(message.seq)));
                last_replaced = Some(message.seq);
            }
            let key = session_key(&message.user_id, &message.session_id);
            self.writer.add_document(doc!(
                self.fields.user_id => message.user_id.as_str(),
                self.fields.doc_kind => KIND_MESSAGE,
                self.fields.message_id => seq_term(message.message_id),
                self.fields.seq => seq_term(message.seq),
                self.fields.message_session => key.as_str(),
                self.fields.text => message.content.as_str(),
            ))?;
            self.pending.push(PendingDoc::Message {
                message: RecentMessage {
                    user_id: message.user_id.clone(),
                    session_key: key,
                    message_id: message.message_id,
                    fieldnorm_id: 0,
                },
                text: message.content.clone(),
            });
        }
        Ok(())
    }

    /// Queues session documents, each replacing the one of the same session.
    pub fn upsert_sessions(&mut self, sessions: &[SessionDoc]) -> Result<(), IndexError> {
        let fields = self.fields;
        for session in sessions {
            let key = session_key(&session.user_id, &session.session_id);
            self.writer
                .delete_term(Term::from_field_text(fields.session_key, &key));
            self.writer.add_document(doc!(
                fields.user_id => session.user_id.as_str(),
                fields.doc_kind => KIND_SESSION,
                fields.seq => seq_term(session.last_seq),
                fields.session_key => key.as_str(),
                fields.profile => session.profile_json.as_str(),
                fields.session_text => session.text.as_str(),
            ))?;
            self.pending.push(PendingDoc::Session {
                session: RecentSession {
                    user_id: session.user_id.clone(),
                    key,
                    profile_json: session.profile_json.clone(),
                    fieldnorm_id: 0,
                },
                text: session.text.clone(),
            });
        }
        Ok(())
    }

    /// Commits what was queued, recording `seq` as applied, and makes it
    /// visible to `search_index` (in place of any published batch: the
    /// commit holds their documents).
    pub fn commit(&mut self, seq: i64, search_index: &SearchIndex) -> Result<(), IndexError> {
        let payload = serde_json::json!({"schema": SCHEMA_VERSION, "seq": seq}).to_string();
        let mut prepared = self.writer.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        self.committed_seq = seq;
        self.durable_seq = seq;
        self.pending.clear();
        self.first_published = None;
        self.published_bytes = 0;
        search_index.reader.reload()?;
        search_index.replace_view(View::committed(&search_index.reader));
        search_index
            .visible_seq
            .store(seq, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Makes what was queued searchable, recording `seq` as applied: held
    /// in memory beside the committed segments until the next commit, or
    /// committed at once when the published documents have waited
    /// [`COMMIT_INTERVAL`] or hold [`MAX_PUBLISHED_BYTES`] of text.
    pub fn publish(&mut self, seq: i64, search_index: &SearchIndex) -> Result<(), IndexError> {
        let pending_bytes: usize = self.pending.iter().map(PendingDoc::text_bytes).sum();
        let due = self
            .first_published
            .is_some_and(|first| first.elapsed() >= COMMIT_INTERVAL);
        if due || self.published_bytes + pending_bytes >= MAX_PUBLISHED_BYTES {
            return self.commit(seq, search_index);
        }
        if !self.pending.is_empty() {
            let mut batch = RecentBatch::new();
            for doc in self.pending.drain(..) {
                match doc {
                    PendingDoc::Session { session, text } => batch.add_session(session, &text),
                    PendingDoc::Message { message, text } => batch.add_message(message, &text),
                }
            }
            self.published_bytes += batch.text_bytes;
            self.first_published
                .get_or_insert_with(std::time::Instant::now);
            search_index.push_recent(batch);
        }
        self.committed_seq = seq;
        search_index
            .visible_seq
            .store(seq, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// How long until the published documents are due for their commit;
    /// `None` when none waits.
    pub fn commit_due_in(&self) -> Option<std::time::Duration> {
        self.first_published
            .map(|first| COMMIT_INTERVAL.saturating_sub(first.elapsed()))
    }

    /// Commits the published documents, if any (the committed sequence
    /// number stays).
    pub fn commit_published(&mut self, search_index: &SearchIndex) -> Result<(), IndexError> {
        if self.first_published.is_none() && self.pending.is_empty() {
            return Ok(());
        }
        self.commit(self.committed_seq, search_index)
    }

    /// Waits for merges, syncs every index file, and leaves the marker that
    /// lets the next start-up skip verification. Call after the last commit.
    pub fn close(self, data_dir: &Path) -> Result<(), IndexError> {
        self.writer.wait_merging_threads()?;
        let dir = data_dir.join(INDEX_DIR);
        directory::sync_tree(&dir).map_err(io_error(&dir))?;
        let marker = data_dir.join(CLEAN_MARKER);
        std::fs::File::create(&marker)
            .and_then(|file| file.sync_all())
            .map_err(io_error(&marker))?;
        directory::sync_dir(data_dir).map_err(io_error(data_dir))
    }

    /// Deletes every document of these users and of these `(user_id,
    /// session_id)` sessions (their records and their messages), then
    /// commits (the committed sequence number does not change).
    pub fn forget(
        &mut self,
        user_ids: &[String],
        sessions: &[(String, String)],
        search_index: &SearchIndex,
    ) -> Result<(), IndexError> {
        for user_id in user_ids {
            self.writer
                .delete_term(Term::from_field_text(self.fields.user_id, user_id));
        }
        for (user_id, session_id) in sessions {
            let key = session_key(user_id, session_id);
            self.writer
                .delete_term(Term::from_field_text(self.fields.session_key, &key));
            self.writer
                .delete_term(Term::from_field_text(self.fields.message_session, &key));
        }
        self.commit(self.committed_seq, search_index)
    }

    /// Queues the deletion of every document of these users (applied with
    /// the next commit, before the documents queued after it).
    pub fn delete_users(&mut self, user_ids: &[String]) {
        for user_id in user_ids {
            self.writer
                .delete_term(Term::from_field_text(self.fields.user_id, user_id));
        }
    }

    /// Drops everything queued since the last commit, published documents
    /// included: the committed sequence number goes back to the last
    /// commit's, so a catch-up indexes them again (searches keep finding
    /// them meanwhile, as published).
    pub fn rollback(&mut self) -> Result<(), IndexError> {
        self.pending.clear();
        self.committed_seq = self.durable_seq;
        self.writer.rollback()?;
        Ok(())
    }
}

/// A document queued since the last publish, with its text: tokenized for
/// the in-memory batch only if it is published rather than committed.
enum PendingDoc {
    Session {
        session: RecentSession,
        text: String,
    },
    Message {
        message: RecentMessage,
        text: String,
    },
}

impl PendingDoc {
    fn text_bytes(&self) -> usize {
        match self {
            PendingDoc::Session { text, .. } | PendingDoc::Message { text, .. } => text.len(),
        }
    }
}

fn seq_term(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
