//! Result assembly: the kept sessions become the items an agent reads, in
//! order, within a character budget.
//!
//! Before anything is read, [`shown_sessions`] says which kept sessions an
//! answer shows and what to load for each (its whole record, its
//! best-matching messages); [`best_message`] chooses the message of a part
//! to show; [`assemble`] builds the items from what was loaded.
//!
//! Per session, best first: one compact *experience* item (the task in a
//! line or two, the outcome, the files and symbols changed, the key error,
//! and the fix hunks, best match to the query first), then at most one
//! supporting *error* item (the matching trace) when the query shares its
//! error type. Every item keeps its session and its source.

use std::collections::HashSet;

use precedent_core::domain::{MemoryItem, MemoryKind};
use precedent_ingest::{Evidence, EvidenceKind, OutcomeStatus, SessionRecord};

use super::Scored;
use super::query::{QueryFacts, name_key, normalize_path};

/// The default character budget of an answer.
pub const DEFAULT_BUDGET_CHARS: usize = 12_000;
/// Characters of the task statement shown in an experience item.
const TASK_CHARS: usize = 400;
/// ... at least, however far below the best session it ranks.
const MIN_TASK_CHARS: usize = 120;
/// Characters of fix hunks shown in an experience item.
const FIX_CHARS: usize = 2_500;
/// Characters of a supporting error item.
const ERROR_CHARS: usize = 1_500;
/// Characters of the best-matching message shown as it is (scaled by room).
const MESSAGE_CHARS: usize = 1_500;
/// Room from which a session's best-matching message is shown too: the
/// sessions within about a ninth of a score unit of the best (see
/// [`room`]), where the ranking is confident enough to spend a message's
/// worth of the budget.
const MESSAGE_ROOM: f32 = 0.5;
/// Room from which a session's trace of an error the query names is shown
/// beside its experience: the same confidence as for a message (an error
/// item costs up to [`ERROR_CHARS`], as a message does [`MESSAGE_CHARS`]).
/// Its own constant, as the two need not move together.
const ERROR_ROOM: f32 = 0.5;
/// Room from which a session's whole record is loaded
/// ([`ShownSession::needs_record`]).
/// Below it the room-scaled fix is under 250 characters (a tenth of
/// [`FIX_CHARS`]), one cut hunk at most, and the task under 150: not worth
/// reading the record for, so the item says what the ranking profile holds.
const MIN_RECORD_ROOM: f32 = 0.1;
/// An error item's score as a share of its session's: below the session's
/// experience item, which comes first, and above its message.
const ERROR_SCORE_SHARE: f32 = 0.9;
/// A message item's score as a share of its session's: below the
/// experience and error items of the same session, the more distilled ones.
const MESSAGE_SCORE_SHARE: f32 = 0.8;
/// An experience item is cut to the budget left only if this much is left.
const MIN_CUT_ITEM_CHARS: usize = 300;
/// Files and symbols listed in an experience item.
const LISTED: usize = 8;
/// Characters of the key error's message in an experience item: its first
/// line as the trace gives it, enough for the exception and what it is
/// about.
const ERROR_MESSAGE_CHARS: usize = 200;
/// Fix characters that must be left for one more hunk to be shown: a hunk's
/// file header and range line take about a hundred, so less would show
/// where the change is but not the change.
const MIN_HUNK_CHARS: usize = 200;
/// What marks a cut text (its characters count in the limit).
const CUT_MARK: &str = " ...";
/// Characters of a message's opening looked for in what is already shown: a
/// message whose opening is shown (the task statement, a hunk) repeats it.
const MESSAGE_OPENING_CHARS: usize = 80;
/// Lines shorter than this many bytes (braces, `else:`, `pass`) are in every
/// text and tell nothing about whether a message was already shown.
const MIN_COMPARED_LINE_BYTES: usize = 8;
/// Characters a session's first item rarely holds fewer of: an answer of
/// `budget` characters shows at most `budget / MIN_ITEM_CHARS` sessions
/// (at least one, at most `top_k`).
const MIN_ITEM_CHARS: usize = 600;
/// BM25's k1 in [`best_message`]: how fast a term's repeats stop counting.
const MESSAGE_TERM_SATURATION: f32 = 1.2;

