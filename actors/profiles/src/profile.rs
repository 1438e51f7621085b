//! `AgentProfileV2` (S10.1): what a profile chooses (model, reasoning and
//! search settings, approval mode, budget, allowlists, Memory scopes, Skill
//! policy, a system prompt addition, credential handles), its bounds, and
//! validation with errors that name the field.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use agent_capabilities::ApprovalMode;
use agent_kernel::budget::Budget;
use serde::{Deserialize, Serialize};

use crate::error::ProfileError;

/// The longest profile id, in bytes (ASCII letters, digits, `_`, `-`, `.`).
pub const MAX_ID_BYTES: usize = 64;
/// The longest profile name, in characters.
pub const MAX_NAME_CHARS: usize = 100;
/// The longest model name, in bytes (the same bound as `RunConfig`'s).
pub const MAX_MODEL_BYTES: usize = 200;
/// The longest provider name, in bytes.
pub const MAX_PROVIDER_BYTES: usize = 64;
/// The most entries an allowlist (plugins, MCP servers, tools, knowledge
/// bases, Skills) may hold.
pub const MAX_LIST_ITEMS: usize = 256;
/// The longest entry of an allowlist, in bytes.
pub const MAX_ITEM_BYTES: usize = 128;
/// The longest system prompt addition, in bytes (well under the
/// supervisor's 64 KiB bound on a system extension).
pub const MAX_PROMPT_ADDITION_BYTES: usize = 16 * 1024;
/// The most credential handles a profile names.
pub const MAX_CREDENTIALS: usize = 16;
/// The longest credential purpose or handle name, in bytes.
pub const MAX_HANDLE_BYTES: usize = 128;
/// The largest `max_output_tokens` a profile may ask for.
pub const MAX_OUTPUT_TOKENS: u32 = 1_000_000;

/// A profile's id: 1 to [`MAX_ID_BYTES`] ASCII letters, digits, `_`, `-`
/// or `.`, starting with a letter or digit (so it is safe in storage keys).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(transparent)]
pub struct ProfileId(String);

impl ProfileId {
    /// Check and wrap an id.
    pub fn new(id: impl Into<String>) -> Result<ProfileId, ProfileError> {
        let id = id.into();
        let why = if id.is_empty() || id.len() > MAX_ID_BYTES {
            Some(format!(
                "must be 1 to {MAX_ID_BYTES} bytes, got {}",
                id.len()
            ))
        } else if !id.as_bytes()[0].is_ascii_alphanumeric() {
            Some("must start with an ASCII letter or digit".to_owned())
        } else if !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            Some("may hold only ASCII letters, digits, '_', '-' and '.'".to_owned())
        } else {
            None
        };
        match why {
            Some(why) => Err(ProfileError::Invalid { field: "id", why }),
            None => Ok(ProfileId(id)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProfileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ProfileId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ProfileId::new(s).map_err(serde::de::Error::custom)
    }
}

/// Whether runs of the profile may use tools at all.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ProfileMode {
    /// Plain chat: no tools (what a legacy assistant becomes, S10.3).
    Chat,
    /// Agent runs with the tools the allowlists leave.
    #[default]
    Agent,
}

/// How hard the model is asked to reason: the kernel's, shared with the
/// providers that send it.
pub use agent_kernel::reasoning::ReasoningEffort;

/// Which model, from which provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelChoice {
    /// A provider the host configured by name (S13.3: only the name, never
    /// an endpoint or a key); `None`: the host's default provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}

impl Default for ModelChoice {
    fn default() -> Self {
        ModelChoice {
            provider: None,
            model: "default".to_owned(),
            max_output_tokens: None,
        }
    }
}

/// Reasoning settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasoningSettings {
    /// `None`: the model's own default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
    /// Tokens the model may spend thinking where the format takes a
    /// budget (Anthropic, Gemini); `None`: the effort's budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
}

impl ReasoningSettings {
    /// The setting as a run carries it.
    pub fn setting(&self) -> agent_kernel::reasoning::Reasoning {
        agent_kernel::reasoning::Reasoning {
            effort: self.effort,
            budget_tokens: self.budget_tokens,
        }
    }
}

/// Search settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSettings {
    /// Whether runs may search the web (a capability: later layers may
    /// only turn it off, S10.2).
    #[serde(default)]
    pub web_search: bool,
}

