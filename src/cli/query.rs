//! The commands that read a data directory directly, without a service
//! (which works while a server holds it): `inspect` and `search`.

use anyhow::Context;

use super::{InspectArgs, SearchArgs, print_out, render};
use crate::api;
use precedent_core::domain::{SearchRequest, SessionId, UserId};
use precedent_service::read::inspect;
use precedent_service::read::search::Searcher;

pub(super) fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let user_id = super::memory_key(args.user_id.as_deref(), None)?;
    let location = args.storage.location()?;
    match location.try_exists() {
        Ok(true) => {}
        Ok(false) => anyhow::bail!(
            "no precedent store at {} (expected {})",
            args.storage.data_dir().display(),
            location.describe()
        ),
        Err(error) => anyhow::bail!(
            "cannot read the data directory {}: {error}",
            args.storage.data_dir().display()
        ),
    }
    let conn = location.open_reader()?;
    // An id that fails the check names no stored user.
    let user_id = match UserId::new(user_id.as_str()) {
        Ok(checked) if precedent_store::user_state(&conn, &checked)?.last_seq > 0 => checked,
        _ => {
            let users = inspect::users(&conn, None, USERS_NAMED)?;
            anyhow::bail!("{}", unknown_user_message(&user_id, &users));
        }
    };
    let mut out = String::new();
    match &args.session {
        None => {
            let summaries = all_summaries(&conn, &user_id)?;
            if args.json {
                let data: Vec<api::dto::SessionSummaryDto> =
                    summaries.into_iter().map(Into::into).collect();
                out = serde_json::to_string_pretty(&serde_json::json!({ "data": data }))?;
            } else {
                render::write_summaries(&mut out, &user_id, &summaries);
            }
        }
        Some(session_id) => {
            // An id that fails the check names no stored session.
            let detail = match SessionId::new(session_id.as_str()) {
                Ok(checked) => inspect::session_detail(&conn, &user_id, &checked)?,
                Err(_) => None,
            };
            let detail = detail.with_context(|| {
                format!("user {:?} has no session {session_id:?}", user_id.as_str())
            })?;
            if args.json {
                out = serde_json::to_string_pretty(&api::dto::session_detail_json(&detail))?;
            } else {
                render::write_detail(&mut out, &detail);
            }
        }
    }
    print_out(out.trim_end());
    Ok(())
}

/// Every session summary of a user, read page by page.
fn all_summaries(
    conn: &precedent_store::StoreConn,
    user_id: &UserId,
) -> anyhow::Result<Vec<inspect::SessionSummary>> {
    let mut summaries = Vec::new();
    let mut after = None;
    loop {
        let page = inspect::session_summaries(
            conn,
            user_id,
            after.as_ref(),
            api::listing::MAX_PAGE_LIMIT,
        )?;
        summaries.extend(page.items);
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(summaries),
        }
    }
}

/// Users named when a user id holds nothing.
const USERS_NAMED: usize = 5;

/// When `user_id` holds nothing in this store: why, naming some of the
/// users that do (a misspelt id is not "nothing passes the gate").
fn unknown_user(searcher: &Searcher, user_id: &UserId) -> anyhow::Result<Option<String>> {
    let found = searcher.with_reader(|conn| {
        if precedent_store::user_state(conn, user_id)?.last_seq > 0 {
            return Ok(None);
        }
        Ok(Some(inspect::users(conn, None, USERS_NAMED)?))
    })?;
    Ok(found.map(|users| unknown_user_message(user_id, &users)))
}

fn unknown_user_message(
    user_id: &str,
    users: &inspect::Page<precedent_store::StoredUser>,
) -> String {
    if users.items.is_empty() {
        return format!("no memory for {user_id:?} yet: this store holds nothing");
    }
    let named: Vec<String> = users
        .items
        .iter()
        .map(|user| format!("{:?}", user.user_id.as_str()))
        .collect();
    let more = if users.next.is_some() { ", ..." } else { "" };
    format!(
        "no memory for {user_id:?} in this store (keys are exact: --user-id, or the repository's \
         lowercased origin); it holds {}{more}",
        named.join(", ")
    )
}

