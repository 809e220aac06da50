//! `precedent bench`: its subcommands, run and printed (the reports and
//! their text are `crate::bench`'s).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use super::options::{ApiKeyArgs, StoreFlag};
use super::print_out;

#[derive(Debug, Subcommand)]
pub(super) enum BenchCommand {
    /// Extraction of session records alone (no storage, no index) over a
    /// bench directory's sessions: MB/s over whole sessions, and per Add
    /// chunk the re-derivation the service does (p50, p99, max).
    Ingest(IngestArgs),
    /// Extraction resumed Add by Add against extraction of the whole: every
    /// session of a bench directory cut at pseudo-random chunk boundaries,
    /// the record after each chunk compared byte for byte with the whole
    /// prefix's. Fails on any mismatch.
    Incremental(IncrementalArgs),
    /// Extraction on held-out sessions (one folder per transcript format):
    /// the record of each session's edit tool calls (messages showing a
    /// diff removed), as read and with its tool calls written as text,
    /// against the files and definitions of the patch its run submitted;
    /// prints changed-file precision and recall, changed-definition recall,
    /// resolved outcomes, task lines, each miss and the targets met.
    Heldout(HeldoutArgs),
    /// precedent at scale beside an SQLite FTS5 memory under the same
    /// workload: replays a bench directory's sessions (repeated under fresh
    /// ids up to --sessions) into each over HTTP on loopback, from 1 then 8
    /// clients, then searches a large scope and small per-task scopes;
    /// prints latencies, throughput, peak RSS, disk use and start-up time,
    /// side by side with their ratios.
    Scale(ScaleArgs),
    /// Deleting a huge user: one user given --sessions small sessions over
    /// HTTP, then deleted while another client adds to its own memory;
    /// prints that client's Add latencies before and during the deletion,
    /// the deletion's time and the database file's size before and after.
    Delete(DeleteArgs),
    /// Listing a huge memory: one user given --sessions small sessions over
    /// HTTP, then --parallel clients reading GET /v1/sessions at once (first
    /// pages, then whole walks by cursor) while the server's resident memory
    /// is sampled; prints answer sizes, page latencies and memory growth.
    Listing(ListingArgs),
    /// The UserPromptSubmit hook as an agent waits for it: a server is
    /// started and given --sessions sessions of one repository, then
    /// `precedent hook UserPromptSubmit --server` runs --runs times, each
    /// a new process with a prompt matching one session; prints p50, p95
    /// and max of the whole run (process start, search, answer).
    Hook(HookArgs),
    /// The FTS5 reference memory `bench scale` measures against.
    #[command(hide = true)]
    ReferenceServer(ReferenceServerArgs),
    /// Load on a running server: concurrent clients each sending an Add
    /// then a Search, and again, for a while; prints counts, errors and
    /// p50/p99 per endpoint.
    Load(LoadArgs),
}

/// `--bench`: the sessions a benchmark reads.
#[derive(Debug, Args)]
struct BenchDirArgs {
    /// Bench directory holding sessions.jsonl.gz (or sessions.jsonl).
    #[arg(long, default_value = "../shared/eval/data/dev")]
    bench: PathBuf,
}

