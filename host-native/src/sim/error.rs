//! [`SimError`]: a simulation's setup or a tab's action failed.

use agent_assembly::AssemblyError;
use agent_supervisor::RunError;

use crate::sqlite::OpenError;

/// Simulation setup or a tab's action failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("invalid id: {0}")]
    Id(#[from] agent_kernel::IdError),
    #[error("invalid scenario: {0}")]
    Scenario(String),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("cannot wire the tab: {0}")]
    Wiring(String),
    #[error("the tab stalled before the operation finished (a sleep nobody advanced?)")]
    Stalled,
    #[error("tab {0} is dead; open a new tab (reload)")]
    Dead(String),
    #[error("deep research: {0}")]
    Research(String),
}

impl From<AssemblyError> for SimError {
    fn from(e: AssemblyError) -> Self {
        match e {
            AssemblyError::Run(e) => SimError::Run(e),
            other => SimError::Wiring(other.to_string()),
        }
    }
}
