//! The tokio host: a tokio [`Executor`], the system [`Clock`], OS
//! [`Entropy`], and [`NativeHost`], which opens the store (the SQLite
//! database of a data directory, or a shared PostgreSQL database when
//! [`NativeHostOptions::store`] names one, S14) and bundles everything into
//! the kernel's [`Host`], together with a process [`LeaseManager`] whose
//! leases a heartbeat keeps renewed.
//!
//! Lease time-to-live: [`DEFAULT_LEASE_TTL`] (30 s) unless
//! [`NativeHostOptions::lease_ttl`] says otherwise; the heartbeat renews every
//! held lease each third of it. A process that dies stops renewing: another
//! process takes its lease at once when `/proc` shows the owner gone (an
//! owner of this boot and PID namespace only, [`crate::process`]), and
//! otherwise when the time-to-live runs out.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_kernel::OwnerId;
use agent_kernel::host::{Clock, Entropy, Executor, Host, LeaseManager, Lifecycle, LifecycleEvent};
use agent_kernel::maybe_send::BoxFuture;

use agent_kernel::host::Storage;
use agent_store_postgres::{DeadOwnerCheck, PostgresOptions, PostgresStorage};

use crate::process::{Liveness, owner_liveness, process_owner};
use crate::sqlite::{OpenError, SqliteStorage};

/// How long a process lease lives without renewal.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);
/// The shortest time-to-live accepted (the heartbeat runs at a third of it).
pub const MIN_LEASE_TTL: Duration = Duration::from_millis(300);
/// The database file inside a data directory.
pub const DATABASE_FILE: &str = "agentrt.sqlite3";

/// Spawns on a tokio runtime; blocking work goes to tokio's blocking pool.
#[derive(Debug, Clone)]
pub struct TokioExecutor {
    handle: tokio::runtime::Handle,
}

impl TokioExecutor {
    pub fn new(handle: tokio::runtime::Handle) -> Self {
        Self { handle }
    }

    /// The executor of the runtime this is called from, if any.
    pub fn current() -> Option<Self> {
        tokio::runtime::Handle::try_current().ok().map(Self::new)
    }
}

impl Executor for TokioExecutor {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        // Detached on purpose: actors report their own failures to their parent.
        drop(self.handle.spawn(task));
    }

    fn spawn_blocking(&self, job: Box<dyn FnOnce() + Send + 'static>) {
        // A panicking job is contained by tokio; its waiter sees its channel closed.
        drop(self.handle.spawn_blocking(job));
    }
}

/// Wall time from `SystemTime`, monotonic time from `Instant`, sleep on tokio.
#[derive(Debug, Clone)]
pub struct SystemClock {
    start: Instant,
    handle: tokio::runtime::Handle,
}

impl SystemClock {
    pub fn new(handle: tokio::runtime::Handle) -> Self {
        Self {
            start: Instant::now(),
            handle,
        }
    }
}

impl Clock for SystemClock {
    fn wall_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }

    fn monotonic(&self) -> Duration {
        self.start.elapsed()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let sleep = {
            let _entered = self.handle.enter();
            tokio::time::sleep(duration)
        };
        Box::pin(sleep)
    }
}

/// Random bytes from the operating system (`getrandom`).
#[derive(Debug, Clone, Copy, Default)]
pub struct OsEntropy;

impl OsEntropy {
    /// Check once that the OS source works, so that `fill` can rely on it.
    pub fn probe() -> Result<Self, HostError> {
        let mut probe = [0u8; 8];
        getrandom::fill(&mut probe).map_err(|e| HostError::Entropy(e.to_string()))?;
        Ok(Self)
    }
}

impl Entropy for OsEntropy {
    /// Invariant: [`OsEntropy::probe`] showed the OS source works; Linux's
    /// `getrandom` does not fail afterwards. Should it fail anyway, this
    /// panics rather than hand out predictable key material.
    fn fill(&self, buf: &mut [u8]) {
        if let Err(e) = getrandom::fill(buf) {
            panic!("the OS random source failed after working before: {e}");
        }
    }
}

/// Setting up the native host failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    #[error(
        "the data directory {path} cannot be used: {detail}; pass a writable --data-dir or set AGENTRT_DATA_DIR"
    )]
    DataDir { path: PathBuf, detail: String },
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Postgres(#[from] agent_store_postgres::OpenError),
    #[error(
        "the store {0:?} is not one agentrt knows; use postgres://USER@HOST:PORT/DATABASE (or postgresql://), or leave it out for SQLite in the data directory"
    )]
    StoreUrl(String),
    #[error("the operating system's random source does not work: {0}")]
    Entropy(String),
    #[error("{0}")]
    Owner(String),
    #[error(
        "lease time-to-live {0:?} is too short: use at least {MIN_LEASE_TTL:?} (the heartbeat renews at a third of it)"
    )]
    LeaseTtl(Duration),
    #[error("the native host needs a tokio runtime; call it from inside one")]
    NoRuntime,
}

