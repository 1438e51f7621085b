//! The HTTP side every remote model provider shares: one POST with a JSON
//! body, retried when the endpoint is unreachable or answers 429 or 5xx —
//! with capped, jittered exponential backoff (a server's `retry-after` is
//! honoured as sent), sleeping through the host clock, bounded both in
//! attempts and in time ([`RetryPolicy`]); any other status fails at once.
//! Past the bound the error is an outage ([`ProviderError::is_outage`]),
//! which interrupts the run (S13.2). A redirect is never followed: the
//! key header and the prompt stay with the configured endpoint, and the
//! round fails with [`ProviderError::Redirected`] (S13.5). The client and
//! the sender are `agent_http`'s (strict natively; in the browser the
//! page's fetch with `redirect: "manual"`). Never logs a header value or a body.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use agent_kernel::host::Clock;

use super::ProviderError;
use super::capabilities::CapabilityOverrides;

/// The response body as it arrives.
pub use agent_http::ByteStream;

/// How often and how patiently a refused request is sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt for 429, 5xx and connection failures.
    pub max_retries: u32,
    /// Delay before the first retry; doubles each time up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// No retry is started whose wait would end later than this after the
    /// first attempt: the time an outage may take from the run.
    pub max_elapsed: Duration,
    /// Natively, a connection that makes no progress (no answer, or a
    /// stream that stalls) for this long is a transport failure: before
    /// the answer it is retried, during it the round is repeated (then an
    /// outage). In a page the browser's own fetch rules apply.
    pub idle_timeout: Duration,
}

/// The most retries a configuration may ask for.
pub const MAX_RETRIES: u32 = 10;

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_elapsed: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0-based): the delay the
    /// server asked for when it gave one (`Retry-After`, `retry-after-ms`,
    /// Gemini's `RetryInfo.retryDelay`), honoured as sent — never shortened;
    /// if it ends past `max_elapsed` the request is not retried at all —
    /// else the doubling delay with "equal jitter" (its upper half scaled
    /// by `jitter`, a fraction in 0..1, so that clients refused together
    /// do not return together), never more than `max_backoff`.
    pub fn backoff(&self, retry: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        if let Some(after) = retry_after {
            return after;
        }
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << retry.min(16))
            .min(self.max_backoff);
        let half = exp / 2;
        half + half.mul_f64(jitter.clamp(0.0, 1.0))
    }
}

/// The most bytes of an error answer's body read for its explanation.
pub const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The most characters of a provider's own explanation kept in an error.
pub const MAX_PROVIDER_MESSAGE_CHARS: usize = 500;

/// The longest server-given delay read (a year): anything longer is a
/// malformed header, and past every retry bound anyway.
const MAX_SERVER_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

