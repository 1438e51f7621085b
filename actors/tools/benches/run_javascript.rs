//! `run_javascript` benchmarks (issue 5): a fresh runtime and context with a
//! trivial expression (aim: 0.3 ms or less natively), and a CPU loop summing
//! 0..10^7. Each iteration is one complete call: runtime, context, input,
//! evaluation, JSON result.

#[cfg(target_arch = "wasm32")]
fn main() {} // criterion is a native dev-dependency; the bench runs natively.

#[cfg(not(target_arch = "wasm32"))]
criterion::criterion_main!(native::run_javascript);

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
}
