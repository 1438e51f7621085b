//! Runs by session: one `Meta` row per run, `runs-by-session/<session>/<run>`,
//! written in the batch that creates the run, so that a session's runs are
//! read without reading every stored run (a tab taking a session over, a
//! new run's conversation: issue 18, S3, S12). Runs stored before the index
//! existed are indexed once, on first use; the `runs-by-session` row says
//! it is done.

use agent_kernel::host::{Batch, Record, Storage, StorageExt, Table};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::run::AgentRun;

use crate::error::RunError;

const PREFIX: &str = "runs-by-session/";
/// Present once every stored run has its row.
const INDEXED: &str = "runs-by-session";

/// The index row of `run` in `session` (its value is the run id, as JSON
/// like every stored record).
pub fn index_row(session: &SessionId, run: &RunId) -> (Table, String, Vec<u8>) {
    (
        Table::Meta,
        format!("{PREFIX}{session}/{run}"),
        serde_json::Value::String(run.as_str().to_owned())
            .to_string()
            .into_bytes(),
    )
}

/// Every run of `session` (parents and children), read through the index.
pub async fn runs_of_session(
    storage: &dyn Storage,
    session: &SessionId,
) -> Result<Vec<AgentRun>, RunError> {
    ensure_indexed(storage).await?;
    let mut runs = Vec::new();
    for (_, id) in storage
        .scan_prefix(Table::Meta, &format!("{PREFIX}{session}/"))
        .await?
    {
        let Ok(id) = serde_json::from_slice::<String>(&id) else {
            tracing::error!("skipping a corrupt session index row");
            continue;
        };
        // A session id that is a prefix of another's (`a` and `a/b`) shares
        // the scan: the record says whose run it is.
        if let Some(run) = storage.get_record::<AgentRun>(&id).await?
            && &run.session == session
        {
            runs.push(run);
        }
    }
    Ok(runs)
}

/// Index the runs stored before the index existed, once.
async fn ensure_indexed(storage: &dyn Storage) -> Result<(), RunError> {
    if storage.get(Table::Meta, INDEXED).await?.is_some() {
        return Ok(());
    }
    let mut batch = Batch::new();
    for (key, bytes) in storage.scan_prefix(AgentRun::TABLE, "").await? {
        match serde_json::from_slice::<AgentRun>(&bytes) {
            Ok(run) => {
                let (table, key, value) = index_row(&run.session, &run.id);
                batch = batch.put(table, key, value);
            }
            // Left for a person to repair; the others are indexed.
            Err(e) => tracing::error!(key = %key, error = %e, "not indexing a corrupt run record"),
        }
    }
    batch = batch.put(Table::Meta, INDEXED, b"true".to_vec());
    storage.commit(batch).await?;
    Ok(())
}
