//! [`AuthSession`]: the authorization state of one HTTP connection, which
//! the transport consults. It owns the rules of when to log in again: a
//! 401 refreshes the token when a refresh token exists, else starts a
//! login (a person's, through the [`UserAgent`](super::UserAgent), or the
//! client-credentials grant); a 403 `insufficient_scope` logs in again
//! asking for the scopes held plus the challenge's (step-up). One login
//! runs at a time; a request whose 401 came with a token that another
//! request has replaced meanwhile is simply sent again.

use std::sync::{Arc, Mutex};

use agent_kernel::host::Clock;
use agent_kernel::host::secrets::SecretResolver;

use super::challenge::{BearerChallenge, split_scopes};
use super::discovery::{Discovery, discover, select_scopes};
use super::flow::{
    AuthorizationRequest, ClientIdentity, TokenAnswer, client_identity, pkce, random_state,
    token_request,
};
use super::http::AuthHttp;
use super::{AuthEnv, AuthGrant, McpAuthConfig, StoredCredentials};
use crate::error::McpError;

#[derive(Default)]
struct Current {
    loaded: bool,
    credentials: Option<StoredCredentials>,
    /// Counts replacements of the credentials.
    generation: u64,
}

/// The token a request was sent with: its generation tells a later 401
/// whether the token has been replaced since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenGeneration(u64);

pub(crate) struct AuthSession {
    server_id: String,
    server_url: url::Url,
    config: McpAuthConfig,
    env: AuthEnv,
    secrets: Arc<dyn SecretResolver>,
    clock: Arc<dyn Clock>,
    http: AuthHttp,
    current: Mutex<Current>,
    /// Held while a refresh or login runs.
    work: futures::lock::Mutex<()>,
}

impl AuthSession {
    pub fn new(
        server_id: &str,
        server_url: &url::Url,
        config: McpAuthConfig,
        env: AuthEnv,
        secrets: Arc<dyn SecretResolver>,
        clock: Arc<dyn Clock>,
    ) -> AuthSession {
        let http = AuthHttp {
            server_id: server_id.to_owned(),
            guard: env.guard.clone(),
            allow_loopback: config.allow_loopback,
        };
        AuthSession {
            server_id: server_id.to_owned(),
            server_url: server_url.clone(),
            config,
            env,
            secrets,
            clock,
            http,
            current: Mutex::new(Current::default()),
            work: futures::lock::Mutex::new(()),
        }
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Current> {
        match self.current.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The access token to send (none before a login) and its generation.
    pub async fn bearer(&self) -> Result<(Option<String>, TokenGeneration), McpError> {
        let loaded = self.current().loaded;
        if !loaded {
            let stored = self
                .env
                .store
                .load(&self.server_id)
                .await
                .map_err(|e| self.http.fail(e.to_string()))?
                // Credentials of another URL under this id are not sent.
                .filter(|c| c.server_url == self.server_url.as_str());
            let mut current = self.current();
            if !current.loaded {
                current.loaded = true;
                current.credentials = stored;
            }
        }
        let current = self.current();
        Ok((
            current.credentials.as_ref().map(|c| c.access_token.clone()),
            TokenGeneration(current.generation),
        ))
    }

    /// The server answered 401 to a request sent with `sent`.
    pub async fn unauthorized(
        &self,
        challenge: &BearerChallenge,
        sent: TokenGeneration,
    ) -> Result<(), McpError> {
        let _one_at_a_time = self.work.lock().await;
        let held = {
            let current = self.current();
            if current.generation != sent.0 {
                return Ok(());
            }
            current.credentials.clone()
        };
        if let Some(held) = held
            && held.refresh_token.is_some()
        {
            match self.refresh(&held).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::debug!(server = %self.server_id, error = %e, "refreshing the MCP token failed; logging in again")
                }
            }
        }
        self.login(challenge, None).await
    }

    /// The server answered 403 `insufficient_scope` to a request sent with
    /// `sent`: log in again for the scopes held plus the challenge's.
    pub async fn step_up(
        &self,
        challenge: &BearerChallenge,
        sent: TokenGeneration,
    ) -> Result<(), McpError> {
        let _one_at_a_time = self.work.lock().await;
        let mut scopes = {
            let current = self.current();
            if current.generation != sent.0 {
                return Ok(());
            }
            current
                .credentials
                .as_ref()
                .map(|c| c.scopes.clone())
                .unwrap_or_default()
        };
        for s in challenge.scopes() {
            if !scopes.contains(&s) {
                scopes.push(s);
            }
        }
        self.login(challenge, Some(scopes)).await
    }

    async fn refresh(&self, held: &StoredCredentials) -> Result<(), McpError> {
        let Some(refresh_token) = &held.refresh_token else {
            return Err(self.http.fail("no refresh token"));
        };
        let endpoint = url::Url::parse(&held.token_endpoint)
            .map_err(|e| self.http.fail(format!("the stored token endpoint: {e}")))?;
        let identity = ClientIdentity {
            client_id: held.client_id.clone(),
            client_secret: held.client_secret.clone(),
            auth_method: held.token_endpoint_auth_method.clone(),
        };
        let answer = token_request(
            &self.http,
            &endpoint,
            &identity,
            vec![
                ("grant_type", "refresh_token".into()),
                ("refresh_token", refresh_token.clone()),
                ("resource", held.resource.clone()),
            ],
        )
        .await?;
        let mut renewed = held.clone();
        let (scopes, expires) = (held.scopes.clone(), self.expiry(&answer));
        renewed.access_token = answer.access_token;
        renewed.refresh_token = answer.refresh_token.or(renewed.refresh_token);
        renewed.expires_at_ms = expires;
        renewed.scopes = answer.scope.map(|s| split_scopes(&s)).unwrap_or(scopes);
        self.keep(renewed).await
    }

