//! Where a run's records are and how they are read back: the run record
//! with its exact bytes (for compare-and-set), its configuration's
//! [`RunMeta`], checkpoint, pending requests and journal, and the ids of
//! the requests made to the person about a call.

use serde::Serialize;

use agent_kernel::host::{BlobRef, Record, Storage, StorageError, StorageExt, Table};
use agent_kernel::ids::{CallId, RequestId, RunId};
use agent_kernel::journal::JournalRecord;
use agent_kernel::run::{AgentRun, Checkpoint, PendingKind, PendingRequest};

use crate::error::RunError;

/// Meta record naming the blob that holds a run's `RunConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RunMeta {
    pub run: RunId,
    pub config: BlobRef,
    /// Where the run's conversation begins in its transcript chain (S12).
    #[serde(default)]
    pub window: crate::transcript::Window,
    /// The summary the run sends before its window, and whether it makes
    /// it first (S12.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<crate::conversation::SummaryUse>,
}

impl Record for RunMeta {
    const TABLE: Table = Table::Meta;
    fn key(&self) -> String {
        format!("run_config/{}", self.run)
    }
}

/// `<run>/`: the prefix of every per-run key.
pub fn run_prefix(run: &RunId) -> String {
    format!("{run}/")
}

/// The run record and its exact stored bytes (for compare-and-set).
pub async fn load_run(storage: &dyn Storage, run: &RunId) -> Result<(AgentRun, Vec<u8>), RunError> {
    let bytes = storage
        .get(Table::Runs, run.as_str())
        .await?
        .ok_or_else(|| RunError::NotFound(run.clone()))?;
    let record = serde_json::from_slice(&bytes).map_err(|e| {
        RunError::Storage(StorageError::Corrupt {
            table: Table::Runs,
            key: run.to_string(),
            detail: e.to_string(),
        })
    })?;
    Ok((record, bytes))
}

/// The run's checkpoint (one record, the latest the run took).
pub async fn latest_checkpoint(
    storage: &dyn Storage,
    run: &RunId,
) -> Result<Option<Checkpoint>, StorageError> {
    storage.get_record(&Checkpoint::key_for(run)).await
}

pub async fn pending_of(
    storage: &dyn Storage,
    run: &RunId,
) -> Result<Vec<PendingRequest>, StorageError> {
    storage.scan_records(&run_prefix(run)).await
}

pub async fn journal_of(
    storage: &dyn Storage,
    run: &RunId,
) -> Result<Vec<JournalRecord>, StorageError> {
    storage.scan_records(&run_prefix(run)).await
}

/// The id of a request to the person about `call`: `<prefix>-<call>`, so
/// that a replay names the same request.
pub(crate) fn request_id(prefix: &str, call: &CallId) -> Result<RequestId, RunError> {
    Ok(RequestId::new(format!("{prefix}-{call}"))?)
}

/// The id of the decision asked about a call whose effect is unknown.
pub(crate) fn decision_request(call: &CallId) -> Result<RequestId, RunError> {
    request_id("decide", call)
}

/// The pending-decision request for an `effect_unknown` record.
pub(super) fn decision_pending(
    run: &RunId,
    record: &JournalRecord,
    now: u64,
) -> Result<PendingRequest, RunError> {
    Ok(PendingRequest {
        run: run.clone(),
        id: decision_request(&record.call_id)?,
        kind: PendingKind::Decision {
            call_id: record.call_id.clone(),
            tool: record.tool.clone(),
        },
        created_at_ms: now,
        presented: false,
    })
}
