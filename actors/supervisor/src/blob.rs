//! Content-addressed blobs of the runs (prompts, configurations, transcript
//! segments, arguments, results, plans): stored under their SHA-256,
//! checked against it on every read, and decoded as JSON. Records name
//! blobs by [`BlobRef`] and hold nothing bigger themselves.

use serde::Serialize;
use serde::de::DeserializeOwned;

use agent_kernel::host::{BlobRef, Storage, StorageError, Table};
use agent_kernel::ids::RunId;

use crate::error::RunError;

/// Store `value` as a JSON blob; returns its reference.
pub async fn put_json_blob<T: Serialize + ?Sized>(
    storage: &dyn Storage,
    value: &T,
) -> Result<BlobRef, StorageError> {
    let bytes = serde_json::to_vec(value).map_err(|e| StorageError::Encode {
        table: Table::Meta,
        detail: e.to_string(),
    })?;
    put_blob(storage, bytes).await
}

/// Store bytes as a blob; returns its reference.
pub async fn put_blob(storage: &dyn Storage, bytes: Vec<u8>) -> Result<BlobRef, StorageError> {
    let hash = agent_capabilities::sha256_hex(&bytes);
    storage.put_blob(&hash, bytes).await
}

/// Read a blob and check it still matches its reference; `None` when it is
/// missing or does not verify.
pub async fn verified_blob(
    storage: &dyn Storage,
    blob: &BlobRef,
) -> Result<Option<Vec<u8>>, StorageError> {
    let Some(bytes) = storage.get_blob(&blob.hash).await? else {
        return Ok(None);
    };
    if BlobRef::of(&bytes) != *blob {
        return Ok(None);
    }
    Ok(Some(bytes))
}

/// Read a JSON blob that must be present and valid.
pub async fn json_blob<T: DeserializeOwned>(
    storage: &dyn Storage,
    run: &RunId,
    blob: &BlobRef,
) -> Result<T, RunError> {
    let bytes = verified_blob(storage, blob)
        .await?
        .ok_or_else(|| RunError::Inconsistent {
            run: run.clone(),
            detail: format!("blob {} is missing or does not match its hash", blob.hash),
        })?;
    serde_json::from_slice(&bytes).map_err(|e| RunError::Inconsistent {
        run: run.clone(),
        detail: format!("blob {} does not decode ({e})", blob.hash),
    })
}
