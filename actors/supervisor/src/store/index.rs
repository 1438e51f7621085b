//! The indexes of stored runs, so that what a tab does on load or take-over
//! reads the runs it concerns, not every run ever stored (issue 18, S2.5,
//! S3, S12): `Meta` rows written in the same batch as the change they
//! index, by the run's own [`super::RunWriter`] and [`super::Tx`] (no
//! caller writes them), and the readers over them, among them
//! [`list_runs`], the one listing of runs every host shows.
//!
//! - Runs by session, `runs-by-session/<session>/<run>`: written in the
//!   batch that creates the run (`new_run_rows`; a tab taking a session
//!   over, a new run's conversation).
//! - Live runs, `live-runs/<run>`: written when the run is created, removed
//!   in the batch that makes it final (`live_key`; page-load recovery
//!   looks only at runs that can still be `running`).
//!
//! Runs stored before the indexes existed are indexed once, on first use;
//! the `run-index` row says it is done. Each value is the run id as JSON,
//! like every stored record.

use agent_kernel::host::{Batch, Record, Storage, StorageExt, Table};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::run::AgentRun;

use crate::error::RunError;

const BY_SESSION: &str = "runs-by-session/";
const LIVE: &str = "live-runs/";
/// Present once every run stored before the indexes has its rows.
const INDEXED: &str = "run-index";

type Row = (Table, String, Vec<u8>);

fn id_value(run: &RunId) -> Vec<u8> {
    serde_json::Value::String(run.as_str().to_owned())
        .to_string()
        .into_bytes()
}

/// The index rows of `run` as the batch that creates it writes them: its
/// session's row, and its live row unless it is created final.
pub(super) fn new_run_rows(run: &AgentRun) -> Vec<Row> {
    let mut rows = vec![session_row(&run.session, &run.id)];
    if !run.status.is_final() {
        rows.push(live_row(&run.id));
    }
    rows
}

/// The row of `run` in its session's index.
fn session_row(session: &SessionId, run: &RunId) -> Row {
    (
        Table::Meta,
        format!("{BY_SESSION}{session}/{run}"),
        id_value(run),
    )
}

/// The row of `run` among the live (not final) runs.
fn live_row(run: &RunId) -> Row {
    (Table::Meta, format!("{LIVE}{run}"), id_value(run))
}

/// The key of `run`'s live row (deleted when the run becomes final).
pub(super) fn live_key(run: &RunId) -> String {
    format!("{LIVE}{run}")
}

/// Every run of `session` (parents and children), read through the index.
pub async fn runs_of_session(
    storage: &dyn Storage,
    session: &SessionId,
) -> Result<Vec<AgentRun>, RunError> {
    let runs = indexed_runs(storage, &format!("{BY_SESSION}{session}/")).await?;
    // A session id that is a prefix of another's (`a` and `a/b`) shares the
    // scan: the record says whose run it is.
    Ok(runs.into_iter().filter(|r| &r.session == session).collect())
}

/// The runs a host lists, oldest first (ties in id order): every run
/// stored, or with `session` those of that session, read through its
/// index. The CLI's `agentrt list` and the browser's `listRuns` both show
/// this.
pub async fn list_runs(
    storage: &dyn Storage,
    session: Option<&SessionId>,
) -> Result<Vec<AgentRun>, RunError> {
    let mut runs = match session {
        Some(session) => runs_of_session(storage, session).await?,
        None => storage.scan_records("").await?,
    };
    runs.sort_by(|a, b| (a.created_at_ms, a.id.as_str()).cmp(&(b.created_at_ms, b.id.as_str())));
    Ok(runs)
}

/// Every run that is not final, read through the index.
pub async fn live_runs(storage: &dyn Storage) -> Result<Vec<AgentRun>, RunError> {
    let runs = indexed_runs(storage, LIVE).await?;
    Ok(runs.into_iter().filter(|r| !r.status.is_final()).collect())
}

async fn indexed_runs(storage: &dyn Storage, prefix: &str) -> Result<Vec<AgentRun>, RunError> {
    ensure_indexed(storage).await?;
    let mut runs = Vec::new();
    for (key, id) in storage.scan_prefix(Table::Meta, prefix).await? {
        let Ok(id) = serde_json::from_slice::<String>(&id) else {
            tracing::error!(key = %key, "skipping a corrupt run index row");
            continue;
        };
        match storage.get_record::<AgentRun>(&id).await {
            Ok(Some(run)) => runs.push(run),
            Ok(None) => {}
            // Left for a person to repair; the others are read.
            Err(e) => tracing::error!(run = %id, error = %e, "skipping a corrupt run record"),
        }
    }
    Ok(runs)
}

/// Index the runs stored before the indexes existed, once.
async fn ensure_indexed(storage: &dyn Storage) -> Result<(), RunError> {
    if storage.get(Table::Meta, INDEXED).await?.is_some() {
        return Ok(());
    }
    let mut batch = Batch::new();
    for (key, bytes) in storage.scan_prefix(AgentRun::TABLE, "").await? {
        match serde_json::from_slice::<AgentRun>(&bytes) {
            Ok(run) => {
                for (table, key, value) in new_run_rows(&run) {
                    batch = batch.put(table, key, value);
                }
            }
            // Left for a person to repair; the others are indexed.
            Err(e) => tracing::error!(key = %key, error = %e, "not indexing a corrupt run record"),
        }
    }
    batch = batch.put(Table::Meta, INDEXED, b"true".to_vec());
    storage.commit(batch).await?;
    Ok(())
}
