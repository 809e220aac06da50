//! index::writer: "queue these documents; make them searchable; commit."
//!
//! The one writer thread's side of the index. Documents are queued as
//! operations; a writer turn publishes them (tokenized into a
//! [`PublishedBatch`] that joins the view searches read, see
//! [`super::published`]) and hands the operations to the committer thread,
//! which owns tantivy's `IndexWriter`, applies them, and commits about once
//! a second with the payload that records how far the store is indexed.
//! So a commit (serialising a segment, seconds for a big one) never holds
//! the writer thread and the Adds behind it. Deletions, catch-ups and
//! shutdown commit synchronously: the writer waits for the committer.
//!
//! Two words, one meaning each: a document is *published* once searches
//! find it (every writer turn), *committed* once tantivy's segments hold it
//! (about once a second); the published sequence number runs ahead of the
//! committed one, which a start-up replays from.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc;

use tantivy::{IndexReader, IndexWriter, TantivyDocument, Term, doc};

use super::directory::CLEAN_MARKER;
use super::published::{PublishedBatch, PublishedDoc, PublishedKind};
use super::{
    Fields, INDEX_DIR, IndexError, KIND_PART, KIND_SESSION, SCHEMA_VERSION, SearchIndex,
    SessionDoc, SharedView, View, directory, io_error, part_range, session_key,
};
use precedent_core::domain::{SessionId, SessionKey, UserId};
use precedent_store::StoredMessage;

/// What the index reads of a message: the Add it came with, its place in
/// that Add, its session and its text. The store's messages have it, and so
/// do an Add's own messages, which the writer indexes without reading them
/// back.
pub trait MessageToIndex {
    /// Sequence number of its Add.
    fn seq(&self) -> i64;
    /// Its scope.
    fn user_id(&self) -> &UserId;
    /// Its session.
    fn session_id(&self) -> &SessionId;
    /// Its index within the Add.
    fn message_index(&self) -> usize;
    /// Its text.
    fn content(&self) -> &str;
}

impl MessageToIndex for StoredMessage {
    fn seq(&self) -> i64 {
        self.seq
    }

    fn user_id(&self) -> &UserId {
        &self.user_id
    }

    fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    fn message_index(&self) -> usize {
        self.message_index
    }

    fn content(&self) -> &str {
        &self.content
    }
}

/// The writable side, owned by the one writer thread.
pub struct IndexWriterHandle {
    fields: Fields,
    /// Everything stored up to this sequence number is searchable:
    /// committed, or published since the last commit.
    published_seq: i64,
    /// Everything stored up to this sequence number is in the committed
    /// segments (the payload of the last commit), set by the committer.
    committed_seq: std::sync::Arc<AtomicI64>,
    /// Set by the committer when a commit it was not asked to answer
    /// failed.
    failed: std::sync::Arc<AtomicBool>,
    /// Documents and deletions queued since the last hand-off to the
    /// committer, in order.
    pending: Vec<Pending>,
    /// Numbers the hand-offs (and the batches published with them).
    next_number: u64,
    /// When the oldest document published since the last commit was.
    first_published: Option<std::time::Instant>,
    /// Text bytes published since the last commit.
    published_bytes: usize,
    view: SharedView,
    jobs: mpsc::Sender<Job>,
    committer: Option<std::thread::JoinHandle<()>>,
}

/// How long published documents wait at most for their commit. Commits
/// this far apart make segments of a second of Adds instead of one per
/// writer turn.
const COMMIT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(1000);

/// How long the committer waits idle before it looks for finished merges.
const MERGE_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Bytes of message text one part holds at most (a longer message is a
/// part of its own): what a search that shows a part's best message reads
/// of the store.
pub(super) const PART_BYTES: usize = 64 * 1024;

/// Text bytes published since the last commit that make the next turn
/// commit: what the batches held in memory may reach.
const MAX_PUBLISHED_BYTES: usize = 32 * 1024 * 1024;

#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct CommitPayload {
    pub(super) schema: u64,
    pub(super) seq: i64,
}

/// One change to tantivy's writer, applied in order by the committer.
enum Op {
    Add(TantivyDocument),
    Delete(Term),
}

type Reply = mpsc::SyncSender<Result<(), IndexError>>;

/// What the committer is asked, in order.
enum Job {
    /// Apply these operations (the hand-off numbered `number`).
    Ops { number: u64, ops: Vec<Op> },
    /// Commit everything applied, recording `seq`; answer if asked.
    Commit { seq: i64, reply: Option<Reply> },
    /// Drop everything applied since the last commit.
    Rollback { reply: Reply },
    /// Wait for merges, then stop.
    Close { reply: Reply },
}

