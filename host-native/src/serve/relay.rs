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
//! `models/<model>:streamGenerateContent`, `messages`, each also under the
//! version segment the provider's own SDK puts before it: `v1/`, `v1beta/`,
//! `v1/`, so `openai`, `@anthropic-ai/sdk` and `@google/genai` work with
//! `<gateway>/v1/relay/<provider>` as their base URL and the token as their
//! API key), only POST with a JSON body of at most
//! [`MAX_RELAY_BODY_BYTES`] that asks for a stream, and every protection of
//! the gateway (Host, Origin, token, connection limits and the request
//! timeout) holds. A refusal past the token check is in the provider's own
//! error format, so its SDK shows the message. The page's own headers are
//! dropped (its token, any key it sent, the SDK's `x-stainless-*`); the
//! upstream gets the server's key in the format's header.
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

use crate::serve::gateway::{bearer, refuse};

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

/// What a relayed path names, after the SDK's version segment.
#[derive(Debug, PartialEq, Eq)]
enum Endpoint {
    /// The streaming endpoint of the format; the path under the target's
    /// base URL (`chat/completions`, `messages`,
    /// `models/<model>:streamGenerateContent`).
    Streaming(String),
    /// Gemini's non-streaming `models/<model>:generateContent`.
    NonStreaming,
    /// Any other path of the provider: never reachable.
    Other,
}

/// A Gemini model id as it appears in the path: bounded, no separators.
fn valid_model(model: &str) -> bool {
    !model.is_empty()
        && model.len() <= 200
        && model
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        && !model.contains("..")
}

/// Read `rest` (the path after `/v1/relay/<provider>/`). Each format's
/// path is accepted as the provider's own SDK posts it under the relay as
/// base URL (the OpenAI SDK `chat/completions`, or `v1/chat/completions`
/// with a `/v1` base; the Anthropic SDK always `v1/messages`; google-genai
/// `v1beta/models/<model>:streamGenerateContent`) and as the agent's model
/// client posts it (without the version segment); the version segment is
/// the target base URL's own and is not repeated upstream.
fn endpoint(kind: ProviderKind, rest: &str) -> Endpoint {
    let version = match kind {
        ProviderKind::OpenaiCompatible | ProviderKind::Anthropic => "v1/",
        ProviderKind::Gemini => "v1beta/",
    };
    let path = rest.strip_prefix(version).unwrap_or(rest);
    match kind {
        ProviderKind::OpenaiCompatible if path == "chat/completions" => {
            Endpoint::Streaming(path.to_owned())
        }
        ProviderKind::Anthropic if path == "messages" => Endpoint::Streaming(path.to_owned()),
        ProviderKind::Gemini => {
            let Some(call) = path.strip_prefix("models/") else {
                return Endpoint::Other;
            };
            match call.split_once(':') {
                Some((model, "streamGenerateContent")) if valid_model(model) => {
                    Endpoint::Streaming(path.to_owned())
                }
                Some((model, "generateContent")) if valid_model(model) => Endpoint::NonStreaming,
                _ => Endpoint::Other,
            }
        }
        _ => Endpoint::Other,
    }
}

/// A relay refusal in the error format of `kind`'s API, so the provider's
/// SDK reads its message (OpenAI `{error: {message, type, code}}`,
/// Anthropic `{type: "error", error: {type, message}}`, Gemini
/// `{error: {code, message, status}}`).
fn refuse_in_format(kind: ProviderKind, status: StatusCode, code: &str, message: &str) -> Response {
    use axum::response::IntoResponse;
    let body = match kind {
        ProviderKind::OpenaiCompatible => serde_json::json!({
            "error": { "message": message, "type": "invalid_request_error", "code": code }
        }),
        ProviderKind::Anthropic => serde_json::json!({
            "type": "error",
            "error": {
                "type": match status {
                    StatusCode::NOT_FOUND => "not_found_error",
                    StatusCode::BAD_GATEWAY => "api_error",
                    _ => "invalid_request_error",
                },
                "message": message,
            }
        }),
        ProviderKind::Gemini => serde_json::json!({
            "error": {
                "code": status.as_u16(),
                "message": message,
                "status": match status {
                    StatusCode::NOT_FOUND => "NOT_FOUND",
                    StatusCode::BAD_GATEWAY => "UNAVAILABLE",
                    _ => "INVALID_ARGUMENT",
                },
            }
        }),
    };
    (status, axum::Json(body)).into_response()
}

