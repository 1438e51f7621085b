//! Knowledge reads (issue 20 item 5; SPEC S5.1 knowledge reads, S5.4
//! `external_untrusted` results with provenance, S10.1 knowledge
//! allowlists): relevance on a small fixed corpus, provenance that resolves
//! to the exact stored text, bounds, a restart on SQLite, bad stored bytes,
//! and `knowledge_search` through the tools actor.

#![cfg(not(target_arch = "wasm32"))]

use std::sync::Arc;

use agent_capabilities::{Authority, Grant, Trust, Uses};
use agent_kernel::host::{Batch, Clock, ManualClock, Storage, StorageError, Table};
use agent_kernel::memory::MemoryStorage;
use agent_kernel::protocol::{
    PreparedCall, RunToolConfig, ToolCall, ToolInvocation, ToolResult, ToolsMsg,
};
use agent_kernel::run::RunMode;
use agent_kernel::{CallId, RunId, SessionId};
use agent_knowledge::index::{MAX_PASSAGE_BYTES, MAX_PASSAGES, MAX_QUERY_BYTES};
use agent_knowledge::store::MAX_DOCUMENT_BYTES;
use agent_knowledge::{
    KnowledgeAllowlist, KnowledgeBases, KnowledgeError, KnowledgeStore, NewDocument, RunAllowlists,
    SearchLimits, SourceRef, TOOL_MODES,
};
use agent_tools::registry::{Registry, ToolRegistration};
use agent_tools::{ToolsHandle, ToolsOptions, spawn_tools};
use serde_json::{Value, json};

/// Ten short documents, each about one thing.
const CORPUS: &[(&str, &str, &str)] = &[
    (
        "leave",
        "Leave policy",
        "Employees receive twenty-five days of paid holiday per year. Unused holiday days can be carried over until March. Sick leave is separate and needs a doctor's note after three days.",
    ),
    (
        "expenses",
        "Expense claims",
        "Submit expense claims within thirty days with a receipt. Travel, hotel and meal expenses are reimbursed; alcohol is not. Claims over 500 euros need a manager's approval.",
    ),
    (
        "security",
        "Password rules",
        "Passwords must be at least sixteen characters. Use the password manager; never reuse a password. Two-factor authentication is required for email and the VPN.",
    ),
    (
        "onboarding",
        "First week",
        "In the first week a new starter meets their buddy, sets up the laptop, and reads the handbook. The buddy answers questions about tools and people.",
    ),
    (
        "coffee",
        "Office coffee",
        "The espresso machine on the third floor is cleaned every Friday. Oat milk is in the left fridge. Please refill the coffee beans when the container is empty.",
    ),
    (
        "deploy",
        "Deploying the service",
        "Deploys run from the main branch through the pipeline. A deploy needs green tests and one approving review. Roll back with the previous release tag.",
    ),
    (
        "incident",
        "Incident response",
        "When production is down, page the on-call engineer, open an incident channel, and post status updates every thirty minutes until the service is restored.",
    ),
    (
        "parking",
        "Parking",
        "The garage has forty spaces; electric cars charge on level minus one. Bicycles go in the courtyard racks, not in the corridors.",
    ),
    (
        "remote",
        "Remote work",
        "Staff may work remotely up to three days a week. Core hours are ten to four. The company pays for a desk chair and a monitor for the home office.",
    ),
    (
        "payroll",
        "Payroll",
        "Salaries are paid on the twenty-fifth of each month. Payslips are in the payroll portal. Tax forms arrive in January.",
    ),
];

fn corpus() -> Vec<NewDocument> {
    CORPUS
        .iter()
        .map(|(id, title, text)| NewDocument {
            id: (*id).into(),
            title: (*title).into(),
            source: SourceRef::Attachment {
                name: format!("{id}.md"),
            },
            text: (*text).into(),
        })
        .collect()
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::new(1_767_225_600_000))
}

async fn handbook(storage: Arc<dyn Storage>) -> KnowledgeBases {
    let bases = KnowledgeBases::open(KnowledgeStore::new(storage, clock()))
        .await
        .unwrap();
    bases.create_base("handbook").await.unwrap();
    bases.add_documents("handbook", corpus()).await.unwrap();
    bases
}

fn names(bases: &[&str]) -> Vec<String> {
    bases.iter().map(|b| (*b).to_owned()).collect()
}

