//! Precedence (S10.2): global default → Workspace → Agent Profile →
//! session override → turn reference, resolved by one pure function,
//! [`resolve`], into the [`Effective`] settings of a run, with every
//! widening that was refused, the capability caveats that carry the
//! narrowing, and the [`RunSettings`] that the supervisor's `RunConfig`
//! takes.
//!
//! # The rule
//!
//! Fields are of two kinds.
//!
//! - **Settings** (model, provider, output limit, reasoning effort, the
//!   system prompt addition): the last layer that sets one wins, the turn
//!   reference included.
//! - **Capability-bearing fields** never widen after the global default,
//!   which is the host's ceiling:
//!   - the allowlists (plugins, MCP servers, tools, knowledge bases,
//!     Skills) intersect, layer by layer (`None` = what the layer above
//!     allows);
//!   - Memory scopes intersect, read and write separately;
//!   - the approval mode only gets stricter (permissive < strict);
//!   - the mode only narrows (agent → chat, never back);
//!   - web search, once off, stays off.
//! - **The budget** is set by the global default (else the fallback of
//!   S4.2), then by the Workspace and by the Agent Profile (S4.4: the
//!   selected profile sets the effective budget). No layer after the
//!   profile may widen: the session override and the turn reference only
//!   lower a dimension (a missing token or duration limit is unlimited,
//!   so adding one narrows). Without a profile, the session override plays
//!   the profile's part for the budget (S4.4: "or chat override").
//!
//! Whatever a layer asks beyond what the layers above allow is not
//! granted; it is listed in [`Effective::refused`] as a [`Refused`] note
//! (layer, field, what was asked, what was kept), so a host can tell the
//! person. The narrowing reaches every capability the run mints as
//! caveats ([`Effective::caveats`]), so a forged widening fails
//! verification, not just a check in the host.

use std::collections::BTreeSet;
use std::fmt;

use agent_capabilities::{ApprovalMode, Caveat, Origin};
use agent_kernel::budget::Budget;
use agent_kernel::protocol::{AppliedSkill, RunToolConfig};
use agent_kernel::run::RunMode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ProfileError;
use crate::profile::{
    AgentProfileV2, MemoryScope, MemoryScopes, ModelChoice, ProfileId, ProfileMode,
    ReasoningEffort, check_budget, check_list, check_model, check_prompt_addition,
    check_reasoning_budget,
};
use agent_kernel::reasoning::Reasoning;

/// The five layers, in order (S10.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum LayerName {
    Global,
    Workspace,
    Profile,
    Session,
    Turn,
}

impl fmt::Display for LayerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LayerName::Global => "global default",
            LayerName::Workspace => "workspace",
            LayerName::Profile => "agent profile",
            LayerName::Session => "session override",
            LayerName::Turn => "turn reference",
        })
    }
}

/// What one layer says; every `None` leaves the layer above in force.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ProfileMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_budget_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_search: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryScopes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt_addition: Option<String>,
}

impl Layer {
    /// Check every field the layer sets against the profile's bounds,
    /// naming the layer and the field.
    pub fn validate(&self, layer: LayerName) -> Result<(), ProfileError> {
        let in_layer = |e: ProfileError| match e {
            ProfileError::Invalid { field, why } => {
                ProfileError::InvalidLayer { layer, field, why }
            }
            other => other,
        };
        if self.model.is_some() || self.provider.is_some() || self.max_output_tokens.is_some() {
            check_model(&ModelChoice {
                provider: self.provider.clone(),
                model: self.model.clone().unwrap_or_else(|| "default".to_owned()),
                max_output_tokens: self.max_output_tokens,
            })
            .map_err(in_layer)?;
        }
        if let Some(b) = &self.budget {
            check_budget(b).map_err(in_layer)?;
        }
        check_reasoning_budget(self.reasoning_budget_tokens).map_err(in_layer)?;
        check_list("plugins", self.plugins.as_ref()).map_err(in_layer)?;
        check_list("mcp_servers", self.mcp_servers.as_ref()).map_err(in_layer)?;
        check_list("tools", self.tools.as_ref()).map_err(in_layer)?;
        check_list("knowledge", self.knowledge.as_ref()).map_err(in_layer)?;
        check_list("skills", self.skills.as_ref()).map_err(in_layer)?;
        check_prompt_addition(self.system_prompt_addition.as_deref()).map_err(in_layer)
    }

