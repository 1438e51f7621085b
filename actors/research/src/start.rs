//! Starting Deep Research from a chat or Agent turn (S9.3, S9.2, S9.5, S3.2):
//! the one tool such a turn shows the model, `start_deep_research`
//! ([`start_turn_schemas`]); the deterministic start when the model answers
//! without calling it ([`fallback_arguments`]: the runtime makes the same
//! call itself through `agent_supervisor::EndingCall`, so it takes the same
//! tool path); and the tool
//! ([`StartDeepResearch`]) that creates the `ResearchTask`.
//!
//! The tool creates the task under the session's lease taken through the
//! host's `LeaseManager`, which is reentrant for its owner (S3.2): inside a
//! turn it joins the lease the turn's run already holds. The task's session
//! is the invocation's (host-supplied) and its message identity is the
//! turn's run id — the host's chat message for that generation — never
//! anything from the model's arguments (S9.5). The result is only the
//! task's reference, which is all the chat message keeps (S9.2). The task
//! id is derived from the run and call ids, so a retried or replayed call
//! finds the task it created instead of making a second one.
//!
//! The start turn itself (a `research` run ending with this call) and the
//! phases after it are driven by `agent-assembly`'s research module.

use std::sync::Arc;

use agent_capabilities::{Fingerprint, Idempotency, Origin, Sensitivity, sha256_hex};
use agent_kernel::host::{Clock, Executor, LeaseManager};
use agent_kernel::protocol::{
    ModelToolSchema, TargetRule, ToolAddr, ToolDefinition, ToolFailure, ToolSuccess,
};
use agent_kernel::tool::{Tool, ToolContext, ToolOptions, spawn_tool_with};
use agent_kernel::{CallId, ParentLink, RunId};
use serde::Deserialize;
use serde_json::json;

use crate::store::{MAX_SEED_URLS, MAX_TOPIC_BYTES, ResearchError, ResearchStore};
use crate::task::{MessageId, TaskId};

/// The reserved tool name (`agent_kernel::tool::names::RESERVED_TOOL_NAMES`).
pub const START_DEEP_RESEARCH: &str = "start_deep_research";

/// The definition of `start_deep_research`: no effects outside the run
/// (it writes only the runtime's own task record), idempotent, public.
pub fn start_deep_research_definition() -> ToolDefinition {
    ToolDefinition::builder(START_DEEP_RESEARCH)
        .description(
            "Start Deep Research on the person's topic. Call it exactly once with the topic \
             in the person's words and any URLs they gave; a plan is then proposed for the \
             person to approve. Do not answer the question yourself.",
        )
        .parameters(json!({
            "type": "object",
            "properties": {
                "topic": {"type": "string", "minLength": 1, "maxLength": MAX_TOPIC_BYTES},
                "urls": {
                    "type": "array",
                    "maxItems": MAX_SEED_URLS,
                    "items": {"type": "string", "maxLength": crate::plan::MAX_URL_BYTES}
                }
            },
            "required": ["topic"],
            "additionalProperties": false,
        }))
        .origin(Origin::Builtin)
        .idempotency(Idempotency::Idempotent)
        .sensitivity(Sensitivity::Public)
        .target(TargetRule::None)
        .build()
}

/// The only schema a start turn shows the model (S9.3).
pub fn start_turn_schemas() -> Result<Vec<ModelToolSchema>, agent_capabilities::CanonicalError> {
    let def = start_deep_research_definition();
    let fingerprint = def.fingerprint()?;
    Ok(vec![ModelToolSchema::of(&def, fingerprint)])
}

/// The arguments of the runtime's own `start_deep_research` call when the
/// model answered without it (S9.3): the person's `prompt` as the topic,
/// trimmed, cut to the topic limit on a character boundary. The supervisor
/// makes the call (`agent_supervisor::EndingCall`), so it takes the same
/// tool path as the model's.
pub fn fallback_arguments(prompt: &str) -> serde_json::Value {
    let mut topic = prompt.trim().to_owned();
    if topic.len() > MAX_TOPIC_BYTES {
        let mut end = MAX_TOPIC_BYTES;
        while !topic.is_char_boundary(end) {
            end -= 1;
        }
        topic.truncate(end);
    }
    if topic.is_empty() {
        topic = "(no topic given)".to_owned();
    }
    json!({ "topic": topic })
}

/// The task id for call `call` of run `run`: stable across retries.
pub fn task_id_for(run: &RunId, call: &CallId) -> TaskId {
    let digest = sha256_hex(format!("{run}/{call}").as_bytes());
    // Invariant: `research-` and 32 hex digits is always a valid task id.
    TaskId::new(format!("research-{}", &digest[..32]))
        .unwrap_or_else(|_| unreachable!("research- and 32 hex digits is a valid id"))
}

/// The arguments of `start_deep_research`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    pub topic: String,
    #[serde(default)]
    pub urls: Vec<String>,
}

