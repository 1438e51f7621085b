//! `ask_user` and `update_plan` (S5.1), the supervisor's own tools: their
//! definitions (the ones the model sees), the validation of their arguments,
//! of answers against the choices or the optional JSON Schema, how typed
//! text becomes an answer, and the plan kept on the run record. The run
//! loop's side (waiting, `respond` refusing a bad answer) is in run_loop.rs.
#![cfg(not(target_arch = "wasm32"))] // pure checks; run natively only

use std::collections::BTreeSet;

use agent_capabilities::{Origin, Trust};
use agent_kernel::protocol::{TargetRule, ToolResult};
use agent_supervisor::builtin::ask_user::{
    self, AnswerError, AskUserError, AskUserRequest, MAX_ANSWER_BYTES, MAX_CHOICE_CHARS,
    MAX_CHOICES, MAX_QUESTION_CHARS, MAX_SCHEMA_BYTES,
};
use agent_supervisor::builtin::plan::{
    self, MAX_EXPLANATION_CHARS, MAX_STEP_CHARS, MAX_STEPS, Plan, PlanError, StepStatus,
};
use agent_supervisor::builtin::{TOOL_NAMES, definitions};
use serde_json::json;

#[test]
fn every_supervisor_tool_exports_a_fingerprinted_builtin_definition_with_a_valid_schema() {
    let defs = definitions();
    let names: BTreeSet<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, TOOL_NAMES.into_iter().collect());
    for def in &defs {
        assert_eq!(def.origin, Origin::Builtin, "{}", def.name);
        assert!(def.provider.is_none());
        assert!(def.fingerprint().is_ok());
        jsonschema::validator_for(&def.parameters).unwrap_or_else(|e| panic!("{}: {e}", def.name));
    }
    // Stable: the same definitions give the same fingerprints.
    let again: Vec<_> = definitions()
        .iter()
        .map(|d| d.fingerprint().expect("fp"))
        .collect();
    let first: Vec<_> = defs.iter().map(|d| d.fingerprint().expect("fp")).collect();
    assert_eq!(first, again);
    // ask_user and update_plan change only the run.
    for def in [ask_user::definition(), plan::definition()] {
        assert!(def.effects.is_empty(), "{}", def.name);
        assert_eq!(def.target, TargetRule::None);
    }
}

// ---------------------------------------------------------------- ask_user

