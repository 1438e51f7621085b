//! Conformance cases for content-addressed blobs: hashes checked, equal
//! bytes stored once, blobs committed with their batch, get/delete/list.

use std::sync::Arc;

use crate::host::storage::{Batch, BlobRef, Fence, Storage, StorageError, Table};

use super::{T0, TTL, owner, sid};

/// Bytes that do not hash to the claimed SHA-256 are refused and not stored.
pub async fn blob_with_wrong_hash_is_refused(storage: Arc<dyn Storage>) {
    let bytes = b"hello blob".to_vec();
    let wrong = BlobRef::of(b"other bytes").hash;
    let err = storage
        .put_blob(&wrong, bytes.clone())
        .await
        .expect_err("wrong hash");
    assert_eq!(
        err,
        StorageError::BlobHashMismatch {
            claimed: wrong.clone(),
            actual: BlobRef::of(&bytes).hash,
        }
    );
    for bad in ["", "not-a-hash", &BlobRef::of(&bytes).hash.to_uppercase()] {
        let err = storage
            .put_blob(bad, bytes.clone())
            .await
            .expect_err("malformed claimed hash");
        assert!(
            matches!(err, StorageError::BlobHashMismatch { .. }),
            "{err:?}"
        );
    }
    assert_eq!(storage.get_blob(&wrong).await.expect("get"), None);
    assert!(storage.list_blobs().await.expect("list").is_empty());
}

/// The same bytes stored twice are one blob; the reference is the hash and size.
pub async fn blob_same_bytes_stored_once(storage: Arc<dyn Storage>) {
    let bytes = b"same bytes".to_vec();
    let expected = BlobRef::of(&bytes);
    assert_eq!(expected.size, bytes.len() as u64);
    assert_eq!(expected.hash.len(), 64);
    let first = storage
        .put_blob(&expected.hash, bytes.clone())
        .await
        .expect("first put");
    let second = storage
        .put_blob(&expected.hash, bytes.clone())
        .await
        .expect("second put");
    assert_eq!(first, expected);
    assert_eq!(second, expected);
    assert_eq!(
        storage.list_blobs().await.expect("list"),
        vec![expected.hash.clone()]
    );
    assert_eq!(
        storage.get_blob(&expected.hash).await.expect("get"),
        Some(bytes)
    );
    // The empty blob is a blob like any other.
    let empty = BlobRef::of(b"");
    storage
        .put_blob(&empty.hash, Vec::new())
        .await
        .expect("empty blob");
    assert_eq!(
        storage.get_blob(&empty.hash).await.expect("get"),
        Some(Vec::new())
    );
}

/// Blobs carried by a batch become durable with its records and never
/// without them: a refused batch (condition, stale fence, a blob whose bytes
/// do not hash to its name) stores none of its blobs.
pub async fn blobs_in_a_batch_commit_with_it(storage: Arc<dyn Storage>) {
    // Refused by a condition: no record, no blob.
    let mut refused = Batch::new()
        .put(Table::Runs, "r1", b"run".to_vec())
        .expect_present(Table::Runs, "missing");
    let orphan = refused.add_blob(b"named by a refused batch".to_vec());
    assert!(matches!(
        storage.commit(refused).await,
        Err(StorageError::ConditionFailed { .. })
    ));
    assert_eq!(storage.get_blob(&orphan.hash).await.expect("get"), None);
    assert!(storage.list_blobs().await.expect("list").is_empty());

    // Refused by a stale fence: the same.
    let s = sid("session-batch-blobs");
    let lease = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("lease");
    let mut stale = Batch::new()
        .fenced(Fence {
            session: s.clone(),
            epoch: lease.epoch + 1,
        })
        .put(Table::Runs, "r1", b"run".to_vec());
    stale.add_blob(b"named by a stale writer".to_vec());
    assert!(matches!(
        storage.commit(stale).await,
        Err(StorageError::StaleEpoch { .. })
    ));
    assert!(storage.list_blobs().await.expect("list").is_empty());

    // A blob whose bytes do not hash to its name refuses the whole batch.
    let mut lying = Batch::new().put(Table::Runs, "r1", b"run".to_vec());
    lying.add_blob(b"honest".to_vec());
    let lying = lying.put_claimed_blob(BlobRef::of(b"claimed").hash, b"actual".to_vec());
    assert!(matches!(
        storage.commit(lying).await,
        Err(StorageError::BlobHashMismatch { .. })
    ));
    assert_eq!(storage.get(Table::Runs, "r1").await.expect("get"), None);
    assert!(storage.list_blobs().await.expect("list").is_empty());

    // Committed: the record and its blobs, the same bytes twice kept once,
    // a blob already stored separately kept as it was.
    let earlier = b"stored earlier".to_vec();
    let earlier_ref = BlobRef::of(&earlier);
    storage
        .put_blob(&earlier_ref.hash, earlier.clone())
        .await
        .expect("put");
    let mut batch = Batch::new().fenced(lease.fence());
    let result = batch.add_blob(b"a result".to_vec());
    let again = batch.add_blob(b"a result".to_vec());
    let empty = batch.add_blob(Vec::new());
    assert_eq!(batch.add_blob(earlier.clone()), earlier_ref);
    assert_eq!(result, again);
    assert_eq!(result, BlobRef::of(b"a result"));
    let batch = batch.put(Table::Journal, "r1/c1", result.hash.clone().into_bytes());
    storage.commit(batch).await.expect("commit");
    assert_eq!(
        storage.get(Table::Journal, "r1/c1").await.expect("get"),
        Some(result.hash.clone().into_bytes())
    );
    assert_eq!(
        storage.get_blob(&result.hash).await.expect("get"),
        Some(b"a result".to_vec())
    );
    assert_eq!(
        storage.get_blob(&empty.hash).await.expect("get"),
        Some(Vec::new())
    );
    assert_eq!(
        storage.get_blob(&earlier_ref.hash).await.expect("get"),
        Some(earlier)
    );
    let mut expected = vec![result.hash, empty.hash, earlier_ref.hash];
    expected.sort();
    assert_eq!(storage.list_blobs().await.expect("list"), expected);
}

/// Get, delete and list blobs; the list is ordered.
pub async fn blob_get_delete_list(storage: Arc<dyn Storage>) {
    let mut hashes = Vec::new();
    for i in 0..5u8 {
        let bytes = vec![i; usize::from(i) * 100 + 1];
        let r = BlobRef::of(&bytes);
        let stored = storage.put_blob(&r.hash, bytes.clone()).await.expect("put");
        assert_eq!(stored, r);
        assert_eq!(storage.get_blob(&r.hash).await.expect("get"), Some(bytes));
        hashes.push(r.hash);
    }
    let mut sorted = hashes.clone();
    sorted.sort();
    assert_eq!(storage.list_blobs().await.expect("list"), sorted, "ordered");
    assert!(storage.delete_blob(&hashes[2]).await.expect("delete"));
    assert!(!storage.delete_blob(&hashes[2]).await.expect("delete again"));
    assert_eq!(storage.get_blob(&hashes[2]).await.expect("get"), None);
    sorted.retain(|h| h != &hashes[2]);
    assert_eq!(storage.list_blobs().await.expect("list"), sorted);
    assert_eq!(
        storage
            .get_blob(&BlobRef::of(b"never").hash)
            .await
            .expect("get"),
        None
    );
    // Blobs are not table records.
    for table in Table::ALL {
        assert!(
            storage
                .scan_prefix(table, "")
                .await
                .expect("scan")
                .is_empty()
        );
    }
}
