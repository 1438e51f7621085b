//! Deep Research's core under wasm32, in headless Chromium: the task's
//! phases made durable on the kernel's memory storage with a fenced lease,
//! the plan request shown once, a widening model filter refused by the
//! capability verifier (S9.5), a bounded search answer, and a report that
//! cites unknown evidence refused (S9.6).
#![cfg(target_arch = "wasm32")]
// Single-threaded wasm32: host objects are neither `Send` nor `Sync` by design.
#![allow(clippy::arc_with_non_send_sync)]

use std::sync::Arc;

use agent_capabilities::{Authority, CapabilityError, Fingerprint, Origin};
use agent_kernel::host::{Clock, ManualClock, Storage};
use agent_kernel::memory::MemoryStorage;
use agent_kernel::{OwnerId, RequestId, SessionId};
use agent_research::plan::DateRange;
use agent_research::report::{Finding, Report, ReportDraft, ReportError};
use agent_research::scope::{ExecutionScope, ReadTool, ScopeError, ScopeFilter};
use agent_research::search::{SearchError, parse_searxng};
use agent_research::{
    Event, EvidenceId, MessageId, Phase, PlanDecision, ResearchPlan, ResearchStore, TaskId,
};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn plan() -> ResearchPlan {
    ResearchPlan {
        questions: vec!["What changed?".into()],
        queries: vec!["what changed".into()],
        sources: vec!["https://docs.example.org/a".into()],
        domains: ["example.org".to_string()].into(),
        dates: Some(DateRange {
            from: "2024-01-01".into(),
            to: "2024-12-31".into(),
        }),
        notes: vec![],
    }
}

#[wasm_bindgen_test]
async fn phases_are_durable_and_the_plan_is_shown_once() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(1_767_225_600_000));
    let session = SessionId::new("tab-session").unwrap();
    let lease = storage
        .try_acquire_lease(
            &session,
            &OwnerId::new("tab-1").unwrap(),
            clock.wall_ms(),
            30_000,
        )
        .await
        .unwrap();
    let fence = lease.fence();
    let store = ResearchStore::new(storage.clone(), clock.clone());
    let id = TaskId::new("r1").unwrap();
    store
        .create(&fence, id.clone(), MessageId::new("m1").unwrap(), "a topic")
        .await
        .unwrap();
    let request = RequestId::new("plan-1").unwrap();
    store
        .propose_plan(&fence, &id, &plan(), request.clone())
        .await
        .unwrap();
    // A "reload": a fresh store over the same storage.
    let reloaded = ResearchStore::new(storage.clone(), clock.clone());
    assert_eq!(
        reloaded.present_plan(&fence, &id).await.unwrap(),
        Some(plan())
    );
    assert_eq!(reloaded.present_plan(&fence, &id).await.unwrap(), None);
    let task = reloaded
        .decide_plan(&fence, &id, &request, PlanDecision::Approve)
        .await
        .unwrap();
    assert_eq!(task.phase, Phase::Executing);
    let task = reloaded.apply(&fence, &id, Event::Interrupt).await.unwrap();
    assert_eq!(task.phase.name(), "interrupted");
    assert!(
        reloaded
            .apply(&fence, &id, Event::FinishExecution)
            .await
            .is_err()
    );
}

#[wasm_bindgen_test]
fn a_widening_filter_fails_verification() {
    let authority = Authority::new("run-wasm", [9; 32]);
    let tool = ReadTool {
        name: "fetch_url".into(),
        fingerprint: Fingerprint::of(&"fetch_url").unwrap(),
        origin: Origin::Builtin,
    };
    let scope = ExecutionScope::mint(&authority, &plan(), &tool, 1_000_000);
    let v = authority.verifier();
    let url = "https://docs.example.org/a";
    assert!(scope.authorize(&v, "run-wasm", &tool, url, None, 1).is_ok());
    let wider = scope.narrow(&ScopeFilter {
        domains: Some(["example.org".to_string(), "example.net".to_string()].into()),
        dates: None,
    });
    assert!(matches!(
        wider.authorize(&v, "run-wasm", &tool, url, None, 1),
        Err(ScopeError::Capability(CapabilityError::OutOfScope { .. }))
    ));
}

#[wasm_bindgen_test]
fn search_answers_and_reports_are_checked() {
    let deep = "[".repeat(1000);
    assert_eq!(parse_searxng(deep.as_bytes(), 5), Err(SearchError::TooDeep));
    let hits = parse_searxng(
        br#"{"results": [{"url": "https://a.example.org/", "title": "A"}]}"#,
        5,
    )
    .unwrap();
    assert_eq!(hits.hits.len(), 1);

    let mut task = agent_research::ResearchTask::new(
        TaskId::new("t").unwrap(),
        SessionId::new("s").unwrap(),
        MessageId::new("m").unwrap(),
        agent_kernel::host::BlobRef::of(b"topic"),
        1,
    );
    task.phase = Phase::Synthesizing;
    task.snapshot = Some(agent_research::SourceSnapshot {
        frozen_at_ms: 1,
        sources: vec![],
    });
    let draft = ReportDraft {
        title: "T".into(),
        findings: vec![Finding {
            claim: "A claim.".into(),
            evidence: vec![EvidenceId::new("ev-1").unwrap()],
        }],
        ..ReportDraft::default()
    };
    assert_eq!(
        Report::build(&task, draft),
        Err(ReportError::UnknownEvidence {
            index: 0,
            id: "ev-1".into()
        })
    );
}
