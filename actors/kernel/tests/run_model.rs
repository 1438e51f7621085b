//! The run model (S1), budgets (S4) and the journal (S2) against tables
//! written out by hand from SPEC.md and DESIGN.md, not derived from the code.

use agent_capabilities::{EffectClass, EffectSet, Fingerprint, Idempotency};
use agent_kernel::budget::{Budget, BudgetDimension, BudgetPreset};
use agent_kernel::host::BlobRef;
use agent_kernel::journal::{
    CallState, JournalError, JournalRecord, ReplayDecision, replay_decision,
};
use agent_kernel::run::{RunStatus, StopReason, TransitionError, Usage, check_transition};
use agent_kernel::{CallId, RunId};
use serde_json::json;

// ----- Status transitions ------------------------------------------------------

use RunStatus::{
    AwaitingApproval as AAp, AwaitingInput as AIn, Cancelled as Can, Completed as Com,
    Failed as Fai, Interrupted as Int, Running as Run,
};

/// Rows: from; columns: to, in the order
/// running, awaiting_input, awaiting_approval, interrupted, completed, failed, cancelled.
const ALLOWED: [(RunStatus, [bool; 7]); 7] = [
    (Run, [false, true, true, true, true, true, true]),
    (AIn, [true, false, false, true, false, true, true]),
    (AAp, [true, false, false, true, false, true, true]),
    (Int, [true, false, false, false, false, true, true]),
    (Com, [false, false, false, false, false, false, false]),
    (Fai, [false, false, false, false, false, false, false]),
    (Can, [false, false, false, false, false, false, false]),
];
const COLUMNS: [RunStatus; 7] = [Run, AIn, AAp, Int, Com, Fai, Can];

fn a_reason_for(to: RunStatus) -> Option<StopReason> {
    match to {
        Run | AIn | AAp => None,
        Int => Some(StopReason::PageInterrupted),
        Com => Some(StopReason::Completed),
        Fai => Some(StopReason::RuntimeError {
            actor: "tools".into(),
            message: "crashed".into(),
        }),
        Can => Some(StopReason::UserStopped),
    }
}

