//! What the runtime test and the benchmark of this crate share: a
//! supervisor `Runtime` on a `PostgresStorage` (the tokio test host's clock
//! and executor, the simulated tools), and a scripted run of effectful
//! rounds (`write_note`), each stamped when the model is asked again.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_kernel::budget::Budget;
use agent_kernel::host::{Host, Lifecycle, SeededEntropy};
use agent_kernel::run::{ActivityKind, AgentRun};
use agent_kernel::{OwnerId, SessionId};
use agent_store_postgres::PostgresStorage;
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::{RunConfig, RunEvent, Runtime, RuntimeOptions, Scenario, ScriptedProvider};
use serde_json::json;

/// `rounds` tool rounds of one `write_note` each, then a final answer.
pub fn effectful_scenario(rounds: usize) -> Scenario {
    let mut turns = Vec::with_capacity(rounds + 1);
    for r in 0..rounds {
        turns.push(json!({"text": "", "tool_calls": [{"name": "write_note",
            "arguments": {"path": format!("notes/n{}.txt", (r * 7) % 50), "text": "x"}}],
            "usage": {"input_tokens": 10, "output_tokens": 2}}));
    }
    turns.push(json!({"text": "done", "usage": {"input_tokens": 10, "output_tokens": 2}}));
    Scenario::from_json(&json!({ "turns": turns }).to_string()).expect("scenario")
}

pub fn config(rounds: usize) -> RunConfig {
    let limit = u32::try_from(rounds + 1).unwrap_or(1000).min(1000);
    RunConfig {
        budget: Budget {
            max_tool_rounds: limit,
            max_tool_calls: limit,
            max_tokens: None,
            max_duration_ms: None,
        },
        ..RunConfig::default()
    }
}

/// What one run did.
pub struct Measured {
    pub run: AgentRun,
    /// Time between successive model requests: one per tool round.
    pub per_round: Vec<Duration>,
    /// Batches the store committed during the run.
    pub commits: u64,
}

/// Run `rounds` effectful rounds in `session` on `storage`, as `owner`.
pub async fn run_effectful(
    storage: Arc<PostgresStorage>,
    owner: &str,
    session: &str,
    rounds: usize,
) -> Measured {
    let clock = agent_test_support::clock();
    let executor = agent_test_support::executor();
    let host = Host {
        storage: storage.clone(),
        clock: clock.clone(),
        executor: executor.clone(),
        entropy: Arc::new(SeededEntropy::new(7)),
        lifecycle: Lifecycle::new(),
        durable: true,
    };
    let tools = spawn_sim_tools(
        executor,
        clock.clone(),
        ToolLog::default(),
        SimToolsConfig::default(),
    );
    let provider = Arc::new(ScriptedProvider::new(effectful_scenario(rounds), clock));
    let runtime = Runtime::new(
        host,
        OwnerId::new(owner).expect("owner"),
        tools,
        provider,
        RuntimeOptions::default(),
    );
    let stamps = Arc::new(Mutex::new(Vec::new()));
    let events = runtime.subscribe();
    {
        let stamps = stamps.clone();
        tokio::spawn(async move {
            while let Ok(e) = events.recv().await {
                if let RunEvent::Activity(a) = e
                    && matches!(a.kind, ActivityKind::ModelRequest { .. })
                {
                    stamps.lock().expect("stamps").push(Instant::now());
                }
            }
        });
    }
    let before = storage.counts().commits;
    let session = SessionId::new(session).expect("session");
    let run = runtime
        .start(&session, "bench", config(rounds))
        .await
        .expect("start");
    let run = runtime.wait_settled(&run).await.expect("settled");
    let commits = storage.counts().commits - before;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stamps = stamps.lock().expect("stamps").clone();
    Measured {
        run,
        per_round: stamps.windows(2).map(|w| w[1] - w[0]).collect(),
        commits,
    }
}
