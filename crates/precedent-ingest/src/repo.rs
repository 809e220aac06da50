//! The repository root of a session: "in which directory is the work, and
//! what is this path relative to it?"
//!
//! The root comes from what the session shows: the working directory the
//! transcript names (an `<environment_context><cwd>DIR</cwd>` prefix, which
//! the importers write for Claude Code and Codex), the directory a task's
//! wrapper names (`<uploaded_files>`), sandbox roots (`/testbed`,
//! `/workspace/<name>`), the targets of `cd` and `git -C` commands, and the
//! common directory of the files the session both viewed and edited. This
//! module holds the pure rules (where a path falls, which candidate is the
//! root); following a session's messages is left to [`super::edits`].

/// Sandbox roots that agents' paths start with.
pub const SANDBOX_ROOTS: &[&str] = &["/testbed/", "/repo/", "/app/", "/code/", "/src/repo/"];
/// Directory candidates kept per session.
pub const MAX_CANDIDATES: usize = 16;
/// Directories that are never a repository's root (a scratch directory, a
/// home, the file system's root).
const NOT_ROOTS: &[&str] = &[
    "/",
    "/tmp",
    "/var/tmp",
    "/root",
    "/home",
    "/Users",
    "/private/tmp",
];

/// Where a path falls relative to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// A path of the repository, relative to its root (`./` and `a/../`
    /// resolved).
    Inside(String),
    /// An absolute (or `~`) path outside the known root, as written.
    Outside(String),
    /// A path whose `..` climbs above the root (`../../etc/passwd`).
    Climbs(String),
}

/// The working directory of an `<environment_context>` block
/// (`<cwd>DIR</cwd>` inside it), if `text` opens with one and it is an
/// absolute path without whitespace.
pub fn environment_cwd(text: &str) -> Option<&str> {
    environment_directory(text)
        .filter(|cwd| cwd.starts_with('/') && !cwd.contains(char::is_whitespace))
}

/// The working directory an `<environment_context>` block names, whatever
/// it looks like (under `/tmp`, with spaces, relative).
pub fn environment_directory(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix("<environment_context>")?;
    let end = rest.find("</environment_context>").unwrap_or(rest.len());
    let block = rest.get(..end)?;
    let start = block.find("<cwd>")? + "<cwd>".len();
    let inner = block.get(start..)?;
    let cwd = inner.get(..inner.find("</cwd>")?)?.trim();
    (!cwd.is_empty() && !cwd.contains('\n')).then_some(cwd)
}

/// A message's own text: without the `<environment_context>` block an
/// importer put before it to give ingest the working directory. What an
/// answer shows of a message should be this, never the marker.
pub fn without_importer_markers(text: &str) -> &str {
    match environment_end(text) {
        0 => text,
        end => text
            .get(end..)
            .unwrap_or(text)
            .trim_start_matches(['\r', '\n']),
    }
}

/// A Windows path with forward slashes (`C:\\Users\\ann\\shop\\a.py` ->
/// `C:/Users/ann/shop/a.py`): a path with a drive letter, or one whose only
/// separators are backslashes. Any other path as it is.
pub fn with_forward_slashes(path: &str) -> std::borrow::Cow<'_, str> {
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && matches!(bytes[2], b'\\' | b'/');
    let backslashed = path.contains('\\') && !path.contains('/') && !path.contains(' ');
    if drive || backslashed {
        std::borrow::Cow::Owned(path.replace('\\', "/"))
    } else {
        std::borrow::Cow::Borrowed(path)
    }
}

/// Git subcommands that run inside a checkout (not `clone`, `init`).
const CHECKOUT_COMMANDS: &[&str] = &[
    "status",
    "diff",
    "add",
    "commit",
    "log",
    "show",
    "checkout",
    "reset",
    "stash",
    "apply",
    "branch",
    "fetch",
    "ls-files",
    "grep",
    "restore",
    "switch",
    "blame",
    "rev-parse",
    "am",
    "cherry-pick",
    "merge",
    "rebase",
    "pull",
    "remote",
    "rm",
    "mv",
];

