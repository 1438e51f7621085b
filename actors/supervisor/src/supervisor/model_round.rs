//! One model round: the budget and lifecycle checks before it, the request
//! announced with its checkpoint, the streamed response (repeated when the
//! stream broke off), and the response made durable with the conversation.
//! Also the conversation's commits ([`Supervisor::commit_transcript`]) that
//! every outcome goes through, and the tool schemas the model is offered.

use std::sync::Arc;

use agent_kernel::actor::{ActorError, Inbox};
use agent_kernel::budget::BudgetDimension;
use agent_kernel::maybe_send::{BoxFuture, boxed};
use agent_kernel::protocol::{ModelToolSchema, ToolsMsg};
use agent_kernel::run::{ActivityKind, CheckpointStage, RunStatus, StopReason};

use super::{Interruption, Msg, Supervisor, Watched};
use crate::builtin;
use crate::error::RunError;
use crate::message::{Message, Tail};
use crate::provider::{FinishReason, ModelRequest, ModelUsage, collect_response_apart};
use crate::store::{RunEvent, Tx};

impl Supervisor {
    pub(super) async fn model_round(&mut self, inbox: &Inbox<Msg>) -> Result<(), RunError> {
        // The model sees the whole window: read what a resume left unread.
        let run = self.id();
        self.transcript
            .complete(&*self.ctx.host.storage, &run)
            .await?;
        // The session's oldest turns are summarised first when the
        // context rule asked this run to (S12.4).
        if let Some(due) = self.summary_due {
            return self.compact(inbox, due).await;
        }
        let round = self.transcript.assistant_turns() as u64 + 1;
        if let Err(e) = self.config.validate() {
            return self.fail_runtime("supervisor", &e.to_string()).await;
        }
        if let Err(dim) = self.config.budget.check_hard_limits(&self.usage_now()) {
            return self.exhaust(dim).await;
        }
        if !self.ctx.host.lifecycle.is_online() {
            return self.interrupt(Interruption::Offline).await;
        }
        let tools = match self.schemas().await {
            Ok(t) => t,
            Err(e) => {
                let actor = self.ctx.tools.name().to_owned();
                return self.fail_runtime(&actor, &e.to_string()).await;
            }
        };
        if self.request_announced.take() != Some(round) {
            let mut tx = self.writer.begin();
            tx.activity(ActivityKind::ModelRequest { round });
            tx.checkpoint(
                CheckpointStage::BeforeModelRequest { round },
                self.transcript_ref.clone(),
            );
            self.writer.commit(tx).await?;
        }

        let request = ModelRequest {
            model: self.config.model.model.clone(),
            system: match self.transcript.messages().first() {
                Some(Message::System { .. }) => None,
                _ => self.system.clone(),
            },
            messages: self.transcript.messages().clone(),
            tools,
            temperature: self.config.model.temperature,
            max_output_tokens: self.config.model.max_output_tokens,
            reasoning: self.config.model.reasoning,
        };
        let mut repeats = 0u32;
        // What has streamed of this round's answer, kept if a Stop cuts it
        // off (issue 37 part 6).
        let streamed: Arc<std::sync::Mutex<String>> = Arc::default();
        let response = loop {
            // A run that names a provider the host no longer configures
            // (the page opened again without it) fails with that reason.
            let provider = crate::provider::set::resolve(
                &self.ctx.provider,
                self.config.model.provider.as_deref(),
            );
            let events = self.ctx.events.clone();
            let run = self.id();
            let req = request.clone();
            let so_far = streamed.clone();
            if let Ok(mut text) = so_far.lock() {
                // A repeated round streams its answer again from the start.
                text.clear();
            }
            let mut fut: BoxFuture<'static, _> = boxed(async move {
                let stream = provider?.stream(req).await?;
                let reasoning_events = events.clone();
                let reasoning_run = run.clone();
                collect_response_apart(
                    stream,
                    |text| {
                        if let Ok(mut kept) = so_far.lock() {
                            kept.push_str(text);
                        }
                        events.emit(RunEvent::TextDelta {
                            run: run.clone(),
                            text: text.to_owned(),
                        });
                    },
                    |text| {
                        reasoning_events.emit(RunEvent::ReasoningDelta {
                            run: reasoning_run.clone(),
                            text: text.to_owned(),
                        });
                    },
                )
                .await
            });
            match self.watch(inbox, &mut fut).await? {
                Watched::Done(Ok(response)) => break response,
                // Nothing of a broken round was committed (the response becomes
                // durable only once complete), so it may simply be repeated.
                Watched::Done(Err(e))
                    if e.round_may_repeat() && repeats < self.ctx.options.model_round_repeats =>
                {
                    repeats += 1;
                    tracing::warn!(
                        round,
                        repeats,
                        "model stream broke off; repeating the round"
                    );
                }
                // Down or overloaded past the retry bound: nothing of the
                // round was committed; the run waits for Resume (S13.2).
                Watched::Done(Err(e)) if e.is_outage() => {
                    let why = Interruption::ProviderUnavailable {
                        provider: self.ctx.provider.name().to_owned(),
                        message: e.to_string(),
                    };
                    return self.interrupt(why).await;
                }
                Watched::Done(Err(e)) => return self.fail_runtime("model", &e.to_string()).await,
                Watched::Stop(reply) => {
                    let text = streamed.lock().map(|t| t.clone()).unwrap_or_default();
                    return self.cancel_mid_answer(reply, round, text).await;
                }
                Watched::Interrupt(reason) => return self.interrupt(reason).await,
                // Nothing of the round was committed: it simply ends with the run.
                Watched::OutOfTime => return self.exhaust(BudgetDimension::Duration).await,
            }
        };

        // The request shares the conversation: let it go, so that appending
        // to the conversation copies nothing.
        drop(request);
        let mut response = response;
        if let Some(ending) = &self.config.ending_call {
            // S9.3: the turn's one call, the model's or the runtime's own.
            response.tool_calls = ending.calls(self.writer.run.id.as_str(), &response.tool_calls);
        }
        let mut tx = self.writer.begin();
        let text_blob =
            (!response.text.is_empty()).then(|| tx.blob(response.text.clone().into_bytes()));
        let transcript = vec![Message::Assistant {
            content: (!response.text.is_empty()).then(|| response.text.clone()),
            tool_calls: response.tool_calls.clone(),
            native: response.native.take(),
        }];
        // The reasoning is kept apart: its own blob on the activity, never
        // the answer and never the conversation (S13.4).
        let reasoning_blob = (!response.reasoning.is_empty())
            .then(|| tx.blob(std::mem::take(&mut response.reasoning).into_bytes()));
        add_model_usage(&mut tx.run.usage, &response.usage);
        tx.activity(ActivityKind::ModelResponse {
            round,
            text: text_blob.clone(),
            tool_calls: u32::try_from(response.tool_calls.len()).unwrap_or(u32::MAX),
            reasoning: reasoning_blob,
            incomplete: false,
        });
        if !response.tool_calls.is_empty() {
            if let Err(dim) = self
                .config
                .budget
                .check_new_round(&self.writer.live_usage(tx.run.usage))
            {
                if text_blob.is_some() {
                    tx.run.output = text_blob;
                } else {
                    self.set_output_so_far(&mut tx).await?;
                }
                tx.status(
                    RunStatus::Failed,
                    Some(StopReason::BudgetExhausted { dimension: dim }),
                )?;
                return self
                    .commit_transcript(
                        tx,
                        transcript,
                        CheckpointStage::AfterModelResponse { round },
                    )
                    .await;
            }
            tx.run.usage.tool_rounds += 1;
            // The response goes durable with the round's first call
            // (`running` before dispatch, an approval request, an outcome
            // ...): a crash before then repeats the round, as a crash during
            // the request does.
            let staged = self.transcript.stage(transcript, |b| tx.blob(b))?;
            let blob = staged.head().clone();
            tx.checkpoint(CheckpointStage::AfterModelResponse { round }, blob.clone());
            self.writer.defer(tx)?;
            self.transcript.apply(staged);
            self.transcript_ref = blob;
            return Ok(());
        }
        // A final answer: the run ends in the same commit as the answer,
        // with the model's finish reason as its stop reason (S13).
        let (status, reason) = final_status(response.finish.as_ref(), self.ctx.provider.name());
        tx.run.output = Some(match text_blob {
            Some(blob) => blob,
            None => tx.blob(Vec::new()),
        });
        tx.status(status, Some(reason))?;
        self.commit_transcript(
            tx,
            transcript,
            CheckpointStage::AfterModelResponse { round },
        )
        .await
    }

    async fn schemas(&mut self) -> Result<Arc<[ModelToolSchema]>, ActorError> {
        if let Some(s) = &self.schemas {
            return Ok(s.clone());
        }
        if !self.config.mode.offers_tools() {
            let none: Arc<[ModelToolSchema]> = Arc::new([]);
            self.schemas = Some(none.clone());
            return Ok(none);
        }
        let run = self.id();
        let config = self.config.tool_config();
        let mut schemas = self
            .ctx
            .tools
            .ask(|reply| ToolsMsg::Schemas { run, config, reply })
            .await?;
        builtin::add_schemas(&mut schemas);
        schemas.retain(|s| self.config.allows(&s.name));
        let schemas: Arc<[ModelToolSchema]> = schemas.into();
        self.schemas = Some(schemas.clone());
        Ok(schemas)
    }

    /// Store the messages added to the conversation as its new newest
    /// segment (the blob durable before the checkpoint naming it), checkpoint
    /// it in `tx`, and commit; only then does the conversation in memory grow.
    pub(super) async fn commit_transcript(
        &mut self,
        mut tx: Tx,
        added: Vec<Message>,
        stage: CheckpointStage,
    ) -> Result<(), RunError> {
        // When this append answers the last of the round's calls and the
        // next model round would start (the same checks as `model_round`),
        // its request activity and checkpoint go in this batch: one commit
        // less per round, and the result is still durable before the model
        // sees it.
        let announce = (tx.run.status == RunStatus::Running
            && self.config.ending_call.is_none()
            && self.transcript.tail_after(&added) == Tail::ModelNext
            && self.schemas.is_some()
            && self.config.validate().is_ok()
            && self
                .config
                .budget
                .check_hard_limits(&self.writer.live_usage(tx.run.usage))
                .is_ok()
            && self.ctx.host.lifecycle.is_online())
        .then(|| self.transcript.assistant_turns() as u64 + 1);
        let staged = self.transcript.stage(added, |b| tx.blob(b))?;
        let blob = staged.head().clone();
        tx.checkpoint(stage, blob.clone());
        if let Some(round) = announce {
            tx.activity(ActivityKind::ModelRequest { round });
            tx.checkpoint(CheckpointStage::BeforeModelRequest { round }, blob.clone());
        }
        self.writer.commit(tx).await?;
        self.transcript.apply(staged);
        self.transcript_ref = blob;
        self.request_announced = announce;
        Ok(())
    }
}

