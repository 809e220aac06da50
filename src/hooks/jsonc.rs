//! JSONC with spans: settings and MCP configuration files read as JSON
//! with `//` and `/* */` comments and trailing commas, into a tree that
//! keeps each value's byte span, so that edits are made as text splices.

use super::settings::SettingsError;

/// A value and its byte span in the text.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) kind: Kind,
}

#[derive(Debug)]
pub(super) enum Kind {
    /// Members: key, the key's start, value.
    Object(Vec<(String, usize, Node)>),
    Array(Vec<Node>),
    String(String),
    Other,
}

pub(super) fn member<'a>(members: &'a [(String, usize, Node)], key: &str) -> Option<&'a Node> {
    members
        .iter()
        .rev()
        .find(|(name, _, _)| name == key)
        .map(|(_, _, value)| value)
}

/// The byte order mark a settings file may start with.
pub(super) const BOM: char = '\u{feff}';

/// Nesting deeper than this is refused (no settings file comes close).
const MAX_DEPTH: usize = 64;

pub(super) fn parse(text: &str) -> Result<Node, SettingsError> {
    parse_counting(text).map(|(root, _)| root)
}

/// The tree, and how many trailing commas (`,` before `}` or `]`) the
/// text holds.
pub(super) fn parse_counting(text: &str) -> Result<(Node, usize), SettingsError> {
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        // A byte order mark some editors write is read past.
        position: if text.starts_with(BOM) {
            BOM.len_utf8()
        } else {
            0
        },
        num_trailing_commas: 0,
    };
    parser.skip_blank()?;
    let root = parser.value(0)?;
    parser.skip_blank()?;
    if parser.position < parser.bytes.len() {
        return Err(parser.error("text after the JSON value"));
    }
    Ok((root, parser.num_trailing_commas))
}

/// The position after whitespace and comments from `position`; `None`
/// when a block comment is not closed.
pub(super) fn skip_blank(bytes: &[u8], mut position: usize) -> Option<usize> {
    loop {
        while position < bytes.len() && bytes[position].is_ascii_whitespace() {
            position += 1;
        }
        let rest = bytes.get(position..).unwrap_or_default();
        if rest.starts_with(b"//") {
            while position < bytes.len() && bytes[position] != b'\n' {
                position += 1;
            }
        } else if rest.starts_with(b"/*") {
            let found = rest[2..].windows(2).position(|pair| pair == b"*/")?;
            position += 2 + found + 2;
        } else {
            return Some(position);
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    position: usize,
    num_trailing_commas: usize,
}

impl Parser<'_> {
    fn error(&self, reason: &str) -> SettingsError {
        let before = &self.text[..self.position.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        SettingsError::Unparseable {
            line,
            column: before[line_start..].chars().count() + 1,
            reason: reason.to_string(),
        }
    }

    fn skip_blank(&mut self) -> Result<(), SettingsError> {
        match skip_blank(self.bytes, self.position) {
            Some(position) => {
                self.position = position;
                Ok(())
            }
            None => Err(self.error("a comment is not closed")),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, SettingsError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deep"));
        }
        let start = self.position;
        match self.bytes.get(start) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let text = self.string()?;
                Ok(Node {
                    start,
                    end: self.position,
                    kind: Kind::String(text),
                })
            }
            Some(_) => {
                while self.position < self.bytes.len()
                    && (self.bytes[self.position].is_ascii_alphanumeric()
                        || b"+-.".contains(&self.bytes[self.position]))
                {
                    self.position += 1;
                }
                let word = &self.text[start..self.position];
                if word.is_empty() || serde_json::from_str::<serde_json::Value>(word).is_err() {
                    self.position = start;
                    return Err(self.error("expected a JSON value"));
                }
                Ok(Node {
                    start,
                    end: self.position,
                    kind: Kind::Other,
                })
            }
            None => Err(self.error("the text ends where a value was expected")),
        }
    }

    fn string(&mut self) -> Result<String, SettingsError> {
        let start = self.position;
        self.position += 1;
        while self.position < self.bytes.len() {
            match self.bytes[self.position] {
                b'\\' => self.position += 2,
                b'"' => {
                    self.position += 1;
                    return match self.text.get(start..self.position) {
                        Some(literal) => serde_json::from_str::<String>(literal).map_err(|_| {
                            self.position = start;
                            self.error("an invalid string")
                        }),
                        None => Err(self.error("an invalid string")),
                    };
                }
                b'\n' => return Err(self.error("a string is not closed on its line")),
                _ => self.position += 1,
            }
        }
        self.position = start;
        Err(self.error("a string is not closed"))
    }

    /// The object or array opened at `start`, closed by the bracket at the
    /// position; a comma after its last item is counted.
    fn close(&mut self, start: usize, is_empty: bool, kind: Kind) -> Node {
        if !is_empty && self.bytes[..self.position].trim_ascii_end().ends_with(b",") {
            self.num_trailing_commas += 1;
        }
        self.position += 1;
        Node {
            start,
            end: self.position,
            kind,
        }
    }

    fn object(&mut self, depth: usize) -> Result<Node, SettingsError> {
        let start = self.position;
        self.position += 1;
        let mut members = Vec::new();
        loop {
            self.skip_blank()?;
            match self.bytes.get(self.position) {
                Some(b'}') => {
                    return Ok(self.close(start, members.is_empty(), Kind::Object(members)));
                }
                Some(b'"') => {}
                _ => return Err(self.error("expected a key or '}'")),
            }
            let key_start = self.position;
            let key = self.string()?;
            self.skip_blank()?;
            if self.bytes.get(self.position) != Some(&b':') {
                return Err(self.error("expected ':'"));
            }
            self.position += 1;
            self.skip_blank()?;
            let value = self.value(depth + 1)?;
            members.push((key, key_start, value));
            self.skip_blank()?;
            match self.bytes.get(self.position) {
                Some(b',') => self.position += 1,
                Some(b'}') => {}
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Node, SettingsError> {
        let start = self.position;
        self.position += 1;
        let mut items = Vec::new();
        loop {
            self.skip_blank()?;
            if self.bytes.get(self.position) == Some(&b']') {
                return Ok(self.close(start, items.is_empty(), Kind::Array(items)));
            }
            items.push(self.value(depth + 1)?);
            self.skip_blank()?;
            match self.bytes.get(self.position) {
                Some(b',') => self.position += 1,
                Some(b']') => {}
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }
}
