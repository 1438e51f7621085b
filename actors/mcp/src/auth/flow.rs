//! The OAuth 2.1 steps of a login: PKCE S256 (RFC 7636), `state`, client
//! identity in the specification's order of preference (a pre-registered
//! client, then a Client ID Metadata Document, then Dynamic Client
//! Registration, RFC 7591), the authorization request with `resource`
//! (RFC 8707), and the token requests (authorization code, refresh token,
//! client credentials) with the client authentication the authorization
//! server takes (`client_secret_basic`, `client_secret_post`, `none`).

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use agent_kernel::host::Entropy;
use agent_kernel::host::secrets::SecretResolver;

use super::McpAuthConfig;
use super::discovery::AuthorizationServer;
use super::http::AuthHttp;
use crate::error::McpError;

/// The client name sent in a registration.
pub const CLIENT_NAME: &str = "agentrt";

/// A PKCE pair: the verifier stays here, the challenge goes to the browser.
#[derive(Clone, PartialEq, Eq)]
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce")
            .field("challenge", &self.challenge)
            .finish_non_exhaustive()
    }
}

/// A fresh PKCE pair: 32 random bytes as the verifier (43 characters,
/// base64url), its SHA-256 as the S256 challenge.
pub fn pkce(entropy: &dyn Entropy) -> Pkce {
    let mut bytes = [0u8; 32];
    entropy.fill(&mut bytes);
    let verifier = URL_SAFE_NO_PAD.encode(bytes);
    Pkce {
        challenge: s256(&verifier),
        verifier,
    }
}

