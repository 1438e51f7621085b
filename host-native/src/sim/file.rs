//! A simulation described in a file for test hosts that do not write Rust
//! (`agentrt sim`: [`SimFile`]), and the report it writes
//! ([`SimReportFile`]).

use std::collections::BTreeMap;
use std::path::Path;

use agent_supervisor::sim::{SimSummary, Violation};
use agent_tools::PluginManifest;

use super::error::SimError;
use super::seeds::{SessionPlan, SimPlan};
use super::tab::Person;
use super::wiring::SimWiring;

/// A simulation described in a file, for test hosts that do not write
/// Rust (`agentrt sim`): the model's script, plugins pointing at the test
/// host's own servers, the sessions with their prompts, the person.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFile {
    /// The scripted model (`{"turns": [...]}`, the supervisor's scripted format).
    pub model: serde_json::Value,
    #[serde(default)]
    pub plugins: Vec<PluginManifest>,
    #[serde(default)]
    pub always_on_plugins: Vec<String>,
    /// `permissive` (default) or `strict`.
    #[serde(default)]
    pub approval: agent_capabilities::ApprovalMode,
    pub sessions: Vec<SimFileSession>,
    #[serde(default)]
    pub person: SimFilePerson,
    #[serde(default = "default_interruptions")]
    pub max_interruptions: u32,
}

pub(crate) fn default_interruptions() -> u32 {
    3
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFileSession {
    pub session: String,
    pub prompts: Vec<String>,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFilePerson {
    #[serde(default = "yes")]
    pub approve: bool,
    #[serde(default)]
    pub answers: Vec<String>,
}

pub(crate) fn yes() -> bool {
    true
}

impl Default for SimFilePerson {
    fn default() -> Self {
        SimFilePerson {
            approve: true,
            answers: Vec::new(),
        }
    }
}

impl SimFile {
    /// Parse a scenario file: JSON, or TOML when the name ends in `.toml`.
    pub fn load(path: &Path) -> Result<SimFile, SimError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SimError::Scenario(format!("cannot read {}: {e}", path.display())))?;
        let is_toml = path.extension().is_some_and(|e| e == "toml");
        if is_toml {
            toml::from_str(&text).map_err(|e| SimError::Scenario(e.to_string()))
        } else {
            serde_json::from_str(&text).map_err(|e| SimError::Scenario(e.to_string()))
        }
    }

    /// The wiring and plan the file describes.
    pub fn into_parts(self) -> Result<(SimWiring, SimPlan), SimError> {
        let mut wiring = SimWiring::scripted(&self.model.to_string())?;
        wiring.plugins = self.plugins;
        wiring.always_on_plugins = self.always_on_plugins;
        agent_assembly::check_always_on(
            wiring.plugins.iter().map(|p| p.id.as_str()),
            &wiring.always_on_plugins,
        )
        .map_err(|e| SimError::Scenario(e.to_string()))?;
        wiring.run_config.approval = self.approval;
        let plan = SimPlan {
            sessions: self
                .sessions
                .into_iter()
                .map(|s| SessionPlan {
                    session: s.session,
                    prompts: s.prompts,
                })
                .collect(),
            person: Person {
                approve: self.person.approve,
                answers: self.person.answers,
            },
            max_interruptions: self.max_interruptions,
        };
        Ok((wiring, plan))
    }
}

/// What `agentrt sim --report` writes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SimReportFile {
    /// The one-line summary.
    pub summary: String,
    pub seeds: u64,
    pub crash_points: u64,
    pub violations: Vec<Violation>,
    /// Calls that reached each tool, over all seeds.
    pub dispatches: BTreeMap<String, u64>,
}

impl SimReportFile {
    pub fn new(summary: &SimSummary, dispatches: BTreeMap<String, u64>) -> SimReportFile {
        SimReportFile {
            summary: summary.to_string(),
            seeds: summary.seeds,
            crash_points: summary.crash_points,
            violations: summary.violations.clone(),
            dispatches,
        }
    }
}
