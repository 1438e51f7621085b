//! Memory (issue 20 item 4; SPEC S10.1 Memory scopes, S6.1 recoverable
//! local writes with revision checks and receipts, S9.1 Deep Research never
//! sees Memory): scope rules, revision conflicts, bounds, bad stored bytes,
//! and the tools through the tools actor, on the kernel's memory storage
//! and on SQLite on disk (the native host's storage).

#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeSet;
use std::sync::Arc;

use agent_capabilities::{Authority, Grant, Trust, Uses};
use agent_kernel::host::{Clock, ManualClock, Storage, StorageError, Table};
use agent_kernel::memory::MemoryStorage;
use agent_kernel::protocol::{
    ModelToolSchema, PreparedCall, RunToolConfig, ToolCall, ToolInvocation, ToolResult, ToolsMsg,
};
use agent_kernel::run::RunMode;
use agent_kernel::{CallId, OwnerId, RunId, SessionId};
use agent_memory::record::{MAX_RECORDS_PER_SCOPE, MAX_TEXT_BYTES, MemoryRecord};
use agent_memory::store::{MAX_QUERY_BYTES, MAX_SEARCH_RESULTS};
use agent_memory::{
    ChangedBy, Expect, GrantError, MemoryError, MemoryGrant, MemoryId, MemoryScope, MemoryScopes,
    MemoryStore, RunGrants, ScopeError, TOOL_MODES,
};
use agent_tools::registry::{Registry, ToolRegistration};
use agent_tools::{ToolsHandle, ToolsOptions, spawn_tools};
use serde_json::{Value, json};

const NOW: u64 = 1_767_225_600_000;

fn scope(s: &str) -> MemoryScope {
    MemoryScope::parse(s).unwrap()
}

fn id(s: &str) -> MemoryId {
    MemoryId::new(s).unwrap()
}

fn session() -> SessionId {
    SessionId::new("s1").unwrap()
}

struct Fixture {
    storage: Arc<dyn Storage>,
    clock: Arc<ManualClock>,
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    fn store(&self) -> MemoryStore {
        MemoryStore::new(self.storage.clone(), self.clock.clone())
    }
}

fn memory() -> Fixture {
    Fixture {
        storage: Arc::new(MemoryStorage::new()),
        clock: Arc::new(ManualClock::new(NOW)),
        _dir: None,
    }
}

async fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let storage = agent_host_native::sqlite::SqliteStorage::open(dir.path().join("db.sqlite"))
        .await
        .unwrap();
    Fixture {
        storage: Arc::new(storage),
        clock: Arc::new(ManualClock::new(NOW)),
        _dir: Some(dir),
    }
}

async fn both() -> Vec<Fixture> {
    vec![memory(), sqlite().await]
}

// ---------------------------------------------------------------------------
// Scope rules (S10.1)
// ---------------------------------------------------------------------------

#[test]
fn scopes_parse_by_a_fixed_grammar() {
    for good in ["global", "workspace:w1", "profile:p.1", "session:s_1:x"] {
        assert_eq!(scope(good).to_string(), good);
    }
    for bad in [
        "",
        "Global",
        "workspace",
        "workspace:",
        "team:t1",
        "global:x",
        "workspace:a/b",
        "session:..\u{0}",
        &format!("profile:{}", "p".repeat(129)),
    ] {
        assert!(
            matches!(MemoryScope::parse(bad), Err(ScopeError::Invalid { .. })),
            "{bad:?} must be refused"
        );
    }
    // Serialised as its text, and bad text does not decode.
    assert_eq!(
        serde_json::to_value(scope("workspace:w1")).unwrap(),
        json!("workspace:w1")
    );
    assert!(serde_json::from_value::<MemoryScope>(json!("workspace:")).is_err());
}

