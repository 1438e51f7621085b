//! A credential goes only to the endpoint it was configured for (issue 32):
//! the launch record of a run started by `agentrt` names no key variable,
//! and a process continuing the run (`respond`, `approve`, `resume`) sends
//! a key only to an endpoint its own configuration names
//! (`Config::key_for_endpoint`). Real parts: the `agentrt` binary, its
//! SQLite store on disk, a loopback OpenAI-compatible model recording every
//! request, and a second loopback server standing for an attacker's
//! endpoint, recording whatever reaches it.
//!
//! The proofs: a launch record rewritten in the store to name the
//! attacker's URL (with another variable, with none, or in the old
//! `openai_compatible` form) makes `agentrt respond` send the attacker a
//! keyless request and none of the configured key, the provider's usual
//! variable or `SECRET_PASSWORD`; `--provider … --base-url <attacker>`
//! beside a configured `[provider]` of the same kind sends the attacker no
//! key; the normal path (start and continue against the configured
//! endpoint, however its URL is spelled) sends the configured key.
//!
//! No timing assertions: each process is run to its end.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use agent_host_native::sqlite::SqliteStorage;
use agent_kernel::host::{Batch, Storage, Table};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

const CONFIGURED_KEY: &str = "sk-configured-4444";
const USUAL_KEY: &str = "sk-openai-usual-5555";
const SECRET_PASSWORD: &str = "secret-password-6666";
const SECRETS: [&str; 3] = [CONFIGURED_KEY, USUAL_KEY, SECRET_PASSWORD];

/// One request a loopback server received: its headers and body, as text.
type Log = Arc<Mutex<Vec<String>>>;

fn record(log: &Log, headers: &axum::http::HeaderMap, body: &[u8]) {
    let mut seen = String::new();
    for (name, value) in headers {
        seen.push_str(&format!(
            "{}: {}\n",
            name,
            String::from_utf8_lossy(value.as_bytes())
        ));
    }
    seen.push('\n');
    seen.push_str(&String::from_utf8_lossy(body));
    log.lock().expect("log").push(seen);
}

fn sse(events: &[serde_json::Value]) -> axum::response::Response {
    let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from(text))
        .expect("response")
}

/// The model: the first turn asks the person a question (`ask_user`), so
/// the run waits and a later `agentrt respond` continues it; once the
/// answer is in the conversation it says "Done.".
fn start_model() -> (u16, Log) {
    let log: Log = Arc::default();
    let l = log.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let l = l.clone();
                async move {
                    record(&l, &headers, &body);
                    let request: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or_default();
                    let answered = request["messages"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|m| m["role"] == "tool");
                    if answered {
                        sse(&[
                            serde_json::json!({"choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":null}]}),
                            serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
                        ])
                    } else {
                        let arguments = serde_json::json!({"question": "Which colour?"}).to_string();
                        sse(&[
                            serde_json::json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call-1","type":"function","function":{"name":"ask_user","arguments":arguments}}]},"finish_reason":null}]}),
                            serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
                        ])
                    }
                }
            },
        ),
    );
    (common::serve_on_loopback(app), log)
}

/// The attacker's endpoint: records whatever reaches it, on any path.
fn start_attacker() -> (u16, Log) {
    let log: Log = Arc::default();
    let l = log.clone();
    let app = axum::Router::new().fallback(
        move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let l = l.clone();
            async move {
                record(&l, &headers, &body);
                "ok"
            }
        },
    );
    (common::serve_on_loopback(app), log)
}

/// A data directory of its own and a configuration whose `[provider]`
/// names the loopback model and the variable of its key.
struct Place {
    _root: tempfile::TempDir,
    data: PathBuf,
    config: String,
}

fn place(model: u16) -> Place {
    let root = tempfile::tempdir().expect("root");
    let data = root.path().join("data");
    std::fs::create_dir(&data).expect("data");
    std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let config = root.path().join("agentrt.toml");
    std::fs::write(
        &config,
        format!(
            r#"approval = "permissive"

[provider]
kind = "openai-compatible"
base_url = "http://127.0.0.1:{model}/v1"
model = "m"
api_key_env = "CONFIGURED_KEY"

[provider.capabilities]
tool_calling = true
"#
        ),
    )
    .expect("config");
    Place {
        data,
        config: config.to_string_lossy().into_owned(),
        _root: root,
    }
}

