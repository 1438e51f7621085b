//! Jina Reader's JSON mode (S8.3–S8.5): the request URL, and the pure
//! interpretation of an answer into a page, a permitted fallback, or a stop.
//! `GET <base>/<target>` with `Accept: application/json` answers
//! `{"code": 200, "status": 20000, "data": {"title", "url", "content"}}`.

use reqwest::header::HeaderMap;
use serde::Deserialize;

use crate::content::{challenge_evidence, challenge_marker, truncate_chars};
use crate::model::{FallbackReason, FetchError};

/// The reader's URL for `target`: `<base>/<target>`.
pub fn reader_url(base: &str, target: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), target)
}

#[derive(Debug, Deserialize)]
struct Envelope {
    code: i64,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "readableMessage")]
    readable_message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Data {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    warning: Option<String>,
}

/// What Jina's content says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JinaContent {
    pub title: Option<String>,
    pub url: Option<String>,
    pub text: String,
    pub text_truncated: bool,
}

/// How the flow continues after Jina answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JinaVerdict {
    /// Content: the flow ends with it.
    Content(JinaContent),
    /// One direct read is permitted (S8.3).
    Fallback(FallbackReason),
    /// The flow stops with this reason (S8.4, S8.5).
    Stop(FetchError),
}

/// The HTTP status that a Jina warning such as "Target URL returned error
/// 403: Forbidden" reports for the target.
fn warned_status(warning: &str) -> Option<u16> {
    let lower = warning.to_ascii_lowercase();
    let at = lower.find("returned error")? + "returned error".len();
    let digits: String = lower[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Classify an answer of the reader service. `body_truncated` means the body
/// exceeded the reader's byte limit (its JSON cannot be complete).
pub fn interpret(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    body_truncated: bool,
    max_chars: usize,
) -> JinaVerdict {
    if status >= 500 {
        return JinaVerdict::Fallback(FallbackReason::JinaServerError { status });
    }
    // A challenge served by the reader service itself (its own edge).
    let envelope = serde_json::from_slice::<Envelope>(body);
    let header_challenge = challenge_evidence(headers, b"");
    if let Some(evidence) = header_challenge {
        return JinaVerdict::Fallback(FallbackReason::JinaChallenge { evidence });
    }
    let envelope = match envelope {
        Ok(env) => env,
        Err(e) => {
            if let Some(evidence) = challenge_evidence(headers, body) {
                return JinaVerdict::Fallback(FallbackReason::JinaChallenge { evidence });
            }
            let detail = if body_truncated {
                "the answer exceeded the reader's byte limit".to_owned()
            } else {
                format!("not Jina's JSON: {e}")
            };
            return JinaVerdict::Stop(FetchError::JinaMalformed { status, detail });
        }
    };
    if envelope.code != 200 {
        return JinaVerdict::Stop(FetchError::JinaApplication {
            code: envelope.code,
            message: envelope.readable_message.or(envelope.message),
        });
    }
    let Some(data) = envelope.data else {
        return JinaVerdict::Stop(FetchError::JinaMalformed {
            status,
            detail: "code 200 without data".into(),
        });
    };
    if let Some(target_status) = data.warning.as_deref().and_then(warned_status) {
        match target_status {
            401 | 407 => {
                return JinaVerdict::Stop(FetchError::AuthRequired {
                    status: target_status,
                    scheme: None,
                });
            }
            403 | 429 | 451 => {
                return JinaVerdict::Stop(FetchError::RefusedByTarget {
                    status: target_status,
                });
            }
            _ => {}
        }
    }
    let content = data.content.unwrap_or_default();
    let title = data.title.filter(|t| !t.trim().is_empty());
    let probe = format!("title: {}\n{}", title.as_deref().unwrap_or(""), content);
    if let Some(evidence) = challenge_marker(&probe) {
        return JinaVerdict::Stop(FetchError::Challenge { evidence });
    }
    let (text, text_truncated) = truncate_chars(content, max_chars);
    JinaVerdict::Content(JinaContent {
        title,
        url: data.url,
        text,
        text_truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_url_joins() {
        assert_eq!(
            reader_url("http://127.0.0.1:9/", "https://example.com/a?b=1"),
            "http://127.0.0.1:9/https://example.com/a?b=1"
        );
    }

    #[test]
    fn warnings_name_the_target_status() {
        assert_eq!(
            warned_status("Target URL returned error 403: Forbidden"),
            Some(403)
        );
        assert_eq!(warned_status("nothing"), None);
    }

    #[test]
    fn application_error_whatever_the_http_status() {
        let body = br#"{"code":422,"status":42206,"message":"bad"}"#;
        for status in [200, 400, 422] {
            assert!(matches!(
                interpret(status, &HeaderMap::new(), body, false, 100),
                JinaVerdict::Stop(FetchError::JinaApplication { code: 422, .. })
            ));
        }
    }
}
