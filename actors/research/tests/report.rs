//! S9.6: the report is an immutable, content-addressed Artifact (published
//! through the workspace's Artifacts, on SQLite on disk) with findings,
//! unverified material and model knowledge as separate parts of its
//! structure; every source-backed claim resolves to stored evidence (a
//! read source and its text's hash); a partial report stays readable and
//! lists its gaps; a report citing unknown or no longer stored evidence is
//! refused and the task stays in synthesis.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::Arc;
use std::time::Duration;

use agent_host_native::sqlite::SqliteStorage;
use agent_kernel::host::{BlobRef, Clock, Fence, LeaseManager, ManualClock, Storage};
use agent_kernel::{OwnerId, RequestId, SessionId};
use agent_research::report::{
    ArtifactSink, Finding, PublishError, REPORT_MIME, Report, ReportDraft, ReportError, Statement,
    publish_report,
};
use agent_research::{
    Event, EvidenceId, Gap, MessageId, Phase, PlanDecision, ResearchPlan, ResearchStore, TaskId,
};
use agent_workspace::{Artifacts, Quotas, Source};

/// The host's sink: the session's Artifacts (the workspace crate).
struct WorkspaceSink {
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    fence: Fence,
}

#[async_trait::async_trait]
impl ArtifactSink for WorkspaceSink {
    async fn publish(
        &self,
        session: &SessionId,
        task: &TaskId,
        bytes: Vec<u8>,
        name: &str,
        mime: &str,
    ) -> Result<String, String> {
        assert_eq!(session, &self.fence.session);
        let artifacts = Artifacts::new(
            self.storage.clone(),
            self.clock.clone(),
            self.fence.clone(),
            Quotas::default(),
        );
        artifacts
            .publish(
                bytes,
                name,
                mime,
                Source::Import {
                    from: format!("deep-research/{task}"),
                },
                None,
            )
            .await
            .map(|p| p.artifact.id)
            .map_err(|e| e.to_string())
    }
}

struct Setup {
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    store: ResearchStore,
    fence: Fence,
    _guard: agent_kernel::host::LeaseGuard,
    _dir: tempfile::TempDir,
}

fn session() -> SessionId {
    SessionId::new("s1").unwrap()
}

fn ev(n: u32) -> EvidenceId {
    EvidenceId::new(format!("ev-{n}")).unwrap()
}

/// A task in synthesis: source a read, source b failed when `fail_b`.
async fn synthesizing(id: &str, fail_b: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(
        SqliteStorage::open(dir.path().join("db.sqlite"))
            .await
            .unwrap(),
    );
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(1_767_225_600_000));
    let leases = LeaseManager::new(
        storage.clone(),
        clock.clone(),
        agent_test_support::executor(),
        OwnerId::new("proc-1").unwrap(),
        Duration::from_secs(30),
    );
    let guard = leases.acquire(&session()).await.unwrap();
    let fence = guard.fence();
    let store = ResearchStore::new(storage.clone(), clock.clone());
    let task = TaskId::new(id).unwrap();
    store
        .create(
            &fence,
            task.clone(),
            MessageId::new("m1").unwrap(),
            "topic X",
        )
        .await
        .unwrap();
    let plan = ResearchPlan {
        questions: vec!["What is X?".into(), "Who maintains X?".into()],
        queries: vec![],
        sources: vec![
            "https://a.example.org/x".into(),
            "https://b.example.org/x".into(),
        ],
        domains: ["example.org".to_string()].into(),
        dates: None,
        notes: vec![],
    };
    let request = RequestId::new("plan-1").unwrap();
    store
        .propose_plan(&fence, &task, &plan, request.clone())
        .await
        .unwrap();
    store
        .decide_plan(&fence, &task, &request, PlanDecision::Approve)
        .await
        .unwrap();
    store
        .record_read(
            &fence,
            &task,
            "https://a.example.org/x",
            "https://a.example.org/x/",
            b"X is an actor runtime.",
            Some("2025-04-01".into()),
        )
        .await
        .unwrap();
    if fail_b {
        store
            .apply(
                &fence,
                &task,
                Event::RecordFailure {
                    url: "https://b.example.org/x".into(),
                    reason: "HTTP 503".into(),
                },
            )
            .await
            .unwrap();
    } else {
        store
            .record_read(
                &fence,
                &task,
                "https://b.example.org/x",
                "https://b.example.org/x",
                b"X is maintained by a team.",
                None,
            )
            .await
            .unwrap();
    }
    let t = store
        .apply(&fence, &task, Event::FinishExecution)
        .await
        .unwrap();
    assert_eq!(t.phase, Phase::Synthesizing);
    Setup {
        storage,
        clock,
        store,
        fence,
        _guard: guard,
        _dir: dir,
    }
}

impl Setup {
    fn sink(&self) -> WorkspaceSink {
        WorkspaceSink {
            storage: self.storage.clone(),
            clock: self.clock.clone(),
            fence: self.fence.clone(),
        }
    }
    fn artifacts(&self) -> Artifacts {
        Artifacts::new(
            self.storage.clone(),
            self.clock.clone(),
            self.fence.clone(),
            Quotas::default(),
        )
    }
}

