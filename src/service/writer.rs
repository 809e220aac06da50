//! writer: the one thread that writes. It owns the SQLite write connection
//! and the tantivy writer; Adds and deletions queue to it over a bounded
//! channel with a reply slot. Adds queued together are stored in one
//! transaction (their sessions re-derived inside it), indexed, committed and
//! made visible before any of them is answered; a deletion runs after the
//! Adds queued before it, store first, then index.

use std::path::Path;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::derive::{catch_up, derive_session};
use super::{ServiceError, WriterMetrics};
use crate::domain::{AddOutcome, AddRequest};
use crate::index::{IndexWriterHandle, SearchIndex};
use crate::store::{self, Admission, StoreError};
use crate::time::now_ms;

/// An Add for the writer thread.
pub(super) struct AddJob {
    pub(super) request: AddRequest,
    pub(super) reply: oneshot::Sender<Result<AddOutcome, ServiceError>>,
}

/// What the writer thread is asked to do.
pub(super) enum WriteJob {
    /// Store an Add (Adds queued together are written together).
    Add(AddJob),
    /// Delete every session last changed before a time (retention).
    Purge {
        cutoff_ms: i64,
        reply: oneshot::Sender<Result<store::Deleted, ServiceError>>,
    },
    /// Delete everything of a user.
    DeleteUser {
        user_id: String,
        reply: oneshot::Sender<Result<store::Deleted, ServiceError>>,
    },
}

/// What the writer thread reports to the rest of the service.
pub(super) struct WriterReports<'a> {
    /// Highest sequence number committed to the index.
    pub(super) committed_seq: &'a std::sync::atomic::AtomicI64,
    /// Counts for `/metrics`.
    pub(super) metrics: &'a WriterMetrics,
}

