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

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::E2E_DIR;
use crate::prerequisites::{Prereq, ensure_prerequisites};
use crate::runner::{Failure, Result, Runner, Step};
use crate::workspace::warn_about_rustflags;

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
// The aims
// ---------------------------------------------------------------------------

/// What a figure is held to.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Aim {
    /// No aim: listed for reference.
    None,
    /// A floor of the machine, measured in the same run.
    Floor,
    AtMost(f64),
    AtLeast(f64),
    /// At most `factor` times the figure named `of` (a floor, or another
    /// figure of the same run).
    TimesAtMost {
        of: &'static str,
        factor: f64,
    },
}

/// One known figure: its name (as the bench emits it), its aim, and the
/// floor it is shown against (its ratio to it), if any.
struct Row {
    name: &'static str,
    aim: Aim,
    /// What the aim says, as the table prints it.
    aim_text: &'static str,
    /// Shown as "= N × &lt;that floor&gt;" beside the figure.
    ratio_to: Option<&'static str>,
}

const fn row(name: &'static str, aim: Aim, aim_text: &'static str) -> Row {
    Row {
        name,
        aim,
        aim_text,
        ratio_to: None,
    }
}

const fn against(name: &'static str, aim: Aim, aim_text: &'static str, floor: &'static str) -> Row {
    Row {
        name,
        aim,
        aim_text,
        ratio_to: Some(floor),
    }
}

/// The derived flatness figure (computed here from the round figures).
const FLATNESS: &str = "round_memory_flatness";

/// The table's rows in order, with their aims (issue 18, and the
/// earlier aims for `run_javascript`, readable text, commits and bytes).
/// Figures a bench emits that are not listed here follow, without an aim.
const ROWS: &[Row] = &[
    row("floor_fsync_4k", Aim::Floor, "—"),
    row("floor_sqlite_commit", Aim::Floor, "—"),
    row("floor_postgres_commit", Aim::Floor, "—"),
    row("floor_idb_transaction", Aim::Floor, "—"),
    row(
        "round_memory_100",
        Aim::AtMost(10.0),
        "≤ 10 µs (idle machine)",
    ),
    row(
        "round_memory_1000",
        Aim::AtMost(10.0),
        "≤ 10 µs (idle machine)",
    ),
    row("call_memory_10000", Aim::None, "—"),
    row(
        FLATNESS,
        Aim::AtMost(1.2),
        "flat 100 → 10,000 rounds (≤ 1.2×)",
    ),
    row("round_sqlite_100", Aim::None, "—"),
    row("round_sqlite_1000", Aim::None, "—"),
    against(
        "round_sqlite_effectful",
        Aim::TimesAtMost {
            of: "floor_sqlite_commit",
            factor: 2.5,
        },
        "≤ 2.5 × bare WAL commit",
        "floor_sqlite_commit",
    ),
    // No aim yet: the first figures of issue 21, beside their floor.
    Row {
        name: "round_postgres_effectful",
        aim: Aim::None,
        aim_text: "—",
        ratio_to: Some("floor_postgres_commit"),
    },
    row("commits_per_round_postgres", Aim::None, "—"),
    row("workers_runs_per_s_1", Aim::None, "—"),
    row("workers_runs_per_s_2", Aim::None, "—"),
    row("workers_runs_per_s_4", Aim::None, "—"),
    row(
        "commits_per_effectful_round",
        Aim::AtMost(2.0),
        "≤ 2 commits",
    ),
    row("bytes_per_round", Aim::AtMost(2000.0), "≤ 2 KB"),
    // Measured in the full run only; the aim is held by `bytes_per_round`.
    row("bytes_per_round_marginal", Aim::None, "—"),
    row("resume_10_records", Aim::None, "—"),
    row("resume_100_records", Aim::None, "—"),
    row("resume_1000_records", Aim::None, "—"),
    row(
        "resume_1000_rounds",
        Aim::AtMost(1.0),
        "≤ 1 ms (idle machine)",
    ),
    against(
        "resume_10000_records",
        Aim::TimesAtMost {
            of: "resume_1000_rounds",
            factor: 1.2,
        },
        "≤ 1.2 × the 1,000-round resume",
        "resume_1000_rounds",
    ),
    row("takeover_0", Aim::None, "—"),
    against(
        "takeover_1000",
        Aim::TimesAtMost {
            of: "takeover_0",
            factor: 1.2,
        },
        "flat: ≤ 1.2 × with 0 other runs",
        "takeover_0",
    ),
    against(
        "takeover_10000",
        Aim::TimesAtMost {
            of: "takeover_0",
            factor: 1.2,
        },
        "flat: ≤ 1.2 × with 0 other runs",
        "takeover_0",
    ),
    row("idle_run_memory", Aim::AtMost(64.0), "≤ 64 KiB"),
    row("idle_runs_start", Aim::None, "—"),
    row("idle_runs_waiting", Aim::None, "—"),
    row("run_javascript_fresh_context", Aim::AtMost(0.3), "≤ 0.3 ms"),
    row("run_javascript_sum_1e7", Aim::None, "—"),
    row("readable_throughput", Aim::AtLeast(2.0), "≥ 2 MB/s"),
    against(
        "round_idb_effectful",
        Aim::TimesAtMost {
            of: "floor_idb_transaction",
            factor: 2.5,
        },
        "≤ 2.5 × bare readwrite transaction",
        "floor_idb_transaction",
    ),
    row("wasm_first_module_gzip", Aim::AtMost(1.2), "≤ 1.2 MiB gzip"),
    row("wasm_worker_module_gzip", Aim::None, "—"),
    row("demo_ready", Aim::AtMost(300.0), "≤ 300 ms"),
    // Issue 34: a 20-round run against a loopback server that bills as
    // the Anthropic API does; the uncached figure is the reference.
    row("prompt_billed_input_per_round_uncached", Aim::None, "—"),
    against(
        "prompt_billed_input_per_round_cached",
        Aim::TimesAtMost {
            of: "prompt_billed_input_per_round_uncached",
            factor: 0.5,
        },
        "≤ 0.5 × without caching",
        "prompt_billed_input_per_round_uncached",
    ),
];

