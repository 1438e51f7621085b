//! The state machine's cases: every legal transition and each refusal.

use super::*;

fn blob(s: &str) -> BlobRef {
    BlobRef::of(s.as_bytes())
}

fn task() -> ResearchTask {
    ResearchTask::new(
        TaskId::new("task-1").unwrap(),
        SessionId::new("s1").unwrap(),
        MessageId::new("m1").unwrap(),
        blob("topic"),
        1_000,
    )
}

fn propose() -> Event {
    Event::ProposePlan {
        plan: blob("plan"),
        request: RequestId::new("plan-1").unwrap(),
    }
}

fn approve() -> Event {
    Event::ApprovePlan {
        approved: blob("plan"),
        sources: vec![
            "https://a.example.com/1".into(),
            "https://b.example.com/2".into(),
        ],
    }
}

fn read(url: &str) -> Event {
    Event::RecordRead {
        url: url.into(),
        final_url: url.into(),
        content: blob(url),
        fetched_at_ms: 5,
        published: None,
    }
}

fn report() -> Event {
    Event::Report {
        report: ReportRef {
            artifact: "ab".repeat(32),
            size: 10,
        },
        gaps: vec![],
    }
}

fn at(phase: Phase) -> ResearchTask {
    let mut t = task();
    let steps: Vec<Event> = match phase {
        Phase::Planning => vec![],
        Phase::AwaitingPlanApproval => vec![propose()],
        Phase::Executing => vec![propose(), approve()],
        Phase::Synthesizing => vec![propose(), approve(), Event::FinishExecution],
        Phase::Reported => vec![propose(), approve(), Event::FinishExecution, report()],
        Phase::Partial => vec![
            propose(),
            approve(),
            Event::Stop { gap: Gap::Stopped },
            report(),
        ],
        Phase::Rejected => vec![propose(), Event::RejectPlan],
        Phase::Cancelled => vec![Event::Stop { gap: Gap::Stopped }],
        Phase::Interrupted { resume_to } => match resume_to {
            ActivePhase::Planning => vec![Event::Interrupt],
            ActivePhase::Executing => vec![propose(), approve(), Event::Interrupt],
            ActivePhase::Synthesizing => vec![
                propose(),
                approve(),
                Event::FinishExecution,
                Event::Interrupt,
            ],
        },
    };
    for e in steps {
        t = t.apply(e, 2_000).unwrap();
    }
    assert_eq!(t.phase, phase);
    t
}

const ALL: [Phase; 11] = [
    Phase::Planning,
    Phase::AwaitingPlanApproval,
    Phase::Executing,
    Phase::Synthesizing,
    Phase::Reported,
    Phase::Partial,
    Phase::Rejected,
    Phase::Cancelled,
    Phase::Interrupted {
        resume_to: ActivePhase::Planning,
    },
    Phase::Interrupted {
        resume_to: ActivePhase::Executing,
    },
    Phase::Interrupted {
        resume_to: ActivePhase::Synthesizing,
    },
];

fn events() -> Vec<Event> {
    vec![
        Event::CountLookup {
            kind: LookupKind::Search,
        },
        propose(),
        Event::PresentPlan,
        approve(),
        Event::RejectPlan,
        read("https://a.example.com/1"),
        Event::RecordFailure {
            url: "https://a.example.com/1".into(),
            reason: "503".into(),
        },
        Event::FinishExecution,
        Event::Stop { gap: Gap::Stopped },
        report(),
        Event::Interrupt,
        Event::Park {
            reason: "the synthesis run failed".into(),
        },
        Event::Resume,
    ]
}

