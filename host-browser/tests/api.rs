//! The embedder API in headless Chromium: configuration errors carry stable
//! codes, the memory fallback reports `durable: false`, a scripted run
//! completes and reads back (S1.1), and errors are JS `Error`s with `code`;
//! `alwaysOnPlugins` is wired by the assembly as natively (S5.2).
#![cfg(all(target_arch = "wasm32", feature = "runtime"))]

use std::time::Duration;

use agent_host_browser::api::AgentRuntime;
use agent_host_browser::platform;
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

use serde::Serialize;

fn code_of(err: &JsValue) -> String {
    assert!(err.is_instance_of::<js_sys::Error>(), "a JS Error: {err:?}");
    js_sys::Reflect::get(err, &"code".into())
        .ok()
        .and_then(|c| c.as_string())
        .unwrap_or_default()
}

async fn create(config: Value) -> Result<AgentRuntime, JsValue> {
    AgentRuntime::open(js(&config)).await
}

fn scripted(turns: Value) -> Value {
    json!({ "model": { "provider": "scripted", "scenario": { "turns": turns } } })
}

async fn start(rt: &AgentRuntime, session: &str, options: JsValue) -> String {
    JsFuture::from(rt.start_run(session.into(), "x".into(), options))
        .await
        .expect("started")
        .as_string()
        .expect("run id")
}

async fn read(rt: &AgentRuntime, run: &str) -> Value {
    rust(JsFuture::from(rt.read_run(run.into())).await.expect("read"))
}

/// The run's view once its status is `status` (or after 5 s, for the
/// caller's assertion to report).
async fn wait_for(rt: &AgentRuntime, run: &str, status: &str) -> Value {
    let mut view = Value::Null;
    for _ in 0..100 {
        view = read(rt, run).await;
        if view["run"]["status"] == json!(status) {
            break;
        }
        platform::sleep(Duration::from_millis(50)).await;
    }
    view
}

#[wasm_bindgen_test]
async fn bad_config_is_an_error_with_code_invalid_config() {
    for config in [
        json!({ "model": { "provider": "nope" } }),
        json!({ "storage": "floppy", "model": { "provider": "scripted", "scenario": { "turns": [{ "text": "x" }] } } }),
        json!({ "budget": "huge", "model": { "provider": "scripted", "scenario": { "turns": [{ "text": "x" }] } } }),
        json!({ "unknownField": 1 }),
        json!({}),
    ] {
        let err = create(config.clone()).await.err().expect("refused");
        assert_eq!(code_of(&err), "invalid_config", "{config}");
    }
}

