//! What a login refuses (MCP 2025-11-25 Authorization, "Security
//! Considerations"), against a server and authorization server written
//! here (axum on loopback): an answer whose `state` is not the request's
//! is ignored and no code is exchanged; protected resource metadata for
//! another resource stops the login before the authorization server is
//! asked anything; a URL the host's guard refuses is never fetched; and a
//! run without a person (no user agent) gets `AuthRequired`, not a login.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use agent_kernel::host::SeededEntropy;
use agent_mcp::auth::{
    AuthEnv, Callback, McpAuthConfig, MemoryCredentialStore, UrlGuard, UserAgent,
};
use agent_mcp::{McpClient, McpError, McpServerConfig};

#[derive(Default)]
struct Seen {
    base: String,
    /// The resource the metadata claims (None: this server).
    resource: Option<String>,
    paths: Vec<String>,
}

type Shared = Arc<Mutex<Seen>>;

async fn any(State(s): State<Shared>, uri: Uri) -> Response {
    let mut seen = s.lock().unwrap();
    seen.paths.push(uri.path().to_owned());
    let base = seen.base.clone();
    match uri.path() {
        "/mcp" => (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                format!(
                    "Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
                ),
            )],
        )
            .into_response(),
        "/.well-known/oauth-protected-resource/mcp" => axum::Json(json!({
            "resource": seen.resource.clone().unwrap_or(format!("{base}/mcp")),
            "authorization_servers": [base],
        }))
        .into_response(),
        "/.well-known/oauth-authorization-server" => axum::Json(json!({
            "issuer": base,
            "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"),
            "registration_endpoint": format!("{base}/register"),
            "code_challenge_methods_supported": ["S256"],
        }))
        .into_response(),
        "/register" => {
            (StatusCode::CREATED, axum::Json(json!({"client_id": "c1"}))).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn start(resource: Option<String>) -> (Shared, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let shared: Shared = Arc::new(Mutex::new(Seen {
        base: base.clone(),
        resource,
        paths: Vec::new(),
    }));
    let app = Router::new().fallback(any).with_state(shared.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (shared, base)
}

/// Lets loopback through when the server's configuration allows it.
struct Loopback;

#[async_trait::async_trait]
impl UrlGuard for Loopback {
    async fn check(&self, url: &url::Url, allow: bool) -> Result<Vec<SocketAddr>, String> {
        match url.host() {
            Some(url::Host::Ipv4(v4)) if allow && v4.is_loopback() => {
                Ok(vec![SocketAddr::from((v4, url.port().unwrap_or(80)))])
            }
            _ => Err(format!("{url} is refused")),
        }
    }
}

/// A browser that comes back with another `state` than the one sent.
struct ForgedState(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl UserAgent for ForgedState {
    async fn redirect_uri(&self) -> Result<String, McpError> {
        Ok("http://127.0.0.1:1/callback".into())
    }
    async fn authorize(&self, url: &url::Url) -> Result<Callback, McpError> {
        self.0.lock().unwrap().push(url.to_string());
        Ok(Callback {
            params: vec![
                ("code".into(), "c".into()),
                ("state".into(), "forged".into()),
            ],
        })
    }
}

fn env(user_agent: Option<Arc<dyn UserAgent>>) -> agent_mcp::McpEnv {
    let mut env = common::env();
    env.auth = Some(AuthEnv {
        store: Arc::new(MemoryCredentialStore::new()),
        guard: Arc::new(Loopback),
        entropy: Arc::new(SeededEntropy::new(7)),
        user_agent,
    });
    env
}

fn config(base: &str, allow_loopback: bool) -> McpServerConfig {
    let mut config = McpServerConfig::http("guarded", format!("{base}/mcp"));
    config.auth = Some(McpAuthConfig {
        allow_loopback,
        ..McpAuthConfig::default()
    });
    config
}

#[tokio::test]
async fn an_answer_with_another_state_is_ignored_and_no_code_is_exchanged() {
    let (seen, base) = start(None).await;
    let browser = Arc::new(ForgedState(Mutex::new(Vec::new())));
    let e = McpClient::connect(&config(&base, true), &env(Some(browser.clone())))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, McpError::Auth { why, .. } if why.contains("state")),
        "{e}"
    );
    let sent = browser.0.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    let url = url::Url::parse(&sent[0]).unwrap();
    let q: std::collections::BTreeMap<_, _> = url.query_pairs().into_owned().collect();
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["resource"], format!("{base}/mcp"));
    assert!(!q["state"].is_empty() && q["state"] != "forged");
    assert!(!seen.lock().unwrap().paths.iter().any(|p| p == "/token"));
}

