//! The index's directory: tantivy's `MmapDirectory` without fsync.
//!
//! tantivy syncs every file of every new segment and the directory on each
//! commit: about sixteen `fdatasync` calls, 60–90 ms a commit on this kind of
//! disk, which every Add would wait for. The index does not need them: it is
//! derived, SQLite (synchronous=FULL) holds every acknowledged Add, and the
//! index catches up from it at start-up.
//!
//! - A killed process loses nothing: written pages live in the page cache.
//! - A machine that loses power may leave index files torn. A clean shutdown
//!   syncs everything and leaves a marker ([`CLEAN_MARKER`]); a start-up
//!   that finds no marker verifies the checksums of every index file and
//!   rebuilds the index from the store when one fails (see `index::open`).

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::directory::error::{
    DeleteError, LockError, OpenDirectoryError, OpenReadError, OpenWriteError,
};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, TerminatingWrite,
    WatchCallback, WatchHandle, WritePtr,
};

/// Marker file, beside the index directory, written after a clean shutdown
/// synced the index, and removed at start-up.
pub(crate) const CLEAN_MARKER: &str = "index.clean";

/// `MmapDirectory` for reading, plain unsynced files for writing.
#[derive(Clone, Debug)]
pub(crate) struct DerivedDirectory {
    root: PathBuf,
    inner: MmapDirectory,
}

impl DerivedDirectory {
    /// Opens an existing directory.
    pub(crate) fn open(root: &Path) -> Result<DerivedDirectory, OpenDirectoryError> {
        Ok(DerivedDirectory {
            root: root.to_path_buf(),
            inner: MmapDirectory::open(root)?,
        })
    }
}

/// A file written without a sync at the end.
struct UnsyncedFile(File);

impl Write for UnsyncedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TerminatingWrite for UnsyncedFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> io::Result<()> {
        self.0.flush()
    }
}

impl Directory for DerivedDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.root.join(path))
            .map_err(|error| {
                if error.kind() == io::ErrorKind::AlreadyExists {
                    OpenWriteError::FileAlreadyExists(path.to_path_buf())
                } else {
                    OpenWriteError::wrap_io_error(error, path.to_path_buf())
                }
            })?;
        Ok(BufWriter::new(Box::new(UnsyncedFile(file))))
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.inner.atomic_read(path)
    }

    /// Write to a temporary file, then rename over the target: readers see
    /// the old or the new content, never a mix. tantivy takes its meta lock
    /// around these writes, so one temporary name per target suffices.
    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let target = self.root.join(path);
        let mut temporary_name = path.as_os_str().to_owned();
        temporary_name.push(".tmp");
        let temporary = self.root.join(temporary_name);
        std::fs::write(&temporary, data)?;
        std::fs::rename(&temporary, &target)
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.inner.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(watch_callback)
    }

    fn sync_directory(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Syncs every file in `root` and `root` itself: what the directory skipped
/// on each commit, done once.
pub(crate) fn sync_tree(root: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            File::open(entry.path())?.sync_all()?;
        }
    }
    sync_dir(root)
}

/// Syncs a directory's entries (file creations, renames, removals).
pub(crate) fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}
