//! Execution end to end (S9.4, S9.5, S9.6), natively: the capability minted
//! for the approved plan's domains is the one the real `fetch_url` actor
//! verifies in its tool shell before any network work; reads go through
//! agent-fetch's URL policy and reader to pages on a loopback server this
//! test starts; each read's stored text becomes evidence in the frozen
//! snapshot (SQLite on disk). A private address inside the approved plan is
//! refused by the policy and becomes a gap; a model filter that widens the
//! plan is refused by the tool's own verification and reaches no server;
//! the partial report's claims resolve to the fetched texts' hashes.
#![cfg(not(target_arch = "wasm32"))]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_capabilities::{
    Authority, Capability, Origin, Target, TargetScope, canonical_bytes, sha256_hex,
};
use agent_fetch::testing::TestLoopback;
use agent_fetch::{
    FETCH_URL, FetchActor, Limits, ReaderConfig, ScriptedResolver, UrlPolicy, WebReader,
    fetch_url_definition,
};
use agent_host_native::sqlite::SqliteStorage;
use agent_kernel::host::{BlobRef, Clock, LeaseManager, Storage};
use agent_kernel::protocol::{InvocationDraft, ToolAddr, ToolInvocation, ToolMsg, ToolResult};
use agent_kernel::{CallId, OwnerId, RequestId, RunId, SessionId};
use agent_research::report::{
    ArtifactSink, Finding, Report, ReportDraft, Statement, publish_report,
};
use agent_research::scope::{ExecutionScope, ReadTool, ScopeFilter};
use agent_research::{
    Event, EvidenceId, Gap, MessageId, Phase, PlanDecision, ResearchPlan, ResearchStore, TaskId,
};
use axum::Router;
use axum::http::header;
use axum::routing::get;
use serde_json::json;

const RUN: &str = "research-exec-1";