/// The probability of relevance from which a kept session's evidence is
/// strong enough to show it in full, with its fix; below it a session is
/// shown compact. The same task met again, and a session whose BM25
/// stands out of the query's list with a code fact in common, are shown in
/// full too.
pub const FULL_PROBABILITY: f32 = 0.6;
/// A weak session is shown (compact) only among an answer's first this
/// many sessions: an answer lists what the baseline's first five would,
/// and no weak session past them.
pub const COMPACT_WITHIN: usize = 5;
/// Characters of a compact item at most: its task line, files, changed
/// definitions and outcome; its id fetches it whole.
pub const COMPACT_CHARS: usize = 300;

/// Characters of a compact item's head kept however long its session id.
const MIN_COMPACT_HEAD_CHARS: usize = 120;

/// How much of a kept session an answer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Size {
    /// Its experience with the fix, and its matching error and message
    /// as its room allows: the evidence is strong.
    Full,
    /// One line of what it was, where and how it ended, within
    /// [`COMPACT_CHARS`]: the evidence is weak.
    Compact,
}

/// The size a kept session is shown at, from its evidence. A BM25
/// standout is strong evidence when it has a code fact in common with the
/// query too: words alone stand out in a memory of noise as well.
pub fn size_of(scored: &Scored) -> Size {
    let stands_out =
        scored.bm25_lead(super::STANDOUT_MARGIN) && scored.evidence >= super::gate::MIN_EVIDENCE;
    if scored.features.same_task || stands_out || scored.probability >= FULL_PROBABILITY {
        Size::Full
    } else {
        Size::Compact
    }
}

/// A kept session an answer shows, with its room: what its items show,
/// and so what to load for it.
#[derive(Debug, Clone, Copy)]
pub struct ShownSession<'a> {
    /// Its ranking.
    pub scored: &'a Scored,
    /// See [`room`]; 0 for a compact one.
    room: f32,
}

impl ShownSession<'_> {
    /// Its room: how much of the answer it may take (see [`room`]).
    pub fn room(&self) -> f32 {
        self.room
    }

    /// Whether its experience shows more than its ranking profile holds
    /// (fix hunks, the task beyond its first line, its error): its whole
    /// record is loaded, with every message's source; else only its first
    /// message's, where a compact item is sourced.
    pub fn needs_record(&self) -> bool {
        self.room >= MIN_RECORD_ROOM
    }

    /// Whether its best-matching messages are looked up, to be shown
    /// beside its experience.
    pub fn shows_messages(&self) -> bool {
        self.room >= MESSAGE_ROOM
    }
}

/// The sessions an answer of about `budget_chars` characters and at most
/// `top_k` items shows: the kept candidates of a ranking (kept ones first,
/// best first), as many as the budget can hold.
pub fn shown_sessions(
    candidates: &[Scored],
    budget_chars: usize,
    top_k: usize,
) -> Vec<ShownSession<'_>> {
    // More sessions than this cannot fit the budget.
    let max_sessions = (budget_chars / MIN_ITEM_CHARS).clamp(1, top_k);
    let mut num_shown = 0usize;
    let kept: Vec<(&Scored, Size)> = candidates
        .iter()
        .filter(|scored| scored.dropped.is_none())
        .map(|scored| (scored, size_of(scored)))
        .filter(|(_, size)| {
            let fits = *size == Size::Full || num_shown < COMPACT_WITHIN;
            num_shown += usize::from(fits);
            fits
        })
        .take(max_sessions)
        .collect();
    // Room is shared among the sessions shown in full, by fitted score.
    let best = kept
        .iter()
        .filter(|(_, size)| *size == Size::Full)
        .map(|(scored, _)| scored.fit_score)
        .fold(f32::MIN, f32::max);
    kept.into_iter()
        .map(|(scored, size)| ShownSession {
            scored,
            room: match size {
                Size::Full => room(best, scored.fit_score),
                Size::Compact => 0.0,
            },
        })
        .collect()
}

