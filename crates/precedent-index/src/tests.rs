//! Session search over one user's scope: the same candidates and scores as
//! tantivy's own `scope AND (term OR ...)` query with the scope's
//! statistics, and a remembered scope that follows every commit, replaced
//! record and forgotten user.

use std::collections::HashMap;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocSet, Term};

use super::search::bm25_idf;
use super::sessions::SessionCandidates;
use super::{DocKey, IndexWriterHandle, KIND_SESSION, ScopeCache, SearchIndex, SessionDoc, open};
use precedent_core::domain::SessionId;
use precedent_core::domain::testing::{key, sid, uid};

/// BM25 statistics of one scope, for tantivy's own query.
struct ScopeStatistics {
    num_docs: u64,
    num_tokens: u64,
    doc_freqs: HashMap<Term, u64>,
}

impl tantivy::query::Bm25StatisticsProvider for ScopeStatistics {
    fn total_num_tokens(&self, _field: tantivy::schema::Field) -> tantivy::Result<u64> {
        Ok(self.num_tokens)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.num_docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(self.doc_freqs.get(term).copied().unwrap_or(0))
    }
}

/// A tiny vocabulary, so that terms are shared, repeated and tied.
const WORDS: [&str; 12] = [
    "parser", "token", "overflow", "config", "merge", "panic", "index", "cache", "retry", "socket",
    "schema", "render",
];

/// Deterministic pseudo-random numbers (a linear congruential generator).
struct Numbers(u64);

impl Numbers {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % below
    }
}

fn session(user_id: &str, session_id: &str, text: &str) -> SessionDoc {
    SessionDoc {
        user_id: uid(user_id),
        session_id: sid(session_id),
        last_seq: 1,
        profile: format!("{{\"session\":\"{session_id}\"}}").into_bytes(),
        text: text.to_string(),
    }
}

fn terms(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| (*word).to_string()).collect()
}

fn commit(writer: &mut IndexWriterHandle, index: &SearchIndex, sessions: &[SessionDoc]) {
    let seq = writer.published_seq() + 1;
    writer
        .upsert_sessions(sessions.to_vec())
        .expect("queue sessions");
    writer.commit(seq, index).expect("commit");
}

fn search(index: &SearchIndex, user_id: &str, words: &[&str], limit: usize) -> SessionCandidates {
    index
        .search_sessions(&uid(user_id), &terms(words), limit, &|_: &DocKey| false)
        .expect("search")
}

/// A test profile's text (these tests store text as the profile's bytes).
fn profile_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The sessions a search found, by their profile's session id.
fn found_sessions(candidates: &SessionCandidates) -> Vec<String> {
    let mut sessions: Vec<String> = candidates
        .hits
        .iter()
        .filter_map(|hit| hit.profile.as_deref().map(profile_text))
        .collect();
    sessions.sort();
    sessions
}

