//! read: "answer this Search, show this session" over a read-only view of
//! the data directory.
//!
//! [`search`] ranks a user's stored experience for a new task (the
//! [`search::Searcher`] and its `explain`); [`inspect`] reads derived session
//! records back for people (`session_summaries`, `session_detail`). The
//! service reads through them beside its writer; `precedent search` and
//! `precedent inspect` use them on a data directory directly, which works
//! while a server holds it (SQLite and tantivy readers never block the
//! writer).
//!
//! Architecture invariant: nothing here writes, and nothing here knows the
//! service: a read fails only because the store or the index did.

pub mod inspect;
pub mod search;
pub mod stale;

use precedent_index::IndexError;
use precedent_store::StoreError;

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The store failed (or holds a record it cannot decode).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The index failed.
    #[error(transparent)]
    Index(#[from] IndexError),
}
