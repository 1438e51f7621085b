//! `startRun`'s options in headless Chromium (issue 14): a budget preset
//! combined with hard caps keeps the preset's other limits and each limit
//! holds at, below and above a scripted run's use (S4.3, S4.4); a bad
//! `history`, `mode`, `system` or `contextWindowTokens` is refused with a
//! stable code and starts nothing (S12).
#![cfg(all(target_arch = "wasm32", feature = "runtime"))]

use std::time::Duration;

use agent_host_browser::api::AgentRuntime;
use agent_host_browser::platform;
use serde::Serialize;
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn js(value: &Value) -> JsValue {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .expect("to js")
}

fn rust(value: JsValue) -> Value {
    serde_wasm_bindgen::from_value(value).expect("from js")
}

fn code_of(err: &JsValue) -> String {
    assert!(err.is_instance_of::<js_sys::Error>(), "a JS Error: {err:?}");
    js_sys::Reflect::get(err, &"code".into())
        .ok()
        .and_then(|c| c.as_string())
        .unwrap_or_default()
}

/// Rounds of the scenario that call tools, calls in each, and tokens each
/// model answer reports.
const ROUNDS: u64 = 3;
const CALLS_PER_ROUND: u64 = 2;
const TOKENS_PER_ANSWER: u64 = 100;

/// `ROUNDS` rounds of `CALLS_PER_ROUND` `update_plan` calls, then an answer;
/// every answer reports `TOKENS_PER_ANSWER` tokens.
fn rounds_scenario() -> Value {
    let usage = json!({ "input_tokens": TOKENS_PER_ANSWER, "output_tokens": 0 });
    let plan = json!({ "steps": [{ "title": "Count", "status": "in_progress" }] });
    let mut turns: Vec<Value> = (0..ROUNDS)
        .map(|_| {
            json!({
                "tool_calls": vec![json!({ "name": "update_plan", "arguments": plan }); CALLS_PER_ROUND as usize],
                "usage": usage,
            })
        })
        .collect();
    turns.push(json!({ "text": "done", "usage": usage }));
    json!({ "turns": turns })
}

async fn runtime(scenario: Value) -> AgentRuntime {
    AgentRuntime::open(js(&json!({
        "storage": "memory",
        "model": { "provider": "scripted", "scenario": scenario },
    })))
    .await
    .expect("created")
}

/// The run's view once it is no longer `running` (or after 10 s).
async fn settled(rt: &AgentRuntime, run: &str) -> Value {
    let mut view = Value::Null;
    for _ in 0..200 {
        view = rust(JsFuture::from(rt.read_run(run.into())).await.expect("read"));
        if view["run"]["status"] != json!("running") {
            break;
        }
        platform::sleep(Duration::from_millis(50)).await;
    }
    view
}

async fn run_with(rt: &AgentRuntime, session: &str, options: Value) -> Value {
    let run = JsFuture::from(rt.start_run(session.into(), "count".into(), js(&options)))
        .await
        .expect("started")
        .as_string()
        .expect("run id");
    settled(rt, &run).await
}

/// How the run ended: "completed", or the budget dimension that ran out.
fn ending(view: &Value) -> String {
    match view["run"]["stop_reason"]["reason"].as_str() {
        Some("completed") => "completed".into(),
        Some("budget_exhausted") => view["run"]["stop_reason"]["dimension"]
            .as_str()
            .unwrap_or("?")
            .to_owned(),
        _ => format!("unexpected: {view}"),
    }
}

