//! The run loop against the acceptance items of issue 3, on the memory host
//! with the test tools actor and the scripted provider.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::time::Duration;

use agent_capabilities::{ApprovalMode, EffectClass, Trust};
use agent_kernel::budget::{Budget, BudgetDimension, BudgetPreset};
use agent_kernel::host::{Clock, Storage, Table};
use agent_kernel::ids::RequestId;
use agent_kernel::journal::CallState;
use agent_kernel::protocol::ToolResult;
use agent_kernel::run::{ActivityKind, CheckpointStage, PendingKind, RunStatus, StopReason};
use agent_supervisor::config::ConfigError;
use agent_supervisor::sim::tools::SimToolsConfig;
use agent_supervisor::{Choice, RunConfig, RunError, RuntimeOptions};
use common::*;

fn rounds_scenario(rounds: usize) -> String {
    let mut turns: Vec<String> = (0..rounds)
        .map(|i| {
            format!(
                r#"{{"text": "round {i}", "tool_calls": [{{"name": "read_note", "arguments": {{"path": "n{i}.txt"}}}}]}}"#
            )
        })
        .collect();
    turns.push(r#"{"text": "final answer"}"#.into());
    format!(r#"{{"turns": [{}]}}"#, turns.join(","))
}

fn calls_scenario(calls: usize) -> String {
    let calls: Vec<String> = (0..calls)
        .map(|i| format!(r#"{{"name": "read_note", "arguments": {{"path": "n{i}.txt"}}}}"#))
        .collect();
    format!(
        r#"{{"turns": [{{"text": "many", "tool_calls": [{}]}}, {{"text": "final answer"}}]}}"#,
        calls.join(",")
    )
}

fn budget(rounds: u32, calls: u32, tokens: Option<u64>, duration: Option<u64>) -> RunConfig {
    RunConfig {
        budget: Budget {
            max_tool_rounds: rounds,
            max_tool_calls: calls,
            max_tokens: tokens,
            max_duration_ms: duration,
        },
        ..RunConfig::default()
    }
}

#[test]
fn s1_completed_run_records_everything_in_order() {
    let env = common::env(READ_THEN_ANSWER);
    // Every checkpoint made durable, in commit order (a run keeps only its
    // latest record, so the order is read off the commits).
    let durable = std::sync::Arc::new(std::sync::Mutex::new(Vec::<CheckpointStage>::new()));
    let seen = durable.clone();
    env.storage().set_commit_hook(Some(std::sync::Arc::new(
        move |batch: &agent_kernel::host::Batch| {
            for op in batch.ops() {
                if let agent_kernel::host::Op::Put {
                    table: Table::Checkpoints,
                    value,
                    ..
                } = op
                {
                    let cp: agent_kernel::run::Checkpoint =
                        serde_json::from_slice(value).expect("a checkpoint");
                    seen.lock().unwrap().push(cp.stage);
                }
            }
            Ok(())
        },
    )));
    let run = env.start("what does the note say?", RunConfig::default());
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.stop_reason, Some(StopReason::Completed));
    assert_eq!(
        env.block(env.runtime.output(&run)).unwrap().as_deref(),
        Some("The note says hello.")
    );
    assert_eq!(record.usage.tool_rounds, 1);
    assert_eq!(record.usage.tool_calls, 1);
    assert!(record.usage.input_tokens > 0 && record.usage.output_tokens > 0);
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].state, CallState::Committed);
    assert_eq!(journal[0].attempt, 1);
    // S2.4: checkpoints around model activity and around the effect, each
    // durable in the batch that reaches its stage. Where one batch takes two
    // (the model response rides with its first call's dispatch; the outcome
    // with the next request), the later one is the record stored.
    let stages = durable.lock().unwrap().clone();
    let call = journal[0].call_id.clone();
    assert_eq!(
        stages,
        vec![
            // At start, then again as round 1 is announced.
            CheckpointStage::BeforeModelRequest { round: 1 },
            CheckpointStage::BeforeModelRequest { round: 1 },
            CheckpointStage::BeforeDispatch {
                call_id: call.clone()
            },
            CheckpointStage::BeforeModelRequest { round: 2 },
            CheckpointStage::AfterModelResponse { round: 2 },
        ]
    );
    assert_eq!(
        env.block(env.runtime.checkpoint(&run))
            .unwrap()
            .map(|c| c.stage),
        Some(CheckpointStage::AfterModelResponse { round: 2 }),
        "the run keeps its latest checkpoint"
    );
    assert_gap_free_monotonic(&env.activities(&run), &record);
    assert_eq!(
        record.status_history,
        vec![RunStatus::Running, RunStatus::Completed]
    );
}

#[test]
fn s5_4_evidence_for_every_result_with_provenance() {
    let env = common::env(
        r#"{"turns": [
      {"text": "all kinds", "tool_calls": [
        {"name": "read_note", "arguments": {"path": "a.txt"}},
        {"name": "write_note", "arguments": {"path": "b.txt", "text": "x"}},
        {"name": "send_ticket", "arguments": {"title": "t"}},
        {"name": "fail_op", "arguments": {}},
        {"name": "no_such_tool", "arguments": {}},
        {"name": "read_note", "arguments": "{not json"},
        {"name": "update_plan", "arguments": {"steps": [
          {"title": "a", "status": "completed"}, {"title": "b", "status": "in_progress"}]}}]},
      {"text": "done"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    assert_eq!(env.settle(&run).status, RunStatus::Completed);
    let evidence = env.block(env.runtime.evidence(&run)).unwrap();
    assert_eq!(
        evidence.len(),
        7,
        "one evidence record per result, errors included"
    );
    for e in &evidence {
        assert!(!e.provenance.tool.is_empty() && !e.provenance.origin.is_empty());
        env.block(env.runtime.blob(&run, &e.result))
            .expect("the result blob verifies");
    }
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    let states: Vec<(String, CallState)> =
        journal.iter().map(|r| (r.tool.clone(), r.state)).collect();
    assert!(states.contains(&("fail_op".into(), CallState::Failed)));
    assert!(states.contains(&("send_ticket".into(), CallState::Committed)));
    let write = journal.iter().find(|r| r.tool == "write_note").unwrap();
    assert_eq!(write.receipts[0].effect, EffectClass::WriteLocal);
    assert_eq!(env.log.tickets(), 1);
    assert_eq!(
        env.block(env.runtime.plan(&run)).unwrap(),
        Some(serde_json::json!({"steps": [
            {"title": "a", "status": "completed"}, {"title": "b", "status": "in_progress"}]}))
    );
    assert_eq!(env.run(&run).usage.tool_calls, 7);
}

// ------------------------------------------------------------------ budgets

#[test]
fn s4_2_s4_3_presets_and_fallback_equal_spec() {
    let fallback = Budget::fallback();
    assert_eq!(
        (fallback.max_tool_rounds, fallback.max_tool_calls),
        (20, 100)
    );
    assert_eq!(RunConfig::default().budget, fallback);
    for (preset, rounds, calls, minutes) in [
        (BudgetPreset::Light, 8, 30, 10),
        (BudgetPreset::Standard, 16, 75, 25),
        (BudgetPreset::Extended, 24, 150, 45),
    ] {
        let b = Budget::preset(preset);
        assert_eq!(
            (b.max_tool_rounds, b.max_tool_calls, b.max_duration_ms),
            (rounds, calls, Some(minutes * 60_000))
        );
    }
}

#[test]
fn s4_4_tool_rounds_below_at_above() {
    for (rounds, expect) in [(2, None), (3, None), (4, Some(BudgetDimension::ToolRounds))] {
        let env = common::env(&rounds_scenario(rounds));
        let run = env.start("go", budget(3, 100, None, None));
        let record = env.settle(&run);
        match expect {
            None => assert_eq!(
                record.status,
                RunStatus::Completed,
                "{rounds} rounds within 3"
            ),
            Some(dimension) => {
                assert_eq!(record.status, RunStatus::Failed);
                assert_eq!(
                    record.stop_reason,
                    Some(StopReason::BudgetExhausted { dimension })
                );
                assert_eq!(record.usage.tool_rounds, 3);
                // The output so far stays readable.
                assert_eq!(
                    env.block(env.runtime.output(&run)).unwrap().as_deref(),
                    Some("round 3")
                );
            }
        }
    }
}

#[test]
fn s4_4_tool_calls_below_at_above() {
    for (calls, expect) in [(2, None), (3, None), (4, Some(BudgetDimension::ToolCalls))] {
        let env = common::env(&calls_scenario(calls));
        let run = env.start("go", budget(20, 3, None, None));
        let record = env.settle(&run);
        match expect {
            None => assert_eq!(record.status, RunStatus::Completed),
            Some(dimension) => {
                assert_eq!(
                    record.stop_reason,
                    Some(StopReason::BudgetExhausted { dimension })
                );
                assert_eq!(record.usage.tool_calls, 3);
                let journal = env.block(env.runtime.journal(&run)).unwrap();
                assert_eq!(journal.len(), 3, "the fourth call was never journaled");
                assert_eq!(
                    env.block(env.runtime.output(&run)).unwrap().as_deref(),
                    Some("many")
                );
            }
        }
    }
}

#[test]
fn s4_4_tokens_below_at_above() {
    // Each answer reports 100 tokens; the third request starts with 200 used.
    let scenario = r#"{"turns": [
      {"text": "a", "usage": {"input_tokens": 90, "output_tokens": 10}, "tool_calls": [{"name": "read_note", "arguments": {"path": "a"}}]},
      {"text": "b", "usage": {"input_tokens": 90, "output_tokens": 10}, "tool_calls": [{"name": "read_note", "arguments": {"path": "b"}}]},
      {"text": "c", "usage": {"input_tokens": 90, "output_tokens": 10}}]}"#;
    for (limit, expect) in [
        (201, RunStatus::Completed),
        (200, RunStatus::Failed),
        (150, RunStatus::Failed),
    ] {
        let env = common::env(scenario);
        let run = env.start("go", budget(20, 100, Some(limit), None));
        let record = env.settle(&run);
        assert_eq!(record.status, expect, "token limit {limit}");
        if expect == RunStatus::Failed {
            assert_eq!(
                record.stop_reason,
                Some(StopReason::BudgetExhausted {
                    dimension: BudgetDimension::Tokens
                })
            );
            assert_eq!(record.usage.total_tokens(), 200);
        }
    }
}

#[test]
fn s4_4_duration_below_at_above_counts_only_running_time() {
    let scenario = r#"{"turns": [
      {"text": "a", "delay_ms": 1000, "tool_calls": [{"name": "read_note", "arguments": {"path": "a"}}]},
      {"text": "b", "delay_ms": 1000, "tool_calls": [{"name": "read_note", "arguments": {"path": "b"}}]},
      {"text": "c", "delay_ms": 1000}]}"#;
    // The run needs 3 s of model time. The limit holds during a round too
    // (issue 12): a round still streaming when the time runs out ends the
    // run at the limit; one that answers as it runs out is taken.
    for (limit, expect, active_ms) in [
        (3001, RunStatus::Completed, 3000),
        (3000, RunStatus::Completed, 3000),
        (2999, RunStatus::Failed, 2999),
        (2000, RunStatus::Failed, 2000),
        (1500, RunStatus::Failed, 1500),
    ] {
        let env = common::env(scenario);
        let run = env.start("go", budget(20, 100, None, Some(limit)));
        let record = env.settle(&run);
        assert_eq!(record.status, expect, "duration limit {limit}");
        if expect == RunStatus::Failed {
            assert_eq!(
                record.stop_reason,
                Some(StopReason::BudgetExhausted {
                    dimension: BudgetDimension::Duration
                })
            );
        }
        assert_eq!(record.usage.active_ms, active_ms, "duration limit {limit}");
    }
    // Time spent awaiting input is not active time (S4.1).
    let env = common::env(
        r#"{"turns": [
      {"text": "q", "delay_ms": 500, "tool_calls": [{"name": "ask_user", "arguments": {"question": "?"}}]},
      {"text": "ok"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingInput);
    env.mem.advance(Duration::from_secs(600));
    let pending = env.block(env.runtime.pending(&run)).unwrap();
    env.block(env.runtime.respond(&run, &pending[0].id, "yes"))
        .unwrap();
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.usage.active_ms, 500);
}

