//! scope: which memory a command works in when no `--user-id` names one.
//!
//! One memory per repository: the key is the repository's `origin` remote,
//! normalised (scheme, credentials and `.git` dropped, lowercased, so that
//! `https://github.com/Acme/Inventory.git` and `git@github.com:acme/inventory`
//! are one key, `github.com/acme/inventory`), else the repository's root
//! path, canonicalised. `mcp`, `import`, `search` and `inspect` all derive
//! it here, so a history imported in a repository is the memory an agent
//! working there searches.
//!
//! What it leaves to others: which directory stands for a command (the
//! working directory, an imported repository, a transcript's recorded
//! working directory) is the caller's choice.

use std::path::Path;

/// Why no key could be derived.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// The directory is in no git repository.
    #[error(
        "{0} is not inside a git repository: give the memory's key with --user-id (or run the command inside the repository)"
    )]
    NotARepository(String),
}

/// The key of the git repository enclosing `directory`.
pub fn of_directory(directory: &Path) -> Result<String, ScopeError> {
    repository_scope(directory)
        .ok_or_else(|| ScopeError::NotARepository(directory.display().to_string()))
}

/// The key of the working directory's repository.
pub fn of_working_directory() -> Result<String, ScopeError> {
    let directory = std::env::current_dir()
        .map_err(|error| ScopeError::NotARepository(format!("the working directory ({error})")))?;
    of_directory(&directory)
}

/// The key of the git repository enclosing `directory`: its `origin`
/// remote normalised (`github.com/owner/name`), or else the repository's
/// root path; `None` outside any repository.
pub fn repository_scope(directory: &Path) -> Option<String> {
    let repository = git2::Repository::discover(directory).ok()?;
    let remote_url = repository
        .find_remote("origin")
        .ok()
        .and_then(|remote| remote.url().ok().map(str::to_string));
    if let Some(scope) = remote_url.as_deref().and_then(normalize_remote) {
        return Some(scope);
    }
    let root = repository.workdir().unwrap_or_else(|| repository.path());
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    Some(root.to_string_lossy().trim_end_matches('/').to_string())
}

/// `https://user:token@github.com/owner/name.git`, `git@github.com:owner/name`
/// and `ssh://git@github.com/owner/name` all become `github.com/owner/name`;
/// host and path are lowercased (hosting services compare them without
/// case). Every credential form is left out: a user and password (even one
/// holding `/`), `user:token@host:path`, and a query or fragment
/// (`?access_token=`). One `.git` suffix, in any case, is taken off. A
/// local path (`/srv/git/project.git`) is no remote: `None`.
fn normalize_remote(url: &str) -> Option<String> {
    let url = url.trim();
    let url = url.split(['?', '#']).next().unwrap_or(url);
    let address = match url.split_once("://") {
        Some((_, rest)) => without_userinfo(rest).to_string(),
        // scp-like syntax: `[user[:password]@]host:path`.
        None => {
            let rest = without_userinfo(url);
            match rest.split_once(':') {
                Some((host, path)) if !host.is_empty() && !host.contains('/') => {
                    format!("{host}/{}", path.trim_start_matches('/'))
                }
                _ => return None,
            }
        }
    };
    let (host, path) = address.split_once('/')?;
    let host = host.to_lowercase();
    let path = path.trim_end_matches('/').to_lowercase();
    let path = path.strip_suffix(".git").unwrap_or(&path);
    if host.is_empty() || path.is_empty() {
        return None;
    }
    Some(format!("{host}/{path}"))
}

/// An address without the `user[:password]@` before its host. The host is
/// what follows the last `@` that comes before the path: a password may
/// hold `/` or `@` unescaped, a path rarely holds `@` before a `/`.
fn without_userinfo(address: &str) -> &str {
    let mut rest = address;
    while let Some(at) = rest.find('@') {
        let after = &rest[at + 1..];
        // The text after this `@` up to the next `/` or `:` must look like
        // a host name for this to be the end of the credentials.
        let host = after.split(['/', ':']).next().unwrap_or("");
        let looks_like_host = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']'));
        let later_at = after.find('@');
        let next_slash = after.find('/');
        // Another `@` before the path: that one ends the credentials.
        let another_first = matches!((later_at, next_slash), (Some(a), Some(s)) if a < s)
            || (later_at.is_some() && next_slash.is_none());
        if looks_like_host && !another_first {
            return after;
        }
        rest = after;
    }
    address
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_become_one_scope_whatever_their_form() {
        for url in [
            "https://github.com/owner/name.git",
            "https://user:token@github.com/owner/name",
            "git@github.com:owner/name.git",
            "ssh://git@github.com/owner/name.git",
            "https://github.com/owner/name/",
        ] {
            assert_eq!(
                normalize_remote(url).as_deref(),
                Some("github.com/owner/name"),
                "{url}"
            );
        }
        assert_eq!(normalize_remote("/srv/git/project.git"), None);
    }

    #[test]
    fn no_credential_form_stays_in_the_key_and_git_suffixes_go_once() {
        for url in [
            "https://github.com/owner/name.git?access_token=ghp_secret",
            "https://user:pa/ss@github.com/owner/name.git",
            "https://user:p@ss@github.com/owner/name",
            "user:tok@github.com:owner/name.git",
            "https://x-access-token:ghs_secret@github.com/owner/name.git#frag",
            "https://github.com/Owner/Name.GIT",
        ] {
            let key = normalize_remote(url);
            assert_eq!(key.as_deref(), Some("github.com/owner/name"), "{url}");
        }
        assert_eq!(
            normalize_remote("https://github.com/owner/x.git.git").as_deref(),
            Some("github.com/owner/x.git")
        );
        assert_ne!(
            normalize_remote("https://github.com/owner/x/.git"),
            normalize_remote("https://github.com/owner/x")
        );
    }

    #[test]
    fn remotes_differing_only_in_case_are_one_scope() {
        assert_eq!(
            normalize_remote("https://GitHub.com/Acme/Inventory.git"),
            normalize_remote("git@github.com:acme/inventory")
        );
    }

    #[test]
    fn a_repository_without_origin_is_keyed_by_its_canonical_root() {
        let dir = tempfile::tempdir().expect("temp dir");
        git2::Repository::init(dir.path()).expect("init");
        let nested = dir.path().join("src");
        std::fs::create_dir(&nested).expect("mkdir");
        let root = dir.path().canonicalize().expect("canonical");
        assert_eq!(
            repository_scope(&nested).as_deref(),
            Some(root.to_string_lossy().as_ref())
        );
    }
}