/// How a floor or reference figure is named beside a ratio.
fn short_name(name: &str) -> &str {
    match name {
        "floor_fsync_4k" => "4 KiB fsync",
        "floor_sqlite_commit" => "bare WAL commit",
        "floor_postgres_commit" => "bare PostgreSQL commit",
        "floor_idb_transaction" => "bare transaction",
        "resume_1000_rounds" => "the 1,000-round resume",
        "takeover_0" => "with 0 other runs",
        "prompt_billed_input_per_round_uncached" => "without caching",
        other => other,
    }
}

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

// ---------------------------------------------------------------------------
// Figures and the table
// ---------------------------------------------------------------------------

/// One figure a bench emitted.
#[derive(Clone, Debug, PartialEq)]
struct Figure {
    name: String,
    label: String,
    value: Option<f64>,
    unit: String,
    /// Every other field of the line (counts, tenths, notes).
    details: Vec<(String, Json)>,
}

impl Figure {
    fn parse(line: &str) -> Result<Figure, String> {
        let Json::Obj(fields) = Json::parse(line)? else {
            return Err("a figure line is not a JSON object".to_string());
        };
        let text = |key: &str| match fields.iter().find(|(k, _)| k == key) {
            Some((_, Json::Str(s))) => Ok(s.clone()),
            _ => Err(format!("a figure line without a string `{key}`")),
        };
        let name = text("name")?;
        let unit = text("unit")?;
        let label = text("label").unwrap_or_else(|_| name.clone());
        let value = match fields.iter().find(|(k, _)| k == "value") {
            Some((_, Json::Num(v))) => Some(*v),
            Some((_, Json::Null)) => None,
            _ => return Err(format!("figure `{name}` has no numeric `value`")),
        };
        let details = fields
            .into_iter()
            .filter(|(k, _)| !matches!(k.as_str(), "name" | "label" | "value" | "unit"))
            .collect();
        Ok(Figure {
            name,
            label,
            value,
            unit,
            details,
        })
    }

    fn detail(&self, key: &str) -> Option<f64> {
        match self.details.iter().find(|(k, _)| k == key) {
            Some((_, Json::Num(v))) => Some(*v),
            _ => None,
        }
    }
}