/// Which of a part's messages (their texts, in order) to show: the one
/// that holds the most of `terms` (the query's rarest first, each weighing
/// more than the next), the first of equals; `None` when there are none.
/// Occurrences are counted as substrings of the lower-cased text: enough to
/// choose which message to show.
pub fn best_message<'m>(
    messages: impl IntoIterator<Item = &'m str>,
    terms: &[String],
) -> Option<usize> {
    let finders: Vec<(f32, memchr::memmem::Finder<'_>)> = terms
        .iter()
        .enumerate()
        .map(|(rank, term)| {
            (
                (terms.len() - rank) as f32,
                memchr::memmem::Finder::new(term.as_bytes()),
            )
        })
        .collect();
    let score = |content: &str| -> f32 {
        let lower = content.to_ascii_lowercase();
        finders
            .iter()
            .map(|(weight, finder)| {
                let count = finder.find_iter(lower.as_bytes()).count() as f32;
                weight * count / (count + MESSAGE_TERM_SATURATION)
            })
            .sum()
    };
    let mut best: Option<(f32, usize)> = None;
    for (position, content) in messages.into_iter().enumerate() {
        let value = score(content);
        if best.is_none_or(|(top, _)| value > top) {
            best = Some((value, position));
        }
    }
    best.map(|(_, position)| position)
}

/// A kept session with what assembly needs of it.
pub struct KeptSession<'a> {
    /// Its ranking.
    pub scored: &'a Scored,
    /// Its whole record, when its room is worth loading it for
    /// ([`ShownSession::needs_record`]); else the item is built from the
    /// ranking alone.
    pub record: Option<&'a SessionRecord>,
    /// `(request_id, index within that Add)` of each message, in order.
    pub sources: &'a [(String, usize)],
    /// Source or storage time of the session, Unix ms.
    pub created_at_ms: i64,
    /// Its room, as [`shown_sessions`] gave it ([`ShownSession::room`]).
    pub room: f32,
    /// The session's messages that best match the query, best first, if
    /// looked up.
    pub matched_messages: Vec<MatchedMessage<'a>>,
}

/// A stored message shown as it is.
pub struct MatchedMessage<'a> {
    /// Its text.
    pub content: &'a str,
    /// The Add it came with.
    pub request_id: &'a str,
    /// Its index within that Add.
    pub index_in_add: usize,
    /// Message time if given, else storage time, Unix ms.
    pub created_at_ms: i64,
}

/// Cuts `text` to at most `max` characters, marking the cut when there is
/// room for the mark.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    if max <= CUT_MARK.chars().count() {
        return text.chars().take(max).collect();
    }
    let kept: String = text.chars().take(max - CUT_MARK.chars().count()).collect();
    format!("{kept}{CUT_MARK}")
}

fn list(values: &[String]) -> String {
    let mut shown: Vec<&str> = values.iter().take(LISTED).map(String::as_str).collect();
    let more = values.len().saturating_sub(LISTED);
    let suffix = if more > 0 {
        format!(" (+{more} more)")
    } else {
        String::new()
    };
    shown.dedup();
    format!("{}{suffix}", shown.join(", "))
}

/// Bytes of a hunk's changed lines and range lines whose terms are read
/// when grading it against a query: a shown fix is a few thousand
/// characters, and the words that tell hunks apart are in their first lines.
const MAX_GRADED_HUNK_BYTES: usize = 2_048;
/// Bytes of hunks, per session, whose terms are read: a diff of hundreds of
/// hunks is graded by its paths and symbols past it, keeping a Search cheap.
const MAX_GRADED_SESSION_BYTES: usize = 16 * 1024;
/// Query terms shorter than this (`a`, `if`, `of`) are in most hunks and
/// tell none apart.
const MIN_GRADED_TERM_BYTES: usize = 3;

/// How well a fix hunk matches a query, compared field by field: first what
/// the query names (its file, its definitions), then the query's words in
/// the change itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HunkMatch {
    /// Named facts the hunk touches: 2 for its file among the query's
    /// paths and file names, plus 1 per distinct definition of the hunk
    /// the query names.
    named: usize,
    /// Distinct query terms among the terms of its changed lines.
    terms: usize,
}

/// What ranks a session's fix hunks against one query, built once per
/// session shown.
struct HunkGrader<'q> {
    query: &'q QueryFacts,
    /// The query's terms long enough to tell hunks apart.
    terms: HashSet<&'q str>,
    /// Bytes of hunk text whose terms may still be read.
    bytes_left: usize,
}

