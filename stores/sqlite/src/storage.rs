//! [`SqliteStorage`]: `agent_kernel::host::Storage` over one database
//! file, every SQLite call on the store's own connection thread (or inline,
//! for the deterministic simulator), every batch in one `BEGIN IMMEDIATE`
//! transaction with its fence and conditions checked inside it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use agent_kernel::host::{
    Batch, BlobRef, LeaseCas, LeaseRecord, LeaseSwap, Op, Storage, StorageError, Table,
};
use agent_kernel::{OwnerId, SessionId};
use futures::channel::oneshot;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::lease::{Liveness, LivenessCheck, lease_cas_in_one_commit, lease_from_row, read_lease};
use crate::open::{BUSY_TIMEOUT, OpenError, open_connection};

/// Called before every commit with the batch; an `Err` refuses it (nothing is
/// applied). Lets the tab-loss simulator stop at a journal boundary.
pub type CommitHook = Arc<dyn Fn(&Batch) -> Result<(), StorageError> + Send + Sync>;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// Where SQLite calls run.
enum Backend {
    /// On the store's own connection thread (the default).
    Thread(Mutex<mpsc::Sender<Job>>),
    /// On the calling thread: for the deterministic simulator, whose
    /// single-threaded executor must not wait on another thread.
    Inline(Mutex<Connection>),
}

/// Storage in one SQLite file. Cheap to share behind an `Arc`; dropping the
/// last handle closes the connection thread.
pub struct SqliteStorage {
    path: PathBuf,
    backend: Backend,
    liveness: LivenessCheck,
    hook: Mutex<Option<CommitHook>>,
    after_hook: Mutex<Option<CommitHook>>,
    commits: AtomicU64,
    blob_writes: AtomicU64,
}

impl std::fmt::Debug for SqliteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStorage")
            .field("path", &self.path)
            .field("commits", &self.commit_count())
            .finish_non_exhaustive()
    }
}

/// Map a SQLite error during normal operation to the kernel's error.
pub(crate) fn backend(path: &Path, e: &rusqlite::Error) -> StorageError {
    use rusqlite::ffi::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            StorageError::Backend(format!(
                "the database {} is corrupt ({e}); nothing was changed: stop agentrt, move the file aside or restore a backup",
                path.display()
            ))
        }
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            StorageError::Unavailable(format!(
                "the database {} stayed locked by another process for {BUSY_TIMEOUT:?} ({e}); retry",
                path.display()
            ))
        }
        Some(ErrorCode::DiskFull) => StorageError::Unavailable(format!(
            "the disk holding {} is full ({e}); free space and retry",
            path.display()
        )),
        _ => StorageError::Backend(format!("{} ({e})", path.display())),
    }
}

pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
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

fn corrupt(table: Table, key: &str, detail: impl Into<String>) -> StorageError {
    StorageError::Corrupt {
        table,
        key: key.to_owned(),
        detail: detail.into(),
    }
}

/// Read a `value` column: a BLOB (or TEXT written by hand); NULL or a number is corrupt.
fn value_bytes(
    table: Table,
    key: &str,
    v: rusqlite::types::ValueRef<'_>,
) -> Result<Vec<u8>, StorageError> {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Blob(b) | ValueRef::Text(b) => Ok(b.to_vec()),
        other => Err(corrupt(
            table,
            key,
            format!("value column holds {:?}, not bytes", other.data_type()),
        )),
    }
}