    /// Read a layer from outside JSON (a session override or a turn
    /// reference): unknown fields are refused, then [`Layer::validate`].
    pub fn from_json(value: &Value, layer: LayerName) -> Result<Layer, ProfileError> {
        let parsed: Layer =
            serde_json::from_value(value.clone()).map_err(|e| ProfileError::InvalidLayer {
                layer,
                field: "layer",
                why: e.to_string(),
            })?;
        parsed.validate(layer)?;
        Ok(parsed)
    }
}

impl From<&AgentProfileV2> for Layer {
    /// A profile as a layer: it sets every setting it has; its credentials
    /// stay out (the host resolves handles itself).
    fn from(p: &AgentProfileV2) -> Layer {
        Layer {
            mode: Some(p.mode),
            provider: p.model.provider.clone(),
            model: Some(p.model.model.clone()),
            max_output_tokens: p.model.max_output_tokens,
            reasoning_effort: p.reasoning.effort,
            reasoning_budget_tokens: p.reasoning.budget_tokens,
            web_search: Some(p.search.web_search),
            approval: Some(p.approval),
            budget: Some(p.budget),
            plugins: p.plugins.clone(),
            mcp_servers: p.mcp_servers.clone(),
            tools: p.tools.clone(),
            knowledge: p.knowledge.clone(),
            memory: Some(p.memory.clone()),
            skills: p.skills.clone(),
            system_prompt_addition: p.system_prompt_addition.clone(),
        }
    }
}

/// Which stored profile revision a run used (S10.2: "a run records which
/// profile revision it used").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRef {
    pub id: ProfileId,
    pub revision: u64,
}

/// The selected profile as a layer, with the revision it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileLayer {
    pub profile: ProfileRef,
    pub layer: Layer,
}

impl ProfileLayer {
    /// The layer of `profile` read at `revision`.
    pub fn of(profile: &AgentProfileV2, revision: u64) -> ProfileLayer {
        ProfileLayer {
            profile: ProfileRef {
                id: profile.id.clone(),
                revision,
            },
            layer: Layer::from(profile),
        }
    }
}

/// The five layers of S10.2. Layers a host does not have stay default
/// (empty): they change nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layers {
    /// The host's defaults and ceiling.
    pub global: Layer,
    pub workspace: Layer,
    pub profile: Option<ProfileLayer>,
    pub session: Layer,
    pub turn: Layer,
}

impl Layers {
    /// Validate every layer (the profile's was validated when saved).
    pub fn validate(&self) -> Result<(), ProfileError> {
        self.global.validate(LayerName::Global)?;
        self.workspace.validate(LayerName::Workspace)?;
        if let Some(p) = &self.profile {
            p.layer.validate(LayerName::Profile)?;
        }
        self.session.validate(LayerName::Session)?;
        self.turn.validate(LayerName::Turn)
    }
}

/// A widening a layer asked for and did not get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Refused {
    pub layer: LayerName,
    /// The field, as in the profile (`tools`, `budget.max_tool_calls`, `approval`, ...).
    pub field: String,
    /// What the layer asked for beyond what it may have.
    pub asked: Value,
    /// What the effective value stayed.
    pub kept: Value,
}

