//! Writes the seed corpus of the `stored_records` target: real records,
//! encoded as the storage backends store them (serde_json bytes), each
//! behind the byte that picks its type. Run it again after a record type
//! changes: `cargo test --test record_seeds -- --ignored`.
//! The normal run checks that every committed seed still decodes.

use std::collections::BTreeSet;
use std::path::Path;

use agent_capabilities::{EffectClass, Fingerprint, Idempotency};
use agent_fuzz::targets::stored_records::RECORDS;
use agent_kernel::budget::Budget;
use agent_kernel::host::storage::{BlobRef, LeaseRecord};
use agent_kernel::journal::{CallState, JournalRecord};
use agent_kernel::run::{
    Activity, ActivityKind, AgentRun, Checkpoint, CheckpointStage, PendingKind, PendingRequest,
    RunMode, RunStatus, Usage,
};
use agent_kernel::{CallId, OwnerId, RequestId, RunId, SessionId};
use agent_supervisor::conversation::{SessionConversation, Turn};
use agent_supervisor::store::RunMeta;
use agent_workspace::manifest::{RevisionCounter, Source};
use agent_workspace::{Artifact, FileEntry, TrashEntry, WorkspacePath};

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let run = RunId::new("run-1").unwrap();
    let session = SessionId::new("session-1").unwrap();
    let call = CallId::new("call-1").unwrap();
    let blob = BlobRef::of(b"the prompt");
    let usage = Usage {
        tool_rounds: 2,
        tool_calls: 3,
        input_tokens: 1_000,
        output_tokens: 200,
        active_ms: 5_000,
        cached_input_tokens: 400,
        cache_write_tokens: 100,
        reasoning_tokens: 50,
        context_tokens: 1_200,
    };
    let source = Source::Tool {
        tool: "write_file".into(),
        run: run.clone(),
        call_id: call.clone(),
    };
    let entry = FileEntry {
        session: session.clone(),
        path: WorkspacePath::parse("notes/caf\u{e9}.md").unwrap(),
        mime: "text/markdown".into(),
        size: 12,
        hash: blob.hash.clone(),
        revision: 4,
        source: source.clone(),
        created_at_ms: 1_700_000_000_000,
        updated_at_ms: 1_700_000_000_500,
    };
    let json = |v: &dyn erased::Encode| v.encode();
    vec![
        (
            "agent_run",
            json(&AgentRun {
                id: run.clone(),
                session: session.clone(),
                parent: None,
                children: vec![RunId::new("child-1").unwrap()],
                mode: RunMode::Agent,
                status: RunStatus::Running,
                stop_reason: None,
                usage,
                budget: Budget::fallback(),
                prompt: blob.clone(),
                output: None,
                plan: Some(BlobRef::of(b"the plan")),
                next_activity: 1,
                status_history: vec![RunStatus::Running],
                created_at_ms: 1_700_000_000_000,
                updated_at_ms: 1_700_000_000_001,
            }),
        ),
        (
            "journal",
            json(&JournalRecord {
                run: run.clone(),
                call_id: call.clone(),
                tool: "write_file".into(),
                fingerprint: Fingerprint::of(&serde_json::json!({"tool": "write_file"})).unwrap(),
                args: BlobRef::of(b"{\"path\":\"a.txt\"}"),
                effects: BTreeSet::from([EffectClass::WriteLocal]),
                idempotency: Idempotency::Idempotent,
                attempt: 1,
                state: CallState::Running,
                idempotency_key: "run-1/call-1".into(),
                target_summary: Some("notes/a.txt".into()),
                result: None,
                receipts: Vec::new(),
                error: None,
                updated_at_ms: 1_700_000_000_002,
            }),
        ),
        (
            "activity",
            json(&Activity {
                run: run.clone(),
                seq: 3,
                at_ms: 1_700_000_000_003,
                kind: ActivityKind::ToolCall {
                    call_id: call.clone(),
                    tool: "write_file".into(),
                    state: CallState::Committed,
                },
            }),
        ),
        (
            "pending",
            json(&PendingRequest {
                run: run.clone(),
                id: RequestId::new("req-1").unwrap(),
                kind: PendingKind::Input {
                    call_id: call.clone(),
                    question: blob.clone(),
                    schema: None,
                    choices: Some(vec!["yes".into(), "no".into()]),
                },
                created_at_ms: 1_700_000_000_004,
                presented: true,
            }),
        ),
        (
            "checkpoint",
            json(&Checkpoint {
                run: run.clone(),
                seq: 5,
                stage: CheckpointStage::BeforeDispatch {
                    call_id: call.clone(),
                },
                transcript: blob.clone(),
                usage,
                at_ms: 1_700_000_000_005,
            }),
        ),
        (
            "lease",
            json(&LeaseRecord {
                session: session.clone(),
                owner: OwnerId::new("tab-1").unwrap(),
                epoch: 7,
                expires_at_ms: 1_700_000_010_000,
            }),
        ),
        ("file_entry", json(&entry)),
        (
            "trash_entry",
            json(&TrashEntry {
                session: session.clone(),
                id: "t00000000000000000004".into(),
                entry: entry.clone(),
                deleted_at_ms: 1_700_000_000_600,
                deleted_by: Source::User,
            }),
        ),
        (
            "revision_counter",
            json(&RevisionCounter {
                session: session.clone(),
                last: 4,
            }),
        ),
        (
            "artifact",
            json(&Artifact {
                session: session.clone(),
                id: blob.hash.clone(),
                name: "report.md".into(),
                mime: "text/markdown".into(),
                size: 10,
                published_at_ms: 1_700_000_000_700,
                source: Source::Import {
                    from: "upload".into(),
                },
                from: None,
            }),
        ),
        (
            "run_meta",
            json(&RunMeta {
                run: run.clone(),
                config: blob.clone(),
                window: Default::default(),
                summary: None,
            }),
        ),
        (
            "session_conversation",
            json(&SessionConversation {
                session,
                head: Some(blob),
                turns: vec![Turn {
                    run,
                    start: 0,
                    messages: 2,
                    bytes: 300,
                    from: 0,
                    context_tokens: 1_200,
                }],
            }),
        ),
    ]
}

/// serde_json bytes of any record, behind one `dyn`.
mod erased {
    pub trait Encode {
        fn encode(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Encode for T {
        fn encode(&self) -> Vec<u8> {
            serde_json::to_vec(self).unwrap()
        }
    }
}

fn with_selector(name: &str, value: &[u8]) -> Vec<u8> {
    let index = RECORDS.iter().position(|(n, _)| *n == name).unwrap();
    let mut out = vec![u8::try_from(index).unwrap()];
    out.extend_from_slice(value);
    out
}

#[test]
#[ignore = "writes corpus/stored_records; run after changing a record type"]
fn write_stored_record_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/stored_records");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, value) in seeds() {
        std::fs::write(dir.join(name), with_selector(name, &value)).unwrap();
    }
}

#[test]
fn every_seed_record_decodes_to_itself() {
    for (name, value) in seeds() {
        let input = with_selector(name, &value);
        assert!(
            agent_fuzz::targets::stored_records::decodes(&input),
            "{name} does not decode"
        );
        let committed = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("corpus/stored_records")
            .join(name);
        assert_eq!(
            std::fs::read(&committed).ok(),
            Some(input),
            "{committed:?} is stale: run this test with --ignored"
        );
    }
}