/// `target` seen from `directory` (`..` and `.` resolved where they can be).
///
/// `origin` is a relative working directory the transcript
/// gave: its paths are written from a parent (a transcript whose paths
/// were made relative), so a target that starts with it is not under the
/// shell's directory but that path itself.
pub fn join_from(directory: &str, target: &str, origin: Option<&str>) -> String {
    let target = with_forward_slashes(target);
    let target = target.trim_end_matches('/');
    let drive = target.as_bytes().get(1) == Some(&b':');
    let resolved_target = resolve_dots(target).unwrap_or_else(|| target.to_string());
    let from_same_place = origin
        .map(|origin| resolve_dots(origin).unwrap_or_else(|| origin.to_string()))
        .filter(|origin| !origin.starts_with('/') && !origin.is_empty())
        .is_some_and(|origin| {
            resolved_target == origin || resolved_target.starts_with(&format!("{origin}/"))
        });
    let joined = if target.starts_with('/')
        || drive
        || target.starts_with('~')
        || directory.is_empty()
        || from_same_place
    {
        target.to_string()
    } else {
        format!("{}/{target}", directory.trim_end_matches('/'))
    };
    let resolved = resolve_dots(&joined).unwrap_or(joined);
    resolved.trim_end_matches('/').to_string()
}

