//! Where a plugin request may go (issue 12, item 3): the one owner of a
//! plugin function's path template, of what a model-chosen path placeholder
//! may hold, and of "is this URL inside the function". The manifest is the
//! person's configuration; the placeholder values are the model's, so they
//! are outside input (S5.3: arguments are checked immediately before
//! dispatch; S6.2: an approval is bound to the target scope, which for a
//! plugin is its configured endpoint, not whatever path a value reaches).
//!
//! Two independent checks stand between a placeholder value and the wire:
//!
//! 1. [`PathTemplate::fill`] refuses a value that is empty, not a scalar,
//!    or that is, or percent-decodes to (after any number of decoding
//!    rounds, up to [`MAX_PERCENT_DECODING_ROUNDS`]; deeper is refused), a
//!    dot segment or something holding a separator or a control character
//!    (see [`UnsafeSegment`]). Accepted values are percent-encoded (all but
//!    RFC 3986 unreserved characters), so `?`, `#`, `%`, spaces and non-ASCII
//!    text arrive intact inside their one segment.
//! 2. [`PathTemplate::admit`] takes the finished URL, already normalised by
//!    `url::Url` (which resolves `.`, `..`, `%2E` and `.%2e` segments as a
//!    browser or server would), and requires the base URL's scheme, host and
//!    port, no user info, and a path whose segments, each percent-decoded,
//!    start with the base path plus the function's fixed prefix (the
//!    template's literal text before its first placeholder), then has the
//!    template's shape (as many segments, each matching its literal text
//!    with a non-empty value for each placeholder: a `.` that `url` resolved
//!    away cannot turn `/items/{id}` into the collection `/items/`), with no
//!    segment that check 1 would refuse. Only the [`InsideUrl`] it returns
//!    can be sent, so every send path (first attempts and retries alike go
//!    through the plugin actor's one `call`) passes through it.
//!
//! Decisions, and why:
//! - Separators: `/` and `\` (the URL standard reads `\` as `/` for http),
//!   their fullwidth and small forms (Unicode compatibility folding, NFKC,
//!   is applied because servers and frameworks that normalise Unicode or use
//!   Windows "best fit" code pages turn them into the ASCII character) and a
//!   short list of lookalikes that no normalisation maps but best-fit code
//!   pages or eyes do (division and fraction slashes, reverse solidus
//!   operator, yen and won signs that code pages 932 and 949 map to `\`).
//!   `url` itself does not normalise them: it sends their UTF-8 bytes
//!   percent-encoded; the refusal is for the server's sake.
//! - Dot segments: a value whose text before any `;` (Tomcat and Jetty
//!   read `..;x` as `..`), trimmed of white space (IIS trims it), is only
//!   dots (`...` included, which Windows file APIs shorten) after the same
//!   folding (fullwidth dot U+FF0E, one-dot leader U+2024, two-dot leader
//!   U+2025, ellipsis U+2026, small full stop U+FE52, ideographic full stop
//!   U+3002). A `;` elsewhere (`a;b`) is ordinary data, encoded as `%3B`.
//! - Control characters (NUL included) in any decoded form: refused; and a
//!   decoded form that is not UTF-8 (the overlong `%C0%AE` dot of old
//!   decoders) is refused.
//! - A value that needs the encoded slash to work (GitLab's
//!   `group%2Fproject`) is refused too: use the numeric id.
//! - Query arguments are not placeholders: every argument that is not a
//!   path placeholder goes to the query (GET, DELETE) as one
//!   `application/x-www-form-urlencoded` pair, so `&`, `=` and `#` stay
//!   inside their parameter; a template may not contain `?` or `#`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

use crate::validate::url_origin;

/// The most percent-decoding rounds a placeholder value or URL segment may
/// need before it stops changing; a value still changing after this many is
/// refused (legitimate values need at most one or two).
pub const MAX_PERCENT_DECODING_ROUNDS: usize = 8;

/// Characters that no Unicode compatibility folding turns into `.`, but
/// that some software reads as one (IDNA maps U+3002 to `.`).
const DOT_LOOKALIKES: &[char] = &['\u{3002}'];

