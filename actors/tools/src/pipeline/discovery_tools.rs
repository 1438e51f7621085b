//! The discovery tools the tools actor runs itself (S5.2): `search_tools`
//! over the discoverable tools' index, and `load_tools`, which adds tools to
//! what the run's model is shown from its next step on.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Value, json};

use agent_capabilities::{EffectSet, Fingerprint, Idempotency, Origin, Sensitivity, Trust};
use agent_kernel::protocol::{
    Provenance, RunToolConfig, TargetRule, ToolDefinition, ToolInvocation, ToolResult, ToolSuccess,
};

use crate::codes;
use crate::discovery::{
    DEFAULT_SEARCH_LIMIT, LoadError, MAX_QUERY_BYTES, MAX_SEARCH_LIMIT, SearchDoc, SearchIndex,
    plan_load,
};
use crate::loaded::{self};
use crate::registry::{Exposure, MAX_SCHEMAS_PER_REQUEST};

use super::ToolsActor;

pub(super) fn discovery_definitions() -> Vec<ToolDefinition> {
    let base = |name: &str, description: &str, parameters: Value| ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
        origin: Origin::Builtin,
        provider: None,
        effects: EffectSet::new(),
        idempotency: Idempotency::Idempotent,
        sensitivity: Sensitivity::Public,
        target: TargetRule::None,
        annotations: None,
    };
    vec![
        base(
            "search_tools",
            "Search the plugin and MCP tools that can be loaded, by what they do. Returns names and short descriptions, best match first; load the ones you need with load_tools.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_BYTES,
                              "description": "What the tool should do, in a few words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT,
                              "description": "How many results (default 5)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        ),
        base(
            "load_tools",
            "Load tools found with search_tools by their exact names, so that you can call them from the next step on. At most 64 tool schemas can be available at once.",
            json!({
                "type": "object",
                "properties": {
                    "names": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 64},
                              "minItems": 1, "maxItems": MAX_SCHEMAS_PER_REQUEST, "uniqueItems": true}
                },
                "required": ["names"],
                "additionalProperties": false
            }),
        ),
    ]
}

impl ToolsActor {
    fn index(&mut self) -> &SearchIndex {
        let generation = self.registry.generation();
        if self.index.as_ref().is_none_or(|(g, _)| *g != generation) {
            let docs = self
                .registry
                .iter()
                .filter(|t| t.exposure == Exposure::Discoverable)
                .map(|t| SearchDoc {
                    name: t.definition.name.clone(),
                    provider: t.definition.provider.clone().unwrap_or_default(),
                    description: t.definition.description.clone(),
                })
                .collect();
            self.index = Some((generation, SearchIndex::build(docs)));
        }
        match &self.index {
            Some((_, idx)) => idx,
            None => unreachable!("the index was built just above"),
        }
    }

