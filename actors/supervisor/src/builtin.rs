//! The two tools the supervisor answers itself, and their one
//! implementation: `ask_user` ([`ask_user`]: a question with optional
//! choices or an answer JSON Schema; the run waits in `awaiting_input` until
//! the person's answer satisfies it) and `update_plan` ([`plan`]: steps with
//! statuses, kept as a blob on the run record). Their definitions here are
//! the ones the model sees. Also how a result is shown to the model.

pub mod ask_user;
pub mod plan;

use std::sync::OnceLock;

use serde_json::{Value, json};

use agent_capabilities::{Fingerprint, Trust};
use agent_kernel::protocol::{
    ModelToolSchema, Provenance, ToolDefinition, ToolResult, ToolSuccess,
};

pub const ASK_USER: &str = ask_user::TOOL_NAME;
pub const UPDATE_PLAN: &str = plan::TOOL_NAME;

/// The names of the supervisor's own tools (a host reserves them: no plugin
/// may claim one).
pub const TOOL_NAMES: [&str; 2] = [ASK_USER, UPDATE_PLAN];

/// The definitions of the supervisor's own tools, in a stable order.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![ask_user::definition(), plan::definition()]
}

/// What the model is shown of the supervisor's own tools, fingerprinted once
/// per process rather than at every model request.
fn own_schemas() -> &'static [ModelToolSchema] {
    static SCHEMAS: OnceLock<Vec<ModelToolSchema>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        definitions()
            .iter()
            .filter_map(|d| Some(ModelToolSchema::of(d, d.fingerprint().ok()?)))
            .collect()
    })
}

/// The fingerprint of one of the supervisor's own tools.
pub fn fingerprint(name: &str) -> Option<Fingerprint> {
    own_schemas()
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.fingerprint.clone())
}

/// Schemas of the supervisor's own tools that `schemas` does not already name.
pub fn add_schemas(schemas: &mut Vec<ModelToolSchema>) {
    for own in own_schemas() {
        if !schemas.iter().any(|s| s.name == own.name) {
            schemas.push(own.clone());
        }
    }
}

/// A successful result produced by the person or the supervisor.
pub fn success(tool: &str, origin: &str, trust: Trust, content: Value) -> ToolResult {
    ToolResult::Success(ToolSuccess {
        content,
        trust,
        provenance: Provenance {
            origin: origin.to_owned(),
            tool: tool.to_owned(),
            ..Provenance::default()
        },
        references: Vec::new(),
        receipts: Vec::new(),
    })
}

/// The text the model sees for a result. Untrusted content is wrapped so that
/// it reads as data, never as instructions (S5.4).
pub fn model_content(result: &ToolResult) -> String {
    let value = match result {
        ToolResult::Success(s) => match s.trust {
            Trust::ExternalUntrusted => json!({"ok": true, "untrusted_data": s.content}),
            _ => json!({"ok": true, "content": s.content}),
        },
        ToolResult::Error(e) => json!({"ok": false, "error": e.code, "message": e.message}),
    };
    value.to_string()
}