/// A Memory scope (issue 20: global, workspace, profile, session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryScope {
    Global,
    Workspace,
    Profile,
    Session,
}

impl MemoryScope {
    /// Every scope.
    pub const ALL: [MemoryScope; 4] = [
        MemoryScope::Global,
        MemoryScope::Workspace,
        MemoryScope::Profile,
        MemoryScope::Session,
    ];
}

/// Which Memory scopes a run may read and write.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryScopes {
    #[serde(default)]
    pub read: BTreeSet<MemoryScope>,
    #[serde(default)]
    pub write: BTreeSet<MemoryScope>,
}

impl MemoryScopes {
    /// Read and write every scope.
    pub fn all() -> MemoryScopes {
        MemoryScopes {
            read: MemoryScope::ALL.into(),
            write: MemoryScope::ALL.into(),
        }
    }
}

/// Named secret handles the host resolves at dispatch (for example
/// `provider_api_key` → `openai-work`). The values are handle names, never
/// keys (S13.3), and still never leave the machine: a shareable export
/// drops the whole section (S10.3). `Debug` prints only the count.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// Purpose → handle name.
    #[serde(default)]
    pub handles: BTreeMap<String, String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials({} handles, redacted)", self.handles.len())
    }
}

impl Credentials {
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }
}

/// An Agent Profile, version 2 (S10.1). For every allowlist `None` means
/// "all that the layer above allows" and `Some(set)` narrows to the set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProfileV2 {
    pub id: ProfileId,
    pub name: String,
    #[serde(default)]
    pub mode: ProfileMode,
    #[serde(default)]
    pub model: ModelChoice,
    #[serde(default)]
    pub reasoning: ReasoningSettings,
    #[serde(default)]
    pub search: SearchSettings,
    #[serde(default)]
    pub approval: ApprovalMode,
    #[serde(default)]
    pub budget: Budget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<BTreeSet<String>>,
    #[serde(default)]
    pub memory: MemoryScopes,
    /// Which Skills may apply (S5.6); `None`: any Skill the host has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<BTreeSet<String>>,
    /// Added after the system prompt of the profile's runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt_addition: Option<String>,
    /// Credential handles; never exported.
    #[serde(default, skip_serializing_if = "Credentials::is_empty")]
    pub credentials: Credentials,
}

impl AgentProfileV2 {
    /// A profile with the defaults: agent mode, the default model, the
    /// fallback budget (S4.2), permissive approval, every allowlist open,
    /// no Memory scope, no credentials.
    pub fn new(id: ProfileId, name: impl Into<String>) -> AgentProfileV2 {
        AgentProfileV2 {
            id,
            name: name.into(),
            mode: ProfileMode::Agent,
            model: ModelChoice::default(),
            reasoning: ReasoningSettings::default(),
            search: SearchSettings::default(),
            approval: ApprovalMode::Permissive,
            budget: Budget::fallback(),
            plugins: None,
            mcp_servers: None,
            tools: None,
            knowledge: None,
            memory: MemoryScopes::default(),
            skills: None,
            system_prompt_addition: None,
            credentials: Credentials::default(),
        }
    }

    /// Check every field against its bound; the first problem is returned,
    /// naming its field (`budget.max_tool_rounds`, `tools`, ...).
    pub fn validate(&self) -> Result<(), ProfileError> {
        check_name(&self.name)?;
        check_model(&self.model)?;
        check_budget(&self.budget)?;
        check_reasoning_budget(self.reasoning.budget_tokens)?;
        check_list("plugins", self.plugins.as_ref())?;
        check_list("mcp_servers", self.mcp_servers.as_ref())?;
        check_list("tools", self.tools.as_ref())?;
        check_list("knowledge", self.knowledge.as_ref())?;
        check_list("skills", self.skills.as_ref())?;
        check_prompt_addition(self.system_prompt_addition.as_deref())?;
        check_credentials(&self.credentials)
    }
}

fn invalid(field: &'static str, why: impl Into<String>) -> ProfileError {
    ProfileError::Invalid {
        field,
        why: why.into(),
    }
}