#[test]
fn s4_4_invalid_custom_values_are_refused_naming_the_field() {
    let env = common::env(READ_THEN_ANSWER);
    for (b, field) in [
        (budget(0, 10, None, None), "max_tool_rounds"),
        (budget(10, 0, None, None), "max_tool_calls"),
        (budget(10, 10, Some(0), None), "max_tokens"),
        (budget(10, 10, None, Some(u64::MAX)), "max_duration_ms"),
        (budget(5000, 10, None, None), "max_tool_rounds"),
    ] {
        match env.block(env.runtime.start(&env.session, "x", b)) {
            Err(RunError::Config(ConfigError::Budget(e))) => {
                assert_eq!(e.field, field);
                assert!(e.to_string().contains(field));
            }
            other => panic!("expected a budget error for {field}, got {other:?}"),
        }
    }
    let wrong_kind = serde_json::json!({"max_tool_rounds": "ten"});
    let e = Budget::from_json(&wrong_kind).unwrap_err();
    assert_eq!(e.field, "max_tool_rounds");
    assert!(
        env.block(env.runtime.runs()).unwrap().is_empty(),
        "nothing was stored"
    );
}

// ---------------------------------------------------------------- approvals

const STRICT_WRITE: &str = r#"{"turns": [
  {"text": "writing", "tool_calls": [{"name": "write_note", "arguments": {"path": "notes/b.txt", "text": "x"}}]},
  {"text": "done"}]}"#;

fn strict() -> RunConfig {
    RunConfig {
        approval: ApprovalMode::Strict,
        ..RunConfig::default()
    }
}

#[test]
fn s6_approve_mints_once_and_continues_and_pending_is_presented_once() {
    let env = common::env(STRICT_WRITE);
    let run = env.start("write it", strict());
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::AwaitingApproval);
    let pending = env.block(env.runtime.present_pending(&run)).unwrap();
    assert_eq!(pending.len(), 1);
    let PendingKind::Approval {
        tool,
        effects,
        target_summary,
        identity,
        ..
    } = &pending[0].kind
    else {
        panic!("expected an approval request");
    };
    assert_eq!(tool, "write_note");
    assert!(effects.contains(&EffectClass::WriteLocal));
    assert!(target_summary.contains("notes/b.txt"));
    assert_eq!(identity.tool, "write_note");
    // S6.4: shown once, not twice.
    assert!(
        env.block(env.runtime.present_pending(&run))
            .unwrap()
            .is_empty()
    );
    assert_eq!(env.log.executions().len(), 0, "nothing ran before approval");
    env.block(env.runtime.approve(&run, &pending[0].id))
        .unwrap();
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(env.log.executions().len(), 1);
    assert!(env.block(env.runtime.pending(&run)).unwrap().is_empty());
    // Approving again is refused: the request is gone and the run is final.
    assert!(
        env.block(env.runtime.approve(&run, &pending[0].id))
            .is_err()
    );
}

#[test]
fn s6_4_pending_approval_survives_a_reload_and_is_presented_once() {
    let env1 = env(STRICT_WRITE);
    let run = env1.start("write it", strict());
    assert_eq!(env1.settle(&run).status, RunStatus::AwaitingApproval);
    assert_eq!(
        env1.block(env1.runtime.present_pending(&run))
            .unwrap()
            .len(),
        1
    );
    env1.kill();
    // A reload: a new tab on the same storage after the old lease expired.
    env1.mem.clock().advance(Duration::from_secs(31));
    let env2 = tab(
        env1.mem.clone(),
        STRICT_WRITE,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    assert!(
        env2.block(env2.runtime.recover()).unwrap().is_empty(),
        "an awaiting run is left alone"
    );
    assert_eq!(env2.run(&run).status, RunStatus::AwaitingApproval);
    assert!(
        env2.block(env2.runtime.present_pending(&run))
            .unwrap()
            .is_empty(),
        "not presented twice"
    );
    let pending = env2.block(env2.runtime.pending(&run)).unwrap();
    assert_eq!(pending.len(), 1);
    env2.block(env2.runtime.approve(&run, &pending[0].id))
        .unwrap();
    assert_eq!(env2.settle(&run).status, RunStatus::Completed);
    assert_eq!(env2.log.executions().len(), 1);
}

#[test]
fn s6_deny_gives_the_model_a_denial_and_continues() {
    let env = common::env(STRICT_WRITE);
    let run = env.start("write it", strict());
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingApproval);
    let pending = env.block(env.runtime.pending(&run)).unwrap();
    env.block(env.runtime.deny(&run, &pending[0].id)).unwrap();
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    assert!(env.log.executions().is_empty(), "a denied call never runs");
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    assert_eq!(journal[0].state, CallState::Failed);
    assert_eq!(journal[0].error.as_ref().unwrap().code, "approval_denied");
    let activities = env.activities(&run);
    assert!(activities.iter().any(|a| matches!(
        a.kind,
        ActivityKind::ApprovalAnswered {
            approved: false,
            ..
        }
    )));
}

