//! Execution of an approved plan (S9.4, S9.5): read every source of the
//! frozen snapshot that is not settled yet, through the host's read tool
//! (`fetch_url`, by its address and definition: protocol types only), with
//! the domain capability minted at approval, and record each outcome in the
//! task as evidence or a gap.
//!
//! Plan approval bypasses nothing: each read is put to the approval policy
//! (`agent_capabilities::decide`) like any call, and only an automatic
//! decision is dispatched; the read tool's shell verifies the capability
//! (with the model's caveats); its URL policy judges the address. A read
//! tool that is not read-only is refused outright.
//!
//! The snapshot is the journal of execution: a source is pending, read or
//! failed, each change one fenced commit. A read interrupted in flight left
//! its source pending and is simply read again on Resume (reads are
//! read-only and idempotent, S2.3); settled sources are never read twice.

use agent_capabilities::{
    ApprovalIdentity, ApprovalMode, Decision, PolicyInput, Target, TargetScope, Verifier,
    canonical_bytes, is_read_only, sha256_hex,
};
use agent_kernel::host::Fence;
use agent_kernel::protocol::{
    InvocationDraft, ToolAddr, ToolDefinition, ToolFailure, ToolInvocation, ToolMsg, ToolResult,
};
use agent_kernel::tool::CancelToken;
use agent_kernel::{CallId, RunId};
use serde_json::json;

use crate::plan::{parse_source, url_host};
use crate::scope::{ExecutionScope, ReadTool};
use crate::store::{ResearchError, ResearchStore};
use crate::task::{Event, Phase, ResearchTask, TaskId, TransitionError};

/// The host's read tool: its actor and the definition it was registered with.
#[derive(Debug, Clone)]
pub struct ReadChannel {
    pub addr: ToolAddr,
    pub definition: ToolDefinition,
}

/// Everything one execution step needs.
pub struct Execution<'a> {
    pub store: &'a ResearchStore,
    pub fence: &'a Fence,
    pub task: &'a TaskId,
    /// The execution run (labelled `research`) the capabilities belong to.
    pub run: &'a RunId,
    pub scope: &'a ExecutionScope,
    /// The run authority's verifier, handed to the read tool.
    pub verifier: &'a Verifier,
    pub read: &'a ReadChannel,
    pub mode: ApprovalMode,
    /// At most this many reads now (the run's remaining tool-call budget).
    pub max_reads: usize,
    pub cancel: CancelToken,
}

/// Where execution stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every source is settled; the task moved on to `Synthesizing`.
    Finished,
    /// `max_reads` reads were made and sources remain.
    BudgetSpent { remaining: usize },
    /// The cancellation signal fired; sources remain pending.
    Cancelled { remaining: usize },
}

/// Execution could not go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutionError {
    #[error("the read tool {tool:?} is not read-only; execution has read-only effects only (S9.4)")]
    NotReadOnly { tool: String },
    #[error("the read tool's definition does not fingerprint: {0}")]
    Definition(String),
    #[error("the read tool's actor is gone ({0}); the host must restart it before Resume")]
    ReaderGone(String),
    #[error(transparent)]
    Research(#[from] ResearchError),
}

fn pending(task: &ResearchTask) -> Vec<String> {
    task.snapshot
        .iter()
        .flat_map(|s| &s.sources)
        .filter(|s| s.read.is_none() && s.failed.is_none())
        .map(|s| s.url.clone())
        .collect()
}

/// The call id of the read of `url` in run `run`: stable, so a retry is
/// the same call.
fn call_id(run: &RunId, url: &str) -> CallId {
    let digest = sha256_hex(format!("{run}\n{url}").as_bytes());
    // Invariant: `read-` and 24 hex digits is always a valid call id.
    CallId::new(format!("read-{}", &digest[..24]))
        .unwrap_or_else(|_| unreachable!("read- and 24 hex digits is a valid call id"))
}

fn refused(tool: &str, code: &str, message: String) -> ToolResult {
    ToolResult::Error(ToolFailure {
        code: code.to_owned(),
        message,
        retryable: false,
        trust: agent_capabilities::Trust::Internal,
        provenance: agent_kernel::protocol::Provenance {
            origin: agent_capabilities::Origin::Builtin.to_string(),
            tool: tool.to_owned(),
            ..Default::default()
        },
        effect_may_have_happened: false,
    })
}

