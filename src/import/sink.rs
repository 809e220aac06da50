//! Where an import's Adds go: the data directory directly ([`DirectSink`])
//! or a running server's Add endpoint ([`ServerSink`]), and the pool of
//! workers that keeps several Adds in flight ([`AddPool`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};

use precedent_core::domain::{AddRequest, SessionId, UserId};

/// Where the Adds go.
pub trait Sink: Send + Sync {
    /// How many messages the session holds already (0 when it does not
    /// exist): a commit whose session exists is skipped, a transcript adds
    /// only the messages past this count.
    fn stored_messages(&self, user_id: &UserId, session_id: &SessionId) -> anyhow::Result<usize>;
    /// Stores one Add, durably, before returning.
    fn add(&self, request: AddRequest) -> anyhow::Result<()>;
    /// Where the Adds go, as a name that tells destinations apart (the
    /// key of what a transcript import remembers of a file).
    fn target(&self) -> String {
        String::new()
    }
}

/// Writes straight into a data directory no server holds.
pub struct DirectSink {
    service: Arc<precedent_service::Service>,
    runtime: tokio::runtime::Handle,
    // A std Mutex: held only for one short read, never across an await.
    reader: Mutex<precedent_store::StoreConn>,
}

impl DirectSink {
    /// A sink over an opened service, driven on `runtime`.
    pub fn new(
        service: Arc<precedent_service::Service>,
        runtime: tokio::runtime::Handle,
    ) -> anyhow::Result<DirectSink> {
        let reader = service.store_location().open_reader()?;
        Ok(DirectSink {
            service,
            runtime,
            reader: Mutex::new(reader),
        })
    }
}

impl Sink for DirectSink {
    fn stored_messages(&self, user_id: &UserId, session_id: &SessionId) -> anyhow::Result<usize> {
        let reader = self
            .reader
            .lock()
            .map_err(|_| anyhow::anyhow!("store reader poisoned"))?;
        let session = precedent_store::session(&reader, user_id, session_id)?;
        Ok(session.map_or(0, |session| {
            usize::try_from(session.num_messages).unwrap_or(0)
        }))
    }

    fn add(&self, request: AddRequest) -> anyhow::Result<()> {
        self.runtime.block_on(self.service.add(request))?;
        Ok(())
    }

    fn target(&self) -> String {
        format!("store:{}", self.service.store_location().describe())
    }
}

/// Writes through a running server's Add endpoint.
pub struct ServerSink {
    agent: ureq::Agent,
    base_url: String,
    api_key: Option<String>,
    /// What [`Sink::target`] answers: the server's address, or the store
    /// behind the local server (whose address changes from start to start).
    target: String,
}

impl ServerSink {
    /// A sink posting to `base_url` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base_url: &str, api_key: Option<String>) -> ServerSink {
        let agent = crate::client::agent(Duration::from_secs(600));
        let base_url = base_url.trim_end_matches('/').to_string();
        ServerSink {
            agent,
            target: format!("server:{base_url}"),
            base_url,
            api_key,
        }
    }

    /// Writes through the local server of the store `store`: what was
    /// imported is remembered for that store, as [`DirectSink`] does, so
    /// an import resumes whichever of the two made the earlier run.
    pub fn local(
        attached: &crate::local::Attached,
        store: &precedent_store::StoreLocation,
    ) -> ServerSink {
        let mut sink = ServerSink::new(attached.url(), attached.api_key().map(str::to_string));
        sink.target = format!("store:{}", store.describe());
        sink
    }

    fn authorization(&self) -> Option<String> {
        self.api_key.as_ref().map(|key| format!("Bearer {key}"))
    }
}

impl Sink for ServerSink {
    fn stored_messages(&self, user_id: &UserId, session_id: &SessionId) -> anyhow::Result<usize> {
        let url = format!(
            "{}/v1/sessions/{}?user_id={}",
            self.base_url,
            crate::client::encode(session_id),
            crate::client::encode(user_id)
        );
        let mut request = self
            .agent
            .get(&url)
            .header(crate::client::USER_HEADER, user_id.as_str());
        if let Some(value) = self.authorization() {
            request = request.header("Authorization", value);
        }
        let mut response = request
            .call()
            .with_context(|| format!("cannot reach {}", self.base_url))?;
        match response.status().as_u16() {
            200 => {
                let body: serde_json::Value = response
                    .body_mut()
                    .read_json()
                    .with_context(|| format!("GET {url} answered something else than JSON"))?;
                Ok(body["num_messages"]
                    .as_u64()
                    .and_then(|count| usize::try_from(count).ok())
                    .unwrap_or(0))
            }
            404 => Ok(0),
            status => {
                let text = response.body_mut().read_to_string().unwrap_or_default();
                bail!("GET {url} answered HTTP {status}: {}", answer_reason(&text))
            }
        }
    }

    fn target(&self) -> String {
        self.target.clone()
    }

    fn add(&self, request: AddRequest) -> anyhow::Result<()> {
        let messages: Vec<serde_json::Value> = request
            .messages()
            .iter()
            .map(|message| {
                serde_json::json!({
                    "role": message.role.as_str(),
                    "content": message.content,
                    "timestamp": message.timestamp_ms,
                })
            })
            .collect();
        let body = serde_json::json!({
            "request_id": request.request_id(),
            "user_id": request.user_id(),
            "session_id": request.session_id(),
            "messages": messages,
        });
        let url = format!("{}/add", self.base_url);
        // Transient answers are retried a few times, as the platform does.
        let mut attempt = 0;
        loop {
            let mut post = self
                .agent
                .post(&url)
                .header(crate::client::USER_HEADER, request.user_id().as_str());
            if let Some(value) = self.authorization() {
                post = post.header("Authorization", value);
            }
            let mut response = post
                .send_json(&body)
                .with_context(|| format!("cannot reach {}", self.base_url))?;
            let status = response.status().as_u16();
            if status == 200 {
                return Ok(());
            }
            attempt += 1;
            if attempt < 5 && matches!(status, 408 | 409 | 425 | 429 | 500 | 502 | 503 | 504) {
                std::thread::sleep(Duration::from_millis(200 * attempt));
                continue;
            }
            let text = response.body_mut().read_to_string().unwrap_or_default();
            bail!(
                "POST {url} answered HTTP {status}: {}",
                answer_reason(&text)
            );
        }
    }
}

