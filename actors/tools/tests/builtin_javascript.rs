//! `run_javascript` (S5.7): every limit at, below and above its bound, the
//! missing host surface, JSON in and out, and the actor's capability checks
//! and non-blocking execution on a real tokio executor.
#![cfg(not(target_arch = "wasm32"))] // native tests (tokio); the browser runs builtin_wasm.rs

mod builtin_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_capabilities::{Target, TargetScope, Uses};
use agent_kernel::Reply;
use agent_kernel::actor::spawn_actor;
use agent_kernel::host::{Clock, Executor};
use agent_kernel::protocol::{ToolMsg, ToolResult};
use agent_tools::builtin::javascript::{
    self, JavascriptTool, JsError, JsLimitError, JsLimits, monotonic_from, run_script,
};
use builtin_support::*;
use serde_json::{Value, json};

fn clock() -> impl Fn() -> Duration + 'static {
    let start = Instant::now();
    move || start.elapsed()
}

fn run(code: &str) -> Result<Value, JsError> {
    run_with(code, &json!(null), &JsLimits::DEFAULT)
}

/// The default limits but for time: for tests of the memory and stack
/// limits, which a loaded machine must not turn into a time-limit error.
const UNTIMED: JsLimits = JsLimits {
    time_ms: 120_000,
    ..JsLimits::DEFAULT
};

fn run_untimed(code: &str) -> Result<Value, JsError> {
    run_with(code, &json!(null), &UNTIMED)
}

fn run_with(code: &str, input: &Value, limits: &JsLimits) -> Result<Value, JsError> {
    run_script(code, input, limits, clock()).map(|o| o.value)
}

// ---------------------------------------------------------------- basics

#[test]
fn s5_7_completion_value_and_input_round_trip_as_json() {
    assert_eq!(run("1 + 2"), Ok(json!(3)));
    assert_eq!(
        run_with(
            "({ total: input.values.reduce((a, b) => a + b, 0), name: input.name.toUpperCase() })",
            &json!({"values": [1, 2, 3.5], "name": "sum"}),
            &JsLimits::DEFAULT
        ),
        Ok(json!({"total": 6.5, "name": "SUM"}))
    );
    assert_eq!(run("let x = 5;"), Ok(json!(null)), "undefined becomes null");
    assert_eq!(
        run("[1, 'a', null, true, {b: [2]}]"),
        Ok(json!([1, "a", null, true, {"b": [2]}]))
    );
    assert_eq!(run("NaN"), Ok(json!(null)), "JSON has no NaN");
    // Promise chains settle within the call; an async function's value is returned.
    assert_eq!(
        run("(async () => { await null; return 41 + 1 })()"),
        Ok(json!(42))
    );
}

#[test]
fn s5_7_script_errors_are_typed() {
    match run("throw new TypeError('boom')") {
        Err(JsError::Thrown { name, message, .. }) => {
            assert_eq!((name.as_str(), message.as_str()), ("TypeError", "boom"));
        }
        other => panic!("expected Thrown, got {other:?}"),
    }
    assert!(matches!(run("function ("), Err(JsError::Syntax { .. })));
    assert!(matches!(
        run("Promise.reject(new Error('no'))"),
        Err(JsError::Thrown { .. })
    ));
    for code in [
        "(() => 1)",
        "Symbol('s')",
        "10n",
        "let o = {}; o.o = o; o",
        "new Promise(() => {})",
    ] {
        assert!(
            matches!(run(code), Err(JsError::NotJson { .. })),
            "{code}: {:?}",
            run(code)
        );
    }
}

