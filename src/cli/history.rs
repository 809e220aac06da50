//! `precedent import`: a git repository's history or agent transcripts into
//! a data directory, or through a running server, with progress on stderr.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;

use super::ImportArgs;
use crate::import::{self, Sink};
use crate::local;
use precedent_service::{self as service, Service, ServiceOptions};

/// How long an import through the local server waits, at most, for the
/// index to commit what it added.
const INDEX_COMMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Progress of an import: a bar on a terminal, else a line every few
/// seconds.
struct ImportProgress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    unit: String,
    last_line: std::time::Instant,
}

impl import::Progress for ImportProgress {
    fn start(&mut self, total: usize, unit: &str) {
        use std::io::IsTerminal;
        self.total = total;
        self.unit = unit.to_string();
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(&format!(
                "{{bar:30}} {{pos}}/{{len}} {unit}  {{per_sec}}  eta {{eta}}  {{msg}}"
            )) {
                bar.set_style(style);
            }
            self.bar = Some(bar);
        } else {
            eprintln!("import: {total} {unit} to consider");
        }
    }

    fn update(&mut self, done: usize, status: &str) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(done as u64);
                bar.set_message(status.to_string());
            }
            None if self.last_line.elapsed() >= std::time::Duration::from_secs(5) => {
                eprintln!(
                    "import: {done}/{} {} considered, {status}",
                    self.total, self.unit
                );
                self.last_line = std::time::Instant::now();
            }
            None => {}
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// What the paths name.
enum Source {
    Repository(std::path::PathBuf),
    Transcripts,
}

/// A single git repository, or transcripts; refuses a mix and paths that
/// are neither (unless watching, when transcripts may appear later).
fn classify(args: &ImportArgs) -> anyhow::Result<Source> {
    let repositories: Vec<&std::path::PathBuf> = args
        .paths
        .iter()
        .filter(|path| import::check_repository(path).is_ok())
        .collect();
    match (repositories.as_slice(), args.paths.len()) {
        ([repository], 1) => {
            anyhow::ensure!(
                !args.watch,
                "--watch follows transcripts; {} is a git repository",
                repository.display()
            );
            return Ok(Source::Repository((*repository).clone()));
        }
        ([], _) => {}
        _ => anyhow::bail!(
            "give either one git repository or transcript files and folders, not both"
        ),
    }
    if !args.watch
        && let Err(reasons) = import::transcript::holds_transcripts(&args.paths)
    {
        let reasons: Vec<String> = reasons
            .iter()
            .map(|skipped| format!("{}: {}", skipped.path, skipped.reason))
            .collect();
        anyhow::bail!("nothing to import; {}", reasons.join("; "));
    }
    Ok(Source::Transcripts)
}

pub(super) fn import(args: ImportArgs) -> anyhow::Result<()> {
    // Checked before the data directory is opened (or created).
    let source = classify(&args)?;
    let scope = scope_of(&args, &source)?;
    let store = args.backend.storage.location()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let stop = stop_on_ctrl_c(&runtime, args.watch);
    let (sink, opened) = open_sink(&args, store, &runtime)?;
    let mut progress = ImportProgress {
        bar: None,
        total: 0,
        unit: String::new(),
        last_line: std::time::Instant::now(),
    };
    let printed = match source {
        Source::Repository(repo_path) => {
            let import::TranscriptScope::Fixed(user_id) = scope else {
                anyhow::bail!("a repository's history goes to one memory");
            };
            eprintln!("import: into the memory {:?}", user_id.as_str());
            let options = import::ImportOptions {
                repo_path,
                user_id,
                rev: args.rev.clone(),
                since: args.since.clone(),
                max_commits: args.max_commits,
                max_diff_bytes: args.max_diff_bytes.max(1),
                parallelism: args.parallelism as usize,
                merges: !args.no_merges,
            };
            import::import_history(&options, sink, &mut progress, &stop)
                .and_then(|report| history_output(&report, args.json))
        }
        Source::Transcripts => {
            let options = import::TranscriptOptions {
                paths: args.paths.clone(),
                scope,
                parallelism: args.parallelism as usize,
                watch: args.watch,
                state_dir: Some(args.backend.storage.data_dir().to_path_buf()),
                turn_finished: false,
            };
            import::import_transcripts(&options, sink, &mut progress, &stop)
                .and_then(|report| transcript_output(&report, args.json))
        }
    };
    match opened {
        Opened::Service(service) => runtime.block_on(service.shutdown()),
        // A search of the data directory right after (`precedent search`)
        // reads what the index committed; the server commits within a
        // second.
        Opened::LocalServer(server) => {
            if !local::wait_for_index_commit(
                args.backend.storage.data_dir(),
                server.url(),
                INDEX_COMMIT_WAIT,
            ) {
                tracing::warn!(
                    "the local server has not committed the import to its index yet: `precedent search` may miss the newest sessions for a few seconds"
                );
            }
        }
        Opened::Server => {}
    }
    super::print_out(&printed?);
    Ok(())
}

/// The memory the import goes to: `--user-id`, else the repository's key;
/// for transcripts without `--user-id`, the key each one records.
fn scope_of(args: &ImportArgs, source: &Source) -> anyhow::Result<import::TranscriptScope> {
    Ok(match source {
        Source::Repository(repo_path) => import::TranscriptScope::Fixed(super::memory_user(
            args.user_id.as_deref(),
            Some(repo_path),
        )?),
        Source::Transcripts => match args.user_id.as_deref() {
            Some(_) => {
                import::TranscriptScope::Fixed(super::memory_user(args.user_id.as_deref(), None)?)
            }
            None => import::TranscriptScope::Recorded {
                fallback: crate::scope::of_working_directory()
                    .ok()
                    .and_then(|key| precedent_core::domain::UserId::new(key).ok()),
            },
        },
    })
}

