//! The tool actors of one MCP server, on the one tool-actor shell
//! (`agent_kernel::tool::spawn_tool_with`): one actor per function the
//! server lists, and read tools for its resources and prompts (when it
//! offers them). [`spawn_mcp_server`] connects, lists, spawns and returns
//! the registrations; [`McpServer::watch`] re-lists on
//! `tools/list_changed` or a reconnect and hands the new set to the host's
//! [`ToolsChanged`] callback. Every actor checks, before sending anything,
//! that its definition is still the server's current one, so nothing stale
//! is dispatched.
//!
//! Trust (S6.1, S6.3): a function not in `trusted_functions` is unknown:
//! effects `write_external`, not idempotent, `unknown_function: true` (the
//! policy asks once per call). A declared one has its declared effects; it
//! is `trusted_external` only when its pinned fingerprint equals the
//! current definition's. Annotations are kept as display hints and never
//! change effects. Every result is `external_untrusted`, text bounded to
//! [`MAX_TEXT_CHARS`] with truncation marked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::FutureExt;
use serde_json::{Map, Value, json};

use agent_capabilities::{
    EffectClass, EffectSet, Fingerprint, Idempotency, Origin, Sensitivity, Trust, is_read_only,
    sha256_hex,
};
use agent_kernel::maybe_send::boxed;
use agent_kernel::protocol::{
    Provenance, TargetRule, ToolAddr, ToolDefinition, ToolFailure, ToolProgress, ToolSuccess,
};
use agent_kernel::tool::codes as shell_codes;
use agent_kernel::tool::names::{RESERVED_TOOL_NAMES, model_facing_name};
use agent_kernel::tool::validate::CompiledSchema;
use agent_kernel::tool::{Tool, ToolContext, ToolOptions, spawn_tool_with};
use agent_kernel::{BoxFuture, MaybeSend, MaybeSync};

use crate::client::{McpClient, McpEnv, RequestOptions, ServerEvent};
use crate::codes;
use crate::config::{Endpoint, McpServerConfig};
use crate::elicitation::ElicitationOrigin;
use crate::error::McpError;
use crate::protocol::{CallToolResult, McpTool};

mod content;
mod read;

pub use content::call_result_content;
use content::{Budget, content_json, resource_json};
use read::{McpReadTool, read_tools};

/// Most characters of server text handed to the model per result (the
/// fetch actor's default for readable text); the rest is cut and marked.
pub const MAX_TEXT_CHARS: usize = 40_000;
/// Longest resource URI a read accepts.
pub const MAX_URI_LEN: usize = 2_048;
/// Names the discovery tools use; no server function may take them.
const DISCOVERY_NAMES: [&str; 2] = ["search_tools", "load_tools"];

/// One tool of a server, ready for the registry. The assembly turns it into
/// an `agent_tools::ToolRegistration` in one line:
/// `ToolRegistration { definition: r.definition, modes: vec![RunMode::Agent],
/// exposure: Exposure::Discoverable, trusted_external: r.trusted_external,
/// unknown_function: r.unknown_function, addr: r.addr }`.
#[derive(Debug, Clone)]
pub struct McpFunctionRegistration {
    pub definition: ToolDefinition,
    pub addr: ToolAddr,
    /// A declared function whose pinned fingerprint matches (S6.1).
    pub trusted_external: bool,
    /// A function the configuration does not declare (asks once per call).
    pub unknown_function: bool,
}

/// A server function that could not be offered (the others still load).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionRefusal {
    /// The function's name as the server lists it.
    pub name: String,
    pub why: String,
}

/// The tools of one listing.
#[derive(Debug, Clone, Default)]
pub struct McpLoad {
    pub registrations: Vec<McpFunctionRegistration>,
    pub refused: Vec<FunctionRefusal>,
}

/// What the host does with a new listing (the assembly: `replace_provider`
/// of `Origin::Mcp(id)` with the converted registrations).
pub trait ToolsChanged: MaybeSend + MaybeSync {
    fn changed(&self, load: McpLoad) -> BoxFuture<'static, ()>;
}

