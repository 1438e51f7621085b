//! From response bytes to readable text (S8.2, S8.5): media-type triage
//! (binary is a typed error), charset decoding with encoding_rs, readable
//! Markdown from HTML (through `agent-readable`, which bounds it; no page
//! JavaScript runs), the character limit, and challenge-page detection.

use agent_readable::{BoundedReadable, HtmlLimits, ReadableError, ReadableRequest, TextStyle};
use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};
use reqwest::header::HeaderMap;

use crate::model::FetchError;

/// What kind of text a body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    /// HTML or XHTML: reduced to readable Markdown.
    Html,
    /// Plain text (and XML, CSV, ...): passed through.
    Text,
    /// Markdown: passed through.
    Markdown,
    /// JSON: passed through.
    Json,
}

/// Readable text from one response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    pub title: Option<String>,
    pub text: String,
    /// The media type, without parameters (`text/html`).
    pub content_type: String,
    pub text_truncated: bool,
}

/// The media type of a `Content-Type` value, lowercase, without parameters.
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The `charset` parameter of a `Content-Type` value, if any.
pub fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(['"', '\'']).to_owned())
    })
}

/// Decide what a body is from its declared type, sniffing when none is given.
/// Binary media types are [`FetchError::Unsupported`].
pub fn classify(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<(ContentKind, String), FetchError> {
    let declared = content_type.map(media_type).filter(|m| !m.is_empty());
    let Some(mime) = declared else {
        return sniff(body);
    };
    let kind = match mime.as_str() {
        "text/html" | "application/xhtml+xml" => ContentKind::Html,
        "text/markdown" | "text/x-markdown" => ContentKind::Markdown,
        "application/json" | "text/json" => ContentKind::Json,
        m if m.starts_with("application/") && m.ends_with("+json") => ContentKind::Json,
        "application/xml" | "application/javascript" | "application/x-javascript" => {
            ContentKind::Text
        }
        m if m.starts_with("application/") && m.ends_with("+xml") => ContentKind::Text,
        m if m.starts_with("text/") => ContentKind::Text,
        _ => return Err(FetchError::Unsupported { content_type: mime }),
    };
    Ok((kind, mime))
}

fn sniff(body: &[u8]) -> Result<(ContentKind, String), FetchError> {
    let head = &body[..body.len().min(1024)];
    if head.contains(&0) {
        return Err(FetchError::Unsupported {
            content_type: "application/octet-stream (sniffed)".into(),
        });
    }
    let text = String::from_utf8_lossy(head);
    let start = text.trim_start().to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        Ok((ContentKind::Html, "text/html".into()))
    } else if start.starts_with('{') || start.starts_with('[') {
        Ok((ContentKind::Json, "application/json".into()))
    } else {
        Ok((ContentKind::Text, "text/plain".into()))
    }
}

/// The charset an HTML document declares in a `<meta>` within its first 1024 bytes.
fn meta_charset(body: &[u8]) -> Option<&'static Encoding> {
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
    let at = head.find("charset=")?;
    let rest = head[at + 8..].trim_start_matches(['"', '\'', ' ']);
    let label: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
        .collect();
    Encoding::for_label(label.as_bytes())
}

/// Decode body bytes to text: a BOM wins, then the header's charset, then
/// (for HTML) a `<meta>` charset, then UTF-8 when the bytes are valid UTF-8,
/// else windows-1252 (the web's legacy default).
pub fn decode(body: &[u8], content_type: Option<&str>, kind: ContentKind) -> String {
    let declared = content_type
        .and_then(charset_param)
        .and_then(|l| Encoding::for_label(l.as_bytes()));
    let encoding = declared
        .or_else(|| {
            (kind == ContentKind::Html)
                .then(|| meta_charset(body))
                .flatten()
        })
        .unwrap_or_else(|| {
            if std::str::from_utf8(body).is_ok() || kind != ContentKind::Html {
                UTF_8
            } else {
                WINDOWS_1252
            }
        });
    // `decode` sniffs a BOM first and replaces malformed sequences (a body
    // cut at the byte limit may end inside a character).
    let (text, _, _) = encoding.decode(body);
    text.into_owned()
}

