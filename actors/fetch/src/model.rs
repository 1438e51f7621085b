//! The data of a public web read: limits (S8.2), the reader configuration,
//! the page a read returns, and the typed reason of every way it can fail
//! (the outcome table of S8.3–S8.5). All of it crosses the gateway as JSON.

use std::time::Duration;

use agent_readable::{HtmlLimits, HtmlRefusal};
use serde::{Deserialize, Serialize};

use crate::policy::PolicyViolation;

/// The limits of one read. [`Limits::spec`] holds SPEC S8.2/S8.3's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Deadline of one request stage (Jina, or the direct read with all its hops).
    pub request_timeout: Duration,
    /// Deadline of the whole Jina-first flow.
    pub total_timeout: Duration,
    /// Bytes of a response body read before reading stops (streamed): the
    /// rest is never downloaded, the page reports `body_truncated`, and its
    /// readable text comes from the bytes read. Jina's JSON answer may use
    /// twice this (JSON escaping), and is a `JinaMalformed` stop beyond it.
    pub max_body_bytes: usize,
    /// Characters of readable text kept.
    pub max_text_chars: usize,
    /// Redirect hops followed, each checked by the policy first.
    pub max_redirects: usize,
    /// Extra attempts after a 429 before it counts as a refusal.
    pub retries_after_429: u32,
    /// The longest `Retry-After` waited for; a longer one is a refusal at once.
    pub max_retry_after: Duration,
    /// Bounds on the HTML handed to readable-text extraction (input bytes,
    /// nesting depth, elements), checked before any parser runs; a page
    /// over one is [`FetchError::PageTooComplex`].
    #[serde(default)]
    pub html: HtmlLimits,
}

impl Limits {
    /// SPEC's numbers: 15 s per request, 30 s in total, 2 MiB, 40,000
    /// characters, 5 redirect hops; one retry after a 429 that asks for at
    /// most 2 s; HTML within [`HtmlLimits::DEFAULT`].
    pub const fn spec() -> Self {
        Limits {
            request_timeout: Duration::from_secs(15),
            total_timeout: Duration::from_secs(30),
            max_body_bytes: 2 * 1024 * 1024,
            max_text_chars: 40_000,
            max_redirects: 5,
            retries_after_429: 1,
            max_retry_after: Duration::from_secs(2),
            html: HtmlLimits::DEFAULT,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::spec()
    }
}

/// Where Jina Reader lives and its key. User configuration, like model and
/// plugin endpoints: the public-address rule for model-supplied URLs does
/// not apply to it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReaderConfig {
    /// e.g. `https://r.jina.ai`; `None` disables Jina (direct reads only).
    pub jina_base: Option<String>,
    /// Sent to Jina only, as `Authorization: Bearer`; never to a target.
    #[serde(default, skip_serializing)]
    pub jina_key: Option<String>,
}

impl std::fmt::Debug for ReaderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderConfig")
            .field("jina_base", &self.jina_base)
            .field("jina_key", &self.jina_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl ReaderConfig {
    /// The public Jina Reader endpoint, without a key.
    pub fn jina_public() -> Self {
        ReaderConfig {
            jina_base: Some("https://r.jina.ai".into()),
            jina_key: None,
        }
    }
    /// No Jina: every read is direct.
    pub fn direct_only() -> Self {
        ReaderConfig {
            jina_base: None,
            jina_key: None,
        }
    }
}

/// Which reader produced a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReaderUsed {
    Jina,
    Direct,
}

impl ReaderUsed {
    pub fn as_str(self) -> &'static str {
        match self {
            ReaderUsed::Jina => "jina",
            ReaderUsed::Direct => "direct",
        }
    }
}

/// Why Jina's answer permitted one direct read (S8.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FallbackReason {
    #[error("Jina Reader could not be reached: {detail}")]
    JinaNetwork { detail: String },
    #[error("Jina Reader did not answer within its {ms} ms stage")]
    JinaTimeout { ms: u64 },
    #[error("Jina Reader answered HTTP {status}")]
    JinaServerError { status: u16 },
    #[error("Jina Reader served its own challenge page ({evidence})")]
    JinaChallenge { evidence: String },
}

/// The page a successful read returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    pub requested_url: String,
    /// The URL the content came from, after redirects (or as Jina reports it).
    pub final_url: String,
    pub reader: ReaderUsed,
    /// Why Jina was skipped for a direct read, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<FallbackReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Readable text (Markdown for HTML; as served for text, Markdown, JSON).
    pub text: String,
    /// The media type the content was served as (`text/html`, `application/json`, ...).
    pub content_type: String,
    /// HTTP status of the final response.
    pub status: u16,
    /// Body bytes read (at most the body limit).
    pub body_bytes: u64,
    /// Reading stopped at the body limit.
    pub body_truncated: bool,
    /// The readable text was cut at the character limit.
    pub text_truncated: bool,
    /// Every redirect target followed, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirects: Vec<String>,
    /// Host wall time when the content arrived.
    pub fetched_at_ms: u64,
}

