//! Where readable-text extraction runs: the [`ReadableExtractor`] trait
//! that both tools (`fetch_url`, `extract_document`) hand HTML to, the
//! request and answer that cross to the place that runs it
//! ([`ReadableRequest`], [`BoundedReadable`]), and [`answer`], the one
//! function every such place calls, so the place and the tools cannot
//! disagree on a field or a limit.
//!
//! A host implements the trait with something it can stop whatever the
//! parser is doing: natively a sandbox child process that has an
//! address-space limit and is killed at the deadline (`agentrt
//! __document-sandbox`), in a tab a dedicated Worker that is terminated at
//! the deadline. A lost place is an [`ExtractorError`], never an abort of
//! the caller. The pre-scan limits ([`crate::HtmlLimits`]) still refuse
//! cheaply, inside the place, what would be slow.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{HtmlLimits, ReadableError, TextStyle};

/// One HTML document for the place that extracts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadableRequest {
    /// The document, already decoded to UTF-8.
    pub html: String,
    /// Resolves relative links; an unusable one is ignored.
    pub url: Option<String>,
    pub style: TextStyle,
    pub limits: HtmlLimits,
    /// Characters of text (and of title) returned at most: the answer that
    /// crosses back is bounded by it.
    pub max_chars: usize,
}

/// Readable text cut to the request's `max_chars`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundedReadable {
    /// The title, at most `max_chars` characters.
    pub title: Option<String>,
    /// Trimmed, at most `max_chars` characters; may be empty.
    pub text: String,
    /// Characters in `text`.
    pub chars: usize,
    /// Characters in the whole readable text.
    pub total_chars: usize,
    /// True when `text` is not the whole readable text.
    pub truncated: bool,
}

/// Why an extractor has no readable text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractorError {
    /// The document's own outcome: over a limit, or no article. A place
    /// that ended on a signal of its own (natively the abort at its
    /// address-space cap, or a stack overflow) answers
    /// [`crate::HtmlRefusal::OverMemoryCap`] here.
    #[error("{0}")]
    Readable(#[from] ReadableError),
    /// The work did not end by the deadline: the place was stopped
    /// (killed, terminated) there.
    #[error(
        "the text extraction did not finish within its {deadline_ms} ms deadline and was stopped"
    )]
    TimedOut { deadline_ms: u64 },
    /// The place could not start, or was lost otherwise; it may be retried.
    #[error("the text extraction was lost: {0}")]
    Lost(String),
}

/// `text` cut to `max` characters, with the characters kept and in all.
pub fn clip_chars(mut text: String, max: usize) -> (String, usize, usize) {
    let total = text.chars().count();
    if total > max {
        let cut = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
        text.truncate(cut);
    }
    (text, total.min(max), total)
}

/// The answer to `request`, computed here: [`crate::readable_text`], then
/// the text and title cut to `max_chars`. Every place that extracts (the
/// sandbox child, the Worker, a tool without an extractor) calls this.
pub fn answer(request: &ReadableRequest) -> Result<BoundedReadable, ReadableError> {
    let page = crate::readable_text(
        &request.html,
        request.url.as_deref(),
        request.style,
        &request.limits,
    )?;
    let title = page.title.map(|t| clip_chars(t, request.max_chars).0);
    let (text, chars, total_chars) = clip_chars(page.text, request.max_chars);
    Ok(BoundedReadable {
        title,
        text,
        chars,
        total_chars,
        truncated: total_chars > chars,
    })
}

/// The longest answer (JSON) a place may send for a request with
/// `max_chars`: text and title at 4 bytes per character, each byte
/// escaped to at most 6, with room for the fields.
pub fn answer_limit(max_chars: usize) -> usize {
    2 * 4 * 6 * max_chars + 64 * 1024
}

/// A place that runs readable-text extraction apart from the caller and
/// can stop it at `deadline` whatever the parser is doing.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait ReadableExtractor: MaybeSendSync {
    /// Extract `request` (see [`answer`]); past `deadline` the work is
    /// stopped and the answer is [`ExtractorError::TimedOut`].
    async fn extract(
        &self,
        request: ReadableRequest,
        deadline: Duration,
    ) -> Result<BoundedReadable, ExtractorError>;
}

/// `Send + Sync` natively; nothing in the browser, whose futures and
/// handles are single-threaded.
#[cfg(not(target_arch = "wasm32"))]
pub trait MaybeSendSync: Send + Sync {}
#[cfg(not(target_arch = "wasm32"))]
impl<T: Send + Sync + ?Sized> MaybeSendSync for T {}
/// `Send + Sync` natively; nothing in the browser, whose futures and
/// handles are single-threaded.
#[cfg(target_arch = "wasm32")]
pub trait MaybeSendSync {}
#[cfg(target_arch = "wasm32")]
impl<T: ?Sized> MaybeSendSync for T {}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(html: &str, max_chars: usize) -> ReadableRequest {
        ReadableRequest {
            html: html.into(),
            url: None,
            style: TextStyle::Formatted,
            limits: HtmlLimits::DEFAULT,
            max_chars,
        }
    }

    #[test]
    fn answer_cuts_text_and_title_to_max_chars() {
        let html = "<html><head><title>A long title here</title></head><body><article><p>abcdefghij klmnop</p></article></body></html>";
        let whole = answer(&request(html, 10_000)).unwrap();
        assert!(!whole.truncated);
        assert_eq!(whole.chars, whole.total_chars);
        let cut = answer(&request(html, 4)).unwrap();
        assert!(cut.truncated);
        assert_eq!(cut.chars, 4);
        assert_eq!(cut.text.chars().count(), 4);
        assert_eq!(cut.total_chars, whole.total_chars);
        assert!(cut.title.unwrap().chars().count() <= 4);
    }

    #[test]
    fn answers_cross_as_json() {
        let refused: Result<BoundedReadable, ReadableError> = Err(ReadableError::Refused(
            crate::HtmlRefusal::TooManyAttributes { limit: 3 },
        ));
        let text = serde_json::to_string(&refused).unwrap();
        let back: Result<BoundedReadable, ReadableError> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, refused);
    }
}