/// Candidates as tantivy's own query finds them: the scope walked afresh,
/// each term's document frequency counted within it, then
/// `user AND session AND (term OR ...)` scored with those statistics.
fn reference_search(
    index: &SearchIndex,
    user_id: &str,
    words: &[&str],
    limit: usize,
) -> (u64, f32, Vec<(DocKey, u32, f32)>) {
    let searcher = index.view().searcher.clone();
    let scope_query = BooleanQuery::new(index.scoped(&uid(user_id), KIND_SESSION));
    let weight = scope_query
        .weight(tantivy::query::EnableScoring::disabled_from_searcher(
            &searcher,
        ))
        .expect("scope weight");
    let mut scope: Vec<Vec<u32>> = Vec::new();
    let mut num_tokens = 0u64;
    for segment in searcher.segment_readers() {
        let fieldnorms = segment
            .get_fieldnorms_reader(index.fields.session_text)
            .expect("fieldnorms");
        let mut scorer = weight.scorer(segment, 1.0).expect("scorer");
        let mut docs = Vec::new();
        let mut doc = scorer.doc();
        while doc != tantivy::TERMINATED {
            if segment
                .alive_bitset()
                .is_none_or(|alive| alive.is_alive(doc))
            {
                docs.push(doc);
                num_tokens += u64::from(fieldnorms.fieldnorm(doc));
            }
            doc = scorer.advance();
        }
        scope.push(docs);
    }
    let num_docs: u64 = scope.iter().map(|docs| docs.len() as u64).sum();
    let mut statistics = ScopeStatistics {
        num_docs,
        num_tokens,
        doc_freqs: HashMap::new(),
    };
    let mut holders: Vec<Vec<(u32, u32)>> = Vec::new();
    for word in words {
        let key = Term::from_field_text(index.fields.session_text, word);
        let mut held = Vec::new();
        for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
            let inverted = segment
                .inverted_index(index.fields.session_text)
                .expect("inverted index");
            let Some(mut postings) = inverted
                .read_postings(&key, IndexRecordOption::Basic)
                .expect("postings")
            else {
                continue;
            };
            let mut doc = postings.doc();
            while doc != tantivy::TERMINATED {
                if scope[segment_ord].contains(&doc) {
                    held.push((segment_ord as u32, doc));
                }
                doc = postings.advance();
            }
        }
        statistics.doc_freqs.insert(key, held.len() as u64);
        holders.push(held);
    }
    let idfs: Vec<f32> = holders
        .iter()
        .map(|held| bm25_idf(num_docs, held.len() as u64))
        .collect();
    let query_weight: f32 = idfs.iter().sum();
    let mut matched_weights: HashMap<(u32, u32), f32> = HashMap::new();
    for (held, idf) in holders.iter().zip(&idfs) {
        for address in held {
            *matched_weights.entry(*address).or_default() += idf;
        }
    }
    let should: Vec<(Occur, Box<dyn Query>)> = words
        .iter()
        .map(|word| {
            let query: Box<dyn Query> = Box::new(TermQuery::new(
                Term::from_field_text(index.fields.session_text, word),
                IndexRecordOption::WithFreqs,
            ));
            (Occur::Should, query)
        })
        .collect();
    let mut clauses = index.scoped(&uid(user_id), KIND_SESSION);
    clauses.push((Occur::Must, Box::new(BooleanQuery::new(should))));
    let top = searcher
        .search_with_statistics_provider(
            &BooleanQuery::new(clauses),
            &TopDocs::with_limit(limit).order_by_score(),
            &statistics,
        )
        .expect("reference search");
    let hits = top
        .into_iter()
        .map(|(score, address)| {
            let key = DocKey {
                segment: searcher.segment_reader(address.segment_ord).segment_id(),
                doc: address.doc_id,
            };
            let matched = matched_weights
                .get(&(address.segment_ord, address.doc_id))
                .copied()
                .unwrap_or(0.0);
            (key, score.to_bits(), matched)
        })
        .collect();
    (num_docs, query_weight, hits)
}

fn assert_same_as_reference(index: &SearchIndex, user_id: &str, words: &[&str], limit: usize) {
    // A background merge may publish a new view between the two searches;
    // they compare only when both read the same segments.
    let segments = || -> Vec<tantivy::index::SegmentId> {
        let searcher = index.view().searcher.clone();
        searcher
            .segment_readers()
            .iter()
            .map(|reader| reader.segment_id())
            .collect()
    };
    let (scope_size, query_weight, expected, found) = loop {
        let before = segments();
        let (scope_size, query_weight, expected) = reference_search(index, user_id, words, limit);
        let found = search(index, user_id, words, limit);
        if segments() == before {
            break (scope_size, query_weight, expected, found);
        }
    };
    assert_eq!(found.scope_size, scope_size, "{user_id} {words:?}");
    if scope_size > 0 {
        assert_eq!(
            found.query_weight.to_bits(),
            query_weight.to_bits(),
            "{user_id} {words:?}"
        );
    }
    let hits: Vec<(DocKey, u32, f32)> = found
        .hits
        .iter()
        .map(|hit| (hit.key, hit.text_score.to_bits(), hit.matched_weight))
        .collect();
    assert_eq!(hits, expected, "{user_id} {words:?} limit {limit}");
}

#[test]
fn session_search_scores_and_orders_exactly_as_tantivys_query() {
    // Three users: each holds a large share of every segment, so their
    // postings are read through the scope's bit set.
    let (_dir, index) = scores_and_orders_as_tantivy(&["ada", "bob", "cyd"]);
    assert!(num_scopes(&index, &["ada", "bob", "cyd"], true) > 0);
}

#[test]
fn sparse_scopes_score_and_order_exactly_as_tantivys_query() {
    // Many users: in merged segments each holds a small share, so their
    // postings are walked beside the scope's documents.
    let users: Vec<String> = (0..24).map(|user| format!("user{user}")).collect();
    let users: Vec<&str> = users.iter().map(String::as_str).collect();
    let (_dir, index) = scores_and_orders_as_tantivy(&users);
    assert!(num_scopes(&index, &users, false) > 0);
}

