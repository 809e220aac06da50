//! What one look at the files imports: each changed file read from where
//! its last import stopped (or again from its start when it was rewritten),
//! its new messages handed to the Add pool, and how far it was imported
//! remembered for the next look.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::batch::{Batcher, capped};
use super::discovery::{Source, discover, is_reported};
use super::reader::{self, OpenedFile};
use super::reading::{
    Collector, LEFT_OUT, Layout, LinesRead, Naming, Notes, Start, canonical_path, not_a_transcript,
    read_document, read_json_lines, recorded_directory, sniff,
};
use super::resume::{self, FileState, ResumeStates, SessionState};
use super::{
    FileStamp, Format, MAX_FILE_BYTES, RestartedSession, SETTLE_TIME, SkippedFile, SkippedLines,
    Transcript, TranscriptOptions, TranscriptReport, TranscriptScope, Watched, needs_reading,
    stamp_of,
};
use crate::import::Progress;
use crate::import::sink::{AddPool, Sink};
use precedent_core::domain::{Message, UserId};

/// How a log is imported: from where its last import stopped, or from its
/// start (the previous session if the state knew one, and why it is not
/// continued, when it is not).
enum LogPlan {
    Resume(SessionState),
    Fresh {
        previous: Option<SessionState>,
        restart_reason: Option<String>,
    },
}

/// Imports one JSON-lines log as it is read.
struct LogImport<'a, 's> {
    user_id: &'a UserId,
    sink: &'a dyn Sink,
    pool: &'a AddPool,
    path: &'a Path,
    sessions_seen: &'s mut HashMap<String, PathBuf>,
    plan: LogPlan,
    session: Option<SessionState>,
    batcher: Option<Batcher<'a>>,
    messages_cut: usize,
    refused: Option<String>,
    error: Option<anyhow::Error>,
}

impl LogImport<'_, '_> {
    /// Refuses the file for `reason` (it is reported); the import goes on
    /// with the other files.
    fn refuse(&mut self, reason: String) -> bool {
        self.refused = Some(reason);
        false
    }
}

impl Collector for LogImport<'_, '_> {
    fn begin(&mut self, _: Format, base_id: &str) -> bool {
        let (session, skip) = match &self.plan {
            LogPlan::Resume(session) => (session.clone(), session.num_messages),
            LogPlan::Fresh {
                previous,
                restart_reason,
            } => {
                let generation = match previous {
                    Some(previous) if previous.base_id == base_id => {
                        previous.generation + u32::from(restart_reason.is_some())
                    }
                    _ => 1,
                };
                let session = SessionState {
                    base_id: base_id.to_string(),
                    generation,
                    num_messages: 0,
                    messages_sha256: String::new(),
                };
                // A session id that is not a valid one refuses this file
                // (below), as a session seen twice does.
                let session_id = match session.checked_session_id() {
                    Ok(session_id) => session_id,
                    Err(invalid) => return self.refuse(invalid.to_string()),
                };
                match self.sink.stored_messages(self.user_id, &session_id) {
                    Ok(stored) => (session, stored),
                    Err(error) => {
                        self.error = Some(error);
                        return false;
                    }
                }
            }
        };
        let session_id = match session.checked_session_id() {
            Ok(session_id) => session_id,
            Err(invalid) => return self.refuse(invalid.to_string()),
        };
        if let Some(other) = self.sessions_seen.get(session_id.as_str()) {
            return self.refuse(format!(
                "the same session ({session_id}) as {}",
                other.display()
            ));
        }
        self.sessions_seen
            .insert(session_id.to_string(), self.path.to_path_buf());
        let mut batcher = Batcher::to_pool(self.user_id, session_id, skip, self.pool);
        if let LogPlan::Resume(session) = &self.plan {
            batcher.next_index = session.num_messages;
        }
        self.batcher = Some(batcher);
        self.session = Some(session);
        true
    }

    fn message(&mut self, message: Message) -> bool {
        let message = capped(message, &mut self.messages_cut);
        self.batcher
            .as_mut()
            .is_some_and(|batcher| batcher.message(message))
    }
}