/// The settings a run gets (S10.2), and what was refused on the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effective {
    /// The profile revision used, if a profile was selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileRef>,
    pub mode: ProfileMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_budget_tokens: Option<u32>,
    pub web_search: bool,
    pub approval: ApprovalMode,
    pub budget: Budget,
    pub plugins: Option<BTreeSet<String>>,
    pub mcp_servers: Option<BTreeSet<String>>,
    pub tools: Option<BTreeSet<String>>,
    pub knowledge: Option<BTreeSet<String>>,
    pub memory: MemoryScopes,
    pub skills: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt_addition: Option<String>,
    /// Every widening that was refused, in layer order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refused>,
}

/// How strict an approval mode is: a later layer may only raise it.
pub fn strictness(mode: ApprovalMode) -> u8 {
    match mode {
        ApprovalMode::Permissive => 0,
        ApprovalMode::Strict => 1,
    }
}

fn json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

struct Resolver {
    eff: Effective,
}

impl Resolver {
    fn refuse(&mut self, layer: LayerName, field: &str, asked: Value, kept: Value) {
        self.eff.refused.push(Refused {
            layer,
            field: field.to_owned(),
            asked,
            kept,
        });
    }

    /// Intersect an allowlist; list what the layer asked outside it.
    fn narrow_list(
        &mut self,
        layer: LayerName,
        field: &str,
        current: Option<BTreeSet<String>>,
        asked: Option<&BTreeSet<String>>,
    ) -> Option<BTreeSet<String>> {
        match (current, asked) {
            (current, None) => current,
            (None, Some(asked)) => Some(asked.clone()),
            (Some(current), Some(asked)) => {
                let outside: BTreeSet<&String> = asked.difference(&current).collect();
                if !outside.is_empty() {
                    self.refuse(layer, field, json(&outside), json(&current));
                }
                Some(asked.intersection(&current).cloned().collect())
            }
        }
    }

    fn narrow_scopes(
        &mut self,
        layer: LayerName,
        field: &str,
        current: &BTreeSet<MemoryScope>,
        asked: &BTreeSet<MemoryScope>,
    ) -> BTreeSet<MemoryScope> {
        let outside: BTreeSet<&MemoryScope> = asked.difference(current).collect();
        if !outside.is_empty() {
            self.refuse(layer, field, json(&outside), json(current));
        }
        asked.intersection(current).copied().collect()
    }

    /// Lower each budget dimension to `asked`, refusing every raise.
    fn narrow_budget(&mut self, layer: LayerName, asked: &Budget) {
        let cur = self.eff.budget;
        let rounds = cur.max_tool_rounds.min(asked.max_tool_rounds);
        if asked.max_tool_rounds > cur.max_tool_rounds {
            self.refuse(
                layer,
                "budget.max_tool_rounds",
                json(&asked.max_tool_rounds),
                json(&cur.max_tool_rounds),
            );
        }
        let calls = cur.max_tool_calls.min(asked.max_tool_calls);
        if asked.max_tool_calls > cur.max_tool_calls {
            self.refuse(
                layer,
                "budget.max_tool_calls",
                json(&asked.max_tool_calls),
                json(&cur.max_tool_calls),
            );
        }
        let tokens = self.min_limit(layer, "budget.max_tokens", cur.max_tokens, asked.max_tokens);
        let duration = self.min_limit(
            layer,
            "budget.max_duration_ms",
            cur.max_duration_ms,
            asked.max_duration_ms,
        );
        self.eff.budget = Budget {
            max_tool_rounds: rounds,
            max_tool_calls: calls,
            max_tokens: tokens,
            max_duration_ms: duration,
        };
    }

    /// The lower of two optional limits (`None` is unlimited). Asking for no
    /// limit where there is one is not a widening request worth a note: an
    /// absent field in a layer means "no opinion".
    fn min_limit(
        &mut self,
        layer: LayerName,
        field: &str,
        current: Option<u64>,
        asked: Option<u64>,
    ) -> Option<u64> {
        match (current, asked) {
            (c, None) => c,
            (None, Some(a)) => Some(a),
            (Some(c), Some(a)) => {
                if a > c {
                    self.refuse(layer, field, json(&a), json(&c));
                }
                Some(c.min(a))
            }
        }
    }

