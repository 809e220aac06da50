//! A turn's Adds, as stages: [`Stored`] (the group's store transaction
//! ended, each verdict sorted out), [`Published`] (the index turn done, each
//! Add's answer final) and [`Replied`] (every Add answered). Nothing is
//! answered before its group is published: a failed index turn turns the
//! answers of the Adds stored into `NotYetSearchable`, a failed store
//! transaction every answer into `WriteFailed`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::derive::{Verdict, admit_with_record};
use super::{AddAnswer, AddJob, AddReply, INDEX_SLICE_BYTES, Writer};
use crate::ServiceError;
use precedent_core::domain::{AddOutcome, AddRequest, SessionKey, UserId};
use precedent_core::time::now_ms;
use precedent_index::SessionDoc;
use precedent_store::{self as store, Admission, StoredMessage};

/// The second stage of a group of Adds: its store transaction ended.
pub(super) enum Stored {
    /// Committed: each Add's verdict sorted out.
    Committed {
        /// The answers and what the index is to take.
        admitted: Admitted,
        /// When the group began to be written.
        started: Instant,
        /// How long the store took.
        store_time: Duration,
    },
    /// Failed: nothing of the group was stored; each Add is answered the
    /// failure.
    Failed {
        /// The group, in queue order.
        adds: Vec<AddJob>,
        /// The failure, shared by every Add of the group.
        error: Arc<ServiceError>,
    },
}

/// The third stage of a group of Adds: its index turn done (none when the
/// store failed), each Add's answer final, in queue order, not sent yet.
pub(super) struct Published {
    answers: Vec<(AddReply, Result<AddAnswer, ServiceError>)>,
}

/// The last stage of a group of Adds: every Add of it was answered (an Add
/// indexed in slices is answered with its last slice).
pub(super) struct Replied;

/// A group of Adds after the store's verdicts: each one's answer, and what
/// the index is to take of them.
#[derive(Default)]
pub(super) struct Admitted {
    answers: Vec<(AddReply, Result<AddAnswer, ServiceError>)>,
    /// Adds stored now (with their sequence numbers) whose messages are
    /// indexed whole this turn, from the request: the same text the store
    /// just took, not read back.
    small: Vec<(i64, AddRequest)>,
    /// Per user, the sequence numbers of those Adds.
    own_indexed: BTreeMap<UserId, BTreeSet<i64>>,
    /// The sessions the stored Adds changed, each
    /// with its document when the record stored is the one derived before
    /// the writer (`None`: read from the store).
    sessions: BTreeMap<SessionKey, Option<SessionDoc>>,
}

/// An Add stored whose messages are indexed a slice per writer
/// turn; answered once the last slice is published.
pub(super) struct SlicedAdd {
    /// Its sequence number.
    pub(super) seq: i64,
    /// Read from the store at its first slice.
    pub(super) messages: Option<Vec<StoredMessage>>,
    /// The first message not indexed yet.
    pub(super) next: usize,
    /// Where it is answered.
    pub(super) reply: AddReply,
    /// Its answer once searchable.
    answer: AddAnswer,
    /// Retries of it (same request id and body) that arrived meanwhile.
    pub(super) retries: Vec<(AddReply, AddAnswer)>,
}

impl Published {
    /// Sends each Add its answer, in queue order.
    pub(super) fn reply(self) -> Replied {
        for (reply, answer) in self.answers {
            let _ = reply.send(answer);
        }
        Replied
    }
}

impl Writer {
    /// Stores a group of Adds in one transaction, each with its session's
    /// record, and sorts out each one's verdict.
    pub(super) fn store_adds(&mut self, adds: Vec<AddJob>) -> Stored {
        let stored_at_ms = now_ms();
        let started = Instant::now();
        match self.store_batch(&adds, stored_at_ms) {
            Ok(verdicts) => {
                let store_time = started.elapsed();
                Stored::Committed {
                    admitted: self.sort_out(adds, verdicts, stored_at_ms),
                    started,
                    store_time,
                }
            }
            Err(error) => {
                tracing::error!(%error, num_adds = adds.len(), "store write failed, nothing stored");
                // A commit whose answer was lost (the connection dropped
                // during COMMIT) may have stored the group after all: the
                // next turn catches the index up from its published
                // sequence number instead of indexing only its own Adds.
                self.index_may_hold_unrecorded = true;
                Stored::Failed {
                    adds,
                    error: Arc::new(error),
                }
            }
        }
    }