/// Issue 14 item 5, S4.3 + S4.4: `{ preset: "light", <cap>: n }` through
/// the page API keeps light's other limits, and each cap is tested at,
/// below and above what the scripted run needs: rounds and calls are
/// checked before a new round or call (a run that needs exactly the cap
/// completes, one less runs out), tokens before each model round and
/// dispatch (a run stops once its tokens reach the cap).
#[wasm_bindgen_test]
async fn s4_4_a_preset_with_caps_holds_each_limit_at_below_and_above() {
    let rt = runtime(rounds_scenario()).await;
    let light_calls = 30;
    let light_duration_ms = 10 * 60_000;

    for (cap, expected) in [
        (ROUNDS, "completed"),
        (ROUNDS - 1, "tool_rounds"),
        (ROUNDS + 1, "completed"),
    ] {
        let view = run_with(
            &rt,
            &format!("rounds-{cap}"),
            json!({ "budget": { "preset": "light", "max_tool_rounds": cap } }),
        )
        .await;
        assert_eq!(ending(&view), expected, "max_tool_rounds {cap}: {view}");
        let budget = &view["run"]["budget"];
        assert_eq!(budget["max_tool_rounds"], json!(cap));
        assert_eq!(budget["max_tool_calls"], json!(light_calls), "{budget}");
        assert_eq!(
            budget["max_duration_ms"],
            json!(light_duration_ms),
            "{budget}"
        );
    }

    let calls = ROUNDS * CALLS_PER_ROUND;
    for (cap, expected) in [
        (calls, "completed"),
        (calls - 1, "tool_calls"),
        (calls + 1, "completed"),
    ] {
        let view = run_with(
            &rt,
            &format!("calls-{cap}"),
            json!({ "budget": { "preset": "light", "max_tool_calls": cap } }),
        )
        .await;
        assert_eq!(ending(&view), expected, "max_tool_calls {cap}: {view}");
        assert_eq!(view["run"]["budget"]["max_tool_rounds"], json!(8));
        assert_eq!(
            view["run"]["usage"]["tool_calls"]
                .as_u64()
                .map(|c| c <= cap),
            Some(true)
        );
    }

    // Before the final answer the run has used ROUNDS answers' tokens.
    let before_answer = ROUNDS * TOKENS_PER_ANSWER;
    for (cap, expected) in [
        (before_answer, "tokens"),
        (before_answer - 1, "tokens"),
        (before_answer + 1, "completed"),
    ] {
        let view = run_with(
            &rt,
            &format!("tokens-{cap}"),
            json!({ "budget": { "preset": "light", "max_tokens": cap } }),
        )
        .await;
        assert_eq!(ending(&view), expected, "max_tokens {cap}: {view}");
        let budget = &view["run"]["budget"];
        assert_eq!(budget["max_tokens"], json!(cap));
        assert_eq!(budget["max_tool_rounds"], json!(8), "{budget}");
        assert_eq!(budget["max_tool_calls"], json!(light_calls), "{budget}");
    }

    // A bare preset name is the preset; a bad preset or cap starts nothing.
    let view = run_with(&rt, "preset-only", json!({ "budget": "light" })).await;
    assert_eq!(ending(&view), "completed", "{view}");
    assert_eq!(view["run"]["budget"]["max_tool_rounds"], json!(8));
    for bad in [
        json!("huge"),
        json!({ "preset": "huge", "max_tokens": 10 }),
        json!({ "preset": "light", "max_tokens": 0 }),
        json!({ "preset": "light", "max_tokenz": 10 }),
    ] {
        let err = JsFuture::from(rt.start_run(
            "bad-budget".into(),
            "x".into(),
            js(&json!({ "budget": bad })),
        ))
        .await
        .expect_err("refused");
        assert_eq!(code_of(&err), "invalid_config", "{bad}");
    }
    let none = rust(
        JsFuture::from(rt.list_runs(Some("bad-budget".into())))
            .await
            .expect("list"),
    );
    assert_eq!(none, json!([]));
}

/// The duration cap of a preset (active time): a run whose first answer
/// takes 400 ms runs out under a 100 ms cap and completes under light's
/// ten minutes. (At exactly the cap is a kernel unit test: a real clock
/// cannot land on it.)
#[wasm_bindgen_test]
async fn s4_4_a_preset_with_a_duration_cap_runs_out_below_it() {
    let rt = runtime(json!({ "turns": [
        { "tool_calls": [{ "name": "update_plan", "arguments": { "steps": [{ "title": "a", "status": "pending" }] } }], "delay_ms": 400 },
        { "text": "done" }
    ] }))
    .await;
    let view = run_with(
        &rt,
        "duration-short",
        json!({ "budget": { "preset": "light", "max_duration_ms": 100 } }),
    )
    .await;
    assert_eq!(ending(&view), "duration", "{view}");
    assert_eq!(view["run"]["budget"]["max_tool_rounds"], json!(8));
    let view = run_with(&rt, "duration-light", json!({ "budget": "light" })).await;
    assert_eq!(ending(&view), "completed", "{view}");
}

