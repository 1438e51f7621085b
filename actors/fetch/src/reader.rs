//! The native reader: direct reads that connect only to vetted addresses
//! (a reqwest resolver pinned to the policy's answer, no proxy, redirects
//! followed by hand and re-checked), and the Jina-first flow (S8.1–S8.5).
//! All deadlines run on the host clock.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent_kernel::actor::run_blocking;
use agent_kernel::host::{Clock, Executor, timeout};
use futures::FutureExt;
use reqwest::header::{self, HeaderMap, HeaderValue};

use agent_readable::{ExtractionSlots, ExtractorError, ReadableExtractor, on_extraction_stack};

use crate::content;
use crate::jina::{self, JinaVerdict};
use crate::model::{
    FallbackReason, FetchError, FlowFailure, Limits, Page, ReaderConfig, ReaderUsed, Stage, millis,
};
use crate::policy::{CheckedUrl, UrlPolicy};
use agent_kernel::tool::CancelToken;

const USER_AGENT: &str = concat!("agentrt-fetch/", env!("CARGO_PKG_VERSION"));
const ACCEPT: &str = "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.5";

/// Headers that never cross from one origin to another on a redirect.
const CROSS_ORIGIN_DROPPED: [header::HeaderName; 3] = [
    header::AUTHORIZATION,
    header::COOKIE,
    header::PROXY_AUTHORIZATION,
];

/// A reqwest resolver that answers only the vetted host, with only its vetted
/// addresses: whatever DNS says after the check, the connection goes there.
struct PinnedResolver {
    host: String,
    addrs: Vec<SocketAddr>,
}

impl reqwest::dns::Resolve for PinnedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let asked = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        let answer: Result<reqwest::dns::Addrs, Box<dyn std::error::Error + Send + Sync>> =
            if asked == self.host {
                Ok(Box::new(self.addrs.clone().into_iter()))
            } else {
                Err(format!("{asked} was not vetted by the URL policy").into())
            };
        Box::pin(futures::future::ready(answer))
    }
}

/// A client builder that reaches `checked` only at the addresses the URL
/// policy vetted (DNS is not asked again, so a rebinding between check and
/// connect goes nowhere), with no proxy and no redirects followed. The one
/// owner of that rule: every request to a policy-checked URL is sent by a
/// client built from here.
pub fn pinned_client_builder(checked: &CheckedUrl) -> reqwest::ClientBuilder {
    // `agent_http` owns the no-redirect, no-proxy rule; this adds the pin.
    let builder = agent_http::strict_builder(&agent_http::ClientOptions::default());
    if checked.is_ip_literal() {
        builder
    } else {
        builder.dns_resolver(Arc::new(PinnedResolver {
            host: checked.host().to_owned(),
            addrs: checked.addrs().to_vec(),
        }))
    }
}

/// The raw result of a direct read, before text extraction.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub final_url: String,
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub body_truncated: bool,
    pub redirects: Vec<String>,
}

/// Direct reads of checked URLs.
#[derive(Clone)]
pub struct DirectReader {
    policy: UrlPolicy,
    limits: Limits,
    clock: Arc<dyn Clock>,
    /// Where readable-text extraction runs; inline when `None`.
    blocking: Option<Arc<dyn Executor>>,
    /// How many extractions run at once (shared with `extract_document`).
    extraction: ExtractionSlots,
    /// Where HTML's readable text is extracted: here when `None`.
    extractor: Option<Arc<dyn ReadableExtractor>>,
}

fn network(e: reqwest::Error) -> FetchError {
    FetchError::Network {
        detail: network_detail(e),
    }
}