/// A flag Ctrl-C sets: the import finishes the Adds in flight and stops.
fn stop_on_ctrl_c(runtime: &tokio::runtime::Runtime, watch: bool) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    runtime.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            if watch {
                eprintln!("import: stopping the watch; finishing the Adds in flight");
            } else {
                eprintln!("import: interrupted; finishing the Adds in flight");
            }
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    stop
}

/// What the import opened to write through, to close when it is done.
enum Opened {
    /// A server given with --server.
    Server,
    /// The data directory's local server (started on first use).
    LocalServer(local::Attached),
    /// The service, opened on the data directory in this process.
    Service(Arc<Service>),
}

/// Where the import's Adds go: the server given, else the data
/// directory's local server, else the data directory itself.
fn open_sink(
    args: &ImportArgs,
    store: precedent_store::StoreLocation,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<(Arc<dyn Sink>, Opened)> {
    if let Some(url) = &args.backend.server {
        let sink = import::ServerSink::new(url, args.backend.key.api_key.clone());
        return Ok((Arc::new(sink), Opened::Server));
    }
    let data_dir = args.backend.storage.data_dir();
    if super::options::attaches(args.no_server.no_server, &store) {
        let server = local::attach(data_dir)?;
        let sink = import::ServerSink::local(&server, &store);
        return Ok((Arc::new(sink), Opened::LocalServer(server)));
    }
    let mut options = ServiceOptions::new(data_dir);
    options.store = store;
    let service = match Service::open(options) {
        Ok(service) => service,
        Err(service::ServiceError::Locked(path)) => anyhow::bail!(
            "{} is held by another process; import without --no-server (and without \
             {}) to go through its local server, or through a server of your own \
             with --server http://<its address>",
            path.display(),
            local::NO_AUTOSTART_ENV,
        ),
        Err(error) => return Err(error.into()),
    };
    let sink = import::DirectSink::new(Arc::clone(&service), runtime.handle().clone())?;
    Ok((Arc::new(sink), Opened::Service(service)))
}

fn history_output(report: &import::ImportReport, json: bool) -> anyhow::Result<String> {
    if json {
        return Ok(serde_json::to_string_pretty(report)?);
    }
    Ok(format!(
        "imported {} commit(s) in {:.1} s ({:.1}/s), {} of them merge(s); {} already imported; \
         {} merge(s) skipped; {} binary file(s) and {} oversized diff(s) left out{}",
        report.imported,
        report.seconds,
        report.rate(),
        report.merges_imported,
        report.already_imported,
        report.merges_skipped,
        report.binary_files_skipped,
        report.oversized_diffs_skipped,
        if report.interrupted {
            "; interrupted: run again to resume"
        } else {
            ""
        }
    ))
}

fn transcript_output(report: &import::TranscriptReport, json: bool) -> anyhow::Result<String> {
    if json {
        return Ok(serde_json::to_string_pretty(report)?);
    }
    let mut text = format!(
        "imported {} message(s) into {} of {} session(s) from {} transcript file(s) in {:.1} s; \
         {} message(s) already imported{}",
        report.messages_imported,
        report.sessions_updated,
        report.sessions,
        report.files_read,
        report.seconds,
        report.messages_already_imported,
        if report.interrupted {
            "; interrupted: run again to resume"
        } else {
            ""
        }
    );
    for skipped in &report.files_skipped {
        text.push_str(&format!("\nskipped {}: {}", skipped.path, skipped.reason));
    }
    for lines in &report.lines_skipped {
        let first: Vec<String> = lines
            .first
            .iter()
            .map(|line| format!("line {} ({})", line.line, line.reason))
            .collect();
        text.push_str(&format!(
            "\n{} line(s) of {} skipped: {}{}",
            lines.num_lines,
            lines.path,
            first.join(", "),
            if lines.num_lines > first.len() {
                ", ..."
            } else {
                ""
            }
        ));
    }
    if report.lines_with_invalid_utf8 > 0 {
        text.push_str(&format!(
            "\n{} line(s) with invalid UTF-8 (replaced by U+FFFD)",
            report.lines_with_invalid_utf8
        ));
    }
    if report.messages_cut > 0 {
        text.push_str(&format!(
            "\n{} message(s) cut to 4 MiB",
            report.messages_cut
        ));
    }
    if report.responses_held_back > 0 {
        text.push_str(&format!(
            "\n{} response(s) held back: still being written (stored once the next message \
             starts or the file is quiet for {} min)",
            report.responses_held_back,
            import::transcript::SETTLE_TIME.as_secs() / 60
        ));
    }
    for file in &report.files_not_fully_read {
        text.push_str(&format!("\nnot fully read {}: {}", file.path, file.reason));
    }
    for session in &report.sessions_restarted {
        text.push_str(&format!(
            "\nimported again as {} ({}): {}",
            session.session_id, session.path, session.reason
        ));
    }
    if let Some(reason) = &report.state_not_saved {
        text.push_str(&format!("\n{reason}"));
    }
    Ok(text)
}