/// One line of the table.
#[derive(Debug)]
struct Line {
    name: String,
    label: String,
    value: Option<f64>,
    unit: String,
    /// The figure as printed (value, unit, ratio, tenths).
    figure: String,
    aim: String,
    /// `Some(true)` met, `Some(false)` not met, `None` no aim (or not measured).
    met: Option<bool>,
    /// A floor of the machine (its mark says so).
    floor_of_machine: bool,
    floor: Option<String>,
    floor_ratio: Option<f64>,
    details: Vec<(String, Json)>,
}

struct Table {
    lines: Vec<Line>,
}

struct Meta {
    date: String,
    commit: String,
    quick: bool,
    build_seconds: f64,
    run_seconds: f64,
    load_before: Option<f64>,
    load_after: Option<f64>,
}

impl Table {
    fn build(figures: &[Figure]) -> Table {
        // The last figure of a name wins (a bench run twice into one file).
        let find = |name: &str| figures.iter().rev().find(|f| f.name == name);
        let value_of = |name: &str| find(name).and_then(|f| f.value);
        let flatness = flatness(
            find("round_memory_100"),
            find("round_memory_1000"),
            find("call_memory_10000"),
        );
        let mut lines = Vec::new();
        for row in ROWS {
            let figure = if row.name == FLATNESS {
                flatness.clone()
            } else {
                find(row.name).cloned()
            };
            let Some(figure) = figure else {
                // A figure without an aim that this run did not measure
                // (the full run measures more) is left out.
                if row.aim == Aim::None {
                    continue;
                }
                lines.push(Line {
                    name: row.name.to_string(),
                    label: row.name.to_string(),
                    value: None,
                    unit: String::new(),
                    figure: "not measured".to_string(),
                    aim: row.aim_text.to_string(),
                    met: None,
                    floor_of_machine: row.aim == Aim::Floor,
                    floor: row.ratio_to.map(str::to_string),
                    floor_ratio: None,
                    details: Vec::new(),
                });
                continue;
            };
            lines.push(line_of(
                &figure,
                row.aim,
                row.aim_text,
                row.ratio_to,
                &value_of,
            ));
        }
        let mut seen: Vec<&str> = ROWS.iter().map(|r| r.name).collect();
        for figure in figures.iter().rev() {
            if seen.contains(&figure.name.as_str()) {
                continue;
            }
            seen.push(&figure.name);
            lines.push(line_of(figure, Aim::None, "—", None, &value_of));
        }
        Table { lines }
    }

    fn markdown(&self, meta: &Meta) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Benchmarks of {} on {}{} (builds {:.0} s, benches {:.0} s; 1-minute load average {} before, {} after):\n",
            meta.commit,
            meta.date,
            if meta.quick { ", quick run" } else { "" },
            meta.build_seconds,
            meta.run_seconds,
            meta.load_before
                .map_or("?".to_string(), |l| format!("{l:.2}")),
            meta.load_after
                .map_or("?".to_string(), |l| format!("{l:.2}")),
        );
        let _ = writeln!(out, "| measure | figure | aim | |");
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for line in &self.lines {
            let mark = match line.met {
                Some(true) => "met",
                Some(false) => "not met",
                None if line.floor_of_machine => "floor",
                None => "—",
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {mark} |",
                line.label.replace('|', "/"),
                line.figure,
                line.aim
            );
        }
        out
    }

    fn json(&self, meta: &Meta) -> String {
        let num = |v: Option<f64>| v.map_or(Json::Null, Json::Num);
        let rows = self
            .lines
            .iter()
            .map(|l| {
                Json::Obj(vec![
                    ("name".into(), Json::Str(l.name.clone())),
                    ("label".into(), Json::Str(l.label.clone())),
                    ("value".into(), num(l.value)),
                    ("unit".into(), Json::Str(l.unit.clone())),
                    ("aim".into(), Json::Str(l.aim.clone())),
                    ("met".into(), l.met.map_or(Json::Null, Json::Bool)),
                    ("is_floor".into(), Json::Bool(l.floor_of_machine)),
                    (
                        "floor".into(),
                        l.floor.clone().map_or(Json::Null, Json::Str),
                    ),
                    ("floor_ratio".into(), num(l.floor_ratio)),
                    ("details".into(), Json::Obj(l.details.clone())),
                ])
            })
            .collect();
        let report = Json::Obj(vec![
            ("date".into(), Json::Str(meta.date.clone())),
            ("commit".into(), Json::Str(meta.commit.clone())),
            ("quick".into(), Json::Bool(meta.quick)),
            ("build_seconds".into(), Json::Num(meta.build_seconds)),
            ("run_seconds".into(), Json::Num(meta.run_seconds)),
            ("load_before".into(), num(meta.load_before)),
            ("load_after".into(), num(meta.load_after)),
            ("rows".into(), Json::Arr(rows)),
        ]);
        let mut text = String::new();
        report.write_pretty(&mut text, 0);
        text.push('\n');
        text
    }
}

