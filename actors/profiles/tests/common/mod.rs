//! Store scenarios (S10.3) written once and run on every backend: memory and
//! SQLite on disk natively (`tests/store.rs`), IndexedDB in headless
//! Chromium (`tests/wasm.rs`). Each takes a fresh storage.
// Single-threaded wasm32: host objects are neither `Send` nor `Sync` by design.
#![allow(clippy::arc_with_non_send_sync, dead_code)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agent_capabilities::ApprovalMode;
use agent_kernel::budget::Budget;
use agent_kernel::host::{Clock, ManualClock, Storage, StorageError, Table};
use agent_kernel::{OwnerId, SessionId};
use agent_profiles::{
    AgentProfileV2, Layer, MemoryScope, MemoryScopes, ProfileError, ProfileId, ProfileMode,
    ProfileRef, ProfileStore, RevisionCause, export_profile,
};

pub const T0: u64 = 1_767_225_600_000;

pub fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

pub fn id(s: &str) -> ProfileId {
    ProfileId::new(s).unwrap()
}

pub fn store(storage: &Arc<dyn Storage>, clock: &Arc<ManualClock>) -> ProfileStore {
    ProfileStore::new(storage.clone(), clock.clone() as Arc<dyn Clock>)
}

pub fn sample(name: &str) -> AgentProfileV2 {
    let mut p = AgentProfileV2::new(id(name), format!("Profile {name}"));
    p.model.provider = Some("openai".into());
    p.model.model = "gpt-4o".into();
    p.tools = Some(set(&["fetch_url", "read_file", "write_file"]));
    p.plugins = Some(set(&["weather"]));
    p.knowledge = Some(set(&["handbook"]));
    p.memory = MemoryScopes {
        read: [MemoryScope::Global, MemoryScope::Profile].into(),
        write: [MemoryScope::Profile].into(),
    };
    p.system_prompt_addition = Some("Answer briefly.".into());
    p
}

/// S10.3: every save is a revision; diff field by field; a stale save is
/// refused; rollback is a new revision equal to an old one.
pub async fn revisions_diff_rollback(storage: Arc<dyn Storage>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = store(&storage, &clock);
    let v1 = sample("writer");
    let r1 = store.create(&v1).await.unwrap();
    assert_eq!((r1.revision, r1.saved_at_ms), (1, T0));
    assert_eq!(r1.cause, RevisionCause::Saved);
    assert!(matches!(
        store.create(&v1).await,
        Err(ProfileError::Exists { .. })
    ));

    clock.advance(Duration::from_secs(60));
    let mut v2 = v1.clone();
    v2.model.model = "gpt-4.1".into();
    v2.budget = Budget::preset(agent_kernel::budget::BudgetPreset::Light);
    v2.tools = Some(set(&["fetch_url"]));
    let r2 = store.save(&v2, 1).await.unwrap();
    assert_eq!((r2.revision, r2.saved_at_ms), (2, T0 + 60_000));
    assert_ne!(r1.hash, r2.hash);

    // A save based on revision 1 after revision 2: refused, nothing written.
    let mut stale = v1.clone();
    stale.name = "stale edit".into();
    assert_eq!(
        store.save(&stale, 1).await,
        Err(ProfileError::Conflict {
            id: "writer".into(),
            expected: 1,
            latest: 2
        })
    );
    assert_eq!(store.head(&id("writer")).await.unwrap().latest, 2);

    let changes = store.diff(&id("writer"), 1, 2).await.unwrap();
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "budget.max_duration_ms",
            "budget.max_tool_calls",
            "budget.max_tool_rounds",
            "model.model",
            "tools"
        ]
    );
    let model = &changes[3];
    assert_eq!(model.before, serde_json::json!("gpt-4o"));
    assert_eq!(model.after, serde_json::json!("gpt-4.1"));
    assert_eq!(changes[0].before, serde_json::Value::Null);
    assert_eq!(changes[0].after, serde_json::json!(600_000));
    assert!(store.diff(&id("writer"), 2, 2).await.unwrap().is_empty());

    clock.advance(Duration::from_secs(60));
    let r3 = store.rollback(&id("writer"), 1).await.unwrap();
    assert_eq!(r3.revision, 3);
    assert_eq!(r3.cause, RevisionCause::RolledBack { to: 1 });
    assert_eq!(r3.profile, v1);
    assert_eq!(r3.hash, r1.hash);
    assert!(store.diff(&id("writer"), 1, 3).await.unwrap().is_empty());

    // A fresh store over the same storage (a reload) reads the same.
    let reloaded = ProfileStore::new(storage.clone(), clock.clone() as Arc<dyn Clock>);
    assert_eq!(reloaded.get(&id("writer")).await.unwrap(), r3);
    assert_eq!(reloaded.get_revision(&id("writer"), 2).await.unwrap(), r2);
    let all = reloaded.revisions(&id("writer")).await.unwrap();
    assert_eq!(
        all.iter().map(|r| r.revision).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(
        reloaded.get_revision(&id("writer"), 4).await,
        Err(ProfileError::RevisionNotFound {
            id: "writer".into(),
            revision: 4,
            latest: 3
        })
    );
    assert!(matches!(
        reloaded.get_revision(&id("writer"), 0).await,
        Err(ProfileError::RevisionNotFound { .. })
    ));
    assert!(matches!(
        reloaded.get(&id("nobody")).await,
        Err(ProfileError::NotFound { .. })
    ));
    // An invalid profile is never stored.
    let mut bad = v1.clone();
    bad.budget.max_tool_rounds = 0;
    assert!(matches!(
        reloaded.save(&bad, 3).await,
        Err(ProfileError::Invalid {
            field: "budget.max_tool_rounds",
            ..
        })
    ));
    assert_eq!(reloaded.head(&id("writer")).await.unwrap().latest, 3);
}

