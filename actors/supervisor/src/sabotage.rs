//! Deliberate faults (feature `sabotage`, test-only): a sabotaged
//! supervisor that the crash simulator's own test runs to prove the
//! simulator catches violations of the durability order and the replay
//! rule. The simulator itself (feature `sim`) ships in `agentrt sim`; there
//! [`Sabotage`] has no fields, so it chooses no fault, and none of the
//! faults below is compiled: the supervisor has no switch that could break
//! its guarantees, and `cargo xtask test` checks that a release `agentrt`
//! does not contain its `MARKER` (`"crash-sim sabotage"`).

/// Without the feature `sabotage`: no fault to choose.
#[cfg(not(feature = "sabotage"))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sabotage {}

#[cfg(feature = "sabotage")]
pub use faults::*;

#[cfg(feature = "sabotage")]
mod faults {
    use agent_kernel::actor::ActorError;
    use agent_kernel::maybe_send::{BoxFuture, boxed};
    use agent_kernel::protocol::ToolResult;

    /// Begins every message a sabotage logs; a string only this module puts in a
    /// binary (the release check of `cargo xtask test` searches for it).
    pub const MARKER: &str = "crash-sim sabotage";

    /// Deliberate faults, used only by the crash simulator's own test to prove
    /// that it can detect violations.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Sabotage {
        /// Dispatch before `running` is durable.
        pub dispatch_before_running: bool,
        /// Retry in-flight calls on resume even when the replay rule says `effect_unknown`.
        pub retry_unsafe_on_resume: bool,
    }

    impl Sabotage {
        /// Whether an in-flight call the replay rule marks `effect_unknown` is
        /// retried instead (deliberately wrong).
        pub(crate) fn retries_unsafely_on_resume(self) -> bool {
            if self.retry_unsafe_on_resume {
                tracing::warn!("{MARKER}: retrying an in-flight call on resume");
            }
            self.retry_unsafe_on_resume
        }

        /// The dispatch `call`, already carried out when the sabotage dispatches
        /// before `running` is durable (deliberately wrong: the effect may
        /// happen with no journal record saying so); otherwise `call` untouched.
        pub(crate) async fn dispatch_early(
            self,
            call: BoxFuture<'static, Result<ToolResult, ActorError>>,
        ) -> BoxFuture<'static, Result<ToolResult, ActorError>> {
            if !self.dispatch_before_running {
                return call;
            }
            tracing::warn!("{MARKER}: dispatching before `running` is durable");
            let out = call.await;
            boxed(futures::future::ready(out))
        }
    }
}
