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
    concurrent_writers_never_both_win,
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

/// Delegates to a storage, and just before the first commit whose batch
/// puts `trigger`, commits `interference` first: another writer landing
/// between a save's read and its commit.
struct Interleaved {
    inner: Arc<dyn Storage>,
    trigger: String,
    interference: std::sync::Mutex<Option<agent_kernel::host::Batch>>,
}

#[async_trait::async_trait]
impl Storage for Interleaved {
    async fn get(
        &self,
        table: agent_kernel::host::Table,
        key: &str,
    ) -> Result<Option<Vec<u8>>, agent_kernel::host::StorageError> {
        self.inner.get(table, key).await
    }
    async fn scan_prefix(
        &self,
        table: agent_kernel::host::Table,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, agent_kernel::host::StorageError> {
        self.inner.scan_prefix(table, prefix).await
    }
    async fn commit(
        &self,
        batch: agent_kernel::host::Batch,
    ) -> Result<(), agent_kernel::host::StorageError> {
        let hits = batch.ops().iter().any(
            |op| matches!(op, agent_kernel::host::Op::Put { key, .. } if *key == self.trigger),
        );
        let first = if hits {
            self.interference.lock().unwrap().take()
        } else {
            None
        };
        if let Some(other) = first {
            self.inner.commit(other).await?;
        }
        self.inner.commit(batch).await
    }
    async fn put_blob(
        &self,
        hash: &str,
        bytes: Vec<u8>,
    ) -> Result<agent_kernel::host::BlobRef, agent_kernel::host::StorageError> {
        self.inner.put_blob(hash, bytes).await
    }
    async fn get_blob(
        &self,
        hash: &str,
    ) -> Result<Option<Vec<u8>>, agent_kernel::host::StorageError> {
        self.inner.get_blob(hash).await
    }
    async fn delete_blob(&self, hash: &str) -> Result<bool, agent_kernel::host::StorageError> {
        self.inner.delete_blob(hash).await
    }
    async fn list_blobs(&self) -> Result<Vec<String>, agent_kernel::host::StorageError> {
        self.inner.list_blobs().await
    }
    async fn current_lease(
        &self,
        session: &agent_kernel::SessionId,
    ) -> Result<Option<agent_kernel::host::LeaseRecord>, agent_kernel::host::StorageError> {
        self.inner.current_lease(session).await
    }
    async fn lease_cas(
        &self,
        expected: Option<&agent_kernel::host::LeaseRecord>,
        new: &agent_kernel::host::LeaseRecord,
    ) -> Result<agent_kernel::host::LeaseCas, agent_kernel::host::StorageError> {
        self.inner.lease_cas(expected, new).await
    }
}

/// S10.3: the compare-and-set itself, not only the check before it: a
/// save whose head changed between its read and its commit is refused as
/// a `Conflict`, on SQLite, and the other writer's revision stands.
#[tokio::test]
async fn a_head_changed_under_a_save_is_a_conflict() {
    let (sqlite, _dir) = sqlite().await;
    let clock = Arc::new(ManualClock::new(common::T0));
    let plain = ProfileStore::new(sqlite.clone(), clock.clone() as Arc<dyn Clock>);
    let first = plain.create(&common::sample("race")).await.unwrap();
    // What another writer commits: its revision 2 and the head naming it.
    let mut theirs = first.clone();
    theirs.revision = 2;
    theirs.profile.name = "theirs".into();
    theirs.hash = agent_profiles::revision::content_hash(&theirs.profile).unwrap();
    let head = plain.head(&common::id("race")).await.unwrap();
    let interference = agent_kernel::host::Batch::new()
        .put(
            agent_kernel::host::Table::Meta,
            "profile-rev/race/00000000000000000002",
            serde_json::to_vec(&theirs).unwrap(),
        )
        .put(
            agent_kernel::host::Table::Meta,
            "profile-head/race",
            serde_json::to_vec(&agent_profiles::ProfileHead { latest: 2, ..head }).unwrap(),
        );
    let storage: Arc<dyn Storage> = Arc::new(Interleaved {
        inner: sqlite.clone(),
        trigger: "profile-head/race".into(),
        interference: std::sync::Mutex::new(Some(interference)),
    });
    let store = ProfileStore::new(storage, clock as Arc<dyn Clock>);
    let mut mine = common::sample("race");
    mine.name = "mine".into();
    assert_eq!(
        store.save(&mine, 1).await,
        Err(agent_profiles::ProfileError::Conflict {
            id: "race".into(),
            expected: 1,
            latest: 2
        })
    );
    let stored = plain.get(&common::id("race")).await.unwrap();
    assert_eq!(stored.profile.name, "theirs");
    assert_eq!(plain.revisions(&common::id("race")).await.unwrap().len(), 2);
}
