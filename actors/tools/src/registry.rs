//! The tool registry (S5.1, S5.5): which tools exist in which run mode, who
//! provides each one, its fingerprint, compiled schema and actor address.
//! Built-in ids and names are reserved; a name offered twice is an error that
//! names both providers; model-facing names are derived deterministically.

use std::collections::BTreeMap;

use agent_capabilities::{Fingerprint, Origin};
use agent_kernel::protocol::{ModelToolSchema, RunToolConfig, ToolAddr, ToolDefinition};
use agent_kernel::run::RunMode;

use crate::validate::CompiledSchema;

/// One model request carries at most this many tool schemas, built-ins and
/// the discovery tools included (S5.2).
pub const MAX_SCHEMAS_PER_REQUEST: usize = 64;

/// The discovery tools the tools actor itself provides in agent mode.
pub const DISCOVERY_TOOL_NAMES: [&str; 2] = ["search_tools", "load_tools"];

// The naming rules' one owner is the kernel (MCP servers need them too);
// re-exported here for callers of the old paths.
pub use agent_kernel::tool::names::{
    MAX_TOOL_NAME_LEN, NameError, RESERVED_PROVIDER_IDS, RESERVED_TOOL_NAMES, is_model_facing_name,
    is_reserved_provider_id, model_facing_name,
};

/// How a registered tool reaches the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Its schema is in every request of its modes (built-ins).
    AlwaysOn,
    /// Found with `search_tools` and added with `load_tools` (plugins, MCP).
    Discoverable,
}

/// What a host hands the registry for one tool.
#[derive(Debug, Clone)]
pub struct ToolRegistration {
    /// The definition; its `name` must already be a valid model-facing name
    /// (see [`model_facing_name`]).
    pub definition: ToolDefinition,
    /// The run modes that may use it.
    pub modes: Vec<RunMode>,
    pub exposure: Exposure,
    /// True for built-ins, and for plugins the person marked trusted whose
    /// fingerprint matches the configured one (DESIGN.md, Capabilities).
    pub trusted_external: bool,
    /// True for an MCP function whose effects the configuration does not
    /// declare: the policy asks once for every call (S6.1), whatever its
    /// annotations say (S6.3). False for built-ins and plugins.
    pub unknown_function: bool,
    /// The grant a run must hold for the tool to be offered at all (a key
    /// of the run's `RunToolConfig::grants`), or None: a tool that could
    /// only refuse is not shown to the model, nor callable.
    pub needs_grant: Option<String>,
    /// The actor that performs the call.
    pub addr: ToolAddr,
}

impl ToolRegistration {
    /// A built-in tool: always on, agent mode, trusted.
    pub fn builtin(definition: ToolDefinition, addr: ToolAddr) -> ToolRegistration {
        ToolRegistration {
            definition,
            modes: vec![RunMode::Agent],
            exposure: Exposure::AlwaysOn,
            trusted_external: true,
            unknown_function: false,
            needs_grant: None,
            addr,
        }
    }

    /// Use the tool in these modes instead.
    pub fn in_modes(mut self, modes: &[RunMode]) -> ToolRegistration {
        self.modes = modes.to_vec();
        self
    }

    /// Offer the tool only to runs that hold `grant` (see
    /// [`ToolRegistration::needs_grant`]).
    pub fn only_with_grant(mut self, grant: &str) -> ToolRegistration {
        self.needs_grant = Some(grant.to_owned());
        self
    }
}

/// A tool as the registry holds it.
#[derive(Debug, Clone)]
pub struct RegisteredTool {
    pub definition: ToolDefinition,
    /// SHA-256 of the definition's canonical JSON.
    pub fingerprint: Fingerprint,
    pub modes: Vec<RunMode>,
    pub exposure: Exposure,
    pub trusted_external: bool,
    /// See [`ToolRegistration::unknown_function`].
    pub unknown_function: bool,
    /// See [`ToolRegistration::needs_grant`].
    pub needs_grant: Option<String>,
    pub addr: ToolAddr,
    pub(crate) schema: CompiledSchema,
    /// What the model is shown, built once and shared by every request.
    pub(crate) shown: ModelToolSchema,
}

impl RegisteredTool {
    /// True when `mode` may use it.
    pub fn in_mode(&self, mode: RunMode) -> bool {
        self.modes.contains(&mode)
    }