/// S10.3: fork metadata (source id, revision, hash); the source is unchanged.
pub async fn fork_records_its_origin(storage: Arc<dyn Storage>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = store(&storage, &clock);
    let source = sample("base");
    store.create(&source).await.unwrap();
    let mut edited = source.clone();
    edited.approval = ApprovalMode::Strict;
    let r2 = store.save(&edited, 1).await.unwrap();

    let fork = store
        .fork(&id("base"), id("base-copy"), "My copy")
        .await
        .unwrap();
    assert_eq!(fork.revision, 1);
    assert_eq!(fork.profile.name, "My copy");
    assert_eq!(fork.profile.id, id("base-copy"));
    assert_eq!(fork.profile.approval, ApprovalMode::Strict);
    let head = store.head(&id("base-copy")).await.unwrap();
    let origin = head.forked_from.expect("fork metadata");
    assert_eq!(
        (origin.id.clone(), origin.revision, origin.hash.clone()),
        (id("base"), 2, r2.hash.clone())
    );
    assert!(matches!(fork.cause, RevisionCause::Forked { from } if from == origin));
    // The diff between source and fork is the id and the name.
    let changes = agent_profiles::diff(&r2.profile, &fork.profile);
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["id", "name"]);
    assert_eq!(store.get(&id("base")).await.unwrap(), r2);
    assert!(matches!(
        store.fork(&id("base"), id("base-copy"), "again").await,
        Err(ProfileError::Exists { .. })
    ));
    assert!(matches!(
        store.fork(&id("base"), id("x"), "").await,
        Err(ProfileError::Invalid { field: "name", .. })
    ));
}

/// A marker that no legitimate export byte sequence contains.
pub const MARKER: &str = "SECRET-MARKER-7f3a9c";

