//! Input tokens billed per model round with and without prompt caching
//! (issue 34 item 4): a 20-round scripted run (19 `read_note` rounds, then
//! the answer) through the Anthropic provider against a loopback Messages
//! server that reports cache reads and writes the way the API does
//! (`tests/loopback/anthropic_cache.rs`, shared with the tests). With
//! caching, each round is billed its uncached input at 1×, its cache reads
//! at 0.1× and its cache writes at 1.25× (the documented multipliers);
//! without, every input token at 1× (the same requests with no
//! breakpoints: nothing is cached). Token counts are the server's (one per
//! four bytes), not a tokenizer's.
//!
//! ```text
//! cargo bench -p agent-supervisor --bench prompt_caching
//! BENCH_JSON=<file> ...   # also append the figures as JSON lines
//! ```

#[cfg(not(target_arch = "wasm32"))]
#[path = "../tests/loopback/anthropic_cache.rs"]
mod anthropic_cache;
#[cfg(not(target_arch = "wasm32"))]
#[path = "../../../host-native/benches/common/mod.rs"]
mod common;

/// Model rounds of the scripted run.
#[cfg(not(target_arch = "wasm32"))]
const ROUNDS: usize = 20;

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    use std::sync::Arc;
    use std::time::Duration;

    use agent_kernel::host::ManualClock;
    use agent_kernel::ids::{OwnerId, SessionId};
    use agent_kernel::run::RunStatus;
    use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
    use agent_supervisor::{
        AnthropicConfig, AnthropicProvider, RunConfig, Runtime, RuntimeOptions,
    };
    use serde_json::json;

    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    let usages = tokio.block_on(async {
        let (base, server) = anthropic_cache::start(ROUNDS).await;
        let clock = Arc::new(ManualClock::new(1_767_225_600_000));
        let host = agent_test_support::memory_host(clock.clone(), 1);
        let tools = spawn_sim_tools(
            host.executor.clone(),
            clock.clone(),
            ToolLog::default(),
            SimToolsConfig::default(),
        );
        let provider = AnthropicProvider::new(AnthropicConfig::new(base), clock).expect("provider");
        let runtime = Runtime::new(
            host,
            OwnerId::new("bench").expect("owner"),
            tools,
            Arc::new(provider),
            RuntimeOptions::default(),
        );
        let run = runtime
            .start(
                &SessionId::new("bench").expect("session"),
                "Read the notes, one per round.",
                RunConfig::default(),
            )
            .await
            .expect("start");
        let record = tokio::time::timeout(Duration::from_secs(120), runtime.wait_settled(&run))
            .await
            .expect("the run settles")
            .expect("run");
        assert_eq!(record.status, RunStatus::Completed, "{record:?}");
        server.usages.lock().expect("usages").clone()
    });
    assert_eq!(usages.len(), ROUNDS, "one request per round");
    let rounds = usages.len() as f64;
    let with: f64 = usages.iter().map(|u| u.billed()).sum::<f64>() / rounds;
    let without: f64 = usages.iter().map(|u| u.total() as f64).sum::<f64>() / rounds;
    let reads: u64 = usages.iter().map(|u| u.cache_read_input_tokens).sum();
    let writes: u64 = usages.iter().map(|u| u.cache_creation_input_tokens).sum();
    println!(
        "prompt caching, {ROUNDS} rounds: {with:.0} input tokens billed per round with caching, \
         {without:.0} without ({:.2}×); {reads} read from the cache, {writes} written",
        without / with
    );
    let details = json!({"rounds": ROUNDS, "cache_read_tokens": reads, "cache_write_tokens": writes,
        "last_round_with": usages.last().map(|u| u.billed()),
        "last_round_without": usages.last().map(|u| u.total())});
    common::emit(
        "prompt_caching",
        "prompt_billed_input_per_round_cached",
        "input tokens billed per round, Anthropic breakpoints (20 rounds)",
        with,
        "tokens",
        details.clone(),
    );
    common::emit(
        "prompt_caching",
        "prompt_billed_input_per_round_uncached",
        "input tokens billed per round, no caching (20 rounds)",
        without,
        "tokens",
        details,
    );
}
