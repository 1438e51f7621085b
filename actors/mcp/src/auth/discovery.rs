//! Discovery (MCP 2025-11-25, "Authorization Server Discovery"):
//!
//! 1. Protected resource metadata (RFC 9728): the `resource_metadata` URL
//!    of the server's challenge; else the well-known URL with the server's
//!    path (`/.well-known/oauth-protected-resource/mcp`), then the one at
//!    the root. Its `resource` must name this server (same origin, a path
//!    that the server's path starts with): metadata for another resource is
//!    refused and no authorization starts.
//! 2. Authorization server metadata for its first authorization server: for
//!    an issuer with a path, RFC 8414 with the path inserted, OpenID Connect
//!    discovery with the path inserted, then OpenID Connect with the path
//!    appended; for one without, RFC 8414 then OpenID Connect.
//! 3. A server with no protected resource metadata (revision 2025-03-26):
//!    its origin is the authorization server; its RFC 8414 metadata at the
//!    root, else the default endpoints `/authorize`, `/token`, `/register`.

use serde_json::Value;

use super::challenge::{BearerChallenge, split_scopes};
use super::http::AuthHttp;
use crate::error::McpError;

/// What discovery found for one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// The `resource` parameter to send (RFC 8707).
    pub resource: String,
    /// The protected resource's `scopes_supported`.
    pub resource_scopes: Vec<String>,
    pub server: AuthorizationServer,
}

/// The authorization server's endpoints and the capabilities the flow
/// branches on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationServer {
    pub issuer: String,
    pub authorization_endpoint: url::Url,
    pub token_endpoint: url::Url,
    pub registration_endpoint: Option<url::Url>,
    pub scopes_supported: Vec<String>,
    /// `None` when the metadata does not say (RFC 8414 default:
    /// `client_secret_basic`).
    pub token_endpoint_auth_methods: Option<Vec<String>>,
    pub client_id_metadata_documents: bool,
    /// The endpoints came from metadata (false: 2025-03-26 defaults).
    pub from_metadata: bool,
}

/// The well-known URLs of protected resource metadata for `server`.
pub fn resource_metadata_urls(server: &url::Url) -> Vec<url::Url> {
    let mut out = Vec::new();
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        out.push(at_path(
            server,
            &format!("/.well-known/oauth-protected-resource{path}"),
        ));
    }
    out.push(at_path(server, "/.well-known/oauth-protected-resource"));
    out
}

