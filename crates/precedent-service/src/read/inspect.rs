//! inspect: "what was extracted from this user's sessions?" Derived session
//! records read back for people: a line per session, or one session's whole
//! record with where each message came from. Read with any connection to
//! the store (the service's pooled ones, or `precedent inspect`'s own).
//!
//! Architecture invariant: nothing here writes.

use super::ReadError;
use precedent_core::domain::{SessionId, UserId};
use precedent_ingest::{self as ingest, SessionRecord};
use precedent_store::{self as store, ListCursor, StoreConn, StoredSession, StoredUser};

/// How many files, symbols and error types a session summary names.
pub const SUMMARY_LIST_LEN: usize = 5;

/// Characters of the task statement's first line a summary keeps.
const SUMMARY_TASK_CHARS: usize = 200;

/// One line about a stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The session.
    pub session_id: String,
    /// The task statement's first line, capped.
    pub task: String,
    /// Dominant language.
    pub language: Option<precedent_core::language::Language>,
    /// `resolved`, `failed` or `unknown`.
    pub status: precedent_ingest::OutcomeStatus,
    /// Files the session changed.
    pub num_files_changed: usize,
    /// Symbols the session changed.
    pub num_symbols_changed: usize,
    /// Errors met.
    pub num_errors: usize,
    /// Messages stored.
    pub num_messages: i64,
    /// When the session's latest dated message was written, else when its
    /// record was last derived, Unix ms.
    pub updated_at_ms: i64,
    /// The sequence number of the last Add the record includes (where a
    /// listing goes on after this session).
    pub last_seq: i64,
    /// The first files changed (at most [`SUMMARY_LIST_LEN`]).
    pub files_changed: Vec<String>,
    /// The first symbols changed (at most [`SUMMARY_LIST_LEN`]).
    pub symbols_changed: Vec<String>,
    /// The types of the first errors met (distinct, at most [`SUMMARY_LIST_LEN`]).
    pub error_types: Vec<String>,
}

/// The parts of a stored record a summary reads; the rest (evidence,
/// commands, frames) is skipped, not built.
#[derive(serde::Deserialize)]
struct SummaryFields {
    #[serde(default)]
    task: String,
    #[serde(default)]
    language: Option<precedent_core::language::Language>,
    #[serde(default)]
    files_changed: Vec<String>,
    #[serde(default)]
    symbols_changed: Vec<String>,
    #[serde(default)]
    errors: Vec<ErrorType>,
    #[serde(default)]
    outcome: Option<OutcomeFields>,
    #[serde(default)]
    last_message_at_ms: Option<i64>,
}

#[derive(serde::Deserialize)]
struct ErrorType {
    #[serde(rename = "type")]
    error_type: String,
}

#[derive(serde::Deserialize)]
struct OutcomeFields {
    status: precedent_ingest::OutcomeStatus,
}

impl SessionSummary {
    /// Where a listing goes on after this session.
    pub fn cursor(&self) -> ListCursor {
        ListCursor {
            last_seq: self.last_seq,
            key: self.session_id.clone(),
        }
    }

    fn of(session: &StoredSession) -> Option<SessionSummary> {
        let record: SummaryFields = session.record().ok()?;
        let first_line = record.task.lines().next().unwrap_or("").trim();
        let mut error_types: Vec<String> = Vec::new();
        for error in &record.errors {
            if error_types.len() == SUMMARY_LIST_LEN {
                break;
            }
            if !error_types.contains(&error.error_type) {
                error_types.push(error.error_type.clone());
            }
        }
        Some(SessionSummary {
            session_id: session.session_id.to_string(),
            task: first_line.chars().take(SUMMARY_TASK_CHARS).collect(),
            language: record.language,
            status: record
                .outcome
                .map_or(precedent_ingest::OutcomeStatus::Unknown, |outcome| {
                    outcome.status
                }),
            num_files_changed: record.files_changed.len(),
            num_symbols_changed: record.symbols_changed.len(),
            num_errors: record.errors.len(),
            num_messages: session.num_messages,
            updated_at_ms: record.last_message_at_ms.unwrap_or(session.updated_at_ms),
            last_seq: session.last_seq,
            files_changed: record
                .files_changed
                .into_iter()
                .take(SUMMARY_LIST_LEN)
                .collect(),
            symbols_changed: record
                .symbols_changed
                .into_iter()
                .take(SUMMARY_LIST_LEN)
                .collect(),
            error_types,
        })
    }
}