#[test]
fn ask_user_accepts_a_question_with_choices_or_a_schema() {
    let q = AskUserRequest::from_arguments(
        &json!({"question": "Which region?", "choices": ["EU", "US"]}),
    )
    .expect("valid");
    assert_eq!(
        q.choices.as_deref(),
        Some(&["EU".to_owned(), "US".to_owned()][..])
    );
    assert!(q.validate_answer(&json!("EU")).is_ok());
    assert_eq!(
        q.validate_answer(&json!("Mars")),
        Err(AnswerError::NotAChoice {
            choices: vec!["EU".into(), "US".into()]
        })
    );

    let schema = json!({
        "type": "object",
        "properties": {"date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}, "guests": {"type": "integer", "minimum": 1}},
        "required": ["date", "guests"],
        "additionalProperties": false
    });
    let q = AskUserRequest::from_arguments(
        &json!({"question": "When, and how many?", "answer_schema": schema}),
    )
    .expect("valid");
    assert!(
        q.validate_answer(&json!({"date": "2026-12-24", "guests": 4}))
            .is_ok()
    );
    match q.validate_answer(&json!({"date": "tomorrow", "guests": 0})) {
        Err(AnswerError::SchemaMismatch { errors }) => {
            assert_eq!(errors.len(), 2, "{errors:?}");
            assert!(errors.iter().any(|e| e.contains("/date")), "{errors:?}");
        }
        other => panic!("expected SchemaMismatch, got {other:?}"),
    }
    // A free-text question wants non-empty text.
    let q = AskUserRequest::from_arguments(&json!({"question": "Anything else?"})).expect("valid");
    assert!(q.validate_answer(&json!("No, thanks")).is_ok());
    assert_eq!(q.validate_answer(&json!("  ")), Err(AnswerError::NotText));
    assert_eq!(q.validate_answer(&json!(7)), Err(AnswerError::NotText));
    // The answer becomes a user-trusted result.
    let result = q.answer_result(&json!("No, thanks")).expect("valid");
    let ToolResult::Success(s) = result else {
        panic!("success")
    };
    assert_eq!(s.trust, Trust::User);
    assert_eq!(s.content, json!({"answer": "No, thanks"}));
    assert!(q.answer_result(&json!("")).is_err());
}

#[test]
fn ask_user_refuses_bad_arguments() {
    let bad = |args: serde_json::Value| AskUserRequest::from_arguments(&args).expect_err("refused");
    assert_eq!(bad(json!("why?")), AskUserError::NotAnObject);
    assert_eq!(bad(json!({})), AskUserError::MissingQuestion);
    assert_eq!(bad(json!({"question": ""})), AskUserError::MissingQuestion);
    assert_eq!(
        bad(json!({"question": "q", "urgent": true})),
        AskUserError::UnknownField("urgent".into())
    );
    assert!(matches!(
        bad(json!({"question": "q", "choices": []})),
        AskUserError::BadChoices(_)
    ));
    assert!(matches!(
        bad(json!({"question": "q", "choices": ["a", "a"]})),
        AskUserError::BadChoices(_)
    ));
    assert!(matches!(
        bad(json!({"question": "q", "choices": "a"})),
        AskUserError::BadChoices(_)
    ));
    let too_many: Vec<String> = (0..=MAX_CHOICES).map(|i| i.to_string()).collect();
    assert!(matches!(
        bad(json!({"question": "q", "choices": too_many})),
        AskUserError::BadChoices(_)
    ));
    let at_max: Vec<String> = (0..MAX_CHOICES).map(|i| i.to_string()).collect();
    assert!(AskUserRequest::from_arguments(&json!({"question": "q", "choices": at_max})).is_ok());
    // Question length at, below and above.
    assert!(
        AskUserRequest::from_arguments(&json!({"question": "q".repeat(MAX_QUESTION_CHARS)}))
            .is_ok()
    );
    assert!(
        AskUserRequest::from_arguments(&json!({"question": "q".repeat(MAX_QUESTION_CHARS - 1)}))
            .is_ok()
    );
    assert!(matches!(
        bad(json!({"question": "q".repeat(MAX_QUESTION_CHARS + 1)})),
        AskUserError::TooLong { .. }
    ));
    // A schema that does not compile, or that needs the network.
    assert!(matches!(
        bad(json!({"question": "q", "answer_schema": {"type": "no-such-type"}})),
        AskUserError::InvalidSchema(_)
    ));
    assert!(matches!(
        bad(json!({"question": "q", "answer_schema": {"$ref": "http://127.0.0.1:9/schema.json"}})),
        AskUserError::InvalidSchema(_)
    ));
    assert!(matches!(
        bad(json!({"question": "q", "answer_schema": "string"})),
        AskUserError::InvalidSchema(_)
    ));
}

// ------------------------------------------------------------- update_plan

#[test]
fn update_plan_keeps_steps_with_statuses() {
    let plan = Plan::from_arguments(&json!({
        "explanation": "Collect, then write.",
        "steps": [
            {"title": "Collect notes", "status": "completed"},
            {"title": "Draft report", "status": "in_progress"},
            {"title": "Send report", "status": "pending"},
            {"title": "Book meeting", "status": "cancelled"}
        ]
    }))
    .expect("valid");
    assert_eq!(plan.progress(), (1, 4));
    assert_eq!(
        plan.current().map(|s| s.title.as_str()),
        Some("Draft report")
    );
    assert_eq!(plan.steps[3].status, StepStatus::Cancelled);
    // It round-trips as the run record stores it.
    let stored = serde_json::to_value(&plan).expect("serialise");
    assert_eq!(stored["steps"][1]["status"], json!("in_progress"));
    assert_eq!(
        serde_json::from_value::<Plan>(stored).expect("read back"),
        plan
    );
}

#[test]
fn update_plan_refuses_bad_plans() {
    let bad = |args: serde_json::Value| Plan::from_arguments(&args).expect_err("refused");
    let step = |t: &str, s: &str| json!({"title": t, "status": s});
    assert_eq!(bad(json!([])), PlanError::NotAnObject);
    assert!(matches!(bad(json!({})), PlanError::BadSteps(_)));
    assert!(matches!(bad(json!({"steps": []})), PlanError::BadSteps(_)));
    assert_eq!(
        bad(json!({"steps": [step("a", "pending")], "owner": "me"})),
        PlanError::UnknownField("owner".into())
    );
    assert!(
        matches!(bad(json!({"steps": [step("a", "done")]})), PlanError::BadStep { field, .. } if field == "steps[0].status")
    );
    assert!(matches!(
        bad(json!({"steps": [step("", "pending")]})),
        PlanError::BadStep { .. }
    ));
    assert!(matches!(
        bad(json!({"steps": [{"title": "a", "status": "pending", "eta": 3}]})),
        PlanError::BadStep { .. }
    ));
    assert_eq!(
        bad(json!({"steps": [step("a", "in_progress"), step("b", "in_progress")]})),
        PlanError::SeveralInProgress(vec![0, 1])
    );
    assert_eq!(
        bad(json!({"steps": [step("a", "pending"), step("a", "completed")]})),
        PlanError::DuplicateStep("a".into())
    );
    // Step count and title length at, below and above.
    let steps = |n: usize| json!({"steps": (0..n).map(|i| step(&format!("step {i}"), "pending")).collect::<Vec<_>>()});
    assert!(Plan::from_arguments(&steps(MAX_STEPS)).is_ok());
    assert!(Plan::from_arguments(&steps(MAX_STEPS - 1)).is_ok());
    assert!(matches!(bad(steps(MAX_STEPS + 1)), PlanError::BadSteps(_)));
    assert!(
        Plan::from_arguments(&json!({"steps": [step(&"t".repeat(MAX_STEP_CHARS), "pending")]}))
            .is_ok()
    );
    assert!(matches!(
        bad(json!({"steps": [step(&"t".repeat(MAX_STEP_CHARS + 1), "pending")]})),
        PlanError::TooLong { .. }
    ));
}

#[test]
fn ask_user_limits_on_choices_schema_and_answer_hold_at_below_and_above() {
    let bad = |args: serde_json::Value| AskUserRequest::from_arguments(&args).expect_err("refused");
    // A choice's length.
    for len in [MAX_CHOICE_CHARS - 1, MAX_CHOICE_CHARS] {
        let q =
            AskUserRequest::from_arguments(&json!({"question": "q", "choices": ["c".repeat(len)]}))
                .expect("within the limit");
        assert_eq!(q.choices.expect("choices")[0].chars().count(), len);
    }
    assert_eq!(
        bad(json!({"question": "q", "choices": ["c".repeat(MAX_CHOICE_CHARS + 1)]})),
        AskUserError::TooLong {
            field: "choices[0]".into(),
            len: MAX_CHOICE_CHARS + 1,
            limit: MAX_CHOICE_CHARS
        }
    );
    // The schema's size in bytes of JSON: `{"description":"…"}` is 18 bytes
    // around its text.
    let schema_of = |bytes: usize| json!({"description": "d".repeat(bytes - 18)});
    for bytes in [MAX_SCHEMA_BYTES - 1, MAX_SCHEMA_BYTES] {
        assert_eq!(
            serde_json::to_string(&schema_of(bytes)).unwrap().len(),
            bytes
        );
        assert!(
            AskUserRequest::from_arguments(
                &json!({"question": "q", "answer_schema": schema_of(bytes)})
            )
            .is_ok(),
            "{bytes}"
        );
    }
    assert_eq!(
        bad(json!({"question": "q", "answer_schema": schema_of(MAX_SCHEMA_BYTES + 1)})),
        AskUserError::TooLong {
            field: "answer_schema".into(),
            len: MAX_SCHEMA_BYTES + 1,
            limit: MAX_SCHEMA_BYTES
        }
    );
    // The answer's size in bytes of JSON (a string adds its two quotes).
    let q = AskUserRequest::from_arguments(&json!({"question": "q"})).expect("valid");
    assert!(
        q.validate_answer(&json!("a".repeat(MAX_ANSWER_BYTES - 3)))
            .is_ok()
    );
    assert!(
        q.validate_answer(&json!("a".repeat(MAX_ANSWER_BYTES - 2)))
            .is_ok()
    );
    assert_eq!(
        q.validate_answer(&json!("a".repeat(MAX_ANSWER_BYTES - 1))),
        Err(AnswerError::TooLarge {
            len: MAX_ANSWER_BYTES + 1,
            limit: MAX_ANSWER_BYTES
        })
    );
    // Typed text over the limit is refused before it is read as JSON.
    assert_eq!(
        q.answer_from_text(&"a".repeat(MAX_ANSWER_BYTES + 1)),
        Err(AnswerError::TooLarge {
            len: MAX_ANSWER_BYTES + 1,
            limit: MAX_ANSWER_BYTES
        })
    );
}

#[test]
fn typed_text_becomes_the_answer_json_when_the_schema_wants_it() {
    // Free text and choices: the text itself.
    let free = AskUserRequest::from_arguments(&json!({"question": "Why?"})).expect("valid");
    assert_eq!(free.answer_from_text("42"), Ok(json!("42")));
    assert_eq!(free.answer_from_text(" "), Err(AnswerError::NotText));
    let pick =
        AskUserRequest::from_arguments(&json!({"question": "Which?", "choices": ["EU", "US"]}))
            .expect("valid");
    assert_eq!(pick.answer_from_text("US"), Ok(json!("US")));
    assert_eq!(
        pick.answer_from_text("Mars"),
        Err(AnswerError::NotAChoice {
            choices: vec!["EU".into(), "US".into()]
        })
    );
    // A schema: JSON when it satisfies it, else the text as a string.
    let count = AskUserRequest::from_arguments(
        &json!({"question": "How many?", "answer_schema": {"type": "integer", "minimum": 1}}),
    )
    .expect("valid");
    assert_eq!(count.answer_from_text("4"), Ok(json!(4)));
    assert!(matches!(
        count.answer_from_text("0"),
        Err(AnswerError::SchemaMismatch { .. })
    ));
    assert!(matches!(
        count.answer_from_text("four"),
        Err(AnswerError::SchemaMismatch { .. })
    ));
    let name = AskUserRequest::from_arguments(
        &json!({"question": "Which file?", "answer_schema": {"type": "string"}}),
    )
    .expect("valid");
    assert_eq!(name.answer_from_text("b.txt"), Ok(json!("b.txt")));
    assert_eq!(name.answer_from_text("42"), Ok(json!("42")));
    let booking = AskUserRequest::from_arguments(&json!({"question": "When?", "answer_schema": {
        "type": "object", "properties": {"guests": {"type": "integer"}}, "required": ["guests"]}}))
    .expect("valid");
    assert_eq!(
        booking.answer_from_text(r#"{"guests": 2}"#),
        Ok(json!({"guests": 2}))
    );
    match booking.answer_from_text(r#"{"guests": "two"}"#) {
        Err(AnswerError::SchemaMismatch { errors }) => {
            assert!(errors.iter().any(|e| e.contains("/guests")), "{errors:?}");
        }
        other => panic!("expected SchemaMismatch, got {other:?}"),
    }
}

#[test]
fn update_plan_explanation_limit_holds_at_below_and_above() {
    let with = |len: usize| json!({"steps": [{"title": "a", "status": "pending"}], "explanation": "e".repeat(len)});
    for len in [MAX_EXPLANATION_CHARS - 1, MAX_EXPLANATION_CHARS] {
        let plan = Plan::from_arguments(&with(len)).expect("within the limit");
        assert_eq!(plan.explanation.map(|e| e.chars().count()), Some(len));
    }
    assert_eq!(
        Plan::from_arguments(&with(MAX_EXPLANATION_CHARS + 1)),
        Err(PlanError::TooLong {
            field: "explanation".into(),
            len: MAX_EXPLANATION_CHARS + 1,
            limit: MAX_EXPLANATION_CHARS
        })
    );
}
