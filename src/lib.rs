//! precedent: a memory sidecar for coding agents.
//!
//! It stores agent trajectories (Add) durably in SQLite, indexes them in
//! tantivy with a code-aware tokenizer, and ranks them for a new task
//! (Search), each user's memory apart from every other's. See
//! `ARCHITECTURE.md` for the map of modules.
//!
//! Every module is private: the crate's surface is the facade below, what
//! the binary (`cli::main`) and the integration tests use. So the dead-code
//! lint sees every item nothing calls, and a module's boundary (ingest and
//! rank are pure, read writes nothing) is a matter of its imports, checked
//! by the compiler, not a convention.

mod api;
mod bench;
mod cli;
mod client;
mod domain;
mod files;
mod hooks;
mod import;
mod index;
mod ingest;
mod language;
mod local;
mod mcp;
mod metrics;
mod rank;
mod read;
mod redact;
mod scope;
mod service;
mod store;
mod time;
mod tokenize;
mod tool;

/// The HTTP service: the router over a [`Service`] and its options.
pub use api::auth::ApiKeys;
pub use api::{ApiOptions, app};
/// `precedent bench load`: concurrent clients against a running server.
pub use bench::check_incremental as bench_check_incremental;
pub use bench::load as bench_load;
/// The command line (the binary's whole `main`).
pub use cli::main;
/// A message's author; a Search as the API validates it; the ids the
/// inspection and deletion routes take, checked as an Add's are.
pub use domain::{Role, SearchRequest, SessionId, UserId};
/// Agent transcripts on disk read as sessions of messages.
pub use import::transcript::read_transcripts;
/// Extraction: a session's messages in, its derived record out; its time
/// limits read the clock the caller passes, if any.
pub use ingest::{
    Clock, EXTRACTOR_VERSION, IngestMessage, OutcomeStatus, SessionRecord, extract_session,
};
/// Searches over a read-only view of a data directory.
pub use read::search::Searcher;
/// The store, the index and the writer behind the HTTP service.
pub use service::{Service, ServiceOptions};
/// Unix milliseconds now.
pub use time::now_ms;
