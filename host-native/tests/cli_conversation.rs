//! `agentrt run` against an OpenAI-compatible streaming server on loopback,
//! started here, which records every request body (issue 14 items 1, 2 and
//! 4, SPEC S12): the system prompt the model receives (the default Agent
//! prompt, `--system` replacing it, `--system-extension` after it), a
//! session's runs as one conversation (the third request carries the first
//! two turns), and the final answer printed when the run ends without a
//! terminal (stdout text, or the last `--json` event).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use agent_supervisor::AGENT_SYSTEM_PROMPT;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

type Bodies = Arc<Mutex<Vec<serde_json::Value>>>;

/// A streaming chat-completions endpoint that answers "You said: <the last
/// user message>" and keeps every request body it receives.
fn start_model() -> (String, Bodies) {
    let bodies: Bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| {
            let seen = seen.clone();
            async move {
                let last_user = body["messages"]
                    .as_array()
                    .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().expect("bodies").push(body);
                let chunks = [
                    serde_json::json!({"choices":[{"index":0,"delta":{"content":"You said: "},"finish_reason":null}]}),
                    serde_json::json!({"choices":[{"index":0,"delta":{"content":last_user},"finish_reason":null}]}),
                    serde_json::json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
                    serde_json::json!({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4}}),
                ];
                let body = chunks
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
    let port = common::serve_on_loopback(app);
    (format!("http://127.0.0.1:{port}/v1"), bodies)
}

fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    // Private, so that stderr holds only what the test looks at.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    dir
}

/// `agentrt [--json] run PROMPT --provider … EXTRA…` without a terminal.
fn run(data: &Path, base: &str, json: bool, prompt: &str, extra: &[&str]) -> Output {
    let mut args: Vec<&str> = Vec::new();
    if json {
        args.push("--json");
    }
    args.extend([
        "run",
        prompt,
        "--provider",
        "openai-compatible",
        "--base-url",
        base,
        "--model",
        "tiny",
    ]);
    args.extend(extra);
    Command::new(BIN)
        .args(&args)
        .env("AGENTRT_DATA_DIR", data)
        .env("OPENAI_API_KEY", "sk-test")
        .env_remove("RUST_LOG")
        .env_remove("AGENTRT_TEST_PAUSE")
        .stdin(Stdio::null())
        .output()
        .expect("agentrt")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The (role, content) pairs of one request body.
fn messages(body: &serde_json::Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().expect("role").to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(r, c)| ((*r).to_owned(), (*c).to_owned()))
        .collect()
}

/// Issue 14 item 2: without flags the model receives the default Agent
/// system prompt; `--system` replaces it; `--system-extension` follows it
/// (the default one, or the replaced one).
#[test]
fn the_system_prompt_is_the_default_replaced_or_extended() {
    let dir = private_dir();
    let (base, bodies) = start_model();
    let default = AGENT_SYSTEM_PROMPT.trim_end();
    let cases: [(&[&str], String); 4] = [
        (&[], default.to_owned()),
        (
            &["--system", "You are a pirate."],
            "You are a pirate.".into(),
        ),
        (
            &["--system-extension", "Answer in French."],
            format!("{default}\n\nAnswer in French."),
        ),
        (
            &[
                "--system",
                "You are a pirate.",
                "--system-extension",
                "Answer in French.",
            ],
            "You are a pirate.\n\nAnswer in French.".into(),
        ),
    ];
    for (i, (flags, expected)) in cases.iter().enumerate() {
        let out = run(dir.path(), &base, false, "hello", flags);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let bodies = bodies.lock().expect("bodies");
        assert_eq!(bodies.len(), i + 1);
        assert_eq!(
            messages(&bodies[i]),
            pairs(&[("system", expected), ("user", "hello")]),
            "flags {flags:?}"
        );
    }
}

/// A system prompt over the runtime's bound is a usage error; nothing is sent.
#[test]
fn an_oversized_system_prompt_is_refused_before_any_request() {
    let dir = private_dir();
    let (base, bodies) = start_model();
    let huge = "x".repeat(agent_supervisor::MAX_SYSTEM_PROMPT_BYTES + 1);
    for flag in ["--system", "--system-extension"] {
        let out = run(dir.path(), &base, false, "hello", &[flag, &huge]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("bytes"), "{err}");
    }
    assert!(bodies.lock().expect("bodies").is_empty());
}