/// Every 32-byte draw from the host's entropy (a run's `Authority` key is
/// one), and the entropy underneath.
struct KeyRecordingEntropy {
    inner: std::sync::Arc<dyn agent_kernel::host::Entropy>,
    keys: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl agent_kernel::host::Entropy for KeyRecordingEntropy {
    fn fill(&self, buf: &mut [u8]) {
        self.inner.fill(buf);
        if buf.len() == 32 {
            self.keys.lock().unwrap().push(buf.to_vec());
        }
    }
}

/// Every form a 32-byte key could be stored in as text or bytes.
fn key_forms(key: &[u8]) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    vec![
        key.to_vec(),
        hex::encode(key).into_bytes(),
        hex::encode_upper(key).into_bytes(),
        STANDARD.encode(key).into_bytes(),
        STANDARD_NO_PAD.encode(key).into_bytes(),
        URL_SAFE.encode(key).into_bytes(),
        URL_SAFE_NO_PAD.encode(key).into_bytes(),
    ]
}

/// What a token a tool received could be stored as: its wire form, the
/// canonical JSON under it, its tag and its nonce.
fn token_forms(wire: &str) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(wire)
        .expect("a wire form is base64url");
    let value: serde_json::Value = serde_json::from_slice(&json).expect("canonical JSON");
    let tag = value["tag"].as_str().expect("a tag").to_owned();
    let nonce = value["base"]["nonce"].as_str().expect("a nonce").to_owned();
    assert!(tag.len() == 64 && nonce.len() >= 16, "{value}");
    vec![
        wire.as_bytes().to_vec(),
        json,
        tag.into_bytes(),
        nonce.into_bytes(),
    ]
}

/// S6.1: no capability is ever persisted. Every stored byte (each record of
/// every table, with its key, and each blob) is searched for the wire form
/// of every token a tool really received (as the tools actor got it in its
/// `Dispatch`), the JSON under it, its tag and nonce, and for the run's
/// `Authority` key in raw, hex, base64 and base64url forms.
#[test]
fn s6_1_no_grant_is_ever_persisted() {
    use std::sync::{Arc, Mutex};

    use agent_kernel::actor::{ActorError, spawn_actor};
    use agent_kernel::ids::OwnerId;
    use agent_kernel::memory::MemoryHost;
    use agent_kernel::protocol::ToolsMsg;
    use agent_supervisor::sim::tools::{ToolLog, spawn_sim_tools};
    use agent_supervisor::{Runtime, Scenario, ScriptedProvider};

    let mem = MemoryHost::fifo(7);
    let mut host = mem.host();
    let keys = Arc::new(Mutex::new(Vec::new()));
    host.entropy = Arc::new(KeyRecordingEntropy {
        inner: host.entropy.clone(),
        keys: keys.clone(),
    });
    let log = ToolLog::default();
    let sim_tools = spawn_sim_tools(
        host.executor.clone(),
        host.clock.clone(),
        log.clone(),
        SimToolsConfig::default(),
    );
    // The tools actor the runtime talks to: it keeps the wire form of each
    // capability dispatched to a tool, then hands the message on.
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = received.clone();
    let tools = spawn_actor(
        &*host.executor,
        "tools",
        64,
        None,
        move |inbox| async move {
            while let Ok(msg) = inbox.recv().await {
                if let ToolsMsg::Dispatch { invocation, .. } = &msg {
                    seen.lock().unwrap().push(invocation.capability.to_wire());
                }
                sim_tools.send(msg).await?;
            }
            Ok::<(), ActorError>(())
        },
    );
    let provider = Arc::new(ScriptedProvider::new(
        Scenario::from_json(STRICT_WRITE).unwrap(),
        host.clock.clone(),
    ));
    let runtime = Runtime::new(
        host,
        OwnerId::new("tab-1").unwrap(),
        tools,
        provider,
        RuntimeOptions::default(),
    );
    let session = agent_kernel::ids::SessionId::new("session-1").unwrap();
    let run = mem
        .block_on_advancing(runtime.start(&session, "write it", strict()))
        .unwrap()
        .unwrap();
    let settled = mem
        .block_on_advancing(runtime.wait_settled(&run))
        .unwrap()
        .unwrap();
    assert_eq!(settled.status, RunStatus::AwaitingApproval);
    let pending = mem
        .block_on_advancing(runtime.pending(&run))
        .unwrap()
        .unwrap();
    mem.block_on_advancing(runtime.approve(&run, &pending[0].id))
        .unwrap()
        .unwrap();
    let done = mem
        .block_on_advancing(runtime.wait_settled(&run))
        .unwrap()
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(log.executions().len(), 1, "the approved write ran");

    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 1, "one capability reached a tool");
    let keys = keys.lock().unwrap().clone();
    assert!(!keys.is_empty(), "the run's authority drew its key");
    let mut needles: Vec<(String, Vec<u8>)> = Vec::new();
    for wire in &received {
        for form in token_forms(wire) {
            needles.push(("a capability a tool received".into(), form));
        }
    }
    for key in &keys {
        for form in key_forms(key) {
            needles.push(("an authority key".into(), form));
        }
    }

    let storage = mem.storage().clone();
    let mut stored: Vec<(String, Vec<u8>)> = Vec::new();
    for table in Table::ALL {
        for (key, bytes) in mem
            .block_on(storage.scan_prefix(table, ""))
            .unwrap()
            .unwrap()
        {
            stored.push((format!("{table:?} {key} (key)"), key.clone().into_bytes()));
            stored.push((format!("{table:?} {key}"), bytes));
        }
    }
    let records = stored.len();
    for hash in mem.block_on(storage.list_blobs()).unwrap().unwrap() {
        let bytes = mem
            .block_on(storage.get_blob(&hash))
            .unwrap()
            .unwrap()
            .expect("a listed blob exists");
        stored.push((format!("blob {hash}"), bytes));
    }
    assert!(
        records > 10 && stored.len() > records,
        "records and blobs were searched"
    );
    for (what, needle) in &needles {
        for (place, bytes) in &stored {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_slice()),
                "{what} is stored in {place}"
            );
        }
    }
}

// ------------------------------------------------------------ ask_user, plan

