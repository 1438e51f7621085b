//! Subscriptions live until closed (issue 12, item 7), in headless Chromium
//! started with `--js-flags=--expose-gc` (webdriver.json): a page that calls
//! `rt.subscribe(session, callback)` and drops the returned handle, as the
//! README shows, still receives every event of a 200-round run while the
//! page's garbage collector runs again and again and collects that handle;
//! `close()` ends delivery and leaves no entry behind; closing the runtime
//! ends every subscription.
//!
//! Everything goes through the JS objects a page holds (the `AgentRuntime`
//! wrapper that `AgentRuntime.create` resolves with, and the `Subscription`
//! wrappers `subscribe` returns), because only those are collected and
//! finalized by the page.
#![cfg(all(target_arch = "wasm32", feature = "runtime"))]

use std::cell::{Cell, RefCell};
use std::rc::Rc;
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

/// The page's `gc()`. Without it these tests would prove nothing, so its
/// absence fails them.
fn page_gc() -> js_sys::Function {
    let gc = js_sys::Reflect::get(&js_sys::global(), &"gc".into()).unwrap_or(JsValue::UNDEFINED);
    assert_eq!(
        gc.js_typeof().as_string().as_deref(),
        Some("function"),
        "typeof gc === 'function' only when Chromium runs with --js-flags=--expose-gc \
         (webdriver.json or WASM_BINDGEN_TEST_WEBDRIVER_JSON)"
    );
    gc.unchecked_into()
}

/// A JS function of `params` with `body`.
fn js_fn(params: &str, body: &str) -> js_sys::Function {
    js_sys::Function::new_with_args(params, body)
}

/// The page's view of a runtime: the JS `AgentRuntime` object.
async fn create(config: &Value) -> JsValue {
    JsFuture::from(AgentRuntime::create(js(config)))
        .await
        .expect("created")
}

/// `rt[name](...args)` on the JS object.
fn call(rt: &JsValue, name: &str, args: &[JsValue]) -> Result<JsValue, JsValue> {
    let method: js_sys::Function = js_sys::Reflect::get(rt, &name.into())
        .expect("method")
        .dyn_into()
        .unwrap_or_else(|_| panic!("AgentRuntime has no method {name}"));
    let list = js_sys::Array::new();
    for a in args {
        list.push(a);
    }
    method.apply(rt, &list)
}

async fn call_async(rt: &JsValue, name: &str, args: &[JsValue]) -> Result<JsValue, JsValue> {
    let promise: js_sys::Promise = call(rt, name, args)?.dyn_into().expect("a promise");
    JsFuture::from(promise).await
}

/// `rt.liveSubscriptions`: subscriptions opened and not yet ended.
fn live_subscriptions(rt: &JsValue) -> f64 {
    js_sys::Reflect::get(rt, &"liveSubscriptions".into())
        .ok()
        .and_then(|v| v.as_f64())
        .expect("AgentRuntime.liveSubscriptions is a number")
}

/// Wait until `done()` (checking every 50 ms, at most `limit`); returns `done()`.
async fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let rounds = limit.as_millis() / 50;
    for _ in 0..rounds {
        if done() {
            return true;
        }
        platform::sleep(Duration::from_millis(50)).await;
    }
    done()
}

async fn read_run(rt: &JsValue, run: &str) -> Value {
    rust(
        call_async(rt, "readRun", &[run.into()])
            .await
            .expect("readRun"),
    )
}

/// The events a callback received, and the callback itself (kept alive by
/// the caller for as long as the page may call it).
struct Collector {
    events: Rc<RefCell<Vec<Value>>>,
    callback: Closure<dyn FnMut(JsValue)>,
}

impl Collector {
    fn new() -> Collector {
        let events = Rc::new(RefCell::new(Vec::new()));
        let sink = events.clone();
        let callback = Closure::<dyn FnMut(JsValue)>::new(move |event: JsValue| {
            sink.borrow_mut().push(rust(event));
        });
        Collector { events, callback }
    }

