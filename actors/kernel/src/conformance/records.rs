//! Conformance cases for records: a key round-trips through every table,
//! every typed record round-trips through its table, and a record that does
//! not decode is reported as corrupt and kept.

use std::sync::Arc;

use agent_capabilities::{EffectClass, EffectSet, Fingerprint, Idempotency, Trust};

use crate::budget::Budget;
use crate::host::storage::{Batch, BlobRef, Record, Storage, StorageError, StorageExt, Table};
use crate::ids::RequestId;
use crate::journal::{CallState, JournalRecord};
use crate::protocol::{Provenance, Reference, ReferenceKind};
use crate::run::{
    Activity, ActivityKind, AgentRun, Checkpoint, CheckpointStage, Evidence, PendingKind,
    PendingRequest, RunMode, RunStatus, Usage,
};

use super::{T0, call_id, run_id, sid};

/// Put, get, overwrite and delete a key in every table; tables are separate.
pub async fn round_trip_every_table(storage: Arc<dyn Storage>) {
    for (i, table) in Table::ALL.into_iter().enumerate() {
        let key = "shared/key";
        assert_eq!(
            storage.get(table, key).await.expect("get"),
            None,
            "{table:?} starts empty"
        );
        let value = format!("value for {} #{i}", table.as_str()).into_bytes();
        storage
            .commit(Batch::new().put(table, key, value.clone()))
            .await
            .expect("put");
        assert_eq!(
            storage.get(table, key).await.expect("get"),
            Some(value),
            "{table:?} round trip"
        );
    }
    // Every table kept its own value under the same key.
    for (i, table) in Table::ALL.into_iter().enumerate() {
        let expected = format!("value for {} #{i}", table.as_str()).into_bytes();
        assert_eq!(
            storage.get(table, "shared/key").await.expect("get"),
            Some(expected)
        );
    }
    for table in Table::ALL {
        // Overwrite, including binary and empty values.
        let binary = vec![0u8, 255, 1, 254, 0];
        storage
            .commit(Batch::new().put(table, "shared/key", binary.clone()))
            .await
            .expect("overwrite");
        assert_eq!(
            storage.get(table, "shared/key").await.expect("get"),
            Some(binary)
        );
        storage
            .commit(Batch::new().put(table, "empty", Vec::new()))
            .await
            .expect("put empty");
        assert_eq!(
            storage.get(table, "empty").await.expect("get"),
            Some(Vec::new())
        );
        storage
            .commit(
                Batch::new()
                    .delete(table, "shared/key")
                    .delete(table, "empty"),
            )
            .await
            .expect("delete");
        assert_eq!(storage.get(table, "shared/key").await.expect("get"), None);
        assert_eq!(storage.get(table, "empty").await.expect("get"), None);
        // Deleting a missing key is not an error.
        storage
            .commit(Batch::new().delete(table, "never-existed"))
            .await
            .expect("delete missing key");
    }
    // Put and delete of the same key in one batch apply in order.
    storage
        .commit(
            Batch::new()
                .put(Table::Meta, "k", b"1".to_vec())
                .delete(Table::Meta, "k")
                .put(Table::Meta, "j", b"1".to_vec())
                .put(Table::Meta, "j", b"2".to_vec()),
        )
        .await
        .expect("ordered ops");
    assert_eq!(storage.get(Table::Meta, "k").await.expect("get"), None);
    assert_eq!(
        storage.get(Table::Meta, "j").await.expect("get"),
        Some(b"2".to_vec())
    );
    // An empty batch is fine.
    storage.commit(Batch::new()).await.expect("empty batch");
}

fn sample_run(id: &str) -> AgentRun {
    AgentRun {
        id: run_id(id),
        session: sid("session-1"),
        parent: None,
        children: vec![run_id("child-1")],
        mode: RunMode::Agent,
        status: RunStatus::Running,
        stop_reason: None,
        usage: Usage {
            tool_rounds: 2,
            tool_calls: 3,
            input_tokens: 1_000,
            output_tokens: 200,
            active_ms: 5_000,
            cached_input_tokens: 700,
            cache_write_tokens: 100,
            reasoning_tokens: 50,
            context_tokens: 1_200,
        },
        budget: Budget::fallback(),
        prompt: BlobRef::of(b"the prompt"),
        output: None,
        plan: Some(BlobRef::of(b"the plan")),
        next_activity: 1,
        status_history: vec![RunStatus::Running],
        created_at_ms: T0,
        updated_at_ms: T0 + 1,
    }
}

fn sample_journal(run: &str, call: &str) -> JournalRecord {
    let mut effects = EffectSet::new();
    effects.insert(EffectClass::WriteLocal);
    JournalRecord {
        run: run_id(run),
        call_id: call_id(call),
        tool: "write_file".into(),
        fingerprint: Fingerprint::of(&serde_json::json!({"tool": "write_file"}))
            .expect("fingerprint of a small JSON value"),
        args: BlobRef::of(b"{\"path\":\"a.txt\"}"),
        effects,
        idempotency: Idempotency::Idempotent,
        attempt: 1,
        state: CallState::Running,
        idempotency_key: format!("{run}/{call}"),
        target_summary: None,
        result: None,
        receipts: Vec::new(),
        error: None,
        updated_at_ms: T0,
    }
}