#[wasm_bindgen_test]
async fn s1_1_memory_fallback_reports_not_durable_and_a_run_completes() {
    let mut config = scripted(json!([{ "text": "Hello from the script." }]));
    config["storage"] = json!("memory");
    let rt = create(config).await.expect("created");
    assert!(!rt.durable());
    let run = JsFuture::from(rt.start_run("s-mem".into(), "Hi".into(), JsValue::UNDEFINED))
        .await
        .expect("started")
        .as_string()
        .expect("run id");
    let mut status = String::new();
    for _ in 0..100 {
        let view = rust(
            JsFuture::from(rt.read_run(run.clone()))
                .await
                .expect("read"),
        );
        status = view["run"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if status == "completed" {
            assert_eq!(view["output"], json!("Hello from the script."));
            assert_eq!(view["run"]["stop_reason"]["reason"], json!("completed"));
            break;
        }
        platform::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "completed");
    let runs = rust(
        JsFuture::from(rt.list_runs(Some("s-mem".into())))
            .await
            .expect("list"),
    );
    assert_eq!(runs.as_array().map(Vec::len), Some(1));
    let none = rust(
        JsFuture::from(rt.list_runs(Some("other".into())))
            .await
            .expect("list"),
    );
    assert_eq!(none, json!([]));
}

#[wasm_bindgen_test]
async fn indexeddb_is_durable_and_bad_arguments_have_codes() {
    let mut config = scripted(json!([{ "text": "ok" }]));
    config["databaseName"] = json!(format!("api-{}", js_sys::Date::now() as u64));
    let rt = create(config).await.expect("created");
    assert!(rt.durable());
    assert_eq!(rt.lock_backend(), "web_locks");
    let err =
        JsFuture::from(rt.start_run("bad session/../".into(), "x".into(), JsValue::UNDEFINED))
            .await
            .expect_err("bad session id");
    assert_eq!(code_of(&err), "invalid_argument");
    let err = JsFuture::from(rt.read_run("run-does-not-exist".into()))
        .await
        .expect_err("unknown run");
    assert_eq!(code_of(&err), "not_found");
    let err = JsFuture::from(rt.resume("run-does-not-exist".into()))
        .await
        .expect_err("unknown run");
    assert_eq!(code_of(&err), "not_found");
    let err = JsFuture::from(rt.decide("r".into(), "c".into(), "maybe".into()))
        .await
        .expect_err("bad choice");
    assert_eq!(code_of(&err), "invalid_argument");
    let err = JsFuture::from(rt.start_run(
        "s".into(),
        "x".into(),
        js(&json!({ "budget": { "max_tool_rounds": 0 } })),
    ))
    .await
    .expect_err("bad budget");
    assert_eq!(code_of(&err), "invalid_config");
}

/// S5.6 through the embedder API: a Skill in the run options narrows the
/// run (a call outside it is refused and never journaled); a manifest that
/// holds a secret or an unknown field is `invalid_config`.
#[wasm_bindgen_test]
async fn s5_6_a_skill_in_run_options_narrows_the_run() {
    let mut config = scripted(json!([
        { "text": "w", "tool_calls": [{ "name": "workspace_write", "arguments": { "path": "a.txt", "content": "hi" } }] },
        { "text": "done" }
    ]));
    config["storage"] = json!("memory");
    let rt = create(config).await.expect("created");
    for manifest in [
        json!({ "name": "s", "description": "d", "instructions": "token sk-abcdefghijklmnopqrstuvwxyz0123456789", "allowed_tools": [] }),
        json!({ "name": "s", "description": "d", "instructions": "i", "allowed_tools": [], "grant": ["*"] }),
    ] {
        let err = JsFuture::from(rt.start_run(
            "s-skill".into(),
            "x".into(),
            js(&json!({ "skill": manifest })),
        ))
        .await
        .expect_err("refused manifest");
        assert_eq!(code_of(&err), "invalid_config", "{manifest}");
    }
    let skill = json!({ "name": "reader", "description": "reads", "instructions": "Only read.", "allowed_tools": ["workspace_read"] });
    let run = start(&rt, "s-skill", js(&json!({ "skill": skill }))).await;
    let view = wait_for(&rt, &run, "completed").await;
    assert_eq!(view["run"]["status"], json!("completed"), "{view}");
    assert_eq!(
        view["journal"],
        json!([]),
        "the write outside the Skill never ran: {view}"
    );
    // The same scenario without the Skill writes.
    let run = start(&rt, "s-no-skill", JsValue::UNDEFINED).await;
    let view = wait_for(&rt, &run, "completed").await;
    assert_eq!(
        view["journal"][0]["tool"],
        json!("workspace_write"),
        "{view}"
    );
    assert_eq!(view["journal"][0]["state"], json!("committed"), "{view}");
}

/// S2.5 + S3: a tab that takes over a session another tab left without its
/// pagehide writes (here: the first runtime closes with its run `running`)
/// recovers that run when it takes the session, not only at the next page
/// load; the run then offers resume.
#[wasm_bindgen_test]
async fn s2_5_taking_over_a_session_recovers_the_run_left_running() {
    let mut config = scripted(json!([{ "text": "slow", "delay_ms": 60000 }]));
    config["databaseName"] = json!(format!("takeover-{}", js_sys::Date::now() as u64));
    let first = create(config.clone()).await.expect("first tab");
    // The second tab opens while the first holds the session: its page-load
    // recovery must leave the first tab's run alone.
    let second = create(config).await.expect("second tab");
    let run = start(&first, "s-takeover", JsValue::UNDEFINED).await;
    let view = read(&second, &run).await;
    assert_eq!(view["run"]["status"], json!("running"));
    assert!(second.recovered_runs().is_empty());

    // The first tab goes away without interrupting its run.
    first.close();
    // The second tab takes the session with a run of its own.
    start(&second, "s-takeover", JsValue::UNDEFINED).await;
    let view = read(&second, &run).await;
    assert_eq!(view["run"]["status"], json!("interrupted"), "{view}");
    assert_eq!(
        view["run"]["stop_reason"]["reason"],
        json!("page_interrupted")
    );
    assert_eq!(second.recovered_runs(), vec![run]);
}

/// `respond`, retried while the session's Web Lock from the settle just
/// before is still being released (`session_busy` for a moment: the lock is
/// let go asynchronously); any other outcome is returned.
async fn respond(rt: &AgentRuntime, run: &str, request: &str, text: &str) -> Result<(), String> {
    for _ in 0..100 {
        match JsFuture::from(rt.respond(run.into(), request.into(), text.into())).await {
            Ok(_) => return Ok(()),
            Err(e) if code_of(&e) == "session_busy" => {
                platform::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(code_of(&e)),
        }
    }
    Err("session_busy".into())
}

/// `respond` checks the answer against the question's answer schema: a
/// mismatch is `invalid_answer` and the run keeps waiting; `readRun` shows
/// the resolved schema and a question's choices; a fitting answer continues.
#[wasm_bindgen_test]
async fn s5_1_respond_checks_the_answer_against_the_schema_and_choices() {
    let mut config = scripted(json!([
        { "text": "how many?", "tool_calls": [{ "name": "ask_user", "arguments": {
            "question": "How many guests?",
            "answer_schema": { "type": "integer", "minimum": 1 } } }] },
        { "text": "where?", "tool_calls": [{ "name": "ask_user", "arguments": {
            "question": "Which region?", "choices": ["EU", "US"] } }] },
        { "text": "booked" }
    ]));
    config["storage"] = json!("memory");
    let rt = create(config).await.expect("created");
    let run = start(&rt, "s-ask", JsValue::UNDEFINED).await;

    let view = wait_for(&rt, &run, "awaiting_input").await;
    let kind = &view["pending"][0]["kind"];
    assert_eq!(kind["question_text"], json!("How many guests?"), "{view}");
    assert_eq!(
        kind["answer_schema"],
        json!({ "type": "integer", "minimum": 1 })
    );
    let request = view["pending"][0]["id"].as_str().expect("id").to_owned();
    for bad in ["0", "many"] {
        assert_eq!(
            respond(&rt, &run, &request, bad).await,
            Err("invalid_answer".into()),
            "{bad}"
        );
    }
    assert_eq!(
        read(&rt, &run).await["run"]["status"],
        json!("awaiting_input")
    );
    respond(&rt, &run, &request, "4")
        .await
        .expect("a fitting answer");

    let mut view = Value::Null;
    for _ in 0..100 {
        view = wait_for(&rt, &run, "awaiting_input").await;
        if view["pending"][0]["id"] != json!(request) {
            break;
        }
        platform::sleep(Duration::from_millis(50)).await;
    }
    let kind = &view["pending"][0]["kind"];
    assert_eq!(kind["choices"], json!(["EU", "US"]), "{view}");
    let second = view["pending"][0]["id"].as_str().expect("id").to_owned();
    assert_eq!(
        respond(&rt, &run, &second, "Mars").await,
        Err("invalid_answer".into())
    );
    respond(&rt, &run, &second, "EU").await.expect("a choice");
    let view = wait_for(&rt, &run, "completed").await;
    assert_eq!(view["output"], json!("booked"), "{view}");
}

/// A plugin with one function, `file_ticket`, on a port nothing listens on.
fn tickets_plugin() -> Value {
    json!({
        "id": "tickets",
        "base_url": "http://127.0.0.1:9",
        "functions": [{
            "name": "file_ticket",
            "description": "File a ticket.",
            "method": "POST",
            "path": "/tickets",
            "parameters": { "type": "object", "properties": { "title": { "type": "string" } },
                            "required": ["title"], "additionalProperties": false },
            "effects": ["write_external"],
            "idempotency": "non_idempotent"
        }]
    })
}

/// The view of a run whose first model turn calls `file_ticket` without
/// `load_tools`, once the run is no longer `running`.
async fn call_plugin_first(always_on: Value) -> Result<Value, JsValue> {
    let mut config = scripted(json!([
        { "tool_calls": [{ "name": "file_ticket", "arguments": { "title": "x" } }] },
        { "text": "Done." }
    ]));
    config["storage"] = json!("memory");
    config["plugins"] = json!([tickets_plugin()]);
    config["alwaysOnPlugins"] = always_on;
    let rt = create(config).await?;
    let run = start(&rt, "s-always-on", JsValue::UNDEFINED).await;
    let mut view = Value::Null;
    for _ in 0..100 {
        view = read(&rt, &run).await;
        if view["run"]["status"] != json!("running") {
            break;
        }
        platform::sleep(Duration::from_millis(50)).await;
    }
    Ok(view)
}

/// S5.2 through the assembly, as natively: a plugin named in
/// `alwaysOnPlugins` is offered from the first request, so its function,
/// called without `load_tools`, is resolved and journaled; the same plugin
/// not always on is refused before it is journaled (`tool_not_loaded`); an
/// always-on id that names no plugin is refused with `invalid_config`.
#[wasm_bindgen_test]
async fn s5_2_always_on_plugins_are_offered_without_load_tools() {
    let refused_call = |view: &Value| {
        view["activities"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| {
                a["kind"]["kind"] == json!("tool_call")
                    && a["kind"]["tool"] == json!("file_ticket")
                    && a["kind"]["state"] == json!("failed")
            })
    };
    let discoverable = call_plugin_first(json!([])).await.expect("created");
    assert_eq!(
        discoverable["run"]["status"],
        json!("completed"),
        "{discoverable}"
    );
    assert!(refused_call(&discoverable), "{discoverable}");
    assert_eq!(discoverable["journal"], json!([]), "{discoverable}");

    let always_on = call_plugin_first(json!(["tickets"]))
        .await
        .expect("created");
    assert_ne!(always_on["run"]["status"], json!("running"), "{always_on}");
    assert_eq!(
        always_on["journal"][0]["tool"],
        json!("file_ticket"),
        "{always_on}"
    );

    let err = call_plugin_first(json!(["ghost"]))
        .await
        .expect_err("refused");
    assert_eq!(code_of(&err), "invalid_config");
    let message = js_sys::Reflect::get(&err, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_default();
    assert!(message.contains("ghost"), "{message}");
}

/// S2.5 (issue 17 item 4): a page that is frozen (`freeze` on the
/// document) while a run is working interrupts the run: `page_interrupted`
/// with an `executor_lost` activity; Resume continues it to the end.
#[wasm_bindgen_test]
async fn s2_5_a_frozen_page_interrupts_its_run_and_resume_continues() {
    let mut config = scripted(json!([{ "text": "slow answer", "delay_ms": 1500 }]));
    config["databaseName"] = json!(format!("freeze-{}", js_sys::Date::now() as u64));
    let rt = create(config).await.expect("runtime");
    let run = start(&rt, "s-freeze", JsValue::UNDEFINED).await;
    platform::sleep(Duration::from_millis(100)).await;
    let document = web_sys::window()
        .and_then(|w| w.document())
        .expect("a document");
    document
        .dispatch_event(&web_sys::Event::new("freeze").expect("event"))
        .expect("dispatch");
    let view = wait_for(&rt, &run, "interrupted").await;
    assert_eq!(view["run"]["status"], json!("interrupted"), "{view}");
    assert_eq!(
        view["run"]["stop_reason"]["reason"],
        json!("page_interrupted"),
        "{view}"
    );
    let lost: Vec<&Value> = view["activities"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["kind"]["kind"] == json!("executor_lost"))
        .collect();
    assert_eq!(lost.len(), 1, "{view}");
    assert_eq!(lost[0]["kind"]["executor"], json!("host"));
    // The session's Web Lock may be let go a moment after the interruption.
    let mut resumed = Err(JsValue::NULL);
    for _ in 0..100 {
        resumed = JsFuture::from(rt.resume(run.clone())).await;
        match &resumed {
            Err(e) if code_of(e) == "session_busy" => {
                platform::sleep(Duration::from_millis(50)).await;
            }
            _ => break,
        }
    }
    resumed.expect("resume");
    let view = wait_for(&rt, &run, "completed").await;
    assert_eq!(view["run"]["status"], json!("completed"), "{view}");
}