/// `--json`: how a report is printed.
#[derive(Debug, Args)]
struct JsonArgs {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

impl JsonArgs {
    /// Prints `report` as one JSON object, or as `render` writes it.
    fn print<T: serde::Serialize>(
        &self,
        report: &T,
        render: impl FnOnce(&T) -> String,
    ) -> anyhow::Result<()> {
        if self.json {
            print_out(&serde_json::to_string(report)?);
        } else {
            print_out(&render(report));
        }
        Ok(())
    }
}

/// Options of `precedent bench ingest`.
#[derive(Debug, Args)]
pub(super) struct IngestArgs {
    #[command(flatten)]
    bench: BenchDirArgs,
    #[command(flatten)]
    output: JsonArgs,
    /// Instead of measuring, write each session's derived record,
    /// diagnostics and ranking profile here, one JSON line per session in
    /// bench order, with parse budgets that ignore the wall clock: two
    /// builds' files compare byte for byte (`scripts/compare-records`).
    #[arg(long)]
    records_out: Option<PathBuf>,
}

/// Options of `precedent bench incremental`.
#[derive(Debug, Args)]
pub(super) struct IncrementalArgs {
    #[command(flatten)]
    bench: BenchDirArgs,
    /// Cuttings per session.
    #[arg(long, default_value_t = 2)]
    cuttings: usize,
    /// Seed of the cut points.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Options of `precedent bench heldout`.
#[derive(Debug, Args)]
pub(super) struct HeldoutArgs {
    /// The held-out sessions: one folder per transcript format, each
    /// transcript beside its run's patch (`<file>.patch`), its outcome and
    /// task line (`<file>.meta.json`) and its gold patch where known
    /// (`<file>.gold.patch`).
    #[arg(long, default_value = "fixtures/heldout")]
    fixtures: PathBuf,
    #[command(flatten)]
    output: JsonArgs,
    /// Also write each session's record (as read) to this directory,
    /// `<file>.json`, to read a miss.
    #[arg(long, value_name = "DIR")]
    records_dir: Option<PathBuf>,
    /// Print each session's outcome on stderr as it is measured.
    #[arg(long)]
    verbose: bool,
}

/// Options of `precedent bench scale`.
#[derive(Debug, Args)]
pub(super) struct ScaleArgs {
    #[command(flatten)]
    bench: BenchDirArgs,
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
    #[command(flatten)]
    store: StoreFlag,
    #[command(flatten)]
    output: JsonArgs,
    /// Also write the JSON object to this file.
    #[arg(long)]
    json_out: Option<PathBuf>,
}

/// Options of `precedent bench delete`.
#[derive(Debug, Args)]
pub(super) struct DeleteArgs {
    /// Sessions of the user deleted.
    #[arg(long, default_value_t = 200_000)]
    sessions: usize,
    /// Clients sending its Adds.
    #[arg(long, default_value_t = 16)]
    add_clients: usize,
    #[command(flatten)]
    output: JsonArgs,
}

/// Options of `precedent bench listing`.
#[derive(Debug, Args)]
pub(super) struct ListingArgs {
    /// Sessions of the one user.
    #[arg(long, default_value_t = 200_000)]
    sessions: usize,
    /// Clients reading at once.
    #[arg(long, default_value_t = 16)]
    parallel: usize,
    /// Clients sending the Adds.
    #[arg(long, default_value_t = 16)]
    add_clients: usize,
    #[command(flatten)]
    output: JsonArgs,
}

/// Options of `precedent bench hook`.
#[derive(Debug, Args)]
pub(super) struct HookArgs {
    /// Hook runs measured.
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Sessions stored first.
    #[arg(long, default_value_t = 500)]
    sessions: usize,
    #[command(flatten)]
    output: JsonArgs,
}

/// Options of the hidden `precedent bench reference-server`.
#[derive(Debug, Args)]
pub(super) struct ReferenceServerArgs {
    /// Its data directory.
    #[arg(long)]
    data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
}

/// Options of `precedent bench load`.
#[derive(Debug, Args)]
pub(super) struct LoadArgs {
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
    #[command(flatten)]
    key: ApiKeyArgs,
    #[command(flatten)]
    output: JsonArgs,
}

/// Runs a benchmark and prints its report.
pub(super) fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Ingest(args) => ingest(&args),
        BenchCommand::Incremental(args) => incremental(&args),
        BenchCommand::Heldout(args) => heldout(&args),
        BenchCommand::Scale(args) => scale(args),
        BenchCommand::Delete(args) => delete(&args),
        BenchCommand::Listing(args) => listing(&args),
        BenchCommand::Hook(args) => hook(&args),
        BenchCommand::ReferenceServer(args) => {
            crate::bench::reference::serve(&args.data_dir, &args.listen)
        }
        BenchCommand::Load(args) => load(&args),
    }
}

/// Warns that a debug build's figures are not the product's.
fn warn_if_debug_build() {
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; measure with cargo run --release");
    }
}

