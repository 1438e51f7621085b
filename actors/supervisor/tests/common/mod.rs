//! Shared set-up for the supervisor's integration tests: a runtime on the
//! kernel's memory host (deterministic executor, manual clock), the test
//! tools actor and a scripted provider. Also the lifecycle scenario that runs
//! natively and in headless Chromium.
#![allow(dead_code, clippy::arc_with_non_send_sync)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_kernel::host::{Clock, Executor, Storage};
use agent_kernel::ids::{OwnerId, RunId, SessionId};
use agent_kernel::memory::{MemoryHost, MemoryStorage};
use agent_kernel::run::{Activity, AgentRun, RunStatus};
use agent_supervisor::provider::{ModelRequest, ModelStream};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::{
    ModelProvider, ProviderError, RunConfig, Runtime, RuntimeOptions, Scenario, ScriptedProvider,
};

pub struct Env {
    pub mem: MemoryHost,
    pub runtime: Runtime,
    pub log: ToolLog,
    pub session: SessionId,
    /// Every request the model was sent, in order.
    pub requests: Arc<Mutex<Vec<ModelRequest>>>,
}

/// The scripted provider, keeping a copy of each request it is sent.
struct Recording {
    inner: ScriptedProvider,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ModelProvider for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn capabilities(
        &self,
        model: &str,
    ) -> agent_supervisor::provider::capabilities::ModelCapabilities {
        self.inner.capabilities(model)
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream(request).await
    }
}

pub fn env(scenario: &str) -> Env {
    env_with(
        scenario,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
    )
}

pub fn env_with(scenario: &str, tools: SimToolsConfig, options: RuntimeOptions) -> Env {
    let mem = MemoryHost::fifo(7);
    tab(mem, scenario, tools, options, "tab-1")
}

/// A runtime for `owner` on `mem` (a new tab over the same storage and clock).
pub fn tab(
    mem: MemoryHost,
    scenario: &str,
    tools: SimToolsConfig,
    options: RuntimeOptions,
    owner: &str,
) -> Env {
    let host = mem.host();
    let log = ToolLog::default();
    let tools = spawn_sim_tools(
        Arc::new(mem.executor().clone()),
        host.clock.clone(),
        log.clone(),
        tools,
    );
    let scenario = Scenario::from_json(scenario).expect("test scenario is valid");
    let requests = Arc::new(Mutex::new(Vec::new()));
    let provider = Arc::new(Recording {
        inner: ScriptedProvider::new(scenario, host.clock.clone()),
        requests: requests.clone(),
    });
    let runtime = Runtime::new(host, OwnerId::new(owner).unwrap(), tools, provider, options);
    Env {
        mem,
        runtime,
        log,
        session: SessionId::new("session-1").unwrap(),
        requests,
    }
}

impl Env {
    /// Drive `fut` to completion, jumping the clock whenever everything waits on it.
    pub fn block<T>(&self, fut: impl std::future::Future<Output = T>) -> T {
        self.mem.block_on_advancing(fut).expect("the test stalled")
    }

    pub fn start(&self, prompt: &str, config: RunConfig) -> RunId {
        self.block(self.runtime.start(&self.session, prompt, config))
            .expect("run starts")
    }

    /// Run until the run is not `running`.
    pub fn settle(&self, run: &RunId) -> AgentRun {
        self.block(self.runtime.wait_settled(run))
            .expect("run settles")
    }

    pub fn run(&self, run: &RunId) -> AgentRun {
        self.block(self.runtime.run(run)).unwrap()
    }

    pub fn activities(&self, run: &RunId) -> Vec<Activity> {
        self.block(self.runtime.activities(run)).unwrap()
    }