#[test]
fn postings_read_on_two_threads_score_and_order_exactly_as_tantivys_query() {
    super::sessions::READ_IN_PARALLEL_ALWAYS.store(true, std::sync::atomic::Ordering::Relaxed);
    scores_and_orders_as_tantivy(&["ada", "bob", "cyd"]);
    let users: Vec<String> = (0..24).map(|user| format!("user{user}")).collect();
    let users: Vec<&str> = users.iter().map(String::as_str).collect();
    scores_and_orders_as_tantivy(&users);
}

/// How many of the users' segment scopes are (or are not) kept dense.
fn num_scopes(index: &SearchIndex, users: &[&str], dense: bool) -> usize {
    let searcher = index.view().searcher.clone();
    users
        .iter()
        .map(|user| {
            let scope = index.scope_documents(&searcher, &uid(user)).expect("scope");
            scope
                .segments
                .iter()
                .filter(|segment| !segment.docs.is_empty() && segment.dense.is_some() == dense)
                .count()
        })
        .sum()
}

/// Commits rounds of session documents of `users` (many small commits, so
/// many segments, some merged; records replaced, so deletes; texts
/// repeated, so tied scores) and checks every search against tantivy's
/// own query as it goes; then forgets a session and checks again.
fn scores_and_orders_as_tantivy(users: &[&str]) -> (tempfile::TempDir, SearchIndex) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (index, mut writer, _) = open(dir.path()).expect("open index");
    let mut numbers = Numbers(7);
    for round in 0..40 {
        let mut batch = Vec::new();
        for _ in 0..1 + numbers.next(4) {
            let user = numbers.next(users.len());
            let session_number = numbers.next(30);
            let text = if numbers.next(5) == 0 {
                "parser token overflow".to_string()
            } else {
                let length = 1 + numbers.next(25);
                (0..length)
                    .map(|_| WORDS[numbers.next(WORDS.len())])
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            batch.push(session(
                users[user],
                &format!("s{session_number}"),
                &format!("{text} round{round}"),
            ));
        }
        commit(&mut writer, &index, &batch);
        if round % 7 == 6 {
            for user in users {
                for limit in [1, 3, 100] {
                    assert_same_as_reference(&index, user, &["parser", "overflow"], limit);
                    assert_same_as_reference(&index, user, &WORDS, limit);
                }
            }
        }
    }
    for user in users {
        for limit in [1, 2, 5, 10, 100] {
            for words in [
                &WORDS[..],
                &["token"][..],
                &["parser", "token", "overflow"][..],
                &["cache", "unknown", "retry", "panic"][..],
                &["round3", "schema"][..],
            ] {
                assert_same_as_reference(&index, user, words, limit);
            }
        }
    }
    writer
        .forget(&[], &[key(users[1], "s3")], &index)
        .expect("forget a session");
    for user in users {
        assert_same_as_reference(&index, user, &WORDS, 100);
    }
    drop(writer);
    (dir, index)
}

