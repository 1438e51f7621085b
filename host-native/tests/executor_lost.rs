//! The native host raises every interruption (S2.5, issue 17 item 4): a
//! tool whose task panics, a supervisor that panics, and a host that shuts
//! down each leave the run `interrupted` / `page_interrupted` with an
//! `executor_lost` activity naming what was lost, on SQLite on disk under
//! tokio; Resume continues it, repeating only what is safe to repeat.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agent_assembly::{Assembly, Parts};
use agent_capabilities::{EffectClass, EffectSet, Idempotency, Origin, Sensitivity, Trust};
use agent_host_native::config::Config;
use agent_host_native::host::{NativeHost, NativeHostOptions};
use agent_kernel::RunId;
use agent_kernel::SessionId;
use agent_kernel::journal::CallState;
use agent_kernel::protocol::{Provenance, TargetRule, ToolDefinition, ToolFailure, ToolSuccess};
use agent_kernel::run::{ActivityKind, AgentRun, PendingKind, RunStatus, StopReason};
use agent_kernel::tool::{Tool, ToolContext, spawn_tool};
use agent_supervisor::provider::{ModelRequest, ModelStream};
use agent_supervisor::{
    ModelProvider, ProviderError, RunConfig, RuntimeOptions, Scenario, ScriptedProvider,
};
use agent_tools::ToolRegistration;
use serde_json::{Value, json};

/// How a [`Flaky`] tool misbehaves on its first call.
#[derive(Clone, Copy)]
enum FirstCall {
    Panics,
    Hangs,
}

/// A tool that misbehaves on its first call and answers after that.
struct Flaky {
    name: &'static str,
    effects: EffectClass,
    idempotency: Idempotency,
    first: FirstCall,
    calls: Arc<AtomicU32>,
}

#[async_trait::async_trait]
impl Tool for Flaky {
    type Args = Value;
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.into(),
            description: "A test host's tool that misbehaves once.".into(),
            parameters: json!({"type": "object"}),
            origin: Origin::Builtin,
            provider: None,
            effects: [self.effects].into_iter().collect::<EffectSet>(),
            idempotency: self.idempotency,
            sensitivity: Sensitivity::Private,
            target: TargetRule::None,
            annotations: None,
        }
    }
    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<ToolSuccess, ToolFailure> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            match self.first {
                FirstCall::Panics => panic!("{} lost its footing", self.name),
                FirstCall::Hangs => tokio::time::sleep(Duration::from_secs(3600)).await,
            }
        }
        Ok(ToolSuccess {
            content: json!({"ok": true}),
            trust: Trust::Internal,
            provenance: Provenance {
                origin: "builtin".into(),
                tool: self.name.into(),
                ..Provenance::default()
            },
            references: Vec::new(),
            receipts: Vec::new(),
        })
    }
}

/// The scripted model, panicking on the first request it gets: the
/// supervisor's own task panics with it.
struct PanicsOnce {
    inner: ScriptedProvider,
    requests: AtomicU32,
}

#[async_trait::async_trait]
impl ModelProvider for PanicsOnce {
    fn name(&self) -> &str {
        "panics-once"
    }
    fn capabilities(
        &self,
        model: &str,
    ) -> agent_supervisor::provider::capabilities::ModelCapabilities {
        self.inner.capabilities(model)
    }
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        if self.requests.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("the model adapter hit a bug");
        }
        self.inner.stream(request).await
    }
}

struct Env {
    native: NativeHost,
    assembly: Assembly,
    _dir: tempfile::TempDir,
}

async fn env(
    scenario: &str,
    tools: Vec<Flaky>,
    provider: impl FnOnce(ScriptedProvider) -> Arc<dyn ModelProvider>,
) -> Env {
    let dir = tempfile::tempdir().expect("data dir");
    let native = NativeHost::open_with(dir.path(), NativeHostOptions::default())
        .await
        .expect("host");
    let host = native.host().clone();
    let scripted = ScriptedProvider::new(
        Scenario::from_json(scenario).expect("scenario"),
        host.clock.clone(),
    );
    let own_tools = tools
        .into_iter()
        .map(|tool| {
            let (addr, def) =
                spawn_tool(host.executor.clone(), host.clock.clone(), tool).expect("spawn");
            ToolRegistration::builtin(def, addr)
        })
        .collect();
    let assembly = Assembly::build_with_tools(
        Parts {
            host,
            owner: native.owner().clone(),
            provider: provider(scripted),
            javascript: None,
            pdf_reader: None,
            html_extractor: None,
            fetch: None,
            secrets: Config::default().secret_resolver(),
            plugins: Vec::new(),
            always_on_plugins: Vec::new(),
            mcp: Vec::new(),
            search: None,
            runtime: RuntimeOptions {
                lease_ttl: native.lease_ttl(),
                stop_grace: Duration::from_millis(200),
                ..RuntimeOptions::default()
            },
        },
        own_tools,
    )
    .expect("assembly");
    native.keep_renewed(assembly.runtime().leases());
    Env {
        native,
        assembly,
        _dir: dir,
    }
}

impl Env {
    async fn start(&self) -> RunId {
        self.assembly
            .runtime()
            .start(&SessionId::new("s1").unwrap(), "go", RunConfig::default())
            .await
            .expect("start")
    }

    /// Wait until the run is not `running`, approving what it asks.
    async fn settle(&self, run: &RunId) -> AgentRun {
        let runtime = self.assembly.runtime();
        loop {
            let settled = tokio::time::timeout(Duration::from_secs(60), runtime.wait_settled(run))
                .await
                .expect("the run settles within a minute")
                .expect("settles");
            if settled.status != RunStatus::AwaitingApproval {
                return settled;
            }
            for p in runtime.pending(run).await.expect("pending") {
                if matches!(p.kind, PendingKind::Approval { .. }) {
                    runtime.approve(run, &p.id).await.expect("approve");
                }
            }
        }
    }

