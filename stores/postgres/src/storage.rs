//! [`PostgresStorage`]: `agent_kernel::host::Storage` over a PostgreSQL
//! database: the key-value tables, content-addressed blobs, lease rows, and
//! every batch and lease compare-and-set in one serializable transaction,
//! taken again on a serialization conflict.
//!
//! # Leases: a time-to-live with a heartbeat, not an advisory lock
//!
//! A lease is a row `(session, owner, epoch, expires_at_ms)`; its holder's
//! `LeaseManager` renews it while it runs, and it ends by itself at its
//! expiry when the holder dies. A session-scoped advisory lock
//! (`pg_advisory_lock`) would end the instant the holder's connection
//! closes, but it was not chosen:
//!
//! * the epoch must outlive each tenure and be read inside every batch's
//!   transaction, on whichever pooled connection runs it: the row is needed
//!   anyway, so the lock would be a second source of truth beside it;
//! * an advisory lock belongs to one connection: holding a session would pin
//!   one connection per session (a worker holding 200 sessions would need
//!   200 connections, past PostgreSQL's default limit of 100), and a
//!   connection cut by a network blip or a pooler frees it while the holder
//!   keeps running, believing it still owns the session;
//! * the distributed PostgreSQL-compatible databases do not all have
//!   advisory locks (CockroachDB does not); a row with a TTL works on all.
//!
//! What the TTL costs: a dead holder's sessions wait out their expiry
//! (the `LeaseManager`'s TTL, renewed well before it runs out) unless the
//! host can tell the holder is dead ([`DeadOwnerCheck`]); and `now_ms`
//! comes from the caller's clock, so machines sharing a database need
//! clocks in step to well within the TTL. Skew moves when a take-over may
//! happen; it never lets a stale holder write, because every write is
//! checked against the current epoch inside its own transaction.
//!
//! # Fencing in commit order
//!
//! Serializable isolation alone lets a batch that read the old epoch commit
//! *after* the take-over that bumped it: the two transactions only have a
//! read-write dependency (the batch read the lease row the take-over
//! wrote), which serializes the batch first whatever the commit order. The
//! new holder's plain reads then miss a write that lands a moment later,
//! and a stale holder's `running` record could appear after the new holder
//! decided the call had never started. So the fence reads the epoch
//! `FOR SHARE`: the row lock makes the take-over's update wait until every
//! batch that holds it has committed, and a batch that comes after the
//! take-over's update waits for it and then fails to serialize, is taken
//! again, and is refused with the new epoch. Every fenced write of an old
//! tenure commits before the take-over does (tested under load by
//! `s14_concurrent_fenced_writers_across_stores_only_the_current_epoch_lands`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_kernel::host::{Batch, BlobRef, LeaseCas, LeaseRecord, Storage, StorageError, Table};
use agent_kernel::{OwnerId, SessionId};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::Host;
use tokio_postgres::{IsolationLevel, NoTls};

use crate::errors::{Failure, OpenError, classify, pool, single};
use crate::migrate::migrate;
use crate::transaction::{
    Done, INSERT_BLOB, SELECT_LEASE, SELECT_VALUE, Work, lease_from_row, to_i64, to_u64,
};

/// Says whether a lease owner is known to be dead (its process gone), so
/// that its live-looking lease may be taken over at once with a new epoch.
/// Anything not known dead waits for the lease's expiry.
pub type DeadOwnerCheck = Arc<dyn Fn(&OwnerId) -> bool + Send + Sync>;

/// Tuning of one store. The defaults suit one `agentrt` process.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Most connections this store opens at once.
    pub pool_size: usize,
    /// How long an operation waits for a free connection or for a new one
    /// to be established before it is `Unavailable`.
    pub connect_timeout: Duration,
    /// How long a batch or lease step that keeps meeting serialization
    /// conflicts is taken again before it is `Unavailable`.
    pub retry_for: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            retry_for: Duration::from_secs(30),
        }
    }
}

/// What a store has done since it was opened (for tests, benchmarks and a
/// worker's health report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Batches committed.
    pub commits: u64,
    /// Batches refused because their lease epoch was stale (fencing).
    pub stale_refusals: u64,
    /// Transactions taken again after a serialization conflict.
    pub retries: u64,
    /// Reads outside batches (`get`, scans, blob and lease reads): each one
    /// round trip to the server.
    pub reads: u64,
}