impl<F> ToolsChanged for F
where
    F: Fn(McpLoad) -> BoxFuture<'static, ()> + MaybeSend + MaybeSync,
{
    fn changed(&self, load: McpLoad) -> BoxFuture<'static, ()> {
        self(load)
    }
}

/// A connected server: its client and its first listing. The tool actors
/// keep the connection alive; dropping this and every registration closes
/// it.
pub struct McpServer {
    pub client: McpClient,
    pub load: McpLoad,
    shared: std::sync::Weak<Shared>,
}

/// The current definition of every tool of the server, by model-facing
/// name: replaced whole by each listing. A tool actor whose fingerprint is
/// not the current one for its name sends nothing (a stale actor may still
/// be reached by a call prepared before the registry was updated).
#[derive(Default)]
struct Current(std::sync::RwLock<BTreeMap<String, Fingerprint>>);

impl Current {
    fn set(&self, next: BTreeMap<String, Fingerprint>) {
        match self.0.write() {
            Ok(mut m) => *m = next,
            Err(p) => *p.into_inner() = next,
        }
    }

    /// None when `name` is current with `fingerprint`; else why not.
    fn stale(&self, name: &str, fingerprint: &Fingerprint) -> Option<bool> {
        let map = match self.0.read() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        match map.get(name) {
            Some(f) if f == fingerprint => None,
            Some(_) => Some(true),
            None => Some(false),
        }
    }
}

struct Shared {
    id: String,
    client: McpClient,
    config: McpServerConfig,
    target: TargetRule,
    /// The server as provenance detail (origin or command), never a secret.
    server: String,
    env: McpEnv,
    current: Current,
}

/// Connect to the server of `config`, list its tools and spawn one tool
/// actor per function (plus resource and prompt read tools when it offers
/// them). Register [`McpServer::load`], then call [`McpServer::watch`] so
/// that later listings replace it.
pub async fn spawn_mcp_server(
    env: &McpEnv,
    config: &McpServerConfig,
) -> Result<McpServer, McpError> {
    let endpoint = config.check(&*env.secrets)?;
    let (target, server) = match &endpoint {
        Endpoint::Http { origin, url } => (
            TargetRule::Endpoint {
                origin: origin.clone(),
            },
            url.as_str().to_owned(),
        ),
        // A local process has no network origin: its definitions name the
        // process (command and arguments), so a changed command is a new
        // fingerprint and every approval bound to the old one lapses.
        Endpoint::Stdio { command, args, .. } => {
            let process = serde_json::to_string(
                &std::iter::once(command)
                    .chain(args.iter())
                    .collect::<Vec<_>>(),
            )
            .unwrap_or_else(|_| command.clone());
            (
                TargetRule::Process {
                    command: process.clone(),
                },
                format!("stdio:{process}"),
            )
        }
    };
    let client = McpClient::connect(config, env).await?;
    let shared = Arc::new(Shared {
        id: config.id.clone(),
        client: client.clone(),
        config: config.clone(),
        target,
        server,
        env: env.clone(),
        current: Current::default(),
    });
    let tools = client.list_tools().await?;
    let load = build_load(&shared, &tools);
    Ok(McpServer {
        client,
        load,
        shared: Arc::downgrade(&shared),
    })
}

impl McpServer {
    /// Re-list on `tools/list_changed` and after a reconnect, and hand each
    /// new listing to `on_change` (in order, one at a time). Events that
    /// came before this call are not lost. The watcher holds the server
    /// weakly: it ends when the tool actors are gone.
    pub fn watch(&self, on_change: Arc<dyn ToolsChanged>) {
        let events = self.client.events();
        let weak = self.shared.clone();
        let Some(shared) = weak.upgrade() else { return };
        let executor = shared.env.executor.clone();
        drop(shared);
        executor.spawn(boxed(async move {
            while let Ok(event) = events.recv().await {
                if event == ServerEvent::OtherListChanged {
                    continue;
                }
                while events.try_recv().is_ok() {} // one re-list covers them all
                let Some(shared) = weak.upgrade() else { return };
                match shared.client.list_tools().await {
                    Ok(tools) => {
                        let load = build_load(&shared, &tools);
                        drop(shared);
                        on_change.changed(load).await;
                    }
                    Err(e) => {
                        tracing::warn!(server = %shared.id, error = %e, "re-listing the MCP server's tools failed");
                    }
                }
            }
        }));
    }
}

fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

fn build_load(shared: &Arc<Shared>, tools: &[McpTool]) -> McpLoad {
    let mut load = McpLoad::default();
    let origin = Origin::Mcp(shared.id.clone());
    let options = || ToolOptions {
        mailbox: 32,
        ..ToolOptions::default()
    };
    let mut taken: BTreeSet<String> = BTreeSet::new();
    for (kind, name, description, schema) in read_tools(shared) {
        let def = ToolDefinition::builder(name.clone())
            .description(description)
            .parameters(schema)
            .origin(origin.clone())
            .provider(shared.id.clone())
            .effect(EffectClass::ReadNetwork)
            .idempotency(Idempotency::Idempotent)
            .target(shared.target.clone())
            .build();
        let fingerprint = match def.fingerprint() {
            Ok(f) => f,
            Err(e) => {
                load.refused.push(FunctionRefusal {
                    name,
                    why: e.to_string(),
                });
                continue;
            }
        };
        let tool = McpReadTool {
            shared: shared.clone(),
            kind,
            def,
            fingerprint,
        };
        match spawn_tool_with(
            shared.env.executor.clone(),
            shared.env.clock.clone(),
            tool,
            options(),
        ) {
            Ok((addr, definition)) => {
                taken.insert(name);
                load.registrations.push(McpFunctionRegistration {
                    definition,
                    addr,
                    trusted_external: false,
                    unknown_function: false,
                });
            }
            Err(e) => load.refused.push(FunctionRefusal {
                name,
                why: e.to_string(),
            }),
        }
    }
    for tool in tools {
        let refuse = |why: String| FunctionRefusal {
            name: tool.name.clone(),
            why,
        };
        let name = match model_facing_name(&tool.name) {
            Ok(n) => n,
            Err(e) => {
                load.refused.push(refuse(e.to_string()));
                continue;
            }
        };
        if RESERVED_TOOL_NAMES.contains(&name.as_str()) || DISCOVERY_NAMES.contains(&name.as_str())
        {
            load.refused.push(refuse(format!(
                "its name {name:?} is reserved for a built-in tool"
            )));
            continue;
        }
        if !taken.insert(name.clone()) {
            load.refused.push(refuse(format!(
                "another tool of this server already has the model-facing name {name:?}"
            )));
            continue;
        }
        if let Err(e) = CompiledSchema::compile(&tool.input_schema) {
            load.refused
                .push(refuse(format!("its inputSchema is not usable: {e}")));
            continue;
        }
        let output = match tool.output_schema.as_ref().map(CompiledSchema::compile) {
            None => None,
            Some(Ok(compiled)) => Some(compiled),
            Some(Err(e)) => {
                load.refused
                    .push(refuse(format!("its outputSchema is not usable: {e}")));
                continue;
            }
        };
        let declared = shared.config.declared(&tool.name);
        let (effects, idempotency): (EffectSet, Idempotency) = match declared {
            Some(d) => (d.effects.clone(), d.idempotency),
            // The conservative assumption for an unknown function (S6.1).
            None => (
                [EffectClass::WriteExternal].into_iter().collect(),
                Idempotency::NonIdempotent,
            ),
        };
        let description = tool
            .description
            .clone()
            .or_else(|| tool.title.clone())
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| format!("Function {} of MCP server {}.", tool.name, shared.id));
        let mut builder = ToolDefinition::builder(name.clone())
            .description(description)
            .parameters(tool.input_schema.clone())
            .origin(origin.clone())
            .provider(shared.id.clone())
            .effects(effects)
            .idempotency(idempotency)
            .sensitivity(Sensitivity::Public)
            .target(shared.target.clone());
        if let Some(a) = &tool.annotations {
            // Display hints only (S6.3): kept, never read by the policy.
            builder = builder.annotations(a.clone());
        }
        let def = builder.build();
        let fingerprint = match def.fingerprint() {
            Ok(f) => f,
            Err(e) => {
                load.refused.push(refuse(e.to_string()));
                continue;
            }
        };
        let trusted_external = declared
            .and_then(|d| d.fingerprint.as_ref())
            .is_some_and(|pinned| *pinned == fingerprint);
        let function = McpFunctionTool {
            shared: shared.clone(),
            server_name: tool.name.clone(),
            def,
            fingerprint,
            output,
        };
        match spawn_tool_with(
            shared.env.executor.clone(),
            shared.env.clock.clone(),
            function,
            options(),
        ) {
            Ok((addr, definition)) => load.registrations.push(McpFunctionRegistration {
                definition,
                addr,
                trusted_external,
                unknown_function: declared.is_none(),
            }),
            Err(e) => load.refused.push(refuse(e.to_string())),
        }
    }
    shared.current.set(
        load.registrations
            .iter()
            .filter_map(|r| Some((r.definition.name.clone(), r.definition.fingerprint().ok()?)))
            .collect(),
    );
    for r in &load.refused {
        tracing::warn!(server = %shared.id, function = %r.name, why = %r.why, "MCP function refused");
    }
    load
}