impl Execution<'_> {
    /// Read pending sources until all are settled (then `Synthesizing`),
    /// the budget is spent, or the signal fires.
    pub async fn run(&self) -> Result<Outcome, ExecutionError> {
        let def = &self.read.definition;
        if !is_read_only(&def.effects) {
            return Err(ExecutionError::NotReadOnly {
                tool: def.name.clone(),
            });
        }
        let fingerprint = def
            .fingerprint()
            .map_err(|e| ExecutionError::Definition(e.to_string()))?;
        let task = self.store.load(&self.fence.session, self.task).await?;
        if task.phase != Phase::Executing {
            return Err(ResearchError::Transition(TransitionError::Illegal {
                phase: task.phase.name(),
                event: "execute",
            })
            .into());
        }
        let sources = pending(&task);
        // `i` is also the number of reads made so far in this step.
        for (i, url) in sources.iter().enumerate() {
            let remaining = sources.len() - i;
            if self.cancel.is_cancelled() {
                return Ok(Outcome::Cancelled { remaining });
            }
            if i >= self.max_reads {
                return Ok(Outcome::BudgetSpent { remaining });
            }
            // A stop does not wait for a read in flight: the read is let go
            // and its source stays pending (no evidence is recorded).
            let read = self.read_one(url, &fingerprint);
            let cancelled = self.cancel.cancelled();
            futures::pin_mut!(read, cancelled);
            let result = match futures::future::select(read, cancelled).await {
                futures::future::Either::Left((result, _)) => result?,
                futures::future::Either::Right(((), _)) => {
                    return Ok(Outcome::Cancelled { remaining });
                }
            };
            let result = self.check_final_url(url, result);
            self.store
                .record_fetch_result(self.fence, self.task, url, &result, None)
                .await?;
        }
        self.store
            .apply(self.fence, self.task, Event::FinishExecution)
            .await?;
        Ok(Outcome::Finished)
    }

    /// A read that redirects outside the approved (and filtered) domains
    /// is not evidence: its final URL is verified with the same capability
    /// as the read itself, and a refusal turns the read into a gap.
    fn check_final_url(&self, url: &str, result: ToolResult) -> ToolResult {
        let ToolResult::Success(success) = &result else {
            return result;
        };
        let Some(final_url) = success.provenance.final_url.as_deref() else {
            return result;
        };
        if final_url == url {
            return result;
        }
        match self.scope.authorize(
            self.verifier,
            self.run.as_str(),
            &ReadTool {
                name: self.read.definition.name.clone(),
                fingerprint: self.scope.domains().grant().fingerprint.clone(),
                origin: self.read.definition.origin.clone(),
            },
            final_url,
            None,
            self.store.now_ms(),
        ) {
            Ok(_) => result,
            Err(e) => refused(
                &self.read.definition.name,
                "redirected_outside_plan",
                format!(
                    "the read ended at {}, outside the approved sources' scope ({e}); it is not used as evidence",
                    final_url.chars().take(200).collect::<String>()
                ),
            ),
        }
    }

    async fn read_one(
        &self,
        url: &str,
        fingerprint: &agent_capabilities::Fingerprint,
    ) -> Result<ToolResult, ExecutionError> {
        let def = &self.read.definition;
        let parsed = match parse_source(url) {
            Ok(parsed) => parsed,
            Err(e) => return Ok(refused(&def.name, "invalid_url", e.to_string())),
        };
        let origin = parsed.origin().ascii_serialization();
        let target = Target::Url {
            origin: origin.clone(),
            host: url_host(&parsed),
        };
        let scope = TargetScope::Origins {
            origins: [origin].into(),
        };
        let identity = ApprovalIdentity {
            origin: def.origin.clone(),
            provider: def.provider.clone(),
            tool: def.name.clone(),
            fingerprint: fingerprint.clone(),
            effects: def.effects.clone(),
            scope: scope.clone(),
        };
        let decision = agent_capabilities::decide(
            self.mode,
            &PolicyInput {
                identity,
                allowed: true,
                trusted_external: false,
                unknown_mcp_function: false,
                target_summary: target.summary(),
            },
        );
        match decision {
            Decision::Automatic { .. } => {}
            Decision::AskOnce { reason, .. } => {
                return Ok(refused(&def.name, "approval_required", reason));
            }
            Decision::Deny { reason } => return Ok(refused(&def.name, "denied", reason)),
        }
        let arguments = json!({ "url": url });
        let args_hash = match canonical_bytes(&arguments) {
            Ok(bytes) => sha256_hex(&bytes),
            Err(e) => return Ok(refused(&def.name, "invalid_url", e.to_string())),
        };
        let call_id = call_id(self.run, url);
        let invocation = ToolInvocation {
            draft: InvocationDraft {
                run: self.run.clone(),
                session: self.fence.session.clone(),
                idempotency_key: format!("{}/{}", self.run, call_id),
                call_id,
                tool: def.name.clone(),
                fingerprint: fingerprint.clone(),
                arguments,
                args_hash,
                effects: def.effects.clone(),
                idempotency: def.idempotency,
                sensitivity: def.sensitivity,
                origin: def.origin.clone(),
                provider: def.provider.clone(),
                target,
                scope,
                attempt: 1,
            },
            capability: self.scope.domains().clone(),
            verifier: self.verifier.clone(),
            progress: Default::default(),
        };
        self.read
            .addr
            .ask(|reply| ToolMsg::Invoke { invocation, reply })
            .await
            .map_err(|e| ExecutionError::ReaderGone(e.to_string()))
    }
}
