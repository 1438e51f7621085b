//! The durable `ResearchTask` (S9.1: the same primitives as runs; S6.4: the
//! plan request shown once; S9.4: narrowing-only edits; S9.6: a reload
//! starts nothing), on the kernel's memory storage and on SQLite on disk
//! (the native host's `SqliteStorage`), each through a fresh store per
//! "reload" over the same storage.

#![cfg(not(target_arch = "wasm32"))]

use std::sync::Arc;
use std::time::Duration;

use agent_kernel::host::{
    Clock, LeaseManager, ManualClock, Record, Storage, StorageError, StorageExt, Table,
};
use agent_kernel::memory::MemoryStorage;
use agent_kernel::{OwnerId, RequestId, SessionId};
use agent_research::plan::DateRange;
use agent_research::store::{ResearchError, decode_task};
use agent_research::{
    ActivePhase, Event, Gap, MessageId, Phase, PlanError, ResearchPlan, ResearchStore,
    ResearchTask, TaskId, TransitionError,
};

struct Fixture {
    storage: Arc<dyn Storage>,
    clock: Arc<ManualClock>,
    leases: LeaseManager,
    // Keeps the SQLite file alive as long as the fixture.
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    fn store(&self) -> ResearchStore {
        ResearchStore::new(self.storage.clone(), self.clock.clone())
    }
    fn leases_for(&self, owner: &str) -> LeaseManager {
        LeaseManager::new(
            self.storage.clone(),
            self.clock.clone() as Arc<dyn Clock>,
            agent_test_support::executor(),
            OwnerId::new(owner).unwrap(),
            Duration::from_secs(30),
        )
    }
}

fn with_storage(storage: Arc<dyn Storage>, dir: Option<tempfile::TempDir>) -> Fixture {
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let leases = LeaseManager::new(
        storage.clone(),
        clock.clone() as Arc<dyn Clock>,
        agent_test_support::executor(),
        OwnerId::new("tab-1").unwrap(),
        Duration::from_secs(30),
    );
    Fixture {
        storage,
        clock,
        leases,
        _dir: dir,
    }
}

fn memory() -> Fixture {
    with_storage(Arc::new(MemoryStorage::new()), None)
}

async fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let storage = agent_host_native::sqlite::SqliteStorage::open(dir.path().join("db.sqlite"))
        .await
        .unwrap();
    with_storage(Arc::new(storage), Some(dir))
}

fn session() -> SessionId {
    SessionId::new("s1").unwrap()
}

fn task_id() -> TaskId {
    TaskId::new("research-1").unwrap()
}

fn plan() -> ResearchPlan {
    ResearchPlan {
        questions: vec!["What changed?".into(), "Who uses it?".into()],
        queries: vec!["topic news".into()],
        sources: vec![
            "https://docs.example.org/a".into(),
            "https://blog.example.com/b".into(),
        ],
        domains: ["example.org".to_string(), "example.com".to_string()].into(),
        dates: Some(DateRange {
            from: "2024-01-01".into(),
            to: "2024-12-31".into(),
        }),
        notes: vec![],
    }
}

async fn planned(f: &Fixture) -> ResearchTask {
    let guard = f.leases.acquire(&session()).await.unwrap();
    let store = f.store();
    let task = store
        .create(
            &guard.fence(),
            task_id(),
            MessageId::new("msg-7").unwrap(),
            "Rust actors in the browser",
        )
        .await
        .unwrap();
    assert_eq!(task.phase, Phase::Planning);
    store
        .propose_plan(
            &guard.fence(),
            &task_id(),
            &plan(),
            RequestId::new("plan-1").unwrap(),
        )
        .await
        .unwrap()
}