async fn typed_round_trip<R>(storage: &dyn Storage, record: &R)
where
    R: Record + PartialEq + std::fmt::Debug,
{
    storage
        .commit(Batch::new().put_record(record).expect("encode"))
        .await
        .expect("commit record");
    let back: Option<R> = storage.get_record(&record.key()).await.expect("decode");
    assert_eq!(back.as_ref(), Some(record), "{:?} round trip", R::TABLE);
    let scanned: Vec<R> = storage.scan_records(&record.key()).await.expect("scan");
    assert_eq!(scanned.len(), 1);
    storage
        .commit(Batch::new().delete(R::TABLE, record.key()))
        .await
        .expect("delete record");
    let gone: Option<R> = storage.get_record(&record.key()).await.expect("get");
    assert!(gone.is_none(), "{:?} deleted", R::TABLE);
}

/// Every typed record survives `put_record` / `get_record` / `scan_records`.
pub async fn round_trip_typed_records(storage: Arc<dyn Storage>) {
    let s = storage.as_ref();
    typed_round_trip(s, &sample_run("run-1")).await;
    typed_round_trip(s, &sample_journal("run-1", "call-1")).await;
    typed_round_trip(
        s,
        &Activity {
            run: run_id("run-1"),
            seq: 7,
            at_ms: T0,
            kind: ActivityKind::StatusChanged {
                from: RunStatus::Running,
                to: RunStatus::AwaitingInput,
                reason: None,
            },
        },
    )
    .await;
    typed_round_trip(
        s,
        &Evidence {
            run: run_id("run-1"),
            call_id: call_id("call-1"),
            tool: "fetch_url".into(),
            trust: Trust::ExternalUntrusted,
            provenance: Provenance {
                origin: "builtin".into(),
                tool: "fetch_url".into(),
                requested_url: Some("https://example.org/".into()),
                final_url: Some("https://example.org/a".into()),
                fetched_at_ms: Some(T0),
                content_hash: Some(BlobRef::of(b"page").hash),
                ..Provenance::default()
            },
            references: vec![Reference {
                kind: ReferenceKind::Blob,
                id: BlobRef::of(b"page").hash,
                name: None,
                mime: Some("text/plain".into()),
                size: 4,
                hash: BlobRef::of(b"page").hash,
            }],
            result: BlobRef::of(b"result"),
            at_ms: T0,
        },
    )
    .await;
    typed_round_trip(
        s,
        &PendingRequest {
            run: run_id("run-1"),
            id: RequestId::new("req-1").expect("valid request id"),
            kind: PendingKind::Input {
                call_id: call_id("call-2"),
                question: BlobRef::of(b"what?"),
                schema: None,
                choices: Some(vec!["yes".into(), "no".into()]),
            },
            created_at_ms: T0,
            presented: true,
        },
    )
    .await;
    typed_round_trip(
        s,
        &Checkpoint {
            run: run_id("run-1"),
            seq: 3,
            stage: CheckpointStage::BeforeDispatch {
                call_id: call_id("call-1"),
            },
            transcript: BlobRef::of(b"[]"),
            usage: Usage::default(),
            at_ms: T0,
        },
    )
    .await;
}

/// A record that does not decode is `StorageError::Corrupt` naming the table
/// and key, through `get_record` and `scan_records`, and the raw bytes stay.
pub async fn corrupt_record_is_reported_and_kept(storage: Arc<dyn Storage>) {
    let good = sample_run("run-good");
    let key = "run-bad";
    let garbage = b"{\"id\": \"run-bad\", \"status\": tru".to_vec();
    storage
        .commit(Batch::new().put_record(&good).expect("encode").put(
            Table::Runs,
            key,
            garbage.clone(),
        ))
        .await
        .expect("plant a corrupt record");
    let ok: Option<AgentRun> = storage
        .get_record("run-good")
        .await
        .expect("good one decodes");
    assert_eq!(ok, Some(good));
    let err = storage
        .get_record::<AgentRun>(key)
        .await
        .expect_err("corrupt");
    match &err {
        StorageError::Corrupt {
            table,
            key: k,
            detail,
        } => {
            assert_eq!(*table, Table::Runs);
            assert_eq!(k, key);
            assert!(!detail.is_empty());
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("run-bad") && message.contains("Runs"),
        "{message}"
    );
    let err = storage
        .scan_records::<AgentRun>("run-")
        .await
        .expect_err("a scan over a corrupt record fails, never skips it");
    assert!(
        matches!(&err, StorageError::Corrupt { table: Table::Runs, key: k, .. } if k == key),
        "{err:?}"
    );
    // Valid JSON of the wrong shape is corrupt too.
    storage
        .commit(Batch::new().put(Table::Journal, "r/c", b"{\"x\":1}".to_vec()))
        .await
        .expect("plant");
    let err = storage
        .get_record::<JournalRecord>("r/c")
        .await
        .expect_err("wrong shape");
    assert!(
        matches!(&err, StorageError::Corrupt { table: Table::Journal, key: k, .. } if k == "r/c"),
        "{err:?}"
    );
    // The raw bytes are untouched.
    assert_eq!(
        storage.get(Table::Runs, key).await.expect("raw get"),
        Some(garbage)
    );
    assert_eq!(
        storage.get(Table::Journal, "r/c").await.expect("raw get"),
        Some(b"{\"x\":1}".to_vec())
    );
}
