//! redact: common credentials masked before storage (opt-in,
//! `--redact-secrets`).
//!
//! Each match is replaced by `[REDACTED:<kind>]`; the text around it (an
//! `Authorization:` header's name, a URL's user and host) stays, so the
//! memory still shows where a secret was. Patterns, in order:
//!
//! | kind | what |
//! |---|---|
//! | `private-key` | PEM private key blocks (`-----BEGIN ... PRIVATE KEY-----` to its END line) |
//! | `aws-access-key` | AWS access key ids (`AKIA…`, `ASIA…`, 20 characters) |
//! | `aws-secret-key` | the value of `aws_secret_access_key = …` |
//! | `github-token` | `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` tokens and `github_pat_…` |
//! | `slack-token` | `xoxb-`, `xoxa-`, `xoxp-`, `xoxr-`, `xoxs-` tokens |
//! | `api-key` | `sk-…` (OpenAI, Anthropic and similar) and Google `AIza…` keys |
//! | `jwt` | JSON web tokens (three base64url parts, the first `eyJ…`) |
//! | `authorization` | the credential of an `Authorization:` header (Bearer, Token, Basic) |
//! | `url-password` | the password of a `scheme://user:password@host` URL |
//! | `password` | the value of `password=…` / `"password": "…"` / `passwd`, `secret`, `api_key`, `token` assignments |

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

struct Rule {
    kind: &'static str,
    pattern: Regex,
    /// The capture group to replace (0: the whole match).
    group: usize,
}

fn rule(kind: &'static str, pattern: &str, group: usize) -> Option<Rule> {
    Regex::new(pattern).ok().map(|pattern| Rule {
        kind,
        pattern,
        group,
    })
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    [
        rule(
            "private-key",
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
            0,
        ),
        rule("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", 0),
        rule(
            "aws-secret-key",
            r#"(?i)aws_secret_access_key["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})"#,
            1,
        ),
        rule(
            "github-token",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b",
            0,
        ),
        rule("slack-token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b", 0),
        rule(
            "api-key",
            r"\b(?:sk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35})\b",
            0,
        ),
        rule(
            "jwt",
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b",
            0,
        ),
        rule(
            "authorization",
            r"(?i)\bauthorization\s*:\s*(?:bearer|token|basic)\s+([^\s'\x22]+)",
            1,
        ),
        rule(
            "url-password",
            r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:([^@\s/]+)@",
            1,
        ),
        rule(
            "password",
            r#"(?i)\b\w*?(?:password|passwd|pwd|secret|api_key|apikey|token)["']?\s*(?:=|:[\s"'])\s*["']?([^\s"',;]{6,})"#,
            1,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
});

/// `text` with every credential the patterns know masked; borrowed when
/// there was none.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut current: Cow<'_, str> = Cow::Borrowed(text);
    for rule in RULES.iter() {
        if !rule.pattern.is_match(&current) {
            continue;
        }
        let mut out = String::with_capacity(current.len());
        let mut last = 0;
        for captures in rule.pattern.captures_iter(&current) {
            let Some(found) = captures.get(rule.group) else {
                continue;
            };
            if found.as_str().starts_with("[REDACTED:") {
                continue;
            }
            out.push_str(&current[last..found.start()]);
            out.push_str("[REDACTED:");
            out.push_str(rule.kind);
            out.push(']');
            last = found.end();
        }
        out.push_str(&current[last..]);
        current = Cow::Owned(out);
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_masked_and_context_kept() {
        let cases = [
            (
                "key AKIAIOSFODNN7EXAMPLE in env",
                "key [REDACTED:aws-access-key] in env",
            ),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key = [REDACTED:aws-secret-key]",
            ),
            (
                "push with ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
                "push with [REDACTED:github-token]",
            ),
            (
                "SLACK=xoxb-123456789012-abcdefghij",
                "SLACK=[REDACTED:slack-token]",
            ),
            (
                "OPENAI_API_KEY sk-proj-abcdefghijklmnopqrstuvwx",
                "OPENAI_API_KEY [REDACTED:api-key]",
            ),
            (
                "curl -H 'Authorization: Bearer abc.def-123' https://x",
                "curl -H 'Authorization: Bearer [REDACTED:authorization]' https://x",
            ),
            (
                "clone https://deploy:hunter2pass@git.example.com/repo.git",
                "clone https://deploy:[REDACTED:url-password]@git.example.com/repo.git",
            ),
            (
                r#"{"password": "correct-horse-battery"}"#,
                r#"{"password": "[REDACTED:password]"}"#,
            ),
            (
                r#"{"api_key":"abcdef123456"} DB_PASSWORD=s3cretvalue"#,
                r#"{"api_key":"[REDACTED:password]"} DB_PASSWORD=[REDACTED:password]"#,
            ),
            (
                "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U done",
                "token [REDACTED:jwt] done",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redact(input), expected, "{input}");
        }
    }

    #[test]
    fn private_key_blocks_go_whole() {
        let text = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----\nafter";
        assert_eq!(redact(text), "before\n[REDACTED:private-key]\nafter");
    }

    #[test]
    fn ordinary_code_and_text_are_left_alone() {
        for text in [
            "def parse_token(text): return text.split()",
            "the password field is validated in forms.py",
            "see https://github.com/org/repo/pull/12 and AKIA in docs",
            "fn token() -> Token { Token::new() }",
        ] {
            assert!(matches!(redact(text), Cow::Borrowed(_)), "{text}");
        }
    }
}
