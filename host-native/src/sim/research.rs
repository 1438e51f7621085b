//! Deep Research in the tab-loss simulator (feature `sim`, issue 19): one
//! task from the start turn to its report, with tabs killed or interrupted
//! (offline, page hidden, executor lost) where the seed says, reloaded, and
//! the person deciding the plan and choosing Resume. Reads go through
//! [`SimPages`], a deterministic `FetchBackend` that counts every read; the
//! model is the scripted one, playing the start turn, a plan and a report
//! draft by prompt.
//!
//! Besides the run invariants of `agent_supervisor::sim` (checked on every
//! run the task made), each seed checks the research rules (S9):
//! - the task ends `reported` or `partial`, with a report Artifact whose
//!   bytes hash to its id and whose every finding resolves to stored
//!   evidence of the frozen snapshot ([`Report::validate`]);
//! - exactly one task exists, whatever was cut and repeated;
//! - every source read was in the approved snapshot, and none was read
//!   more often than once plus the interruptions (a read cut in flight is
//!   read again; a settled one never);
//! - after a page load nothing is read and no model is asked until the
//!   person acts (S9.6).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_fetch::{FetchBackend, FlowFailure, Page, ReaderUsed};
use agent_kernel::host::{Host, SeededEntropy};
use agent_kernel::tool::CancelToken;
use agent_research::report::Report;
use agent_research::view::ResearchView;
use agent_research::{PlanDecision, TaskId};
use agent_supervisor::sim::Rule;
use agent_supervisor::{ModelProvider, Scenario, ScriptedProvider};

use crate::sim::{At, Interruption, SeedReport, SimError, SimWiring, Tab, TabSim};

/// The sources the simulated plan names.
pub const SOURCES: [&str; 3] = [
    "https://cells.example.org/density",
    "https://plants.example.org/2027",
    "https://news.example.org/prices",
];

const SESSION: &str = "research-sim";

/// Pages on `example.org`, in memory: each read answers at once and is
/// counted by URL.
#[derive(Debug, Default, Clone)]
pub struct SimPages {
    reads: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl SimPages {
    /// Reads made so far, by URL.
    pub fn reads(&self) -> BTreeMap<String, u64> {
        self.reads.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn total(&self) -> u64 {
        self.reads().values().sum()
    }
}

#[async_trait::async_trait]
impl FetchBackend for SimPages {
    async fn fetch(&self, url: &str, _cancel: CancelToken) -> Result<Page, FlowFailure> {
        if let Ok(mut reads) = self.reads.lock() {
            *reads.entry(url.to_owned()).or_default() += 1;
        }
        let text = format!("The page at {url} says: solid-state cells reach 500 Wh/kg.");
        Ok(Page {
            requested_url: url.to_owned(),
            final_url: url.to_owned(),
            reader: ReaderUsed::Direct,
            fallback: None,
            title: Some("A source".into()),
            body_bytes: text.len() as u64,
            text,
            content_type: "text/plain".into(),
            status: 200,
            body_truncated: false,
            text_truncated: false,
            redirects: Vec::new(),
            fetched_at_ms: 0,
        })
    }

    fn name(&self) -> &'static str {
        "native"
    }
}

/// The scripted model of the flow: a start turn that answers without the
/// call (the runtime makes it), a plan naming [`SOURCES`], and a draft
/// citing the first source read.
pub fn scenario() -> String {
    let plan = serde_json::json!({
        "questions": ["How dense are the cells?", "When do plants open?"],
        "queries": ["solid-state density"],
        "sources": SOURCES,
        "domains": ["example.org"],
    });
    let draft = serde_json::json!({
        "title": "Solid-state cells",
        "findings": [{"claim": "Cells reach 500 Wh/kg.", "evidence": ["ev-1"]}],
        "unverified": [{"text": "Prices may halve."}],
        "model_knowledge": [{"text": "The electrolyte is solid."}],
    });
    serde_json::json!({
        "turns": [{"text": "I can look into that."}],
        "prompts": [
            {"starts_with": "You plan a Deep Research task.", "turns": [{"text": plan.to_string()}]},
            {"starts_with": "You write the report of a Deep Research task.", "turns": [{"text": draft.to_string()}]},
        ],
    })
    .to_string()
}

/// The wiring of the research simulation, reading through `pages`.
pub fn wiring(pages: &SimPages) -> Result<SimWiring, SimError> {
    let scenario =
        Scenario::from_json(&scenario()).map_err(|e| SimError::Scenario(e.to_string()))?;
    let mut wiring = SimWiring::scripted(&scenario_text(&scenario)?)?;
    wiring.provider = Arc::new(move |host: &Host| {
        Arc::new(ScriptedProvider::new(scenario.clone(), host.clock.clone()))
            as Arc<dyn ModelProvider>
    });
    Ok(wiring.with_fetch(Arc::new(pages.clone())))
}

fn scenario_text(scenario: &Scenario) -> Result<String, SimError> {
    serde_json::to_string(scenario).map_err(|e| SimError::Scenario(e.to_string()))
}

/// Where the seed interrupts a tab: a commit or an await point somewhere in
/// the flow (a tab makes about 25 commits from the start turn to the
/// report), and what happens there.
fn draw(rng: &SeededEntropy) -> (At, Interruption) {
    let below = |n: u64| rng.next_u64() % n;
    let at = if below(2) == 0 {
        At::Commit(1 + below(24))
    } else {
        At::AfterPolls(1 + below(200))
    };
    let what = match below(6) {
        0..=2 => Interruption::Kill,
        3 => Interruption::Raise(agent_kernel::host::LifecycleEvent::Offline),
        4 => Interruption::Raise(agent_kernel::host::LifecycleEvent::PageHidden),
        _ => Interruption::Raise(agent_kernel::host::LifecycleEvent::ExecutorLost),
    };
    (at, what)
}

/// Deliberate faults of the simulated person (feature `test-hooks` only):
/// the simulator's own test plays them to prove that its research rules
/// can fail. A release `agentrt` cannot set any: without the feature only
/// [`DriverFaults::default`] (none) exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct DriverFaults {
    /// At each page load the driver takes the task up itself, before the
    /// person acted (breaks S9.6: a reload never resumes by itself).
    resumes_on_load: bool,
    /// Once the task exists the driver starts the research again (breaks
    /// "the person's one request makes exactly one task").
    starts_twice: bool,
}

