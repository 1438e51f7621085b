//! The public handle API used by hosts, the CLI and the browser: start
//! runs (and nested child runs), answer approvals, input and decisions,
//! stop, resume, recover after a reload, read runs back, and subscribe to
//! events. Commands go to the run's supervisor, which the live
//! supervisors' actor spawns on demand; reads go straight to storage, the
//! source of truth.
//!
//! - `live`: the actor owning the map of live supervisors, the one place
//!   one is spawned, and the watcher of their ends;
//! - `start`: starting a run or a child run;
//! - `recover`: interrupting runs left `running` (S2.5);
//! - `reads`: reading runs back, and waiting until one settles.
//!
//! Here: the [`Runtime`] and [`RunHandle`] and the commands.

mod compact;
mod live;
mod reads;
mod recover;
mod start;

use std::sync::Arc;

use agent_kernel::actor::Addr;
use agent_kernel::host::{Host, LeaseManager};
use agent_kernel::ids::{CallId, OwnerId, RequestId, RunId};
use agent_kernel::protocol::ToolsAddr;
use agent_kernel::run::AgentRun;

use crate::config::{RunConfig, RuntimeOptions};
use crate::error::RunError;
use crate::provider::ModelProvider;
use crate::store::{EventBus, RunEvent, load_run};
use crate::supervisor::{Choice, Ctx, Msg};
use live::{Held, LiveMsg};
#[cfg(feature = "test-hooks")]
pub use reads::{SETTLE_HOOK_MARKER, SettleHook};

#[cfg(feature = "sim")]
use crate::sabotage::Sabotage;

struct Inner {
    ctx: Arc<Ctx>,
    leases: LeaseManager,
    /// The live supervisors' actor: the run → supervisor map is its state
    /// ([`live::Supervisors`]).
    live: Addr<LiveMsg>,
    /// Which runs a supervisor of this runtime may still move: the one
    /// source of truth of [`Runtime::wait_settled`].
    held: Arc<Held>,
    /// Called between the two steps of [`Runtime::wait_settled`] (tests only).
    #[cfg(feature = "test-hooks")]
    settle_hook: std::sync::Mutex<Option<SettleHook>>,
}

/// The runtime of one tab or process: every run it executes, over one host.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

/// A [`Runtime`] that does not keep it alive: for what the runtime itself
/// holds and that calls back into it (an MCP server's elicitation handler).
#[derive(Clone)]
pub struct WeakRuntime {
    inner: std::sync::Weak<Inner>,
}

impl WeakRuntime {
    /// The runtime, unless it is gone.
    pub fn upgrade(&self) -> Option<Runtime> {
        self.inner.upgrade().map(|inner| Runtime { inner })
    }
}

impl Runtime {
    /// A handle that does not keep the runtime alive.
    pub fn downgrade(&self) -> WeakRuntime {
        WeakRuntime {
            inner: Arc::downgrade(&self.inner),
        }
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("owner", self.inner.leases.owner())
            .finish()
    }
}

/// A handle on one run: the same commands as [`Runtime`], bound to the run.
#[derive(Clone, Debug)]
pub struct RunHandle {
    runtime: Runtime,
    id: RunId,
}

impl RunHandle {
    pub fn id(&self) -> &RunId {
        &self.id
    }
    pub async fn get(&self) -> Result<AgentRun, RunError> {
        self.runtime.run(&self.id).await
    }
    pub async fn approve(&self, request: &RequestId) -> Result<(), RunError> {
        self.runtime.approve(&self.id, request).await
    }
    pub async fn deny(&self, request: &RequestId) -> Result<(), RunError> {
        self.runtime.deny(&self.id, request).await
    }
    pub async fn respond(&self, request: &RequestId, text: &str) -> Result<(), RunError> {
        self.runtime.respond(&self.id, request, text).await
    }
    pub async fn decide(&self, call: &CallId, choice: Choice) -> Result<(), RunError> {
        self.runtime.decide(&self.id, call, choice).await
    }
    pub async fn stop(&self) -> Result<(), RunError> {
        self.runtime.stop(&self.id).await
    }
    pub async fn resume(&self) -> Result<(), RunError> {
        self.runtime.resume(&self.id).await
    }
    pub async fn start_child(
        &self,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunHandle, RunError> {
        let child = self.runtime.start_child(&self.id, prompt, config).await?;
        Ok(self.runtime.handle(&child))
    }
    pub async fn wait_settled(&self) -> Result<AgentRun, RunError> {
        self.runtime.wait_settled(&self.id).await
    }
}

impl Runtime {
    /// A runtime for `owner` (a tab or process) on `host`, talking to the
    /// tools actor at `tools` and the model through `provider`.
    pub fn new(
        host: Host,
        owner: OwnerId,
        tools: ToolsAddr,
        provider: Arc<dyn ModelProvider>,
        options: RuntimeOptions,
    ) -> Runtime {
        let leases = LeaseManager::new(
            host.storage.clone(),
            host.clock.clone(),
            host.executor.clone(),
            owner,
            options.lease_ttl,
        );
        Self::with_leases(host, leases, tools, provider, options)
    }