impl SqliteStorage {
    /// Open (creating if needed) the database at `path` and migrate it.
    /// No lease holder is ever judged gone: a lease ends at its expiry (a
    /// native host opens with its process liveness instead, through
    /// [`SqliteStorage::open_with_liveness`]).
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        Self::open_with_liveness(path, Arc::new(|_: &OwnerId| Liveness::Unknown)).await
    }

    /// Open with the host's lease-holder liveness check: a holder judged
    /// [`Liveness::Dead`] loses its live-looking lease at once.
    pub async fn open_with_liveness(
        path: impl AsRef<Path>,
        liveness: LivenessCheck,
    ) -> Result<Self, OpenError> {
        let path = path.as_ref().to_owned();
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = oneshot::channel();
        let thread_path = path.clone();
        std::thread::Builder::new()
            .name("agentrt-sqlite".into())
            .spawn(move || {
                let mut conn = match open_connection(&thread_path) {
                    Ok(conn) => {
                        // The opener may have gone away; then nobody needs us.
                        if ready_tx.send(Ok(())).is_err() {
                            return;
                        }
                        conn
                    }
                    Err(e) => {
                        // Ignored on purpose: an opener that left needs no error.
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                // Runs until every sender (the storage) is dropped.
                while let Ok(job) = rx.recv() {
                    job(&mut conn);
                }
            })
            .map_err(|e| OpenError::Io {
                path: path.clone(),
                detail: format!("cannot start the storage thread: {e}"),
            })?;
        ready_rx.await.map_err(|_| OpenError::Setup {
            path: path.clone(),
            detail: "the storage thread stopped while opening".into(),
        })??;
        Ok(Self {
            path,
            backend: Backend::Thread(Mutex::new(tx)),
            liveness,
            hook: Mutex::new(None),
            after_hook: Mutex::new(None),
            commits: AtomicU64::new(0),
            blob_writes: AtomicU64::new(0),
        })
    }

    /// Open the database with SQLite calls made on the calling thread, for
    /// the deterministic simulator only (its executor cannot wait for
    /// another thread). Never use this under tokio: it blocks the executor.
    pub fn open_inline(path: impl AsRef<Path>, liveness: LivenessCheck) -> Result<Self, OpenError> {
        let path = path.as_ref().to_owned();
        let conn = open_connection(&path)?;
        Ok(Self {
            path,
            backend: Backend::Inline(Mutex::new(conn)),
            liveness,
            hook: Mutex::new(None),
            after_hook: Mutex::new(None),
            commits: AtomicU64::new(0),
            blob_writes: AtomicU64::new(0),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of committed batches through this handle.
    pub fn commit_count(&self) -> u64 {
        self.commits.load(Ordering::SeqCst)
    }

    /// Number of `put_blob` calls through this handle (each is its own
    /// durable SQLite transaction).
    pub fn blob_write_count(&self) -> u64 {
        self.blob_writes.load(Ordering::SeqCst)
    }

    /// Install (or with `None` remove) a hook run before every commit.
    pub fn set_commit_hook(&self, hook: Option<CommitHook>) {
        if let Ok(mut h) = self.hook.lock() {
            *h = hook;
        }
    }

    /// Install (or remove) a hook run after every successful commit; its
    /// result is ignored (the batch is durable already).
    pub fn set_after_commit_hook(&self, hook: Option<CommitHook>) {
        if let Ok(mut h) = self.after_hook.lock() {
            *h = hook;
        }
    }

    /// Run `f` on the connection thread and wait for its answer.
    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, &Path) -> Result<T, StorageError> + Send + 'static,
    ) -> Result<T, StorageError> {
        let stopped = || {
            StorageError::Unavailable(
                "the SQLite storage thread has stopped; restart agentrt".to_owned(),
            )
        };
        let jobs = match &self.backend {
            Backend::Inline(conn) => {
                let mut conn = conn.lock().map_err(|_| stopped())?;
                return f(&mut conn, &self.path);
            }
            Backend::Thread(jobs) => jobs,
        };
        let (tx, rx) = oneshot::channel();
        let path = self.path.clone();
        let job: Job = Box::new(move |conn| {
            // Ignored on purpose: a caller that stopped waiting needs no answer.
            let _ = tx.send(f(conn, &path));
        });
        jobs.lock()
            .map_err(|_| stopped())?
            .send(job)
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    /// Write raw bytes under a key, bypassing fences (tests plant corrupt rows).
    pub async fn put_raw_for_tests(
        &self,
        table: Table,
        key: &str,
        value: rusqlite::types::Value,
    ) -> Result<(), StorageError> {
        let key = key.to_owned();
        self.call(move |conn, path| {
            conn.execute(
                "INSERT OR REPLACE INTO kv (tbl, key, value) VALUES (?1, ?2, ?3)",
                params![table.as_str(), key.as_bytes(), value],
            )
            .map_err(|e| backend(path, &e))?;
            Ok(())
        })
        .await
    }

    /// Number of stored rows and their total key + value bytes (tables only,
    /// no blobs, no leases): what the benchmarks report per tool round.
    pub async fn table_footprint(&self) -> Result<(u64, u64), StorageError> {
        self.call(|conn, path| {
            conn.query_row(
                "SELECT count(*), coalesce(sum(length(tbl) + length(key) + length(value)), 0) FROM kv",
                [],
                |r| Ok((to_u64(r.get(0)?), to_u64(r.get(1)?))),
            )
            .map_err(|e| backend(path, &e))
        })
        .await
    }

    /// The connection's `(journal_mode, synchronous)` as SQLite reports them
    /// (`synchronous` 2 is FULL): the durability settings every commit runs
    /// under, read back from the live connection rather than assumed.
    pub async fn durability_settings(&self) -> Result<(String, i64), StorageError> {
        self.call(|conn, path| {
            let mode: String = conn
                .pragma_query_value(None, "journal_mode", |r| r.get(0))
                .map_err(|e| backend(path, &e))?;
            let synchronous: i64 = conn
                .pragma_query_value(None, "synchronous", |r| r.get(0))
                .map_err(|e| backend(path, &e))?;
            Ok((mode, synchronous))
        })
        .await
    }

    /// Run SQLite's `quick_check`; `Ok(())` when the file is sound.
    pub async fn quick_check(&self) -> Result<(), StorageError> {
        self.call(|conn, path| {
            let verdict: String = conn
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .map_err(|e| backend(path, &e))?;
            if verdict == "ok" {
                Ok(())
            } else {
                Err(StorageError::Backend(format!(
                    "the database {} failed its integrity check ({verdict}); move it aside or restore a backup",
                    path.display()
                )))
            }
        })
        .await
    }
}

fn check_and_apply(
    tx: &rusqlite::Transaction<'_>,
    batch: Batch,
    path: &Path,
) -> Result<(), StorageError> {
    let db = |e: rusqlite::Error| backend(path, &e);
    batch.check_blobs()?;
    if let Some(fence) = &batch.fence {
        let current: Option<i64> = tx
            .prepare_cached("SELECT epoch FROM leases WHERE session = ?1")
            .map_err(db)?
            .query_row([fence.session.as_str()], |r| r.get(0))
            .optional()
            .map_err(db)?;
        fence.check(current.map(to_u64))?;
    }
    for condition in &batch.conditions {
        let (table, key) = condition.target();
        let value: Option<Vec<u8>> = tx
            .prepare_cached("SELECT value FROM kv WHERE tbl = ?1 AND key = ?2")
            .map_err(db)?
            .query_row(params![table.as_str(), key.as_bytes()], |r| {
                Ok(value_bytes(table, key, r.get_ref(0)?))
            })
            .optional()
            .map_err(db)?
            .transpose()?;
        condition.check(value.as_deref())?;
    }
    for op in batch.into_ops() {
        match op {
            Op::Put { table, key, value } => {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO kv (tbl, key, value) VALUES (?1, ?2, ?3)",
                )
                .map_err(db)?
                .execute(params![table.as_str(), key.as_bytes(), value])
                .map_err(db)?;
            }
            Op::Delete { table, key } => {
                tx.prepare_cached("DELETE FROM kv WHERE tbl = ?1 AND key = ?2")
                    .map_err(db)?
                    .execute(params![table.as_str(), key.as_bytes()])
                    .map_err(db)?;
            }
            Op::PutBlob { hash, bytes } => {
                let size = to_i64(bytes.len() as u64);
                tx.prepare_cached(
                    "INSERT OR IGNORE INTO blobs (hash, size, bytes) VALUES (?1, ?2, ?3)",
                )
                .map_err(db)?
                .execute(params![hash, size, bytes])
                .map_err(db)?;
            }
        }
    }
    Ok(())
}

#[async_trait::async_trait]
impl Storage for SqliteStorage {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let key = key.to_owned();
        self.call(move |conn, path| {
            conn.prepare_cached("SELECT value FROM kv WHERE tbl = ?1 AND key = ?2")
                .and_then(|mut st| {
                    st.query_row(params![table.as_str(), key.as_bytes()], |r| {
                        Ok(value_bytes(table, &key, r.get_ref(0)?))
                    })
                    .optional()
                })
                .map_err(|e| backend(path, &e))?
                .transpose()
        })
        .await
    }

    async fn scan_prefix(
        &self,
        table: Table,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        let prefix = prefix.as_bytes().to_vec();
        self.call(move |conn, path| {
            let db = |e: rusqlite::Error| backend(path, &e);
            let upper = prefix_upper_bound(&prefix);
            let sql = if upper.is_some() {
                "SELECT key, value FROM kv WHERE tbl = ?1 AND key >= ?2 AND key < ?3 ORDER BY key"
            } else {
                "SELECT key, value FROM kv WHERE tbl = ?1 AND key >= ?2 ORDER BY key"
            };
            let mut st = conn.prepare_cached(sql).map_err(db)?;
            let mut rows = match &upper {
                Some(upper) => st.query(params![table.as_str(), prefix, upper]),
                None => st.query(params![table.as_str(), prefix]),
            }
            .map_err(db)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db)? {
                let raw_key = row.get_ref(0).map_err(db)?;
                let key_bytes = match raw_key {
                    rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => b,
                    other => {
                        return Err(corrupt(
                            table,
                            "?",
                            format!("a key column holds {:?}", other.data_type()),
                        ));
                    }
                };
                let key = String::from_utf8(key_bytes.to_vec()).map_err(|e| {
                    corrupt(
                        table,
                        &String::from_utf8_lossy(key_bytes),
                        format!("key is not UTF-8: {e}"),
                    )
                })?;
                // Keys stored as TEXT by hand would bypass the byte range; check.
                if !key.as_bytes().starts_with(&prefix) {
                    continue;
                }
                let value = value_bytes(table, &key, row.get_ref(1).map_err(db)?)?;
                out.push((key, value));
            }
            Ok(out)
        })
        .await
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        let hook = self.hook.lock().ok().and_then(|h| h.clone());
        if let Some(hook) = hook {
            hook(&batch)?;
        }
        let after = self.after_hook.lock().ok().and_then(|h| h.clone());
        let kept = after.as_ref().map(|_| batch.clone());
        self.call(move |conn, path| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| backend(path, &e))?;
            // On error the transaction is dropped, which rolls it back.
            check_and_apply(&tx, batch, path)?;
            tx.commit().map_err(|e| backend(path, &e))
        })
        .await?;
        self.commits.fetch_add(1, Ordering::SeqCst);
        if let (Some(after), Some(batch)) = (after, kept) {
            // Ignored on purpose: the batch is already durable.
            let _ = after(&batch);
        }
        Ok(())
    }

    async fn put_blob(&self, hash: &str, bytes: Vec<u8>) -> Result<BlobRef, StorageError> {
        let blob = BlobRef::claimed(hash, &bytes)?;
        let stored = blob.clone();
        self.blob_writes.fetch_add(1, Ordering::SeqCst);
        self.call(move |conn, path| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO blobs (hash, size, bytes) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut st| st.execute(params![stored.hash, to_i64(stored.size), bytes]))
            .map_err(|e| backend(path, &e))?;
            Ok(())
        })
        .await?;
        Ok(blob)
    }

    async fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let hash = hash.to_owned();
        self.call(move |conn, path| {
            let bytes: Option<Vec<u8>> = conn
                .prepare_cached("SELECT bytes FROM blobs WHERE hash = ?1")
                .and_then(|mut st| st.query_row([&hash], |r| r.get(0)).optional())
                .map_err(|e| backend(path, &e))?;
            if let Some(b) = &bytes {
                // A blob whose bytes no longer hash to its name is corrupt.
                let actual = BlobRef::of(b).hash;
                if actual != hash {
                    return Err(StorageError::Backend(format!(
                        "blob {hash} in {} is corrupt (its bytes hash to {actual}); it was left untouched: delete it and let the run re-create or report it",
                        path.display()
                    )));
                }
            }
            Ok(bytes)
        })
        .await
    }

    async fn delete_blob(&self, hash: &str) -> Result<bool, StorageError> {
        let hash = hash.to_owned();
        self.call(move |conn, path| {
            conn.prepare_cached("DELETE FROM blobs WHERE hash = ?1")
                .and_then(|mut st| st.execute([&hash]))
                .map(|n| n > 0)
                .map_err(|e| backend(path, &e))
        })
        .await
    }

    async fn list_blobs(&self) -> Result<Vec<String>, StorageError> {
        self.call(|conn, path| {
            let db = |e: rusqlite::Error| backend(path, &e);
            let mut st = conn
                .prepare_cached("SELECT hash FROM blobs ORDER BY hash")
                .map_err(db)?;
            let rows = st.query_map([], |r| r.get::<_, String>(0)).map_err(db)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(db)
        })
        .await
    }

    async fn current_lease(
        &self,
        session: &SessionId,
    ) -> Result<Option<LeaseRecord>, StorageError> {
        let s = session.clone();
        self.call(move |conn, path| {
            read_lease(conn, &s)
                .map_err(|e| backend(path, &e))?
                .map(|row| lease_from_row(&s, row))
                .transpose()
        })
        .await
    }

    /// One `BEGIN IMMEDIATE` transaction around `lease_cas_in`.
    async fn lease_cas(
        &self,
        expected: Option<&LeaseRecord>,
        new: &LeaseRecord,
    ) -> Result<LeaseCas, StorageError> {
        let swap = [LeaseSwap {
            expected: expected.cloned(),
            new: new.clone(),
        }];
        let mut answers = self.lease_cas_all(&swap).await?;
        answers.pop().ok_or_else(|| {
            StorageError::Backend("a lease compare-and-set gave no answer".to_owned())
        })
    }

    /// All reads on one hop to the connection thread.
    async fn current_leases(
        &self,
        sessions: &[SessionId],
    ) -> Result<Vec<Option<LeaseRecord>>, StorageError> {
        let sessions = sessions.to_vec();
        self.call(move |conn, path| {
            sessions
                .iter()
                .map(|s| {
                    read_lease(conn, s)
                        .map_err(|e| backend(path, &e))?
                        .map(|row| lease_from_row(s, row))
                        .transpose()
                })
                .collect()
        })
        .await
    }

    /// All swaps in one transaction: one commit, however many leases.
    async fn lease_cas_all(&self, swaps: &[LeaseSwap]) -> Result<Vec<LeaseCas>, StorageError> {
        if swaps.is_empty() {
            return Ok(Vec::new());
        }
        let swaps = swaps.to_vec();
        self.call(move |conn, path| lease_cas_in_one_commit(conn, path, &swaps))
            .await
    }

    fn lease_holder_gone(&self, holder: &OwnerId) -> bool {
        (self.liveness)(holder) == Liveness::Dead
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
}