/// A printable one-line text of `1..=max` characters.
pub(crate) fn check_name(name: &str) -> Result<(), ProfileError> {
    let chars = name.chars().count();
    if name.trim().is_empty() || chars > MAX_NAME_CHARS {
        return Err(invalid(
            "name",
            format!("must be 1 to {MAX_NAME_CHARS} characters and not blank, got {chars}"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(invalid("name", "must not contain control characters"));
    }
    Ok(())
}

pub(crate) fn check_model(model: &ModelChoice) -> Result<(), ProfileError> {
    check_token("model.model", &model.model, MAX_MODEL_BYTES)?;
    if let Some(p) = &model.provider {
        check_token("model.provider", p, MAX_PROVIDER_BYTES)?;
    }
    if let Some(n) = model.max_output_tokens
        && !(1..=MAX_OUTPUT_TOKENS).contains(&n)
    {
        return Err(invalid(
            "model.max_output_tokens",
            format!("must be 1 to {MAX_OUTPUT_TOKENS}, got {n}"),
        ));
    }
    Ok(())
}

/// A thinking budget within the kernel's bounds.
pub(crate) fn check_reasoning_budget(budget_tokens: Option<u32>) -> Result<(), ProfileError> {
    let setting = agent_kernel::reasoning::Reasoning {
        effort: None,
        budget_tokens,
    };
    setting
        .validate()
        .map_err(|e| invalid("reasoning.budget_tokens", e.to_string()))
}

/// The budget's own validation, its field named under `budget.`.
pub(crate) fn check_budget(budget: &Budget) -> Result<(), ProfileError> {
    budget.validate().map_err(|e| {
        let field = match e.field {
            "max_tool_rounds" => "budget.max_tool_rounds",
            "max_tool_calls" => "budget.max_tool_calls",
            "max_tokens" => "budget.max_tokens",
            "max_duration_ms" => "budget.max_duration_ms",
            _ => "budget",
        };
        invalid(field, e.problem)
    })
}

/// A name without whitespace or control characters, 1..=max bytes.
fn check_token(field: &'static str, s: &str, max: usize) -> Result<(), ProfileError> {
    if s.is_empty() || s.len() > max {
        return Err(invalid(
            field,
            format!("must be 1 to {max} bytes, got {}", s.len()),
        ));
    }
    if s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(invalid(
            field,
            format!("{s:?} must not contain whitespace or control characters"),
        ));
    }
    Ok(())
}

pub(crate) fn check_list(
    field: &'static str,
    list: Option<&BTreeSet<String>>,
) -> Result<(), ProfileError> {
    let Some(list) = list else { return Ok(()) };
    if list.len() > MAX_LIST_ITEMS {
        return Err(invalid(
            field,
            format!(
                "may hold at most {MAX_LIST_ITEMS} entries, got {}",
                list.len()
            ),
        ));
    }
    for item in list {
        check_token(field, item, MAX_ITEM_BYTES)?;
    }
    Ok(())
}

pub(crate) fn check_prompt_addition(text: Option<&str>) -> Result<(), ProfileError> {
    let Some(text) = text else { return Ok(()) };
    if text.len() > MAX_PROMPT_ADDITION_BYTES {
        return Err(invalid(
            "system_prompt_addition",
            format!(
                "must be at most {MAX_PROMPT_ADDITION_BYTES} bytes, got {}",
                text.len()
            ),
        ));
    }
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(invalid(
            "system_prompt_addition",
            "must not contain control characters other than line breaks and tabs",
        ));
    }
    Ok(())
}

fn check_credentials(credentials: &Credentials) -> Result<(), ProfileError> {
    if credentials.handles.len() > MAX_CREDENTIALS {
        return Err(invalid(
            "credentials",
            format!(
                "may name at most {MAX_CREDENTIALS} handles, got {}",
                credentials.handles.len()
            ),
        ));
    }
    for (purpose, handle) in &credentials.handles {
        // Never echo a credential value in an error: it may be a secret
        // pasted in the wrong place.
        for s in [purpose, handle] {
            if s.is_empty()
                || s.len() > MAX_HANDLE_BYTES
                || s.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(invalid(
                    "credentials",
                    format!(
                        "purposes and handle names must be 1 to {MAX_HANDLE_BYTES} bytes without whitespace or control characters"
                    ),
                ));
            }
        }
    }
    Ok(())
}
