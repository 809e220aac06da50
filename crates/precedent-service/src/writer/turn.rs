//! The writer's turn, as stages: the jobs [`Gathered`] from the queue, then
//! their Adds stored, published and replied to (`adds`), then the turn's
//! other job, a slice of a user deletion and the index commit when due.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::{AddJob, WriteJob, Writer};

/// The longest the writer waits for Adds being prepared to join a group:
/// a turn costs about the same for one Add or several, so with concurrent
/// clients a short wait buys fewer turns. A single client's Add is never
/// waited for (nothing else is being prepared).
const MAX_GROUP_WAIT: Duration = Duration::from_millis(4);

/// How often the writer looks for a job while published documents wait
/// for their commit.
const JOB_POLL: Duration = Duration::from_millis(1);

/// The first stage of a turn: the Adds queued together, and the job after
/// them that is not an Add.
pub(super) struct Gathered {
    /// The Adds written together (those of users being deleted held back).
    adds: Vec<AddJob>,
    /// The job after them that is not an Add.
    job: Option<WriteJob>,
}

/// What the writer finds when it looks for the turn's first job. Lives for
/// one look only: the job is moved into the turn at once, not boxed.
#[allow(clippy::large_enum_variant)]
enum Next {
    /// A job: a released one, or a new one from the queue.
    Job(WriteJob),
    /// None came (the writer did not wait, or waited until a commit was
    /// due): the turn goes on without.
    Idle,
    /// Every sender is gone: the writer stops.
    Closed,
}

impl Writer {
    /// Takes jobs until every sender is gone, then closes the index
    /// (synced, marked clean).
    pub(crate) fn run(mut self, mut receiver: mpsc::Receiver<WriteJob>) {
        while let Some(gathered) = self.gather_turn(&mut receiver) {
            self.take_turn(gathered);
        }
        self.close();
    }

