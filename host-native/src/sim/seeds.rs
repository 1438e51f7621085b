//! Seeded runs of a whole [`SimPlan`]: each seed draws where tabs are killed
//! or interrupted, plays the sessions to their end with the person's
//! answers, and checks the invariants ([`simulate_seed`], [`run_seeds`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agent_kernel::RunId;
use agent_kernel::host::{LifecycleEvent, SeededEntropy};
use agent_kernel::run::RunStatus;
use agent_supervisor::sim::{Rule, SimSummary, Violation};

use super::at::{At, Interruption};
use super::error::SimError;
use super::tab::{Person, Tab, lock};
use super::tabs::TabSim;
use super::wiring::SimWiring;

/// One session of a simulation and the prompts of its runs, in order.
#[derive(Debug, Clone)]
pub struct SessionPlan {
    pub session: String,
    pub prompts: Vec<String>,
}

/// What each seed of [`run_seeds`] plays: sessions with their runs, the
/// person, and how many interruptions (kills and lifecycle events at
/// random commits and await points) a seed may have at most.
#[derive(Debug, Clone)]
pub struct SimPlan {
    pub sessions: Vec<SessionPlan>,
    pub person: Person,
    pub max_interruptions: u32,
}

impl Default for SimPlan {
    fn default() -> Self {
        SimPlan {
            sessions: vec![SessionPlan {
                session: "sim-session".into(),
                prompts: vec!["simulated prompt".into()],
            }],
            person: Person::default(),
            max_interruptions: 3,
        }
    }
}

/// What one seed found.
#[derive(Debug, Clone, Default)]
pub struct SeedReport {
    pub seed: u64,
    pub crash_points: u64,
    pub violations: Vec<Violation>,
    /// How many calls reached each tool.
    pub dispatches: BTreeMap<String, u64>,
    /// Each run's final status.
    pub runs: Vec<(RunId, RunStatus)>,
}

/// The interruption a seed draws for a tab.
pub(crate) fn draw(rng: &SeededEntropy) -> (At, Interruption) {
    let below = |n: u64| rng.next_u64() % n;
    let at = if below(2) == 0 {
        At::Commit(1 + below(14))
    } else {
        At::AfterPolls(1 + below(80))
    };
    let what = match below(6) {
        0..=2 => Interruption::Kill,
        3 => Interruption::Raise(LifecycleEvent::Offline),
        4 => Interruption::Raise(LifecycleEvent::PageHidden),
        _ => Interruption::Raise(LifecycleEvent::ExecutorLost),
    };
    (at, what)
}

/// Play `plan` for one seed over a fresh database at `path`: tabs are
/// killed or interrupted where the seed says, reloaded, and the person
/// acts until every run is final or waits for them; then the invariants
/// are checked.
pub fn simulate_seed(
    path: &Path,
    seed: u64,
    wiring: &SimWiring,
    plan: &SimPlan,
) -> Result<SeedReport, SimError> {
    let sim = TabSim::with_wiring(path, seed, wiring.clone())?;
    let rng = SeededEntropy::new(seed ^ 0x7ab5_5eed);
    let mut left = 1 + rng.next_u64() % u64::from(plan.max_interruptions.max(1));
    let mut crash_points = 0;
    let mut tab_no = 0u64;
    let mut open = |crash_points: &mut u64, old: Option<Tab>| -> Result<Tab, SimError> {
        if let Some(old) = old {
            *crash_points += old.interruptions();
            sim.check_stored();
            sim.expire_leases();
        }
        tab_no += 1;
        let tab = sim.open_tab(&format!("t{tab_no}"))?;
        if left > 0 {
            left -= 1;
            let (at, what) = draw(&rng);
            tab.interrupt_at(at, what);
        }
        Ok(tab)
    };
    let mut tab = open(&mut crash_points, None)?;
    let mut runs = Vec::new();
    let mut known: BTreeSet<RunId> = BTreeSet::new();
    for session in &plan.sessions {
        for prompt in &session.prompts {
            let mut run: Option<RunId> = None;
            for _ in 0..12 {
                if tab.is_dead() {
                    tab = open(&mut crash_points, Some(tab))?;
                    let _ = tab.recover();
                    if let Some(id) = &run {
                        let _ = tab.present_pending(id);
                    }
                    continue;
                }
                let id = match &run {
                    Some(id) => id.clone(),
                    None => match tab.start(&session.session, prompt) {
                        Ok(id) => id,
                        Err(SimError::Dead(_)) => {
                            // Killed before `start` answered: a new run in
                            // the database is this one.
                            run = sim
                                .runs()?
                                .into_iter()
                                .map(|r| r.id)
                                .find(|id| !known.contains(id));
                            continue;
                        }
                        Err(e) => {
                            lock(&sim.checker)
                                .violation(Rule::Harness, format!("cannot start a run: {e}"));
                            break;
                        }
                    },
                };
                known.insert(id.clone());
                run = Some(id.clone());
                match tab.settle(&id, &plan.person) {
                    Err(SimError::Dead(_)) => continue,
                    Err(e) => {
                        lock(&sim.checker).violation(Rule::Harness, e.to_string());
                        break;
                    }
                    Ok(status) if status.is_final() => break,
                    // Interrupted by a raised event and nothing more to do,
                    // or waiting for the person: one more round decides.
                    Ok(_) => {
                        if tab.interruptions() == 0 {
                            break;
                        }
                    }
                }
            }
            if let Some(id) = run {
                known.insert(id.clone());
                runs.push(id);
            }
        }
    }
    crash_points += tab.interruptions();
    tab.close();
    sim.check_stored();
    let mut finals = Vec::new();
    for id in &runs {
        sim.check_final(id);
        if let Ok(r) = sim.runs()
            && let Some(r) = r.into_iter().find(|r| &r.id == id)
        {
            finals.push((id.clone(), r.status));
        }
    }
    let checker = lock(&sim.checker);
    let mut dispatches: BTreeMap<String, u64> = BTreeMap::new();
    for d in checker.dispatches() {
        *dispatches.entry(d.tool.clone()).or_default() += 1;
    }
    Ok(SeedReport {
        seed,
        crash_points,
        violations: checker.violations().to_vec(),
        dispatches,
        runs: finals,
    })
}

/// Play `plan` for every seed of `seeds`, each over a fresh database in
/// `dir`; returns the summary (its `Display` is the one-line
/// `crash-sim: <seeds> seeds, <points> crash points, <n> violations`) and
/// the calls that reached each tool, over all seeds.
pub fn run_seeds(
    dir: &Path,
    seeds: std::ops::Range<u64>,
    wiring: &SimWiring,
    plan: &SimPlan,
) -> Result<(SimSummary, BTreeMap<String, u64>), SimError> {
    let mut summary = SimSummary::default();
    let mut dispatches: BTreeMap<String, u64> = BTreeMap::new();
    for seed in seeds {
        let path = dir.join(format!("seed-{seed}.sqlite3"));
        let report = simulate_seed(&path, seed, wiring, plan)?;
        for (tool, n) in report.dispatches {
            *dispatches.entry(tool).or_default() += n;
        }
        summary.add_seed(report.crash_points, report.violations);
        // Each seed's database is its own; keep the directory small.
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    Ok((summary, dispatches))
}
