//! `agentrt sim` (feature `sim`): a scenario file played over many seeds
//! in a scratch directory by the tab-loss simulator, its summary printed and
//! its report written.

use std::path::PathBuf;

use anyhow::{Context, anyhow};

use super::exit::{code, usage};

/// `agentrt sim`: play the scenario file over `seeds` seeds in a scratch
/// directory, print the summary line, write the report; exit 0 only with
/// no violations (4 otherwise).
pub(crate) fn simulate(
    scenario: &std::path::Path,
    seeds: u64,
    report: Option<&std::path::Path>,
) -> anyhow::Result<u8> {
    use agent_host_native::sim::{SimFile, SimReportFile, run_seeds};
    let (wiring, plan) = SimFile::load(scenario)
        .and_then(SimFile::into_parts)
        .map_err(|e| usage(format!("{}: {e}", scenario.display())))?;
    let scratch = tempfile_dir()?;
    let outcome = run_seeds(&scratch, 0..seeds, &wiring, &plan);
    let _ = std::fs::remove_dir_all(&scratch);
    let (summary, dispatches) = outcome?;
    println!("{summary}");
    for v in summary.violations.iter().take(20) {
        eprintln!("{v}");
    }
    if let Some(path) = report {
        let json = serde_json::to_vec_pretty(&SimReportFile::new(&summary, dispatches))?;
        std::fs::write(path, json)
            .with_context(|| format!("cannot write the report {}", path.display()))?;
    }
    Ok(if summary.violations.is_empty() {
        code::OK
    } else {
        code::FAILED
    })
}

/// A fresh scratch directory for the simulation's databases.
pub(crate) fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| anyhow!("no randomness: {e}"))?;
    let dir = std::env::temp_dir().join(format!("agentrt-sim-{}", hex_of(&bytes)));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

pub(crate) fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
