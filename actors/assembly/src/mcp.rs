//! MCP servers in the one assembly (issue 16): the configured servers of a
//! host ([`McpServerSpec`]), checked when the assembly is built, connected by
//! [`Assembly::connect_mcp`] (a server that is down does not stop the
//! others or the runtime: its [`McpServerStatus`] says why), registered as
//! discoverable tools of origin `mcp:<id>`, and re-registered whole after
//! every `list_changed` or reconnect, so a changed definition carries a
//! new fingerprint and its next call is asked about again (S6.2).
//!
//! A function whose model-facing name another provider already offers is
//! left out and named in the status (S5.5: never resolved by guessing); the
//! server's other tools still load.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use agent_capabilities::Origin;
use agent_kernel::maybe_send::{BoxFuture, boxed};
use agent_kernel::run::RunMode;
use agent_mcp::{
    GatewayRoute, McpEnv, McpFunctionRegistration, McpLoad, McpServer, McpServerConfig,
    spawn_mcp_server,
};
use agent_tools::pipeline::ControlError;
use agent_tools::registry::Exposure;
use agent_tools::{RegistryError, ToolRegistration, ToolsHandle};

use crate::{Assembly, AssemblyError};

/// One MCP server a host offers.
#[derive(Debug, Clone)]
pub struct McpServerSpec {
    pub config: McpServerConfig,
    /// Reach it through an `agentrt serve` gateway (a page whose server
    /// does not allow the page's origin); None: directly.
    pub via_gateway: Option<GatewayRoute>,
    /// Authorization for the server (its credential store, URL guard and,
    /// where a person can log in, the browser step); None: a server that
    /// answers 401 is not connected.
    pub auth: Option<agent_mcp::auth::AuthEnv>,
}

impl McpServerSpec {
    /// A server reached directly.
    pub fn direct(config: McpServerConfig) -> McpServerSpec {
        McpServerSpec {
            config,
            via_gateway: None,
            auth: None,
        }
    }
}

/// What became of one configured server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpServerStatus {
    pub id: String,
    /// True once its tools are registered.
    pub connected: bool,
    /// The model-facing names of its registered tools.
    pub tools: Vec<String>,
    /// Functions left out, each with the reason (a colliding name, an
    /// invalid schema, ...).
    pub refused: Vec<RefusedFunction>,
    /// Why it is not connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A server function that is not offered, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedFunction {
    pub name: String,
    pub why: String,
}

/// The servers of an assembly: their specs, the connected ones (kept here
/// so their connections live as long as the assembly) and each status.
#[derive(Default)]
pub(crate) struct McpServers {
    specs: Vec<McpServerSpec>,
    connected: Mutex<BTreeMap<String, McpServer>>,
    statuses: Mutex<BTreeMap<String, McpServerStatus>>,
}

impl McpServers {
    /// Check every spec without contacting a server: ids unique among the
    /// servers and apart from the plugins', each configuration valid.
    pub(crate) fn new(
        specs: Vec<McpServerSpec>,
        plugin_ids: &[&str],
        secrets: &dyn agent_tools::SecretResolver,
    ) -> Result<McpServers, AssemblyError> {
        let mut seen: Vec<&str> = Vec::new();
        for spec in &specs {
            let id = spec.config.id.as_str();
            let refuse = |detail: String| AssemblyError::Mcp {
                id: id.to_owned(),
                detail,
            };
            if seen.contains(&id) {
                return Err(refuse(format!(
                    "MCP server {id:?}: two MCP servers have this id; give each its own"
                )));
            }
            if plugin_ids.contains(&id) {
                return Err(refuse(format!(
                    "MCP server {id:?}: a plugin has this id too; a provider id names one plugin or server"
                )));
            }
            seen.push(id);
            spec.config
                .check(secrets)
                .map_err(|e| refuse(e.to_string()))?;
        }
        Ok(McpServers {
            specs,
            ..McpServers::default()
        })
    }

    fn status(&self, status: McpServerStatus) {
        let mut all = match self.statuses.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        all.insert(status.id.clone(), status);
    }

    pub(crate) fn statuses(&self) -> Vec<McpServerStatus> {
        let all = match self.statuses.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        self.specs
            .iter()
            .map(|spec| {
                all.get(&spec.config.id)
                    .cloned()
                    .unwrap_or_else(|| McpServerStatus {
                        id: spec.config.id.clone(),
                        connected: false,
                        tools: Vec::new(),
                        refused: Vec::new(),
                        error: Some("not connected yet".into()),
                    })
            })
            .collect()
    }

    fn is_connected(&self, id: &str) -> bool {
        match self.connected.lock() {
            Ok(c) => c.contains_key(id),
            Err(p) => p.into_inner().contains_key(id),
        }
    }
}

/// The registry entry of one server function: discoverable, agent mode
/// (the one conversion; a test host that spawns servers itself uses it).
pub fn registration(r: McpFunctionRegistration) -> ToolRegistration {
    ToolRegistration {
        definition: r.definition,
        modes: vec![RunMode::Agent],
        exposure: Exposure::Discoverable,
        trusted_external: r.trusted_external,
        unknown_function: r.unknown_function,
        needs_grant: None,
        addr: r.addr,
    }
}