    /// The next turn's jobs: the Adds queued together (at most
    /// `max_batch`; those of users being deleted are held back), and the
    /// job after them that is not an Add. `None` once every sender is gone.
    fn gather_turn(&mut self, receiver: &mut mpsc::Receiver<WriteJob>) -> Option<Gathered> {
        let mut turn = Gathered {
            adds: Vec::new(),
            job: None,
        };
        match self.first_job(receiver) {
            Next::Job(WriteJob::Add(job)) => turn.adds.push(job),
            Next::Job(other) => turn.job = Some(other),
            Next::Idle => {}
            Next::Closed => return None,
        }
        let group_deadline = Instant::now() + MAX_GROUP_WAIT;
        while !turn.adds.is_empty() && turn.job.is_none() && turn.adds.len() < self.max_batch {
            let next = match self.ready.pop_front() {
                Some(job) => Ok(job),
                None => receiver.try_recv(),
            };
            match next {
                Ok(WriteJob::Add(job)) => turn.adds.push(job),
                Ok(other) => turn.job = Some(other),
                Err(mpsc::error::TryRecvError::Empty)
                    if self.adds_preparing.load(Ordering::Acquire) > 0
                        && Instant::now() < group_deadline =>
                {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(_) => break,
            }
        }
        // Adds of users being deleted wait for the deletion's end.
        if turn
            .adds
            .iter()
            .any(|job| self.deletions.holds(job.request.user_id()))
        {
            let (held, kept): (Vec<AddJob>, Vec<AddJob>) = turn
                .adds
                .drain(..)
                .partition(|job| self.deletions.holds(job.request.user_id()));
            turn.adds = kept;
            for job in held {
                self.deletions.hold(WriteJob::Add(job));
            }
        }
        Some(turn)
    }

    /// The turn's first job: one a finished deletion released, else a new
    /// one. With slices or a deletion to work on, a turn does not wait for
    /// one (an empty queue is [`Next::Idle`], even once every sender is
    /// gone: the work left is done first); with published documents waiting
    /// for their commit, it waits only until the commit is due.
    fn first_job(&mut self, receiver: &mut mpsc::Receiver<WriteJob>) -> Next {
        if let Some(job) = self.ready.pop_front() {
            return Next::Job(job);
        }
        if !self.sliced.is_empty() || self.deletions.is_busy() {
            return receiver.try_recv().map_or(Next::Idle, Next::Job);
        }
        match self.index.commit_due_in() {
            None => receiver.blocking_recv().map_or(Next::Closed, Next::Job),
            Some(wait) => next_job_within(receiver, wait),
        }
    }

    /// One turn: its Adds stored, published and replied to (or, without
    /// Adds, the next slice of the sliced Adds), then its other job, a
    /// slice of a user deletion, and the index commit when it is due.
    fn take_turn(&mut self, gathered: Gathered) {
        let Gathered { adds, job } = gathered;
        if !adds.is_empty() || !self.sliced.is_empty() || job.is_some() || self.deletions.is_busy()
        {
            self.reconnect_if_broken();
        }
        let started = Instant::now();
        if !adds.is_empty() {
            self.metrics
                .adds_written
                .fetch_add(adds.len() as u64, Ordering::Relaxed);
            let stored = self.store_adds(adds);
            let published = self.publish(stored);
            published.reply();
            self.metrics.write_turn.observe(started.elapsed());
        } else if !self.sliced.is_empty() {
            self.index_slices(false);
            self.metrics.write_turn.observe(started.elapsed());
        }
        if let Some(job) = job {
            if !self.sliced.is_empty() {
                // A deletion finds every stored Add's documents in the index.
                self.index_slices(true);
            }
            self.run_job(job);
        }
        if self.deletions.is_busy() {
            let released = self.user_deletion_turn();
            self.ready.extend(released);
        }
        self.commit_if_due();
    }

    /// Runs a job that is not an Add.
    fn run_job(&mut self, job: WriteJob) {
        match job {
            WriteJob::DeleteUser { user_id, reply } => self.begin_user_deletion(user_id, reply),
            WriteJob::Purge { cutoff_ms, reply } => {
                let _ = reply.send(self.purge(cutoff_ms));
            }
            WriteJob::Rederive {
                mut sessions,
                reply,
            } => {
                // A session being deleted is not written again.
                sessions.retain(|session| !self.deletions.holds(&session.user_id));
                let _ = reply.send(self.rederived(&sessions));
            }
            WriteJob::CatchUpUser { user_id, reply } if self.deletions.holds(&user_id) => {
                self.deletions
                    .hold(WriteJob::CatchUpUser { user_id, reply });
            }
            WriteJob::CatchUpUser { user_id, reply } => {
                let _ = reply.send(self.catch_up_user(&user_id));
            }
            // Never here: Adds join the turn's group.
            WriteJob::Add(_) => {}
        }
    }

    /// Commits the published documents in the background when they are
    /// due. A commit that failed (now or in the background) lost what it
    /// held: the next turn catches up from the last commit, replacing.
    fn commit_if_due(&mut self) {
        if self.index.commit_due_in() == Some(Duration::ZERO)
            && let Err(error) = self.index.commit_published()
        {
            tracing::error!(%error, "index commit failed; the store holds the adds and a retry catches up");
            self.index_may_hold_unrecorded = true;
        }
        if self.index.take_commit_failure() {
            self.index_may_hold_unrecorded = true;
        }
    }
}

/// The next job, waiting at most `wait`: [`Next::Idle`] when none came in
/// time, [`Next::Closed`] when every sender is gone.
fn next_job_within(receiver: &mut mpsc::Receiver<WriteJob>, wait: Duration) -> Next {
    let deadline = Instant::now() + wait;
    loop {
        match receiver.try_recv() {
            Ok(job) => return Next::Job(job),
            Err(mpsc::error::TryRecvError::Disconnected) => return Next::Closed,
            Err(mpsc::error::TryRecvError::Empty) => {
                if Instant::now() >= deadline {
                    return Next::Idle;
                }
                std::thread::sleep(JOB_POLL);
            }
        }
    }
}
