//! The model relay of `agentrt serve` (S13.3, issue 15 item 4): a page
//! whose model provider's CORS rules stop it — or that should not hold the
//! key at all — sends its model requests to the gateway, which forwards
//! them to that provider's endpoint with the key from the server's own
//! environment. The page uses the gateway as the provider's base URL
//! (`<gateway>/v1/relay/<provider>`) and the gateway token in place of the
//! key, so the key never reaches the page.
//!
//! It is no open proxy: only the providers `--relay` names, only their
//! streaming endpoint of each format (`chat/completions`,
//! `models/<model>:streamGenerateContent`, `messages`), only POST with a
//! JSON body of at most [`MAX_RELAY_BODY_BYTES`], and every protection of
//! the gateway (Host, Origin, token, connection limits and the request
//! timeout) holds. The page's own auth headers are dropped; the upstream
//! gets the server's key in the format's header.
//!
//! The gateway's request timeout bounds the wait for the answer's head only:
//! a long answer streams on past it for as long as the upstream keeps
//! sending. The relayed stream has bounds of its own ([`RelayLimits`]): it
//! is cut when the upstream sends nothing for the idle timeout (60 s) or
//! when it has streamed for the whole-answer limit (15 min). The model
//! client takes a cut stream as a disconnect and repeats the round once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agent_supervisor::ProviderKind;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use crate::gateway::{bearer, refuse};

/// The path every relayed request starts with.
pub const RELAY_PREFIX: &str = "/v1/relay";
/// The largest request body relayed (a long conversation's request).
pub const MAX_RELAY_BODY_BYTES: usize = 8 * 1024 * 1024;

/// One provider the gateway relays to.
#[derive(Clone)]
pub struct RelayTarget {
    pub kind: ProviderKind,
    /// Without a trailing slash.
    pub base_url: String,
    api_key: Option<Arc<str>>,
}

impl std::fmt::Debug for RelayTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayTarget")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Why a relay target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelayError {
    #[error(
        "--relay {0:?}: expected PROVIDER or PROVIDER=BASE_URL (openai-compatible, gemini, anthropic)"
    )]
    Syntax(String),
    #[error("--relay {provider}: the base URL {url:?} must be an http:// or https:// URL")]
    BaseUrl { provider: &'static str, url: String },
    #[error(
        "--relay {provider}: set {variable} in the server's environment; the public endpoint needs a key"
    )]
    MissingKey {
        provider: &'static str,
        variable: &'static str,
    },
    #[error("--relay {0} is given twice")]
    Twice(&'static str),
    /// The strict HTTP client could not be built; no other client is used.
    #[error("the relay's {0}")]
    HttpClient(agent_http::ClientBuildError),
}

impl RelayTarget {
    /// Parse `PROVIDER[=BASE_URL]`; the key is read with `key_of` from the
    /// provider's usual variable. A public endpoint needs a key; another
    /// (local) server may be keyless.
    pub fn parse(
        spec: &str,
        key_of: impl Fn(&str) -> Option<String>,
    ) -> Result<RelayTarget, RelayError> {
        let (name, base) = match spec.split_once('=') {
            Some((n, b)) => (n, Some(b)),
            None => (spec, None),
        };
        let kind = ProviderKind::parse(name).map_err(|_| RelayError::Syntax(spec.to_owned()))?;
        let base_url = base
            .unwrap_or(kind.default_base_url())
            .trim_end_matches('/')
            .to_owned();
        let scheme_ok = reqwest::Url::parse(&base_url)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
        if !scheme_ok {
            return Err(RelayError::BaseUrl {
                provider: kind.as_str(),
                url: base_url,
            });
        }
        let api_key = key_of(kind.key_variable()).filter(|k| !k.is_empty());
        if api_key.is_none() && kind.key_required(&base_url) {
            return Err(RelayError::MissingKey {
                provider: kind.as_str(),
                variable: kind.key_variable(),
            });
        }
        Ok(RelayTarget {
            kind,
            base_url,
            api_key: api_key.map(Arc::from),
        })
    }
}

/// The providers relayed, and the client that forwards.
#[derive(Clone, Debug, Default)]
pub struct Relay {
    targets: Arc<HashMap<ProviderKind, RelayTarget>>,
    client: reqwest::Client,
    limits: RelayLimits,
}

