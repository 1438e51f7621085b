//! SQLite storage: `agent_kernel::host::Storage` over one database file (WAL,
//! `synchronous=FULL`, numbered migrations), with every batch and every lease
//! step in one `BEGIN IMMEDIATE` transaction. All SQLite calls run on one
//! dedicated connection thread, never on the async executor.
//!
//! Why a dedicated thread rather than `tokio::task::spawn_blocking`: the same
//! storage serves the tokio host and the deterministic simulator (which has no
//! tokio runtime), and one connection per store keeps writes ordered without
//! a pool. Several stores (processes, simulated tabs) may open one file:
//! SQLite's own locking and the lease epochs keep them apart.
//!
//! Layout (`migrations/0001_init.sql`): `kv(tbl, key, value)` for every
//! kernel table, `blobs(hash, size, bytes)`, `leases(session, owner, epoch,
//! expires_at_ms)`. Keys are stored as BLOBs so that SQLite orders them by
//! their UTF-8 bytes, as the kernel's prefix scans require.
//!
//! The database file is created 0600 before SQLite opens it, so that its
//! `-wal` / `-shm` files are 0600 too ([`crate::private`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use agent_kernel::host::{
    Batch, BlobRef, LeaseCas, LeaseRecord, LeaseSwap, Op, Storage, StorageError, Table,
};
use agent_kernel::{OwnerId, SessionId};
use futures::channel::oneshot;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::process::{Liveness, owner_liveness};

/// The numbered migrations, applied in order; `PRAGMA user_version` records
/// how many ran. Never edit a released one: add the next number.
const MIGRATIONS: &[(u32, &str)] = &[(1, include_str!("../migrations/0001_init.sql"))];

/// How long one connection waits for another process's write lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opening a database failed. Each variant says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    #[error(
        "cannot open the database {path}: {detail}; check that the data directory exists and is readable and writable (set --data-dir or AGENTRT_DATA_DIR)"
    )]
    Io { path: PathBuf, detail: String },
    #[error(
        "{path} is not an agentrt database or is corrupt ({detail}); it was left untouched: move it aside or restore a backup, then start again"
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "the database {path} has schema version {found}, newer than this agentrt knows ({known}); use a newer agentrt or another data directory"
    )]
    TooNew {
        path: PathBuf,
        found: u32,
        known: u32,
    },
    #[error("the database {path} could not be prepared: {detail}")]
    Setup { path: PathBuf, detail: String },
}

/// Decides whether a lease owner is still alive; see [`crate::process`].
pub type LivenessCheck = Arc<dyn Fn(&OwnerId) -> Liveness + Send + Sync>;

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

fn classify(path: &Path, e: &rusqlite::Error) -> OpenError {
    use rusqlite::ffi::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => OpenError::Corrupt {
            path: path.to_owned(),
            detail: e.to_string(),
        },
        Some(
            ErrorCode::CannotOpen
            | ErrorCode::PermissionDenied
            | ErrorCode::ReadOnly
            | ErrorCode::SystemIoFailure,
        ) => OpenError::Io {
            path: path.to_owned(),
            detail: e.to_string(),
        },
        _ => OpenError::Setup {
            path: path.to_owned(),
            detail: e.to_string(),
        },
    }
}

