//! `codemem import`: a git repository's history into a data directory, or
//! through a running server, with progress on stderr.

use anyhow::Context;

use super::ImportArgs;
use crate::import;
use crate::service::{self, Service, ServiceOptions};

/// Progress of an import: a bar on a terminal, else a line every few
/// seconds.
struct ImportProgress {
    bar: Option<indicatif::ProgressBar>,
    total: usize,
    last_line: std::time::Instant,
}

impl import::Progress for ImportProgress {
    fn start(&mut self, total: usize) {
        use std::io::IsTerminal;
        self.total = total;
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} commits  {per_sec}  eta {eta}  {msg}",
            ) {
                bar.set_style(style);
            }
            self.bar = Some(bar);
        } else {
            eprintln!("import: {total} first-parent commit(s) to consider");
        }
    }

    fn update(&mut self, done: usize, report: &import::ImportReport) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(done as u64);
                bar.set_message(format!(
                    "{} imported, {} already there",
                    report.imported, report.already_imported
                ));
            }
            None if self.last_line.elapsed() >= std::time::Duration::from_secs(5) => {
                eprintln!(
                    "import: {done}/{} commits considered, {} imported ({:.1}/s), {} already there",
                    self.total,
                    report.imported,
                    report.rate(),
                    report.already_imported
                );
                self.last_line = std::time::Instant::now();
            }
            None => {}
        }
    }

    fn finish(&mut self, _: &import::ImportReport) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

pub(super) fn import_history(args: ImportArgs) -> anyhow::Result<()> {
    let options = import::ImportOptions {
        repo_path: args.repo_path.clone(),
        user_id: args.user_id.clone(),
        rev: args.rev.clone(),
        since: args.since.clone(),
        max_commits: args.max_commits,
        max_diff_bytes: args.max_diff_bytes.max(1),
        parallelism: args.parallelism as usize,
    };
    // Checked before the data directory is opened (or created).
    import::check_repository(&args.repo_path)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let stop = std::sync::Arc::clone(&stop);
        runtime.spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("import: interrupted; finishing the commits in flight");
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    let mut progress = ImportProgress {
        bar: None,
        total: 0,
        last_line: std::time::Instant::now(),
    };
    let (report, service) = match &args.server {
        Some(url) => {
            let sink = std::sync::Arc::new(import::ServerSink::new(url, args.api_key.clone()));
            (import::import(&options, sink, &mut progress, &stop)?, None)
        }
        None => {
            let service = match Service::open(ServiceOptions::new(&args.data_dir)) {
                Ok(service) => service,
                Err(service::ServiceError::Locked(path)) => anyhow::bail!(
                    "{} is held by a running server; import through it instead: \
                     codemem import {} --user-id {} --server http://<its address> \
                     (add --api-key if it requires one)",
                    path.display(),
                    args.repo_path.display(),
                    args.user_id
                ),
                Err(error) => return Err(error.into()),
            };
            let sink = std::sync::Arc::new(import::DirectSink::new(
                std::sync::Arc::clone(&service),
                runtime.handle().clone(),
            )?);
            let report = import::import(&options, sink, &mut progress, &stop);
            (report?, Some(service))
        }
    };
    if let Some(service) = service {
        runtime.block_on(service.shutdown());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "imported {} commit(s) in {:.1} s ({:.1}/s); {} already imported; {} merge(s) skipped; \
             {} binary file(s) and {} oversized diff(s) left out{}",
            report.imported,
            report.seconds,
            report.rate(),
            report.already_imported,
            report.merges_skipped,
            report.binary_files_skipped,
            report.oversized_diffs_skipped,
            if report.interrupted {
                "; interrupted: run again to resume"
            } else {
                ""
            }
        );
    }
    Ok(())
}