async fn lifecycle(f: Fixture) {
    let task = planned(&f).await;
    assert_eq!(task.phase, Phase::AwaitingPlanApproval);
    assert_eq!(task.message.as_str(), "msg-7");
    assert_eq!(
        f.store().topic(&task).await.unwrap(),
        "Rust actors in the browser"
    );
    // The record names blobs, never raw text (S2.2).
    let raw = f
        .storage
        .get(Table::Meta, &task.key())
        .await
        .unwrap()
        .unwrap();
    let raw = String::from_utf8(raw).unwrap();
    assert!(!raw.contains("Rust actors"), "{raw}");
    assert!(!raw.contains("What changed"), "{raw}");

    let guard = f.leases.acquire(&session()).await.unwrap();
    // Shown once, and not again after a reload (a fresh store, S6.4).
    let shown = f
        .store()
        .present_plan(&guard.fence(), &task_id())
        .await
        .unwrap();
    assert_eq!(shown, Some(plan()));
    let again = f
        .store()
        .present_plan(&guard.fence(), &task_id())
        .await
        .unwrap();
    assert_eq!(again, None);
    let reloaded = f.store().load(&session(), &task_id()).await.unwrap();
    assert_eq!(reloaded.phase, Phase::AwaitingPlanApproval);
    assert!(reloaded.plan_request.unwrap().presented);

    // A widening edit is refused and changes nothing.
    let mut wider = plan();
    wider.domains.insert("example.net".into());
    let refused = f
        .store()
        .approve_plan(&guard.fence(), &task_id(), Some(wider))
        .await;
    assert!(matches!(
        refused,
        Err(ResearchError::Plan(PlanError::Widens { .. }))
    ));
    assert_eq!(
        f.store().load(&session(), &task_id()).await.unwrap().phase,
        Phase::AwaitingPlanApproval
    );

    // A narrowing edit is approved and freezes its own sources.
    let mut narrower = plan();
    narrower.sources.truncate(1);
    narrower.domains = ["example.org".to_string()].into();
    let (task, approved) = f
        .store()
        .approve_plan(&guard.fence(), &task_id(), Some(narrower.clone()))
        .await
        .unwrap();
    assert_eq!(approved, narrower);
    assert_eq!(task.phase, Phase::Executing);
    assert_eq!(
        f.store().approved_plan(&task).await.unwrap(),
        Some(narrower)
    );
    let snapshot = task.snapshot.clone().unwrap();
    assert_eq!(snapshot.sources.len(), 1);

    // A read: the text is a blob named by its evidence entry.
    let task = f
        .store()
        .record_read(
            &guard.fence(),
            &task_id(),
            "https://docs.example.org/a",
            "https://docs.example.org/a/",
            b"page text",
            Some("2024-05-01".into()),
        )
        .await
        .unwrap();
    let (url, read) = task
        .snapshot
        .as_ref()
        .unwrap()
        .evidence(&"ev-1".to_string().try_into().unwrap())
        .map(|(u, r)| (u.to_owned(), r.clone()))
        .unwrap();
    assert_eq!(url, "https://docs.example.org/a");
    assert_eq!(
        f.store().blob("source", &read.content).await.unwrap(),
        b"page text"
    );
    // Only snapshot sources.
    let outside = f
        .store()
        .record_read(
            &guard.fence(),
            &task_id(),
            "https://blog.example.com/b",
            "https://blog.example.com/b",
            b"x",
            None,
        )
        .await;
    assert!(matches!(
        outside,
        Err(ResearchError::Transition(
            TransitionError::NotInSnapshot { .. }
        ))
    ));

    // A reload interrupts; nothing continues until Resume.
    let interrupted = f.store().interrupt_active(&guard.fence()).await.unwrap();
    assert_eq!(interrupted, vec![task_id()]);
    let task = f.store().load(&session(), &task_id()).await.unwrap();
    assert_eq!(
        task.phase,
        Phase::Interrupted {
            resume_to: ActivePhase::Executing
        }
    );
    let task = f
        .store()
        .apply(&guard.fence(), &task_id(), Event::Resume)
        .await
        .unwrap();
    assert_eq!(task.phase, Phase::Executing);
    let task = f
        .store()
        .apply(
            &guard.fence(),
            &task_id(),
            Event::Stop { gap: Gap::Stopped },
        )
        .await
        .unwrap();
    assert_eq!(task.phase, Phase::Synthesizing);
    assert_eq!(f.store().list(&session()).await.unwrap(), vec![task]);
}

