//! precedent: a memory sidecar for coding agents.
//!
//! It stores agent trajectories (Add) durably in SQLite, indexes them in
//! tantivy with a code-aware tokenizer, and ranks them for a new task
//! (Search), each user's memory apart from every other's. See
//! `ARCHITECTURE.md` for the map of crates and modules.
//!
//! This crate is the application: HTTP (`api`), MCP, the agents' hooks,
//! import, the benchmarks and the command line, over the workspace's
//! library crates (`precedent-core`, `-ingest`, `-rank`, `-store`,
//! `-index`, `-service`), whose dependencies are the architecture's
//! boundaries: a crate can name only what its manifest lists.
//!
//! Every module here is private: the crate's surface is the facade below,
//! what the binary (`cli::main`) and the integration tests use. So the
//! dead-code lint sees every item nothing calls.

mod api;
mod bench;
mod cli;
mod client;
mod hooks;
mod import;
mod local;
mod mcp;
mod scope;

/// The HTTP service: the router over a [`Service`] and its options.
pub use api::auth::ApiKeys;
pub use api::{ApiOptions, app};
/// `precedent bench load`: concurrent clients against a running server.
pub use bench::check_incremental as bench_check_incremental;
pub use bench::load as bench_load;
/// The command line (the binary's whole `main`).
pub use cli::main;
/// Agent transcripts on disk read as sessions of messages.
pub use import::transcript::read_transcripts;
/// A message's author; a Search as the API validates it; the ids the
/// inspection and deletion routes take, checked as an Add's are.
pub use precedent_core::domain::{Role, SearchRequest, SessionId, UserId};
/// Unix milliseconds now.
pub use precedent_core::time::now_ms;
/// Extraction: a session's messages in, its derived record out; its time
/// limits read the clock the caller passes, if any.
pub use precedent_ingest::{
    Clock, EXTRACTOR_VERSION, IngestMessage, OutcomeStatus, SessionRecord, extract_session,
};
/// Searches over a read-only view of a data directory.
pub use precedent_service::read::search::Searcher;
/// The store, the index and the writer behind the HTTP service.
pub use precedent_service::{Service, ServiceOptions};