/// S12: an embedder's `history` is checked by the supervisor's rule before
/// anything starts: a role other than user or assistant, an unknown field,
/// an empty message, more than 256 messages or more than 512 KiB are
/// `invalid_argument`; a bad `mode` likewise; a too long `system` or
/// `systemExtension`, or a context window under 1024 tokens, are
/// `invalid_config`. None of them starts a run. Good values start one.
#[wasm_bindgen_test]
async fn s12_bad_history_mode_system_and_context_window_start_nothing() {
    let rt = runtime(json!({ "turns": [{ "text": "ok" }] })).await;
    let message = |role: &str, content: &str| json!({ "role": role, "content": content });
    let many: Vec<Value> = (0..257).map(|_| message("user", "hi")).collect();
    let big = "x".repeat(256 * 1024);
    let refused = [
        (
            json!({ "history": [message("system", "obey")] }),
            "invalid_argument",
        ),
        (
            json!({ "history": [message("tool", "{}")] }),
            "invalid_argument",
        ),
        (
            json!({ "history": [{ "role": "user", "content": "a", "name": "x" }] }),
            "invalid_argument",
        ),
        (
            json!({ "history": [message("user", "  ")] }),
            "invalid_argument",
        ),
        (json!({ "history": "hello" }), "invalid_argument"),
        (json!({ "history": many }), "invalid_argument"),
        (
            json!({ "history": [message("user", &big), message("assistant", &big), message("user", "x")] }),
            "invalid_argument",
        ),
        (json!({ "mode": "research" }), "invalid_argument"),
        (json!({ "mode": "wizard" }), "invalid_argument"),
        (
            json!({ "system": "s".repeat(64 * 1024 + 1) }),
            "invalid_config",
        ),
        (
            json!({ "systemExtension": "s".repeat(64 * 1024 + 1) }),
            "invalid_config",
        ),
        (json!({ "contextWindowTokens": 10 }), "invalid_config"),
        (json!({ "contextWindow": 4096 }), "invalid_config"),
    ];
    for (options, code) in refused {
        let shown = options.to_string();
        let shown = &shown[..shown.len().min(200)];
        let Err(err) =
            JsFuture::from(rt.start_run("s-refused".into(), "x".into(), js(&options))).await
        else {
            panic!("accepted: {shown}");
        };
        assert_eq!(code_of(&err), code, "{shown}");
    }
    let none = rust(
        JsFuture::from(rt.list_runs(Some("s-refused".into())))
            .await
            .expect("list"),
    );
    assert_eq!(none, json!([]), "a refused option started nothing");

    // At the bounds: 256 messages, 64 KiB of system prompt, 1024 tokens.
    let at_bound: Vec<Value> = (0..256)
        .map(|i| message(if i % 2 == 0 { "user" } else { "assistant" }, "hi"))
        .collect();
    let view = run_with(
        &rt,
        "s-accepted",
        json!({
            "mode": "agent",
            "history": at_bound,
            "system": "s".repeat(64 * 1024),
            "systemExtension": "Answer briefly.",
            "contextWindowTokens": 1024,
            // An option given as null (or undefined) is not given.
            "skill": null,
        }),
    )
    .await;
    assert_eq!(ending(&view), "completed", "{view}");
}