async fn fencing(f: Fixture) {
    planned(&f).await;
    let old = f.leases.acquire(&session()).await.unwrap();
    let stale = old.fence();
    old.abandon();
    // The first tab is gone; its lease expires and another tab takes over.
    f.clock.advance(Duration::from_secs(31));
    let other = f.leases_for("tab-2");
    let guard = other.acquire(&session()).await.unwrap();
    assert!(guard.epoch() > stale.epoch);
    let refused = f.store().apply(&stale, &task_id(), Event::RejectPlan).await;
    assert!(matches!(
        refused,
        Err(ResearchError::Storage(StorageError::StaleEpoch { .. }))
    ));
    assert_eq!(
        f.store().load(&session(), &task_id()).await.unwrap().phase,
        Phase::AwaitingPlanApproval
    );
    let task = f
        .store()
        .apply(&guard.fence(), &task_id(), Event::RejectPlan)
        .await
        .unwrap();
    assert_eq!(task.phase, Phase::Rejected);
    // Illegal moves are typed and leave the record alone.
    let illegal = f
        .store()
        .apply(&guard.fence(), &task_id(), Event::Resume)
        .await;
    assert_eq!(
        illegal,
        Err(ResearchError::Transition(TransitionError::Illegal {
            phase: "rejected",
            event: "resume"
        }))
    );
}

async fn duplicates_and_bad_input(f: Fixture) {
    planned(&f).await;
    let guard = f.leases.acquire(&session()).await.unwrap();
    let again = f
        .store()
        .create(
            &guard.fence(),
            task_id(),
            MessageId::new("msg-8").unwrap(),
            "another",
        )
        .await;
    assert!(matches!(again, Err(ResearchError::Exists { .. })));
    let empty = f
        .store()
        .create(
            &guard.fence(),
            TaskId::new("research-2").unwrap(),
            MessageId::new("msg-8").unwrap(),
            "  ",
        )
        .await;
    assert_eq!(empty.unwrap_err(), ResearchError::BadTopic);
    let missing = f
        .store()
        .load(&session(), &TaskId::new("nope").unwrap())
        .await;
    assert!(matches!(missing, Err(ResearchError::NotFound { .. })));
    let mut bad = plan();
    bad.sources.push("https://elsewhere.net/".into());
    let refused = f
        .store()
        .propose_plan(
            &guard.fence(),
            &task_id(),
            &bad,
            RequestId::new("plan-2").unwrap(),
        )
        .await;
    assert!(matches!(refused, Err(ResearchError::Plan(_))));
}

/// The index rows a page load reads (issue 18): one per task mid-phase.
async fn mid_phase_rows(f: &Fixture) -> usize {
    f.storage
        .scan_prefix(Table::Meta, "research-mid-phase/")
        .await
        .unwrap()
        .len()
}