/// `bench ingest`: measures and prints, or with `--records-out` writes
/// every session's record instead (extraction without the parse clock, so
/// not a measurement).
fn ingest(args: &IngestArgs) -> anyhow::Result<()> {
    warn_if_debug_build();
    let bench_dir = &args.bench.bench;
    if let Some(path) = &args.records_out {
        let count = crate::bench::write_records(bench_dir, path)?;
        eprintln!(
            "bench ingest: {count} session records written to {}",
            path.display()
        );
        return Ok(());
    }
    let report = crate::bench::ingest(bench_dir)?;
    args.output.print(&report, crate::bench::render_ingest)
}

/// `bench incremental`: prints the comparison; fails on any mismatch.
fn incremental(args: &IncrementalArgs) -> anyhow::Result<()> {
    let report = crate::bench::check_incremental(&args.bench.bench, args.cuttings, args.seed)?;
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

/// `bench heldout`: the figures per format and rendering.
fn heldout(args: &HeldoutArgs) -> anyhow::Result<()> {
    let options = crate::bench::heldout::HeldoutOptions {
        fixtures_dir: args.fixtures.clone(),
        records_dir: args.records_dir.clone(),
    };
    let verbose = args.verbose;
    let report = crate::bench::heldout::run(&options, &|line| {
        if verbose {
            eprintln!("bench heldout: {line}");
        }
    })?;
    args.output.print(&report, crate::bench::heldout::render)
}

/// `bench scale`: the table, or its flat JSON object (also to a file).
fn scale(args: ScaleArgs) -> anyhow::Result<()> {
    let options = crate::bench::scale::ScaleOptions {
        bench_dir: args.bench.bench,
        sessions: args.sessions,
        scope_sessions: args.scope_sessions.max(1),
        searches: args.searches.max(1),
        work_dir: args.work_dir,
        skip_reference: args.no_reference,
        store: args.store.store,
    };
    let report = crate::bench::scale::run(&options, &|line| eprintln!("bench scale: {line}"))?;
    let flat = report.flat_json().to_string();
    if let Some(path) = &args.json_out {
        std::fs::write(path, &flat).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.output.json {
        print_out(&flat);
    } else {
        print_out(&crate::bench::scale::render(&report));
    }
    Ok(())
}

/// `bench delete`.
fn delete(args: &DeleteArgs) -> anyhow::Result<()> {
    let options = crate::bench::deletion::DeleteOptions {
        sessions: args.sessions.max(1),
        add_clients: args.add_clients.max(1),
    };
    let report = crate::bench::deletion::run(&options, &|line| eprintln!("bench delete: {line}"))?;
    args.output.print(&report, crate::bench::deletion::render)
}

/// `bench listing`: fails when a walk by cursor missed or repeated a
/// session.
fn listing(args: &ListingArgs) -> anyhow::Result<()> {
    let options = crate::bench::listing::ListingOptions {
        sessions: args.sessions.max(1),
        parallel: args.parallel.max(1),
        add_clients: args.add_clients.max(1),
    };
    let report = crate::bench::listing::run(&options, &|line| eprintln!("bench listing: {line}"))?;
    args.output.print(&report, crate::bench::listing::render)?;
    if !report.walks_complete {
        anyhow::bail!("a walk by cursor did not give every session exactly once");
    }
    Ok(())
}

/// `bench hook`.
fn hook(args: &HookArgs) -> anyhow::Result<()> {
    warn_if_debug_build();
    let options = crate::bench::hook::HookBenchOptions {
        runs: args.runs.max(1),
        sessions: args.sessions.max(1),
    };
    let report = crate::bench::hook::run(&options, &|line| eprintln!("bench hook: {line}"))?;
    args.output.print(&report, crate::bench::hook::render)
}

/// `bench load`.
fn load(args: &LoadArgs) -> anyhow::Result<()> {
    let report = crate::bench::load_across(
        &args.url,
        args.clients.max(1),
        std::time::Duration::from_secs(args.seconds),
        args.key.api_key.as_deref(),
    );
    args.output.print(&report, crate::bench::render_load)
}
