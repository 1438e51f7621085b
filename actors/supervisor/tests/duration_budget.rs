//! The duration budget while the run waits (issue 12, item 2): time spent
//! waiting on a call in flight or a model stream is active time (S4.1:
//! "active wall time (time spent `running`)"), and the hard duration limit
//! of S4.4 ends the run `budget_exhausted` / `duration` even when the call
//! never answers. The call is settled as a stop settles it (S2.1, S2.3: an
//! uncertain effect is never replayed). Time awaiting approval or
//! interrupted is not active time. On the memory host with a manual clock,
//! so every time below is exact; the bounds asserted are still ranges with
//! their reason.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::time::Duration;

use agent_capabilities::ApprovalMode;
use agent_kernel::budget::{Budget, BudgetDimension};
use agent_kernel::host::{Clock, LifecycleEvent};
use agent_kernel::journal::CallState;
use agent_kernel::run::{ActivityKind, RunStatus, StopReason};
use agent_supervisor::sim::tools::SimToolsConfig;
use agent_supervisor::{RunConfig, RunError, RuntimeOptions};
use common::*;

/// The stop grace of `RuntimeOptions::default()`: how long a call in flight
/// may still finish once the budget has run out.
const GRACE_MS: u64 = 5_000;
/// `RuntimeOptions::default().active_time_flush`.
const FLUSH_MS: u64 = 10_000;

fn with_duration(max_duration_ms: u64) -> RunConfig {
    RunConfig {
        budget: Budget {
            max_duration_ms: Some(max_duration_ms),
            ..Budget::fallback()
        },
        ..RunConfig::default()
    }
}

/// One tool round with `call` (JSON of one tool call), then a final answer.
fn one_call(model_delay_ms: u64, call: &str) -> String {
    format!(
        r#"{{"turns": [
          {{"text": "working", "delay_ms": {model_delay_ms}, "tool_calls": [{call}]}},
          {{"text": "done"}}]}}"#
    )
}

const HANG: &str = r#"{"name": "hang_op", "arguments": {}}"#;

fn slow_op(ms: u64) -> String {
    format!(r#"{{"name": "slow_op", "arguments": {{"ms": {ms}}}}}"#)
}

fn slow_ticket(ms: u64) -> String {
    format!(r#"{{"name": "slow_ticket", "arguments": {{"ms": {ms}}}}}"#)
}

const OUT_OF_TIME: Option<StopReason> = Some(StopReason::BudgetExhausted {
    dimension: BudgetDimension::Duration,
});

/// Run until `run` is not `running`, failing (instead of waiting forever on
/// a hung call) when that takes more than a day of the host clock: without
/// the limit's timer a hung call never ends the run.
fn settle_within_a_day(env: &Env, run: &agent_kernel::ids::RunId) -> agent_kernel::run::AgentRun {
    let clock = env.clock();
    let limit = Duration::from_secs(24 * 3_600);
    env.block(agent_kernel::host::timeout(
        &*clock,
        limit,
        env.runtime.wait_settled(run),
    ))
    .expect("the run settles within a day of active time")
    .expect("run settles")
}

fn elapsed_ms(env: &Env, since: Duration) -> u64 {
    u64::try_from((env.mem.clock().monotonic() - since).as_millis()).unwrap()
}

/// The acceptance item: a run whose tool hangs ends `budget_exhausted` on
/// duration (S4.4), with its active time at the limit plus at most the stop
/// grace, and the stuck call settled as a stop settles it: read-only work
/// `failed` (`budget_exhausted`, safe to repeat), nothing left `running`.
#[test]
fn s4_4_a_run_whose_tool_hangs_ends_budget_exhausted_on_duration() {
    let budget = 600_000; // Light's 10 minutes (S4.3)
    let env = common::env(&one_call(1_000, HANG));
    let start = env.mem.clock().monotonic();
    let run = env.start("go", with_duration(budget));
    let record = settle_within_a_day(&env, &run);
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.stop_reason, OUT_OF_TIME);
    // The model's second and the tool's time up to the limit, then the
    // grace the call is given to finish: never less than the budget, never
    // more than the budget plus the grace.
    assert!(
        (budget..=budget + GRACE_MS).contains(&record.usage.active_ms),
        "active {} ms for a {budget} ms budget",
        record.usage.active_ms
    );
    assert_eq!(
        record.usage.active_ms,
        elapsed_ms(&env, start),
        "all of it was time spent running"
    );
    assert!(env.log.executed(run.as_str(), "t1-c0"), "the call was sent");
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].tool, "hang_op");
    assert_eq!(journal[0].state, CallState::Failed);
    let error = journal[0].error.as_ref().expect("the call's fate");
    assert_eq!(error.code, "budget_exhausted");
    assert!(error.retryable, "read-only work is safe to repeat (S2.3)");
    // The activities tell the same story, in order: the call ended, then the run.
    let activities = env.activities(&run);
    assert_gap_free_monotonic(&activities, &record);
    let tail: Vec<_> = activities.iter().rev().take(2).map(|a| &a.kind).collect();
    assert!(matches!(
        tail[1],
        ActivityKind::ToolCall {
            state: CallState::Failed,
            ..
        }
    ));
    assert!(matches!(
        tail[0],
        ActivityKind::StatusChanged {
            to: RunStatus::Failed,
            ..
        }
    ));
    // The output so far stays readable (S4.4); no further model round.
    assert_eq!(
        env.block(env.runtime.output(&run)).unwrap().as_deref(),
        Some("working")
    );
    assert_eq!(env.requests.lock().unwrap().len(), 1);
    // Final: nothing resumes it.
    assert!(matches!(
        env.block(env.runtime.resume(&run)),
        Err(RunError::WrongStatus { .. })
    ));
}