    async fn lost_executors(&self, run: &RunId) -> Vec<String> {
        self.assembly
            .runtime()
            .activities(run)
            .await
            .expect("activities")
            .into_iter()
            .filter_map(|a| match a.kind {
                ActivityKind::ExecutorLost { executor } => Some(executor),
                _ => None,
            })
            .collect()
    }
}

fn one_call(tool: &str) -> String {
    format!(
        r#"{{"turns": [
            {{"text": "Calling.", "tool_calls": [{{"name": "{tool}", "arguments": {{}}}}]}},
            {{"text": "Done."}}
        ]}}"#
    )
}

fn interrupted_by_lost_executor(run: &AgentRun) {
    assert_eq!(run.status, RunStatus::Interrupted, "{run:?}");
    assert_eq!(
        run.stop_reason,
        Some(StopReason::PageInterrupted),
        "{run:?}"
    );
}

/// A read-only tool whose task panics: the run is interrupted naming the
/// tool, nothing is handed to the model as if the tool had answered, and
/// Resume calls it again (safe to repeat) and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_5_a_panicking_read_tool_interrupts_the_run_and_resume_repeats_it() {
    let calls = Arc::new(AtomicU32::new(0));
    let tool = Flaky {
        name: "flaky_lookup",
        effects: EffectClass::ReadLocal,
        idempotency: Idempotency::Idempotent,
        first: FirstCall::Panics,
        calls: calls.clone(),
    };
    let env = env(&one_call("flaky_lookup"), vec![tool], |p| Arc::new(p)).await;
    let run = env.start().await;
    let settled = env.settle(&run).await;
    interrupted_by_lost_executor(&settled);
    assert_eq!(env.lost_executors(&run).await, ["tool:flaky_lookup"]);
    let journal = env.assembly.runtime().journal(&run).await.expect("journal");
    assert_eq!(journal.len(), 1);
    assert_eq!(
        journal[0].state,
        CallState::Running,
        "left to Resume's replay rule"
    );
    assert!(
        env.assembly.runtime().resume(&run).await.is_ok(),
        "an interrupted run resumes"
    );
    let done = env.settle(&run).await;
    assert_eq!(done.status, RunStatus::Completed, "{done:?}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the read ran again on resume"
    );
}

/// A non-idempotent tool whose task panics: its effect is uncertain, so
/// Resume never repeats it (S2.3): the person decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_3_a_panicking_write_tool_is_never_repeated_on_resume() {
    let calls = Arc::new(AtomicU32::new(0));
    let tool = Flaky {
        name: "place_order",
        effects: EffectClass::WriteLocal,
        idempotency: Idempotency::NonIdempotent,
        first: FirstCall::Panics,
        calls: calls.clone(),
    };
    let env = env(&one_call("place_order"), vec![tool], |p| Arc::new(p)).await;
    let run = env.start().await;
    let settled = env.settle(&run).await;
    interrupted_by_lost_executor(&settled);
    assert_eq!(env.lost_executors(&run).await, ["tool:place_order"]);
    env.assembly.runtime().resume(&run).await.expect("resume");
    let after = env.settle(&run).await;
    assert!(
        matches!(after.stop_reason, Some(StopReason::EffectUnknown { .. })),
        "the person decides about an uncertain write: {after:?}"
    );
    let journal = env.assembly.runtime().journal(&run).await.expect("journal");
    assert_eq!(journal[0].state, CallState::EffectUnknown);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "never dispatched twice");
}

/// A supervisor that panics (here its model adapter, on the supervisor's
/// own task) loses its run with it: the runtime interrupts the run naming
/// the supervisor, and Resume continues it with a fresh supervisor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_5_a_panicking_supervisor_interrupts_its_run() {
    let env = env(r#"{"turns": [{"text": "Hello."}]}"#, Vec::new(), |p| {
        Arc::new(PanicsOnce {
            inner: p,
            requests: AtomicU32::new(0),
        })
    })
    .await;
    let run = env.start().await;
    let settled = env.settle(&run).await;
    interrupted_by_lost_executor(&settled);
    assert_eq!(env.lost_executors(&run).await, ["supervisor"]);
    env.assembly.runtime().resume(&run).await.expect("resume");
    let done = env.settle(&run).await;
    assert_eq!(done.status, RunStatus::Completed, "{done:?}");
}

/// A host that shuts down (`NativeHost::shut_down`, what SIGTERM does to
/// `agentrt`) interrupts the run it is executing, its call in flight
/// included; Resume repeats the read and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_5_a_host_shutting_down_interrupts_the_runs_it_executes() {
    let calls = Arc::new(AtomicU32::new(0));
    let tool = Flaky {
        name: "slow_lookup",
        effects: EffectClass::ReadLocal,
        idempotency: Idempotency::Idempotent,
        first: FirstCall::Hangs,
        calls: calls.clone(),
    };
    let env = env(&one_call("slow_lookup"), vec![tool], |p| Arc::new(p)).await;
    let run = env.start().await;
    while calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    env.native.shut_down();
    let settled = env.settle(&run).await;
    interrupted_by_lost_executor(&settled);
    assert_eq!(env.lost_executors(&run).await, ["host"]);
    env.assembly.runtime().resume(&run).await.expect("resume");
    let done = env.settle(&run).await;
    assert_eq!(done.status, RunStatus::Completed, "{done:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
