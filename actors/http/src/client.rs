//! The one HTTP client constructor. Natively: no redirects followed, the
//! connect and read timeouts given as parameters, the environment's proxy
//! only when asked for. In the browser the page's fetch owns connections
//! and timeouts; redirects of credentialed requests are refused by
//! [`crate::send`](mod@crate::send).

use std::time::Duration;

/// What may differ between clients. Nothing here can turn redirects on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientOptions {
    /// Natively: the most a connection may take to open.
    pub connect_timeout: Option<Duration>,
    /// Natively: the most a read may wait for bytes (an idle connection).
    pub read_timeout: Option<Duration>,
    /// Natively: use the proxy named by `HTTP_PROXY`/`HTTPS_PROXY`. Off by
    /// default: a request goes where its URL says.
    pub proxy_from_environment: bool,
    /// The `User-Agent` header, when one is wanted.
    pub user_agent: Option<String>,
}

impl ClientOptions {
    /// Options with both timeouts.
    pub fn with_timeouts(connect: Duration, read: Duration) -> ClientOptions {
        ClientOptions {
            connect_timeout: Some(connect),
            read_timeout: Some(read),
            ..ClientOptions::default()
        }
    }
}

/// The client could not be built (for example, no TLS backend could be
/// set up). Callers fail with it; they never fall back to another client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct ClientBuildError(String);

/// The builder of a strict client: a caller may add what only it needs
/// (the fetch tool adds its pinned DNS resolver) and builds it with
/// [`build_client`]. The redirect rule is set here and nowhere else.
pub fn strict_builder(options: &ClientOptions) -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    let builder = match &options.user_agent {
        Some(agent) => builder.user_agent(agent.as_str()),
        None => builder,
    };
    #[cfg(not(target_arch = "wasm32"))]
    let builder = {
        let mut builder = builder.redirect(reqwest::redirect::Policy::none());
        if !options.proxy_from_environment {
            builder = builder.no_proxy();
        }
        if let Some(t) = options.connect_timeout {
            builder = builder.connect_timeout(t);
        }
        if let Some(t) = options.read_timeout {
            builder = builder.read_timeout(t);
        }
        builder
    };
    builder
}

/// Build a builder from [`strict_builder`]; a failure is an error.
pub fn build_client(builder: reqwest::ClientBuilder) -> Result<reqwest::Client, ClientBuildError> {
    builder.build().map_err(|e| ClientBuildError(e.to_string()))
}

/// The strict client for `options`.
pub fn strict_client(options: &ClientOptions) -> Result<reqwest::Client, ClientBuildError> {
    build_client(strict_builder(options))
}