/// The legal (phase, event) → phase table; everything else is `Illegal`.
fn expected(phase: Phase, event: &Event) -> Option<Phase> {
    use ActivePhase as A;
    Some(match (phase, event) {
        (Phase::Planning, Event::CountLookup { .. }) => Phase::Planning,
        (Phase::Planning, Event::ProposePlan { .. }) => Phase::AwaitingPlanApproval,
        (Phase::AwaitingPlanApproval, Event::PresentPlan) => Phase::AwaitingPlanApproval,
        (Phase::AwaitingPlanApproval, Event::ApprovePlan { .. }) => Phase::Executing,
        (Phase::AwaitingPlanApproval, Event::RejectPlan) => Phase::Rejected,
        (Phase::Executing, Event::RecordRead { .. } | Event::RecordFailure { .. }) => {
            Phase::Executing
        }
        (Phase::Executing, Event::FinishExecution | Event::Stop { .. }) => Phase::Synthesizing,
        // A stop during synthesis records its gap; the report follows.
        (Phase::Synthesizing, Event::Stop { .. }) => Phase::Synthesizing,
        (Phase::Planning | Phase::AwaitingPlanApproval, Event::Stop { .. }) => Phase::Cancelled,
        (
            Phase::Interrupted {
                resume_to: A::Planning,
            },
            Event::Stop { .. },
        ) => Phase::Cancelled,
        (Phase::Interrupted { .. }, Event::Stop { .. }) => Phase::Synthesizing,
        (Phase::Synthesizing, Event::Report { .. }) => Phase::Reported,
        (Phase::Planning, Event::Interrupt | Event::Park { .. }) => Phase::Interrupted {
            resume_to: A::Planning,
        },
        (Phase::Executing, Event::Interrupt | Event::Park { .. }) => Phase::Interrupted {
            resume_to: A::Executing,
        },
        (Phase::Synthesizing, Event::Interrupt | Event::Park { .. }) => Phase::Interrupted {
            resume_to: A::Synthesizing,
        },
        (
            Phase::Interrupted {
                resume_to: A::Planning,
            },
            Event::Resume,
        ) => Phase::Planning,
        (
            Phase::Interrupted {
                resume_to: A::Executing,
            },
            Event::Resume,
        ) => Phase::Executing,
        (
            Phase::Interrupted {
                resume_to: A::Synthesizing,
            },
            Event::Resume,
        ) => Phase::Synthesizing,
        _ => return None,
    })
}

#[test]
fn every_phase_and_event_follows_the_table() {
    let mut legal = 0;
    for phase in ALL {
        for event in events() {
            let name = event.name();
            let result = at(phase).apply(event.clone(), 3_000);
            match expected(phase, &event) {
                Some(to) => {
                    let next = result.unwrap_or_else(|e| panic!("{phase:?} + {name}: {e}"));
                    assert_eq!(next.phase, to, "{phase:?} + {name}");
                    legal += 1;
                }
                None => assert_eq!(
                    result,
                    Err(TransitionError::Illegal {
                        phase: phase.name(),
                        event: name
                    }),
                    "{phase:?} + {name}"
                ),
            }
        }
    }
    // The table is not vacuous: 25 legal moves out of 143.
    assert_eq!(legal, 25);
}

#[test]
fn a_parked_task_says_why_until_resume() {
    let t = at(Phase::Synthesizing)
        .apply(
            Event::Park {
                reason: "the synthesis run failed".into(),
            },
            3_000,
        )
        .unwrap();
    assert_eq!(
        t.interrupted_because.as_deref(),
        Some("the synthesis run failed")
    );
    let resumed = t.apply(Event::Resume, 3_100).unwrap();
    assert_eq!(resumed.phase, Phase::Synthesizing);
    assert_eq!(resumed.interrupted_because, None);
    // A reload's interruption names no reason of its own.
    let reloaded = resumed.apply(Event::Interrupt, 3_200).unwrap();
    assert_eq!(reloaded.interrupted_because, None);
}

#[test]
fn a_stop_during_synthesis_records_its_gap_once() {
    let t = at(Phase::Synthesizing);
    let once = t.apply(Event::Stop { gap: Gap::Stopped }, 3_000).unwrap();
    let twice = once
        .apply(Event::Stop { gap: Gap::Stopped }, 3_100)
        .unwrap();
    assert_eq!(twice.phase, Phase::Synthesizing);
    assert_eq!(twice.gaps.iter().filter(|g| **g == Gap::Stopped).count(), 1);
}

#[test]
fn final_phases_take_nothing() {
    for phase in ALL.into_iter().filter(|p| p.is_final()) {
        for event in events() {
            assert!(at(phase).apply(event, 3_000).is_err(), "{phase:?}");
        }
    }
}

