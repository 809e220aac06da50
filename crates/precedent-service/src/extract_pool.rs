//! extract_pool: the few threads that prepare Adds before the writer (check
//! them against the request log and the size limit, derive their session's
//! record). A fixed pool, not tokio's blocking pool: extraction is CPU work
//! that more threads than cores only slow, and each extraction thread keeps
//! a parser and a tag cache (see `ingest::symbols`), so their number bounds
//! that memory. Threads take jobs from one shared queue, so one long
//! extraction (a whole trajectory) holds up one thread, not the others'
//! queue.

use std::sync::Mutex;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use super::ServiceError;

type Job = Box<dyn FnOnce() + Send>;

/// The running extraction threads.
pub(super) struct ExtractPool {
    /// Taken (dropped) to stop the threads. A std mutex: held only to
    /// clone or take the sender.
    sender: Mutex<Option<crossbeam_channel::Sender<Job>>>,
    /// Held only to take the handles at shutdown.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl ExtractPool {
    /// Starts `num_threads` threads (at least one).
    pub(super) fn start(num_threads: usize) -> std::io::Result<ExtractPool> {
        let (sender, receiver) = crossbeam_channel::unbounded::<Job>();
        let mut threads = Vec::new();
        for number in 0..num_threads.max(1) {
            let receiver = receiver.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("precedent-extract-{number}"))
                    .spawn(move || {
                        while let Ok(job) = receiver.recv() {
                            job();
                        }
                    })?,
            );
        }
        Ok(ExtractPool {
            sender: Mutex::new(Some(sender)),
            threads: Mutex::new(threads),
        })
    }

    /// Runs `work` on an extraction thread and answers its result.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ServiceError> {
        let sender = self
            .sender
            .lock()
            .map_err(|_| ServiceError::ShuttingDown)?
            .clone()
            .ok_or(ServiceError::ShuttingDown)?;
        let (reply, answer) = oneshot::channel();
        sender
            .send(Box::new(move || {
                let _ = reply.send(work());
            }))
            .map_err(|_| ServiceError::ShuttingDown)?;
        answer
            .await
            .map_err(|error| ServiceError::task("an extraction thread stopped", error))
    }

    /// Stops taking jobs; answers the threads, which end after the jobs
    /// queued, to join.
    pub(super) fn stop(&self) -> Vec<JoinHandle<()>> {
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
        self.threads
            .lock()
            .map(|mut threads| std::mem::take(&mut *threads))
            .unwrap_or_default()
    }
}
