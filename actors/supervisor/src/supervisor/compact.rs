//! The summary a run makes of its session's oldest turns (S12.4), before
//! its first model round when the context rule asked for one: a tool-less
//! request with the versioned summarisation prompt, watched like a model
//! round (a stop, an interruption, the duration budget), and one atomic
//! commit of the summary with the run's `conversation_compacted` activity
//! and the request's usage. Nothing is committed before the summary is
//! whole, so a crash repeats the request; once committed it is never made
//! again (a run resumed, or a later one, finds it stored).

use std::sync::Arc;

use agent_kernel::actor::Inbox;
use agent_kernel::budget::BudgetDimension;
use agent_kernel::maybe_send::{BoxFuture, boxed};
use agent_kernel::run::ActivityKind;

use super::model_round::add_model_usage;
use super::{Interruption, Msg, Supervisor, Watched, summary_text};
use crate::compaction::{
    ConversationSummary, SUMMARY_PROMPT_VERSION, SessionSummaries, bounded_summary,
    summary_request, system_with_summary,
};
use crate::conversation::{SummaryUse, estimate_tokens};
use crate::error::RunError;
use crate::provider::collect_response;
use crate::transcript::{TranscriptLog, Window};

impl Supervisor {
    pub(super) async fn compact(
        &mut self,
        inbox: &Inbox<Msg>,
        due: SummaryUse,
    ) -> Result<(), RunError> {
        let run = self.id();
        let storage = self.ctx.host.storage.clone();
        let session = self.writer.run.session.clone();
        let mut summaries = SessionSummaries::load(&*storage, &session).await?;
        if let Some(stored) = summaries.ending_at(due.upto).cloned() {
            // Made meanwhile (another run of the session): used as it is.
            return self.use_summary(&stored).await;
        }
        if let Err(dim) = self.config.budget.check_hard_limits(&self.usage_now()) {
            return self.exhaust(dim).await;
        }
        if !self.ctx.host.lifecycle.is_online() {
            return self.interrupt(Interruption::Offline).await;
        }
        let previous = match summaries.ending_at(due.fold_from) {
            Some(s) if due.previous_turns > 0 => {
                Some(summary_text(&*storage, &run, &s.text).await?)
            }
            _ => None,
        };
        // The folded turns, read from the run's own chain (they are before
        // its window).
        let log = TranscriptLog::load(
            &*storage,
            &run,
            &self.transcript_ref,
            Window {
                from: due.fold_from,
                own_from: self.window.own_from,
            },
        )
        .await?;
        let folded_len = usize::try_from(due.upto.saturating_sub(due.fold_from)).unwrap_or(0);
        let folded = &log.messages()[..folded_len.min(log.messages().len())];
        let window_tokens = self.config.model.context_window();
        let request = summary_request(
            &self.config.model.model,
            previous.as_deref(),
            folded,
            window_tokens,
        );
        let mut repeats = 0u32;
        let response = loop {
            let provider = crate::provider::set::resolve(
                &self.ctx.provider,
                self.config.model.provider.as_deref(),
            );
            let req = request.clone();
            // The summary is not the answer: nothing of it is streamed to
            // the page.
            let mut fut: BoxFuture<'static, _> = boxed(async move {
                let stream = provider?.stream(req).await?;
                collect_response(stream, |_| {}).await
            });
            match self.watch(inbox, &mut fut).await? {
                Watched::Done(Ok(response)) => break response,
                Watched::Done(Err(e))
                    if e.round_may_repeat() && repeats < self.ctx.options.model_round_repeats =>
                {
                    repeats += 1;
                }
                Watched::Done(Err(e)) if e.is_outage() => {
                    let why = Interruption::ProviderUnavailable {
                        provider: self.ctx.provider.name().to_owned(),
                        message: e.to_string(),
                    };
                    return self.interrupt(why).await;
                }
                Watched::Done(Err(e)) => return self.fail_runtime("model", &e.to_string()).await,
                Watched::Stop(reply) => return self.cancel(reply, None).await,
                Watched::Interrupt(reason) => return self.interrupt(reason).await,
                Watched::OutOfTime => return self.exhaust(BudgetDimension::Duration).await,
            }
        };
        let text = bounded_summary(response.text.trim(), window_tokens).to_owned();
        if text.is_empty() {
            return self
                .fail_runtime(
                    "model",
                    "the model returned an empty summary of the conversation",
                )
                .await;
        }
        // The provider's count of the summary where it reported one and
        // the text was not cut; an estimate otherwise.
        let measured = response.usage.output_tokens > 0 && text.len() == response.text.len();
        let tokens = if measured {
            response.usage.output_tokens
        } else {
            estimate_tokens(text.len() as u64)
        };
        let tokens_after = tokens.saturating_add(due.tokens_kept);
        let mut tx = self.writer.begin();
        let blob = tx.blob(text.into_bytes());
        let summary = ConversationSummary {
            turns: due.turns,
            upto: due.upto,
            text: blob.clone(),
            tokens,
            measured,
            prompt_version: SUMMARY_PROMPT_VERSION,
            run: Some(run.clone()),
            tokens_before: due.tokens_before,
            tokens_after,
            created_at_ms: self.ctx.host.clock.wall_ms(),
        };
        summaries.add(summary.clone());
        tx.put(&summaries);
        // The request's tokens count toward the run's usage (S4.1); the
        // conversation's size stays the one its own rounds report.
        let context_tokens = tx.run.usage.context_tokens;
        add_model_usage(&mut tx.run.usage, &response.usage);
        tx.run.usage.context_tokens = context_tokens;
        tx.activity(ActivityKind::ConversationCompacted {
            turns_covered: due.turns,
            tokens_before: due.tokens_before,
            tokens_after,
            summary: blob,
        });
        self.writer.commit(tx).await?;
        tracing::info!(run = %run, turns = due.turns, "conversation compacted");
        self.use_summary(&summary).await
    }

    /// Send `summary` before the window from now on.
    async fn use_summary(&mut self, summary: &ConversationSummary) -> Result<(), RunError> {
        let run = self.id();
        let text = summary_text(&*self.ctx.host.storage, &run, &summary.text).await?;
        let base = self.config.system_prompt();
        self.system = Some(Arc::from(system_with_summary(
            base.as_deref(),
            &text,
            summary.turns,
        )));
        self.summary_due = None;
        Ok(())
    }
}
