//! Shareable export (S10.3): a profile as canonical JSON (RFC 8785) without
//! its credentials, secret values, handle names or run history, and the
//! strict reading of such a document back (bounded, unknown fields
//! refused, validated). Narrowing to the importing host's ceiling is
//! [`crate::precedence::narrow_profile`]; storing is the store's.
//!
//! The exported type has no credential field at all, so nothing secret can
//! reach the bytes by mistake, and a document that carries one is refused.

use std::collections::BTreeSet;

use agent_capabilities::ApprovalMode;
use agent_kernel::budget::Budget;
use serde::{Deserialize, Serialize};

use crate::error::ProfileError;
use crate::profile::{
    AgentProfileV2, Credentials, MemoryScopes, ModelChoice, ProfileId, ProfileMode,
    ReasoningSettings, SearchSettings,
};

/// The `format` field of an export document.
pub const EXPORT_FORMAT: &str = "agent-profile";
/// The export layout version.
pub const EXPORT_VERSION: u32 = 2;
/// The largest export document read, in bytes.
pub const MAX_EXPORT_BYTES: usize = 256 * 1024;

/// A profile without its credentials: what may leave the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareableProfile {
    pub id: ProfileId,
    pub name: String,
    pub mode: ProfileMode,
    pub model: ModelChoice,
    pub reasoning: ReasoningSettings,
    pub search: SearchSettings,
    pub approval: ApprovalMode,
    pub budget: Budget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<BTreeSet<String>>,
    pub memory: MemoryScopes,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt_addition: Option<String>,
}

impl From<&AgentProfileV2> for ShareableProfile {
    fn from(p: &AgentProfileV2) -> ShareableProfile {
        ShareableProfile {
            id: p.id.clone(),
            name: p.name.clone(),
            mode: p.mode,
            model: p.model.clone(),
            reasoning: p.reasoning.clone(),
            search: p.search.clone(),
            approval: p.approval,
            budget: p.budget,
            plugins: p.plugins.clone(),
            mcp_servers: p.mcp_servers.clone(),
            tools: p.tools.clone(),
            knowledge: p.knowledge.clone(),
            memory: p.memory.clone(),
            skills: p.skills.clone(),
            system_prompt_addition: p.system_prompt_addition.clone(),
        }
    }
}

impl From<ShareableProfile> for AgentProfileV2 {
    /// The profile, with no credentials: the importing host adds its own.
    fn from(s: ShareableProfile) -> AgentProfileV2 {
        AgentProfileV2 {
            id: s.id,
            name: s.name,
            mode: s.mode,
            model: s.model,
            reasoning: s.reasoning,
            search: s.search,
            approval: s.approval,
            budget: s.budget,
            plugins: s.plugins,
            mcp_servers: s.mcp_servers,
            tools: s.tools,
            knowledge: s.knowledge,
            memory: s.memory,
            skills: s.skills,
            system_prompt_addition: s.system_prompt_addition,
            credentials: Credentials::default(),
        }
    }
}

/// An export document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportDocument {
    pub format: String,
    pub v: u32,
    pub profile: ShareableProfile,
}

/// The canonical JSON of a profile's shareable export.
pub fn export_profile(profile: &AgentProfileV2) -> Result<Vec<u8>, ProfileError> {
    let doc = ExportDocument {
        format: EXPORT_FORMAT.to_owned(),
        v: EXPORT_VERSION,
        profile: ShareableProfile::from(profile),
    };
    agent_capabilities::canonical_bytes(&doc).map_err(|e| ProfileError::Invalid {
        field: "profile",
        why: format!("has no canonical JSON form: {e}"),
    })
}

/// Read an export document: bounded in size, unknown fields (a
/// `credentials` section among them) refused, the profile validated. Not
/// yet narrowed to any host's ceiling.
pub fn parse_export(bytes: &[u8]) -> Result<AgentProfileV2, ProfileError> {
    if bytes.len() > MAX_EXPORT_BYTES {
        return Err(ProfileError::TooLarge {
            what: "the profile export",
            size: bytes.len(),
            max: MAX_EXPORT_BYTES,
        });
    }
    let doc: ExportDocument =
        serde_json::from_slice(bytes).map_err(|e| ProfileError::Import { why: e.to_string() })?;
    if doc.format != EXPORT_FORMAT || doc.v != EXPORT_VERSION {
        return Err(ProfileError::Import {
            why: format!(
                "format {:?} version {} is not {EXPORT_FORMAT:?} version {EXPORT_VERSION}",
                doc.format, doc.v
            ),
        });
    }
    let profile = AgentProfileV2::from(doc.profile);
    profile.validate()?;
    Ok(profile)
}