/// Options of [`NativeHost::open_with`].
#[derive(Debug, Clone)]
pub struct NativeHostOptions {
    /// How long a lease lives without renewal (default [`DEFAULT_LEASE_TTL`]).
    pub lease_ttl: Duration,
    /// A fixed owner id (tests); by default one naming this process.
    pub owner: Option<OwnerId>,
    /// A PostgreSQL database (`postgres://…`) shared with other processes
    /// and machines, instead of SQLite in the data directory.
    pub store: Option<String>,
}

impl Default for NativeHostOptions {
    fn default() -> Self {
        Self {
            lease_ttl: DEFAULT_LEASE_TTL,
            owner: None,
            store: None,
        }
    }
}

/// The native host: SQLite in a data directory (or a shared PostgreSQL
/// database), tokio, the system clock, OS entropy and this process's lease
/// manager with its heartbeat.
pub struct NativeHost {
    host: Host,
    /// The SQLite store, when the host uses one (not with PostgreSQL).
    sqlite: Option<Arc<SqliteStorage>>,
    /// The PostgreSQL store, when the host uses one.
    postgres: Option<Arc<PostgresStorage>>,
    owner: OwnerId,
    lease_ttl: Duration,
    data_dir: PathBuf,
    handle: tokio::runtime::Handle,
    heartbeats: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for NativeHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeHost")
            .field("data_dir", &self.data_dir)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// Make sure `dir` exists (private, see [`crate::private`]) and is a
/// writable directory.
/// Returns the warning about a looser existing directory, if any.
fn prepare_data_dir(dir: &Path) -> Result<Option<String>, HostError> {
    let fail = |detail: String| HostError::DataDir {
        path: dir.to_owned(),
        detail,
    };
    if dir.exists() && !dir.is_dir() {
        return Err(fail("it exists and is not a directory".into()));
    }
    // Created 0700 when missing; an existing looser one is warned about.
    let warning = crate::private::prepare_private_dir(dir).map_err(|e| fail(e.to_string()))?;
    let meta = std::fs::metadata(dir).map_err(|e| fail(e.to_string()))?;
    if meta.permissions().readonly() {
        return Err(fail("it is read-only".into()));
    }
    Ok(warning)
}

/// Open the PostgreSQL store at `url` (`postgres://` or `postgresql://`).
/// A lease holder whose process `/proc` shows gone (this boot and PID
/// namespace only) is taken over at once, as with SQLite; any other holder
/// keeps its lease until the time-to-live runs out.
async fn open_postgres(url: &str) -> Result<PostgresStorage, HostError> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(HostError::StoreUrl(redact(url)));
    }
    let dead: DeadOwnerCheck = Arc::new(|owner: &OwnerId| owner_liveness(owner) == Liveness::Dead);
    Ok(PostgresStorage::connect_with(url, PostgresOptions::default(), Some(dead)).await?)
}

