//! `agentrt sim` (issue 17 item 3): a scenario file whose plugin points at a
//! counting loopback server this test starts; the summary line, the JSON
//! report and the server's count agree, and the exit code is 0 only with
//! no violations.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

/// A loopback server counting `POST /orders`; the runtime keeps it alive.
fn start_counter() -> (u16, Arc<AtomicU64>, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let app = axum::Router::new().route(
        "/orders",
        axum::routing::post(move || {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            async move { axum::Json(json!({"order": n})) }
        }),
    );
    runtime.spawn(async move { axum::serve(listener, app).await });
    (port, count, runtime)
}

fn scenario(port: u16) -> Value {
    let mut plugin = json!({
        "id": "shop",
        "base_url": format!("http://127.0.0.1:{port}"),
        "trusted": true,
        "timeout_ms": 5000,
        "functions": [{
            "name": "place_order",
            "description": "Order items.",
            "method": "POST",
            "path": "/orders",
            "parameters": {"type": "object", "properties": {"item": {"type": "string"}},
                           "required": ["item"], "additionalProperties": false},
            "effects": ["write_external"],
            "idempotency": "non_idempotent"
        }]
    });
    let manifest: agent_tools::PluginManifest =
        serde_json::from_value(plugin.clone()).expect("manifest");
    plugin["expected_fingerprint"] = json!(manifest.fingerprint().expect("fingerprint"));
    json!({
        "model": {"turns": [
            {"text": "Ordering.", "tool_calls": [{"name": "place_order", "arguments": {"item": "paper"}}]},
            {"text": "Anything else?", "tool_calls": [{"name": "ask_user", "arguments": {"question": "more?"}}]},
            {"text": "Done."}
        ]},
        "plugins": [plugin],
        "always_on_plugins": ["shop"],
        "sessions": [{"session": "orders", "prompts": ["order some paper", "order it again"]}],
        "person": {"approve": true, "answers": ["no, that is all"]}
    })
}

#[test]
fn agentrt_sim_summary_report_and_server_count_agree() {
    let (port, count, _server) = start_counter();
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("scenario.json");
    std::fs::write(&file, scenario(port).to_string()).expect("write");
    let report = dir.path().join("report.json");
    let out = Command::new(BIN)
        .args([
            "sim",
            file.to_str().expect("path"),
            "--seeds",
            "40",
            "--report",
        ])
        .arg(&report)
        .output()
        .expect("agentrt sim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let line = stdout.lines().next().expect("summary line");
    let report: Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("json");
    assert_eq!(report["summary"], line);
    assert_eq!(report["seeds"], 40);
    assert_eq!(report["violations"], json!([]));
    let points = report["crash_points"].as_u64().expect("points");
    assert_eq!(
        line,
        format!("crash-sim: 40 seeds, {points} crash points, 0 violations")
    );
    let orders = report["dispatches"]["place_order"]
        .as_u64()
        .expect("orders");
    // Every order the server received was a dispatch the simulation saw;
    // a dispatch may not reach the server when its tab dies with the
    // request still in the plugin's hands (its call is then
    // `effect_unknown`), at most one per crash point. Seen under load.
    let received = count.load(Ordering::SeqCst);
    assert!(
        received <= orders && orders - received <= points,
        "report ({orders}) and server ({received}) agree within {points} crash points"
    );
    assert!(orders >= 80, "two runs a seed each ordered: {orders}");
}

#[test]
fn agentrt_sim_refuses_a_bad_scenario_with_a_usage_error() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("scenario.json");
    std::fs::write(
        &file,
        r#"{"model": {"turns": []}, "sessions": [], "surprise": 1}"#,
    )
    .expect("write");
    let out = Command::new(BIN)
        .args(["sim", file.to_str().expect("path")])
        .output()
        .expect("agentrt sim");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("surprise"));
}
