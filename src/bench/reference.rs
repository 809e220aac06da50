//! The reference memory `precedent bench scale` measures precedent against:
//! raw Add chunks in one SQLite FTS5 table, ranked by `bm25()` and filtered
//! by user, the way a typical text memory is built. It speaks the same
//! `POST /add` and `POST /search` as precedent (ids, messages, `top_k`) so
//! one client measures both, and it is as durable: WAL with
//! `synchronous=FULL`, one transaction per Add, answered after commit.
//!
//! Run as its own process (`precedent bench reference-server`, hidden) so
//! that its memory and start-up are measured the way precedent's are.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use rusqlite::{Connection, params};
use serde_json::{Value, json};

/// Query terms kept (precedent's query analysis keeps as many).
const MAX_QUERY_TERMS: usize = 128;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS requests (
    user_id    TEXT NOT NULL,
    request_id TEXT NOT NULL,
    PRIMARY KEY (user_id, request_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(
    content, user_id UNINDEXED, session_id UNINDEXED, request_id UNINDEXED,
    tokenize = 'unicode61'
);
";

struct Reference {
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    path: std::path::PathBuf,
}

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    Ok(conn)
}

/// Serves the reference memory on `listen` over the database in
/// `data_dir`; prints `listening on http://ADDR` on stderr once bound.
pub fn serve(data_dir: &Path, listen: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let path = data_dir.join("fts5.sqlite3");
    let writer = open(&path).context("cannot open the reference database")?;
    writer
        .execute_batch(SCHEMA)
        .context("cannot create the reference schema")?;
    let reference = Arc::new(Reference {
        writer: Mutex::new(writer),
        readers: Mutex::new(Vec::new()),
        path,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let app = Router::new()
            .route("/add", post(add))
            .route("/search", post(search))
            .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
            // The same body limit as precedent's, so that both take the
            // whole-trajectory and big-session Adds.
            .layer(axum::extract::DefaultBodyLimit::max(
                crate::api::DEFAULT_MAX_BODY_BYTES,
            ))
            .with_state(reference);
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let address: SocketAddr = listener.local_addr()?;
        eprintln!("fts5 reference listening on http://{address}");
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok(())
    })
}

type Answer = (StatusCode, Json<Value>);

fn refuse(status: StatusCode, reason: impl Into<String>) -> Answer {
    (status, Json(json!({"detail": {"reason": reason.into()}})))
}

async fn add(State(reference): State<Arc<Reference>>, Json(body): Json<Value>) -> Answer {
    let Some(request) = crate::api::dto::parse_add(&body).ok() else {
        return refuse(StatusCode::UNPROCESSABLE_ENTITY, "invalid Add");
    };
    let stored = tokio::task::spawn_blocking(move || -> rusqlite::Result<()> {
        let mut conn = reference
            .writer
            .lock()
            .map_err(|_| rusqlite::Error::InvalidQuery)?;
        let tx = conn.transaction()?;
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO requests (user_id, request_id) VALUES (?1, ?2)",
            params![request.user_id().as_str(), request.request_id().as_str()],
        )?;
        if inserted == 1 {
            let content: Vec<String> = request
                .messages()
                .iter()
                .map(|message| format!("{}: {}", message.role.as_str(), message.content))
                .collect();
            tx.execute(
                "INSERT INTO chunks (content, user_id, session_id, request_id) VALUES (?1, ?2, ?3, ?4)",
                params![content.join("\n"), request.user_id().as_str(), request.session_id().as_str(), request.request_id().as_str()],
            )?;
        }
        tx.commit()
    })
    .await;
    match stored {
        Ok(Ok(())) => (
            StatusCode::OK,
            Json(json!({"success": true, "request_id": body["request_id"],
                        "user_id": body["user_id"], "session_id": body["session_id"]})),
        ),
        _ => refuse(StatusCode::SERVICE_UNAVAILABLE, "store failed"),
    }
}

/// The query as FTS5 syntax: its distinct words, each quoted, OR-ed.
pub fn match_expression(query: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in query
        .split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        let word = word.to_lowercase();
        if !terms.contains(&word) {
            terms.push(word);
        }
        if terms.len() == MAX_QUERY_TERMS {
            break;
        }
    }
    (!terms.is_empty()).then(|| {
        terms
            .iter()
            .map(|term| format!("\"{term}\""))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

async fn search(State(reference): State<Arc<Reference>>, Json(body): Json<Value>) -> Answer {
    let Some(request) = crate::api::dto::parse_search(&body).ok() else {
        return refuse(StatusCode::UNPROCESSABLE_ENTITY, "invalid Search");
    };
    let found = tokio::task::spawn_blocking(move || -> rusqlite::Result<Vec<Value>> {
        let Some(expression) = match_expression(request.query()) else {
            return Ok(Vec::new());
        };
        let conn = match reference
            .readers
            .lock()
            .ok()
            .and_then(|mut idle| idle.pop())
        {
            Some(conn) => conn,
            None => open(&reference.path)?,
        };
        let rows = {
            let mut statement = conn.prepare_cached(
                "SELECT content, session_id, request_id, bm25(chunks) FROM chunks
                 WHERE chunks MATCH ?1 AND user_id = ?2 ORDER BY bm25(chunks) LIMIT ?3",
            )?;
            let rows = statement.query_map(
                params![
                    expression,
                    request.user_id().as_str(),
                    request.top_k() as i64
                ],
                |row| {
                    Ok(json!({
                        "content": row.get::<_, String>(0)?,
                        "session_id": row.get::<_, String>(1)?,
                        "request_id": row.get::<_, String>(2)?,
                        "score": -row.get::<_, f64>(3)?,
                    }))
                },
            )?;
            rows.collect::<rusqlite::Result<Vec<Value>>>()?
        };
        if let Ok(mut idle) = reference.readers.lock() {
            idle.push(conn);
        }
        Ok(rows)
    })
    .await;
    match found {
        Ok(Ok(rows)) => (StatusCode::OK, Json(json!({ "data": rows }))),
        _ => refuse(StatusCode::SERVICE_UNAVAILABLE, "search failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_become_quoted_distinct_terms() {
        assert_eq!(
            match_expression("Fix `parse_list`: the parser drops the comma; the Parser").as_deref(),
            Some(
                "\"fix\" OR \"parse\" OR \"list\" OR \"the\" OR \"parser\" OR \"drops\" OR \"comma\""
            )
        );
        assert_eq!(match_expression("  ;; "), None);
    }

    #[test]
    fn fts5_is_compiled_in_and_ranks_by_user() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = open(&dir.path().join("fts5.sqlite3")).expect("open");
        conn.execute_batch(SCHEMA).expect("schema");
        for (content, user) in [
            ("parser drops comma", "a"),
            ("parser drops comma", "b"),
            ("cache", "a"),
        ] {
            conn.execute(
                "INSERT INTO chunks (content, user_id, session_id, request_id) VALUES (?1, ?2, 's', 'r')",
                params![content, user],
            )
            .expect("insert");
        }
        let count: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM chunks WHERE chunks MATCH ?1 AND user_id = 'a'",
                params![match_expression("comma parser").expect("terms")],
                |row| row.get(0),
            )
            .expect("query");
        assert_eq!(count, 1);
    }
}