/// Storage in one PostgreSQL database, shared by any number of processes.
/// Cheap to share behind an `Arc`; needs a tokio runtime.
pub struct PostgresStorage {
    pool: Pool,
    target: String,
    options: PostgresOptions,
    dead_owner: Option<DeadOwnerCheck>,
    commits: AtomicU64,
    stale_refusals: AtomicU64,
    retries: AtomicU64,
    reads: AtomicU64,
}

impl std::fmt::Debug for PostgresStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStorage")
            .field("target", &self.target)
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

/// `user@host:port/dbname` of a configuration, never its password.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{}@{host}:{port}/{}",
        config.get_user().unwrap_or("?"),
        config.get_dbname().unwrap_or("?")
    )
}

/// The smallest byte string greater than every string starting with `prefix`,
/// or `None` when there is none (empty prefix, or only 0xFF bytes).
fn prefix_upper_bound(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut upper = prefix.to_vec();
    while let Some(last) = upper.pop() {
        if last < 0xFF {
            upper.push(last + 1);
            return Some(upper);
        }
    }
    None
}

/// A pause before taking a conflicted transaction again: doubling from
/// 1 ms up to 64 ms, with jitter so that the conflicting writers spread out.
fn backoff(attempt: u32) -> Duration {
    use std::hash::BuildHasher;
    let ceiling = 1u64 << attempt.min(6);
    let jitter = std::collections::hash_map::RandomState::new().hash_one(attempt) % 1000;
    Duration::from_micros(ceiling * 500 + jitter * ceiling / 2)
}

impl PostgresStorage {
    /// Connect to the database at `url` (`postgres://user@host:port/db`),
    /// migrate it, and return the store. Lease holders are never judged dead:
    /// their leases end at expiry.
    pub async fn connect(url: &str) -> Result<Self, OpenError> {
        Self::connect_with(url, PostgresOptions::default(), None).await
    }

    /// [`PostgresStorage::connect`] with tuning and an optional check that
    /// lets a dead holder's lease be taken over before its expiry.
    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
        dead_owner: Option<DeadOwnerCheck>,
    ) -> Result<Self, OpenError> {
        let mut config: tokio_postgres::Config =
            url.parse()
                .map_err(|e: tokio_postgres::Error| OpenError::InvalidUrl {
                    detail: e.to_string(),
                })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        config.application_name("agentrt");
        let target = describe(&config);
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| OpenError::Setup {
                target: target.clone(),
                detail: e.to_string(),
            })?;
        let mut client = pool.get().await.map_err(|e| OpenError::Unavailable {
            target: target.clone(),
            detail: match &e {
                deadpool_postgres::PoolError::Backend(e) => crate::errors::describe_error(e),
                other => other.to_string(),
            },
        })?;
        let client: &mut tokio_postgres::Client = &mut client;
        migrate(client, &target).await?;
        Ok(Self {
            pool,
            target,
            options,
            dead_owner,
            commits: AtomicU64::new(0),
            stale_refusals: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            reads: AtomicU64::new(0),
        })
    }

    /// `user@host:port/database` of this store (no password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// What this store has done since it was opened.
    pub fn counts(&self) -> StoreCounts {
        StoreCounts {
            commits: self.commits.load(Ordering::SeqCst),
            stale_refusals: self.stale_refusals.load(Ordering::SeqCst),
            retries: self.retries.load(Ordering::SeqCst),
            reads: self.reads.load(Ordering::SeqCst),
        }
    }

    /// Number of stored rows and their total key + value bytes (tables only,
    /// no blobs, no leases): what the benchmarks report per tool round.
    pub async fn table_footprint(&self) -> Result<(u64, u64), StorageError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*)::BIGINT,
                        coalesce(sum(octet_length(tbl) + length(key) + length(value)), 0)::BIGINT
                 FROM agentrt_kv",
                &[],
            )
            .await
            .map_err(|e| single(&self.target, &e))?;
        let rows: i64 = row.try_get(0).map_err(|e| single(&self.target, &e))?;
        let bytes: i64 = row.try_get(1).map_err(|e| single(&self.target, &e))?;
        Ok((to_u64(rows), to_u64(bytes)))
    }

    /// A pooled connection for one read, counted.
    async fn reader(&self) -> Result<Object, StorageError> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.client().await
    }

    async fn client(&self) -> Result<Object, StorageError> {
        self.pool.get().await.map_err(|e| pool(&self.target, &e))
    }

    /// Run `work` in a fresh serializable transaction until it commits,
    /// is refused, or keeps conflicting past [`PostgresOptions::retry_for`].
    async fn serializable(&self, work: Work<'_>) -> Result<Done, StorageError> {
        let deadline = Instant::now() + self.options.retry_for;
        let mut tries = 0u32;
        loop {
            let mut client = self.client().await?;
            let outcome = async {
                let tx = client
                    .build_transaction()
                    .isolation_level(IsolationLevel::Serializable)
                    .start()
                    .await
                    .map_err(|e| classify(&self.target, &e, false))?;
                // On an error the transaction is dropped, which rolls it back.
                let done = work.run(&tx, &self.target).await?;
                tx.commit()
                    .await
                    .map_err(|e| classify(&self.target, &e, true))?;
                Ok::<Done, Failure>(done)
            }
            .await;
            match outcome {
                Ok(done) => return Ok(done),
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::Retry(detail)) => {
                    if Instant::now() >= deadline {
                        return Err(StorageError::Unavailable(format!(
                            "{} on PostgreSQL at {} kept conflicting with other writers for {:?} ({detail}); nothing was written, retry",
                            work.what(),
                            self.target,
                            self.options.retry_for
                        )));
                    }
                    self.retries.fetch_add(1, Ordering::SeqCst);
                    tries = tries.saturating_add(1);
                    drop(client);
                    tokio::time::sleep(backoff(tries)).await;
                }
            }
        }
    }

    /// The one atomic lease step of this backend: a conditional insert or
    /// update of the session's row in one serializable transaction.
    async fn swap_lease(
        &self,
        expected: Option<&LeaseRecord>,
        new: &LeaseRecord,
    ) -> Result<LeaseCas, StorageError> {
        match self.serializable(Work::Lease { expected, new }).await? {
            Done::Lease(outcome) => Ok(outcome),
            Done::Committed => Err(StorageError::Backend(
                "a lease step ended without an answer (a bug in agent-store-postgres)".to_owned(),
            )),
        }
    }
}