#[test]
fn ask_user_waits_for_respond_and_the_answer_reaches_the_model() {
    let env = common::env(
        r#"{"turns": [
      {"text": "need input", "tool_calls": [{"name": "ask_user", "arguments": {"question": "which file?", "answer_schema": {"type": "string"}}}]},
      {"text": "thanks"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingInput);
    let pending = env.block(env.runtime.pending(&run)).unwrap();
    let PendingKind::Input {
        question, schema, ..
    } = &pending[0].kind
    else {
        panic!("expected an input request")
    };
    let schema = env
        .block(env.runtime.blob(&run, schema.as_ref().unwrap()))
        .unwrap();
    assert_eq!(schema, br#"{"type":"string"}"#);
    assert_eq!(
        env.block(env.runtime.blob(&run, question)).unwrap(),
        b"which file?"
    );
    // The wrong command for this request kind is refused.
    assert!(matches!(
        env.block(env.runtime.approve(&run, &pending[0].id)),
        Err(RunError::WrongStatus { .. })
    ));
    env.block(env.runtime.respond(&run, &pending[0].id, "b.txt"))
        .unwrap();
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    assert_eq!(journal[0].state, CallState::Committed);
    let answer = env
        .block(env.runtime.blob(&run, journal[0].result.as_ref().unwrap()))
        .unwrap();
    assert!(String::from_utf8(answer).unwrap().contains("b.txt"));
    assert_eq!(
        record.status_history,
        vec![
            RunStatus::Running,
            RunStatus::AwaitingInput,
            RunStatus::Running,
            RunStatus::Completed
        ]
    );
}

#[test]
fn respond_refuses_an_answer_that_does_not_fit_and_the_run_keeps_waiting() {
    let env = common::env(
        r#"{"turns": [
      {"text": "pick", "tool_calls": [{"name": "ask_user", "arguments": {"question": "which region?", "choices": ["EU", "US"]}}]},
      {"text": "count", "tool_calls": [{"name": "ask_user", "arguments": {"question": "how many guests?",
         "answer_schema": {"type": "object", "properties": {"guests": {"type": "integer", "minimum": 1}},
                           "required": ["guests"], "additionalProperties": false}}}]},
      {"text": "thanks"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    let answer_of = |call: usize| -> serde_json::Value {
        let journal = env.block(env.runtime.journal(&run)).unwrap();
        let blob = env
            .block(
                env.runtime
                    .blob(&run, journal[call].result.as_ref().unwrap()),
            )
            .unwrap();
        let result: ToolResult = serde_json::from_slice(&blob).unwrap();
        let ToolResult::Success(s) = result else {
            panic!("expected a success, got {result:?}")
        };
        assert_eq!(s.trust, Trust::User);
        s.content
    };
    let refused = |request: &RequestId, text: &str| match env
        .block(env.runtime.respond(&run, request, text))
    {
        Err(RunError::InvalidAnswer { reason, .. }) => reason,
        other => panic!("{text:?} should be refused, got {other:?}"),
    };
    let still_waiting = |request: &RequestId| {
        assert_eq!(env.run(&run).status, RunStatus::AwaitingInput);
        let pending = env.block(env.runtime.pending(&run)).unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(&pending[0].id, request);
    };

    // Choices: the pending request offers them; anything else is refused.
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingInput);
    let pending = env.block(env.runtime.pending(&run)).unwrap();
    let PendingKind::Input {
        choices, schema, ..
    } = &pending[0].kind
    else {
        panic!("expected an input request")
    };
    assert_eq!(
        choices.as_deref(),
        Some(&["EU".to_owned(), "US".to_owned()][..])
    );
    assert!(schema.is_none());
    let first = pending[0].id.clone();
    assert!(refused(&first, "Mars").contains("EU, US"));
    still_waiting(&first);
    env.block(env.runtime.respond(&run, &first, "US")).unwrap();
    assert_eq!(answer_of(0), serde_json::json!({"answer": "US"}));

    // A schema: typed JSON is checked against it.
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingInput);
    let pending = env.block(env.runtime.pending(&run)).unwrap();
    let second = pending[0].id.clone();
    assert_ne!(first, second);
    assert!(refused(&second, r#"{"guests": 0}"#).contains("/guests"));
    refused(&second, "two people");
    still_waiting(&second);
    env.block(env.runtime.respond(&run, &second, r#"{"guests": 2}"#))
        .unwrap();
    assert_eq!(answer_of(1), serde_json::json!({"answer": {"guests": 2}}));
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.usage.tool_calls, 2);
}

#[test]
fn bad_ask_user_and_update_plan_arguments_reach_the_model_as_errors() {
    let env = common::env(
        r#"{"turns": [
      {"text": "bad", "tool_calls": [
        {"name": "ask_user", "arguments": {"question": "q", "choices": ["a", "a"]}},
        {"name": "ask_user", "arguments": {"question": "q", "schema": {"type": "string"}}},
        {"name": "update_plan", "arguments": {"plan": ["a", "b"]}},
        {"name": "update_plan", "arguments": {"steps": [
          {"title": "a", "status": "in_progress"}, {"title": "b", "status": "in_progress"}]}}]},
      {"text": "done"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    let record = env.settle(&run);
    assert_eq!(
        record.status,
        RunStatus::Completed,
        "nothing waits for the person"
    );
    assert!(env.block(env.runtime.pending(&run)).unwrap().is_empty());
    assert_eq!(env.block(env.runtime.plan(&run)).unwrap(), None);
    let evidence = env.block(env.runtime.evidence(&run)).unwrap();
    assert_eq!(evidence.len(), 4);
    for e in &evidence {
        let blob = env.block(env.runtime.blob(&run, &e.result)).unwrap();
        let result: ToolResult = serde_json::from_slice(&blob).unwrap();
        let ToolResult::Error(err) = result else {
            panic!("expected an error, got {result:?}")
        };
        assert_eq!(err.code, "invalid_arguments", "{}", err.message);
    }
}

// -------------------------------------------------------------------- stop

#[test]
fn stop_while_awaiting_cancels_and_clears_the_request() {
    let env = common::env(STRICT_WRITE);
    let run = env.start("write it", strict());
    env.settle(&run);
    env.block(env.runtime.stop(&run)).unwrap();
    let record = env.run(&run);
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(record.stop_reason, Some(StopReason::UserStopped));
    assert!(env.block(env.runtime.pending(&run)).unwrap().is_empty());
    assert!(matches!(
        env.block(env.runtime.stop(&run)),
        Err(RunError::WrongStatus { .. })
    ));
}

#[test]
fn stop_during_a_model_round_cancels() {
    let env = common::env(SLOW_MODEL);
    let run = env.start("go", RunConfig::default());
    env.mem.executor().run_until_stalled();
    env.block(env.runtime.stop(&run)).unwrap();
    let record = env.run(&run);
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(record.usage.tool_rounds, 0);
}

#[test]
fn stop_awaits_an_effect_in_flight_up_to_the_bound_else_effect_unknown() {
    let slow = |ms: u64| {
        format!(
            r#"{{"turns": [{{"text": "slow", "tool_calls": [{{"name": "slow_ticket", "arguments": {{"ms": {ms}}}}}]}}, {{"text": "done"}}]}}"#
        )
    };
    // Finishes within the 5 s grace: committed, then cancelled.
    let env = common::env(&slow(2000));
    let run = env.start("go", RunConfig::default());
    env.mem.executor().run_until_stalled();
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::Running
    );
    env.block(env.runtime.stop(&run)).unwrap();
    assert_eq!(env.run(&run).status, RunStatus::Cancelled);
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::Committed
    );
    // Takes longer than the grace: effect_unknown, cancelled.
    let env = common::env(&slow(60_000));
    let run = env.start("go", RunConfig::default());
    env.mem.executor().run_until_stalled();
    let before = env.mem.clock().monotonic();
    env.block(env.runtime.stop(&run)).unwrap();
    assert_eq!(env.mem.clock().monotonic() - before, Duration::from_secs(5));
    assert_eq!(env.run(&run).status, RunStatus::Cancelled);
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::EffectUnknown
    );
}

/// Cancellation in the protocol (issue 13, S2.5 stop): a stop while a
/// read-only call is in flight reaches its tool actor as a cancellation
/// (`ToolsMsg::CancelRun`, then `ToolMsg::Cancel`), the shell ends the read
/// at once with `cancelled`, and the run ends `cancelled` without waiting
/// out the stop grace. `hang_op` is a real sim tool that never answers by
/// itself: without the cancellation the stop would wait the full 5 s grace.
#[test]
fn a_stop_cancels_a_read_in_flight_well_within_the_grace() {
    let env = common::env(
        r#"{"turns": [{"text": "reading", "tool_calls": [{"name": "hang_op", "arguments": {}}]}, {"text": "done"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    env.mem.executor().run_until_stalled();
    assert!(
        env.log.executed(run.as_str(), "t1-c0"),
        "the read is in flight"
    );
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::Running
    );
    let before = env.mem.clock().monotonic();
    env.block(env.runtime.stop(&run)).unwrap();
    let waited = env.mem.clock().monotonic() - before;
    assert!(
        waited < Duration::from_secs(1),
        "the stop waited {waited:?}; the grace is 5 s"
    );
    let record = env.run(&run);
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(record.stop_reason, Some(StopReason::UserStopped));
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    assert_eq!(journal[0].tool, "hang_op");
    assert_ne!(journal[0].state, CallState::Running, "the call was settled");
    assert_ne!(
        journal[0].state,
        CallState::EffectUnknown,
        "a read has no effect"
    );
    let error = journal[0].error.as_ref().expect("the call's fate");
    assert_eq!(
        error.code, "cancelled",
        "the tool's shell ended it: {error:?}"
    );
}

/// Found by a hung CI run (S2.5 stop): the native app cancels a read in
/// flight once its stop is queued, so the call ends at the same moment the
/// stop arrives. The stop must win: the call's result is recorded and the
/// run ends `cancelled`, instead of taking the result and going on.
#[test]
fn a_stop_queued_as_the_call_in_flight_ends_wins() {
    let env = common::env(
        r#"{"turns": [{"text": "slow", "tool_calls": [{"name": "slow_ticket", "arguments": {"ms": 60000}}]}, {"text": "done"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    env.mem.executor().run_until_stalled();
    let before = env.mem.clock().monotonic();
    // The call's 60 s end (its task is woken first) and then the stop is
    // queued: the supervisor is polled with both ready.
    env.mem.clock().advance(Duration::from_secs(60));
    env.block(env.runtime.stop(&run)).unwrap();
    assert_eq!(
        env.mem.clock().monotonic() - before,
        Duration::from_secs(60)
    );
    let record = env.run(&run);
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(record.stop_reason, Some(StopReason::UserStopped));
    assert_eq!(record.usage.tool_rounds, 1, "no further model round");
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::Committed
    );
}

// ------------------------------------------------- recovery, resume, decide

fn crash_in_flight(tool_json: &str) -> (Env, agent_kernel::ids::RunId) {
    let scenario = format!(
        r#"{{"turns": [{{"text": "w", "tool_calls": [{tool_json}]}}, {{"text": "done"}}]}}"#
    );
    let env1 = env(&scenario);
    let run = env1.start("go", RunConfig::default());
    env1.mem.executor().run_until_stalled();
    assert_eq!(
        env1.block(env1.runtime.journal(&run)).unwrap()[0].state,
        CallState::Running
    );
    env1.kill();
    env1.mem.clock().advance(Duration::from_secs(31));
    let env2 = tab(
        env1.mem.clone(),
        &scenario,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    assert_eq!(
        env2.block(env2.runtime.recover()).unwrap(),
        vec![run.clone()]
    );
    let record = env2.run(&run);
    assert_eq!(record.status, RunStatus::Interrupted);
    assert_eq!(record.stop_reason, Some(StopReason::PageInterrupted));
    (env2, run)
}

/// S2.5 + S3: a tab that takes over a session another tab left without
/// cleanup recovers that session's runs at once (not only at the next page
/// load), and only that session's: a run of another session is untouched.
#[test]
fn recover_session_recovers_only_the_session_taken_over() {
    let scenario = r#"{"turns": [
      {"text": "w", "tool_calls": [{"name": "slow_op", "arguments": {"ms": 60000}}]},
      {"text": "done"}]}"#;
    let env1 = env(scenario);
    let other = agent_kernel::ids::SessionId::new("session-2").unwrap();
    let mine = env1.start("go", RunConfig::default());
    let theirs = env1
        .block(env1.runtime.start(&other, "go", RunConfig::default()))
        .unwrap();
    env1.mem.executor().run_until_stalled();
    env1.kill();
    env1.mem.clock().advance(Duration::from_secs(31));
    let env2 = tab(
        env1.mem.clone(),
        scenario,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    assert_eq!(
        env2.block(env2.runtime.recover_session(&env2.session))
            .unwrap(),
        vec![mine.clone()]
    );
    let record = env2.run(&mine);
    assert_eq!(
        (record.status, record.stop_reason),
        (RunStatus::Interrupted, Some(StopReason::PageInterrupted))
    );
    assert_eq!(
        env2.run(&theirs).status,
        RunStatus::Running,
        "another session is untouched"
    );
    env2.block(env2.runtime.resume(&mine)).unwrap();
    assert_eq!(env2.settle(&mine).status, RunStatus::Completed);
}

#[test]
fn s2_3_recovery_retries_read_only_work_with_a_higher_attempt() {
    let (env, run) = crash_in_flight(r#"{"name": "slow_op", "arguments": {"ms": 60000}}"#);
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::Running
    );
    // Loading never resumes by itself.
    env.mem.advance(Duration::from_secs(600));
    assert_eq!(env.run(&run).status, RunStatus::Interrupted);
    env.block(env.runtime.resume(&run)).unwrap();
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    assert_eq!(
        (journal[0].state, journal[0].attempt),
        (CallState::Committed, 2)
    );
}

#[test]
fn s2_3_recovery_marks_uncertain_external_writes_and_each_decide_choice() {
    for choice in [Choice::MarkDone, Choice::RetryAnyway, Choice::Abandon] {
        let (env, run) = crash_in_flight(r#"{"name": "slow_ticket", "arguments": {"ms": 60000}}"#);
        let journal = env.block(env.runtime.journal(&run)).unwrap();
        assert_eq!(journal[0].state, CallState::EffectUnknown);
        let call = journal[0].call_id.clone();
        // resume stops at the undecided call.
        assert!(matches!(
            env.block(env.runtime.resume(&run)),
            Err(RunError::DecisionPending { .. })
        ));
        let pending = env.block(env.runtime.pending(&run)).unwrap();
        assert!(matches!(pending[0].kind, PendingKind::Decision { .. }));
        env.block(env.runtime.decide(&run, &call, choice)).unwrap();
        let record = env.settle(&run);
        let journal = env.block(env.runtime.journal(&run)).unwrap();
        match choice {
            Choice::MarkDone => {
                assert_eq!(record.status, RunStatus::Completed);
                assert_eq!(journal[0].state, CallState::Committed);
                assert_eq!(env.log.tickets(), 0, "marked done: not run again");
            }
            Choice::RetryAnyway => {
                assert_eq!(record.status, RunStatus::Completed);
                assert_eq!(
                    (journal[0].state, journal[0].attempt),
                    (CallState::Committed, 2)
                );
                assert_eq!(env.log.tickets(), 1);
            }
            Choice::Abandon => {
                assert_eq!(record.status, RunStatus::Failed);
                assert_eq!(
                    record.stop_reason,
                    Some(StopReason::EffectUnknown {
                        call_id: call.clone()
                    })
                );
                assert_eq!(journal[0].state, CallState::EffectUnknown);
            }
        }
        assert!(env.block(env.runtime.pending(&run)).unwrap().is_empty());
    }
}

#[test]
fn effect_unknown_from_a_tool_interrupts_and_waits_for_decide() {
    let env = common::env(
        r#"{"turns": [
      {"text": "send", "tool_calls": [{"name": "flaky_send", "arguments": {"title": "t"}}]},
      {"text": "done"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Interrupted);
    let call = env.block(env.runtime.journal(&run)).unwrap()[0]
        .call_id
        .clone();
    assert_eq!(
        record.stop_reason,
        Some(StopReason::EffectUnknown {
            call_id: call.clone()
        })
    );
    assert!(matches!(
        env.block(env.runtime.decide(
            &run,
            &agent_kernel::ids::CallId::new("nope").unwrap(),
            Choice::MarkDone
        )),
        Err(RunError::NoSuchDecision { .. })
    ));
    env.block(env.runtime.decide(&run, &call, Choice::RetryAnyway))
        .unwrap();
    assert_eq!(env.settle(&run).status, RunStatus::Completed);
    assert_eq!(env.log.tickets(), 2, "the person chose to repeat it");
}

#[test]
fn s2_3_committed_results_are_reused_not_run_again() {
    // Crash after the ticket committed but before the next model answer.
    let scenario = r#"{"turns": [
      {"text": "w", "tool_calls": [{"name": "send_ticket", "arguments": {"title": "t"}}, {"name": "slow_op", "arguments": {"ms": 60000}}]},
      {"text": "done"}]}"#;
    let env1 = env(scenario);
    let run = env1.start("go", RunConfig::default());
    env1.mem.executor().run_until_stalled();
    assert_eq!(env1.log.tickets(), 1);
    env1.kill();
    env1.mem.clock().advance(Duration::from_secs(31));
    let tools = SimToolsConfig {
        storage: Some(env1.mem.storage().clone()),
        ..SimToolsConfig::default()
    };
    let env2 = tab(
        env1.mem.clone(),
        scenario,
        tools,
        RuntimeOptions::default(),
        "tab-2",
    );
    env2.block(env2.runtime.recover()).unwrap();
    env2.block(env2.runtime.resume(&run)).unwrap();
    assert_eq!(env2.settle(&run).status, RunStatus::Completed);
    assert_eq!(env2.log.tickets(), 0, "the committed ticket was reused");
    assert!(env2.log.violations().is_empty());
}

#[test]
fn resume_after_offline_page_hidden_and_executor_lost() {
    common::lifecycle_scenario();
}

#[test]
fn s1_2_every_illegal_command_is_refused() {
    let env = common::env(READ_THEN_ANSWER);
    let run = env.start("go", RunConfig::default());
    assert_eq!(env.settle(&run).status, RunStatus::Completed);
    let req = agent_kernel::ids::RequestId::new("r").unwrap();
    let call = agent_kernel::ids::CallId::new("c").unwrap();
    for result in [
        env.block(env.runtime.resume(&run)),
        env.block(env.runtime.stop(&run)),
        env.block(env.runtime.approve(&run, &req)),
        env.block(env.runtime.deny(&run, &req)),
        env.block(env.runtime.respond(&run, &req, "x")),
        env.block(env.runtime.decide(&run, &call, Choice::Abandon)),
    ] {
        assert!(
            matches!(result, Err(RunError::WrongStatus { .. })),
            "{result:?}"
        );
    }
    // Awaiting input: resume and decide are refused, and so is approving.
    let env = common::env(
        r#"{"turns": [{"text": "q", "tool_calls": [{"name": "ask_user", "arguments": {"question": "?"}}]}, {"text": "ok"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    env.settle(&run);
    assert!(matches!(
        env.block(env.runtime.resume(&run)),
        Err(RunError::WrongStatus { .. })
    ));
    assert!(matches!(
        env.block(env.runtime.decide(&run, &call, Choice::MarkDone)),
        Err(RunError::WrongStatus { .. })
    ));
    assert!(matches!(
        env.block(env.runtime.approve(&run, &req)),
        Err(RunError::WrongStatus { .. })
    ));
    assert!(matches!(
        env.block(env.runtime.respond(&run, &req, "x")),
        Err(RunError::NoSuchRequest { .. })
    ));
    assert_eq!(
        env.run(&run).status,
        RunStatus::AwaitingInput,
        "refusals change nothing"
    );
}

/// S5.6: a Skill applied to a run narrows it to the intersection of its
/// tools and the allowlist: the model is shown only those, a call outside
/// them is refused without running, the capability of a call inside them
/// carries the narrowing as a `Tools` caveat, and the instructions reach
/// the model in the system prompt. Naming a tool the allowlist refuses
/// grants nothing.
#[test]
fn s5_6_an_applied_skill_narrows_the_run_as_a_caveat() {
    use agent_kernel::protocol::AppliedSkill;
    use std::collections::BTreeSet;
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    let env = common::env(
        r#"{"turns": [
      {"text": "w", "tool_calls": [{"name": "write_note", "arguments": {"path": "notes/a.txt", "text": "x"}}]},
      {"text": "t", "tool_calls": [{"name": "send_ticket", "arguments": {"title": "t"}}]},
      {"text": "r", "tool_calls": [{"name": "read_note", "arguments": {"path": "notes/a.txt"}}]},
      {"text": "done"}]}"#,
    );
    let config = RunConfig {
        // send_ticket is allowed by the allowlist but not by the Skill;
        // read_note is named by the Skill but refused by the allowlist.
        allowlist: Some(set(&["write_note", "send_ticket", "ask_user"])),
        skill: Some(AppliedSkill {
            name: "note-taker".into(),
            instructions: "Keep notes short. MARKER-SKILL-INSTRUCTIONS".into(),
            tools: set(&["write_note", "read_note"]),
        }),
        ..RunConfig::default()
    };
    let run = env.start("take a note", config);
    assert_eq!(env.settle(&run).status, RunStatus::Completed);

    let requests = env.requests.lock().unwrap().clone();
    assert!(!requests.is_empty());
    for request in &requests {
        let shown: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(shown, ["write_note"], "only the intersection is shown");
        // The Skill's instructions join the system prompt, which each
        // request carries apart from the conversation.
        let system = request.system.as_deref().unwrap_or_default();
        assert!(system.contains("MARKER-SKILL-INSTRUCTIONS"), "{system}");
    }

    let executions = env.log.executions();
    let tools: Vec<&str> = executions.iter().map(|e| e.tool.as_str()).collect();
    assert_eq!(tools, ["write_note"], "nothing outside the Skill ran");
    assert_eq!(
        executions[0].narrowed_to,
        vec![set(&["write_note", "read_note"])],
        "the narrowing rides on the capability"
    );
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    let states: Vec<(&str, CallState)> =
        journal.iter().map(|r| (r.tool.as_str(), r.state)).collect();
    assert_eq!(states[0], ("write_note", CallState::Committed));
    assert!(
        !journal
            .iter()
            .any(|r| r.tool == "read_note" && r.state == CallState::Committed),
        "a tool named by the Skill but not allowed is granted nothing"
    );
}

/// S1.2: the commands a status does not allow are refused in every other
/// status too (awaiting approval, interrupted, failed, cancelled), each
/// refusal typed and none of them changing the run.
#[test]
fn s1_2_commands_are_refused_in_every_status_that_does_not_allow_them() {
    use agent_kernel::ids::{CallId, RequestId};
    let unknown_req = RequestId::new("r-unknown").unwrap();
    let unknown_call = CallId::new("c-unknown").unwrap();
    let refused = |what: &str, result: Result<(), RunError>| {
        assert!(
            matches!(
                result,
                Err(RunError::WrongStatus { .. }
                    | RunError::NoSuchRequest { .. }
                    | RunError::WrongRequestKind { .. }
                    | RunError::NoSuchDecision { .. })
            ),
            "{what}: {result:?}"
        );
    };

    // Awaiting approval: resume, respond and decide are refused; only
    // approve/deny of the pending request (and stop) may follow.
    let env = common::env(STRICT_WRITE);
    let run = env.start("write it", strict());
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingApproval);
    let pending = env.block(env.runtime.pending(&run)).unwrap();
    let req = pending[0].id.clone();
    for (what, result) in [
        ("resume", env.block(env.runtime.resume(&run))),
        ("respond", env.block(env.runtime.respond(&run, &req, "x"))),
        (
            "decide",
            env.block(env.runtime.decide(&run, &unknown_call, Choice::MarkDone)),
        ),
        (
            "approve another",
            env.block(env.runtime.approve(&run, &unknown_req)),
        ),
        (
            "deny another",
            env.block(env.runtime.deny(&run, &unknown_req)),
        ),
    ] {
        refused(what, result.map(|_| ()));
    }
    assert_eq!(env.run(&run).status, RunStatus::AwaitingApproval);
    assert_eq!(env.block(env.runtime.pending(&run)).unwrap().len(), 1);

    // Interrupted: approve, deny and respond are refused; a decide on a call
    // that is not effect_unknown is refused; resume is what continues.
    let (env, run) = crash_in_flight(r#"{"name": "slow_op", "arguments": {"ms": 60000}}"#);
    let running = env.block(env.runtime.journal(&run)).unwrap()[0]
        .call_id
        .clone();
    for (what, result) in [
        (
            "approve",
            env.block(env.runtime.approve(&run, &unknown_req)),
        ),
        ("deny", env.block(env.runtime.deny(&run, &unknown_req))),
        (
            "respond",
            env.block(env.runtime.respond(&run, &unknown_req, "x")),
        ),
        (
            "decide on a call that is not effect_unknown",
            env.block(env.runtime.decide(&run, &running, Choice::Abandon)),
        ),
    ] {
        refused(what, result.map(|_| ()));
    }
    assert_eq!(env.run(&run).status, RunStatus::Interrupted);
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::Running,
        "a refused decide changes no call"
    );

    // Failed and cancelled are final: every command is refused.
    let failed = common::env(EXHAUSTED_SCENARIO);
    let failed_run = failed.start("go", RunConfig::default());
    assert_eq!(failed.settle(&failed_run).status, RunStatus::Failed);
    let cancelled = common::env(STRICT_WRITE);
    let cancelled_run = cancelled.start("write it", strict());
    cancelled.settle(&cancelled_run);
    cancelled
        .block(cancelled.runtime.stop(&cancelled_run))
        .unwrap();
    assert_eq!(
        cancelled.settle(&cancelled_run).status,
        RunStatus::Cancelled
    );
    for (env, run, status) in [
        (&failed, &failed_run, RunStatus::Failed),
        (&cancelled, &cancelled_run, RunStatus::Cancelled),
    ] {
        for (what, result) in [
            ("resume", env.block(env.runtime.resume(run)).map(|_| ())),
            ("stop", env.block(env.runtime.stop(run)).map(|_| ())),
            (
                "approve",
                env.block(env.runtime.approve(run, &unknown_req))
                    .map(|_| ()),
            ),
            (
                "deny",
                env.block(env.runtime.deny(run, &unknown_req)).map(|_| ()),
            ),
            (
                "respond",
                env.block(env.runtime.respond(run, &unknown_req, "x"))
                    .map(|_| ()),
            ),
            (
                "decide",
                env.block(env.runtime.decide(run, &unknown_call, Choice::RetryAnyway))
                    .map(|_| ()),
            ),
        ] {
            assert!(
                matches!(result, Err(RunError::WrongStatus { .. })),
                "{status:?} {what}: {result:?}"
            );
        }
        assert_eq!(env.run(run).status, status, "refusals change nothing");
    }
}

#[test]
fn s1_4_activities_gap_free_and_monotonic_when_the_clock_steps_back() {
    let env = common::env(
        r#"{"turns": [
      {"text": "q", "tool_calls": [{"name": "ask_user", "arguments": {"question": "?"}}]},
      {"text": "r", "tool_calls": [{"name": "read_note", "arguments": {"path": "a"}}]},
      {"text": "ok"}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    env.settle(&run);
    let before = env.mem.clock().wall_ms();
    env.mem.clock().set_wall_ms(before - 3_600_000);
    let pending = env.block(env.runtime.pending(&run)).unwrap();
    env.block(env.runtime.respond(&run, &pending[0].id, "yes"))
        .unwrap();
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Completed);
    let activities = env.activities(&run);
    assert!(activities.len() > 8);
    assert_gap_free_monotonic(&activities, &record);
    assert!(record.updated_at_ms >= before);
}

#[test]
fn s3_2_nested_child_run_under_the_same_lease_linked_both_ways() {
    let scenario = r#"{"turns": [
      {"text": "q", "tool_calls": [{"name": "ask_user", "arguments": {"question": "?"}}]},
      {"text": "ok"}]}"#;
    let env = common::env(scenario);
    let parent = env.start("parent", RunConfig::default());
    assert_eq!(env.settle(&parent).status, RunStatus::AwaitingInput);
    assert_eq!(env.runtime.leases().depth(&env.session), 1);
    let child = env
        .block(
            env.runtime
                .start_child(&parent, "child", RunConfig::default()),
        )
        .unwrap();
    assert_eq!(env.run(&child).parent, Some(parent.clone()));
    assert_eq!(env.run(&parent).children, vec![child.clone()]);
    assert!(
        env.activities(&parent)
            .iter()
            .any(|a| matches!(&a.kind, ActivityKind::ChildStarted { child: c } if c == &child))
    );
    // The child runs in the same tab (it asks too: same scenario).
    assert_eq!(env.settle(&child).status, RunStatus::AwaitingInput);
    assert_eq!(env.runtime.leases().depth(&env.session), 2, "reentrant");
    // Another tab cannot execute the session meanwhile (S3.1).
    let other = tab(
        env.mem.clone(),
        scenario,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    assert!(matches!(
        other.block(other.runtime.start(&env.session, "x", RunConfig::default())),
        Err(RunError::Lease(_))
    ));
    for run in [&child, &parent] {
        let p = env.block(env.runtime.pending(run)).unwrap();
        env.block(env.runtime.respond(run, &p[0].id, "yes"))
            .unwrap();
        assert_eq!(env.settle(run).status, RunStatus::Completed);
    }
}

/// A scenario with no answer after its tool round: the provider refuses the
/// second request (`scenario_exhausted`), which is not an outage.
const EXHAUSTED_SCENARIO: &str =
    r#"{"turns": [{"tool_calls": [{"name": "read_note", "arguments": {"path": "a.txt"}}]}]}"#;

#[test]
fn a_broken_model_stream_is_repeated_a_bounded_number_of_times() {
    let env = common::env(
        r#"{"turns": [{"text": "hello there, this is long enough to be split", "disconnects": 2}]}"#,
    );
    let run = env.start("go", RunConfig::default());
    assert_eq!(env.settle(&run).status, RunStatus::Completed);
    // A stream that keeps breaking past the repeats is an outage (S13.2):
    // the run is interrupted naming the provider, to continue on Resume.
    let env = common::env(r#"{"turns": [{"text": "hello", "disconnects": 3}]}"#);
    let run = env.start("go", RunConfig::default());
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Interrupted);
    assert!(
        matches!(record.stop_reason, Some(StopReason::ProviderUnavailable { ref provider, .. }) if provider == "scripted"),
        "{:?}",
        record.stop_reason
    );
    // A provider error that is not an outage fails the run at once.
    let env = common::env(EXHAUSTED_SCENARIO);
    let run = env.start("go", RunConfig::default());
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Failed);
    assert!(
        matches!(record.stop_reason, Some(StopReason::RuntimeError { ref actor, .. }) if actor == "model")
    );
}