/// The flatness of the per-round cost on the memory host: the larger of
/// (last tenth of the 1,000-round run ÷ median of the 100-round run) and
/// (last tenth ÷ first tenth of the 10,000-call run). A run cannot have
/// 10,000 rounds (the budget caps it at 1,000 rounds and 10,000 calls).
fn flatness(
    r100: Option<&Figure>,
    r1000: Option<&Figure>,
    c10000: Option<&Figure>,
) -> Option<Figure> {
    let rounds = r100
        .and_then(|f| f.value)
        .zip(r1000.and_then(|f| f.detail("last_tenth")))
        .map(|(start, end)| end / start);
    let calls = c10000.and_then(|f| Some(f.detail("last_tenth")? / f.detail("first_tenth")?));
    let value = match (rounds, calls) {
        (Some(a), Some(b)) => a.max(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return None,
    };
    let mut details = Vec::new();
    if let Some(r) = rounds {
        details.push(("rounds_1000_vs_100".to_string(), Json::Num(r)));
    }
    if let Some(c) = calls {
        details.push(("calls_10000_last_vs_first_tenth".to_string(), Json::Num(c)));
    }
    Some(Figure {
        name: FLATNESS.to_string(),
        label: "per-round cost, memory host: end of the longest runs ÷ start (last tenth of 1,000 rounds ÷ 100-round median; last ÷ first tenth of 10,000 calls)".to_string(),
        value: Some(value),
        unit: "x".to_string(),
        details,
    })
}

fn line_of(
    figure: &Figure,
    aim: Aim,
    aim_text: &str,
    ratio_to: Option<&str>,
    value_of: &dyn Fn(&str) -> Option<f64>,
) -> Line {
    let value = figure.value;
    let met = match (aim, value) {
        (_, None) | (Aim::None | Aim::Floor, _) => None,
        (Aim::AtMost(limit), Some(v)) => Some(v <= limit),
        (Aim::AtLeast(limit), Some(v)) => Some(v >= limit),
        (Aim::TimesAtMost { of, factor }, Some(v)) => value_of(of).map(|base| v <= factor * base),
    };
    let floor_ratio = ratio_to
        .and_then(value_of)
        .zip(value)
        .map(|(base, v)| v / base);
    let mut text = match value {
        Some(v) => format!("{} {}", number(v), unit_text(&figure.unit)),
        None => "not measured".to_string(),
    };
    if let (Some(ratio), Some(floor)) = (floor_ratio, ratio_to) {
        let _ = write!(text, " = {ratio:.2} × {}", short_name(floor));
    }
    if figure.name == "round_sqlite_effectful"
        && let (Some(v), Some(fsync)) = (value, value_of("floor_fsync_4k"))
    {
        let _ = write!(text, " = {:.2} × 4 KiB fsync", v / fsync);
    }
    if let (Some(first), Some(last)) = (figure.detail("first_tenth"), figure.detail("last_tenth")) {
        let _ = write!(
            text,
            " (first tenth {} → last tenth {})",
            number(first),
            number(last)
        );
    }
    if figure.name == FLATNESS {
        let parts: Vec<String> = figure
            .details
            .iter()
            .filter_map(|(k, v)| match v {
                Json::Num(n) => Some(format!("{}: {n:.2}", k.replace('_', " "))),
                _ => None,
            })
            .collect();
        let _ = write!(text, " ({})", parts.join("; "));
    }
    Line {
        name: figure.name.clone(),
        label: figure.label.clone(),
        value,
        unit: figure.unit.clone(),
        figure: text,
        aim: aim_text.to_string(),
        met,
        floor_of_machine: aim == Aim::Floor,
        floor: ratio_to.map(str::to_string),
        floor_ratio,
        details: figure.details.clone(),
    }
}

/// Three significant digits or so.
fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        let whole = format!("{v:.0}");
        // Thousands separated by commas, as the book's Benchmarks chapter writes them.
        let (sign, digits) = whole.split_at(usize::from(whole.starts_with('-')));
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        format!("{sign}{grouped}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn unit_text(unit: &str) -> &str {
    match unit {
        "us" => "µs",
        "x" => "×",
        other => other,
    }
}

// ---------------------------------------------------------------------------
// A small JSON reader and writer (xtask has no dependencies)
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn parse(text: &str) -> Result<Json, String> {
        let mut parser = Parser {
            bytes: text.as_bytes(),
            at: 0,
        };
        let value = parser.value()?;
        parser.space();
        if parser.at != parser.bytes.len() {
            return Err(format!("unexpected text at byte {}", parser.at));
        }
        Ok(value)
    }

    fn write_pretty(&self, out: &mut String, indent: usize) {
        let pad = |n: usize| "  ".repeat(n);
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) if n.is_finite() => {
                let _ = write!(out, "{n}");
            }
            Json::Num(_) => out.push_str("null"),
            Json::Str(s) => write_string(out, s),
            Json::Arr(items) if items.is_empty() => out.push_str("[]"),
            Json::Arr(items) => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    out.push_str(&pad(indent + 1));
                    item.write_pretty(out, indent + 1);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(indent));
                out.push(']');
            }
            Json::Obj(fields) if fields.is_empty() => out.push_str("{}"),
            Json::Obj(fields) => {
                out.push_str("{\n");
                for (i, (key, value)) in fields.iter().enumerate() {
                    out.push_str(&pad(indent + 1));
                    write_string(out, key);
                    out.push_str(": ");
                    value.write_pretty(out, indent + 1);
                    out.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(indent));
                out.push('}');
            }
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.at < self.bytes.len() && self.bytes[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.space();
        self.bytes.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected `{}` at byte {}", byte as char, self.at))
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, String> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(format!("unexpected text at byte {}", self.at))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        match self.peek() {
            None => Err("unexpected end of the line".to_string()),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'"') => self.string().map(Json::Str),
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                if self.peek() == Some(b']') {
                    self.at += 1;
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Json::Arr(items));
                        }
                        _ => return Err(format!("expected `,` or `]` at byte {}", self.at)),
                    }
                }
            }
            Some(b'{') => {
                self.at += 1;
                let mut fields = Vec::new();
                if self.peek() == Some(b'}') {
                    self.at += 1;
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.space();
                    let key = self.string()?;
                    self.expect(b':')?;
                    let value = self.value()?;
                    fields.push((key, value));
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(Json::Obj(fields));
                        }
                        _ => return Err(format!("expected `,` or `}}` at byte {}", self.at)),
                    }
                }
            }
            Some(_) => self.number(),
        }
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.at;
        while self.at < self.bytes.len()
            && matches!(
                self.bytes[self.at],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.at += 1;
        }
        std::str::from_utf8(&self.bytes[start..self.at])
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .map(Json::Num)
            .ok_or_else(|| format!("bad number at byte {start}"))
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let Some(&byte) = self.bytes.get(self.at) else {
                return Err("unterminated string".to_string());
            };
            self.at += 1;
            match byte {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&escaped) = self.bytes.get(self.at) else {
                        return Err("unterminated escape".to_string());
                    };
                    self.at += 1;
                    match escaped {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let unit = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&unit) {
                                // A surrogate pair: `\uD83D\uDE00`.
                                if !self.bytes[self.at..].starts_with(b"\\u") {
                                    return Err("a lone surrogate".to_string());
                                }
                                self.at += 2;
                                let low = self.hex4()?;
                                char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                            } else {
                                char::from_u32(unit)
                            };
                            out.push(c.ok_or("a bad \\u escape")?);
                        }
                        other => return Err(format!("bad escape `\\{}`", other as char)),
                    }
                }
                _ => {
                    // Copy a whole UTF-8 sequence at once.
                    let start = self.at - 1;
                    let mut end = self.at;
                    while end < self.bytes.len() && (self.bytes[end] & 0xC0) == 0x80 {
                        end += 1;
                    }
                    let chunk = std::str::from_utf8(&self.bytes[start..end])
                        .map_err(|_| "a string that is not UTF-8".to_string())?;
                    out.push_str(chunk);
                    self.at = end;
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or("a bad \\u escape")?;
        self.at += 4;
        Ok(digits)
    }
}

