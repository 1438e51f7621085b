//! The [`ToolDefinitionBuilder`]: a tool definition from its name, with
//! safe defaults (a built-in, no effects, idempotent, public, no target) and
//! one method per field that differs.

use serde_json::Value;

use agent_capabilities::{EffectClass, EffectSet, Idempotency, Origin, Sensitivity};

use crate::protocol::{TargetRule, ToolDefinition};

/// Builds a [`ToolDefinition`]; start with [`ToolDefinition::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ToolDefinitionBuilder {
    def: ToolDefinition,
}

impl ToolDefinition {
    /// A definition named `name`: origin `builtin`, no effects, idempotent,
    /// public, no target, and an argument schema that takes no arguments
    /// until [`ToolDefinitionBuilder::parameters`] sets one.
    pub fn builder(name: impl Into<String>) -> ToolDefinitionBuilder {
        ToolDefinitionBuilder {
            def: ToolDefinition {
                name: name.into(),
                description: String::new(),
                parameters: serde_json::json!({
                    "type": "object",
                    "properties": {},
                    "additionalProperties": false
                }),
                origin: Origin::Builtin,
                provider: None,
                effects: EffectSet::new(),
                idempotency: Idempotency::Idempotent,
                sensitivity: Sensitivity::Public,
                target: TargetRule::None,
                annotations: None,
            },
        }
    }
}

impl ToolDefinitionBuilder {
    /// What the tool does, for the model and for the person approving it.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.def.description = description.into();
        self
    }

    /// The JSON Schema of the arguments object (`"type": "object"`).
    pub fn parameters(mut self, schema: Value) -> Self {
        self.def.parameters = schema;
        self
    }

    /// Where the tool comes from (default `builtin`).
    pub fn origin(mut self, origin: Origin) -> Self {
        self.def.origin = origin;
        self
    }

    /// The plugin or MCP server that provides it.
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.def.provider = Some(provider.into());
        self
    }

    /// Add an effect class the tool may have (none: it touches nothing).
    pub fn effect(mut self, effect: EffectClass) -> Self {
        self.def.effects.insert(effect);
        self
    }

    /// Set every effect class at once.
    pub fn effects(mut self, effects: impl IntoIterator<Item = EffectClass>) -> Self {
        self.def.effects = effects.into_iter().collect();
        self
    }

    /// Whether repeating a call is safe (default idempotent).
    pub fn idempotency(mut self, idempotency: Idempotency) -> Self {
        self.def.idempotency = idempotency;
        self
    }

    /// How private its content is (default public).
    pub fn sensitivity(mut self, sensitivity: Sensitivity) -> Self {
        self.def.sensitivity = sensitivity;
        self
    }

    /// How a call's target is derived from its arguments (default none).
    pub fn target(mut self, target: TargetRule) -> Self {
        self.def.target = target;
        self
    }

    /// Display hints (MCP-style annotations); never the security boundary.
    pub fn annotations(mut self, annotations: Value) -> Self {
        self.def.annotations = Some(annotations);
        self
    }

    /// The definition.
    pub fn build(self) -> ToolDefinition {
        self.def
    }
}