/// The request body, checked: JSON, and for the formats that say so in
/// the body (OpenAI-compatible and Anthropic), a streaming request.
fn check_body(kind: ProviderKind, body: &[u8]) -> Result<(), &'static str> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "the body must be the JSON of a model request")?;
    let streaming = value.get("stream") == Some(&serde_json::Value::Bool(true));
    match kind {
        ProviderKind::Gemini => Ok(()),
        ProviderKind::OpenaiCompatible if !streaming => Err(
            "this relay forwards only streaming requests: send \"stream\": true (chat.completions.create({ stream: true }) or chat.completions.stream())",
        ),
        ProviderKind::Anthropic if !streaming => Err(
            "this relay forwards only streaming requests: send \"stream\": true (messages.stream() or messages.create({ stream: true }))",
        ),
        _ => Ok(()),
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
    let kind = target.kind;
    let path = match endpoint(kind, &rest) {
        Endpoint::Streaming(path) => path,
        Endpoint::NonStreaming => {
            return refuse_in_format(
                kind,
                StatusCode::BAD_REQUEST,
                "streaming_only",
                "this relay forwards only streaming requests: use models.generateContentStream (models/<model>:streamGenerateContent?alt=sse)",
            );
        }
        Endpoint::Other => {
            return refuse_in_format(
                kind,
                StatusCode::NOT_FOUND,
                "not_relayed",
                "only the provider's streaming endpoint is relayed",
            );
        }
    };
    let query = match (kind, query.as_deref()) {
        (ProviderKind::Gemini, Some("alt=sse")) => "?alt=sse",
        (_, None) => "",
        _ => {
            return refuse_in_format(
                kind,
                StatusCode::BAD_REQUEST,
                "bad_request",
                "no query is relayed except Gemini's alt=sse",
            );
        }
    };
    if let Err(why) = check_body(kind, &body) {
        return refuse_in_format(kind, StatusCode::BAD_REQUEST, "bad_request", why);
    }
    let url = format!("{}/{path}{query}", target.base_url);
    // Only these headers go upstream: the page's own (its token in the
    // key's header, an SDK's x-stainless-*, any key it sent) never do.
    let mut req = relay
        .client
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(key) = &target.api_key {
        req = match kind {
            ProviderKind::OpenaiCompatible => req.bearer_auth(&**key),
            ProviderKind::Gemini => req.header("x-goog-api-key", &**key),
            ProviderKind::Anthropic => req.header("x-api-key", &**key),
        };
    }
    if kind == ProviderKind::Anthropic {
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
            return refuse_in_format(
                kind,
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                &format!(
                    "the {} endpoint could not be reached: {}",
                    kind.as_str(),
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

/// The tokens a relayed request may carry in place of the provider's key:
/// in any header a format puts its key in (`Authorization: Bearer`,
/// `x-goog-api-key`, `x-api-key`). The request passes when one of them is
/// the gateway token, so an SDK that sends a second credential header
/// (the Anthropic SDK's `authToken` beside its `apiKey`) still works.
pub fn relay_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    bearer(headers).into_iter().chain(
        ["x-goog-api-key", "x-api-key"]
            .into_iter()
            .flat_map(|h| headers.get_all(h).iter())
            .filter_map(|v| v.to_str().ok())
            .map(str::trim),
    )
}

/// The request headers a page's SDK may send to the relay (the preflight's
/// allow list). They are accepted, never forwarded: only the format's key
/// header and `anthropic-version` go upstream.
pub const RELAY_ALLOW_HEADERS: &str = "authorization, content-type, accept, x-goog-api-key, x-goog-api-client, x-api-key, anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access";

/// The preflight's allow list for one request: [`RELAY_ALLOW_HEADERS`] and
/// the `x-stainless-*` headers (the OpenAI and Anthropic SDKs' client
/// description, a set that changes by SDK version) the page asks for.
pub fn relay_allow_headers(requested: Option<&str>) -> String {
    let mut allowed = RELAY_ALLOW_HEADERS.to_owned();
    for name in requested.unwrap_or("").split(',').map(str::trim).take(32) {
        let name = name.to_ascii_lowercase();
        let stainless = name.strip_prefix("x-stainless-").is_some_and(|suffix| {
            !suffix.is_empty()
                && suffix.len() <= 40
                && suffix.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        });
        if stainless {
            allowed.push_str(", ");
            allowed.push_str(&name);
        }
    }
    allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_each_formats_streaming_endpoint_is_relayed() {
        use ProviderKind::*;
        let streaming = |p: &str| Endpoint::Streaming(p.to_owned());
        for (kind, rest, upstream) in [
            (OpenaiCompatible, "chat/completions", "chat/completions"),
            (OpenaiCompatible, "v1/chat/completions", "chat/completions"),
            (Anthropic, "messages", "messages"),
            (Anthropic, "v1/messages", "messages"),
            (
                Gemini,
                "models/gemini-2.5-flash:streamGenerateContent",
                "models/gemini-2.5-flash:streamGenerateContent",
            ),
            (
                Gemini,
                "v1beta/models/gemini-2.5-flash:streamGenerateContent",
                "models/gemini-2.5-flash:streamGenerateContent",
            ),
        ] {
            assert_eq!(endpoint(kind, rest), streaming(upstream), "{kind:?} {rest}");
        }
        assert_eq!(
            endpoint(Gemini, "v1beta/models/x:generateContent"),
            Endpoint::NonStreaming
        );
        assert_eq!(
            endpoint(Gemini, "models/x:generateContent"),
            Endpoint::NonStreaming
        );
        let long = format!("models/{}:streamGenerateContent", "m".repeat(200));
        assert_eq!(endpoint(Gemini, &long), streaming(&long), "200 bytes");
        let longer = format!("models/{}:streamGenerateContent", "m".repeat(201));
        for (kind, rest) in [
            (OpenaiCompatible, "models"),
            (OpenaiCompatible, "responses"),
            (OpenaiCompatible, "v1/v1/chat/completions"),
            (OpenaiCompatible, "v1beta/chat/completions"),
            (OpenaiCompatible, "chat/completions/../files"),
            (Anthropic, "messages/batches"),
            (Anthropic, "v1/messages/count_tokens"),
            (Anthropic, "v1beta/messages"),
            (Gemini, "v1/models/x:streamGenerateContent"),
            (Gemini, "v1beta/v1beta/models/x:streamGenerateContent"),
            (Gemini, "models/x:countTokens"),
            (Gemini, "models/../files:streamGenerateContent"),
            (Gemini, "models/a/b:streamGenerateContent"),
            (Gemini, "models/:streamGenerateContent"),
            (Gemini, "models/:generateContent"),
            (Gemini, "models/a:b:streamGenerateContent"),
            (Gemini, longer.as_str()),
            (Gemini, "files"),
            (Gemini, "v1beta/files"),
        ] {
            assert_eq!(endpoint(kind, rest), Endpoint::Other, "{kind:?} {rest}");
        }
    }

    #[test]
    fn only_a_streaming_json_request_is_forwarded() {
        use ProviderKind::*;
        for kind in [OpenaiCompatible, Anthropic] {
            assert!(check_body(kind, br#"{"stream": true}"#).is_ok());
            for body in [
                &br#"{}"#[..],
                br#"{"stream": false}"#,
                br#"{"stream": "true"}"#,
                b"[]",
                b"not json",
            ] {
                let why = check_body(kind, body).expect_err("refused");
                assert!(why.contains("stream") || why.contains("JSON"), "{why}");
            }
        }
        // Gemini says streaming in the path, not the body.
        assert!(check_body(Gemini, b"{}").is_ok());
        assert!(check_body(Gemini, b"not json").is_err());
    }

    #[test]
    fn the_token_may_sit_in_any_key_header_beside_another_credential() {
        let mut h = HeaderMap::new();
        h.insert(
            "authorization",
            HeaderValue::from_static("Bearer page-auth"),
        );
        h.insert("x-api-key", HeaderValue::from_static(" tok "));
        let all: Vec<&str> = relay_tokens(&h).collect();
        assert_eq!(all, ["page-auth", "tok"]);
        assert_eq!(relay_tokens(&HeaderMap::new()).count(), 0);
    }

    #[test]
    fn the_preflight_allows_the_sdks_headers_and_no_others() {
        let allowed = relay_allow_headers(Some(
            "x-stainless-os, X-Stainless-Retry-Count,x-evil, x-stainless-, x-stainless-a_b",
        ));
        assert!(
            allowed.ends_with(", x-stainless-os, x-stainless-retry-count"),
            "{allowed}"
        );
        assert!(!allowed.contains("x-evil"));
        assert_eq!(relay_allow_headers(None), RELAY_ALLOW_HEADERS);
        let many = vec!["x-stainless-a"; 40].join(",");
        assert_eq!(
            relay_allow_headers(Some(&many))
                .matches("x-stainless-a")
                .count(),
            32
        );
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
