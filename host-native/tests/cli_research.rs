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

/// The model of `completions`, whose synthesis never answers (a synthesis
/// the person stops).
async fn hanging_synthesis(State(seen): State<Seen>, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    if request["messages"]
        .to_string()
        .contains("You write the report")
    {
        seen.lock().unwrap().push(request);
        tokio::time::sleep(std::time::Duration::from_secs(300)).await;
        return sse("{}");
    }
    completions(State(seen), body).await
}

fn model_server() -> (SocketAddr, Seen) {
    serve_model(false)
}

fn serve_model(hang_synthesis: bool) -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let state = seen.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = if hang_synthesis {
                Router::new().route("/v1/chat/completions", post(hanging_synthesis))
            } else {
                Router::new().route("/v1/chat/completions", post(completions))
            }
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

fn syntheses(seen: &Seen) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|r| r["messages"].to_string().contains("You write the report"))
        .count()
}

/// Wait (bounded) for the synthesis request to reach the model.
fn until_synthesis(seen: &Seen) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while syntheses(seen) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "synthesis never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A research task of its own data directory, planned and waiting for
/// approval, against a model whose synthesis never answers.
fn planned_task(data: &Path, base: &str) -> String {
    let start = agentrt(
        data,
        &[
            "--json",
            "research",
            "How dense can solid-state cells get?",
            "--provider",
            "openai-compatible",
            "--base-url",
            base,
            "--model",
            "m",
        ],
    );
    assert_eq!(
        start.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&start.stderr)
    );
    json_line(&start)["task"].as_str().unwrap().to_owned()
}

fn approving(data: &Path, task: &str) -> std::process::Child {
    Command::new(BIN)
        .args(["--json", "plan", "approve", task])
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agentrt")
}

/// The task's stopped report: `partial`, the gap `stopped`, readable.
fn assert_stopped(data: &Path, task: &str) {
    let show = agentrt(data, &["--json", "plan", "show", task]);
    let view = json_line(&show);
    assert_eq!(view["phase"], "partial", "{view}");
    assert!(
        view["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["kind"] == "stopped"),
        "{view}"
    );
    let report = agentrt(data, &["--json", "report", task]);
    assert_eq!(report.status.code(), Some(0));
    let parsed = json_line(&report);
    assert!(
        parsed["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["kind"] == "stopped")
    );
    // A stopped task never resumes by itself, nor on --resume.
    let resume = agentrt(data, &["--json", "research", "--resume", task]);
    assert_eq!(json_line(&resume)["phase"], "partial");
}

#[test]
fn s9_6_sigterm_during_synthesis_stops_the_task_and_leaves_its_report() {
    let (addr, seen) = serve_model(true);
    let data = tempfile::tempdir().unwrap();
    let task = planned_task(data.path(), &format!("http://{addr}/v1"));
    let child = approving(data.path(), &task);
    until_synthesis(&seen);
    let requests = seen.lock().unwrap().len();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json_line(&out)["phase"], "partial");
    assert!(String::from_utf8_lossy(&out.stderr).contains("stopping research task"));
    assert_eq!(
        seen.lock().unwrap().len(),
        requests,
        "no model call after it"
    );
    assert_stopped(data.path(), &task);
    assert_eq!(seen.lock().unwrap().len(), requests);
}

#[test]
fn s9_6_research_stop_from_another_process_stops_the_task_there() {
    let (addr, seen) = serve_model(true);
    let data = tempfile::tempdir().unwrap();
    let task = planned_task(data.path(), &format!("http://{addr}/v1"));
    let child = approving(data.path(), &task);
    until_synthesis(&seen);
    let stop = agentrt(data.path(), &["--json", "research", "--stop", &task]);
    assert_eq!(
        stop.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert_eq!(json_line(&stop)["phase"], "partial");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json_line(&out)["phase"], "partial");
    assert_eq!(syntheses(&seen), 1);
    assert_stopped(data.path(), &task);
}

#[test]
fn a_foreground_command_ends_when_its_parent_goes_away() {
    let (addr, seen) = serve_model(true);
    let data = tempfile::tempdir().unwrap();
    let task = planned_task(data.path(), &format!("http://{addr}/v1"));
    let pid_file = data.path().join("agentrt.pid");
    // A parent (sh) that starts agentrt and is then killed, as a timeout
    // wrapper is.
    std::fs::set_permissions(
        data.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let mut parent = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "\"$0\" --json plan approve {task} >/dev/null 2>&1 & echo $! > {}; wait",
            pid_file.display()
        ))
        .arg(BIN)
        .env("AGENTRT_DATA_DIR", data.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    until_synthesis(&seen);
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    parent.kill().unwrap();
    parent.wait().unwrap();
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "agentrt outlived its parent"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_stopped(data.path(), &task);
}

#[test]
fn s9_6_stop_of_a_research_run_stops_its_task_while_another_process_executes_it() {
    let (addr, seen) = serve_model(true);
    let data = tempfile::tempdir().unwrap();
    let task = planned_task(data.path(), &format!("http://{addr}/v1"));
    let child = approving(data.path(), &task);
    until_synthesis(&seen);
    let synthesis = format!("{task}-synthesis-1");
    let stop = agentrt(data.path(), &["--json", "stop", &synthesis]);
    assert_eq!(
        stop.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert_eq!(json_line(&stop)["phase"], "partial");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(syntheses(&seen), 1);
    assert_stopped(data.path(), &task);
}