#[test]
fn a_lost_lease_is_fenced_and_the_stale_tab_cannot_write() {
    let env1 = env(SLOW_MODEL);
    let run = env1.start("go", RunConfig::default());
    env1.mem.executor().run_until_stalled();
    // Tab 1 hangs (lease expires); tab 2 takes over and recovers.
    env1.mem.clock().advance(Duration::from_secs(31));
    let env2 = tab(
        env1.mem.clone(),
        SLOW_MODEL,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    assert_eq!(
        env2.block(env2.runtime.recover()).unwrap(),
        vec![run.clone()]
    );
    let before = env2.run(&run);
    // Tab 1 wakes up: its write carries a stale epoch and is refused.
    env1.mem.executor().run_until_stalled();
    let after = env2.run(&run);
    assert_eq!(before, after, "the stale tab wrote nothing");
    assert_eq!(after.status, RunStatus::Interrupted);
}

#[test]
fn tools_actor_loss_fails_the_run_naming_the_actor() {
    let mem = agent_kernel::memory::MemoryHost::fifo(3);
    let host = mem.host();
    let (tools, inbox) =
        agent_kernel::actor::mailbox::<agent_kernel::protocol::ToolsMsg>("tools", 4);
    drop(inbox);
    let scenario = agent_supervisor::Scenario::from_json(READ_THEN_ANSWER).unwrap();
    let provider = std::sync::Arc::new(agent_supervisor::ScriptedProvider::new(
        scenario,
        host.clock.clone(),
    ));
    let runtime = agent_supervisor::Runtime::new(
        host,
        agent_kernel::ids::OwnerId::new("t").unwrap(),
        tools,
        provider,
        RuntimeOptions::default(),
    );
    let session = agent_kernel::ids::SessionId::new("s").unwrap();
    let run = mem
        .block_on_advancing(runtime.start(&session, "x", RunConfig::default()))
        .unwrap()
        .unwrap();
    let record = mem
        .block_on_advancing(runtime.wait_settled(&run))
        .unwrap()
        .unwrap();
    assert_eq!(record.status, RunStatus::Failed);
    assert!(
        matches!(record.stop_reason, Some(StopReason::RuntimeError { ref actor, .. }) if actor == "tools")
    );
}

#[test]
fn offline_mid_dispatch_leaves_the_call_to_the_replay_rule_and_stop_settles_it() {
    let scenario = r#"{"turns": [
      {"text": "w", "tool_calls": [{"name": "slow_ticket", "arguments": {"ms": 60000}}]},
      {"text": "done"}]}"#;
    let env = common::env(scenario);
    let run = env.start("go", RunConfig::default());
    env.mem.executor().run_until_stalled();
    env.mem
        .lifecycle()
        .emit(agent_kernel::host::LifecycleEvent::Offline);
    let record = env.settle(&run);
    assert_eq!(record.status, RunStatus::Interrupted);
    assert_eq!(record.stop_reason, Some(StopReason::Offline));
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::Running
    );
    env.block(env.runtime.stop(&run)).unwrap();
    assert_eq!(env.run(&run).status, RunStatus::Cancelled);
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::EffectUnknown,
        "a final run has nothing in flight; the uncertain write is effect_unknown"
    );
}

