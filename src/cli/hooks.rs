//! `precedent hook <Event>` (run by Claude Code and Codex at each event)
//! and `precedent hooks install|uninstall|status` (their settings).
//!
//! A hook never blocks the agent: whatever happens it exits 0, with the
//! agent's JSON on stdout or nothing, and says why in the hooks' log in
//! the data directory (on stderr too with `PRECEDENT_LOG=debug`). Context
//! hooks (SessionStart, UserPromptSubmit) answer within `--timeout-ms` or
//! not at all; import hooks (Stop, SessionEnd) hand the transcript to a
//! detached `precedent hook <Event> --wait` and return at once.
//!
//! `install` holds `precedent hooks install|uninstall|status`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

mod install;

use super::options::{BackendArgs, DataDirArgs, InstalledDataDirArgs, UserIdArgs};
use super::print_out;
use crate::hooks::{self, Event, HookLog, HookPayload};
use crate::import::{self, Sink};
use crate::mcp::{Backend, MemoryServer};
use install::status;
pub(super) use install::{install, resolve, uninstall};
use precedent_core::domain::UserId;

/// Bytes of hook input read at most (a payload is a few hundred bytes;
/// a prompt with a pasted log, more).
const MAX_PAYLOAD_BYTES: u64 = 16 * 1024 * 1024;
/// The lock that runs one transcript import of the hooks at a time.
const IMPORT_LOCK: &str = "hooks-import.lock";

/// Options of `precedent hook`.
#[derive(Debug, Args)]
pub(super) struct HookArgs {
    /// The agent's event: SessionStart and UserPromptSubmit answer with
    /// past experience, Stop and SessionEnd import the session's
    /// transcript; any other event is answered with nothing.
    event: String,

    #[command(flatten)]
    user_id: UserIdArgs,

    #[command(flatten)]
    backend: BackendArgs,

    /// Characters of context given to the agent at most.
    #[arg(long, env = "PRECEDENT_HOOK_BUDGET", default_value_t = hooks::DEFAULT_BUDGET_CHARS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(200..=100_000))]
    budget_chars: usize,

    /// Past sessions' items searched for at most.
    #[arg(long, default_value_t = crate::mcp::DEFAULT_TOP_K, value_parser = clap::value_parser!(u64).range(1..=crate::mcp::MAX_TOP_K))]
    top_k: u64,

    /// Milliseconds a context hook may take (reading its input, reaching
    /// the memory, searching); past them it answers nothing.
    #[arg(long, env = "PRECEDENT_HOOK_TIMEOUT_MS", default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    timeout_ms: u64,

    /// Seconds an import hook's transcript import may take; past them it
    /// stops, and the next import resumes where it stopped.
    #[arg(long, env = "PRECEDENT_HOOK_IMPORT_TIMEOUT_SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    import_timeout_secs: u64,

    /// Import hooks: import in this process and return when done, instead
    /// of in a detached process.
    #[arg(long)]
    wait: bool,
}

/// `precedent hooks`.
#[derive(Debug, Subcommand)]
pub(super) enum HooksCommand {
    /// Wire precedent's hooks into an agent's settings: Claude Code's
    /// settings.json (SessionStart, UserPromptSubmit, Stop, SessionEnd) or
    /// Codex's hooks.json (SessionStart, UserPromptSubmit, Stop). Only
    /// precedent's entries are added; the rest of the file, comments
    /// included, is left as it is.
    Install(HooksArgs),
    /// Remove exactly what `install` wrote (a file it created is removed;
    /// one untouched since is restored byte for byte).
    Uninstall(HooksArgs),
    /// Show which settings files hold precedent's hooks, for which events,
    /// and whether their command still exists.
    Status(StatusArgs),
}

/// The agents whose hooks precedent knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Agent {
    /// Claude Code.
    ClaudeCode,
    /// OpenAI Codex CLI.
    Codex,
}

/// Whose settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Scope {
    /// The user's (in the home directory): every repository.
    User,
    /// The repository's (in its root): this repository, for whoever
    /// checks it out.
    Project,
}