/// Register `load` as every tool of server `id`, leaving out functions
/// whose names collide with another provider's (each named in the
/// status). Returns the status.
async fn register(tools: &ToolsHandle, id: &str, load: McpLoad) -> McpServerStatus {
    let mut refused: Vec<RefusedFunction> = load
        .refused
        .into_iter()
        .map(|r| RefusedFunction {
            name: r.name,
            why: r.why,
        })
        .collect();
    let mut regs: Vec<ToolRegistration> =
        load.registrations.into_iter().map(registration).collect();
    // Each refusal names one function; there are at most as many as tools.
    for _ in 0..=regs.len() {
        let names: Vec<String> = regs.iter().map(|r| r.definition.name.clone()).collect();
        match tools
            .replace_provider(Origin::Mcp(id.to_owned()), regs.clone())
            .await
        {
            Ok(()) => {
                return McpServerStatus {
                    id: id.to_owned(),
                    connected: true,
                    tools: names,
                    refused,
                    error: None,
                };
            }
            Err(ControlError::Registry(
                e @ (RegistryError::Collision { .. }
                | RegistryError::ReservedName { .. }
                | RegistryError::InvalidName { .. }
                | RegistryError::InvalidSchema { .. }
                | RegistryError::Fingerprint { .. }),
            )) => {
                let name = match &e {
                    RegistryError::Collision { name, .. }
                    | RegistryError::ReservedName { name, .. }
                    | RegistryError::InvalidName { name, .. }
                    | RegistryError::InvalidSchema { name, .. }
                    | RegistryError::Fingerprint { name, .. } => name.clone(),
                    _ => String::new(),
                };
                let before = regs.len();
                regs.retain(|r| r.definition.name != name);
                refused.push(RefusedFunction {
                    name,
                    why: e.to_string(),
                });
                if regs.len() == before {
                    break;
                }
            }
            Err(e) => {
                return McpServerStatus {
                    id: id.to_owned(),
                    connected: false,
                    tools: Vec::new(),
                    refused,
                    error: Some(e.to_string()),
                };
            }
        }
    }
    McpServerStatus {
        id: id.to_owned(),
        connected: false,
        tools: Vec::new(),
        refused,
        error: Some("no tool of the server could be registered".into()),
    }
}

impl Assembly {
    /// Connect every configured MCP server not connected yet, all at once:
    /// handshake, list, register its tools, and watch for changes. A server
    /// that cannot be reached is reported in its status and tried again by
    /// the next call; the others and the runtime go on.
    pub async fn connect_mcp(&self) -> Vec<McpServerStatus> {
        let pending: Vec<McpServerSpec> = self
            .mcp
            .specs
            .iter()
            .filter(|s| !self.mcp.is_connected(&s.config.id))
            .cloned()
            .collect();
        let connecting = pending.into_iter().map(|spec| self.connect_one(spec));
        futures::future::join_all(connecting).await;
        self.mcp.statuses()
    }

    /// What became of each configured MCP server, in configuration order.
    pub fn mcp_statuses(&self) -> Vec<McpServerStatus> {
        self.mcp.statuses()
    }

    // In a tab the runtime handle is single-threaded (`Rc` inside), as is
    // everything there: the `Arc` is the handler type the client shares.
    #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
    async fn connect_one(&self, spec: McpServerSpec) {
        let id = spec.config.id.clone();
        let env = McpEnv {
            executor: self.host.executor.clone(),
            clock: self.host.clock.clone(),
            secrets: self.secrets.clone(),
            gateway: spec.via_gateway.clone(),
            auth: spec.auth.clone(),
            // A server's request for input becomes a pending request of the
            // run whose call it came with.
            elicitation: Some(Arc::new(crate::mcp_elicitation::RunElicitations {
                runtime: self.runtime.downgrade(),
            })),
        };
        let server = match spawn_mcp_server(&env, &spec.config).await {
            Ok(s) => s,
            Err(e) => {
                self.mcp.status(McpServerStatus {
                    id,
                    connected: false,
                    tools: Vec::new(),
                    refused: Vec::new(),
                    error: Some(e.to_string()),
                });
                return;
            }
        };
        let status = register(&self.tools, &id, server.load.clone()).await;
        if !status.connected {
            self.mcp.status(status);
            return;
        }
        self.mcp.status(status);
        let tools = self.tools.clone();
        let statuses = Arc::downgrade(&self.mcp);
        let watched_id = id.clone();
        // On wasm32 nothing here is Send, and nothing needs to be.
        #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
        let on_change = Arc::new(move |load: McpLoad| -> BoxFuture<'static, ()> {
            let tools = tools.clone();
            let statuses = statuses.clone();
            let id = watched_id.clone();
            boxed(async move {
                let status = register(&tools, &id, load).await;
                if let Some(servers) = statuses.upgrade() {
                    servers.status(status);
                }
            })
        });
        server.watch(on_change);
        let mut connected = match self.mcp.connected.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        connected.insert(id, server);
    }
}
