//! Which bytes of a transcript file are read, and how: only a regular file
//! (after following links), opened without blocking (a FIFO never hangs),
//! read through a bounded reader (the size limit holds even for a file that
//! grows while it is read), in lines of bounded length streamed from a
//! given offset. What the bytes mean is left to the format modules.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Take};
use std::path::Path;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// Files larger than this are skipped; a file growing past it while read
/// is read up to it.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024 * 1024;
/// A line longer than this is skipped (and reported).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// The first bytes of a file looked at to refuse binary data.
const SNIFF_BYTES: usize = 4096;
/// The bytes before the resume offset whose digest a watch compares.
pub const WINDOW_BYTES: u64 = 4096;

/// A file's identity on its file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// The device.
    pub device: u64,
    /// The inode.
    pub inode: u64,
}

/// A regular file opened for reading.
pub struct OpenedFile {
    /// The open file.
    pub file: File,
    /// Its length when opened.
    pub len: u64,
    /// Its identity.
    pub identity: Identity,
    /// When it last changed.
    pub modified: Option<SystemTime>,
}

/// Opens `path` if, after following links, it is a regular file within
/// [`MAX_FILE_BYTES`]: else why not. Never blocks on a FIFO.
pub fn open_regular(path: &Path) -> Result<OpenedFile, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .map_err(|error| format!("cannot read it: {error}"))?;
    let metadata = file
        .metadata()
        .map_err(|error| format!("cannot read it: {error}"))?;
    if !metadata.is_file() {
        return Err(format!(
            "not a regular file ({})",
            file_kind(&metadata.file_type())
        ));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(format!(
            "larger than {} MiB",
            MAX_FILE_BYTES / (1024 * 1024)
        ));
    }
    #[cfg(unix)]
    let identity = {
        use std::os::unix::fs::MetadataExt;
        Identity {
            device: metadata.dev(),
            inode: metadata.ino(),
        }
    };
    #[cfg(not(unix))]
    let identity = Identity::default();
    Ok(OpenedFile {
        file,
        len: metadata.len(),
        identity,
        modified: metadata.modified().ok(),
    })
}

fn file_kind(file_type: &std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return "a device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    "not a plain file"
}

/// Refuses a file whose first bytes hold NUL bytes (no transcript does).
pub fn refuse_binary(file: &File) -> Result<(), String> {
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    let reader = file;
    reader
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|error| format!("cannot read it: {error}"))?;
    if head.contains(&0) {
        return Err("holds binary data (NUL bytes), not a transcript".to_string());
    }
    Ok(())
}

/// The whole file (within [`MAX_FILE_BYTES`]) as bytes, and whether it
/// went on past the limit.
pub fn read_whole(file: &File) -> Result<(Vec<u8>, bool), String> {
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(0))
        .map_err(|error| format!("cannot read it: {error}"))?;
    let mut bytes = Vec::new();
    reader
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read it: {error}"))?;
    let cut = bytes.len() as u64 > MAX_FILE_BYTES;
    bytes.truncate(MAX_FILE_BYTES as usize);
    Ok((bytes, cut))
}

/// The SHA-256 of the bytes `[start, end)` fed into `hasher`.
pub fn hash_range(file: &File, hasher: &mut Sha256, start: u64, end: u64) -> Result<(), String> {
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(start))
        .map_err(|error| format!("cannot read it: {error}"))?;
    let mut limited = reader.take(end.saturating_sub(start));
    let mut buffer = vec![0u8; 256 * 1024];
    let mut hashed = 0u64;
    loop {
        let read = limited
            .read(&mut buffer)
            .map_err(|error| format!("cannot read it: {error}"))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        hashed += read as u64;
    }
    if hashed != end.saturating_sub(start) {
        return Err("shorter than when last read".to_string());
    }
    Ok(())
}

/// The hex SHA-256 of the bytes `[start, end)`.
pub fn digest_range(file: &File, start: u64, end: u64) -> Result<String, String> {
    let mut hasher = Sha256::new();
    hash_range(file, &mut hasher, start, end)?;
    Ok(hex(&hasher.finalize()))
}

