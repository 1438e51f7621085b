//! A worker's health report ([`WorkerStatus`]): the status file, the store
//! record `agentrt/workers/<owner>` and reading every worker's record back
//! (`agentrt workers`).

use agent_kernel::host::{Record, StorageError, Table};
use serde::{Deserialize, Serialize};

/// Where worker status records live in `Table::Meta`.
pub const WORKER_PREFIX: &str = "agentrt/workers/";

/// What a worker reports about itself (the status file, the store record
/// `agentrt/workers/<owner>`, `agentrt workers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// The worker's lease owner id (process, boot, start time).
    pub owner: String,
    pub pid: u32,
    /// `running`, `draining` (SIGTERM received) or `stopped`.
    pub state: String,
    pub started_at_ms: u64,
    pub updated_at_ms: u64,
    /// The runs executing now.
    pub held: Vec<String>,
    pub runs_held: u64,
    /// Requests in the queue at the last read (all workers').
    pub queue_length: u64,
    /// Queue entries that do not decode (left alone; repair or delete them).
    pub queue_corrupt: u64,
    /// Runs this worker took and saw end `completed`.
    pub completed: u64,
    /// ... end `interrupted` (by a signal, a lost store, or waiting for a
    /// decision on an `effect_unknown` call).
    pub interrupted: u64,
    /// ... end waiting for a person (approval, input).
    pub waiting: u64,
    /// ... end `failed` or `cancelled`.
    pub failed: u64,
    /// Requests dropped because they could not be run (refused config,
    /// a resume of a run that was not interrupted, a record naming an
    /// endpoint or a key's variable, S14.2), each logged.
    pub refused: u64,
    /// Queued starts whose run existed already (a lost worker had started it).
    pub already_started: u64,
    /// Runs left `running` by lost workers that this worker interrupted.
    pub recovered: u64,
    /// Store operations that failed (unreachable database), all retried.
    pub store_errors: u64,
    /// Batches the store's fence refused (a stale lease epoch), PostgreSQL only.
    pub stale_refusals: u64,
    /// Batches committed, PostgreSQL only.
    pub commits: u64,
}

/// The store record of a worker's status.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StatusRecord(pub WorkerStatus);

impl Record for StatusRecord {
    const TABLE: Table = Table::Meta;
    fn key(&self) -> String {
        format!("{WORKER_PREFIX}{}", self.0.owner)
    }
}

/// Every worker status stored, and the keys of records that do not decode.
pub async fn read_workers(
    storage: &dyn agent_kernel::host::Storage,
) -> Result<(Vec<WorkerStatus>, Vec<String>), StorageError> {
    let mut workers = Vec::new();
    let mut corrupt = Vec::new();
    for (key, bytes) in storage.scan_prefix(Table::Meta, WORKER_PREFIX).await? {
        match serde_json::from_slice::<WorkerStatus>(&bytes) {
            Ok(w) => workers.push(w),
            Err(_) => corrupt.push(key),
        }
    }
    Ok((workers, corrupt))
}