/// S9.6 on load: the sessions with a task mid-phase come from an index kept
/// in the batch of each transition, so that a page load does not read the
/// tasks that ended; tasks stored before the index are indexed once.
async fn mid_phase_index(f: Fixture) {
    let store = f.store();
    assert!(store.sessions_mid_phase().await.unwrap().is_empty());
    let task = planned(&f).await;
    assert_eq!(task.phase, Phase::AwaitingPlanApproval);
    assert_eq!(
        mid_phase_rows(&f).await,
        0,
        "awaiting approval is not mid-phase"
    );
    // Ten more tasks in other sessions: five left planning, five waiting.
    for i in 0..10 {
        let session = SessionId::new(format!("other-{i}")).unwrap();
        let guard = f.leases.acquire(&session).await.unwrap();
        let id = TaskId::new(format!("task-{i}")).unwrap();
        store
            .create(
                &guard.fence(),
                id.clone(),
                MessageId::new("m").unwrap(),
                "a topic",
            )
            .await
            .unwrap();
        if i % 2 == 0 {
            store
                .propose_plan(&guard.fence(), &id, &plan(), RequestId::new("p").unwrap())
                .await
                .unwrap();
        }
    }
    let mut sessions = store.sessions_mid_phase().await.unwrap();
    sessions.sort();
    let expected: Vec<SessionId> = [1, 3, 5, 7, 9]
        .iter()
        .map(|i| SessionId::new(format!("other-{i}")).unwrap())
        .collect();
    assert_eq!(sessions, expected);
    assert_eq!(
        mid_phase_rows(&f).await,
        5,
        "one row per task mid-phase, none for the others"
    );
    // A task leaving the middle takes its row with it.
    let guard = f.leases.acquire(&expected[0]).await.unwrap();
    store
        .propose_plan(
            &guard.fence(),
            &TaskId::new("task-1").unwrap(),
            &plan(),
            RequestId::new("p").unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(store.sessions_mid_phase().await.unwrap().len(), 4);
    // A store written before the index: its rows and marker gone, the
    // first page load indexes every stored task once.
    let mut forget =
        agent_kernel::host::Batch::new().delete(Table::Meta, "research-mid-phase-index");
    for (key, _) in f
        .storage
        .scan_prefix(Table::Meta, "research-mid-phase/")
        .await
        .unwrap()
    {
        forget = forget.delete(Table::Meta, key);
    }
    f.storage.commit(forget).await.unwrap();
    assert_eq!(mid_phase_rows(&f).await, 0);
    assert_eq!(f.store().sessions_mid_phase().await.unwrap().len(), 4);
    assert_eq!(mid_phase_rows(&f).await, 4);
}

#[tokio::test]
async fn a_page_load_finds_tasks_mid_phase_through_the_index_on_memory() {
    mid_phase_index(memory()).await;
}

#[tokio::test]
async fn a_page_load_finds_tasks_mid_phase_through_the_index_on_sqlite() {
    mid_phase_index(sqlite().await).await;
}

#[tokio::test]
async fn lifecycle_on_memory() {
    lifecycle(memory()).await;
}

#[tokio::test]
async fn lifecycle_on_sqlite() {
    lifecycle(sqlite().await).await;
}

#[tokio::test]
async fn a_stale_lease_cannot_write_on_memory() {
    fencing(memory()).await;
}

#[tokio::test]
async fn a_stale_lease_cannot_write_on_sqlite() {
    fencing(sqlite().await).await;
}

#[tokio::test]
async fn duplicates_and_bad_input_are_typed_on_memory() {
    duplicates_and_bad_input(memory()).await;
}

#[tokio::test]
async fn duplicates_and_bad_input_are_typed_on_sqlite() {
    duplicates_and_bad_input(sqlite().await).await;
}

#[tokio::test]
async fn bad_stored_bytes_give_typed_errors() {
    let f = memory();
    let memory = MemoryStorage::new();
    let key = ResearchTask::key_for(&session(), &task_id());
    for (bytes, expect_format) in [
        (&b"not json"[..], false),
        (&b"{\"v\":1}"[..], false),
        (&b"{\"v\":1,\"id\":\"../x\"}"[..], false),
        (&b"[]"[..], false),
        (&b"{\"v\":99,\"id\":\"x\"}"[..], true),
    ] {
        let decoded = decode_task(&key, bytes);
        if expect_format {
            assert_eq!(
                decoded,
                Err(ResearchError::Format {
                    key: key.clone(),
                    found: 99
                })
            );
        } else {
            assert!(
                matches!(
                    decoded,
                    Err(ResearchError::Storage(StorageError::Corrupt { .. }))
                ),
                "{decoded:?}"
            );
        }
        memory.corrupt_for_tests(Table::Meta, &key, bytes).unwrap();
        let store = ResearchStore::new(Arc::new(memory.fork().unwrap()), f.clock.clone());
        assert!(store.load(&session(), &task_id()).await.is_err());
        assert!(store.list(&session()).await.is_err());
    }
    // The generic typed read agrees.
    let read: Result<Option<ResearchTask>, _> = memory.get_record(&key).await;
    assert!(read.is_err());
}