/// Whether a log's bytes up to the state's offset are those imported: a
/// hasher over them if so. Within a watch, where they were hashed already,
/// the same file and the bytes just before the offset suffice.
fn verify(
    state: &FileState,
    opened: &OpenedFile,
    hashed: Option<&(u64, Sha256)>,
) -> Option<Sha256> {
    if state.offset > opened.len || state.prefix_sha256.is_empty() {
        return None;
    }
    if let Some((offset, hasher)) = hashed
        && *offset == state.offset
        && state.identity == opened.identity
    {
        let window = reader::digest_range(
            &opened.file,
            state.offset.saturating_sub(reader::WINDOW_BYTES),
            state.offset,
        )
        .ok()?;
        return (window == state.window_sha256).then(|| hasher.clone());
    }
    let mut hasher = Sha256::new();
    reader::hash_range(&opened.file, &mut hasher, 0, state.offset).ok()?;
    (reader::hex(&hasher.clone().finalize()) == state.prefix_sha256).then_some(hasher)
}

/// A file's new state, and the hasher over its imported bytes.
pub(super) struct NewState {
    pub(super) key: String,
    pub(super) state: FileState,
    pub(super) hashed: Option<(u64, Sha256)>,
}

/// One look at the files: what it found and what it leaves for the next.
struct Pass<'a> {
    scope: &'a TranscriptScope,
    /// Keys already derived, by recorded working directory.
    keys_by_directory: HashMap<PathBuf, Option<String>>,
    sink: &'a dyn Sink,
    pool: &'a AddPool,
    target: String,
    turn_finished: bool,
    states: &'a ResumeStates,
    hashed: &'a HashMap<String, (u64, Sha256)>,
    new_states: Vec<NewState>,
    sessions_seen: HashMap<String, PathBuf>,
    held: HashSet<PathBuf>,
    report: TranscriptReport,
    error: Option<anyhow::Error>,
}