/// S2.5 + S2.3: offline, a hidden page or a lost executor while a call is in
/// flight interrupts the run; resume then applies the replay rule to the
/// call: read-only work runs again with a higher attempt, an uncertain
/// external write becomes `effect_unknown` and waits for the person, and is
/// never repeated by itself.
#[test]
fn resume_after_each_interruption_with_a_call_in_flight() {
    use agent_kernel::host::LifecycleEvent;
    for (event, reason) in [
        (LifecycleEvent::Offline, StopReason::Offline),
        (LifecycleEvent::PageHidden, StopReason::PageInterrupted),
        (LifecycleEvent::ExecutorLost, StopReason::PageInterrupted),
    ] {
        for tool in ["slow_op", "slow_ticket"] {
            let what = format!("{event:?} during {tool}");
            let env = common::env(&format!(
                r#"{{"turns": [
                  {{"text": "w", "tool_calls": [{{"name": "{tool}", "arguments": {{"ms": 60000}}}}]}},
                  {{"text": "done"}}]}}"#
            ));
            let run = env.start("go", RunConfig::default());
            env.mem.executor().run_until_stalled();
            env.mem.lifecycle().emit(event);
            let record = env.settle(&run);
            assert_eq!(record.status, RunStatus::Interrupted, "{what}");
            assert_eq!(record.stop_reason, Some(reason.clone()), "{what}");
            assert_eq!(
                env.block(env.runtime.journal(&run)).unwrap()[0].state,
                CallState::Running,
                "{what}: the call is left to the replay rule"
            );
            env.mem.lifecycle().emit(LifecycleEvent::Online);
            env.block(env.runtime.resume(&run)).unwrap();
            let record = env.settle(&run);
            let journal = env.block(env.runtime.journal(&run)).unwrap();
            if tool == "slow_op" {
                assert_eq!(record.status, RunStatus::Completed, "{what}");
                assert_eq!(
                    (journal[0].state, journal[0].attempt),
                    (CallState::Committed, 2),
                    "{what}"
                );
            } else {
                let call = journal[0].call_id.clone();
                assert_eq!(record.status, RunStatus::Interrupted, "{what}");
                assert_eq!(
                    record.stop_reason,
                    Some(StopReason::EffectUnknown {
                        call_id: call.clone()
                    }),
                    "{what}"
                );
                assert_eq!(journal[0].state, CallState::EffectUnknown, "{what}");
                env.block(env.runtime.decide(&run, &call, Choice::MarkDone))
                    .unwrap();
                assert_eq!(env.settle(&run).status, RunStatus::Completed, "{what}");
                assert!(env.log.tickets() <= 1, "{what}: never repeated by itself");
            }
        }
    }
}