#[test]
fn a_run_reads_and_writes_only_its_granted_scopes() {
    // S10.1: a profile's Memory scopes decide which scopes a run may read and write.
    let s = session();
    let scopes = MemoryScopes {
        read: [
            scope("global"),
            scope("workspace:w1"),
            MemoryScope::session(&s),
        ]
        .into(),
        write: [scope("workspace:w1"), MemoryScope::session(&s)].into(),
    };
    assert_eq!(
        scopes.resolve_write("session", &s).unwrap(),
        scope("session:s1")
    );
    assert_eq!(
        scopes.resolve_write("workspace", &s).unwrap(),
        scope("workspace:w1")
    );
    assert_eq!(
        scopes.resolve_write("workspace:w1", &s).unwrap(),
        scope("workspace:w1")
    );
    assert_eq!(scopes.resolve_read("global", &s).unwrap(), scope("global"));
    let denied = scopes.resolve_write("global", &s).unwrap_err();
    assert!(matches!(denied, ScopeError::WriteDenied { .. }), "{denied}");
    assert_eq!(denied.code(), "memory_scope_denied");
    assert!(matches!(
        scopes.resolve_write("workspace:w2", &s),
        Err(ScopeError::WriteDenied { .. })
    ));
    assert!(matches!(
        scopes.resolve_read("profile:p1", &s),
        Err(ScopeError::ReadDenied { .. })
    ));
    // A bare kind with no granted scope of that kind is not guessed.
    assert!(matches!(
        scopes.resolve_read("profile", &s),
        Err(ScopeError::Invalid { .. })
    ));
    // Another session's scope is not this run's.
    assert!(scopes.resolve_read("session:s2", &s).is_err());
    // Two writable workspaces: the bare kind is ambiguous, never a guess.
    let two = MemoryScopes::read_write([scope("workspace:a"), scope("workspace:b")]);
    assert!(matches!(
        two.resolve_write("workspace", &s),
        Err(ScopeError::Ambiguous { count: 2, .. })
    ));
    // The empty grant allows nothing.
    assert!(MemoryScopes::none().check_read(&scope("global")).is_err());
}

// ---------------------------------------------------------------------------
// The store: revisions, forget and restore, isolation, durability
// ---------------------------------------------------------------------------

#[tokio::test]
async fn saves_edits_and_conflicts_keep_revisions_and_return_the_latest() {
    for fx in both().await {
        let store = fx.store();
        let (w1, m) = (scope("workspace:w1"), id("editor"));
        let (r1, receipt) = store
            .save(
                None,
                &w1,
                &m,
                "Prefers tabs",
                ChangedBy::Person,
                Expect::New,
            )
            .await
            .unwrap();
        assert_eq!(
            (r1.revision, receipt.old_revision, receipt.new_revision),
            (1, None, Some(1))
        );
        assert_eq!(
            receipt.text_hash,
            agent_capabilities::sha256_hex(b"Prefers tabs")
        );
        // A second "new" with the same id is refused with the latest.
        let err = store
            .save(None, &w1, &m, "other", ChangedBy::Person, Expect::New)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "memory_exists");
        assert_eq!(err.latest().unwrap().text, "Prefers tabs");
        fx.clock.advance(std::time::Duration::from_secs(1));
        let (r2, _) = store.edit(&w1, &m, "Prefers spaces", 1).await.unwrap();
        assert_eq!(
            (r2.revision, r2.created_at_ms, r2.saved_at_ms),
            (2, NOW, NOW + 1000)
        );
        // S7.3-style: a stale revision fails and returns the latest, unchanged.
        let err = store
            .edit(&w1, &m, "Prefers tabs again", 1)
            .await
            .unwrap_err();
        match &err {
            MemoryError::StaleRevision {
                expected: 1,
                latest,
            } => {
                assert_eq!(
                    (latest.revision, latest.text.as_str()),
                    (2, "Prefers spaces")
                )
            }
            other => panic!("expected a stale revision, got {other:?}"),
        }
        assert_eq!(store.get(&w1, &m).await.unwrap().unwrap().revision, 2);
        // Editing what does not exist is not a create.
        assert_eq!(
            store
                .edit(&w1, &id("nope"), "x", 1)
                .await
                .unwrap_err()
                .code(),
            "memory_not_found"
        );
        // Scopes are separate: the same id in another scope is another memory.
        store
            .save(
                None,
                &scope("global"),
                &m,
                "Global fact",
                ChangedBy::Person,
                Expect::New,
            )
            .await
            .unwrap();
        assert_eq!(store.list(&w1).await.unwrap().len(), 1);
        assert_eq!(store.list(&scope("global")).await.unwrap().len(), 1);
        assert!(store.list(&scope("workspace:w")).await.unwrap().is_empty());
        assert!(
            store
                .list(&scope("workspace:w1:x"))
                .await
                .unwrap()
                .is_empty()
        );
    }
}

