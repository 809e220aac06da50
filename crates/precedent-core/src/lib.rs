//! precedent-core: the vocabulary every other crate of precedent speaks.
//!
//! - [`domain`]: requests and ids as the API validates them;
//! - [`tool`]: the coding agents' tools, one table;
//! - [`language`]: the languages a path or a query is in;
//! - [`tokenize`]: the code-aware tokenizer the index and the ranking share;
//! - [`redact`]: secrets cut out of what is stored;
//! - [`time`]: Unix milliseconds;
//! - [`files`]: writing without following a planted path, and the private
//!   data directory.
//!
//! It depends on no other crate of the workspace.

pub mod domain;
pub mod files;
pub mod language;
pub mod redact;
pub mod time;
pub mod tokenize;
pub mod tool;