async fn pages(hits: Arc<AtomicUsize>) -> SocketAddr {
    let a = hits.clone();
    let b = hits.clone();
    let app = Router::new()
        // A redirect to another host (same server): outside the plan.
        .route(
            "/moved",
            get(|headers: axum::http::HeaderMap| async move {
                let host = headers
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let port = host.rsplit(':').next().unwrap_or_default().to_owned();
                (
                    axum::http::StatusCode::FOUND,
                    [(
                        header::LOCATION,
                        format!("http://elsewhere.example:{port}/a"),
                    )],
                )
            }),
        )
        .route(
            "/a",
            get(move || {
                a.fetch_add(1, Ordering::SeqCst);
                async {
                    (
                        [(header::CONTENT_TYPE, "text/plain")],
                        "Solid-state cells reached 500 Wh/kg in lab tests.",
                    )
                }
            }),
        )
        .route(
            "/b",
            get(move || {
                b.fetch_add(1, Ordering::SeqCst);
                async {
                    (
                        [(header::CONTENT_TYPE, "text/plain")],
                        "Pilot production began in 2025.",
                    )
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A sink that keeps the bytes as a blob (the report test covers the
/// workspace's Artifacts; here the execution path is the subject).
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
        let hash = sha256_hex(&bytes);
        self.0
            .put_blob(&hash, bytes)
            .await
            .map(|b| b.hash)
            .map_err(|e| e.to_string())
    }
}

fn read_tool() -> ReadTool {
    ReadTool {
        name: FETCH_URL.into(),
        fingerprint: fetch_url_definition().fingerprint().unwrap(),
        origin: Origin::Builtin,
    }
}

fn invocation(
    authority: &Authority,
    call: &str,
    url: &str,
    capability: Capability,
) -> ToolInvocation {
    let def = fetch_url_definition();
    let arguments = json!({ "url": url });
    let parsed = url::Url::parse(url).unwrap();
    let origin = parsed.origin().ascii_serialization();
    ToolInvocation {
        draft: InvocationDraft {
            run: RunId::new(RUN).unwrap(),
            session: SessionId::new("s1").unwrap(),
            call_id: CallId::new(call).unwrap(),
            tool: FETCH_URL.into(),
            fingerprint: def.fingerprint().unwrap(),
            args_hash: sha256_hex(&canonical_bytes(&arguments).unwrap()),
            arguments,
            effects: def.effects.clone(),
            idempotency: def.idempotency,
            sensitivity: def.sensitivity,
            origin: Origin::Builtin,
            provider: None,
            target: Target::Url {
                origin: origin.clone(),
                host: parsed.host_str().unwrap().to_owned(),
            },
            // The scope the pipeline derives from the URL argument.
            scope: TargetScope::Origins {
                origins: [origin.clone()].into(),
            },
            attempt: 1,
            idempotency_key: format!("{RUN}/{call}"),
        },
        capability,
        verifier: authority.verifier(),
        progress: Default::default(),
    }
}

async fn read(fetch: &ToolAddr, inv: ToolInvocation) -> ToolResult {
    fetch
        .ask(|reply| ToolMsg::Invoke {
            invocation: inv,
            reply,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn execution_reads_approved_sources_through_the_fetch_tool_and_the_url_policy() {
    let hits = Arc::new(AtomicUsize::new(0));
    let server = pages(hits.clone()).await;
    let port = server.port();
    let dir = tempfile::tempdir().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(
        SqliteStorage::open(dir.path().join("db.sqlite"))
            .await
            .unwrap(),
    );
    let clock: Arc<dyn Clock> = agent_test_support::clock();
    let leases = LeaseManager::new(
        storage.clone(),
        clock.clone(),
        agent_test_support::executor(),
        OwnerId::new("proc-1").unwrap(),
        Duration::from_secs(30),
    );
    let session = SessionId::new("s1").unwrap();
    let guard = leases.acquire(&session).await.unwrap();
    let fence = guard.fence();

    // The real reader: public-web policy plus exactly this test's server.
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    let resolver = ScriptedResolver::new()
        .answer("docs.site.example", [loopback])
        .answer("news.site.example", [loopback])
        .answer("intranet.site.example", ["10.0.0.7".parse().unwrap()]);
    let policy = UrlPolicy::public_web(Arc::new(resolver))
        .allowing_test_servers(TestLoopback::for_tests_only(), [server]);
    let reader = WebReader::new(
        policy,
        ReaderConfig {
            jina_base: None,
            jina_key: None,
        },
        Limits::spec(),
        clock.clone(),
    );
    let fetch = FetchActor::new(Arc::new(reader), storage.clone(), clock.clone())
        .spawn(agent_test_support::executor(), None);

    // Plan, approval, snapshot.
    let store = ResearchStore::new(storage.clone(), clock.clone());
    let task = TaskId::new("r1").unwrap();
    store
        .create(
            &fence,
            task.clone(),
            MessageId::new("m1").unwrap(),
            "solid-state batteries",
        )
        .await
        .unwrap();
    let a = format!("http://docs.site.example:{port}/a");
    let b = format!("http://news.site.example:{port}/b");
    let private = format!("http://intranet.site.example:{port}/a");
    let plan = ResearchPlan {
        questions: vec!["How far are solid-state batteries?".into()],
        queries: vec![],
        sources: vec![a.clone(), private.clone(), b.clone()],
        domains: ["site.example".to_string()].into(),
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

    // Approval mints the execution capability for fetch_url.
    let authority = Authority::new(RUN, [11; 32]);
    let expires = clock.wall_ms() + 3_600_000;
    let scope = ExecutionScope::mint(&authority, &plan, &read_tool(), expires);

    // A model filter that widens the plan: fetch_url's own shell refuses
    // it before any network work.
    let widened = scope.narrow(&ScopeFilter {
        domains: Some(["site.example".to_string(), "elsewhere.example".to_string()].into()),
        dates: None,
    });
    let refused = read(
        &fetch,
        invocation(&authority, "c0", &a, widened.domains().clone()),
    )
    .await;
    let ToolResult::Error(refusal) = &refused else {
        panic!("{refused:?}")
    };
    assert_eq!(refusal.code, "capability_refused");
    assert!(
        refusal.message.contains("not within the granted scope"),
        "{}",
        refusal.message
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);

    // Reads of the frozen snapshot with the plan's capability.
    let sources: Vec<String> = store
        .load(&session, &task)
        .await
        .unwrap()
        .snapshot
        .unwrap()
        .sources
        .into_iter()
        .map(|s| s.url)
        .collect();
    assert_eq!(sources, vec![a.clone(), private.clone(), b.clone()]);
    for (i, url) in sources.iter().enumerate() {
        let result = read(
            &fetch,
            invocation(
                &authority,
                &format!("c{}", i + 1),
                url,
                scope.domains().clone(),
            ),
        )
        .await;
        store
            .record_fetch_result(&fence, &task, url, &result, None)
            .await
            .unwrap();
    }
    // The private address was refused by the URL policy, not fetched.
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    let t = store.load(&session, &task).await.unwrap();
    assert!(
        matches!(
            &t.gaps[..],
            [Gap::SourceFailed { url, reason }] if url == &private && reason.contains("10.0.0.7")
        ),
        "{:?}",
        t.gaps
    );
    let snapshot = t.snapshot.clone().unwrap();
    let ev1 = EvidenceId::new("ev-1").unwrap();
    let (url1, read1) = snapshot.evidence(&ev1).unwrap();
    assert_eq!(url1, a);
    assert_eq!(
        store.blob("evidence", &read1.content).await.unwrap(),
        b"Solid-state cells reached 500 Wh/kg in lab tests."
    );

    // Synthesis: a partial report whose claims resolve to the fetched texts.
    store
        .apply(&fence, &task, Event::FinishExecution)
        .await
        .unwrap();
    let draft = ReportDraft {
        title: "Solid-state batteries".into(),
        findings: vec![
            Finding {
                claim: "Lab cells reached 500 Wh/kg.".into(),
                evidence: vec![ev1.clone()],
            },
            Finding {
                claim: "Pilot production began in 2025.".into(),
                evidence: vec![EvidenceId::new("ev-2").unwrap()],
            },
        ],
        unverified: vec![],
        model_knowledge: vec![Statement {
            text: "Solid-state cells use a solid electrolyte.".into(),
        }],
        unanswered: vec![],
    };
    let (done, report) = publish_report(&store, &BlobSink(storage.clone()), &fence, &task, draft)
        .await
        .unwrap();
    assert_eq!(done.phase, Phase::Partial);
    let bytes = store
        .blob(
            "report",
            &BlobRef {
                hash: done.report.as_ref().unwrap().artifact.clone(),
                size: done.report.as_ref().unwrap().size,
            },
        )
        .await
        .unwrap();
    assert_eq!(Report::from_bytes(&bytes).unwrap(), report);
    for e in &report.evidence {
        let text = store.blob("evidence", &e.content).await.unwrap();
        assert_eq!(sha256_hex(&text), e.content.hash);
    }
    assert_eq!(report.evidence.len(), 2);
}

/// The execution driver: reads pending snapshot sources through the real
/// `fetch_url` actor within a read budget; a reload in between (a new
/// process on the same file) interrupts, Resume continues with only the
/// sources not yet settled, and strict approval mode still reads
/// automatically (reads need no confirmation; approval bypasses nothing).
#[tokio::test]
async fn the_driver_reads_pending_sources_within_its_budget_and_resumes_after_a_reload() {
    use agent_capabilities::ApprovalMode;
    use agent_kernel::tool::CancelHandle;
    use agent_research::execute::{Execution, ExecutionError, Outcome, ReadChannel};

    let hits = Arc::new(AtomicUsize::new(0));
    let server = pages(hits.clone()).await;
    let port = server.port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let clock: Arc<dyn Clock> = agent_test_support::clock();
    let session = SessionId::new("s1").unwrap();
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    let fetch_for = |storage: Arc<dyn Storage>| {
        let resolver = ScriptedResolver::new()
            .answer("docs.site.example", [loopback])
            .answer("news.site.example", [loopback])
            .answer("intranet.site.example", ["10.0.0.7".parse().unwrap()])
            .answer("elsewhere.example", [loopback]);
        let policy = UrlPolicy::public_web(Arc::new(resolver))
            .allowing_test_servers(TestLoopback::for_tests_only(), [server]);
        let reader = WebReader::new(
            policy,
            ReaderConfig {
                jina_base: None,
                jina_key: None,
            },
            Limits::spec(),
            clock.clone(),
        );
        FetchActor::new(Arc::new(reader), storage, clock.clone())
            .spawn(agent_test_support::executor(), None)
    };
    let a = format!("http://docs.site.example:{port}/a");
    let b = format!("http://news.site.example:{port}/b");
    let private = format!("http://intranet.site.example:{port}/a");
    let moved = format!("http://docs.site.example:{port}/moved");
    let plan = ResearchPlan {
        questions: vec!["How far are solid-state batteries?".into()],
        queries: vec![],
        sources: vec![a.clone(), private.clone(), b.clone(), moved.clone()],
        domains: ["site.example".to_string()].into(),
        dates: None,
        notes: vec![],
    };
    let task = TaskId::new("r1").unwrap();
    let run = RunId::new(RUN).unwrap();
    let authority = Authority::new(RUN, [12; 32]);
    let scope = ExecutionScope::mint(&authority, &plan, &read_tool(), u64::MAX >> 12);
    let verifier = authority.verifier();

    // Process 1: approve, then one read only (the budget).
    {
        let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).await.unwrap());
        let leases = LeaseManager::new(
            storage.clone(),
            clock.clone(),
            agent_test_support::executor(),
            OwnerId::new("proc-1").unwrap(),
            Duration::from_millis(200),
        );
        let guard = leases.acquire(&session).await.unwrap();
        let fence = guard.fence();
        let store = ResearchStore::new(storage.clone(), clock.clone());
        store
            .create(
                &fence,
                task.clone(),
                MessageId::new("m1").unwrap(),
                "batteries",
            )
            .await
            .unwrap();
        let request = RequestId::new("plan-1").unwrap();
        store
            .propose_plan(&fence, &task, &plan, request.clone())
            .await
            .unwrap();
        store
            .decide_plan(&fence, &task, &request, PlanDecision::Approve)
            .await
            .unwrap();
        let read = ReadChannel {
            addr: fetch_for(storage.clone()),
            definition: fetch_url_definition(),
        };
        let cancel = CancelHandle::new();
        let execution = Execution {
            store: &store,
            fence: &fence,
            task: &task,
            run: &run,
            scope: &scope,
            verifier: &verifier,
            read: &read,
            mode: ApprovalMode::Strict,
            max_reads: 1,
            cancel: cancel.token(),
        };
        assert_eq!(
            execution.run().await.unwrap(),
            Outcome::BudgetSpent { remaining: 3 }
        );
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        // A tool that is not read-only is refused before anything is read.
        let mut writer = fetch_url_definition();
        writer.effects = [agent_capabilities::EffectClass::WriteExternal].into();
        let bad = ReadChannel {
            addr: read.addr.clone(),
            definition: writer,
        };
        let refused = Execution {
            read: &bad,
            ..execution
        }
        .run()
        .await;
        assert!(matches!(refused, Err(ExecutionError::NotReadOnly { .. })));
        guard.abandon();
    }
    tokio::time::sleep(Duration::from_millis(250)).await;

    // Process 2: recovery interrupts; nothing is read until Resume.
    let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).await.unwrap());
    let leases = LeaseManager::new(
        storage.clone(),
        clock.clone(),
        agent_test_support::executor(),
        OwnerId::new("proc-2").unwrap(),
        Duration::from_secs(30),
    );
    let guard = leases.acquire(&session).await.unwrap();
    let fence = guard.fence();
    let store = ResearchStore::new(storage.clone(), clock.clone());
    assert_eq!(
        store.interrupt_active(&fence).await.unwrap(),
        vec![task.clone()]
    );
    let read = ReadChannel {
        addr: fetch_for(storage.clone()),
        definition: fetch_url_definition(),
    };
    let execution = Execution {
        store: &store,
        fence: &fence,
        task: &task,
        run: &run,
        scope: &scope,
        verifier: &verifier,
        read: &read,
        mode: ApprovalMode::Strict,
        max_reads: 10,
        cancel: agent_kernel::tool::CancelHandle::new().token(),
    };
    assert!(execution.run().await.is_err(), "interrupted: no reads");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    store.apply(&fence, &task, Event::Resume).await.unwrap();
    assert_eq!(execution.run().await.unwrap(), Outcome::Finished);
    // Source a was not read again; the private one was refused unread;
    // the redirect was followed (the policy allows the host) but its end
    // lies outside the plan, so it is a gap, not evidence.
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    let t = store.load(&session, &task).await.unwrap();
    assert_eq!(t.phase, Phase::Synthesizing);
    let evidence: Vec<String> = t
        .snapshot
        .unwrap()
        .sources
        .iter()
        .filter_map(|s| s.read.as_ref().map(|r| format!("{} {}", r.evidence, s.url)))
        .collect();
    assert_eq!(evidence, vec![format!("ev-1 {a}"), format!("ev-2 {b}")]);
    assert!(
        matches!(&t.gaps[..], [Gap::SourceFailed { url: p, .. }, Gap::SourceFailed { url: m, reason }]
            if p == &private && m == &moved && reason.starts_with("redirected_outside_plan")),
        "{:?}",
        t.gaps
    );
}
