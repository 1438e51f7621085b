//! The one sender of requests that carry a credential (an API key header,
//! a bearer token): a redirect answer is refused as
//! [`SendError::Redirected`] and never followed, so no credential and no
//! body reaches another origin (S13.5).
//!
//! Natively the client from [`crate::client`] follows no redirect, so a
//! 3xx arrives here as an answer and is refused. In the browser reqwest
//! cannot set the fetch `redirect` mode, so the request is sent through
//! the global `fetch` (a page or a Worker) with `redirect: "manual"`: the
//! browser does not follow the hop and answers an opaque redirect, which
//! is refused here. Dropping the future or the body aborts the fetch.

use std::pin::Pin;

use bytes::Bytes;
use futures::{Stream, StreamExt};

/// A response body as it arrives.
#[cfg(not(target_arch = "wasm32"))]
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, SendError>> + Send>>;
/// A response body as it arrives.
#[cfg(target_arch = "wasm32")]
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, SendError>>>>;

/// Why a request got no usable answer. Details never carry the URL (its
/// query may hold a key) nor a header value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The server answered with a redirect (`status` is `None` in the
    /// browser, where the answer is opaque). Nothing was sent to its target.
    #[error("{}", redirected_text(*status))]
    Redirected { status: Option<u16> },
    /// The request could not be built (a header or body the transport
    /// refuses); nothing was sent.
    #[error("the request could not be built: {detail}")]
    Build { detail: String },
    /// No connection could be opened; nothing was sent.
    #[error("the server could not be reached: {detail}")]
    Connect { detail: String },
    /// A connect or read timeout passed; the request may have arrived.
    #[error("the server did not answer in time: {detail}")]
    Timeout { detail: String },
    /// Any other transport failure; the request may have arrived.
    #[error("the exchange with the server failed: {detail}")]
    Transport { detail: String },
}

fn redirected_text(status: Option<u16>) -> String {
    let status = status.map_or_else(|| "a redirect".to_owned(), |s| format!("redirect {s}"));
    format!(
        "the server answered with {status}; requests carrying credentials never follow \
         redirects (nothing was sent to its target): configure the final URL"
    )
}

impl SendError {
    /// True when the request certainly never reached the server.
    pub fn never_sent(&self) -> bool {
        matches!(self, SendError::Build { .. } | SendError::Connect { .. })
    }

    /// True for [`SendError::Redirected`].
    pub fn is_redirect(&self) -> bool {
        matches!(self, SendError::Redirected { .. })
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn from_reqwest(e: reqwest::Error) -> SendError {
        let e = e.without_url();
        let detail = e.to_string();
        if e.is_builder() {
            SendError::Build { detail }
        } else if e.is_connect() {
            SendError::Connect { detail }
        } else if e.is_timeout() {
            SendError::Timeout { detail }
        } else {
            SendError::Transport { detail }
        }
    }
}

/// True for the statuses a server uses to send a client elsewhere
/// (300–399 except 304 Not Modified, which names no other place).
pub fn is_redirect(status: u16) -> bool {
    (300..400).contains(&status) && status != 304
}

/// A response that was not a redirect.
pub struct Response {
    status: reqwest::StatusCode,
    headers: reqwest::header::HeaderMap,
    body: ByteStream,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Response {
    pub fn status(&self) -> reqwest::StatusCode {
        self.status
    }

    pub fn headers(&self) -> &reqwest::header::HeaderMap {
        &self.headers
    }

    /// The body as it arrives. Dropping the stream ends the exchange.
    pub fn bytes_stream(self) -> ByteStream {
        self.body
    }

    /// The whole body, refused as soon as it would pass `limit` bytes:
    /// `Ok(Err(read))` says the limit was passed after `read` bytes.
    pub async fn bytes_limited(self, limit: usize) -> Result<Result<Vec<u8>, usize>, SendError> {
        let mut body = Vec::new();
        let mut stream = self.body;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if body.len() + chunk.len() > limit {
                return Ok(Err(body.len() + chunk.len()));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Ok(body))
    }
}

/// Send `request` on `client` (a client from [`crate::client`]) refusing
/// every redirect. Every request that carries a credential goes through
/// here.
#[cfg(not(target_arch = "wasm32"))]
pub async fn send(
    client: &reqwest::Client,
    request: reqwest::Request,
) -> Result<Response, SendError> {
    let response = client
        .execute(request)
        .await
        .map_err(SendError::from_reqwest)?;
    let status = response.status();
    if is_redirect(status.as_u16()) {
        return Err(SendError::Redirected {
            status: Some(status.as_u16()),
        });
    }
    let headers = response.headers().clone();
    let body = response
        .bytes_stream()
        .map(|chunk| chunk.map_err(SendError::from_reqwest));
    Ok(Response {
        status,
        headers,
        body: Box::pin(body),
    })
}

/// Send `request` through the global `fetch` with `redirect: "manual"`,
/// refusing every redirect (`client` is unused in the browser: the page's
/// fetch has no client state; it is taken so both targets share one call).
#[cfg(target_arch = "wasm32")]
pub async fn send(
    _client: &reqwest::Client,
    request: reqwest::Request,
) -> Result<Response, SendError> {
    browser::send(request).await
}

#[cfg(target_arch = "wasm32")]
pub use browser::browser_request;

#[cfg(target_arch = "wasm32")]
mod browser {
    //! The fetch-based sender of the browser build.