/// Options of `precedent hooks install` and `uninstall`.
#[derive(Debug, Args)]
pub(super) struct HooksArgs {
    /// The agent.
    #[arg(long, value_enum)]
    agent: Agent,

    /// The user's settings or the repository's (the repository enclosing
    /// the working directory).
    #[arg(long, value_enum, default_value_t = Scope::User)]
    scope: Scope,

    // What install wrote is remembered in the data directory too.
    #[command(flatten)]
    data_dir: InstalledDataDirArgs,

    /// The running server the hooks go through (e.g.
    /// http://127.0.0.1:8080), named in their command; by default they
    /// go through the data directory's local server (started on first
    /// use), as `precedent mcp` does.
    #[arg(long)]
    server: Option<String>,
}

impl HooksArgs {
    /// The options of a user-scope install or uninstall (`setup`'s).
    pub(super) fn user(
        agent: Agent,
        data_dir: Option<PathBuf>,
        server: Option<String>,
    ) -> HooksArgs {
        HooksArgs {
            agent,
            scope: Scope::User,
            data_dir: InstalledDataDirArgs { data_dir },
            server,
        }
    }
}

/// Options of `precedent hooks status`.
#[derive(Debug, Args)]
pub(super) struct StatusArgs {
    #[command(flatten)]
    data_dir: DataDirArgs,
}

// ---- precedent hook ---------------------------------------------------

/// Runs a hook. Never an error: what went wrong is logged, and the agent
/// gets nothing.
pub(super) fn hook(args: HookArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let log = HookLog::new(args.backend.storage.data_dir());
    {
        // A panic is caught below and the agent gets nothing; its message
        // goes to the log, not to the agent's screen.
        let panic_log = HookLog::new(args.backend.storage.data_dir());
        let event = args.event.clone();
        std::panic::set_hook(Box::new(move |info| {
            panic_log.write(&event, &format!("panicked: {info}"));
        }));
    }
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_hook(&args)));
    let elapsed_ms = started.elapsed().as_millis();
    let note = match ran {
        Ok(Ok(Ran::Answered(answer))) => format!("{} ({elapsed_ms} ms)", print_answer(&answer)),
        Ok(Ok(Ran::Quiet(why))) => format!("{why} ({elapsed_ms} ms)"),
        Ok(Err(error)) => format!("gave nothing: {error:#} ({elapsed_ms} ms)"),
        Err(_) => format!("gave nothing: the hook panicked ({elapsed_ms} ms)"),
    };
    tracing::debug!(event = %args.event, "{note}");
    log.write(&args.event, &note);
    Ok(())
}

/// Prints the agent's answer; what was answered, for the log.
fn print_answer(answer: &Value) -> String {
    let num_chars = answer
        .pointer("/hookSpecificOutput/additionalContext")
        .and_then(Value::as_str)
        .map_or(0, |context| context.chars().count());
    print_out(&answer.to_string());
    format!("answered {num_chars} characters of context")
}

/// What a hook did.
enum Ran {
    /// The agent's answer, to print.
    Answered(Value),
    /// Nothing to print, and why.
    Quiet(String),
}

fn run_hook(args: &HookArgs) -> anyhow::Result<Ran> {
    let Some(event) = Event::parse(&args.event) else {
        return Ok(Ran::Quiet(format!("no answer for event {:?}", args.event)));
    };
    if event.gives_context() {
        context_hook(args, event)
    } else if args.wait {
        import_hook(args, event)
    } else {
        detach_import(args)
    }
}

/// Reads the hook input from stdin.
fn read_payload_bytes() -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX_PAYLOAD_BYTES)
        .read_to_end(&mut bytes)
        .context("cannot read the hook input")?;
    Ok(bytes)
}

/// The user scope: `--user-id`, else the repository of the agent's
/// working directory.
fn user_scope(args: &HookArgs, payload: &HookPayload) -> anyhow::Result<UserId> {
    if args.user_id.is_none() && payload.cwd.is_none() {
        anyhow::bail!("the hook input names no cwd and no --user-id is given");
    }
    // The same key as mcp, import, search and inspect derive.
    super::memory_user(args.user_id.as_deref(), payload.cwd.as_deref())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .thread_name("precedent-hook")
        .build()
        .context("cannot start the async runtime")
}