pub(super) fn search(args: SearchArgs) -> anyhow::Result<()> {
    if args.query.trim().is_empty() {
        anyhow::bail!("the query is empty");
    }
    let user_id = match args.all {
        true => None,
        false => Some(super::memory_key(args.user_id.as_deref(), None)?),
    };
    let location = args.storage.location()?;
    let searcher =
        Searcher::open_read_only_at(args.storage.data_dir(), location, args.budget.search_budget)
            .with_context(|| format!("cannot search {}", args.storage.data_dir().display()))?;
    let Some(user_id) = user_id else {
        return search_all(&searcher, &args);
    };
    let user_id =
        UserId::new(user_id).map_err(|invalid| anyhow::anyhow!("invalid search: {invalid}"))?;
    let request = search_request(&args, &user_id)?;
    if let Some(unknown) = unknown_user(&searcher, &user_id)? {
        anyhow::bail!("{unknown}");
    }
    let mut out = String::new();
    if args.explain {
        let explained = searcher.explain(&request)?;
        if args.json {
            out = serde_json::to_string_pretty(&explained)?;
        } else {
            render::write_explained(&mut out, &explained);
        }
    } else {
        let items = searcher.search(&request)?;
        if args.json {
            let data: Vec<api::dto::ItemDto> = items.into_iter().map(Into::into).collect();
            out = serde_json::to_string_pretty(&serde_json::json!({ "data": data }))?;
        } else if items.is_empty() {
            out.push_str("nothing stored passes the noise gate for this query (try --explain)");
        } else {
            render::write_items(&mut out, &items);
        }
    }
    print_out(out.trim_end());
    Ok(())
}

/// `search --all`: the query in every memory of the store, one search
/// each, the items merged by score (each names its memory).
fn search_all(searcher: &Searcher, args: &SearchArgs) -> anyhow::Result<()> {
    let mut user_ids = Vec::new();
    let mut after = None;
    loop {
        let page = searcher.with_reader(|conn| {
            inspect::users(conn, after.as_ref(), api::listing::MAX_PAGE_LIMIT)
        })?;
        user_ids.extend(page.items.into_iter().map(|user| user.user_id));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    if user_ids.is_empty() {
        anyhow::bail!("this store holds no memory yet");
    }
    let mut found: Vec<(String, precedent_core::domain::MemoryItem)> = Vec::new();
    for user_id in user_ids {
        let request = search_request(args, &user_id)?;
        found.extend(
            searcher
                .search(&request)?
                .into_iter()
                .map(|item| (user_id.to_string(), item)),
        );
    }
    found.sort_by(|left, right| right.1.score.total_cmp(&left.1.score));
    found.truncate(args.top_k as usize);
    let mut out = String::new();
    if args.json {
        let data: Vec<serde_json::Value> = found
            .into_iter()
            .map(|(user_id, item)| {
                let mut value = serde_json::to_value(api::dto::ItemDto::from(item))
                    .unwrap_or(serde_json::Value::Null);
                value["user_id"] = serde_json::Value::String(user_id);
                value
            })
            .collect();
        out = serde_json::to_string_pretty(&serde_json::json!({ "data": data }))?;
    } else if found.is_empty() {
        out.push_str("nothing stored in any memory passes the noise gate for this query");
    } else {
        render::write_items_of_memories(&mut out, &found);
    }
    print_out(out.trim_end());
    Ok(())
}

/// The checkout `--repo` names: its work tree's root, wherever in it the
/// path points.
fn checkout_of(args: &SearchArgs) -> Option<std::path::PathBuf> {
    args.repo.as_deref().map(|path| {
        crate::mcp::checkout_root(path)
            .or_else(|| std::path::absolute(path).ok())
            .unwrap_or_else(|| path.to_path_buf())
    })
}

/// The Search `args` ask for in `user_id`'s memory, built through the
/// contract's checks.
fn search_request(args: &SearchArgs, user_id: &UserId) -> anyhow::Result<SearchRequest> {
    SearchRequest::new(
        args.query.clone(),
        user_id.to_string(),
        args.top_k as usize,
        Some(args.budget.search_budget),
        checkout_of(args),
    )
    .map_err(|invalid| anyhow::anyhow!("invalid search: {invalid}"))
}
