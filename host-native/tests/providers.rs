//! `agentrt run --provider openai-compatible|gemini|anthropic` through the
//! binary, against loopback servers started here that speak each format
//! (S13, issue 15 item 4):
//! - the key comes from the environment only (the provider's usual
//!   variable, or the one the config names) and reaches the server in the
//!   format's own header; it is in no stored byte, and not on stdout or
//!   stderr (S13.3);
//! - a keyless local server needs no key (`--base-url` alone);
//! - the provider's own public endpoint without a key is one clear line and
//!   exit 2, and no request is made;
//! - a config-named key variable that is not set is refused likewise.

use std::collections::HashMap;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use axum::extract::Path;
use axum::http::HeaderMap;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");
const MARKER: &str = "key-marker-7f3a9c";

/// What each request carried: the path and the auth headers.
type Seen = Arc<Mutex<Vec<(String, HashMap<String, String>)>>>;

fn sse(events: &[&str]) -> String {
    events.iter().map(|e| format!("data: {e}\n\n")).collect()
}

fn stream(body: String) -> axum::response::Response {
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from(body))
        .expect("response")
}

fn record(seen: &Seen, path: String, headers: &HeaderMap) {
    let auth = [
        "authorization",
        "x-goog-api-key",
        "x-api-key",
        "anthropic-version",
    ]
    .iter()
    .filter_map(|h| {
        headers
            .get(*h)
            .and_then(|v| v.to_str().ok())
            .map(|v| ((*h).to_owned(), v.to_owned()))
    })
    .collect();
    seen.lock().expect("seen").push((path, auth));
}

fn start_models() -> (u16, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let (a, b, c) = (seen.clone(), seen.clone(), seen.clone());
    let app = axum::Router::new()
        .route(
            "/oa/v1/chat/completions",
            axum::routing::post(move |headers: HeaderMap| {
                let seen = a.clone();
                async move {
                    record(&seen, "openai".into(), &headers);
                    stream(
                        sse(&[
                            r#"{"choices":[{"index":0,"delta":{"content":"Hello from openai."},"finish_reason":null}]}"#,
                            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                        ]) + "data: [DONE]\n\n",
                    )
                }
            }),
        )
        .route(
            "/gm/v1beta/models/{action}",
            axum::routing::post(move |Path(action): Path<String>, headers: HeaderMap| {
                let seen = b.clone();
                async move {
                    record(&seen, format!("gemini {action}"), &headers);
                    stream(sse(&[
                        r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello from gemini."}]},"index":0}]}"#,
                        r#"{"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":4}}"#,
                    ]))
                }
            }),
        )
        .route(
            "/an/v1/messages",
            axum::routing::post(move |headers: HeaderMap| {
                let seen = c.clone();
                async move {
                    record(&seen, "anthropic".into(), &headers);
                    stream(sse(&[
                        r#"{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}"#,
                        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello from anthropic."}}"#,
                        r#"{"type":"content_block_stop","index":0}"#,
                        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}"#,
                        r#"{"type":"message_stop"}"#,
                    ]))
                }
            }),
        );
    (common::serve_on_loopback(app), seen)
}

fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    // Private, so that stderr holds only what is under test (an open data
    // directory is warned about: tests/file_modes.rs).
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    dir
}

fn agentrt(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("AGENTRT_DATA_DIR", dir)
        .stdin(Stdio::null());
    for var in [
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "ANTHROPIC_API_KEY",
        "MY_KEY",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("agentrt")
}

/// The key is in no stored byte (database, WAL, anything in the folder).
fn assert_key_stored_nowhere(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).expect("dir").flatten() {
        let bytes = std::fs::read(entry.path()).unwrap_or_default();
        assert!(
            !bytes.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()),
            "the API key reached {}",
            entry.path().display()
        );
    }
}

const PROVIDERS: [(&str, &str, &str, &str); 3] = [
    ("openai-compatible", "oa/v1", "OPENAI_API_KEY", "tiny"),
    ("gemini", "gm/v1beta", "GEMINI_API_KEY", "gemini-2.5-flash"),
    (
        "anthropic",
        "an/v1",
        "ANTHROPIC_API_KEY",
        "claude-sonnet-4-5",
    ),
];