#[test]
fn a_remembered_scope_follows_commits_replaced_records_and_forgotten_users() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (index, mut writer, _) = open(dir.path()).expect("open index");
    commit(
        &mut writer,
        &index,
        &[
            session("ada", "one", "parser overflow"),
            session("ada", "two", "parser token"),
            session("bob", "one", "parser socket"),
        ],
    );
    let first = search(&index, "ada", &["parser"], 10);
    assert_eq!(first.scope_size, 2);
    assert_eq!(first.hits.len(), 2);
    let bob_before = search(&index, "bob", &["parser", "socket"], 10);

    // A new commit: a new segment the scope must include.
    commit(
        &mut writer,
        &index,
        &[session("ada", "three", "parser cache")],
    );
    let after_add = search(&index, "ada", &["parser"], 10);
    assert_eq!(after_add.scope_size, 3);
    assert_eq!(after_add.hits.len(), 3);
    assert_eq!(search(&index, "ada", &["cache"], 10).hits.len(), 1);

    // A replaced record: its old document deleted from its segment.
    commit(
        &mut writer,
        &index,
        &[session("ada", "one", "render schema")],
    );
    let after_replace = search(&index, "ada", &["parser"], 10);
    assert_eq!(after_replace.scope_size, 3);
    assert_eq!(
        found_sessions(&after_replace),
        vec![
            "{\"session\":\"three\"}".to_string(),
            "{\"session\":\"two\"}".to_string()
        ]
    );
    assert_eq!(search(&index, "ada", &["overflow"], 10).hits.len(), 0);

    // Another user's documents never enter ada's scope, nor ada's bob's.
    let bob_after = search(&index, "bob", &["parser", "socket"], 10);
    assert_eq!(bob_after.scope_size, 1);
    assert_eq!(
        bob_after.hits[0].text_score.to_bits(),
        bob_before.hits[0].text_score.to_bits()
    );

    // A forgotten user: nothing of theirs is seen again.
    writer
        .forget(&[uid("ada")], &[], &index)
        .expect("forget ada");
    let after_forget = search(&index, "ada", &["parser", "cache", "render"], 10);
    assert_eq!(after_forget.scope_size, 0);
    assert!(after_forget.hits.is_empty());
    assert_eq!(search(&index, "bob", &["parser"], 10).scope_size, 1);

    // Entries of segment states no reader holds are gone: one per user
    // searched and live segment at most.
    let num_segments = index.view().searcher.clone().segment_readers().len();
    let (num_entries, _) = index.scopes.usage();
    assert!(
        num_entries <= 2 * num_segments,
        "{num_entries} entries for {num_segments} segments"
    );
}

#[test]
fn scopes_beyond_the_cache_budget_are_computed_again_not_lost() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut index, mut writer, _) = open(dir.path()).expect("open index");
    let budget = 600;
    index.scopes = ScopeCache::new(budget);
    for round in 0..6usize {
        let sessions: Vec<SessionDoc> = ["ada", "bob", "cyd", "dan"]
            .iter()
            .map(|user| session(user, &format!("s{round}"), "parser token"))
            .collect();
        commit(&mut writer, &index, &sessions);
        for user in ["ada", "bob", "cyd", "dan"] {
            let found = search(&index, user, &["parser"], 100);
            assert_eq!(found.scope_size, round as u64 + 1);
            assert_eq!(found.hits.len(), round + 1);
            let (_, num_bytes) = index.scopes.usage();
            assert!(num_bytes <= budget, "{num_bytes} bytes held");
        }
    }
}

#[test]
fn a_search_on_an_older_reader_leaves_no_stale_scope_to_newer_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (index, mut writer, _) = open(dir.path()).expect("open index");
    commit(
        &mut writer,
        &index,
        &[
            session("ada", "one", "parser overflow"),
            session("ada", "two", "parser token"),
        ],
    );
    let older = index.view().searcher.clone();
    commit(
        &mut writer,
        &index,
        &[session("ada", "one", "render schema")],
    );
    assert_eq!(search(&index, "ada", &["parser"], 10).hits.len(), 1);
    // A search still holding the older reader remembers that reader's
    // scope (where "one" was alive) after the newer one was seen.
    let older_scope = index
        .scope_documents(&older, &uid("ada"))
        .expect("older scope");
    let older_sessions: usize = older_scope
        .segments
        .iter()
        .map(|segment| segment.is_part.iter().filter(|part| !**part).count())
        .sum();
    assert_eq!(older_sessions, 2);
    let newer = search(&index, "ada", &["parser"], 10);
    assert_eq!(newer.scope_size, 2);
    assert_eq!(
        found_sessions(&newer),
        vec!["{\"session\":\"two\"}".to_string()]
    );
}

#[test]
fn galloping_finds_the_first_document_at_or_after_the_target() {
    let mut numbers = Numbers(11);
    for _ in 0..200 {
        let mut docs: Vec<u32> = (0..numbers.next(40))
            .map(|_| numbers.next(200) as u32)
            .collect();
        docs.sort_unstable();
        docs.dedup();
        for position in 0..docs.len() {
            for target in docs[position] + 1..210 {
                let expected = position + docs[position..].partition_point(|doc| *doc < target);
                assert_eq!(
                    super::search::gallop_to(&docs, position, target),
                    expected,
                    "{docs:?} from {position} to {target}"
                );
            }
        }
    }
}

/// What a search answers, in a form that does not depend on where the
/// documents sit (segments or published batches): sessions by score then
/// profile, scores as bits; parts by score then Add.
type Answer = (
    u64,
    u32,
    Vec<String>,
    Vec<(String, u32, u32)>,
    Vec<(i64, f32)>,
);