    /// Indexes and publishes what a group stored, with the next slice of
    /// the sliced Adds (answering those it finishes), and settles each
    /// Add's answer.
    pub(super) fn publish(&mut self, stored: Stored) -> Published {
        let (mut admitted, started, store_time) = match stored {
            Stored::Committed {
                admitted,
                started,
                store_time,
            } => (admitted, started, store_time),
            Stored::Failed { adds, error } => {
                return Published {
                    answers: adds
                        .into_iter()
                        .map(|job| {
                            (
                                job.reply,
                                Err(ServiceError::WriteFailed(Arc::clone(&error))),
                            )
                        })
                        .collect(),
                };
            }
        };
        let replace = self.index_may_hold_unrecorded;
        let sessions = std::mem::take(&mut admitted.sessions);
        let indexed = self.index_adds(&admitted.small, sessions, false);
        tracing::debug!(
            num_adds = admitted.answers.len(),
            store_ms = store_time.as_secs_f64() * 1e3,
            index_ms = (started.elapsed() - store_time).as_secs_f64() * 1e3,
            num_sliced = self.sliced.len(),
            "batch written"
        );
        match indexed {
            Ok(done) => {
                answer_sliced(done);
                self.index_may_hold_unrecorded = false;
                // Before the answers: a client's Search right after its Add
                // finds the mark current and answers from the index at
                // once, instead of waiting behind the writer's next group
                // for a catch-up job (the index already holds the group: it
                // was published above).
                if !replace {
                    self.advance_after_own_adds(&admitted.own_indexed);
                }
            }
            Err(error) => {
                tracing::error!(%error, "index update failed; the store holds the adds and a retry catches up");
                let error = Arc::new(error);
                for (_, answer) in &mut admitted.answers {
                    if matches!(answer, Ok(AddAnswer::Done(..))) {
                        *answer = Err(ServiceError::NotYetSearchable(Arc::clone(&error)));
                    }
                }
                self.index_may_hold_unrecorded = true;
            }
        }
        Published {
            answers: admitted.answers,
        }
    }

    /// Admits a group of Adds in one store transaction, with their
    /// sessions' records; answers each one's verdict, in order.
    fn store_batch(
        &mut self,
        adds: &[AddJob],
        stored_at_ms: i64,
    ) -> Result<Vec<Verdict>, ServiceError> {
        let tx = self.conn.transaction()?;
        // Other processes may write the same database: each session's
        // checks below hold until the commit.
        let sessions: Vec<_> = adds
            .iter()
            .map(|job| (job.request.user_id(), job.request.session_id()))
            .collect();
        store::lock_sessions(&tx, &sessions)?;
        let mut verdicts = Vec::with_capacity(adds.len());
        // In queue order: an Add's check sees the records of the Adds
        // before it in the group.
        for job in adds {
            verdicts.push(admit_with_record(
                &tx,
                &job.request,
                job.derived.as_ref().map(|add| &add.derived),
                self.max_session_bytes,
                stored_at_ms,
            )?);
        }
        tx.commit()?;
        Ok(verdicts)
    }

    /// Each Add's answer from its verdict, and what the index is to take:
    /// the Adds stored now (a large one joins the sliced Adds) and their
    /// sessions. A retry of an Add still indexed in slices waits for it.
    fn sort_out(
        &mut self,
        adds: Vec<AddJob>,
        verdicts: Vec<Verdict>,
        stored_at_ms: i64,
    ) -> Admitted {
        let mut admitted = Admitted::default();
        for (job, verdict) in adds.into_iter().zip(verdicts) {
            let derived_before = job.derived.is_some();
            let answer = match verdict {
                Verdict::Stale => Ok(AddAnswer::Stale(job.request)),
                Verdict::TooLarge(too_large) => Err(too_large.into_error(self.max_session_bytes)),
                Verdict::Admission(Admission::Conflict) => Err(ServiceError::Conflict {
                    request_id: job.request.request_id().clone(),
                    user_id: job.request.user_id().clone(),
                }),
                Verdict::Admission(Admission::Duplicate { seq }) => {
                    let answer = AddAnswer::Done(AddOutcome::AlreadyStored, None);
                    // A retry of an Add still indexed in slices is answered
                    // with it, once it is searchable.
                    if let Some(original) = self.sliced.iter_mut().find(|add| add.seq == seq) {
                        original.retries.push((job.reply, answer));
                        continue;
                    }
                    Ok(answer)
                }
                Verdict::Admission(Admission::Inserted { seq }) => {
                    let request = &job.request;
                    let doc = job.derived.and_then(|add| {
                        add.into_session_doc(
                            request.user_id(),
                            request.session_id(),
                            seq,
                            stored_at_ms,
                        )
                    });
                    // The last Add of a session stored in the group gives
                    // its document.
                    admitted.sessions.insert(
                        SessionKey::new(request.user_id().clone(), request.session_id().clone()),
                        doc,
                    );
                    let answer = AddAnswer::Done(AddOutcome::Stored, derived_before.then_some(seq));
                    if store::content_bytes(request) > INDEX_SLICE_BYTES as i64 {
                        self.sliced.push_back(SlicedAdd {
                            seq,
                            messages: None,
                            next: 0,
                            reply: job.reply,
                            answer,
                            retries: Vec::new(),
                        });
                        continue;
                    }
                    admitted
                        .own_indexed
                        .entry(request.user_id().clone())
                        .or_default()
                        .insert(seq);
                    admitted.small.push((seq, job.request));
                    Ok(answer)
                }
            };
            admitted.answers.push((job.reply, answer));
        }
        admitted
    }
}

/// Answers sliced Adds whose last slice is published.
pub(super) fn answer_sliced(done: Vec<SlicedAdd>) {
    for add in done {
        let _ = add.reply.send(Ok(add.answer));
        for (reply, answer) in add.retries {
            let _ = reply.send(Ok(answer));
        }
    }
}