/// What a shell command shows of checkouts, run from `directory` (the
/// shell's, when known): the directories git commands ran in (`git -C
/// DIR`, `cd DIR && git status`, a bare `git diff` in `directory`) and
/// those `git clone` made; and where the shell is after it (`cd` moves it).
pub fn checkouts_of_command(
    command: &str,
    directory: Option<&str>,
    origin: Option<&str>,
) -> (Vec<String>, Option<String>) {
    let join = |from: &str, target: &str| join_from(from, target, origin);
    let mut checkouts = Vec::new();
    let mut current = directory.map(str::to_string);
    if !command.contains("git") && !command.contains("cd") {
        return (checkouts, current);
    }
    for part in command.split(['\n', ';', '&', '|']) {
        let head = part.trim_start();
        if !(head.starts_with("cd") || head.starts_with("pushd") || head.contains("git")) {
            continue;
        }
        let words = super::command::shell_words(part);
        let mut words = words
            .iter()
            .map(String::as_str)
            .skip_while(|word| word.contains('='));
        match words.next() {
            Some("cd" | "pushd") => {
                if let Some(target) = words.next() {
                    current = Some(match &current {
                        Some(from) => join(from, target),
                        None => join("", target),
                    });
                }
            }
            Some("git") => {
                let mut at = current.clone();
                let mut subcommand = None;
                while let Some(word) = words.next() {
                    if word == "-C" {
                        if let Some(target) = words.next() {
                            at = Some(match &at {
                                Some(from) => join(from, target),
                                None => join("", target),
                            });
                        }
                    } else if word == "-c" {
                        words.next();
                    } else if !word.starts_with('-') {
                        subcommand = Some(word);
                        break;
                    }
                }
                match subcommand {
                    Some("clone") => {
                        let operands: Vec<&str> =
                            words.filter(|word| !word.starts_with('-')).collect();
                        let made = match operands.as_slice() {
                            [url] => url
                                .trim_end_matches('/')
                                .rsplit(['/', ':'])
                                .next()
                                .map(|name| name.trim_end_matches(".git").to_string()),
                            [_, target, ..] => Some(target.to_string()),
                            [] => None,
                        };
                        if let Some(made) = made.filter(|made| !made.is_empty()) {
                            checkouts.push(match &at {
                                Some(from) => join(from, &made),
                                None => join("", &made),
                            });
                        }
                    }
                    Some(name) if CHECKOUT_COMMANDS.contains(&name) => {
                        if let Some(at) = at {
                            checkouts.push(at);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        if checkouts.len() >= MAX_CANDIDATES {
            break;
        }
    }
    (checkouts, current)
}

/// Where the `<environment_context>` block that opens `text` ends (0 when
/// there is none).
pub fn environment_end(text: &str) -> usize {
    let trimmed = text.trim_start();
    if !trimmed.starts_with("<environment_context>") {
        return 0;
    }
    const CLOSE: &str = "</environment_context>";
    text.find(CLOSE).map_or(0, |at| at + CLOSE.len())
}

/// The directories a shell command moves to or runs git in: `cd DIR`,
/// `pushd DIR`, `git -C DIR`. Absolute ones only, quotes removed.
pub fn directory_targets(command: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for part in command.split(['\n', ';', '&', '|', '(', ')']) {
        let mut words = part.split_whitespace();
        let target = match words.next() {
            Some("cd" | "pushd") => words.next(),
            Some("git") => {
                let mut found = None;
                while let Some(word) = words.next() {
                    if word == "-C" {
                        found = words.next();
                        break;
                    }
                    if !word.starts_with('-') {
                        break;
                    }
                }
                found
            }
            _ => None,
        };
        if let Some(target) = target.map(|word| word.trim_matches(['"', '\'']))
            && let Some(directory) = as_root(target)
            && targets.len() < MAX_CANDIDATES
        {
            targets.push(directory);
        }
    }
    targets
}

/// `path` as a root (with a final `/`) if it can be one: absolute, no
/// whitespace, not a scratch or home directory itself.
pub fn as_root(path: &str) -> Option<String> {
    let trimmed = path.trim().trim_end_matches('/');
    if !trimmed.starts_with('/')
        || trimmed.contains(char::is_whitespace)
        || trimmed.contains("/../")
        || trimmed.ends_with("/..")
        || NOT_ROOTS.contains(&trimmed)
        || trimmed.starts_with("/tmp/")
        || (trimmed.matches('/').count() == 2
            && (trimmed.starts_with("/home/") || trimmed.starts_with("/Users/")))
    {
        return None;
    }
    Some(format!("{trimmed}/"))
}

/// Where `path` falls given the root (with a final `/`), if one is known.
pub fn place(root: Option<&str>, path: &str) -> Placed {
    let converted = with_forward_slashes(path.trim());
    let path = converted.as_ref();
    let relative = relative_to_known_roots(root, path);
    let Some(relative) = relative else {
        return if root.is_some() || path.starts_with('~') {
            Placed::Outside(path.to_string())
        } else {
            // No root known: an absolute path stays as written.
            match resolve_dots(path) {
                Some(resolved) => Placed::Inside(resolved),
                None => Placed::Climbs(path.to_string()),
            }
        };
    };
    match resolve_dots(relative) {
        Some(resolved) => Placed::Inside(resolved),
        None => Placed::Climbs(path.to_string()),
    }
}

/// `path` relative to the root, a sandbox root or `/workspace/<name>`; a
/// relative path as it is; `None` for an absolute path outside them.
fn relative_to_known_roots<'a>(root: Option<&str>, path: &'a str) -> Option<&'a str> {
    if let Some(root) = root
        && let Some(rest) = path.strip_prefix(root)
    {
        return Some(rest);
    }
    if let Some(root) = root
        && path == root.trim_end_matches('/')
    {
        return Some("");
    }
    for sandbox in SANDBOX_ROOTS {
        if let Some(rest) = path.strip_prefix(sandbox) {
            return Some(rest);
        }
    }
    if let Some(rest) = path.strip_prefix("/workspace/") {
        // `/workspace/<repo>/path`: the repository directory is the root.
        return Some(rest.split_once('/').map_or(rest, |(_, inner)| inner));
    }
    if path.starts_with('/') || path.starts_with('~') {
        return None;
    }
    Some(path)
}

/// `a/./b/../c` as `a/c`; `None` when a `..` climbs above the start.
pub fn resolve_dots(path: &str) -> Option<String> {
    if !path.contains("./") && !path.ends_with("/..") && path != ".." {
        return Some(path.to_string());
    }
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    Some(if absolute {
        format!("/{joined}")
    } else {
        joined
    })
}

/// The deepest directory (with a final `/`) holding every one of `paths`
/// (absolute), when they lie in more than one directory under it: the
/// files a session viewed and edited span its repository.
pub fn common_directory(paths: &[&str]) -> Option<String> {
    let mut iter = paths.iter().filter(|path| path.starts_with('/'));
    let first = iter.next()?;
    let mut prefix: Vec<&str> = first.split('/').collect();
    prefix.pop();
    let mut directories = std::collections::HashSet::new();
    directories.insert(first.rsplit_once('/').map_or("", |(head, _)| head));
    for path in iter {
        directories.insert(path.rsplit_once('/').map_or("", |(head, _)| head));
        let parts: Vec<&str> = path.split('/').collect();
        let shared = prefix
            .iter()
            .zip(parts.iter().take(parts.len().saturating_sub(1)))
            .take_while(|(a, b)| a == b)
            .count();
        prefix.truncate(shared);
    }
    if directories.len() < 2 {
        return None;
    }
    as_root(&prefix.join("/"))
}

/// The candidate root that holds the most of `files` (absolute paths), the
/// deepest on a tie; `None` when none holds any.
pub fn choose_root(candidates: &[String], files: &[&str]) -> Option<String> {
    candidates
        .iter()
        .map(|candidate| {
            let held = files
                .iter()
                .filter(|file| file.starts_with(candidate.as_str()))
                .count();
            (held, candidate.len(), candidate)
        })
        .filter(|(held, _, _)| *held > 0)
        .max_by_key(|(held, depth, _)| (*held, *depth))
        .map(|(_, _, candidate)| candidate.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_paths_read_with_forward_slashes() {
        assert_eq!(
            with_forward_slashes("C:\\Users\\ann\\My Projects\\shop\\a.py"),
            "C:/Users/ann/My Projects/shop/a.py"
        );
        assert_eq!(with_forward_slashes("src\\cart.py"), "src/cart.py");
        assert_eq!(with_forward_slashes("a/b\\ c.py"), "a/b\\ c.py");
        assert_eq!(
            place(
                Some("C:/Users/ann/shop/"),
                "C:\\Users\\ann\\shop\\src\\a.py"
            ),
            Placed::Inside("src/a.py".to_string())
        );
    }

    #[test]
    fn the_importer_marker_is_not_the_message() {
        let text =
            "<environment_context><cwd>/tmp/a b/inventory</cwd></environment_context>\nFix restock";
        assert_eq!(without_importer_markers(text), "Fix restock");
        assert_eq!(environment_directory(text), Some("/tmp/a b/inventory"));
        assert_eq!(without_importer_markers("Fix restock"), "Fix restock");
    }

    #[test]
    fn git_commands_show_checkouts_wherever_they_are() {
        // A bare `git status` in the transcript's directory under /tmp.
        let (found, after) = checkouts_of_command("git status", Some("/tmp/demo/inventory"), None);
        assert_eq!(found, vec!["/tmp/demo/inventory"]);
        assert_eq!(after.as_deref(), Some("/tmp/demo/inventory"));
        // A quoted path with a space, and `git -C` relative to it.
        let (found, after) = checkouts_of_command(
            "cd \"/home/ann/My Projects\" && git -C shop diff",
            None,
            None,
        );
        assert_eq!(found, vec!["/home/ann/My Projects/shop"]);
        assert_eq!(after.as_deref(), Some("/home/ann/My Projects"));
        // SWE-ContextBench's Claude Code runs: a clone beside the working
        // directory (sklearn-25570), then git run inside it.
        let (found, _) = checkouts_of_command(
            "git clone https://github.com/scikit-learn/scikit-learn.git testbed",
            Some("./swebench_9_15"),
            Some("./swebench_9_15"),
        );
        assert_eq!(found, vec!["swebench_9_15/testbed"]);
        // Its paths are written from the parent of `./swebench_9_15`.
        let (found, after) = checkouts_of_command(
            "cd ./swebench_9_15/testbed && git status",
            Some("./swebench_9_15"),
            Some("./swebench_9_15"),
        );
        assert_eq!(found, vec!["swebench_9_15/testbed"]);
        assert_eq!(after.as_deref(), Some("swebench_9_15/testbed"));
        let (found, _) =
            checkouts_of_command("git clone git@github.com:a/shop.git", Some("/tmp"), None);
        assert_eq!(found, vec!["/tmp/shop"]);
        let (found, _) =
            checkouts_of_command("pip install -e . && python x.py", Some("/tmp/a"), None);
        assert!(found.is_empty());
    }

    #[test]
    fn the_environment_context_names_the_working_directory() {
        let text = "<environment_context>\n  <cwd>/home/ann/src/shop</cwd>\n</environment_context>\nFix the cart";
        assert_eq!(environment_cwd(text), Some("/home/ann/src/shop"));
        assert_eq!(&text[environment_end(text)..], "\nFix the cart");
        assert_eq!(
            environment_cwd("<environment_context>cwd</environment_context>"),
            None
        );
        assert_eq!(environment_cwd("Fix <cwd>/a</cwd>"), None);
        assert_eq!(environment_end("Fix the cart"), 0);
    }

    #[test]
    fn cd_and_git_targets_are_candidates() {
        assert_eq!(
            directory_targets("cd /home/ann/src/shop && git status"),
            vec!["/home/ann/src/shop/".to_string()]
        );
        assert_eq!(
            directory_targets("git -C '/srv/shop' diff"),
            vec!["/srv/shop/".to_string()]
        );
        assert!(directory_targets("cd /tmp && python x.py").is_empty());
        assert!(directory_targets("cd src").is_empty());
        assert!(directory_targets("cd /home/ann").is_empty());
    }

    #[test]
    fn paths_fall_inside_outside_or_climb() {
        let root = Some("/home/ann/src/shop/");
        assert_eq!(
            place(root, "/home/ann/src/shop/cart/models.py"),
            Placed::Inside("cart/models.py".into())
        );
        assert_eq!(
            place(root, "./cart/../cart/models.py"),
            Placed::Inside("cart/models.py".into())
        );
        assert_eq!(
            place(root, "/home/ann/desktop/run1/test_issue.py"),
            Placed::Outside("/home/ann/desktop/run1/test_issue.py".into())
        );
        assert_eq!(
            place(root, "../../etc/passwd"),
            Placed::Climbs("../../etc/passwd".into())
        );
        assert_eq!(
            place(None, "/testbed/django/db/x.py"),
            Placed::Inside("django/db/x.py".into())
        );
        assert_eq!(
            place(None, "/workspace/django__django__3.0/django/db/x.py"),
            Placed::Inside("django/db/x.py".into())
        );
        // Without a root, an absolute path is kept as written.
        assert_eq!(
            place(None, "/home/ann/src/shop/a.py"),
            Placed::Inside("/home/ann/src/shop/a.py".into())
        );
    }

    #[test]
    fn the_common_directory_of_files_in_several_directories() {
        assert_eq!(
            common_directory(&["/home/ann/shop/cart/a.py", "/home/ann/shop/tests/test_a.py"]),
            Some("/home/ann/shop/".to_string())
        );
        assert_eq!(
            common_directory(&["/home/ann/shop/cart/a.py", "/home/ann/shop/cart/b.py"]),
            None
        );
        assert_eq!(common_directory(&["/a.py", "/home/b.py"]), None);
    }

    #[test]
    fn the_root_holding_most_files_wins() {
        let candidates = vec![
            "/home/ann/".to_string(),
            "/home/ann/shop/".to_string(),
            "/srv/".to_string(),
        ];
        let files = [
            "/home/ann/shop/a.py",
            "/home/ann/shop/b/c.py",
            "/home/ann/.claude/plan.md",
        ];
        assert_eq!(
            choose_root(&candidates, &files),
            Some("/home/ann/".to_string())
        );
        let files = ["/home/ann/shop/a.py", "/home/ann/shop/b/c.py"];
        assert_eq!(
            choose_root(&candidates, &files),
            Some("/home/ann/shop/".to_string())
        );
        assert_eq!(choose_root(&candidates, &["/opt/x.py"]), None);
    }
}
