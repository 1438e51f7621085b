//! The assembly on the kernel's in-memory host (the hosts' own tests run it
//! on SQLite and IndexedDB):
//!
//! - an always-on plugin's function is in the model's schemas from the
//!   first request, a discoverable one is not (S5.2);
//! - an always-on id that names no configured plugin is refused as a
//!   configuration error, by [`check_always_on`] and by `Assembly::build`;
//! - `open_session` takes the session over from an owner whose lease ran
//!   out and recovers the run it left `running` (S2.5), and the run view
//!   shows it interrupted.
//!
//! Native only: on wasm32 the browser's tests (`host-browser/tests/api.rs`)
//! run the assembly in headless Chromium.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_assembly::{Assembly, AssemblyError, Parts, check_always_on};
use agent_kernel::memory::MemoryHost;
use agent_kernel::run::RunStatus;
use agent_kernel::{OwnerId, SessionId};
use agent_supervisor::provider::{ModelRequest, ModelStream, ProviderError};
use agent_supervisor::{ModelProvider, RunConfig, RuntimeOptions, Scenario, ScriptedProvider};
use agent_tools::PluginManifest;
use agent_tools::plugin::{SecretError, SecretHandle, SecretResolver, SecretValue};

/// No secrets at all.
struct NoSecrets;

#[async_trait::async_trait]
impl SecretResolver for NoSecrets {
    fn bound_origin(&self, _: &SecretHandle) -> Option<String> {
        None
    }
    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
        Err(SecretError::Unknown(handle.0.clone()))
    }
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
        let names = request.tools.iter().map(|t| t.name.clone()).collect();
        self.tools.lock().expect("tools").push(names);
        self.inner.stream(request).await
    }
}

