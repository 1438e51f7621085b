//! `agent-research`: Deep Research (SPEC S9).
//!
//! - [`driver`]: the driver every host uses: the start turn, the phases as
//!   child runs over the kernel's [`ChildRuns`](agent_kernel::child_runs::ChildRuns)
//!   (which the assembly implements over the supervisor's runtime), the
//!   person's decisions, Resume and stop;
//! - [`task`]: the `ResearchTask` record (topic, host-supplied session and
//!   message identity, phase, plan, approved source snapshot, report
//!   reference, gaps, planning look-ups) and its phases as a pure, typed
//!   state machine;
//! - [`store`]: tasks made durable with the run primitives (fenced atomic
//!   batches, compare-and-set, blobs in the same batch), the plan request
//!   shown once, reads recorded from `fetch_url` envelopes, and
//!   interruption after a reload;
//! - [`plan`]: the plan, its bounds, and the narrowing-only edit rule;
//! - [`scope`]: execution-phase read authority as capabilities, model
//!   filters as caveats that only narrow (S9.5);
//! - [`search`]: `web_search` with a pluggable backend and SearXNG's JSON API;
//! - [`answers`]: what planning and synthesis ask a model (synthesis without
//!   tools) and the bounded, strict reading of their JSON answers;
//! - [`execute`]: reading the frozen snapshot through the host's read tool,
//!   each read put to the approval policy and recorded (S9.4, S9.5);
//! - [`report`]: the three-part report Artifact and its evidence check (S9.6);
//! - [`start`]: `start_deep_research`, the deterministic start when the model
//!   omits it, and the tool that creates the task (S9.3);
//! - [`view`]: a task as a host shows it, read without side effects;
//! - [`tools`]: the research tools in the tool crates' one registration
//!   shape (`builtin_tools(host, deps)`).
//!
//! # Design
//!
//! Deep Research shares the stream, checkpoint, lease and journal
//! primitives with Agent runs, and none of the Agent system prompt, Skills,
//! Memory, JavaScript, workspace mutations, dynamic discovery or run card
//! (S9.1). Like every actor crate it depends only on the kernel and the
//! capabilities crate; what it needs from other actors comes through
//! protocol types (a `fetch_url` result envelope) or a trait the host
//! implements ([`report::ArtifactSink`], which the workspace's Artifacts
//! fulfil, and the kernel's `ChildRuns`, which the supervisor's runtime
//! fulfils for the [`driver`]'s phase runs), and the assembly wires it in.
//!
//! The phases are data and a pure function ([`ResearchTask::apply`]); the
//! store only makes each step one fenced batch. Authority stays where it
//! is everywhere else: approval mints capabilities with the run's
//! `Authority`, a model's filter can only add caveats, and the capability
//! verifier — in `fetch_url`'s own tool shell — decides; the URL policy
//! still judges every address.
//!
//! Dependencies: `reqwest` for the search API (natively hyper and rustls,
//! the browser's fetch on wasm32, as the model providers use it) and `url`
//! (WHATWG parsing, the same parser as the fetch crate's URL policy).
//!
//! ```
//! use agent_kernel::host::BlobRef;
//! use agent_kernel::{RequestId, SessionId};
//! use agent_research::{Event, MessageId, Phase, ResearchTask, TaskId, TransitionError};
//!
//! let task = ResearchTask::new(
//!     TaskId::new("r1")?,
//!     SessionId::new("chat-1")?,
//!     MessageId::new("turn-1")?,
//!     BlobRef::of(b"the topic"),
//!     1_000,
//! );
//! let waiting = task.apply(
//!     Event::ProposePlan { plan: BlobRef::of(b"{}"), request: RequestId::new("plan-1")? },
//!     1_001,
//! )?;
//! assert_eq!(waiting.phase, Phase::AwaitingPlanApproval);
//! // Nothing skips the person's approval.
//! assert_eq!(
//!     waiting.apply(Event::FinishExecution, 1_002),
//!     Err(TransitionError::Illegal { phase: "awaiting_plan_approval", event: "finish_execution" })
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The same `Arc`s hold `Send + Sync` values natively; on single-threaded
// wasm32 the host traits inside are not `Send`, by design (as in the kernel).
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod answers;
pub mod driver;
pub mod execute;
pub mod plan;
pub mod report;
pub mod scope;
pub mod search;
pub mod start;
pub mod store;
pub mod task;
pub mod tools;
pub mod view;

pub use plan::{DateRange, PlanError, ResearchPlan};
pub use store::{PlanDecision, ResearchError, ResearchStore};
pub use task::{
    ActivePhase, Event, EvidenceId, Gap, LookupKind, Lookups, MessageId, Phase, PlanRequest,
    ReportRef, ResearchTask, SnapshotSource, SourceRead, SourceSnapshot, TaskId, TransitionError,
};
pub use tools::{ToolDeps, builtin_tools};
