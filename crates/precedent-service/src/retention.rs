//! retention: "sessions idle for longer than this go" (`--retention-days`).
//! A service opened with a retention age runs a thread that asks the writer
//! to purge at start-up and then every [`PURGE_INTERVAL`]; the purge itself
//! is the writer's (store first, then index, crash-safe).

use std::sync::mpsc::{self as std_mpsc, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::ServiceError;
use super::writer::WriteJob;
use precedent_core::time::now_ms;
use precedent_store as store;

/// How often idle sessions are purged after the purge at start-up.
const PURGE_INTERVAL: Duration = Duration::from_secs(3600);

/// Seconds in a day, for ages given in days.
const SECONDS_PER_DAY: u64 = 86_400;

/// The time before which a session last changed is older than `age`.
pub(super) fn cutoff_ms(age: Duration) -> i64 {
    now_ms().saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
}

/// The running retention thread.
pub(super) struct Retention {
    /// Dropped to stop the thread (it waits on the other end between
    /// purges).
    stop: std_mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Retention {
    /// Starts purging sessions idle for longer than `age` through the
    /// writer behind `writer`: now, then every [`PURGE_INTERVAL`].
    pub(super) fn start(
        age: Duration,
        writer: mpsc::Sender<WriteJob>,
    ) -> std::io::Result<Retention> {
        let (stop, stopped) = std_mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("precedent-retention".to_string())
            .spawn(move || {
                loop {
                    if let Err(error) = purge_older_than(&writer, age) {
                        tracing::warn!(%error, "retention purge failed; retried in an hour");
                    }
                    match stopped.recv_timeout(PURGE_INTERVAL) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })?;
        tracing::info!(
            days = age.as_secs() / SECONDS_PER_DAY,
            "retention: sessions idle for longer are purged hourly"
        );
        Ok(Retention { stop, thread })
    }

    /// Stops the thread after any purge in progress; answers it to join.
    /// The thread holds a sender to the writer until it ends.
    pub(super) fn stop(self) -> JoinHandle<()> {
        drop(self.stop);
        self.thread
    }
}

/// Asks the writer to purge and waits for it, from a plain thread.
fn purge_older_than(
    writer: &mpsc::Sender<WriteJob>,
    age: Duration,
) -> Result<store::Deleted, ServiceError> {
    let (reply, answer) = oneshot::channel();
    writer
        .blocking_send(WriteJob::Purge {
            cutoff_ms: cutoff_ms(age),
            reply,
        })
        .map_err(|_| ServiceError::ShuttingDown)?;
    answer
        .blocking_recv()
        .map_err(|_| ServiceError::ShuttingDown)?
}