/// The reason an error answer gives (`{"detail": {"reason": ...}}`), else
/// its first 300 characters.
fn answer_reason(text: &str) -> String {
    let reason = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|body| body["detail"]["reason"].as_str().map(str::to_string));
    reason.unwrap_or_else(|| text.chars().take(300).collect())
}

/// One job of a pool: Adds stored in order (the batches of one session),
/// given at once or streamed while a file is read.
enum Job {
    Adds(std::vec::IntoIter<AddRequest>),
    Stream(std::sync::mpsc::Receiver<AddRequest>),
}

impl Job {
    fn next(&mut self) -> Option<AddRequest> {
        match self {
            Job::Adds(adds) => adds.next(),
            Job::Stream(receiver) => receiver.recv().ok(),
        }
    }
}

/// Workers storing jobs through a sink, several in flight, so that the
/// store commits them in groups. A job is a list of Adds stored in order
/// (the batches of one session); jobs run in parallel.
pub(crate) struct AddPool {
    sender: Option<std::sync::mpsc::SyncSender<Job>>,
    workers: Vec<std::thread::JoinHandle<()>>,
    adds_stored: Arc<AtomicUsize>,
    messages_stored: Arc<AtomicUsize>,
    // A std Mutex: set once by the worker that fails, read between jobs.
    failure: Arc<Mutex<Option<anyhow::Error>>>,
}

impl AddPool {
    /// Starts `parallelism` workers over `sink`.
    pub(crate) fn new(sink: Arc<dyn Sink>, parallelism: usize) -> AddPool {
        let parallelism = parallelism.max(1);
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Job>(parallelism * 2);
        // A std Mutex: each worker holds it only to take the next job.
        let receiver = Arc::new(Mutex::new(receiver));
        let adds_stored = Arc::new(AtomicUsize::new(0));
        let messages_stored = Arc::new(AtomicUsize::new(0));
        let failure: Arc<Mutex<Option<anyhow::Error>>> = Arc::new(Mutex::new(None));
        let workers = (0..parallelism)
            .map(|_| {
                let receiver = Arc::clone(&receiver);
                let sink = Arc::clone(&sink);
                let adds_stored = Arc::clone(&adds_stored);
                let messages_stored = Arc::clone(&messages_stored);
                let failure = Arc::clone(&failure);
                std::thread::spawn(move || {
                    loop {
                        let next = receiver
                            .lock()
                            .ok()
                            .and_then(|receiver| receiver.recv().ok());
                        let Some(mut job) = next else { break };
                        while let Some(request) = job.next() {
                            let num_messages = request.messages().len();
                            if let Err(error) = sink.add(request) {
                                if let Ok(mut slot) = failure.lock() {
                                    slot.get_or_insert(error);
                                }
                                return;
                            }
                            adds_stored.fetch_add(1, Ordering::Relaxed);
                            messages_stored.fetch_add(num_messages, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        AddPool {
            sender: Some(sender),
            workers,
            adds_stored,
            messages_stored,
            failure,
        }
    }

    /// Queues a job (waits while the queue is full); false once a worker
    /// failed or every worker is gone.
    pub(crate) fn submit(&self, job: Vec<AddRequest>) -> bool {
        if self.failed() {
            return false;
        }
        self.sender
            .as_ref()
            .is_some_and(|sender| sender.send(Job::Adds(job.into_iter())).is_ok())
    }

    /// Queues a job whose Adds are sent, in order, through the returned
    /// sender (one Add waits in it at most, so memory holds a few Adds,
    /// not the file); `None` once a worker failed or every worker is gone.
    pub(crate) fn submit_stream(&self) -> Option<std::sync::mpsc::SyncSender<AddRequest>> {
        if self.failed() {
            return None;
        }
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let queued = self
            .sender
            .as_ref()
            .is_some_and(|jobs| jobs.send(Job::Stream(receiver)).is_ok());
        queued.then_some(sender)
    }

    /// Whether a worker failed.
    pub(crate) fn failed(&self) -> bool {
        self.failure
            .lock()
            .map(|slot| slot.is_some())
            .unwrap_or(true)
    }

    /// Adds stored so far.
    pub(crate) fn adds_stored(&self) -> usize {
        self.adds_stored.load(Ordering::Relaxed)
    }

    /// Messages stored so far.
    pub(crate) fn messages_stored(&self) -> usize {
        self.messages_stored.load(Ordering::Relaxed)
    }

    /// Waits for every queued job: the Adds and messages stored, and the
    /// first failure, if any.
    pub(crate) fn finish(mut self) -> PoolOutcome {
        drop(self.sender.take());
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        let result = match self.failure.lock().ok().and_then(|mut slot| slot.take()) {
            Some(error) => Err(error),
            None => Ok(()),
        };
        PoolOutcome {
            adds_stored: self.adds_stored(),
            messages_stored: self.messages_stored(),
            result,
        }
    }
}

/// What a pool did.
pub(crate) struct PoolOutcome {
    /// Adds stored.
    pub(crate) adds_stored: usize,
    /// Messages stored.
    pub(crate) messages_stored: usize,
    /// The first failure, if any.
    pub(crate) result: anyhow::Result<()>,
}