/// The metadata URLs of `issuer`, in the specification's order.
pub fn authorization_server_metadata_urls(issuer: &url::Url) -> Vec<url::Url> {
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            at_path(issuer, "/.well-known/oauth-authorization-server"),
            at_path(issuer, "/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            at_path(
                issuer,
                &format!("/.well-known/oauth-authorization-server{path}"),
            ),
            at_path(issuer, &format!("/.well-known/openid-configuration{path}")),
            at_path(issuer, &format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

fn at_path(base: &url::Url, path: &str) -> url::Url {
    let mut url = base.clone();
    url.set_path(path);
    url.set_query(None);
    url.set_fragment(None);
    url
}

/// True when protected resource metadata for `resource` may be used for
/// `server` (RFC 9728 §3.3; the MCP resource parameter rules).
pub fn resource_matches(resource: &str, server: &url::Url) -> bool {
    let Ok(resource) = url::Url::parse(resource) else {
        return false;
    };
    if resource.origin() != server.origin() {
        return false;
    }
    let want = resource.path().trim_end_matches('/');
    let have = server.path().trim_end_matches('/');
    have == want || have.starts_with(&format!("{want}/")) || want.is_empty()
}

/// The canonical URI of `server` (no fragment, no query; RFC 8707).
pub fn canonical_resource(server: &url::Url) -> String {
    let mut url = server.clone();
    url.set_fragment(None);
    url.set_query(None);
    let text = url.to_string();
    match text.strip_suffix('/') {
        Some(t) if url.path() == "/" => t.to_owned(),
        _ => text,
    }
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn endpoint(http: &AuthHttp, v: &Value, key: &str) -> Result<Option<url::Url>, McpError> {
    match v.get(key).and_then(Value::as_str) {
        None => Ok(None),
        Some(text) => url::Url::parse(text).map(Some).map_err(|e| {
            http.fail(format!(
                "authorization server metadata: {key} {text:?}: {e}"
            ))
        }),
    }
}

/// Read authorization server metadata (`from_url` is where it came from).
fn read_server_metadata(http: &AuthHttp, v: &Value) -> Result<AuthorizationServer, McpError> {
    let authorization_endpoint = endpoint(http, v, "authorization_endpoint")?
        .ok_or_else(|| http.fail("authorization server metadata has no authorization_endpoint"))?;
    let token_endpoint = endpoint(http, v, "token_endpoint")?
        .ok_or_else(|| http.fail("authorization server metadata has no token_endpoint"))?;
    let methods = strings(v, "code_challenge_methods_supported");
    let grants = strings(v, "grant_types_supported");
    // PKCE is required: metadata that does not offer S256 is refused
    // (a client-credentials-only server has no authorization code flow).
    let code_flow = grants.is_empty() || grants.iter().any(|g| g == "authorization_code");
    if code_flow && !methods.iter().any(|m| m == "S256") {
        return Err(http.fail(
            "the authorization server does not list S256 in code_challenge_methods_supported; without PKCE no login is started",
        ));
    }
    Ok(AuthorizationServer {
        issuer: v
            .get("issuer")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        authorization_endpoint,
        token_endpoint,
        registration_endpoint: endpoint(http, v, "registration_endpoint")?,
        scopes_supported: strings(v, "scopes_supported"),
        token_endpoint_auth_methods: v
            .get("token_endpoint_auth_methods_supported")
            .map(|_| strings(v, "token_endpoint_auth_methods_supported")),
        client_id_metadata_documents: v
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        from_metadata: true,
    })
}

/// Run discovery for the server `server_id` at `server_url` as a login
/// would (what `agentrt mcp login` shows before starting one), every URL
/// through `guard`.
pub async fn discover_server(
    server_id: &str,
    server_url: &url::Url,
    config: &super::McpAuthConfig,
    guard: std::sync::Arc<dyn super::UrlGuard>,
    challenge: &BearerChallenge,
) -> Result<Discovery, McpError> {
    let http = AuthHttp {
        server_id: server_id.to_owned(),
        guard,
        allow_loopback: config.allow_loopback,
    };
    discover(&http, server_url, challenge).await
}

/// Run discovery for `server` after a challenge.
pub(crate) async fn discover(
    http: &AuthHttp,
    server: &url::Url,
    challenge: &BearerChallenge,
) -> Result<Discovery, McpError> {
    let mut candidates = Vec::new();
    if let Some(hinted) = &challenge.resource_metadata {
        let hinted = url::Url::parse(hinted).map_err(|e| {
            http.fail(format!(
                "the server's resource_metadata {hinted:?} is not a URL: {e}"
            ))
        })?;
        candidates.push(hinted);
    }
    candidates.extend(resource_metadata_urls(server));
    let mut resource_metadata = None;
    for url in &candidates {
        if let Some(doc) = http.get_document(url).await? {
            resource_metadata = Some(doc);
            break;
        }
    }
    let Some(prm) = resource_metadata else {
        return legacy(http, server).await;
    };
    let resource = match prm.get("resource").and_then(Value::as_str) {
        Some(r) if resource_matches(r, server) => r.to_owned(),
        Some(r) => {
            return Err(http.fail(format!(
                "the protected resource metadata is for {r:?}, not for this server ({server}); no authorization was started"
            )));
        }
        None => canonical_resource(server),
    };
    let issuer = strings(&prm, "authorization_servers")
        .into_iter()
        .next()
        .ok_or_else(|| {
            http.fail("the protected resource metadata names no authorization server")
        })?;
    let issuer_url = url::Url::parse(&issuer)
        .map_err(|e| http.fail(format!("authorization server {issuer:?} is not a URL: {e}")))?;
    for url in authorization_server_metadata_urls(&issuer_url) {
        if let Some(doc) = http.get_document(&url).await? {
            return Ok(Discovery {
                resource,
                resource_scopes: strings(&prm, "scopes_supported"),
                server: read_server_metadata(http, &doc)?,
            });
        }
    }
    Err(http.fail(format!(
        "no authorization server metadata found for {issuer} (RFC 8414 or OpenID Connect discovery)"
    )))
}

/// Revision 2025-03-26: the server's origin is its authorization server.
async fn legacy(http: &AuthHttp, server: &url::Url) -> Result<Discovery, McpError> {
    let base = at_path(server, "/");
    let resource = canonical_resource(server);
    let metadata = at_path(&base, "/.well-known/oauth-authorization-server");
    if let Some(doc) = http.get_document(&metadata).await? {
        return Ok(Discovery {
            resource,
            resource_scopes: Vec::new(),
            server: read_server_metadata(http, &doc)?,
        });
    }
    Ok(Discovery {
        resource,
        resource_scopes: Vec::new(),
        server: AuthorizationServer {
            issuer: base.origin().ascii_serialization(),
            authorization_endpoint: at_path(&base, "/authorize"),
            token_endpoint: at_path(&base, "/token"),
            registration_endpoint: Some(at_path(&base, "/register")),
            scopes_supported: Vec::new(),
            token_endpoint_auth_methods: None,
            client_id_metadata_documents: false,
            from_metadata: false,
        },
    })
}

/// The scopes to ask for: the challenge's, else the resource's
/// `scopes_supported`, else the configured ones (else none: the parameter
/// is left out).
pub fn select_scopes(
    challenge: &BearerChallenge,
    discovery: &Discovery,
    configured: &[String],
) -> Vec<String> {
    let from_challenge = challenge.scopes();
    if !from_challenge.is_empty() {
        return from_challenge;
    }
    if !discovery.resource_scopes.is_empty() {
        return discovery.resource_scopes.clone();
    }
    split_scopes(&configured.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    #[test]
    fn well_known_urls_in_the_specifications_order() {
        let prm: Vec<String> = resource_metadata_urls(&u("https://a.example/public/mcp"))
            .iter()
            .map(|x| x.to_string())
            .collect();
        assert_eq!(
            prm,
            [
                "https://a.example/.well-known/oauth-protected-resource/public/mcp",
                "https://a.example/.well-known/oauth-protected-resource"
            ]
        );
        let asm: Vec<String> =
            authorization_server_metadata_urls(&u("https://auth.example/tenant1"))
                .iter()
                .map(|x| x.to_string())
                .collect();
        assert_eq!(
            asm,
            [
                "https://auth.example/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example/.well-known/openid-configuration/tenant1",
                "https://auth.example/tenant1/.well-known/openid-configuration"
            ]
        );
        let root: Vec<String> = authorization_server_metadata_urls(&u("https://auth.example"))
            .iter()
            .map(|x| x.to_string())
            .collect();
        assert_eq!(
            root,
            [
                "https://auth.example/.well-known/oauth-authorization-server",
                "https://auth.example/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn resource_must_name_this_server() {
        let server = u("http://localhost:3000/mcp");
        assert!(resource_matches("http://localhost:3000/mcp", &server));
        assert!(resource_matches("http://localhost:3000", &server));
        assert!(resource_matches("http://localhost:3000/", &server));
        assert!(!resource_matches("https://evil.example.com/mcp", &server));
        assert!(!resource_matches("http://localhost:3001/mcp", &server));
        assert!(!resource_matches("http://localhost:3000/mcp2", &server));
        assert!(!resource_matches("http://localhost:3000/other", &server));
        assert!(!resource_matches("not a url", &server));
        assert_eq!(
            canonical_resource(&u("https://A.example/mcp?x#y")),
            "https://a.example/mcp"
        );
        assert_eq!(
            canonical_resource(&u("https://a.example/")),
            "https://a.example"
        );
    }
}