    pub fn storage(&self) -> Arc<MemoryStorage> {
        self.mem.storage().clone()
    }

    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(self.mem.clock().clone())
    }

    /// Drop every task of this tab without cleanup (a killed tab).
    pub fn kill(&self) {
        self.mem.executor().kill();
    }

    /// Spawn a future on the tab's executor and run until everything waits.
    pub fn spawn(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        self.mem.executor().spawn(Box::pin(fut));
        self.mem.executor().run_until_stalled();
    }
}

/// Check S1.4 on a run's activities: gap-free, never back in time.
pub fn assert_gap_free_monotonic(activities: &[Activity], run: &AgentRun) {
    for (i, a) in activities.iter().enumerate() {
        assert_eq!(a.seq, i as u64, "activity sequence has a gap at {i}");
        if i > 0 {
            assert!(
                a.at_ms >= activities[i - 1].at_ms,
                "activity {i} goes back in time"
            );
        }
    }
    assert_eq!(run.next_activity, activities.len() as u64);
}

pub const READ_THEN_ANSWER: &str = r#"{"turns": [
  {"text": "Reading.", "tool_calls": [{"name": "read_note", "arguments": {"path": "notes/a.txt"}}]},
  {"text": "The note says hello."}
]}"#;

pub const SLOW_MODEL: &str = r#"{"turns": [
  {"text": "Thinking slowly.", "delay_ms": 10000, "tool_calls": [{"name": "read_note", "arguments": {"path": "notes/a.txt"}}]},
  {"text": "Done."}
]}"#;

/// The lifecycle scenario (S2.5): offline and page-hidden interrupt a running
/// run with the right reason, an awaiting run keeps its request, and only
/// `resume` continues. Runs natively and in headless Chromium.
pub fn lifecycle_scenario() {
    use agent_kernel::host::LifecycleEvent;
    use agent_kernel::run::StopReason;

    for (event, reason) in [
        (LifecycleEvent::Offline, StopReason::Offline),
        (LifecycleEvent::PageHidden, StopReason::PageInterrupted),
        (LifecycleEvent::ExecutorLost, StopReason::PageInterrupted),
    ] {
        let env = env(SLOW_MODEL);
        let run = env.start("hello", RunConfig::default());
        env.mem.executor().run_until_stalled();
        assert_eq!(
            env.mem.clock().pending_sleepers(),
            2,
            "the model round is under way (its answer, and the supervisor's active-time timer)"
        );
        env.mem.lifecycle().emit(event);
        if event == LifecycleEvent::Offline {
            // Back online before resuming.
        }
        let record = env.settle(&run);
        assert_eq!(record.status, RunStatus::Interrupted);
        assert_eq!(record.stop_reason, Some(reason.clone()));
        // Nothing continues by itself: time passes, the run stays interrupted.
        env.mem.advance(Duration::from_secs(60));
        assert_eq!(env.run(&run).status, RunStatus::Interrupted);
        env.mem.lifecycle().emit(LifecycleEvent::Online);
        env.block(env.runtime.resume(&run)).unwrap();
        let done = env.settle(&run);
        assert_eq!(
            done.status,
            RunStatus::Completed,
            "resume continues after {event:?}"
        );
        assert_gap_free_monotonic(&env.activities(&run), &done);
    }

    // An awaiting run ignores lifecycle events and keeps its pending request.
    let env = env(r#"{"turns": [
      {"text": "Q", "tool_calls": [{"name": "ask_user", "arguments": {"question": "which?"}}]},
      {"text": "ok"}]}"#);
    let run = env.start("hello", RunConfig::default());
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingInput);
    env.mem.lifecycle().emit(LifecycleEvent::PageHidden);
    env.mem.lifecycle().emit(LifecycleEvent::Offline);
    env.mem.executor().run_until_stalled();
    assert_eq!(env.run(&run).status, RunStatus::AwaitingInput);
    assert_eq!(env.block(env.runtime.pending(&run)).unwrap().len(), 1);
}

/// A fresh in-memory storage as a trait object.
pub fn memory() -> Arc<dyn Storage> {
    Arc::new(MemoryStorage::new())
}