fn provenance(
    shared: &Shared,
    tool: &str,
    uri: Option<&str>,
    truncated: bool,
    text: &Value,
) -> Provenance {
    let mut detail = BTreeMap::new();
    detail.insert("server".to_owned(), Value::String(shared.server.clone()));
    if let Some(uri) = uri {
        detail.insert("uri".to_owned(), Value::String(uri.to_owned()));
    }
    if truncated {
        detail.insert("truncated".to_owned(), true.into());
    }
    Provenance {
        origin: format!("mcp:{}", shared.id),
        tool: tool.to_owned(),
        fetched_at_ms: Some(shared.env.clock.wall_ms()),
        content_hash: Some(sha256_hex(text.to_string().as_bytes())),
        detail,
        ..Provenance::default()
    }
}

fn untrusted_success(
    shared: &Shared,
    ctx: &ToolContext,
    content: Value,
    uri: Option<&str>,
    truncated: bool,
) -> ToolSuccess {
    ToolSuccess {
        provenance: provenance(shared, ctx.tool(), uri, truncated, &content),
        content,
        trust: Trust::ExternalUntrusted,
        references: Vec::new(),
        receipts: Vec::new(),
    }
}

/// The failure of a call that `error` ended. `read_only`: nothing the call
/// did can have changed anything.
fn failure_for(
    shared: &Shared,
    ctx: &ToolContext,
    error: &McpError,
    read_only: bool,
) -> ToolFailure {
    let may_have = !read_only && error.may_have_reached_server();
    if let McpError::Cancelled { .. } = error {
        let mut f = ctx.cancelled_failure();
        if may_have {
            f.message = format!(
                "{} was cancelled because the run was stopped; the server was told, but it had the request, so its effect may or may not have happened",
                ctx.tool()
            );
            f.effect_may_have_happened = true;
        }
        return f;
    }
    let (code, retryable, trust) = match error {
        McpError::Timeout { .. } => (codes::MCP_TIMEOUT, true, Trust::Internal),
        McpError::Transport { .. } | McpError::Closed(_) => {
            (codes::MCP_UNREACHABLE, true, Trust::Internal)
        }
        McpError::Server { .. } => (codes::MCP_SERVER_ERROR, false, Trust::ExternalUntrusted),
        McpError::TooLarge { .. } => (codes::MCP_RESPONSE_TOO_LARGE, false, Trust::Internal),
        McpError::SessionExpired { .. } => (codes::MCP_SESSION_EXPIRED, true, Trust::Internal),
        _ => (codes::MCP_PROTOCOL_ERROR, false, Trust::ExternalUntrusted),
    };
    let mut message: String = error.to_string().chars().take(2_000).collect();
    if may_have {
        message
            .push_str("; the server had the request, so its effect may or may not have happened");
    }
    ToolFailure {
        code: code.to_owned(),
        message,
        retryable: retryable && (read_only || !may_have),
        trust,
        provenance: provenance(shared, ctx.tool(), None, false, &Value::Null),
        effect_may_have_happened: may_have,
    }
}