/// Characters that no Unicode compatibility folding turns into `/` or `\`,
/// but that best-fit code pages or people read as one.
const SEPARATOR_LOOKALIKES: &[char] = &[
    '\u{2215}', // division slash
    '\u{2044}', // fraction slash
    '\u{2216}', // set minus
    '\u{29F5}', // reverse solidus operator
    '\u{29F8}', // big solidus
    '\u{29F9}', // big reverse solidus
    '\u{00A5}', // yen sign: `\` in code page 932
    '\u{20A9}', // won sign: `\` in code page 949
];

/// Why a placeholder value or URL path segment could leave its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeSegment {
    #[error("is empty")]
    Empty,
    #[error("must be a string, number or boolean")]
    NotScalar,
    #[error(
        "is, or percent-decodes to, a `.` or `..` path segment (lookalike dots, surrounding spaces and `;` parameters included)"
    )]
    DotSegment,
    #[error("contains a path separator (`/`, `\\` or a lookalike), plain or percent-encoded")]
    Separator,
    #[error("contains a control character (NUL included), plain or percent-encoded")]
    Control,
    #[error("percent-decodes to bytes that are not UTF-8")]
    NotUtf8,
    #[error("is percent-encoded more than {MAX_PERCENT_DECODING_ROUNDS} times over")]
    TooManyEncodings,
}

/// The finished URL left the function: nothing may be sent to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutsideFunction {
    #[error("the request URL's origin is not the plugin's base_url origin")]
    Origin,
    #[error("the request URL carries user info")]
    UserInfo,
    #[error("the request URL has a fragment")]
    Fragment,
    #[error("the request path does not start with the base path and the function's fixed prefix")]
    Prefix,
    #[error("the request path does not have the shape of the function's path template")]
    Shape,
    #[error("the request path has an empty segment before its end")]
    EmptySegment,
    #[error("a request path segment {0}")]
    Segment(UnsafeSegment),
}

/// Building the request URL failed before any check of where it goes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FillError {
    /// The model's value for placeholder `name` was refused.
    #[error("the path argument {name:?} {why}; nothing was sent")]
    Placeholder { name: String, why: UnsafeSegment },
    /// The URL did not parse (cannot happen for a checked template).
    #[error("the request URL is invalid: {0}")]
    Unparsable(String),
}

/// A URL [`PathTemplate::admit`] found inside its function. The only thing a
/// plugin request is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsideUrl(url::Url);

impl InsideUrl {
    pub fn as_url(&self) -> &url::Url {
        &self.0
    }
}

/// A function's path template under its plugin's base URL, checked once
/// when the manifest is loaded.
#[derive(Debug, Clone)]
pub struct PathTemplate {
    template: String,
    placeholders: BTreeSet<String>,
    /// The base URL as `url` serialises it, without a trailing `/`.
    base: String,
    origin: String,
    /// Percent-decoded segments the path must start with exactly.
    fixed: Vec<String>,
    /// Percent-decoded text the next segment must start with.
    partial: String,
    /// Every segment of base path and template: literal text (percent-
    /// decoded) and placeholders.
    shape: Vec<Vec<Piece>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Placeholder,
}