    fn function(&self) -> &JsValue {
        self.callback.as_ref()
    }

    fn count(&self) -> usize {
        self.events.borrow().len()
    }

    /// Whether a `run` event reported `run` with `status`.
    fn saw_run_status(&self, run: &str, status: &str) -> bool {
        self.events.borrow().iter().any(|e| {
            e["type"] == json!("run")
                && e["run"]["id"] == json!(run)
                && e["run"]["status"] == json!(status)
        })
    }

    fn saw_type(&self, kind: &str) -> bool {
        self.of_type(kind) > 0
    }

    fn of_type(&self, kind: &str) -> usize {
        self.events
            .borrow()
            .iter()
            .filter(|e| e["type"] == json!(kind))
            .count()
    }
}

/// A scripted model that lists the workspace `rounds` times, one call per
/// round, then answers `final_text`; a budget that allows all the rounds.
fn rounds_config(rounds: usize, final_text: &str) -> Value {
    let mut turns: Vec<Value> = (0..rounds)
        .map(|_| json!({ "tool_calls": [{ "name": "workspace_list", "arguments": {} }] }))
        .collect();
    turns.push(json!({ "text": final_text }));
    json!({
        "model": { "provider": "scripted", "scenario": { "turns": turns } },
        "budget": { "max_tool_rounds": 1000, "max_tool_calls": 1000 },
    })
}

/// The case: `rt.subscribe(session, callback)` with the handle
/// dropped at once, a 200-round run, `gc()` every 20 ms throughout. The
/// handle is collected (a FinalizationRegistry of the test's own says so),
/// and yet every activity, the streamed text and the final `run` event
/// (status `completed`) arrive, identical to what the run stored.
#[wasm_bindgen_test]
async fn a_subscription_whose_handle_is_collected_delivers_every_event_of_a_200_round_run() {
    let gc = page_gc();
    const ROUNDS: usize = 200;
    const FINAL: &str = "All 200 rounds done.";
    let mut config = rounds_config(ROUNDS, FINAL);
    config["databaseName"] = json!(format!("subscribe-gc-{}", js_sys::Date::now() as u64));
    let rt = create(&config).await;

    let received = Collector::new();
    let handle_collected = Rc::new(Cell::new(false));
    let on_collected = {
        let flag = handle_collected.clone();
        Closure::<dyn FnMut(JsValue)>::new(move |_held: JsValue| flag.set(true))
    };
    // As the README shows it: the page does not keep the returned handle.
    // The test's own FinalizationRegistry (kept below) reports when the
    // page's garbage collector has collected that handle.
    let watch = js_fn(
        "rt, session, callback, onCollected",
        "const watch = new FinalizationRegistry(onCollected);
         watch.register(rt.subscribe(session, callback), 'subscription');
         return watch;",
    )
    .call4(
        &JsValue::UNDEFINED,
        &rt,
        &"s-gc".into(),
        received.function(),
        on_collected.as_ref(),
    )
    .expect("subscribe");

    // Collect garbage every 20 ms until the run and its events are through.
    let pumping = Rc::new(Cell::new(true));
    let gc_calls = Rc::new(Cell::new(0u32));
    {
        let (pumping, gc_calls) = (pumping.clone(), gc_calls.clone());
        wasm_bindgen_futures::spawn_local(async move {
            while pumping.get() {
                gc.call0(&JsValue::UNDEFINED).expect("gc()");
                gc_calls.set(gc_calls.get() + 1);
                // Finalizers run in a task of their own: yield to the page.
                platform::sleep(Duration::from_millis(20)).await;
            }
        });
    }

    let run = call_async(&rt, "startRun", &["s-gc".into(), "go".into()])
        .await
        .expect("startRun")
        .as_string()
        .expect("run id");
    // Generous: 200 rounds on a loaded two-core machine.
    let mut view = Value::Null;
    for _ in 0..3_000 {
        view = read_run(&rt, &run).await;
        if view["run"]["status"] != json!("running") {
            break;
        }
        platform::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        view["run"]["status"],
        json!("completed"),
        "the stored run: {}",
        view["run"]
    );
    assert_eq!(view["run"]["usage"]["tool_rounds"], json!(ROUNDS));
    let gc_calls_during_run = gc_calls.get();
    let stored_count = view["activities"].as_array().map_or(0, Vec::len);
    // Delivery may trail the stored run: wait for all of it.
    let delivered = eventually(Duration::from_secs(60), || {
        received.of_type("activity") >= stored_count
            && received.saw_run_status(&run, "completed")
            && handle_collected.get()
    })
    .await;
    pumping.set(false);
    drop(watch);

    assert!(
        gc_calls_during_run >= 10,
        "gc() ran {gc_calls_during_run} times during the run"
    );
    assert!(
        handle_collected.get(),
        "the dropped Subscription handle was never collected: this test proves nothing"
    );
    let events = received.events.borrow().clone();
    let activities: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == json!("activity"))
        .map(|e| {
            assert_eq!(e["runId"], json!(run));
            &e["activity"]
        })
        .collect();
    let stored: Vec<&Value> = view["activities"]
        .as_array()
        .expect("activities")
        .iter()
        .collect();
    assert!(
        delivered,
        "not every event arrived: {} of {} activities delivered, {} events in all",
        activities.len(),
        stored.len(),
        events.len()
    );
    assert_eq!(
        activities.len(),
        stored.len(),
        "every activity was delivered"
    );
    assert_eq!(activities, stored, "as stored, in order");
    console_log!(
        "{ROUNDS} rounds: gc() called {gc_calls_during_run} times during the run, handle collected, \
         {} activities and {} events delivered",
        activities.len(),
        events.len()
    );
    let last_run_event = events
        .iter()
        .rev()
        .find(|e| e["type"] == json!("run"))
        .expect("run events");
    assert_eq!(last_run_event["run"]["status"], json!("completed"));
    assert_eq!(last_run_event["run"]["usage"]["tool_rounds"], json!(ROUNDS));
    let text: String = events
        .iter()
        .filter(|e| e["type"] == json!("text"))
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, FINAL, "the streamed text, every piece");
    assert_eq!(view["output"], json!(FINAL));
}

