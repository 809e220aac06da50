//! The one integration-test binary: each module covers one area, all
//! through the public library API or the real `precedent` binary.

#[path = "integration/support.rs"]
mod support;

#[path = "integration/boundaries.rs"]
mod boundaries;

#[path = "integration/continuity.rs"]
mod continuity;

#[path = "integration/contract.rs"]
mod contract;

#[path = "integration/deletion.rs"]
mod deletion;

#[path = "integration/docs.rs"]
mod docs;

#[path = "integration/durability.rs"]
mod durability;

#[path = "integration/extract.rs"]
mod extract;

#[path = "integration/inspect.rs"]
mod inspect;

#[path = "integration/postgres_store.rs"]
mod postgres_store;

#[path = "integration/ranking.rs"]
mod ranking;

#[path = "integration/hooks.rs"]
mod hooks;

#[path = "integration/import.rs"]
mod import;

#[path = "integration/import_safety.rs"]
mod import_safety;

#[path = "integration/install_script.rs"]
mod install_script;

#[path = "integration/local_server.rs"]
mod local_server;

#[path = "integration/listing.rs"]
mod listing;

#[path = "integration/operations.rs"]
mod operations;

#[path = "integration/plugin.rs"]
mod plugin;

#[path = "integration/relevance.rs"]
mod relevance;

#[path = "integration/security.rs"]
mod security;

#[path = "integration/setup.rs"]
mod setup;

#[path = "integration/stale.rs"]
mod stale;

#[path = "integration/writes.rs"]
mod writes;