/// The committer thread: owns tantivy's writer.
struct Committer {
    writer: IndexWriter<TantivyDocument>,
    reader: IndexReader,
    view: SharedView,
    committed_seq: std::sync::Arc<AtomicI64>,
    failed: std::sync::Arc<AtomicBool>,
    /// The number of the last hand-off applied.
    applied: u64,
}

impl Committer {
    fn run(mut self, jobs: mpsc::Receiver<Job>) {
        let mut broken: Option<String> = None;
        loop {
            let job = match jobs.recv_timeout(MERGE_CHECK) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.pick_up_merges();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            match job {
                Job::Ops { number, ops } => {
                    self.applied = number;
                    if broken.is_some() {
                        continue;
                    }
                    for op in ops {
                        let applied = match op {
                            Op::Add(document) => self.writer.add_document(document).map(|_| ()),
                            Op::Delete(term) => {
                                self.writer.delete_term(term);
                                Ok(())
                            }
                        };
                        if let Err(error) = applied {
                            broken = Some(error.to_string());
                            break;
                        }
                    }
                }
                Job::Commit { seq, reply } => {
                    let committed = match broken.take() {
                        Some(reason) => Err(IndexError::Tantivy(
                            tantivy::TantivyError::InternalError(reason),
                        )),
                        None => self.commit(seq),
                    };
                    if let Err(error) = &committed {
                        if let Err(rollback_error) = self.writer.rollback() {
                            tracing::error!(error = %rollback_error, "index rollback failed");
                        }
                        if reply.is_none() {
                            tracing::error!(%error, "index commit failed; the store holds the adds and the writer catches up");
                            self.failed.store(true, Ordering::Release);
                        }
                    }
                    if let Some(reply) = reply {
                        let _ = reply.send(committed);
                    }
                }
                Job::Rollback { reply } => {
                    broken = None;
                    let _ =
                        reply.send(self.writer.rollback().map(|_| ()).map_err(IndexError::from));
                }
                Job::Close { reply } => {
                    let _ =
                        reply.send(self.writer.wait_merging_threads().map_err(IndexError::from));
                    return;
                }
            }
        }
    }

    /// When idle: gives searches the segments merges made since the last
    /// commit (the same documents in fewer segments; the published batches
    /// stay, as they are not in any segment).
    fn pick_up_merges(&mut self) {
        let before: Vec<tantivy::index::SegmentId> = self
            .reader
            .searcher()
            .segment_readers()
            .iter()
            .map(|segment| segment.segment_id())
            .collect();
        if let Err(error) = self.reader.reload() {
            tracing::warn!(%error, "index reload after merges failed");
            return;
        }
        let searcher = self.reader.searcher();
        let changed = searcher.segment_readers().len() != before.len()
            || searcher
                .segment_readers()
                .iter()
                .zip(&before)
                .any(|(segment, id)| segment.segment_id() != *id);
        if changed {
            update_view(&self.view, |current| View {
                searcher,
                recent: current.recent.clone(),
            });
        }
    }

    /// Commits, reloads, and gives searches the new searcher with the
    /// batches published after what this commit holds.
    fn commit(&mut self, seq: i64) -> Result<(), IndexError> {
        let payload = serde_json::json!({"schema": SCHEMA_VERSION, "seq": seq}).to_string();
        let mut prepared = self.writer.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        self.committed_seq.store(seq, Ordering::Release);
        self.reader.reload()?;
        let searcher = self.reader.searcher();
        let applied = self.applied;
        update_view(&self.view, |current| View {
            searcher,
            recent: current
                .recent
                .iter()
                .filter(|batch| batch.number > applied)
                .cloned()
                .collect(),
        });
        Ok(())
    }
}

/// Replaces the view searches read with `next(current)`.
fn update_view(view: &SharedView, next: impl FnOnce(&View) -> View) {
    let mut current = match view.lock() {
        Ok(current) => current,
        Err(poisoned) => poisoned.into_inner(),
    };
    let replaced = next(&current);
    *current = std::sync::Arc::new(replaced);
}

