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
    use std::sync::Arc;

    use serde_json::{Value, json};

    use agent_kernel::host::secrets::{SecretError, SecretHandle, SecretResolver, SecretValue};
    use agent_mcp::client::RequestOptions;
    use agent_mcp::{McpClient, McpEnv, McpError, McpServerConfig};

    /// The driver configures no secret: every handle is unknown.
    struct NoSecrets;

    #[async_trait::async_trait]
    impl SecretResolver for NoSecrets {
        fn bound_origin(&self, _handle: &SecretHandle) -> Option<String> {
            None
        }
        async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
            Err(SecretError::Unknown(handle.0.clone()))
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

    pub async fn run(url: &str, scenario: &str) -> Result<(), McpError> {
        let env = McpEnv {
            executor: agent_test_support::executor(),
            clock: agent_test_support::clock(),
            secrets: Arc::new(NoSecrets),
            gateway: None,
        };
        let config = McpServerConfig::http("conformance", url);
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