/// An uncertain external write that is still in flight when the time runs
/// out becomes `effect_unknown` (as with a stop) and is never sent again:
/// the run is final, so no decision is pending and nothing is replayed (S2.3).
#[test]
fn s2_3_an_uncertain_write_in_flight_at_the_limit_is_effect_unknown_never_replayed() {
    let budget = 60_000;
    let env = common::env(&one_call(0, &slow_ticket(24 * 3_600_000)));
    let run = env.start("go", with_duration(budget));
    let record = settle_within_a_day(&env, &run);
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.stop_reason, OUT_OF_TIME);
    assert_eq!(record.usage.active_ms, budget + GRACE_MS);
    let journal = env.block(env.runtime.journal(&run)).unwrap();
    assert_eq!(journal[0].state, CallState::EffectUnknown);
    assert!(env.block(env.runtime.pending(&run)).unwrap().is_empty());
    assert!(matches!(
        env.block(env.runtime.decide(
            &run,
            &journal[0].call_id,
            agent_supervisor::Choice::RetryAnyway
        )),
        Err(RunError::WrongStatus { .. })
    ));
    // A day later the write finally lands once (it was sent once); nothing
    // sends it again.
    env.mem.advance(Duration::from_secs(2 * 24 * 3_600));
    assert_eq!(env.log.tickets(), 1);
    assert_eq!(env.run(&run).status, RunStatus::Failed);
}

/// S4.4 at, below and above the limit with the tool's own time: a call
/// answering just under the budget completes and its time is active time; one
/// answering at the limit is recorded but no round follows; one answering
/// within the grace after the limit is recorded; one answering later is
/// settled as unfinished at the limit plus the grace.
#[test]
fn s4_1_s4_4_a_tool_answering_below_at_and_above_the_limit() {
    let budget = 60_000;
    for (tool_ms, status, call_state, active_ms) in [
        (59_999, RunStatus::Completed, CallState::Committed, 59_999),
        (60_000, RunStatus::Failed, CallState::Committed, 60_000),
        (60_001, RunStatus::Failed, CallState::Committed, 60_001),
        (
            budget + GRACE_MS + 1,
            RunStatus::Failed,
            CallState::Failed,
            budget + GRACE_MS,
        ),
    ] {
        let what = format!("a tool taking {tool_ms} ms");
        let env = common::env(&one_call(0, &slow_op(tool_ms)));
        let run = env.start("go", with_duration(budget));
        let record = settle_within_a_day(&env, &run);
        assert_eq!(record.status, status, "{what}");
        if status == RunStatus::Failed {
            assert_eq!(record.stop_reason, OUT_OF_TIME, "{what}");
        } else {
            assert_eq!(
                env.block(env.runtime.output(&run)).unwrap().as_deref(),
                Some("done"),
                "{what}"
            );
        }
        assert_eq!(record.usage.active_ms, active_ms, "{what}");
        let journal = env.block(env.runtime.journal(&run)).unwrap();
        assert_eq!(journal[0].state, call_state, "{what}");
    }
}