/// How long a relayed answer may stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayLimits {
    /// The stream is cut when the upstream sends nothing for this long.
    pub idle: Duration,
    /// The stream is cut when it has lasted this long in all.
    pub whole: Duration,
}

impl Default for RelayLimits {
    fn default() -> Self {
        RelayLimits {
            idle: DEFAULT_RELAY_IDLE,
            whole: DEFAULT_RELAY_WHOLE,
        }
    }
}

/// Default of [`RelayLimits::idle`].
pub const DEFAULT_RELAY_IDLE: Duration = Duration::from_secs(60);
/// Default of [`RelayLimits::whole`].
pub const DEFAULT_RELAY_WHOLE: Duration = Duration::from_secs(15 * 60);

impl Relay {
    pub fn new(targets: Vec<RelayTarget>) -> Result<Relay, RelayError> {
        let mut map = HashMap::new();
        for t in targets {
            if map.contains_key(&t.kind) {
                return Err(RelayError::Twice(t.kind.as_str()));
            }
            map.insert(t.kind, t);
        }
        Ok(Relay {
            targets: Arc::new(map),
            client: agent_http::strict_client(&agent_http::ClientOptions {
                connect_timeout: Some(Duration::from_secs(10)),
                proxy_from_environment: true,
                ..agent_http::ClientOptions::default()
            })
            .map_err(RelayError::HttpClient)?,
            limits: RelayLimits::default(),
        })
    }

    /// The same relay with other stream bounds.
    pub fn with_limits(mut self, limits: RelayLimits) -> Relay {
        self.limits = limits;
        self
    }

    /// The providers relayed, by name.
    pub fn providers(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.targets.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        names
    }

    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }
}

/// True when `rest` is the streaming endpoint of `kind`'s format, and
/// nothing else (no other path of the provider is reachable).
fn streaming_endpoint(kind: ProviderKind, rest: &str) -> bool {
    match kind {
        ProviderKind::OpenaiCompatible => rest == "chat/completions",
        ProviderKind::Anthropic => rest == "messages",
        ProviderKind::Gemini => rest
            .strip_prefix("models/")
            .and_then(|m| m.strip_suffix(":streamGenerateContent"))
            .is_some_and(|model| {
                !model.is_empty()
                    && model.len() <= 200
                    && model
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
                    && !model.contains("..")
            }),
    }
}

/// Forward one model request (the route's handler; the gateway's guards
/// have run).
pub async fn forward(
    State(relay): State<Relay>,
    Path((provider, rest)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(target) = ProviderKind::parse(&provider)
        .ok()
        .and_then(|k| relay.targets.get(&k))
    else {
        return refuse(
            StatusCode::NOT_FOUND,
            "not_relayed",
            "this gateway does not relay that provider; start agentrt serve with --relay PROVIDER",
        );
    };
    if !streaming_endpoint(target.kind, &rest) {
        return refuse(
            StatusCode::NOT_FOUND,
            "not_relayed",
            "only the provider's streaming endpoint is relayed",
        );
    }
    let query = match (target.kind, query.as_deref()) {
        (ProviderKind::Gemini, Some("alt=sse")) => "?alt=sse",
        (_, None) => "",
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "no query is relayed except Gemini's alt=sse",
            );
        }
    };
    if serde_json::from_slice::<serde_json::Value>(&body).is_err() {
        return refuse(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "the body must be the JSON of a model request",
        );
    }
    let url = format!("{}/{rest}{query}", target.base_url);
    let mut req = relay
        .client
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(key) = &target.api_key {
        req = match target.kind {
            ProviderKind::OpenaiCompatible => req.bearer_auth(&**key),
            ProviderKind::Gemini => req.header("x-goog-api-key", &**key),
            ProviderKind::Anthropic => req.header("x-api-key", &**key),
        };
    }
    if target.kind == ProviderKind::Anthropic {
        let version = headers
            .get("anthropic-version")
            .and_then(|v| v.to_str().ok())
            .filter(|v| v.len() <= 32 && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(agent_supervisor::provider::anthropic::ANTHROPIC_VERSION);
        req = req.header("anthropic-version", version);
    }
    let upstream = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            return refuse(
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                &format!(
                    "the {} endpoint could not be reached: {}",
                    target.kind.as_str(),
                    e.without_url()
                ),
            );
        }
    };
    let status =
        StatusCode::from_u16(upstream.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let content_type = upstream
        .headers()
        .get(header::CONTENT_TYPE)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("application/octet-stream"));
    let retry_after = upstream.headers().get(header::RETRY_AFTER).cloned();
    let mut resp = Response::new(Body::from_stream(bounded(
        upstream.bytes_stream(),
        relay.limits,
    )));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    if let Some(after) = retry_after {
        resp.headers_mut().insert(header::RETRY_AFTER, after);
    }
    resp
}

