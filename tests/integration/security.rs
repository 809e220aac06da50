//! Hardening: each finding of the "safe to leave running" review pinned by a
//! test, end to end against the real binary where the finding is about the
//! wire (odd methods, stalled bodies, Host and Origin headers), in process
//! otherwise; and isolation under scoped keys as a property.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::support::{ServerProcess, data_dir};

/// One answer read off the wire: status, head (lowercase names) and body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|_| panic!("body is not JSON: {:?}", self.body))
    }
}

/// Sends `raw` bytes on a fresh connection and reads the answer to its end
/// (the request should carry `Connection: close`).
fn exchange(address: SocketAddr, raw: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    stream.write_all(raw).expect("write");
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// A request with the given method, path, extra header lines and body.
fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    raw.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    raw.into_bytes()
}

/// A small deterministic generator (xorshift), so failures replay.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn capitals(&mut self, length: usize) -> String {
        (0..length)
            .map(|_| char::from(b'A' + self.below(26) as u8))
            .collect()
    }
}

/// Finding 1: every method a client invents became a label, so `/metrics`
/// grew without bound.
#[test]
fn invented_methods_do_not_grow_metrics() {
    let (_guard, dir) = data_dir();
    let server = ServerProcess::start(&dir, &[]);
    let host = server.address.to_string();
    let mut random = Random(0x5eed);
    for _ in 0..300 {
        let method = random.capitals(4000);
        let answer = exchange(
            server.address,
            &request(&method, "/health", &[("Host", &host)], ""),
        );
        assert_eq!(answer.status, 405);
        assert!(answer.body.len() < 1024, "{} bytes", answer.body.len());
    }
    let metrics = exchange(
        server.address,
        &request("GET", "/metrics", &[("Host", &host)], ""),
    );
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.body.len() < 100 * 1024,
        "/metrics is {} bytes",
        metrics.body.len()
    );
    assert!(
        metrics
            .body
            .contains("route=\"/health\",method=\"other\",status=\"405\"} 300"),
        "{}",
        metrics.body
    );
}
