//! The kernel's storage conformance suite against SQLite on disk, a fresh
//! temporary directory per test (S1.1, S3.3).

use std::sync::Arc;

use agent_kernel::host::Storage;
use agent_store_sqlite::SqliteStorage;

agent_kernel::storage_conformance_tests! {
    attr: #[tokio::test(flavor = "multi_thread", worker_threads = 2)],
    fixture: async {
        let dir = tempfile::tempdir().expect("temp dir");
        let storage = SqliteStorage::open(dir.path().join("agentrt.sqlite3"))
            .await
            .expect("open sqlite");
        (Arc::new(storage) as Arc<dyn Storage>, dir)
    },
}
