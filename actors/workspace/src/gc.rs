//! Blob lifetime: content blobs are shared by workspace files, trash entries
//! and Artifacts of every session (and may coincide with blobs the runtime
//! stores for runs). A blob is freed only when nothing references it any
//! more; references are recomputed from the stored records, never counted.
//!
//! What counts as a reference, for a candidate hash `h`:
//! - a manifest entry or trash entry of any session whose `hash` is `h`;
//! - an Artifact record of any session whose `id` is `h`;
//! - any record of any other table (runs, journal, activities, ...) whose
//!   JSON contains the `BlobRef`/`Reference` field `"hash":"h"`.
//!   This is conservative on purpose: the workspace does not know every record
//!   type, and keeping a blob is always safe. Workspace receipts name content
//!   as `content_hash`, so a journal receipt does not keep a blob alive.

use std::collections::BTreeSet;

use agent_kernel::host::{Storage, StorageError, Table};

use crate::artifact::Artifact;
use crate::error::WorkspaceError;
use crate::manifest::{FileEntry, TrashEntry};

fn corrupt(table: Table, key: &str, e: serde_json::Error) -> WorkspaceError {
    WorkspaceError::Storage(StorageError::Corrupt {
        table,
        key: key.to_owned(),
        detail: e.to_string(),
    })
}

/// Every blob hash the workspace tables (manifests, trash, Artifacts) of all
/// sessions reference. A record that does not decode stops the count with
/// an error: freeing blobs while unsure would lose data.
pub async fn workspace_references(
    storage: &dyn Storage,
) -> Result<BTreeSet<String>, WorkspaceError> {
    let mut refs = BTreeSet::new();
    for (key, raw) in storage.scan_prefix(Table::Manifests, "").await? {
        let e: FileEntry =
            serde_json::from_slice(&raw).map_err(|e| corrupt(Table::Manifests, &key, e))?;
        refs.insert(e.hash);
    }
    for (key, raw) in storage.scan_prefix(Table::Trash, "").await? {
        let t: TrashEntry =
            serde_json::from_slice(&raw).map_err(|e| corrupt(Table::Trash, &key, e))?;
        refs.insert(t.entry.hash);
    }
    for (key, raw) in storage.scan_prefix(Table::Artifacts, "").await? {
        let a: Artifact =
            serde_json::from_slice(&raw).map_err(|e| corrupt(Table::Artifacts, &key, e))?;
        refs.insert(a.id);
    }
    Ok(refs)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.len() <= haystack.len() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The candidates that some record outside the workspace tables names as
/// `"hash":"<h>"`.
async fn foreign_references(
    storage: &dyn Storage,
    candidates: &BTreeSet<String>,
) -> Result<BTreeSet<String>, WorkspaceError> {
    let needles: Vec<(String, Vec<u8>)> = candidates
        .iter()
        .map(|h| (h.clone(), format!("\"hash\":\"{h}\"").into_bytes()))
        .collect();
    let mut found = BTreeSet::new();
    for table in Table::ALL {
        if matches!(table, Table::Manifests | Table::Trash | Table::Artifacts) {
            continue;
        }
        for (_, raw) in storage.scan_prefix(table, "").await? {
            for (hash, needle) in &needles {
                if !found.contains(hash) && contains(&raw, needle) {
                    found.insert(hash.clone());
                }
            }
        }
    }
    Ok(found)
}

/// The candidates nothing references.
async fn unreferenced(
    storage: &dyn Storage,
    candidates: &BTreeSet<String>,
) -> Result<BTreeSet<String>, WorkspaceError> {
    let own = workspace_references(storage).await?;
    let rest: BTreeSet<String> = candidates.difference(&own).cloned().collect();
    if rest.is_empty() {
        return Ok(rest);
    }
    let foreign = foreign_references(storage, &rest).await?;
    Ok(rest.difference(&foreign).cloned().collect())
}

/// Delete those of `candidates` that nothing references; returns the freed
/// hashes. After deleting, references are counted again and any blob that
/// gained a reference meanwhile (a concurrent write of the same bytes in
/// another session) is stored again.
pub async fn free_unreferenced(
    storage: &dyn Storage,
    candidates: BTreeSet<String>,
) -> Result<Vec<String>, WorkspaceError> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let doomed = unreferenced(storage, &candidates).await?;
    let mut deleted = Vec::new();
    for hash in &doomed {
        if let Some(bytes) = storage.get_blob(hash).await?
            && storage.delete_blob(hash).await?
        {
            deleted.push((hash.clone(), bytes));
        }
    }
    let still: BTreeSet<String> = deleted.iter().map(|(h, _)| h.clone()).collect();
    let now_free = unreferenced(storage, &still).await?;
    let mut freed = Vec::new();
    for (hash, bytes) in deleted {
        if now_free.contains(&hash) {
            freed.push(hash);
        } else {
            storage.put_blob(&hash, bytes).await?;
        }
    }
    Ok(freed)
}