/// The S256 challenge of `verifier`.
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A fresh `state` value (128 random bits).
pub fn random_state(entropy: &dyn Entropy) -> String {
    let mut bytes = [0u8; 16];
    entropy.fill(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Who the client is to the authorization server.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ClientIdentity {
    pub client_id: String,
    pub client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post` or `none`.
    pub auth_method: String,
}

/// The token endpoint authentication for a client with or without a
/// secret: `none` without; with one, basic unless the server lists only
/// post (RFC 8414's default is basic).
pub fn pick_auth_method(server: &AuthorizationServer, has_secret: bool) -> String {
    if !has_secret {
        return "none".into();
    }
    match &server.token_endpoint_auth_methods {
        Some(list)
            if !list.iter().any(|m| m == "client_secret_basic")
                && list.iter().any(|m| m == "client_secret_post") =>
        {
            "client_secret_post".into()
        }
        _ => "client_secret_basic".into(),
    }
}

/// The configured client's secret, resolved only when its handle is bound
/// to the token endpoint's origin (credentials go only where configured).
async fn configured_secret(
    http: &AuthHttp,
    config: &McpAuthConfig,
    secrets: &Arc<dyn SecretResolver>,
    token_endpoint: &url::Url,
) -> Result<Option<String>, McpError> {
    let Some(handle) = &config.client_secret else {
        return Ok(None);
    };
    let origin = token_endpoint.origin().ascii_serialization();
    match secrets.bound_origin(handle) {
        Some(bound) if bound == origin => {}
        Some(bound) => {
            return Err(http.fail(format!(
                "the client secret {:?} is bound to {bound}, not to the token endpoint's origin {origin}; it was not sent",
                handle.0
            )));
        }
        None => {
            return Err(http.fail(format!(
                "the client secret {:?} is unknown to the host; add it bound to {origin}",
                handle.0
            )));
        }
    }
    let value = secrets
        .resolve(handle)
        .await
        .map_err(|e| http.fail(e.to_string()))?;
    Ok(Some(value.expose().to_owned()))
}

/// Choose the client identity: pre-registered, then a Client ID Metadata
/// Document, then Dynamic Client Registration (with `redirect_uri`).
pub(crate) async fn client_identity(
    http: &AuthHttp,
    config: &McpAuthConfig,
    secrets: &Arc<dyn SecretResolver>,
    server: &AuthorizationServer,
    redirect_uri: Option<&str>,
) -> Result<ClientIdentity, McpError> {
    if let Some(client_id) = &config.client_id {
        let secret = configured_secret(http, config, secrets, &server.token_endpoint).await?;
        return Ok(ClientIdentity {
            client_id: client_id.clone(),
            auth_method: pick_auth_method(server, secret.is_some()),
            client_secret: secret,
        });
    }
    if let Some(document) = &config.client_metadata_url
        && server.client_id_metadata_documents
    {
        return Ok(ClientIdentity {
            client_id: document.clone(),
            client_secret: None,
            auth_method: "none".into(),
        });
    }
    let (Some(endpoint), Some(redirect_uri)) = (&server.registration_endpoint, redirect_uri) else {
        return Err(http.fail(
            "the authorization server offers no registration and no client id is configured: give [mcp.auth] client_id (and client_secret)",
        ));
    };
    let client = http.checked(endpoint).await?;
    let body = json!({
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    let answer = http
        .exchange(&client, client.post(endpoint.clone()).json(&body))
        .await?;
    if !(200..300).contains(&answer.status) {
        return Err(http.fail(format!(
            "client registration at {endpoint} was refused (HTTP {}{})",
            answer.status,
            oauth_error_text(&answer.body)
        )));
    }
    let client_id = answer
        .body
        .get("client_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| http.fail("the registration answer has no client_id"))?
        .to_owned();
    let client_secret = answer
        .body
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let auth_method = match answer
        .body
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
    {
        Some(m) => m.to_owned(),
        None => pick_auth_method(server, client_secret.is_some()),
    };
    Ok(ClientIdentity {
        client_id,
        client_secret,
        auth_method,
    })
}

/// What the browser is sent to.
pub(crate) struct AuthorizationRequest<'a> {
    pub endpoint: &'a url::Url,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub state: &'a str,
    pub challenge: &'a str,
    pub scopes: &'a [String],
    pub resource: &'a str,
}

impl AuthorizationRequest<'_> {
    pub fn url(&self) -> url::Url {
        let mut url = self.endpoint.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", self.client_id)
                .append_pair("redirect_uri", self.redirect_uri)
                .append_pair("state", self.state)
                .append_pair("code_challenge", self.challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("resource", self.resource);
            if !self.scopes.is_empty() {
                q.append_pair("scope", &self.scopes.join(" "));
            }
        }
        url
    }
}

/// A successful token answer. `Debug` shows no token.
#[derive(Clone)]
pub(crate) struct TokenAnswer {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_in: Option<u64>,
    pub scope: Option<String>,
}

fn oauth_error_text(body: &Value) -> String {
    let mut out = String::new();
    if let Some(e) = body.get("error").and_then(Value::as_str) {
        out.push_str(&format!(": {}", e.chars().take(100).collect::<String>()));
        if let Some(d) = body.get("error_description").and_then(Value::as_str) {
            out.push_str(&format!(" ({})", d.chars().take(300).collect::<String>()));
        }
    }
    out
}

fn form_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A token request to `endpoint` with `params`, authenticated as
/// `identity`.
pub(crate) async fn token_request(
    http: &AuthHttp,
    endpoint: &url::Url,
    identity: &ClientIdentity,
    mut params: Vec<(&'static str, String)>,
) -> Result<TokenAnswer, McpError> {
    let client = http.checked(endpoint).await?;
    let mut request = client.post(endpoint.clone());
    match (identity.auth_method.as_str(), &identity.client_secret) {
        ("client_secret_basic", Some(secret)) => {
            let pair = format!(
                "{}:{}",
                form_encode(&identity.client_id),
                form_encode(secret)
            );
            let mut value =
                reqwest::header::HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(pair)))
                    .map_err(|_| {
                        http.fail("the client credentials are not a valid header value")
                    })?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        ("client_secret_post", Some(secret)) => {
            params.push(("client_id", identity.client_id.clone()));
            params.push(("client_secret", secret.clone()));
        }
        _ => params.push(("client_id", identity.client_id.clone())),
    }
    let body: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let request = request
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body);
    let answer = http.exchange(&client, request).await?;
    if !(200..300).contains(&answer.status) {
        return Err(http.fail(format!(
            "the token endpoint {endpoint} refused the request (HTTP {}{})",
            answer.status,
            oauth_error_text(&answer.body)
        )));
    }
    let access_token = answer
        .body
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| http.fail("the token answer has no access_token"))?
        .to_owned();
    if reqwest::header::HeaderValue::from_str(&format!("Bearer {access_token}")).is_err() {
        return Err(http.fail("the access token is not usable in a header"));
    }
    Ok(TokenAnswer {
        access_token,
        refresh_token: answer
            .body
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(str::to_owned),
        expires_in: answer.body.get("expires_in").and_then(Value::as_u64),
        scope: answer
            .body
            .get("scope")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s256_matches_rfc_7636_appendix_b() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn the_auth_method_follows_the_servers_list() {
        let mut server = AuthorizationServer {
            issuer: String::new(),
            authorization_endpoint: url::Url::parse("https://a.example/authorize").unwrap(),
            token_endpoint: url::Url::parse("https://a.example/token").unwrap(),
            registration_endpoint: None,
            scopes_supported: Vec::new(),
            token_endpoint_auth_methods: None,
            client_id_metadata_documents: false,
            from_metadata: true,
        };
        assert_eq!(pick_auth_method(&server, false), "none");
        assert_eq!(pick_auth_method(&server, true), "client_secret_basic");
        server.token_endpoint_auth_methods = Some(vec!["client_secret_post".into()]);
        assert_eq!(pick_auth_method(&server, true), "client_secret_post");
    }
}
