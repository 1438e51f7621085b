//! PostgreSQL storage and leases for the agent runtime, natively only:
//! [`PostgresStorage`] implements `agent_kernel::host::Storage` over one
//! PostgreSQL database that many processes on many machines share (SPEC
//! S14.1), with the same semantics as the SQLite backend and the same
//! conformance suite.
//!
//! # Design
//!
//! * **One transaction per batch, `SERIALIZABLE`.** A batch's fence (the
//!   session's lease epoch), its compare-and-set conditions and its writes
//!   run in one serializable transaction; a refusal rolls it back, so a
//!   stale epoch or a failed condition writes nothing. Serializable rather
//!   than row locks under `READ COMMITTED` because a condition may be about
//!   a key that does not exist yet (`expect_absent`): no row to lock, and
//!   serializable snapshot isolation catches that race where `FOR UPDATE`
//!   cannot. The price is that a conflicting transaction is aborted
//!   (`40001`) and must be taken again: a batch is data, not a closure, so
//!   the store re-runs it by itself, with jittered backoff, for a bounded
//!   time ([`PostgresOptions::retry_for`]). PostgreSQL-compatible
//!   distributed databases (CockroachDB, YugabyteDB) run serializable by
//!   default and need exactly this retry.
//! * **Leases are rows with a time-to-live and an epoch**, renewed by a
//!   heartbeat (the kernel's `LeaseManager::renew_all`), not session-scoped
//!   advisory locks. See [`storage`] for why. This crate implements only
//!   the lease read and the one atomic lease step, `Storage::lease_cas`:
//!   read the row, compare it with the expected record, upsert, in one
//!   serializable transaction (the read puts the step in conflict with every
//!   fenced batch in flight that read the old epoch). Taking, renewing
//!   and releasing are the kernel's provided methods, which apply its lease
//!   rules (`agent_kernel::host::lease_rules`) over that step; a holder that dies stops renewing
//!   and its lease ends at its expiry, or at once when the host can tell the
//!   holder is dead ([`DeadOwnerCheck`], as the SQLite backend does with
//!   `/proc`). A holder that comes back late is refused by the epoch fence.
//! * **One round trip per batch between `BEGIN` and `COMMIT`**: the fence
//!   and condition reads and the writes are sent pipelined, reads first
//!   (they see the state before the batch); a refusal drops the transaction,
//!   which rolls the writes back. A batch therefore costs three round trips
//!   and one durable commit whatever its size.
//! * **Blobs are content-addressed**: the key is the SHA-256 of the bytes,
//!   checked before anything is written and again on every read.
//! * **Numbered migrations** (`migrations/NNNN_*.sql`) recorded in
//!   `agentrt_schema_version`, applied under a transaction-scoped advisory
//!   lock so that many workers opening one fresh database at once migrate it
//!   once; a database newer than this code is refused, never touched.
//! * **Connection loss is an error, never a panic or a partial write**:
//!   every failure to reach the server (refused, reset, closed, server
//!   shutting down, pool exhausted) is `StorageError::Unavailable`; a
//!   transaction cut short is rolled back by the server. A connection lost
//!   while `COMMIT` itself was in flight leaves the outcome unknown to the
//!   client: the error says so, and the caller treats the write like any
//!   uncertain effect (S2.3).
//!
//! # Dependencies, and why
//!
//! `tokio-postgres` is the maintained asynchronous PostgreSQL client that
//! speaks the wire protocol in Rust (no libpq); `deadpool-postgres` is a
//! small pool on top of it that drops closed connections, so that one
//! broken connection does not poison the store. Both need a tokio runtime:
//! this store serves the native tokio host, not the single-threaded
//! deterministic simulator (which keeps using SQLite). Connections are
//! unencrypted (`NoTls`): reach the database over loopback, a Unix socket or
//! a private network.
//!
//! # Example
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use agent_kernel::host::{Batch, Storage, Table};
//! use agent_store_postgres::PostgresStorage;
//!
//! let storage = PostgresStorage::connect("postgres://agentrt@127.0.0.1:5432/agentrt").await?;
//! let storage: Arc<dyn Storage> = Arc::new(storage);
//! storage.commit(Batch::new().put(Table::Meta, "hello", b"world".to_vec())).await?;
//! assert_eq!(storage.get(Table::Meta, "hello").await?, Some(b"world".to_vec()));
//! # Ok(()) }
//! ```
//!
//! `agentrt --store postgres://…` (or `AGENTRT_STORE`, or `[store] url` in
//! its config file) opens this store for every command instead of SQLite.
//!
//! Tests start a real server on loopback with `test_cluster::PgCluster`
//! (feature `test-cluster`), which later worker tests can share; the
//! benchmark (`benches/postgres.rs`, part of `cargo xtask bench`) puts the
//! PostgreSQL round beside one bare PostgreSQL commit.
//!
//! `agentrt worker` (in `agent-host-native`, modules `queue` and `worker`)
//! executes runs queued in this store, many workers sharing one database;
//! its status reports these [`StoreCounts`] (commits, fence refusals). Its
//! acceptance tests (`host-native/tests/workers_postgres.rs`: four workers
//! under SIGKILL and SIGSTOP, a database restart mid-load) run against a
//! `test_cluster::PgCluster`. Not here yet: TLS to the server.

pub mod errors;
pub mod migrate;
pub mod storage;
#[cfg(feature = "test-cluster")]
pub mod test_cluster;
mod transaction;

pub use errors::OpenError;
pub use storage::{DeadOwnerCheck, PostgresOptions, PostgresStorage, StoreCounts};