fn draft(citations: Vec<EvidenceId>) -> ReportDraft {
    ReportDraft {
        title: "What X is".into(),
        findings: vec![Finding {
            claim: "X is an actor runtime.".into(),
            evidence: citations,
        }],
        unverified: vec![Statement {
            text: "A forum post says X is fast.".into(),
        }],
        model_knowledge: vec![Statement {
            text: "Actor runtimes isolate state per actor.".into(),
        }],
        unanswered: vec![],
    }
}

#[tokio::test]
async fn a_complete_report_is_an_immutable_artifact_whose_claims_resolve_to_stored_evidence() {
    let s = synthesizing("r1", false).await;
    let task = TaskId::new("r1").unwrap();
    let mut d = draft(vec![ev(1)]);
    d.findings.push(Finding {
        claim: "X is maintained by a team.".into(),
        evidence: vec![ev(2), ev(1)],
    });
    let (done, report) = publish_report(&s.store, &s.sink(), &s.fence, &task, d)
        .await
        .unwrap();
    assert_eq!(done.phase, Phase::Reported);
    let reference = done.report.clone().unwrap();

    // The Artifact: content-addressed, its bytes the report.
    let (artifact, bytes) = s.artifacts().get(&reference.artifact).await.unwrap();
    assert_eq!(artifact.mime, REPORT_MIME);
    assert_eq!(artifact.id, agent_capabilities::sha256_hex(&bytes));
    assert_eq!(reference.size, bytes.len() as u64);
    let stored = Report::from_bytes(&bytes).unwrap();
    assert_eq!(stored, report);
    // The three parts are separate in the structure.
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(value["findings"].as_array().unwrap().len(), 2);
    assert_eq!(
        value["unverified"][0]["text"],
        "A forum post says X is fast."
    );
    assert_eq!(
        value["model_knowledge"][0]["text"],
        "Actor runtimes isolate state per actor."
    );
    // Every cited id resolves to stored evidence: the read and its text.
    for finding in &stored.findings {
        for id in &finding.evidence {
            let e = stored.evidence.iter().find(|e| &e.id == id).unwrap();
            let text = s.store.blob("evidence", &e.content).await.unwrap();
            assert_eq!(BlobRef::of(&text), e.content);
        }
    }
    assert_eq!(stored.evidence[0].published.as_deref(), Some("2025-04-01"));

    // Immutable: the same bytes are the same Artifact, never a new one.
    let again = s
        .artifacts()
        .publish(
            bytes.clone(),
            "another name",
            REPORT_MIME,
            Source::User,
            None,
        )
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.artifact.name, artifact.name);
    // The task is final: no second report.
    let second = publish_report(&s.store, &s.sink(), &s.fence, &task, draft(vec![ev(1)])).await;
    assert!(second.is_err());
}

#[tokio::test]
async fn a_partial_report_is_readable_and_lists_its_gaps() {
    let s = synthesizing("r2", true).await;
    let task = TaskId::new("r2").unwrap();
    let mut d = draft(vec![ev(1)]);
    d.unanswered = vec!["Who maintains X?".into()];
    let (done, report) = publish_report(&s.store, &s.sink(), &s.fence, &task, d)
        .await
        .unwrap();
    assert_eq!(done.phase, Phase::Partial);
    let (_, bytes) = s
        .artifacts()
        .get(&done.report.unwrap().artifact)
        .await
        .unwrap();
    let stored = Report::from_bytes(&bytes).unwrap();
    assert_eq!(stored, report);
    assert!(stored.is_partial());
    assert_eq!(
        stored.gaps,
        vec![
            Gap::SourceFailed {
                url: "https://b.example.org/x".into(),
                reason: "HTTP 503".into()
            },
            Gap::Unanswered {
                question: "Who maintains X?".into()
            },
        ]
    );
}

#[tokio::test]
async fn a_claim_citing_unknown_or_missing_evidence_is_refused_and_nothing_is_published() {
    let s = synthesizing("r3", true).await;
    let task = TaskId::new("r3").unwrap();
    // ev-2 does not exist: source b failed.
    let refused = publish_report(&s.store, &s.sink(), &s.fence, &task, draft(vec![ev(2)])).await;
    assert_eq!(
        refused.unwrap_err(),
        PublishError::Report(ReportError::UnknownEvidence {
            index: 0,
            id: "ev-2".into()
        })
    );
    assert!(s.artifacts().list().await.unwrap().is_empty());
    assert_eq!(
        s.store.load(&session(), &task).await.unwrap().phase,
        Phase::Synthesizing
    );
    // The text behind ev-1 disappears from storage: refused too.
    let t = s.store.load(&session(), &task).await.unwrap();
    let (_, read) = t.snapshot.as_ref().unwrap().evidence(&ev(1)).unwrap();
    assert!(s.storage.delete_blob(&read.content.hash).await.unwrap());
    let refused = publish_report(&s.store, &s.sink(), &s.fence, &task, draft(vec![ev(1)])).await;
    assert!(matches!(
        refused,
        Err(PublishError::Report(ReportError::EvidenceMissing { .. }))
    ));
    assert!(s.artifacts().list().await.unwrap().is_empty());
    assert_eq!(
        s.store.load(&session(), &task).await.unwrap().phase,
        Phase::Synthesizing
    );
}
