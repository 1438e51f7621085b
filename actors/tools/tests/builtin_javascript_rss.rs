//! S5.7: 10,000 consecutive `run_javascript` calls keep the process's
//! resident memory bounded. Its own test binary, so that no other test's
//! allocations move the measurement.
#![cfg(not(target_arch = "wasm32"))] // native tests (tokio); the browser runs builtin_wasm.rs

use std::time::{Duration, Instant};

use agent_tools::builtin::javascript::{JsLimits, run_script};
use serde_json::json;

/// Resident set size in bytes, from `/proc/self/statm` (second field, in pages).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

/// Growth allowed from the warmed-up baseline to the end of 10,000 calls.
const RSS_GROWTH_BOUND: u64 = 16 * 1024 * 1024;

#[test]
fn s5_7_ten_thousand_calls_keep_resident_memory_bounded() {
    let start = Instant::now();
    let now = move || -> Duration { start.elapsed() };
    let limits = JsLimits::DEFAULT;
    // Each call builds a little garbage: an object graph, strings, a closure.
    let code = "const xs = []; for (let i = 0; i < 200; i++) xs.push({ i, s: 'v' + i, f: () => i }); \
                ({ n: input.n, sum: xs.reduce((a, x) => a + x.f(), 0), last: xs[xs.length - 1].s })";
    let call = |n: u64| {
        let out = run_script(code, &json!({ "n": n }), &limits, now).expect("script runs");
        assert_eq!(out.value["n"], json!(n));
        assert_eq!(out.value["sum"], json!(19_900));
    };
    for n in 0..500 {
        call(n);
    }
    let baseline = rss_bytes();
    let mut peak = baseline;
    for n in 0..10_000 {
        call(n);
        if n % 1_000 == 0 {
            peak = peak.max(rss_bytes());
        }
    }
    let end = rss_bytes();
    peak = peak.max(end);
    eprintln!(
        "RSS baseline {} KiB, peak {} KiB, end {} KiB after 10,000 calls in {:?}",
        baseline / 1024,
        peak / 1024,
        end / 1024,
        start.elapsed()
    );
    assert!(
        peak.saturating_sub(baseline) < RSS_GROWTH_BOUND,
        "resident memory grew by {} KiB (bound {} KiB)",
        (peak - baseline) / 1024,
        RSS_GROWTH_BOUND / 1024
    );
}
