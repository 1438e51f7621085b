//! The one view of a run that every host shows: `agentrt show` renders it
//! as text or JSON, the browser's `readRun` hands it to the page. Read
//! through the [`Runtime`] (hash-checked blobs), never from raw storage keys.

use agent_kernel::journal::{CallState, JournalRecord};
use agent_kernel::protocol::ToolResult;
use agent_kernel::run::{Activity, ActivityKind, AgentRun, Evidence, PendingKind, PendingRequest};
use agent_kernel::{CallId, RunId};
use agent_supervisor::builtin::plan::Plan;
use agent_supervisor::{RunError, Runtime};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// The run card (S6, S12): one run with its activities, its journal (each
/// call with the target summary journaled before it was dispatched, so an
/// automatic external write shows what it wrote to), the pending requests,
/// the evidence with provenance, the plan's steps and the final answer.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RunView {
    pub run: AgentRun,
    /// The person's prompt (the run record keeps only its hash).
    pub prompt: String,
    pub activities: Vec<Activity>,
    pub journal: Vec<JournalRecord>,
    pub pending: Vec<PendingView>,
    /// What each tool result was, where it came from and how far it is
    /// trusted (S5.4), in the order the results arrived.
    pub evidence: Vec<Evidence>,
    /// The final answer, once the run has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// True when `output` is an answer a Stop cut off mid-stream: what had
    /// streamed before it, kept and shown marked incomplete.
    pub output_incomplete: bool,
    /// The latest `update_plan`: steps with their statuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// Why each failed call failed (the tool's code and message from its
    /// result blob, else the journal's error code), in journal order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<CallFailure>,
    /// What the model reasoned, round by round, apart from the answer
    /// (S13.4): never part of `output`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<RoundReasoning>,
}

/// The reasoning a model streamed in one round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RoundReasoning {
    pub round: u64,
    pub text: String,
}

/// Why one call failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CallFailure {
    pub call_id: CallId,
    /// `code: message` of the tool's error, or the journal's error code.
    pub reason: String,
}

/// A pending request with an `ask_user` question's text and answer schema
/// resolved (its `choices` are in the request itself). Serialized as the
/// request with `question_text` and `answer_schema` added to its `kind`.
#[derive(Debug, Clone)]
pub struct PendingView {
    pub request: PendingRequest,
    pub question_text: Option<String>,
    pub answer_schema: Option<Value>,
}

impl RunView {
    /// Read `run` through `runtime`.
    pub async fn read(runtime: &Runtime, run: &RunId) -> Result<RunView, RunError> {
        let record = runtime.run(run).await?;
        let journal = runtime.journal(run).await?;
        let mut pending = Vec::new();
        for p in runtime.pending(run).await? {
            pending.push(PendingView::read(runtime, p).await);
        }
        let mut failures = Vec::new();
        for j in &journal {
            let (CallState::Failed, Some(blob)) = (j.state, &j.result) else {
                continue;
            };
            let message = runtime
                .blob(run, blob)
                .await
                .ok()
                .and_then(|b| serde_json::from_slice::<ToolResult>(&b).ok())
                .and_then(|r| match r {
                    ToolResult::Error(f) => Some(format!("{}: {}", f.code, f.message)),
                    ToolResult::Success(_) => None,
                });
            if let Some(reason) = message.or_else(|| j.error.as_ref().map(|e| e.code.clone())) {
                failures.push(CallFailure {
                    call_id: j.call_id.clone(),
                    reason,
                });
            }
        }
        let prompt =
            String::from_utf8_lossy(&runtime.blob(run, &record.prompt).await?).into_owned();
        let activities = runtime.activities(run).await?;
        let mut reasoning = Vec::new();
        for a in &activities {
            if let ActivityKind::ModelResponse {
                round,
                reasoning: Some(blob),
                ..
            } = &a.kind
            {
                let text = String::from_utf8_lossy(&runtime.blob(run, blob).await?).into_owned();
                reasoning.push(RoundReasoning {
                    round: *round,
                    text,
                });
            }
        }
        let output_incomplete = activities.iter().any(|a| {
            matches!(
                a.kind,
                ActivityKind::ModelResponse {
                    incomplete: true,
                    ..
                }
            )
        });
        Ok(RunView {
            output_incomplete,
            prompt,
            activities,
            reasoning,
            pending,
            output: runtime.output(run).await?,
            plan: match runtime.plan(run).await? {
                None => None,
                Some(value) => {
                    Some(
                        serde_json::from_value(value).map_err(|e| RunError::Inconsistent {
                            run: run.clone(),
                            detail: format!("the stored plan does not decode ({e})"),
                        })?,
                    )
                }
            },
            evidence: {
                let mut evidence = runtime.evidence(run).await?;
                evidence.sort_by_key(|e| e.at_ms);
                evidence
            },
            journal,
            failures,
            run: record,
        })
    }

