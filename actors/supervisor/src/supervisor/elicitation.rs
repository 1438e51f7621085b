//! A server's request for input during a call (MCP `elicitation/create`)
//! as a pending request of the run, like `ask_user`: the host hands it to
//! the run's supervisor ([`crate::Runtime::elicit`]) while the call is in
//! flight; the supervisor makes it durable (the server's message and the
//! requested schema as blobs, a [`PendingKind::Elicitation`] record, an
//! `input_requested` activity), takes the person's answer (`respond`: accept
//! with content checked against the requested schema, decline, cancel) and
//! brings it back to the call. This module owns that request's life: it
//! lasts as long as the call that asked; when the call ends, or the host
//! restarts, whatever is still pending is withdrawn (the server's request
//! cannot be answered any more: a call that is run again asks again).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::channel::oneshot;
use serde_json::Value;

use agent_kernel::host::Table;
use agent_kernel::ids::{CallId, RequestId};
use agent_kernel::run::{ActivityKind, PendingKind, PendingRequest};
use agent_kernel::tool::validate::CompiledSchema;

use super::{Supervisor, pending_key};
use crate::blob::{put_blob, put_json_blob};
use crate::error::RunError;
use crate::store::pending_of;

/// What a server asks of the person during call `call_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitationAsk {
    pub call_id: CallId,
    /// The configured id of the server that asks.
    pub server: String,
    /// The server's message: `external_untrusted` text.
    pub message: String,
    /// The requested schema: a JSON Schema the accepted content must satisfy.
    pub schema: Value,
}

/// The person's answer, as the call gets it.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationReply {
    /// Submitted: the content satisfies the requested schema.
    Accept(Value),
    /// Explicitly refused.
    Decline,
    /// Dismissed, withdrawn, or the run is gone.
    Cancel,
}

impl ElicitationReply {
    /// Read the person's answer text: `decline`, `cancel`, an object with
    /// `action` (and `content` when it is `accept`), or an object that is
    /// the content itself (accept).
    pub fn from_text(text: &str) -> Result<ElicitationReply, String> {
        match text.trim() {
            "decline" => return Ok(ElicitationReply::Decline),
            "cancel" => return Ok(ElicitationReply::Cancel),
            _ => {}
        }
        let value: Value = serde_json::from_str(text).map_err(|_| {
            "answer with `decline`, `cancel`, or a JSON object of the requested fields".to_owned()
        })?;
        let Some(object) = value.as_object() else {
            return Err("the answer must be a JSON object of the requested fields".into());
        };
        match object.get("action").and_then(Value::as_str) {
            None => Ok(ElicitationReply::Accept(value)),
            Some("accept") => Ok(ElicitationReply::Accept(
                object
                    .get("content")
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Default::default())),
            )),
            Some("decline") => Ok(ElicitationReply::Decline),
            Some("cancel") => Ok(ElicitationReply::Cancel),
            Some(other) => Err(format!(
                "unknown action {other:?}: accept, decline or cancel"
            )),
        }
    }
}

/// Where the answer goes: shared so that a command sent again to the
/// run's next supervisor still carries it.
pub(crate) type ReplySlot = Arc<Mutex<Option<oneshot::Sender<ElicitationReply>>>>;

/// The elicitations this supervisor waits on, by request.
#[derive(Default)]
pub(crate) struct LiveElicitations {
    waiting: BTreeMap<RequestId, Live>,
    asked: u64,
    /// Some elicitation was made durable since the last withdrawal.
    stored_since_withdrawal: bool,
}

struct Live {
    schema: Value,
    reply: oneshot::Sender<ElicitationReply>,
}

/// Whether [`Supervisor::withdraw_elicitations`] reads the stored
/// requests always (a supervisor's start) or only after one was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scan {
    Always,
    IfAsked,
}

impl LiveElicitations {
    pub(crate) fn is_waiting(&self, request: &RequestId) -> bool {
        self.waiting.contains_key(request)
    }
}

