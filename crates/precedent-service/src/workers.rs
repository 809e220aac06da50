//! workers: the threads behind the writer's queue, owned together and
//! stopped in one order, like a drop guard. [`Workers`] holds the queue's
//! sender, the writer thread, and the retention and re-derivation threads
//! (which send to the writer). [`Workers::shutdown`] stops re-derivation,
//! then retention, each joined before the next, then closes the queue and
//! waits for the writer to finish every job queued; until the queue is
//! closed, jobs still reach the writer. Dropped, it stops them in the same
//! order without waiting for them: a service abandoned (a hook past its
//! deadline) does not block on its threads, and the writer still finishes
//! its queue and closes the index once the others are gone. The extraction
//! pool is stopped before (see `Service::shutdown`): Adds being prepared
//! reach the writer first.

use std::sync::Mutex;
use std::thread::JoinHandle;

use tokio::sync::mpsc;

use super::ServiceError;
use super::rederive::Rederivation;
use super::retention::Retention;
use super::writer::WriteJob;

/// The running writer and the threads that send to it; stopped in order
/// by [`Workers::shutdown`], or when dropped.
pub(super) struct Workers {
    /// A std mutex: held only to clone the sender, read a handle, or take
    /// the next thread to stop, never across an await.
    running: Mutex<Running>,
}

/// What is still running; each is taken when it is stopped.
struct Running {
    /// The writer's queue; dropped (after the threads holding clones of
    /// it ended) to let the writer finish.
    sender: Option<mpsc::Sender<WriteJob>>,
    /// The writer thread, stopped last.
    writer_thread: Option<JoinHandle<()>>,
    /// The retention thread, when the service purges idle sessions.
    retention: Option<Retention>,
    /// The thread re-deriving records of an older extractor, while it
    /// runs.
    rederivation: Option<Rederivation>,
}

impl Workers {
    /// The running threads, owned from now on.
    pub(super) fn new(
        sender: mpsc::Sender<WriteJob>,
        writer_thread: JoinHandle<()>,
        retention: Option<Retention>,
        rederivation: Option<Rederivation>,
    ) -> Workers {
        Workers {
            running: Mutex::new(Running {
                sender: Some(sender),
                writer_thread: Some(writer_thread),
                retention,
                rederivation,
            }),
        }
    }

    /// A sender to the writer's queue while it is open, else
    /// `ShuttingDown`.
    pub(super) fn sender(&self) -> Result<mpsc::Sender<WriteJob>, ServiceError> {
        self.running
            .lock()
            .map_err(|_| ServiceError::ShuttingDown)?
            .sender
            .clone()
            .ok_or(ServiceError::ShuttingDown)
    }

    /// Jobs waiting for the writer, and the queue's capacity (`(0, 0)` once
    /// it is closed).
    pub(super) fn queue(&self) -> (usize, usize) {
        self.running
            .lock()
            .ok()
            .and_then(|running| {
                running.sender.as_ref().map(|sender| {
                    (
                        sender.max_capacity() - sender.capacity(),
                        sender.max_capacity(),
                    )
                })
            })
            .unwrap_or((0, 0))
    }

    /// Whether the writer thread is still running.
    pub(super) fn writer_running(&self) -> bool {
        self.running
            .lock()
            .map(|running| {
                running
                    .writer_thread
                    .as_ref()
                    .is_some_and(|thread| !thread.is_finished())
            })
            .unwrap_or(false)
    }

    /// Stops the threads in order, each joined on the blocking pool before
    /// the next is stopped; the writer finishes every job queued.
    /// Idempotent.
    pub(super) async fn shutdown(&self) {
        loop {
            let next = self
                .running
                .lock()
                .ok()
                .and_then(|mut running| running.stop_next());
            let Some((thread, name)) = next else {
                return;
            };
            let joined = tokio::task::spawn_blocking(move || thread.join()).await;
            if !matches!(joined, Ok(Ok(()))) {
                tracing::error!("{name} ended abnormally");
            }
        }
    }
}

impl Running {
    /// Stops the next thread and answers it to join, with its name for the
    /// log: re-derivation, then retention (each holds a sender to the
    /// writer), then the writer, once the queue is closed. `None` when
    /// every one is stopped.
    fn stop_next(&mut self) -> Option<(JoinHandle<()>, &'static str)> {
        if let Some(rederivation) = self.rederivation.take() {
            return Some((rederivation.stop(), "re-derivation thread"));
        }
        if let Some(retention) = self.retention.take() {
            return Some((retention.stop(), "retention thread"));
        }
        // The writer ends once every sender is gone.
        self.sender.take();
        self.writer_thread
            .take()
            .map(|thread| (thread, "writer thread"))
    }
}

impl Drop for Workers {
    /// Stops what [`Workers::shutdown`] did not, in its order, without
    /// waiting: each thread ends on its own, the writer last.
    fn drop(&mut self) {
        if let Ok(running) = self.running.get_mut() {
            while running.stop_next().is_some() {}
        }
    }
}