    use super::*;
    use wasm_bindgen::{JsCast, JsValue, prelude::wasm_bindgen};

    #[wasm_bindgen]
    extern "C" {
        /// The global `fetch` of a page or a Worker.
        #[wasm_bindgen(js_name = fetch)]
        fn global_fetch(input: &web_sys::Request) -> js_sys::Promise;
    }

    fn js_detail(value: &JsValue) -> String {
        value
            .dyn_ref::<js_sys::Error>()
            .map(|e| String::from(e.message()))
            .or_else(|| value.as_string())
            .unwrap_or_else(|| "the browser refused the request".to_owned())
    }

    /// Aborts the fetch when dropped (a caller's deadline drops the future
    /// or the body stream).
    struct AbortOnDrop(web_sys::AbortController);

    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }

    /// The `fetch` request for `request`: same method, URL, headers and
    /// body, `redirect: "manual"`, and the abort signal of `controller`.
    /// Public so that a browser test can check the mode as built.
    pub fn browser_request(
        request: &reqwest::Request,
        controller: &web_sys::AbortController,
    ) -> Result<web_sys::Request, SendError> {
        let build = |e: JsValue| SendError::Build {
            detail: js_detail(&e),
        };
        let init = web_sys::RequestInit::new();
        init.set_method(request.method().as_str());
        let headers = web_sys::Headers::new().map_err(build)?;
        for (name, value) in request.headers() {
            let value = value.to_str().map_err(|_| SendError::Build {
                detail: format!("header {name} is not visible ASCII"),
            })?;
            headers.append(name.as_str(), value).map_err(build)?;
        }
        init.set_headers(&headers);
        init.set_redirect(web_sys::RequestRedirect::Manual);
        if let Some(body) = request.body() {
            let bytes = body.as_bytes().ok_or_else(|| SendError::Build {
                detail: "a streaming request body cannot be sent from the browser".into(),
            })?;
            if !bytes.is_empty() {
                init.set_body(&js_sys::Uint8Array::from(bytes));
            }
        }
        init.set_signal(Some(&controller.signal()));
        web_sys::Request::new_with_str_and_init(request.url().as_str(), &init).map_err(build)
    }

    pub(super) async fn send(request: reqwest::Request) -> Result<Response, SendError> {
        let controller = web_sys::AbortController::new().map_err(|e| SendError::Build {
            detail: js_detail(&e),
        })?;
        let js_request = browser_request(&request, &controller)?;
        let abort = AbortOnDrop(controller);
        let answer = wasm_bindgen_futures::JsFuture::from(global_fetch(&js_request))
            .await
            .map_err(|e| SendError::Transport {
                detail: js_detail(&e),
            })?;
        let response: web_sys::Response = answer.dyn_into().map_err(|_| SendError::Transport {
            detail: "fetch did not answer a Response".into(),
        })?;
        if response.type_() == web_sys::ResponseType::Opaqueredirect {
            return Err(SendError::Redirected { status: None });
        }
        if is_redirect(response.status()) {
            return Err(SendError::Redirected {
                status: Some(response.status()),
            });
        }
        let status =
            reqwest::StatusCode::from_u16(response.status()).map_err(|_| SendError::Transport {
                detail: format!("the browser reported status {}", response.status()),
            })?;
        let mut headers = reqwest::header::HeaderMap::new();
        if let Ok(Some(entries)) = js_sys::try_iter(&response.headers()) {
            for entry in entries.flatten() {
                let pair = js_sys::Array::from(&entry);
                let (Some(name), Some(value)) = (pair.get(0).as_string(), pair.get(1).as_string())
                else {
                    continue;
                };
                if let (Ok(name), Ok(value)) = (
                    reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                    reqwest::header::HeaderValue::from_str(&value),
                ) {
                    headers.append(name, value);
                }
            }
        }
        let body: ByteStream = match response.body() {
            None => Box::pin(futures::stream::empty()),
            Some(stream) => {
                let stream = wasm_streams::ReadableStream::from_raw(stream.unchecked_into());
                Box::pin(stream.into_stream().map(move |chunk| {
                    // The abort guard lives as long as the body.
                    let _abort = &abort;
                    let chunk = chunk.map_err(|e| SendError::Transport {
                        detail: js_detail(&e),
                    })?;
                    Ok(Bytes::from(js_sys::Uint8Array::new(&chunk).to_vec()))
                }))
            }
        };
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}
