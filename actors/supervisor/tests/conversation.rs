//! Sessions are conversations (S12, issue 14 item 1), on the memory host
//! with the test tools and the scripted provider: what each request carries
//! is read from the requests the provider received. The same over HTTP to a
//! loopback OpenAI-compatible server is in `openai.rs`.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use agent_capabilities::ApprovalMode;
use agent_kernel::host::StorageExt;
use agent_kernel::run::{ActivityKind, RunStatus};
use agent_supervisor::compaction::SessionSummaries;
use agent_supervisor::config::ModelSettings;
use agent_supervisor::conversation::{
    HistoryMessage, HistoryRole, MIN_CONTEXT_WINDOW_TOKENS, SessionConversation,
    TOOL_RESULT_IN_HISTORY_BYTES,
};
use agent_supervisor::sim::tools::SimToolsConfig;
use agent_supervisor::transcript::Message;
use agent_supervisor::{RunConfig, RunError, RuntimeOptions};
use common::*;

fn user(text: &str) -> Message {
    Message::User {
        content: text.into(),
    }
}

fn assistant(text: &str) -> Message {
    Message::Assistant {
        content: Some(text.into()),
        tool_calls: Vec::new(),
        native: None,
    }
}

fn last_request_messages(env: &Env) -> Vec<Message> {
    let requests = env.requests.lock().unwrap();
    requests.last().expect("a request").messages.to_vec()
}

#[test]
fn s12_a_third_turn_carries_the_first_two() {
    // The scripted provider starts each run at the scenario's first turn.
    let env = env(r#"{"turns": [{"text": "A"}]}"#);
    for (prompt, answer) in [("Q1", "A"), ("Q2", "A"), ("Q3", "A")] {
        let run = env.start(prompt, RunConfig::default());
        let record = env.settle(&run);
        assert_eq!(record.status, RunStatus::Completed);
        assert_eq!(
            env.block(env.runtime.output(&run)).unwrap().as_deref(),
            Some(answer)
        );
    }
    let requests = env.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].messages.to_vec(), [user("Q1")]);
    assert_eq!(
        requests[2].messages.to_vec(),
        [
            user("Q1"),
            assistant("A"),
            user("Q2"),
            assistant("A"),
            user("Q3")
        ]
    );
    // The system prompt goes with every request, outside the conversation.
    for r in &requests {
        assert!(r.system.as_deref().is_some_and(|s| !s.is_empty()));
    }
    // Turns join the conversation when a later run starts: the third start
    // added the first two, each stored once as its own segment.
    let conversation: SessionConversation = env
        .block(
            env.storage()
                .get_record(&SessionConversation::key_for(&env.session)),
        )
        .unwrap()
        .expect("the conversation is stored");
    assert_eq!(
        conversation.turns.len(),
        2,
        "turns are added when a run starts"
    );
    assert_eq!(conversation.len(), 4);
}

#[test]
fn s12_tool_exchanges_enter_the_conversation_with_results_cut() {
    let big = "x".repeat(TOOL_RESULT_IN_HISTORY_BYTES * 2);
    let scenario = r#"{"turns": [
          {"text": "", "tool_calls": [{"name": "read_note", "arguments": {"path": "a.txt"}}]},
          {"text": "read it"},
          {"text": "second answer"}]}"#;
    let env = env_with(
        scenario,
        SimToolsConfig {
            note_text: big,
            ..SimToolsConfig::default()
        },
        RuntimeOptions::default(),
    );
    let first = env.start("note this", RunConfig::default());
    assert_eq!(env.settle(&first).status, RunStatus::Completed);
    let second = env.start("and now?", RunConfig::default());
    assert_eq!(env.settle(&second).status, RunStatus::Completed);
    // The second run's first request (the first run made two).
    let messages = env.requests.lock().unwrap()[2].messages.to_vec();
    // prompt, call, result, answer, new prompt
    assert_eq!(messages.len(), 5, "{messages:#?}");
    let Message::Tool { content, .. } = &messages[2] else {
        panic!("{:?}", messages[2])
    };
    assert!(
        content.len() < TOOL_RESULT_IN_HISTORY_BYTES + 200,
        "{}",
        content.len()
    );
    assert!(
        content.contains("more bytes of this result are not kept"),
        "{content}"
    );
    assert_eq!(messages[3], assistant("read it"));
    assert_eq!(messages[4], user("and now?"));
}

