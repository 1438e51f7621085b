//! The cancellation signal of a tool call: a handle that fires it, and
//! tokens that the call awaits alongside its work (`ToolContext::cancelled`).
//! Clones of a token share one signal. The shell fires it when the tool
//! actor receives `ToolMsg::Cancel` for the call's run.

use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::channel::oneshot;
use futures::future::Shared;

/// Cancels every [`CancelToken`] made from it. Dropping it cancels nothing.
#[derive(Debug, Clone)]
pub struct CancelHandle {
    tx: Arc<Mutex<Option<oneshot::Sender<()>>>>,
    token: CancelToken,
}

/// What a read awaits to learn that the user cancelled it.
#[derive(Debug, Clone)]
pub struct CancelToken {
    rx: Shared<oneshot::Receiver<()>>,
}

impl CancelHandle {
    pub fn new() -> Self {
        let (tx, rx) = oneshot::channel();
        CancelHandle {
            tx: Arc::new(Mutex::new(Some(tx))),
            token: CancelToken { rx: rx.shared() },
        }
    }

    /// A token that completes when [`CancelHandle::cancel`] is called.
    pub fn token(&self) -> CancelToken {
        self.token.clone()
    }

    /// Cancel; calling it again does nothing.
    pub fn cancel(&self) {
        if let Ok(mut tx) = self.tx.lock()
            && let Some(tx) = tx.take()
        {
            // Every token may be gone already: then nobody needs the signal.
            let _ = tx.send(());
        }
    }
}

impl Default for CancelHandle {
    fn default() -> Self {
        Self::new()
    }
}

impl CancelToken {
    /// A token that is never cancelled.
    pub fn never() -> Self {
        CancelHandle::new().token()
    }

    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.rx.peek(), Some(Ok(())))
    }

    /// Completes when cancelled; pending forever otherwise (also when every
    /// handle was dropped without cancelling).
    pub async fn cancelled(&self) {
        if self.rx.clone().await.is_err() {
            futures::future::pending::<()>().await;
        }
    }
}