/// A sabotaged driver for [`simulate_sabotaged_research_seed`] (feature
/// `test-hooks`, tests only).
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverSabotage {
    /// Resumes or advances the task at every page load, without Resume.
    ResumesOnLoad,
    /// Starts the research a second time once its task exists.
    StartsTwice,
}

/// Begins the line a sabotaged research driver prints; a string only the
/// sabotage puts in a binary.
#[cfg(feature = "test-hooks")]
pub const DRIVER_SABOTAGE_MARKER: &str = "research-sim driver sabotage";

/// [`simulate_research_seed`] with the simulated person sabotaged as
/// `sabotage` says (tests only): the simulator must report violations.
#[cfg(feature = "test-hooks")]
pub fn simulate_sabotaged_research_seed(
    path: &Path,
    seed: u64,
    sabotage: DriverSabotage,
) -> Result<SeedReport, SimError> {
    tracing::warn!("{DRIVER_SABOTAGE_MARKER}: {sabotage:?}");
    let faults = DriverFaults {
        resumes_on_load: sabotage == DriverSabotage::ResumesOnLoad,
        starts_twice: sabotage == DriverSabotage::StartsTwice,
    };
    play_research_seed(path, seed, faults)
}

/// Play the research flow for `seed` over a fresh database at `path`.
pub fn simulate_research_seed(path: &Path, seed: u64) -> Result<SeedReport, SimError> {
    play_research_seed(path, seed, DriverFaults::default())
}