#[cfg(test)]
mod bench_tests {
    use super::*;

    fn figure(line: &str) -> Figure {
        Figure::parse(line).expect("a figure")
    }

    #[test]
    fn figure_lines_parse_with_their_details() {
        let f = figure(
            r#"{"bench":"runtime","name":"round_memory_100","label":"memory host, 100 rounds","value":41.5,"unit":"us","rounds":99,"first_tenth":40,"last_tenth":43.25,"note":"a \"quoted\" µ \u00b5 \ud83d\ude00"}"#,
        );
        assert_eq!(f.name, "round_memory_100");
        assert_eq!(f.label, "memory host, 100 rounds");
        assert_eq!(f.value, Some(41.5));
        assert_eq!(f.unit, "us");
        assert_eq!(f.detail("last_tenth"), Some(43.25));
        assert_eq!(
            f.details.iter().find(|(k, _)| k == "note").map(|(_, v)| v),
            Some(&Json::Str("a \"quoted\" µ µ 😀".to_string()))
        );
        let arrays = figure(
            r#"{"name":"demo_ready","value":210.5,"unit":"ms","loads":[200,210.5,-1e3],"x":{"a":null,"b":true}}"#,
        );
        assert_eq!(arrays.label, "demo_ready", "the name when no label");
        assert!(Figure::parse(r#"{"name":"x","unit":"ms"}"#).is_err());
        assert!(Figure::parse(r#"{"name":"x","value":1,"unit":"ms""#).is_err());
        assert!(Figure::parse("[1]").is_err());
        assert_eq!(
            figure(r#"{"name":"x","value":null,"unit":"ms"}"#).value,
            None
        );
    }

    #[test]
    fn the_postgres_round_is_shown_beside_its_bare_commit() {
        let figures: Vec<Figure> = [
            r#"{"name":"floor_postgres_commit","value":200,"unit":"us"}"#,
            r#"{"name":"round_postgres_effectful","value":2500,"unit":"us"}"#,
            r#"{"name":"commits_per_round_postgres","value":2.08,"unit":"commits"}"#,
        ]
        .iter()
        .map(|l| figure(l))
        .collect();
        let table = Table::build(&figures);
        let round = table
            .lines
            .iter()
            .find(|l| l.name == "round_postgres_effectful")
            .expect("a line for the PostgreSQL round");
        assert_eq!(round.floor_ratio, Some(12.5));
        assert_eq!(round.met, None, "no aim yet");
        assert!(
            round.figure.contains("= 12.50 × bare PostgreSQL commit"),
            "{}",
            round.figure
        );
    }

    #[test]
    fn aims_are_met_or_not_against_numbers_and_floors_of_the_same_run() {
        let figures: Vec<Figure> = [
            r#"{"name":"floor_sqlite_commit","value":200,"unit":"us"}"#,
            r#"{"name":"floor_fsync_4k","value":100,"unit":"us"}"#,
            r#"{"name":"round_sqlite_effectful","value":450,"unit":"us"}"#,
            r#"{"name":"round_memory_100","value":12,"unit":"us"}"#,
            r#"{"name":"round_memory_1000","value":9,"unit":"us","first_tenth":9,"last_tenth":9.5}"#,
            r#"{"name":"resume_1000_rounds","value":2.5,"unit":"ms"}"#,
            r#"{"name":"resume_10000_records","value":2.9,"unit":"ms"}"#,
            r#"{"name":"readable_throughput","value":20,"unit":"MB/s"}"#,
            r#"{"name":"something_new","label":"a new figure","value":3,"unit":"ms"}"#,
        ]
        .iter()
        .map(|l| figure(l))
        .collect();
        let table = Table::build(&figures);
        let line = |name: &str| {
            table
                .lines
                .iter()
                .find(|l| l.name == name)
                .unwrap_or_else(|| panic!("no line {name}"))
        };
        assert_eq!(line("round_sqlite_effectful").met, Some(true));
        assert_eq!(line("round_sqlite_effectful").floor_ratio, Some(2.25));
        assert!(
            line("round_sqlite_effectful")
                .figure
                .contains("= 2.25 × bare WAL commit")
        );
        assert!(
            line("round_sqlite_effectful")
                .figure
                .contains("= 4.50 × 4 KiB fsync")
        );
        assert_eq!(line("round_memory_100").met, Some(false));
        assert_eq!(line("round_memory_1000").met, Some(true));
        assert!(
            line("round_memory_1000")
                .figure
                .contains("first tenth 9.00 → last tenth 9.50")
        );
        // 9.5 / 12: flat.
        assert_eq!(line(FLATNESS).met, Some(true));
        assert_eq!(line("resume_1000_rounds").met, Some(false));
        assert_eq!(
            line("resume_10000_records").met,
            Some(true),
            "2.9 ≤ 1.2 × 2.5"
        );
        assert_eq!(line("readable_throughput").met, Some(true));
        assert_eq!(line("floor_sqlite_commit").met, None);
        assert_eq!(line("idle_run_memory").figure, "not measured");
        assert_eq!(line("idle_run_memory").met, None);
        assert_eq!(line("something_new").aim, "—");
        assert_eq!(
            table.lines.last().map(|l| l.name.as_str()),
            Some("something_new")
        );

        let meta = Meta {
            date: "2026-12-05".into(),
            commit: "abc1234".into(),
            quick: true,
            build_seconds: 1.0,
            run_seconds: 2.0,
            load_before: Some(0.5),
            load_after: None,
        };
        let markdown = table.markdown(&meta);
        assert!(markdown.contains("quick run"));
        assert!(markdown.contains("| not met |"));
        assert!(markdown.contains("| — | floor |"));
        assert!(
            table.lines.iter().all(|l| l.name != "resume_100_records"),
            "a figure without an aim that was not measured is left out"
        );
        let json = Json::parse(&table.json(&meta)).expect("the report is JSON");
        let Json::Obj(fields) = json else {
            panic!("an object")
        };
        let Some((_, Json::Arr(rows))) = fields.iter().find(|(k, _)| k == "rows") else {
            panic!("rows")
        };
        assert_eq!(rows.len(), table.lines.len());
    }

    #[test]
    fn the_plan_builds_first_then_runs_every_bench_with_bench_json() {
        let root = Path::new("/repo");
        let lines = root.join(OUT_DIR).join("figures.jsonl");
        let (builds, runs) = bench_steps(root, true, &lines);
        assert_eq!(builds.len(), 6);
        for build in &builds[..5] {
            assert_eq!(build.args[..2], ["bench", "--no-run"]);
        }
        assert_eq!(builds[5].args, ["build.mjs"]);
        let shown: Vec<String> = runs.iter().map(Step::to_string).collect();
        for bench in [
            "runtime",
            "idle_runs",
            "run_javascript",
            "readable",
            "--bench postgres",
            "--bench workers",
            "--bench prompt_caching",
            "bench/idb_bench.mjs",
        ] {
            let step = shown
                .iter()
                .find(|s| s.contains(bench))
                .unwrap_or_else(|| panic!("no step runs {bench}"));
            assert!(
                step.contains("BENCH_JSON=/repo/target/bench/figures.jsonl"),
                "{step}"
            );
            assert!(step.contains("BENCH_QUICK=1"), "{step}");
        }
        assert!(shown.iter().filter(|s| s.ends_with("-- --quick")).count() == 2);
        let (_, full) = bench_steps(root, false, &lines);
        assert!(full.iter().all(|s| !s.to_string().contains("BENCH_QUICK")));
        assert!(full.iter().all(|s| !s.args.iter().any(|a| a == "--quick")));
    }

    #[test]
    fn dates_are_civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_792), (2026, 12, 5));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(number(1234.4), "1,234");
        assert_eq!(number(12.34), "12.3");
        assert_eq!(number(0.1234), "0.12");
    }
}