fn tickets_plugin() -> PluginManifest {
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

fn parts(
    mem: &MemoryHost,
    owner: &str,
    provider: Arc<dyn ModelProvider>,
    always_on: &[&str],
) -> Parts {
    Parts {
        host: mem.host(),
        owner: OwnerId::new(owner).expect("owner"),
        provider,
        javascript: None,
        pdf_reader: None,
        html_extractor: None,
        fetch: None,
        secrets: Arc::new(NoSecrets),
        plugins: vec![tickets_plugin()],
        always_on_plugins: always_on.iter().map(|s| (*s).to_owned()).collect(),
        mcp: Vec::new(),
        search: None,
        runtime: RuntimeOptions {
            lease_ttl: Duration::from_secs(3),
            ..RuntimeOptions::default()
        },
    }
}

fn scripted(mem: &MemoryHost, turns: &str) -> ScriptedProvider {
    let scenario = Scenario::from_json(&format!(r#"{{"turns": {turns}}}"#)).expect("scenario");
    ScriptedProvider::new(scenario, mem.host().clock)
}

/// The tool names of the first model request of a one-turn run.
fn first_request_tools(always_on: &[&str]) -> Vec<String> {
    let mem = MemoryHost::fifo(7);
    let tools = Arc::new(Mutex::new(Vec::new()));
    let provider = Arc::new(Recording {
        inner: scripted(&mem, r#"[{"text": "Done."}]"#),
        tools: tools.clone(),
    });
    let assembly = Assembly::build(parts(&mem, "owner-a", provider, always_on)).expect("built");
    let session = SessionId::new("always-on").expect("session");
    let record = mem
        .block_on_advancing(async {
            let _opened = assembly.open_session(&session).await.expect("opened");
            let run = assembly
                .runtime()
                .start(&session, "Nothing to do.", RunConfig::default())
                .await
                .expect("started");
            assembly
                .runtime()
                .wait_settled(&run)
                .await
                .expect("settled")
        })
        .expect("the run settles");
    assert_eq!(record.status, RunStatus::Completed);
    let requests = tools.lock().expect("tools").clone();
    requests.into_iter().next().expect("one model request")
}

#[test]
fn s5_2_an_always_on_plugin_is_in_the_first_request_and_a_discoverable_one_is_not() {
    let on = first_request_tools(&["tickets"]);
    assert!(on.iter().any(|n| n.contains("file_ticket")), "{on:?}");
    let off = first_request_tools(&[]);
    assert!(!off.iter().any(|n| n.contains("file_ticket")), "{off:?}");
    // The built-in tools are there either way; the JavaScript and fetch
    // tools only when the host passed them.
    for tools in [&on, &off] {
        assert!(tools.iter().any(|n| n == "extract_document"), "{tools:?}");
        assert!(!tools.iter().any(|n| n == "run_javascript"), "{tools:?}");
        assert!(!tools.iter().any(|n| n == "fetch_url"), "{tools:?}");
    }
}

#[test]
fn an_always_on_id_that_names_no_plugin_is_a_configuration_error() {
    let err = check_always_on(["tickets"], &["ghost".to_owned()]).expect_err("refused");
    assert!(matches!(&err, AssemblyError::UnknownAlwaysOn(id) if id == "ghost"));
    assert!(err.is_config());
    check_always_on(["tickets"], &["tickets".to_owned()]).expect("a configured id");

    let mem = MemoryHost::fifo(1);
    let provider = Arc::new(scripted(&mem, r#"[{"text": "x"}]"#));
    let err = Assembly::build(parts(&mem, "owner-a", provider, &["ghost"])).expect_err("refused");
    assert!(
        matches!(&err, AssemblyError::UnknownAlwaysOn(id) if id == "ghost"),
        "{err:?}"
    );
    assert!(err.is_config());
}

/// MCP servers are checked when the assembly is built, before anything
/// connects: a provider id names one plugin or server, ids are unique and
/// not reserved, and each configuration passes its own rule.
#[test]
fn bad_mcp_servers_are_configuration_errors_at_build() {
    use agent_assembly::McpServerSpec;
    use agent_mcp::McpServerConfig;
    let cases = [
        (
            vec![McpServerConfig::http("tickets", "http://127.0.0.1:9/mcp")],
            "a plugin has this id",
        ),
        (
            vec![
                McpServerConfig::http("docs", "http://127.0.0.1:9/mcp"),
                McpServerConfig::http("docs", "http://127.0.0.1:8/mcp"),
            ],
            "two MCP servers",
        ),
        (
            vec![McpServerConfig::http("fetch", "http://127.0.0.1:9/mcp")],
            "reserved",
        ),
        (
            vec![McpServerConfig::http("docs", "ftp://127.0.0.1:9/mcp")],
            "docs",
        ),
    ];
    for (servers, why) in cases {
        let mem = MemoryHost::fifo(1);
        let provider = Arc::new(scripted(&mem, r#"[{"text": "x"}]"#));
        let mut p = parts(&mem, "owner-a", provider, &[]);
        p.mcp = servers.into_iter().map(McpServerSpec::direct).collect();
        let err = Assembly::build(p).expect_err(why);
        assert!(matches!(&err, AssemblyError::Mcp { .. }), "{why}: {err:?}");
        assert!(err.is_config());
        assert!(err.to_string().contains(why), "{why}: {err}");
    }
    // A good one builds, and is "not connected yet" until connect_mcp.
    let mem = MemoryHost::fifo(1);
    let provider = Arc::new(scripted(&mem, r#"[{"text": "x"}]"#));
    let mut p = parts(&mem, "owner-a", provider, &[]);
    p.mcp = vec![McpServerSpec::direct(McpServerConfig::http(
        "docs",
        "http://127.0.0.1:9/mcp",
    ))];
    let assembly = Assembly::build(p).expect("built");
    let statuses = assembly.mcp_statuses();
    assert_eq!(statuses.len(), 1);
    assert!(!statuses[0].connected);
}

#[test]
fn s2_5_open_session_takes_over_an_expired_lease_and_recovers_the_run_left_running() {
    let mem = MemoryHost::fifo(2);
    // Owner A's model answers only after a minute: its run stays `running`.
    let slow = Arc::new(scripted(&mem, r#"[{"text": "late", "delay_ms": 60000}]"#));
    let a = Assembly::build(parts(&mem, "owner-a", slow, &[])).expect("a");
    let session = SessionId::new("takeover").expect("session");
    let (guard_a, run) = mem
        .block_on(async {
            let opened = a.open_session(&session).await.expect("a opens");
            assert!(opened.recovered.is_empty());
            let run = a
                .runtime()
                .start(&session, "Take your time.", RunConfig::default())
                .await
                .expect("started");
            (opened.guard, run)
        })
        .expect("a starts");
    mem.executor().run_until_stalled();

    let b_model = Arc::new(scripted(&mem, r#"[{"text": "x"}]"#));
    let b = Assembly::build(parts(&mem, "owner-b", b_model, &[])).expect("b");
    // While A's lease is live, B is refused and nothing is recovered.
    let refused = mem
        .block_on(b.open_session(&session))
        .expect("b tries")
        .expect_err("a holds the session");
    assert!(matches!(refused, AssemblyError::Run(_)), "{refused:?}");
    let view = mem.block_on(b.run_view(&run)).expect("read").expect("view");
    assert_eq!(view.run.status, RunStatus::Running);

    // A stops renewing (its process is gone); its lease runs out.
    mem.advance(Duration::from_secs(4));
    let opened = mem
        .block_on(b.open_session(&session))
        .expect("b opens")
        .expect("the lease expired");
    assert_eq!(opened.recovered, vec![run.clone()]);
    assert!(
        b.workspaces().get(&session).is_some(),
        "b opened the workspace"
    );
    let view = mem.block_on(b.run_view(&run)).expect("read").expect("view");
    assert_eq!(view.run.status, RunStatus::Interrupted, "{view:?}");
    drop(guard_a);
}