/// A script chooses its error's texts, so they are bounded like its result:
/// at the limit kept whole, above it cut with `…` (a sandbox process hands
/// them back over a pipe whose reply is bounded).
#[test]
fn error_texts_at_below_and_above_their_limit() {
    use agent_tools::builtin::javascript::limits::ERROR_TEXT_BYTES;
    let thrown = |len: usize| match run(&format!("throw new Error('m'.repeat({len}))")) {
        Err(JsError::Thrown { message, .. }) => message,
        other => panic!("expected Thrown, got {other:?}"),
    };
    assert_eq!(
        thrown(ERROR_TEXT_BYTES - 1),
        "m".repeat(ERROR_TEXT_BYTES - 1)
    );
    assert_eq!(thrown(ERROR_TEXT_BYTES), "m".repeat(ERROR_TEXT_BYTES));
    assert_eq!(
        thrown(ERROR_TEXT_BYTES + 1),
        format!("{}…", "m".repeat(ERROR_TEXT_BYTES))
    );
    assert_eq!(
        thrown(10 * 1024 * 1024),
        format!("{}…", "m".repeat(ERROR_TEXT_BYTES))
    );
    // A thrown non-Error value and a stack are cut the same way.
    match run(&format!("throw 'v'.repeat({})", ERROR_TEXT_BYTES + 1)) {
        Err(JsError::Thrown { message, .. }) => {
            assert_eq!(message, format!("{}…", "v".repeat(ERROR_TEXT_BYTES)));
        }
        other => panic!("expected Thrown, got {other:?}"),
    }
    let deep = format!(
        "function f(n) {{ if (n === 0) throw new Error('deep'); return f(n - 1) }} \
         const e = (() => {{ try {{ f(150) }} catch (e) {{ return e }} }})(); \
         e.stack = 's'.repeat({}); throw e",
        ERROR_TEXT_BYTES * 2
    );
    match run(&deep) {
        Err(JsError::Thrown { stack, .. }) => {
            assert_eq!(stack, Some(format!("{}…", "s".repeat(ERROR_TEXT_BYTES))));
        }
        other => panic!("expected Thrown, got {other:?}"),
    }
}

// ------------------------------------------------------- host surface

#[test]
fn s5_7_no_network_timers_modules_or_host_objects() {
    let names = [
        "fetch",
        "XMLHttpRequest",
        "WebSocket",
        "require",
        "setTimeout",
        "setInterval",
        "importScripts",
        "process",
        "Deno",
        "std",
        "os",
        "window",
        "document",
        "navigator",
        "console",
        "performance",
        "WebAssembly",
    ];
    for name in names {
        assert_eq!(
            run(&format!("typeof globalThis['{name}']")),
            Ok(json!("undefined")),
            "{name} must not exist"
        );
    }
    // Calling them fails as a script error, not a crash.
    for code in [
        "fetch('http://127.0.0.1/')",
        "new XMLHttpRequest()",
        "require('fs')",
        "setTimeout(() => 1, 0)",
    ] {
        match run(code) {
            Err(JsError::Thrown { name, .. }) => assert_eq!(name, "ReferenceError", "{code}"),
            other => panic!("{code}: expected a ReferenceError, got {other:?}"),
        }
    }
    // Dynamic import has no loader: it rejects.
    match run("import('fs')") {
        Err(JsError::Thrown { message, .. }) => {
            assert!(message.contains("could not load module"), "{message}")
        }
        other => panic!("import(): expected a rejection, got {other:?}"),
    }
    assert_eq!(
        run(
            "(async () => { try { await import('./x.js'); return 'loaded' } catch (e) { return 'refused' } })()"
        ),
        Ok(json!("refused"))
    );
    // Static import is a syntax error in a classic script.
    assert!(matches!(
        run("import x from 'fs'; x"),
        Err(JsError::Syntax { .. })
    ));
}

// ------------------------------------------------------------- time

#[test]
fn s5_7_infinite_loop_stops_within_the_time_limit() {
    let limits = JsLimits {
        time_ms: 250,
        ..JsLimits::DEFAULT
    };
    for code in [
        "while (true) {}",
        // The interrupt is uncatchable.
        "for (;;) { try { for (;;) {} } catch (e) {} }",
        // Never-ending promise jobs are stopped between jobs too.
        "function spin() { Promise.resolve().then(spin) } spin()",
    ] {
        let started = Instant::now();
        let result = run_with(code, &json!(null), &limits);
        let took = started.elapsed();
        assert_eq!(result, Err(JsError::TimeLimit { limit_ms: 250 }), "{code}");
        assert!(
            took >= Duration::from_millis(250),
            "{code}: stopped early, {took:?}"
        );
        assert!(
            took < Duration::from_millis(1_000),
            "{code}: stopped late, {took:?}"
        );
    }
    let message = JsError::TimeLimit { limit_ms: 250 }.to_string();
    assert!(message.contains("250 ms"), "{message}");
}

