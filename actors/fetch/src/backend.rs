//! Who performs a read for the fetch actor: natively the [`crate::WebReader`]
//! itself; in the browser the native gateway (`POST /v1/fetch` with its
//! token), so that the browser never fetches a model-supplied URL.

use std::sync::Arc;
use std::time::Duration;

use agent_kernel::host::{Clock, timeout};
use futures::FutureExt;
use serde::{Deserialize, Serialize};

use crate::model::{FetchError, FlowFailure, Limits, Page, Stage, millis};
use agent_kernel::tool::CancelToken;

/// The path of the gateway's fetch endpoint.
pub const GATEWAY_FETCH_PATH: &str = "/v1/fetch";

/// Performs one read through the whole flow (policy, Jina, direct).
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait FetchBackend: agent_kernel::MaybeSend + agent_kernel::MaybeSync {
    /// Read `url`; `cancel` stops the read with [`FetchError::Cancelled`].
    async fn fetch(&self, url: &str, cancel: CancelToken) -> Result<Page, FlowFailure>;
    /// `native` for the in-process reader, `gateway` for the browser's client.
    fn name(&self) -> &'static str;
}

#[cfg(not(target_arch = "wasm32"))]
#[async_trait::async_trait]
impl FetchBackend for crate::reader::WebReader {
    async fn fetch(&self, url: &str, cancel: CancelToken) -> Result<Page, FlowFailure> {
        self.read(url, cancel).await
    }
    fn name(&self) -> &'static str {
        "native"
    }
}

/// The body of `POST /v1/fetch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayRequest {
    pub url: String,
}

/// The gateway's answer to an authorised request (HTTP 200 either way: a
/// refused or failed read is a result, not a gateway error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum GatewayReply {
    Page(Page),
    Failure(FlowFailure),
}

impl From<Result<Page, FlowFailure>> for GatewayReply {
    fn from(r: Result<Page, FlowFailure>) -> Self {
        match r {
            Ok(p) => GatewayReply::Page(p),
            Err(f) => GatewayReply::Failure(f),
        }
    }
}

/// The fetch backend of the browser: the native gateway. Builds on both
/// targets (natively it is what tests and the CLI use to talk to a gateway).
#[derive(Clone)]
pub struct GatewayClient {
    endpoint: String,
    token: String,
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
    deadline: Duration,
}

impl std::fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayClient")
            .field("endpoint", &self.endpoint)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// The gateway address is not a usable base URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("gateway base URL {base:?} is not usable ({why}); give e.g. http://127.0.0.1:8787")]
pub struct GatewayConfigError {
    pub base: String,
    pub why: String,
}

impl GatewayClient {
    /// A client for the gateway at `base` (e.g. `http://127.0.0.1:8787`) with
    /// its per-process `token`. The whole call is bounded by the total
    /// deadline of `limits` plus five seconds for the gateway's own work.
    pub fn new(
        base: &str,
        token: impl Into<String>,
        limits: &Limits,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GatewayConfigError> {
        let err = |why: String| GatewayConfigError {
            base: base.to_owned(),
            why,
        };
        let parsed = url::Url::parse(base).map_err(|e| err(e.to_string()))?;
        if parsed.scheme() != "http" && parsed.scheme() != "https" {
            return Err(err("the scheme must be http or https".into()));
        }
        let endpoint = parsed
            .join(GATEWAY_FETCH_PATH)
            .map_err(|e| err(e.to_string()))?
            .to_string();
        let client = agent_http::strict_client(&agent_http::ClientOptions::default())
            .map_err(|e| err(e.to_string()))?;
        Ok(Self {
            endpoint,
            token: token.into(),
            client,
            clock,
            deadline: limits.total_timeout + Duration::from_secs(5),
        })
    }

    async fn call(&self, url: &str) -> Result<Page, FlowFailure> {
        let gateway = |status: Option<u16>, detail: String| {
            FlowFailure::new(Stage::Gateway, FetchError::Gateway { status, detail })
        };
        let request = self
            .client
            .post(&self.endpoint)
            .bearer_auth(&self.token)
            .json(&GatewayRequest {
                url: url.to_owned(),
            })
            .build()
            .map_err(|e| gateway(None, e.without_url().to_string()))?;
        // The gateway token never follows a redirect (S13.5).
        let resp = agent_http::send(&self.client, request)
            .await
            .map_err(|e| gateway(None, e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            // The gateway bounds its own replies (by the extraction limits).
            .bytes_limited(usize::MAX)
            .await
            .map_err(|e| gateway(Some(status), e.to_string()))?
            .map_err(|size| gateway(Some(status), format!("a reply of {size} bytes")))?;
        if status != 200 {
            let detail = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
            return Err(gateway(Some(status), detail));
        }
        match serde_json::from_slice::<GatewayReply>(&body) {
            Ok(GatewayReply::Page(page)) => Ok(page),
            Ok(GatewayReply::Failure(failure)) => Err(failure),
            Err(e) => Err(gateway(Some(status), format!("unreadable reply: {e}"))),
        }
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl FetchBackend for GatewayClient {
    async fn fetch(&self, url: &str, cancel: CancelToken) -> Result<Page, FlowFailure> {
        let call = timeout(self.clock.as_ref(), self.deadline, self.call(url)).fuse();
        let cancelled = cancel.cancelled().fuse();
        futures::pin_mut!(call, cancelled);
        futures::select_biased! {
            () = cancelled => Err(FlowFailure::new(Stage::Flow, FetchError::Cancelled)),
            r = call => r.unwrap_or_else(|_| Err(FlowFailure::new(
                Stage::Gateway,
                FetchError::Gateway { status: None, detail: format!("no answer within {} ms", millis(self.deadline)) },
            ))),
        }
    }
    fn name(&self) -> &'static str {
        "gateway"
    }
}
