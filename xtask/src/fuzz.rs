//! `cargo xtask fuzz`: coverage-guided fuzzing of the targets of `fuzz/`
//! with AFL++ through cargo-afl (issue 40, parts 3 and 4).
//!
//! It owns how a fuzz run is made on this kind of machine: cargo-afl
//! [`CARGO_AFL_VERSION`] installed when missing (its install builds AFL++
//! and its LLVM runtime), the harness built once with `cargo afl build
//! --release --features afl`, then for each target `cargo afl fuzz` for a
//! fixed time with the committed seeds and earlier crashes as its input,
//! the target's dictionary when it has one, and AFL's needs met without a
//! terminal or root: `AFL_NO_UI`, `AFL_SKIP_CPUFREQ`, `AFL_NO_AFFINITY` (the
//! cores are shared), and `AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES` when the
//! kernel pipes core dumps to a program (AFL would otherwise refuse to
//! start; the system setting is left alone). After each run it prints AFL's
//! `fuzzer_stats` (executions, corpus, edges and bitmap coverage, crashes,
//! hangs) and lists every crash; a crash fails the command.
//!
//! The targets are the folders of `fuzz/corpus/` (the fuzz crate's own test
//! checks that each of its targets has one), so this file keeps no list of
//! its own. `cargo xtask test` runs every target for [`CI_SECONDS`] seconds
//! ([`ci_steps`]).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::runner::{Failure, Result, Runner, Started, Step};

/// The cargo-afl release this project is fuzzed with (TOOLCHAIN.md).
pub(crate) const CARGO_AFL_VERSION: &str = "0.18.2";

/// Seconds each target runs in `cargo xtask test`.
pub(crate) const CI_SECONDS: u64 = 10;

/// Milliseconds one input may take before AFL calls it a hang (generous:
/// the machine is shared, and a debug-assertion build is slower).
const EXEC_TIMEOUT_MS: &str = "5000";

/// The fuzz crate, from the repository root.
const FUZZ_DIR: &str = "fuzz";

/// What `cargo xtask fuzz` was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FuzzArgs {
    /// `None`: every target.
    pub(crate) target: Option<String>,
    pub(crate) seconds: u64,
    /// Leave out targets with an open finding (`fuzz/findings/TARGET/`
    /// not empty): they would only find it again. CI gives it.
    pub(crate) skip_open_findings: bool,
}

/// Parses `TARGET|--all [--time N]`.
pub(crate) fn parse(args: &[String]) -> Result<FuzzArgs, String> {
    let mut target = None;
    let mut all = false;
    let mut seconds = None;
    let mut skip_open_findings = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--all" => all = true,
            "--skip-open-findings" => skip_open_findings = true,
            "--time" => {
                let value = iter.next().ok_or("--time needs a number of seconds")?;
                let n: u64 = value
                    .parse()
                    .map_err(|_| format!("--time {value}: not a number of seconds"))?;
                if n == 0 {
                    return Err("--time must be at least 1 second".into());
                }
                seconds = Some(n);
            }
            other if other.starts_with('-') => {
                return Err(format!("unknown argument `{other}` for `fuzz`"));
            }
            name if target.is_none() => target = Some(name.to_string()),
            extra => {
                return Err(format!(
                    "one target at a time (or --all), not also `{extra}`"
                ));
            }
        }
    }
    match (all, target) {
        (true, Some(name)) => Err(format!("give a target or --all, not both (`{name}`)")),
        (false, None) => Err("name a target, or give --all".into()),
        (_, target) => Ok(FuzzArgs {
            target,
            seconds: seconds.unwrap_or(60),
            skip_open_findings,
        }),
    }
}

