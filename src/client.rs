//! client: what precedent's own HTTP clients share (`import --server`,
//! `mcp --server`, the benchmarks): one agent configuration and the
//! percent-encoding of path and query values.

use std::time::Duration;

/// The header naming the request's user (the body's `user_id`) for the
/// load balancer in front of several nodes to hash; precedent ignores it.
pub const USER_HEADER: &str = "X-Precedent-User";

/// An agent that answers every status as a response (callers read the
/// error body) and gives up on a request after `timeout`.
pub fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .new_agent()
}

/// Percent-encodes everything but unreserved characters (for URL path
/// segments and query values).
pub fn encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unreserved_characters_stay_as_they_are() {
        assert_eq!(encode("a-Z_0.~"), "a-Z_0.~");
        assert_eq!(encode("git:repo/x y"), "git%3Arepo%2Fx%20y");
        assert_eq!(encode("é"), "%C3%A9");
    }
}