fn key_string(table: Table, raw: Vec<u8>) -> Result<String, StorageError> {
    String::from_utf8(raw).map_err(|e| StorageError::Corrupt {
        table,
        key: String::from_utf8_lossy(e.as_bytes()).into_owned(),
        detail: format!("key is not UTF-8: {e}"),
    })
}

#[async_trait::async_trait]
impl Storage for PostgresStorage {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let client = self.reader().await?;
        let db = |e: tokio_postgres::Error| single(&self.target, &e);
        let st = client.prepare_cached(SELECT_VALUE).await.map_err(db)?;
        client
            .query_opt(&st, &[&table.as_str(), &key.as_bytes()])
            .await
            .map_err(db)?
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(db)
    }

    async fn scan_prefix(
        &self,
        table: Table,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        let client = self.reader().await?;
        let db = |e: tokio_postgres::Error| single(&self.target, &e);
        let prefix = prefix.as_bytes();
        let rows = match prefix_upper_bound(prefix) {
            Some(upper) => {
                let st = client
                    .prepare_cached(
                        "SELECT key, value FROM agentrt_kv
                         WHERE tbl = $1 AND key >= $2 AND key < $3 ORDER BY key",
                    )
                    .await
                    .map_err(db)?;
                client
                    .query(&st, &[&table.as_str(), &prefix, &upper])
                    .await
                    .map_err(db)?
            }
            None => {
                let st = client
                    .prepare_cached(
                        "SELECT key, value FROM agentrt_kv
                         WHERE tbl = $1 AND key >= $2 ORDER BY key",
                    )
                    .await
                    .map_err(db)?;
                client
                    .query(&st, &[&table.as_str(), &prefix])
                    .await
                    .map_err(db)?
            }
        };
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let key: Vec<u8> = row.try_get(0).map_err(db)?;
            let value: Vec<u8> = row.try_get(1).map_err(db)?;
            out.push((key_string(table, key)?, value));
        }
        Ok(out)
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        batch.check_blobs()?;
        let outcome = self.serializable(Work::Batch(&batch)).await.map(|_| ());
        match &outcome {
            Ok(()) => {
                self.commits.fetch_add(1, Ordering::SeqCst);
            }
            Err(StorageError::StaleEpoch { .. }) => {
                self.stale_refusals.fetch_add(1, Ordering::SeqCst);
            }
            Err(_) => {}
        }
        outcome
    }

    async fn put_blob(&self, hash: &str, bytes: Vec<u8>) -> Result<BlobRef, StorageError> {
        let blob = BlobRef::claimed(hash, &bytes)?;
        let client = self.client().await?;
        let db = |e: tokio_postgres::Error| single(&self.target, &e);
        let st = client.prepare_cached(INSERT_BLOB).await.map_err(db)?;
        client
            .execute(&st, &[&blob.hash, &to_i64(blob.size), &bytes])
            .await
            .map_err(db)?;
        Ok(blob)
    }

    async fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let client = self.reader().await?;
        let db = |e: tokio_postgres::Error| single(&self.target, &e);
        let st = client
            .prepare_cached("SELECT bytes FROM agentrt_blobs WHERE hash = $1")
            .await
            .map_err(db)?;
        let bytes: Option<Vec<u8>> = client
            .query_opt(&st, &[&hash])
            .await
            .map_err(db)?
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(db)?;
        if let Some(b) = &bytes {
            // A blob whose bytes no longer hash to its name is corrupt.
            let actual = BlobRef::of(b).hash;
            if actual != hash {
                return Err(StorageError::Backend(format!(
                    "blob {hash} in PostgreSQL at {} is corrupt (its bytes hash to {actual}); it was left untouched: delete it and let the run re-create or report it",
                    self.target
                )));
            }
        }
        Ok(bytes)
    }

    async fn delete_blob(&self, hash: &str) -> Result<bool, StorageError> {
        let client = self.client().await?;
        let db = |e: tokio_postgres::Error| single(&self.target, &e);
        let st = client
            .prepare_cached("DELETE FROM agentrt_blobs WHERE hash = $1")
            .await
            .map_err(db)?;
        Ok(client.execute(&st, &[&hash]).await.map_err(db)? > 0)
    }

    async fn list_blobs(&self) -> Result<Vec<String>, StorageError> {
        let client = self.reader().await?;
        let db = |e: tokio_postgres::Error| single(&self.target, &e);
        // COLLATE "C": hex digits ordered by bytes whatever the database's locale.
        let st = client
            .prepare_cached("SELECT hash FROM agentrt_blobs ORDER BY hash COLLATE \"C\"")
            .await
            .map_err(db)?;
        client
            .query(&st, &[])
            .await
            .map_err(db)?
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<Vec<String>, _>>()
            .map_err(db)
    }

    async fn lease_cas(
        &self,
        expected: Option<&LeaseRecord>,
        new: &LeaseRecord,
    ) -> Result<LeaseCas, StorageError> {
        self.swap_lease(expected, new).await
    }

    fn lease_holder_gone(&self, holder: &OwnerId) -> bool {
        self.dead_owner.as_ref().is_some_and(|dead| dead(holder))
    }

    async fn current_lease(
        &self,
        session: &SessionId,
    ) -> Result<Option<LeaseRecord>, StorageError> {
        let client = self.reader().await?;
        let db = |e: tokio_postgres::Error| single(&self.target, &e);
        let st = client.prepare_cached(SELECT_LEASE).await.map_err(db)?;
        let row = client
            .query_opt(&st, &[&session.as_str()])
            .await
            .map_err(db)?;
        match row {
            None => Ok(None),
            Some(row) => lease_from_row(session, &row).map_err(db)?.map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_bound_of_prefixes() {
        assert_eq!(prefix_upper_bound(b""), None);
        assert_eq!(prefix_upper_bound(b"run1/"), Some(b"run10".to_vec()));
        assert_eq!(prefix_upper_bound(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_upper_bound(b"\xff\xff"), None);
    }

    #[test]
    fn backoff_grows_and_stays_bounded() {
        assert!(backoff(0) <= Duration::from_millis(1));
        for attempt in 0..100 {
            assert!(backoff(attempt) <= Duration::from_millis(64));
        }
        assert!(backoff(10) >= Duration::from_millis(32));
    }

    #[test]
    fn the_description_names_no_password() {
        let config: tokio_postgres::Config = "postgres://alice:s3cret@db.internal:6543/agentrt"
            .parse()
            .expect("valid url");
        let described = describe(&config);
        assert_eq!(described, "alice@db.internal:6543/agentrt");
        assert!(!described.contains("s3cret"));
    }
}
