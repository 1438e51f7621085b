//! Deep Research in the tab-loss simulator (issue 19 acceptance, S9 with
//! S2.5, S3.3, S6.4): 1,000 seeds (`RESEARCH_SIM_SEEDS` to change), each a
//! task from the start turn to its report over SQLite on disk, with tabs
//! killed or interrupted (offline, page hidden, executor lost) at random
//! commits and await points, reloaded, the person approving the plan and
//! choosing Resume; checked by the run invariants and the research rules of
//! `agent_host_native::research_sim`: 0 violations.

use agent_host_native::research_sim::run_research_seeds;

#[test]
fn a_research_task_survives_1000_seeds_of_tab_loss_without_violations() {
    let seeds = std::env::var("RESEARCH_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000u64);
    let dir = tempfile::tempdir().expect("dir");
    let started = std::time::Instant::now();
    let summary = run_research_seeds(dir.path(), 0..seeds).expect("simulate");
    eprintln!("{summary} ({:.1} s)", started.elapsed().as_secs_f64());
    for v in summary.violations.iter().take(20) {
        eprintln!("{v}");
    }
    assert_eq!(summary.seeds, seeds);
    assert!(summary.crash_points >= seeds / 2, "{summary}");
    assert!(summary.violations.is_empty(), "{summary}");
}
