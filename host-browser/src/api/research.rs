//! Deep Research for the page (S9): `startResearch`, `readResearch`,
//! `listResearch`, `presentPlan`, `approvePlan` / `editPlan` /
//! `rejectPlan`, `resumeResearch` and `stopResearch`. Every rule (the
//! start turn, the phases as child runs, the narrowing-only edit, the
//! frozen snapshot, the report's evidence, interruption on reload) is the
//! assembly's research driver's; this module converts JavaScript values and
//! holds the session (its tab lock and lease) while research works in it.
//! Subscribers of the session see `{type: "research", task, phase}` events
//! as a task moves, besides the runs of its phases.

use agent_assembly::ResearchDeskError;
use agent_kernel::{RequestId, SessionId};
use agent_research::{PlanDecision, ResearchError, ResearchPlan, TaskId};
use serde_json::json;
use wasm_bindgen::prelude::*;

use super::config::{RunOptions, run_config_for};
use super::errors::{ErrorCode, from_js, js_error, run_error, session_id, to_js};
use super::{AgentRuntime, Inner, promise};

fn task_id(s: &str) -> Result<TaskId, JsValue> {
    TaskId::new(s).map_err(|e| js_error(ErrorCode::InvalidArgument, e))
}

fn request_id(s: &str) -> Result<RequestId, JsValue> {
    RequestId::new(s).map_err(|e| js_error(ErrorCode::InvalidArgument, e))
}

/// The stable code of a research error.
pub(crate) fn research_error(e: ResearchDeskError) -> JsValue {
    let code = match &e {
        ResearchDeskError::Research(r) => match r {
            ResearchError::NotFound { .. } => ErrorCode::NotFound,
            ResearchError::NoSuchRequest { .. } => ErrorCode::NoSuchRequest,
            ResearchError::Plan(_) | ResearchError::BadTopic => ErrorCode::InvalidArgument,
            ResearchError::Transition(_) => ErrorCode::InvalidTransition,
            ResearchError::Storage(s) => super::errors::storage_code(s),
            _ => ErrorCode::InconsistentState,
        },
        ResearchDeskError::Run(_) => {
            let ResearchDeskError::Run(run) = e else {
                return js_error(ErrorCode::RuntimeError, e);
            };
            return run_error(run);
        }
        ResearchDeskError::SessionClosed(_) => ErrorCode::LeaseLost,
        _ => ErrorCode::RuntimeError,
    };
    js_error(code, e)
}

impl Inner {
    /// Research work in `session`, with this tab holding it as one more
    /// user of the hold until the work ends.
    pub(super) async fn researching<T>(
        &self,
        session: &SessionId,
        work: impl AsyncFnOnce(&agent_assembly::Assembly) -> Result<T, ResearchDeskError>,
    ) -> Result<T, JsValue> {
        self.ensure_hold(session).await?;
        let outcome = work(&self.assembly).await.map_err(research_error);
        self.done(session);
        outcome
    }
}

