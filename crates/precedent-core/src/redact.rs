//! redact: common credentials masked before storage (opt-in,
//! `--redact-secrets`).
//!
//! Each match is replaced by `[REDACTED:<kind>]`; the text around it (an
//! `Authorization:` header's name and scheme, a URL's user and host, an
//! assignment's name) stays, so the memory still shows where a secret was.
//! A quoted value is masked whole, spaces included. Patterns, in order:
//!
//! | kind | what |
//! |---|---|
//! | `private-key` | PEM private key blocks, `-----BEGIN ... PRIVATE KEY-----` to its END line, or to the end of the text when the END line is missing |
//! | `aws-access-key` | AWS access key ids (`AKIA…`, `ASIA…`, 20 characters) |
//! | `aws-secret-key` | the value of `aws_secret_access_key = …`, and a bare 40-character AWS-style secret (base64 letters, mixed case with digits, not hexadecimal) |
//! | `github-token` | `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` tokens and `github_pat_…` |
//! | `gitlab-token` | `glpat-…` personal access tokens |
//! | `slack-token` | `xoxb-`, `xoxa-`, `xoxp-`, `xoxr-`, `xoxs-` tokens |
//! | `stripe-key` | `sk_live_…`, `sk_test_…`, `rk_live_…`, `rk_test_…` |
//! | `api-key` | `sk-…` (OpenAI, Anthropic and similar) and Google `AIza…` keys |
//! | `jwt` | JSON web tokens (three base64url parts, the first `eyJ…`) |
//! | `azure-key` | `AccountKey=…` and `SharedAccessKey=…` of connection strings |
//! | `authorization` | the credential of an `Authorization` header or JSON field (Bearer, Token, Basic, Digest or none) |
//! | `api-key-header` | the value of an `X-Api-Key` header or JSON field |
//! | `url-password` | the password of a `scheme://user:password@host` URL (empty user too) |
//! | `mysql-password` | the `-pSECRET` of a `mysql`, `mysqldump`, `mysqladmin` or `mariadb` command |
//! | `password` | the value of `password=…` / `"password": "…"` / `passwd`, `pwd`, `secret`, `secret_key`, `api_key`, `token`, `access_key`, `private_key` assignments |
//!
//! What it does not cover: secrets of other shapes (a random string under
//! an innocent name, a password typed at a prompt and echoed, keys split
//! over lines or encoded), and anything in fields other than message
//! content; ids that hold a credential are refused by the API instead
//! ([`find_secret`]), since masking them would merge distinct scopes.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

struct Rule {
    kind: &'static str,
    pattern: Regex,
    /// The capture groups that may hold the secret: the first that took
    /// part in a match is replaced (none listed: the whole match).
    groups: &'static [usize],
    /// A further check of a candidate (patterns cannot count characters).
    accept: fn(&str) -> bool,
}

fn rule(kind: &'static str, pattern: &str, groups: &'static [usize]) -> Option<Rule> {
    checked_rule(kind, pattern, groups, |_| true)
}

fn checked_rule(
    kind: &'static str,
    pattern: &str,
    groups: &'static [usize],
    accept: fn(&str) -> bool,
) -> Option<Rule> {
    Regex::new(pattern).ok().map(|pattern| Rule {
        kind,
        pattern,
        groups,
        accept,
    })
}

/// Whether a 40-character base64 run looks like a random AWS secret rather
/// than a hash (hexadecimal) or a long identifier (letters alone).
fn looks_random(candidate: &str) -> bool {
    let count = |test: fn(&u8) -> bool| candidate.bytes().filter(&test).count();
    let all_hex = candidate.bytes().all(|byte| byte.is_ascii_hexdigit());
    let symbols = candidate
        .bytes()
        .filter(|byte| b"/+".contains(byte))
        .count();
    !all_hex
        && count(u8::is_ascii_uppercase) >= 2
        && count(u8::is_ascii_lowercase) >= 2
        && count(u8::is_ascii_digit) + symbols >= 2
}

/// An assignment's or field's value: a quoted string whole (group 1 or 2)
/// or a bare word (group 3).
const VALUE: &str = r#"(?:"([^"\n]{6,})"|'([^'\n]{6,})'|([^\s"',;:()\[\]{}<>]{6,}))"#;

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    [
        rule(
            "private-key",
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*)",
            &[],
        ),
        rule("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", &[]),
        rule(
            "aws-secret-key",
            r#"(?i)aws_secret_access_key["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})"#,
            &[1],
        ),
        rule(
            "github-token",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b",
            &[],
        ),
        rule("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}", &[]),
        rule("slack-token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b", &[]),
        rule("stripe-key", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}\b", &[]),
        rule(
            "api-key",
            r"\b(?:sk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35})\b",
            &[],
        ),
        rule(
            "jwt",
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b",
            &[],
        ),
        rule(
            "azure-key",
            r"(?i)\b(?:AccountKey|SharedAccessKey)\s*=\s*([^;\s\x22']+)",
            &[1],
        ),
        rule(
            "authorization",
            r#"(?i)\bauthorization["']?\s*[:=]\s*["']?(?:(?:bearer|token|basic|digest)\s+)?([^\s"',;]+)"#,
            &[1],
        ),
        rule(
            "api-key-header",
            r#"(?i)\bx-api-key["']?\s*[:=]\s*["']?([^\s"',;]+)"#,
            &[1],
        ),
        rule(
            "url-password",
            r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:([^@\s/]+)@",
            &[1],
        ),
        rule(
            "mysql-password",
            r#"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]*?\s-p([^\s'"]+)"#,
            &[1],
        ),
        rule(
            "password",
            &format!(
                r#"(?i)\b\w*?(?:password|passwd|pwd|secret|api_key|apikey|token|access_key|private_key)(?:_?key)?["']?\s*[:=]\s*{VALUE}"#
            ),
            &[1, 2, 3],
        ),
        checked_rule(
            "aws-secret-key",
            r"(?:^|[^A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9/+=])",
            &[1],
            looks_random,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
});

