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
    /// The wait before retry number `retry` (0-based): the server's
    /// `retry-after` when it sent one, else the doubling delay with "equal
    /// jitter" (its upper half scaled by `jitter`, a fraction in 0..1, so
    /// that clients refused together do not return together); never more
    /// than `max_backoff`.
    pub fn backoff(&self, retry: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_backoff);
        }
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << retry.min(16))
            .min(self.max_backoff);
        let half = exp / 2;
        half + half.mul_f64(jitter.clamp(0.0, 1.0))
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
                        });
                    }
                    let retry_after = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let Some(wait) = next_wait(retry_after) else {
                        return Err(ProviderError::Http {
                            status,
                            attempts: attempt,
                            hint: "the endpoint is overloaded or failing; try again later",
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
