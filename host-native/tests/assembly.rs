//! The native host over `agent-assembly` (issue 13, item 1), SQLite on disk:
//!
//! - `agentrt show` is the assembly's run view: the card the binary prints
//!   (JSON and text) says what `Assembly::run_view` reads for the same run;
//! - an always-on plugin's function is in the model's schemas from the first
//!   request, without `load_tools` (S5.2), and only when it is always on;
//! - an always-on id that names no configured plugin is refused.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use agent_assembly::NoModel;
use agent_host_native::app::{App, AppError, AppOptions};
use agent_host_native::config::Config;
use agent_kernel::protocol::ModelToolSchema;
use agent_kernel::{RunId, SessionId};
use agent_supervisor::provider::{ModelRequest, ModelStream, ProviderError};
use agent_supervisor::{ModelProvider, RunConfig, Scenario, ScriptedProvider};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

fn agentrt(data: &Path, args: &[&str]) -> Output {
    std::fs::set_permissions(data, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod data dir");
    Command::new(BIN)
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .env_remove("AGENTRT_TEST_PAUSE")
        .stdin(Stdio::null())
        .output()
        .expect("run agentrt")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentrt_show_prints_the_assembly_run_view() {
    let dir = tempfile::tempdir().expect("dir");
    // The demo leaves a refused call (a failure) and a pending approval.
    let demo = agentrt(dir.path(), &["demo"]);
    assert_eq!(demo.status.code(), Some(3), "demo waits for approval");
    let runs = agentrt(dir.path(), &["--json", "runs"]);
    let listed: serde_json::Value = serde_json::from_slice(&runs.stdout).expect("runs json");
    let run = RunId::new(listed["run"].as_str().expect("run id")).expect("run id");

    let shown = agentrt(dir.path(), &["--json", "show", run.as_str()]);
    assert_eq!(shown.status.code(), Some(0));
    let card: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("card json");
    let text = agentrt(dir.path(), &["show", run.as_str()]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();

    let app = App::open(dir.path(), AppOptions::default(), Arc::new(NoModel))
        .await
        .expect("app");
    let view = app.run_view(&run).await.expect("view");
    assert_eq!(card["run"], json(&view.run.id));
    assert_eq!(card["status"], json(&view.run.status));
    assert_eq!(card["stop_reason"], json(&view.run.stop_reason));
    assert_eq!(card["usage"], json(&view.run.usage));
    assert_eq!(card["activities"], json(&view.activities));
    assert_eq!(card["journal"], json(&view.journal));
    assert_eq!(card["pending"], json(&view.pending_requests()));
    assert_eq!(card["output"], json(&view.output));
    assert!(!view.pending.is_empty(), "the demo waits: {card}");
    assert!(!view.failures.is_empty(), "the demo has a refused call");
    for failure in &view.failures {
        let line = format!("refused:  {}: {}", failure.call_id, failure.reason);
        assert!(text.contains(&line), "{line} not in {text}");
    }
    for pending in &view.pending {
        assert!(
            text.contains(pending.request.id.as_str()),
            "{} not in {text}",
            pending.request.id
        );
    }
}

/// A field as the JSON card prints it.
fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("serializes")
}

/// A scripted model that keeps the tool names of every request it gets.
struct Recording {
    inner: ScriptedProvider,
    tools: Arc<Mutex<Vec<Vec<String>>>>,
}

#[async_trait::async_trait]
impl ModelProvider for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let names = request
            .tools
            .iter()
            .map(|t: &ModelToolSchema| t.name.clone())
            .collect();
        self.tools.lock().expect("tools").push(names);
        self.inner.stream(request).await
    }
}

fn tickets_plugin() -> agent_tools::PluginManifest {
    serde_json::from_value(serde_json::json!({
        "id": "tickets",
        "base_url": "http://127.0.0.1:9",
        "functions": [{
            "name": "file_ticket",
            "description": "File a ticket.",
            "method": "POST",
            "path": "/tickets",
            "parameters": {"type": "object", "properties": {"title": {"type": "string"}},
                           "required": ["title"], "additionalProperties": false},
            "effects": ["write_external"],
            "idempotency": "non_idempotent"
        }]
    }))
    .expect("manifest")
}

/// The tool names of the first model request of a one-turn run.
async fn first_request_tools(always_on: Vec<String>) -> Result<Vec<String>, AppError> {
    let dir = tempfile::tempdir().expect("dir");
    let tools = Arc::new(Mutex::new(Vec::new()));
    let clock: Arc<dyn agent_kernel::host::Clock> = Arc::new(
        agent_host_native::host::SystemClock::new(tokio::runtime::Handle::current()),
    );
    let scenario = Scenario::from_json(r#"{"turns": [{"text": "Done."}]}"#).expect("scenario");
    let provider = Arc::new(Recording {
        inner: ScriptedProvider::new(scenario, clock),
        tools: tools.clone(),
    });
    let options = AppOptions {
        config: Config {
            plugins: vec![tickets_plugin()],
            always_on_plugins: always_on,
            ..Config::default()
        },
        ..AppOptions::default()
    };
    let app = App::open(dir.path(), options, provider).await?;
    let session = SessionId::new("always-on").expect("session");
    let _lease = app.open_session(&session).await?;
    let run = app
        .runtime()
        .start(&session, "Nothing to do.", RunConfig::default())
        .await?;
    app.runtime().wait_settled(&run).await?;
    let requests = tools.lock().expect("tools").clone();
    Ok(requests.into_iter().next().expect("one model request"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_on_plugin_is_in_the_first_request_without_load_tools() {
    let on = first_request_tools(vec!["tickets".into()])
        .await
        .expect("always on");
    assert!(
        on.iter().any(|n| n.contains("file_ticket")),
        "always-on plugin function offered: {on:?}"
    );
    let off = first_request_tools(Vec::new()).await.expect("discoverable");
    assert!(
        !off.iter().any(|n| n.contains("file_ticket")),
        "a discoverable plugin waits for load_tools: {off:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_always_on_plugin_is_refused() {
    let err = first_request_tools(vec!["ghost".into()])
        .await
        .expect_err("unknown id");
    assert!(
        matches!(&err, AppError::Plugin { id, .. } if id == "ghost"),
        "{err:?}"
    );
}
