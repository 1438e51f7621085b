//! `agent-supervisor`: the AgentRun loop.
//!
//! One supervisor actor per run drives model rounds and tool rounds, keeps
//! the journal, checkpoints, budgets, approvals and pending requests, reacts
//! to interruption, and continues only through an explicit `resume`. The
//! public surface is [`Runtime`] / [`RunHandle`]; model providers live in
//! [`provider`]; the crash simulator in `sim` (feature `sim`, shipped in
//! `agentrt sim`) and the deliberately broken supervisor it must catch in
//! `sabotage` (feature `sabotage`, test-only: never in a release build,
//! which `cargo xtask test` checks).
//!
//! # How a run works
//!
//! `Runtime::start(session, prompt, RunConfig)` takes the session's lease,
//! stores the prompt, the config and the first conversation as blobs, then
//! the run record (`running`), and spawns the run's supervisor. The
//! supervisor holds an `Authority` whose key comes from the host's entropy
//! and lives only in memory. What it does next is read from durable state
//! alone (status, latest checkpoint's conversation, journal):
//!
//! 1. **Model round** — budget checked; checkpoint *before the request*; the
//!    provider streams text deltas (published as events) and tool calls;
//!    usage accumulates; the answer is stored and checkpointed *after the
//!    response*. A stream that breaks off is repeated (bounded): nothing of it
//!    was committed. A response with tool calls starts a tool round (budget
//!    checked first) and becomes durable in the batch of its first call's
//!    next step (`running`, an approval or question, an outcome), so a crash
//!    before then repeats the round; one without is the final answer
//!    (`completed`). When an outcome answers a round's last call, the next
//!    round's request activity and checkpoint go in the outcome's batch: a
//!    tool round makes two commits.
//! 2. **Tool round**, one call at a time. A call without journal record is
//!    *processed*: budget checked; `ask_user` / `update_plan` ([`builtin`]) are answered by
//!    the supervisor itself; anything else goes to the tools actor
//!    (`ToolsMsg::Prepare`) for validation and the policy decision. `Deny` →
//!    the model gets a denial. `AskOnce` → a `prepared` record and a pending
//!    approval, status `awaiting_approval`. `Automatic` (or approved) → a
//!    one-time capability is minted, `running` is made durable with a
//!    checkpoint *before dispatch*, then `ToolsMsg::Dispatch`; the outcome
//!    (`committed` / `failed`, result blob first, evidence, the result message)
//!    is durable *before the model sees it*. A tool that says its effect may
//!    have happened gives `effect_unknown`: a pending decision and
//!    `interrupted` / `effect_unknown`. A call with a journal record is
//!    *replayed* by `agent_kernel::journal::replay_decision`: committed results
//!    are reused, only read-only or idempotent local work is retried, and
//!    anything uncertain waits for `decide(run, call, RetryAnyway | MarkDone |
//!    Abandon)`.
//! 3. **Interruption** — offline, page hidden or executor lost: a checkpoint
//!    and `interrupted` (`offline` / `page_interrupted`); a run awaiting
//!    approval or input keeps waiting. `Runtime::recover()` at page load turns
//!    runs left `running` without a live lease into `interrupted` /
//!    `page_interrupted`, settling in-flight records by the replay rule.
//!    Only `resume` continues. `stop` cancels (`user_stopped`), waiting for an
//!    effect in flight up to `RuntimeOptions::stop_grace`, else recording it
//!    `effect_unknown`. A duration budget that runs out while the run waits
//!    on a model stream or a call in flight ends it the same way, `failed` /
//!    `budget_exhausted` (active time, S4.1, counts those waits and is made
//!    durable every `RuntimeOptions::active_time_flush` while they last).
//!
//! Every write is one fenced batch carrying the lease epoch and a
//! compare-and-set on the run record; blobs (prompt, conversation,
//! arguments, results, plan) are stored before the records naming them, and
//! records hold only hashes and references. The conversation is stored
//! append-only: each checkpoint names the newest segment of a chain of
//! blobs holding only the messages added since (merged like a binary counter
//! up to 128 appends, see `transcript`), so a round stores and costs the
//! same however long the run; the chain is read back only when a run is
//! loaded, from the run's checkpoint. A run keeps one checkpoint record,
//! overwritten by every batch that reaches a new stage, so the stored bytes
//! per round do not grow with checkpoints; the activities are the history.
//! Activities are numbered without gaps and their time stamps never go
//! backwards, even when the wall clock does.
//!
//! Dependencies: the model clients are built by `agent-http`'s one strict
//! constructor over `reqwest`, because the same code builds natively (hyper,
//! rustls) and for wasm32 (the browser's fetch), and their streams are read
//! by `agent-http`'s one bounded SSE decoder.
//!
//! # Scenario format (`ScriptedProvider`)
//!
//! ```json
//! {
//!   "turns": [
//!     { "text": "Let me read the note first.",
//!       "tool_calls": [ { "name": "read_note", "arguments": { "path": "notes/a.txt" } } ],
//!       "usage": { "input_tokens": 120, "output_tokens": 12 } },
//!     { "text": "The note says hello.", "delay_ms": 2000 }
//!   ]
//! }
//! ```
//!
//! - `turns` (required, non-empty): the model's answers. The turn played is
//!   the number of assistant messages already in the request, so a resumed
//!   or replayed run gets the same answer for the same conversation.
//! - `text`: assistant text, streamed in small deltas (default empty).
//! - `tool_calls`: `name` (required), `arguments` (an object, sent as its
//!   JSON text; or a string, sent as is — useful for invalid JSON), `id`
//!   (default `call_<turn>_<index>`).
//! - `usage`: `input_tokens`, `output_tokens`; default about one token per
//!   four characters of request and answer.
//! - `finish`: `stop`, `tool_calls`, `length` or `content_filter`; default
//!   from whether there are tool calls.
//! - `delay_ms`: host-clock time the answer takes (for duration budgets).
//! - `disconnects`: the first N attempts at this turn break off mid-stream.
//!
//! Unknown fields are refused with an error naming them.
//!
//! # Crash simulator
//!
//! `cargo test -p agent-supervisor --test crash_sim -- --nocapture` runs
//! 1,000 seeds on the memory host and prints
//! `crash-sim: <seeds> seeds, <points> crash points, <n> violations`.
//! `CRASH_SIM_SEED=<n>` replays one seed alone. Other hosts run it on their
//! own storage with `sim::run_seeds(0..1000, || Arc::new(MyStorage::new()) as
//! Arc<dyn Storage>, Sabotage::default())` and print the returned
//! `SimSummary` (its `Display` is the line above); `sim::run_seed` replays one.
//!
//! # Example
//!
//! A provider turns a request into a stream of events; the scripted one plays
//! a scenario, and is what the tests and `agentrt demo` use (a scenario field
//! the format does not have is refused, naming it):
//!
//! ```
//! use std::sync::Arc;
//!
//! use agent_kernel::host::ManualClock;
//! use agent_supervisor::provider::{FinishReason, ModelProvider, ModelRequest, collect_response};
//! use agent_supervisor::{Scenario, ScriptedProvider};
//!
//! let scenario = Scenario::from_json(r#"{"turns": [{"text": "Hello from the script."}]}"#).unwrap();
//! let provider = ScriptedProvider::new(scenario, Arc::new(ManualClock::new(0)));
//! let request: ModelRequest = serde_json::from_value(serde_json::json!({
//!     "model": "scripted", "messages": [{"role": "user", "content": "Hi"}], "tools": []
//! }))
//! .unwrap();
//! let answer = futures::executor::block_on(async {
//!     collect_response(provider.stream(request).await.unwrap(), |_delta| {}).await
//! })
//! .unwrap();
//! assert_eq!(answer.text, "Hello from the script.");
//! assert_eq!(answer.finish, Some(FinishReason::Stop));
//!
//! assert!(Scenario::from_json(r#"{"turns": [{"txt": "typo"}]}"#).is_err());
//! ```
//!
//! A whole run (the supervisor with its tools actor) is wired by
//! `agent-assembly`; its top doc runs one.