    /// [`Runtime::new`] with a lease manager the host built beforehand and
    /// shares with tools that take the session's lease themselves (the
    /// lease is reentrant per manager, S3.2: `start_deep_research` joins
    /// the lease of the turn that called it).
    pub fn with_leases(
        host: Host,
        leases: LeaseManager,
        tools: ToolsAddr,
        provider: Arc<dyn ModelProvider>,
        options: RuntimeOptions,
    ) -> Runtime {
        Self::from_parts(
            Ctx {
                host,
                tools,
                provider,
                options,
                events: EventBus::default(),
                #[cfg(feature = "sabotage")]
                sabotage: Sabotage::default(),
            },
            leases,
        )
    }

    /// A runtime over `ctx`, with its live supervisors' actor and the
    /// watcher of their ends spawned.
    fn from_parts(ctx: Ctx, leases: LeaseManager) -> Runtime {
        let ctx = Arc::new(ctx);
        let (reports, ends) = async_channel::unbounded();
        let held = Arc::new(Held::default());
        let live = live::spawn_live(ctx.clone(), leases.clone(), reports, held.clone());
        let runtime = Runtime {
            inner: Arc::new(Inner {
                ctx,
                leases,
                live,
                held,
                #[cfg(feature = "test-hooks")]
                settle_hook: std::sync::Mutex::new(None),
            }),
        };
        runtime
            .host()
            .executor
            .spawn(live::watch_supervisors(&runtime, ends));
        runtime
    }

    /// The same runtime with deliberate faults (crash simulator test only,
    /// feature `sabotage`).
    #[cfg(feature = "sabotage")]
    pub fn with_sabotage(self, sabotage: Sabotage) -> Runtime {
        let inner = &self.inner;
        let ctx = &inner.ctx;
        Self::from_parts(
            Ctx {
                host: ctx.host.clone(),
                tools: ctx.tools.clone(),
                provider: ctx.provider.clone(),
                options: ctx.options.clone(),
                events: ctx.events.clone(),
                sabotage,
            },
            inner.leases.clone(),
        )
    }

    /// Without the feature `sabotage` a [`Sabotage`] chooses no fault (it
    /// has no fields): the runtime unchanged, so the simulator ships in a
    /// release build with no switch that could break its guarantees.
    #[cfg(all(feature = "sim", not(feature = "sabotage")))]
    pub fn with_sabotage(self, _none: Sabotage) -> Runtime {
        self
    }

    /// Renew this owner's leases every third of their time to live, for as
    /// long as the runtime exists. Hosts spawn it once on their executor;
    /// without it a lease lapses after `RuntimeOptions::lease_ttl` and another
    /// tab may take the session over (the fence then refuses this one's writes).
    pub fn heartbeat(&self) -> agent_kernel::maybe_send::BoxFuture<'static, ()> {
        let weak = Arc::downgrade(&self.inner);
        Box::pin(async move {
            loop {
                let (clock, period) = match weak.upgrade() {
                    Some(inner) => (
                        inner.ctx.host.clock.clone(),
                        inner.ctx.options.lease_ttl / 3,
                    ),
                    None => return,
                };
                clock
                    .sleep(period.max(std::time::Duration::from_millis(1)))
                    .await;
                let Some(inner) = weak.upgrade() else { return };
                for e in inner.leases.renew_all().await {
                    tracing::warn!(error = %e, "a session lease was lost");
                }
            }
        })
    }

    /// This owner's leases (the host renews them with `renew_all`).
    pub fn leases(&self) -> &LeaseManager {
        &self.inner.leases
    }

    /// Every activity and text delta of every run, from now on.
    /// Announce `event` to every subscriber (a host's own live events
    /// about the runs, such as a Deep Research task's phase).
    pub fn emit(&self, event: RunEvent) {
        self.inner.ctx.events.emit(event);
    }

    pub fn subscribe(&self) -> async_channel::Receiver<RunEvent> {
        self.inner.ctx.events.subscribe()
    }

    pub fn handle(&self, run: &RunId) -> RunHandle {
        RunHandle {
            runtime: self.clone(),
            id: run.clone(),
        }
    }

    pub(super) fn host(&self) -> &Host {
        &self.inner.ctx.host
    }