fn top(bases: &KnowledgeBases, query: &str) -> Vec<String> {
    bases
        .search(&names(&["handbook"]), query, SearchLimits::default())
        .unwrap()
        .into_iter()
        .map(|p| p.document)
        .collect()
}

#[tokio::test]
async fn relevance_on_a_fixed_corpus_puts_the_expected_document_first() {
    let bases = handbook(Arc::new(MemoryStorage::new())).await;
    for (query, expected) in [
        ("how many paid holidays do I get", "leave"),
        ("reimburse hotel receipt", "expenses"),
        ("two-factor authentication password", "security"),
        ("new starter buddy", "onboarding"),
        ("espresso oat milk", "coffee"),
        ("roll back a release", "deploy"),
        ("production down on-call", "incident"),
        ("where do bicycles go", "parking"),
        ("work from home office chair", "remote"),
        ("when are salaries paid", "payroll"),
    ] {
        let got = top(&bases, query);
        assert_eq!(
            got.first().map(String::as_str),
            Some(expected),
            "{query:?} gave {got:?}"
        );
    }
    // Nothing relevant: no passages, not an error.
    assert!(top(&bases, "quantum chromodynamics").is_empty());
}

#[tokio::test]
async fn provenance_resolves_to_the_exact_stored_text() {
    for storage in storages().await {
        let bases = handbook(storage.0.clone()).await;
        let long =
            "Alpha section about rivers. ".repeat(200) + "The delta of the river floods in spring.";
        bases
            .add_documents(
                "handbook",
                vec![NewDocument {
                    id: "rivers".into(),
                    title: "Rivers".into(),
                    source: SourceRef::WorkspaceFile {
                        session: "s1".into(),
                        path: "notes/rivers.md".into(),
                        revision: 3,
                        content_hash: None,
                    },
                    text: long.clone(),
                }],
            )
            .await
            .unwrap();
        let hits = bases
            .search(
                &names(&["handbook"]),
                "delta floods",
                SearchLimits {
                    max_passages: 3,
                    max_bytes: 100,
                },
            )
            .unwrap();
        let first = &hits[0];
        assert_eq!(first.document, "rivers");
        assert!(first.text.len() <= 100 && first.truncated);
        let stored = bases.resolve(first).await.unwrap();
        assert_eq!(stored.len() as u64, first.len);
        assert_eq!(
            agent_capabilities::sha256_hex(stored.as_bytes()),
            first.text_hash
        );
        assert_eq!(
            &long[first.offset as usize..(first.offset + first.len) as usize],
            stored
        );
        assert!(stored.starts_with(&first.text));
        assert!(stored.contains("delta"));
        // A forged offset does not resolve.
        let mut forged = first.clone();
        forged.offset += 1;
        assert!(matches!(
            bases.resolve(&forged).await,
            Err(KnowledgeError::MissingText { .. })
        ));
    }
}

/// The kernel's memory storage and SQLite on disk (with its directory).
async fn storages() -> Vec<(Arc<dyn Storage>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = agent_host_native::sqlite::SqliteStorage::open(dir.path().join("db.sqlite"))
        .await
        .unwrap();
    vec![
        (Arc::new(MemoryStorage::new()), None),
        (Arc::new(sqlite), Some(dir)),
    ]
}

#[tokio::test]
async fn bases_survive_a_restart_on_sqlite_and_are_reindexed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    {
        let storage = agent_host_native::sqlite::SqliteStorage::open(&path)
            .await
            .unwrap();
        let bases = handbook(Arc::new(storage)).await;
        bases.remove_document("handbook", "coffee").await.unwrap();
    }
    let storage = agent_host_native::sqlite::SqliteStorage::open(&path)
        .await
        .unwrap();
    let bases = KnowledgeBases::open(KnowledgeStore::new(Arc::new(storage), clock()))
        .await
        .unwrap();
    assert_eq!(bases.names(), ["handbook"]);
    assert_eq!(top(&bases, "when are salaries paid")[0], "payroll");
    assert!(
        top(&bases, "espresso oat milk").is_empty(),
        "a removed document stays removed"
    );
    let base = bases.store().base("handbook").await.unwrap();
    assert_eq!(base.documents.len(), 9);
}