impl IndexWriterHandle {
    pub(super) fn new(
        writer: IndexWriter<TantivyDocument>,
        fields: Fields,
        committed_seq: i64,
        reader: IndexReader,
        view: SharedView,
    ) -> IndexWriterHandle {
        let published_seq = committed_seq;
        let committed_seq = std::sync::Arc::new(AtomicI64::new(committed_seq));
        let failed = std::sync::Arc::new(AtomicBool::new(false));
        let (jobs, receiver) = mpsc::channel();
        let committer = Committer {
            writer,
            reader,
            view: std::sync::Arc::clone(&view),
            committed_seq: std::sync::Arc::clone(&committed_seq),
            failed: std::sync::Arc::clone(&failed),
            applied: 0,
        };
        let committer = std::thread::Builder::new()
            .name("index-committer".to_string())
            .spawn(move || committer.run(receiver))
            .ok();
        IndexWriterHandle {
            fields,
            published_seq,
            committed_seq,
            failed,
            pending: Vec::new(),
            next_number: 1,
            first_published: None,
            published_bytes: 0,
            view,
            jobs,
            committer,
        }
    }

    /// Everything stored up to this sequence number is searchable.
    pub fn published_seq(&self) -> i64 {
        self.published_seq
    }

    /// Sends a job to the committer.
    fn send(&self, job: Job) -> Result<(), IndexError> {
        self.jobs.send(job).map_err(|_| stopped())
    }

    /// Hands what was queued to the committer as operations, unpublished
    /// (a commit follows). Returns the hand-off's number.
    fn hand_off(&mut self) -> Result<u64, IndexError> {
        let ops = self.ops_for(None);
        self.send_ops(ops)
    }

    /// Sends operations to the committer as the next hand-off; returns its
    /// number.
    fn send_ops(&mut self, ops: Vec<Op>) -> Result<u64, IndexError> {
        let number = self.next_number;
        self.next_number += 1;
        self.send(Job::Ops { number, ops })?;
        Ok(number)
    }

    /// What was queued, as operations (with `batch`, each text also
    /// tokenized into the published batch; tantivy's own tokenizer reads
    /// it again on the committer's side: a pre-tokenized value would cross
    /// to tantivy's indexing thread as JSON, which costs more).
    fn ops_for(&mut self, mut batch: Option<&mut PublishedBatch>) -> Vec<Op> {
        let fields = self.fields;
        let mut ops = Vec::with_capacity(self.pending.len());
        for pending in self.pending.drain(..) {
            let (document, text) = match pending {
                Pending::Delete(term) => {
                    ops.push(Op::Delete(term));
                    continue;
                }
                Pending::Document { document, text } => (document, text),
            };
            ops.push(Op::Add(match &document.kind {
                PublishedKind::Session { profile, last_seq } => doc!(
                    fields.user_id => document.user_id.as_str(),
                    fields.doc_kind => KIND_SESSION,
                    fields.seq => seq_term(*last_seq),
                    fields.session_key => document.key.as_str(),
                    fields.session_hash => document.hash,
                    fields.profile => profile.as_slice(),
                    fields.session_text => text.as_str(),
                ),
                PublishedKind::Part { seq, range } => doc!(
                    fields.user_id => document.user_id.as_str(),
                    fields.doc_kind => KIND_PART,
                    fields.seq => seq_term(*seq),
                    fields.part_session => document.key.as_str(),
                    fields.session_hash => document.hash,
                    fields.part_range => *range,
                    fields.session_text => text.as_str(),
                ),
            }));
            if let Some(batch) = batch.as_deref_mut() {
                batch.add(document, &super::tantivy_tokens(&text), text.len());
            }
        }
        ops
    }

