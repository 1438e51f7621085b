//! S7.4, S7.5: immutable content-addressed Artifacts, session copy and
//! deletion, with blob counts asserted.

use agent_kernel::SessionId;
use agent_kernel::host::{Batch, Table};
use agent_workspace::{
    Expect, PublishedFrom, Quota, Quotas, WorkspaceError, copy_session, delete_session,
};

use super::{Env, destructive_proof, p, user};

pub fn s7_4_artifact_immutable_after_edit_and_delete() {
    let env = Env::new("s1");
    let a = env.actors(Quotas::default());
    let (w, arts) = (&a.workspace, &a.artifacts);
    let (e, _) = env
        .run(w.create(&p("report.md"), b"# v1".to_vec(), "text/markdown", user()))
        .unwrap();
    let (_, bytes) = env.run(w.read(&p("report.md"))).unwrap();
    let from = PublishedFrom {
        path: e.path.to_string(),
        revision: e.revision,
    };
    let published = env
        .run(arts.publish(bytes, "Report", "text/markdown", user(), Some(from.clone())))
        .unwrap();
    let art = published.artifact.clone();
    assert!(published.created);
    assert_eq!(art.id, agent_capabilities::sha256_hex(b"# v1"));
    assert_eq!(
        (art.name.as_str(), art.size, art.from.clone()),
        ("Report", 4, Some(from))
    );
    assert_eq!(env.blob_count(), 1, "file and Artifact share one blob");
    // Edit the scratch file: the Artifact keeps its bytes.
    env.run(w.write(
        &p("report.md"),
        b"# v2".to_vec(),
        "text/markdown",
        Expect::Revision(1),
        user(),
    ))
    .unwrap();
    let (got, bytes) = env.run(arts.get(&art.id)).unwrap();
    assert_eq!((got, bytes.as_slice()), (art.clone(), &b"# v1"[..]));
    assert_eq!(env.blob_count(), 2);
    // Delete the file and empty the trash: the Artifact survives.
    env.run(w.delete(&p("report.md"), Expect::Any, user()))
        .unwrap();
    env.run(w.empty_trash(&destructive_proof(&env))).unwrap();
    assert_eq!(env.run(arts.get(&art.id)).unwrap().1, b"# v1");
    assert!(env.has_blob(&art.id));
    assert!(
        !env.has_blob(&agent_capabilities::sha256_hex(b"# v2")),
        "v2 freed"
    );
    assert_eq!(env.blob_count(), 1);
    assert_eq!(env.run(arts.list()).unwrap(), vec![art]);
}

pub fn s7_4_identical_bytes_stored_once() {
    let env = Env::new("s1");
    let a = env.actors(Quotas::default());
    let one = env
        .run(
            a.artifacts
                .publish(b"same".to_vec(), "First", "text/plain", user(), None),
        )
        .unwrap();
    let two = env
        .run(
            a.artifacts
                .publish(b"same".to_vec(), "Second", "text/plain", user(), None),
        )
        .unwrap();
    assert!(one.created);
    assert!(!two.created, "same bytes, same Artifact");
    assert_eq!(
        two.artifact, one.artifact,
        "the record is immutable: name unchanged"
    );
    assert_eq!(env.blob_count(), 1);
    assert_eq!(env.table_len(Table::Artifacts), 1);
    // Two files with the same bytes share the blob too.
    env.run(
        a.workspace
            .create(&p("x"), b"same".to_vec(), "text/plain", user()),
    )
    .unwrap();
    env.run(
        a.workspace
            .create(&p("y"), b"same".to_vec(), "text/plain", user()),
    )
    .unwrap();
    assert_eq!(env.blob_count(), 1);
    let other = env
        .run(
            a.artifacts
                .publish(b"different".to_vec(), "Other", "text/plain", user(), None),
        )
        .unwrap();
    assert_ne!(other.artifact.id, one.artifact.id);
    assert_eq!(env.blob_count(), 2);
}

