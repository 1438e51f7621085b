//! Deep Research in the tab-loss simulator (issue 19 acceptance, S9 with
//! S2.5, S3.3, S6.4): 1,000 seeds (`RESEARCH_SIM_SEEDS` to change), each a
//! task from the start turn to its report over SQLite on disk, with tabs
//! killed or interrupted (offline, page hidden, executor lost) at random
//! commits and await points, reloaded, the person approving the plan and
//! choosing Resume; checked by the run invariants and the research rules of
//! `agent_host_native::sim::research`: 0 violations.

use agent_host_native::sim::research::run_research_seeds;

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

/// The same simulation must be able to fail: each sabotaged driver (the
/// simulated person breaking a research rule) is caught on the seeds whose
/// honest play has no violation.
#[test]
fn the_research_simulation_catches_each_sabotaged_driver() {
    use agent_host_native::sim::research::{
        DriverSabotage, simulate_research_seed, simulate_sabotaged_research_seed,
    };
    let seeds = 0..12u64;
    for (sabotage, rule_broken) in [
        (
            DriverSabotage::ResumesOnLoad,
            "a page load read a source or asked the model before the person acted",
        ),
        (DriverSabotage::StartsTwice, "research tasks exist, not one"),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let mut honest = 0;
        let mut caught = Vec::new();
        for seed in seeds.clone() {
            let path = dir.path().join(format!("honest-{seed}.sqlite3"));
            honest += simulate_research_seed(&path, seed)
                .expect("simulate")
                .violations
                .len();
            let path = dir.path().join(format!("sabotaged-{seed}.sqlite3"));
            let report = simulate_sabotaged_research_seed(&path, seed, sabotage).expect("simulate");
            caught.extend(report.violations.iter().map(|v| v.to_string()));
        }
        eprintln!("{sabotage:?}: {} violations", caught.len());
        assert_eq!(honest, 0, "{sabotage:?}: the honest play is clean");
        assert!(!caught.is_empty(), "{sabotage:?} was not caught");
        assert!(
            caught.iter().any(|v| v.contains(rule_broken)),
            "{sabotage:?}: {caught:?}"
        );
    }
}