fn network_detail(e: reqwest::Error) -> String {
    // Walk the source chain: reqwest's top message alone ("error sending
    // request") does not say what failed.
    let mut detail = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    detail
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Read at most `max` bytes of a body, chunk by chunk; true when more was left.
async fn read_limited(
    resp: &mut reqwest::Response,
    max: usize,
) -> Result<(Vec<u8>, bool), FetchError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(network)? {
        let room = max - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

fn auth_scheme(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_whitespace().next())
        .map(str::to_owned)
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

impl DirectReader {
    pub fn new(policy: UrlPolicy, limits: Limits, clock: Arc<dyn Clock>) -> Self {
        Self {
            policy,
            limits,
            clock,
            blocking: None,
            extraction: ExtractionSlots::shared().clone(),
            extractor: None,
        }
    }

    /// Extract HTML's readable text in `extractor` (a place the host can
    /// stop at the deadline) instead of on this process's threads.
    pub fn with_readable_extractor(mut self, extractor: Arc<dyn ReadableExtractor>) -> Self {
        self.extractor = Some(extractor);
        self
    }

    /// Run extractions in `slots` instead of the process-wide pool.
    pub fn with_extraction_slots(mut self, slots: ExtractionSlots) -> Self {
        self.extraction = slots;
        self
    }

    /// Run readable-text extraction (CPU work: about 60 ms per MiB of HTML)
    /// from `executor`'s blocking threads instead of the async task; either
    /// way the extraction itself runs on a thread of its own with a known
    /// stack ([`agent_readable::on_extraction_stack`]).
    pub fn with_blocking(mut self, executor: Arc<dyn Executor>) -> Self {
        self.blocking = Some(executor);
        self
    }

    pub fn policy(&self) -> &UrlPolicy {
        &self.policy
    }

    fn client_for(&self, checked: &CheckedUrl) -> Result<reqwest::Client, FetchError> {
        pinned_client_builder(checked)
            .user_agent(USER_AGENT)
            .build()
            .map_err(network)
    }

    /// Check `url`, then read it (see [`DirectReader::fetch_checked`]).
    pub async fn fetch(&self, url: &str, headers: HeaderMap) -> Result<RawResponse, FetchError> {
        let checked = self
            .policy
            .check(url)
            .await
            .map_err(|violation| FetchError::Policy { violation })?;
        self.fetch_checked(checked, headers).await
    }

    /// Read a checked URL: connect only to its vetted addresses, follow at
    /// most `max_redirects` hops, each checked by the policy before it is
    /// followed, dropping `Authorization`, `Cookie` and `Proxy-Authorization`
    /// when the origin changes; retry a 429 within the retry budget; stream
    /// the body up to the byte limit. No deadline here: callers add one.
    pub async fn fetch_checked(
        &self,
        mut checked: CheckedUrl,
        mut headers: HeaderMap,
    ) -> Result<RawResponse, FetchError> {
        headers
            .entry(header::ACCEPT)
            .or_insert(HeaderValue::from_static(ACCEPT));
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        let mut redirects = Vec::new();
        let mut retries = 0u32;
        loop {
            let client = self.client_for(&checked)?;
            let mut resp = client
                .get(checked.url().clone())
                .headers(headers.clone())
                .send()
                .await
                .map_err(network)?;
            let status = resp.status().as_u16();
            if is_redirect(status) {
                if redirects.len() >= self.limits.max_redirects {
                    return Err(FetchError::TooManyRedirects {
                        max: self.limits.max_redirects,
                    });
                }
                let location = resp
                    .headers()
                    .get(header::LOCATION)
                    .ok_or_else(|| FetchError::BadRedirect {
                        status,
                        detail: "no Location header".into(),
                    })?
                    .to_str()
                    .map_err(|e| FetchError::BadRedirect {
                        status,
                        detail: e.to_string(),
                    })?
                    .to_owned();
                let next = checked
                    .url()
                    .join(&location)
                    .map_err(|e| FetchError::BadRedirect {
                        status,
                        detail: format!("{location:?}: {e}"),
                    })?;
                let next = self.policy.check_url(next).await.map_err(|violation| {
                    FetchError::RedirectRefused {
                        location: location.clone(),
                        violation,
                    }
                })?;
                if next.origin() != checked.origin() {
                    for name in &CROSS_ORIGIN_DROPPED {
                        headers.remove(name);
                    }
                }
                redirects.push(next.url().to_string());
                checked = next;
                continue;
            }
            let (body, body_truncated) =
                read_limited(&mut resp, self.limits.max_body_bytes).await?;
            let resp_headers = resp.headers().clone();
            if let Some(evidence) = content::challenge_evidence(&resp_headers, &body) {
                return Err(FetchError::Challenge { evidence });
            }
            match status {
                401 => {
                    return Err(FetchError::AuthRequired {
                        status,
                        scheme: auth_scheme(&resp_headers, header::WWW_AUTHENTICATE),
                    });
                }
                407 => {
                    return Err(FetchError::AuthRequired {
                        status,
                        scheme: auth_scheme(&resp_headers, header::PROXY_AUTHENTICATE),
                    });
                }
                403 if resp_headers.contains_key(header::WWW_AUTHENTICATE) => {
                    return Err(FetchError::AuthRequired {
                        status,
                        scheme: auth_scheme(&resp_headers, header::WWW_AUTHENTICATE),
                    });
                }
                403 | 451 => return Err(FetchError::RefusedByTarget { status }),
                429 => {
                    let wait = retry_after(&resp_headers).unwrap_or(Duration::from_secs(1));
                    if retries < self.limits.retries_after_429
                        && wait <= self.limits.max_retry_after
                    {
                        retries += 1;
                        self.clock.sleep(wait).await;
                        continue;
                    }
                    return Err(FetchError::RefusedByTarget { status });
                }
                200..=299 => {}
                _ => return Err(FetchError::HttpStatus { status }),
            }
            return Ok(RawResponse {
                final_url: checked.url().to_string(),
                status,
                headers: resp_headers,
                body,
                body_truncated,
                redirects,
            });
        }
    }

    /// A full direct read of a checked URL within `budget`: fetch, then
    /// readable text. The page's `reader` is `direct`.
    pub async fn read_checked(
        &self,
        checked: CheckedUrl,
        budget: Duration,
    ) -> Result<Page, FetchError> {
        let requested = checked.url().to_string();
        let raw = timeout(
            self.clock.as_ref(),
            budget,
            self.fetch_checked(checked, HeaderMap::new()),
        )
        .await
        .map_err(|_| FetchError::Timeout { ms: millis(budget) })??;
        let content_type = raw
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let max_chars = self.limits.max_text_chars;
        let html = self.limits.html;
        // One of the shared slots, held until the extraction really ends;
        // the work runs on a thread with a known stack, and the HTML limits
        // bound how long it can take (the book's "Public web reads" chapter,
        // "Limits of fetch_url and extract_document").
        let lost = |detail: String| FetchError::Internal { detail };
        let slot = self
            .extraction
            .acquire()
            .await
            .map_err(|e| lost(e.to_string()))?;
        if let Some(extractor) = &self.extractor {
            // In a place the host can stop (a sandbox process, a Worker):
            // the slot is held while it works and free when it is stopped.
            let extracted = match content::prepare(
                content_type.as_deref(),
                &raw.body,
                &raw.final_url,
                max_chars,
                &html,
            )? {
                content::Prepared::Done(extracted) => extracted,
                content::Prepared::Html {
                    request,
                    content_type,
                } => {
                    let deadline = self.limits.total_timeout;
                    let answer = match extractor.extract(request, deadline).await {
                        Ok(page) => Ok(page),
                        Err(ExtractorError::Readable(refused)) => Err(refused),
                        Err(ExtractorError::TimedOut { deadline_ms }) => {
                            return Err(FetchError::Timeout { ms: deadline_ms });
                        }
                        Err(ExtractorError::Lost(detail)) => return Err(lost(detail)),
                    };
                    content::html_extracted(answer, content_type)?
                }
            };
            drop(slot);
            return Ok(self.page(requested, raw, extracted));
        }
        let body = raw.body.clone();
        let url = raw.final_url.clone();
        let job = move || {
            let _slot = slot;
            on_extraction_stack(|| {
                content::extract(content_type.as_deref(), &body, &url, max_chars, &html)
            })
        };
        let extracted = match &self.blocking {
            None => job(),
            Some(executor) => run_blocking(executor.as_ref(), job)
                .await
                .map_err(|e| lost(format!("text extraction did not finish: {e}")))?,
        }
        .map_err(|e| lost(e.to_string()))??;
        Ok(self.page(requested, raw, extracted))
    }

    fn page(&self, requested: String, raw: RawResponse, extracted: content::Extracted) -> Page {
        Page {
            requested_url: requested,
            final_url: raw.final_url,
            reader: ReaderUsed::Direct,
            fallback: None,
            title: extracted.title,
            text: extracted.text,
            content_type: extracted.content_type,
            status: raw.status,
            body_bytes: raw.body.len() as u64,
            body_truncated: raw.body_truncated,
            text_truncated: extracted.text_truncated,
            redirects: raw.redirects,
            fetched_at_ms: self.clock.wall_ms(),
        }
    }
}

/// The built-in reader: the URL policy, then Jina Reader for up to one
/// request deadline, then (only when S8.3 permits) one direct read with
/// min(request deadline, time left), all inside the total deadline.
#[derive(Clone)]
pub struct WebReader {
    direct: DirectReader,
    config: ReaderConfig,
    limits: Limits,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for WebReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebReader")
            .field("config", &self.config)
            .field("limits", &self.limits)
            .finish()
    }
}

enum JinaStage {
    Done(Result<Page, FlowFailure>),
    Fallback(FallbackReason),
}

impl WebReader {
    pub fn new(
        policy: UrlPolicy,
        config: ReaderConfig,
        limits: Limits,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            direct: DirectReader::new(policy, limits, clock.clone()),
            config,
            limits,
            clock,
        }
    }

    /// Run readable-text extraction on `executor`'s blocking threads (see
    /// [`DirectReader::with_blocking`]); hosts should, tests need not.
    pub fn with_blocking(mut self, executor: Arc<dyn Executor>) -> Self {
        self.direct = self.direct.with_blocking(executor);
        self
    }

    /// Run extractions in `slots` instead of the process-wide pool.
    pub fn with_extraction_slots(mut self, slots: ExtractionSlots) -> Self {
        self.direct = self.direct.with_extraction_slots(slots);
        self
    }

    /// Extract HTML's readable text in `extractor` (see
    /// [`DirectReader::with_readable_extractor`]).
    pub fn with_readable_extractor(mut self, extractor: Arc<dyn ReadableExtractor>) -> Self {
        self.direct = self.direct.with_readable_extractor(extractor);
        self
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn direct(&self) -> &DirectReader {
        &self.direct
    }

    /// Read `url` through the whole flow. Cancellation and the total deadline
    /// win over whatever the current stage is doing.
    pub async fn read(&self, url: &str, cancel: CancelToken) -> Result<Page, FlowFailure> {
        let total = self.limits.total_timeout;
        let total_sleep = self.clock.sleep(total).fuse();
        let cancelled = cancel.cancelled().fuse();
        let work = self.flow(url).fuse();
        futures::pin_mut!(total_sleep, cancelled, work);
        futures::select_biased! {
            () = cancelled => Err(FlowFailure::new(Stage::Flow, FetchError::Cancelled)),
            () = total_sleep => Err(FlowFailure::new(Stage::Flow, FetchError::TotalDeadline { ms: millis(total) })),
            result = work => result,
        }
    }

    async fn flow(&self, url: &str) -> Result<Page, FlowFailure> {
        let start = self.clock.monotonic();
        let checked = self.direct.policy.check(url).await.map_err(|violation| {
            FlowFailure::new(Stage::Policy, FetchError::Policy { violation })
        })?;
        let mut fallback = None;
        if let Some(base) = &self.config.jina_base {
            let stage = self.limits.request_timeout.min(self.limits.total_timeout);
            match timeout(self.clock.as_ref(), stage, self.jina(base, url, &checked)).await {
                Err(_) => {
                    fallback = Some(FallbackReason::JinaTimeout { ms: millis(stage) });
                }
                Ok(JinaStage::Done(result)) => return result,
                Ok(JinaStage::Fallback(reason)) => fallback = Some(reason),
            }
        }
        let spent = self.clock.monotonic().saturating_sub(start);
        let budget = self
            .limits
            .request_timeout
            .min(self.limits.total_timeout.saturating_sub(spent));
        match self.direct.read_checked(checked, budget).await {
            Ok(mut page) => {
                page.requested_url = url.to_owned();
                page.fallback = fallback;
                Ok(page)
            }
            Err(reason) => Err(FlowFailure {
                stage: Stage::Direct,
                reason,
                fallback,
            }),
        }
    }

    async fn jina(&self, base: &str, requested: &str, checked: &CheckedUrl) -> JinaStage {
        let fail = |reason| JinaStage::Done(Err(FlowFailure::new(Stage::Jina, reason)));
        let client = match agent_http::strict_client(&agent_http::ClientOptions {
            user_agent: Some(USER_AGENT.to_owned()),
            ..agent_http::ClientOptions::default()
        }) {
            Ok(c) => c,
            Err(e) => {
                return JinaStage::Fallback(FallbackReason::JinaNetwork {
                    detail: e.to_string(),
                });
            }
        };
        let mut request = client
            .get(jina::reader_url(base, checked.url().as_str()))
            .header(header::ACCEPT, "application/json");
        if let Some(key) = &self.config.jina_key {
            request = request.bearer_auth(key);
        }
        let mut resp = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                return JinaStage::Fallback(FallbackReason::JinaNetwork {
                    detail: network_detail(e),
                });
            }
        };
        let status = resp.status().as_u16();
        // JSON escaping can double a page's size: Jina gets twice the body limit.
        let (body, truncated) =
            match read_limited(&mut resp, self.limits.max_body_bytes.saturating_mul(2)).await {
                Ok(b) => b,
                Err(FetchError::Network { detail }) => {
                    return JinaStage::Fallback(FallbackReason::JinaNetwork { detail });
                }
                Err(other) => return fail(other),
            };
        match jina::interpret(
            status,
            resp.headers(),
            &body,
            truncated,
            self.limits.max_text_chars,
        ) {
            JinaVerdict::Fallback(reason) => JinaStage::Fallback(reason),
            JinaVerdict::Stop(reason) => fail(reason),
            JinaVerdict::Content(c) => JinaStage::Done(Ok(Page {
                requested_url: requested.to_owned(),
                final_url: c.url.unwrap_or_else(|| checked.url().to_string()),
                reader: ReaderUsed::Jina,
                fallback: None,
                title: c.title,
                body_bytes: c.text.len() as u64,
                text: c.text,
                content_type: "text/markdown".into(),
                status,
                body_truncated: false,
                text_truncated: c.text_truncated,
                redirects: Vec::new(),
                fetched_at_ms: self.clock.wall_ms(),
            })),
        }
    }
}