/// `start_deep_research` on the kernel's tool shell.
pub struct StartDeepResearch {
    store: ResearchStore,
    leases: LeaseManager,
    clock: Arc<dyn Clock>,
}

impl StartDeepResearch {
    /// `leases` is the host's lease manager (the same owner as the runs).
    pub fn new(store: ResearchStore, leases: LeaseManager, clock: Arc<dyn Clock>) -> Self {
        StartDeepResearch {
            store,
            leases,
            clock,
        }
    }

    /// Spawn the actor; its address goes to the registry as the handler of
    /// [`start_deep_research_definition`].
    pub fn spawn(
        self,
        executor: Arc<dyn Executor>,
        parent: Option<ParentLink>,
    ) -> Result<ToolAddr, agent_kernel::tool::SpawnError> {
        let clock = self.clock.clone();
        let options = ToolOptions {
            parent,
            ..ToolOptions::default()
        };
        spawn_tool_with(executor, clock, self, options).map(|(addr, _)| addr)
    }

    /// The definition's fingerprint (for capabilities and schemas).
    pub fn fingerprint() -> Result<Fingerprint, agent_capabilities::CanonicalError> {
        start_deep_research_definition().fingerprint()
    }
}

fn failure(ctx: &ToolContext, e: &ResearchError) -> ToolFailure {
    let code = match e {
        ResearchError::BadTopic => "invalid_topic",
        ResearchError::Plan(_) => "invalid_urls",
        ResearchError::Storage(agent_kernel::host::StorageError::StaleEpoch { .. }) => "lease_lost",
        _ => "research_store",
    };
    let retryable = matches!(
        e,
        ResearchError::Storage(agent_kernel::host::StorageError::Unavailable(_))
    );
    if retryable {
        ctx.fail_retryable(code, e.to_string())
    } else {
        ctx.fail(code, e.to_string())
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Tool for StartDeepResearch {
    type Args = StartArgs;

    fn definition(&self) -> ToolDefinition {
        start_deep_research_definition()
    }

    async fn call(&self, ctx: &ToolContext, args: StartArgs) -> Result<ToolSuccess, ToolFailure> {
        let guard = self
            .leases
            .acquire(&ctx.session)
            .await
            .map_err(|e| ctx.fail_retryable("lease_held", e.to_string()))?;
        let id = task_id_for(&ctx.run, &ctx.call_id);
        let message = MessageId::new(ctx.run.as_str())
            .map_err(|e| ctx.fail("invalid_message", e.to_string()))?;
        let task = match self
            .store
            .create_with_urls(&guard.fence(), id.clone(), message, &args.topic, &args.urls)
            .await
        {
            Ok(task) => task,
            // A retry of the same call: the task it created.
            Err(ResearchError::Exists { .. }) => self
                .store
                .load(&ctx.session, &id)
                .await
                .map_err(|e| failure(ctx, &e))?,
            Err(e) => return Err(failure(ctx, &e)),
        };
        drop(guard);
        Ok(ctx.ok(json!({
            "research_task": task.id,
            "phase": task.phase.name(),
            "note": "Deep Research started: a plan will be proposed for the person to approve. Stop here.",
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_turn_shows_only_start_deep_research() {
        let schemas = start_turn_schemas().unwrap();
        assert_eq!(schemas.len(), 1);
        assert_eq!(schemas[0].name, START_DEEP_RESEARCH);
        assert!(
            agent_kernel::tool::names::RESERVED_TOOL_NAMES.contains(&START_DEEP_RESEARCH),
            "the name is reserved in the kernel"
        );
    }

    #[test]
    fn the_runtime_s_own_call_takes_the_prompt_as_its_topic() {
        assert_eq!(
            fallback_arguments("  The topic  "),
            json!({"topic": "The topic"})
        );
        assert_eq!(
            fallback_arguments(" \n "),
            json!({"topic": "(no topic given)"})
        );
        // A topic over the limit is cut on a character boundary; at the
        // limit it is kept whole.
        let long = "é".repeat(MAX_TOPIC_BYTES);
        let args: StartArgs = serde_json::from_value(fallback_arguments(&long)).unwrap();
        assert_eq!(args.topic.len(), MAX_TOPIC_BYTES);
        let over = format!("a{long}");
        let args: StartArgs = serde_json::from_value(fallback_arguments(&over)).unwrap();
        assert_eq!(args.topic.len(), MAX_TOPIC_BYTES - 1);
        let at = "a".repeat(MAX_TOPIC_BYTES);
        let args: StartArgs = serde_json::from_value(fallback_arguments(&at)).unwrap();
        assert_eq!(args.topic, at);
    }

    #[test]
    fn task_ids_are_stable_per_call() {
        let run = RunId::new("run-1").unwrap();
        let c = CallId::new("c1").unwrap();
        assert_eq!(task_id_for(&run, &c), task_id_for(&run, &c));
        assert_ne!(
            task_id_for(&run, &c),
            task_id_for(&run, &CallId::new("c2").unwrap())
        );
    }
}
