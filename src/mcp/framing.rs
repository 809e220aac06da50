//! framing: where one MCP message ends on stdio, and what a line that is
//! not one is answered.
//!
//! Messages are newline-delimited JSON-RPC, as the MCP stdio transport
//! says. rmcp's own stdio transport skips a line that is not JSON, and one
//! over its limit, without a word, so a client that sent one waits forever;
//! this one answers each with a JSON-RPC error (`"id": null`, as the
//! specification asks when the id cannot be read), then reads on:
//!
//! - a line that is not JSON: -32700 (Parse error);
//! - a line over [`MAX_LINE_BYTES`]: -32600 (Invalid Request); it is never
//!   held in memory, only skipped to its newline;
//! - JSON that is no JSON-RPC message: -32600, with the message's `id`
//!   when it has one; a notification (a `method` with no `id`) is never
//!   answered, so one the SDK does not know is skipped quietly.
//!
//! What it leaves to others: the messages themselves, the handshake and
//! the tools are rmcp's and [`super::MemoryServer`]'s.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};

/// The longest message (one line, without its newline) read: 16 MiB, as
/// rmcp's own transport allows.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC's code for a message that is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for a message that is not a valid request.
const INVALID_REQUEST: i64 = -32600;

/// The UTF-8 byte order mark, which JSON parsers may ignore (RFC 8259).
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Newline-delimited JSON-RPC on a reader and a writer, answering framing
/// errors (the module documentation).
pub struct LineTransport<R, W> {
    read: BufReader<R>,
    /// The line read so far: kept here, not in [`Self::read_line`], as
    /// rmcp polls `receive` in a `select!` and may drop it mid-line.
    line: Vec<u8>,
    /// Skipping the rest of an over-long line, until its newline.
    discarding: bool,
    max_line_bytes: usize,
    /// A tokio mutex: held across the write of one whole line (an answer
    /// or an error), so that lines never interleave.
    write: Arc<tokio::sync::Mutex<W>>,
}

/// What one bounded read of a line found.
enum LineRead {
    /// A whole line is in `line`.
    Line,
    /// A line over the limit was dropped (its tail is skipped next).
    Oversized,
    /// The reader is at its end.
    End,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Messages read from `read` and written to `write`, lines of at most
    /// [`MAX_LINE_BYTES`].
    pub fn new(read: R, write: W) -> LineTransport<R, W> {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            max_line_bytes: MAX_LINE_BYTES,
            write: Arc::new(tokio::sync::Mutex::new(write)),
        }
    }

    /// The same with another line limit.
    #[cfg(test)]
    fn with_max_line_bytes(mut self, max_line_bytes: usize) -> LineTransport<R, W> {
        self.max_line_bytes = max_line_bytes;
        self
    }

    /// Reads up to a newline into `line`, never holding more than the
    /// limit. Cancel-safe: `fill_buf` takes nothing when dropped, and the
    /// copy and `consume` have no await between them.
    async fn read_line(&mut self) -> std::io::Result<LineRead> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(LineRead::End);
            }
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |index| index + 1);
            let content = newline.map_or(take, |index| index);
            let mut found = None;
            if self.discarding {
                self.discarding = newline.is_none();
            } else if self.line.len().saturating_add(content) > self.max_line_bytes {
                self.line.clear();
                self.discarding = newline.is_none();
                found = Some(LineRead::Oversized);
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    found = Some(LineRead::Line);
                }
            }
            self.read.consume(take);
            if let Some(found) = found {
                return Ok(found);
            }
        }
    }

    /// Writes a JSON-RPC error for `id` on its own task, so that a
    /// cancelled `receive` cannot cut it.
    fn answer_error(&self, id: Value, code: i64, message: String) {
        let error = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": code, "message": message },
        });
        let mut line = error.to_string().into_bytes();
        line.push(b'\n');
        let write = Arc::clone(&self.write);
        tokio::spawn(async move {
            if let Err(error) = write_line(&write, &line).await {
                tracing::warn!(%error, "cannot write an error answer to stdout");
            }
        });
    }

    /// What a whole line holds: a message, or `None` once it is answered
    /// (or, for a notification, skipped).
    fn parse_line(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
            Ok(message) => return Some(message),
            Err(error) => error,
        };
        if error.is_syntax() || error.is_eof() {
            tracing::debug!(%error, "mcp: a line that is not JSON answered with a parse error");
            self.answer_error(Value::Null, PARSE_ERROR, format!("Parse error: {error}"));
            return None;
        }
        let value: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
        match value.get("id") {
            None if value.get("method").is_some() => {
                tracing::debug!(%error, "mcp: a notification that is not understood skipped");
            }
            id => {
                tracing::debug!(%error, "mcp: JSON that is no message answered as an invalid request");
                self.answer_error(
                    id.cloned().unwrap_or(Value::Null),
                    INVALID_REQUEST,
                    format!("Invalid Request: {error}"),
                );
            }
        }
        None
    }
}

