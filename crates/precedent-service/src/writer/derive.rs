//! What `derive` does as the writer: an Add admitted with its session's
//! record inside the writer's transaction (the admission truth, see the
//! module `writer`), records derived again stored, and the index brought
//! up to what the store holds (at start-up, after a failed index turn, and
//! for the sessions re-derived without an Add).

use std::collections::BTreeMap;

use super::Writer;
use crate::ServiceError;
use crate::derive::{
    Derived, EXTRACTOR_VERSION, Fit, Rederived, TooLarge, check_size, derive_session, session_doc,
};
use precedent_core::domain::{AddRequest, SessionKey};
use precedent_core::time::now_ms;
use precedent_index::SessionDoc;
use precedent_store::{self as store, Admission, SessionRow, StoreConn, StoreTx};

/// What the writer made of one Add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Stored now, stored before, or a conflict.
    Admission(Admission),
    /// Over the session's size limit: nothing stored.
    TooLarge(TooLarge),
    /// Its session moved on since the record was derived: nothing stored,
    /// derive again.
    Stale,
}

/// Stores one Add with its session's record inside the writer's
/// transaction: from `derived` when it is still current, derived here from
/// all the session's messages when there is none. The checks here decide:
/// those made before the writer were a fast path.
pub(super) fn admit_with_record(
    tx: &StoreTx<'_>,
    request: &AddRequest,
    derived: Option<&Derived>,
    max_session_bytes: i64,
    stored_at_ms: i64,
) -> Result<Verdict, ServiceError> {
    // Hashed once per request, by whichever asks first (`prepare`, on the
    // extraction pool, unless the writer derives the record itself).
    let body_sha256 = request.body_sha256();
    if let Some(prior) = store::prior_admission(tx, request, &body_sha256)? {
        return Ok(Verdict::Admission(prior));
    }
    if let Fit::TooLarge(too_large) = check_size(tx, request, max_session_bytes)? {
        return Ok(Verdict::TooLarge(too_large));
    }
    if let Some(derived) = derived
        && store::session_last_seq(tx, request.user_id(), request.session_id())?
            != derived.base_last_seq
    {
        return Ok(Verdict::Stale);
    }
    let admission = store::admit(tx, request, &body_sha256, stored_at_ms)?;
    if let Admission::Inserted { seq } = admission {
        match derived {
            Some(derived) => store::upsert_session(
                tx,
                SessionRow {
                    user_id: request.user_id(),
                    session_id: request.session_id(),
                    record_json: &derived.record_json,
                    diagnostics_json: &derived.diagnostics_json,
                    num_messages: derived.num_messages,
                    last_seq: seq,
                    updated_at_ms: stored_at_ms,
                    extractor_version: EXTRACTOR_VERSION,
                },
            )?,
            None => derive_session(tx, request.user_id(), request.session_id(), stored_at_ms)?,
        }
    }
    Ok(Verdict::Admission(admission))
}

/// Stores re-derived records whose sessions did not move on, inside the
/// writer's transaction, and marks them for the index. Answers how many it
/// stored.
fn store_rederived(tx: &StoreTx<'_>, sessions: &[Rederived]) -> Result<usize, ServiceError> {
    let keys: Vec<_> = sessions
        .iter()
        .map(|session| (&session.user_id, &session.session_id))
        .collect();
    store::lock_sessions(tx, &keys)?;
    let mut stored = 0;
    for session in sessions {
        if store::session_last_seq(tx, &session.user_id, &session.session_id)?
            != session.derived.base_last_seq
        {
            // An Add landed since: it derived the record with this
            // extractor already (or the session is gone).
            continue;
        }
        store::upsert_session(
            tx,
            SessionRow {
                user_id: &session.user_id,
                session_id: &session.session_id,
                record_json: &session.derived.record_json,
                diagnostics_json: &session.derived.diagnostics_json,
                num_messages: session.derived.num_messages,
                last_seq: session.derived.base_last_seq,
                updated_at_ms: session.updated_at_ms,
                extractor_version: EXTRACTOR_VERSION,
            },
        )?;
        store::mark_session_for_index(tx, &session.user_id, &session.session_id)?;
        stored += 1;
    }
    Ok(stored)
}

impl Writer {
    /// Stores records derived again for sessions that did not move on,
    /// then replaces their index documents.
    pub(super) fn rederived(&mut self, sessions: &[Rederived]) -> Result<usize, ServiceError> {
        let tx = self.conn.transaction()?;
        let stored = store_rederived(&tx, sessions)?;
        tx.commit()?;
        self.index_rederived()?;
        Ok(stored)
    }

    /// Indexes every Add the store holds past the index's published
    /// sequence number, in groups, committing each (replacing what the
    /// index holds of those Adds past its last commit), then the sessions
    /// re-derived without an Add. Returns how many Adds it indexed.
    pub(super) fn catch_up(&mut self) -> Result<usize, ServiceError> {
        const ADDS_PER_COMMIT: usize = 512;
        let mut num_adds = 0;
        loop {
            let after = self.index.published_seq();
            let messages = store::messages_after(&self.conn, after, ADDS_PER_COMMIT)?;
            let Some(last) = messages.last() else {
                break;
            };
            let last_seq = last.seq;
            num_adds += store::num_adds(&messages);
            let mut sessions: Vec<SessionDoc> = Vec::new();
            for session in store::sessions_changed_between(&self.conn, after, last_seq)? {
                sessions.extend(session_doc(&self.conn, session)?);
            }
            let indexed = self
                .index
                .add_messages(&messages, true)
                .and_then(|()| self.index.upsert_sessions(sessions))
                .and_then(|()| self.index.commit(last_seq, &self.search_index));
            self.roll_back_on_error(indexed)?;
        }
        self.index_rederived()?;
        Ok(num_adds)
    }