/// Which part of the flow ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Before anything was fetched (the URL policy).
    Policy,
    Jina,
    Direct,
    /// The flow as a whole (cancellation, the total deadline).
    Flow,
    /// The browser's call to the native gateway.
    Gateway,
}

/// Why a read failed: one typed reason per row of the outcome table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum FetchError {
    #[error("refused by the URL policy: {violation}")]
    Policy { violation: PolicyViolation },
    #[error("a redirect to {location:?} was refused by the URL policy: {violation}")]
    RedirectRefused {
        location: String,
        violation: PolicyViolation,
    },
    #[error("more than {max} redirects; the chain was not followed further")]
    TooManyRedirects { max: usize },
    #[error("a redirect (HTTP {status}) had no usable Location ({detail})")]
    BadRedirect { status: u16, detail: String },
    #[error("the read was cancelled by the user")]
    Cancelled,
    #[error("the {ms} ms total deadline of the read expired")]
    TotalDeadline { ms: u64 },
    #[error("the direct read did not finish within its {ms} ms deadline")]
    Timeout { ms: u64 },
    #[error("network failure: {detail}")]
    Network { detail: String },
    #[error("the site requires authentication (HTTP {status}{}); it cannot be read without signing in", scheme.as_ref().map(|s| format!(", {s}")).unwrap_or_default())]
    AuthRequired { status: u16, scheme: Option<String> },
    #[error("the site refused the read (HTTP {status})")]
    RefusedByTarget { status: u16 },
    #[error("the site served a challenge page instead of content ({evidence}); it is not read")]
    Challenge { evidence: String },
    #[error("Jina Reader reported an application error (code {code}{}); no direct read follows", message.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    JinaApplication { code: i64, message: Option<String> },
    #[error(
        "Jina Reader's answer could not be understood (HTTP {status}: {detail}); no direct read follows"
    )]
    JinaMalformed { status: u16, detail: String },
    #[error("the site answered HTTP {status}")]
    HttpStatus { status: u16 },
    #[error(
        "content type {content_type:?} is binary; only HTML, text, Markdown and JSON can be read"
    )]
    Unsupported { content_type: String },
    #[error(
        "the page is too complex to read safely ({refusal}); its text was not extracted, and reading it again gives the same answer"
    )]
    PageTooComplex { refusal: HtmlRefusal },
    #[error("the native gateway failed: {detail}")]
    Gateway { status: Option<u16>, detail: String },
    #[error("internal failure of the reader: {detail}; try again")]
    Internal { detail: String },
}

impl FetchError {
    /// A stable snake_case code for the tool envelope.
    pub fn code(&self) -> &'static str {
        match self {
            FetchError::Policy { .. } => "url_refused",
            FetchError::RedirectRefused { .. } => "redirect_refused",
            FetchError::TooManyRedirects { .. } => "too_many_redirects",
            FetchError::BadRedirect { .. } => "bad_redirect",
            FetchError::Cancelled => "cancelled",
            FetchError::TotalDeadline { .. } => "total_deadline",
            FetchError::Timeout { .. } => "timeout",
            FetchError::Network { .. } => "network",
            FetchError::AuthRequired { .. } => "auth_required",
            FetchError::RefusedByTarget { .. } => "refused_by_target",
            FetchError::Challenge { .. } => "challenge",
            FetchError::JinaApplication { .. } => "jina_application_error",
            FetchError::JinaMalformed { .. } => "jina_malformed",
            FetchError::HttpStatus { .. } => "http_status",
            FetchError::Unsupported { .. } => "unsupported_content",
            FetchError::PageTooComplex { .. } => "page_too_complex",
            FetchError::Gateway { .. } => "gateway",
            FetchError::Internal { .. } => "internal",
        }
    }

    /// Whether trying the same read later might succeed.
    pub fn retryable(&self) -> bool {
        match self {
            FetchError::Timeout { .. }
            | FetchError::TotalDeadline { .. }
            | FetchError::Network { .. }
            | FetchError::Gateway { .. }
            | FetchError::Internal { .. } => true,
            FetchError::HttpStatus { status } => *status >= 500,
            _ => false,
        }
    }
}

/// A failed read: the reason, the stage that ended the flow, and why Jina
/// was skipped if a direct read followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}")]
pub struct FlowFailure {
    pub stage: Stage,
    pub reason: FetchError,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<FallbackReason>,
}

impl FlowFailure {
    pub fn new(stage: Stage, reason: FetchError) -> Self {
        FlowFailure {
            stage,
            reason,
            fallback: None,
        }
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
