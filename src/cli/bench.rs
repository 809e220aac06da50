//! `precedent bench`: its subcommands, run and printed (the reports and
//! their text are `crate::bench`'s).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;

use super::print_out;

#[derive(Debug, Subcommand)]
pub(super) enum BenchCommand {
    /// Extraction of session records alone (no storage, no index) over a
    /// bench directory's sessions: MB/s over whole sessions, and per Add
    /// chunk the re-derivation the service does (p50, p99, max).
    Ingest {
        /// Bench directory holding sessions.jsonl.gz (or sessions.jsonl).
        #[arg(long, default_value = "../shared/eval/data/dev")]
        bench: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Instead of measuring, write each session's derived record,
        /// diagnostics and ranking profile here, one JSON line per session in
        /// bench order, with parse budgets that ignore the wall clock: two
        /// builds' files compare byte for byte (`scripts/compare-records`).
        #[arg(long)]
        records_out: Option<PathBuf>,
    },
    /// Extraction resumed Add by Add against extraction of the whole: every
    /// session of a bench directory cut at pseudo-random chunk boundaries,
    /// the record after each chunk compared byte for byte with the whole
    /// prefix's. Fails on any mismatch.
    Incremental {
        /// Bench directory holding sessions.jsonl.gz (or sessions.jsonl).
        #[arg(long, default_value = "../shared/eval/data/dev")]
        bench: PathBuf,
        /// Cuttings per session.
        #[arg(long, default_value_t = 2)]
        cuttings: usize,
        /// Seed of the cut points.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// precedent at scale beside an SQLite FTS5 memory under the same
    /// workload: replays a bench directory's sessions (repeated under fresh
    /// ids up to --sessions) into each over HTTP on loopback, from 1 then 8
    /// clients, then searches a large scope and small per-task scopes;
    /// prints latencies, throughput, peak RSS, disk use and start-up time,
    /// side by side with their ratios.
    Scale {
        /// Bench directory holding sessions.jsonl.gz (or sessions.jsonl).
        #[arg(long, default_value = "../shared/eval/data/dev")]
        bench: PathBuf,
        /// Sessions in the corpus (default: the bench's own).
        #[arg(long)]
        sessions: Option<usize>,
        /// Sessions in the large scope (at most half the corpus).
        #[arg(long, default_value_t = 5000)]
        scope_sessions: usize,
        /// Searches per scope kind.
        #[arg(long, default_value_t = 300)]
        searches: usize,
        /// Keep the systems' data here (default: a temporary directory,
        /// removed at the end).
        #[arg(long)]
        work_dir: Option<PathBuf>,
        /// Measure precedent alone.
        #[arg(long)]
        no_reference: bool,
        /// precedent's store: a PostgreSQL URL of an empty database (default:
        /// SQLite in the work directory). Read from PRECEDENT_STORE too.
        #[arg(long, env = "PRECEDENT_STORE", hide_env_values = true)]
        store: Option<String>,
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write the JSON object to this file.
        #[arg(long)]
        json_out: Option<PathBuf>,
    },
    /// Deleting a huge user: one user given --sessions small sessions over
    /// HTTP, then deleted while another client adds to its own memory;
    /// prints that client's Add latencies before and during the deletion,
    /// the deletion's time and the database file's size before and after.
    Delete {
        /// Sessions of the user deleted.
        #[arg(long, default_value_t = 200_000)]
        sessions: usize,
        /// Clients sending its Adds.
        #[arg(long, default_value_t = 16)]
        add_clients: usize,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Listing a huge memory: one user given --sessions small sessions over
    /// HTTP, then --parallel clients reading GET /v1/sessions at once (first
    /// pages, then whole walks by cursor) while the server's resident memory
    /// is sampled; prints answer sizes, page latencies and memory growth.
    Listing {
        /// Sessions of the one user.
        #[arg(long, default_value_t = 200_000)]
        sessions: usize,
        /// Clients reading at once.
        #[arg(long, default_value_t = 16)]
        parallel: usize,
        /// Clients sending the Adds.
        #[arg(long, default_value_t = 16)]
        add_clients: usize,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The UserPromptSubmit hook as an agent waits for it: a server is
    /// started and given --sessions sessions of one repository, then
    /// `precedent hook UserPromptSubmit --server` runs --runs times, each
    /// a new process with a prompt matching one session; prints p50, p95
    /// and max of the whole run (process start, search, answer).
    Hook {
        /// Hook runs measured.
        #[arg(long, default_value_t = 50)]
        runs: usize,
        /// Sessions stored first.
        #[arg(long, default_value_t = 500)]
        sessions: usize,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The FTS5 reference memory `bench scale` measures against.
    #[command(hide = true)]
    ReferenceServer {
        /// Its data directory.
        #[arg(long)]
        data_dir: PathBuf,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
    },
    /// Load on a running server: concurrent clients each sending an Add
    /// then a Search, and again, for a while; prints counts, errors and
    /// p50/p99 per endpoint.
    Load {
        /// The server (e.g. http://127.0.0.1:8080); given again, nodes of
        /// one store, each client sending to one of them in turn (so each
        /// user to one node).
        #[arg(long, required = true)]
        url: Vec<String>,
        /// Concurrent clients.
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// The server's API key (sent as a Bearer token).
        #[arg(long, env = "PRECEDENT_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a benchmark and prints its report.
pub(super) fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Ingest {
            bench,
            json,
            records_out,
        } => ingest(&bench, json, records_out.as_deref()),
        BenchCommand::Incremental {
            bench,
            cuttings,
            seed,
        } => {
            let report = crate::bench::check_incremental(&bench, cuttings, seed)?;
            print_out(&serde_json::to_string_pretty(&report)?);
            if report.num_mismatches > 0 {
                anyhow::bail!(
                    "{} of {} resumed chunks differ from extraction of the whole",
                    report.num_mismatches,
                    report.num_chunks
                );
            }
            Ok(())
        }
        BenchCommand::Delete {
            sessions,
            add_clients,
            json,
        } => {
            let options = crate::bench::deletion::DeleteOptions {
                sessions: sessions.max(1),
                add_clients: add_clients.max(1),
            };
            let report =
                crate::bench::deletion::run(&options, &|line| eprintln!("bench delete: {line}"))?;
            if json {
                print_out(&serde_json::to_string(&report)?);
            } else {
                print_out(&crate::bench::deletion::render(&report));
            }
            Ok(())
        }
        BenchCommand::Listing {
            sessions,
            parallel,
            add_clients,
            json,
        } => {
            let options = crate::bench::listing::ListingOptions {
                sessions: sessions.max(1),
                parallel: parallel.max(1),
                add_clients: add_clients.max(1),
            };
            let report =
                crate::bench::listing::run(&options, &|line| eprintln!("bench listing: {line}"))?;
            if json {
                print_out(&serde_json::to_string(&report)?);
            } else {
                print_out(&crate::bench::listing::render(&report));
            }
            if !report.walks_complete {
                anyhow::bail!("a walk by cursor did not give every session exactly once");
            }
            Ok(())
        }
        BenchCommand::Hook {
            runs,
            sessions,
            json,
        } => {
            if cfg!(debug_assertions) {
                eprintln!("warning: a debug build; measure with cargo run --release");
            }
            let options = crate::bench::hook::HookBenchOptions {
                runs: runs.max(1),
                sessions: sessions.max(1),
            };
            let report =
                crate::bench::hook::run(&options, &|line| eprintln!("bench hook: {line}"))?;
            if json {
                print_out(&serde_json::to_string(&report)?);
            } else {
                print_out(&crate::bench::hook::render(&report));
            }
            Ok(())
        }
        BenchCommand::ReferenceServer { data_dir, listen } => {
            crate::bench::reference::serve(&data_dir, &listen)
        }
        BenchCommand::Scale {
            bench,
            sessions,
            scope_sessions,
            searches,
            work_dir,
            no_reference,
            store,
            json,
            json_out,
        } => {
            let options = crate::bench::scale::ScaleOptions {
                bench_dir: bench,
                sessions,
                scope_sessions: scope_sessions.max(1),
                searches: searches.max(1),
                work_dir,
                skip_reference: no_reference,
                store,
            };
            crate::bench::scale::run(&options, &|line| eprintln!("bench scale: {line}")).and_then(
                |report| {
                    let flat = report.flat_json().to_string();
                    if let Some(path) = &json_out {
                        std::fs::write(path, &flat)
                            .with_context(|| format!("cannot write {}", path.display()))?;
                    }
                    if json {
                        print_out(&flat);
                    } else {
                        print_out(&crate::bench::scale::render(&report));
                    }
                    Ok(())
                },
            )
        }
        BenchCommand::Load {
            url,
            clients,
            seconds,
            api_key,
            json,
        } => {
            let report = crate::bench::load_across(
                &url,
                clients.max(1),
                std::time::Duration::from_secs(seconds),
                api_key.as_deref(),
            );
            if json {
                serde_json::to_string(&report)
                    .map(|text| print_out(&text))
                    .map_err(Into::into)
            } else {
                print_out(&crate::bench::render_load(&report));
                Ok(())
            }
        }
    }
}

/// `bench ingest`: measures and prints, or with `records_out` writes every
/// session's record instead (extraction without the parse clock, so not a
/// measurement).
fn ingest(bench_dir: &Path, json: bool, records_out: Option<&Path>) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; measure with cargo run --release");
    }
    if let Some(path) = records_out {
        let count = crate::bench::write_records(bench_dir, path)?;
        eprintln!(
            "bench ingest: {count} session records written to {}",
            path.display()
        );
        return Ok(());
    }
    let report = crate::bench::ingest(bench_dir)?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!("{}", crate::bench::render_ingest(&report));
    Ok(())
}