fn answer(index: &SearchIndex, user_id: &str, words: &[&str]) -> Answer {
    let found = search(index, user_id, words, 1000);
    let mut sessions: Vec<(String, u32, u32)> = found
        .hits
        .iter()
        .map(|hit| {
            (
                hit.profile.as_deref().map(profile_text).unwrap_or_default(),
                hit.text_score.to_bits(),
                hit.matched_weight.to_bits(),
            )
        })
        .collect();
    sessions.sort_by(|left, right| {
        f32::from_bits(right.1)
            .total_cmp(&f32::from_bits(left.1))
            .then(left.0.cmp(&right.0))
    });
    let session_ids: Vec<String> = (0..30).map(|number| format!("s{number}")).collect();
    let session_refs: Vec<SessionId> = session_ids.iter().map(|id| sid(id)).collect();
    let mut messages: Vec<(i64, f32)> = index
        .search_parts_in(&uid(user_id), &session_refs, &terms(words), 1000)
        .expect("parts")
        .into_iter()
        .map(|hit| (hit.seq, hit.score))
        .collect();
    messages.sort_by(|left, right| right.1.total_cmp(&left.1).then(left.0.cmp(&right.0)));
    (
        found.scope_size,
        found.query_weight.to_bits(),
        found.rarest_terms,
        sessions,
        messages,
    )
}

fn message(
    message_id: i64,
    user_id: &str,
    session_id: &str,
    text: &str,
) -> precedent_store::StoredMessage {
    precedent_store::StoredMessage {
        message_id,
        seq: message_id,
        user_id: uid(user_id),
        session_id: sid(session_id),
        request_id: format!("r{message_id}"),
        message_index: 0,
        role: precedent_core::domain::Role::User,
        content: text.to_string(),
        timestamp_ms: None,
        stored_at_ms: 0,
    }
}

#[test]
fn published_documents_are_found_and_scored_as_their_commit_will_have_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (index, mut writer, _) = open(dir.path()).expect("open index");
    let users = ["ada", "bob"];
    let mut numbers = Numbers(11);
    let mut message_id = 0;
    let text = |numbers: &mut Numbers| {
        let length = 1 + numbers.next(25);
        (0..length)
            .map(|_| WORDS[numbers.next(WORDS.len())])
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Committed rounds, then published ones (records of sessions already
    // committed replaced, some twice), each with messages.
    for round in 0..16 {
        let mut sessions = Vec::new();
        let mut messages = Vec::new();
        for _ in 0..1 + numbers.next(4) {
            let user = users[numbers.next(users.len())];
            let session_id = format!("s{}", numbers.next(12));
            sessions.push(session(user, &session_id, &text(&mut numbers)));
            message_id += 1;
            messages.push(message(message_id, user, &session_id, &text(&mut numbers)));
        }
        // One record per session and turn, as the writer upserts them.
        sessions.sort_by(|left, right| {
            (&left.user_id, &left.session_id).cmp(&(&right.user_id, &right.session_id))
        });
        sessions.dedup_by(|left, right| {
            left.user_id == right.user_id && left.session_id == right.session_id
        });
        writer
            .add_messages(&messages, false)
            .expect("queue messages");
        writer.upsert_sessions(sessions).expect("queue sessions");
        let seq = writer.published_seq() + 1;
        if round < 10 {
            writer.commit(seq, &index).expect("commit");
        } else {
            writer.publish(seq, &index).expect("publish");
            assert_eq!(index.visible_seq(), seq);
        }
    }
    assert!(
        writer.commit_due_in().is_some(),
        "documents wait for their commit"
    );
    let queries: [&[&str]; 4] = [
        &WORDS[..],
        &["token"][..],
        &["parser", "token", "overflow"][..],
        &["cache", "unknown", "retry", "panic"][..],
    ];
    let published: Vec<Answer> = users
        .iter()
        .flat_map(|user| queries.iter().map(|words| answer(&index, user, words)))
        .collect();
    let num_docs = index.num_docs();
    let seq = writer.published_seq();
    writer.commit(seq, &index).expect("commit");
    assert_eq!(writer.commit_due_in(), None);
    assert_eq!(index.num_docs(), num_docs, "documents visible");
    let committed: Vec<Answer> = users
        .iter()
        .flat_map(|user| queries.iter().map(|words| answer(&index, user, words)))
        .collect();
    for (published, committed) in published.iter().zip(&committed) {
        assert_eq!(published.0, committed.0, "scope size");
        assert_eq!(published.1, committed.1, "query weight");
        assert_eq!(published.2, committed.2, "rarest terms");
        assert_eq!(published.3, committed.3, "sessions");
        // Parts are scored with tantivy's statistics over the whole
        // index, which count deleted documents until a merge drops them: a
        // merge that lands between the two views moves every score a
        // little. The same parts match, with about the same scores.
        let ids = |messages: &[(i64, f32)]| {
            let mut ids: Vec<i64> = messages.iter().map(|message| message.0).collect();
            ids.sort_unstable();
            ids
        };
        assert_eq!(ids(&published.4), ids(&committed.4), "messages");
        for (id, score) in &published.4 {
            let Some((_, committed_score)) = committed.4.iter().find(|other| other.0 == *id) else {
                continue;
            };
            assert!(
                (score - committed_score).abs() <= 0.1 * committed_score.abs(),
                "part of Add {id}: {score} published, {committed_score} committed"
            );
        }
    }
    assert!(
        published
            .iter()
            .any(|answer| !answer.3.is_empty() && !answer.4.is_empty())
    );
}

#[test]
fn a_rollback_takes_published_documents_back_to_the_last_commit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (index, mut writer, _) = open(dir.path()).expect("open index");
    commit(&mut writer, &index, &[session("ada", "s1", "parser token")]);
    writer
        .upsert_sessions(vec![session("ada", "s2", "parser overflow")])
        .expect("queue");
    writer.publish(2, &index).expect("publish");
    assert_eq!(writer.published_seq(), 2);
    assert_eq!(search(&index, "ada", &["parser"], 10).scope_size, 2);
    writer.rollback().expect("rollback");
    // A catch-up indexes again from the last commit.
    assert_eq!(writer.published_seq(), 1);
}