/// S13.1, S9.1 (issue 15 item 2): a model that does not call tools cannot
/// start an Agent run from the page (`invalid_config`, nothing started) and
/// can chat.
#[wasm_bindgen_test]
async fn s13_1_a_model_without_tools_chats_but_cannot_run_an_agent() {
    let rt = runtime(json!({
        "turns": [{ "text": "Hello." }],
        "capabilities": { "tool_calling": false },
    }))
    .await;
    let refused =
        JsFuture::from(rt.start_run("no-tools".into(), "do things".into(), js(&json!({}))))
            .await
            .expect_err("an Agent run is refused");
    assert_eq!(code_of(&refused), "invalid_config");
    let message = js_sys::Reflect::get(&refused, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_default();
    assert!(message.contains("does not call tools"), "{message}");
    let runs = rust(
        JsFuture::from(rt.list_runs(Some("no-tools".into())))
            .await
            .expect("listed"),
    );
    assert_eq!(runs, json!([]), "nothing was started");
    let view = run_with(&rt, "no-tools", json!({ "mode": "chat" })).await;
    assert_eq!(view["run"]["status"], "completed", "{view}");
    assert_eq!(view["output"], "Hello.");
}

/// S13.3: a run chooses a provider by the name `models` gave it; the run
/// keeps only the name. An unknown name starts nothing, and a malformed
/// name refuses the runtime.
#[wasm_bindgen_test]
async fn s13_3_a_run_chooses_a_named_provider_and_an_unknown_name_starts_nothing() {
    let rt = AgentRuntime::open(js(&json!({
        "storage": "memory",
        "model": { "provider": "scripted", "scenario": { "turns": [{ "text": "from the default" }] } },
        "models": {
            "second": { "provider": "scripted", "scenario": { "turns": [{ "text": "from the second" }] } },
        },
    })))
    .await
    .expect("created");
    let view = run_with(&rt, "named", json!({ "model": { "provider": "second" } })).await;
    assert_eq!(view["run"]["status"], "completed", "{view}");
    assert_eq!(view["output"], "from the second");
    let view = run_with(&rt, "named", json!({})).await;
    assert_eq!(view["output"], "from the default", "{view}");

    let refused = JsFuture::from(rt.start_run(
        "unknown".into(),
        "hi".into(),
        js(&json!({ "model": { "provider": "third" } })),
    ))
    .await
    .expect_err("an unknown provider is refused");
    assert_eq!(code_of(&refused), "invalid_config");
    // Named with a model of its own: the supervisor's check, same code.
    let refused = JsFuture::from(rt.start_run(
        "unknown".into(),
        "hi".into(),
        js(&json!({ "model": { "provider": "third", "model": "m" } })),
    ))
    .await
    .expect_err("an unknown provider is refused");
    assert_eq!(code_of(&refused), "invalid_config");
    let runs = rust(
        JsFuture::from(rt.list_runs(Some("unknown".into())))
            .await
            .expect("listed"),
    );
    assert_eq!(runs, json!([]), "nothing was started");

    let bad = AgentRuntime::open(js(&json!({
        "storage": "memory",
        "model": { "provider": "scripted", "scenario": { "turns": [{ "text": "x" }] } },
        "models": { "not a name": { "provider": "scripted", "scenario": { "turns": [{ "text": "x" }] } } },
    })))
    .await;
    assert_eq!(code_of(&bad.err().expect("refused")), "invalid_config");
}

/// Issue 16 item 6: a page's `mcpServers` are checked when the runtime is
/// created (a page cannot start a process; `via_gateway` needs a gateway;
/// the configuration's own rules), and a server that cannot be reached is
/// reported by `mcpServers()` while the runtime works.
#[wasm_bindgen_test]
async fn mcp_servers_are_checked_at_create_and_an_unreachable_one_is_reported() {
    let scripted = json!({ "provider": "scripted", "scenario": { "turns": [{ "text": "x" }] } });
    for (servers, why) in [
        (
            json!([{ "id": "local", "command": "node", "args": ["server.js"] }]),
            "a process",
        ),
        (
            json!([{ "id": "far", "url": "https://mcp.example/mcp", "via_gateway": true }]),
            "no gateway",
        ),
        (
            json!([{ "id": "far", "url": "https://mcp.example/mcp", "via_gateway": "yes" }]),
            "not a boolean",
        ),
        (
            json!([{ "id": "mcp", "url": "https://mcp.example/mcp" }]),
            "a reserved id",
        ),
        (
            json!([{ "id": "far", "url": "https://mcp.example/mcp", "headers": { "Authorization": "Bearer literal" } }]),
            "a literal credential",
        ),
        (json!(["not an object"]), "not an object"),
    ] {
        let created = AgentRuntime::open(js(&json!({
            "storage": "memory", "model": scripted, "mcpServers": servers,
        })))
        .await;
        let err = created.err().unwrap_or_else(|| panic!("{why}: accepted"));
        assert_eq!(code_of(&err), "invalid_config", "{why}");
    }
    let rt = AgentRuntime::open(js(&json!({
        "storage": "memory", "model": scripted,
        "mcpServers": [{ "id": "down", "url": "http://127.0.0.1:9/mcp", "timeout_ms": 2000 }],
    })))
    .await
    .expect("created although its MCP server is down");
    let statuses = rust(rt.mcp_servers().expect("statuses"));
    assert_eq!(statuses[0]["id"], "down");
    assert_eq!(statuses[0]["connected"], false, "{statuses}");
    assert!(
        statuses[0]["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{statuses}"
    );
    let view = run_with(&rt, "mcp-down", json!({})).await;
    assert_eq!(view["run"]["status"], "completed", "{view}");
}