#[tokio::test]
async fn forget_keeps_the_revision_and_restore_brings_it_back() {
    for fx in both().await {
        let store = fx.store();
        let (g, m) = (scope("global"), id("name"));
        store
            .save(None, &g, &m, "Call me Sam", ChangedBy::Person, Expect::New)
            .await
            .unwrap();
        store.edit(&g, &m, "Call me Samantha", 1).await.unwrap();
        // A stale delete changes nothing.
        assert_eq!(
            store.delete(&g, &m, 1).await.unwrap_err().code(),
            "stale_revision"
        );
        let (gone, receipt) = store.delete(&g, &m, 2).await.unwrap();
        assert_eq!(receipt.old_revision, Some(2));
        assert_eq!(gone.forgotten.as_ref().unwrap().by, ChangedBy::Person);
        assert!(store.get(&g, &m).await.unwrap().is_none());
        assert!(store.list(&g).await.unwrap().is_empty());
        let kept = store.list_forgotten(&g).await.unwrap();
        assert_eq!(
            (kept[0].revision, kept[0].text.as_str()),
            (2, "Call me Samantha")
        );
        let (back, receipt) = store
            .restore(None, &g, &m, ChangedBy::Person)
            .await
            .unwrap();
        assert_eq!((back.revision, back.text.as_str()), (3, "Call me Samantha"));
        assert_eq!(
            (receipt.old_revision, receipt.new_revision),
            (Some(2), Some(3))
        );
        assert!(back.forgotten.is_none());
        assert!(store.list_forgotten(&g).await.unwrap().is_empty());
        // Nothing left to restore; purge removes only forgotten ones.
        assert_eq!(
            store
                .restore(None, &g, &m, ChangedBy::Person)
                .await
                .unwrap_err()
                .code(),
            "memory_not_found"
        );
        store.delete(&g, &m, 3).await.unwrap();
        assert!(store.purge(&g, &m).await.unwrap());
        assert!(!store.purge(&g, &m).await.unwrap());
        assert!(
            store
                .restore(None, &g, &m, ChangedBy::Person)
                .await
                .is_err()
        );
    }
}

#[tokio::test]
async fn memories_survive_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(NOW));
    {
        let storage = agent_host_native::sqlite::SqliteStorage::open(&path)
            .await
            .unwrap();
        let store = MemoryStore::new(Arc::new(storage), clock.clone());
        store
            .save(
                None,
                &scope("profile:p1"),
                &id("tz"),
                "Lives in Lisbon",
                ChangedBy::Person,
                Expect::New,
            )
            .await
            .unwrap();
    }
    let storage = agent_host_native::sqlite::SqliteStorage::open(&path)
        .await
        .unwrap();
    let store = MemoryStore::new(Arc::new(storage), clock);
    let listed = store.list(&scope("profile:p1")).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].text, "Lives in Lisbon");
}