impl<'q> HunkGrader<'q> {
    fn new(query: &'q QueryFacts) -> HunkGrader<'q> {
        HunkGrader {
            query,
            terms: query
                .terms
                .iter()
                .map(String::as_str)
                .filter(|term| term.len() >= MIN_GRADED_TERM_BYTES)
                .collect(),
            bytes_left: MAX_GRADED_SESSION_BYTES,
        }
    }

    fn grade(&mut self, evidence: &Evidence) -> HunkMatch {
        HunkMatch {
            named: self.named(evidence),
            terms: self.terms(evidence),
        }
    }

    /// See [`HunkMatch::named`].
    fn named(&self, evidence: &Evidence) -> usize {
        let by_file = evidence.file.as_deref().is_some_and(|file| {
            let file = normalize_path(file);
            self.query.paths.iter().any(|path| {
                file.ends_with(path.as_str())
                    || file.contains(&format!("{path}/"))
                    || path.ends_with(file.as_str())
            })
        });
        let mut names: Vec<String> = evidence
            .symbols
            .iter()
            .filter_map(|symbol| name_key(symbol))
            .filter(|name| self.query.names.contains(name))
            .collect();
        names.sort_unstable();
        names.dedup();
        2 * usize::from(by_file) + names.len()
    }

    /// See [`HunkMatch::terms`]: read with the index's tokenizer over the
    /// hunk's range and changed lines (context lines are the same in every
    /// version of the file), within the byte allowances.
    fn terms(&mut self, evidence: &Evidence) -> usize {
        if self.terms.is_empty() || self.bytes_left == 0 {
            return 0;
        }
        let allowance = MAX_GRADED_HUNK_BYTES.min(self.bytes_left);
        let mut changed = String::with_capacity(allowance);
        for line in evidence.text.lines() {
            let is_header = line.starts_with("+++") || line.starts_with("---");
            let is_changed = line.starts_with('+') || line.starts_with('-');
            if is_header || !(is_changed || line.starts_with("@@")) {
                continue;
            }
            if changed.len() + line.len() + 1 > allowance {
                let room = allowance.saturating_sub(changed.len());
                changed.push_str(precedent_ingest::text::truncate_to_bytes(line, room));
                break;
            }
            changed.push_str(line);
            changed.push('\n');
        }
        self.bytes_left = self.bytes_left.saturating_sub(changed.len());
        let mut found: HashSet<&str> = HashSet::new();
        for token in precedent_core::tokenize::code_tokens(&changed) {
            if let Some(term) = self.terms.get(token.text.as_str()) {
                found.insert(term);
            }
        }
        found.len()
    }
}

/// The fix hunks to show: those of the session's last diff, best match to
/// the query first (see [`HunkMatch`]), source files before tests among
/// equal matches of what the query names, ties in diff order.
fn fix_hunks<'r>(record: &'r SessionRecord, query: &QueryFacts) -> Vec<&'r Evidence> {
    let Some(last) = record
        .evidence
        .iter()
        .filter(|evidence| evidence.kind == EvidenceKind::Fix)
        .map(|evidence| evidence.message_index)
        .max()
    else {
        return Vec::new();
    };
    let mut grader = HunkGrader::new(query);
    let mut hunks: Vec<(HunkMatch, bool, &Evidence)> = record
        .evidence
        .iter()
        .filter(|evidence| evidence.kind == EvidenceKind::Fix && evidence.message_index == last)
        .map(|evidence| {
            let is_test = evidence.file.as_deref().is_some_and(super::is_test_path);
            (grader.grade(evidence), is_test, evidence)
        })
        .collect();
    // Stable: equal keys keep the diff's order.
    hunks.sort_by(|(left, left_test, _), (right, right_test, _)| {
        right
            .named
            .cmp(&left.named)
            .then(left_test.cmp(right_test))
            .then(right.terms.cmp(&left.terms))
    });
    hunks.into_iter().map(|(_, _, evidence)| evidence).collect()
}

/// How much room a session gets, from 1.0 (the best session) down towards
/// 0 as its score falls below the best one's: the context goes where the
/// ranking is most confident, and a doubtful session costs little.
fn room(best: f32, score: f32) -> f32 {
    // Per unit of ranking score below the best, room shrinks by
    // e^-ROOM_DECAY (e^-6: a session a sixth of a unit below the best gets
    // ~37% of the room).
    (-super::relevance::ROOM_DECAY * (best - score).max(0.0))
        .exp()
        .clamp(0.0, 1.0)
}

/// The opening lines of an experience item: the task with its outcome,
/// the source files (tests left out) and the symbols changed.
fn headline(outcome: OutcomeStatus, task: &str, files: &[String], symbols: &[String]) -> String {
    let mut text = format!("Past task ({outcome}): {task}\n");
    let source_files: Vec<String> = files
        .iter()
        .filter(|file| !super::is_test_path(file))
        .cloned()
        .collect();
    if !source_files.is_empty() {
        text.push_str(&format!("Files changed: {}\n", list(&source_files)));
    }
    if !symbols.is_empty() {
        text.push_str(&format!("Symbols changed: {}\n", list(symbols)));
    }
    text
}