// On wasm32 everything is single-threaded: `MaybeSend` is empty there, so
// `Arc`s of host objects are neither `Send` nor `Sync`, by design.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod blob;
pub mod builtin;
pub mod compaction;
pub mod config;
pub mod conversation;
pub mod error;
pub mod message;
pub mod provider;
pub mod runtime;
#[cfg(feature = "sim")]
pub mod sabotage;
#[cfg(feature = "sim")]
pub mod sim;
pub mod store;
mod supervisor;
pub mod transcript;

pub use config::{
    AGENT_SYSTEM_PROMPT, AGENT_SYSTEM_PROMPT_VERSION, EndingCall, MAX_SYSTEM_PROMPT_BYTES,
    ModelSettings, RunConfig, RunProfile, RuntimeOptions,
};
pub use error::RunError;
pub use provider::anthropic::{AnthropicConfig, AnthropicProvider};
pub use provider::gemini::{GeminiConfig, GeminiProvider};
pub use provider::http::RetryPolicy;
pub use provider::openai::{OpenAiConfig, OpenAiProvider};
pub use provider::scripted::{Scenario, ScenarioError, ScriptedProvider};
pub use provider::select::{ProviderKind, RemoteModel};
pub use provider::{ModelProvider, ProviderError};
pub use runtime::{RunHandle, Runtime, WeakRuntime};
#[cfg(feature = "test-hooks")]
pub use runtime::{SETTLE_HOOK_MARKER, SettleHook};
#[cfg(feature = "sim")]
pub use sabotage::Sabotage;
pub use store::RunEvent;
pub use supervisor::{Choice, ElicitationAsk, ElicitationReply};