/// A session's whole derived record, with where each message came from.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionDetail {
    /// The session.
    pub session_id: String,
    /// Messages stored.
    pub num_messages: i64,
    /// When the session's latest dated message was written, else when its
    /// record was last derived, Unix ms.
    pub updated_at_ms: i64,
    /// The record.
    pub record: SessionRecord,
    /// What the extractors could not parse.
    pub diagnostics: Vec<ingest::Diagnostic>,
    /// Per message of the session (by session index): the Add's request id
    /// and the message's index within it.
    pub sources: Vec<(String, usize)>,
}

impl SessionDetail {
    fn of(
        session: &StoredSession,
        sources: Vec<(String, usize)>,
    ) -> Result<SessionDetail, ReadError> {
        let record: SessionRecord = session.record()?;
        Ok(SessionDetail {
            session_id: session.session_id.to_string(),
            num_messages: session.num_messages,
            updated_at_ms: record.last_message_at_ms.unwrap_or(session.updated_at_ms),
            record,
            diagnostics: session.diagnostics()?,
            sources,
        })
    }
}

/// A page of a listing: its items, and where the next page starts when
/// there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The items, in listing order.
    pub items: Vec<T>,
    /// After which item the next page starts; `None` on the last page.
    pub next: Option<ListCursor>,
}

/// Where a listing's items go, one at a time, as they are read.
pub trait PageSink<T> {
    /// Takes `item`, or answers `false` when the page has no room left
    /// for it: the page then ends before it.
    fn accept(&mut self, item: T) -> bool;
}

/// A page kept whole in memory (the CLI's, and tests').
impl<T> PageSink<T> for Vec<T> {
    fn accept(&mut self, item: T) -> bool {
        self.push(item);
        true
    }
}

/// Summaries of at most `limit` sessions of a user after `after`, most
/// recently updated first, read with any connection to the store (the
/// service's, or the CLI's own). A record that cannot be read is left out
/// of the page, and the page still goes on after it.
pub fn session_summaries(
    conn: &StoreConn,
    user_id: &UserId,
    after: Option<&ListCursor>,
    limit: usize,
) -> Result<Page<SessionSummary>, ReadError> {
    let mut items = Vec::new();
    let next = visit_session_summaries(conn, user_id, after, limit, &mut items)?;
    Ok(Page { items, next })
}

/// The summaries of [`session_summaries`], each handed to `sink` as it is
/// read, until `limit` or until the sink has no room: a page holds what
/// its sink keeps (a few rows at a time here), whatever its limit.
/// Answers where the next page starts, `None` when nothing follows.
pub fn visit_session_summaries(
    conn: &StoreConn,
    user_id: &UserId,
    after: Option<&ListCursor>,
    limit: usize,
    sink: &mut impl PageSink<SessionSummary>,
) -> Result<Option<ListCursor>, ReadError> {
    const ROWS_PER_READ: usize = 256;
    // A user being deleted has no sessions, though some are still stored.
    if store::user_deletion_pending(conn, user_id)? {
        return Ok(None);
    }
    let mut read = 0usize;
    let mut position = after.cloned();
    loop {
        let wanted = (limit - read).min(ROWS_PER_READ);
        // One row more than wanted tells whether another follows.
        let rows = store::sessions_of_user(conn, user_id, position.as_ref(), wanted + 1)?;
        let more = rows.len() > wanted;
        for row in rows.iter().take(wanted) {
            if let Some(summary) = SessionSummary::of(row)
                && !sink.accept(summary)
            {
                return Ok(position);
            }
            position = Some(row.cursor());
        }
        read += rows.len().min(wanted);
        if !more {
            return Ok(None);
        }
        if read == limit {
            return Ok(position);
        }
    }
}

/// One stored message as a session's message list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageView {
    /// The Add it came with.
    pub request_id: String,
    /// Its sequence number (where a page goes on after it).
    pub seq: i64,
    /// Its index within that Add.
    pub message_index: usize,
    /// Who wrote it.
    pub role: precedent_core::domain::Role,
    /// Its text, at most [`MESSAGE_VIEW_CHARS`] characters of it.
    pub content: String,
    /// The characters it holds, shown or not.
    pub content_chars: usize,
    /// Message time if given, Unix ms.
    pub timestamp_ms: Option<i64>,
    /// When its Add was stored, Unix ms.
    pub stored_at_ms: i64,
}

