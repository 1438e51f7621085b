//! The profile store (S10.3) natively: every scenario of `common` on the
//! kernel's memory storage and on SQLite on disk (the native host's
//! `SqliteStorage`), plus durability across a reopen of the SQLite file.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::sync::Arc;

use agent_host_native::sqlite::SqliteStorage;
use agent_kernel::host::{Clock, ManualClock, Storage};
use agent_kernel::memory::MemoryStorage;
use agent_profiles::{ProfileStore, RevisionCause};

fn memory() -> Arc<dyn Storage> {
    Arc::new(MemoryStorage::new())
}

async fn sqlite() -> (Arc<dyn Storage>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let storage = SqliteStorage::open(dir.path().join("db.sqlite"))
        .await
        .unwrap();
    (Arc::new(storage), dir)
}

macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod on_memory {
            $(
                #[tokio::test]
                async fn $name() {
                    super::common::$name(super::memory()).await;
                }
            )*
        }
        mod on_sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (storage, _dir) = super::sqlite().await;
                    super::common::$name(storage).await;
                }
            )*
        }
    };
}

on_every_backend!(
    revisions_diff_rollback,
    fork_records_its_origin,
    export_excludes_secrets_and_round_trips,
    import_narrows_to_the_host,
    legacy_assistants_migrate_lazily,
    bad_stored_bytes_are_typed_errors,
    run_history_is_fenced,
);

/// S10.3 on SQLite: revisions, a fork and a migrated legacy assistant are
/// all there after the database file is closed and opened again.
#[tokio::test]
async fn revisions_survive_reopening_the_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let clock = Arc::new(ManualClock::new(common::T0));
    {
        let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).await.unwrap());
        let store = ProfileStore::new(storage.clone(), clock.clone() as Arc<dyn Clock>);
        let mut p = common::sample("durable");
        store.create(&p).await.unwrap();
        p.name = "Durable 2".into();
        store.save(&p, 1).await.unwrap();
        store
            .fork(&common::id("durable"), common::id("durable-fork"), "Fork")
            .await
            .unwrap();
        storage
            .commit(agent_kernel::host::Batch::new().put(
                agent_kernel::host::Table::Meta,
                "assistant/old",
                br#"{"name":"Old","system_prompt":"Hi","model":"m"}"#.to_vec(),
            ))
            .await
            .unwrap();
        store.get(&common::id("old")).await.unwrap();
    }
    let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).await.unwrap());
    let store = ProfileStore::new(storage, clock as Arc<dyn Clock>);
    let r = store.get(&common::id("durable")).await.unwrap();
    assert_eq!((r.revision, r.profile.name.as_str()), (2, "Durable 2"));
    let fork = store.head(&common::id("durable-fork")).await.unwrap();
    assert_eq!(fork.forked_from.unwrap().revision, 2);
    let old = store.get(&common::id("old")).await.unwrap();
    assert!(matches!(old.cause, RevisionCause::Migrated { .. }));
    assert_eq!(store.list().await.unwrap().profiles.len(), 3);
}
