//! A run with an `EndingCall` (S9.3: a Deep Research start turn shows only
//! `start_deep_research` and stops after it), on the memory host with the
//! test tools actor and the scripted provider: the model is offered only
//! the ending tool; of its calls only the first call of that tool is kept
//! (another tool is never dispatched); a response without it gets the
//! runtime's own call with the fallback arguments, through the same journal
//! and capability path; the run completes with the call's result and the
//! model is not asked again.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use agent_kernel::run::RunStatus;
use agent_supervisor::{EndingCall, RunConfig};
use serde_json::{Value, json};

fn ending(fallback: Value) -> RunConfig {
    RunConfig {
        ending_call: Some(EndingCall {
            tool: "read_note".into(),
            fallback_arguments: fallback,
        }),
        ..RunConfig::default()
    }
}

#[test]
fn s9_3_only_the_ending_tool_is_offered_and_the_turn_ends_after_its_call() {
    let env = common::env(
        r#"{"turns": [
            {"text": "", "tool_calls": [
                {"name": "send_ticket", "arguments": {"title": "never"}},
                {"name": "read_note", "arguments": {"path": "mine.txt"}},
                {"name": "read_note", "arguments": {"path": "second.txt"}}]},
            {"text": "never asked"}]}"#,
    );
    let run = env.start("Research this.", ending(json!({"path": "fallback.txt"})));
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(env.log.tickets(), 0, "the other tool was never dispatched");
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].tool, "read_note");
    assert_eq!(record.usage.tool_calls, 1);
    let requests = env.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "the model is not asked after the call");
    let offered: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, vec!["read_note"]);
    let output = env.block(env.runtime.output(&run)).unwrap().unwrap();
    let output: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(output["ok"], json!(true), "{output}");
}

#[test]
fn s9_3_without_the_call_the_runtime_makes_it_with_the_fallback_arguments() {
    let scenario = r#"{"turns": [{"text": "I will just answer."}]}"#;
    let env = common::env(scenario);
    let run = env.start("Research this.", ending(json!({"path": "fallback.txt"})));
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    assert_eq!(
        journal.len(),
        1,
        "the runtime's call went through the journal"
    );
    assert_eq!(journal[0].tool, "read_note");
    let evidence = env.block(env.runtime.evidence(&run)).unwrap();
    assert_eq!(evidence.len(), 1);
    let output = env.block(env.runtime.output(&run)).unwrap().unwrap();
    assert!(output.contains("\"ok\":true"), "{output}");

    // The same turn makes the same call: its provider id comes from the run.
    let call = |run: &agent_kernel::RunId| {
        EndingCall {
            tool: "read_note".into(),
            fallback_arguments: json!({"path": "fallback.txt"}),
        }
        .calls(run.as_str(), &[])
    };
    assert_eq!(call(&run), call(&run));
    let other = agent_kernel::RunId::new("another-run").unwrap();
    assert_ne!(call(&run)[0].id, call(&other)[0].id);
    assert_eq!(call(&run)[0].arguments, r#"{"path":"fallback.txt"}"#);
}

#[test]
fn an_ending_call_the_allowlist_forbids_offers_nothing_and_bad_fallbacks_are_refused() {
    let mut config = ending(json!({"path": "x"}));
    config.allowlist = Some(["send_ticket".to_string()].into());
    assert_eq!(config.allowed_tools(), Some(Default::default()));
    assert!(!config.allows("read_note") && !config.allows("send_ticket"));
    let bad = ending(json!(["not", "an", "object"]));
    assert_eq!(
        bad.validate(),
        Err(agent_supervisor::config::ConfigError::EndingCallArguments)
    );
}