impl PathTemplate {
    /// Check `template` below `base` (an http(s) URL without user info,
    /// query or fragment, checked by the caller). The error is for the
    /// person who wrote the manifest.
    pub fn new(base: &url::Url, template: &str) -> Result<PathTemplate, String> {
        if !template.starts_with('/') || template.starts_with("//") || template.contains("://") {
            return Err("path must start with a single '/' and stay below base_url".into());
        }
        if template.contains(['?', '#']) {
            return Err("path must not contain '?' or '#'".into());
        }
        let placeholders = placeholders(template)?;
        let (origin, _) = url_origin(base)
            .ok_or_else(|| "base_url must be an http or https URL with a host".to_owned())?;
        let base_text = base.as_str().trim_end_matches('/').to_owned();
        let base_path = base.path().trim_end_matches('/');
        let literal = &template[..template.find('{').unwrap_or(template.len())];
        let prefix = format!("{base_path}{literal}");
        let mut segments: Vec<String> = prefix
            .split('/')
            .skip(1)
            .map(|s| lossy(&percent_decode_once(s.as_bytes())))
            .collect();
        let partial = segments.pop().unwrap_or_default();
        let shape = format!("{base_path}{template}")
            .split('/')
            .skip(1)
            .map(segment_pieces)
            .collect();
        let out = PathTemplate {
            template: template.to_owned(),
            placeholders,
            base: base_text,
            origin,
            fixed: segments,
            partial,
            shape,
        };
        // The template with every placeholder filled with a plain value must
        // be inside itself: this refuses literal dot segments, encoded
        // separators, `\` and anything URL normalisation would rewrite.
        let sample = out
            .fill_with(|_| Ok("x".to_owned()))
            .map_err(|e| e.to_string())?;
        out.admit(sample).map_err(|e| {
            format!("path {template:?} does not stay as written below base_url: {e}")
        })?;
        Ok(out)
    }

    /// The placeholder names (`{name}`) of the template.
    pub fn placeholders(&self) -> &BTreeSet<String> {
        &self.placeholders
    }

    /// Check 1: the URL with each placeholder replaced by its argument from
    /// `args`, refused (as the model's invalid arguments) when a value could
    /// leave its segment; no query yet.
    pub fn fill(&self, args: &Map<String, Value>) -> Result<url::Url, FillError> {
        self.fill_with(|name| {
            let value = match args.get(name) {
                Some(Value::String(s)) => s.clone(),
                Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
                _ => return Err(UnsafeSegment::NotScalar),
            };
            placeholder_refusal(&value).map_or(Ok(value), Err)
        })
    }

    fn fill_with(
        &self,
        value: impl Fn(&str) -> Result<String, UnsafeSegment>,
    ) -> Result<url::Url, FillError> {
        let mut path = String::with_capacity(self.template.len());
        let mut rest = self.template.as_str();
        while let Some(start) = rest.find('{') {
            path.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            let end = after.find('}').unwrap_or(after.len());
            let name = &after[..end];
            let v = value(name).map_err(|why| FillError::Placeholder {
                name: name.to_owned(),
                why,
            })?;
            path.push_str(&encode_segment(&v));
            rest = after.get(end + 1..).unwrap_or("");
        }
        path.push_str(rest);
        url::Url::parse(&format!("{}{}", self.base, path))
            .map_err(|e| FillError::Unparsable(e.to_string()))
    }

    /// Check 2, the single owner of "is this URL inside the function":
    /// same origin as the base URL, no user info or fragment, and a
    /// normalised path starting (segment-wise, percent-decoded) with the
    /// base path and the fixed prefix, in the template's shape (one
    /// non-empty segment text per placeholder, literal text as written),
    /// with every segment safe.
    pub fn admit(&self, url: url::Url) -> Result<InsideUrl, OutsideFunction> {
        if url_origin(&url).map(|(o, _)| o).as_deref() != Some(self.origin.as_str()) {
            return Err(OutsideFunction::Origin);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(OutsideFunction::UserInfo);
        }
        if url.fragment().is_some() {
            return Err(OutsideFunction::Fragment);
        }
        let segments: Vec<&str> = url
            .path_segments()
            .ok_or(OutsideFunction::Prefix)?
            .collect();
        if segments.len() <= self.fixed.len() {
            return Err(OutsideFunction::Prefix);
        }
        let mut decoded_segments = Vec::with_capacity(segments.len());
        for (i, segment) in segments.iter().enumerate() {
            let decoded = lossy(&percent_decode_once(segment.as_bytes()));
            let in_prefix = match self.fixed.get(i) {
                Some(fixed) => decoded == *fixed,
                None if i == self.fixed.len() => decoded.starts_with(&self.partial),
                None => true,
            };
            if !in_prefix {
                return Err(OutsideFunction::Prefix);
            }
            decoded_segments.push(decoded);
            if segment.is_empty() {
                if i + 1 != segments.len() {
                    return Err(OutsideFunction::EmptySegment);
                }
            } else if let Some(why) = segment_refusal(segment) {
                return Err(OutsideFunction::Segment(why));
            }
        }
        let shaped = decoded_segments.len() == self.shape.len()
            && decoded_segments
                .iter()
                .zip(&self.shape)
                .all(|(segment, pieces)| matches_pieces(pieces, segment));
        if !shaped {
            return Err(OutsideFunction::Shape);
        }
        Ok(InsideUrl(url))
    }
}

