//! Actor primitives: `Addr<M>` over a bounded mailbox, ask/reply, spawning
//! through the host's executor, and failure reports to the parent.
//!
//! An actor is a future that owns its state and reads its `Inbox`. Its
//! `Addr` is a cheap clonable handle; when the actor stops, every `Addr`
//! answers `ActorError::Stopped` instead of hanging.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::channel::oneshot;

use crate::host::Executor;
use crate::maybe_send::{MaybeSend, boxed};

/// Sending to or asking an actor failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActorError {
    /// The actor's mailbox is closed: it stopped or failed.
    #[error("actor {actor} has stopped; its messages can no longer be delivered")]
    Stopped { actor: String },
    /// The actor dropped the request without answering (it stopped mid-request).
    #[error("actor {actor} dropped a request without replying (it stopped while handling it)")]
    NoReply { actor: String },
}

/// The receiving end of an actor's mailbox.
pub type Inbox<M> = async_channel::Receiver<M>;

/// A handle to an actor: a bounded sender plus the actor's name for errors.
pub struct Addr<M> {
    tx: async_channel::Sender<M>,
    name: Arc<str>,
}

impl<M> Clone for Addr<M> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            name: self.name.clone(),
        }
    }
}

impl<M> fmt::Debug for Addr<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Addr").field("actor", &self.name).finish()
    }
}

/// The reply half of an ask: the actor answers through it exactly once.
pub struct Reply<R>(oneshot::Sender<R>);

impl<R> Reply<R> {
    /// Answer the request. If the asker has gone away the answer is dropped:
    /// nobody is waiting for it, so there is nothing else to do.
    pub fn send(self, value: R) {
        let _ = self.0.send(value);
    }
}

impl<R> fmt::Debug for Reply<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reply")
    }
}

/// Create a bounded mailbox: the actor keeps the `Inbox`, callers get `Addr`s.
/// A full mailbox makes senders wait (back-pressure), so memory stays bounded.
pub fn mailbox<M>(name: &str, capacity: usize) -> (Addr<M>, Inbox<M>) {
    let (tx, rx) = async_channel::bounded(capacity.max(1));
    (
        Addr {
            tx,
            name: Arc::from(name),
        },
        rx,
    )
}

impl<M> Addr<M> {
    /// The actor's name, as used in failure reports.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True when `other` is a handle to the same actor (the same mailbox).
    pub fn same_actor(&self, other: &Addr<M>) -> bool {
        self.tx.same_channel(&other.tx)
    }

    /// True once the actor's inbox is gone.
    pub fn is_stopped(&self) -> bool {
        self.tx.is_closed()
    }

    /// Deliver a message, waiting while the mailbox is full.
    pub async fn send(&self, msg: M) -> Result<(), ActorError> {
        self.tx.send(msg).await.map_err(|_| ActorError::Stopped {
            actor: self.name.to_string(),
        })
    }

    /// Send a request carrying a `Reply` and wait for the answer.
    pub async fn ask<R>(&self, make: impl FnOnce(Reply<R>) -> M) -> Result<R, ActorError> {
        let (tx, rx) = oneshot::channel();
        self.send(make(Reply(tx))).await?;
        rx.await.map_err(|_| ActorError::NoReply {
            actor: self.name.to_string(),
        })
    }
}

/// How an actor ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActorExit {
    /// Its loop returned `Ok(())`.
    Stopped,
    /// Its loop returned an error, with the error's message.
    Failed(String),
    /// It panicked (natively only; wasm32 aborts on panic), with the panic message.
    Panicked(String),
}

/// What a parent hears when a child actor ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorReport {
    pub actor: String,
    pub exit: ActorExit,
}

/// Where a child reports its end; the parent reads the other half.
pub type ParentLink = async_channel::Sender<ActorReport>;

/// Spawn an actor on the executor. `body` receives the inbox and runs the
/// actor's loop; its error, and natively its panic, is reported to `parent`
/// with the actor's name.
pub fn spawn_actor<M, E, Fut>(
    executor: &dyn Executor,
    name: &str,
    capacity: usize,
    parent: Option<ParentLink>,
    body: impl FnOnce(Inbox<M>) -> Fut,
) -> Addr<M>
where
    M: MaybeSend + 'static,
    E: fmt::Display,
    Fut: Future<Output = Result<(), E>> + MaybeSend + 'static,
{
    let (addr, inbox) = mailbox(name, capacity);
    let leftovers = inbox.clone();
    // Boxed once here: moved by value into the wrapper below, the body's
    // state (20 KB for a supervisor) would be laid out in the spawned task
    // once per move, tripling what every idle actor holds (issue 18 item 6).
    let fut = Box::pin(body(inbox));
    let actor = name.to_owned();
    executor.spawn(boxed(async move {
        let exit = run_guarded(fut).await;
        // A closed channel keeps what was queued before it closed; drop those
        // messages now, so that every `ask` still waiting on one hears
        // `NoReply` instead of waiting forever.
        leftovers.close();
        while let Ok(msg) = leftovers.try_recv() {
            drop(msg);
        }
        drop(leftovers);
        if let Some(parent) = parent {
            // A parent that stopped listening no longer cares how we ended.
            let _ = parent.send(ActorReport { actor, exit }).await;
        }
    }));
    addr
}

#[cfg(not(target_arch = "wasm32"))]
async fn run_guarded<E: fmt::Display>(fut: impl Future<Output = Result<(), E>>) -> ActorExit {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
        Ok(Ok(())) => ActorExit::Stopped,
        Ok(Err(e)) => ActorExit::Failed(e.to_string()),
        Err(panic) => ActorExit::Panicked(panic_message(panic.as_ref())),
    }
}

#[cfg(target_arch = "wasm32")]
async fn run_guarded<E: fmt::Display>(fut: impl Future<Output = Result<(), E>>) -> ActorExit {
    match fut.await {
        Ok(()) => ActorExit::Stopped,
        Err(e) => ActorExit::Failed(e.to_string()),
    }
}

/// The text of a panic payload, when it has one.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".to_owned()
    }
}

/// Blocking work failed to produce a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockingError {
    /// The job panicked or its thread went away before answering.
    #[error("blocking job ended without a result (it panicked or its worker was lost)")]
    Lost,
}

/// Run `job` off the async executor (natively a blocking thread) and await its value.
pub async fn run_blocking<T: Send + 'static>(
    executor: &dyn Executor,
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, BlockingError> {
    let (tx, rx) = oneshot::channel();
    executor.spawn_blocking(Box::new(move || {
        // The awaiting side may have been cancelled; then the value is not needed.
        let _ = tx.send(job());
    }));
    rx.await.map_err(|_| BlockingError::Lost)
}