#[tokio::test]
async fn metadata_for_another_resource_stops_the_login_before_the_authorization_server() {
    let (seen, base) = start(Some("https://evil.example.com/mcp".into())).await;
    let browser = Arc::new(ForgedState(Mutex::new(Vec::new())));
    let e = McpClient::connect(&config(&base, true), &env(Some(browser.clone())))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, McpError::Auth { why, .. } if why.contains("evil.example.com")),
        "{e}"
    );
    assert!(browser.0.lock().unwrap().is_empty());
    let paths = seen.lock().unwrap().paths.clone();
    assert!(
        !paths
            .iter()
            .any(|p| p.contains("authorization-server") || p == "/register"),
        "{paths:?}"
    );
}

#[tokio::test]
async fn a_url_the_guard_refuses_is_never_fetched() {
    let (seen, base) = start(None).await;
    let e = McpClient::connect(&config(&base, false), &env(None))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, McpError::Auth { why, .. } if why.contains("URL policy")),
        "{e}"
    );
    assert_eq!(seen.lock().unwrap().paths, ["/mcp"]);
}

#[tokio::test]
async fn without_a_person_a_login_is_required_not_started() {
    let (seen, base) = start(None).await;
    let e = McpClient::connect(&config(&base, true), &env(None))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, McpError::AuthRequired { id } if id == "guarded"),
        "{e}"
    );
    assert!(e.to_string().contains("agentrt mcp login guarded"));
    assert!(
        !seen
            .lock()
            .unwrap()
            .paths
            .iter()
            .any(|p| p == "/register" || p == "/token")
    );
}

#[tokio::test]
async fn an_unusable_auth_table_is_refused_before_anything_is_sent() {
    use agent_kernel::host::secrets::SecretHandle;
    let secrets = common::env().secrets;
    for (auth, why) in [
        (
            McpAuthConfig {
                client_secret: Some(SecretHandle("s".into())),
                ..McpAuthConfig::default()
            },
            "a secret without an id",
        ),
        (
            McpAuthConfig {
                grant: agent_mcp::auth::AuthGrant::ClientCredentials,
                client_id: Some("id".into()),
                ..McpAuthConfig::default()
            },
            "client credentials without a secret",
        ),
        (
            McpAuthConfig {
                client_metadata_url: Some("http://client.example/meta.json".into()),
                ..McpAuthConfig::default()
            },
            "a metadata document over http",
        ),
    ] {
        let mut config = McpServerConfig::http("guarded", "https://mcp.example/mcp");
        config.auth = Some(auth);
        assert!(config.check(&*secrets).is_err(), "{why}");
    }
    let mut config = McpServerConfig::stdio("local", "server", ["--stdio"]);
    config.auth = Some(McpAuthConfig::default());
    assert!(config.check(&*secrets).is_err(), "auth on a command server");
    let mut fine = McpServerConfig::http("guarded", "https://mcp.example/mcp");
    fine.auth = Some(McpAuthConfig {
        client_metadata_url: Some("https://client.example/meta.json".into()),
        ..McpAuthConfig::default()
    });
    assert!(fine.check(&*secrets).is_ok());
}