    /// True when a run configured by `config` may be offered it: its mode,
    /// its allowlist and the grant the tool needs, if any.
    pub fn offered_to(&self, config: &RunToolConfig) -> bool {
        self.in_mode(config.mode)
            && config
                .allowlist
                .as_ref()
                .is_none_or(|a| a.contains(&self.definition.name))
            && self
                .needs_grant
                .as_ref()
                .is_none_or(|g| config.grants.contains(g))
    }
}

/// A registration was refused; the registry is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error(
        "tool name {name:?} is offered by both {existing} and {incoming}; names are never resolved by guessing, so rename the function in one of them or disable one provider"
    )]
    Collision {
        name: String,
        existing: String,
        incoming: String,
    },
    #[error(
        "provider id {id:?} is reserved for the runtime's built-in tools; give the plugin or server another id"
    )]
    ReservedProvider { id: String },
    #[error(
        "tool name {name:?} is reserved for a built-in tool; {claimed_by} must name its function differently"
    )]
    ReservedName { name: String, claimed_by: String },
    #[error("invalid tool name {name:?}: {why}")]
    InvalidName { name: String, why: String },
    #[error(
        "tool {name:?} has origin {origin} but provider {provider:?}; a plugin or MCP tool's provider must be its id, a built-in has none"
    )]
    ProviderMismatch {
        name: String,
        origin: String,
        provider: Option<String>,
    },
    #[error("tool {name:?} has an invalid argument schema: {detail}; fix the schema")]
    InvalidSchema { name: String, detail: String },
    #[error("tool {name:?} cannot be fingerprinted: {detail}")]
    Fingerprint { name: String, detail: String },
    #[error("tool {name:?} is registered for no run mode; give it at least one")]
    NoMode { name: String },
    #[error(
        "mode {mode:?} would have {count} always-on tools; with the 2 discovery tools that exceeds {max} schemas per request, so register fewer built-ins"
    )]
    TooManyAlwaysOn {
        mode: RunMode,
        count: usize,
        max: usize,
    },
    #[error("no tools from {origin} are registered, so there is nothing to replace or remove")]
    UnknownProvider { origin: String },
}

/// Names and fingerprints of every registered tool, for comparisons in tests
/// and for audit.
pub type RegistrySnapshot = BTreeMap<String, (Origin, Fingerprint)>;

/// The registry. Owned by the tools actor; hosts fill it before spawning the
/// actor and change it later through the actor's control handle.
#[derive(Debug, Default)]
pub struct Registry {
    tools: BTreeMap<String, RegisteredTool>,
    generation: u64,
}

fn provider_id(origin: &Origin) -> Option<&str> {
    match origin {
        Origin::Plugin(id) | Origin::Mcp(id) => Some(id),
        Origin::Builtin | Origin::User | Origin::Page => None,
    }
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Increases with every change; caches (the search index) key on it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The tool with this model-facing name.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.get(name)
    }

    /// Every tool, ordered by name.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.values()
    }

    /// Names, origins and fingerprints of every tool.
    pub fn snapshot(&self) -> RegistrySnapshot {
        self.tools
            .iter()
            .map(|(n, t)| {
                (
                    n.clone(),
                    (t.definition.origin.clone(), t.fingerprint.clone()),
                )
            })
            .collect()
    }

    /// Register one tool.
    pub fn register(&mut self, tool: ToolRegistration) -> Result<(), RegistryError> {
        self.register_all(vec![tool])
    }

    /// Register several tools atomically: all of them, or none when any is refused.
    pub fn register_all(&mut self, tools: Vec<ToolRegistration>) -> Result<(), RegistryError> {
        let mut next = self.tools.clone();
        for reg in tools {
            let checked = check(reg)?;
            let name = checked.definition.name.clone();
            if let Some(existing) = next.get(&name) {
                return Err(RegistryError::Collision {
                    name,
                    existing: existing.definition.origin.to_string(),
                    incoming: checked.definition.origin.to_string(),
                });
            }
            next.insert(name, checked);
        }
        check_capacity(&next)?;
        self.tools = next;
        self.generation += 1;
        Ok(())
    }

    /// Replace every tool of `origin` with `tools` (a plugin's configuration
    /// changed), atomically. The new definitions have new fingerprints where
    /// anything changed, so earlier approvals no longer apply to them.
    pub fn replace_provider(
        &mut self,
        origin: &Origin,
        tools: Vec<ToolRegistration>,
    ) -> Result<(), RegistryError> {
        let before = self.tools.clone();
        self.tools.retain(|_, t| &t.definition.origin != origin);
        match self.register_all(tools) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.tools = before;
                Err(e)
            }
        }
    }

    /// Remove every tool of `origin`.
    pub fn remove_provider(&mut self, origin: &Origin) -> Result<usize, RegistryError> {
        let before = self.tools.len();
        self.tools.retain(|_, t| &t.definition.origin != origin);
        let removed = before - self.tools.len();
        if removed == 0 {
            return Err(RegistryError::UnknownProvider {
                origin: origin.to_string(),
            });
        }
        self.generation += 1;
        Ok(removed)
    }
}