/// Add one round's reported tokens to the run's usage (saturating).
pub(super) fn add_model_usage(usage: &mut agent_kernel::run::Usage, round: &ModelUsage) {
    let pairs = [
        (&mut usage.input_tokens, round.input_tokens),
        (&mut usage.output_tokens, round.output_tokens),
        (&mut usage.cached_input_tokens, round.cached_input_tokens),
        (&mut usage.cache_write_tokens, round.cache_write_tokens),
        (&mut usage.reasoning_tokens, round.reasoning_tokens),
    ];
    for (total, added) in pairs {
        *total = total.saturating_add(added);
    }
    // The conversation's size as the provider counted it (S12.4).
    if round.input_tokens > 0 {
        usage.context_tokens = round.input_tokens.saturating_add(round.output_tokens);
    }
}

/// How a run ends on a final answer, by the model's finish reason: cut at
/// the output limit is `completed` / `output_limit`; withheld by the
/// provider is `failed` / `content_filtered`; anything else is `completed`.
fn final_status(finish: Option<&FinishReason>, provider: &str) -> (RunStatus, StopReason) {
    match finish {
        Some(FinishReason::Length) => (RunStatus::Completed, StopReason::OutputLimit),
        Some(FinishReason::ContentFilter) => (
            RunStatus::Failed,
            StopReason::ContentFiltered {
                provider: provider.to_owned(),
            },
        ),
        Some(FinishReason::Stop | FinishReason::ToolCalls | FinishReason::Other(_)) | None => {
            (RunStatus::Completed, StopReason::Completed)
        }
    }
}
