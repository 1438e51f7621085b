//! The live events of the runs ([`RunEvent`]) and their fan-out to every
//! subscriber ([`EventBus`]): what a UI hears as it happens. A
//! [`super::RunWriter`] announces each activity once its commit is durable.

use std::sync::{Arc, Mutex};

use agent_kernel::ids::{CallId, RunId};
use agent_kernel::protocol::ToolProgress;
use agent_kernel::run::Activity;

/// Something the UI may want to know, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// An activity became durable.
    Activity(Activity),
    /// A piece of assistant text arrived (not yet durable; the checkpoint after the response is).
    TextDelta { run: RunId, text: String },
    /// A piece of the model's reasoning arrived: shown apart, never the
    /// answer (S13.4). Not yet durable; the response's activity keeps it.
    ReasoningDelta { run: RunId, text: String },
    /// A tool in flight reported how far it has come (an MCP server's
    /// progress notification). Live only, never stored: progress is a
    /// display of the moment, and the call's outcome is what is journaled.
    ToolProgress {
        run: RunId,
        call_id: CallId,
        tool: String,
        progress: ToolProgress,
    },
    /// A Deep Research task of the session moved to `phase` (S9): `run` is
    /// its start turn (the chat message's generation). Live only; the task
    /// record is what is stored.
    Research {
        run: RunId,
        task: String,
        phase: String,
    },
}

impl RunEvent {
    pub fn run(&self) -> &RunId {
        match self {
            RunEvent::Activity(a) => &a.run,
            RunEvent::TextDelta { run, .. }
            | RunEvent::ReasoningDelta { run, .. }
            | RunEvent::ToolProgress { run, .. }
            | RunEvent::Research { run, .. } => run,
        }
    }
}

/// Fan-out of run events to every subscriber; closed subscribers are dropped.
#[derive(Clone, Default)]
pub struct EventBus {
    subscribers: Arc<Mutex<Vec<async_channel::Sender<RunEvent>>>>,
}

impl EventBus {
    pub fn subscribe(&self) -> async_channel::Receiver<RunEvent> {
        let (tx, rx) = async_channel::unbounded();
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.push(tx);
        }
        rx
    }

    pub fn emit(&self, event: RunEvent) {
        if let Ok(mut subs) = self.subscribers.lock() {
            subs.retain(|tx| tx.try_send(event.clone()).is_ok());
        }
    }
}