#[tokio::test]
async fn a_fenced_write_with_a_stale_epoch_is_refused() {
    // S3.3 / S14.1: a writer that lost its lease cannot write.
    for fx in both().await {
        let store = fx.store();
        let owner = OwnerId::new("tab-1").unwrap();
        let lease = fx
            .storage
            .try_acquire_lease(&session(), &owner, NOW, 30_000)
            .await
            .unwrap();
        let fence = lease.fence();
        let s = scope("session:s1");
        store
            .save(
                Some(&fence),
                &s,
                &id("a"),
                "fenced",
                ChangedBy::Person,
                Expect::New,
            )
            .await
            .unwrap();
        let mut stale = fence.clone();
        stale.epoch += 7;
        let err = store
            .save(
                Some(&stale),
                &s,
                &id("b"),
                "late",
                ChangedBy::Person,
                Expect::New,
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), "lease_lost");
        assert!(store.get(&s, &id("b")).await.unwrap().is_none());
    }
}

// ---------------------------------------------------------------------------
// Bounds: at, below and above
// ---------------------------------------------------------------------------

#[tokio::test]
async fn text_query_and_result_bounds_hold_at_below_and_above() {
    for fx in both().await {
        let store = fx.store();
        let g = scope("global");
        let save = |i: &str, text: String| {
            let store = store.clone();
            let (g, i) = (g.clone(), id(i));
            async move {
                store
                    .save(None, &g, &i, &text, ChangedBy::Person, Expect::New)
                    .await
            }
        };
        assert!(
            save("below", "é".repeat(MAX_TEXT_BYTES / 2 - 1))
                .await
                .is_ok()
        );
        assert!(save("at", "x".repeat(MAX_TEXT_BYTES)).await.is_ok());
        // Bytes, not characters: 1,025 two-byte characters are 2,050 bytes.
        assert!(matches!(
            save("above", "é".repeat(MAX_TEXT_BYTES / 2 + 1)).await,
            Err(MemoryError::TooLong { bytes: 2050 })
        ));
        assert!(matches!(
            save("empty", " \n".into()).await,
            Err(MemoryError::Empty)
        ));

        let scopes: BTreeSet<MemoryScope> = [g.clone()].into();
        assert!(
            store
                .search(&scopes, &"x".repeat(MAX_QUERY_BYTES), 5)
                .await
                .is_ok()
        );
        assert!(matches!(
            store
                .search(&scopes, &"x".repeat(MAX_QUERY_BYTES + 1), 5)
                .await,
            Err(MemoryError::BadQuery)
        ));
        assert!(matches!(
            store.search(&scopes, "  ", 5).await,
            Err(MemoryError::BadQuery)
        ));
        assert!(matches!(
            store.search(&scopes, "?!", 5).await,
            Err(MemoryError::BadQuery)
        ));
        for i in 0..MAX_SEARCH_RESULTS + 5 {
            save(&format!("fact-{i}"), format!("coffee fact number {i}"))
                .await
                .unwrap();
        }
        assert_eq!(store.search(&scopes, "coffee", 3).await.unwrap().len(), 3);
        assert_eq!(
            store
                .search(&scopes, "coffee", MAX_SEARCH_RESULTS)
                .await
                .unwrap()
                .len(),
            MAX_SEARCH_RESULTS
        );
        assert_eq!(
            store.search(&scopes, "coffee", 1_000).await.unwrap().len(),
            MAX_SEARCH_RESULTS
        );
    }
}

#[tokio::test]
async fn a_full_scope_refuses_one_more_memory() {
    let fx = memory();
    let store = fx.store();
    let w = scope("workspace:full");
    for i in 0..MAX_RECORDS_PER_SCOPE {
        store
            .save(
                None,
                &w,
                &id(&format!("m{i}")),
                "x",
                ChangedBy::Person,
                Expect::New,
            )
            .await
            .unwrap();
    }
    let err = store
        .save(
            None,
            &w,
            &id("one-more"),
            "x",
            ChangedBy::Person,
            Expect::New,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "memory_scope_full");
    // Editing one that exists still works at the bound.
    store.edit(&w, &id("m0"), "y", 1).await.unwrap();
}

