//! A run's mode (Agent, Chat or Research, S9, S5.1): which tools it offers
//! and whether it is a turn of its session's conversation. A leaf of the
//! run model: the run record ([`crate::run`]) and the tools actor's per-run
//! settings ([`crate::protocol::RunToolConfig`]) both carry it.

use serde::{Deserialize, Serialize};

/// Agent, Chat or Research (S9, S5.1); decides which tools the host
/// registers and whether the run is a turn of its session's conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum RunMode {
    /// Tools, approvals and the default Agent system prompt.
    #[default]
    Agent,
    /// Deep Research (S9): its own phases, none of the Agent's tools.
    Research,
    /// Plain chat: the model answers from the conversation, with no tools
    /// and without the Agent system prompt.
    Chat,
}

impl RunMode {
    /// True when the model may be offered tools in this mode.
    pub fn offers_tools(self) -> bool {
        self != RunMode::Chat
    }

    /// True when a run of this mode is a turn of its session's
    /// conversation (S12.1): Agent and Chat turns are; Research runs keep
    /// their own record (S9.2).
    pub fn is_conversation_turn(self) -> bool {
        matches!(self, RunMode::Agent | RunMode::Chat)
    }
}