    /// The pending requests themselves, without the resolved question texts.
    pub fn pending_requests(&self) -> Vec<&PendingRequest> {
        self.pending.iter().map(|p| &p.request).collect()
    }
}

impl PendingView {
    /// Resolve `request`'s question text and answer schema through
    /// `runtime`; a blob that cannot be read leaves its field empty.
    pub async fn read(runtime: &Runtime, request: PendingRequest) -> PendingView {
        let mut question_text = None;
        let mut answer_schema = None;
        // An input's question, or an elicitation's message (the server's
        // text, `external_untrusted`) and requested schema.
        let blobs = match &request.kind {
            PendingKind::Input {
                question, schema, ..
            } => Some((question, schema.as_ref())),
            PendingKind::Elicitation {
                message, schema, ..
            } => Some((message, Some(schema))),
            _ => None,
        };
        if let Some((question, schema)) = blobs {
            if let Ok(bytes) = runtime.blob(&request.run, question).await {
                question_text = Some(
                    serde_json::from_slice::<Value>(&bytes)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned()),
                );
            }
            if let Some(schema) = schema
                && let Ok(bytes) = runtime.blob(&request.run, schema).await
                && let Ok(schema) = serde_json::from_slice::<Value>(&bytes)
            {
                answer_schema = Some(schema);
            }
        }
        PendingView {
            request,
            question_text,
            answer_schema,
        }
    }

    /// The JSON the page sees.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        let mut value = serde_json::to_value(&self.request)?;
        if let Some(kind) = value.get_mut("kind").and_then(Value::as_object_mut) {
            if let Some(text) = &self.question_text {
                kind.insert("question_text".into(), Value::String(text.clone()));
            }
            if let Some(schema) = &self.answer_schema {
                kind.insert("answer_schema".into(), schema.clone());
            }
        }
        Ok(value)
    }
}

/// The TypeScript of the JSON [`PendingView::to_json`] writes: the
/// kernel's `PendingRecord`, its input kind with the two resolved fields
/// added (`PendingRequest` and `PendingKind` in the browser API).
#[cfg(feature = "ts")]
impl ts_rs::TS for PendingView {
    type WithoutGenerics = PendingView;
    type OptionInnerType = PendingView;

    fn docs() -> Option<String> {
        Some(
            "/**\n * A request waiting for the person (S6.4), an input's question resolved.\n */\n"
                .to_owned(),
        )
    }
    fn name(_: &ts_rs::Config) -> String {
        "PendingRequest".to_owned()
    }
    fn inline(cfg: &ts_rs::Config) -> String {
        format!(
            "Omit<{}, \"kind\"> & {{ kind: PendingKind }}",
            <PendingRequest as ts_rs::TS>::name(cfg)
        )
    }
    fn decl(cfg: &ts_rs::Config) -> String {
        let kind = <PendingKind as ts_rs::TS>::name(cfg);
        let schema = <Value as ts_rs::TS>::name(cfg);
        format!(
            "type PendingRequest = {};\n\
             /** What the person is asked for; an input's question text and answer \
             schema resolved from their blobs. */\n\
             export type PendingKind = Exclude<{kind}, {{ kind: \"input\" | \"elicitation\" }}> \
             | (Extract<{kind}, {{ kind: \"input\" | \"elicitation\" }}> & \
             {{ question_text?: string; answer_schema?: {schema} }});",
            Self::inline(cfg)
        )
    }
    fn decl_concrete(cfg: &ts_rs::Config) -> String {
        Self::decl(cfg)
    }
    fn visit_dependencies(v: &mut impl ts_rs::TypeVisitor) {
        v.visit::<PendingRequest>();
        v.visit::<PendingKind>();
        v.visit::<Value>();
    }
    fn output_path() -> Option<std::path::PathBuf> {
        Some("PendingRequest.ts".into())
    }
}

impl Serialize for PendingView {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json()
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}