#[test]
fn subscribers_see_text_deltas_and_every_activity() {
    let env = common::env(READ_THEN_ANSWER);
    let events = env.runtime.subscribe();
    let run = env.start("go", RunConfig::default());
    env.settle(&run);
    let mut text = String::new();
    let mut activities = 0;
    while let Ok(event) = events.try_recv() {
        match event {
            agent_supervisor::RunEvent::TextDelta { text: t, .. } => text.push_str(&t),
            agent_supervisor::RunEvent::Activity(_) => activities += 1,
            other => panic!("no tool of this scenario reports progress: {other:?}"),
        }
    }
    assert_eq!(text, "Reading.The note says hello.");
    assert_eq!(activities, env.activities(&run).len());
}

#[test]
fn s5_1_allowlist_limits_schemas_and_the_supervisors_own_tools() {
    let env = common::env(
        r#"{"turns": [
      {"text": "x", "tool_calls": [
        {"name": "ask_user", "arguments": {"question": "?"}},
        {"name": "send_ticket", "arguments": {"title": "t"}}]},
      {"text": "done"}]}"#,
    );
    let config = RunConfig {
        allowlist: Some(["read_note".to_owned()].into_iter().collect()),
        ..RunConfig::default()
    };
    let run = env.start("go", config);
    assert_eq!(env.settle(&run).status, RunStatus::Completed);
    assert_eq!(env.log.tickets(), 0);
    let evidence = env.block(env.runtime.evidence(&run)).unwrap();
    assert_eq!(evidence.len(), 2);
    for e in evidence {
        let bytes = env.block(env.runtime.blob(&run, &e.result)).unwrap();
        assert!(String::from_utf8(bytes).unwrap().contains("not_allowed"));
    }
}