impl<'a> Pass<'a> {
    /// A pass over files whose states `watched` holds, storing through `pool`.
    fn new(
        options: &'a TranscriptOptions,
        sink: &'a dyn Sink,
        pool: &'a AddPool,
        watched: &'a Watched,
        report: TranscriptReport,
    ) -> Pass<'a> {
        Pass {
            scope: &options.scope,
            keys_by_directory: HashMap::new(),
            sink,
            pool,
            target: sink.target(),
            turn_finished: options.turn_finished,
            states: &watched.states,
            hashed: &watched.hashed,
            new_states: Vec::new(),
            sessions_seen: HashMap::new(),
            held: HashSet::new(),
            report,
            error: None,
        }
    }

    /// Imports one file; why it is skipped, if it is.
    fn import_file(&mut self, path: &Path) -> Result<(), String> {
        let opened = reader::open_regular(path)?;
        let layout = sniff(&opened.file)?;
        let user_id = self.user_for(path, layout)?;
        let canonical = canonical_path(path);
        let naming = Naming::of(path, &canonical);
        let key = resume::key(&self.target, &user_id, &canonical);
        let previous = self.states.get(&key).cloned();
        if layout == Layout::Document {
            let mut notes = Notes::default();
            if let Some((format, transcripts)) = read_document(&opened.file, &naming, &mut notes)? {
                self.note(path, &notes);
                return self.import_document(
                    &user_id,
                    path,
                    &opened,
                    key,
                    previous,
                    format,
                    transcripts,
                );
            }
        }
        let settled = self.turn_finished
            || opened
                .modified
                .is_none_or(|modified| modified.elapsed().is_ok_and(|quiet| quiet >= SETTLE_TIME));
        self.import_log(&user_id, path, &opened, key, previous, settled, &naming)
    }

    /// The memory a file's sessions go to (see [`TranscriptScope`]).
    fn user_for(&mut self, path: &Path, layout: Layout) -> Result<UserId, String> {
        let fallback = match self.scope {
            TranscriptScope::Fixed(user_id) => return Ok(user_id.clone()),
            TranscriptScope::Recorded { fallback } => fallback,
        };
        let recorded = (layout != Layout::Document)
            .then(|| recorded_directory(path))
            .flatten();
        if let Some(directory) = recorded {
            let key = self
                .keys_by_directory
                .entry(directory.clone())
                .or_insert_with(|| crate::scope::repository_scope(&directory));
            if let Some(key) = key {
                return UserId::new(key.as_str())
                    .map_err(|invalid| format!("the key of its repository: {invalid}"));
            }
        }
        fallback.clone().ok_or_else(|| {
            "records no working directory inside a git repository of this machine, and the \
             import runs outside one: give the memory's key with --user-id"
                .to_string()
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn import_log(
        &mut self,
        user_id: &UserId,
        path: &Path,
        opened: &OpenedFile,
        key: String,
        previous: Option<FileState>,
        settled: bool,
        naming: &Naming,
    ) -> Result<(), String> {
        let Some((plan, start, hashed_from)) = self.log_plan(user_id, opened, &key, previous)
        else {
            return Ok(());
        };
        let restarted = match &plan {
            LogPlan::Fresh {
                restart_reason: Some(reason),
                ..
            } => Some(reason.clone()),
            _ => None,
        };
        let mut log = LogImport {
            user_id,
            sink: self.sink,
            pool: self.pool,
            path,
            sessions_seen: &mut self.sessions_seen,
            plan,
            session: None,
            batcher: None,
            messages_cut: 0,
            refused: None,
            error: None,
        };
        let read = read_json_lines(&opened.file, start, settled, naming, &mut log);
        let LogImport {
            session,
            batcher,
            messages_cut,
            refused,
            error,
            ..
        } = log;
        let batched = batcher.map(Batcher::finish);
        self.report.messages_cut += messages_cut;
        if let Some(error) = error {
            self.error = Some(error);
            return Ok(());
        }
        let read = match read {
            Err(reason) if reason == LEFT_OUT => return Err(refused.unwrap_or(reason)),
            Err(reason) => return Err(reason),
            Ok(read) => read,
        };
        let (Some(mut session), Some(batched)) = (session, batched) else {
            return Err(not_a_transcript());
        };
        self.report.files_read += 1;
        self.note(path, &read.notes);
        if read.notes.held_back {
            self.held.insert(path.to_path_buf());
        }
        if batched.num_messages > 0 {
            self.report.sessions += 1;
        }
        self.report.messages_already_imported += batched.num_already;
        if batched.num_adds > 0 {
            self.report.sessions_updated += 1;
        }
        if let Some(reason) = restarted {
            self.report.sessions_restarted.push(RestartedSession {
                path: path.display().to_string(),
                session_id: session.session_id(),
                reason,
            });
        }
        if read.stopped || !batched.handed_over {
            return Ok(());
        }
        session.num_messages = batched.num_messages;
        self.remember_log(key, opened, read, session, hashed_from);
        Ok(())
    }

    /// Where to read a log from: where the file's state says it was left
    /// when the file is unchanged up to there and the store holds what the
    /// state says, else from its start; with the prefix hashed so far.
    /// `None` when the store could not say (the error is kept).
    fn log_plan(
        &mut self,
        user_id: &UserId,
        opened: &OpenedFile,
        key: &str,
        previous: Option<FileState>,
    ) -> Option<(LogPlan, Start, (u64, Sha256))> {
        let verified = previous
            .as_ref()
            .and_then(|state| verify(state, opened, self.hashed.get(key)));
        let restart_reason = "rewritten or replaced since it was imported".to_string();
        let planned = match (&previous, verified) {
            (Some(state), Some(hasher))
                if state.sessions.len() == 1 && Format::from_name(&state.format).is_some() =>
            {
                let session = state.sessions[0].clone();
                let stored = session
                    .checked_session_id()
                    .and_then(|session_id| self.sink.stored_messages(user_id, &session_id));
                let stored = match stored {
                    Ok(stored) => stored,
                    Err(error) => {
                        self.error = Some(error);
                        return None;
                    }
                };
                let format = Format::from_name(&state.format).unwrap_or(Format::ClaudeCode);
                if stored == session.num_messages {
                    let start = Start {
                        offset: state.offset,
                        num_lines: state.num_lines,
                        known: Some((format, session.base_id.clone())),
                        num_lines_reported: state.num_lines_read,
                    };
                    (LogPlan::Resume(session), start, (state.offset, hasher))
                } else {
                    // The store and the state disagree: the store says
                    // where the file's messages stop.
                    let plan = LogPlan::Fresh {
                        previous: Some(session),
                        restart_reason: None,
                    };
                    (plan, Start::beginning(), (0, Sha256::new()))
                }
            }
            (Some(state), _) => {
                let plan = LogPlan::Fresh {
                    previous: state.sessions.first().cloned(),
                    restart_reason: Some(restart_reason),
                };
                (plan, Start::beginning(), (0, Sha256::new()))
            }
            (None, _) => {
                let plan = LogPlan::Fresh {
                    previous: None,
                    restart_reason: None,
                };
                (plan, Start::beginning(), (0, Sha256::new()))
            }
        };
        Some(planned)
    }

    /// Remembers how far a log was imported: its offset, line counts, the
    /// hash of what was read and of the window before its end.
    fn remember_log(
        &mut self,
        key: String,
        opened: &OpenedFile,
        read: LinesRead,
        session: SessionState,
        hashed_from: (u64, Sha256),
    ) {
        let (hashed_offset, mut hasher) = hashed_from;
        let window = reader::hash_range(&opened.file, &mut hasher, hashed_offset, read.offset)
            .and_then(|()| {
                reader::digest_range(
                    &opened.file,
                    read.offset.saturating_sub(reader::WINDOW_BYTES),
                    read.offset,
                )
            });
        let Ok(window_sha256) = window else {
            return;
        };
        let state = FileState {
            identity: opened.identity,
            format: read.format.name().to_string(),
            offset: read.offset,
            num_lines: read.num_lines,
            num_lines_read: read.num_lines_read,
            prefix_sha256: reader::hex(&hasher.clone().finalize()),
            window_sha256,
            sessions: vec![SessionState {
                base_id: read.base_id,
                ..session
            }],
        };
        self.new_states.push(NewState {
            key,
            state,
            hashed: Some((read.offset, hasher)),
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn import_document(
        &mut self,
        user_id: &UserId,
        path: &Path,
        opened: &OpenedFile,
        key: String,
        previous: Option<FileState>,
        format: Format,
        transcripts: Vec<Transcript>,
    ) -> Result<(), String> {
        self.report.files_read += 1;
        let mut sessions = Vec::new();
        let mut handed_over = true;
        for transcript in transcripts {
            if let Some(other) = self.sessions_seen.get(&transcript.session_id) {
                self.report.files_skipped.push(SkippedFile {
                    path: path.display().to_string(),
                    reason: format!(
                        "the same session ({}) as {}",
                        transcript.session_id,
                        other.display()
                    ),
                });
                continue;
            }
            self.sessions_seen
                .insert(transcript.session_id.clone(), path.to_path_buf());
            if transcript.messages.is_empty() {
                continue;
            }
            self.report.sessions += 1;
            let messages: Vec<Message> = transcript
                .messages
                .into_iter()
                .map(|message| capped(message, &mut self.report.messages_cut))
                .collect();
            let prior = previous.as_ref().and_then(|state| {
                state
                    .sessions
                    .iter()
                    .find(|session| session.base_id == transcript.session_id)
            });
            let generation = self.generation(path, &transcript.session_id, prior, &messages);
            let session = SessionState {
                base_id: transcript.session_id.clone(),
                generation,
                num_messages: messages.len(),
                messages_sha256: resume::messages_sha256(&messages),
            };
            let Some(session_handed_over) = self.store_session(user_id, &session, messages) else {
                return Ok(());
            };
            handed_over &= session_handed_over;
            sessions.push(session);
        }
        if handed_over {
            self.new_states.push(NewState {
                key,
                state: FileState {
                    identity: opened.identity,
                    format: format.name().to_string(),
                    offset: opened.len,
                    num_lines: 0,
                    num_lines_read: 0,
                    prefix_sha256: String::new(),
                    window_sha256: String::new(),
                    sessions,
                },
                hashed: None,
            });
        }
        Ok(())
    }

    /// The generation a document's session is stored under: its prior one
    /// when the messages imported then still start the transcript, the next
    /// (a restarted session, reported) when they do not, 1 for a new one.
    fn generation(
        &mut self,
        path: &Path,
        base_id: &str,
        prior: Option<&SessionState>,
        messages: &[Message],
    ) -> u32 {
        match prior {
            Some(prior)
                if prior.num_messages <= messages.len()
                    && resume::messages_sha256(&messages[..prior.num_messages])
                        == prior.messages_sha256 =>
            {
                prior.generation
            }
            Some(prior) => {
                let session_id = resume::session_id(base_id, prior.generation + 1);
                self.report.sessions_restarted.push(RestartedSession {
                    path: path.display().to_string(),
                    session_id,
                    reason: "rewritten or replaced since it was imported".to_string(),
                });
                prior.generation + 1
            }
            None => 1,
        }
    }

    /// Hands a session's messages not stored yet to the pool: whether all
    /// were handed over; `None` when the store could not say how many it
    /// holds (the error is kept).
    fn store_session(
        &mut self,
        user_id: &UserId,
        session: &SessionState,
        messages: Vec<Message>,
    ) -> Option<bool> {
        let checked = session.checked_session_id().and_then(|session_id| {
            let stored = self.sink.stored_messages(user_id, &session_id)?;
            Ok((session_id, stored))
        });
        let (session_id, stored) = match checked {
            Ok(checked) => checked,
            Err(error) => {
                self.error = Some(error);
                return None;
            }
        };
        let mut batcher = Batcher::to_pool(user_id, session_id, stored, self.pool);
        for message in messages {
            if !batcher.message(message) {
                break;
            }
        }
        let batched = batcher.finish();
        self.report.messages_already_imported += batched.num_already;
        if batched.num_adds > 0 {
            self.report.sessions_updated += 1;
        }
        Some(batched.handed_over)
    }

    /// Adds what reading a file noticed to the report.
    fn note(&mut self, path: &Path, notes: &Notes) {
        if notes.num_skipped > 0 {
            self.report.num_lines_skipped += notes.num_skipped;
            self.report.lines_skipped.push(SkippedLines {
                path: path.display().to_string(),
                num_lines: notes.num_skipped,
                first: notes.skipped.clone(),
            });
        }
        self.report.lines_with_invalid_utf8 += notes.invalid_utf8;
        if notes.not_fully_read {
            self.report.files_not_fully_read.push(SkippedFile {
                path: path.display().to_string(),
                reason: format!(
                    "grew past {} MiB while read: read up to there",
                    MAX_FILE_BYTES / (1024 * 1024)
                ),
            });
        }
    }
}

/// One look at every file: reads those that changed, stores their new
/// messages, and waits until they are stored (so that the next look counts
/// them); then remembers how far each file was imported.
pub(super) fn import_pass(
    options: &TranscriptOptions,
    sink: &Arc<dyn Sink>,
    progress: &mut dyn Progress,
    stop: &AtomicBool,
    watched: &mut Watched,
    first_pass: bool,
) -> anyhow::Result<TranscriptReport> {
    let (sources, skipped) = discover(&options.paths);
    let changed: Vec<(Source, FileStamp)> = sources
        .into_iter()
        .filter_map(|source| {
            let stamp = stamp_of(&source.path);
            needs_reading(watched, &source.path, &stamp).then_some((source, stamp))
        })
        .collect();
    let mut report = TranscriptReport::default();
    if first_pass {
        report.files_skipped = skipped;
    }
    if changed.is_empty() {
        return Ok(report);
    }
    progress.start(changed.len(), "transcript files");
    let pool = AddPool::new(Arc::clone(sink), options.parallelism);
    let mut pass = Pass::new(options, sink.as_ref(), &pool, watched, report);
    let mut read_paths = Vec::new();
    let mut last_update = Instant::now();
    for (done, (source, stamp)) in changed.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            pass.report.interrupted = true;
            break;
        }
        if pass.pool.failed() || pass.error.is_some() {
            break;
        }
        if let Err(reason) = pass.import_file(&source.path)
            && (source.explicit || is_reported(&source.path))
        {
            pass.report.files_skipped.push(SkippedFile {
                path: source.path.display().to_string(),
                reason,
            });
        }
        read_paths.push((source.path.clone(), *stamp));
        if last_update.elapsed() >= Duration::from_millis(200) {
            let status = format!(
                "{} message(s) imported, {} already there",
                pass.pool.messages_stored(),
                pass.report.messages_already_imported
            );
            progress.update(done + 1, &status);
            last_update = Instant::now();
        }
    }
    let Pass {
        new_states,
        held,
        mut report,
        error,
        ..
    } = pass;
    let outcome = pool.finish();
    report.adds = outcome.adds_stored;
    report.messages_imported = outcome.messages_stored;
    progress.finish();
    let result = match error {
        Some(error) => Err(error),
        None => outcome.result,
    };
    if let Err(error) = result {
        // What failed is read again at the next run.
        watched.seen.clear();
        return Err(error.context(format!(
            "import stopped after {} message(s); run it again to resume",
            report.messages_imported
        )));
    }
    for (path, stamp) in read_paths {
        watched.held.remove(&path);
        watched.seen.insert(path, stamp);
    }
    watched.held.extend(held);
    if !new_states.is_empty() {
        report.state_not_saved = watched.remember(new_states).err();
    }
    Ok(report)
}
