//! What every transcript format renders into: messages in the shapes the
//! ingest extractors read. A tool call goes in the assistant's message and
//! its result in the next user message, both written by
//! [`precedent_core::tool::render`] (a shell command as a ```` ```bash ```` fence,
//! any other call as a JSON object, a failed result marked); this module
//! gathers them and reads contents, arguments and timestamps.

use serde_json::Value;

use precedent_core::domain::{Message, Role};
use precedent_core::tool::render::{part_texts, render_result};

/// One transcript read from a file: one session.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The session id (stable across reads of a growing file).
    pub session_id: String,
    /// The messages, in order.
    pub messages: Vec<Message>,
}

/// Messages under construction: empty text is dropped, except a tool's
/// result, which is kept (as "(no output)") so a call keeps its answer.
#[derive(Debug, Default)]
pub struct Messages {
    messages: Vec<Message>,
}

impl Messages {
    /// Appends a message unless its text is blank.
    pub fn push(&mut self, role: Role, text: &str, timestamp_ms: Option<i64>) {
        if text.trim().is_empty() {
            return;
        }
        self.messages.push(Message {
            role,
            content: text.trim_end().to_string(),
            timestamp_ms,
        });
    }

    /// Appends a tool's result as a user message.
    pub fn push_result(&mut self, output: &str, is_error: bool, timestamp_ms: Option<i64>) {
        self.push(Role::User, &render_result(output, is_error), timestamp_ms);
    }

    /// The messages.
    pub fn into_vec(self) -> Vec<Message> {
        self.messages
    }

    /// The messages' texts, in order.
    #[cfg(test)]
    pub fn contents(self) -> Vec<String> {
        self.messages
            .into_iter()
            .map(|message| message.content)
            .collect()
    }

    /// The messages' roles and texts, in order.
    #[cfg(test)]
    pub fn turns(self) -> Vec<(Role, String)> {
        self.messages
            .into_iter()
            .map(|message| (message.role, message.content))
            .collect()
    }
}

/// The text of a content value: a string, or the `text` of its parts
/// (images and other parts left out), joined by blank lines.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => part_texts(parts)
            .filter(|text| !text.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// JSON arguments given as a string: parsed when they are JSON, else kept
/// as the string.
pub fn parse_arguments(arguments: &Value) -> Value {
    match arguments {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| arguments.clone()),
        Value::Null => Value::Object(serde_json::Map::new()),
        other => other.clone(),
    }
}

/// Unix milliseconds of an RFC 3339 / ISO 8601 timestamp
/// (`2025-05-26T07:27:40.079Z`, `2025-01-27T22:44:56.900854`, with an
/// offset or without, read as UTC then); `None` when it is not one.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let text = text.trim();
    let (date, time) = text.split_once(['T', ' '])?;
    let days = super::super::git::days_from_civil_date(date)?;
    let (clock, offset_seconds) = split_offset(time)?;
    let mut fields = clock.split(':');
    let hours: i64 = fields.next()?.parse().ok()?;
    let minutes: i64 = fields.next()?.parse().ok()?;
    let seconds_text = fields.next().unwrap_or("0");
    if fields.next().is_some() || hours > 23 || minutes > 59 {
        return None;
    }
    let (whole, fraction) = seconds_text.split_once('.').unwrap_or((seconds_text, ""));
    let seconds: i64 = whole.parse().ok()?;
    if seconds > 60 || !fraction.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let millis: i64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    let total = days * 86_400 + hours * 3600 + minutes * 60 + seconds - offset_seconds;
    let year_ok = (-62_135_596_800..253_402_300_800).contains(&total);
    year_ok.then_some(total * 1000 + millis)
}

/// `12:00:00.5+02:00` into the clock and the offset in seconds.
fn split_offset(time: &str) -> Option<(&str, i64)> {
    if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        return Some((clock, 0));
    }
    match time.rfind(['+', '-']) {
        Some(index) => {
            let (clock, offset) = time.split_at(index);
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            let digits: String = offset[1..].chars().filter(char::is_ascii_digit).collect();
            if digits.len() != 4 {
                return None;
            }
            let hours: i64 = digits[..2].parse().ok()?;
            let minutes: i64 = digits[2..].parse().ok()?;
            Some((clock, sign * (hours * 3600 + minutes * 60)))
        }
        None => Some((time, 0)),
    }
}

/// A timestamp field of a JSON object: an RFC 3339 string, or Unix seconds
/// or milliseconds.
pub fn timestamp_of(value: Option<&Value>) -> Option<i64> {
    match value? {
        Value::String(text) => parse_timestamp(text),
        Value::Number(number) => {
            let number = number.as_f64()?;
            let millis = if number > 1e11 {
                number
            } else {
                number * 1000.0
            };
            (0.0..253_402_300_800_000.0)
                .contains(&millis)
                .then_some(millis as i64)
        }
        _ => None,
    }
}

/// A short stable hash of a text (16 hex digits of its SHA-256).
pub fn short_hash(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_with_and_without_zones() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_timestamp("2025-05-26T07:27:40.079Z"),
            Some(1_748_244_460_079)
        );
        assert_eq!(
            parse_timestamp("2025-01-27T22:44:56.900854"),
            Some(1_738_017_896_900)
        );
        assert_eq!(parse_timestamp("1970-01-01T02:00:00+02:00"), Some(0));
        assert_eq!(parse_timestamp("yesterday"), None);
        assert_eq!(parse_timestamp("2025-13-01T00:00:00Z"), None);
    }
}
