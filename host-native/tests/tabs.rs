//! The tab-loss simulator on SQLite (issue 8 item 5): the supervisor's
//! crash simulator over SQLite for 50 seeds, and the public `sim` API —
//! kill at a journal boundary or an await point, reload, a second tab
//! refused while the lease is live, lease expiry, explicit resume
//! (S2.3, S2.5, S3.1, S3.3).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_host_native::process::Liveness;
use agent_host_native::sim::{KillAt, SimError, Tab, TabSim};
use agent_host_native::sqlite::SqliteStorage;
use agent_kernel::host::{LeaseError, Storage};
use agent_kernel::run::{PendingKind, RunStatus};
use agent_kernel::{OwnerId, RunId};
use agent_supervisor::{Choice, RunError};

/// S2.3, S3.3: the supervisor's crash simulator, on SQLite, 50 seeds.
#[test]
fn crash_sim_on_sqlite_50_seeds_has_no_violations() {
    let dir = tempfile::tempdir().expect("dir");
    let n = AtomicU64::new(0);
    let root = dir.path().to_owned();
    let factory = move || {
        let i = n.fetch_add(1, Ordering::SeqCst);
        let storage = SqliteStorage::open_inline(
            root.join(format!("seed-{i}.sqlite3")),
            Arc::new(|_: &OwnerId| Liveness::Unknown),
        )
        .expect("open sqlite");
        Arc::new(storage) as Arc<dyn Storage>
    };
    let seeds = std::env::var("CRASH_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50u64);
    let summary = agent_supervisor::sim::run_seeds(0..seeds, factory, Default::default());
    println!("{summary} (sqlite)");
    assert_eq!(summary.seeds, seeds);
    assert!(
        summary.crash_points >= seeds,
        "every seed crashed at least once: {summary}"
    );
    assert!(summary.violations.is_empty(), "{:?}", summary.violations);
}

/// The crash simulator must be able to fail: with the deliberate fault
/// "dispatch before running is durable" it finds violations on SQLite too.
#[test]
fn crash_sim_on_sqlite_catches_a_sabotaged_supervisor() {
    let dir = tempfile::tempdir().expect("dir");
    let n = AtomicU64::new(0);
    let root = dir.path().to_owned();
    let factory = move || {
        let i = n.fetch_add(1, Ordering::SeqCst);
        Arc::new(
            SqliteStorage::open_inline(
                root.join(format!("s-{i}.sqlite3")),
                Arc::new(|_: &OwnerId| Liveness::Unknown),
            )
            .expect("open"),
        ) as Arc<dyn Storage>
    };
    let sabotage = agent_supervisor::Sabotage {
        retry_unsafe_on_resume: true,
        ..Default::default()
    };
    let summary = agent_supervisor::sim::run_seeds(0..30, factory, sabotage);
    assert!(
        !summary.violations.is_empty(),
        "sabotage must be caught: {summary}"
    );
}

/// Answer whatever the run waits for, as a person would, until it is final
/// or waits for something this helper does not answer.
fn settle(tab: &Tab, run: &RunId) -> RunStatus {
    for _ in 0..10 {
        tab.drive();
        let record = tab.run(run).expect("run");
        let pending = tab.pending(run).expect("pending");
        match record.status {
            RunStatus::AwaitingApproval => {
                let p = pending
                    .iter()
                    .find(|p| matches!(p.kind, PendingKind::Approval { .. }))
                    .expect("approval");
                tab.approve(run, &p.id).expect("approve");
            }
            RunStatus::AwaitingInput => {
                let p = pending
                    .iter()
                    .find(|p| matches!(p.kind, PendingKind::Input { .. }))
                    .expect("input");
                tab.respond(run, &p.id, "yes").expect("respond");
            }
            other => return other,
        }
    }
    tab.run(run).expect("run").status
}

fn tickets_of(sim: &TabSim) -> usize {
    sim.tool_log()
        .executions()
        .iter()
        .filter(|e| e.tool == "send_ticket")
        .count()
}

/// S3.1, S3.3, S2.5: kill tab A at the `running` boundary of the external
/// write; tab B is refused while A's lease is live, recovers after expiry,
/// and continues only when told to resume. The write happens once.
#[test]
fn kill_at_journal_boundary_reload_refused_then_expiry_and_resume() {
    let dir = tempfile::tempdir().expect("dir");
    let sim = TabSim::create(&dir.path().join("tabs.sqlite3"), 11).expect("sim");
    let a = sim.open_tab("a").expect("tab a");
    a.kill_at(KillAt::Journal {
        state: "running".into(),
        tool: "send_ticket".into(),
    });
    let run = a.start("session-1", "go").expect("start");
    a.drive();
    assert!(a.is_dead(), "tab a died at the boundary");
    assert_eq!(tickets_of(&sim), 0, "killed before dispatch");
    assert!(matches!(a.recover(), Err(SimError::Dead(_))));

    // Reload: a second tab while the dead tab's lease is live.
    let b = sim.open_tab("b").expect("tab b");
    let refused = b
        .start("session-1", "another run")
        .expect_err("session busy");
    assert!(
        matches!(refused, SimError::Run(RunError::Lease(LeaseError::Held { ref owner, .. })) if owner.as_str() == "tab-a"),
        "{refused:?}"
    );
    assert!(
        b.recover().expect("recover").is_empty(),
        "lease still live: nothing recovered"
    );
    assert_eq!(b.run(&run).expect("run").status, RunStatus::Running);

    sim.expire_leases();
    assert_eq!(b.recover().expect("recover"), vec![run.clone()]);
    b.drive();
    assert_eq!(
        b.run(&run).expect("run").status,
        RunStatus::Interrupted,
        "no resume by itself"
    );
    assert_eq!(tickets_of(&sim), 0, "loading the page launched nothing");

    b.resume(&run).expect("explicit resume");
    let status = settle(&b, &run);
    assert_eq!(status, RunStatus::Completed);
    assert_eq!(tickets_of(&sim), 1, "the write happened exactly once");
    assert!(sim.tool_log().violations().is_empty());
}

/// S2.3: killed after the external write ran but before `committed` was
/// durable: the new tab must not replay it; the person decides.
#[test]
fn kill_before_the_commit_gives_effect_unknown_and_a_decision() {
    let dir = tempfile::tempdir().expect("dir");
    let sim = TabSim::create(&dir.path().join("tabs.sqlite3"), 12).expect("sim");
    let a = sim.open_tab("a").expect("tab a");
    a.kill_at(KillAt::Journal {
        state: "committed".into(),
        tool: "send_ticket".into(),
    });
    let run = a.start("session-1", "go").expect("start");
    a.drive();
    assert!(a.is_dead());
    assert_eq!(tickets_of(&sim), 1, "the write ran, its commit was lost");

    sim.expire_leases();
    let b = sim.open_tab("b").expect("tab b");
    b.recover().expect("recover");
    b.drive();
    let record = b.run(&run).expect("run");
    assert_eq!(record.status, RunStatus::Interrupted);
    let pending = b.pending(&run).expect("pending");
    let call = pending
        .iter()
        .find_map(|p| match &p.kind {
            PendingKind::Decision { call_id, .. } => Some(call_id.clone()),
            _ => None,
        })
        .expect("a decision is pending");
    let err = b
        .resume(&run)
        .expect_err("blocked until the person decides");
    assert!(
        matches!(err, SimError::Run(RunError::DecisionPending { .. })),
        "{err:?}"
    );
    assert_eq!(tickets_of(&sim), 1, "never replayed automatically");
    b.decide(&run, &call, Choice::MarkDone).expect("decide");
    assert_eq!(settle(&b, &run), RunStatus::Completed);
    assert_eq!(tickets_of(&sim), 1);
}

/// Kills at arbitrary await points (after n polls) for many n: after a
/// reload, expiry and resume, the run ends completed and the external write
/// ran at most once per call without a person's "retry anyway".
#[test]
fn kill_at_random_await_points_then_resume() {
    for polls in [1u64, 3, 7, 15, 31, 63, 127] {
        let dir = tempfile::tempdir().expect("dir");
        let sim = TabSim::create(&dir.path().join("tabs.sqlite3"), polls).expect("sim");
        let a = sim.open_tab("a").expect("tab a");
        a.kill_at(KillAt::AfterPolls(polls));
        let started = a.start("session-1", "go");
        a.drive();
        sim.expire_leases();
        let b = sim.open_tab("b").expect("tab b");
        let run = match started {
            Ok(run) => run,
            Err(_) => {
                // Killed before start returned: the run may or may not exist.
                let runs = b.runtime().runs();
                match futures::executor::block_on(runs).expect("runs").first() {
                    Some(r) => r.id.clone(),
                    None => b.start("session-1", "go").expect("start again"),
                }
            }
        };
        b.recover().expect("recover");
        b.drive();
        let mut status = b.run(&run).expect("run").status;
        for _ in 0..4 {
            match status {
                RunStatus::Interrupted => {
                    let pending = b.pending(&run).expect("pending");
                    match pending.iter().find_map(|p| match &p.kind {
                        PendingKind::Decision { call_id, .. } => Some(call_id.clone()),
                        _ => None,
                    }) {
                        Some(call) => {
                            let choice = if sim.tool_log().executed(run.as_str(), call.as_str()) {
                                Choice::MarkDone
                            } else {
                                Choice::RetryAnyway
                            };
                            b.decide(&run, &call, choice).expect("decide");
                        }
                        None => b.resume(&run).expect("resume"),
                    }
                }
                RunStatus::Running => break,
                _ => {}
            }
            status = settle(&b, &run);
            if status == RunStatus::Completed {
                break;
            }
        }
        assert_eq!(status, RunStatus::Completed, "polls {polls}");
        assert!(tickets_of(&sim) <= 1, "polls {polls}: at most one ticket");
        assert!(sim.tool_log().violations().is_empty(), "polls {polls}");
    }
}
