//! The `codemem` binary: everything lives in the library; see its `cli` module.

/// mimalloc rather than the system allocator: extraction, tokenizing and
/// indexing allocate many small, short-lived values, which it serves about a
/// quarter faster (`codemem bench ingest`). Built without transparent huge
/// pages (feature `no_thp`), which raised peak memory by about a fifth.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    codemem::main()
}