/// S10.3: a shareable export holds no credential, secret value, handle
/// value or run history: a marker in every secret field (and in the run
/// history) appears nowhere in its bytes. A round trip through export and
/// import is equal except for what export excludes.
pub async fn export_excludes_secrets_and_round_trips(storage: Arc<dyn Storage>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = store(&storage, &clock);
    let mut p = sample("shared");
    p.credentials.handles.insert(
        format!("provider_api_key-{MARKER}"),
        format!("handle-{MARKER}"),
    );
    p.credentials
        .handles
        .insert("plugin:weather".into(), format!("{MARKER}-weather-key"));
    p.validate().unwrap();
    let r1 = store.create(&p).await.unwrap();
    store
        .record_run(
            &ProfileRef {
                id: id("shared"),
                revision: 1,
            },
            &format!("run-{MARKER}"),
        )
        .await
        .unwrap();
    assert_eq!(store.runs(&id("shared")).await.unwrap().len(), 1);
    // The credentials are stored locally (handle names, never keys).
    assert_eq!(store.get(&id("shared")).await.unwrap(), r1);

    let bytes = store.export(&id("shared")).await.unwrap();
    assert!(
        !bytes.windows(MARKER.len()).any(|w| w == MARKER.as_bytes()),
        "the export leaks a marked secret: {}",
        String::from_utf8_lossy(&bytes)
    );
    for word in ["credentials", "handles", "run-", "revision", "saved_at"] {
        assert!(
            !bytes.windows(word.len()).any(|w| w == word.as_bytes()),
            "the export holds {word:?}"
        );
    }
    // Canonical: the same profile exports to the same bytes.
    assert_eq!(bytes, export_profile(&p).unwrap());

    // Import on a host without limits: equal but for the credentials.
    let imported = store
        .import(&bytes, &Layer::default(), Some(id("shared-2")))
        .await
        .unwrap();
    assert!(imported.refused.is_empty());
    assert_eq!(imported.revision.cause, RevisionCause::Imported);
    let mut expected = p.clone();
    expected.id = id("shared-2");
    expected.credentials = Default::default();
    assert_eq!(imported.revision.profile, expected);
    assert_eq!(
        store.export(&id("shared-2")).await.unwrap(),
        export_profile(&expected).unwrap()
    );
    let mut without = p.clone();
    without.credentials = Default::default();
    assert_eq!(agent_profiles::parse_export(&bytes).unwrap(), without);
    // The same id again: refused, nothing overwritten.
    assert!(matches!(
        store.import(&bytes, &Layer::default(), None).await,
        Err(ProfileError::Exists { .. })
    ));
    assert_eq!(store.get(&id("shared")).await.unwrap(), r1);
}

/// S10.3: import validates and never grants more than the host allows.
pub async fn import_narrows_to_the_host(storage: Arc<dyn Storage>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = store(&storage, &clock);
    let mut p = sample("wide");
    p.search.web_search = true;
    p.mcp_servers = None;
    p.budget = Budget::preset(agent_kernel::budget::BudgetPreset::Extended);
    let bytes = export_profile(&p).unwrap();
    let ceiling = Layer {
        tools: Some(set(&["fetch_url", "read_file"])),
        plugins: Some(BTreeSet::new()),
        mcp_servers: Some(set(&["docs"])),
        approval: Some(ApprovalMode::Strict),
        web_search: Some(false),
        budget: Some(Budget::fallback()),
        memory: Some(MemoryScopes {
            read: [MemoryScope::Profile].into(),
            write: BTreeSet::new(),
        }),
        ..Layer::default()
    };
    let imported = store.import(&bytes, &ceiling, None).await.unwrap();
    let got = &imported.revision.profile;
    assert_eq!(got.tools, Some(set(&["fetch_url", "read_file"])));
    assert_eq!(got.plugins, Some(BTreeSet::new()));
    assert_eq!(got.mcp_servers, Some(set(&["docs"])));
    assert_eq!(got.approval, ApprovalMode::Strict);
    assert!(!got.search.web_search);
    assert_eq!(got.budget.max_tool_rounds, 20);
    assert_eq!(got.budget.max_tool_calls, 100);
    assert_eq!(got.memory.read, [MemoryScope::Profile].into());
    assert!(got.memory.write.is_empty());
    // Settings are the profile's own.
    assert_eq!(got.model, p.model);
    let fields: BTreeSet<&str> = imported.refused.iter().map(|r| r.field.as_str()).collect();
    for f in [
        "tools",
        "plugins",
        "approval",
        "search.web_search",
        "budget.max_tool_rounds",
        "budget.max_tool_calls",
        "memory.read",
        "memory.write",
    ] {
        assert!(fields.contains(f), "{f} not reported in {fields:?}");
    }

    // A document with a credentials section, an unknown field, a bad value
    // or too many bytes: typed refusals, nothing stored.
    let mut doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    doc["profile"]["id"] = "other".into();
    let mut with_creds = doc.clone();
    with_creds["profile"]["credentials"] = serde_json::json!({"handles": {"k": "v"}});
    assert!(matches!(
        store
            .import(
                &serde_json::to_vec(&with_creds).unwrap(),
                &Layer::default(),
                None
            )
            .await,
        Err(ProfileError::Import { .. })
    ));
    let mut bad_budget = doc.clone();
    bad_budget["profile"]["budget"]["max_tool_calls"] = 0.into();
    assert!(matches!(
        store
            .import(
                &serde_json::to_vec(&bad_budget).unwrap(),
                &Layer::default(),
                None
            )
            .await,
        Err(ProfileError::Invalid {
            field: "budget.max_tool_calls",
            ..
        })
    ));
    let huge = vec![b' '; agent_profiles::export::MAX_EXPORT_BYTES + 1];
    assert!(matches!(
        store.import(&huge, &Layer::default(), None).await,
        Err(ProfileError::TooLarge { .. })
    ));
    assert!(matches!(
        store.import(b"{\"format\":", &Layer::default(), None).await,
        Err(ProfileError::Import { .. })
    ));
    assert!(matches!(
        store.get(&id("other")).await,
        Err(ProfileError::NotFound { .. })
    ));
}