/// Without a duration limit a slow call is simply waited for, and its time
/// is active time all the same (S4.1).
#[test]
fn s4_1_without_a_duration_limit_a_slow_call_is_waited_for_and_counted() {
    let env = common::env(&one_call(2_000, &slow_op(3_600_000)));
    let run = env.start("go", RunConfig::default());
    let record = settle_within_a_day(&env, &run);
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.usage.active_ms, 3_602_000);
}

/// A model stream that never ends is bounded the same way (S4.4): nothing
/// of the round was committed, so the run ends at the limit exactly (no
/// call in flight, no grace) and no journal record exists.
#[test]
fn s4_4_a_model_stream_that_hangs_ends_budget_exhausted_at_the_limit() {
    let budget = 90_000;
    let env = common::env(r#"{"turns": [{"text": "never", "delay_ms": 86400000}]}"#);
    let run = env.start("go", with_duration(budget));
    let record = settle_within_a_day(&env, &run);
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.stop_reason, OUT_OF_TIME);
    assert_eq!(record.usage.active_ms, budget);
    assert!(env.block(env.runtime.journal(&run)).unwrap().is_empty());
}

/// S4.1: time `awaiting_approval` is not active time, so it neither counts
/// nor moves the limit's deadline: an hour waiting for the person, then a
/// call that hangs ends the run after the budget's *remaining* active time.
#[test]
fn s4_1_time_awaiting_approval_does_not_count() {
    let budget = 60_000;
    let strict = |b: u64| RunConfig {
        approval: ApprovalMode::Strict,
        ..with_duration(b)
    };
    // A call approved after an hour that answers in 40 s: completed, 50 s active.
    let env = common::env(&one_call(10_000, &slow_ticket(40_000)));
    let run = env.start("go", strict(budget));
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingApproval);
    env.mem.advance(Duration::from_secs(3_600));
    let waiting = env.run(&run);
    assert_eq!(waiting.status, RunStatus::AwaitingApproval);
    assert_eq!(waiting.usage.active_ms, 10_000);
    let pending = env.block(env.runtime.pending(&run)).unwrap();
    env.block(env.runtime.approve(&run, &pending[0].id))
        .unwrap();
    let record = settle_within_a_day(&env, &run);
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.usage.active_ms, 50_000);

    // A call approved after an hour that hangs: the run ends once the 50 s
    // left are spent (plus the grace), not at once for the hour waited.
    let env = common::env(&one_call(10_000, &slow_ticket(24 * 3_600_000)));
    let run = env.start("go", strict(budget));
    assert_eq!(env.settle(&run).status, RunStatus::AwaitingApproval);
    env.mem.advance(Duration::from_secs(3_600));
    let pending = env.block(env.runtime.pending(&run)).unwrap();
    let approved_at = env.mem.clock().monotonic();
    env.block(env.runtime.approve(&run, &pending[0].id))
        .unwrap();
    let record = settle_within_a_day(&env, &run);
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.stop_reason, OUT_OF_TIME);
    assert_eq!(record.usage.active_ms, budget + GRACE_MS);
    assert_eq!(elapsed_ms(&env, approved_at), budget - 10_000 + GRACE_MS);
    assert_eq!(
        env.block(env.runtime.journal(&run)).unwrap()[0].state,
        CallState::EffectUnknown
    );
}