/// Why `value` may not fill a path placeholder, if it may not.
pub fn placeholder_refusal(value: &str) -> Option<UnsafeSegment> {
    if value.is_empty() {
        return Some(UnsafeSegment::Empty);
    }
    segment_refusal(value)
}

/// Why `text` (a value or a URL path segment) could leave its segment when
/// read by a server that percent-decodes it any number of times and folds
/// Unicode lookalikes, if it could.
fn segment_refusal(text: &str) -> Option<UnsafeSegment> {
    let mut form = text.as_bytes().to_vec();
    for round in 0..=MAX_PERCENT_DECODING_ROUNDS {
        let Ok(decoded) = std::str::from_utf8(&form) else {
            return Some(UnsafeSegment::NotUtf8);
        };
        if let Some(why) = form_refusal(decoded) {
            return Some(why);
        }
        let next = percent_decode_once(&form);
        if next == form {
            return None;
        }
        if round == MAX_PERCENT_DECODING_ROUNDS {
            break;
        }
        form = next;
    }
    Some(UnsafeSegment::TooManyEncodings)
}

/// One decoded form, after Unicode compatibility folding.
fn form_refusal(form: &str) -> Option<UnsafeSegment> {
    let folded: String = form
        .nfkc()
        .map(|c| {
            if DOT_LOOKALIKES.contains(&c) {
                '.'
            } else if SEPARATOR_LOOKALIKES.contains(&c) {
                '/'
            } else {
                c
            }
        })
        .collect();
    if folded.chars().any(char::is_control) {
        return Some(UnsafeSegment::Control);
    }
    if folded.contains(['/', '\\']) {
        return Some(UnsafeSegment::Separator);
    }
    let core = folded.split(';').next().unwrap_or("").trim();
    if !core.is_empty() && core.chars().all(|c| c == '.') {
        return Some(UnsafeSegment::DotSegment);
    }
    None
}

/// Percent-decode once: `%` and two hex digits (either case) become a
/// byte; anything else stays.
fn percent_decode_once(bytes: &[u8]) -> Vec<u8> {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// One template segment as literal text (percent-decoded) and placeholders.
fn segment_pieces(segment: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut rest = segment;
    while let Some(start) = rest.find('{') {
        if start > 0 {
            pieces.push(Piece::Literal(lossy(&percent_decode_once(
                &rest.as_bytes()[..start],
            ))));
        }
        pieces.push(Piece::Placeholder);
        rest = rest[start..]
            .find('}')
            .and_then(|end| rest.get(start + end + 1..))
            .unwrap_or("");
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(lossy(&percent_decode_once(rest.as_bytes()))));
    }
    pieces
}