    fn apply(&mut self, name: LayerName, layer: &Layer, budget_settable: bool) {
        // Settings: the last layer that sets one wins.
        if let Some(m) = &layer.model {
            self.eff.model = m.clone();
        }
        if layer.provider.is_some() {
            self.eff.provider = layer.provider.clone();
        }
        if layer.max_output_tokens.is_some() {
            self.eff.max_output_tokens = layer.max_output_tokens;
        }
        if layer.reasoning_effort.is_some() {
            self.eff.reasoning_effort = layer.reasoning_effort;
        }
        if layer.reasoning_budget_tokens.is_some() {
            self.eff.reasoning_budget_tokens = layer.reasoning_budget_tokens;
        }
        if layer.system_prompt_addition.is_some() {
            self.eff.system_prompt_addition = layer.system_prompt_addition.clone();
        }
        // Capability-bearing fields: only narrow.
        if let Some(mode) = layer.mode {
            if mode > self.eff.mode {
                self.refuse(name, "mode", json(&mode), json(&self.eff.mode));
            }
            self.eff.mode = self.eff.mode.min(mode);
        }
        if let Some(on) = layer.web_search {
            if on && !self.eff.web_search {
                self.refuse(name, "search.web_search", json(&true), json(&false));
            }
            self.eff.web_search &= on;
        }
        if let Some(mode) = layer.approval {
            if strictness(mode) < strictness(self.eff.approval) {
                self.refuse(name, "approval", json(&mode), json(&self.eff.approval));
            } else {
                self.eff.approval = mode;
            }
        }
        if let Some(b) = &layer.budget {
            if budget_settable {
                self.eff.budget = *b;
            } else {
                self.narrow_budget(name, b);
            }
        }
        let plugins = self.eff.plugins.take();
        self.eff.plugins = self.narrow_list(name, "plugins", plugins, layer.plugins.as_ref());
        let mcp = self.eff.mcp_servers.take();
        self.eff.mcp_servers =
            self.narrow_list(name, "mcp_servers", mcp, layer.mcp_servers.as_ref());
        let tools = self.eff.tools.take();
        self.eff.tools = self.narrow_list(name, "tools", tools, layer.tools.as_ref());
        let knowledge = self.eff.knowledge.take();
        self.eff.knowledge =
            self.narrow_list(name, "knowledge", knowledge, layer.knowledge.as_ref());
        let skills = self.eff.skills.take();
        self.eff.skills = self.narrow_list(name, "skills", skills, layer.skills.as_ref());
        if let Some(m) = &layer.memory {
            let read = self.eff.memory.read.clone();
            let write = self.eff.memory.write.clone();
            self.eff.memory = MemoryScopes {
                read: self.narrow_scopes(name, "memory.read", &read, &m.read),
                write: self.narrow_scopes(name, "memory.write", &write, &m.write),
            };
        }
    }
}

/// Resolve the five layers into a run's effective settings (S10.2). Pure:
/// the same layers always give the same result. Widenings are not errors:
/// they are left out and listed in [`Effective::refused`].
pub fn resolve(layers: &Layers) -> Effective {
    // The base below the global default: everything the runtime has, the
    // fallback budget (S4.2), permissive approval, the default model.
    let mut r = Resolver {
        eff: Effective {
            profile: layers.profile.as_ref().map(|p| p.profile.clone()),
            mode: ProfileMode::Agent,
            provider: None,
            model: ModelChoice::default().model,
            max_output_tokens: None,
            reasoning_effort: None,
            reasoning_budget_tokens: None,
            web_search: true,
            approval: ApprovalMode::Permissive,
            budget: Budget::fallback(),
            plugins: None,
            mcp_servers: None,
            tools: None,
            knowledge: None,
            memory: MemoryScopes::all(),
            skills: None,
            system_prompt_addition: None,
            refused: Vec::new(),
        },
    };
    r.apply(LayerName::Global, &layers.global, true);
    r.apply(LayerName::Workspace, &layers.workspace, true);
    if let Some(p) = &layers.profile {
        r.apply(LayerName::Profile, &p.layer, true);
    }
    // S4.4: without a profile, the session (chat) override sets the budget.
    r.apply(
        LayerName::Session,
        &layers.session,
        layers.profile.is_none(),
    );
    r.apply(LayerName::Turn, &layers.turn, false);
    r.eff
}

