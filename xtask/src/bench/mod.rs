//! `cargo xtask bench [--quick]`: every benchmark of the workspace in one
//! run, and one table of what they measured.
//!
//! This module owns the bench plan (what is built, then what runs, natively
//! and in headless Chromium), the aims (issue 18 and the book's Benchmarks chapter),
//! reading the figures the benches emit, and the table: printed as Markdown
//! and written as JSON to `target/bench/<date>-<time>-<commit>[-quick].json`
//! for comparison across commits.
//!
//! The benches emit machine-readable lines: each appends one JSON object
//! per figure to the file `BENCH_JSON` names (`{"bench", "name", "label",
//! "value", "unit", ...details}`); nothing here parses their prose. The
//! aims key on `name`; a figure without an aim is listed with `—`, so a new
//! figure shows up without changing this file.
//!
//! The machine's floors come from the same run: one 4 KiB write + fsync and
//! one bare SQLite WAL commit (`host-native/benches/runtime.rs`, section 2),
//! one bare PostgreSQL commit on a throwaway server with fsync on, beside
//! the PostgreSQL round (`stores/postgres/benches/postgres.rs`) and runs per
//! second through 1, 2 and 4 `agentrt worker` processes on it
//! (`host-native/benches/workers.rs`), one bare
//! IndexedDB readwrite transaction (`host-browser/e2e/bench/
//! idb_bench.mjs`, in the page of the IndexedDB rounds).
//!
//! A bench that fails does not stop the others: its figures are missing
//! from the table, and `xtask` fails at the end.

use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::E2E_DIR;
use crate::prerequisites::{Prereq, ensure_prerequisites};
use crate::runner::{Failure, Result, Runner, Step};
use crate::workspace::warn_about_rustflags;

mod aims;
mod json;
mod table;
#[cfg(test)]
mod tests;

use table::{Figure, Meta, Table};

/// What the benches need installed: the browser bench builds the wasm
/// bundle and drives Chromium with the e2e suite's playwright-core; the
/// PostgreSQL bench starts its own server.
pub(crate) const BENCH_PREREQUISITES: &[Prereq] = &[
    Prereq::WasmTarget,
    Prereq::WasmBindgen,
    Prereq::Clang,
    Prereq::Browser,
    Prereq::E2eNodeModules,
    Prereq::Postgres,
];

/// Where the report, the figures' lines and the benches' scratch files go.
const OUT_DIR: &str = "target/bench";

// ---------------------------------------------------------------------------
// The plan
// ---------------------------------------------------------------------------

/// The builds first (so that the runs' times are the benches' own), then
/// the runs. Each run appends its figures to `lines`.
fn bench_steps(root: &Path, quick: bool, lines: &Path) -> (Vec<Step>, Vec<Step>) {
    // One build per package, with the same arguments as its run below:
    // building the packages together would unify their features and the
    // runs would build everything again.
    let build = |package: &str, benches: &[&str]| {
        let mut args = vec!["bench", "--no-run", "-p", package];
        for bench in benches {
            args.extend(["--bench", bench]);
        }
        Step::cargo(format!("bench: build {package}'s benches (release)"), &args)
    };
    let builds = vec![
        build("agent-host-native", &["runtime", "idle_runs", "workers"]),
        build("agent-tools", &["run_javascript"]),
        build("agent-fetch", &["readable"]),
        build("agent-store-postgres", &["postgres"]),
        build("agent-supervisor", &["prompt_caching"]),
        Step::new(
            "bench: build the wasm bundle (release)",
            "node",
            &["build.mjs"],
        )
        .in_dir(E2E_DIR),
    ];
    let out = root.join(OUT_DIR);
    let with_env = |step: Step| {
        let step = step
            .env("BENCH_JSON", lines.display().to_string())
            .env("BENCH_DIR", out.display().to_string())
            .env(
                "CRITERION_HOME",
                root.join("target/criterion").display().to_string(),
            );
        if quick {
            step.env("BENCH_QUICK", "1")
        } else {
            step
        }
    };
    let criterion = |name: &str, package: &str, bench: &str| {
        let mut args = vec!["bench", "-p", package, "--bench", bench];
        if quick {
            args.extend(["--", "--quick"]);
        }
        with_env(Step::cargo(name, &args))
    };
    let runs = vec![
        with_env(Step::cargo(
            "bench: runtime (host-native)",
            &["bench", "-p", "agent-host-native", "--bench", "runtime"],
        )),
        with_env(Step::cargo(
            "bench: idle runs (host-native)",
            &["bench", "-p", "agent-host-native", "--bench", "idle_runs"],
        )),
        criterion(
            "bench: run_javascript (agent-tools)",
            "agent-tools",
            "run_javascript",
        ),
        criterion("bench: readable (agent-fetch)", "agent-fetch", "readable"),
        with_env(Step::cargo(
            "bench: PostgreSQL round (agent-store-postgres)",
            &["bench", "-p", "agent-store-postgres", "--bench", "postgres"],
        )),
        with_env(Step::cargo(
            "bench: input tokens billed per round with and without prompt caching (agent-supervisor)",
            &[
                "bench",
                "-p",
                "agent-supervisor",
                "--bench",
                "prompt_caching",
            ],
        )),
        with_env(Step::cargo(
            "bench: runs per second through 1, 2, 4 workers on PostgreSQL (host-native)",
            &["bench", "-p", "agent-host-native", "--bench", "workers"],
        )),
        with_env(
            Step::new(
                "bench: IndexedDB and the page (headless Chromium)",
                "node",
                &["bench/idb_bench.mjs"],
            )
            .in_dir(E2E_DIR),
        ),
    ];
    (builds, runs)
}