#[test]
fn s5_7_work_below_the_time_limit_completes() {
    let limits = JsLimits {
        time_ms: 1_000,
        ..JsLimits::DEFAULT
    };
    // About 50 ms of work: well below the limit.
    let code = "const end = Date.now() + 50; let n = 0; while (Date.now() < end) { n++ } n > 0";
    assert_eq!(run_with(code, &json!(null), &limits), Ok(json!(true)));
}

#[test]
fn s5_7_the_deadline_comes_from_the_supplied_clock() {
    // A clock that jumps 1 s on every reading: the first interrupt check is
    // already past a 100 ms deadline, whatever the real time.
    let ticks = std::cell::Cell::new(0u64);
    let jumpy = move || {
        ticks.set(ticks.get() + 1);
        Duration::from_secs(ticks.get())
    };
    let limits = JsLimits {
        time_ms: 100,
        ..JsLimits::DEFAULT
    };
    let started = Instant::now();
    let result = run_script("while (true) {}", &json!(null), &limits, jumpy);
    assert_eq!(result, Err(JsError::TimeLimit { limit_ms: 100 }));
    assert!(started.elapsed() < Duration::from_millis(100));
}

// ----------------------------------------------------------- memory

#[test]
fn s5_7_allocating_a_gigabyte_is_refused() {
    let limit = JsLimits::DEFAULT.heap_bytes;
    for code in [
        "new ArrayBuffer(1024 * 1024 * 1024)",
        "new Array(1 << 30).fill(0).length",
        "const parts = []; for (let i = 0; i < 1024; i++) parts.push('x'.repeat(1 << 20) + i); parts.length",
        "new Uint8Array(1 << 30)[0]",
        // A promise chain that grows without end, inside jobs.
        "function grow() { return Promise.resolve().then(grow) } grow()",
    ] {
        assert_eq!(
            run_untimed(code),
            Err(JsError::MemoryLimit { limit_bytes: limit }),
            "{code}"
        );
    }
    let message = JsError::MemoryLimit { limit_bytes: limit }.to_string();
    assert!(message.contains(&limit.to_string()), "{message}");
}

#[test]
fn s5_7_heap_limit_below_and_above() {
    let eight_mib = "new Uint8Array(8 * 1024 * 1024).length";
    // Below the default 64 MiB: fine.
    assert_eq!(run_untimed(eight_mib), Ok(json!(8 * 1024 * 1024)));
    // The same allocation above a lowered 4 MiB limit: refused.
    let small = JsLimits {
        heap_bytes: 4 * 1024 * 1024,
        ..UNTIMED
    };
    assert_eq!(
        run_with(eight_mib, &json!(null), &small),
        Err(JsError::MemoryLimit {
            limit_bytes: 4 * 1024 * 1024
        })
    );
    // A script may catch the error and carry on within its bounds.
    assert_eq!(
        run_untimed("try { new ArrayBuffer(1 << 30); 'no' } catch (e) { String(e) }"),
        Ok(json!("InternalError: out of memory"))
    );
}

// ------------------------------------------------------------ stack

#[test]
fn s5_7_deep_recursion_is_an_error_not_a_crash() {
    let limit = JsLimits::DEFAULT.stack_bytes;
    for code in [
        "function f(n) { return f(n + 1) + 1 } f(0)",
        "const g = () => [g()]; g()",
        // Deep nesting in the parser.
        "eval('['.repeat(100000))",
        "JSON.parse('['.repeat(100000))",
    ] {
        assert_eq!(
            run_untimed(code),
            Err(JsError::StackLimit { limit_bytes: limit }),
            "{code}"
        );
    }
    // The engine is still usable after a stack overflow in the same thread.
    assert_eq!(run_untimed("1"), Ok(json!(1)));
}