/// Whether `text` is the literal pieces in order with at least one
/// character for each placeholder. Iterative wildcard matching (a
/// placeholder is "one character, then any number"): no recursion, at
/// most pattern length × text length steps.
fn matches_pieces(pieces: &[Piece], text: &str) -> bool {
    #[derive(PartialEq)]
    enum Token {
        Char(char),
        AnyOne,
        AnyRun,
    }
    let pattern: Vec<Token> = pieces
        .iter()
        .flat_map(|p| match p {
            Piece::Literal(l) => l.chars().map(Token::Char).collect::<Vec<_>>(),
            Piece::Placeholder => vec![Token::AnyOne, Token::AnyRun],
        })
        .collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(Token::AnyRun) => {
                resume = Some((p + 1, t));
                p += 1;
            }
            Some(Token::AnyOne) => {
                p += 1;
                t += 1;
            }
            Some(Token::Char(c)) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match resume {
                Some((after_run, taken)) => {
                    p = after_run;
                    t = taken + 1;
                    resume = Some((after_run, taken + 1));
                }
                None => return false,
            },
        }
    }
    while pattern.get(p) == Some(&Token::AnyRun) {
        p += 1;
    }
    p == pattern.len()
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Percent-encode everything but RFC 3986 unreserved characters.
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `{name}` placeholders of a template.
fn placeholders(path: &str) -> Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        let end = after
            .find('}')
            .ok_or_else(|| "an unclosed '{' in the path".to_owned())?;
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("placeholder {{{name}}} must be a field name"));
        }
        out.insert(name.to_owned());
        rest = &after[end + 1..];
    }
    if rest.contains('}') {
        return Err("a '}' without '{' in the path".to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items() -> PathTemplate {
        let base = url::Url::parse("http://127.0.0.1:9/api/v1/").unwrap();
        PathTemplate::new(&base, "/items/{id}").unwrap()
    }

    fn fill(t: &PathTemplate, id: Value) -> Result<url::Url, FillError> {
        t.fill(json!({ "id": id }).as_object().unwrap())
    }

    #[test]
    fn templates_are_parsed_with_clear_errors() {
        assert_eq!(
            placeholders("/repos/{owner}/{repo}/issues").unwrap(),
            BTreeSet::from(["owner".to_owned(), "repo".to_owned()])
        );
        assert!(placeholders("/x/{bad").is_err());
        assert!(placeholders("/x/{a-b}").is_err());
        let base = url::Url::parse("https://api.example/v1").unwrap();
        for bad in [
            "x/{id}",
            "//evil.example/{id}",
            "/a?b={id}",
            "/a/../admin/{id}",
            "/a/./{id}",
            "/a/%2e%2e/{id}",
            "/a/%252E%252E/{id}",
            "/a\\b/{id}",
            "/a%2Fb/{id}",
            "/a//b/{id}",
            "/a/%00/{id}",
        ] {
            assert!(
                PathTemplate::new(&base, bad).is_err(),
                "{bad:?} was accepted"
            );
        }
        for good in [
            "/",
            "/items",
            "/items/",
            "/items/{id}",
            "/a b/{id}.json",
            "/é/{id}",
        ] {
            assert!(
                PathTemplate::new(&base, good).is_ok(),
                "{good:?} was refused"
            );
        }
    }

    #[test]
    fn each_escape_form_is_refused_by_name() {
        use UnsafeSegment::*;
        let cases: &[(&str, UnsafeSegment)] = &[
            ("", Empty),
            (".", DotSegment),
            ("..", DotSegment),
            ("...", DotSegment),
            (" .. ", DotSegment),
            ("%2E", DotSegment),
            ("%2e", DotSegment),
            ("%2E%2E", DotSegment),
            ("%2e%2E", DotSegment),
            (".%2E", DotSegment),
            ("%2E.", DotSegment),
            ("%252E%252E", DotSegment),
            ("%25252e", DotSegment),
            ("\u{FF0E}\u{FF0E}", DotSegment),
            ("\u{FF0E}", DotSegment),
            ("\u{2024}\u{2024}", DotSegment),
            ("\u{2025}", DotSegment),
            ("\u{2026}", DotSegment),
            ("\u{FE52}", DotSegment),
            ("\u{3002}\u{3002}", DotSegment),
            ("%EF%BC%8E%EF%BC%8E", DotSegment),
            ("..;", DotSegment),
            ("..;jsessionid=1", DotSegment),
            ("..%3B", DotSegment),
            ("/", Separator),
            ("a/b", Separator),
            ("%2F", Separator),
            ("%2f", Separator),
            ("%252F", Separator),
            ("%25252f", Separator),
            ("\\", Separator),
            ("%5C", Separator),
            ("%5c", Separator),
            ("%255C", Separator),
            ("\u{FF0F}", Separator),
            ("\u{FF3C}", Separator),
            ("\u{FE68}", Separator),
            ("\u{2215}", Separator),
            ("\u{2044}", Separator),
            ("\u{00A5}", Separator),
            ("\u{2100}", Separator),
            ("..%2F..%2Fadmin", Separator),
            ("\0", Control),
            ("a\0b", Control),
            ("%00", Control),
            ("..%00", Control),
            ("%2500", Control),
            ("a\nb", Control),
            ("%0D%0A", Control),
            ("%7F", Control),
            ("%C0%AE%C0%AE", NotUtf8),
            ("%FF", NotUtf8),
        ];
        let t = items();
        for (value, why) in cases {
            assert_eq!(placeholder_refusal(value), Some(*why), "{value:?}");
            let refused = fill(&t, json!(value)).unwrap_err();
            assert_eq!(
                refused,
                FillError::Placeholder {
                    name: "id".into(),
                    why: *why
                },
                "{value:?}"
            );
        }
        for not_scalar in [json!(null), json!([1]), json!({"a": 1})] {
            assert!(matches!(
                fill(&t, not_scalar),
                Err(FillError::Placeholder { why: NotScalar, .. })
            ));
        }
    }

    #[test]
    fn legitimate_values_are_encoded_inside_their_segment() {
        let t = items();
        let cases: &[(Value, &str)] = &[
            (json!("42"), "/api/v1/items/42"),
            (json!(7), "/api/v1/items/7"),
            (json!(true), "/api/v1/items/true"),
            (json!("a b"), "/api/v1/items/a%20b"),
            (json!("100%"), "/api/v1/items/100%25"),
            (json!("50%off"), "/api/v1/items/50%25off"),
            (json!("a?b#c&d=e"), "/api/v1/items/a%3Fb%23c%26d%3De"),
            (json!("a;b"), "/api/v1/items/a%3Bb"),
            (json!("a.b"), "/api/v1/items/a.b"),
            (json!(".hidden"), "/api/v1/items/.hidden"),
            (
                json!("Zoë 東京"),
                "/api/v1/items/Zo%C3%AB%20%E6%9D%B1%E4%BA%AC",
            ),
        ];
        for (value, path) in cases {
            let url = fill(&t, value.clone()).unwrap_or_else(|e| panic!("{value}: {e}"));
            assert_eq!(url.path(), *path, "{value}");
            assert!(t.admit(url).is_ok(), "{value}");
        }
    }

    #[test]
    fn decoding_rounds_limit_at_below_and_above() {
        // "%" followed by n times "25" needs n decoding rounds to reach "%".
        let nested = |n: usize| format!("%{}", "25".repeat(n));
        assert_eq!(
            placeholder_refusal(&nested(MAX_PERCENT_DECODING_ROUNDS - 1)),
            None
        );
        assert_eq!(
            placeholder_refusal(&nested(MAX_PERCENT_DECODING_ROUNDS)),
            None
        );
        assert_eq!(
            placeholder_refusal(&nested(MAX_PERCENT_DECODING_ROUNDS + 1)),
            Some(UnsafeSegment::TooManyEncodings)
        );
        // A deep dot is found within the limit, and refused beyond it.
        let deep_dot = |n: usize| format!("%{}2E", "25".repeat(n));
        assert_eq!(
            placeholder_refusal(&deep_dot(MAX_PERCENT_DECODING_ROUNDS - 1)),
            Some(UnsafeSegment::DotSegment)
        );
        assert_eq!(
            placeholder_refusal(&deep_dot(MAX_PERCENT_DECODING_ROUNDS)),
            Some(UnsafeSegment::TooManyEncodings)
        );
    }

    /// Check 2 on its own: URLs check 1 would never build are refused.
    #[test]
    fn admit_refuses_urls_outside_the_function_on_its_own() {
        let t = items();
        let at = |s: &str| t.admit(url::Url::parse(s).unwrap());
        assert!(at("http://127.0.0.1:9/api/v1/items/42").is_ok());
        assert!(at("http://127.0.0.1:9/api/v1/items/42?q=a%2F..").is_ok());
        use OutsideFunction::*;
        let cases: &[(&str, OutsideFunction)] = &[
            ("http://127.0.0.1:10/api/v1/items/1", Origin),
            ("https://127.0.0.1:9/api/v1/items/1", Origin),
            ("http://localhost:9/api/v1/items/1", Origin),
            ("http://u:p@127.0.0.1:9/api/v1/items/1", UserInfo),
            ("http://127.0.0.1:9/api/v1/items/1#x", Fragment),
            ("http://127.0.0.1:9/api/v1/items/%2E%2E", Prefix),
            ("http://127.0.0.1:9/api/v1/items/.%2e/admin", Prefix),
            ("http://127.0.0.1:9/api/v1/items/../../admin", Prefix),
            ("http://127.0.0.1:9/api/v1/items", Prefix),
            ("http://127.0.0.1:9/api/v1/items/", Shape),
            ("http://127.0.0.1:9/api/v1/items/.", Shape),
            ("http://127.0.0.1:9/api/v1/items/%2e", Shape),
            ("http://127.0.0.1:9/api/v1/items/1/2", Shape),
            ("http://127.0.0.1:9/api/v1/items/1/", Shape),
            ("http://127.0.0.1:9/api/v1/other/1", Prefix),
            ("http://127.0.0.1:9/api/v2/items/1", Prefix),
            (
                "http://127.0.0.1:9/api/v1/items/%252E%252E",
                Segment(UnsafeSegment::DotSegment),
            ),
            (
                "http://127.0.0.1:9/api/v1/items/a%2Fb",
                Segment(UnsafeSegment::Separator),
            ),
            (
                "http://127.0.0.1:9/api/v1/items/..;/admin",
                Segment(UnsafeSegment::DotSegment),
            ),
            ("http://127.0.0.1:9/api/v1/items//x", EmptySegment),
        ];
        for (url, why) in cases {
            assert_eq!(at(url).unwrap_err(), *why, "{url}");
        }
    }

    #[test]
    fn template_shapes_match_without_recursion() {
        let lit = |s: &str| Piece::Literal(s.to_owned());
        let hole = Piece::Placeholder;
        assert!(matches_pieces(&[], ""));
        assert!(!matches_pieces(&[], "a"));
        assert!(matches_pieces(std::slice::from_ref(&hole), "a"));
        assert!(!matches_pieces(std::slice::from_ref(&hole), ""));
        let pair = [hole.clone(), lit("-"), hole.clone(), lit(".json")];
        assert!(matches_pieces(&pair, "a-b.json"));
        assert!(matches_pieces(&pair, "a-b-c.json.json"));
        assert!(!matches_pieces(&pair, "-b.json"));
        assert!(!matches_pieces(&pair, "a-.json"));
        assert!(!matches_pieces(&pair, "a-b.jso"));
        // A long hostile segment is matched in bounded steps.
        let long = "-".repeat(20_000);
        assert!(!matches_pieces(&pair, &long));
    }

    #[test]
    fn prefix_within_a_segment_is_kept() {
        let base = url::Url::parse("http://h.example/").unwrap();
        let t = PathTemplate::new(&base, "/files/v{version}/raw").unwrap();
        let at = |s: &str| t.admit(url::Url::parse(s).unwrap());
        assert!(at("http://h.example/files/v2/raw").is_ok());
        assert_eq!(
            at("http://h.example/files/x2/raw"),
            Err(OutsideFunction::Prefix)
        );
        assert_eq!(
            at("http://h.example/files/v/raw"),
            Err(OutsideFunction::Shape)
        );
        assert_eq!(
            at("http://h.example/files/v2/cooked"),
            Err(OutsideFunction::Shape)
        );
        assert_eq!(
            at("http://h.example/files/v2/raw/x"),
            Err(OutsideFunction::Shape)
        );
        let url = t
            .fill(json!({"version": "1.0"}).as_object().unwrap())
            .unwrap();
        assert_eq!(url.as_str(), "http://h.example/files/v1.0/raw");
    }
}