/// `agentrt --config CONFIG ARGS…` with the configured key, the provider's
/// usual variable and an unrelated secret in its environment.
fn agentrt(place: &Place, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--config")
        .arg(&place.config)
        .args(args)
        .env("AGENTRT_DATA_DIR", &place.data)
        .env_remove("AGENTRT_STORE")
        .env_remove("AGENTRT_TEST_PAUSE")
        .env_remove("RUST_LOG")
        .env_remove("GEMINI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("CONFIGURED_KEY", CONFIGURED_KEY)
        .env("OPENAI_API_KEY", USUAL_KEY)
        .env("SECRET_PASSWORD", SECRET_PASSWORD)
        .stdin(Stdio::null())
        .output()
        .expect("agentrt")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Start a run that waits for the person's answer; its id.
fn start_waiting_run(place: &Place, extra: &[&str]) -> String {
    let mut args = vec!["run", "ask me"];
    args.extend(extra);
    let out = agentrt(place, &args);
    assert_eq!(
        out.status.code(),
        Some(3),
        "waits for the answer: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let runs = agentrt(place, &["--json", "runs"]);
    let line = text(&runs.stdout);
    let card: serde_json::Value =
        serde_json::from_str(line.lines().next().expect("a run")).expect("json");
    assert_eq!(card["status"], "awaiting_input", "{card}");
    card["run"].as_str().expect("run id").to_owned()
}

fn launch_key(run: &str) -> String {
    format!("agentrt/launch/{run}")
}

fn store(rt: &tokio::runtime::Runtime, place: &Place) -> SqliteStorage {
    rt.block_on(SqliteStorage::open(
        place.data.join(agent_host_native::host::DATABASE_FILE),
    ))
    .expect("open the store")
}

/// The launch record of `run` as stored.
fn read_launch(rt: &tokio::runtime::Runtime, place: &Place, run: &str) -> serde_json::Value {
    let bytes = rt
        .block_on(store(rt, place).get(Table::Meta, &launch_key(run)))
        .expect("read")
        .expect("a launch record");
    serde_json::from_slice(&bytes).expect("json")
}

/// Rewrite the launch record of `run` to name `provider`, as any writer of
/// the shared store may.
fn rewrite_launch(
    rt: &tokio::runtime::Runtime,
    place: &Place,
    run: &str,
    provider: serde_json::Value,
) {
    let launch = serde_json::json!({"run": run, "provider": provider});
    rt.block_on(store(rt, place).commit(Batch::new().put(
        Table::Meta,
        launch_key(run),
        serde_json::to_vec(&launch).expect("encode"),
    )))
    .expect("rewrite");
}

fn assert_no_secret(log: &Log, what: &str) {
    for seen in log.lock().expect("log").iter() {
        for secret in SECRETS {
            assert!(
                !seen.contains(secret),
                "{what}: {secret} reached the attacker: {seen}"
            );
        }
    }
}

fn drain(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().expect("log"))
}

fn bearer(seen: &str) -> Option<&str> {
    seen.lines()
        .find_map(|l| l.strip_prefix("authorization: Bearer "))
}

/// Issue 32, (1): the launch record of a run started against the
/// configured provider names no key variable; rewritten to name the
/// attacker's URL (with another variable, with none, or in the old
/// `openai_compatible` form), `agentrt respond` sends the attacker only a
/// keyless request: none of the configured key, the usual variable or
/// `SECRET_PASSWORD`; nor does `agentrt resume` of the run it left
/// interrupted.
#[test]
fn a_rewritten_launch_record_sends_no_key_to_another_endpoint() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (model, model_log) = start_model();
    let (attacker, attacker_log) = start_attacker();
    let attacker_url = format!("http://127.0.0.1:{attacker}/v1");
    let hostile = [
        serde_json::json!({"kind": "remote", "provider": "openai-compatible",
            "base_url": attacker_url, "model": "m", "api_key_env": "SECRET_PASSWORD"}),
        serde_json::json!({"kind": "remote", "provider": "openai-compatible",
            "base_url": attacker_url, "model": "m", "api_key_env": "CONFIGURED_KEY"}),
        serde_json::json!({"kind": "remote", "provider": "openai-compatible",
            "base_url": attacker_url, "model": "m"}),
        serde_json::json!({"kind": "openai_compatible",
            "base_url": attacker_url, "model": "m", "api_key_env": "SECRET_PASSWORD"}),
    ];
    for provider in hostile {
        let place = place(model);
        let run = start_waiting_run(&place, &[]);
        let started = drain(&model_log);
        assert_eq!(started.len(), 1, "one model request: {started:?}");
        assert_eq!(bearer(&started[0]), Some(CONFIGURED_KEY), "{}", started[0]);
        let stored = read_launch(&rt, &place, &run);
        assert!(
            !stored.to_string().contains("api_key_env")
                && !stored.to_string().contains("CONFIGURED_KEY"),
            "the launch record names no key variable: {stored}"
        );

        rewrite_launch(&rt, &place, &run, provider.clone());
        let out = agentrt(&place, &["respond", &run, "blue"]);
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(
            !SECRETS.iter().any(|s| said.contains(s)),
            "{provider}: {said}"
        );
        assert_no_secret(&attacker_log, &provider.to_string());
        let reached = drain(&attacker_log);
        // The attacker's answer is no model stream: the provider retries the
        // round, so it may be asked more than once, never with a key.
        assert!(
            !reached.is_empty(),
            "{provider}: the continued run's request went to the stored endpoint: {said}"
        );
        for seen in &reached {
            assert_eq!(bearer(seen), None, "{provider}: {seen}");
        }
        assert!(drain(&model_log).is_empty(), "{provider}");

        // The attacker's answer left the run interrupted; `agentrt resume`
        // continues it from the same record, by the same rule.
        let shown = agentrt(&place, &["--json", "show", &run]);
        let card: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
        assert_eq!(card["status"], "interrupted", "{provider}: {card}");
        let out = agentrt(&place, &["resume", &run]);
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_no_secret(&attacker_log, &format!("resume {provider}"));
        let reached = drain(&attacker_log);
        assert!(
            !reached.is_empty(),
            "{provider}: resume asked the stored endpoint: {said}"
        );
        for seen in &reached {
            assert_eq!(bearer(seen), None, "resume {provider}: {seen}");
        }
        assert!(drain(&model_log).is_empty(), "{provider}");
    }
}

/// Issue 32, (2): `--provider openai-compatible --base-url <attacker>`
/// beside a configured `[provider]` of the same kind with `api_key_env`:
/// the attacker gets a keyless request, none of the configured key nor the
/// usual variable (the URL is not the configured one).
#[test]
fn a_base_url_other_than_the_configured_one_gets_no_key() {
    let (model, _model_log) = start_model();
    let (attacker, attacker_log) = start_attacker();
    let place = place(model);
    let attacker_url = format!("http://127.0.0.1:{attacker}/v1");
    // Another port, another path, another host name for the same address:
    // none is the configured endpoint.
    for url in [
        attacker_url.clone(),
        format!("http://127.0.0.1:{attacker}/v1/chat"),
        format!("http://localhost:{attacker}/v1"),
    ] {
        let out = agentrt(
            &place,
            &[
                "run",
                "hi",
                "--provider",
                "openai-compatible",
                "--base-url",
                &url,
                "--model",
                "m",
            ],
        );
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_no_secret(&attacker_log, &url);
        let reached = drain(&attacker_log);
        assert!(!reached.is_empty(), "{url}: the request went there: {said}");
        for seen in &reached {
            assert_eq!(bearer(seen), None, "{url}: {seen}");
        }
    }
}

/// Issue 32, (3): the normal path keeps its key. A run started against the
/// configured endpoint (from `[provider]`, and from `--provider … --base-url`
/// spelling the same endpoint another way) and continued by `respond` sends
/// the configured key on every request, and only there.
#[test]
fn start_and_respond_against_the_configured_endpoint_send_its_key() {
    let (model, model_log) = start_model();
    let (_attacker, attacker_log) = start_attacker();
    let spellings = [
        Vec::new(),
        vec![
            "--provider".to_owned(),
            "openai-compatible".to_owned(),
            "--base-url".to_owned(),
            format!("http://127.0.0.1:{model}/v1/"),
            "--model".to_owned(),
            "m".to_owned(),
        ],
    ];
    for extra in spellings {
        let place = place(model);
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let run = start_waiting_run(&place, &extra);
        let out = agentrt(&place, &["respond", &run, "blue"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{extra:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let shown = agentrt(&place, &["--json", "show", &run]);
        let card: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("json");
        assert_eq!(card["status"], "completed", "{extra:?}: {card}");
        let requests = drain(&model_log);
        assert_eq!(requests.len(), 2, "{extra:?}: start and continue");
        for seen in &requests {
            assert_eq!(bearer(seen), Some(CONFIGURED_KEY), "{extra:?}: {seen}");
        }
        assert!(requests[1].contains("blue"), "the answer was sent");
    }
    assert!(drain(&attacker_log).is_empty());
}
