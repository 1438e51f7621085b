//! Recognising secret-looking values (S5.6: Skills never receive plaintext
//! secrets): OpenAI-style `sk-` keys, AWS access key ids, GitHub tokens,
//! `Bearer` tokens, JWTs and PEM private key blocks. Hand-written scanners,
//! no regex engine; each reports only the kind, never the value.

use std::fmt;

/// The kinds of secret the scanner recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecretKind {
    /// `sk-` followed by 20 or more key characters (`sk-proj-…`, `sk-ant-…`).
    OpenAiStyleKey,
    /// `AKIA` or `ASIA` followed by 16 upper-case letters or digits.
    AwsAccessKeyId,
    /// `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` followed by 36 or more characters.
    GitHubToken,
    /// `github_pat_` followed by 22 or more characters.
    GitHubFineGrainedToken,
    /// `Bearer ` followed by a token of 16 or more characters.
    BearerToken,
    /// Three base64url segments, the first two starting with `eyJ` (`{"`).
    Jwt,
    /// `-----BEGIN … PRIVATE KEY-----`.
    PemPrivateKey,
}

impl SecretKind {
    /// A short description for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            SecretKind::OpenAiStyleKey => "an API key (sk-…)",
            SecretKind::AwsAccessKeyId => "an AWS access key id (AKIA…)",
            SecretKind::GitHubToken => "a GitHub token (ghp_…)",
            SecretKind::GitHubFineGrainedToken => "a GitHub fine-grained token (github_pat_…)",
            SecretKind::BearerToken => "a Bearer token",
            SecretKind::Jwt => "a JSON Web Token",
            SecretKind::PemPrivateKey => "a PEM private key",
        }
    }
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn is_base64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Length of the run of bytes from `start` that satisfy `pred`.
fn run_len(bytes: &[u8], start: usize, pred: impl Fn(u8) -> bool) -> usize {
    bytes[start.min(bytes.len())..]
        .iter()
        .take_while(|b| pred(**b))
        .count()
}

/// True when position `i` starts a word (no key character before it).
fn at_boundary(bytes: &[u8], i: usize) -> bool {
    i == 0 || !is_key_char(bytes[i - 1])
}

/// The first secret-looking value in `text`, if any.
pub fn find_secret(text: &str) -> Option<SecretKind> {
    let bytes = text.as_bytes();
    if contains_pem_private_key(text) {
        return Some(SecretKind::PemPrivateKey);
    }
    for i in 0..bytes.len() {
        let rest = &bytes[i..];
        if !at_boundary(bytes, i) {
            continue;
        }
        if rest.starts_with(b"sk-") && run_len(bytes, i + 3, is_key_char) >= 20 {
            return Some(SecretKind::OpenAiStyleKey);
        }
        if (rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA"))
            && run_len(bytes, i + 4, |b| {
                b.is_ascii_uppercase() || b.is_ascii_digit()
            }) >= 16
        {
            return Some(SecretKind::AwsAccessKeyId);
        }
        if [b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_"]
            .iter()
            .any(|p| rest.starts_with(*p))
            && run_len(bytes, i + 4, |b| b.is_ascii_alphanumeric()) >= 36
        {
            return Some(SecretKind::GitHubToken);
        }
        if rest.starts_with(b"github_pat_") && run_len(bytes, i + 11, is_key_char) >= 22 {
            return Some(SecretKind::GitHubFineGrainedToken);
        }
        if rest.len() >= 7 && rest[..7].eq_ignore_ascii_case(b"bearer ") {
            let start = i + 7 + run_len(bytes, i + 7, |b| b == b' ');
            let token = run_len(bytes, start, |b| {
                b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
            });
            if token >= 16 {
                return Some(SecretKind::BearerToken);
            }
        }
        if rest.starts_with(b"eyJ") && is_jwt_at(bytes, i) {
            return Some(SecretKind::Jwt);
        }
    }
    None
}

/// `eyJ<header>.eyJ<payload>.<signature>` with non-trivial segments.
fn is_jwt_at(bytes: &[u8], i: usize) -> bool {
    let header = run_len(bytes, i, is_base64url);
    let dot1 = i + header;
    if header < 10 || bytes.get(dot1) != Some(&b'.') {
        return false;
    }
    let payload_start = dot1 + 1;
    if !bytes[payload_start..].starts_with(b"eyJ") {
        return false;
    }
    let payload = run_len(bytes, payload_start, is_base64url);
    let dot2 = payload_start + payload;
    payload >= 10 && bytes.get(dot2) == Some(&b'.')
}

fn contains_pem_private_key(text: &str) -> bool {
    let mut rest = text;
    while let Some(at) = rest.find("-----BEGIN ") {
        let after = &rest[at + "-----BEGIN ".len()..];
        let line_end = after.find("-----").unwrap_or(after.len());
        let label = &after[..line_end];
        if label.ends_with("PRIVATE KEY") && label.len() <= 40 {
            return true;
        }
        rest = after;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_each_kind() {
        let cases = [
            (
                "key sk-proj-abcdefghijklmnopqrstuv123",
                SecretKind::OpenAiStyleKey,
            ),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwx",
                SecretKind::OpenAiStyleKey,
            ),
            ("AKIAIOSFODNN7EXAMPLE", SecretKind::AwsAccessKeyId),
            ("x ASIAIOSFODNN7EXAMPLE y", SecretKind::AwsAccessKeyId),
            (
                "ghp_0123456789abcdefghijklmnopqrstuvwxyz",
                SecretKind::GitHubToken,
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                SecretKind::GitHubFineGrainedToken,
            ),
            (
                "Authorization: Bearer abcdef0123456789xyz",
                SecretKind::BearerToken,
            ),
            ("bearer   abcdef0123456789xyz.more", SecretKind::BearerToken),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                SecretKind::Jwt,
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
                SecretKind::PemPrivateKey,
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----",
                SecretKind::PemPrivateKey,
            ),
            ("-----BEGIN PRIVATE KEY-----", SecretKind::PemPrivateKey),
        ];
        for (text, kind) in cases {
            assert_eq!(find_secret(text), Some(kind), "{text}");
        }
    }

    #[test]
    fn ordinary_text_is_not_a_secret() {
        for text in [
            "Summarise the task-list and risk-assessment documents",
            "use sk-short",
            "AKIA is a prefix",
            "ghp_short",
            "Bearer tokens are never stored",
            "bearer short",
            "eyJ is how base64 JSON starts",
            "-----BEGIN CERTIFICATE-----",
            "-----BEGIN PUBLIC KEY-----",
            "mask-abcdefghijklmnopqrstuvwxyz0123",
            "",
        ] {
            assert_eq!(find_secret(text), None, "{text}");
        }
    }
}