fn play_research_seed(
    path: &Path,
    seed: u64,
    faults: DriverFaults,
) -> Result<SeedReport, SimError> {
    let pages = SimPages::default();
    let sim = TabSim::with_wiring(path, seed, wiring(&pages)?)?;
    let rng = SeededEntropy::new(seed ^ 0x5e5e_a2c4);
    let mut left = 1 + rng.next_u64() % 2;
    let mut crash_points = 0u64;
    let mut tabs = 0u64;
    let violation = |rule: Rule, detail: String| sim.checker().violation(rule, detail);
    let mut open = |old: Option<Tab>, crash_points: &mut u64| -> Result<Tab, SimError> {
        if let Some(old) = old {
            *crash_points += old.interruptions();
            if !old.is_dead() {
                old.kill();
            }
            sim.check_stored();
            sim.expire_leases();
        }
        tabs += 1;
        let tab = sim.open_tab(&format!("t{tabs}"))?;
        if left > 0 {
            left -= 1;
            let (at, what) = draw(&rng);
            tab.interrupt_at(at, what);
        }
        Ok(tab)
    };
    let mut tab = open(None, &mut crash_points)?;
    let mut task: Option<TaskId> = None;
    let mut finished: Option<ResearchView> = None;
    let mut started_twice = false;
    for _ in 0..20 {
        if tab.is_dead() || tab.interruptions() > 0 {
            // A reload: the session is opened again (tasks mid-phase are
            // interrupted); nothing may be read or asked of the model
            // until the person acts (S9.6).
            tab = open(Some(tab), &mut crash_points)?;
            let before = (pages.total(), work_done(&sim));
            let _ = tab.open_session(SESSION);
            let _ = tab.recover();
            tab.drive();
            if faults.resumes_on_load
                && let Some(id) = &task
            {
                let _ = drive_task(&tab, id);
                tab.drive();
            }
            if (pages.total(), work_done(&sim)) != before {
                violation(
                    Rule::Research,
                    "a page load read a source or asked the model before the person acted".into(),
                );
            }
            continue;
        }
        let Some(id) = &task else {
            // A start turn already stored (cut before it answered) is the
            // person's one request: they resume it, never start another.
            if sim
                .runs()
                .is_ok_and(|runs| runs.iter().any(|r| r.parent.is_none()))
            {
                resume_start_turn(&tab, &sim);
                task = find_task(&tab)?;
                continue;
            }
            match tab.start_research(SESSION, "Solid-state batteries") {
                Ok(started) => task = Some(started.task),
                Err(SimError::Dead(_) | SimError::Research(_)) => {
                    // Cut before the start turn answered: the task, if its
                    // call was made, else the start turn to resume.
                    task = find_task(&tab)?;
                    if task.is_none() && !tab.is_dead() && tab.interruptions() == 0 {
                        resume_start_turn(&tab, &sim);
                        task = find_task(&tab)?;
                    }
                }
                Err(e) => return Err(e),
            }
            continue;
        };
        if faults.starts_twice && !started_twice {
            started_twice = true;
            let _ = tab.start_research(SESSION, "Solid-state batteries");
            continue;
        }
        match drive_task(&tab, id) {
            Ok(view) if view.phase == "reported" || view.phase == "partial" => {
                finished = Some(view);
                break;
            }
            Ok(_) | Err(SimError::Dead(_) | SimError::Research(_)) => {}
            Err(e) => return Err(e),
        }
    }
    crash_points += tab.interruptions();
    let Some(task) = task else {
        violation(Rule::Research, "no research task was ever created".into());
        return report(&sim, seed, crash_points);
    };
    match finished {
        None => violation(
            Rule::Research,
            format!("task {task} did not reach a report within the simulation"),
        ),
        Some(view) => check_report(&sim, &tab, &view, &pages, crash_points),
    }
    tab.close();
    sim.check_stored();
    if let Ok(runs) = sim.runs() {
        for run in runs {
            sim.check_final(&run.id);
        }
    }
    report(&sim, seed, crash_points)
}