/// Writes one whole line and flushes it.
async fn write_line<W: AsyncWrite + Unpin>(
    write: &tokio::sync::Mutex<W>,
    line: &[u8],
) -> std::io::Result<()> {
    let mut write = write.lock().await;
    write.write_all(line).await?;
    write.flush().await
}

impl<R, W> rmcp::transport::Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), std::io::Error>> + Send + 'static {
        let write = Arc::clone(&self.write);
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        async move {
            let line = line.map_err(std::io::Error::other)?;
            write_line(&write, &line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(LineRead::Line) => {}
                Ok(LineRead::Oversized) => {
                    tracing::warn!(
                        max_line_bytes = self.max_line_bytes,
                        "mcp: a message over the line limit skipped and answered with an error"
                    );
                    self.answer_error(
                        Value::Null,
                        INVALID_REQUEST,
                        format!(
                            "Invalid Request: a message longer than {} bytes (one line); skipped to its newline",
                            self.max_line_bytes
                        ),
                    );
                    continue;
                }
                Ok(LineRead::End) => return None,
                Err(error) => {
                    tracing::warn!(%error, "mcp: cannot read stdin");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let parsed = self.parse_line(&line);
            // The buffer keeps its capacity for the next line.
            self.line = line;
            self.line.clear();
            if let Some(message) = parsed {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), std::io::Error> {
        self.write.lock().await.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::Transport as _;
    use tokio::io::AsyncReadExt as _;

    /// A transport reading `input` with a line limit of 64 bytes, and what
    /// it wrote, line by line, once `input` is read to its end.
    async fn check(input: &[u8]) -> (Vec<RxJsonRpcMessage<RoleServer>>, Vec<Value>) {
        let (mut client_out, server_in) = tokio::io::duplex(1024);
        let (server_out, mut client_in) = tokio::io::duplex(1024 * 1024);
        let input = input.to_vec();
        let writer = tokio::spawn(async move {
            client_out.write_all(&input).await.expect("write");
        });
        let mut transport = LineTransport::new(server_in, server_out).with_max_line_bytes(64);
        let mut messages = Vec::new();
        while let Some(message) = transport.receive().await {
            messages.push(message);
        }
        writer.await.expect("writer");
        // The error answers are written by their own tasks.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        drop(transport);
        let mut written = String::new();
        client_in.read_to_string(&mut written).await.expect("read");
        let answers = written
            .lines()
            .map(|line| serde_json::from_str(line).expect("each answer is JSON"))
            .collect();
        (messages, answers)
    }

    const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;

    /// Finding 8: a line that was not JSON got no answer at all.
    #[tokio::test]
    async fn a_line_that_is_not_json_is_answered_with_a_parse_error() {
        let (messages, answers) = check(format!("not json\n{PING}\n").as_bytes()).await;
        assert_eq!(messages.len(), 1, "the next message is still read");
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["error"]["code"], -32700);
        assert_eq!(answers[0]["id"], Value::Null);
    }

    /// Finding 8: a line over the limit got no answer; now it is answered
    /// and skipped to its newline, in pieces or whole.
    #[tokio::test]
    async fn an_over_long_line_is_answered_and_skipped_to_its_newline() {
        let long = "x".repeat(10_000);
        let input = format!("{long}\n{{\"a\": \"{long}\"}}\n{PING}\n");
        let (messages, answers) = check(input.as_bytes()).await;
        assert_eq!(messages.len(), 1, "the ping after them is read");
        assert_eq!(answers.len(), 2, "{answers:?}");
        for answer in &answers {
            assert_eq!(answer["error"]["code"], -32600);
            let message = answer["error"]["message"].as_str().expect("message");
            assert!(message.contains("longer than 64 bytes"), "{message}");
        }
        // A line of exactly the limit is read.
        let prefix = r#"{"jsonrpc":"2.0","id":1,"method":"ping""#;
        let exact = format!("{prefix}{}}}\n", " ".repeat(64 - prefix.len() - 1));
        assert_eq!(exact.len(), 65);
        let (messages, answers) = check(exact.as_bytes()).await;
        assert_eq!((messages.len(), answers.len()), (1, 0), "{answers:?}");
    }

    #[tokio::test]
    async fn json_that_is_no_message_is_an_invalid_request_and_notifications_are_never_answered() {
        let input = concat!(
            "{\"id\":3,\"nothing\":true}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":7}\n",
            "\n",
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\r\n",
        );
        let (messages, answers) = check(input.as_bytes()).await;
        assert_eq!(messages.len(), 1, "the ping with a BOM and CRLF is read");
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["error"]["code"], -32600);
        assert_eq!(answers[0]["id"], 3);
    }
}