/// Why a relayed stream was cut (the client sees the body end early).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Cut {
    #[error("the model endpoint sent nothing for {0:?}; the relayed answer was cut")]
    Idle(Duration),
    #[error("the relayed answer streamed for {0:?}, its limit, and was cut")]
    Whole(Duration),
    #[error("the model endpoint's stream broke: {0}")]
    Upstream(reqwest::Error),
}

/// `upstream` within `limits`: each chunk must come within the idle
/// timeout, and the stream ends with an error at the whole-answer limit.
pub(crate) fn bounded(
    upstream: impl futures::Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    limits: RelayLimits,
) -> impl futures::Stream<Item = Result<Bytes, Cut>> + Send + 'static {
    use futures::StreamExt;
    let deadline = tokio::time::Instant::now() + limits.whole;
    let upstream = Box::pin(upstream);
    futures::stream::unfold(Some(upstream), move |state| async move {
        let mut upstream = state?;
        let next = tokio::time::timeout_at(
            deadline.min(tokio::time::Instant::now() + limits.idle),
            upstream.next(),
        )
        .await;
        match next {
            Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(upstream))),
            Ok(Some(Err(e))) => Some((Err(Cut::Upstream(e)), None)),
            Ok(None) => None,
            Err(_) if tokio::time::Instant::now() >= deadline => {
                Some((Err(Cut::Whole(limits.whole)), None))
            }
            Err(_) => Some((Err(Cut::Idle(limits.idle)), None)),
        }
    })
}

/// The token a relayed request carries in place of the provider's key: in
/// the header its format puts the key in.
pub fn relay_token(headers: &HeaderMap) -> Option<&str> {
    if let Some(token) = bearer(headers) {
        return Some(token);
    }
    ["x-goog-api-key", "x-api-key"]
        .iter()
        .find_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_each_formats_streaming_endpoint_is_relayed() {
        use ProviderKind::*;
        assert!(streaming_endpoint(OpenaiCompatible, "chat/completions"));
        assert!(streaming_endpoint(Anthropic, "messages"));
        assert!(streaming_endpoint(
            Gemini,
            "models/gemini-2.5-flash:streamGenerateContent"
        ));
        for (kind, rest) in [
            (OpenaiCompatible, "models"),
            (OpenaiCompatible, "chat/completions/../files"),
            (Anthropic, "messages/batches"),
            (Gemini, "models/x:generateContent"),
            (Gemini, "models/../files:streamGenerateContent"),
            (Gemini, "models/a/b:streamGenerateContent"),
            (Gemini, "models/:streamGenerateContent"),
            (Gemini, "files"),
        ] {
            assert!(!streaming_endpoint(kind, rest), "{kind:?} {rest}");
        }
    }

    #[test]
    fn a_target_needs_a_key_only_for_the_public_endpoint() {
        let none = |_: &str| None;
        let err = RelayTarget::parse("gemini", none).expect_err("public needs a key");
        assert!(err.to_string().contains("GEMINI_API_KEY"), "{err}");
        let t = RelayTarget::parse("gemini", |v| (v == "GEMINI_API_KEY").then(|| "k".into()))
            .expect("keyed");
        assert_eq!(
            t.base_url,
            agent_supervisor::provider::gemini::GEMINI_BASE_URL
        );
        let local = RelayTarget::parse("openai-compatible=http://127.0.0.1:9/v1/", none)
            .expect("a local server may be keyless");
        assert_eq!(local.base_url, "http://127.0.0.1:9/v1");
        assert!(!format!("{t:?}").contains("\"k\""));
        for bad in ["openai", "gemini=ftp://x", "gemini=not a url", "=x"] {
            assert!(RelayTarget::parse(bad, none).is_err(), "{bad}");
        }
        let twice = Relay::new(vec![local.clone(), local]).expect_err("twice");
        assert_eq!(twice, RelayError::Twice("openai-compatible"));
    }
}
