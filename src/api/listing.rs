//! listing: "how much of a list goes in one answer?" The inspection lists
//! (`GET /v1/sessions`, `GET /v1/users`, MCP `list_sessions`) answer in
//! pages: at most `limit` items and at most [`MAX_PAGE_BYTES`] of JSON,
//! with a `next_cursor` that the next request passes back as `cursor`.
//!
//! Architecture invariant: a page's size is bounded whatever the store
//! holds; a listing walked by its cursors gives each item once.

use serde::Serialize;
use serde_json::Value;

use super::error::{ApiError, FieldError};
use precedent_service::read::inspect::PageSink;
use precedent_store::ListCursor;

/// Items a page holds when the request names no `limit`.
pub const DEFAULT_PAGE_LIMIT: usize = 1_000;

/// The largest `limit` a request may name.
pub const MAX_PAGE_LIMIT: usize = 10_000;

/// The JSON of a page's items stops growing past this many bytes: the
/// page ends early and its `next_cursor` goes on from there.
pub const MAX_PAGE_BYTES: usize = 2_000_000;

/// Room for what a page holds beside its items: the brackets and the
/// `next_cursor`, whose key may be up to 1,024 bytes written as hex.
const PAGE_FRAME_BYTES: usize = 4_096;

/// What a listing request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// At most this many items.
    pub limit: usize,
    /// After this item; `None` for the first page.
    pub after: Option<ListCursor>,
}

impl Default for PageRequest {
    fn default() -> PageRequest {
        PageRequest {
            limit: DEFAULT_PAGE_LIMIT,
            after: None,
        }
    }
}

impl PageRequest {
    /// Reads `limit` and `cursor` from a query string's pairs: each at
    /// most once, `limit` in `1..=MAX_PAGE_LIMIT`, `cursor` one this
    /// service gave.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<PageRequest, ApiError> {
        let limit = match single(pairs, "limit")? {
            None => DEFAULT_PAGE_LIMIT,
            Some(text) => parse_limit(text).map_err(|message| field_error("limit", &message))?,
        };
        // An empty cursor is none: the first page (a client passing back a
        // null `next_cursor` as text).
        let after = match single(pairs, "cursor")?.filter(|text| !text.is_empty()) {
            None => None,
            Some(text) => Some(decode_cursor(text).ok_or_else(|| {
                field_error(
                    "cursor",
                    "not a cursor this service gave (pass next_cursor back as it is)",
                )
            })?),
        };
        Ok(PageRequest { limit, after })
    }

    /// Reads `limit` and `cursor` from a JSON object's fields (MCP tool
    /// arguments); an absent or null `limit` is `default_limit`.
    pub fn from_arguments(
        arguments: &serde_json::Map<String, Value>,
        default_limit: usize,
    ) -> Result<PageRequest, String> {
        let limit = match arguments.get("limit") {
            None | Some(Value::Null) => default_limit,
            Some(Value::Number(number)) => number
                .as_u64()
                .and_then(|limit| usize::try_from(limit).ok())
                .filter(|limit| (1..=MAX_PAGE_LIMIT).contains(limit))
                .ok_or_else(|| format!("limit: {}", limit_range()))?,
            Some(_) => return Err(format!("limit: {}", limit_range())),
        };
        let after = match arguments.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if text.is_empty() => None,
            Some(Value::String(text)) => Some(
                decode_cursor(text)
                    .ok_or_else(|| "cursor: not a cursor this service gave".to_string())?,
            ),
            Some(_) => return Err("cursor: a string, the next_cursor of a page".to_string()),
        };
        Ok(PageRequest { limit, after })
    }
}

fn limit_range() -> String {
    format!("an integer from 1 to {MAX_PAGE_LIMIT}")
}

fn parse_limit(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|limit| (1..=MAX_PAGE_LIMIT).contains(limit))
        .ok_or_else(limit_range)
}

fn field_error(field: &str, message: &str) -> ApiError {
    ApiError::invalid_fields(vec![FieldError {
        field: field.to_string(),
        message: message.to_string(),
    }])
}

/// The value of a query parameter that must be given once, non-empty.
pub fn required_single(pairs: &[(String, String)], name: &str) -> Result<String, ApiError> {
    match single(pairs, name)? {
        Some(value) if !value.is_empty() => Ok(value.to_string()),
        _ => Err(field_error(name, "query parameter required, non-empty")),
    }
}

/// The value of a query parameter given at most once.
fn single<'a>(pairs: &'a [(String, String)], name: &str) -> Result<Option<&'a str>, ApiError> {
    let mut values = pairs.iter().filter(|(key, _)| key == name);
    match (values.next(), values.next()) {
        (_, Some(_)) => Err(field_error(name, "given more than once")),
        (Some((_, value)), None) => Ok(Some(value.as_str())),
        (None, None) => Ok(None),
    }
}

