//! Copying and deleting a whole session's workspace and Artifacts (S7.5).
//! A copy duplicates records, never bytes: both sessions then reference the
//! same blobs. A deletion removes the session's records in one fenced batch
//! and frees only the blobs that nothing else references any more.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use agent_kernel::SessionId;
use agent_kernel::host::{Batch, Fence, Record, Storage, StorageError, Table};

use crate::artifact::Artifact;
use crate::error::WorkspaceError;
use crate::gc;
use crate::manifest::{FileEntry, RevisionCounter, TrashEntry};

/// What [`copy_session`] copied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CopyReport {
    pub files: u64,
    pub trash_entries: u64,
    pub artifacts: u64,
}

/// What [`delete_session`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DeleteReport {
    pub files: u64,
    pub trash_entries: u64,
    pub artifacts: u64,
    /// Blobs deleted because nothing referenced them any more.
    pub blobs_freed: Vec<String>,
}

fn decode<R: Record>(key: &str, raw: &[u8]) -> Result<R, WorkspaceError> {
    serde_json::from_slice(raw).map_err(|e| {
        WorkspaceError::Storage(StorageError::Corrupt {
            table: R::TABLE,
            key: key.to_owned(),
            detail: e.to_string(),
        })
    })
}

fn encode<R: Record>(record: &R) -> Result<Vec<u8>, WorkspaceError> {
    serde_json::to_vec(record).map_err(|e| {
        WorkspaceError::Storage(StorageError::Encode {
            table: R::TABLE,
            detail: e.to_string(),
        })
    })
}

/// Copy the workspace (files and trash) and the Artifact references of
/// `from` into the empty session `to.session`, in one batch fenced with
/// `to` (the caller holds that session's lease). No blob is copied.
pub async fn copy_session(
    storage: &dyn Storage,
    from: &SessionId,
    to: &Fence,
) -> Result<CopyReport, WorkspaceError> {
    let target = &to.session;
    if target == from {
        return Err(WorkspaceError::InvalidArgument {
            field: "to",
            reason: "a session cannot be copied onto itself".into(),
        });
    }
    let src = format!("{from}/");
    let dst = format!("{target}/");
    for (table, what) in [
        (Table::Manifests, "it has files"),
        (Table::Trash, "it has a trash"),
        (Table::Artifacts, "it has Artifacts"),
    ] {
        if !storage.scan_prefix(table, &dst).await?.is_empty() {
            return Err(WorkspaceError::TargetNotEmpty {
                session: target.to_string(),
                what: what.into(),
            });
        }
    }
    let mut batch = Batch::new().fenced(to.clone());
    let mut report = CopyReport::default();
    for (key, raw) in storage.scan_prefix(Table::Manifests, &src).await? {
        let mut e: FileEntry = decode(&key, &raw)?;
        e.session = target.clone();
        batch = batch.expect_absent(Table::Manifests, e.key()).put(
            Table::Manifests,
            e.key(),
            encode(&e)?,
        );
        report.files += 1;
    }
    for (key, raw) in storage.scan_prefix(Table::Trash, &src).await? {
        let mut t: TrashEntry = decode(&key, &raw)?;
        t.session = target.clone();
        t.entry.session = target.clone();
        batch = batch
            .expect_absent(Table::Trash, t.key())
            .put(Table::Trash, t.key(), encode(&t)?);
        report.trash_entries += 1;
    }
    for (key, raw) in storage.scan_prefix(Table::Artifacts, &src).await? {
        let mut a: Artifact = decode(&key, &raw)?;
        a.session = target.clone();
        batch = batch.expect_absent(Table::Artifacts, a.key()).put(
            Table::Artifacts,
            a.key(),
            encode(&a)?,
        );
        report.artifacts += 1;
    }
    // The target's counter moves past both sessions' revisions, so no
    // revision the target ever handed out is reused.
    let from_last = last_revision(storage, from)
        .await?
        .map_or(0, |(c, _)| c.last);
    batch = advance_counter(storage, target, batch, from_last).await?;
    match storage.commit(batch).await {
        Ok(()) => Ok(report),
        Err(StorageError::ConditionFailed { .. }) => Err(WorkspaceError::Busy),
        Err(e) => Err(e.into()),
    }
}

async fn last_revision(
    storage: &dyn Storage,
    session: &SessionId,
) -> Result<Option<(RevisionCounter, Vec<u8>)>, WorkspaceError> {
    let key = RevisionCounter::key_for(session);
    match storage.get(Table::Meta, &key).await? {
        Some(raw) => Ok(Some((decode(&key, &raw)?, raw))),
        None => Ok(None),
    }
}

/// Put `session`'s revision counter past its own value and `at_least`,
/// guarded by its current bytes. The counter is never deleted: revisions
/// stay unique for the session's whole life, and every workspace actor's
/// snapshot cache notices the change.
async fn advance_counter(
    storage: &dyn Storage,
    session: &SessionId,
    batch: Batch,
    at_least: u64,
) -> Result<Batch, WorkspaceError> {
    let key = RevisionCounter::key_for(session);
    let (batch, last) = match last_revision(storage, session).await? {
        Some((c, raw)) => (batch.expect_value(Table::Meta, key.clone(), raw), c.last),
        None => (batch.expect_absent(Table::Meta, key.clone()), 0),
    };
    let counter = RevisionCounter {
        session: session.clone(),
        last: last.max(at_least) + 1,
    };
    Ok(batch.put(Table::Meta, key, encode(&counter)?))
}

/// Delete the workspace, trash and Artifact references of `fence.session`
/// in one fenced batch (its revision counter stays, advanced, so that a
/// later workspace of the same session never reuses a revision), then free the blobs nothing references any more: an
/// Artifact or file another session still references keeps its blob.
pub async fn delete_session(
    storage: &dyn Storage,
    fence: &Fence,
) -> Result<DeleteReport, WorkspaceError> {
    let session = &fence.session;
    let prefix = format!("{session}/");
    let mut batch = Batch::new().fenced(fence.clone());
    let mut report = DeleteReport::default();
    let mut candidates = BTreeSet::new();
    for (key, raw) in storage.scan_prefix(Table::Manifests, &prefix).await? {
        let e: FileEntry = decode(&key, &raw)?;
        candidates.insert(e.hash);
        batch = batch
            .expect_value(Table::Manifests, key.clone(), raw)
            .delete(Table::Manifests, key);
        report.files += 1;
    }
    for (key, raw) in storage.scan_prefix(Table::Trash, &prefix).await? {
        let t: TrashEntry = decode(&key, &raw)?;
        candidates.insert(t.entry.hash);
        batch = batch
            .expect_value(Table::Trash, key.clone(), raw)
            .delete(Table::Trash, key);
        report.trash_entries += 1;
    }
    for (key, raw) in storage.scan_prefix(Table::Artifacts, &prefix).await? {
        let a: Artifact = decode(&key, &raw)?;
        candidates.insert(a.id);
        batch = batch
            .expect_value(Table::Artifacts, key.clone(), raw)
            .delete(Table::Artifacts, key);
        report.artifacts += 1;
    }
    batch = advance_counter(storage, session, batch, 0).await?;
    match storage.commit(batch).await {
        Ok(()) => {}
        Err(StorageError::ConditionFailed { .. }) => return Err(WorkspaceError::Busy),
        Err(e) => return Err(e.into()),
    }
    report.blobs_freed = gc::free_unreferenced(storage, candidates).await?;
    Ok(report)
}
