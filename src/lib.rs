//! codemem: a memory sidecar for coding agents.
//!
//! It stores agent trajectories (Add) durably in SQLite, indexes them in
//! tantivy with a code-aware tokenizer, and ranks them for a new task
//! (Search), each user's memory apart from every other's. See
//! `ARCHITECTURE.md` for the map of modules.

pub mod api;
pub mod bench;
pub mod cli;
pub mod client;
pub mod domain;
pub mod import;
pub mod index;
pub mod ingest;
pub mod language;
pub mod mcp;
pub mod metrics;
pub mod rank;
pub mod read;
pub mod redact;
pub mod service;
pub mod store;
pub mod time;
pub mod tokenize;
