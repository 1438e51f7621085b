//! The driver the official MCP conformance suite runs in its client mode
//! (`conformance client --command "conformance_client" --scenario NAME`,
//! run by `cargo xtask test` through `xtask/src/mcp_conformance.rs`).
//!
//! It owns nothing but the mapping from a scenario to what a client is
//! expected to do there: the suite starts the scenario's server, sets
//! `MCP_CONFORMANCE_SCENARIO` and runs this program with the server's URL;
//! the program connects agent-mcp's real [`McpClient`] (Streamable HTTP),
//! lists the tools and calls the ones the scenario expects, then exits
//! 0 on success and 1 with the error on stderr otherwise. The suite judges
//! the result from what its server saw.

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(url) = args.next() else {
        eprintln!("usage: conformance_client <server url> (scenario in MCP_CONFORMANCE_SCENARIO)");
        return std::process::ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("conformance_client: no tokio runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match runtime.block_on(native::run(&url, &scenario)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance_client: scenario {scenario:?} against {url}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::net::{IpAddr, SocketAddr};
    use std::sync::Arc;

    use serde_json::{Value, json};

    use agent_kernel::host::SeededEntropy;
    use agent_kernel::host::secrets::{SecretError, SecretHandle, SecretResolver, SecretValue};
    use agent_mcp::auth::challenge::BearerChallenge;
    use agent_mcp::auth::discovery::discover_server;
    use agent_mcp::auth::{
        AuthEnv, AuthGrant, Callback, McpAuthConfig, MemoryCredentialStore, UrlGuard, UserAgent,
    };
    use agent_mcp::client::RequestOptions;
    use agent_mcp::elicitation::{ElicitationAnswer, ElicitationHandler, ElicitationRequest};
    use agent_mcp::{McpClient, McpEnv, McpError, McpServerConfig};

    /// The handle of the client secret a scenario's context gives.
    const SECRET_HANDLE: &str = "conformance-client-secret";
    /// The Client ID Metadata Document URL the suite expects (it never
    /// fetches it).
    const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";
    /// Where the headless user agent says the answer goes; nothing listens
    /// there: the answer is read from the authorization server's redirect.
    const REDIRECT_URI: &str = "http://127.0.0.1:1/callback";

    /// The scenario's client secret, bound to the one origin the driver
    /// found as the token endpoint's (credentials go only there).
    #[derive(Default)]
    struct ContextSecrets {
        secret: Option<(String, String)>,
    }

    #[async_trait::async_trait]
    impl SecretResolver for ContextSecrets {
        fn bound_origin(&self, handle: &SecretHandle) -> Option<String> {
            match &self.secret {
                Some((origin, _)) if handle.0 == SECRET_HANDLE => Some(origin.clone()),
                _ => None,
            }
        }
        async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
            match &self.secret {
                Some((_, value)) if handle.0 == SECRET_HANDLE => {
                    Ok(SecretValue::new(value.clone()))
                }
                _ => Err(SecretError::Unknown(handle.0.clone())),
            }
        }
    }

    /// The suite's servers all run on this machine: only loopback passes.
    struct LoopbackOnly;

    #[async_trait::async_trait]
    impl UrlGuard for LoopbackOnly {
        async fn check(
            &self,
            url: &url::Url,
            allow_loopback: bool,
        ) -> Result<Vec<SocketAddr>, String> {
            let port = url.port_or_known_default().unwrap_or(80);
            let ip: IpAddr = match url.host() {
                Some(url::Host::Domain("localhost")) => IpAddr::from([127, 0, 0, 1]),
                Some(url::Host::Ipv4(v4)) => v4.into(),
                Some(url::Host::Ipv6(v6)) => v6.into(),
                _ => return Err(format!("{url} is not on this machine")),
            };
            if !allow_loopback || !ip.is_loopback() {
                return Err(format!("{url} is not a loopback address"));
            }
            Ok(vec![SocketAddr::new(ip, port)])
        }
    }

    /// The browser step without a person: GET the authorization URL and
    /// read the redirect the suite's authorization server answers at once.
    /// Only a redirect to [`REDIRECT_URI`] is accepted, and not followed.
    struct Headless;

    #[async_trait::async_trait]
    impl UserAgent for Headless {
        async fn redirect_uri(&self) -> Result<String, McpError> {
            Ok(REDIRECT_URI.to_owned())
        }
        async fn authorize(&self, url: &url::Url) -> Result<Callback, McpError> {
            let fail = |why: String| McpError::Protocol(format!("headless login: {why}"));
            let client = agent_http::strict_client(&agent_http::ClientOptions::default())
                .map_err(|e| fail(e.to_string()))?;
            let response = client
                .get(url.clone())
                .send()
                .await
                .map_err(|e| fail(e.without_url().to_string()))?;
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    fail(format!(
                        "no redirect from the authorization endpoint ({})",
                        response.status()
                    ))
                })?;
            let target = url::Url::parse(location).map_err(|e| fail(e.to_string()))?;
            if !target.as_str().starts_with(REDIRECT_URI) {
                return Err(fail(format!(
                    "redirected to {target}, not to the redirect URI"
                )));
            }
            Ok(Callback {
                params: target
                    .query_pairs()
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect(),
            })
        }
    }

    /// The person the suite plays: accepts every form with its defaults
    /// (SEP-1034: a form starts pre-filled with them).
    struct AcceptDefaults;

    #[async_trait::async_trait]
    impl ElicitationHandler for AcceptDefaults {
        async fn elicit(&self, request: ElicitationRequest) -> ElicitationAnswer {
            ElicitationAnswer::Accept(request.defaults())
        }
    }

    /// The arguments a scenario's tool expects (the suite's servers check
    /// them); a tool this table does not name gets `{}`.
    fn arguments_for(tool: &str) -> Value {
        match tool {
            "add_numbers" => json!({"a": 5, "b": 3}),
            _ => json!({}),
        }
    }

    /// The scenario's context (`MCP_CONFORMANCE_CONTEXT`): pre-registered
    /// client credentials, when it gives them.
    fn context_client() -> Option<(String, String)> {
        let context: Value =
            serde_json::from_str(&std::env::var("MCP_CONFORMANCE_CONTEXT").ok()?).ok()?;
        Some((
            context.get("client_id")?.as_str()?.to_owned(),
            context.get("client_secret")?.as_str()?.to_owned(),
        ))
    }

    pub async fn run(url: &str, scenario: &str) -> Result<(), McpError> {
        let clock = agent_test_support::clock();
        let mut auth = McpAuthConfig {
            client_metadata_url: Some(CLIENT_METADATA_URL.to_owned()),
            allow_loopback: true,
            ..McpAuthConfig::default()
        };
        if scenario.starts_with("auth/client-credentials") {
            auth.grant = AuthGrant::ClientCredentials;
        }
        let mut secrets = ContextSecrets::default();
        if let Some((client_id, client_secret)) = context_client() {
            // The secret is bound to the token endpoint discovery finds.
            let server = url::Url::parse(url).map_err(|e| McpError::Protocol(e.to_string()))?;
            let found = discover_server(
                "conformance",
                &server,
                &auth,
                Arc::new(LoopbackOnly),
                &BearerChallenge::default(),
            )
            .await?;
            secrets.secret = Some((
                found.server.token_endpoint.origin().ascii_serialization(),
                client_secret,
            ));
            auth.client_id = Some(client_id);
            auth.client_secret = Some(SecretHandle(SECRET_HANDLE.to_owned()));
        }
        let env = McpEnv {
            executor: agent_test_support::executor(),
            clock: clock.clone(),
            secrets: Arc::new(secrets),
            gateway: None,
            auth: Some(AuthEnv {
                store: Arc::new(MemoryCredentialStore::new()),
                guard: Arc::new(LoopbackOnly),
                entropy: Arc::new(SeededEntropy::new(clock.wall_ms())),
                user_agent: Some(Arc::new(Headless)),
            }),
            elicitation: Some(Arc::new(AcceptDefaults)),
        };
        let mut config = McpServerConfig::http("conformance", url);
        config.auth = Some(auth);
        let client = McpClient::connect(&config, &env).await?;
        let tools = client.list_tools().await?;
        if scenario == "initialize" {
            return Ok(());
        }
        // Every other scenario checks what happens around tool calls
        // (results, elicitation, resumed streams, authorization).
        for tool in &tools {
            let result = client
                .call_tool(
                    &tool.name,
                    arguments_for(&tool.name),
                    RequestOptions::default(),
                )
                .await?;
            if result.is_error == Some(true) {
                return Err(McpError::Protocol(format!(
                    "tool {} answered an error: {:?}",
                    tool.name, result.content
                )));
            }
        }
        Ok(())
    }
}
