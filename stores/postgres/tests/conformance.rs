//! The kernel's storage conformance suite against a real PostgreSQL server
//! on loopback (one cluster per test process, a fresh database per test),
//! exactly as host-native runs it against SQLite (S1.1, S3, S14.1).

use std::sync::Arc;

use agent_kernel::host::Storage;
use agent_store_postgres::PostgresStorage;
use agent_store_postgres::test_cluster::PgCluster;

agent_kernel::storage_conformance_tests! {
    attr: #[tokio::test(flavor = "multi_thread", worker_threads = 2)],
    fixture: async {
        let cluster = PgCluster::shared().expect("a PostgreSQL server for the conformance suite");
        let database = cluster.create_database().expect("a fresh database");
        let storage = PostgresStorage::connect(&database.url())
            .await
            .expect("connect to PostgreSQL");
        (Arc::new(storage) as Arc<dyn Storage>, database)
    },
}
