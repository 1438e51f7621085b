//! S2.2: no stored record outside the blob store, and no line of tracing
//! output, contains the prompt, argument or result text of a run. Marker
//! strings are planted in each; every table's stored bytes (keys and values)
//! and the captured tracing output are searched.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use agent_kernel::host::{Storage, Table};
use agent_kernel::run::RunStatus;
use agent_supervisor::sim::tools::SimToolsConfig;
use agent_supervisor::{ModelSettings, RunConfig, RuntimeOptions};

const PROMPT: &str = "PROMPT-MARKER-5b1e";
const SYSTEM: &str = "SYSTEM-MARKER-77aa";
const ARGUMENT: &str = "ARGUMENT-MARKER-c3d9";
const RESULT: &str = "RESULT-MARKER-0f42";
const QUESTION: &str = "QUESTION-MARKER-a1b2";
const ANSWER: &str = "ANSWER-MARKER-e5f6";
const OUTPUT: &str = "OUTPUT-MARKER-9a9a";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn s2_2_markers_never_leave_the_blob_store_or_reach_logs() {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();

    let scenario = format!(
        r#"{{"turns": [
          {{"text": "reading", "tool_calls": [
             {{"name": "read_note", "arguments": {{"path": "notes/a.txt", "message": "{ARGUMENT}"}}}},
             {{"name": "fail_op", "arguments": {{"x": "{ARGUMENT}"}}}},
             {{"name": "ask_user", "arguments": {{"question": "{QUESTION}"}}}}]}},
          {{"text": "{OUTPUT}"}}]}}"#
    );
    let tools = SimToolsConfig {
        note_text: RESULT.into(),
        storage: None,
    };
    let env = common::env_with(&scenario, tools, RuntimeOptions::default());
    let config = RunConfig {
        model: ModelSettings {
            system_prompt: Some(SYSTEM.into()),
            ..ModelSettings::default()
        },
        ..RunConfig::default()
    };
    let storage = env.storage();
    tracing::subscriber::with_default(subscriber, || {
        let run = env.start(&format!("please read {PROMPT}"), config);
        assert_eq!(env.settle(&run).status, RunStatus::AwaitingInput);
        let pending = env.block(env.runtime.pending(&run)).unwrap();
        env.block(env.runtime.respond(&run, &pending[0].id, ANSWER))
            .unwrap();
        assert_eq!(env.settle(&run).status, RunStatus::Completed);
        tracing::info!(run = %run, "test finished");
    });

    let markers = [PROMPT, SYSTEM, ARGUMENT, RESULT, QUESTION, ANSWER, OUTPUT];
    // The markers were stored: in blobs.
    let mut blob_text = String::new();
    for hash in env.block(storage.list_blobs()).unwrap() {
        let bytes = env.block(storage.get_blob(&hash)).unwrap().unwrap();
        blob_text.push_str(&String::from_utf8_lossy(&bytes));
    }
    for m in markers {
        assert!(
            blob_text.contains(m),
            "marker {m} should be in the blob store"
        );
    }
    // ... and nowhere else.
    let mut scanned = 0;
    for table in Table::ALL {
        for (key, value) in env.block(storage.scan_prefix(table, "")).unwrap() {
            scanned += 1;
            let text = format!("{key} {}", String::from_utf8_lossy(&value));
            for m in markers {
                assert!(
                    !text.contains(m),
                    "marker {m} found in table {table:?} at {key}"
                );
            }
        }
    }
    assert!(scanned > 20, "the run wrote records ({scanned})");
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("test finished") && logs.contains("supervisor"),
        "tracing was captured"
    );
    for m in markers {
        assert!(!logs.contains(m), "marker {m} found in tracing output");
    }
}
