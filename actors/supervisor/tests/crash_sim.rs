//! The crash simulator (issue 3 item 7) on the memory host: at least 1,000
//! seeds with zero violations, and the sabotage switch proving that the
//! simulator can fail. `CRASH_SIM_SEED=<n>` replays one seed alone.
#![cfg(not(target_arch = "wasm32"))]

use std::io::Write;
use std::sync::Arc;

use agent_kernel::host::Storage;
use agent_kernel::memory::MemoryStorage;
use agent_supervisor::Sabotage;
use agent_supervisor::sim::{boundaries, run_seed, run_seeds};

fn memory() -> Arc<dyn Storage> {
    Arc::new(MemoryStorage::new())
}

#[test]
fn crash_sim_thousand_seeds_no_violations() {
    if let Ok(seed) = std::env::var("CRASH_SIM_SEED") {
        let seed: u64 = seed.parse().expect("CRASH_SIM_SEED must be a number");
        let report = run_seed(seed, &memory, Sabotage::default());
        println!("{report:#?}");
        assert!(report.violations.is_empty());
        return;
    }
    let started = std::time::Instant::now();
    let summary = run_seeds(0..1000, memory, Sabotage::default());
    // Written straight to the process's stderr so that it shows even when
    // the test harness captures output.
    let _ = writeln!(
        std::io::stderr(),
        "{summary} ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    for v in summary.violations.iter().take(20) {
        println!("{v}");
    }
    assert_eq!(summary.seeds, 1000);
    // Every boundary of each mode is a crash point for some seed.
    let permissive = boundaries(&memory, agent_capabilities::ApprovalMode::Permissive);
    let strict = boundaries(&memory, agent_capabilities::ApprovalMode::Strict);
    let _ = writeln!(
        std::io::stderr(),
        "crash-sim boundaries: {permissive} commits (permissive), {strict} (strict)"
    );
    assert!(
        // 11 since a tool round makes two commits where it made four: its
        // model request shares the batch of the previous round's outcome,
        // and its response the batch of its first call (`running`, ...);
        // and a final answer ends the run in the same commit (S13).
        permissive >= 11 && strict > permissive,
        "{permissive} {strict}"
    );
    assert!(
        summary.crash_points >= 1000,
        "every seed kills at least one tab"
    );
    assert!(summary.violations.is_empty());
}

#[test]
fn crash_sim_detects_dispatch_before_running_is_durable() {
    let sabotage = Sabotage {
        dispatch_before_running: true,
        ..Sabotage::default()
    };
    let summary = run_seeds(0..200, memory, sabotage);
    println!("sabotaged (dispatch before running): {summary}");
    assert!(
        !summary.violations.is_empty(),
        "the simulator must catch the sabotage"
    );
}

#[test]
fn crash_sim_detects_unsafe_retry_on_resume() {
    let sabotage = Sabotage {
        retry_unsafe_on_resume: true,
        ..Sabotage::default()
    };
    let summary = run_seeds(0..200, memory, sabotage);
    println!("sabotaged (unsafe retry): {summary}");
    assert!(
        !summary.violations.is_empty(),
        "the simulator must catch the sabotage"
    );
}