    pub(super) async fn run_discovery(
        &mut self,
        inv: &ToolInvocation,
        config: &RunToolConfig,
    ) -> ToolResult {
        let draft = &inv.draft;
        let ok = |content: Value, trust: Trust| {
            ToolResult::Success(ToolSuccess {
                content,
                trust,
                provenance: Provenance {
                    origin: "builtin".into(),
                    tool: draft.tool.clone(),
                    ..Provenance::default()
                },
                references: Vec::new(),
                receipts: Vec::new(),
            })
        };
        match draft.tool.as_str() {
            "search_tools" => {
                #[derive(Deserialize)]
                struct Args {
                    query: String,
                    limit: Option<usize>,
                }
                let Ok(args) = serde_json::from_value::<Args>(draft.arguments.clone()) else {
                    return ToolResult::error(
                        codes::INVALID_ARGUMENTS,
                        "search_tools needs a query",
                        &draft.tool,
                    );
                };
                let limit = args
                    .limit
                    .unwrap_or(DEFAULT_SEARCH_LIMIT)
                    .clamp(1, MAX_SEARCH_LIMIT);
                let visible: BTreeSet<String> = self
                    .registry
                    .iter()
                    .filter(|t| self.discoverable_visible(config, t))
                    .map(|t| t.definition.name.clone())
                    .collect();
                let loaded = self
                    .runs
                    .get(&draft.run)
                    .map(|r| r.loaded.clone())
                    .unwrap_or_default();
                let hits = self
                    .index()
                    .search(&args.query, limit, |n| visible.contains(n));
                let results: Vec<Value> = hits
                    .into_iter()
                    .map(|h| {
                        json!({
                            "name": h.name,
                            "provider": h.provider,
                            "description": h.description,
                            "loaded": loaded.contains(&h.name),
                        })
                    })
                    .collect();
                // Descriptions are written by plugin authors: data, not instructions.
                ok(json!({ "results": results }), Trust::ExternalUntrusted)
            }
            "load_tools" => {
                #[derive(Deserialize)]
                struct Args {
                    names: Vec<String>,
                }
                let Ok(args) = serde_json::from_value::<Args>(draft.arguments.clone()) else {
                    return ToolResult::error(
                        codes::INVALID_ARGUMENTS,
                        "load_tools needs names",
                        &draft.tool,
                    );
                };
                let always_on: BTreeSet<String> = self
                    .always_on(config)
                    .iter()
                    .map(|r| r.def().name.clone())
                    .collect();
                let loaded = self
                    .runs
                    .get(&draft.run)
                    .map(|r| r.loaded.clone())
                    .unwrap_or_default();
                let known = |n: &str| {
                    self.registry
                        .get(n)
                        .is_some_and(|t| self.discoverable_visible(config, t))
                };
                match plan_load(&args.names, known, &always_on, &loaded) {
                    Ok(plan) => {
                        let fps: Vec<(String, Fingerprint)> = plan
                            .new
                            .iter()
                            .filter_map(|n| {
                                self.registry
                                    .get(n)
                                    .map(|t| (n.clone(), t.fingerprint.clone()))
                            })
                            .collect();
                        // Saved before the model is told they are loaded, so
                        // a reload or restart never forgets a loaded tool.
                        if let Some(storage) = self.storage.clone()
                            && !fps.is_empty()
                        {
                            let add: BTreeMap<String, Fingerprint> = fps.iter().cloned().collect();
                            if let Err(e) = loaded::merge(&*storage, &draft.run, &add).await {
                                return ToolResult::error(
                                    codes::LOADED_TOOLS_UNAVAILABLE,
                                    format!("{e}; nothing was loaded"),
                                    &draft.tool,
                                );
                            }
                        }
                        let state = self.run_state(&draft.run);
                        for (n, f) in fps {
                            state.loaded.insert(n.clone());
                            state.shown.insert(n, f);
                        }
                        ok(
                            json!({
                                "loaded": plan.new,
                                "already_available": plan.already,
                                "schemas_in_use": plan.total,
                                "capacity": MAX_SCHEMAS_PER_REQUEST,
                            }),
                            Trust::Internal,
                        )
                    }
                    Err(e) => {
                        let code = match e {
                            LoadError::Capacity { .. } => codes::TOOL_CAPACITY_EXCEEDED,
                            LoadError::Unknown { .. } | LoadError::Empty => codes::UNKNOWN_TOOL,
                        };
                        ToolResult::error(code, e.to_string(), &draft.tool)
                    }
                }
            }
            other => ToolResult::error(
                codes::UNKNOWN_TOOL,
                format!("no discovery tool {other}"),
                other,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::CompiledSchema;

    #[test]
    fn discovery_definitions_compile() {
        for def in discovery_definitions() {
            assert!(
                CompiledSchema::compile(&def.parameters).is_ok(),
                "{}",
                def.name
            );
            assert!(def.fingerprint().is_ok());
            assert!(crate::registry::DISCOVERY_TOOL_NAMES.contains(&def.name.as_str()));
        }
    }
}
