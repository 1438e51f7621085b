//! Compaction in the tab-loss simulator (S12.4 with S2.5 and S3.3; issue
//! 37 part 1): a session whose second turn does not fit its share of the
//! smallest context window beside the first, so the second run summarises
//! the first before its model round. Each seed kills the second run's tab
//! after a seeded number of executor polls (at its start, while the
//! summary is asked for, at its commit, in the round after, or not at
//! all), opens a new tab once the lease has expired, and chooses Resume
//! (or starts again when the start itself was lost). Besides the run
//! invariants of
//! `agent_supervisor::sim` (checked on every run), each seed checks:
//! - the run completes;
//! - exactly one summary is stored for the session, and the run records
//!   exactly one `conversation_compacted` (a crash during compaction
//!   resumes without a second summary).

use std::ops::Range;
use std::path::Path;

use agent_kernel::run::{ActivityKind, RunStatus};
use agent_supervisor::RunConfig;
use agent_supervisor::compaction::SessionSummaries;
use agent_supervisor::config::{MIN_CONTEXT_WINDOW_TOKENS, ModelSettings};

use crate::sim::{At, Person, SimError, SimWiring, TabSim};

const SESSION: &str = "compaction-sim";

/// The model: "A" to every turn, a summary to a summarisation request.
pub const COMPACTION_SCENARIO: &str = r#"{"turns": [{"text": "A"}], "prompts": [{"starts_with": "Turns that follow", "turns": [{"text": "Summary: the person sent a long first message."}]}]}"#;

/// One seed's outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionSeed {
    pub seed: u64,
    /// True when the tab was killed (the kill point was reached).
    pub crashed: bool,
    pub violations: Vec<String>,
}

/// Seeds played, crashes and every violation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionSummary {
    pub seeds: u64,
    pub crash_points: u64,
    pub violations: Vec<String>,
}

impl std::fmt::Display for CompactionSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "compaction-sim: {} seeds, {} crash points, {} violations",
            self.seeds,
            self.crash_points,
            self.violations.len()
        )
    }
}

/// Play `seeds`, each over its own database in `dir`.
pub fn run_compaction_seeds(dir: &Path, seeds: Range<u64>) -> Result<CompactionSummary, SimError> {
    let mut summary = CompactionSummary::default();
    for seed in seeds {
        let report =
            simulate_compaction_seed(&dir.join(format!("compaction-{seed}.sqlite3")), seed)?;
        summary.seeds += 1;
        summary.crash_points += u64::from(report.crashed);
        summary.violations.extend(
            report
                .violations
                .into_iter()
                .map(|v| format!("seed {seed}: {v}")),
        );
    }
    Ok(summary)
}

/// One seed: see the module's documentation.
pub fn simulate_compaction_seed(path: &Path, seed: u64) -> Result<CompactionSeed, SimError> {
    let mut wiring = SimWiring::scripted(COMPACTION_SCENARIO)?;
    wiring.run_config = RunConfig {
        model: ModelSettings {
            context_window_tokens: Some(MIN_CONTEXT_WINDOW_TOKENS),
            ..ModelSettings::default()
        },
        ..RunConfig::default()
    };
    let sim = TabSim::with_wiring(path, seed, wiring)?;
    let person = Person::default();
    let mut report = CompactionSeed {
        seed,
        ..CompactionSeed::default()
    };
    let a = sim.open_tab("a")?;
    a.open_session(SESSION)?;
    let first = a.start(SESSION, &format!("First {}", "a".repeat(1_500)))?;
    a.settle(&first, &person)?;
    a.close();
    // The second run (which compacts) in a new tab that dies after a
    // number of executor polls the seed chooses: at its start, while the
    // summary is asked for, at its commit, in the round after, or never.
    let b = sim.open_tab("b")?;
    b.open_session(SESSION)?;
    b.kill_at(At::AfterPolls(1 + (seed * 7) % 31));
    let mut second = b
        .start(SESSION, &format!("Second {}", "b".repeat(1_500)))
        .ok();
    if second.is_some() && !b.is_dead() {
        b.drive();
    }
    let mut tab = b;
    if tab.is_dead() {
        report.crashed = true;
        sim.expire_leases();
        let c = sim.open_tab("c")?;
        c.open_session(SESSION)?;
        c.recover()?;
        match &second {
            Some(run) if c.run(run).is_ok() => {
                if c.run(run)?.status == RunStatus::Interrupted {
                    c.resume(run)?;
                }
            }
            // Killed before its start was stored: the person asks again.
            _ => {
                second = Some(c.start(SESSION, &format!("Second {}", "b".repeat(1_500)))?);
            }
        }
        tab = c;
    }
    let Some(second) = second else {
        report
            .violations
            .push("the second run never started".into());
        return Ok(report);
    };
    let status = tab.settle(&second, &person)?;
    if status != RunStatus::Completed {
        report
            .violations
            .push(format!("the second run ended {status}, not completed"));
    }
    sim.check_final(&second);
    let storage = tab.assembly().host().storage.clone();
    let session = agent_kernel::SessionId::new(SESSION)?;
    let stored = tab.block_on(SessionSummaries::load(&*storage, &session))??;
    if stored.summaries.len() != 1 {
        report.violations.push(format!(
            "{} summaries stored, not one",
            stored.summaries.len()
        ));
    }
    let compacted = tab
        .block_on(tab.runtime().activities(&second))??
        .iter()
        .filter(|a| matches!(a.kind, ActivityKind::ConversationCompacted { .. }))
        .count();
    if compacted != 1 {
        report.violations.push(format!(
            "{compacted} conversation_compacted activities, not one"
        ));
    }
    report
        .violations
        .extend(sim.checker().violations().iter().map(|v| v.to_string()));
    Ok(report)
}