/// A compact experience item from the ranking alone, within
/// [`COMPACT_CHARS`]: what it was, where, how it ended, and the session
/// that tells the whole of it (MCP's `get_session`, the API's
/// `/v1/sessions/{id}`).
fn compact_text(scored: &Scored) -> String {
    let text = headline(
        scored.outcome,
        &scored.task_line,
        &scored.files_changed,
        &scored.symbols_changed,
    );
    let id_line = format!("Session: {}", scored.session_id);
    let room = COMPACT_CHARS.saturating_sub(id_line.chars().count() + 1);
    let mut compact = clip(text.trim_end(), room.max(MIN_COMPACT_HEAD_CHARS));
    compact.push('\n');
    compact.push_str(&id_line);
    clip(&compact, COMPACT_CHARS)
}

/// The experience item's text; `room` (0..1) scales how much of the task
/// and of the fix it shows.
fn experience_text(record: &SessionRecord, query: &QueryFacts, room: f32) -> String {
    let task_chars = MIN_TASK_CHARS + ((TASK_CHARS - MIN_TASK_CHARS) as f32 * room) as usize;
    let mut text = headline(
        record.outcome.status,
        &clip(record.task.trim(), task_chars),
        &record.files_changed,
        &record.symbols_changed,
    );
    if let Some(error) = record.errors.first() {
        text.push_str(&format!(
            "Error: {}: {}\n",
            error.error_type,
            clip(&error.message, ERROR_MESSAGE_CHARS)
        ));
    }
    if !record.tests.failing.is_empty() {
        text.push_str(&format!("Failing tests: {}\n", list(&record.tests.failing)));
    }
    let mut fix_chars = 0usize;
    let fix_room = (FIX_CHARS as f32 * room) as usize;
    for hunk in fix_hunks(record, query) {
        let remaining = fix_room.saturating_sub(fix_chars);
        if remaining < MIN_HUNK_CHARS {
            break;
        }
        let shown = clip(hunk.text.trim_end(), remaining);
        fix_chars += shown.chars().count();
        if fix_chars == shown.chars().count() {
            text.push_str("Fix:\n");
        }
        text.push_str(&shown);
        text.push('\n');
    }
    text.trim_end().to_string()
}

/// The trace worth showing beside the experience: one whose error type the
/// query names.
fn matching_error<'r>(record: &'r SessionRecord, query: &QueryFacts) -> Option<&'r Evidence> {
    if query.error_types.is_empty() {
        return None;
    }
    record.evidence.iter().find(|evidence| {
        evidence.kind == EvidenceKind::Error
            && query
                .error_types
                .iter()
                .any(|name| evidence.text.contains(name.as_str()))
    })
}

fn source_of(session: &KeptSession<'_>, message_index: usize) -> (String, usize) {
    session
        .sources
        .get(message_index)
        .cloned()
        .or_else(|| session.sources.first().cloned())
        .unwrap_or_default()
}

/// Whether most lines of `text` (those long enough to tell apart; at least
/// half of them) are in the pieces already chosen, or its opening is.
fn mostly_shown(text: &str, pieces: &[Piece]) -> bool {
    let head: String = text.trim().chars().take(MESSAGE_OPENING_CHARS).collect();
    if pieces
        .iter()
        .any(|piece| piece.content.contains(head.trim()))
    {
        return true;
    }
    let shown: HashSet<&str> = pieces
        .iter()
        .flat_map(|piece| piece.content.lines())
        .map(str::trim)
        .collect();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| line.len() >= MIN_COMPARED_LINE_BYTES)
        .collect();
    !lines.is_empty()
        && 2 * lines.iter().filter(|line| shown.contains(*line)).count() >= lines.len()
}

/// One item to be, before the budget decides.
struct Piece {
    kind: MemoryKind,
    content: String,
    /// Message of the session it comes from (for its source).
    message_index: usize,
    score: f32,
    /// `(request_id, index in the Add, time)` when known already.
    source: Option<(String, usize, i64)>,
}