#[wasm_bindgen]
impl AgentRuntime {
    /// Start Deep Research in `session` (S9.3): a research turn shows the
    /// model only `start_deep_research` and ends after it (when the model
    /// answers without it, the runtime makes the call with `prompt` as the
    /// topic). Resolves with `{ runId, task }` once the task exists; the
    /// chat message keeps only that reference (S9.2). Planning goes on in
    /// this tab; subscribers see `research` events, and the plan request
    /// is read with `readResearch` / `presentPlan`.
    #[wasm_bindgen(js_name = startResearch, unchecked_return_type = "Promise<ResearchStart>")]
    pub fn start_research(
        &self,
        session: String,
        prompt: String,
        #[wasm_bindgen(unchecked_param_type = "RunOptions | undefined")] options: JsValue,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let options: RunOptions = if options.is_undefined() || options.is_null() {
                RunOptions::default()
            } else {
                from_js(options, "run options")?
            };
            if options.profile.is_some() || options.turn.is_some() {
                // S9.1: Deep Research shares no profile's tools or Memory.
                return Err(js_error(
                    ErrorCode::InvalidArgument,
                    "startResearch takes no profile or turn layer; Deep Research uses only the model settings",
                ));
            }
            let config = run_config_for(&inner.defaults, &inner.named_models, options)?;
            inner.ensure_hold(&session).await?;
            let started = inner
                .assembly
                .start_research(&session, &prompt, config)
                .await;
            let started = match started {
                Ok(started) => started,
                Err(e) => {
                    inner.done(&session);
                    return Err(research_error(e));
                }
            };
            inner
                .sessions
                .borrow_mut()
                .insert(started.run.clone(), session.clone());
            // Planning, as one more use of the hold that ends with it.
            let planning = inner.clone();
            let task = started.task.clone();
            let planned = session.clone();
            wasm_bindgen_futures::spawn_local(async move {
                if let Err(e) = planning.assembly.advance_research(&planned, &task).await {
                    tracing::warn!(%task, error = %e, "research planning stopped");
                }
                planning.done(&planned);
            });
            to_js(&json!({"runId": started.run.as_str(), "task": started.task.as_str()}))
        })
    }

    /// A research task as the page shows it (phase, plan and its request,
    /// sources with their evidence ids and hashes, gaps, report); reads only.
    #[wasm_bindgen(js_name = readResearch, unchecked_return_type = "Promise<ResearchView>")]
    pub fn read_research(&self, session: String, task: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let task = task_id(&task)?;
            let view = inner
                .assembly
                .research_view(&session, &task)
                .await
                .map_err(research_error)?;
            to_js(&view)
        })
    }

    /// The research tasks of `session`, newest first; reads only.
    #[wasm_bindgen(js_name = listResearch, unchecked_return_type = "Promise<ResearchView[]>")]
    pub fn list_research(&self, session: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let views = inner
                .assembly
                .research_tasks(&session)
                .await
                .map_err(research_error)?;
            to_js(&views)
        })
    }

    /// The plan to show the person, once (S6.4): `null` when there is no
    /// plan request or it was shown already (after a reload, or in
    /// another tab).
    #[wasm_bindgen(js_name = presentPlan, unchecked_return_type = "Promise<ResearchPlan | null>")]
    pub fn present_plan(&self, session: String, task: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let task = task_id(&task)?;
            let plan = inner
                .researching(&session, async |a| a.present_plan(&session, &task).await)
                .await?;
            to_js(&plan)
        })
    }

    /// Approve the plan request `request`: the sources are frozen, read
    /// through the normal URL policy and approval rules, and the report is
    /// written. Resolves with the task at the end.
    #[wasm_bindgen(js_name = approvePlan, unchecked_return_type = "Promise<ResearchView>")]
    pub fn approve_plan(&self, session: String, task: String, request: String) -> js_sys::Promise {
        self.decide_plan(session, task, request, Ok(PlanDecision::Approve))
    }

    /// Approve a narrower `plan` (questions, queries and sources among the
    /// proposed ones, domains and dates within them); a wider one is
    /// refused with `invalid_argument` and changes nothing.
    #[wasm_bindgen(js_name = editPlan, unchecked_return_type = "Promise<ResearchView>")]
    pub fn edit_plan(
        &self,
        session: String,
        task: String,
        request: String,
        #[wasm_bindgen(unchecked_param_type = "ResearchPlan")] plan: JsValue,
    ) -> js_sys::Promise {
        let plan = from_js::<ResearchPlan>(plan, "plan").map(PlanDecision::Edit);
        self.decide_plan(session, task, request, plan)
    }

    /// Reject the plan request `request`: nothing is read.
    #[wasm_bindgen(js_name = rejectPlan, unchecked_return_type = "Promise<ResearchView>")]
    pub fn reject_plan(&self, session: String, task: String, request: String) -> js_sys::Promise {
        self.decide_plan(session, task, request, Ok(PlanDecision::Reject))
    }

    /// Continue an interrupted task (the person chose Resume; a reload
    /// never continues one by itself, S9.6).
    #[wasm_bindgen(js_name = resumeResearch, unchecked_return_type = "Promise<ResearchView>")]
    pub fn resume_research(&self, session: String, task: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let task = task_id(&task)?;
            let view = inner
                .researching(&session, async |a| a.resume_research(&session, &task).await)
                .await?;
            to_js(&view)
        })
    }

    /// Stop a task (S9.6): before its sources are frozen it is cancelled;
    /// after, reads in flight are let go, a synthesis run is stopped, and
    /// the report is what was read, with the gap `stopped` (no synthesis by
    /// the model). A stopped task never resumes.
    #[wasm_bindgen(js_name = stopResearch, unchecked_return_type = "Promise<ResearchView>")]
    pub fn stop_research(&self, session: String, task: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let task = task_id(&task)?;
            let view = inner
                .researching(&session, async |a| a.stop_research(&session, &task).await)
                .await?;
            to_js(&view)
        })
    }
}

impl AgentRuntime {
    fn decide_plan(
        &self,
        session: String,
        task: String,
        request: String,
        decision: Result<PlanDecision, JsValue>,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let task = task_id(&task)?;
            let request = request_id(&request)?;
            let decision = decision?;
            let view = inner
                .researching(&session, async |a| {
                    a.decide_plan(&session, &task, &request, decision).await
                })
                .await?;
            to_js(&view)
        })
    }
}
