use agent_kernel::budget::Budget;
use agent_kernel::ids::{OwnerId, SessionId};
use agent_kernel::memory::MemoryHost;
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::{RunConfig, Runtime, RuntimeOptions, Scenario, ScriptedProvider};
use serde_json::json;
use std::sync::Arc;

#[test]
#[ignore]
fn rounds() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(999);
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    for _ in 0..reps {
        let mem = MemoryHost::fifo(3);
        let host = mem.host();
        let tools = spawn_sim_tools(
            Arc::new(mem.executor().clone()),
            host.clock.clone(),
            ToolLog::default(),
            SimToolsConfig::default(),
        );
        let mut turns: Vec<serde_json::Value> = (0..rounds)
            .map(|_| json!({"text": "", "tool_calls": [{"name": "read_note", "arguments": {"path": "notes/a.txt"}}], "usage": {"input_tokens": 10, "output_tokens": 2}}))
            .collect();
        turns.push(json!({"text": "done"}));
        let provider = Arc::new(ScriptedProvider::new(
            Scenario::from_json(&json!({"turns": turns}).to_string()).unwrap(),
            host.clock.clone(),
        ));
        let rt = Runtime::new(
            host,
            OwnerId::new("t").unwrap(),
            tools,
            provider,
            RuntimeOptions::default(),
        );
        let config = RunConfig {
            budget: Budget {
                max_tool_rounds: (rounds + 1) as u32,
                max_tool_calls: (rounds + 1) as u32,
                ..Budget::default()
            },
            ..RunConfig::default()
        };
        let t = std::time::Instant::now();
        let run = mem
            .block_on_advancing(rt.start(&SessionId::new("s").unwrap(), "go", config))
            .unwrap()
            .unwrap();
        mem.block_on_advancing(rt.wait_settled(&run))
            .unwrap()
            .unwrap();
        let el = t.elapsed();
        eprintln!(
            "{rounds} rounds: {:.1} µs/round",
            el.as_secs_f64() * 1e6 / rounds as f64
        );
    }
}
