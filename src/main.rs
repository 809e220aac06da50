//! The `codemem` binary: everything lives in the library; see `cli`.

fn main() -> std::process::ExitCode {
    codemem::cli::main()
}