#[test]
fn s3_1_heartbeat_keeps_the_lease_while_the_run_waits() {
    use agent_kernel::host::Executor;
    let scenario = r#"{"turns": [{"text": "q", "tool_calls": [{"name": "ask_user", "arguments": {"question": "?"}}]}, {"text": "ok"}]}"#;
    let env = common::env(scenario);
    env.mem.executor().spawn(env.runtime.heartbeat());
    let run = env.start("go", RunConfig::default());
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingInput);
    for _ in 0..6 {
        env.mem.advance(Duration::from_secs(10));
    }
    let other = tab(
        env.mem.clone(),
        scenario,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    assert!(
        matches!(
            other.block(other.runtime.start(&env.session, "x", RunConfig::default())),
            Err(RunError::Lease(_))
        ),
        "60 s later the lease is still held"
    );
    let p = env.block(env.runtime.pending(&run)).unwrap();
    env.block(env.runtime.respond(&run, &p[0].id, "yes"))
        .unwrap();
    assert_eq!(env.settle(&run).status, RunStatus::Completed);
}

#[test]
fn corrupt_records_give_typed_errors_and_do_not_block_recovery() {
    let env1 = common::env(SLOW_MODEL);
    let run = env1.start("go", RunConfig::default());
    env1.mem.executor().run_until_stalled();
    env1.kill();
    let storage = env1.storage();
    storage
        .corrupt_for_tests(Table::Runs, "run-broken", b"{not json")
        .unwrap();
    env1.mem.clock().advance(Duration::from_secs(31));
    let env2 = tab(
        env1.mem.clone(),
        SLOW_MODEL,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    assert_eq!(
        env2.block(env2.runtime.recover()).unwrap(),
        vec![run.clone()]
    );
    let broken = agent_kernel::ids::RunId::new("run-broken").unwrap();
    assert!(matches!(
        env2.block(env2.runtime.run(&broken)),
        Err(RunError::Storage(
            agent_kernel::host::StorageError::Corrupt { .. }
        ))
    ));
    assert!(env2.block(env2.runtime.resume(&broken)).is_err());
    assert_eq!(
        env2.block(storage.get(Table::Runs, "run-broken"))
            .unwrap()
            .as_deref(),
        Some(&b"{not json"[..]),
        "the corrupt record is left as it was"
    );
    env2.block(env2.runtime.resume(&run)).unwrap();
    assert_eq!(env2.settle(&run).status, RunStatus::Completed);
}

/// S2.4: a long run (its transcript a chain of merged segments) resumes in a
/// new tab from its latest checkpoint and completes.
#[test]
fn s2_4_a_long_run_resumes_in_a_new_tab_and_completes() {
    let rounds = 150;
    let mut turns: Vec<serde_json::Value> = (0..rounds)
        .map(|_| {
            serde_json::json!({"text": "", "tool_calls": [{"name": "read_note", "arguments": {"path": "notes/a.txt"}}],
                "usage": {"input_tokens": 10, "output_tokens": 2}})
        })
        .collect();
    turns.push(serde_json::json!({"text": "", "tool_calls": [{"name": "ask_user", "arguments": {"question": "go on?"}}],
        "usage": {"input_tokens": 10, "output_tokens": 2}}));
    turns.push(
        serde_json::json!({"text": "done", "usage": {"input_tokens": 10, "output_tokens": 2}}),
    );
    let scenario = serde_json::json!({ "turns": turns }).to_string();
    let config = RunConfig {
        budget: Budget {
            max_tool_rounds: rounds + 1,
            max_tool_calls: rounds + 1,
            max_tokens: None,
            max_duration_ms: None,
        },
        ..RunConfig::default()
    };
    let env1 = common::env(&scenario);
    let run = env1.start("go", config);
    assert_eq!(env1.settle(&run).status, RunStatus::AwaitingInput);
    env1.kill();
    env1.mem.clock().advance(Duration::from_secs(31));
    let env2 = tab(
        env1.mem.clone(),
        &scenario,
        SimToolsConfig::default(),
        RuntimeOptions::default(),
        "tab-2",
    );
    let pending = env2.block(env2.runtime.pending(&run)).unwrap();
    let request = pending
        .iter()
        .find(|p| matches!(p.kind, PendingKind::Input { .. }))
        .expect("the question is pending")
        .id
        .clone();
    env2.block(env2.runtime.respond(&run, &request, "yes"))
        .unwrap();
    let done = env2.settle(&run);
    assert_eq!(done.status, RunStatus::Completed, "{done:?}");
    assert_eq!(done.usage.tool_rounds, u64::from(rounds) + 1);
}
