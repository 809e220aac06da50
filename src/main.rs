//! The `precedent` binary: everything lives in the library; see its `cli` module.

use std::ffi::{c_int, c_long};

/// mimalloc rather than the system allocator: extraction, tokenizing and
/// indexing allocate many small, short-lived values, which it serves faster
/// (`precedent bench ingest`). Built without transparent huge pages (feature
/// `no_thp`), which raised peak memory.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Milliseconds mimalloc keeps freed memory before it gives it back to the
/// system (its own default: 1,000). Adds free their request, extraction and
/// indexing buffers as fast as they allocate them, and with a second's delay
/// about a second of them stays resident; the shorter delay lowers peak
/// memory at the same Add throughput (`bench scale`).
const ALLOCATOR_PURGE_DELAY_MS: c_long = 50;

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (`mimalloc.h`, the
/// same number in its versions 2 and 3).
const MI_OPTION_PURGE_DELAY: c_int = 15;

/// The environment variable through which mimalloc reads that option; when
/// set, it wins.
const PURGE_DELAY_VARIABLE: &str = "MIMALLOC_PURGE_DELAY";

unsafe extern "C" {
    /// mimalloc's option setter (linked in by the `mimalloc` crate).
    fn mi_option_set(option: c_int, value: c_long);
}

fn main() -> std::process::ExitCode {
    if std::env::var_os(PURGE_DELAY_VARIABLE).is_none() {
        // SAFETY: a plain store into mimalloc's option table, valid for any
        // value and at any time; the option is read when memory is freed.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, ALLOCATOR_PURGE_DELAY_MS) };
    }
    precedent::main()
}