pub struct LegacyCase {
    pub id: &'static str,
    pub bytes: &'static str,
    pub name: &'static str,
    pub provider: Option<&'static str>,
    pub model: &'static str,
    pub prompt: Option<&'static str>,
}

pub fn legacy_cases() -> Vec<LegacyCase> {
    vec![
        LegacyCase {
            id: "translator",
            bytes: include_str!("../fixtures/legacy_snake_2023.json"),
            name: "Translator",
            provider: None,
            model: "gpt-4o-mini",
            prompt: Some("You translate the user's text into French.\nKeep the tone."),
        },
        LegacyCase {
            id: "plain",
            bytes: include_str!("../fixtures/legacy_snake_no_prompt.json"),
            name: "Plain helper",
            provider: None,
            model: "default",
            prompt: None,
        },
        LegacyCase {
            id: "reviewer",
            bytes: include_str!("../fixtures/legacy_camel_2024.json"),
            name: "Code reviewer",
            provider: Some("anthropic"),
            model: "claude-sonnet",
            prompt: Some("Review the diff the user pastes.\r\nBe brief."),
        },
        LegacyCase {
            id: "poet",
            bytes: include_str!("../fixtures/legacy_camel_model_string.json"),
            name: "Poet",
            provider: None,
            model: "llama3:8b",
            prompt: Some("Answer in verse."),
        },
        LegacyCase {
            id: "blank",
            bytes: include_str!("../fixtures/legacy_blank_name.json"),
            name: "Assistant blank",
            provider: None,
            model: "mistral-small",
            prompt: None,
        },
        LegacyCase {
            id: "long",
            bytes: include_str!("../fixtures/legacy_long_name.json"),
            // The first 100 characters of the old name.
            name: "A very long assistant name that somebody typed into the old application without any limit at all, re",
            provider: None,
            model: "gpt-4",
            prompt: Some("Be helpful."),
        },
    ]
}

pub const BAD_LEGACY: [(&str, &str); 2] = [
    (
        "bad-array",
        include_str!("../fixtures/legacy_bad_not_object.json"),
    ),
    (
        "bad-model",
        include_str!("../fixtures/legacy_bad_model_type.json"),
    ),
];