/// A `Retry-After` value: delay-seconds (`"34"`, and the fractional
/// `"1.5"` some servers send) or an HTTP-date (all three formats RFC 9110
/// accepts), the latter measured from `now_ms` (Unix ms); a date in the
/// past is no wait. `None` when it is neither.
pub fn retry_after(value: &str, now_ms: u64) -> Option<Duration> {
    let value = value.trim();
    if let Some(secs) = seconds(value) {
        return Some(secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let at_ms = at
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis()
        .min(u128::from(u64::MAX)) as u64;
    Some(Duration::from_millis(at_ms.saturating_sub(now_ms)).min(MAX_SERVER_DELAY))
}

/// OpenAI's `retry-after-ms`: milliseconds.
fn retry_after_ms(value: &str) -> Option<Duration> {
    let ms: f64 = value.trim().parse().ok()?;
    (ms.is_finite() && ms >= 0.0)
        .then(|| Duration::from_secs_f64(ms / 1000.0).min(MAX_SERVER_DELAY))
}

/// Non-negative decimal seconds.
fn seconds(value: &str) -> Option<Duration> {
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let secs: f64 = value.parse().ok()?;
    secs.is_finite()
        .then(|| Duration::from_secs_f64(secs.min(MAX_SERVER_DELAY.as_secs_f64())))
}

/// Gemini's (google.rpc) `RetryInfo` in `error.details`: `retryDelay` as a
/// protobuf Duration in JSON (`"34s"`, `"0.5s"`).
pub fn retry_info_delay(body: &str) -> Option<Duration> {
    let v: Value = serde_json::from_str(body).ok()?;
    v.pointer("/error/details")?
        .as_array()?
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| {
            d.get("retryDelay")
                .and_then(Value::as_str)
                .and_then(|s| s.trim().strip_suffix('s'))
                .and_then(seconds)
        })
}

/// Read at most [`MAX_ERROR_BODY_BYTES`] of an error answer's body (as
/// text; what does not decode is replaced).
async fn read_error_body(mut body: ByteStream) -> String {
    use futures::StreamExt;
    let mut bytes = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        let room = MAX_ERROR_BODY_BYTES - bytes.len();
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if bytes.len() >= MAX_ERROR_BODY_BYTES {
            break;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The provider's own explanation in an error body — `error.message`
/// (OpenAI, Anthropic, Gemini), or an `error` / `message` / `detail`
/// string (OpenAI-compatible servers) — sanitised: control characters
/// become spaces, whitespace runs one space, any request header value
/// (the key) and key-like words are redacted, and at most
/// [`MAX_PROVIDER_MESSAGE_CHARS`] characters are kept.
pub fn provider_message(body: &str, headers: &[(&'static str, String)]) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    let v = match &v {
        Value::Array(items) => items.first()?.clone(), // Gemini may wrap it in a list
        _ => v,
    };
    let text = [
        "/error/message",
        "/error",
        "/message",
        "/detail",
        "/error/error/message",
    ]
    .iter()
    .find_map(|p| v.pointer(p).and_then(Value::as_str))?;
    let mut clean = String::new();
    for word in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
        if !clean.is_empty() {
            clean.push(' ');
        }
        clean.push_str(&redact(word, headers));
    }
    if clean.is_empty() {
        return None;
    }
    if clean.chars().count() > MAX_PROVIDER_MESSAGE_CHARS {
        clean = clean.chars().take(MAX_PROVIDER_MESSAGE_CHARS).collect();
        clean.push('…');
    }
    Some(clean)
}

/// One word of a provider message, or `<redacted>` when it holds a request
/// header's value (or a header's secret part, such as a bearer token) or
/// looks like an API key (`sk-…`, `AIza…`, including masked forms).
fn redact(word: &str, headers: &[(&'static str, String)]) -> String {
    let secret_in_word = headers.iter().any(|(_, value)| {
        value
            .split_whitespace()
            .filter(|part| part.len() >= 8)
            .any(|part| word.contains(part))
    });
    let key_like = ["sk-", "sk_", "AIza", "x-api-key", "Bearer"]
        .iter()
        .any(|prefix| {
            word.trim_start_matches(|c: char| !c.is_alphanumeric())
                .starts_with(prefix)
        });
    if secret_in_word || key_like {
        "<redacted>".to_owned()
    } else {
        word.to_owned()
    }
}

/// A fraction in 0..1 for the backoff's jitter, mixed from the wall clock
/// and the attempt (SplitMix64's finaliser): no entropy source is needed,
/// and a manual clock makes it repeatable.
fn jitter_fraction(wall_ms: u64, attempt: u32) -> f64 {
    let mut z = wall_ms ^ (u64::from(attempt) << 32) ^ 0x9E37_79B9_7F4A_7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Where and how to reach a remote model: its endpoint's base URL, the key
/// (sent in the format's own header; never logged), the retry policy and
/// what the host says its model can do over the built-in table.
#[derive(Clone)]
pub struct EndpointConfig {
    pub base_url: String,
    pub api_key: Option<String>,
    pub retry: RetryPolicy,
    pub capabilities: CapabilityOverrides,
}

impl std::fmt::Debug for EndpointConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("retry", &self.retry)
            .field("capabilities", &self.capabilities)
            .finish()
    }
}

impl EndpointConfig {
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            retry: RetryPolicy::default(),
            capabilities: CapabilityOverrides::default(),
        }
    }
}

/// Check a provider's base URL: absolute, http or https. Returns it
/// without a trailing slash.
pub fn check_base_url(base_url: &str, example: &str) -> Result<String, ProviderError> {
    let base = base_url.trim_end_matches('/');
    let parsed = reqwest::Url::parse(base).map_err(|e| {
        ProviderError::Config(format!(
            "base URL {base:?} is not a URL ({e}); use for example {example}"
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ProviderError::Config(format!(
            "base URL scheme {:?} is not http or https",
            parsed.scheme()
        )));
    }
    Ok(base.to_owned())
}

/// A model endpoint client: a reqwest client, the host clock for backoff
/// sleeps, and the retry policy.
pub struct ModelHttp {
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
    retry: RetryPolicy,
}

impl std::fmt::Debug for ModelHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelHttp")
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl ModelHttp {
    pub fn new(clock: Arc<dyn Clock>, retry: RetryPolicy) -> Result<Self, ProviderError> {
        if retry.max_retries > MAX_RETRIES {
            return Err(ProviderError::Config(format!(
                "max_retries {} is more than {MAX_RETRIES}; use a smaller bound",
                retry.max_retries
            )));
        }
        if retry.idle_timeout.is_zero() {
            return Err(ProviderError::Config(
                "idle_timeout must be more than zero".into(),
            ));
        }
        let client = agent_http::strict_client(&agent_http::ClientOptions {
            // Model APIs are often reached through a configured proxy.
            proxy_from_environment: true,
            ..agent_http::ClientOptions::with_timeouts(
                retry.idle_timeout.min(Duration::from_secs(10)),
                retry.idle_timeout,
            )
        })
        .map_err(|e| ProviderError::Config(e.to_string()))?;
        Ok(Self {
            client,
            clock,
            retry,
        })
    }

    /// POST `body` to `url` with `headers` (their values are secrets as far
    /// as logs go) and return the streaming body of a 2xx answer.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: &Value,
    ) -> Result<ByteStream, ProviderError> {
        let started = self.clock.monotonic();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let mut req = self.client.post(url).json(body);
            for (name, value) in headers {
                req = req.header(*name, value);
            }
            let req = req.build().map_err(|e| {
                ProviderError::Config(format!(
                    "cannot build the model request: {}",
                    e.without_url()
                ))
            })?;
            // The wait before the next attempt, if one is still allowed.
            let next_wait = |retry_after: Option<Duration>| {
                let wait = self.retry.backoff(
                    attempt - 1,
                    retry_after,
                    jitter_fraction(self.clock.wall_ms(), attempt),
                );
                let ends = self.clock.monotonic().saturating_sub(started) + wait;
                (attempt <= self.retry.max_retries && ends <= self.retry.max_elapsed)
                    .then_some(wait)
            };
            match agent_http::send(&self.client, req).await {
                Err(agent_http::SendError::Redirected { status }) => {
                    return Err(ProviderError::Redirected { status });
                }
                Err(e @ agent_http::SendError::Build { .. }) => {
                    return Err(ProviderError::Config(e.to_string()));
                }
                Err(e) => {
                    let Some(wait) = next_wait(None) else {
                        return Err(ProviderError::Transport {
                            attempts: attempt,
                            detail: e.to_string(),
                        });
                    };
                    tracing::warn!(attempt, "model endpoint unreachable; retrying");
                    self.clock.sleep(wait).await;
                }
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    if (200..300).contains(&status) {
                        return Ok(resp.bytes_stream());
                    }
                    let header_delay = resp
                        .headers()
                        .get("retry-after-ms")
                        .and_then(|v| v.to_str().ok())
                        .and_then(retry_after_ms)
                        .or_else(|| {
                            resp.headers()
                                .get("retry-after")
                                .and_then(|v| v.to_str().ok())
                                .and_then(|v| retry_after(v, self.clock.wall_ms()))
                        });
                    let body = read_error_body(resp.bytes_stream()).await;
                    let message = provider_message(&body, headers);
                    let refusable = status == 429 || (500..600).contains(&status);
                    if !refusable {
                        return Err(ProviderError::Http {
                            status,
                            attempts: attempt,
                            hint: match status {
                                401 | 403 => "the API key was refused; check it",
                                404 => "check the base URL and the model name",
                                _ => "check the base URL, the model name and the API key",
                            },
                            message,
                        });
                    }
                    let server_delay = header_delay.or_else(|| retry_info_delay(&body));
                    let Some(wait) = next_wait(server_delay) else {
                        return Err(ProviderError::Http {
                            status,
                            attempts: attempt,
                            hint: if server_delay.is_some() {
                                "the endpoint is overloaded and asked for a wait longer than the retry bound allows; try again later"
                            } else {
                                "the endpoint is overloaded or failing; try again later"
                            },
                            message,
                        });
                    };
                    tracing::warn!(
                        attempt,
                        status,
                        "model endpoint refused the request; retrying"
                    );
                    self.clock.sleep(wait).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_fractions_and_every_http_date_format() {
        // 2015-10-21T07:28:00Z and 34 s before it.
        let now_ms = 1_445_412_480_000 - 34_000;
        for value in [
            "34",
            " 34 ",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Wednesday, 21-Oct-15 07:28:00 GMT",
            "Wed Oct 21 07:28:00 2015",
        ] {
            assert_eq!(
                retry_after(value, now_ms),
                Some(Duration::from_secs(34)),
                "{value}"
            );
        }
        assert_eq!(retry_after("1.5", 0), Some(Duration::from_millis(1500)));
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now_ms + 60_000),
            Some(Duration::ZERO),
            "a date in the past is no wait"
        );
        for bad in ["", "soon", "-3", "1e3"] {
            assert_eq!(retry_after(bad, 0), None, "{bad}");
        }
        assert_eq!(retry_after_ms("2500"), Some(Duration::from_millis(2500)));
    }

    #[test]
    fn gemini_retry_info_gives_the_delay() {
        let body = include_str!("../../tests/fixtures/gemini/retry_info_429.json");
        assert_eq!(retry_info_delay(body), Some(Duration::from_secs(34)));
        let fractional = body.replace("\"34s\"", "\"0.5s\"");
        assert_eq!(
            retry_info_delay(&fractional),
            Some(Duration::from_millis(500))
        );
        assert_eq!(retry_info_delay("{\"error\": {\"details\": []}}"), None);
        assert_eq!(retry_info_delay("not json"), None);
    }

    #[test]
    fn the_providers_message_is_kept_bounded_and_sanitised() {
        let openai = r#"{"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}"#;
        assert_eq!(
            provider_message(openai, &[]).as_deref(),
            Some(
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
            )
        );
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.tool_use.input: Input should be a valid dictionary"}}"#;
        assert_eq!(
            provider_message(anthropic, &[]).as_deref(),
            Some("messages.1.content.0.tool_use.input: Input should be a valid dictionary")
        );
        let gemini = include_str!("../../tests/fixtures/gemini/retry_info_429.json");
        let m = provider_message(gemini, &[]).unwrap();
        assert!(m.starts_with("You exceeded your current quota"), "{m}");
        assert!(!m.contains('\n'), "control characters removed: {m:?}");
        // A header value (the key) is never echoed.
        let key = ("authorization", "Bearer secret-key-123456".to_owned());
        let echo = r#"{"error": {"message": "Incorrect API key provided: secret-key-123456. Or sk-abc***xyz."}}"#;
        let m = provider_message(echo, &[key]).unwrap();
        assert!(
            !m.contains("secret-key-123456") && !m.contains("sk-abc"),
            "{m}"
        );
        // The bound: at it kept whole, past it cut.
        for (len, cut) in [
            (MAX_PROVIDER_MESSAGE_CHARS - 1, false),
            (MAX_PROVIDER_MESSAGE_CHARS, false),
            (MAX_PROVIDER_MESSAGE_CHARS + 1, true),
        ] {
            let body = json_message(&"é".repeat(len));
            let m = provider_message(&body, &[]).unwrap();
            assert_eq!(m.ends_with('…'), cut, "{len}");
            assert_eq!(
                m.chars().count(),
                len.min(MAX_PROVIDER_MESSAGE_CHARS) + usize::from(cut)
            );
        }
        assert_eq!(provider_message("<html>502</html>", &[]), None);
    }

    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn an_error_body_is_read_up_to_its_bound() {
        let read = |len: usize| {
            let body = vec![b'a'; len];
            let chunks: Vec<Result<bytes::Bytes, agent_http::SendError>> = body
                .chunks(1000)
                .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
                .collect();
            futures::executor::block_on(read_error_body(Box::pin(futures::stream::iter(chunks))))
                .len()
        };
        assert_eq!(read(MAX_ERROR_BODY_BYTES - 1), MAX_ERROR_BODY_BYTES - 1);
        assert_eq!(read(MAX_ERROR_BODY_BYTES), MAX_ERROR_BODY_BYTES);
        assert_eq!(read(MAX_ERROR_BODY_BYTES + 1), MAX_ERROR_BODY_BYTES);
    }

    fn json_message(m: &str) -> String {
        serde_json::json!({"error": {"message": m}}).to_string()
    }
}