/// Characters of one message a message list shows: a page of messages
/// stays near its byte bound whatever one message holds.
pub const MESSAGE_VIEW_CHARS: usize = 64 * 1024;

impl MessageView {
    fn of(message: store::StoredMessage) -> MessageView {
        let content_chars = message.content.chars().count();
        let content = match message.content.char_indices().nth(MESSAGE_VIEW_CHARS) {
            Some((end, _)) => message.content[..end].to_string(),
            None => message.content,
        };
        MessageView {
            request_id: message.request_id,
            seq: message.seq,
            message_index: message.message_index,
            role: message.role,
            content,
            content_chars,
            timestamp_ms: message.timestamp_ms,
            stored_at_ms: message.stored_at_ms,
        }
    }

    /// Where a list of messages goes on after this one.
    pub fn cursor(&self) -> ListCursor {
        ListCursor {
            last_seq: self.seq,
            key: self.message_index.to_string(),
        }
    }
}

/// At most `limit` messages of a user's session after `after`, in session
/// order, each handed to `sink` as it is read; answers where the next page
/// starts (`None` when nothing follows). A user being deleted, or a session
/// the user does not have, has none.
pub fn visit_session_messages(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
    after: Option<&ListCursor>,
    limit: usize,
    sink: &mut impl PageSink<MessageView>,
) -> Result<Option<ListCursor>, ReadError> {
    const ROWS_PER_READ: usize = 64;
    if store::user_deletion_pending(conn, user_id)? {
        return Ok(None);
    }
    // A made-up cursor whose key is no index places the walk at the
    // start of that Add.
    let mut position = after.map(|cursor| (cursor.last_seq, cursor.key.parse().unwrap_or(-1)));
    let mut read = 0usize;
    let mut last: Option<ListCursor> = after.cloned();
    loop {
        let wanted = (limit - read).min(ROWS_PER_READ);
        let rows = store::session_messages_page(conn, user_id, session_id, position, wanted + 1)?;
        let more = rows.len() > wanted;
        for row in rows.into_iter().take(wanted) {
            let view = MessageView::of(row);
            let cursor = view.cursor();
            position = Some((
                view.seq,
                i64::try_from(view.message_index).unwrap_or(i64::MAX),
            ));
            if !sink.accept(view) {
                return Ok(last);
            }
            last = Some(cursor);
            read += 1;
        }
        if !more {
            return Ok(None);
        }
        if read == limit {
            return Ok(last);
        }
    }
}

/// At most `limit` users holding sessions after `after`, most recently
/// active first.
pub fn users(
    conn: &StoreConn,
    after: Option<&ListCursor>,
    limit: usize,
) -> Result<Page<StoredUser>, ReadError> {
    let mut items = store::users(conn, after, limit.saturating_add(1))?;
    let more = items.len() > limit;
    items.truncate(limit);
    let next = items.last().filter(|_| more).map(StoredUser::cursor);
    Ok(Page { items, next })
}

