//! Conformance cases for prefix scans: exactly the keys under the prefix,
//! ordered by their bytes, within one table.

use std::sync::Arc;

use crate::host::storage::{Batch, Storage, StorageExt, Table};
use crate::run::{Activity, ActivityKind};

use super::{T0, run_id};

/// Prefix scans return exactly the keys that start with the prefix, ordered
/// by their UTF-8 bytes, within one table.
pub async fn prefix_scans_are_ordered_by_bytes(storage: Arc<dyn Storage>) {
    let t = Table::Journal;
    let keys = [
        "run1/b",
        "run1/a",
        "run10/a",
        "run1/",
        "run1",
        "run2/a",
        "run1/a/b",
        "run1/Z",
        "run1/é",
        "run1/z",
        "run0/z",
        "run1/\u{10348}",
        "run1/0010",
        "run1/0002",
    ];
    let mut batch = Batch::new();
    for (i, k) in keys.iter().enumerate() {
        batch = batch.put(t, *k, vec![u8::try_from(i).unwrap_or(0)]);
    }
    // Another table with the same keys must not leak into scans of `t`.
    batch = batch.put(Table::Checkpoints, "run1/zz", b"other".to_vec());
    storage.commit(batch).await.expect("seed");

    let scan = |prefix: &'static str| {
        let storage = storage.clone();
        async move {
            storage
                .scan_prefix(t, prefix)
                .await
                .expect("scan")
                .into_iter()
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
        }
    };
    let expected_run1_slash: Vec<String> = [
        "run1/",
        "run1/0002",
        "run1/0010",
        "run1/Z",
        "run1/a",
        "run1/a/b",
        "run1/b",
        "run1/z",
        "run1/é",
        "run1/\u{10348}",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(
        scan("run1/").await,
        expected_run1_slash,
        "run1/ excludes run10/"
    );
    assert_eq!(scan("run10/").await, vec!["run10/a".to_owned()]);
    let mut all: Vec<String> = keys.iter().map(|s| (*s).to_owned()).collect();
    all.sort();
    assert_eq!(scan("").await, all, "empty prefix: every key, byte order");
    let run1: Vec<String> = all
        .iter()
        .filter(|k| k.starts_with("run1"))
        .cloned()
        .collect();
    assert_eq!(
        scan("run1").await,
        run1,
        "run1 includes run1, run1/... and run10/..."
    );
    assert_eq!(
        scan("run1/a").await,
        vec!["run1/a".to_owned(), "run1/a/b".to_owned()]
    );
    assert!(scan("run3").await.is_empty());
    assert!(scan("run1/zz").await.is_empty());
    // Values come back with their keys.
    let with_values = storage.scan_prefix(t, "run10/").await.expect("scan");
    assert_eq!(with_values, vec![("run10/a".to_owned(), vec![2u8])]);
    // Typed scans follow the same order.
    let run = run_id("run-scan");
    let mut batch = Batch::new();
    for seq in [10u64, 2, 1, 100] {
        let activity = Activity {
            run: run.clone(),
            seq,
            at_ms: T0,
            kind: ActivityKind::ModelRequest { round: seq },
        };
        batch = batch.put_record(&activity).expect("encode");
    }
    storage.commit(batch).await.expect("activities");
    let activities: Vec<Activity> = storage
        .scan_records(&format!("{run}/"))
        .await
        .expect("typed scan");
    assert_eq!(
        activities.iter().map(|a| a.seq).collect::<Vec<_>>(),
        vec![1, 2, 10, 100]
    );
}