/// The one task of the session, if the start call made it.
fn find_task(tab: &Tab) -> Result<Option<TaskId>, SimError> {
    match tab.research_tasks(SESSION) {
        Ok(tasks) => Ok(tasks.into_iter().next().map(|t| t.task)),
        Err(SimError::Dead(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The person resumes the start turn left interrupted (its call not made yet).
fn resume_start_turn(tab: &Tab, sim: &TabSim) {
    let runs = sim.runs().unwrap_or_default();
    if let Some(run) = runs.iter().find(|r| r.parent.is_none())
        && run.status == agent_kernel::run::RunStatus::Interrupted
    {
        let _ = tab.resume(&run.id);
        tab.drive();
    }
}

/// Model rounds and calls made so far, over every run.
fn work_done(sim: &TabSim) -> (u64, u64) {
    sim.runs()
        .unwrap_or_default()
        .iter()
        .fold((0, 0), |(tokens, calls), r| {
            (
                tokens + r.usage.input_tokens + r.usage.output_tokens,
                calls + r.usage.tool_calls,
            )
        })
}

/// One step of the person: approve a waiting plan, resume an interrupted
/// task, or let the task go on.
fn drive_task(tab: &Tab, task: &TaskId) -> Result<ResearchView, SimError> {
    let view = tab
        .research_tasks(SESSION)?
        .into_iter()
        .find(|t| &t.task == task)
        .ok_or_else(|| SimError::Research(format!("task {task} is gone")))?;
    match view.phase {
        "interrupted" => tab.resume_research(SESSION, task),
        "awaiting_plan_approval" => match &view.plan_request {
            Some(request) => tab.decide_plan(SESSION, task, &request.id, PlanDecision::Approve),
            None => Ok(view),
        },
        "planning" | "executing" | "synthesizing" => tab.advance_research(SESSION, task),
        _ => Ok(view),
    }
}

/// The research rules at the end of a seed.
fn check_report(sim: &TabSim, tab: &Tab, view: &ResearchView, pages: &SimPages, crash_points: u64) {
    let violation = |detail: String| sim.checker().violation(Rule::Research, detail);
    let tasks = tab.research_tasks(SESSION).unwrap_or_default();
    if tasks.len() != 1 {
        violation(format!("{} research tasks exist, not one", tasks.len()));
    }
    let Some(reference) = &view.report else {
        violation(format!(
            "task {} is {} without a report",
            view.task, view.phase
        ));
        return;
    };
    let storage = &tab.assembly().host().storage;
    let bytes = match futures::executor::block_on(storage.get_blob(&reference.artifact)) {
        Ok(Some(bytes)) => bytes,
        other => {
            violation(format!(
                "the report Artifact {} is missing: {other:?}",
                reference.artifact
            ));
            return;
        }
    };
    if agent_capabilities::sha256_hex(&bytes) != reference.artifact {
        violation("the report's bytes do not hash to its id".into());
    }
    let stored = futures::executor::block_on(
        tab.assembly()
            .research_store()
            .load(&view.session, &view.task),
    );
    match (Report::from_bytes(&bytes), stored) {
        (Ok(report), Ok(task)) => {
            if let Err(e) = report.validate(task.snapshot.as_ref()) {
                violation(format!("the report's evidence does not resolve: {e}"));
            }
        }
        (report, task) => violation(format!(
            "the report or its task does not decode: {:?} / {:?}",
            report.err(),
            task.err()
        )),
    }
    for (url, reads) in pages.reads() {
        if !SOURCES.contains(&url.as_str()) {
            violation(format!(
                "{url} was read but is not in the approved snapshot"
            ));
        }
        if reads > 1 + crash_points {
            violation(format!(
                "{url} was read {reads} times with {crash_points} interruptions"
            ));
        }
    }
}

fn report(sim: &TabSim, seed: u64, crash_points: u64) -> Result<SeedReport, SimError> {
    let checker = sim.checker();
    Ok(SeedReport {
        seed,
        crash_points,
        violations: checker.violations().to_vec(),
        dispatches: BTreeMap::new(),
        runs: sim.runs()?.into_iter().map(|r| (r.id, r.status)).collect(),
    })
}

/// [`simulate_research_seed`] for every seed of `seeds`, each over a fresh
/// database in `dir`, on two threads (each seed is deterministic on its
/// own executor and clock); the summary line counts seeds, crash points and
/// violations.
pub fn run_research_seeds(
    dir: &Path,
    seeds: std::ops::Range<u64>,
) -> Result<agent_supervisor::sim::SimSummary, SimError> {
    let play = |seeds: Vec<u64>| -> Result<Vec<SeedReport>, SimError> {
        let mut reports = Vec::with_capacity(seeds.len());
        for seed in seeds {
            let path = dir.join(format!("research-{seed}.sqlite3"));
            reports.push(simulate_research_seed(&path, seed)?);
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
        Ok(reports)
    };
    let (even, odd): (Vec<u64>, Vec<u64>) = seeds.partition(|s| s % 2 == 0);
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| play(odd));
        let mine = play(even);
        (mine, other.join())
    });
    let b = b.map_err(|_| SimError::Research("a simulation thread panicked".into()))?;
    let mut reports: Vec<SeedReport> = a?.into_iter().chain(b?).collect();
    reports.sort_by_key(|r| r.seed);
    let mut summary = agent_supervisor::sim::SimSummary::default();
    for report in reports {
        summary.add_seed(report.crash_points, report.violations);
    }
    Ok(summary)
}