#[test]
fn a_session_scores_as_one_text_of_its_document_and_its_parts() {
    // Texts short enough that tantivy encodes every length exactly: the
    // sum of the parts' lengths is then the whole text's.
    let whole_dir = tempfile::tempdir().expect("temp dir");
    let split_dir = tempfile::tempdir().expect("temp dir");
    let (whole, mut whole_writer, _) = open(whole_dir.path()).expect("open index");
    let (split, mut split_writer, _) = open(split_dir.path()).expect("open index");
    let mut numbers = Numbers(5);
    let mut seq = 0;
    for session_number in 0..12 {
        let session_id = format!("s{session_number}");
        let mut pieces: Vec<String> = Vec::new();
        for _ in 0..1 + numbers.next(4) {
            let length = 1 + numbers.next(8);
            pieces.push(
                (0..length)
                    .map(|_| WORDS[numbers.next(WORDS.len())])
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        let whole_text = pieces.join(" ");
        commit(
            &mut whole_writer,
            &whole,
            &[session("ada", &session_id, &whole_text)],
        );
        // The first piece is the session document's, each other one an
        // Add's part; some committed, the last sessions only published.
        let messages: Vec<precedent_store::StoredMessage> = pieces[1..]
            .iter()
            .map(|piece| {
                seq += 1;
                message(seq, "ada", &session_id, piece)
            })
            .collect();
        split_writer
            .add_messages(&messages, false)
            .expect("queue parts");
        split_writer
            .upsert_sessions(vec![session("ada", &session_id, &pieces[0])])
            .expect("queue session");
        let next = split_writer.published_seq() + 1;
        if session_number < 8 {
            split_writer.commit(next, &split).expect("commit");
        } else {
            split_writer.publish(next, &split).expect("publish");
        }
    }
    for words in [
        &WORDS[..],
        &["token"][..],
        &["parser", "token", "overflow"][..],
        &["cache", "unknown", "retry", "panic"][..],
    ] {
        let whole_answer = answer(&whole, "ada", words);
        let split_answer = answer(&split, "ada", words);
        assert_eq!(whole_answer.0, split_answer.0, "scope size {words:?}");
        assert_eq!(whole_answer.1, split_answer.1, "query weight {words:?}");
        assert_eq!(whole_answer.2, split_answer.2, "rarest terms {words:?}");
        assert_eq!(whole_answer.3, split_answer.3, "sessions {words:?}");
        assert!(!split_answer.3.is_empty());
    }
}