/// S4.1 and S2.5: time `interrupted` (offline here) is not active time; after
/// resume the run counts on from where it was.
#[test]
fn s4_1_time_interrupted_does_not_count() {
    let env = common::env(r#"{"turns": [{"text": "slow", "delay_ms": 30000}]}"#);
    let run = env.start("go", with_duration(60_000));
    env.mem.advance(Duration::from_secs(10));
    env.mem.lifecycle().emit(LifecycleEvent::Offline);
    let record = settle_within_a_day(&env, &run);
    assert_eq!(record.status, RunStatus::Interrupted);
    assert_eq!(record.usage.active_ms, 10_000);
    env.mem.advance(Duration::from_secs(3_600));
    env.mem.lifecycle().emit(LifecycleEvent::Online);
    env.block(env.runtime.resume(&run)).unwrap();
    let record = settle_within_a_day(&env, &run);
    assert_eq!(record.status, RunStatus::Completed);
    // The broken-off round is repeated in full: 10 s + 30 s.
    assert_eq!(record.usage.active_ms, 40_000);
}

/// While a call hangs, the active time is written to the run record at
/// least every `active_time_flush` (the run card's "active" no longer shows
/// 0 s). The rule for a crash: the time since the last write is lost (at
/// most one flush interval), time while no tab runs the run is not counted,
/// nothing is counted twice, and a resumed run counts on from the stored
/// value, so the limit still ends it. Kills below, at and above one interval.
#[test]
fn active_time_of_a_call_in_flight_survives_a_crash_within_one_flush_interval() {
    let budget = 600_000;
    for seconds_in_flight in [9u64, 10, 11, 35] {
        let what = format!("killed {seconds_in_flight} s into the call");
        let scenario = one_call(0, HANG);
        let env1 = common::env(&scenario);
        let run = env1.start("go", with_duration(budget));
        env1.mem.executor().run_until_stalled();
        for _ in 0..seconds_in_flight {
            env1.mem.advance(Duration::from_secs(1));
        }
        let stored = env1.run(&run);
        assert_eq!(stored.status, RunStatus::Running, "{what}");
        let flushed = seconds_in_flight / (FLUSH_MS / 1_000) * FLUSH_MS;
        assert_eq!(stored.usage.active_ms, flushed, "{what}");
        assert!(seconds_in_flight * 1_000 - stored.usage.active_ms < FLUSH_MS);

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
        let recovered = env2.run(&run);
        assert_eq!(recovered.status, RunStatus::Interrupted, "{what}");
        assert_eq!(
            recovered.usage.active_ms, flushed,
            "{what}: the 31 s without a live tab are not active time"
        );
        env2.block(env2.runtime.resume(&run)).unwrap();
        let resumed_at = env2.mem.clock().monotonic();
        let record = settle_within_a_day(&env2, &run);
        assert_eq!(record.status, RunStatus::Failed, "{what}");
        assert_eq!(record.stop_reason, OUT_OF_TIME, "{what}");
        assert_eq!(record.usage.active_ms, budget + GRACE_MS, "{what}");
        assert_eq!(
            elapsed_ms(&env2, resumed_at),
            budget - flushed + GRACE_MS,
            "{what}: counted on from the stored active time"
        );
        let journal = env2.block(env2.runtime.journal(&run)).unwrap();
        assert_eq!(
            (journal[0].state, journal[0].attempt),
            (CallState::Failed, 2),
            "{what}: read-only work retried once on resume, then settled at the limit"
        );
    }
}

/// `RuntimeOptions::active_time_flush` has a floor of 1 s (a zero interval
/// would write without pause): below, at and above it, the active time a
/// hung call has stored after 5 s of 1 s steps.
#[test]
fn the_active_time_flush_interval_has_a_one_second_floor() {
    for (flush, stored_after_5s) in [
        (Duration::ZERO, 5_000),
        (Duration::from_millis(500), 5_000),
        (Duration::from_secs(1), 5_000),
        (Duration::from_secs(2), 4_000),
    ] {
        let env = env_with(
            &one_call(0, HANG),
            SimToolsConfig::default(),
            RuntimeOptions {
                active_time_flush: flush,
                ..RuntimeOptions::default()
            },
        );
        let run = env.start("go", with_duration(600_000));
        env.mem.executor().run_until_stalled();
        for _ in 0..5 {
            env.mem.advance(Duration::from_secs(1));
        }
        let stored = env.run(&run);
        assert_eq!(stored.status, RunStatus::Running, "flush {flush:?}");
        assert_eq!(stored.usage.active_ms, stored_after_5s, "flush {flush:?}");
    }
}