/// A cursor as the wire carries it: opaque and URL-safe,
/// `<last_seq>-<hex of the key's bytes>` ([`CURSOR_PATTERN`]).
pub fn encode_cursor(cursor: &ListCursor) -> String {
    let mut text = format!("{}-", cursor.last_seq);
    for byte in cursor.key.bytes() {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    text
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// What every cursor looks like: any text of this shape is a place in a
/// listing (a walk from a made-up one lists what sorts after it), and
/// nothing else is a cursor.
/// (Empty: the first page.)
pub const CURSOR_PATTERN: &str = "^([0-9]{1,18}-([0-9a-f]{2}){0,1024})?$";

/// The cursor [`encode_cursor`] wrote, or any of its shape; `None` for
/// anything else.
pub fn decode_cursor(text: &str) -> Option<ListCursor> {
    let (seq, hex) = text.split_once('-')?;
    if seq.is_empty() || seq.len() > 18 || !seq.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    if !hex.len().is_multiple_of(2)
        || hex.len() > 2048
        || !hex
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let bytes = hex
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            let text = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(text, 16).ok()
        })
        .collect::<Option<Vec<u8>>>()?;
    Some(ListCursor {
        last_seq: seq.parse().ok()?,
        // A made-up cursor's bytes need not be text: as a bound they
        // still place the walk.
        key: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// One page as the wire carries it: `{"data": [...], "next_cursor": ...}`,
/// written as bytes item by item (no JSON tree is built). Items are
/// added in order while their JSON stays within [`MAX_PAGE_BYTES`] (the
/// first always is); when the bound ends the page early, `next_cursor`
/// goes on after the last item in it, else it is the store's (`None` on
/// the last page).
pub fn page_bytes<T, D: Serialize>(
    items: Vec<T>,
    next: Option<ListCursor>,
    cursor_of: impl Fn(&T) -> ListCursor,
    to_wire: impl Fn(T) -> D,
) -> Vec<u8> {
    let mut writer = PageWriter::new(cursor_of, to_wire);
    for item in items {
        if !writer.accept(item) {
            break;
        }
    }
    writer.finish(next)
}

/// A page's JSON written as its items arrive, so that a listing holds its
/// bytes (at most [`MAX_PAGE_BYTES`] of items) and never its items.
pub struct PageWriter<T, C, W> {
    body: Vec<u8>,
    data_bytes: usize,
    /// The cursor of the last item written.
    last: Option<ListCursor>,
    /// Set when an item found no room: the page ends after `last`.
    full: bool,
    cursor_of: C,
    to_wire: W,
    items: std::marker::PhantomData<fn(T)>,
}

impl<T, D, C, W> PageWriter<T, C, W>
where
    D: Serialize,
    C: Fn(&T) -> ListCursor,
    W: Fn(T) -> D,
{
    /// An empty page whose items are `to_wire` of what it accepts.
    pub fn new(cursor_of: C, to_wire: W) -> PageWriter<T, C, W> {
        // The whole bound at once: a page grows without a copy, and pages
        // of few items touch (and hold) only what they write.
        let mut body = Vec::with_capacity(MAX_PAGE_BYTES + PAGE_FRAME_BYTES);
        body.extend_from_slice(b"{\"data\":[");
        PageWriter {
            body,
            data_bytes: 0,
            last: None,
            full: false,
            cursor_of,
            to_wire,
            items: std::marker::PhantomData,
        }
    }

    /// The whole page; `next` is where the store says the next page
    /// starts, unless the byte bound ended this one earlier.
    pub fn finish(self, next: Option<ListCursor>) -> Vec<u8> {
        let next = if self.full { self.last } else { next };
        let mut body = self.body;
        body.extend_from_slice(b"],\"next_cursor\":");
        let cursor = next.as_ref().map(encode_cursor);
        body.extend_from_slice(&serde_json::to_vec(&cursor).unwrap_or_else(|_| b"null".to_vec()));
        body.push(b'}');
        body
    }
}

impl<T, D, C, W> PageSink<T> for PageWriter<T, C, W>
where
    D: Serialize,
    C: Fn(&T) -> ListCursor,
    W: Fn(T) -> D,
{
    fn accept(&mut self, item: T) -> bool {
        if self.full {
            return false;
        }
        let cursor = (self.cursor_of)(&item);
        let Ok(json) = serde_json::to_vec(&(self.to_wire)(item)) else {
            // An item that cannot be written is left out; the page goes on.
            return true;
        };
        if self.last.is_some() && self.data_bytes + json.len() + 1 > MAX_PAGE_BYTES {
            self.full = true;
            return false;
        }
        if self.last.is_some() {
            self.body.push(b',');
        }
        self.data_bytes += json.len() + 1;
        self.body.extend_from_slice(&json);
        self.last = Some(cursor);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_json<T, D: Serialize>(
        items: Vec<T>,
        next: Option<ListCursor>,
        cursor_of: impl Fn(&T) -> ListCursor,
        to_wire: impl Fn(T) -> D,
    ) -> Value {
        serde_json::from_slice(&page_bytes(items, next, cursor_of, to_wire)).unwrap()
    }

    fn pairs(query: &str) -> Vec<(String, String)> {
        serde_urlencoded::from_str(query).unwrap()
    }

    #[test]
    fn cursors_round_trip_and_strangers_are_refused() {
        for key in ["s1", "a:b:c", "", "ünïcode/ sessions?&="] {
            let cursor = ListCursor {
                last_seq: 42,
                key: key.to_string(),
            };
            let encoded = encode_cursor(&cursor);
            assert!(
                encoded
                    .bytes()
                    .all(|byte| byte.is_ascii_hexdigit() || byte == b'-')
            );
            assert_eq!(decode_cursor(&encoded), Some(cursor));
        }
        let long = format!("1-{}", "00".repeat(1025));
        for stranger in [
            "",
            "zz",
            "abc",
            "3132",
            "x:1",
            "-00",
            "1-0",
            "1-0G",
            "1234567890123456789-",
            &long,
        ] {
            assert_eq!(decode_cursor(stranger), None, "{stranger:?}");
        }
        // Any text of the cursor's shape is a place, even bytes no key has.
        assert_eq!(
            decode_cursor("7-ff"),
            Some(ListCursor {
                last_seq: 7,
                key: "\u{fffd}".to_string()
            })
        );
    }

    #[test]
    fn the_openapi_document_gives_the_cursor_pattern() {
        let document = serde_json::to_string(&crate::api::openapi::document()).unwrap();
        let pattern = serde_json::to_string(CURSOR_PATTERN).unwrap();
        // GET /v1/sessions, /v1/users and /v1/messages.
        assert_eq!(document.matches(pattern.as_str()).count(), 3, "{pattern}");
    }

    #[test]
    fn limits_default_and_are_bounded() {
        assert_eq!(
            PageRequest::from_pairs(&[]).unwrap(),
            PageRequest::default()
        );
        assert_eq!(PageRequest::from_pairs(&pairs("limit=7")).unwrap().limit, 7);
        assert_eq!(
            PageRequest::from_pairs(&pairs("cursor=")).unwrap().after,
            None
        );
        assert_eq!(
            PageRequest::from_pairs(&pairs("limit=10000"))
                .unwrap()
                .limit,
            MAX_PAGE_LIMIT
        );
        for bad in [
            "limit=0",
            "limit=10001",
            "limit=-1",
            "limit=x",
            "limit=1&limit=2",
            "cursor=zz",
        ] {
            assert!(PageRequest::from_pairs(&pairs(bad)).is_err(), "{bad}");
        }
        let arguments = |value: Value| value.as_object().cloned().unwrap();
        let page = PageRequest::from_arguments(&arguments(serde_json::json!({"limit": 3})), 9);
        assert_eq!(page.unwrap().limit, 3);
        let page = PageRequest::from_arguments(&arguments(serde_json::json!({})), 9);
        assert_eq!(page.unwrap().limit, 9);
        for bad in [
            serde_json::json!({"limit": 0}),
            serde_json::json!({"limit": "3"}),
            serde_json::json!({"cursor": 5}),
            serde_json::json!({"cursor": "zz"}),
        ] {
            assert!(
                PageRequest::from_arguments(&arguments(bad.clone()), 9).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_page_stops_at_its_byte_bound_and_goes_on_from_there() {
        let big = "x".repeat(MAX_PAGE_BYTES / 3);
        let items: Vec<(i64, String)> = (0..5).map(|seq| (100 - seq, big.clone())).collect();
        let cursor_of = |item: &(i64, String)| ListCursor {
            last_seq: item.0,
            key: format!("s{}", item.0),
        };
        let page = page_json(items, None, cursor_of, |item| item.1);
        let data = page["data"].as_array().unwrap();
        assert_eq!(data.len(), 2);
        assert!(serde_json::to_string(&page).unwrap().len() <= MAX_PAGE_BYTES + 100);
        let next = decode_cursor(page["next_cursor"].as_str().unwrap()).unwrap();
        assert_eq!(next.last_seq, 99);

        // Within the bound, the store's cursor stands (none on the last page).
        let small: Vec<(i64, String)> = vec![(5, "a".into()), (4, "b".into())];
        let page = page_json(small, None, cursor_of, |item| item.1);
        assert_eq!(page["data"].as_array().unwrap().len(), 2);
        assert!(page["next_cursor"].is_null());

        // One item larger than the bound is still answered, alone.
        let huge = vec![(9, "y".repeat(MAX_PAGE_BYTES + 10)), (8, "z".into())];
        let page = page_json(huge, None, cursor_of, |item| item.1);
        assert_eq!(page["data"].as_array().unwrap().len(), 1);
        assert!(!page["next_cursor"].is_null());
    }
}