#[test]
fn s12_a_stopped_turn_enters_as_the_person_saw_it() {
    // The first run asks to send a ticket and waits for approval; the
    // person stops it. The next run's request holds the prompt and the
    // assistant's words with a note, and no call without its result.
    let env = env(r#"{"turns": [
      {"text": "I will file it.", "tool_calls": [{"name": "send_ticket", "arguments": {"title": "t"}}]},
      {"text": "fine"}]}"#);
    let strict = RunConfig {
        approval: ApprovalMode::Strict,
        ..RunConfig::default()
    };
    let first = env.start("file a ticket", strict);
    assert_eq!(env.settle(&first).status, RunStatus::AwaitingApproval);
    env.block(env.runtime.stop(&first)).unwrap();
    assert_eq!(env.run(&first).status, RunStatus::Cancelled);

    let second = env.start("never mind", RunConfig::default());
    env.settle(&second);
    let first_request_of_second = env.requests.lock().unwrap()[1].messages.to_vec();
    assert_eq!(
        first_request_of_second,
        [
            user("file a ticket"),
            assistant(
                "I will file it.\n\n[This turn ended before its answer: the person stopped it.]"
            ),
            user("never mind"),
        ]
    );
    // Only the second run (permissive) sent a ticket; the stopped one never did.
    assert_eq!(env.log.executions().len(), 1);
}

#[test]
fn s12_a_run_still_waiting_is_not_yet_a_turn() {
    let env = env(r#"{"turns": [
      {"text": "", "tool_calls": [{"name": "send_ticket", "arguments": {"title": "t"}}]},
      {"text": "other"}]}"#);
    let strict = RunConfig {
        approval: ApprovalMode::Strict,
        ..RunConfig::default()
    };
    let waiting = env.start("file a ticket", strict);
    assert_eq!(env.settle(&waiting).status, RunStatus::AwaitingApproval);
    let other = env.start("something else", RunConfig::default());
    env.settle(&other);
    let requests = env.requests.lock().unwrap();
    assert_eq!(requests[1].messages.to_vec(), [user("something else")]);
}