pub(crate) fn bench(runner: &mut Runner, quick: bool) -> Result<()> {
    let started = Instant::now();
    let load_before = load_average();
    warn_about_rustflags();
    ensure_prerequisites(runner, BENCH_PREREQUISITES)?;
    let out = runner.root.join(OUT_DIR);
    let stamp = Stamp::now();
    let lines = out.join(format!("figures-{}.jsonl", stamp.file_part()));
    if !runner.dry_run {
        std::fs::create_dir_all(&out).map_err(|e| io_failure(&out, &e))?;
        let _ = std::fs::remove_file(&lines);
    }
    let (builds, runs) = bench_steps(&runner.root, quick, &lines);
    for step in &builds {
        runner.run_step(step)?;
    }
    let built = started.elapsed().as_secs_f64();
    let mut failures = Vec::new();
    for step in &runs {
        if let Err(failure) = runner.run_step(step) {
            eprintln!("xtask: {failure}; the other benches go on");
            failures.push(failure);
        }
    }
    if runner.dry_run {
        println!("\n(dry run: nothing was run)");
        return Ok(());
    }
    let total = started.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&lines).unwrap_or_default();
    let mut figures = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match Figure::parse(line) {
            Ok(figure) => figures.push(figure),
            Err(e) => eprintln!("xtask: {}:{}: {e}", lines.display(), number + 1),
        }
    }
    let commit = commit_of(runner);
    let table = Table::build(&figures);
    let meta = Meta {
        date: stamp.date(),
        commit: commit.clone(),
        quick,
        build_seconds: built,
        run_seconds: total - built,
        load_before,
        load_after: load_average(),
    };
    println!("\n{}", table.markdown(&meta));
    let report = out.join(format!(
        "{}-{commit}{}.json",
        stamp.file_part(),
        if quick { "-quick" } else { "" }
    ));
    std::fs::write(&report, table.json(&meta)).map_err(|e| io_failure(&report, &e))?;
    println!(
        "figures: {}\nreport:  {}",
        lines.display(),
        report.display()
    );
    match failures.into_iter().next() {
        None => Ok(()),
        Some(first) => Err(first),
    }
}

fn io_failure(path: &Path, e: &std::io::Error) -> Failure {
    Failure::Step {
        name: "bench report".to_string(),
        status: format!("{}: {e}", path.display()),
    }
}

/// The short commit, `-dirty` when the tree has changes.
fn commit_of(runner: &Runner) -> String {
    let commit = runner
        .query("git", &["rev-parse", "--short", "HEAD"])
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    let dirty = runner
        .query("git", &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.trim().is_empty());
    if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    }
}

/// The 1-minute load average (`/proc/loadavg`), to tell an idle machine.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The run's date and time (UTC).
struct Stamp {
    days: i64,
    seconds_of_day: u64,
}

impl Stamp {
    fn now() -> Stamp {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Stamp {
            days: (secs / 86_400) as i64,
            seconds_of_day: secs % 86_400,
        }
    }

    /// `YYYY-MM-DD`.
    fn date(&self) -> String {
        let (y, m, d) = civil_from_days(self.days);
        format!("{y:04}-{m:02}-{d:02}")
    }

    /// `YYYY-MM-DD-HHMM` (UTC), for file names.
    fn file_part(&self) -> String {
        let hours = self.seconds_of_day / 3600;
        let minutes = self.seconds_of_day % 3600 / 60;
        format!("{}-{hours:02}{minutes:02}", self.date())
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}
