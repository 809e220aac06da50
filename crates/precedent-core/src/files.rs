//! files: writing beside a user's files without following what someone
//! else planted there, and keeping the data directory private.
//!
//! [`write_replacing`] writes through a new temporary file that only this
//! call created (`O_CREAT | O_EXCL`, a random name, never a path that
//! exists), then renames it over the target: a symbolic link or a file
//! planted under a fixed temporary name is never written through, and the
//! target is replaced whole or not at all.
//!
//! [`private_dir`] creates a data directory `0700`; [`wider_than_private`]
//! tells when an existing one lets other users in.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a file was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The target is a symbolic link: it is not written through.
    #[error(
        "{} is a symbolic link (to {}); precedent does not write through links: edit the file it names, or replace the link with a file",
        path.display(),
        target.display()
    )]
    Symlink {
        /// The link.
        path: PathBuf,
        /// What it names.
        target: PathBuf,
    },
    /// The target is read-only: its owner's choice is kept.
    #[error(
        "{} is read-only; it is left as it is (make it writable to let precedent edit it)",
        .0.display()
    )]
    ReadOnly(PathBuf),
    /// The target exists and is not a regular file.
    #[error("{} is not a regular file; it is left as it is", .0.display())]
    NotAFile(PathBuf),
    /// The file system refused.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Replaces `path` with `bytes` through an exclusively created temporary
/// file in the same directory, renamed over it. An existing target keeps
/// its permissions; a new one gets `new_mode`. A target that is a
/// symbolic link, not a regular file, or read-only is refused.
pub fn write_replacing(path: &Path, bytes: &[u8], new_mode: u32) -> Result<(), WriteError> {
    let io = |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mode = match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_symlink() => {
            return Err(WriteError::Symlink {
                path: path.to_path_buf(),
                target: std::fs::read_link(path).unwrap_or_default(),
            });
        }
        Ok(metadata) if !metadata.is_file() => {
            return Err(WriteError::NotAFile(path.to_path_buf()));
        }
        Ok(metadata) if metadata.permissions().mode() & 0o222 == 0 => {
            return Err(WriteError::ReadOnly(path.to_path_buf()));
        }
        Ok(metadata) => metadata.permissions().mode() & 0o7777,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => new_mode,
        Err(error) => return Err(io(error)),
    };
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .map_or_else(|| "file".into(), |name| name.to_string_lossy());
    let mut temporary = tempfile::Builder::new()
        .prefix(&format!(".{file_name}."))
        .suffix(".precedent-tmp")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(directory)
        .map_err(io)?;
    temporary.write_all(bytes).map_err(io)?;
    temporary
        .as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io)?;
    temporary.as_file().sync_all().map_err(io)?;
    temporary.persist(path).map_err(|error| io(error.error))?;
    Ok(())
}

/// Creates `dir` (and its missing parents) with mode `0700` for the
/// directories it creates, whatever the umask.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // The umask may have taken bits off the last one; never adds any.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Restricts files this process creates to its user (`umask 077`): the
/// data directory's SQLite files, index segments and logs are `0600`
/// whatever the umask the process was started with.
pub fn restrict_umask() {
    // SAFETY: umask only sets the process's file creation mask.
    unsafe {
        libc::umask(0o077);
    }
}

/// The entries of `dir` (itself included, one level of files below it and
/// its direct subdirectories) that other users can read or enter, for the
/// start-up warning; empty when all are private.
pub fn wider_than_private(dir: &Path) -> Vec<PathBuf> {
    let wide = |path: &Path| {
        std::fs::symlink_metadata(path)
            .is_ok_and(|metadata| metadata.permissions().mode() & 0o077 != 0)
    };
    let mut found = Vec::new();
    if wide(dir) {
        found.push(dir.to_path_buf());
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if wide(&path) {
                found.push(path);
            }
        }
    }
    found
}

/// A word for a POSIX shell: as it is when it holds only safe characters,
/// else single-quoted.
pub fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The command that makes `dir` private, for messages.
pub fn fix_command(dir: &Path) -> String {
    format!("chmod -R go-rwx {}", quote(&dir.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_temporary_name_is_never_written_through() {
        let dir = tempfile::tempdir().expect("temp dir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").expect("victim");
        let target = dir.path().join("settings.json");
        // Every name the old code used, and a few more, planted.
        for name in [
            ".settings.json.precedent-tmp",
            ".settings.json.precedent-tmp.tmp",
        ] {
            std::os::unix::fs::symlink(&victim, dir.path().join(name)).expect("link");
        }
        write_replacing(&target, b"{}", 0o644).expect("written");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "{}");
        let mode = std::fs::metadata(&target)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
    }

    #[test]
    fn a_target_keeps_its_mode_and_a_link_or_read_only_target_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("settings.json");
        std::fs::write(&target, "{}").expect("write");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        write_replacing(&target, b"{\"a\": 1}", 0o644).expect("written");
        let mode = std::fs::metadata(&target)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o444)).expect("chmod");
        let error = write_replacing(&target, b"{}", 0o644).expect_err("read-only");
        assert!(matches!(error, WriteError::ReadOnly(_)), "{error}");
        assert_eq!(
            std::fs::read_to_string(&target).expect("read"),
            "{\"a\": 1}"
        );

        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").expect("victim");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&victim, &link).expect("link");
        let error = write_replacing(&link, b"{}", 0o644).expect_err("link");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
        // Nothing left behind.
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .filter(|entry| {
                entry
                    .file_name()
                    .to_string_lossy()
                    .contains("precedent-tmp")
            })
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_private_dir_is_0700_whatever_the_umask() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("a/b");
        private_dir(&data).expect("created");
        let mode = std::fs::metadata(&data).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(wider_than_private(&data).is_empty());
        std::fs::write(data.join("f"), "x").expect("write");
        std::fs::set_permissions(data.join("f"), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        assert_eq!(wider_than_private(&data), vec![data.join("f")]);
    }
}
