//! The two tools the supervisor answers itself: `ask_user` (the run waits in
//! `awaiting_input` until the person responds) and `update_plan` (the plan is
//! a blob on the run record). Also how a result is shown to the model.

use serde_json::{Value, json};

use agent_capabilities::{EffectSet, Fingerprint, Idempotency, Origin, Sensitivity, Trust};
use agent_kernel::protocol::{
    ModelToolSchema, Provenance, TargetRule, ToolDefinition, ToolResult, ToolSuccess,
};

pub const ASK_USER: &str = "ask_user";
pub const UPDATE_PLAN: &str = "update_plan";

/// The definitions of the supervisor's own tools.
pub fn definitions() -> Vec<ToolDefinition> {
    let def = |name: &str, description: &str, parameters: Value| ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
        origin: Origin::Builtin,
        provider: None,
        effects: EffectSet::new(),
        idempotency: Idempotency::Idempotent,
        sensitivity: Sensitivity::Private,
        target: TargetRule::None,
        annotations: None,
    };
    vec![
        def(
            ASK_USER,
            "Ask the person a question and wait for the answer.",
            json!({"type": "object",
                   "properties": {"question": {"type": "string"},
                                  "schema": {"type": "object", "description": "optional JSON Schema of the answer"}},
                   "required": ["question"], "additionalProperties": false}),
        ),
        def(
            UPDATE_PLAN,
            "Replace the visible plan of this run.",
            json!({"type": "object", "properties": {"plan": {}}, "required": ["plan"]}),
        ),
    ]
}

/// The fingerprint of one of the supervisor's own tools.
pub fn fingerprint(name: &str) -> Option<Fingerprint> {
    definitions()
        .into_iter()
        .find(|d| d.name == name)
        .and_then(|d| d.fingerprint().ok())
}

/// Schemas of the supervisor's own tools that `schemas` does not already name.
pub fn add_schemas(schemas: &mut Vec<ModelToolSchema>) {
    for d in definitions() {
        if schemas.iter().any(|s| s.name == d.name) {
            continue;
        }
        if let Ok(fingerprint) = d.fingerprint() {
            schemas.push(ModelToolSchema {
                name: d.name,
                description: d.description,
                parameters: d.parameters,
                fingerprint,
            });
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