fn check(reg: ToolRegistration) -> Result<RegisteredTool, RegistryError> {
    let def = &reg.definition;
    let name = def.name.clone();
    if !is_model_facing_name(&name) {
        return Err(RegistryError::InvalidName {
            why: format!(
                "use lowercase ASCII letters, digits and single underscores, at most {MAX_TOOL_NAME_LEN} characters (derive it with model_facing_name)"
            ),
            name,
        });
    }
    match (&def.origin, provider_id(&def.origin), &def.provider) {
        (_, Some(id), Some(p)) if id == p => {
            if is_reserved_provider_id(id) {
                return Err(RegistryError::ReservedProvider { id: id.to_owned() });
            }
            if RESERVED_TOOL_NAMES.contains(&name.as_str()) {
                return Err(RegistryError::ReservedName {
                    name,
                    claimed_by: def.origin.to_string(),
                });
            }
        }
        // A page tool has no provider id, and the built-ins' names are
        // reserved for it as for a plugin (S5.5, S5.9).
        (Origin::Page, None, None) => {
            if RESERVED_TOOL_NAMES.contains(&name.as_str()) {
                return Err(RegistryError::ReservedName {
                    name,
                    claimed_by: def.origin.to_string(),
                });
            }
        }
        (Origin::Builtin | Origin::User, None, None) => {}
        (origin, _, provider) => {
            return Err(RegistryError::ProviderMismatch {
                name,
                origin: origin.to_string(),
                provider: provider.clone(),
            });
        }
    }
    if DISCOVERY_TOOL_NAMES.contains(&name.as_str()) {
        return Err(RegistryError::ReservedName {
            name,
            claimed_by: def.origin.to_string(),
        });
    }
    if reg.modes.is_empty() {
        return Err(RegistryError::NoMode { name });
    }
    // The runtime's own definitions compile their schema at their first call.
    let schema = if def.origin == Origin::Builtin {
        CompiledSchema::builtin(&def.parameters)
    } else {
        CompiledSchema::compile(&def.parameters)
    }
    .map_err(|detail| RegistryError::InvalidSchema {
        name: name.clone(),
        detail,
    })?;
    let fingerprint = def.fingerprint().map_err(|e| RegistryError::Fingerprint {
        name: name.clone(),
        detail: e.to_string(),
    })?;
    Ok(RegisteredTool {
        shown: ModelToolSchema::of(&reg.definition, fingerprint.clone()),
        fingerprint,
        schema,
        definition: reg.definition,
        modes: reg.modes,
        exposure: reg.exposure,
        trusted_external: reg.trusted_external,
        unknown_function: reg.unknown_function,
        needs_grant: reg.needs_grant,
        addr: reg.addr,
    })
}

fn check_capacity(tools: &BTreeMap<String, RegisteredTool>) -> Result<(), RegistryError> {
    for mode in [RunMode::Agent, RunMode::Research] {
        let count = tools
            .values()
            .filter(|t| t.exposure == Exposure::AlwaysOn && t.in_mode(mode))
            .count();
        if count + DISCOVERY_TOOL_NAMES.len() > MAX_SCHEMAS_PER_REQUEST {
            return Err(RegistryError::TooManyAlwaysOn {
                mode,
                count,
                max: MAX_SCHEMAS_PER_REQUEST,
            });
        }
    }
    Ok(())
}