#[test]
fn s5_7_stack_limit_below_and_above() {
    let depth = "function f(n) { return n === 0 ? 0 : 1 + f(n - 1) } f(200)";
    assert_eq!(
        run_untimed(depth),
        Ok(json!(200)),
        "200 frames fit in 256 KiB"
    );
    let small = JsLimits {
        stack_bytes: JsLimits::FLOOR.stack_bytes,
        ..UNTIMED
    };
    assert_eq!(
        run_with(depth, &json!(null), &small),
        Err(JsError::StackLimit {
            limit_bytes: JsLimits::FLOOR.stack_bytes
        }),
        "200 frames do not fit in 64 KiB"
    );
}

// ----------------------------------------------------------- output

#[test]
fn s5_7_output_at_below_and_above_the_limit() {
    let limits = JsLimits {
        output_bytes: 1_000,
        ..JsLimits::DEFAULT
    };
    // A string of n characters is n + 2 bytes of JSON.
    let at = run_script("'x'.repeat(998)", &json!(null), &limits, clock()).expect("at the limit");
    assert_eq!(at.json_bytes, 1_000);
    assert!(run_with("'x'.repeat(997)", &json!(null), &limits).is_ok());
    assert_eq!(
        run_with("'x'.repeat(999)", &json!(null), &limits),
        Err(JsError::OutputTooLarge {
            len: 1_001,
            limit: 1_000
        })
    );
    // Past the default limit too.
    let default = JsLimits::DEFAULT.output_bytes;
    assert_eq!(
        run(&format!("'y'.repeat({default})")),
        Err(JsError::OutputTooLarge {
            len: default + 2,
            limit: default
        })
    );
    assert!(
        JsError::OutputTooLarge {
            len: 1_001,
            limit: 1_000
        }
        .to_string()
        .contains("1000 bytes")
    );
}

// -------------------------------------------------- code and input size

#[test]
fn s5_7_code_and_input_size_at_below_and_above() {
    let limits = JsLimits {
        code_bytes: 100,
        input_bytes: 100,
        ..JsLimits::DEFAULT
    };
    let code_at = format!("{}1", " ".repeat(99));
    assert_eq!(code_at.len(), 100);
    assert_eq!(run_with(&code_at, &json!(null), &limits), Ok(json!(1)));
    assert_eq!(run_with(&code_at[1..], &json!(null), &limits), Ok(json!(1)));
    let code_above = format!(" {code_at}");
    assert_eq!(
        run_with(&code_above, &json!(null), &limits),
        Err(JsError::CodeTooLarge {
            len: 101,
            limit: 100
        })
    );
    // A JSON string of n characters is n + 2 bytes.
    let input_at = json!("i".repeat(98));
    assert_eq!(run_with("input.length", &input_at, &limits), Ok(json!(98)));
    assert_eq!(
        run_with("input.length", &json!("i".repeat(97)), &limits),
        Ok(json!(97))
    );
    assert_eq!(
        run_with("input.length", &json!("i".repeat(99)), &limits),
        Err(JsError::InputTooLarge {
            len: 101,
            limit: 100
        })
    );
}

#[test]
fn limits_may_only_be_lowered_and_not_below_the_floor() {
    let d = JsLimits::DEFAULT;
    assert_eq!(d, JsLimits::default());
    assert_eq!(
        (d.time_ms, d.heap_bytes, d.stack_bytes, d.output_bytes),
        (2_000, 64 << 20, 256 << 10, 64 << 10)
    );
    let lower = JsLimits {
        time_ms: 500,
        heap_bytes: 16 << 20,
        ..d
    };
    assert_eq!(d.lower_to(&lower), Ok(lower));
    assert_eq!(d.lower_to(&d), Ok(d), "equal is allowed");
    assert_eq!(d.lower_to(&JsLimits::FLOOR), Ok(JsLimits::FLOOR));
    assert_eq!(
        d.lower_to(&JsLimits {
            time_ms: 2_001,
            ..d
        }),
        Err(JsLimitError::Raised {
            limit: "time_ms",
            current: 2_000,
            requested: 2_001
        })
    );
    assert_eq!(
        d.lower_to(&JsLimits {
            stack_bytes: JsLimits::FLOOR.stack_bytes - 1,
            ..d
        }),
        Err(JsLimitError::BelowFloor {
            limit: "stack_bytes",
            floor: JsLimits::FLOOR.stack_bytes as u64,
            requested: JsLimits::FLOOR.stack_bytes as u64 - 1
        })
    );
    // The floor itself runs scripts.
    assert_eq!(
        run_with("[6 * 7]", &json!(null), &JsLimits::FLOOR),
        Ok(json!([42]))
    );
}

