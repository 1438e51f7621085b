//! `ask_user` and `update_plan` (S5.1): their definitions, the validation
//! of their arguments, of answers against the optional JSON Schema, and the
//! plan kept on the run record; plus the built-in definition set as a whole.
#![cfg(not(target_arch = "wasm32"))] // native tests (tokio); the browser runs builtin_wasm.rs

use std::collections::BTreeSet;

use agent_capabilities::{Origin, Trust};
use agent_kernel::protocol::{TargetRule, ToolResult};
use agent_tools::builtin::ask_user::{
    self, AnswerError, AskUserError, AskUserRequest, MAX_CHOICES, MAX_QUESTION_CHARS,
};
use agent_tools::builtin::plan::{self, MAX_STEP_CHARS, MAX_STEPS, Plan, PlanError, StepStatus};
use agent_tools::builtin::{BUILTIN_TOOL_NAMES, definitions};
use serde_json::json;

#[test]
fn every_builtin_exports_a_fingerprinted_builtin_definition_with_a_valid_schema() {
    let defs = definitions();
    let names: BTreeSet<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, BUILTIN_TOOL_NAMES.into_iter().collect());
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