/// SessionStart and UserPromptSubmit: past experience for the prompt, or
/// for the work in progress at a session's start, within the deadline.
fn context_hook(args: &HookArgs, event: Event) -> anyhow::Result<Ran> {
    let deadline = Duration::from_millis(args.timeout_ms);
    let runtime = runtime()?;
    let local: Arc<std::sync::Mutex<Option<Arc<precedent_service::Service>>>> = Arc::default();
    let answered = runtime.block_on(async {
        tokio::time::timeout(deadline, search_context(args, event, Arc::clone(&local))).await
    });
    let result = match answered {
        // Printed at once: the agent reads the answer before the data
        // directory is closed below.
        Ok(Ok(Ran::Answered(answer))) => Ok(Ran::Quiet(print_answer(&answer))),
        Ok(result) => result,
        Err(_) => Ok(Ran::Quiet(format!(
            "gave nothing: the memory did not answer within {} ms",
            args.timeout_ms
        ))),
    };
    let service = local.lock().ok().and_then(|mut slot| slot.take());
    if let Some(service) = service {
        // The data directory is left as a server leaves it, within a
        // bound of its own.
        let _ = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(2), service.shutdown()).await
        });
    }
    // Work still running past the deadline (a memory that does not
    // answer) is abandoned with the process.
    runtime.shutdown_background();
    result
}

async fn search_context(
    args: &HookArgs,
    event: Event,
    local: Arc<std::sync::Mutex<Option<Arc<precedent_service::Service>>>>,
) -> anyhow::Result<Ran> {
    let bytes = tokio::task::spawn_blocking(read_payload_bytes).await??;
    let payload = HookPayload::parse(&bytes).map_err(anyhow::Error::msg)?;
    let user_id = user_scope(args, &payload)?;
    let query = match event {
        Event::UserPromptSubmit => payload.prompt.as_deref().and_then(hooks::prompt_query),
        _ => match payload.cwd.clone() {
            Some(directory) => {
                tokio::task::spawn_blocking(move || hooks::session_start_query(&directory)).await?
            }
            None => None,
        },
    };
    let Some(query) = query else {
        return Ok(Ran::Quiet("nothing to search for".to_string()));
    };
    let backend = super::serve::open_backend("hook", &args.backend, false).await?;
    if let Backend::Local(service) = &backend
        && let Ok(mut slot) = local.lock()
    {
        *slot = Some(Arc::clone(service));
    }
    let mut server = MemoryServer::new(backend, user_id);
    // Experience is checked against the agent's checkout: stale marked.
    if let Some(root) = payload.cwd.as_deref().and_then(crate::mcp::checkout_root) {
        server = server.with_checkout(root);
    }
    let mut arguments = serde_json::Map::new();
    arguments.insert("query".to_string(), Value::String(query));
    arguments.insert("top_k".to_string(), json!(args.top_k));
    arguments.insert("max_chars".to_string(), json!(args.budget_chars));
    let answer = server
        .call("search_memory", &arguments)
        .await
        .map_err(|failure| anyhow::anyhow!("search failed: {failure:?}"))?;
    let items = answer
        .get("data")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // What this agent session was handed already (at its start, at an
    // earlier prompt) is not handed again, unless its context was
    // cleared or compacted since.
    let given = payload.session_id.as_deref().map(|session_id| {
        let fresh = event == Event::SessionStart
            && matches!(payload.source.as_deref(), Some("clear" | "compact"));
        hooks::GivenItems::load(args.backend.storage.data_dir(), session_id, fresh)
    });
    let found = items.len();
    let items = match &given {
        Some(given) => given.new_ones(&items),
        None => items,
    };
    match hooks::context_answer(event, &items, args.budget_chars) {
        Some(answer) => {
            if let Some(given) = given {
                given.remember(&items);
            }
            Ok(Ran::Answered(answer))
        }
        None if found > 0 => Ok(Ran::Quiet(format!(
            "the {found} item(s) found were given earlier in this session"
        ))),
        None => Ok(Ran::Quiet(
            "nothing relevant passed the noise gate".to_string(),
        )),
    }
}

