//! `agent-store-sqlite`: the agent runtime's [`Storage`] in one SQLite file,
//! for a native host (the `agentrt` CLI, workers, the gateway) and for
//! embedders that want durable runs without a server.
//!
//! # What it owns
//!
//! - [`SqliteStorage`]: the key-value tables, content-addressed blobs and
//!   lease rows of `agent_kernel::host::Storage`, every batch in one
//!   `BEGIN IMMEDIATE` transaction with its lease fence and conditions
//!   checked inside it;
//! - the lease steps of this backend: [`Storage::lease_cas`] as one
//!   conditional upsert, and the batched read and compare-and-set that make
//!   a heartbeat's renewal of every held session one commit;
//! - opening: the file created 0600 before SQLite sees it ([`files`]), WAL
//!   and `synchronous=FULL`, numbered migrations (`migrations/`), and a typed
//!   [`OpenError`] for a missing directory, a corrupt or too-new file.
//!
//! It does not own the lease rules (who may take a lease, when the epoch
//! increments): those are the kernel's (`agent_kernel::host::lease_rules`),
//! and acquire, renew and release are the kernel's provided methods over
//! this crate's compare-and-set. Whether a lease holder is gone is the
//! host's knowledge, handed in as a [`LivenessCheck`].
//!
//! # Design
//!
//! All SQLite calls run on one dedicated connection thread per store, never
//! on the async executor: the same storage serves the tokio host and the
//! deterministic simulator (which has no tokio runtime, and uses
//! [`SqliteStorage::open_inline`]), and one connection per store keeps its
//! writes ordered without a pool. Several stores (processes, simulated tabs)
//! may open one file: SQLite's locking and the lease epochs keep them apart.
//!
//! Layout (`migrations/0001_init.sql`): `kv(tbl, key, value)` for every
//! kernel table, `blobs(hash, size, bytes)`, `leases(session, owner, epoch,
//! expires_at_ms)`. Keys are stored as BLOBs so that SQLite orders them by
//! their UTF-8 bytes, as the kernel's prefix scans require.
//!
//! rusqlite with its bundled SQLite: the maintained binding, with
//! prepared-statement caching, and the same SQLite on every machine.
//!
//! # Example
//!
//! ```
//! use agent_kernel::host::{Batch, Storage, Table};
//! use agent_kernel::{OwnerId, SessionId};
//! use agent_store_sqlite::SqliteStorage;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let storage = SqliteStorage::open(dir.path().join("agentrt.sqlite3")).await?;
//! let session = SessionId::new("s-1")?;
//! // The kernel's lease rules over this store's compare-and-set.
//! let lease = storage
//!     .try_acquire_lease(&session, &OwnerId::new("tab-a")?, 1_000, 30_000)
//!     .await?;
//! // A write fenced by the lease: refused once another holder takes over.
//! storage
//!     .commit(Batch::new().fenced(lease.fence()).put(Table::Runs, "run-1", b"{}".to_vec()))
//!     .await?;
//! assert_eq!(storage.get(Table::Runs, "run-1").await?, Some(b"{}".to_vec()));
//! # Ok(())
//! # }
//! ```

#[cfg(doc)]
use agent_kernel::host::Storage;

pub mod files;
mod lease;
mod open;
mod storage;

pub use lease::{Liveness, LivenessCheck};
pub use open::{BUSY_TIMEOUT, OpenError};
pub use storage::{CommitHook, SqliteStorage};