/// `url` without a password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:…{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl NativeHost {
    /// Open the host over `data_dir` (created if missing) with default options.
    /// Must be called inside a tokio runtime.
    pub async fn open(data_dir: impl AsRef<Path>) -> Result<Self, HostError> {
        Self::open_with(data_dir, NativeHostOptions::default()).await
    }

    /// Open the host over `data_dir` with `options`.
    pub async fn open_with(
        data_dir: impl AsRef<Path>,
        options: NativeHostOptions,
    ) -> Result<Self, HostError> {
        if options.lease_ttl < MIN_LEASE_TTL {
            return Err(HostError::LeaseTtl(options.lease_ttl));
        }
        let handle = tokio::runtime::Handle::try_current().map_err(|_| HostError::NoRuntime)?;
        let data_dir = data_dir.as_ref().to_owned();
        let loose_dir = prepare_data_dir(&data_dir)?;
        let (storage, sqlite, postgres): (Arc<dyn Storage>, _, _) = match options.store.as_deref() {
            None => {
                let sqlite = Arc::new(crate::sqlite::open(data_dir.join(DATABASE_FILE)).await?);
                (sqlite.clone(), Some(sqlite), None)
            }
            Some(url) => {
                let postgres = Arc::new(open_postgres(url).await?);
                (postgres.clone(), None, Some(postgres))
            }
        };
        if let Some(warning) = loose_dir {
            crate::private::warn(&warning);
        }
        let entropy = Arc::new(OsEntropy::probe()?);
        let owner = match options.owner {
            Some(owner) => owner,
            None => process_owner(entropy.as_ref()).map_err(|e| HostError::Owner(e.to_string()))?,
        };
        let host = Host {
            storage: storage.clone(),
            clock: Arc::new(SystemClock::new(handle.clone())),
            executor: Arc::new(TokioExecutor::new(handle.clone())),
            entropy,
            lifecycle: Lifecycle::new(),
            durable: true,
        };
        Ok(Self {
            host,
            sqlite,
            postgres,
            owner,
            lease_ttl: options.lease_ttl,
            data_dir,
            handle,
            heartbeats: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// This process's lease owner id.
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The lease time-to-live this host was opened with.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// Renew every lease `leases` holds each third of the time-to-live, for
    /// as long as this host lives (the supervisor's `Runtime` builds its own
    /// manager: hand it here).
    pub fn keep_renewed(&self, leases: &LeaseManager) {
        let task = self
            .handle
            .spawn(heartbeat(leases.clone(), self.lease_ttl / 3));
        if let Ok(mut beats) = self.heartbeats.lock() {
            beats.push(task);
        }
    }

    /// A lease manager for this process's owner, renewed by the heartbeat.
    pub fn lease_manager(&self) -> LeaseManager {
        let leases = LeaseManager::new(
            self.host.storage.clone(),
            self.host.clock.clone(),
            self.host.executor.clone(),
            self.owner.clone(),
            self.lease_ttl,
        );
        self.keep_renewed(&leases);
        leases
    }

    /// This process stops executing runs (S2.5): `ExecutorLost` is raised,
    /// so every run a supervisor of this host is driving is interrupted
    /// (`page_interrupted`, with an `executor_lost` activity naming the
    /// host), its call in flight left to Resume's replay rule. Runs waiting
    /// for a person are untouched: they need no executor.
    pub fn shut_down(&self) {
        tracing::info!(owner = %self.owner, "host shutting down: interrupting the runs it executes");
        self.host.lifecycle.emit(LifecycleEvent::ExecutorLost);
    }

    /// On SIGINT or SIGTERM, [`NativeHost::shut_down`]; a second signal
    /// exits at once (status 130). For a process that drives runs and
    /// should leave them resumable when it is stopped.
    pub fn shut_down_on_signal(&self) {
        let lifecycle = self.host.lifecycle.clone();
        let owner = self.owner.clone();
        self.handle.spawn(async move {
            let Ok(mut term) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            else {
                return;
            };
            for signals in 0.. {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
                if signals > 0 {
                    std::process::exit(130);
                }
                tracing::info!(%owner, "signal: interrupting the runs this process executes");
                eprintln!(
                    "stopping: the runs in progress are interrupted and continue on resume (signal again to exit at once)"
                );
                lifecycle.emit(LifecycleEvent::ExecutorLost);
            }
        });
    }

    /// The kernel's host bundle.
    pub fn host(&self) -> &Host {
        &self.host
    }
    /// The SQLite storage itself (commit counts, footprint, integrity check);
    /// `None` when the host uses PostgreSQL.
    pub fn storage(&self) -> Option<&Arc<SqliteStorage>> {
        self.sqlite.as_ref()
    }
    /// The PostgreSQL storage itself (commits, fence refusals, retries);
    /// `None` when the host uses SQLite.
    pub fn postgres(&self) -> Option<&Arc<PostgresStorage>> {
        self.postgres.as_ref()
    }
    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

impl Drop for NativeHost {
    fn drop(&mut self) {
        if let Ok(beats) = self.heartbeats.lock() {
            for beat in beats.iter() {
                beat.abort();
            }
        }
    }
}

/// Renew every held lease every `every`; a lost lease is logged (the run that
/// held it is refused at its next fenced write).
async fn heartbeat(leases: LeaseManager, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for error in leases.renew_all().await {
            tracing::warn!(owner = %leases.owner(), %error, "lease lost at renewal");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_addresses_lose_their_password_in_messages() {
        assert_eq!(
            redact("mysql://root:hunter2@db:3306/x"),
            "mysql://root:…@db:3306/x"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("no scheme at all"), "no scheme at all");
    }

    #[tokio::test]
    async fn a_store_that_is_not_postgres_is_refused_before_any_connection() {
        let err = open_postgres("mysql://root:hunter2@127.0.0.1/agentrt")
            .await
            .expect_err("not postgres");
        assert!(matches!(err, HostError::StoreUrl(_)), "{err:?}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