/// S10.3: legacy assistants migrate lazily, on first read, to chat-only
/// profiles; every fixture; bad ones are typed errors that leave them and
/// every other record untouched.
pub async fn legacy_assistants_migrate_lazily(storage: Arc<dyn Storage>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = store(&storage, &clock);
    let mut batch = agent_kernel::host::Batch::new();
    for case in legacy_cases() {
        batch = batch.put(
            Table::Meta,
            format!("assistant/{}", case.id),
            case.bytes.as_bytes().to_vec(),
        );
    }
    for (key, bytes) in BAD_LEGACY {
        batch = batch.put(
            Table::Meta,
            format!("assistant/{key}"),
            bytes.as_bytes().to_vec(),
        );
    }
    storage.commit(batch).await.unwrap();
    // Nothing is migrated before it is read.
    assert!(
        storage
            .scan_prefix(Table::Meta, "profile-head/")
            .await
            .unwrap()
            .is_empty()
    );

    for case in legacy_cases() {
        let r = store.get(&id(case.id)).await.unwrap();
        let p = &r.profile;
        assert_eq!(r.revision, 1, "{}", case.id);
        assert!(
            matches!(&r.cause, RevisionCause::Migrated { legacy_hash }
                if *legacy_hash == agent_capabilities::sha256_hex(case.bytes.as_bytes())),
            "{}",
            case.id
        );
        assert_eq!(p.name, case.name, "{}", case.id);
        assert_eq!(p.model.provider.as_deref(), case.provider, "{}", case.id);
        assert_eq!(p.model.model, case.model, "{}", case.id);
        assert_eq!(
            p.system_prompt_addition.as_deref(),
            case.prompt,
            "{}",
            case.id
        );
        // Chat-only: mode chat, no tools, no plugins, no web search, no Memory.
        assert_eq!(p.mode, ProfileMode::Chat, "{}", case.id);
        assert_eq!(p.tools, Some(BTreeSet::new()), "{}", case.id);
        assert_eq!(p.plugins, Some(BTreeSet::new()), "{}", case.id);
        assert_eq!(p.mcp_servers, Some(BTreeSet::new()), "{}", case.id);
        assert!(!p.search.web_search, "{}", case.id);
        assert!(p.memory.read.is_empty() && p.memory.write.is_empty());
        p.validate().unwrap();
        // The second read finds the profile: no second migration.
        assert_eq!(store.get(&id(case.id)).await.unwrap(), r);
        // The legacy record is kept as it was.
        assert_eq!(
            storage
                .get(Table::Meta, &format!("assistant/{}", case.id))
                .await
                .unwrap()
                .as_deref(),
            Some(case.bytes.as_bytes())
        );
    }
    for (key, bytes) in BAD_LEGACY {
        assert!(
            matches!(store.get(&id(key)).await, Err(ProfileError::Legacy { .. })),
            "{key}"
        );
        assert_eq!(
            storage
                .get(Table::Meta, &format!("assistant/{key}"))
                .await
                .unwrap()
                .as_deref(),
            Some(bytes.as_bytes())
        );
    }
    // Edits after migration are ordinary revisions.
    let mut poet = store.get(&id("poet")).await.unwrap().profile;
    poet.name = "Poet (edited)".into();
    assert_eq!(store.save(&poet, 1).await.unwrap().revision, 2);
    assert_eq!(
        store.get(&id("poet")).await.unwrap().profile.name,
        "Poet (edited)"
    );

    let list = store.list().await.unwrap();
    assert_eq!(list.profiles.len(), legacy_cases().len());
    assert_eq!(list.unreadable.len(), BAD_LEGACY.len());
}

/// Bad stored bytes give a typed error for their record and never lose or
/// hide the others; a list migrates unread legacy assistants as it goes.
pub async fn bad_stored_bytes_are_typed_errors(storage: Arc<dyn Storage>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = store(&storage, &clock);
    for name in ["good", "garbled", "future", "tampered", "missing"] {
        store.create(&sample(name)).await.unwrap();
    }
    storage
        .commit(
            agent_kernel::host::Batch::new()
                .put(
                    Table::Meta,
                    "profile-head/garbled",
                    b"\xff\x00not json".to_vec(),
                )
                .put(
                    Table::Meta,
                    "profile-head/future",
                    br#"{"v":99,"id":"future","latest":1}"#.to_vec(),
                )
                .put(Table::Meta, "profile-head/Bad Id", b"{}".to_vec())
                .put(
                    Table::Meta,
                    "assistant/legacy",
                    br#"{"name":"Old","system_prompt":"Hi","model":"m"}"#.to_vec(),
                ),
        )
        .await
        .unwrap();
    // A revision whose content does not match its hash.
    let key = "profile-rev/tampered/00000000000000000001";
    let bytes = storage.get(Table::Meta, key).await.unwrap().unwrap();
    let tampered = String::from_utf8(bytes)
        .unwrap()
        .replace("Profile tampered", "Profile evil");
    storage
        .commit(agent_kernel::host::Batch::new().put(Table::Meta, key, tampered.into_bytes()))
        .await
        .unwrap();
    // A head that names a revision that is not there.
    storage
        .commit(
            agent_kernel::host::Batch::new()
                .delete(Table::Meta, "profile-rev/missing/00000000000000000001"),
        )
        .await
        .unwrap();

    assert!(matches!(
        store.get(&id("garbled")).await,
        Err(ProfileError::Corrupt { .. })
    ));
    assert!(matches!(
        store.get(&id("future")).await,
        Err(ProfileError::Format { found: 99, .. })
    ));
    assert!(matches!(
        store.get(&id("tampered")).await,
        Err(ProfileError::Corrupt { .. })
    ));
    assert!(matches!(
        store.get(&id("missing")).await,
        Err(ProfileError::Corrupt { .. })
    ));
    // A save over a corrupt head is refused; the bytes stay.
    assert!(store.save(&sample("garbled"), 1).await.is_err());
    assert_eq!(
        storage
            .get(Table::Meta, "profile-head/garbled")
            .await
            .unwrap()
            .as_deref(),
        Some(&b"\xff\x00not json"[..])
    );

    let list = store.list().await.unwrap();
    let ids: Vec<&str> = list.profiles.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["good", "legacy"]);
    assert_eq!(list.unreadable.len(), 5, "{:?}", list.unreadable);
    assert_eq!(
        store.get(&id("good")).await.unwrap().profile,
        sample("good")
    );
}