#[test]
fn s12_an_embedders_history_is_used_exactly() {
    let env = env(r#"{"turns": [{"text": "A1"}, {"text": "H"}]}"#);
    let first = env.start("Q1", RunConfig::default());
    env.settle(&first);
    let history = vec![
        HistoryMessage {
            role: HistoryRole::User,
            content: "hello from my app".into(),
        },
        HistoryMessage {
            role: HistoryRole::Assistant,
            content: "hi, app".into(),
        },
    ];
    let run = env.start(
        "next",
        RunConfig {
            history: Some(history),
            ..RunConfig::default()
        },
    );
    assert_eq!(env.settle(&run).status, RunStatus::Completed);
    assert_eq!(
        last_request_messages(&env),
        [
            user("hello from my app"),
            assistant("hi, app"),
            user("next")
        ],
        "the session's own turn Q1 is not mixed in"
    );
}

#[test]
fn s12_a_history_out_of_bounds_is_refused_and_starts_nothing() {
    let env = env(r#"{"turns": [{"text": "A"}]}"#);
    let empty = RunConfig {
        history: Some(vec![HistoryMessage {
            role: HistoryRole::User,
            content: "  ".into(),
        }]),
        ..RunConfig::default()
    };
    let err = env
        .block(env.runtime.start(&env.session, "x", empty))
        .unwrap_err();
    assert!(matches!(err, RunError::Config(_)), "{err:?}");
    assert!(env.block(env.runtime.runs()).unwrap().is_empty());
}

/// The context rule over a real session (S12.2, S12.4): each turn is
/// ~1,500 bytes (383 tokens estimated) and the smallest window gives
/// earlier turns 512 tokens. The second run would pass the share: it
/// first summarises the first turn (a tool-less request with the
/// summarisation prompt) and sends the summary in its place. The third
/// fits (the provider's count of the second run's conversation, summary
/// included): it sends the summary, the second turn and its prompt.
#[test]
fn s12_4_the_context_rule_summarises_the_oldest_turns_and_says_so() {
    let env = env(r#"{"turns": [{"text": "A"}]}"#);
    let small = RunConfig {
        model: ModelSettings {
            context_window_tokens: Some(MIN_CONTEXT_WINDOW_TOKENS),
            ..ModelSettings::default()
        },
        ..RunConfig::default()
    };
    let q1 = format!("Q1 {}", "a".repeat(1_500));
    let q2 = format!("Q2 {}", "b".repeat(1_500));
    let mut runs = Vec::new();
    for q in [&q1, &q2] {
        let run = env.start(q, small.clone());
        env.settle(&run);
        runs.push(run);
    }
    let third = env.start("Q3", small);
    assert_eq!(env.settle(&third).status, RunStatus::Completed);
    let requests = env.requests.lock().unwrap().clone();
    // Q1's round, the summary, Q2's round, Q3's round.
    assert_eq!(requests.len(), 4);
    let summarising = &requests[1];
    assert!(summarising.tools.is_empty());
    assert_eq!(
        summarising.system.as_deref(),
        Some(agent_supervisor::compaction::SUMMARY_PROMPT)
    );
    assert!(format!("{:?}", summarising.messages).contains(&q1));
    for later in &requests[2..] {
        let system = later.system.as_deref().unwrap_or_default();
        assert!(
            system.contains("Summary of the earlier conversation (1 turn(s)"),
            "{system}"
        );
        assert!(!format!("{:?}", later.messages).contains(&q1));
    }
    assert_eq!(requests[2].messages.to_vec(), [user(&q2)]);
    assert_eq!(
        requests[3].messages.to_vec(),
        [user(&q2), assistant("A"), user("Q3")]
    );
    let compacted: Vec<_> = env
        .activities(&runs[1])
        .into_iter()
        .filter_map(|a| match a.kind {
            ActivityKind::ConversationCompacted {
                turns_covered,
                tokens_before,
                tokens_after,
                ..
            } => Some((turns_covered, tokens_before > tokens_after)),
            _ => None,
        })
        .collect();
    assert_eq!(compacted, [(1, true)]);
    assert!(
        env.activities(&third)
            .iter()
            .all(|a| !matches!(a.kind, ActivityKind::ConversationCompacted { .. }))
    );
    // The raw turns stay stored and readable.
    let conversation = env
        .block(SessionConversation::load(
            &*env.mem.host().storage,
            &env.session,
        ))
        .unwrap();
    let raw = env
        .block(conversation.messages(&*env.mem.host().storage))
        .unwrap();
    assert_eq!(raw[0], user(&q1));
    assert_eq!(raw.len(), 4);
}

#[test]
fn s12_a_context_window_below_the_minimum_is_refused() {
    for (tokens, ok) in [
        (MIN_CONTEXT_WINDOW_TOKENS - 1, false),
        (MIN_CONTEXT_WINDOW_TOKENS, true),
        (MIN_CONTEXT_WINDOW_TOKENS + 1, true),
    ] {
        let config = RunConfig {
            model: ModelSettings {
                context_window_tokens: Some(tokens),
                ..ModelSettings::default()
            },
            ..RunConfig::default()
        };
        assert_eq!(config.validate().is_ok(), ok, "{tokens}");
    }
}

/// Two ~1,500-byte turns over the smallest window: the second run
/// compacts the first (see the test above).
fn small_window() -> RunConfig {
    RunConfig {
        model: ModelSettings {
            context_window_tokens: Some(MIN_CONTEXT_WINDOW_TOKENS),
            ..ModelSettings::default()
        },
        ..RunConfig::default()
    }
}

fn summaries(env: &Env) -> usize {
    env.block(SessionSummaries::load(
        &*env.mem.host().storage,
        &env.session,
    ))
    .unwrap()
    .summaries
    .len()
}

fn is_summarising(r: &agent_supervisor::provider::ModelRequest) -> bool {
    r.system.as_deref() == Some(agent_supervisor::compaction::SUMMARY_PROMPT)
}

fn compactions(env: &Env, run: &agent_kernel::ids::RunId) -> usize {
    env.activities(run)
        .iter()
        .filter(|a| matches!(a.kind, ActivityKind::ConversationCompacted { .. }))
        .count()
}

/// S12.4, S2.5: a tab lost while the summary is being made (its request
/// sent, nothing committed) and a new tab resuming the run: the summary is
/// made then, once; one summary stored, one activity.
#[test]
fn s12_4_a_crash_during_compaction_resumes_and_makes_one_summary() {
    let slow = r#"{"turns": [{"text": "A"}], "prompts": [{"starts_with": "Turns that follow", "turns": [{"text": "S", "delay_ms": 86400000}]}]}"#;
    let quick = r#"{"turns": [{"text": "A"}], "prompts": [{"starts_with": "Turns that follow", "turns": [{"text": "Summary: Q1 was asked."}]}]}"#;
    let env1 = env(slow);
    let q1 = format!("Q1 {}", "a".repeat(1_500));
    let q2 = format!("Q2 {}", "b".repeat(1_500));
    let first = env1.start(&q1, small_window());
    env1.settle(&first);
    let second = env1.start(&q2, small_window());
    env1.mem.executor().run_until_stalled();
    assert!(is_summarising(
        env1.requests.lock().unwrap().last().unwrap()
    ));
    assert_eq!(summaries(&env1), 0, "nothing committed yet");
    env1.kill();
    env1.mem.clock().advance(std::time::Duration::from_secs(31));
    let env2 = tab(
        env1.mem.clone(),
        quick,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    env2.block(env2.runtime.recover()).unwrap();
    env2.block(env2.runtime.resume(&second)).unwrap();
    assert_eq!(env2.settle(&second).status, RunStatus::Completed);
    let requests = env2.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert!(is_summarising(&requests[0]));
    assert!(
        requests[1]
            .system
            .as_deref()
            .unwrap_or_default()
            .contains("Summary: Q1 was asked.")
    );
    assert_eq!(summaries(&env2), 1);
    assert_eq!(compactions(&env2, &second), 1);
}

/// S12.4: a tab lost after the summary was committed (during the model
/// round that follows): the resumed run finds it and never asks again.
#[test]
fn s12_4_a_committed_summary_is_never_made_again() {
    let slow_round = r#"{"turns": [{"text": "A"}], "prompts": [{"starts_with": "Turns that follow", "turns": [{"text": "Summary: Q1 was asked."}]}, {"starts_with": "Q2", "turns": [{"text": "A", "delay_ms": 86400000}]}]}"#;
    let env1 = env(slow_round);
    let q1 = format!("Q1 {}", "a".repeat(1_500));
    let q2 = format!("Q2 {}", "b".repeat(1_500));
    let first = env1.start(&q1, small_window());
    env1.settle(&first);
    let second = env1.start(&q2, small_window());
    env1.mem.executor().run_until_stalled();
    assert_eq!(summaries(&env1), 1);
    assert_eq!(compactions(&env1, &second), 1);
    env1.kill();
    env1.mem.clock().advance(std::time::Duration::from_secs(31));
    let env2 = tab(
        env1.mem.clone(),
        r#"{"turns": [{"text": "A"}]}"#,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    env2.block(env2.runtime.recover()).unwrap();
    env2.block(env2.runtime.resume(&second)).unwrap();
    assert_eq!(env2.settle(&second).status, RunStatus::Completed);
    let requests = env2.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "no second summary request");
    assert!(!is_summarising(&requests[0]));
    assert!(
        requests[0]
            .system
            .as_deref()
            .unwrap_or_default()
            .contains("Summary: Q1 was asked.")
    );
    assert_eq!(summaries(&env2), 1);
    assert_eq!(compactions(&env2, &second), 1);
}

/// S12.4: the embedder asks for a compaction (`Runtime::compact`): every
/// turn but the newest is folded; the next run sends the summary, the
/// newest turn and its prompt; asked again with nothing to fold, nothing.
#[test]
fn s12_4_the_embedder_compacts_on_request() {
    let env = env(
        r#"{"turns": [{"text": "A"}], "prompts": [{"starts_with": "Turns that follow", "turns": [{"text": "Summary: three questions."}]}]}"#,
    );
    for q in ["Q1", "Q2", "Q3"] {
        let run = env.start(q, RunConfig::default());
        env.settle(&run);
    }
    let made = env
        .block(env.runtime.compact(&env.session, RunConfig::default()))
        .unwrap()
        .expect("a summary");
    assert_eq!((made.turns, made.upto, made.run), (2, 4, None));
    assert_eq!(summaries(&env), 1);
    let next = env.start("Q4", RunConfig::default());
    env.settle(&next);
    let last = env.requests.lock().unwrap().last().unwrap().clone();
    assert_eq!(
        last.messages.to_vec(),
        [user("Q3"), assistant("A"), user("Q4")]
    );
    assert!(
        last.system
            .as_deref()
            .unwrap_or_default()
            .contains("Summary: three questions.")
    );
    // Q4 joins when a later run starts: Q3 and Q4 after the summary, so
    // Q3 folds; then only Q4 is after it.
    let again = env
        .block(env.runtime.compact(&env.session, RunConfig::default()))
        .unwrap()
        .expect("Q3 folded");
    assert_eq!(again.turns, 3);
    assert!(
        env.block(env.runtime.compact(&env.session, RunConfig::default()))
            .unwrap()
            .is_none()
    );
}