    /// Sends a job and waits for its answer.
    fn ask(&self, job: impl FnOnce(Reply) -> Job) -> Result<(), IndexError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.send(job(reply))?;
        answer.recv().map_err(|_| stopped())?
    }
    /// Queues the parts of these messages (of one or more Adds, in order):
    /// consecutive messages of one Add, up to [`PART_BYTES`] of text each.
    /// With `replace`, documents of the same Adds that an earlier,
    /// unrecorded commit may have left are deleted first, so a replay never
    /// duplicates.
    pub fn add_messages<M: MessageToIndex>(
        &mut self,
        messages: &[M],
        replace: bool,
    ) -> Result<(), IndexError> {
        let mut last_replaced = None;
        let mut start = 0;
        while start < messages.len() {
            let first = &messages[start];
            if replace && last_replaced != Some(first.seq()) {
                self.pending.push(Pending::Delete(Term::from_field_u64(
                    self.fields.seq,
                    seq_term(first.seq()),
                )));
                last_replaced = Some(first.seq());
            }
            let mut end = start + 1;
            let mut bytes = first.content().len();
            while end < messages.len()
                && messages[end].seq() == first.seq()
                && messages[end].message_index() == messages[end - 1].message_index() + 1
                && bytes + messages[end].content().len() <= PART_BYTES
            {
                bytes += messages[end].content().len();
                end += 1;
            }
            let part = &messages[start..end];
            let mut text = String::with_capacity(bytes + part.len());
            for message in part {
                if !text.is_empty() {
                    text.push('\n');
                }
                push_indexed(&mut text, message.content());
            }
            let key = session_key(first.user_id(), first.session_id());
            let last_index = part
                .last()
                .map_or(first.message_index(), |last| last.message_index());
            self.pending.push(Pending::Document {
                document: PublishedDoc::new(
                    first.user_id(),
                    key,
                    PublishedKind::Part {
                        seq: first.seq(),
                        range: part_range(first.message_index(), last_index + 1),
                    },
                ),
                text,
            });
            start = end;
        }
        Ok(())
    }

    /// Queues session documents, each replacing the one of the same session
    /// (their text and profile move into the queue).
    pub fn upsert_sessions(&mut self, sessions: Vec<SessionDoc>) -> Result<(), IndexError> {
        for session in sessions {
            let key = session_key(&session.user_id, &session.session_id);
            self.pending.push(Pending::Delete(Term::from_field_text(
                self.fields.session_key,
                &key,
            )));
            self.pending.push(Pending::Document {
                document: PublishedDoc::new(
                    &session.user_id,
                    key,
                    PublishedKind::Session {
                        profile: session.profile,
                        last_seq: session.last_seq,
                    },
                ),
                text: session.text,
            });
        }
        Ok(())
    }

    /// Commits what was queued, recording `seq` as applied, and waits for
    /// it: searches then read the new segments (in place of every batch
    /// published before).
    pub fn commit(&mut self, seq: i64, search_index: &SearchIndex) -> Result<(), IndexError> {
        self.hand_off()?;
        self.ask(|reply| Job::Commit {
            seq,
            reply: Some(reply),
        })?;
        self.published_seq = seq;
        self.first_published = None;
        self.published_bytes = 0;
        search_index.visible_seq.store(seq, Ordering::Release);
        Ok(())
    }

    /// Makes what was queued searchable, recording `seq` as applied: held
    /// in memory beside the committed segments, and handed to the
    /// committer, which commits it in the background once the published
    /// documents have waited [`COMMIT_INTERVAL`] or hold
    /// [`MAX_PUBLISHED_BYTES`] of text.
    pub fn publish(&mut self, seq: i64, search_index: &SearchIndex) -> Result<(), IndexError> {
        if self.pending.is_empty() {
            self.published_seq = seq;
            search_index.visible_seq.store(seq, Ordering::Release);
            return Ok(());
        }
        // Tokenized into the batch first; handed off only once the batch
        // is in the view (a commit drops from the view the batches it
        // holds).
        let mut batch = PublishedBatch::new(self.next_number);
        let ops = self.ops_for(Some(&mut batch));
        self.published_bytes += batch.text_bytes;
        self.first_published
            .get_or_insert_with(std::time::Instant::now);
        let batch = std::sync::Arc::new(batch);
        update_view(&self.view, |current| {
            let mut recent = current.recent.clone();
            recent.push(batch);
            View {
                searcher: current.searcher.clone(),
                recent,
            }
        });
        self.send_ops(ops)?;
        self.published_seq = seq;
        search_index.visible_seq.store(seq, Ordering::Release);
        let due = self
            .first_published
            .is_some_and(|first| first.elapsed() >= COMMIT_INTERVAL);
        if due || self.published_bytes >= MAX_PUBLISHED_BYTES {
            self.commit_in_background()?;
        }
        Ok(())
    }

    /// Asks the committer to commit everything handed off, without waiting.
    fn commit_in_background(&mut self) -> Result<(), IndexError> {
        self.first_published = None;
        self.published_bytes = 0;
        self.send(Job::Commit {
            seq: self.published_seq,
            reply: None,
        })
    }

    /// Whether a commit in the background failed since the last call: the
    /// published sequence number goes back to the last commit's, so the
    /// next catch-up indexes again what that commit lost.
    pub fn take_commit_failure(&mut self) -> bool {
        if self.failed.swap(false, Ordering::AcqRel) {
            self.published_seq = self.committed_seq.load(Ordering::Acquire);
            true
        } else {
            false
        }
    }

    /// How long until the published documents are due for their commit;
    /// `None` when none waits.
    pub fn commit_due_in(&self) -> Option<std::time::Duration> {
        self.first_published
            .map(|first| COMMIT_INTERVAL.saturating_sub(first.elapsed()))
    }

    /// Commits the published documents in the background, if any (the
    /// published sequence number stays).
    pub fn commit_published(&mut self) -> Result<(), IndexError> {
        if self.first_published.is_none() {
            return Ok(());
        }
        self.commit_in_background()
    }

    /// Commits what is left, waits for merges, syncs every index file, and
    /// leaves the marker that lets the next start-up skip verification.
    pub fn close(mut self, data_dir: &Path, search_index: &SearchIndex) -> Result<(), IndexError> {
        self.commit(self.published_seq, search_index)?;
        self.ask(|reply| Job::Close { reply })?;
        if let Some(committer) = self.committer.take() {
            let _ = committer.join();
        }
        let dir = data_dir.join(INDEX_DIR);
        directory::sync_tree(&dir).map_err(io_error(&dir))?;
        let marker = data_dir.join(CLEAN_MARKER);
        std::fs::File::create(&marker)
            .and_then(|file| file.sync_all())
            .map_err(io_error(&marker))?;
        directory::sync_dir(data_dir).map_err(io_error(data_dir))
    }

    /// Deletes every document of these users and of these sessions (their
    /// records and their messages), then commits (the published sequence
    /// number does not change).
    pub fn forget(
        &mut self,
        user_ids: &[UserId],
        sessions: &[SessionKey],
        search_index: &SearchIndex,
    ) -> Result<(), IndexError> {
        self.delete_users(user_ids);
        for session in sessions {
            let key = session_key(&session.user_id, &session.session_id);
            self.pending.push(Pending::Delete(Term::from_field_text(
                self.fields.session_key,
                &key,
            )));
            self.pending.push(Pending::Delete(Term::from_field_text(
                self.fields.part_session,
                &key,
            )));
        }
        self.commit(self.published_seq, search_index)
    }

    /// Queues the deletion of every document of these users (applied with
    /// the next commit, before the documents queued after it).
    pub fn delete_users(&mut self, user_ids: &[UserId]) {
        for user_id in user_ids {
            self.pending.push(Pending::Delete(Term::from_field_text(
                self.fields.user_id,
                user_id.as_str(),
            )));
        }
    }

    /// Drops everything queued since the last commit, published documents
    /// included: the published sequence number goes back to the last
    /// commit's, so a catch-up indexes them again (searches keep finding
    /// them meanwhile, as published).
    pub fn rollback(&mut self) -> Result<(), IndexError> {
        self.pending.clear();
        self.first_published = None;
        self.published_bytes = 0;
        self.ask(|reply| Job::Rollback { reply })?;
        self.published_seq = self.committed_seq.load(Ordering::Acquire);
        Ok(())
    }
}