#[test]
fn each_provider_runs_with_its_key_from_the_environment_and_without_one_on_a_local_server() {
    let (port, seen) = start_models();
    for (provider, path, variable, model) in PROVIDERS {
        let dir = private_dir();
        let base = format!("http://127.0.0.1:{port}/{path}");
        // The key goes only to an endpoint the configuration names (issue
        // 32): this section names the loopback one, with the usual variable.
        let config = dir.path().join("agentrt.toml");
        std::fs::write(
            &config,
            format!(
                "[provider]\nkind = \"{provider}\"\nbase_url = \"{base}/\"\nmodel = \"{model}\"\n"
            ),
        )
        .expect("config");
        let config = config.to_string_lossy().into_owned();
        let args = [
            "--config",
            &config,
            "run",
            "say hello",
            "--provider",
            provider,
            "--base-url",
            &base,
            "--model",
            model,
        ];
        let out = agentrt(dir.path(), &args, &[(variable, MARKER)]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{provider}: {stderr}");
        let short = provider.split('-').next().unwrap_or(provider);
        assert!(
            stdout.contains(&format!("Hello from {short}.")),
            "{provider}: the answer is printed: {stdout}"
        );
        assert!(!stdout.contains(MARKER) && !stderr.contains(MARKER));
        assert_key_stored_nowhere(dir.path());
        let (seen_path, headers) = seen.lock().expect("seen").pop().expect("a request");
        match provider {
            "openai-compatible" => {
                assert_eq!(headers["authorization"], format!("Bearer {MARKER}"));
            }
            "gemini" => {
                assert_eq!(seen_path, format!("gemini {model}:streamGenerateContent"));
                assert_eq!(headers["x-goog-api-key"], MARKER);
                assert!(!headers.contains_key("authorization"));
            }
            _ => {
                assert_eq!(headers["x-api-key"], MARKER);
                assert_eq!(headers["anthropic-version"], "2023-06-01");
            }
        }

        // The same endpoint without the configuration naming it: the key
        // in the environment is not sent (issue 32), and the run works.
        let out = agentrt(dir.path(), &args[2..], &[(variable, MARKER)]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{provider} unconfigured: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (_, headers) = seen.lock().expect("seen").pop().expect("a request");
        assert!(
            !headers.values().any(|v| v.contains(MARKER)),
            "{provider}: an unconfigured endpoint got the key: {headers:?}"
        );

        // A keyless local server: no key, no auth header, and it works.
        let out = agentrt(dir.path(), &args, &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{provider} keyless: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (_, headers) = seen.lock().expect("seen").pop().expect("a request");
        assert!(
            !headers.contains_key("authorization")
                && !headers.contains_key("x-goog-api-key")
                && !headers.contains_key("x-api-key"),
            "{provider}: {headers:?}"
        );
    }
}

#[test]
fn a_public_endpoint_without_its_key_is_one_clear_line_and_no_request() {
    let (port, seen) = start_models();
    for (provider, _, variable, model) in PROVIDERS {
        let dir = private_dir();
        let out = agentrt(
            dir.path(),
            &["run", "hi", "--provider", provider, "--model", model],
            &[],
        );
        assert_eq!(out.status.code(), Some(2), "{provider}");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(variable), "{provider}: {err}");
    }
    // A key variable the config names must be set, even for a local server.
    let dir = private_dir();
    let config = dir.path().join("agentrt.toml");
    std::fs::write(
        &config,
        format!(
            "[provider]\nkind = \"gemini\"\nbase_url = \"http://127.0.0.1:{port}/gm/v1beta\"\nmodel = \"gemini-2.5-flash\"\napi_key_env = \"MY_KEY\"\n"
        ),
    )
    .expect("config");
    let config = config.to_string_lossy().into_owned();
    let out = agentrt(dir.path(), &["--config", &config, "run", "hi"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("MY_KEY"));
    let out = agentrt(
        dir.path(),
        &["--config", &config, "run", "hi"],
        &[("MY_KEY", MARKER)],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_key_stored_nowhere(dir.path());
    let requests = seen.lock().expect("seen").clone();
    assert_eq!(
        requests.len(),
        1,
        "only the configured run reached a server"
    );
    assert_eq!(requests[0].1["x-goog-api-key"], MARKER);
}
