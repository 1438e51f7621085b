//! Reading a `WWW-Authenticate` header (RFC 9110 §11.6.1, RFC 6750 §3,
//! RFC 9728 §5.1): the parameters of its `Bearer` challenge. Anything this
//! parser cannot read gives an empty challenge, never an error: discovery
//! then falls back to the well-known URLs.

/// The parameters of a `Bearer` challenge this client acts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// `resource_metadata`: where the protected resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs, space-separated.
    pub scope: Option<String>,
    /// `error` (`invalid_token`, `insufficient_scope`).
    pub error: Option<String>,
}

impl BearerChallenge {
    /// The challenge's scopes, in order, without duplicates.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or(""))
    }

    /// True for `error="insufficient_scope"` (a step-up is asked for).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Scopes of a space-separated list, in order, without duplicates.
pub fn split_scopes(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in list.split(' ').filter(|s| !s.is_empty()) {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    }
    out
}

/// The `Bearer` challenge of a `WWW-Authenticate` value (the first one when
/// several schemes are offered); empty when there is none.
pub fn parse(header: &str) -> BearerChallenge {
    let mut out = BearerChallenge::default();
    let mut rest = header.trim_start();
    let mut in_bearer = false;
    while !rest.is_empty() {
        let (token, after) = take_token(rest);
        let after = after.trim_start();
        if let Some(value_part) = after.strip_prefix('=').filter(|_| !token.is_empty()) {
            // An auth-param `name=value` of the current scheme.
            let (value, after) = take_value(value_part.trim_start());
            if in_bearer {
                let slot = match token.to_ascii_lowercase().as_str() {
                    "resource_metadata" => Some(&mut out.resource_metadata),
                    "scope" => Some(&mut out.scope),
                    "error" => Some(&mut out.error),
                    _ => None,
                };
                if let Some(slot) = slot
                    && slot.is_none()
                {
                    *slot = Some(value);
                }
            }
            rest = after.trim_start().trim_start_matches(',').trim_start();
        } else if token.is_empty() {
            // Not a token: skip one character (a stray comma, garbage).
            let mut chars = rest.chars();
            chars.next();
            rest = chars.as_str().trim_start();
        } else {
            // A scheme name: only the first Bearer challenge is read.
            if in_bearer {
                return out;
            }
            in_bearer = token.eq_ignore_ascii_case("bearer");
            rest = after.trim_start_matches(',').trim_start();
        }
    }
    out
}

fn take_token(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| c.is_whitespace() || c == '=' || c == ',' || c == '"')
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

fn take_value(s: &str) -> (String, &str) {
    if let Some(quoted) = s.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return (value, &quoted[i + 1..]),
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                other => value.push(other),
            }
        }
        (value, "")
    } else {
        let end = s
            .find(|c: char| c.is_whitespace() || c == ',')
            .unwrap_or(s.len());
        (s[..end].to_owned(), &s[end..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_parameters_of_rfc_6750_and_9728_challenges() {
        let c = parse(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp""#,
        );
        assert!(c.insufficient_scope());
        assert_eq!(c.scopes(), ["mcp:basic", "mcp:write"]);
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://localhost:1/.well-known/oauth-protected-resource/mcp")
        );
    }

    #[test]
    fn the_bearer_challenge_among_others_and_escapes() {
        let c = parse(r#"Basic realm="a, b", Bearer realm=x, scope="a \"b\"", DPoP algs="ES256""#);
        assert_eq!(c.scope.as_deref(), Some(r#"a "b""#));
        assert_eq!(c.error, None);
    }

    #[test]
    fn garbage_is_an_empty_challenge() {
        for h in ["", "Bearer", "=,=", "\"unterminated", "Basic realm=x"] {
            assert_eq!(parse(h), BearerChallenge::default(), "{h:?}");
        }
    }
}
