//! Item 6 of issue 32: MCP stdio does no blocking I/O on the executor. A
//! real child process (`/bin/sh`) answers the handshake and then never
//! reads its stdin again; a call whose message is larger than any pipe
//! buffer (1 MiB) must fail with `McpError::Timeout` at its `timeout_ms`,
//! on a single-threaded runtime whose other task keeps running meanwhile.
//! Were the write done on the executor, its one thread would be parked in
//! `write_all`: the timer could not fire and the watchdog below would
//! report the hang instead.
#![cfg(unix)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use agent_mcp::{McpClient, McpError, McpServerConfig};
use common::*;

/// Answers `initialize` with the id it was sent, reads `initialized`,
/// then sleeps without ever reading stdin again.
const MUTE_SERVER: &str = r#"read line
id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9][0-9]*\).*/\1/')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"mute","version":"1"},"capabilities":{"tools":{}}}}\n' "$id"
read line
exec sleep 600
"#;

#[test]
fn a_server_that_never_reads_stdin_times_out_while_the_executor_keeps_running() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let outcome = runtime.block_on(async {
            let mut config = McpServerConfig::stdio("mute", "/bin/sh", ["-c", MUTE_SERVER]);
            config.env_allow = vec!["PATH".into()];
            config.timeout_ms = 500;
            let client = McpClient::connect(&config, &env()).await.unwrap();
            let ticks = Arc::new(AtomicU64::new(0));
            let ticker = {
                let ticks = ticks.clone();
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        ticks.fetch_add(1, Ordering::SeqCst);
                    }
                })
            };
            let big = "x".repeat(1 << 20);
            let started = Instant::now();
            let first = client
                .call_tool("echo", json!({ "text": big }), Default::default())
                .await;
            let elapsed = started.elapsed();
            let ticked = ticks.load(Ordering::SeqCst);
            // The connection stays usable for the caller: a second call
            // also ends at its deadline instead of hanging.
            let second = client.ping().await;
            ticker.abort();
            (first.map(|_| ()), elapsed, ticked, second)
        });
        let _ = done_tx.send(outcome);
    });
    let (first, elapsed, ticked, second) = done_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the call never ended: the executor thread was parked in a pipe write");
    assert!(
        matches!(first, Err(McpError::Timeout { ms: 500, .. })),
        "{first:?}"
    );
    assert!(
        elapsed >= Duration::from_millis(500),
        "not before the deadline: {elapsed:?}"
    );
    assert!(ticked > 0, "another task ran while the call waited");
    assert!(second.is_err(), "{second:?}");
}