    /// The run's supervisor if one is live here (none is spawned).
    async fn find(&self, run: &RunId) -> Result<Option<Addr<Msg>>, RunError> {
        Ok(self
            .inner
            .live
            .ask(|reply| LiveMsg::Find {
                run: run.clone(),
                reply,
            })
            .await?)
    }

    /// The run's supervisor, spawned (taking the lease) when none is live.
    async fn supervisor(&self, run: &RunId) -> Result<Addr<Msg>, RunError> {
        self.inner
            .live
            .ask(|reply| LiveMsg::Supervisor {
                run: run.clone(),
                reply,
            })
            .await?
    }

    /// Send a command to the run's supervisor. One found live may end
    /// before it reads the command (its run ended, or it was interrupted
    /// and had handled its one command): a command it never received
    /// (`Stopped`) goes to the supervisor spawned for the run now, once;
    /// one it dropped unanswered is answered from the stored run, as for a
    /// run that had already ended when the run is final.
    async fn command(
        &self,
        run: &RunId,
        make: impl Fn(agent_kernel::actor::Reply<Result<(), RunError>>) -> Msg,
    ) -> Result<(), RunError> {
        let addr = self.supervisor(run).await?;
        let undelivered = match addr.ask(&make).await {
            Ok(result) => return result,
            Err(e @ agent_kernel::ActorError::Stopped { .. }) => e,
            Err(e) => return Err(self.ended_before_reading(run, e).await),
        };
        tracing::debug!(run = %run, error = %undelivered, "the run's supervisor ended before the command; sending it to the next");
        let addr = self.supervisor(run).await?;
        match addr.ask(&make).await {
            Ok(result) => result,
            Err(e) => Err(self.ended_before_reading(run, e).await),
        }
    }

    /// The answer to a command whose supervisor ended without answering:
    /// `WrongStatus` when the run is final now, else `lost`.
    async fn ended_before_reading(&self, run: &RunId, lost: agent_kernel::ActorError) -> RunError {
        match load_run(&*self.host().storage, run).await {
            Ok((record, _)) if record.status.is_final() => RunError::WrongStatus {
                run: run.clone(),
                status: record.status,
                expected: "not final",
                action: "this command",
            },
            Ok(_) => RunError::Actor(lost),
            Err(e) => e,
        }
    }

    // ------------------------------------------------------------- commands

    /// Approve a pending approval: a one-time capability is minted and the call runs.
    pub async fn approve(&self, run: &RunId, request: &RequestId) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Approve {
            request: request.clone(),
            reply,
        })
        .await
    }

    /// Deny a pending approval: the model gets a denial result and the run goes on.
    pub async fn deny(&self, run: &RunId, request: &RequestId) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Deny {
            request: request.clone(),
            reply,
        })
        .await
    }

    /// Answer an `ask_user` question.
    pub async fn respond(
        &self,
        run: &RunId,
        request: &RequestId,
        text: &str,
    ) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Respond {
            request: request.clone(),
            text: text.to_owned(),
            reply,
        })
        .await
    }

    /// A server asks the person during call `ask.call_id` of `run`
    /// (`elicitation/create`): the request becomes a pending request of the
    /// run ([`crate::ElicitationAsk`]); this returns the
    /// person's answer once they give it (`respond`), or `Cancel` when the
    /// request is withdrawn (the call ended, the run stopped).
    pub async fn elicit(
        &self,
        run: &RunId,
        ask: crate::supervisor::ElicitationAsk,
    ) -> Result<crate::supervisor::ElicitationReply, RunError> {
        let (tx, rx) = futures::channel::oneshot::channel();
        let slot: crate::supervisor::ReplySlot =
            std::sync::Arc::new(std::sync::Mutex::new(Some(tx)));
        self.command(run, |reply| Msg::Elicit {
            ask: ask.clone(),
            answer: slot.clone(),
            reply,
        })
        .await?;
        Ok(rx
            .await
            .unwrap_or(crate::supervisor::ElicitationReply::Cancel))
    }

    /// Decide about a call whose effect is unknown.
    pub async fn decide(&self, run: &RunId, call: &CallId, choice: Choice) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Decide {
            call: call.clone(),
            choice,
            reply,
        })
        .await
    }

    /// Stop a run: `cancelled` / `user_stopped`. The supervisor tells the
    /// tools actor (`ToolsMsg::CancelRun`), which tells the tool actors
    /// holding the run's calls: a read in flight ends at once. A stop wins
    /// over a call that ends at the same moment, so the run still ends
    /// `cancelled` instead of going on to its next round.
    pub async fn stop(&self, run: &RunId) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Stop { reply }).await
    }

    /// Continue an interrupted run — the only way one continues (S2.5).
    pub async fn resume(&self, run: &RunId) -> Result<(), RunError> {
        self.command(run, |reply| Msg::Resume { reply }).await
    }
}
