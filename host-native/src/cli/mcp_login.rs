//! `agentrt mcp login ID` and `agentrt mcp logout ID`: a person logs in to
//! an `[[mcp]]` server that needs authorization, or forgets its tokens.
//! Login connects to the server as a run would, with a
//! [`LoopbackUserAgent`]: when the server answers 401, the URL to open is
//! printed and the browser's answer is awaited on a loopback listener;
//! the tokens go to the credentials file of the data directory
//! ([`agent_host_native::mcp_auth::FileCredentialStore`], mode 0600), from
//! which later runs read them. Also owns the authorization environment of
//! runs ([`run_auth_env`]).
//!
//! The doc comments of [`McpAction`] are clap's `--help` text: `[[mcp]]`
//! names a TOML table, not a rustdoc link.
#![allow(rustdoc::broken_intra_doc_links)]

use std::sync::Arc;

use anyhow::anyhow;
use clap::Subcommand;

use agent_host_native::config::Config;
use agent_host_native::host::{SystemClock, TokioExecutor};
use agent_host_native::mcp_auth::{LoopbackUserAgent, auth_env};
use agent_mcp::auth::{AuthEnv, UserAgent};
use agent_mcp::{McpClient, McpEnv};

use crate::cli::args::Cli;
use crate::cli::exit::{code, usage};

/// What `agentrt mcp` does.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum McpAction {
    /// Log in to the [[mcp]] server ID: prints the URL to open in a
    /// browser, waits for the answer on a loopback address, and keeps the
    /// tokens in the data directory (file mode 0600) for later runs.
    Login {
        /// The server's id in the configuration.
        id: String,
    },
    /// Forget the stored tokens of the [[mcp]] server ID.
    Logout {
        /// The server's id in the configuration.
        id: String,
    },
}

fn policy() -> anyhow::Result<agent_fetch::UrlPolicy> {
    let executor = TokioExecutor::current().ok_or_else(|| anyhow!("no async runtime"))?;
    Ok(agent_fetch::UrlPolicy::public_web(Arc::new(
        agent_fetch::SystemResolver::new(Arc::new(executor)),
    )))
}

/// The authorization environment of runs: stored tokens (unless
/// `--no-store-credentials`), the URL policy, no browser step (a server
/// whose tokens cannot be refreshed asks for `agentrt mcp login`).
pub(crate) fn run_auth_env(cli: &Cli) -> anyhow::Result<AuthEnv> {
    let dir = crate::cli::open::data_dir(cli)?;
    Ok(auth_env(&dir, !cli.no_store_credentials, policy()?, None)?)
}

/// Run `agentrt mcp ACTION`.
pub(crate) async fn run(cli: &Cli, config: Config, action: &McpAction) -> anyhow::Result<u8> {
    let id = match action {
        McpAction::Login { id } | McpAction::Logout { id } => id,
    };
    let server = config
        .mcp
        .iter()
        .find(|s| &s.id == id)
        .ok_or_else(|| usage(format!("no [[mcp]] server has the id {id:?}")))?
        .clone();
    if server.url.is_none() {
        return Err(usage(format!(
            "[[mcp]] {id:?} is a command server: it takes credentials from its environment, not from a login"
        )));
    }
    if cli.no_store_credentials {
        return Err(usage(
            "with --no-store-credentials nothing is kept: log in without it (tokens go to the data directory, mode 0600)",
        ));
    }
    let dir = crate::cli::open::data_dir(cli)?;
    let user_agent: Arc<dyn UserAgent> =
        Arc::new(LoopbackUserAgent::new(Box::new(std::io::stdout())));
    let auth = auth_env(&dir, true, policy()?, Some(user_agent))?;
    match action {
        McpAction::Logout { .. } => {
            let removed = auth.store.remove(id).await?;
            if removed {
                println!("Logged out of {id}: its tokens were removed.");
            } else {
                println!("No tokens were stored for {id}.");
            }
            Ok(code::OK)
        }
        McpAction::Login { .. } => {
            // A login replaces what was stored.
            auth.store.remove(id).await?;
            let handle = tokio::runtime::Handle::current();
            let env = McpEnv {
                executor: Arc::new(TokioExecutor::new(handle.clone())),
                clock: Arc::new(SystemClock::new(handle)),
                secrets: config.secret_resolver(),
                gateway: None,
                auth: Some(auth.clone()),
                elicitation: None,
            };
            let client = McpClient::connect(&server, &env).await?;
            let tools = client.list_tools().await?;
            match auth.store.load(id).await? {
                Some(stored) => {
                    let scopes = if stored.scopes.is_empty() {
                        "no scope".to_owned()
                    } else {
                        stored.scopes.join(" ")
                    };
                    println!(
                        "Logged in to {id} ({scopes}; {} tools). The tokens are kept in {}.",
                        tools.len(),
                        dir.join(agent_host_native::mcp_auth::CREDENTIALS_FILE)
                            .display()
                    );
                }
                None => println!(
                    "{id} did not ask for a login ({} tools); nothing was stored.",
                    tools.len()
                ),
            }
            Ok(code::OK)
        }
    }
}
