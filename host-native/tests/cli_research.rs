//! `agentrt research`, `agentrt plan show|approve|edit|reject` and
//! `agentrt report` (S9), as separate processes over one data directory,
//! against an OpenAI-compatible model on loopback that this test starts:
//! the start waits for the plan decision (exit 3), the plan is shown, a
//! widening edit is refused with one clear line (exit 2), approval reads the
//! frozen sources through the public-web URL policy (the loopback and
//! private sources of the plan are refused: gaps, never requests) and ends
//! with a partial report whose parts print apart.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

fn agentrt(data: &Path, args: &[&str]) -> Output {
    std::fs::set_permissions(data, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod data dir");
    Command::new(BIN)
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("run agentrt")
}

fn sse(text: &str) -> Response {
    let chunks = [
        json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ];
    let mut s = String::new();
    for c in chunks {
        s.push_str(&format!("data: {c}\n\n"));
    }
    s.push_str("data: [DONE]\n\n");
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(s.into())
        .unwrap()
}

type Seen = Arc<Mutex<Vec<Value>>>;

async fn completions(State(seen): State<Seen>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    seen.lock().unwrap().push(request.clone());
    let said = request["messages"].to_string();
    if said.contains("You plan a Deep Research task") {
        return sse(&json!({
            "questions": ["What limits cell density?"],
            "queries": [],
            "sources": ["http://127.0.0.1:9/cells", "http://10.0.0.7/secret"],
            "domains": ["127.0.0.1", "10.0.0.7"],
        })
        .to_string());
    }
    if request["tools"].to_string().contains("start_deep_research") {
        // The start turn: the model answers without calling the tool.
        return sse("Solid-state cells are promising.");
    }
    sse(&json!({
        "title": "Cell density",
        "findings": [],
        "unverified": [{"text": "A blog says 600 Wh/kg is near."}],
        "model_knowledge": [{"text": "Density is limited by the anode."}],
    })
    .to_string())
}

fn model_server() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let state = seen.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new()
                .route("/v1/chat/completions", post(completions))
                .with_state(state);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (rx.recv().unwrap(), seen)
}

fn json_line(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{e}: {stdout:?} / {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn research_plan_and_report_on_the_command_line() {
    let (addr, seen) = model_server();
    let data = tempfile::tempdir().unwrap();
    let base = format!("http://{addr}/v1");
    let start = agentrt(
        data.path(),
        &[
            "--json",
            "research",
            "How dense can solid-state cells get?",
            "--provider",
            "openai-compatible",
            "--base-url",
            &base,
            "--model",
            "m",
            "--session",
            "chat-1",
        ],
    );
    assert_eq!(
        start.status.code(),
        Some(3),
        "waits for the plan decision: {}",
        String::from_utf8_lossy(&start.stderr)
    );
    let view = json_line(&start);
    assert_eq!(view["phase"], "awaiting_plan_approval");
    assert_eq!(view["session"], "chat-1");
    let task = view["task"].as_str().unwrap().to_owned();
    // S9.3: the start turn's request offered only start_deep_research.
    let first = seen.lock().unwrap()[0].clone();
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, vec!["start_deep_research"]);

    // Show reads only.
    let requests = seen.lock().unwrap().len();
    let show = agentrt(data.path(), &["--json", "plan", "show", &task]);
    assert_eq!(show.status.code(), Some(3));
    assert_eq!(
        json_line(&show)["plan"]["questions"][0],
        "What limits cell density?"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        requests,
        "showing sends nothing"
    );

    // A widening edit is refused with one clear line.
    let wider = data.path().join("wider.json");
    std::fs::write(
        &wider,
        json!({
            "questions": ["What limits cell density?"],
            "queries": [],
            "sources": ["http://127.0.0.1:9/cells"],
            "domains": ["127.0.0.1", "elsewhere.example"],
        })
        .to_string(),
    )
    .unwrap();
    let edit = agentrt(
        data.path(),
        &["plan", "edit", &task, wider.to_str().unwrap()],
    );
    assert_eq!(edit.status.code(), Some(2));
    let err = String::from_utf8_lossy(&edit.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.starts_with("agentrt: "), "{err}");

    // Approval: both sources are refused by the public-web policy (S9.5).
    let approve = agentrt(data.path(), &["--json", "plan", "approve", &task]);
    assert_eq!(
        approve.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&approve.stderr)
    );
    let done = json_line(&approve);
    assert_eq!(done["phase"], "partial");
    let failed = done["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["state"] == "failed")
        .count();
    assert_eq!(failed, 2, "{done}");

    // The report, its parts apart.
    let report = agentrt(data.path(), &["report", &task]);
    assert_eq!(report.status.code(), Some(0));
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("Density is limited by the anode."), "{text}");
    assert!(text.contains("A blog says 600 Wh/kg is near."), "{text}");
    let json_report = agentrt(data.path(), &["--json", "report", &task]);
    let parsed = json_line(&json_report);
    assert_eq!(parsed["findings"], json!([]));
    assert_eq!(parsed["unverified"].as_array().unwrap().len(), 1);
    assert_eq!(parsed["model_knowledge"].as_array().unwrap().len(), 1);
    assert!(!parsed["gaps"].as_array().unwrap().is_empty());

    // An unknown task: one clear line, exit 2.
    let unknown = agentrt(data.path(), &["plan", "show", "research-nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    // A plan already decided cannot be decided again.
    let again = agentrt(data.path(), &["plan", "reject", &task]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}