/// Refuse a call to a tool actor the server's newest listing replaced
/// (`definition_changed`) or dropped (`unknown_tool`): nothing is sent.
// The failure goes to the model as it is, like `Tool::call`'s.
#[allow(clippy::result_large_err)]
fn check_current(
    shared: &Shared,
    ctx: &ToolContext,
    fingerprint: &Fingerprint,
) -> Result<(), ToolFailure> {
    match shared.current.stale(ctx.tool(), fingerprint) {
        None => Ok(()),
        Some(true) => Err(ctx.fail(
            shell_codes::DEFINITION_CHANGED,
            format!(
                "the definition of {} on MCP server {} changed; nothing was sent. Its new definition needs approval again",
                ctx.tool(),
                shared.id
            ),
        )),
        Some(false) => Err(ctx.fail(
            shell_codes::UNKNOWN_TOOL,
            format!(
                "MCP server {} no longer offers {}; nothing was sent",
                shared.id,
                ctx.tool()
            ),
        )),
    }
}

/// One server function as a tool of the shell.
struct McpFunctionTool {
    shared: Arc<Shared>,
    /// The fingerprint of `def`.
    fingerprint: Fingerprint,
    /// The name as the server lists it (the model-facing one may differ).
    server_name: String,
    def: ToolDefinition,
    /// The function's `outputSchema`, compiled: its results'
    /// `structuredContent` must match it.
    output: Option<CompiledSchema>,
}