/// The writer thread's loop: takes jobs until every sender is gone, then
/// closes the index (synced, marked clean).
pub(super) fn writer_loop(
    data_dir: &Path,
    mut receiver: mpsc::Receiver<WriteJob>,
    mut conn: Connection,
    mut writer: IndexWriterHandle,
    search_index: &SearchIndex,
    reports: WriterReports<'_>,
    max_batch: usize,
) {
    let WriterReports {
        committed_seq,
        metrics,
    } = reports;
    let mut batch = Vec::with_capacity(max_batch);
    // After a failed index update the writer may hold documents of an
    // unrecorded commit: the next catch-up replaces instead of appending.
    let mut index_may_hold_unrecorded = false;
    while let Some(first) = receiver.blocking_recv() {
        // Adds queued together are written together; a deletion is done
        // after the Adds queued before it.
        let mut deletion = None;
        match first {
            WriteJob::Add(job) => batch.push(job),
            other => deletion = Some(other),
        }
        while deletion.is_none() && batch.len() < max_batch {
            match receiver.try_recv() {
                Ok(WriteJob::Add(job)) => batch.push(job),
                Ok(other) => deletion = Some(other),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            metrics
                .adds_written
                .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
            let started = std::time::Instant::now();
            let indexed = write_batch(
                &mut conn,
                &mut writer,
                search_index,
                &mut batch,
                index_may_hold_unrecorded,
            );
            metrics.commit.observe(started.elapsed());
            index_may_hold_unrecorded = !indexed;
        }
        match deletion {
            Some(WriteJob::DeleteUser { user_id, reply }) => {
                let _ = reply.send(delete_user(&mut conn, &mut writer, search_index, &user_id));
            }
            Some(WriteJob::Purge { cutoff_ms, reply }) => {
                let _ = reply.send(purge(&mut conn, &mut writer, search_index, cutoff_ms));
            }
            Some(WriteJob::Add(_)) | None => {}
        }
        committed_seq.store(writer.committed_seq(), std::sync::atomic::Ordering::Release);
    }
    let indexed_seq = writer.committed_seq();
    match writer.close(data_dir) {
        Ok(()) => tracing::info!(indexed_seq, "writer stopped, index synced"),
        Err(error) => {
            tracing::error!(%error, indexed_seq, "index not synced at shutdown; the next start-up verifies it")
        }
    }
}

/// Stores a group of Adds in one transaction, indexes them, then replies to
/// each. Drains `batch`. Returns whether the index is up to date.
fn write_batch(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    batch: &mut Vec<AddJob>,
    replace: bool,
) -> bool {
    let stored_at_ms = now_ms();
    let started = std::time::Instant::now();
    let admitted: Result<Vec<Admission>, ServiceError> = (|| {
        let tx = conn.transaction().map_err(StoreError::from)?;
        let mut admissions = Vec::with_capacity(batch.len());
        let mut touched = std::collections::BTreeSet::new();
        for job in batch.iter() {
            // Hashed here, on the writer thread, not on an async worker.
            let body_sha256 = job.request.body_sha256();
            let admission = store::admit(&tx, &job.request, &body_sha256, stored_at_ms)?;
            if let Admission::Inserted { .. } = admission {
                touched.insert((
                    job.request.user_id.as_str(),
                    job.request.session_id.as_str(),
                ));
            }
            admissions.push(admission);
        }
        for (user_id, session_id) in touched {
            derive_session(&tx, user_id, session_id, stored_at_ms)?;
        }
        tx.commit().map_err(StoreError::from)?;
        Ok(admissions)
    })();
    let admissions = match admitted {
        Ok(admissions) => admissions,
        Err(error) => {
            tracing::error!(%error, num_adds = batch.len(), "store write failed, nothing stored");
            let reason = error.to_string();
            for job in batch.drain(..) {
                let _ = job
                    .reply
                    .send(Err(ServiceError::WriteFailed(reason.clone())));
            }
            return !replace;
        }
    };
    // Replace is off on the normal path: the index is exactly at the
    // store's previous head, so these sequence numbers are new to it.
    let stored = started.elapsed();
    let indexed = catch_up(conn, writer, search_index, replace);
    tracing::debug!(
        num_adds = batch.len(),
        store_ms = stored.as_secs_f64() * 1e3,
        index_ms = (started.elapsed() - stored).as_secs_f64() * 1e3,
        "batch written"
    );
    if let Err(error) = &indexed {
        tracing::error!(%error, "index update failed; the store holds the adds and a retry catches up");
    }
    for (job, admission) in batch.drain(..).zip(admissions) {
        let answer = match (admission, &indexed) {
            (Admission::Conflict, _) => Err(ServiceError::Conflict {
                request_id: job.request.request_id.clone(),
                user_id: job.request.user_id.clone(),
            }),
            (_, Err(error)) => Err(ServiceError::NotYetSearchable(error.to_string())),
            (Admission::Inserted { .. }, Ok(_)) => Ok(AddOutcome::Stored),
            (Admission::Duplicate { .. }, Ok(_)) => Ok(AddOutcome::AlreadyStored),
        };
        let _ = job.reply.send(answer);
    }
    indexed.is_ok()
}

/// Deletes a user from the store (one transaction, which also records the
/// deletion as pending for the index), then from the index, then clears
/// the pending record. A crash in between leaves the pending record, and
/// start-up finishes the index part (see [`forget_deleted`]).
fn delete_user(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    user_id: &str,
) -> Result<store::Deleted, ServiceError> {
    let deleted = delete_then_forget(conn, writer, search_index, |tx| {
        store::delete_user(tx, user_id)
    })?;
    tracing::info!(
        requests = deleted.requests,
        messages = deleted.messages,
        sessions = deleted.sessions,
        "user deleted"
    );
    Ok(deleted)
}

/// Purges the sessions last changed before `cutoff_ms` from the store, then
/// from the index, crash-safe like [`delete_user`].
fn purge(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    cutoff_ms: i64,
) -> Result<store::Deleted, ServiceError> {
    let deleted = delete_then_forget(conn, writer, search_index, |tx| {
        store::purge_sessions_before(tx, cutoff_ms)
    })?;
    if deleted.sessions > 0 {
        tracing::info!(
            sessions = deleted.sessions,
            requests = deleted.requests,
            messages = deleted.messages,
            "retention purged old sessions"
        );
    }
    Ok(deleted)
}

/// Runs a store deletion in one transaction (which also records it as
/// pending), then makes the index forget what it deleted.
fn delete_then_forget(
    conn: &mut Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
    delete: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<store::Deleted, StoreError>,
) -> Result<store::Deleted, ServiceError> {
    let tx = conn.transaction().map_err(StoreError::from)?;
    let deleted = delete(&tx)?;
    tx.commit().map_err(StoreError::from)?;
    forget_deleted(conn, writer, search_index)?;
    Ok(deleted)
}

/// Removes from the index every user and session the store has deleted,
/// and clears their pending records.
pub(super) fn forget_deleted(
    conn: &Connection,
    writer: &mut IndexWriterHandle,
    search_index: &SearchIndex,
) -> Result<(), ServiceError> {
    let users = store::pending_user_deletions(conn)?;
    let sessions = store::pending_session_deletions(conn)?;
    if users.is_empty() && sessions.is_empty() {
        return Ok(());
    }
    if let Err(error) = writer.forget(&users, &sessions, search_index) {
        if let Err(rollback_error) = writer.rollback() {
            tracing::error!(error = %rollback_error, "index rollback failed");
        }
        return Err(error.into());
    }
    store::clear_user_deletions(conn, &users)?;
    store::clear_session_deletions(conn, &sessions)?;
    Ok(())
}