/// Map a SQLite error during normal operation to the kernel's error.
fn backend(path: &Path, e: &rusqlite::Error) -> StorageError {
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

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
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

/// Take `step` again while SQLite answers "busy" without having waited
/// (until `deadline`). SQLite skips the busy handler when a connection that
/// read the file must upgrade to write while another process prepares the
/// same database: two `agentrt` processes opening a fresh data directory.
fn retry_while_busy<T>(
    deadline: std::time::Instant,
    mut step: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    use rusqlite::ffi::ErrorCode;
    let mut pause = Duration::from_millis(2);
    loop {
        match step() {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

fn apply_migrations(
    conn: &mut Connection,
    path: &Path,
    deadline: std::time::Instant,
) -> Result<(), OpenError> {
    let known = MIGRATIONS.last().map_or(0, |(n, _)| *n);
    let found: u32 = retry_while_busy(deadline, || {
        conn.pragma_query_value(None, "user_version", |r| r.get(0))
    })
    .map_err(|e| classify(path, &e))?;
    if found > known {
        return Err(OpenError::TooNew {
            path: path.to_owned(),
            found,
            known,
        });
    }
    for (number, sql) in MIGRATIONS.iter().filter(|(n, _)| *n > found) {
        retry_while_busy(deadline, || apply_migration(conn, *number, sql))
            .map_err(|e| classify(path, &e))?;
    }
    Ok(())
}

/// Apply migration `number` unless another process got there first.
fn apply_migration(conn: &mut Connection, number: u32, sql: &str) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Another process may have migrated between our read and our lock.
    let now: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if now >= number {
        return Ok(());
    }
    tx.execute_batch(sql)?;
    tx.pragma_update(None, "user_version", number)?;
    tx.commit()
}

fn open_connection(path: &Path) -> Result<Connection, OpenError> {
    // The file exists 0600 before SQLite sees it; its -wal/-shm follow its mode.
    crate::private::prepare_private_database(path).map_err(|e| OpenError::Io {
        path: path.to_owned(),
        detail: e.to_string(),
    })?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| classify(path, &e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| classify(path, &e))?;
    // Each step is idempotent, so a step another process's preparation
    // refused is simply taken again.
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    retry_while_busy(deadline, || {
        // The first statement that reads the file header reports a non-database.
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
    })
    .map_err(|e| classify(path, &e))
    .and_then(|mode| {
        if mode.eq_ignore_ascii_case("wal") {
            Ok(())
        } else {
            Err(OpenError::Setup {
                path: path.to_owned(),
                detail: format!("journal_mode is {mode}, WAL was refused"),
            })
        }
    })?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(|e| classify(path, &e))?;
    conn.set_prepared_statement_cache_capacity(64);
    apply_migrations(&mut conn, path, deadline)?;
    // A database of an older version may be 0644: ours, so made private.
    crate::private::tighten_database_files(path);
    Ok(conn)
}

impl SqliteStorage {
    /// Open (creating if needed) the database at `path` and migrate it.
    /// Lease owners are judged alive or dead through [`owner_liveness`].
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        Self::open_with_liveness(path, Arc::new(owner_liveness)).await
    }

    /// Open with a custom owner liveness check (tests, simulated tabs).
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

/// The one atomic lease step of this backend, inside the caller's
/// transaction: a conditional upsert (insert only if absent when nothing is
/// expected; update only the row that is exactly the expected record
/// otherwise), and on a refusal the row as it is.
fn lease_cas_in(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    expected: Option<&LeaseRecord>,
    new: &LeaseRecord,
) -> Result<LeaseCas, StorageError> {
    let db = |e: rusqlite::Error| backend(path, &e);
    let changed = match expected {
        None => tx
            .prepare_cached(
                "INSERT INTO leases (session, owner, epoch, expires_at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (session) DO NOTHING",
            )
            .map_err(db)?
            .execute(params![
                new.session.as_str(),
                new.owner.as_str(),
                to_i64(new.epoch),
                to_i64(new.expires_at_ms)
            ])
            .map_err(db)?,
        Some(expected) => tx
            .prepare_cached(
                "UPDATE leases SET owner = ?2, epoch = ?3, expires_at_ms = ?4
                 WHERE session = ?1 AND owner = ?5 AND epoch = ?6 AND expires_at_ms = ?7",
            )
            .map_err(db)?
            .execute(params![
                new.session.as_str(),
                new.owner.as_str(),
                to_i64(new.epoch),
                to_i64(new.expires_at_ms),
                expected.owner.as_str(),
                to_i64(expected.epoch),
                to_i64(expected.expires_at_ms)
            ])
            .map_err(db)?,
    };
    if changed == 1 {
        return Ok(LeaseCas::Swapped);
    }
    let current = read_lease(tx, &new.session)
        .map_err(db)?
        .map(|(owner, epoch, expires)| lease_record(&new.session, owner, epoch, expires))
        .transpose()?;
    Ok(LeaseCas::Refused { current })
}

/// Every swap of `swaps` in one `BEGIN IMMEDIATE` transaction, one commit
/// for all of them (a heartbeat's renewals).
fn lease_cas_in_one_commit(
    conn: &mut Connection,
    path: &Path,
    swaps: &[LeaseSwap],
) -> Result<Vec<LeaseCas>, StorageError> {
    let db = |e: rusqlite::Error| backend(path, &e);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db)?;
    let answers = swaps
        .iter()
        .map(|swap| lease_cas_in(&tx, path, swap.expected.as_ref(), &swap.new))
        .collect::<Result<Vec<_>, _>>()?;
    if answers.contains(&LeaseCas::Swapped) {
        tx.commit().map_err(db)?;
    }
    Ok(answers)
}

fn read_lease(
    conn: &Connection,
    session: &SessionId,
) -> rusqlite::Result<Option<(String, i64, i64)>> {
    conn.prepare_cached("SELECT owner, epoch, expires_at_ms FROM leases WHERE session = ?1")?
        .query_row([session.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()
}

fn lease_record(
    session: &SessionId,
    owner: String,
    epoch: i64,
    expires: i64,
) -> Result<LeaseRecord, StorageError> {
    let owner = OwnerId::new(owner).map_err(|e| {
        StorageError::Backend(format!(
            "the lease row of session {session} names an invalid owner ({e}); delete that row from the leases table"
        ))
    })?;
    Ok(LeaseRecord {
        session: session.clone(),
        owner,
        epoch: to_u64(epoch),
        expires_at_ms: to_u64(expires),
    })
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
        let blob = BlobRef::of(&bytes);
        if blob.hash != hash {
            return Err(StorageError::BlobHashMismatch {
                claimed: hash.to_owned(),
                actual: blob.hash,
            });
        }
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
                .map(|(o, e, x)| lease_record(&s, o, e, x))
                .transpose()
        })
        .await
    }

    /// One `BEGIN IMMEDIATE` transaction around [`lease_cas_in`].
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
                        .map(|(o, e, x)| lease_record(s, o, e, x))
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

    /// S3.1: connections (standing in for processes) that open one fresh
    /// database at the same moment all get it prepared; none is refused with
    /// "database is locked" (it failed in CI when two `agentrt run`s raced).
    #[test]
    fn many_openers_of_one_fresh_database_all_succeed() {
        for _ in 0..300 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("agentrt.sqlite3");
            let barrier = Arc::new(std::sync::Barrier::new(6));
            let handles: Vec<_> = (0..6)
                .map(|_| {
                    let path = path.clone();
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        barrier.wait();
                        open_connection(&path).map(|_| ())
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap().unwrap();
            }
        }
    }

    /// A heartbeat's renewal of many sessions is one commit: the WAL on
    /// disk grows by the leases table's few pages, not by a frame per
    /// session, as it did when each lease was renewed on its own.
    #[tokio::test]
    async fn renewing_many_leases_writes_one_commit_to_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentrt.sqlite3");
        let storage =
            SqliteStorage::open_inline(&path, Arc::new(|_: &OwnerId| Liveness::Unknown)).unwrap();
        let owner = OwnerId::new("process-a").unwrap();
        let ttl = 30_000;
        let mut held = Vec::new();
        for i in 0..200 {
            let session = SessionId::new(format!("session-{i:03}")).unwrap();
            let lease = storage
                .try_acquire_lease(&session, &owner, 1_000, ttl)
                .await
                .unwrap();
            held.push((session, lease.epoch));
        }
        let wal = format!("{}-wal", path.display());
        let before = std::fs::metadata(&wal).unwrap().len();
        let renewed = storage.renew_leases(&owner, &held, 2_000, ttl).await;
        assert_eq!(renewed.len(), 200);
        for answer in &renewed {
            assert_eq!(answer.as_ref().unwrap().expires_at_ms, 2_000 + ttl);
        }
        let grown = std::fs::metadata(&wal).unwrap().len() - before;
        let frame = 4096 + 24;
        assert!(
            grown <= 8 * frame,
            "renewing 200 leases wrote {grown} bytes of WAL ({} frames)",
            grown / frame
        );
        assert!(grown > 0, "the renewal reached the disk");
    }
}
