//! The executor trait: spawn a task, and run blocking work off the async
//! executor (natively a blocking thread; in the browser the caller's Worker).

use crate::maybe_send::{BoxFuture, MaybeSend, MaybeSync};

/// Spawns tasks for actors. Natively backed by tokio; in the browser by
/// `wasm_bindgen_futures::spawn_local`; in tests and the simulator by a
/// deterministic single-threaded executor.
pub trait Executor: MaybeSend + MaybeSync {
    /// Run a future to completion in the background.
    fn spawn(&self, task: BoxFuture<'static, ()>);
    /// Run blocking work where it cannot stall the async executor.
    fn spawn_blocking(&self, job: Box<dyn FnOnce() + Send + 'static>);
}