/// A whole-file transcript (not JSON lines, which are read line by line
/// and resumed) is read into memory at once: a hook reads one of at most
/// this many bytes. `precedent import` reads larger ones.
const HOOK_MAX_DOCUMENT_BYTES: u64 = 64 * 1024 * 1024;

/// Why a hook leaves `transcript` out: a file that is not JSON lines and
/// is over [`HOOK_MAX_DOCUMENT_BYTES`].
fn too_large_for_a_hook(transcript: &Path) -> Option<String> {
    use std::io::BufRead;
    let length = std::fs::metadata(transcript).ok()?.len();
    if length <= HOOK_MAX_DOCUMENT_BYTES {
        return None;
    }
    // JSON lines: the first line (within a bound) is a JSON object.
    let file = std::fs::File::open(transcript).ok()?;
    let mut first = Vec::new();
    let _ = std::io::BufReader::new(file)
        .take(1024 * 1024)
        .read_until(b'\n', &mut first);
    let is_json_lines = first.ends_with(b"\n")
        && serde_json::from_slice::<serde_json::Value>(&first).is_ok_and(|value| value.is_object());
    (!is_json_lines).then(|| {
        format!(
            "left out {}: not JSON lines and {} MiB, over a hook's {} MiB; import it with `precedent import`",
            transcript.display(),
            length / (1024 * 1024),
            HOOK_MAX_DOCUMENT_BYTES / (1024 * 1024)
        )
    })
}

/// Stop and SessionEnd without --wait: the input goes to a detached
/// `precedent hook <Event> --wait`, and the agent goes on at once.
fn detach_import(args: &HookArgs) -> anyhow::Result<Ran> {
    let deadline = Duration::from_millis(args.timeout_ms);
    // The input is read within the deadline: an agent that keeps stdin
    // open is not waited for.
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(read_payload_bytes());
    });
    let bytes = receiver.recv_timeout(deadline).map_err(|_| {
        anyhow::anyhow!(
            "the hook input did not arrive within {} ms",
            args.timeout_ms
        )
    })??;
    // Checked here, so that a payload naming no transcript starts nothing.
    let payload = HookPayload::parse(&bytes).map_err(anyhow::Error::msg)?;
    if payload.transcript_path.is_none() {
        return Ok(Ran::Quiet(
            "the hook input names no transcript_path".to_string(),
        ));
    }
    let program = std::env::current_exe().context("cannot find precedent's own path")?;
    let mut command = std::process::Command::new(program);
    command
        .args(std::env::args_os().skip(1))
        .arg("--wait")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    #[cfg(unix)]
    {
        // Its own process group: an agent ending the hook's group on its
        // timeout leaves the import running.
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .context("cannot start the background import")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(&bytes)
            .context("cannot hand the hook input to the background import")?;
    }
    Ok(Ran::Quiet(format!(
        "import handed to process {}",
        child.id()
    )))
}

/// Stop and SessionEnd with --wait: the session's transcript imported,
/// from where the last import stopped.
/// How long Stop's import waits for the transcript to hold the reply the
/// hook input reports as the turn's last.
const TRANSCRIPT_CATCH_UP: Duration = Duration::from_secs(5);