/// A deletion or a document queued since the last hand-off.
enum Pending {
    Delete(Term),
    Document {
        document: PublishedDoc,
        text: String,
    },
}

/// The error of a committer that is gone (it stops only when the handle
/// closes it, or with a panic).
fn stopped() -> IndexError {
    IndexError::Tantivy(tantivy::TantivyError::InternalError(
        "the index committer thread stopped".to_string(),
    ))
}

impl Drop for IndexWriterHandle {
    fn drop(&mut self) {
        // Without a clean close: stop the committer (what it did not commit
        // is indexed again from the store at the next start-up).
        if let Some(committer) = self.committer.take() {
            let (reply, _answer) = mpsc::sync_channel(1);
            if self.jobs.send(Job::Close { reply }).is_ok() {
                let _ = committer.join();
            }
        }
    }
}

fn seq_term(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
/// Appends a message's text as the index reads it: without the words
/// precedent itself writes into stored text (the prefix of a failed tool
/// result, the mark of a result without output), which would otherwise
/// match every query that says "error" or "output".
fn push_indexed(text: &mut String, content: &str) {
    use precedent_core::tool::render::{ERROR_RESULT_PREFIX, NO_OUTPUT};
    for (number, line) in content.split('\n').enumerate() {
        if number > 0 {
            text.push('\n');
        }
        let line = line.strip_prefix(ERROR_RESULT_PREFIX).unwrap_or(line);
        if line != NO_OUTPUT {
            text.push_str(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_precedent_writes_are_not_indexed() {
        let mut text = String::new();
        push_indexed(
            &mut text,
            "ERROR: String to replace not found\n(no output)\nthe ERROR: in prose stays",
        );
        assert_eq!(
            text,
            "String to replace not found\n\nthe ERROR: in prose stays"
        );
        let terms = precedent_core::tokenize::distinct_terms(&text);
        assert!(!terms.contains(&"output".to_string()), "{terms:?}");
        let mut text = String::new();
        push_indexed(&mut text, "ERROR: ");
        assert!(precedent_core::tokenize::distinct_terms(&text).is_empty());
    }
}
