//! What a model can do decides what a run may be (S13.1, S9.1, issue 15
//! item 2), on the memory host with the scripted provider, whose scenario
//! states the model's capabilities:
//! - a model without tool calling cannot start an Agent or Research run (a
//!   typed error, nothing stored) and can chat;
//! - the model's context window is the conversation's when the run sets none.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use agent_kernel::run::{RunMode, RunStatus};
use agent_supervisor::config::ModelSettings;
use agent_supervisor::transcript::Message;
use agent_supervisor::{RunConfig, RunError};
use common::*;

#[test]
fn a_model_without_tools_cannot_run_an_agent_but_can_chat() {
    let env = env(r#"{"turns": [{"text": "Hi."}], "capabilities": {"tool_calling": false}}"#);
    for mode in [RunMode::Agent, RunMode::Research] {
        let refused = env.block(env.runtime.start(
            &env.session,
            "Do things.",
            RunConfig {
                mode,
                ..RunConfig::default()
            },
        ));
        assert!(
            matches!(refused, Err(RunError::ModelWithoutTools { .. })),
            "{mode:?}: {refused:?}"
        );
    }
    assert!(
        env.block(env.runtime.runs()).unwrap().is_empty(),
        "nothing stored"
    );
    let chat = RunConfig {
        mode: RunMode::Chat,
        ..RunConfig::default()
    };
    let run = env.start("Hello?", chat);
    assert_eq!(env.settle(&run).status, RunStatus::Completed);
    let requests = env.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].tools.is_empty());
}

/// Each turn is ~1,500 bytes; a 1,024-token window gives earlier turns 512
/// tokens, so the third turn carries a summary of the first and the second.
/// The run sets no window: the model's, from its capabilities, applies.
#[test]
fn the_models_context_window_is_the_conversations_when_the_run_sets_none() {
    let env = env(r#"{"turns": [{"text": "A"}], "capabilities": {"context_window_tokens": 1024}}"#);
    assert_eq!(ModelSettings::default().context_window_tokens, None);
    let q1 = format!("Q1 {}", "a".repeat(1_500));
    let q2 = format!("Q2 {}", "b".repeat(1_500));
    for q in [&q1, &q2] {
        let run = env.start(q, RunConfig::default());
        env.settle(&run);
    }
    let third = env.start("Q3", RunConfig::default());
    assert_eq!(env.settle(&third).status, RunStatus::Completed);
    let sent = env
        .requests
        .lock()
        .unwrap()
        .last()
        .unwrap()
        .messages
        .to_vec();
    let users: Vec<String> = sent
        .iter()
        .filter_map(|m| match m {
            Message::User { content } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(users, [q2.clone(), "Q3".to_owned()]);
    // The first turn did not fit beside the second's prompt: the second run
    // summarised it (S12.4), and the third sends that summary.
    let last = env.requests.lock().unwrap().last().unwrap().clone();
    assert!(
        last.system
            .as_deref()
            .unwrap_or_default()
            .contains("Summary of the earlier conversation")
    );
}

/// S13 (issue 15 item 1): the model's finish reason is the run's stop
/// reason: cut at the output limit is completed / output_limit with the
/// text kept; withheld by a filter is failed / content_filtered.
#[test]
fn the_models_finish_reason_is_the_runs_stop_reason() {
    use agent_kernel::run::StopReason;
    let env = env(r#"{"turns": [{"text": "An answer cut sh", "finish": "length"}]}"#);
    let run = env.start("Go on.", RunConfig::default());
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.stop_reason, Some(StopReason::OutputLimit));
    assert_eq!(
        env.block(env.runtime.output(&run)).unwrap().as_deref(),
        Some("An answer cut sh")
    );
    let env = env_filtered();
    let run = env.start("Say something else.", RunConfig::default());
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(
        record.stop_reason,
        Some(StopReason::ContentFiltered {
            provider: "scripted".into()
        })
    );
    // A plain answer is still completed / completed.
    let env = common::env(r#"{"turns": [{"text": "Fine."}]}"#);
    let run = env.start("Hi.", RunConfig::default());
    assert_eq!(env.settle(&run).stop_reason, Some(StopReason::Completed));
}

fn env_filtered() -> Env {
    common::env(r#"{"turns": [{"text": "", "finish": "content_filter"}]}"#)
}