impl Effective {
    /// The caveats every capability the run mints carries (S10.2): the
    /// effective tool set (none at all in chat mode). Tool names only: to
    /// fold the plugin and MCP allowlists in, use [`Effective::caveats_for`].
    pub fn caveats(&self) -> Vec<Caveat> {
        match (self.mode, &self.tools) {
            (ProfileMode::Chat, _) => vec![Caveat::Tools(BTreeSet::new())],
            (ProfileMode::Agent, Some(tools)) => vec![Caveat::Tools(tools.clone())],
            (ProfileMode::Agent, None) => Vec::new(),
        }
    }

    /// The caveats for a registry's tools (name and origin each): one
    /// `Tools` caveat naming exactly the registered tools
    /// [`Effective::allows_tool`] admits, so the plugin and MCP allowlists
    /// narrow capabilities too.
    pub fn caveats_for<'a>(
        &self,
        registered: impl IntoIterator<Item = (&'a str, &'a Origin)>,
    ) -> Vec<Caveat> {
        let allowed = registered
            .into_iter()
            .filter(|(name, origin)| self.allows_tool(name, origin))
            .map(|(name, _)| name.to_owned())
            .collect();
        vec![Caveat::Tools(allowed)]
    }

    /// May the run use tool `name` from `origin`? Not in chat mode; in
    /// agent mode when the tool, plugin and MCP allowlists all admit it
    /// (and `web_search` only while web search is on).
    pub fn allows_tool(&self, name: &str, origin: &Origin) -> bool {
        if self.mode == ProfileMode::Chat {
            return false;
        }
        if name == "web_search" && !self.web_search {
            return false;
        }
        let listed = |list: &Option<BTreeSet<String>>, item: &str| {
            list.as_ref().is_none_or(|set| set.contains(item))
        };
        listed(&self.tools, name)
            && match origin {
                Origin::Plugin(id) => listed(&self.plugins, id),
                Origin::Mcp(server) => listed(&self.mcp_servers, server),
                Origin::Builtin | Origin::User | Origin::Page => true,
            }
    }

    /// May Skill `name` apply (S5.6)?
    pub fn allows_skill(&self, name: &str) -> bool {
        self.skills.as_ref().is_none_or(|s| s.contains(name))
    }

    /// May the run search knowledge base `base`?
    pub fn allows_knowledge(&self, base: &str) -> bool {
        self.knowledge.as_ref().is_none_or(|s| s.contains(base))
    }

    /// What a run is started with (S10.2): the fields of the supervisor's
    /// `RunConfig` that the effective settings decide, in kernel types (an
    /// actor crate does not depend on the supervisor). Refused when the
    /// run's applied Skill is outside the Skill policy. Web search,
    /// knowledge and Memory scopes have no `RunConfig` field yet:
    /// the host reads them from the [`Effective`] it keeps beside the run.
    pub fn run_settings(&self, skill: Option<&AppliedSkill>) -> Result<RunSettings, ProfileError> {
        if let Some(skill) = skill
            && !self.allows_skill(&skill.name)
        {
            return Err(ProfileError::SkillNotAllowed {
                skill: skill.name.clone(),
            });
        }
        Ok(RunSettings {
            chat_only: self.mode == ProfileMode::Chat,
            budget: self.budget,
            approval: self.approval,
            allowlist: match self.mode {
                ProfileMode::Chat => Some(BTreeSet::new()),
                ProfileMode::Agent => self.tools.clone(),
            },
            model: self.model.clone(),
            provider: self.provider.clone(),
            max_output_tokens: self.max_output_tokens,
            reasoning: Reasoning {
                effort: self.reasoning_effort,
                budget_tokens: self.reasoning_budget_tokens,
            },
            system_extension: self.system_prompt_addition.clone(),
            profile: self.profile.clone(),
        })
    }
}