pub fn s7_5_session_copy_and_delete_keep_references() {
    let env = Env::new("s1");
    let a = env.actors(Quotas::default());
    env.run(a.workspace.create(
        &p("only-in-a.txt"),
        b"scratch".to_vec(),
        "text/plain",
        user(),
    ))
    .unwrap();
    env.run(
        a.workspace
            .create(&p("trashed.txt"), b"trash".to_vec(), "text/plain", user()),
    )
    .unwrap();
    env.run(a.workspace.delete(&p("trashed.txt"), Expect::Any, user()))
        .unwrap();
    let art = env
        .run(a.artifacts.publish(
            b"final report".to_vec(),
            "Report",
            "text/plain",
            user(),
            None,
        ))
        .unwrap()
        .artifact;
    assert_eq!(env.blob_count(), 3);

    // Copy s1 into s2: references, not bytes.
    let fence2 = env.fence_for("s2");
    let report = env
        .run(copy_session(
            env.host.storage.as_ref(),
            &env.fence.session,
            &fence2,
        ))
        .unwrap();
    assert_eq!(
        (report.files, report.trash_entries, report.artifacts),
        (1, 1, 1)
    );
    assert_eq!(env.blob_count(), 3, "a copy stores no bytes");
    let b = agent_workspace::spawn_session(&env.host, fence2.clone(), Quotas::default(), None);
    assert_eq!(
        env.run(b.workspace.read(&p("only-in-a.txt"))).unwrap().1,
        b"scratch"
    );
    assert_eq!(
        env.run(b.artifacts.get(&art.id)).unwrap().1,
        b"final report"
    );
    assert_eq!(env.run(b.workspace.list_trash()).unwrap().len(), 1);
    // Copying onto a session that has content is refused.
    let err = env
        .run(copy_session(
            env.host.storage.as_ref(),
            &env.fence.session,
            &fence2,
        ))
        .unwrap_err();
    assert_eq!(err.code(), "target_not_empty");

    // In s2, drop the scratch file and its trash; publish something of its own.
    env.run(b.workspace.delete(&p("only-in-a.txt"), Expect::Any, user()))
        .unwrap();
    env.run(b.workspace.empty_trash(&destructive_proof(&env)))
        .unwrap();
    assert_eq!(env.blob_count(), 3, "s1 still references both blobs");
    let own = env
        .run(
            b.artifacts
                .publish(b"b only".to_vec(), "Mine", "text/plain", user(), None),
        )
        .unwrap()
        .artifact;
    assert_eq!(env.blob_count(), 4);

    // Delete s1: its scratch and trash blobs go, the shared Artifact stays.
    let deleted = env
        .run(delete_session(env.host.storage.as_ref(), &env.fence))
        .unwrap();
    assert_eq!(
        (deleted.files, deleted.trash_entries, deleted.artifacts),
        (1, 1, 1)
    );
    assert_eq!(deleted.blobs_freed.len(), 2);
    assert_eq!(env.blob_count(), 2);
    assert_eq!(
        env.run(b.artifacts.get(&art.id)).unwrap().1,
        b"final report"
    );
    assert!(
        env.run(a.workspace.stat(&p("only-in-a.txt")))
            .unwrap()
            .is_none()
    );
    assert_eq!(
        env.run(env.host.storage.scan_prefix(Table::Manifests, "s1/"))
            .unwrap()
            .len(),
        0
    );

    // Delete s2: nothing references anything any more.
    let deleted = env
        .run(delete_session(env.host.storage.as_ref(), &fence2))
        .unwrap();
    assert_eq!(deleted.blobs_freed.len(), 2);
    assert!(deleted.blobs_freed.contains(&own.id));
    assert_eq!(env.blob_count(), 0);
    for table in [Table::Manifests, Table::Trash, Table::Artifacts] {
        assert_eq!(env.table_len(table), 0, "{table:?}");
    }
}

pub fn s7_5_foreign_references_keep_blobs() {
    // A run record naming the same bytes as a BlobRef keeps the blob alive.
    let env = Env::new("s1");
    let a = env.actors(Quotas::default());
    let art = env
        .run(
            a.artifacts
                .publish(b"shared output".to_vec(), "Out", "text/plain", user(), None),
        )
        .unwrap()
        .artifact;
    let run_record =
        serde_json::json!({"id": "run-1", "output": {"hash": art.id, "size": art.size}});
    let batch = Batch::new().put(
        Table::Runs,
        "run-1",
        serde_json::to_vec(&run_record).unwrap(),
    );
    env.run(env.host.storage.commit(batch)).unwrap();
    let deleted = env
        .run(delete_session(env.host.storage.as_ref(), &env.fence))
        .unwrap();
    assert!(deleted.blobs_freed.is_empty());
    assert!(env.has_blob(&art.id), "the run's output survives");
    // A workspace receipt in the journal (content_hash) does not pin a blob.
    let env = Env::new("s1");
    let a = env.actors(Quotas::default());
    let (_, receipt) = env
        .run(
            a.workspace
                .create(&p("f"), b"scratch".to_vec(), "text/plain", user()),
        )
        .unwrap();
    let journal = serde_json::json!({"receipts": [receipt.to_effect_receipt()]});
    let batch = Batch::new().put(
        Table::Journal,
        "run-1/call-1",
        serde_json::to_vec(&journal).unwrap(),
    );
    env.run(env.host.storage.commit(batch)).unwrap();
    let deleted = env
        .run(delete_session(env.host.storage.as_ref(), &env.fence))
        .unwrap();
    assert_eq!(deleted.blobs_freed.len(), 1);
    assert_eq!(env.blob_count(), 0);
    let _ = SessionId::new("unused").unwrap();
}

pub fn quota_artifact_bytes_at_below_and_above() {
    let env = Env::new("s1");
    let quotas = Quotas {
        max_artifact_bytes: 10,
        ..Quotas::default()
    };
    let a = env.actors(quotas);
    env.run(
        a.artifacts
            .publish(vec![1; 9], "below", "x/y", user(), None),
    )
    .unwrap();
    env.run(a.artifacts.publish(vec![2; 10], "at", "x/y", user(), None))
        .unwrap();
    let err = env
        .run(
            a.artifacts
                .publish(vec![3; 11], "above", "x/y", user(), None),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            WorkspaceError::QuotaExceeded {
                quota: Quota::ArtifactBytes,
                limit: 10,
                requested: 11
            }
        ),
        "{err:?}"
    );
    assert_eq!(env.blob_count(), 2);
}

pub fn artifact_arguments_are_checked() {
    let env = Env::new("s1");
    let a = env.actors(Quotas::default());
    for (name, mime) in [("", "text/plain"), ("ok", "bad"), ("a\u{0}b", "text/plain")] {
        let err = env
            .run(a.artifacts.publish(b"x".to_vec(), name, mime, user(), None))
            .unwrap_err();
        assert_eq!(err.code(), "invalid_arguments", "{name:?} {mime:?}");
    }
    let long = "n".repeat(256);
    assert!(
        env.run(
            a.artifacts
                .publish(b"x".to_vec(), &long, "text/plain", user(), None)
        )
        .is_err()
    );
    assert!(
        env.run(
            a.artifacts
                .publish(b"x".to_vec(), &long[..255], "text/plain", user(), None)
        )
        .is_ok()
    );
    for id in ["nope", &"A".repeat(64), &"0".repeat(64)] {
        assert_eq!(
            env.run(a.artifacts.get(id)).unwrap_err().code(),
            "artifact_not_found"
        );
    }
}
