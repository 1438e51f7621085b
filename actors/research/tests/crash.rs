//! A research task killed at every commit (S2, S9.1: the primitives of
//! runs): a deterministic flow from start to report, one store operation
//! per commit, is cut at each commit in turn (the batch refused, as when
//! the tab dies before it lands). After each cut the stored task is exactly
//! the one the uncut flow had before that commit (whole or absent), every
//! blob it names is stored, and finishing the flow from there reaches the
//! same final bytes as the uncut flow.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_kernel::host::{BlobRef, Clock, Fence, ManualClock, Storage, StorageError, Table};
use agent_kernel::memory::MemoryStorage;
use agent_kernel::{OwnerId, RequestId, SessionId};
use agent_research::report::{ArtifactSink, Finding, ReportDraft, publish_report};
use agent_research::task::LookupKind;
use agent_research::{
    Event, EvidenceId, MessageId, PlanDecision, ResearchPlan, ResearchStore, ResearchTask, TaskId,
};

const STEPS: usize = 9;

struct BlobSink(Arc<dyn Storage>);

#[async_trait::async_trait]
impl ArtifactSink for BlobSink {
    async fn publish(
        &self,
        _session: &SessionId,
        _task: &TaskId,
        bytes: Vec<u8>,
        _name: &str,
        _mime: &str,
    ) -> Result<String, String> {
        let hash = agent_capabilities::sha256_hex(&bytes);
        self.0
            .put_blob(&hash, bytes)
            .await
            .map(|b| b.hash)
            .map_err(|e| e.to_string())
    }
}

fn session() -> SessionId {
    SessionId::new("s1").unwrap()
}

fn id() -> TaskId {
    TaskId::new("r1").unwrap()
}

fn plan() -> ResearchPlan {
    ResearchPlan {
        questions: vec!["What is X?".into()],
        queries: vec!["x".into()],
        sources: vec![
            "https://a.example.org/".into(),
            "https://b.example.org/".into(),
        ],
        domains: ["example.org".to_string()].into(),
        dates: None,
        notes: vec![],
    }
}

/// Step `i` of the flow: one store operation, one commit.
async fn step(
    i: usize,
    store: &ResearchStore,
    fence: &Fence,
    storage: &Arc<dyn Storage>,
) -> Result<(), String> {
    let request = RequestId::new("plan-1").unwrap();
    let r = match i {
        0 => store
            .create_with_urls(
                fence,
                id(),
                MessageId::new("m1").unwrap(),
                "topic X",
                &["https://a.example.org/".to_string()],
            )
            .await
            .map(drop),
        1 => store
            .count_lookup(fence, &id(), LookupKind::Search)
            .await
            .map(drop),
        2 => store
            .propose_plan(fence, &id(), &plan(), request)
            .await
            .map(drop),
        3 => store.present_plan(fence, &id()).await.map(drop),
        4 => store
            .decide_plan(fence, &id(), &request, PlanDecision::Approve)
            .await
            .map(drop),
        5 => store
            .record_read(
                fence,
                &id(),
                "https://a.example.org/",
                "https://a.example.org/",
                b"X is Y.",
                None,
            )
            .await
            .map(drop),
        6 => store
            .apply(
                fence,
                &id(),
                Event::RecordFailure {
                    url: "https://b.example.org/".into(),
                    reason: "HTTP 503".into(),
                },
            )
            .await
            .map(drop),
        7 => store
            .apply(fence, &id(), Event::FinishExecution)
            .await
            .map(drop),
        8 => {
            let draft = ReportDraft {
                title: "X".into(),
                findings: vec![Finding {
                    claim: "X is Y.".into(),
                    evidence: vec![EvidenceId::new("ev-1").unwrap()],
                }],
                ..ReportDraft::default()
            };
            return publish_report(store, &BlobSink(storage.clone()), fence, &id(), draft)
                .await
                .map(drop)
                .map_err(|e| e.to_string());
        }
        _ => unreachable!(),
    };
    r.map_err(|e| e.to_string())
}

struct World {
    memory: Arc<MemoryStorage>,
    storage: Arc<dyn Storage>,
    store: ResearchStore,
    fence: Fence,
}

async fn world() -> World {
    let memory = Arc::new(MemoryStorage::new());
    let storage: Arc<dyn Storage> = memory.clone();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(1_767_225_600_000));
    let lease = storage
        .try_acquire_lease(
            &session(),
            &OwnerId::new("tab-1").unwrap(),
            clock.wall_ms(),
            30_000,
        )
        .await
        .unwrap();
    World {
        store: ResearchStore::new(storage.clone(), clock),
        memory,
        storage,
        fence: lease.fence(),
    }
}

async fn stored(storage: &Arc<dyn Storage>) -> Option<Vec<u8>> {
    storage
        .get(Table::Meta, &ResearchTask::key_for(&session(), &id()))
        .await
        .unwrap()
}

/// Every blob the stored task names is stored and matches its hash.
async fn check_blobs(world: &World) {
    let Ok(task) = world.store.load(&session(), &id()).await else {
        return;
    };
    let mut named: Vec<BlobRef> = vec![task.topic.clone()];
    named.extend(task.seeds.clone());
    named.extend(task.plan.clone());
    named.extend(task.approved_plan.clone());
    for source in task.snapshot.iter().flat_map(|s| &s.sources) {
        named.extend(source.read.as_ref().map(|r| r.content.clone()));
    }
    if let Some(report) = &task.report {
        named.push(BlobRef {
            hash: report.artifact.clone(),
            size: report.size,
        });
    }
    for blob in named {
        world.store.blob("named", &blob).await.unwrap();
    }
}

#[tokio::test]
async fn a_task_killed_at_every_commit_is_whole_or_absent_and_finishes_the_same() {
    // The uncut flow, with the stored bytes after each step.
    let reference = world().await;
    let mut after: Vec<Option<Vec<u8>>> = vec![None];
    for i in 0..STEPS {
        step(i, &reference.store, &reference.fence, &reference.storage)
            .await
            .unwrap();
        after.push(stored(&reference.storage).await);
    }
    let last = after[STEPS].clone();
    assert!(
        String::from_utf8_lossy(last.as_ref().unwrap()).contains("\"partial\""),
        "the flow ends with a partial report"
    );

    let mut cuts = 0;
    for (cut, before_cut) in after.iter().enumerate().take(STEPS) {
        let w = world().await;
        let commits = Arc::new(AtomicUsize::new(0));
        let c = commits.clone();
        w.memory.set_commit_hook(Some(Arc::new(move |_| {
            if c.fetch_add(1, Ordering::SeqCst) == cut {
                Err(StorageError::Unavailable("the tab was killed".into()))
            } else {
                Ok(())
            }
        })));
        let mut failed_at = None;
        for i in 0..STEPS {
            if step(i, &w.store, &w.fence, &w.storage).await.is_err() {
                failed_at = Some(i);
                break;
            }
        }
        // One commit per step: the cut stops exactly that step.
        assert_eq!(failed_at, Some(cut), "cut {cut}");
        w.memory.set_commit_hook(None);
        assert_eq!(
            &stored(&w.storage).await,
            before_cut,
            "cut {cut}: whole or absent"
        );
        check_blobs(&w).await;
        // Retrying from the cut converges on the uncut result.
        for i in cut..STEPS {
            step(i, &w.store, &w.fence, &w.storage).await.unwrap();
            check_blobs(&w).await;
        }
        assert_eq!(stored(&w.storage).await, last, "cut {cut}: same end");
        cuts += 1;
    }
    assert_eq!(cuts, STEPS);
}
