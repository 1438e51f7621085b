//! [`ChildRuns`]: what a driver of phase runs needs from whoever starts
//! and waits on runs, without naming the supervisor.
//!
//! Deep Research (S9.2) drives a task through phases, each a run: a start
//! turn that ends with one tool call, then child runs of it (planning,
//! synthesis) labelled `research`, under the same reentrant lease (S3.2).
//! Its driver lives in an actor crate, which depends on the kernel only;
//! the supervisor, which actually runs turns, is another actor crate. This
//! trait is the seam: the driver asks for runs in kernel terms (ids,
//! statuses, outputs, a tool allowlist and a call cap), and the assembly
//! implements it over the supervisor's `Runtime`, translating a
//! [`ChildRunSpec`] into the run configuration only the supervisor knows.

use agent_capabilities::ApprovalMode;
use async_trait::async_trait;

use crate::ids::{IdError, RunId, SessionId};
use crate::maybe_send::{MaybeSend, MaybeSync};
use crate::run::RunStatus;

/// How a start turn ends (S9.3): with the first call of `tool`, the
/// model's own or, when the model answered without it, the runtime's call
/// with `fallback_arguments` through the same tool path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnding {
    /// The tool whose call ends the turn.
    pub tool: String,
    /// The arguments of the runtime's own call (a JSON object).
    pub fallback_arguments: serde_json::Value,
}

/// A child run as its driver asks for it: its only tools and how many
/// calls it may make. Everything else comes from its parent's model
/// settings, approval mode and budget; none of the parent's system
/// prompt, extension, Skill or tool allowlist (S9.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRunSpec {
    /// The tools the child run is offered; empty for none.
    pub tools: Vec<String>,
    /// At most this many tool calls (S9.4), capped by the parent's own
    /// budget; a run with no tools makes none anyway.
    pub max_tool_calls: u32,
}

/// Starting, waiting on and steering runs, for a driver in an actor crate.
///
/// Every method but [`ChildRuns::announce`] is a command or query of the
/// runtime; its error is the runtime's own ([`ChildRuns::Error`]), so a
/// host sees the same error it would see from the runtime directly.
#[cfg_attr(target_arch = "wasm32", async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait)]
pub trait ChildRuns: MaybeSend + MaybeSync {
    /// The runtime's error. A driver that makes a run id from its own
    /// names reports an invalid one as this error too.
    type Error: std::error::Error + From<IdError> + MaybeSend + MaybeSync + 'static;
    /// The settings of a start turn as the host gives them (the
    /// supervisor's run configuration).
    type Settings: MaybeSend;

    /// Start a turn in `session` with `prompt`, in research mode, that
    /// ends as `ending` says; `settings` give its model, approval and
    /// budget (not its system prompt or extension, S9.1).
    async fn start_turn(
        &self,
        session: &SessionId,
        prompt: &str,
        ending: TurnEnding,
        settings: Self::Settings,
    ) -> Result<RunId, Self::Error>;

    /// Start the child run `id` of `parent` with `prompt`, as `spec` says.
    /// When a run `id` exists already (a phase taken up again), that run
    /// is the answer: `Ok(id)`, never a second run.
    async fn start_child(
        &self,
        id: RunId,
        parent: &RunId,
        prompt: &str,
        spec: ChildRunSpec,
    ) -> Result<RunId, Self::Error>;

    /// The run's status, or `None` when no run `run` exists.
    async fn status(&self, run: &RunId) -> Result<Option<RunStatus>, Self::Error>;

    /// Wait until the run settles (a final status, or waiting for the
    /// person or for Resume) and give that status.
    async fn wait_settled(&self, run: &RunId) -> Result<RunStatus, Self::Error>;

    /// The run's output: its final text, or an ending call's result.
    async fn output(&self, run: &RunId) -> Result<Option<String>, Self::Error>;

    /// Resume an interrupted run.
    async fn resume(&self, run: &RunId) -> Result<(), Self::Error>;

    /// Stop the run (as a person stops it).
    async fn stop(&self, run: &RunId) -> Result<(), Self::Error>;

    /// The approval mode the run was started with.
    async fn approval(&self, run: &RunId) -> Result<ApprovalMode, Self::Error>;

    /// Tell the run's subscribers that the work `task` it started is now in
    /// `phase` (Deep Research's progress on the start turn's stream).
    fn announce(&self, run: &RunId, task: &str, phase: &str);
}