impl Supervisor {
    /// A server asks during the call in flight: durable first, then waited on.
    pub(super) async fn elicitation_asked(
        &mut self,
        in_flight: Option<&CallId>,
        ask: ElicitationAsk,
        slot: ReplySlot,
    ) -> Result<(), RunError> {
        let run = self.id();
        if in_flight != Some(&ask.call_id) {
            return Err(RunError::Inconsistent {
                run,
                detail: format!(
                    "an elicitation for call {} while that call is not in flight",
                    ask.call_id
                ),
            });
        }
        let Some(reply) = slot.lock().ok().and_then(|mut s| s.take()) else {
            return Ok(()); // nobody waits for the answer any more
        };
        CompiledSchema::compile(&ask.schema).map_err(|e| RunError::Inconsistent {
            run: run.clone(),
            detail: format!("the requested schema of an elicitation is not usable: {e}"),
        })?;
        self.elicitations.asked += 1;
        let request = RequestId::new(format!(
            "elicit-{}-{}",
            ask.call_id, self.elicitations.asked
        ))?;
        let storage = self.ctx.host.storage.clone();
        let message = put_blob(&*storage, ask.message.clone().into_bytes()).await?;
        let schema = put_json_blob(&*storage, &ask.schema).await?;
        let mut tx = self.writer.begin();
        tx.put(&PendingRequest {
            run: run.clone(),
            id: request.clone(),
            kind: PendingKind::Elicitation {
                call_id: ask.call_id.clone(),
                server: ask.server.clone(),
                message,
                schema,
            },
            created_at_ms: tx.now(),
            presented: false,
        });
        tx.activity(ActivityKind::InputRequested {
            request: request.clone(),
        });
        self.elicitations.stored_since_withdrawal = true;
        self.writer.commit(tx).await?;
        self.elicitations.waiting.insert(
            request,
            Live {
                schema: ask.schema,
                reply,
            },
        );
        Ok(())
    }

    /// The person answers a live elicitation; an answer whose content does
    /// not satisfy the requested schema is refused and it stays pending.
    pub(super) async fn elicitation_answered(
        &mut self,
        request: RequestId,
        text: &str,
    ) -> Result<(), RunError> {
        let run = self.id();
        let invalid = |reason: String| RunError::InvalidAnswer {
            run: run.clone(),
            request: request.clone(),
            reason,
        };
        let Some(live) = self.elicitations.waiting.get(&request) else {
            return Err(RunError::NoSuchRequest {
                run: run.clone(),
                request: request.clone(),
            });
        };
        let answer = ElicitationReply::from_text(text).map_err(&invalid)?;
        if let ElicitationReply::Accept(content) = &answer {
            let schema = CompiledSchema::compile(&live.schema).map_err(&invalid)?;
            schema.check(content).map_err(|e| {
                invalid(format!(
                    "the answer does not match the requested schema: {e}"
                ))
            })?;
        }
        let mut tx = self.writer.begin();
        tx.delete(Table::Pending, format!("{run}/{request}"));
        tx.activity(ActivityKind::InputAnswered {
            request: request.clone(),
        });
        self.writer.commit(tx).await?;
        if let Some(live) = self.elicitations.waiting.remove(&request) {
            // The call may have ended meanwhile: then nobody reads it.
            let _ = live.reply.send(answer);
        }
        Ok(())
    }

    /// Withdraw every elicitation of the run that is still pending: the
    /// call that asked has ended, or (at a supervisor's start) the process
    /// that waited on it is gone. Live ones are answered `cancel`.
    pub(super) async fn withdraw_elicitations(&mut self, scan: Scan) -> Result<(), RunError> {
        let live = std::mem::take(&mut self.elicitations.waiting);
        drop(live); // a dropped sender reads as cancel
        let stored = std::mem::take(&mut self.elicitations.stored_since_withdrawal);
        if scan == Scan::IfAsked && !stored {
            return Ok(());
        }
        let run = self.id();
        let pending = pending_of(&*self.ctx.host.storage, &run).await?;
        let stale: Vec<&PendingRequest> = pending
            .iter()
            .filter(|p| matches!(p.kind, PendingKind::Elicitation { .. }))
            .collect();
        if stale.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer.begin();
        for p in stale {
            tx.delete(Table::Pending, pending_key(p));
        }
        self.writer.commit(tx).await
    }
}

#[cfg(test)]
mod tests {
    use super::ElicitationReply;
    use serde_json::json;

    #[test]
    fn answer_texts_read_as_accept_decline_or_cancel() {
        assert_eq!(
            ElicitationReply::from_text(r#"{"name": "Ann"}"#),
            Ok(ElicitationReply::Accept(json!({"name": "Ann"})))
        );
        assert_eq!(
            ElicitationReply::from_text(r#"{"action": "accept", "content": {"n": 1}}"#),
            Ok(ElicitationReply::Accept(json!({"n": 1})))
        );
        assert_eq!(
            ElicitationReply::from_text(" decline\n"),
            Ok(ElicitationReply::Decline)
        );
        assert_eq!(
            ElicitationReply::from_text(r#"{"action": "cancel"}"#),
            Ok(ElicitationReply::Cancel)
        );
        for bad in ["yes", "[1]", r#""Ann""#, r#"{"action": "maybe"}"#, ""] {
            assert!(ElicitationReply::from_text(bad).is_err(), "{bad}");
        }
    }
}
