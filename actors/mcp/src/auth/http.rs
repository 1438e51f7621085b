//! The one way authorization talks HTTP: every URL is checked by the
//! host's [`UrlGuard`] first, and natively the connection is pinned to the
//! addresses the guard checked (no second DNS answer is trusted); redirects
//! are never followed (`agent_http`'s strict client and sender); bodies
//! are bounded by [`MAX_AUTH_DOCUMENT_BYTES`].

use std::sync::Arc;

use serde_json::Value;

use super::{MAX_AUTH_DOCUMENT_BYTES, UrlGuard};
use crate::error::McpError;

/// The answer to an authorization request: its status and JSON body
/// (`Value::Null` when the body was not JSON).
pub(crate) struct JsonAnswer {
    pub status: u16,
    pub body: Value,
}

/// HTTP for one server's authorization.
#[derive(Clone)]
pub(crate) struct AuthHttp {
    pub server_id: String,
    pub guard: Arc<dyn UrlGuard>,
    pub allow_loopback: bool,
}

impl AuthHttp {
    pub fn fail(&self, why: impl Into<String>) -> McpError {
        McpError::Auth {
            id: self.server_id.clone(),
            why: why.into(),
        }
    }

    /// Check `url` with the guard; a client pinned to what it checked.
    pub async fn checked(&self, url: &url::Url) -> Result<reqwest::Client, McpError> {
        let addrs = self
            .guard
            .check(url, self.allow_loopback)
            .await
            .map_err(|why| self.fail(format!("{url} is refused by the URL policy: {why}")))?;
        let builder = agent_http::strict_builder(&agent_http::ClientOptions::default());
        #[cfg(not(target_arch = "wasm32"))]
        let builder = match url.host() {
            Some(url::Host::Domain(name)) if !addrs.is_empty() => {
                builder.resolve_to_addrs(name, &addrs)
            }
            _ => builder,
        };
        #[cfg(target_arch = "wasm32")]
        let _ = addrs;
        agent_http::build_client(builder).map_err(|e| self.fail(e.to_string()))
    }

    /// Send `request` (built on a client from [`AuthHttp::checked`]) and
    /// read its bounded JSON answer.
    pub async fn exchange(
        &self,
        client: &reqwest::Client,
        request: reqwest::RequestBuilder,
    ) -> Result<JsonAnswer, McpError> {
        let request = request
            .header(reqwest::header::ACCEPT, "application/json")
            .build()
            .map_err(|e| self.fail(format!("a request could not be built: {}", e.without_url())))?;
        let url = request.url().clone();
        let response = agent_http::send(client, request)
            .await
            .map_err(|e| self.fail(format!("{url}: {e}")))?;
        let status = response.status().as_u16();
        let body = response
            .bytes_limited(MAX_AUTH_DOCUMENT_BYTES)
            .await
            .map_err(|e| self.fail(format!("{url}: {e}")))?
            .map_err(|size| {
                self.fail(format!(
                    "{url} answered {size} bytes or more, over the limit of {MAX_AUTH_DOCUMENT_BYTES}"
                ))
            })?;
        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok(JsonAnswer { status, body })
    }

    /// GET a JSON document; `None` when the answer is not a 2xx JSON object
    /// (the next candidate URL is tried then).
    pub async fn get_document(&self, url: &url::Url) -> Result<Option<Value>, McpError> {
        let client = self.checked(url).await?;
        let request = client.get(url.clone());
        match self.exchange(&client, request).await {
            Ok(JsonAnswer { status, body }) if (200..300).contains(&status) && body.is_object() => {
                Ok(Some(body))
            }
            Ok(_) => Ok(None),
            // A redirect or an unreachable well-known URL: the next one is
            // tried (a URL the policy refuses failed above, loudly).
            Err(e) => {
                tracing::debug!(%url, error = %e, "an authorization metadata URL gave nothing");
                Ok(None)
            }
        }
    }
}