/// The items a session given `room` would show, before the budget decides:
/// its experience, the trace of an error the query names, and its
/// best-matching message not already shown.
fn session_pieces(session: &KeptSession<'_>, query: &QueryFacts, room: f32) -> Vec<Piece> {
    let text = match session.record {
        Some(record) => experience_text(record, query, room),
        None => compact_text(session.scored),
    };
    let mut pieces: Vec<Piece> = vec![Piece {
        kind: MemoryKind::Experience,
        content: text,
        message_index: 0,
        score: session.scored.score,
        source: None,
    }];
    if room >= ERROR_ROOM
        && let Some(record) = session.record
        && let Some(error) = matching_error(record, query)
    {
        pieces.push(Piece {
            kind: MemoryKind::Error,
            content: clip(&error.text, ERROR_CHARS),
            message_index: error.message_index,
            score: session.scored.score * ERROR_SCORE_SHARE,
            source: None,
        });
    }
    // The best-matching message not already shown (the task and the fix
    // hunks are).
    let unseen = session
        .matched_messages
        .iter()
        .find(|message| !mostly_shown(message.content, &pieces));
    if room >= MESSAGE_ROOM
        && let Some(message) = unseen
    {
        pieces.push(Piece {
            kind: MemoryKind::Message,
            content: clip(
                precedent_ingest::repo::without_importer_markers(message.content).trim(),
                (MESSAGE_CHARS as f32 * room) as usize,
            ),
            message_index: 0,
            score: session.scored.score * MESSAGE_SCORE_SHARE,
            source: Some((
                message.request_id.to_string(),
                message.index_in_add,
                message.created_at_ms,
            )),
        });
    }
    pieces
}

/// The answer: items of the kept sessions, best first, scores descending,
/// at most `top_k` items and about `budget_chars` characters (the first
/// item is always given, cut to the budget if need be).
pub fn assemble(
    query: &QueryFacts,
    sessions: &[KeptSession<'_>],
    budget_chars: usize,
    top_k: usize,
) -> Vec<MemoryItem> {
    let mut items: Vec<MemoryItem> = Vec::new();
    let mut used = 0usize;
    let mut last_score = f32::INFINITY;
    'sessions: for session in sessions {
        let pieces = session_pieces(session, query, session.room);
        for (index, piece) in pieces.into_iter().enumerate() {
            let Piece {
                kind,
                content,
                message_index,
                score,
                source,
            } = piece;
            if items.len() >= top_k {
                break 'sessions;
            }
            let length = content.chars().count();
            let remaining = budget_chars.saturating_sub(used);
            let content = if length <= remaining {
                content
            } else if items.is_empty() {
                // The first item is always given, cut to the budget.
                clip(&content, budget_chars)
            } else if index == 0 && remaining >= MIN_CUT_ITEM_CHARS {
                // A session's experience cut to what is left still says
                // what was done where.
                clip(&content, remaining)
            } else if index == 0 {
                break 'sessions;
            } else {
                continue;
            };
            used += content.chars().count();
            let score = score.min(last_score);
            last_score = score;
            let (request_id, within, created_at_ms) = match source {
                Some(source) => source,
                None => {
                    let (request_id, within) = source_of(session, message_index);
                    (request_id, within, session.created_at_ms)
                }
            };
            let id = match kind {
                MemoryKind::Experience => format!("experience:{}", session.scored.session_id),
                MemoryKind::Error => format!("error:{}:{message_index}", session.scored.session_id),
                MemoryKind::Message => {
                    // An imported Add's request id starts with its session
                    // id (`S:0-5`): said once, the id stays unique.
                    let session_id = &session.scored.session_id;
                    let add = request_id
                        .strip_prefix(session_id.as_str())
                        .and_then(|rest| rest.strip_prefix(':'))
                        .filter(|rest| {
                            // The importer's shape, `FIRST-LAST`.
                            rest.split_once('-').is_some_and(|(first, last)| {
                                !first.is_empty()
                                    && !last.is_empty()
                                    && first
                                        .bytes()
                                        .chain(last.bytes())
                                        .all(|b| b.is_ascii_digit())
                            })
                        })
                        .unwrap_or(&request_id);
                    format!("message:{session_id}:{add}:{within}")
                }
            };
            items.push(MemoryItem {
                id,
                content,
                score,
                created_at_ms,
                session_id: session.scored.session_id.clone(),
                kind,
                request_id,
                message_start: within,
                message_end: within,
                stale: None,
            });
        }
    }
    items
}

#[cfg(test)]
mod tests;