#[tokio::test]
async fn bounds_hold_at_below_and_above() {
    let bases = handbook(Arc::new(MemoryStorage::new())).await;
    let hb = names(&["handbook"]);
    // Query length.
    assert!(
        bases
            .search(&hb, &"a".repeat(MAX_QUERY_BYTES), SearchLimits::default())
            .is_ok()
    );
    assert!(matches!(
        bases.search(
            &hb,
            &"a".repeat(MAX_QUERY_BYTES + 1),
            SearchLimits::default()
        ),
        Err(KnowledgeError::BadQuery { .. })
    ));
    assert!(matches!(
        bases.search(&hb, "   ", SearchLimits::default()),
        Err(KnowledgeError::BadQuery { .. })
    ));
    // Passage count: capped at MAX_PASSAGES whatever is asked.
    let many = SearchLimits {
        max_passages: 1000,
        max_bytes: 10_000_000,
    };
    let hits = bases.search(&hb, "the a of days and", many).unwrap();
    assert!(hits.len() <= MAX_PASSAGES && !hits.is_empty());
    assert!(hits.iter().all(|p| p.text.len() <= MAX_PASSAGE_BYTES));
    let one = SearchLimits {
        max_passages: 1,
        max_bytes: 10,
    };
    let hits = bases.search(&hb, "holiday", one).unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].text.len() <= 10 && hits[0].truncated);
    // Document size: at the limit accepted, above refused, empty refused.
    bases.create_base("big").await.unwrap();
    let doc = |id: &str, text: String| NewDocument {
        id: id.into(),
        title: id.into(),
        source: SourceRef::Other {
            label: "test".into(),
        },
        text,
    };
    bases
        .add_documents(
            "big",
            vec![doc("at", "word ".repeat(MAX_DOCUMENT_BYTES / 5))],
        )
        .await
        .unwrap();
    assert!(matches!(
        bases
            .add_documents(
                "big",
                vec![doc("above", "x".repeat(MAX_DOCUMENT_BYTES + 1))]
            )
            .await,
        Err(KnowledgeError::DocumentTooLarge { .. })
    ));
    assert!(matches!(
        bases
            .add_documents("big", vec![doc("empty", " ".into())])
            .await,
        Err(KnowledgeError::EmptyDocument { .. })
    ));
    // A duplicate id is refused and nothing of the batch is kept.
    assert!(matches!(
        bases
            .add_documents(
                "big",
                vec![doc("new", "fresh text".into()), doc("at", "again".into())]
            )
            .await,
        Err(KnowledgeError::DocumentExists { .. })
    ));
    assert_eq!(bases.store().base("big").await.unwrap().documents, ["at"]);
    // Names.
    assert!(matches!(
        bases.create_base("Has Space").await,
        Err(KnowledgeError::BadName { .. })
    ));
    assert!(matches!(
        bases.create_base("handbook").await,
        Err(KnowledgeError::BaseExists { .. })
    ));
    assert!(matches!(
        bases.search(&names(&["nope"]), "x", SearchLimits::default()),
        Err(KnowledgeError::NoBase { .. })
    ));
}

#[tokio::test]
async fn bad_stored_bytes_are_a_typed_error() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    handbook(storage.clone()).await;
    let put = |key: &str, bytes: &[u8]| {
        storage.commit(Batch::new().put(Table::Meta, key, bytes.to_vec()))
    };
    put("kb-doc/handbook/leave", b"{not json").await.unwrap();
    let err = KnowledgeBases::open(KnowledgeStore::new(storage.clone(), clock()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, KnowledgeError::Storage(StorageError::Corrupt { .. })),
        "{err:?}"
    );
    assert_eq!(err.code(), "knowledge_corrupt");
    put("kb/handbook", br#"{"v": 7}"#).await.unwrap();
    let err = KnowledgeBases::open(KnowledgeStore::new(storage.clone(), clock()))
        .await
        .unwrap_err();
    assert!(matches!(err, KnowledgeError::Format { found: 7, .. }));
}

// ---------------------------------------------------------------------------
// knowledge_search through the tools actor
// ---------------------------------------------------------------------------

