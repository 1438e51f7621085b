//! `agent-research`: Deep Research (SPEC S9), in progress.
//!
//! - [`task`]: the `ResearchTask` record (topic, host-supplied session and
//!   message identity, phase, plan, approved source snapshot, report
//!   reference, gaps) and its phases as a pure, typed state machine;
//! - [`store`]: tasks made durable with the run primitives (fenced atomic
//!   batches, compare-and-set, blobs in the same batch), the plan request
//!   shown once, and interruption after a reload;
//! - [`plan`]: the plan, its bounds, and the narrowing-only edit rule;
//! - [`scope`]: execution-phase read authority as capabilities, model
//!   filters as caveats that only narrow (S9.5);
//! - [`search`]: `web_search` with a pluggable backend and SearXNG's JSON API;
//! - [`report`]: the three-part report Artifact and its evidence check (S9.6);
//! - [`start`]: `start_deep_research`, the deterministic start when the model
//!   omits it, and the tool that creates the task (S9.3).
//!
//! Deep Research shares the stream, checkpoint, lease and journal
//! primitives with Agent runs, and none of the Agent system prompt, Skills,
//! Memory, JavaScript, workspace mutations, dynamic discovery or run card
//! (S9.1): this crate depends only on the kernel and the capabilities
//! crate, like every actor crate, and the hosts wire it in.

// The same `Arc`s hold `Send + Sync` values natively; on single-threaded
// wasm32 the host traits inside are not `Send`, by design (as in the kernel).
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod plan;
pub mod report;
pub mod scope;
pub mod search;
pub mod start;
pub mod store;
pub mod task;

pub use plan::{DateRange, PlanError, ResearchPlan};
pub use store::{PlanDecision, ResearchError, ResearchStore};
pub use task::{
    ActivePhase, Event, EvidenceId, Gap, MessageId, Phase, PlanRequest, ReportRef, ResearchTask,
    SnapshotSource, SourceRead, SourceSnapshot, TaskId, TransitionError,
};