/// `close()` ends delivery at once and the runtime forgets the
/// subscription: 100 subscriptions opened and closed deliver nothing of a
/// later run and leave only the one still open, which does receive it; once
/// that one is closed too, none is left.
#[wasm_bindgen_test]
async fn closed_subscriptions_deliver_nothing_and_leave_no_entry() {
    let mut config = rounds_config(3, "done");
    config["storage"] = json!("memory");
    let rt = create(&config).await;
    assert_eq!(live_subscriptions(&rt), 0.0);

    let closed = Collector::new();
    let subscribe_and_close = js_fn(
        "rt, session, callback, n",
        "const subs = [];
         for (let i = 0; i < n; i++) subs.push(rt.subscribe(session, callback));
         for (const sub of subs) sub.close();
         subs[0].close(); // a second close does nothing
         return subs.length;",
    );
    let opened = subscribe_and_close
        .call4(
            &JsValue::UNDEFINED,
            &rt,
            &"s-close".into(),
            closed.function(),
            &100.into(),
        )
        .expect("subscribe and close");
    assert_eq!(opened.as_f64(), Some(100.0));
    let witness = Collector::new();
    let witness_handle = call(
        &rt,
        "subscribe",
        &["s-close".into(), witness.function().clone()],
    )
    .expect("subscribe");
    assert!(
        eventually(Duration::from_secs(10), || live_subscriptions(&rt) == 1.0).await,
        "closed subscriptions are forgotten: {} live",
        live_subscriptions(&rt)
    );

    let run = call_async(&rt, "startRun", &["s-close".into(), "go".into()])
        .await
        .expect("startRun")
        .as_string()
        .expect("run id");
    assert!(
        eventually(Duration::from_secs(60), || witness
            .saw_run_status(&run, "completed"))
        .await,
        "the open subscription receives the run"
    );
    assert_eq!(
        closed.count(),
        0,
        "closed subscriptions received {:?}",
        closed.events.borrow()
    );

    call(&witness_handle, "close", &[]).expect("close");
    let seen = witness.count();
    assert!(
        eventually(Duration::from_secs(10), || live_subscriptions(&rt) == 0.0).await,
        "{} live after the last close",
        live_subscriptions(&rt)
    );
    // The session's next run reaches nobody.
    let run = call_async(&rt, "startRun", &["s-close".into(), "again".into()])
        .await
        .expect("startRun")
        .as_string()
        .expect("run id");
    assert_eq!(
        read_run_until_final(&rt, &run).await["run"]["status"],
        json!("completed")
    );
    platform::sleep(Duration::from_millis(300)).await;
    assert_eq!(witness.count(), seen, "nothing after close()");
    assert_eq!(closed.count(), 0);
}