async fn call(tools: &ToolsHandle, run: &str, call_id: &str, arguments: Value) -> ToolResult {
    let authority = Authority::new(run, [9u8; 32]);
    let call = ToolCall {
        call_id: CallId::new(call_id).unwrap(),
        name: "knowledge_search".into(),
        arguments: arguments.to_string(),
    };
    let (run, session) = (RunId::new(run).unwrap(), SessionId::new("s1").unwrap());
    let config = RunToolConfig {
        mode: RunMode::Agent,
        ..RunToolConfig::default()
    };
    let prepared: PreparedCall = match tools
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
    let capability = authority.mint(Grant {
        tool: d.tool.clone(),
        fingerprint: d.fingerprint.clone(),
        origin: d.origin.clone(),
        effects: d.effects.clone(),
        scope: d.scope.clone(),
        uses: Uses::Once,
        expires_at_ms: u64::MAX / 2,
    });
    let invocation = ToolInvocation {
        draft: prepared.draft.clone(),
        capability,
        verifier: authority.verifier(),
        progress: Default::default(),
    };
    tools
        .addr
        .ask(|reply| ToolsMsg::Dispatch { invocation, reply })
        .await
        .unwrap()
}

#[tokio::test]
async fn knowledge_search_checks_the_allowlist_and_answers_untrusted_passages() {
    let bases = handbook(Arc::new(MemoryStorage::new())).await;
    bases.create_base("secret").await.unwrap();
    let allow = RunAllowlists::new();
    let host = agent_test_support::memory_host(agent_test_support::clock(), 1);
    let deps = agent_knowledge::ToolDeps {
        bases: bases.clone(),
        access: Arc::new(allow.clone()),
    };
    let mut registry = Registry::new();
    for tool in agent_knowledge::builtin_tools(&host, deps).unwrap() {
        assert_eq!(tool.modes, TOOL_MODES);
        registry
            .register(ToolRegistration::builtin(tool.definition, tool.addr).in_modes(&tool.modes))
            .unwrap();
    }
    let tools = spawn_tools(host.executor, host.clock, registry, ToolsOptions::default());

    let args = json!({"query": "paid holiday", "bases": ["handbook"]});
    match call(&tools, "r1", "c1", args.clone()).await {
        ToolResult::Error(e) => assert_eq!(e.code, "knowledge_not_granted"),
        other => panic!("{other:?}"),
    }
    allow.allow(
        SessionId::new("s1").unwrap(),
        RunId::new("r1").unwrap(),
        KnowledgeAllowlist::of(["handbook"]),
    );
    let ok = match call(&tools, "r1", "c2", args).await {
        ToolResult::Success(s) => s,
        ToolResult::Error(e) => panic!("{}: {}", e.code, e.message),
    };
    assert_eq!(ok.trust, Trust::ExternalUntrusted);
    let fenced = ok
        .content
        .as_str()
        .expect("untrusted content is fenced as data");
    assert!(fenced.contains(r#""document":"leave""#), "{fenced}");
    assert!(fenced.contains(r#""textHash":""#) && fenced.contains(r#""offset":0"#));
    // Another base, alone or beside an allowed one, is a typed refusal.
    for bases in [json!(["secret"]), json!(["handbook", "secret"])] {
        match call(&tools, "r1", "c3", json!({"query": "x", "bases": bases})).await {
            ToolResult::Error(e) => {
                assert_eq!(e.code, "knowledge_base_not_allowed");
                assert!(e.message.contains("secret"));
            }
            other => panic!("{other:?}"),
        }
    }
    // Schema bounds: too many passages asked is refused before the tool runs.
    match call(
        &tools,
        "r1",
        "c4",
        json!({"query": "x", "bases": ["handbook"], "limit": MAX_PASSAGES + 1}),
    )
    .await
    {
        ToolResult::Error(e) => assert_eq!(e.code, "invalid_arguments"),
        other => panic!("{other:?}"),
    }
}

/// A file's name becomes a valid document id (issue 37 part 5): lowercase,
/// other characters `-`, the end kept at the 64-character limit.
#[test]
fn file_names_become_valid_document_ids() {
    use agent_knowledge::document_id_for;
    use agent_knowledge::store::{MAX_NAME_LEN, check_name};
    assert_eq!(document_id_for("docs/Manual v2.PDF"), "docs-manual-v2.pdf");
    assert_eq!(document_id_for("日本"), "document");
    let at = "a".repeat(MAX_NAME_LEN);
    assert_eq!(document_id_for(&at), at);
    let over = format!("x{}.pdf", "b".repeat(MAX_NAME_LEN));
    let id = document_id_for(&over);
    assert_eq!(id.len(), MAX_NAME_LEN);
    assert!(id.ends_with(".pdf"));
    for name in ["docs/Manual v2.PDF", "日本", &at, &over, "/-x"] {
        check_name("document id", &document_id_for(name)).unwrap();
    }
}