/// The targets: the folders of `fuzz/corpus/`, sorted.
pub(crate) fn targets(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.join(FUZZ_DIR).join("corpus")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// The steps `cargo xtask test` adds: the fuzz crate's formatting (a
/// workspace of its own, which `cargo fmt --all` does not reach), the
/// corpus replay under `cargo test` (no AFL), then every target for
/// [`CI_SECONDS`] seconds.
pub(crate) fn ci_steps() -> Vec<Step> {
    vec![
        Step::cargo(
            "fuzz: fmt",
            &["fmt", "--manifest-path", "fuzz/Cargo.toml", "--check"],
        ),
        Step::cargo(
            "fuzz: corpus replay",
            &["test", "--manifest-path", "fuzz/Cargo.toml"],
        ),
        Step::cargo(
            "fuzz: every target, bounded",
            &[
                "xtask",
                "fuzz",
                "--all",
                "--time",
                &CI_SECONDS.to_string(),
                "--skip-open-findings",
            ],
        ),
    ]
}

/// The AFL++ harness: every target in one binary, instrumented, release.
fn afl_harness_build() -> Step {
    Step::cargo(
        "fuzz: build the AFL++ harness",
        &[
            "afl",
            "build",
            "--release",
            "--features",
            "afl",
            "--manifest-path",
            "fuzz/Cargo.toml",
        ],
    )
}

/// Starts the fuzz group's builds (the corpus replay's test binary and the
/// AFL++ harness, in the fuzz crate's own target dir) in the background, so
/// that `cargo xtask test` compiles them while the e2e suite, which mostly
/// waits on Chromium and loopback servers, leaves a core idle; the fuzz
/// group waits for them ([`Runner::finish_step`]), and its own steps then
/// find them built. cargo's lock on the target dir runs the two one after
/// the other. Output goes to `build-*.log` in that target dir.
pub(crate) fn start_builds(runner: &mut Runner) -> Result<Vec<Started>> {
    ensure_cargo_afl(runner)?;
    let logs = fuzz_target_dir(&runner.root);
    if !runner.dry_run {
        std::fs::create_dir_all(&logs).map_err(|error| Failure::Step {
            name: "fuzz: builds in the background".into(),
            status: format!("could not create {}: {error}", logs.display()),
        })?;
    }
    let replay = Step::cargo(
        "fuzz: build the corpus replay",
        &["test", "--manifest-path", "fuzz/Cargo.toml", "--no-run"],
    );
    let mut started = Vec::new();
    for (step, log) in [
        (replay, "build-replay.log"),
        (afl_harness_build(), "build-afl.log"),
    ] {
        let step = step.env("CARGO_INCREMENTAL", "0");
        started.push(runner.start_step_logged(&step, &logs.join(log))?);
    }
    Ok(started)
}

/// `cargo xtask fuzz`.
pub(crate) fn fuzz(runner: &mut Runner, args: &FuzzArgs) -> Result<()> {
    let all = targets(&runner.root);
    let chosen: Vec<String> = match &args.target {
        None => all.clone(),
        Some(name) if all.contains(name) => vec![name.clone()],
        Some(name) => {
            return Err(Failure::Step {
                name: "fuzz".into(),
                status: format!("no target `{name}`; the targets are: {}", all.join(", ")),
            });
        }
    };
    let chosen: Vec<String> = chosen
        .into_iter()
        .filter(|target| {
            let open = args.skip_open_findings && has_open_findings(&runner.root, target);
            if open {
                println!(
                    "\n[fuzz] NOT FUZZED: {target} has open findings in {FUZZ_DIR}/findings/{target}/ \
                     (replayed by the fuzz crate's tests; fix them, then move them to regressions/)"
                );
            }
            !open
        })
        .collect();
    ensure_cargo_afl(runner)?;
    let target_dir = fuzz_target_dir(&runner.root);
    runner.run_step(&afl_harness_build())?;
    let harness = target_dir.join("release").join("agent-fuzz");
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut reports = Vec::new();
    for target in &chosen {
        let out = target_dir.join("afl").join(format!("{target}-{stamp}"));
        reports.push(run_target(runner, target, &harness, &out, args.seconds)?);
    }
    if runner.dry_run {
        return Ok(());
    }
    print_table(&reports);
    let crashed: Vec<&Report> = reports.iter().filter(|r| !r.crashes.is_empty()).collect();
    if crashed.is_empty() {
        return Ok(());
    }
    for report in &crashed {
        eprintln!("\n[fuzz] {} crashed; the inputs:", report.target);
        for crash in &report.crashes {
            eprintln!("  {}", crash.display());
        }
    }
    eprintln!(
        "\n[fuzz] replay one with: AGENT_FUZZ_TARGET=NAME {} < FILE\n\
         [fuzz] once fixed, commit the input under fuzz/regressions/NAME/ (cargo test in fuzz/ replays it)",
        harness.display()
    );
    Err(Failure::Step {
        name: "fuzz".into(),
        status: format!(
            "crashes in {}",
            crashed
                .iter()
                .map(|r| r.target.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// Whether `fuzz/findings/TARGET/` holds an input (a property violation
/// whose fix is still open).
fn has_open_findings(root: &Path, target: &str) -> bool {
    std::fs::read_dir(root.join(FUZZ_DIR).join("findings").join(target))
        .map(|mut entries| entries.any(|e| e.is_ok_and(|e| e.path().is_file())))
        .unwrap_or(false)
}

/// Installs cargo-afl [`CARGO_AFL_VERSION`] unless that version is there.
fn ensure_cargo_afl(runner: &mut Runner) -> Result<()> {
    let have = |runner: &Runner| runner.query("cargo", &["afl", "--version"]);
    let wanted = format!("cargo-afl {CARGO_AFL_VERSION}");
    let missing = match have(runner) {
        Some(version) if version.contains(&wanted) => return Ok(()),
        Some(version) => format!("found `{}`, want {wanted}", version.trim()),
        None => "`cargo afl` is not installed".to_string(),
    };
    let install = Step::cargo(
        "install cargo-afl",
        &["install", "cargo-afl", "--version", CARGO_AFL_VERSION],
    );
    runner.install("cargo-afl", &missing, &[install], |runner| {
        match have(runner) {
            Some(version) if version.contains(&wanted) => None,
            other => Some(format!("`cargo afl --version` says {other:?}")),
        }
    })
}

/// Where the fuzz crate builds: `CARGO_TARGET_DIR` when set (relative to
/// the root, where the build runs), else `fuzz/target`.
fn fuzz_target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root.join(dir),
        None => root.join(FUZZ_DIR).join("target"),
    }
}

/// What one run found.
struct Report {
    target: String,
    stats: Vec<(String, String)>,
    crashes: Vec<PathBuf>,
    hangs: usize,
}

impl Report {
    fn stat(&self, key: &str) -> &str {
        self.stats
            .iter()
            .find(|(k, _)| k == key)
            .map_or("?", |(_, v)| v.as_str())
    }
}

/// The environment AFL++ needs here (see the module documentation).
pub(crate) fn afl_env(core_pattern: &str) -> Vec<(&'static str, &'static str)> {
    let mut env = vec![
        ("AFL_NO_UI", "1"),
        ("AFL_SKIP_CPUFREQ", "1"),
        ("AFL_NO_AFFINITY", "1"),
        // A seed that is slow on a loaded machine is not a reason to stop.
        ("AFL_IGNORE_SEED_PROBLEMS", "1"),
        ("AFL_FAST_CAL", "1"),
    ];
    if core_pattern.trim_start().starts_with('|') {
        env.push(("AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES", "1"));
    }
    env
}

fn run_target(
    runner: &mut Runner,
    target: &str,
    harness: &Path,
    out: &Path,
    seconds: u64,
) -> Result<Report> {
    let root = runner.root.clone();
    let input = out.with_extension("in");
    if !runner.dry_run {
        gather_inputs(&root, target, &input).map_err(|e| Failure::Step {
            name: format!("fuzz {target}"),
            status: format!("could not gather its inputs into {}: {e}", input.display()),
        })?;
    }
    let mut step = Step::cargo(
        format!("fuzz {target} ({seconds} s)"),
        &[
            "afl",
            "fuzz",
            "-i",
            &input.display().to_string(),
            "-o",
            &out.display().to_string(),
            "-V",
            &seconds.to_string(),
            "-t",
            EXEC_TIMEOUT_MS,
        ],
    );
    let dict = root
        .join(FUZZ_DIR)
        .join("dict")
        .join(format!("{target}.dict"));
    if dict.is_file() {
        step = step.arg("-x").arg(dict.display().to_string());
    }
    step = step.arg("--").arg(harness.display().to_string());
    let core_pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    for (key, value) in afl_env(&core_pattern) {
        step = step.env(key, value);
    }
    step = step.env("AGENT_FUZZ_TARGET", target);
    runner.run_step(&step)?;
    let default = out.join("default");
    let stats = std::fs::read_to_string(default.join("fuzzer_stats"))
        .map(|text| parse_stats(&text))
        .unwrap_or_default();
    let listed = |dir: &str| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(default.join(dir))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.file_name().is_some_and(|n| n != "README.txt"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    };
    let report = Report {
        target: target.to_string(),
        stats,
        crashes: listed("crashes"),
        hangs: listed("hangs").len(),
    };
    if !runner.dry_run {
        println!(
            "[fuzz] {target}: {} executions ({}/s), corpus {}, edges {}/{} (bitmap {}), \
             {} crash(es), {} hang(s); output in {}",
            report.stat("execs_done"),
            report.stat("execs_per_sec"),
            report.stat("corpus_count"),
            report.stat("edges_found"),
            report.stat("total_edges"),
            report.stat("bitmap_cvg"),
            report.crashes.len(),
            report.hangs,
            out.display()
        );
    }
    Ok(report)
}

/// Copies the target's seeds and its regressions into one fresh folder,
/// AFL's input.
fn gather_inputs(root: &Path, target: &str, into: &Path) -> std::io::Result<()> {
    if into.exists() {
        std::fs::remove_dir_all(into)?;
    }
    std::fs::create_dir_all(into)?;
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(FUZZ_DIR).join(kind).join(target)) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.path().is_file() {
                let name = format!("{kind}-{}", entry.file_name().to_string_lossy());
                std::fs::copy(entry.path(), into.join(name))?;
            }
        }
    }
    Ok(())
}

/// AFL's `fuzzer_stats`: `key : value` lines.
pub(crate) fn parse_stats(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn print_table(reports: &[Report]) {
    println!(
        "\n{:<20} {:>12} {:>10} {:>8} {:>14} {:>9} {:>7} {:>5}",
        "target", "executions", "per sec", "corpus", "edges", "bitmap", "crashes", "hangs"
    );
    for r in reports {
        println!(
            "{:<20} {:>12} {:>10} {:>8} {:>14} {:>9} {:>7} {:>5}",
            r.target,
            r.stat("execs_done"),
            r.stat("execs_per_sec"),
            r.stat("corpus_count"),
            format!("{}/{}", r.stat("edges_found"), r.stat("total_edges")),
            r.stat("bitmap_cvg"),
            r.crashes.len(),
            r.hangs
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_a_target_or_all_with_a_time() {
        assert_eq!(
            parse(&args(&["sse", "--time", "30"])),
            Ok(FuzzArgs {
                target: Some("sse".into()),
                seconds: 30,
                skip_open_findings: false,
            })
        );
        assert_eq!(
            parse(&args(&["--all", "--time", "1800"])),
            Ok(FuzzArgs {
                target: None,
                seconds: 1800,
                skip_open_findings: false,
            })
        );
        assert!(
            parse(&args(&["--all", "--skip-open-findings"])).is_ok_and(|a| a.skip_open_findings)
        );
        assert!(parse(&args(&[])).is_err());
        assert!(parse(&args(&["sse", "--all"])).is_err());
        assert!(parse(&args(&["sse", "pdf"])).is_err());
        assert!(parse(&args(&["sse", "--time", "0"])).is_err());
        assert!(parse(&args(&["sse", "--time", "x"])).is_err());
        assert!(parse(&args(&["sse", "--bogus"])).is_err());
    }

    #[test]
    fn the_targets_are_the_corpus_folders() {
        let root = crate::workspace::repo_root();
        let names = targets(&root);
        for expected in ["url_policy", "workspace_path", "sse", "stored_records"] {
            assert!(
                names.iter().any(|n| n == expected),
                "{expected} in {names:?}"
            );
        }
    }

    #[test]
    fn afl_is_told_to_ignore_crash_reporting_only_when_cores_go_to_a_program() {
        let piped = afl_env("|/usr/share/apport/apport %p");
        assert!(piped.contains(&("AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES", "1")));
        let plain = afl_env("core\n");
        assert!(
            !plain
                .iter()
                .any(|(k, _)| *k == "AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES")
        );
        for needed in ["AFL_NO_UI", "AFL_SKIP_CPUFREQ", "AFL_NO_AFFINITY"] {
            assert!(plain.iter().any(|(k, _)| *k == needed), "{needed}");
        }
    }

    #[test]
    fn a_target_with_an_open_finding_is_known() {
        let root = crate::workspace::repo_root();
        // readable_html's pre-scan finding is open (fuzzing.md); sse has none.
        assert!(has_open_findings(&root, "readable_html"));
        assert!(!has_open_findings(&root, "sse"));
    }

    #[test]
    fn reads_fuzzer_stats() {
        let stats = parse_stats(
            "start_time        : 1765100000\nexecs_done        : 123456\nbitmap_cvg        : 1.23%\n",
        );
        assert!(stats.contains(&("execs_done".into(), "123456".into())));
        assert!(stats.contains(&("bitmap_cvg".into(), "1.23%".into())));
    }

    #[test]
    fn ci_replays_the_corpora_then_fuzzes_every_target_briefly() {
        let steps = ci_steps();
        assert_eq!(steps[0].args[0], "fmt");
        assert_eq!(steps[1].args[0], "test");
        assert!(steps[1].args.iter().any(|a| a == "fuzz/Cargo.toml"));
        assert_eq!(
            steps[2].args,
            [
                "xtask",
                "fuzz",
                "--all",
                "--time",
                &CI_SECONDS.to_string(),
                "--skip-open-findings"
            ]
        );
    }
}