/// Issue 14 acceptance item 1 (native CLI side, S12): three `agentrt run
/// --session S` in a row; the third request the server receives carries the
/// first two turns' prompts and answers. Each run prints its answer on
/// stdout without a terminal (item 4).
#[test]
fn a_three_turn_session_sends_the_first_two_turns_with_the_third() {
    let dir = private_dir();
    let (base, bodies) = start_model();
    for prompt in ["first", "second", "third"] {
        let out = run(dir.path(), &base, false, prompt, &["--session", "chat-1"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), format!("You said: {prompt}\n"));
    }
    {
        let bodies = bodies.lock().expect("bodies");
        assert_eq!(bodies.len(), 3);
        assert_eq!(
            messages(&bodies[2]),
            pairs(&[
                ("system", AGENT_SYSTEM_PROMPT.trim_end()),
                ("user", "first"),
                ("assistant", "You said: first"),
                ("user", "second"),
                ("assistant", "You said: second"),
                ("user", "third"),
            ])
        );
    }
    // Another session starts a conversation of its own.
    let out = run(dir.path(), &base, false, "fresh", &["--session", "chat-2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let bodies = bodies.lock().expect("bodies");
    assert_eq!(
        messages(&bodies[3]),
        pairs(&[
            ("system", AGENT_SYSTEM_PROMPT.trim_end()),
            ("user", "fresh")
        ])
    );
}

/// Issue 14 item 4: with `--json` the answer is the last event, after
/// `settled`, and stdout stays one JSON object per line.
#[test]
fn with_json_the_answer_is_the_last_event() {
    let dir = private_dir();
    let (base, _bodies) = start_model();
    let out = run(dir.path(), &base, true, "ping", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    let [.., settled, answer] = events.as_slice() else {
        panic!("at least two events: {events:?}");
    };
    assert_eq!(settled["event"], "settled");
    assert_eq!(answer["event"], "answer");
    assert_eq!(answer["text"], "You said: ping");
    assert_eq!(answer["run"], settled["run"]);
    assert_eq!(events.iter().filter(|e| e["event"] == "answer").count(), 1);
}

/// S9.1 (issue 14 item 4): `--mode chat` offers the model no tools and no
/// default Agent system prompt (`--system` still applies); Agent mode, the
/// default, offers tools.
#[test]
fn chat_mode_sends_no_tools_and_no_default_system_prompt() {
    let dir = private_dir();
    let (base, bodies) = start_model();
    let out = run(dir.path(), &base, false, "hi", &["--mode", "chat"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "You said: hi\n");
    let out = run(
        dir.path(),
        &base,
        false,
        "hi again",
        &["--mode", "chat", "--system", "Be kind."],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run(dir.path(), &base, false, "work", &["--mode", "agent"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let bodies = bodies.lock().expect("bodies");
    let tools = |b: &serde_json::Value| b["tools"].as_array().map_or(0, Vec::len);
    assert_eq!(messages(&bodies[0]), pairs(&[("user", "hi")]));
    assert_eq!(tools(&bodies[0]), 0, "{}", bodies[0]);
    assert_eq!(
        messages(&bodies[1]),
        pairs(&[("system", "Be kind."), ("user", "hi again")])
    );
    assert_eq!(tools(&bodies[1]), 0);
    assert_eq!(messages(&bodies[2])[0].1, AGENT_SYSTEM_PROMPT.trim_end());
    assert!(tools(&bodies[2]) > 0, "Agent mode offers tools");
    // An unknown mode is a usage error.
    let out = run(dir.path(), &base, false, "x", &["--mode", "research"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(bodies.len(), 3);
}

/// `agentrt [--json] compact SESSION` with the loopback model.
fn compact(data: &Path, base: &str, session: &str) -> serde_json::Value {
    let out = Command::new(BIN)
        .args([
            "--json",
            "compact",
            session,
            "--provider",
            "openai-compatible",
            "--base-url",
            base,
            "--model",
            "tiny",
        ])
        .env("AGENTRT_DATA_DIR", data)
        .env("OPENAI_API_KEY", "sk-test")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("agentrt");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// S12.4 (issue 37 part 1): `agentrt compact SESSION` has the model
/// summarise every turn but the newest (a tool-less request under the
/// summarisation prompt, as the server receives it); the next run sends
/// the summary after the system prompt and only the newest turn; the next
/// compaction folds what followed; with nothing to fold, it says so.
#[test]
fn compact_summarises_all_but_the_newest_turn_and_the_next_run_sends_the_summary() {
    let dir = private_dir();
    let (base, bodies) = start_model();
    for prompt in ["first", "second", "third"] {
        let out = run(dir.path(), &base, false, prompt, &["--session", "chat-c"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let made = compact(dir.path(), &base, "chat-c");
    assert_eq!(made["event"], "conversation_compacted", "{made}");
    assert_eq!(made["turns_covered"], 2, "{made}");
    {
        let bodies = bodies.lock().expect("bodies");
        assert_eq!(bodies.len(), 4);
        let asked = &bodies[3];
        assert_eq!(
            asked["messages"][0]["content"].as_str(),
            Some(agent_supervisor::compaction::SUMMARY_PROMPT)
        );
        assert!(asked.get("tools").is_none(), "{asked}");
        let text = asked["messages"][1]["content"].as_str().unwrap_or_default();
        assert!(text.contains("Person: first") && text.contains("Person: second"));
        assert!(!text.contains("Person: third"), "{text}");
    }
    let out = run(dir.path(), &base, false, "fourth", &["--session", "chat-c"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    {
        let bodies = bodies.lock().expect("bodies");
        let sent = messages(&bodies[4]);
        assert_eq!(sent.len(), 4, "{sent:?}");
        assert_eq!(sent[0].0, "system");
        assert!(sent[0].1.starts_with(AGENT_SYSTEM_PROMPT.trim_end()));
        assert!(
            sent[0]
                .1
                .contains("Summary of the earlier conversation (2 turn(s)"),
            "{}",
            sent[0].1
        );
        assert_eq!(
            sent[1..],
            pairs(&[
                ("user", "third"),
                ("assistant", "You said: third"),
                ("user", "fourth"),
            ])[..]
        );
    }
    let again = compact(dir.path(), &base, "chat-c");
    assert_eq!(again["turns_covered"], 3, "{again}");
    let nothing = compact(dir.path(), &base, "chat-c");
    assert_eq!(nothing["event"], "nothing_to_compact", "{nothing}");
}