/// Bytes as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// One line read.
pub enum Line {
    /// A complete line (its newline not included): [`Lines::bytes`].
    Complete,
    /// A complete line longer than [`MAX_LINE_BYTES`], skipped: its length.
    TooLong(u64),
    /// The end of the file came before a newline: a line still being
    /// written (nothing counted, its bytes in [`Lines::bytes`] when within
    /// the limit), and its length so far.
    Unfinished(u64),
}

/// The lines of a file from an offset, each at most [`MAX_LINE_BYTES`].
pub struct Lines<'file> {
    reader: BufReader<Take<&'file File>>,
    /// The offset past the last complete line read.
    offset: u64,
    /// Complete lines read before `offset` (from the start of the file).
    line_number: u64,
    /// The current line's bytes.
    line: Vec<u8>,
}

impl<'file> Lines<'file> {
    /// Lines from `offset`, which follows `line_number` complete lines.
    pub fn new(file: &'file File, offset: u64, line_number: u64) -> Result<Lines<'file>, String> {
        let mut handle = file;
        handle
            .seek(SeekFrom::Start(offset))
            .map_err(|error| format!("cannot read it: {error}"))?;
        let limit = MAX_FILE_BYTES.saturating_sub(offset);
        Ok(Lines {
            reader: BufReader::with_capacity(256 * 1024, handle.take(limit)),
            offset,
            line_number,
            line: Vec::new(),
        })
    }

    /// The offset past the last complete line read.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Complete lines read, from the start of the file.
    pub fn line_number(&self) -> u64 {
        self.line_number
    }

    /// The last complete line's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.line
    }

    /// Whether reading stopped at [`MAX_FILE_BYTES`] rather than at the end.
    pub fn reached_limit(&self) -> bool {
        self.reader.get_ref().limit() == 0
    }

    /// Counts the unfinished line just read (of `length` bytes) as
    /// complete.
    pub fn accept_unfinished(&mut self, length: u64) {
        self.offset += length;
        self.line_number += 1;
    }

    /// The next line, `None` at the end.
    pub fn next_line(&mut self) -> Result<Option<Line>, String> {
        self.line.clear();
        let mut length = 0u64;
        loop {
            let available = self
                .reader
                .fill_buf()
                .map_err(|error| format!("cannot read it: {error}"))?;
            if available.is_empty() {
                if length == 0 {
                    return Ok(None);
                }
                // Not consumed: `offset` stays at the line's start.
                if length > MAX_LINE_BYTES as u64 {
                    self.line.clear();
                }
                return Ok(Some(Line::Unfinished(length)));
            }
            let (chunk, found) = match memchr::memchr(b'\n', available) {
                Some(end) => (&available[..end], true),
                None => (available, false),
            };
            if length + (chunk.len() as u64) <= MAX_LINE_BYTES as u64 {
                self.line.extend_from_slice(chunk);
            } else if !self.line.is_empty() {
                self.line = Vec::new();
            }
            length += chunk.len() as u64;
            let used = chunk.len() + usize::from(found);
            self.reader.consume(used);
            if found {
                self.offset += length + 1;
                self.line_number += 1;
                if length > MAX_LINE_BYTES as u64 {
                    return Ok(Some(Line::TooLong(length)));
                }
                return Ok(Some(Line::Complete));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_stream_from_an_offset_and_an_unfinished_one_waits() {
        let mut file = tempfile::tempfile().expect("file");
        file.write_all(b"{\"a\":1}\n\n{\"b\":2}\n{\"c\"")
            .expect("write");
        let mut lines = Lines::new(&file, 0, 0).expect("lines");
        assert!(matches!(lines.next_line(), Ok(Some(Line::Complete))));
        assert_eq!(lines.bytes(), b"{\"a\":1}");
        assert!(matches!(lines.next_line(), Ok(Some(Line::Complete))));
        assert!(matches!(lines.next_line(), Ok(Some(Line::Complete))));
        assert_eq!(lines.bytes(), b"{\"b\":2}");
        assert_eq!((lines.offset(), lines.line_number()), (17, 3));
        assert!(matches!(lines.next_line(), Ok(Some(Line::Unfinished(4)))));
        assert_eq!(lines.offset(), 17);
        let mut resumed = Lines::new(&file, 9, 2).expect("lines");
        assert!(matches!(resumed.next_line(), Ok(Some(Line::Complete))));
        assert_eq!(resumed.bytes(), b"{\"b\":2}");
        assert_eq!(resumed.line_number(), 3);
    }
}