#[test]
fn every_status_transition_matches_the_table() {
    assert_eq!(RunStatus::ALL, COLUMNS);
    let mut checked = 0;
    for from in RunStatus::ALL {
        let row = ALLOWED
            .iter()
            .find(|(f, _)| *f == from)
            .expect("row for every status")
            .1;
        for (i, to) in RunStatus::ALL.into_iter().enumerate() {
            let expected = row[i];
            assert_eq!(from.can_transition_to(to), expected, "{from} -> {to}");
            let result = check_transition(from, to, a_reason_for(to).as_ref());
            if expected {
                assert_eq!(result, Ok(()), "{from} -> {to}");
            } else {
                assert_eq!(
                    result,
                    Err(TransitionError::Illegal { from, to }),
                    "{from} -> {to}"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 49);
}

#[test]
fn final_statuses() {
    for s in RunStatus::ALL {
        assert_eq!(s.is_final(), matches!(s, Com | Fai | Can), "{s}");
    }
    let names: Vec<_> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        names,
        [
            "running",
            "awaiting_input",
            "awaiting_approval",
            "interrupted",
            "completed",
            "failed",
            "cancelled"
        ]
    );
    for s in RunStatus::ALL {
        assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
    }
}

fn every_reason() -> Vec<StopReason> {
    vec![
        StopReason::Completed,
        StopReason::UserStopped,
        StopReason::BudgetExhausted {
            dimension: BudgetDimension::ToolCalls,
        },
        StopReason::Offline,
        StopReason::PageInterrupted,
        StopReason::EffectUnknown {
            call_id: CallId::new("call-1").unwrap(),
        },
        StopReason::RuntimeError {
            actor: "fetch".into(),
            message: "panicked".into(),
        },
        StopReason::ProviderUnavailable {
            provider: "gemini".into(),
            message: "HTTP 503".into(),
        },
        StopReason::OutputLimit,
        StopReason::ContentFiltered {
            provider: "anthropic".into(),
        },
    ]
}

/// Which statuses each reason may go with (DESIGN.md "Stop reasons by status").
fn reason_allows(reason: &StopReason) -> &'static [RunStatus] {
    match reason {
        StopReason::Completed => &[Com],
        StopReason::UserStopped => &[Can],
        StopReason::BudgetExhausted { .. } => &[Fai],
        StopReason::Offline => &[Int],
        StopReason::PageInterrupted => &[Int],
        StopReason::EffectUnknown { .. } => &[Int, Fai],
        StopReason::RuntimeError { .. } => &[Fai],
        StopReason::ProviderUnavailable { .. } => &[Int],
        StopReason::OutputLimit => &[Com],
        StopReason::ContentFiltered { .. } => &[Fai],
    }
}

#[test]
fn stop_reasons_by_status() {
    for reason in every_reason() {
        for status in RunStatus::ALL {
            let expected = reason_allows(&reason).contains(&status);
            assert_eq!(
                reason.allowed_with(status),
                expected,
                "{reason:?} with {status}"
            );
            // Through check_transition, from running (which may go anywhere else).
            if status != Run {
                let result = check_transition(Run, status, Some(&reason));
                if expected {
                    assert_eq!(result, Ok(()), "{reason:?} with {status}");
                } else {
                    assert_eq!(
                        result,
                        Err(TransitionError::ReasonNotAllowed {
                            to: status,
                            reason: reason.clone()
                        }),
                        "{reason:?} with {status}"
                    );
                }
            }
        }
    }
}

#[test]
fn final_and_interrupted_statuses_need_a_reason_and_others_refuse_one() {
    for to in [Int, Com, Fai, Can] {
        assert_eq!(
            check_transition(Run, to, None),
            Err(TransitionError::MissingReason { to })
        );
    }
    for to in [AIn, AAp] {
        assert_eq!(check_transition(Run, to, None), Ok(()));
        assert!(matches!(
            check_transition(Run, to, Some(&StopReason::Offline)),
            Err(TransitionError::ReasonNotAllowed { .. })
        ));
    }
    assert_eq!(check_transition(Int, Run, None), Ok(()));
    let budget = StopReason::BudgetExhausted {
        dimension: BudgetDimension::ToolRounds,
    };
    assert_eq!(
        serde_json::to_value(&budget).unwrap(),
        json!({"reason": "budget_exhausted", "dimension": "tool_rounds"})
    );
}

// ----- Budgets -------------------------------------------------------------------

#[test]
fn fallback_and_presets_are_the_spec_numbers() {
    let fallback = Budget::fallback();
    assert_eq!(
        (fallback.max_tool_rounds, fallback.max_tool_calls),
        (20, 100)
    );
    assert_eq!(
        (fallback.max_tokens, fallback.max_duration_ms),
        (None, None)
    );
    assert_eq!(Budget::default(), fallback);
    let cases = [
        (BudgetPreset::Light, 8, 30, 10 * 60_000),
        (BudgetPreset::Standard, 16, 75, 25 * 60_000),
        (BudgetPreset::Extended, 24, 150, 45 * 60_000),
    ];
    for (preset, rounds, calls, ms) in cases {
        let b = Budget::preset(preset);
        assert_eq!(b.max_tool_rounds, rounds, "{preset:?}");
        assert_eq!(b.max_tool_calls, calls, "{preset:?}");
        assert_eq!(b.max_duration_ms, Some(ms), "{preset:?}");
        assert_eq!(b.max_tokens, None, "{preset:?}");
        assert_eq!(b.validate(), Ok(()));
    }
}

#[test]
fn custom_budgets_are_read_and_defaults_filled() {
    let b = Budget::from_json(&json!({"max_tool_rounds": 10, "max_tool_calls": 40,
        "max_tokens": 200000, "max_duration_ms": 600000}))
    .unwrap();
    assert_eq!(
        b,
        Budget {
            max_tool_rounds: 10,
            max_tool_calls: 40,
            max_tokens: Some(200_000),
            max_duration_ms: Some(600_000)
        }
    );
    assert_eq!(Budget::from_json(&json!({})).unwrap(), Budget::fallback());
    let only_tokens =
        Budget::from_json(&json!({"max_tokens": 5, "max_duration_ms": null})).unwrap();
    assert_eq!(only_tokens.max_tool_rounds, 20);
    assert_eq!(only_tokens.max_tokens, Some(5));
    assert_eq!(only_tokens.max_duration_ms, None);
    // The upper bounds themselves are accepted.
    assert!(
        Budget::from_json(&json!({"max_tool_rounds": 1000, "max_tool_calls": 10000,
        "max_tokens": 100000000u64, "max_duration_ms": 86400000u64}))
        .is_ok()
    );
}

#[test]
fn invalid_custom_budgets_name_the_field() {
    let fields = [
        "max_tool_rounds",
        "max_tool_calls",
        "max_tokens",
        "max_duration_ms",
    ];
    let bad_values = [
        (json!(0), "at least 1"),
        (json!(-3), "negative"),
        (json!(2.5), "fraction"),
        (json!("10"), "string"),
        (json!(true), "boolean"),
        (json!([1]), "array"),
        (json!(u64::MAX), "at most"),
        (json!(1e300), "at most"),
    ];
    for field in fields {
        for (value, problem) in &bad_values {
            let err = Budget::from_json(&json!({ field: value })).unwrap_err();
            assert_eq!(err.field, field, "{field} = {value}");
            assert!(
                err.problem.contains(problem),
                "{field} = {value}: {}",
                err.problem
            );
            assert!(err.to_string().contains(field), "{err}");
        }
    }
    // Just above each upper bound.
    for (field, max) in [
        ("max_tool_rounds", 1_000u64),
        ("max_tool_calls", 10_000),
        ("max_tokens", 100_000_000),
        ("max_duration_ms", 86_400_000),
    ] {
        let err = Budget::from_json(&json!({ field: max + 1 })).unwrap_err();
        assert_eq!(err.field, field);
    }
    let err = Budget::from_json(&json!({"max_rounds": 3})).unwrap_err();
    assert!(err.problem.contains("max_rounds"), "{err}");
    assert!(Budget::from_json(&json!([1, 2])).is_err());
    assert!(Budget::from_json(&json!("standard")).is_err());
    let zero = Budget {
        max_tool_rounds: 0,
        ..Budget::fallback()
    };
    assert_eq!(zero.validate().unwrap_err().field, "max_tool_rounds");
    let big = Budget {
        max_tokens: Some(u64::MAX),
        ..Budget::fallback()
    };
    assert_eq!(big.validate().unwrap_err().field, "max_tokens");
}

fn usage(rounds: u64, calls: u64, tokens: u64, active_ms: u64) -> Usage {
    Usage {
        tool_rounds: rounds,
        tool_calls: calls,
        input_tokens: tokens / 2,
        output_tokens: tokens - tokens / 2,
        active_ms,
        ..Usage::default()
    }
}

#[test]
fn limits_at_below_and_above() {
    let b = Budget {
        max_tool_rounds: 5,
        max_tool_calls: 10,
        max_tokens: Some(1_000),
        max_duration_ms: Some(60_000),
    };
    // Rounds: 4 used → one more may start; 5 or 6 used → exhausted.
    assert_eq!(b.check_new_round(&usage(4, 0, 0, 0)), Ok(()));
    assert_eq!(
        b.check_new_round(&usage(5, 0, 0, 0)),
        Err(BudgetDimension::ToolRounds)
    );
    assert_eq!(
        b.check_new_round(&usage(6, 0, 0, 0)),
        Err(BudgetDimension::ToolRounds)
    );
    // Calls.
    assert_eq!(b.check_new_call(&usage(9, 9, 0, 0)), Ok(()));
    assert_eq!(
        b.check_new_call(&usage(0, 10, 0, 0)),
        Err(BudgetDimension::ToolCalls)
    );
    assert_eq!(
        b.check_new_call(&usage(0, 11, 0, 0)),
        Err(BudgetDimension::ToolCalls)
    );
    // Rounds do not limit calls, nor calls rounds.
    assert_eq!(b.check_new_call(&usage(50, 0, 0, 0)), Ok(()));
    assert_eq!(b.check_new_round(&usage(0, 50, 0, 0)), Ok(()));
    // Tokens.
    for check in [
        Budget::check_new_round,
        Budget::check_new_call,
        Budget::check_hard_limits,
    ] {
        assert_eq!(check(&b, &usage(0, 0, 999, 0)), Ok(()));
        assert_eq!(
            check(&b, &usage(0, 0, 1_000, 0)),
            Err(BudgetDimension::Tokens)
        );
        assert_eq!(
            check(&b, &usage(0, 0, 1_001, 0)),
            Err(BudgetDimension::Tokens)
        );
        assert_eq!(check(&b, &usage(0, 0, 0, 59_999)), Ok(()));
        assert_eq!(
            check(&b, &usage(0, 0, 0, 60_000)),
            Err(BudgetDimension::Duration)
        );
        assert_eq!(
            check(&b, &usage(0, 0, 0, 60_001)),
            Err(BudgetDimension::Duration)
        );
    }
    // Active time left before the duration limit (the supervisor's timer
    // while it waits, S4.1/S4.4): below, at and above the limit.
    assert_eq!(b.duration_left_ms(&usage(0, 0, 0, 0)), Some(60_000));
    assert_eq!(b.duration_left_ms(&usage(0, 0, 0, 59_999)), Some(1));
    assert_eq!(b.duration_left_ms(&usage(0, 0, 0, 60_000)), Some(0));
    assert_eq!(b.duration_left_ms(&usage(0, 0, 0, u64::MAX)), Some(0));
    assert_eq!(
        Budget::fallback().duration_left_ms(&usage(0, 0, 0, 5)),
        None
    );
    // Without hard limits, tokens and time never exhaust.
    let f = Budget::fallback();
    assert_eq!(
        f.check_hard_limits(&usage(0, 0, u64::MAX, u64::MAX)),
        Ok(())
    );
    assert_eq!(f.check_new_round(&usage(19, 0, 0, 0)), Ok(()));
    assert_eq!(
        f.check_new_round(&usage(20, 0, 0, 0)),
        Err(BudgetDimension::ToolRounds)
    );
    assert_eq!(f.check_new_call(&usage(0, 99, 0, 0)), Ok(()));
    assert_eq!(
        f.check_new_call(&usage(0, 100, 0, 0)),
        Err(BudgetDimension::ToolCalls)
    );
    // Token totals saturate instead of overflowing.
    let huge = Usage {
        input_tokens: u64::MAX,
        output_tokens: u64::MAX,
        ..Usage::default()
    };
    assert_eq!(huge.total_tokens(), u64::MAX);
    assert_eq!(b.check_hard_limits(&huge), Err(BudgetDimension::Tokens));
}

// ----- Journal -------------------------------------------------------------------

use CallState::{
    Committed as JCom, EffectUnknown as JUnk, Failed as JFai, Prepared as JPre, Running as JRun,
};

/// Rows: from; columns: to, in the order prepared, running, committed, failed, effect_unknown.
const MOVES: [(CallState, [bool; 5]); 5] = [
    (JPre, [false, true, false, true, false]),
    (JRun, [false, true, true, true, true]),
    (JCom, [false, true, false, false, true]),
    (JFai, [false, false, false, false, false]),
    (JUnk, [false, true, true, true, false]),
];
const STATES: [CallState; 5] = [JPre, JRun, JCom, JFai, JUnk];

fn record(state: CallState, effects: &[EffectClass], idempotency: Idempotency) -> JournalRecord {
    JournalRecord {
        run: RunId::new("run-1").unwrap(),
        call_id: CallId::new("call-1").unwrap(),
        tool: "tool".into(),
        fingerprint: Fingerprint::of(&json!({"name": "tool"})).unwrap(),
        args: BlobRef::of(b"{}"),
        effects: effects.iter().copied().collect::<EffectSet>(),
        idempotency,
        attempt: 3,
        state,
        idempotency_key: "run-1/call-1".into(),
        target_summary: None,
        result: None,
        receipts: Vec::new(),
        error: None,
        updated_at_ms: 0,
    }
}

#[test]
fn journal_moves_match_the_table() {
    for (from, row) in MOVES {
        for (i, to) in STATES.into_iter().enumerate() {
            assert_eq!(from.can_advance_to(to), row[i], "{from:?} -> {to:?}");
            let mut r = record(from, &[EffectClass::ReadLocal], Idempotency::Idempotent);
            let result = r.advance(to, 99);
            if row[i] {
                assert_eq!(result, Ok(()));
                assert_eq!((r.state, r.updated_at_ms), (to, 99));
            } else {
                assert_eq!(
                    result,
                    Err(JournalError::IllegalMove {
                        call_id: CallId::new("call-1").unwrap(),
                        from,
                        to
                    })
                );
                assert_eq!(
                    (r.state, r.updated_at_ms),
                    (from, 0),
                    "refused move changes nothing"
                );
            }
        }
    }
    for s in STATES {
        assert_eq!(s.is_settled(), matches!(s, JCom | JFai), "{s:?}");
    }
}

#[test]
fn preparing_twice_is_a_no_op_or_a_conflict() {
    let r = record(JPre, &[EffectClass::WriteLocal], Idempotency::Idempotent);
    let fp = r.fingerprint.clone();
    let hash = r.args.hash.clone();
    assert_eq!(r.check_prepare_again("tool", &fp, &hash), Ok(()));
    let other_fp = Fingerprint::of(&json!({"name": "tool", "v": 2})).unwrap();
    let other_hash = BlobRef::of(b"{\"x\":1}").hash;
    for (tool, fp, hash) in [
        ("other", &fp, hash.as_str()),
        ("tool", &other_fp, hash.as_str()),
        ("tool", &fp, other_hash.as_str()),
    ] {
        let err = r.check_prepare_again(tool, fp, hash).unwrap_err();
        assert!(
            matches!(err, JournalError::PrepareConflict { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("call-1"));
    }
}

#[derive(Debug, Clone, Copy)]
enum Profile {
    ReadOnly,
    IdempotentLocalWrite,
    IdempotentExternalWrite,
    NonIdempotent,
    Destructive,
}

fn profile_record(state: CallState, p: Profile) -> JournalRecord {
    use EffectClass::*;
    match p {
        // Reads are retryable even when not declared idempotent.
        Profile::ReadOnly => record(state, &[ReadLocal, ReadNetwork], Idempotency::NonIdempotent),
        Profile::IdempotentLocalWrite => record(state, &[WriteLocal], Idempotency::Idempotent),
        Profile::IdempotentExternalWrite => record(
            state,
            &[ReadNetwork, WriteExternal],
            Idempotency::Idempotent,
        ),
        Profile::NonIdempotent => record(state, &[WriteLocal], Idempotency::NonIdempotent),
        // Declared idempotent, and still never replayed.
        Profile::Destructive => record(state, &[DestructiveLocal], Idempotency::Idempotent),
    }
}

/// DESIGN.md "On resume", written out for every case.
fn expected_replay(state: CallState, p: Profile, verifies: bool) -> ReplayDecision {
    let safe = matches!(p, Profile::ReadOnly | Profile::IdempotentLocalWrite);
    let retry_or_unknown = if safe {
        ReplayDecision::Retry { attempt: 4 }
    } else {
        ReplayDecision::MarkEffectUnknown
    };
    match (state, verifies) {
        (JCom, true) => ReplayDecision::Reuse,
        (JCom, false) => retry_or_unknown,
        (JRun, _) => retry_or_unknown,
        (JPre, _) => ReplayDecision::Dispatch,
        (JFai, _) => ReplayDecision::KeepFailed,
        (JUnk, _) => ReplayDecision::Blocked,
    }
}

#[test]
fn replay_decision_for_every_state_profile_and_verification() {
    let profiles = [
        Profile::ReadOnly,
        Profile::IdempotentLocalWrite,
        Profile::IdempotentExternalWrite,
        Profile::NonIdempotent,
        Profile::Destructive,
    ];
    let mut checked = 0;
    for state in STATES {
        for p in profiles {
            for verifies in [true, false] {
                let r = profile_record(state, p);
                assert_eq!(
                    replay_decision(&r, verifies),
                    expected_replay(state, p, verifies),
                    "{state:?} {p:?} verifies={verifies}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 50);
    // Credential exposure is never retried either.
    let r = record(
        JRun,
        &[EffectClass::CredentialExposure],
        Idempotency::Idempotent,
    );
    assert_eq!(
        replay_decision(&r, false),
        ReplayDecision::MarkEffectUnknown
    );
    let r = record(
        JRun,
        &[EffectClass::DestructiveExternal],
        Idempotency::Idempotent,
    );
    assert_eq!(
        replay_decision(&r, false),
        ReplayDecision::MarkEffectUnknown
    );
    // The attempt counter saturates.
    let mut r = record(JRun, &[EffectClass::ReadLocal], Idempotency::Idempotent);
    r.attempt = u32::MAX;
    assert_eq!(
        replay_decision(&r, false),
        ReplayDecision::Retry { attempt: u32::MAX }
    );
}

/// Issue 14 item 5: a preset combined with extra hard caps keeps the preset's
/// other limits; each cap is checked at, below and above its bound; a bare
/// preset name is the preset.
#[test]
fn s4_3_a_preset_with_caps_keeps_its_other_limits() {
    let light = Budget::preset(BudgetPreset::Light);
    assert_eq!(Budget::from_spec(&json!("light")).unwrap(), light);
    assert_eq!(
        Budget::from_spec(&json!({"preset": "light", "max_tokens": 50000})).unwrap(),
        Budget {
            max_tokens: Some(50_000),
            ..light
        }
    );
    // A cap may also replace one of the preset's own limits.
    let fewer_rounds =
        Budget::from_spec(&json!({"preset": "extended", "max_tool_rounds": 3})).unwrap();
    assert_eq!(fewer_rounds.max_tool_rounds, 3);
    assert_eq!(
        fewer_rounds.max_tool_calls,
        Budget::preset(BudgetPreset::Extended).max_tool_calls
    );
    assert_eq!(
        fewer_rounds.max_duration_ms,
        Budget::preset(BudgetPreset::Extended).max_duration_ms
    );
    // Each cap at its upper bound, just below it, and just above it.
    for (field, max) in [
        ("max_tool_rounds", 1_000u64),
        ("max_tool_calls", 10_000),
        ("max_tokens", 100_000_000),
        ("max_duration_ms", 86_400_000),
    ] {
        for n in [max - 1, max] {
            let b = Budget::from_spec(&json!({"preset": "standard", field: n}))
                .unwrap_or_else(|e| panic!("{field} = {n}: {e}"));
            let got = match field {
                "max_tool_rounds" => u64::from(b.max_tool_rounds),
                "max_tool_calls" => u64::from(b.max_tool_calls),
                "max_tokens" => b.max_tokens.unwrap(),
                _ => b.max_duration_ms.unwrap(),
            };
            assert_eq!(got, n, "{field}");
        }
        let err = Budget::from_spec(&json!({"preset": "standard", field: max + 1})).unwrap_err();
        assert_eq!(err.field, field);
        let err = Budget::from_spec(&json!({"preset": "standard", field: 0})).unwrap_err();
        assert_eq!(err.field, field);
    }
    // Bad presets are named.
    for bad in [
        json!("huge"),
        json!({"preset": "huge"}),
        json!({"preset": 3}),
    ] {
        let err = Budget::from_spec(&bad).unwrap_err();
        assert_eq!(err.field, "preset", "{bad}");
    }
    assert_eq!(Budget::from_spec(&json!(7)).unwrap_err().field, "budget");
}
