//! Compaction the embedder asks for (S12.4; `rt.compact(session)` in a
//! page, `agentrt compact SESSION`): the session's conversation brought up
//! to date, every turn not yet summarised but the newest folded into a new
//! summary by the model (the same tool-less request and bound as a run's
//! own compaction, [`crate::compaction`]), stored in one batch under the
//! session's lease that also compares the conversation and summary records
//! with what was read: a compaction is made once, or not at all.

use agent_kernel::host::{Batch, StorageError, Table};
use agent_kernel::ids::SessionId;

use super::Runtime;
use crate::compaction::{
    ConversationSummary, SUMMARY_PROMPT_VERSION, SessionSummaries, bounded_summary, summary_request,
};
use crate::config::RunConfig;
use crate::conversation::{SessionConversation, estimate_tokens};
use crate::error::RunError;
use crate::provider::collect_response;
use crate::transcript::{TranscriptLog, Window};

impl Runtime {
    /// Summarise `session`'s turns but the newest into a stored summary
    /// that later runs send in their place, with the model `config` names
    /// (its context window bounds the request; unset, the model's own).
    /// `None` when there is nothing to fold (fewer than two turns after
    /// the newest summary). The raw turns stay stored.
    pub async fn compact(
        &self,
        session: &SessionId,
        mut config: RunConfig,
    ) -> Result<Option<ConversationSummary>, RunError> {
        config.validate()?;
        let failed = |detail: String| RunError::Compaction {
            session: session.clone(),
            detail,
        };
        let provider = crate::provider::set::resolve(
            &self.inner.ctx.provider,
            config.model.provider.as_deref(),
        )
        .map_err(|_| RunError::UnknownProvider {
            name: config.model.provider.clone().unwrap_or_default(),
        })?;
        if config.model.context_window_tokens.is_none() {
            config.model.context_window_tokens = Some(
                provider
                    .capabilities(&config.model.model)
                    .context_window_tokens
                    .max(crate::config::MIN_CONTEXT_WINDOW_TOKENS),
            );
        }
        let window_tokens = config.model.context_window();
        let guard = self.inner.leases.acquire(session).await?;
        let storage = self.host().storage.clone();
        let conversation_key = SessionConversation::key_for(session);
        let summaries_key = SessionSummaries::key_for(session);
        let conversation_bytes = storage.get(Table::Meta, &conversation_key).await?;
        let summaries_bytes = storage.get(Table::Meta, &summaries_key).await?;
        let mut conversation = SessionConversation::load(&*storage, session).await?;
        let runs = crate::store::runs_of_session(&*storage, session).await?;
        conversation.catch_up(&*storage, runs).await?;
        let mut summaries = SessionSummaries::load(&*storage, session).await?;
        let plan = conversation.plan_with(summaries.latest(), window_tokens, 0, true);
        let Some(due) = plan.summary.filter(|s| s.folded_turns > 0) else {
            return Ok(None);
        };
        let (Some(head), Some(first)) = (conversation.head.clone(), conversation.turns.first())
        else {
            return Ok(None);
        };
        let previous = match summaries.ending_at(due.fold_from) {
            Some(s) if due.previous_turns > 0 => {
                let bytes = crate::blob::verified_blob(&*storage, &s.text)
                    .await?
                    .ok_or_else(|| failed("the previous summary is missing".into()))?;
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => None,
        };
        let log = TranscriptLog::load(
            &*storage,
            &first.run,
            &head,
            Window {
                from: due.fold_from,
                own_from: conversation.len(),
            },
        )
        .await?;
        let folded_len = usize::try_from(due.upto.saturating_sub(due.fold_from)).unwrap_or(0);
        let folded = &log.messages()[..folded_len.min(log.messages().len())];
        let request = summary_request(
            &config.model.model,
            previous.as_deref(),
            folded,
            window_tokens,
        );
        let stream = provider
            .stream(request)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let response = collect_response(stream, |_| {})
            .await
            .map_err(|e| failed(e.to_string()))?;
        let text = bounded_summary(response.text.trim(), window_tokens).to_owned();
        if text.is_empty() {
            return Err(failed("the model returned an empty summary".into()));
        }
        let measured = response.usage.output_tokens > 0 && text.len() == response.text.len();
        let tokens = if measured {
            response.usage.output_tokens
        } else {
            estimate_tokens(text.len() as u64)
        };
        let mut batch = Batch::new().fenced(guard.fence());
        let blob = batch.add_blob(text.into_bytes());
        let summary = ConversationSummary {
            turns: due.turns,
            upto: due.upto,
            text: blob,
            tokens,
            measured,
            prompt_version: SUMMARY_PROMPT_VERSION,
            run: None,
            tokens_before: due.tokens_before,
            tokens_after: tokens.saturating_add(due.tokens_kept),
            created_at_ms: self.host().clock.wall_ms(),
        };
        summaries.add(summary.clone());
        // Made once: the records must be as they were read.
        batch = expect(batch, &conversation_key, conversation_bytes);
        batch = expect(batch, &summaries_key, summaries_bytes);
        batch = batch.put_record(&conversation)?;
        batch = batch.put_record(&summaries)?;
        match storage.commit(batch).await {
            Ok(()) => Ok(Some(summary)),
            Err(StorageError::ConditionFailed { .. }) => Err(failed(
                "the conversation changed meanwhile (a run started or ended); ask again".into(),
            )),
            Err(e) => Err(e.into()),
        }
    }
}

/// `batch` on condition that `key` (Meta) holds `bytes`, or is absent.
fn expect(batch: Batch, key: &str, bytes: Option<Vec<u8>>) -> Batch {
    match bytes {
        Some(bytes) => batch.expect_value(Table::Meta, key, bytes),
        None => batch.expect_absent(Table::Meta, key),
    }
}
