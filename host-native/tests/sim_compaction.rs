//! Compaction in the tab-loss simulator (issue 37 part 1 acceptance, S12.4
//! with S2.5 and S3.3): 60 seeds (`COMPACTION_SIM_SEEDS` to change), each a
//! session whose second run summarises the first turn, over SQLite on disk,
//! with the tab killed at a seeded await point, a new tab resuming: the
//! run completes, one summary is stored and recorded once, and the run
//! invariants hold. 0 violations.

use agent_host_native::sim::compaction::run_compaction_seeds;

#[test]
fn s12_4_a_crash_during_compaction_resumes_without_a_second_summary() {
    let seeds = std::env::var("COMPACTION_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60u64);
    let dir = tempfile::tempdir().expect("dir");
    let summary = run_compaction_seeds(dir.path(), 0..seeds).expect("simulate");
    eprintln!("{summary}");
    for v in summary.violations.iter().take(20) {
        eprintln!("{v}");
    }
    assert_eq!(summary.seeds, seeds);
    assert!(summary.crash_points >= seeds / 2, "{summary}");
    assert!(summary.violations.is_empty(), "{summary}");
}