/// Readable Markdown and the title of an HTML document, through
/// [`agent_readable`] (which owns the limits: input bytes, nesting depth
/// and elements, checked before any parser runs). No script runs: the
/// document is only parsed. When the readability heuristics find no
/// article, the text is empty; a page over a limit is
/// [`FetchError::PageTooComplex`], never a crash and never empty text.
pub fn readable_html(
    html: &str,
    url: Option<&str>,
    limits: &HtmlLimits,
) -> Result<(Option<String>, String), FetchError> {
    match agent_readable::readable_text(html, url, TextStyle::Markdown, limits) {
        Ok(page) => Ok((page.title, page.text)),
        Err(ReadableError::NoArticle { title }) => Ok((title, String::new())),
        Err(ReadableError::Refused(refusal)) => Err(FetchError::PageTooComplex { refusal }),
    }
}

/// Keep at most `max` characters; true when something was cut.
pub fn truncate_chars(mut text: String, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((cut, _)) => {
            text.truncate(cut);
            (text, true)
        }
        None => (text, false),
    }
}

/// A response body on its way to readable text: done already (text,
/// Markdown, JSON), or HTML that still needs readable-text extraction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    Done(Extracted),
    /// The request for [`agent_readable::answer`] (wherever it runs); its
    /// answer becomes text through [`html_extracted`].
    Html {
        request: ReadableRequest,
        content_type: String,
    },
}

/// Classify and decode a response body; HTML is prepared for extraction
/// within `html` limits as Markdown of at most `max_chars` characters.
pub fn prepare(
    content_type: Option<&str>,
    body: &[u8],
    url: &str,
    max_chars: usize,
    html: &HtmlLimits,
) -> Result<Prepared, FetchError> {
    let (kind, mime) = classify(content_type, body)?;
    let text = decode(body, content_type, kind);
    match kind {
        ContentKind::Html => Ok(Prepared::Html {
            request: ReadableRequest {
                html: text,
                url: Some(url.to_owned()),
                style: TextStyle::Markdown,
                limits: *html,
                max_chars,
            },
            content_type: mime,
        }),
        ContentKind::Text | ContentKind::Markdown | ContentKind::Json => {
            let (text, text_truncated) = truncate_chars(text, max_chars);
            Ok(Prepared::Done(Extracted {
                title: None,
                text,
                content_type: mime,
                text_truncated,
            }))
        }
    }
}

/// The readable text of an HTML page from the extraction's answer: a page
/// over a limit is [`FetchError::PageTooComplex`]; no article is empty text.
pub fn html_extracted(
    answer: Result<BoundedReadable, ReadableError>,
    content_type: String,
) -> Result<Extracted, FetchError> {
    match answer {
        Ok(page) => Ok(Extracted {
            title: page.title,
            text: page.text,
            content_type,
            text_truncated: page.truncated,
        }),
        Err(ReadableError::NoArticle { title }) => Ok(Extracted {
            title,
            text: String::new(),
            content_type,
            text_truncated: false,
        }),
        Err(ReadableError::Refused(refusal)) => Err(FetchError::PageTooComplex { refusal }),
    }
}

/// Turn a response body into readable text within `max_chars`; HTML
/// within `html` limits, extracted here.
pub fn extract(
    content_type: Option<&str>,
    body: &[u8],
    url: &str,
    max_chars: usize,
    html: &HtmlLimits,
) -> Result<Extracted, FetchError> {
    match prepare(content_type, body, url, max_chars, html)? {
        Prepared::Done(extracted) => Ok(extracted),
        Prepared::Html {
            request,
            content_type,
        } => html_extracted(agent_readable::answer(&request), content_type),
    }
}

/// Markers of anti-bot challenge pages, searched case-insensitively in the
/// first 64 KiB of a body (HTML from the site, or Markdown from Jina).
const BODY_MARKERS: &[&str] = &[
    "cf-browser-verification",
    "cf_chl_opt",
    "/cdn-cgi/challenge-platform/",
    "<title>just a moment...</title>",
    "title: just a moment...",
    "attention required! | cloudflare",
    "checking your browser before accessing",
    "verify you are human by completing the action below",
    "needs to review the security of your connection before proceeding",
    "enable javascript and cookies to continue",
    "ddos-guard.net/",
    "_incapsula_resource",
    "captcha-delivery.com",
    "px-captcha",
    "awswafcookiedomainlist",
];

