//! rederive: "records of an older extractor are derived again". After an
//! upgrade that changes extraction, a thread started with the service reads
//! the sessions whose record an older extractor derived, derives each again
//! from its messages (on its own thread, with its own read connection), and
//! hands them to the writer in groups; the writer stores those whose session
//! did not move on meanwhile and replaces their index documents. Searches
//! keep answering throughout (from the older records until then). Progress
//! goes to the log and to `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::derive::{EXTRACTOR_VERSION, rederive};
use super::writer::WriteJob;
use super::{ServiceError, WriterMetrics};
use precedent_store::{self as store, StoreLocation};

/// Sessions derived again and handed to the writer together (one store
/// transaction and one index turn per group).
const SESSIONS_PER_GROUP: usize = 64;

/// How often progress is logged.
const LOG_INTERVAL: Duration = Duration::from_secs(5);

/// The running re-derivation thread.
pub(super) struct Rederivation {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Rederivation {
    /// Starts re-deriving the records of an older extractor in
    /// `data_dir`'s store through the writer behind `writer`; `None` when
    /// every record is current.
    pub(super) fn start(
        store: &StoreLocation,
        writer: mpsc::Sender<WriteJob>,
        metrics: Arc<WriterMetrics>,
    ) -> Result<Option<Rederivation>, ServiceError> {
        let conn = store.open_reader()?;
        let outdated = store::count_sessions_derived_before(&conn, EXTRACTOR_VERSION)?;
        if outdated == 0 {
            return Ok(None);
        }
        metrics
            .sessions_to_rederive
            .store(u64::try_from(outdated).unwrap_or(0), Ordering::Relaxed);
        tracing::info!(
            num_sessions = outdated,
            extractor_version = EXTRACTOR_VERSION,
            "records of an older extractor are derived again in the background"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("precedent-rederive".to_string())
            .spawn(move || {
                match rederive_all(&conn, &writer, &metrics, &thread_stop) {
                    Ok(()) => {}
                    Err(ServiceError::ShuttingDown) => {}
                    Err(error) => {
                        tracing::error!(%error, "re-deriving records stopped; the next start-up resumes")
                    }
                }
            })
            .map_err(|source| ServiceError::task("cannot start a thread", source))?;
        Ok(Some(Rederivation { stop, thread }))
    }

    /// Stops the thread after the group in progress; answers it to join.
    /// The thread holds a sender to the writer until it ends.
    pub(super) fn stop(self) -> JoinHandle<()> {
        self.stop.store(true, Ordering::Release);
        self.thread
    }
}

/// Derives every outdated record again, group by group, until none is left,
/// a group makes no progress, or `stop` is set.
fn rederive_all(
    conn: &store::StoreConn,
    writer: &mpsc::Sender<WriteJob>,
    metrics: &WriterMetrics,
    stop: &AtomicBool,
) -> Result<(), ServiceError> {
    let started = Instant::now();
    let mut last_log = Instant::now();
    let mut done = 0usize;
    let mut previous_left = i64::MAX;
    while !stop.load(Ordering::Acquire) {
        let outdated = store::sessions_derived_before(conn, EXTRACTOR_VERSION, SESSIONS_PER_GROUP)?;
        if outdated.is_empty() {
            break;
        }
        let mut sessions = Vec::with_capacity(outdated.len());
        for key in &outdated {
            if stop.load(Ordering::Acquire) {
                return Ok(());
            }
            sessions.extend(rederive(conn, &key.user_id, &key.session_id)?);
        }
        let (reply, answer) = oneshot::channel();
        writer
            .blocking_send(WriteJob::Rederive { sessions, reply })
            .map_err(|_| ServiceError::ShuttingDown)?;
        let stored = answer
            .blocking_recv()
            .map_err(|_| ServiceError::ShuttingDown)??;
        done += stored;
        metrics
            .sessions_rederived
            .fetch_add(stored as u64, Ordering::Relaxed);
        let left = store::count_sessions_derived_before(conn, EXTRACTOR_VERSION)?;
        metrics
            .sessions_to_rederive
            .store(u64::try_from(left).unwrap_or(0), Ordering::Relaxed);
        if stored == 0 && left >= previous_left {
            // No record stored and none left behind: nothing more to gain
            // now.
            tracing::warn!(
                left,
                "re-deriving records makes no progress; the next start-up resumes"
            );
            return Ok(());
        }
        previous_left = left;
        if last_log.elapsed() >= LOG_INTERVAL {
            tracing::info!(done, left, "deriving records again");
            last_log = Instant::now();
        }
    }
    tracing::info!(
        num_sessions = done,
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        "records of an older extractor derived again"
    );
    Ok(())
}