/// The part of a match a rule replaces.
fn secret_of<'t>(rule: &Rule, captures: &regex::Captures<'t>) -> Option<regex::Match<'t>> {
    let found = if rule.groups.is_empty() {
        captures.get(0)
    } else {
        rule.groups.iter().find_map(|group| captures.get(*group))
    }?;
    let already = found.as_str().starts_with("[REDACTED:") && found.as_str().ends_with(']');
    (!already && (rule.accept)(found.as_str())).then_some(found)
}

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
        let mut changed = false;
        for captures in rule.pattern.captures_iter(&current) {
            let Some(found) = secret_of(rule, &captures) else {
                continue;
            };
            out.push_str(&current[last..found.start()]);
            out.push_str("[REDACTED:");
            out.push_str(rule.kind);
            out.push(']');
            last = found.end();
            changed = true;
        }
        if changed {
            out.push_str(&current[last..]);
            current = Cow::Owned(out);
        }
    }
    current
}

/// The kind of the first credential `text` holds, if any.
pub fn find_secret(text: &str) -> Option<&'static str> {
    RULES.iter().find_map(|rule| {
        rule.pattern
            .captures_iter(text)
            .any(|captures| secret_of(rule, &captures).is_some())
            .then_some(rule.kind)
    })
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

    /// One row per shape the hardening review found unmasked: the input and
    /// what must be stored instead.
    #[test]
    fn shapes_found_unmasked_are_masked_whole() {
        let cases = [
            (
                r#"{"Authorization": "Bearer abc123def456ghi789"}"#,
                r#"{"Authorization": "Bearer [REDACTED:authorization]"}"#,
            ),
            (
                "X-Api-Key: live_8f3a9c2b7d1e",
                "X-Api-Key: [REDACTED:api-key-header]",
            ),
            (
                r#"headers = {"x-api-key": "live_8f3a9c2b7d1e"}"#,
                r#"headers = {"x-api-key": "[REDACTED:api-key-header]"}"#,
            ),
            (
                "stripe.api_key = sk_live_51HqLyjWDarjtT1zdp7dc",
                "stripe.api_key = [REDACTED:stripe-key]",
            ),
            (
                "git clone https://oauth2:glpat-xxxxxxxxxxxxxxxxxxxx@gitlab.com/g/r.git",
                "git clone https://oauth2:[REDACTED:gitlab-token]@gitlab.com/g/r.git",
            ),
            (
                "export GITLAB=glpat-AbCdEfGhIjKlMnOpQrSt12",
                "export GITLAB=[REDACTED:gitlab-token]",
            ),
            (
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4==;EndpointSuffix=core.windows.net",
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[REDACTED:azure-key];EndpointSuffix=core.windows.net",
            ),
            (
                "SECRET_KEY='django-insecure-9x!k2#l'",
                "SECRET_KEY='[REDACTED:password]'",
            ),
            (
                "REDIS_URL=redis://:p%40ss@cache:6379/0",
                "REDIS_URL=redis://:[REDACTED:url-password]@cache:6379/0",
            ),
            (
                "$ mysql -u root -pSECRET123 shop < dump.sql",
                "$ mysql -u root -p[REDACTED:mysql-password] shop < dump.sql",
            ),
            (
                "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACB",
                "key:\n[REDACTED:private-key]",
            ),
            (
                "secret: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY now",
                "secret: [REDACTED:password] now",
            ),
            (
                "export AWS_SECRET=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "export AWS_SECRET=[REDACTED:password]",
            ),
            (
                "creds wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY in the log",
                "creds [REDACTED:aws-secret-key] in the log",
            ),
            (
                r#"{"password": "correct horse battery staple"}"#,
                r#"{"password": "[REDACTED:password]"}"#,
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redact(input), expected, "{input}");
            assert!(find_secret(input).is_some(), "{input}");
        }
    }

    /// Near misses: text that looks like the shapes above and must stay.
    #[test]
    fn near_misses_stay() {
        for text in [
            // A commit hash is 40 characters too.
            "HEAD is now at da39a3ee5e6b4b0d3255bfef95601890afd80709 fix",
            "DA39A3EE5E6B4B0D3255BFEF95601890AFD80709",
            // A long identifier: letters alone.
            "call ThisIsAVeryLongIdentifierNameForTestsXYZ here",
            "call ThisIsAVeryLongIdentifierNameForTestsXY1 here",
            "mysql -u root -p shop",
            "mysql --port=3306 -h db",
            "see https://example.com:8443/path and redis://cache:6379/0",
            "the Authorization header is checked in auth.rs",
            "a public key: -----BEGIN PUBLIC KEY----- MIIBIjANBgkq",
            "pk_live_is_a_publishable_key_prefix and sk_live alone",
            "fn token() -> Token { Token::new() }",
            "password_reset_url(user)",
            "AccountName=acct;EndpointSuffix=core.windows.net",
        ] {
            assert!(
                matches!(redact(text), Cow::Borrowed(_)),
                "{text}: {}",
                redact(text)
            );
            assert_eq!(find_secret(text), None, "{text}");
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
