//! The tools the supervisor carries out itself rather than dispatching:
//! `ask_user` (a pending input request; the run waits for the answer) and
//! `update_plan` (the run's plan replaced). Their definitions and argument
//! rules are in [`crate::builtin`]; journaling them and the run's state are
//! here.

use serde_json::{Value, json};

use agent_capabilities::Trust;
use agent_kernel::host::{BlobRef, StorageExt};
use agent_kernel::ids::{CallId, RequestId};
use agent_kernel::journal::{CallState, JournalRecord, idempotency_key};
use agent_kernel::protocol::ToolResult;
use agent_kernel::run::{ActivityKind, PendingKind, PendingRequest, RunStatus};

use super::{Supervisor, arguments_value};
use crate::blob::{put_blob, put_json_blob};
use crate::builtin::ask_user::AskUserRequest;
use crate::builtin::plan::Plan;
use crate::builtin::{self, ASK_USER, UPDATE_PLAN};
use crate::error::RunError;
use crate::message::AssistantToolCall;
use crate::store::{Tx, request_id};

/// What an `ask_user` pending request names, its blobs already stored.
struct InputBlobs {
    question: BlobRef,
    schema: Option<BlobRef>,
    choices: Option<Vec<String>>,
}

pub(crate) fn input_request(call: &CallId) -> Result<RequestId, RunError> {
    request_id("input", call)
}
impl Supervisor {
    pub(super) async fn ask_user(
        &mut self,
        call_id: CallId,
        call: AssistantToolCall,
    ) -> Result<(), RunError> {
        let question = match AskUserRequest::from_arguments(&arguments_value(&call)) {
            Ok(question) => question,
            Err(e) => {
                let result = ToolResult::error("invalid_arguments", e.to_string(), ASK_USER);
                return self
                    .outcome(None, &call_id, &call, result, |_| Ok(()))
                    .await;
            }
        };
        let record = self
            .builtin_record(&call_id, ASK_USER, &call.arguments)
            .await?;
        let pending = self.input_request_blobs(&question).await?;
        let mut tx = self.writer.begin();
        tx.put_prepared(&record, true);
        self.request_input(&mut tx, &call_id, pending)?;
        self.writer.commit(tx).await
    }

    /// The question's text and answer schema stored as blobs (durable before
    /// the pending request that names them), with its choices.
    async fn input_request_blobs(&self, question: &AskUserRequest) -> Result<InputBlobs, RunError> {
        let storage = self.ctx.host.storage.clone();
        let text = put_blob(&*storage, question.question.clone().into_bytes()).await?;
        let schema = match &question.answer_schema {
            Some(schema) => Some(put_json_blob(&*storage, schema).await?),
            None => None,
        };
        Ok(InputBlobs {
            question: text,
            schema,
            choices: question.choices.clone(),
        })
    }

    fn request_input(
        &self,
        tx: &mut Tx,
        call_id: &CallId,
        blobs: InputBlobs,
    ) -> Result<(), RunError> {
        let request = input_request(call_id)?;
        tx.put(&PendingRequest {
            run: self.id(),
            id: request.clone(),
            kind: PendingKind::Input {
                call_id: call_id.clone(),
                question: blobs.question,
                schema: blobs.schema,
                choices: blobs.choices,
            },
            created_at_ms: tx.now(),
            presented: false,
        });
        tx.activity(ActivityKind::InputRequested { request });
        tx.status(RunStatus::AwaitingInput, None)
    }

    /// A `prepared` ask_user record found while running: wait for the answer
    /// again, asking the same question (choices and schema included).
    pub(super) async fn ask_user_again(&mut self, record: JournalRecord) -> Result<(), RunError> {
        let request = input_request(&record.call_id)?;
        let run = self.id();
        let existing: Option<PendingRequest> = self
            .ctx
            .host
            .storage
            .get_record(&format!("{run}/{request}"))
            .await?;
        if existing.is_some() {
            let mut tx = self.writer.begin();
            tx.status(RunStatus::AwaitingInput, None)?;
            return self.writer.commit(tx).await;
        }
        let call = self
            .pending_call(&record.call_id)?
            .ok_or_else(|| self.inconsistent("ask_user call is not pending".into()))?;
        let question = match AskUserRequest::from_arguments(&arguments_value(&call)) {
            Ok(question) => question,
            Err(e) => {
                let call_id = record.call_id.clone();
                let result = ToolResult::error("invalid_arguments", e.to_string(), ASK_USER);
                return self
                    .outcome(Some(record), &call_id, &call, result, |_| Ok(()))
                    .await;
            }
        };
        let pending = self.input_request_blobs(&question).await?;
        let mut tx = self.writer.begin();
        self.request_input(&mut tx, &record.call_id, pending)?;
        self.writer.commit(tx).await
    }

    pub(super) async fn update_plan(
        &mut self,
        call_id: CallId,
        call: AssistantToolCall,
    ) -> Result<(), RunError> {
        self.update_plan_with(call_id, call, None).await
    }

    pub(super) async fn update_plan_with(
        &mut self,
        call_id: CallId,
        call: AssistantToolCall,
        existing: Option<JournalRecord>,
    ) -> Result<(), RunError> {
        let plan = match Plan::from_arguments(&arguments_value(&call)) {
            Ok(plan) => plan,
            Err(e) => {
                let result = ToolResult::error("invalid_arguments", e.to_string(), UPDATE_PLAN);
                return self
                    .outcome(existing, &call_id, &call, result, |_| Ok(()))
                    .await;
            }
        };
        let fresh = existing.is_none();
        // `prepared` becomes `running`, then `committed`, with the outcome.
        let record = match existing {
            Some(r) => r,
            None => {
                self.builtin_record(&call_id, UPDATE_PLAN, &call.arguments)
                    .await?
            }
        };
        let plan_blob = put_json_blob(&*self.ctx.host.storage, &plan).await?;
        let result = builtin::success(
            UPDATE_PLAN,
            "builtin",
            Trust::Internal,
            json!({"plan_updated": true}),
        );
        self.outcome(Some(record), &call_id, &call, result, |tx| {
            if fresh {
                tx.run.usage.tool_calls += 1;
            }
            tx.run.plan = Some(plan_blob.clone());
            tx.activity(ActivityKind::PlanUpdated { plan: plan_blob });
            Ok(())
        })
        .await
    }

    async fn builtin_record(
        &self,
        call_id: &CallId,
        tool: &str,
        arguments: &str,
    ) -> Result<JournalRecord, RunError> {
        let fingerprint = builtin::fingerprint(tool)
            .ok_or_else(|| self.inconsistent(format!("no definition for {tool}")))?;
        let value: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        let canonical = agent_capabilities::canonical_json(&value)
            .map_err(|e| self.inconsistent(format!("arguments are not canonical JSON ({e})")))?;
        let args = put_blob(&*self.ctx.host.storage, canonical.into_bytes()).await?;
        Ok(JournalRecord {
            run: self.id(),
            call_id: call_id.clone(),
            tool: tool.to_owned(),
            fingerprint,
            args,
            effects: Default::default(),
            idempotency: agent_capabilities::Idempotency::Idempotent,
            attempt: 1,
            state: CallState::Prepared,
            idempotency_key: idempotency_key(&self.writer.run.id, call_id),
            target_summary: None,
            result: None,
            receipts: Vec::new(),
            error: None,
            updated_at_ms: self.writer.now(),
        })
    }
}