/// The run configuration the effective settings decide, field for field
/// the supervisor's `RunConfig` (and `ModelSettings`). The assembly copies
/// it over:
///
/// ```text
/// config.mode = settings.mode_for(config.mode);
/// config.budget = settings.budget;
/// config.approval = settings.approval;
/// config.allowlist = settings.allowlist.clone();
/// config.model.model = settings.model.clone();
/// config.model.provider = settings.provider.clone();
/// config.model.max_output_tokens = settings.max_output_tokens;
/// config.model.reasoning = settings.reasoning;
/// config.model.system_extension = settings.system_extension.clone();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSettings {
    /// The run may not use tools (chat mode).
    pub chat_only: bool,
    pub budget: Budget,
    pub approval: ApprovalMode,
    /// Tool names the run may use; empty in chat mode; `None`: every tool.
    pub allowlist: Option<BTreeSet<String>>,
    pub model: String,
    pub provider: Option<String>,
    pub max_output_tokens: Option<u32>,
    /// How hard the model reasons, and its thinking budget (S10.1).
    pub reasoning: Reasoning,
    /// Added after the run's system prompt.
    pub system_extension: Option<String>,
    /// The profile revision the run uses, to record with it.
    pub profile: Option<ProfileRef>,
}

impl RunSettings {
    /// The mode of a run that asked for `requested`: chat only narrows an
    /// Agent run; a Research or Chat run keeps its mode.
    pub fn mode_for(&self, requested: RunMode) -> RunMode {
        if self.chat_only && requested == RunMode::Agent {
            RunMode::Chat
        } else {
            requested
        }
    }

    /// The tools actor's per-run settings (mode, approval, allowlist).
    pub fn tool_config(&self, requested: RunMode) -> RunToolConfig {
        RunToolConfig {
            mode: self.mode_for(requested),
            approval: self.approval,
            allowlist: self.allowlist.clone(),
            // The run's grants are the assembly's (`RunConfig::grants`).
            ..RunToolConfig::default()
        }
    }
}

/// Narrow a profile to a host's ceiling (import, S10.3): the same rules
/// as [`resolve`] with `ceiling` as the layer above and the profile's
/// budget only lowered. Returns the narrowed profile and what was refused.
pub fn narrow_profile(profile: &AgentProfileV2, ceiling: &Layer) -> (AgentProfileV2, Vec<Refused>) {
    let layers = Layers {
        global: ceiling.clone(),
        ..Layers::default()
    };
    let mut r = Resolver {
        eff: resolve(&layers),
    };
    // The ceiling's budget bounds the profile's (no budget: the kernel's bounds).
    let budget_settable = ceiling.budget.is_none();
    r.apply(LayerName::Profile, &Layer::from(profile), budget_settable);
    let eff = r.eff;
    let mut out = profile.clone();
    out.mode = eff.mode;
    out.search.web_search = eff.web_search;
    out.approval = eff.approval;
    out.budget = eff.budget;
    // An open list stays open unless the ceiling closed it.
    out.plugins = eff.plugins;
    out.mcp_servers = eff.mcp_servers;
    out.tools = eff.tools;
    out.knowledge = eff.knowledge;
    out.memory = eff.memory;
    out.skills = eff.skills;
    (out, eff.refused)
}
