//! The pipeline's "unknown MCP function" row (S6.1, S6.3): a registration
//! flagged `unknown_function` reaches the policy as such, so that a call asks
//! once in every approval mode even when the server's annotations claim
//! `readOnlyHint`; the same tool without the flag runs automatically.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use serde_json::{Value, json};

use agent_capabilities::{ApprovalMode, Decision, EffectClass, Idempotency, Origin};
use agent_kernel::protocol::{TargetRule, ToolDefinition, ToolFailure, ToolSuccess};
use agent_kernel::run::RunMode;
use agent_tools::registry::{Exposure, Registry, ToolRegistration};
use agent_tools::{Tool, ToolContext, spawn_tool, spawn_tools};
use common::*;

struct ServerFunction;

#[async_trait::async_trait]
impl Tool for ServerFunction {
    type Args = Value;
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::builder("lookup")
            .description("Look something up on the server.")
            .origin(Origin::Mcp("srv".into()))
            .provider("srv")
            .effect(EffectClass::ReadNetwork)
            .idempotency(Idempotency::Idempotent)
            .target(TargetRule::Endpoint {
                origin: "http://127.0.0.1:9".into(),
            })
            .annotations(json!({"readOnlyHint": true, "destructiveHint": false}))
            .build()
    }
    async fn call(&self, ctx: &ToolContext, _args: Value) -> Result<ToolSuccess, ToolFailure> {
        Ok(ctx.ok_untrusted(json!("looked up")))
    }
}

async fn decision(unknown_function: bool, mode: ApprovalMode) -> Decision {
    let (addr, definition) = spawn_tool(executor(), clock(), ServerFunction).unwrap();
    let mut registry = Registry::new();
    registry
        .register(ToolRegistration {
            definition,
            modes: vec![RunMode::Agent],
            exposure: Exposure::Discoverable,
            trusted_external: false,
            unknown_function,
            needs_grant: None,
            addr,
        })
        .unwrap();
    let tools = spawn_tools(executor(), clock(), registry, tools_options());
    let mut run = Run::new(tools, "run-mcp-trust");
    run.config.approval = mode;
    let loaded = run.call("l", "load_tools", r#"{"names":["lookup"]}"#).await;
    assert!(loaded.is_success(), "{}", text(&loaded));
    run.schemas().await;
    run.prepare("c1", "lookup", "{}").await.unwrap().decision
}

#[tokio::test]
async fn an_unknown_mcp_function_asks_once_even_when_it_claims_read_only() {
    for mode in [ApprovalMode::Permissive, ApprovalMode::Strict] {
        let d = decision(true, mode).await;
        assert!(
            matches!(d, Decision::AskOnce { ref reason, .. } if reason.contains("unknown MCP function")),
            "{mode:?}: {d:?}"
        );
        // The same declared read without the flag is automatic: the flag,
        // not the annotations or effects, made the difference.
        let d = decision(false, mode).await;
        assert!(matches!(d, Decision::Automatic { .. }), "{mode:?}: {d:?}");
    }
}