#[tokio::test]
async fn search_ranks_whole_words_and_the_phrase_first() {
    let fx = memory();
    let store = fx.store();
    let g = scope("global");
    for (i, text) in [
        ("a", "The person prefers dark mode in every editor"),
        ("b", "Darkness falls early in winter"),
        ("c", "Uses a modem from 1998"),
        ("d", "Favourite colour: green"),
    ] {
        store
            .save(None, &g, &id(i), text, ChangedBy::Person, Expect::New)
            .await
            .unwrap();
    }
    let hits = store.search(&[g].into(), "Dark Mode", 10).await.unwrap();
    let order: Vec<&str> = hits.iter().map(|h| h.record.id.as_str()).collect();
    assert_eq!(order[0], "a");
    assert_eq!(
        order.len(),
        3,
        "the unrelated memory is not a hit: {order:?}"
    );
    assert!(!order.contains(&"d"));
}

// ---------------------------------------------------------------------------
// Bad stored bytes
// ---------------------------------------------------------------------------

#[tokio::test]
async fn bad_stored_bytes_are_a_typed_error_and_are_left_untouched() {
    for fx in both().await {
        let store = fx.store();
        let g = scope("global");
        let key = MemoryRecord::live_key(&g, &id("bad"));
        let put = |bytes: Vec<u8>| {
            let storage = fx.storage.clone();
            let key = key.clone();
            async move {
                storage
                    .commit(agent_kernel::host::Batch::new().put(Table::Meta, key, bytes))
                    .await
                    .unwrap()
            }
        };
        let (mut good, _) = store
            .save(
                None,
                &g,
                &id("ok"),
                "true text",
                ChangedBy::Person,
                Expect::New,
            )
            .await
            .unwrap();
        put(b"not json".to_vec()).await;
        assert!(matches!(
            store.list(&g).await.unwrap_err(),
            MemoryError::Storage(StorageError::Corrupt { .. })
        ));
        assert!(matches!(
            store.get(&g, &id("bad")).await.unwrap_err(),
            MemoryError::Storage(StorageError::Corrupt { .. })
        ));
        // Another layout version.
        put(br#"{"v": 99}"#.to_vec()).await;
        assert!(matches!(
            store.list(&g).await.unwrap_err(),
            MemoryError::Format { found: 99, .. }
        ));
        // A well-formed record whose text does not match its hash.
        good.id = id("bad");
        good.text = "tampered".into();
        put(serde_json::to_vec(&good).unwrap()).await;
        let err = store.get(&g, &id("bad")).await.unwrap_err();
        assert_eq!(err.code(), "memory_corrupt");
        // A record stored under another key than its own.
        good.text = "true text".into();
        good.id = id("ok");
        put(serde_json::to_vec(&good).unwrap()).await;
        assert_eq!(
            store.get(&g, &id("bad")).await.unwrap_err().code(),
            "memory_corrupt"
        );
        // Left untouched: the bytes are still there; a write over them is refused.
        assert!(fx.storage.get(Table::Meta, &key).await.unwrap().is_some());
        assert!(store.edit(&g, &id("bad"), "x", 1).await.is_err());
    }
}

// ---------------------------------------------------------------------------
// The tools, through the tools actor (S5.3, S6.1, S9.1)
// ---------------------------------------------------------------------------

/// Plays the supervisor around the tools actor: schemas, prepare, mint, dispatch.
struct Run {
    tools: ToolsHandle,
    authority: Authority,
    run: RunId,
    session: SessionId,
    config: RunToolConfig,
    clock: Arc<dyn Clock>,
}

impl Run {
    fn new(tools: &ToolsHandle, run: &str, mode: RunMode) -> Run {
        Run {
            tools: tools.clone(),
            authority: Authority::new(run, [7u8; 32]),
            run: RunId::new(run).unwrap(),
            session: session(),
            config: RunToolConfig {
                mode,
                ..RunToolConfig::default()
            },
            clock: agent_test_support::clock(),
        }
    }

    async fn schemas(&self) -> Vec<ModelToolSchema> {
        let (run, config) = (self.run.clone(), self.config.clone());
        self.tools
            .addr
            .ask(|reply| ToolsMsg::Schemas { run, config, reply })
            .await
            .unwrap()
    }

    async fn call(&self, call_id: &str, name: &str, arguments: Value) -> ToolResult {
        let call = ToolCall {
            call_id: CallId::new(call_id).unwrap(),
            name: name.to_owned(),
            arguments: arguments.to_string(),
        };
        let (run, session, config) = (self.run.clone(), self.session.clone(), self.config.clone());
        let prepared: PreparedCall = match self
            .tools
            .addr
            .ask(|reply| ToolsMsg::Prepare {
                run,
                session,
                call,
                attempt: 1,
                config,
                reply,
            })
            .await
            .unwrap()
        {
            Ok(p) => p,
            Err(e) => return e,
        };
        let d = &prepared.draft;
        let capability = self.authority.mint(Grant {
            tool: d.tool.clone(),
            fingerprint: d.fingerprint.clone(),
            origin: d.origin.clone(),
            effects: d.effects.clone(),
            scope: d.scope.clone(),
            uses: Uses::Once,
            expires_at_ms: self.clock.wall_ms() + 600_000,
        });
        let invocation = ToolInvocation {
            draft: prepared.draft.clone(),
            capability,
            verifier: self.authority.verifier(),
            progress: Default::default(),
        };
        self.tools
            .addr
            .ask(|reply| ToolsMsg::Dispatch { invocation, reply })
            .await
            .unwrap()
    }
}

fn ok(result: &ToolResult) -> &agent_kernel::protocol::ToolSuccess {
    match result {
        ToolResult::Success(s) => s,
        ToolResult::Error(e) => panic!("expected success, got {}: {}", e.code, e.message),
    }
}

fn code(result: &ToolResult) -> String {
    match result {
        ToolResult::Error(e) => e.code.clone(),
        ToolResult::Success(s) => panic!("expected an error, got {:?}", s.content),
    }
}

/// The memory tools registered the way a host does, for Agent runs only.
fn tools_with_memory(store: MemoryStore, grants: &RunGrants) -> ToolsHandle {
    let host = agent_test_support::memory_host(agent_test_support::clock(), 1);
    let mut registry = Registry::new();
    let deps = agent_memory::ToolDeps {
        store,
        access: Arc::new(grants.clone()),
    };
    for tool in agent_memory::builtin_tools(&host, deps).unwrap() {
        assert_eq!(tool.modes, TOOL_MODES);
        registry
            .register(ToolRegistration::builtin(tool.definition, tool.addr).in_modes(&tool.modes))
            .unwrap();
    }
    spawn_tools(host.executor, host.clock, registry, ToolsOptions::default())
}

fn grant(scopes: MemoryScopes) -> MemoryGrant {
    MemoryGrant {
        scopes,
        fence: None,
    }
}

#[tokio::test]
async fn a_deep_research_run_is_offered_no_memory_tools() {
    // S9.1: Deep Research shares the primitives but never Memory.
    let fx = memory();
    let grants = RunGrants::new();
    let tools = tools_with_memory(fx.store(), &grants);
    let names = |s: Vec<ModelToolSchema>| s.into_iter().map(|s| s.name).collect::<Vec<_>>();

    let agent = Run::new(&tools, "run-agent", RunMode::Agent);
    assert_eq!(
        names(agent.schemas().await),
        ["memory_forget", "memory_save", "memory_search"]
    );
    let research = Run::new(&tools, "run-research", RunMode::Research);
    assert!(names(research.schemas().await).is_empty());
    // Calling one by name anyway is refused before anything runs.
    let r = research
        .call("c1", "memory_search", json!({"query": "x"}))
        .await;
    assert!(matches!(r, ToolResult::Error(_)), "{r:?}");
    // And no grant can be given to a research (or chat) run.
    for mode in [RunMode::Research, RunMode::Chat] {
        let refused = grants.allow(
            session(),
            RunId::new("run-research").unwrap(),
            mode,
            grant(MemoryScopes::read_write([scope("global")])),
        );
        assert_eq!(refused, Err(GrantError::NotAgentMode { mode }));
    }
}

#[tokio::test]
async fn the_tools_check_the_grant_save_search_and_forget_with_receipts() {
    for fx in both().await {
        let store = fx.store();
        let grants = RunGrants::new();
        let tools = tools_with_memory(store.clone(), &grants);
        let run = Run::new(&tools, "run-1", RunMode::Agent);

        // No grant: refused before anything is read or written.
        let r = run
            .call("c0", "memory_search", json!({"query": "tea"}))
            .await;
        assert_eq!(code(&r), "memory_not_granted");

        let s = session();
        grants
            .allow(
                s.clone(),
                run.run.clone(),
                RunMode::Agent,
                grant(MemoryScopes {
                    read: [scope("global"), MemoryScope::session(&s)].into(),
                    write: [MemoryScope::session(&s)].into(),
                }),
            )
            .unwrap();
        store
            .save(
                None,
                &scope("global"),
                &id("drink"),
                "Drinks green tea",
                ChangedBy::Person,
                Expect::New,
            )
            .await
            .unwrap();
        store
            .save(
                None,
                &scope("workspace:hidden"),
                &id("x"),
                "tea in a hidden scope",
                ChangedBy::Person,
                Expect::New,
            )
            .await
            .unwrap();

        // A write outside the write set is a typed refusal; nothing is stored.
        let r = run
            .call(
                "c1",
                "memory_save",
                json!({"text": "Likes tea", "scope": "global"}),
            )
            .await;
        assert_eq!(code(&r), "memory_scope_denied");
        assert_eq!(store.list(&scope("global")).await.unwrap().len(), 1);

        // A save in the session scope: a receipt, no content in it.
        let r = run
            .call(
                "c2",
                "memory_save",
                json!({"text": "Wants tea answers short", "scope": "session"}),
            )
            .await;
        let saved = ok(&r);
        assert_eq!(saved.content["revision"], 1);
        assert_eq!(saved.content["scope"], "session:s1");
        let receipt = &saved.receipts[0];
        assert_eq!(receipt.effect, agent_capabilities::EffectClass::WriteLocal);
        assert!(
            !receipt.detail.to_string().contains("short"),
            "a receipt holds no text"
        );
        let new_id = saved.content["id"].as_str().unwrap().to_owned();
        let record = store
            .get(&scope("session:s1"), &id(&new_id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            record.saved_by,
            ChangedBy::Tool {
                run: run.run.clone(),
                call_id: CallId::new("c2").unwrap(),
                tool: "memory_save".into()
            }
        );

        // The same call again (a retry) is recognised, not a second memory.
        let r = run
            .call(
                "c2",
                "memory_save",
                json!({"text": "Wants tea answers short", "scope": "session"}),
            )
            .await;
        assert_eq!(ok(&r).content["replayed"], true);
        assert_eq!(store.list(&scope("session:s1")).await.unwrap().len(), 1);

        // Search reads only the readable scopes; tool-saved text stays data.
        let r = run
            .call("c3", "memory_search", json!({"query": "tea"}))
            .await;
        let found = ok(&r);
        // Untrusted content reaches the model fenced as data (S5.4).
        assert_eq!(found.trust, Trust::ExternalUntrusted);
        let fenced = found.content.as_str().expect("fenced as a string");
        assert!(fenced.contains(r#""count":2"#), "{fenced}");
        assert!(fenced.contains("Drinks green tea") && fenced.contains("Wants tea answers short"));
        assert!(!fenced.contains("hidden scope"));
        let r = run
            .call(
                "c4",
                "memory_search",
                json!({"query": "tea", "scopes": ["global"]}),
            )
            .await;
        assert_eq!(ok(&r).trust, Trust::User, "only what the person saved");
        assert_eq!(ok(&r).content["count"], 1);
        assert_eq!(ok(&r).content["results"][0]["text"], "Drinks green tea");
        let r = run
            .call(
                "c5",
                "memory_search",
                json!({"query": "tea", "scopes": ["workspace:hidden"]}),
            )
            .await;
        assert_eq!(code(&r), "memory_scope_denied");

        // An update with a stale revision fails and names the latest.
        let r = run
            .call(
                "c6",
                "memory_save",
                json!({"text": "Wants long answers", "scope": "session", "id": new_id, "expectedRevision": 5}),
            )
            .await;
        assert_eq!(code(&r), "stale_revision");
        let r = run
            .call(
                "c7",
                "memory_save",
                json!({"text": "Wants long answers", "scope": "session", "id": new_id, "expectedRevision": 1}),
            )
            .await;
        assert_eq!(ok(&r).content["revision"], 2);

        // Forget keeps the old revision so the person can restore it.
        let r = run
            .call(
                "c8",
                "memory_forget",
                json!({"scope": "session", "id": new_id, "expectedRevision": 2}),
            )
            .await;
        assert_eq!(ok(&r).receipts[0].detail["oldRevision"], 2);
        let r = run
            .call(
                "c8",
                "memory_forget",
                json!({"scope": "session", "id": new_id, "expectedRevision": 2}),
            )
            .await;
        assert_eq!(ok(&r).content["replayed"], true);
        let r = run
            .call(
                "c9",
                "memory_forget",
                json!({"scope": "global", "id": "drink"}),
            )
            .await;
        assert_eq!(code(&r), "memory_scope_denied");
        let (back, _) = store
            .restore(None, &scope("session:s1"), &id(&new_id), ChangedBy::Person)
            .await
            .unwrap();
        assert_eq!(
            (back.revision, back.text.as_str()),
            (3, "Wants long answers")
        );

        // Over-long text is refused by the schema before the tool runs.
        let r = run
            .call(
                "c10",
                "memory_save",
                json!({"text": "x".repeat(MAX_TEXT_BYTES + 1), "scope": "session"}),
            )
            .await;
        assert_eq!(code(&r), "invalid_arguments");

        // Result bounds: at the cap accepted, above it refused by the schema.
        let r = run
            .call(
                "c12",
                "memory_search",
                json!({"query": "tea", "limit": MAX_SEARCH_RESULTS}),
            )
            .await;
        assert!(matches!(r, ToolResult::Success(_)));
        let r = run
            .call(
                "c13",
                "memory_search",
                json!({"query": "tea", "limit": MAX_SEARCH_RESULTS + 1}),
            )
            .await;
        assert_eq!(code(&r), "invalid_arguments");
        // A revision without the id it belongs to is not guessed.
        let r = run
            .call(
                "c14",
                "memory_save",
                json!({"text": "x", "scope": "session", "expectedRevision": 1}),
            )
            .await;
        assert_eq!(code(&r), "invalid_arguments");

        // A revoked grant reads nothing more.
        assert!(grants.revoke(&run.run));
        let r = run
            .call("c11", "memory_search", json!({"query": "tea"}))
            .await;
        assert_eq!(code(&r), "memory_not_granted");
    }
}

#[tokio::test]
async fn a_grant_is_bound_to_its_session() {
    let grants = RunGrants::new();
    let run = RunId::new("r").unwrap();
    grants
        .allow(
            session(),
            run.clone(),
            RunMode::Agent,
            grant(MemoryScopes::none()),
        )
        .unwrap();
    use agent_memory::MemoryAccess;
    assert!(grants.grant(&session(), &run).await.is_some());
    assert!(
        grants
            .grant(&SessionId::new("other").unwrap(), &run)
            .await
            .is_none()
    );
}
