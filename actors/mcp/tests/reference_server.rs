//! Interop with the reference server `@modelcontextprotocol/server-everything`
//! (npm, pinned in tests/reference/package-lock.json, installed by
//! `cargo xtask install` / `cargo xtask test`), over stdio and over
//! Streamable HTTP: initialize, its tools through `search_tools` /
//! `load_tools` and the pipeline (an undeclared function asks once, S6.1),
//! `echo`, a resource read, a prompt, progress from its long-running tool,
//! and cancelling that tool by stopping the run. A missing installation
//! fails the test: it never skips.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use agent_capabilities::{ApprovalMode, Decision};
use agent_kernel::protocol::ToolResult;
use agent_mcp::{McpServerConfig, spawn_mcp_server};
use common::*;

fn server_entry() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        path.exists(),
        "the MCP reference server is not installed at {}; run `cargo xtask install` (it runs `npm ci` in actors/mcp/tests/reference)",
        path.display()
    );
    path
}

async fn exercise(config: McpServerConfig) {
    let tools_slot = Arc::new(Mutex::new(None));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = spawn_mcp_server(&env(), &config)
        .await
        .expect("the reference server connects");
    let info = server.client.server_info().unwrap();
    assert!(
        agent_mcp::protocol::SUPPORTED_PROTOCOL_VERSIONS.contains(&info.protocol_version),
        "{info:?}"
    );
    let names: Vec<String> = server
        .load
        .registrations
        .iter()
        .map(|r| r.definition.name.clone())
        .collect();
    for expected in [
        "echo",
        "trigger_long_running_operation",
        "everything_read_resource",
        "everything_list_resources",
        "everything_get_prompt",
        "everything_list_prompts",
    ] {
        assert!(
            names.contains(&expected.to_owned()),
            "{expected} in {names:?}"
        );
    }
    server.client.ping().await.unwrap();

    let tools = tools_over(&server.load);
    *tools_slot.lock().unwrap() = Some(tools.clone());
    server.watch(replace_into(tools_slot.clone(), seen.clone(), &config.id));
    let run = Run::new(tools, "run-reference", ApprovalMode::Permissive);

    // Discovery: echo is found and loaded like a plugin function.
    let found = run
        .search_and_load(
            "echo message",
            &[
                "echo",
                "trigger_long_running_operation",
                "everything_list_resources",
                "everything_read_resource",
                "everything_get_prompt",
            ],
        )
        .await;
    assert!(
        success_text(&found).contains(r#"\"name\":\"echo\""#),
        "{found:?}"
    );

    // An undeclared function: unknown, asks once (S6.1).
    let prepared = run
        .prepare("c-echo", "echo", &json!({"message": "hello interop"}))
        .await
        .unwrap();
    assert!(
        matches!(prepared.decision, Decision::AskOnce { .. }),
        "{:?}",
        prepared.decision
    );
    let echoed = run.dispatch(&prepared).await;
    let text = success_text(&echoed);
    assert!(text.contains("hello interop"), "{text}");
    let ToolResult::Success(s) = &echoed else {
        unreachable!()
    };
    assert_eq!(s.trust, agent_capabilities::Trust::ExternalUntrusted);
    assert_eq!(s.provenance.origin, format!("mcp:{}", config.id));

    // Resources: list, then read the first one listed.
    let listed = run
        .call("c-list", "everything_list_resources", json!({}))
        .await;
    let listed = unfenced(&listed);
    let uri = listed["resources"][0]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("{listed}"))
        .to_owned();
    let read = run
        .call("c-read", "everything_read_resource", json!({"uri": uri}))
        .await;
    assert_eq!(unfenced(&read)["contents"][0]["uri"], json!(uri));
    let ToolResult::Success(read) = &read else {
        panic!("{read:?}")
    };
    assert_eq!(read.provenance.detail["uri"], json!(uri));

    // A prompt with an argument.
    let prompt = run
        .call(
            "c-prompt",
            "everything_get_prompt",
            json!({"name": "args-prompt", "arguments": {"city": "Lisbon"}}),
        )
        .await;
    assert!(success_text(&prompt).contains("Lisbon"), "{prompt:?}");

    // Progress from the long-running tool.
    let done = run
        .call(
            "c-long",
            "trigger_long_running_operation",
            json!({"duration": 0.4, "steps": 4}),
        )
        .await;
    assert!(success_text(&done).contains("completed"), "{done:?}");
    {
        let reports = run.progress.lock().unwrap();
        assert!(reports.len() >= 3, "{reports:?}");
        assert_eq!(reports.last().unwrap().total, Some(4.0));
    }

    // Cancellation: stop the run while a long operation is in flight.
    run.progress.lock().unwrap().clear();
    let prepared = run
        .prepare(
            "c-cancel",
            "trigger_long_running_operation",
            &json!({"duration": 20, "steps": 20}),
        )
        .await
        .unwrap();
    let run = Arc::new(run);
    let call = {
        let run = run.clone();
        tokio::spawn(async move { run.dispatch(&prepared).await })
    };
    let started = std::time::Instant::now();
    while run.progress.lock().unwrap().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(10), "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.stop().await;
    let result = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("a stopped call ends promptly")
        .unwrap();
    let ToolResult::Error(failure) = &result else {
        panic!("{result:?}")
    };
    assert_eq!(failure.code, "cancelled");
    // An undeclared function may write: the server had the request.
    assert!(failure.effect_may_have_happened);
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_server_over_stdio() {
    let entry = server_entry();
    let mut config = McpServerConfig::stdio(
        "everything",
        "node",
        [entry.to_string_lossy().into_owned(), "stdio".into()],
    );
    config.env_allow = vec!["PATH".into()];
    exercise(config.clone()).await;

    // The environment is cleared except the allowlist: get-env shows it.
    let server = spawn_mcp_server(&env(), &config).await.unwrap();
    let result = server
        .client
        .call_tool("get-env", json!({}), Default::default())
        .await
        .unwrap();
    let text = serde_json::to_string(&result.content).unwrap();
    assert!(text.contains("PATH"), "{text}");
    for name in ["HOME", "CARGO_MANIFEST_DIR", "CARGO_PKG_NAME"] {
        if std::env::var_os(name).is_some() {
            assert!(
                !text.contains(&format!("\\\"{name}\\\"")),
                "{name} leaked: {text}"
            );
        }
    }

    // S6.2: the definition names the process, so the same server started
    // by another command line is another fingerprint for every function
    // (an approval of the old one does not carry over).
    let fingerprint = |server: &agent_mcp::McpServer| {
        server
            .load
            .registrations
            .iter()
            .find(|r| r.definition.name == "echo")
            .map(|r| r.definition.fingerprint().unwrap())
            .expect("echo")
    };
    let same = spawn_mcp_server(&env(), &config).await.unwrap();
    assert_eq!(
        fingerprint(&server),
        fingerprint(&same),
        "stable for one command line"
    );
    let mut other = config.clone();
    other.args.insert(0, "--no-warnings".into());
    let other = spawn_mcp_server(&env(), &other).await.unwrap();
    assert_ne!(fingerprint(&server), fingerprint(&other));
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_server_over_streamable_http() {
    let entry = server_entry();
    let port = free_port();
    let mut child = tokio::process::Command::new("node")
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let started = std::time::Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the reference server did not listen"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    exercise(McpServerConfig::http(
        "everything",
        format!("http://127.0.0.1:{port}/mcp"),
    ))
    .await;
    child.kill().await.unwrap();
}
