//! import: past work becomes memory.
//!
//! `precedent import` reads two kinds of sources and stores them through the
//! same Add path as any client:
//!
//! - a git repository's history (`git`): each first-parent commit, merges
//!   of pull requests included, becomes one session;
//! - agent transcripts on disk (`transcript`): Claude Code and Codex CLI
//!   logs, SWE-agent and OpenHands trajectories, aider chat histories, each
//!   transcript one session, rendered as the messages ingest reads.
//!
//! Request and session ids derive from the source (the commit id; the
//! transcript's own id or its path, and the message indexes), so a rerun
//! stores nothing twice and a grown transcript adds only its new messages.
//! Adds go to a [`Sink`]: the data directory directly, or a running
//! server's Add endpoint.

pub mod git;
mod sink;
pub mod transcript;

pub use git::{
    DEFAULT_MAX_DIFF_BYTES, ImportOptions, ImportReport, check_repository, import_history,
};
pub use sink::{DirectSink, ServerSink, Sink};
pub use transcript::{TranscriptOptions, TranscriptReport, TranscriptScope, import_transcripts};

/// How an import reports progress.
pub trait Progress {
    /// `total` items (`unit`: "commits", "transcript files") to consider.
    fn start(&mut self, total: usize, unit: &str);
    /// `done` items considered so far; `status` says what was stored.
    fn update(&mut self, done: usize, status: &str);
    /// The import (or one pass of a watch) ended.
    fn finish(&mut self);
}