#[test]
fn approval_freezes_the_snapshot_and_clears_the_request() {
    let t = at(Phase::AwaitingPlanApproval);
    assert_eq!(t.plan_request.as_ref().map(|r| r.presented), Some(false));
    let shown = t.apply(Event::PresentPlan, 2_500).unwrap();
    assert_eq!(shown.plan_request.as_ref().map(|r| r.presented), Some(true));
    // Shown once: a second presentation is refused, typed.
    assert_eq!(
        shown.apply(Event::PresentPlan, 2_600),
        Err(TransitionError::AlreadyPresented)
    );
    let t = shown.apply(approve(), 3_000).unwrap();
    assert!(t.plan_request.is_none());
    let snapshot = t.snapshot.as_ref().unwrap();
    assert_eq!(snapshot.frozen_at_ms, 3_000);
    assert_eq!(snapshot.sources.len(), 2);
}

#[test]
fn reads_get_evidence_ids_and_stay_within_the_snapshot() {
    let t = at(Phase::Executing)
        .apply(read("https://a.example.com/1"), 3_000)
        .unwrap()
        .apply(read("https://b.example.com/2"), 3_001)
        .unwrap();
    let snapshot = t.snapshot.as_ref().unwrap();
    let (url, r) = snapshot
        .evidence(&EvidenceId::new("ev-2").unwrap())
        .unwrap();
    assert_eq!(url, "https://b.example.com/2");
    assert_eq!(r.content, blob("https://b.example.com/2"));
    assert!(matches!(
        t.apply(read("https://evil.example.net/"), 3_002),
        Err(TransitionError::NotInSnapshot { .. })
    ));
    let bad_date = Event::RecordRead {
        url: "https://a.example.com/1".into(),
        final_url: "https://a.example.com/1".into(),
        content: blob("x"),
        fetched_at_ms: 5,
        published: Some("2024-02-30".into()),
    };
    assert!(matches!(
        at(Phase::Executing).apply(bad_date, 3_002),
        Err(TransitionError::BadDate { .. })
    ));
    assert!(matches!(
        t.apply(read("https://a.example.com/1"), 3_002),
        Err(TransitionError::AlreadySettled { .. })
    ));
}

#[test]
fn a_failed_source_makes_the_report_partial() {
    let t = at(Phase::Executing)
        .apply(
            Event::RecordFailure {
                url: "https://a.example.com/1".into(),
                reason: "HTTP 503".into(),
            },
            3_000,
        )
        .unwrap()
        .apply(Event::FinishExecution, 3_001)
        .unwrap()
        .apply(report(), 3_002)
        .unwrap();
    assert_eq!(t.phase, Phase::Partial);
    assert!(matches!(t.gaps[0], Gap::SourceFailed { .. }));
    assert!(t.report.is_some());
}

#[test]
fn planning_look_ups_are_counted_and_capped() {
    let mut t = task();
    for _ in 0..MAX_PLANNING_SEARCHES {
        t = t
            .apply(
                Event::CountLookup {
                    kind: LookupKind::Search,
                },
                2_000,
            )
            .unwrap();
    }
    assert_eq!(t.lookups.searches, MAX_PLANNING_SEARCHES);
    assert_eq!(
        t.apply(
            Event::CountLookup {
                kind: LookupKind::Search
            },
            2_000
        ),
        Err(TransitionError::LookupsExhausted {
            kind: LookupKind::Search,
            max: MAX_PLANNING_SEARCHES
        })
    );
    // Reads have their own cap.
    let t = t
        .apply(
            Event::CountLookup {
                kind: LookupKind::Read,
            },
            2_000,
        )
        .unwrap();
    assert_eq!(
        t.lookups,
        Lookups {
            searches: 4,
            reads: 1
        }
    );
}

#[test]
fn ids_are_validated() {
    assert!(TaskId::new("").is_err());
    assert!(TaskId::new("a/b").is_err());
    assert!(MessageId::new("x".repeat(129)).is_err());
    assert!(serde_json::from_str::<TaskId>("\"../etc\"").is_err());
}

#[test]
fn a_report_with_its_own_gaps_makes_the_task_partial() {
    let t = at(Phase::Synthesizing)
        .apply(
            Event::Report {
                report: ReportRef {
                    artifact: "cd".repeat(32),
                    size: 1,
                },
                gaps: vec![Gap::Unanswered {
                    question: "Who?".into(),
                }],
            },
            3_000,
        )
        .unwrap();
    assert_eq!(t.phase, Phase::Partial);
    assert_eq!(t.gaps.len(), 1);
}

#[test]
fn time_never_goes_backwards() {
    let t = task().apply(propose(), 10).unwrap();
    assert_eq!(t.updated_at_ms, 1_000);
}
