//! `agentrt run --provider openai-compatible` against an OpenAI-compatible
//! streaming endpoint on loopback, started here: the API key comes from the
//! environment only and reaches the server as a bearer token; a missing key
//! is one clear line and exit 2.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

fn start_model() -> (u16, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let s = s.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                s.lock().expect("seen").push(auth);
                let body = [
                    r#"{"choices":[{"index":0,"delta":{"content":"Hello from "},"finish_reason":null}]}"#,
                    r#"{"choices":[{"index":0,"delta":{"content":"loopback."},"finish_reason":null}]}"#,
                    r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                    r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4}}"#,
                ]
                .iter()
                .map(|c| format!("data: {c}\n\n"))
                .collect::<String>()
                    + "data: [DONE]\n\n";
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(body))
                    .expect("response")
            }
        }),
    );
    (common::serve_on_loopback(app), seen)
}

#[test]
fn run_with_an_openai_compatible_provider_uses_the_key_from_the_environment() {
    let dir = tempfile::tempdir().expect("dir");
    // Private, so that stderr holds only the error under test (an open
    // data directory is warned about: tests/file_modes.rs).
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    let (port, seen) = start_model();
    let base = format!("http://127.0.0.1:{port}/v1");
    let out = Command::new(BIN)
        .args([
            "run",
            "say hello",
            "--provider",
            "openai-compatible",
            "--base-url",
            &base,
            "--model",
            "tiny",
        ])
        .env("AGENTRT_DATA_DIR", dir.path())
        .env("OPENAI_API_KEY", "sk-test-from-env")
        .stdin(Stdio::null())
        .output()
        .expect("agentrt");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        seen.lock().expect("seen").as_slice(),
        ["Bearer sk-test-from-env"]
    );
    // The key is in no stored record or blob.
    let db = std::fs::read(dir.path().join(agent_host_native::host::DATABASE_FILE)).expect("db");
    let wal = std::fs::read(
        dir.path()
            .join(format!("{}-wal", agent_host_native::host::DATABASE_FILE)),
    )
    .unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(
            !bytes.windows(16).any(|w| w == b"sk-test-from-env"),
            "the API key never reaches storage"
        );
    }
    // Without the key: one clear line, usage error, no request made.
    let out = Command::new(BIN)
        .args([
            "run",
            "again",
            "--provider",
            "openai-compatible",
            "--base-url",
            &base,
            "--model",
            "tiny",
        ])
        .env("AGENTRT_DATA_DIR", dir.path())
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("agentrt");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("OPENAI_API_KEY"), "{err}");
    assert_eq!(seen.lock().expect("seen").len(), 1);
}
