//! MCP through the real `agentrt` process (issue 16 item 6, natively): a
//! `[[mcp]]` server in the config file, here the reference server
//! `@modelcontextprotocol/server-everything` started over stdio with an
//! environment allowlist, is connected before the run; the model loads
//! and calls its `echo` (an unknown function: the run waits for the
//! person's approval, and `agentrt approve` continues it); the result is
//! external data with the server as its origin. A server that cannot be
//! reached leaves its tools out and says why, and the run goes on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

fn reference_entry() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../actors/mcp/tests/reference/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        path.exists(),
        "the MCP reference server is not installed at {}; run `cargo xtask install`",
        path.display()
    );
    path
}

fn agentrt(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--config")
        .arg(dir.join("agentrt.toml"))
        .args(args)
        .env("AGENTRT_DATA_DIR", dir.join("data"))
        .env_remove("AGENTRT_TEST_PAUSE")
        .stdin(Stdio::null())
        .output()
        .expect("agentrt")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `settled` event of a `--json` command.
fn settled(out: &Output) -> serde_json::Value {
    let stdout = text(&out.stdout);
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .rfind(|e| e["event"] == "settled")
        .unwrap_or_else(|| panic!("no settled event: {stdout}\n{}", text(&out.stderr)))
}

fn write_config(dir: &Path, servers: &str) {
    std::fs::write(
        dir.join("agentrt.toml"),
        format!("approval = \"permissive\"\n\n{servers}"),
    )
    .expect("config");
    std::fs::write(
        dir.join("scenario.json"),
        r#"{"turns": [
  {"text": "Loading.", "tool_calls": [{"name": "load_tools", "arguments": {"names": ["echo"]}}]},
  {"text": "Echoing.", "tool_calls": [{"name": "echo", "arguments": {"message": "hello over stdio"}}]},
  {"text": "Echoed."}
]}"#,
    )
    .expect("scenario");
}

fn run(dir: &Path) -> Output {
    let scenario = dir.join("scenario.json");
    agentrt(
        dir,
        &[
            "--json",
            "run",
            "echo something",
            "--scenario",
            scenario.to_str().expect("utf8"),
        ],
    )
}

#[test]
fn an_mcp_server_of_the_config_file_is_used_over_stdio_with_the_persons_approval() {
    let entry = reference_entry();
    let dir = tempfile::tempdir().expect("dir");
    write_config(
        dir.path(),
        &format!(
            "[[mcp]]\nid = \"everything\"\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\nenv_allow = [\"PATH\"]\n",
            entry.to_string_lossy()
        ),
    );
    let out = run(dir.path());
    let card = settled(&out);
    assert_eq!(
        card["status"],
        "awaiting_approval",
        "an unknown function asks: {card}\n{}",
        text(&out.stderr)
    );
    let run_id = card["run"].as_str().expect("run").to_owned();
    let request = card["pending"][0]["id"]
        .as_str()
        .expect("request")
        .to_owned();
    let reason = card["pending"][0]["kind"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("unknown MCP function"), "{reason}");

    let approved = agentrt(dir.path(), &["--json", "approve", &run_id, &request]);
    let card = settled(&approved);
    assert_eq!(
        card["status"],
        "completed",
        "{card}\n{}",
        text(&approved.stderr)
    );

    let shown = agentrt(dir.path(), &["--json", "show", &run_id]);
    let view: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("show --json");
    let evidence = view["evidence"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["tool"] == "echo").cloned())
        .unwrap_or_else(|| panic!("{view}"));
    assert_eq!(evidence["trust"], "external_untrusted");
    assert_eq!(evidence["provenance"]["origin"], "mcp:everything");
    // Asked once, never remembered: the same call in a new run asks again.
    let again = run(dir.path());
    assert_eq!(settled(&again)["status"], "awaiting_approval");
}

#[test]
fn an_unreachable_mcp_server_is_reported_and_the_run_goes_on() {
    let dir = tempfile::tempdir().expect("dir");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    write_config(
        dir.path(),
        &format!(
            "[[mcp]]\nid = \"down\"\nurl = \"http://127.0.0.1:{closed}/mcp\"\ntimeout_ms = 2000\n"
        ),
    );
    let out = run(dir.path());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("MCP server down: not connected"),
        "{stderr}"
    );
    // Its tools are not there: loading echo is a resolution error the model
    // reads, and the run ends as the model then answers.
    assert_eq!(settled(&out)["status"], "completed", "{stderr}");
}

#[test]
fn a_bad_mcp_table_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("dir");
    for (servers, why) in [
        ("[[mcp]]\nid = \"x\"\n", "neither url nor command"),
        (
            "[[mcp]]\nid = \"mcp\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
            "a reserved id",
        ),
        (
            "[[mcp]]\nid = \"x\"\nurl = \"http://127.0.0.1:9/mcp\"\n[mcp.headers]\nAuthorization = \"Bearer literal\"\n",
            "a literal credential",
        ),
        (
            "[[mcp]]\nid = \"x\"\nurl = \"http://127.0.0.1:9/mcp\"\n[[mcp]]\nid = \"x\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
            "an id twice",
        ),
        (
            "[[mcp]]\nid = \"x\"\nurl = \"http://127.0.0.1:9/mcp\"\nshell = true\n",
            "an unknown field",
        ),
    ] {
        write_config(dir.path(), servers);
        let out = run(dir.path());
        assert_eq!(out.status.code(), Some(2), "{why}: {}", text(&out.stderr));
    }
}