/// A run's writes to the profile's history are fenced by its session
/// lease (S3.3); a revision that does not exist cannot be recorded.
pub async fn run_history_is_fenced(storage: Arc<dyn Storage>) {
    let clock = Arc::new(ManualClock::new(T0));
    store(&storage, &clock)
        .create(&sample("ops"))
        .await
        .unwrap();
    let session = SessionId::new("chat-1").unwrap();
    let first = storage
        .try_acquire_lease(&session, &OwnerId::new("tab-1").unwrap(), T0, 30_000)
        .await
        .unwrap();
    let fenced = store(&storage, &clock).fenced(first.fence());
    let used = ProfileRef {
        id: id("ops"),
        revision: 1,
    };
    fenced.record_run(&used, "run-1").await.unwrap();
    assert!(matches!(
        fenced
            .record_run(
                &ProfileRef {
                    id: id("ops"),
                    revision: 7
                },
                "run-2"
            )
            .await,
        Err(ProfileError::RevisionNotFound { .. })
    ));
    assert!(matches!(
        fenced.record_run(&used, "a/b").await,
        Err(ProfileError::Invalid { field: "run", .. })
    ));
    // Another owner takes the lease after it expired: the old fence is stale.
    storage
        .try_acquire_lease(
            &session,
            &OwnerId::new("tab-2").unwrap(),
            T0 + 60_000,
            30_000,
        )
        .await
        .unwrap();
    assert!(matches!(
        fenced.record_run(&used, "run-3").await,
        Err(ProfileError::Storage(StorageError::StaleEpoch { .. }))
    ));
    let runs = fenced.runs(&id("ops")).await.unwrap();
    assert_eq!(
        runs.iter()
            .map(|r| (r.run.as_str(), r.revision))
            .collect::<Vec<_>>(),
        [("run-1", 1)]
    );
}

/// S10.3: two writers saving on the same revision at once: exactly one
/// wins, the other gets `Conflict` and nothing of its edit is stored; two
/// first reads of a legacy assistant at once migrate it once.
pub async fn concurrent_writers_never_both_win(storage: Arc<dyn Storage>) {
    let clock = Arc::new(ManualClock::new(T0));
    let a = store(&storage, &clock);
    let b = store(&storage, &clock);
    a.create(&sample("shared")).await.unwrap();
    let mut edit_a = sample("shared");
    edit_a.name = "edit a".into();
    let mut edit_b = sample("shared");
    edit_b.name = "edit b".into();
    let (ra, rb) = futures::join!(a.save(&edit_a, 1), b.save(&edit_b, 1));
    let (won, lost) = match (&ra, &rb) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won.clone(), lost.clone()),
        other => panic!("exactly one save must win: {other:?}"),
    };
    assert!(
        matches!(lost, ProfileError::Conflict { latest: 2, .. }),
        "{lost}"
    );
    assert_eq!(won.revision, 2);
    let stored = a.get(&id("shared")).await.unwrap();
    assert_eq!(stored, won);
    assert_eq!(a.revisions(&id("shared")).await.unwrap().len(), 2);

    storage
        .commit(agent_kernel::host::Batch::new().put(
            Table::Meta,
            "assistant/twice",
            br#"{"name":"Twice","system_prompt":"Hi","model":"m"}"#.to_vec(),
        ))
        .await
        .unwrap();
    let twice = id("twice");
    let (ga, gb) = futures::join!(a.get(&twice), b.get(&twice));
    let (ga, gb) = (ga.unwrap(), gb.unwrap());
    assert_eq!(ga, gb);
    assert_eq!(ga.revision, 1);
    assert_eq!(a.revisions(&id("twice")).await.unwrap().len(), 1);
}
