//! MCP in the tab-loss simulator (issue 16 acceptance): an MCP server's
//! non-idempotent write (`create_ticket` on a loopback Streamable HTTP
//! server written here), found and loaded like any discoverable tool,
//! unknown so asked once, through hundreds of seeds of kills and lifecycle
//! events: each ticket the server counted is a dispatch the simulation saw
//! (at most once), a kill between dispatch and outcome leaves the person a
//! decision (`effect_unknown`), and the invariants find nothing (S2.3,
//! S2.5, S6.1).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_host_native::sim::{SimPlan, SimWiring, simulate_seed};
use agent_mcp::McpServerConfig;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};

/// A loopback MCP server (JSON answers) with one tool, `create_ticket`,
/// counting its calls.
struct TicketServer {
    url: String,
    count: Arc<AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

fn answer(id: &Value, result: Value) -> axum::response::Response {
    (
        [
            ("content-type", "application/json"),
            ("mcp-session-id", "sim-1"),
        ],
        json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
    )
        .into_response()
}

fn start_server() -> TicketServer {
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
        "/mcp",
        axum::routing::post(move |_headers: HeaderMap, body: String| {
            let c = c.clone();
            async move {
                let message: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let Some(id) = message.get("id").cloned() else {
                    return StatusCode::ACCEPTED.into_response(); // a notification
                };
                match message["method"].as_str().unwrap_or_default() {
                    "initialize" => answer(
                        &id,
                        json!({"protocolVersion": "2025-06-18",
                               "capabilities": {"tools": {}},
                               "serverInfo": {"name": "tickets", "version": "1"}}),
                    ),
                    "tools/list" => answer(
                        &id,
                        json!({"tools": [{
                            "name": "create_ticket",
                            "description": "Open a support ticket.",
                            "inputSchema": {"type": "object",
                                "properties": {"title": {"type": "string"}},
                                "required": ["title"]}}]}),
                    ),
                    "tools/call" => {
                        let n = c.fetch_add(1, Ordering::SeqCst) + 1;
                        answer(
                            &id,
                            json!({"content": [{"type": "text", "text": format!("ticket #{n}")}]}),
                        )
                    }
                    "ping" => answer(&id, json!({})),
                    _ => (
                        [("content-type", "application/json")],
                        json!({"jsonrpc": "2.0", "id": id,
                               "error": {"code": -32601, "message": "method not found"}})
                        .to_string(),
                    )
                        .into_response(),
                }
            }
        })
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
    );
    runtime.spawn(async move { axum::serve(listener, app).await });
    TicketServer {
        url: format!("http://127.0.0.1:{port}/mcp"),
        count,
        _runtime: runtime,
    }
}

/// The model loads the server's function, opens one ticket, and answers.
const SCENARIO: &str = r#"{"turns": [
  {"text": "Loading.", "tool_calls": [{"name": "load_tools", "arguments": {"names": ["create_ticket"]}}]},
  {"text": "Opening.", "tool_calls": [{"name": "create_ticket", "arguments": {"title": "printer jam"}}]},
  {"text": "Opened."}
]}"#;

#[test]
fn an_mcp_write_survives_the_simulator_at_most_once_with_decisions_on_doubt() {
    let seeds = std::env::var("TABSIM_MCP_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300u64);
    let server = start_server();
    let wiring = SimWiring::scripted(SCENARIO)
        .expect("scenario")
        .with_mcp(McpServerConfig::http("tickets", server.url.clone()));
    let dir = tempfile::tempdir().expect("dir");
    let mut summary = agent_supervisor::sim::invariants::SimSummary::default();
    let mut dispatched = 0;
    // Kills between dispatch and outcome leave the person a decision
    // (effect_unknown) in some seeds; the unknown function is asked about
    // (approval) in every seed that reaches it. Read from each seed's
    // database before the next.
    let (mut decided, mut approvals) = (0u64, 0u64);
    for seed in 0..seeds {
        let path = dir.path().join(format!("seed-{seed}.sqlite3"));
        let report = simulate_seed(&path, seed, &wiring, &SimPlan::default()).expect("simulate");
        dispatched += report.dispatches.get("create_ticket").copied().unwrap_or(0);
        summary.add_seed(report.crash_points, report.violations);
        let mut bytes = Vec::new();
        for suffix in ["", "-wal"] {
            bytes.extend(std::fs::read(format!("{}{suffix}", path.display())).unwrap_or_default());
        }
        let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        decided += u64::from(has(b"decision_requested"));
        approvals += u64::from(has(b"approval_requested"));
    }
    eprintln!("{summary}; {decided} seeds with a decision, {approvals} with an approval");
    for v in summary.violations.iter().take(20) {
        eprintln!("{v}");
    }
    assert_eq!(summary.seeds, seeds);
    assert!(summary.violations.is_empty(), "{summary}");
    let tickets = server.count.load(Ordering::SeqCst);
    assert_eq!(
        dispatched, tickets,
        "every ticket the server opened was a dispatch the simulation saw"
    );
    assert!(
        tickets >= seeds / 2,
        "most seeds opened their ticket: {tickets}"
    );
    assert!(
        decided > 0,
        "no seed left a decision about an unknown effect"
    );
    assert!(
        approvals >= seeds / 2,
        "the unknown function was asked about: {approvals}"
    );
}