/// One session's whole record with provenance; `None` when the user has no
/// such session.
pub fn session_detail(
    conn: &StoreConn,
    user_id: &UserId,
    session_id: &SessionId,
) -> Result<Option<SessionDetail>, ReadError> {
    if store::user_deletion_pending(conn, user_id)? {
        return Ok(None);
    }
    let Some(session) = store::session(conn, user_id, session_id)? else {
        return Ok(None);
    };
    let sources = store::session_message_sources(conn, user_id, session_id)?;
    SessionDetail::of(&session, sources).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use precedent_core::domain::testing::{sid, uid};

    fn stored(record_json: &str) -> StoredSession {
        StoredSession {
            user_id: uid("u"),
            session_id: sid("claude-code:s1"),
            record_json: record_json.to_string(),
            diagnostics_json: "[]".to_string(),
            num_messages: 4,
            last_seq: 7,
            // Imported a year after the session ran.
            updated_at_ms: 1_735_689_600_000,
            extractor_version: precedent_ingest::EXTRACTOR_VERSION,
        }
    }

    #[test]
    fn a_session_is_dated_by_its_latest_message_not_its_import() {
        let record = SessionRecord {
            task: "Fix parse_config".to_string(),
            last_message_at_ms: Some(1_704_067_320_000),
            ..SessionRecord::default()
        };
        let session = stored(&serde_json::to_string(&record).expect("json"));
        let summary = SessionSummary::of(&session).expect("summary");
        assert_eq!(summary.updated_at_ms, 1_704_067_320_000);
        let detail = SessionDetail::of(&session, Vec::new()).expect("detail");
        assert_eq!(detail.updated_at_ms, 1_704_067_320_000);
    }

    #[test]
    fn a_record_of_an_older_store_is_dated_by_its_derivation() {
        // A record as stores before message times kept it: no such field.
        let record = serde_json::json!({
            "task": "Fix parse_config", "language": null, "files_changed": [],
            "symbols_changed": [], "symbols_referenced": [], "errors": [],
            "tests": {"failing": [], "passing": []}, "commands": [],
            "outcome": {"final_diff": false, "tests_passed_at_end": null, "status": "unknown"},
            "evidence": []
        });
        let session = stored(&record.to_string());
        let summary = SessionSummary::of(&session).expect("summary");
        assert_eq!(summary.updated_at_ms, 1_735_689_600_000);
        let detail = SessionDetail::of(&session, Vec::new()).expect("detail");
        assert_eq!(detail.updated_at_ms, 1_735_689_600_000);
        assert_eq!(detail.record.last_message_at_ms, None);
    }

    /// Stores a one-message Add of `u1` in `session`; answers its sequence.
    fn stored_add(conn: &mut StoreConn, session: &str, index: i64) -> i64 {
        let request = precedent_core::domain::AddRequest::new(
            format!("r{index}"),
            "u1".to_string(),
            session.to_string(),
            vec![precedent_core::domain::Message {
                role: precedent_core::domain::Role::User,
                content: "x".to_string(),
                timestamp_ms: Some(1_700_000_000_000),
            }],
        )
        .expect("a valid Add");
        let tx = conn.transaction().expect("begin");
        let admission = store::admit(&tx, &request, &request.body_sha256(), 1_000).expect("admit");
        tx.commit().expect("commit");
        match admission {
            store::Admission::Inserted { seq } => seq,
            other => panic!("expected a new Add, got {other:?}"),
        }
    }

    /// `u1`'s session `session` as stored after `last_seq`.
    fn recorded(session: &str, last_seq: i64, updated_at_ms: i64) -> StoredSession {
        StoredSession {
            user_id: uid("u1"),
            session_id: sid(session),
            record_json: format!(r#"{{"task":"{session}","evidence":[1,2]}}"#),
            diagnostics_json: "[]".to_string(),
            num_messages: 2,
            last_seq,
            updated_at_ms,
            extractor_version: 3,
        }
    }

    /// A sink that takes `room` summaries, then has no room.
    struct FullAfter {
        room: usize,
        taken: Vec<String>,
    }

    impl PageSink<SessionSummary> for FullAfter {
        fn accept(&mut self, item: SessionSummary) -> bool {
            if self.taken.len() == self.room {
                return false;
            }
            self.taken.push(item.session_id);
            true
        }
    }

    /// Summaries handed to a sink that fills up: the page ends before the
    /// summary it refused, and the next page starts with that one, so a walk
    /// by the answered cursors gives each session once, whatever the room.
    #[test]
    fn summaries_end_where_the_sink_is_full() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut writer = store::open_writer(dir.path()).expect("store");
        let conn = &mut writer;
        let mut expected = Vec::new();
        for index in 0..9 {
            let session = format!("s{index}");
            let seq = stored_add(conn, &session, index);
            store::upsert_session(conn, recorded(&session, seq, index).row()).expect("upsert");
            expected.push(session);
        }
        expected.reverse();
        for room in 1..=4 {
            let mut listed = Vec::new();
            let mut after: Option<ListCursor> = None;
            for _ in 0..20 {
                let mut sink = FullAfter {
                    room,
                    taken: Vec::new(),
                };
                let next =
                    visit_session_summaries(conn, &uid("u1"), after.as_ref(), 1_000, &mut sink)
                        .unwrap();
                listed.extend(sink.taken);
                match next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            assert_eq!(listed, expected, "room for {room}");
        }
    }
}