/// Evidence that a response is a challenge page rather than content: the
/// `cf-mitigated: challenge` header, an AWS WAF challenge action, or a body marker.
pub fn challenge_evidence(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    if let Some(v) = headers.get("cf-mitigated").and_then(|v| v.to_str().ok())
        && v.eq_ignore_ascii_case("challenge")
    {
        return Some("header cf-mitigated: challenge".into());
    }
    if let Some(v) = headers
        .get("x-amzn-waf-action")
        .and_then(|v| v.to_str().ok())
        && (v.eq_ignore_ascii_case("challenge") || v.eq_ignore_ascii_case("captcha"))
    {
        return Some(format!("header x-amzn-waf-action: {v}"));
    }
    challenge_marker(&String::from_utf8_lossy(&body[..body.len().min(64 * 1024)]))
}

/// The challenge marker found in `text`, if any.
pub fn challenge_marker(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    BODY_MARKERS
        .iter()
        .find(|m| lower.contains(*m))
        .map(|m| format!("body marker {m:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_types_are_typed_errors() {
        for ct in [
            "image/png",
            "application/pdf",
            "application/octet-stream",
            "video/mp4",
        ] {
            assert!(matches!(
                classify(Some(ct), b"x"),
                Err(FetchError::Unsupported { .. })
            ));
        }
        assert!(matches!(
            classify(None, b"\x89PNG\r\n\x1a\n\0\0"),
            Err(FetchError::Unsupported { .. })
        ));
    }

    #[test]
    fn charsets_decode() {
        // "café" in windows-1252 and in UTF-8, declared and undeclared.
        assert_eq!(
            decode(
                b"caf\xe9",
                Some("text/plain; charset=windows-1252"),
                ContentKind::Text
            ),
            "café"
        );
        assert_eq!(
            decode(b"caf\xe9", Some("text/html"), ContentKind::Html),
            "café"
        );
        assert_eq!(
            decode("café".as_bytes(), Some("text/html"), ContentKind::Html),
            "café"
        );
        let sjis = b"<meta charset=\"shift_jis\">\x93\xfa\x96\x7b";
        assert!(decode(sjis, Some("text/html"), ContentKind::Html).ends_with("日本"));
        // A BOM beats the header.
        assert_eq!(
            decode(
                b"\xef\xbb\xbfcaf\xc3\xa9",
                Some("text/plain; charset=latin1"),
                ContentKind::Text
            ),
            "café"
        );
    }

    #[test]
    fn short_pages_keep_their_text() {
        let limits = HtmlLimits::DEFAULT;
        let (title, text) = readable_html(
            "<html><head><title>T</title></head><body><p>Hello world</p></body></html>",
            Some("https://example.com/"),
            &limits,
        )
        .unwrap();
        assert_eq!(title.as_deref(), Some("T"));
        assert!(text.contains("Hello world"), "{text:?}");
        let (_, text) = readable_html("<div>just <b>text</b></div>", None, &limits).unwrap();
        assert!(text.contains("just"), "{text:?}");
    }

    #[test]
    fn pages_over_a_limit_are_typed_errors() {
        let limits = HtmlLimits::DEFAULT;
        let deep = "<div>".repeat(limits.max_depth * 10);
        let refused = extract(
            Some("text/html"),
            deep.as_bytes(),
            "https://e.com/",
            100,
            &limits,
        );
        assert_eq!(
            refused.map(|e| e.text),
            Err(FetchError::PageTooComplex {
                refusal: agent_readable::HtmlRefusal::TooDeep {
                    limit: limits.max_depth
                }
            })
        );
        // The same markup as plain text is not parsed, so not refused.
        assert!(
            extract(
                Some("text/plain"),
                deep.as_bytes(),
                "https://e.com/",
                100,
                &limits
            )
            .is_ok()
        );
    }

    #[test]
    fn truncation_is_by_characters() {
        assert_eq!(truncate_chars("héllo".into(), 5), ("héllo".into(), false));
        assert_eq!(truncate_chars("héllo".into(), 2), ("hé".into(), true));
    }
}