// ------------------------------------------------------------- actor

fn js_tool(executor: Arc<dyn Executor>, clock: Arc<dyn Clock>, time_ms: u64) -> JavascriptTool {
    let mut tool = JavascriptTool::native(executor, clock);
    tool.limits.time_ms = time_ms;
    tool
}

async fn invoke(
    addr: &agent_kernel::protocol::ToolAddr,
    invocation: agent_kernel::protocol::ToolInvocation,
) -> ToolResult {
    addr.ask(|reply| ToolMsg::Invoke { invocation, reply })
        .await
        .expect("the actor answers")
}

fn content(result: &ToolResult) -> &Value {
    match result {
        ToolResult::Success(s) => &s.content,
        ToolResult::Error(e) => panic!("expected success, got {}: {}", e.code, e.message),
    }
}

fn code(result: &ToolResult) -> &str {
    match result {
        ToolResult::Error(e) => &e.code,
        ToolResult::Success(s) => panic!("expected an error, got {}", s.content),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_runs_a_script_only_with_a_verified_capability() {
    let executor: Arc<dyn Executor> = Arc::new(TokioExecutor::current());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let addr = js_tool(executor, clock.clone(), 1_000)
        .spawn(None)
        .expect("spawn");
    let def = javascript::definition();
    let authority = authority();
    let args = json!({"code": "input.a * 2", "input": {"a": 21}});

    // A verified capability: the script runs.
    let cap = authority.mint(grant(&def, TargetScope::NoTarget, Uses::ForRun, FAR));
    let ok = invoke(
        &addr,
        invocation(
            draft(&def, "c1", args.clone(), Target::Nothing),
            cap,
            &authority,
        ),
    )
    .await;
    assert_eq!(content(&ok), &json!({"result": 42}));
    assert_eq!(ok.trust(), agent_capabilities::Trust::Internal);

    // A capability for another tool grants nothing here.
    let other = agent_tools::builtin::document::definition();
    let cap = authority.mint(grant(&other, TargetScope::NoTarget, Uses::ForRun, FAR));
    let refused = invoke(
        &addr,
        invocation(
            draft(&def, "c2", args.clone(), Target::Nothing),
            cap,
            &authority,
        ),
    )
    .await;
    assert_eq!(code(&refused), "capability_refused");

    // An expired capability.
    let cap = authority.mint(grant(
        &def,
        TargetScope::NoTarget,
        Uses::ForRun,
        clock.wall_ms() - 1,
    ));
    let refused = invoke(
        &addr,
        invocation(
            draft(&def, "c3", args.clone(), Target::Nothing),
            cap,
            &authority,
        ),
    )
    .await;
    assert_eq!(code(&refused), "capability_refused");

    // A capability minted by another authority (say, before a reload).
    let stranger = agent_capabilities::Authority::new(RUN, [9u8; 32]);
    let cap = stranger.mint(grant(&def, TargetScope::NoTarget, Uses::ForRun, FAR));
    let refused = invoke(
        &addr,
        invocation(
            draft(&def, "c4", args.clone(), Target::Nothing),
            cap,
            &authority,
        ),
    )
    .await;
    assert_eq!(code(&refused), "capability_refused");

    // A draft prepared for another definition of the tool.
    let mut changed = def.clone();
    changed.description.push('!');
    let cap = authority.mint(grant(&def, TargetScope::NoTarget, Uses::ForRun, FAR));
    let stale = draft_with(
        &def,
        changed.fingerprint().expect("fp"),
        "c5",
        args.clone(),
        Target::Nothing,
    );
    let refused = invoke(&addr, invocation(stale, cap, &authority)).await;
    // The shell refuses the stale draft before the capability is looked at.
    assert_eq!(code(&refused), "definition_changed");

    // A one-time capability is consumed by its first use.
    let once = authority.mint(grant(&def, TargetScope::NoTarget, Uses::Once, FAR));
    let first = invoke(
        &addr,
        invocation(
            draft(&def, "c6", args.clone(), Target::Nothing),
            once.clone(),
            &authority,
        ),
    )
    .await;
    assert!(first.is_success());
    let second = invoke(
        &addr,
        invocation(
            draft(&def, "c7", args.clone(), Target::Nothing),
            once,
            &authority,
        ),
    )
    .await;
    assert_eq!(code(&second), "capability_refused");

    // Bad arguments are refused before anything runs; limit errors keep their code.
    let cap = authority.mint(grant(&def, TargetScope::NoTarget, Uses::ForRun, FAR));
    let bad = invoke(
        &addr,
        invocation(
            draft(&def, "c8", json!({"code": 5}), Target::Nothing),
            cap.clone(),
            &authority,
        ),
    )
    .await;
    assert_eq!(code(&bad), "invalid_arguments");
    let big = invoke(
        &addr,
        invocation(
            draft(
                &def,
                "c9",
                json!({"code": "new ArrayBuffer(1 << 30)"}),
                Target::Nothing,
            ),
            cap,
            &authority,
        ),
    )
    .await;
    assert_eq!(code(&big), "js_memory_limit");
}

enum Ping {
    Ping { reply: Reply<u64> },
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn native_another_actor_keeps_answering_while_a_script_spins() {
    // One async worker thread: if the script ran on it, nothing else could.
    let executor: Arc<dyn Executor> = Arc::new(TokioExecutor::current());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let js = js_tool(executor.clone(), clock.clone(), 1_500)
        .spawn(None)
        .expect("spawn");
    let ping = spawn_actor(
        &*executor,
        "ping",
        8,
        None,
        |inbox: agent_kernel::Inbox<Ping>| async move {
            let mut count = 0u64;
            while let Ok(Ping::Ping { reply }) = inbox.recv().await {
                count += 1;
                reply.send(count);
            }
            Ok::<(), String>(())
        },
    );

    let def = javascript::definition();
    let authority = authority();
    let cap = authority.mint(grant(&def, TargetScope::NoTarget, Uses::ForRun, FAR));
    let spin = invocation(
        draft(
            &def,
            "spin",
            json!({"code": "while (true) {}"}),
            Target::Nothing,
        ),
        cap,
        &authority,
    );
    let started = Instant::now();
    let script = tokio::spawn({
        let js = js.clone();
        async move {
            let result = invoke(&js, spin).await;
            (result, started.elapsed())
        }
    });

    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut answered = 0;
    let mut slowest = Duration::ZERO;
    while started.elapsed() < Duration::from_millis(1_200) {
        let asked = Instant::now();
        let n = ping
            .ask(|reply| Ping::Ping { reply })
            .await
            .expect("ping answers");
        slowest = slowest.max(asked.elapsed());
        answered = n;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!script.is_finished(), "the script is still spinning");
    // A blocked executor would answer nothing until the script ends at 1.5 s.
    assert!(
        answered >= 10,
        "only {answered} pings answered while the script ran"
    );
    assert!(
        slowest < Duration::from_millis(250),
        "a ping took {slowest:?}"
    );

    let (result, took) = script.await.expect("script task");
    assert_eq!(code(&result), "js_time_limit");
    assert!(
        took >= Duration::from_millis(1_500) && took < Duration::from_millis(3_000),
        "{took:?}"
    );
}

#[test]
fn definition_declares_no_effects_and_no_target() {
    let def = javascript::definition();
    assert_eq!(def.name, "run_javascript");
    assert_eq!(def.origin, agent_capabilities::Origin::Builtin);
    assert!(def.effects.is_empty());
    assert_eq!(def.target, agent_kernel::protocol::TargetRule::None);
    assert!(def.fingerprint().is_ok());
    assert!(jsonschema::validator_for(&def.parameters).is_ok());
    let _ = monotonic_from;
}