fn import_hook(args: &HookArgs, event: Event) -> anyhow::Result<Ran> {
    let started = Instant::now();
    let budget = Duration::from_secs(args.import_timeout_secs);
    let bytes = read_payload_bytes()?;
    let payload = HookPayload::parse(&bytes).map_err(anyhow::Error::msg)?;
    let Some(transcript) = payload.transcript_path.clone() else {
        return Ok(Ran::Quiet(
            "the hook input names no transcript_path".to_string(),
        ));
    };
    // Stop may start before the agent has written the turn's last reply
    // (or, for a first reply, the file itself): wait for it, briefly.
    let caught_up = match (&payload.last_assistant_message, event) {
        (Some(reply), Event::Stop) => {
            let patience = TRANSCRIPT_CATCH_UP.min(budget);
            loop {
                if hooks::transcript_holds_reply(&transcript, reply) {
                    break true;
                }
                if started.elapsed() >= patience {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        _ => true,
    };
    anyhow::ensure!(
        transcript.is_file(),
        "the transcript {} is not a file",
        transcript.display()
    );
    if let Some(why) = too_large_for_a_hook(&transcript) {
        return Ok(Ran::Quiet(why));
    }
    let user_id = user_scope(args, &payload)?;
    let data_dir = args.backend.storage.data_dir();
    precedent_core::files::private_dir(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let _lock = ImportLock::acquire(&data_dir.join(IMPORT_LOCK), budget)?;
    let runtime = runtime()?;
    let backend = runtime.block_on(super::serve::open_backend("hook", &args.backend, false))?;
    let (sink, service): (Arc<dyn Sink>, _) = match backend {
        Backend::Local(service) => (
            Arc::new(import::DirectSink::new(
                Arc::clone(&service),
                runtime.handle().clone(),
            )?),
            Some(service),
        ),
        Backend::Remote(server) => (
            Arc::new(import::ServerSink::new(
                &server.base_url(),
                server.api_key(),
            )),
            None,
        ),
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        let remaining = budget.saturating_sub(started.elapsed());
        std::thread::spawn(move || {
            std::thread::sleep(remaining);
            stop.store(true, Ordering::Relaxed);
        });
    }
    let options = import::TranscriptOptions {
        paths: vec![transcript],
        scope: import::TranscriptScope::Fixed(user_id),
        parallelism: 2,
        watch: false,
        state_dir: Some(data_dir.to_path_buf()),
        turn_finished: event == Event::Stop || event == Event::SessionEnd,
    };
    let imported = import::import_transcripts(&options, sink, &mut Quiet, &stop);
    if let Some(service) = service {
        runtime.block_on(service.shutdown());
    }
    let report = imported?;
    let mut note = format!(
        "imported {} message(s) in {} Add(s), {} already imported",
        report.messages_imported, report.adds, report.messages_already_imported
    );
    if report.interrupted {
        note.push_str(&format!(
            "; stopped after {} s, the next import resumes",
            args.import_timeout_secs
        ));
    }
    if !caught_up {
        note.push_str(&format!(
            "; the transcript did not hold the turn's last reply within {} s, the next import stores it",
            TRANSCRIPT_CATCH_UP.as_secs()
        ));
    }
    for skipped in &report.files_skipped {
        note.push_str(&format!("; skipped {}: {}", skipped.path, skipped.reason));
    }
    Ok(Ran::Quiet(note))
}

/// No progress display: a hook's output is the agent's.
struct Quiet;

impl import::Progress for Quiet {
    fn start(&mut self, _total: usize, _unit: &str) {}
    fn update(&mut self, _done: usize, _status: &str) {}
    fn finish(&mut self) {}
}

/// An exclusive lock on a file, held until dropped: the hooks' imports
/// run one at a time, so two sessions stopping at once do not race for
/// the data directory or the import state.
struct ImportLock {
    _file: std::fs::File,
}

impl ImportLock {
    fn acquire(path: &Path, patience: Duration) -> anyhow::Result<ImportLock> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(ImportLock { _file: file }),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < patience => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    anyhow::bail!("another import held {} too long", path.display())
                }
                Err(std::fs::TryLockError::Error(error)) => {
                    return Err(error).with_context(|| format!("cannot lock {}", path.display()));
                }
            }
        }
    }
}

// ---- precedent hooks ---------------------------------------------------

/// Runs `precedent hooks ...`.
pub(super) fn hooks_command(command: HooksCommand) -> anyhow::Result<()> {
    match command {
        HooksCommand::Install(args) => install(&args),
        HooksCommand::Uninstall(args) => uninstall(&args),
        HooksCommand::Status(args) => status(&args),
    }
}
