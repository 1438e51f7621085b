//! `run_javascript` benchmarks (issue 5): a fresh runtime and context with a
//! trivial expression (aim: 0.3 ms or less natively), and a CPU loop summing
//! 0..10^7. Each iteration is one complete call: runtime, context, input,
//! evaluation, JSON result.
//!
//! With `BENCH_JSON=<file>`, the medians criterion estimated in this run
//! (its `estimates.json`) are also appended to that file as JSON lines
//! (`cargo xtask bench` collects them); `-- --quick` is criterion's quick mode.

#[cfg(target_arch = "wasm32")]
fn main() {} // criterion is a native dev-dependency; the bench runs natively.

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    // What `criterion_main!` does, then the machine-readable figures.
    let started = std::time::SystemTime::now();
    native::run_javascript();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
    native::emit_json(started);
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::hint::black_box;
    use std::time::{Duration, Instant};

    use agent_tools::builtin::javascript::{JsLimits, run_script};
    use criterion::{Criterion, criterion_group};
    use serde_json::json;

    fn benches(c: &mut Criterion) {
        let start = Instant::now();
        let limits = JsLimits {
            time_ms: 30_000,
            ..JsLimits::DEFAULT
        };

        c.bench_function("run_javascript/fresh_context_trivial_expression", |b| {
            b.iter(|| {
                let out = run_script(
                    black_box("1 + 1"),
                    &json!(null),
                    &limits,
                    move || -> Duration { start.elapsed() },
                )
                .expect("runs");
                black_box(out.value)
            })
        });

        let mut group = c.benchmark_group("run_javascript/cpu");
        group.sample_size(10);
        group.bench_function("sum_0_to_10e7", |b| {
            b.iter(|| {
                let out = run_script(
                    black_box("let s = 0; for (let i = 0; i < 1e7; i++) s += i; s"),
                    &json!(null),
                    &limits,
                    move || -> Duration { start.elapsed() },
                )
                .expect("runs");
                assert_eq!(out.value, json!(49_999_995_000_000u64));
                black_box(out.value)
            })
        });
        group.finish();
    }

    criterion_group!(run_javascript, benches);

    /// Appends criterion's median of each benchmark of this run (in ms) to
    /// `$BENCH_JSON`, when set: `{"bench","name","label","value","unit"}`.
    pub(crate) fn emit_json(started: std::time::SystemTime) {
        let Some(out) = std::env::var_os("BENCH_JSON") else {
            return;
        };
        let figures = [
            (
                "run_javascript_fresh_context_trivial_expression",
                "run_javascript_fresh_context",
                "run_javascript, fresh context + trivial expression",
            ),
            (
                "run_javascript_cpu/sum_0_to_10e7",
                "run_javascript_sum_1e7",
                "run_javascript, sum of 0..10^7",
            ),
        ];
        for (directory, name, label) in figures {
            let Some(ns) = criterion_median_ns(directory, started) else {
                eprintln!("BENCH_JSON: no estimate of {directory} from this run");
                continue;
            };
            let line = json!({
                "bench": "run_javascript", "name": name, "label": label,
                "value": ns / 1e6, "unit": "ms",
            });
            append_line(&out, &line.to_string());
        }
    }

    /// The median point estimate (ns) criterion wrote for `directory` in
    /// this run (`$CRITERION_HOME`, else `$CARGO_TARGET_DIR/criterion`,
    /// else the workspace's `target/criterion`).
    fn criterion_median_ns(directory: &str, since: std::time::SystemTime) -> Option<f64> {
        let home = std::env::var_os("CRITERION_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                std::env::var_os("CARGO_TARGET_DIR")
                    .map(|t| std::path::PathBuf::from(t).join("criterion"))
            })
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion")
            });
        let file = home.join(directory).join("new/estimates.json");
        let fresh = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified >= since);
        if !fresh {
            return None;
        }
        let estimates: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).ok()?).ok()?;
        estimates["median"]["point_estimate"].as_f64()
    }

    fn append_line(path: &std::ffi::OsStr, line: &str) {
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = written {
            eprintln!(
                "BENCH_JSON: cannot append to {}: {e}",
                path.to_string_lossy()
            );
        }
    }
}
