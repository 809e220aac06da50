//! How the store keeps the larger texts it is given compressed: a
//! session's derived record and its diagnostics (JSON that repeats
//! evidence text taken from the session's messages: about a fifth of its
//! size compressed) on both backends, and message content in SQLite
//! (about a third; PostgreSQL compresses large values itself, TOAST).
//! Callers never see the stored form: they hand the store text and read
//! the same text back.
//!
//! A stored value is either a zlib stream or the text itself: rows
//! written before compression, and texts too short to gain. SQLite tells
//! the two apart by the value's type (a BLOB is a zlib stream, TEXT the
//! text). PostgreSQL keeps records as `BYTEA` and tells them by the first
//! byte: a zlib stream starts with `0x78` (`x`), which no JSON text starts
//! with (JSON starts with whitespace, `{`, `[`, `"`, a digit, `-`, `t`,
//! `f` or `n`), so old rows read without a migration of their contents.
//!
//! Compression runs on the writer's thread inside its transaction, so it
//! uses zlib's fastest level: about as small as the default level on
//! records (a ratio of 0.23 against 0.20) at four times the speed.

use std::io::{Read, Write};

use flate2::Compression;

/// The first byte of every zlib stream this module writes (deflate with a
/// 32 KB window), and of no JSON text.
const ZLIB_HEADER: u8 = 0x78;

/// Text shorter than this is kept as it is: a zlib stream's header and
/// checksum cost 6 bytes, and short texts barely compress.
const MIN_COMPRESSED_BYTES: usize = 64;

/// A text in its stored form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Packed<'a> {
    /// The text's own bytes (too short to compress, or it would not
    /// shrink).
    Text(&'a [u8]),
    /// A zlib stream of the text.
    Zlib(Vec<u8>),
}

impl Packed<'_> {
    /// The stored bytes: the text's own, or the zlib stream.
    #[cfg(test)]
    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            Packed::Text(text) => text,
            Packed::Zlib(bytes) => bytes,
        }
    }
}

impl rusqlite::ToSql for Packed<'_> {
    /// SQLite keeps plain text as TEXT (readable with the `sqlite3` shell)
    /// and a zlib stream as a BLOB.
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(match self {
            Packed::Text(text) => {
                rusqlite::types::ToSqlOutput::Borrowed(rusqlite::types::ValueRef::Text(text))
            }
            Packed::Zlib(bytes) => rusqlite::types::ToSqlOutput::from(bytes.as_slice()),
        })
    }
}

impl super::rows::Param for Packed<'_> {
    fn sqlite(&self) -> &dyn rusqlite::ToSql {
        self
    }

    /// PostgreSQL keeps either form as BYTEA, told apart by its first byte.
    fn postgres(&self) -> &(dyn postgres::types::ToSql + Sync) {
        match self {
            Packed::Text(text) => text,
            Packed::Zlib(bytes) => bytes,
        }
    }
}

/// The stored form of `text`: compressed unless it is short or would not
/// shrink.
pub(super) fn pack(text: &str) -> Packed<'_> {
    // Text that starts like a zlib stream (no JSON does) is always
    // compressed, so that reading it back by its first byte cannot
    // mistake it for one.
    let looks_compressed = text.as_bytes().first() == Some(&ZLIB_HEADER);
    if text.len() < MIN_COMPRESSED_BYTES && !looks_compressed {
        return Packed::Text(text.as_bytes());
    }
    let mut encoder =
        flate2::write::ZlibEncoder::new(Vec::with_capacity(text.len() / 4), Compression::fast());
    // Writing to a Vec fails only when memory does; the text is then kept
    // as it is.
    match encoder
        .write_all(text.as_bytes())
        .and_then(|()| encoder.finish())
    {
        Ok(compressed) if compressed.len() < text.len() || looks_compressed => {
            Packed::Zlib(compressed)
        }
        _ => Packed::Text(text.as_bytes()),
    }
}

/// The JSON text of stored bytes of either form, told apart by their
/// first byte; `None` when they are neither a readable zlib stream nor
/// UTF-8.
pub(super) fn unpack(stored: &[u8]) -> Option<String> {
    if stored.first() != Some(&ZLIB_HEADER) {
        return String::from_utf8(stored.to_vec()).ok();
    }
    inflate(stored)
}

/// The text of a zlib stream, `None` when it is not a readable stream of
/// UTF-8.
pub(super) fn inflate(compressed: &[u8]) -> Option<String> {
    let mut text = String::with_capacity(compressed.len() * 4);
    flate2::read::ZlibDecoder::new(compressed)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The number of items in a record's `evidence` array, 0 when it has none
/// or is not a JSON object with one.
pub(super) fn evidence_items(record_json: &str) -> i64 {
    #[derive(serde::Deserialize)]
    struct Evidence {
        #[serde(default)]
        evidence: Vec<serde::de::IgnoredAny>,
    }
    serde_json::from_str::<Evidence>(record_json)
        .map(|record| i64::try_from(record.evidence.len()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_compressed() {
        let json = format!(
            r#"{{"task":"fix it","evidence":[{}]}}"#,
            vec![r#"{"text":"Traceback (most recent call last)"}"#; 20].join(",")
        );
        let packed = pack(&json);
        assert!(matches!(packed, Packed::Zlib(_)));
        assert!(packed.as_bytes().len() < json.len() / 4);
        assert_eq!(packed.as_bytes()[0], ZLIB_HEADER);
        assert_eq!(unpack(packed.as_bytes()).as_deref(), Some(json.as_str()));
    }

    #[test]
    fn short_json_and_old_rows_are_plain_text() {
        assert_eq!(pack("[]"), Packed::Text(b"[]"));
        assert_eq!(unpack(b"[]").as_deref(), Some("[]"));
        let old = r#"{"task":"stored before compression","evidence":[1,2,3,4,5,6,7,8]}"#;
        assert_eq!(unpack(old.as_bytes()).as_deref(), Some(old));
    }

    #[test]
    fn text_that_starts_like_a_zlib_stream_round_trips() {
        let packed = pack("x");
        assert!(matches!(packed, Packed::Zlib(_)));
        assert_eq!(unpack(packed.as_bytes()).as_deref(), Some("x"));
    }

    #[test]
    fn damaged_bytes_read_as_nothing() {
        assert_eq!(unpack(&[ZLIB_HEADER, 0x01, 0x02]), None);
        assert_eq!(unpack(&[0xff, 0xfe]), None);
        assert_eq!(
            super::super::rows::json_or_empty(unpack(&[ZLIB_HEADER, 0x01]), "record_json"),
            ""
        );
    }

    #[test]
    fn a_packed_text_inflates_whole() {
        let text = "fünf ünïcödé ".repeat(40);
        let Packed::Zlib(compressed) = pack(&text) else {
            panic!("compressed");
        };
        assert_eq!(inflate(&compressed).as_deref(), Some(text.as_str()));
        assert_eq!(inflate(&[ZLIB_HEADER, 0x01]), None);
    }

    #[test]
    fn evidence_is_counted_in_the_record() {
        assert_eq!(evidence_items(r#"{"evidence":[1,{"a":2},"x"]}"#), 3);
        assert_eq!(evidence_items(r#"{"task":"none"}"#), 0);
        assert_eq!(evidence_items(r#"{"evidence":"not a list"}"#), 0);
        assert_eq!(evidence_items(""), 0);
    }
}