/// Check a successful result against the function's `outputSchema`: the
/// specification says a server MUST then give `structuredContent` that
/// conforms and a client SHOULD check it (Tools, "Output Schema"). Values
/// are masked in the problems listed (they come from the server).
pub fn check_structured_output(
    output: &CompiledSchema,
    result: &CallToolResult,
) -> Result<(), String> {
    let Some(structured) = &result.structured_content else {
        return Err(
            "the function declares an outputSchema but its result has no structuredContent"
                .to_owned(),
        );
    };
    match output.check(structured) {
        Ok(()) => Ok(()),
        Err(agent_kernel::tool::validate::ArgumentError::Schema { problems }) => Err(format!(
            "its structuredContent does not match the function's outputSchema: {}",
            problems.join("; ")
        )),
        Err(other) => Err(format!("its structuredContent cannot be checked: {other}")),
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Tool for McpFunctionTool {
    type Args = Value;

    fn definition(&self) -> ToolDefinition {
        self.def.clone()
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolSuccess, ToolFailure> {
        let shared = &self.shared;
        check_current(shared, ctx, &self.fingerprint)?;
        let read_only = is_read_only(&self.def.effects);
        let (progress_tx, progress_rx) = async_channel::bounded(16);
        let call = shared
            .client
            .call_tool(
                &self.server_name,
                args,
                RequestOptions {
                    progress: Some(progress_tx),
                    cancel: Some(ctx.cancel_token()),
                    retry_safe: read_only || self.def.idempotency == Idempotency::Idempotent,
                    timeout: None,
                    origin: Some(ElicitationOrigin {
                        run: ctx.run.to_string(),
                        call_id: ctx.call_id.to_string(),
                    }),
                },
            )
            .fuse();
        futures::pin_mut!(call);
        let outcome = loop {
            futures::select! {
                outcome = call => break outcome,
                p = progress_rx.recv().fuse() => match p {
                    Ok(p) => ctx.report_progress(ToolProgress {
                        progress: p.progress,
                        total: p.total,
                        message: p.message,
                    }),
                    Err(_) => break call.await,
                },
            }
        };
        let result = outcome.map_err(|e| failure_for(shared, ctx, &e, read_only))?;
        let (content, truncated) = call_result_content(&result);
        if result.is_error == Some(true) {
            let text = content.to_string();
            let shown: String = text.chars().take(2_000).collect();
            return Err(ToolFailure {
                code: codes::MCP_TOOL_ERROR.to_owned(),
                message: format!(
                    "MCP server {} answered with a tool error: {shown}",
                    shared.id
                ),
                retryable: false,
                trust: Trust::ExternalUntrusted,
                provenance: provenance(shared, ctx.tool(), None, truncated, &content),
                // The server handled the call and says it failed.
                effect_may_have_happened: false,
            });
        }
        if let Some(output) = &self.output
            && let Err(why) = check_structured_output(output, &result)
        {
            let may_have = !read_only;
            return Err(ToolFailure {
                code: codes::MCP_INVALID_OUTPUT.to_owned(),
                message: format!(
                    "MCP server {} answered {} with a result the function's own outputSchema refuses ({why}){}",
                    shared.id,
                    ctx.tool(),
                    if may_have {
                        "; the server handled the call, so its effect may have happened"
                    } else {
                        ""
                    }
                ),
                retryable: false,
                trust: Trust::ExternalUntrusted,
                provenance: provenance(shared, ctx.tool(), None, truncated, &content),
                effect_may_have_happened: may_have,
            });
        }
        Ok(untrusted_success(shared, ctx, content, None, truncated))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Content, ResourceContents};

    #[test]
    fn result_text_is_bounded_at_below_and_above_the_cap() {
        for (len, cut) in [
            (MAX_TEXT_CHARS - 1, false),
            (MAX_TEXT_CHARS, false),
            (MAX_TEXT_CHARS + 1, true),
        ] {
            let r = CallToolResult {
                content: vec![Content::Text {
                    text: "é".repeat(len),
                }],
                structured_content: None,
                is_error: None,
            };
            let (v, truncated) = call_result_content(&r);
            assert_eq!(truncated, cut, "{len}");
            let text = v["content"][0]["text"].as_str().unwrap();
            assert_eq!(text.chars().count(), len.min(MAX_TEXT_CHARS));
            assert_eq!(v.get("truncated").is_some(), cut);
        }
    }

    fn result_with(structured: Option<Value>) -> CallToolResult {
        CallToolResult {
            content: vec![],
            structured_content: structured,
            is_error: None,
        }
    }

    #[test]
    fn structured_content_is_checked_against_the_output_schema() {
        // The specification's example outputSchema (Tools, "Output Schema").
        let schema = json!({"type": "object", "properties": {
            "temperature": {"type": "number"}, "conditions": {"type": "string"},
            "humidity": {"type": "number"}},
            "required": ["temperature", "conditions", "humidity"]});
        let output = CompiledSchema::compile(&schema).unwrap();
        let good = json!({"temperature": 22.5, "conditions": "Partly cloudy", "humidity": 65});
        assert_eq!(
            check_structured_output(&output, &result_with(Some(good))),
            Ok(())
        );
        let missing = check_structured_output(&output, &result_with(None)).unwrap_err();
        assert!(missing.contains("no structuredContent"), "{missing}");
        let wrong = json!({"temperature": "secret-value", "conditions": "x"});
        let why = check_structured_output(&output, &result_with(Some(wrong))).unwrap_err();
        assert!(why.contains("/temperature"), "{why}");
        assert!(why.contains("humidity"), "{why}");
        // Values are masked: the server's text is not echoed.
        assert!(!why.contains("secret-value"), "{why}");
    }

    #[test]
    fn binary_content_reaches_the_model_as_size_and_hash_only() {
        let r = CallToolResult {
            content: vec![
                Content::Image {
                    data: "QUJD".into(),
                    mime_type: "image/png".into(),
                },
                Content::Resource {
                    resource: ResourceContents {
                        uri: "x://b".into(),
                        mime_type: None,
                        text: None,
                        blob: Some("QUJD".into()),
                    },
                },
            ],
            structured_content: Some(json!({"a": 1})),
            is_error: None,
        };
        let (v, _) = call_result_content(&r);
        assert!(!v.to_string().contains("QUJD"), "{v}");
        assert_eq!(v["content"][0]["base64_chars"], 4);
        assert_eq!(v["structuredContent"], json!({"a": 1}));
    }
}