    fn expiry(&self, answer: &TokenAnswer) -> Option<u64> {
        answer
            .expires_in
            .map(|s| self.clock.wall_ms().saturating_add(s.saturating_mul(1000)))
    }

    async fn keep(&self, credentials: StoredCredentials) -> Result<(), McpError> {
        self.env
            .store
            .save(&self.server_id, &credentials)
            .await
            .map_err(|e| self.http.fail(e.to_string()))?;
        let mut current = self.current();
        current.loaded = true;
        current.credentials = Some(credentials);
        current.generation += 1;
        Ok(())
    }

    /// Discover, identify the client and obtain a token for `scopes`
    /// (chosen from the challenge and metadata when `None`).
    async fn login(
        &self,
        challenge: &BearerChallenge,
        scopes: Option<Vec<String>>,
    ) -> Result<(), McpError> {
        let discovery = discover(&self.http, &self.server_url, challenge).await?;
        let mut scopes =
            scopes.unwrap_or_else(|| select_scopes(challenge, &discovery, &self.config.scopes));
        let (identity, answer) = match self.config.grant {
            AuthGrant::ClientCredentials => self.client_credentials(&discovery, &scopes).await?,
            AuthGrant::AuthorizationCode => {
                // Ask for a refresh token where the server offers one.
                if discovery
                    .server
                    .scopes_supported
                    .iter()
                    .any(|s| s == "offline_access")
                    && !scopes.iter().any(|s| s == "offline_access")
                {
                    scopes.push("offline_access".into());
                }
                self.authorization_code(&discovery, &scopes).await?
            }
        };
        let expires_at_ms = self.expiry(&answer);
        self.keep(StoredCredentials {
            server_url: self.server_url.to_string(),
            resource: discovery.resource.clone(),
            token_endpoint: discovery.server.token_endpoint.to_string(),
            client_id: identity.client_id,
            client_secret: identity.client_secret,
            token_endpoint_auth_method: identity.auth_method,
            access_token: answer.access_token,
            refresh_token: answer.refresh_token,
            expires_at_ms,
            scopes: answer.scope.map(|s| split_scopes(&s)).unwrap_or(scopes),
        })
        .await
    }

    async fn client_credentials(
        &self,
        discovery: &Discovery,
        scopes: &[String],
    ) -> Result<(ClientIdentity, TokenAnswer), McpError> {
        if self.config.client_id.is_none() || self.config.client_secret.is_none() {
            return Err(self.http.fail(
                "the client-credentials grant needs [mcp.auth] client_id and client_secret",
            ));
        }
        let identity = client_identity(
            &self.http,
            &self.config,
            &self.secrets,
            &discovery.server,
            None,
        )
        .await?;
        let mut params = vec![
            ("grant_type", "client_credentials".to_owned()),
            ("resource", discovery.resource.clone()),
        ];
        if !scopes.is_empty() {
            params.push(("scope", scopes.join(" ")));
        }
        let answer = token_request(
            &self.http,
            &discovery.server.token_endpoint,
            &identity,
            params,
        )
        .await?;
        Ok((identity, answer))
    }

    async fn authorization_code(
        &self,
        discovery: &Discovery,
        scopes: &[String],
    ) -> Result<(ClientIdentity, TokenAnswer), McpError> {
        let Some(user_agent) = self.env.user_agent.clone() else {
            return Err(McpError::AuthRequired {
                id: self.server_id.clone(),
            });
        };
        let redirect_uri = user_agent.redirect_uri().await?;
        let identity = client_identity(
            &self.http,
            &self.config,
            &self.secrets,
            &discovery.server,
            Some(&redirect_uri),
        )
        .await?;
        let pkce = pkce(&*self.env.entropy);
        let state = random_state(&*self.env.entropy);
        let url = AuthorizationRequest {
            endpoint: &discovery.server.authorization_endpoint,
            client_id: &identity.client_id,
            redirect_uri: &redirect_uri,
            state: &state,
            challenge: &pkce.challenge,
            scopes,
            resource: &discovery.resource,
        }
        .url();
        // The person's browser is sent there: the URL policy first.
        self.http.checked(&url).await?;
        let callback = user_agent.authorize(&url).await?;
        if callback.get("state") != Some(state.as_str()) {
            return Err(self.http.fail(
                "the authorization answer's state does not match the request's: it was ignored",
            ));
        }
        if let Some(error) = callback.get("error") {
            let detail: String = callback
                .get("error_description")
                .unwrap_or("")
                .chars()
                .take(300)
                .collect();
            return Err(self.http.fail(format!(
                "the authorization server refused the login: {} {detail}",
                error.chars().take(100).collect::<String>()
            )));
        }
        let code = callback
            .get("code")
            .filter(|c| !c.is_empty())
            .ok_or_else(|| self.http.fail("the authorization answer has no code"))?;
        let answer = token_request(
            &self.http,
            &discovery.server.token_endpoint,
            &identity,
            vec![
                ("grant_type", "authorization_code".into()),
                ("code", code.to_owned()),
                ("redirect_uri", redirect_uri.clone()),
                ("code_verifier", pkce.verifier.clone()),
                ("resource", discovery.resource.clone()),
            ],
        )
        .await?;
        Ok((identity, answer))
    }
}