    /// Replaces the index documents of the sessions re-derived without an
    /// Add, committed, then clears their marks.
    fn index_rederived(&mut self) -> Result<(), ServiceError> {
        let pending = store::sessions_pending_index(&self.conn)?;
        if pending.is_empty() {
            return Ok(());
        }
        let mut sessions = Vec::with_capacity(pending.len());
        for session in pending {
            sessions.extend(session_doc(&self.conn, session)?);
        }
        let published_seq = self.index.published_seq();
        let indexed = self
            .index
            .upsert_sessions(sessions)
            .and_then(|()| self.index.commit(published_seq, &self.search_index));
        self.roll_back_on_error(indexed)?;
        store::clear_sessions_pending_index(&self.conn)?;
        Ok(())
    }
}

/// The index documents of these `(user_id, session_id)` sessions' current
/// records: the one given, else the stored record's (sessions gone are left
/// out).
pub(super) fn session_docs(
    conn: &StoreConn,
    sessions: BTreeMap<SessionKey, Option<SessionDoc>>,
) -> Result<Vec<SessionDoc>, ServiceError> {
    let mut docs = Vec::with_capacity(sessions.len());
    for (
        SessionKey {
            user_id,
            session_id,
        },
        doc,
    ) in sessions
    {
        if let Some(doc) = doc {
            docs.push(doc);
        } else if let Some(session) = store::session(conn, &user_id, &session_id)? {
            docs.extend(session_doc(conn, session)?);
        }
    }
    Ok(docs)
}

/// Derives the records of sessions stored without one (messages of an
/// earlier run whose record was never stored).
pub(super) fn derive_missing(conn: &mut StoreConn) -> Result<(), ServiceError> {
    let missing = store::sessions_missing(conn)?;
    if missing.is_empty() {
        return Ok(());
    }
    let tx = conn.transaction()?;
    for key in &missing {
        derive_session(&tx, &key.user_id, &key.session_id, now_ms())?;
    }
    tx.commit()?;
    tracing::info!(
        num_sessions = missing.len(),
        "derived records of earlier sessions"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::{ExtractorCache, Preparation, Prepared, prepare_add};
    use precedent_core::domain::testing::{sid, uid};
    use precedent_core::domain::{Message, Role};

    fn message(role: Role, content: &str) -> Message {
        Message {
            role,
            content: content.to_string(),
            timestamp_ms: Some(1_700_000_000_000),
        }
    }

    /// The index document an Add carries from its derivation is the one the
    /// stored record gives, for a first Add and for one after it.
    #[test]
    fn an_adds_document_is_the_stored_records_document() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut conn = store::open_writer(dir.path()).expect("store");
        let cache = ExtractorCache::new(1024 * 1024);
        let turns = [
            vec![
                message(
                    Role::User,
                    "Fix the crash in src/parser.rs when the input ends early",
                ),
                message(
                    Role::Assistant,
                    "Running the tests.\n$ cargo test parser\nthread 'parser::tests::eof' panicked at src/parser.rs:42:9:\ncalled `Option::unwrap()` on a `None` value\ntest parser::tests::eof ... FAILED",
                ),
            ],
            vec![message(
                Role::Assistant,
                "--- a/src/parser.rs\n+++ b/src/parser.rs\n@@ -40,3 +40,3 @@ fn next_token(&mut self) -> Option<Token> {\n-        let byte = self.input.get(self.at).unwrap();\n+        let byte = self.input.get(self.at)?;\n         self.at += 1;\n$ cargo test parser\ntest parser::tests::eof ... ok",
            )],
        ];
        for (number, messages) in turns.into_iter().enumerate() {
            let request = AddRequest::new(
                format!("r{number}"),
                "ada".to_string(),
                "s1".to_string(),
                messages,
            )
            .expect("a valid Add");
            let preparation =
                prepare_add(&conn, &cache, &request, &request.body_sha256(), i64::MAX)
                    .expect("prepared");
            let Preparation::Ready(prepared) = preparation else {
                panic!("fits");
            };
            let Prepared::Derived { derived, .. } = prepared else {
                panic!("a new Add is derived");
            };
            let stored_at_ms = 1_700_000_000_500 + number as i64;
            let tx = conn.transaction().expect("transaction");
            let verdict = admit_with_record(
                &tx,
                &request,
                Some(&derived.derived),
                i64::MAX,
                stored_at_ms,
            )
            .expect("admitted");
            tx.commit().expect("commit");
            let Verdict::Admission(Admission::Inserted { seq }) = verdict else {
                panic!("stored: {verdict:?}");
            };
            let stored = store::session(&conn, &uid("ada"), &sid("s1"))
                .expect("read")
                .expect("stored session");
            let from_store = session_doc(&conn, stored).expect("document");
            let carried = derived.into_session_doc(&uid("ada"), &sid("s1"), seq, stored_at_ms);
            assert!(carried.is_some());
            assert_eq!(carried, from_store);
        }
    }
}