async fn read_run_until_final(rt: &JsValue, run: &str) -> Value {
    let mut view = Value::Null;
    for _ in 0..600 {
        view = read_run(rt, run).await;
        if view["run"]["status"] != json!("running") {
            break;
        }
        platform::sleep(Duration::from_millis(100)).await;
    }
    view
}

/// `close()` on the runtime ends every subscription (handles dropped or
/// not) and refuses new ones with `unavailable`: another tab's busy notices
/// for the session, which a live subscription receives, reach none of them.
#[wasm_bindgen_test]
async fn closing_the_runtime_ends_every_subscription() {
    let mut config = rounds_config(2, "done");
    config["databaseName"] = json!(format!("subscribe-close-{}", js_sys::Date::now() as u64));
    let first = create(&config).await;
    let second = create(&config).await;

    let after_close = Collector::new();
    js_fn(
        "rt, session, callback",
        "for (let i = 0; i < 5; i++) rt.subscribe(session, callback);",
    )
    .call3(
        &JsValue::UNDEFINED,
        &first,
        &"s-rt-close".into(),
        after_close.function(),
    )
    .expect("subscribe");
    assert_eq!(live_subscriptions(&first), 5.0);
    call(&first, "close", &[]).expect("close");
    assert!(
        eventually(Duration::from_secs(10), || live_subscriptions(&first)
            == 0.0)
        .await,
        "{} live after the runtime closed",
        live_subscriptions(&first)
    );
    let refused = call(
        &first,
        "subscribe",
        &["s-rt-close".into(), after_close.function().clone()],
    )
    .expect_err("a closed runtime takes no subscription");
    assert_eq!(
        js_sys::Reflect::get(&refused, &"code".into())
            .ok()
            .and_then(|c| c.as_string())
            .as_deref(),
        Some("unavailable")
    );

    // The other tab runs the session: its notices (BroadcastChannel) reach
    // every live subscription of the session, in any runtime of the page.
    let witness = Collector::new();
    let _witness_handle = call(
        &second,
        "subscribe",
        &["s-rt-close".into(), witness.function().clone()],
    )
    .expect("subscribe");
    let run = call_async(&second, "startRun", &["s-rt-close".into(), "go".into()])
        .await
        .expect("startRun")
        .as_string()
        .expect("run id");
    assert!(
        eventually(Duration::from_secs(60), || {
            witness.saw_run_status(&run, "completed") && witness.saw_type("session")
        })
        .await,
        "a live subscription receives the run and the session notices: {:?}",
        witness.events.borrow()
    );
    platform::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        after_close.count(),
        0,
        "the closed runtime's subscriptions received {:?}",
        after_close.events.borrow()
    );
}
