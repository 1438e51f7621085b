//! S7.2, S7.3: files, revisions, trash, quotas and fencing through the
//! workspace actor on the memory host.

use agent_capabilities::{EffectClass, Target, TargetScope};
use agent_kernel::host::{StorageError, Table};
use agent_kernel::{OwnerId, SessionId};
use agent_workspace::limits::DEFAULT_MAX_FILE_BYTES;
use agent_workspace::{Expect, Operation, Quota, Quotas, Source, WorkspaceError, WorkspaceHandle};

use super::{Env, destructive_proof, p, user, verified_grant};

fn small() -> Quotas {
    Quotas {
        max_files: 3,
        max_file_bytes: 10,
        max_total_bytes: 20,
        max_trash_entries: 2,
        max_artifact_bytes: 10,
    }
}

fn ws(env: &Env) -> WorkspaceHandle {
    env.actors(Quotas::default()).workspace
}

fn content(env: &Env, w: &WorkspaceHandle, path: &str) -> Vec<u8> {
    env.run(w.read(&p(path))).unwrap().1
}

fn quota_err(r: Result<impl std::fmt::Debug, WorkspaceError>) -> (Quota, u64, u64) {
    match r {
        Err(WorkspaceError::QuotaExceeded {
            quota,
            limit,
            requested,
        }) => (quota, limit, requested),
        other => panic!("expected a quota error, got {other:?}"),
    }
}

pub fn s7_2_manifest_entry_fields() {
    let env = Env::new("s1");
    let w = ws(&env);
    let t0 = env.now_ms();
    let (e, _) = env
        .run(w.create(&p("notes/a.md"), b"hello".to_vec(), "text/markdown", user()))
        .unwrap();
    assert_eq!(e.path.as_str(), "notes/a.md");
    assert_eq!(e.mime, "text/markdown");
    assert_eq!(e.size, 5);
    assert_eq!(e.hash, agent_capabilities::sha256_hex(b"hello"));
    assert_eq!(e.revision, 1);
    assert_eq!(e.source, Source::User);
    assert_eq!((e.created_at_ms, e.updated_at_ms), (t0, t0));
    env.advance_ms(5_000);
    let src = Source::Import {
        from: "attachment".into(),
    };
    let (e2, _) = env
        .run(w.write(
            &p("notes/a.md"),
            b"hello!".to_vec(),
            "text/plain",
            Expect::Revision(1),
            src.clone(),
        ))
        .unwrap();
    assert_eq!((e2.created_at_ms, e2.updated_at_ms), (t0, t0 + 5_000));
    assert_eq!((e2.revision, e2.size, e2.source.clone()), (2, 6, src));
    // The record is in Table::Manifests under <session>/<path>, the content a blob.
    let raw = env
        .run(env.host.storage.get(Table::Manifests, "s1/notes/a.md"))
        .unwrap()
        .expect("manifest key <session>/<path>");
    let stored: agent_workspace::FileEntry = serde_json::from_slice(&raw).unwrap();
    assert_eq!(stored, e2);
    assert!(env.has_blob(&e2.hash));
    assert_eq!(content(&env, &w, "notes/a.md"), b"hello!");
    assert_eq!(env.run(w.stat(&p("missing"))).unwrap(), None);
}

pub fn s7_3_stale_revision_on_write_returns_latest_and_changes_nothing() {
    let env = Env::new("s1");
    let w = ws(&env);
    env.run(w.create(&p("a.txt"), b"one".to_vec(), "text/plain", user()))
        .unwrap();
    env.run(w.write(
        &p("a.txt"),
        b"two".to_vec(),
        "text/plain",
        Expect::Revision(1),
        user(),
    ))
    .unwrap();
    let blobs = env.blob_count();
    let commits = env.mem.storage().commit_count();
    let err = env
        .run(w.write(
            &p("a.txt"),
            b"three".to_vec(),
            "text/plain",
            Expect::Revision(1),
            user(),
        ))
        .unwrap_err();
    match &err {
        WorkspaceError::StaleRevision { expected, latest } => {
            assert_eq!(*expected, 1);
            assert_eq!(latest.revision, 2);
            assert_eq!(latest.hash, agent_capabilities::sha256_hex(b"two"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.code(), "stale_revision");
    assert!(err.to_string().contains("latest is 2"), "{err}");
    assert_eq!(content(&env, &w, "a.txt"), b"two");
    assert_eq!(env.run(w.stat(&p("a.txt"))).unwrap().unwrap().revision, 2);
    assert_eq!(
        env.blob_count(),
        blobs,
        "no blob stored for a refused write"
    );
    assert_eq!(
        env.mem.storage().commit_count(),
        commits,
        "nothing committed"
    );
    // Append with a stale revision is refused the same way.
    let err = env
        .run(w.append(
            &p("a.txt"),
            b"x".to_vec(),
            "text/plain",
            Expect::Revision(1),
            user(),
        ))
        .unwrap_err();
    assert_eq!(err.code(), "stale_revision");
    assert_eq!(content(&env, &w, "a.txt"), b"two");
}

/// Two workspace actors of one session (as after a reload or from a
/// second embedder): each one's cached snapshot goes stale when the other
/// writes, and neither a stale refusal nor a stale acceptance gets through.
pub fn s7_3_a_workspace_with_a_stale_snapshot_sees_the_other_writer() {
    let env = Env::new("s1");
    let a = ws(&env);
    let b = ws(&env);
    env.run(a.create(&p("a.txt"), b"one".to_vec(), "text/plain", user()))
        .unwrap();
    env.run(b.write(
        &p("a.txt"),
        b"two".to_vec(),
        "text/plain",
        Expect::Revision(1),
        user(),
    ))
    .unwrap();
    // a's snapshot still says revision 1: refused as stale all the same.
    let err = env
        .run(a.write(
            &p("a.txt"),
            b"x".to_vec(),
            "text/plain",
            Expect::Revision(1),
            user(),
        ))
        .unwrap_err();
    assert_eq!(err.code(), "stale_revision");
    env.run(b.write(
        &p("a.txt"),
        b"three".to_vec(),
        "text/plain",
        Expect::Revision(2),
        user(),
    ))
    .unwrap();
    // a's snapshot says revision 2: the latest revision, 3, is accepted.
    let (e, _) = env
        .run(a.write(
            &p("a.txt"),
            b"four".to_vec(),
            "text/plain",
            Expect::Revision(3),
            user(),
        ))
        .unwrap();
    assert_eq!(e.revision, 4);
    assert_eq!(content(&env, &b, "a.txt"), b"four");
    // A file b created is taken, whatever a's snapshot says.
    env.run(b.create(&p("b.txt"), b"b".to_vec(), "text/plain", user()))
        .unwrap();
    let err = env
        .run(a.create(&p("b.txt"), b"a".to_vec(), "text/plain", user()))
        .unwrap_err();
    assert_eq!(content(&env, &a, "b.txt"), b"b", "{err:?}");
}

pub fn s7_3_stale_revision_on_move_returns_latest_and_changes_nothing() {
    let env = Env::new("s1");
    let w = ws(&env);
    env.run(w.create(&p("a.txt"), b"one".to_vec(), "text/plain", user()))
        .unwrap();
    env.run(w.write(
        &p("a.txt"),
        b"two".to_vec(),
        "text/plain",
        Expect::Revision(1),
        user(),
    ))
    .unwrap();
    let commits = env.mem.storage().commit_count();
    let err = env
        .run(w.rename(&p("a.txt"), &p("b.txt"), Expect::Revision(1), user()))
        .unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::StaleRevision { expected: 1, latest } if latest.revision == 2),
        "{err:?}"
    );
    assert_eq!(env.mem.storage().commit_count(), commits);
    assert!(env.run(w.stat(&p("b.txt"))).unwrap().is_none());
    assert_eq!(content(&env, &w, "a.txt"), b"two");
    // With the right revision it moves, keeping content and hash.
    let (moved, receipt) = env
        .run(w.rename(&p("a.txt"), &p("dir/b.txt"), Expect::Revision(2), user()))
        .unwrap();
    assert_eq!(moved.revision, 3);
    assert_eq!(receipt.to.as_deref(), Some("dir/b.txt"));
    assert!(env.run(w.stat(&p("a.txt"))).unwrap().is_none());
    assert_eq!(content(&env, &w, "dir/b.txt"), b"two");
    // A move onto an existing file is refused with that file's state.
    env.run(w.create(&p("c.txt"), b"c".to_vec(), "text/plain", user()))
        .unwrap();
    let err = env
        .run(w.rename(&p("c.txt"), &p("dir/b.txt"), Expect::Any, user()))
        .unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::AlreadyExists { latest } if latest.path.as_str() == "dir/b.txt")
    );
    assert_eq!(
        env.run(w.rename(&p("c.txt"), &p("c.txt"), Expect::Any, user()))
            .unwrap_err()
            .code(),
        "same_path"
    );
}

pub fn s7_3_stale_revision_on_delete_returns_latest_and_changes_nothing() {
    let env = Env::new("s1");
    let w = ws(&env);
    env.run(w.create(&p("a.txt"), b"one".to_vec(), "text/plain", user()))
        .unwrap();
    env.run(w.write(
        &p("a.txt"),
        b"two".to_vec(),
        "text/plain",
        Expect::Revision(1),
        user(),
    ))
    .unwrap();
    let commits = env.mem.storage().commit_count();
    let err = env
        .run(w.delete(&p("a.txt"), Expect::Revision(1), user()))
        .unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::StaleRevision { expected: 1, latest } if latest.revision == 2),
        "{err:?}"
    );
    assert_eq!(env.mem.storage().commit_count(), commits);
    assert!(env.run(w.list_trash()).unwrap().is_empty());
    assert_eq!(content(&env, &w, "a.txt"), b"two");
}

pub fn s7_3_must_not_exist_and_vanished() {
    let env = Env::new("s1");
    let w = ws(&env);
    env.run(w.create(&p("a.txt"), b"one".to_vec(), "text/plain", user()))
        .unwrap();
    let err = env
        .run(w.create(&p("a.txt"), b"other".to_vec(), "text/plain", user()))
        .unwrap_err();
    assert!(matches!(&err, WorkspaceError::AlreadyExists { latest } if latest.revision == 1));
    assert_eq!(content(&env, &w, "a.txt"), b"one");
    // An expected revision on a missing file.
    let err = env
        .run(w.write(
            &p("gone.txt"),
            b"x".to_vec(),
            "text/plain",
            Expect::Revision(4),
            user(),
        ))
        .unwrap_err();
    assert!(
        matches!(err, WorkspaceError::Vanished { expected: 4, .. }),
        "{err:?}"
    );
    assert!(env.run(w.stat(&p("gone.txt"))).unwrap().is_none());
    assert_eq!(
        env.run(w.read(&p("gone.txt"))).unwrap_err().code(),
        "not_found"
    );
    assert_eq!(
        env.run(w.delete(&p("gone.txt"), Expect::Any, user()))
            .unwrap_err()
            .code(),
        "not_found"
    );
    // Expect::Any replaces whatever is there (hosts, imports).
    env.run(w.write(
        &p("a.txt"),
        b"forced".to_vec(),
        "text/plain",
        Expect::Any,
        user(),
    ))
    .unwrap();
    assert_eq!(content(&env, &w, "a.txt"), b"forced");
    // Invalid MIME types are refused before anything is stored.
    let blobs = env.blob_count();
    let err = env
        .run(w.create(&p("m.txt"), b"zzz".to_vec(), "not a mime", user()))
        .unwrap_err();
    assert_eq!(err.code(), "invalid_arguments");
    assert_eq!(env.blob_count(), blobs);
}

pub fn s7_3_append_and_list() {
    let env = Env::new("s1");
    let w = ws(&env);
    let (e, r) = env
        .run(w.append(
            &p("log/a.txt"),
            b"one\n".to_vec(),
            "text/plain",
            Expect::Any,
            user(),
        ))
        .unwrap();
    assert_eq!(
        (e.revision, r.operation, r.old_revision),
        (1, Operation::Append, None)
    );
    let (e, r) = env
        .run(w.append(
            &p("log/a.txt"),
            b"two\n".to_vec(),
            "text/plain",
            Expect::Revision(1),
            user(),
        ))
        .unwrap();
    assert_eq!((e.revision, r.old_revision, e.size), (2, Some(1), 8));
    assert_eq!(content(&env, &w, "log/a.txt"), b"one\ntwo\n");
    env.run(w.create(&p("log/deep/b.txt"), b"b".to_vec(), "text/plain", user()))
        .unwrap();
    env.run(w.create(&p("top.md"), b"t".to_vec(), "text/markdown", user()))
        .unwrap();
    let root = env.run(w.list(None, false)).unwrap();
    assert_eq!(root.folder, "");
    assert_eq!(
        root.files
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        ["top.md"]
    );
    assert_eq!(root.folders, ["log"]);
    let log = env.run(w.list(Some(&p("log")), false)).unwrap();
    assert_eq!(
        log.files
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        ["log/a.txt"]
    );
    assert_eq!(log.folders, ["deep"]);
    let all = env.run(w.list(Some(&p("log")), true)).unwrap();
    assert_eq!(all.files.len(), 2);
    assert!(all.folders.is_empty());
    // A sibling folder whose name starts the same is not inside.
    env.run(w.create(&p("logs.txt"), b"x".to_vec(), "text/plain", user()))
        .unwrap();
    assert_eq!(
        env.run(w.list(Some(&p("log")), true)).unwrap().files.len(),
        2
    );
    assert_eq!(
        env.run(w.list(Some(&p("top.md")), false))
            .unwrap_err()
            .code(),
        "invalid_arguments"
    );
    assert!(
        env.run(w.list(Some(&p("nothing")), false))
            .unwrap()
            .files
            .is_empty()
    );
}

pub fn s7_1_case_conflicts_and_file_folder_conflicts() {
    let env = Env::new("s1");
    let w = ws(&env);
    env.run(w.create(&p("Notes/Plan.md"), b"x".to_vec(), "text/plain", user()))
        .unwrap();
    for (path, code) in [
        ("Notes/plan.md", "case_conflict"),
        ("notes/other.md", "case_conflict"),
        ("NOTES/PLAN.MD", "case_conflict"),
        ("Notes", "file_folder_conflict"),
        ("Notes/Plan.md/child", "file_folder_conflict"),
    ] {
        let err = env
            .run(w.create(&p(path), b"y".to_vec(), "text/plain", user()))
            .unwrap_err();
        assert_eq!(err.code(), code, "{path}: {err}");
    }
    // Non-ASCII case folding: Ä and ä conflict; NFD spelling is the same file.
    env.run(w.create(&p("Ärger.txt"), b"1".to_vec(), "text/plain", user()))
        .unwrap();
    assert_eq!(
        env.run(w.create(&p("ärger.txt"), b"2".to_vec(), "text/plain", user()))
            .unwrap_err()
            .code(),
        "case_conflict"
    );
    let nfd = p("A\u{308}rger.txt");
    let err = env
        .run(w.create(&nfd, b"3".to_vec(), "text/plain", user()))
        .unwrap_err();
    assert_eq!(err.code(), "already_exists", "NFD names the same file");
    assert_eq!(content(&env, &w, "A\u{308}rger.txt"), b"1");
    // A case-only rename of one file is allowed.
    env.run(w.rename(
        &p("Notes/Plan.md"),
        &p("Notes/plan.md"),
        Expect::Any,
        user(),
    ))
    .unwrap();
    assert_eq!(content(&env, &w, "Notes/plan.md"), b"x");
    assert_eq!(env.run(w.usage()).unwrap().files, 2);
}

pub fn s7_3_trash_round_trip() {
    let env = Env::new("s1");
    let w = ws(&env);
    env.run(w.create(&p("a/b.txt"), b"keep me".to_vec(), "text/plain", user()))
        .unwrap();
    let (trash, receipt) = env
        .run(w.delete(&p("a/b.txt"), Expect::Revision(1), user()))
        .unwrap();
    assert_eq!(trash.entry.path.as_str(), "a/b.txt");
    assert_eq!(trash.entry.revision, 1, "trash keeps the original revision");
    assert_eq!(receipt.trash_id.as_deref(), Some(trash.id.as_str()));
    assert!(env.run(w.stat(&p("a/b.txt"))).unwrap().is_none());
    let listed = env.run(w.list_trash()).unwrap();
    assert_eq!(listed, vec![trash.clone()]);
    assert_eq!(env.table_len(Table::Trash), 1);
    assert!(env.has_blob(&trash.entry.hash), "trashed content is kept");
    let (restored, r) = env.run(w.restore(&trash.id)).unwrap();
    assert_eq!(restored.path.as_str(), "a/b.txt");
    assert!(restored.revision > 1);
    assert_eq!(
        (r.old_revision, r.new_revision),
        (Some(1), Some(restored.revision))
    );
    assert_eq!(content(&env, &w, "a/b.txt"), b"keep me");
    assert!(env.run(w.list_trash()).unwrap().is_empty());
    assert_eq!(
        env.run(w.restore(&trash.id)).unwrap_err().code(),
        "trash_not_found"
    );
    // Empty the trash: entries go, unreferenced blobs are freed.
    env.run(w.delete(&p("a/b.txt"), Expect::Any, user()))
        .unwrap();
    let blobs = env.blob_count();
    let (removed, receipt) = env.run(w.empty_trash(&destructive_proof(&env))).unwrap();
    assert_eq!(removed.len(), 1);
    assert_eq!(receipt.removed, Some(1));
    assert_eq!(receipt.effect(), EffectClass::DestructiveLocal);
    assert!(env.run(w.list_trash()).unwrap().is_empty());
    assert_eq!(env.blob_count(), blobs - 1);
}

/// S6.1: emptying the trash is destructive. A capability that verifies for
/// a lesser effect (`write_local`), for another tool, or over part of the
/// workspace only is refused with a typed error, and nothing is deleted:
/// the trash records and their blobs are all still stored. The approved
/// `destructive_local` capability empties it.
pub fn s6_1_empty_trash_refuses_a_lesser_capability_and_deletes_nothing() {
    let env = Env::new("s1");
    let w = ws(&env);
    env.run(w.create(&p("notes/a.txt"), b"first".to_vec(), "text/plain", user()))
        .unwrap();
    env.run(w.create(&p("b.txt"), b"second".to_vec(), "text/plain", user()))
        .unwrap();
    let (ta, _) = env
        .run(w.delete(&p("notes/a.txt"), Expect::Any, user()))
        .unwrap();
    let (tb, _) = env.run(w.delete(&p("b.txt"), Expect::Any, user())).unwrap();
    let whole = || TargetScope::Workspace {
        prefix: String::new(),
    };
    let root = || Target::WorkspacePath {
        path: String::new(),
    };
    let lesser = [
        // A write_local-only grant for the right tool.
        verified_grant(
            &env,
            "workspace_empty_trash",
            &[EffectClass::WriteLocal],
            whole(),
            root(),
        ),
        // destructive_local, but for another tool.
        verified_grant(
            &env,
            "workspace_delete",
            &[EffectClass::DestructiveLocal],
            whole(),
            root(),
        ),
        // destructive_local over one folder only.
        verified_grant(
            &env,
            "workspace_empty_trash",
            &[EffectClass::DestructiveLocal],
            TargetScope::Workspace {
                prefix: "notes".into(),
            },
            Target::WorkspacePath {
                path: "notes/a.txt".into(),
            },
        ),
    ];
    let blobs = env.blob_count();
    let commits = env.mem.storage().commit_count();
    for proof in &lesser {
        let err = env.run(w.empty_trash(proof)).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::NotAuthorised { .. }),
            "{err:?}"
        );
        assert_eq!(err.code(), "capability_refused");
        assert!(!err.retryable());
        assert!(err.to_string().contains("nothing was deleted"), "{err}");
        // Nothing deleted: both trash records and both blobs remain.
        assert_eq!(env.table_len(Table::Trash), 2);
        assert_eq!(env.run(w.list_trash()).unwrap().len(), 2);
        assert!(env.has_blob(&ta.entry.hash) && env.has_blob(&tb.entry.hash));
        assert_eq!(env.blob_count(), blobs);
        assert_eq!(env.mem.storage().commit_count(), commits, "no write at all");
    }
    // The approved destructive capability empties it, and frees the blobs.
    let (removed, receipt) = env.run(w.empty_trash(&destructive_proof(&env))).unwrap();
    assert_eq!(removed.len(), 2);
    assert_eq!(receipt.effect(), EffectClass::DestructiveLocal);
    assert_eq!(env.table_len(Table::Trash), 0);
    assert!(!env.has_blob(&ta.entry.hash) && !env.has_blob(&tb.entry.hash));
    assert_eq!(env.blob_count(), blobs - 2);
}

pub fn s7_3_restore_onto_taken_path_is_a_conflict() {
    let env = Env::new("s1");
    let w = ws(&env);
    env.run(w.create(&p("x.txt"), b"old".to_vec(), "text/plain", user()))
        .unwrap();
    let (trash, _) = env.run(w.delete(&p("x.txt"), Expect::Any, user())).unwrap();
    let (occupant, _) = env
        .run(w.create(&p("x.txt"), b"new".to_vec(), "text/plain", user()))
        .unwrap();
    let commits = env.mem.storage().commit_count();
    let err = env.run(w.restore(&trash.id)).unwrap_err();
    match &err {
        WorkspaceError::RestoreConflict {
            trash: t,
            occupant: o,
        } => {
            assert_eq!(t.id, trash.id);
            assert_eq!(**o, occupant);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.code(), "restore_conflict");
    assert_eq!(env.mem.storage().commit_count(), commits);
    assert_eq!(content(&env, &w, "x.txt"), b"new");
    assert_eq!(env.run(w.list_trash()).unwrap().len(), 1);
    // Moving the occupant away frees the path.
    env.run(w.rename(&p("x.txt"), &p("x2.txt"), Expect::Any, user()))
        .unwrap();
    env.run(w.restore(&trash.id)).unwrap();
    assert_eq!(content(&env, &w, "x.txt"), b"old");
    assert_eq!(content(&env, &w, "x2.txt"), b"new");
}

pub fn s7_3_revisions_never_repeat() {
    let env = Env::new("s1");
    let w = ws(&env);
    let mut seen = std::collections::BTreeSet::new();
    let (e, _) = env
        .run(w.create(&p("f"), b"1".to_vec(), "text/plain", user()))
        .unwrap();
    seen.insert(e.revision);
    let (t, _) = env.run(w.delete(&p("f"), Expect::Any, user())).unwrap();
    let (e, _) = env
        .run(w.create(&p("f"), b"2".to_vec(), "text/plain", user()))
        .unwrap();
    assert!(seen.insert(e.revision));
    let (_, _) = env
        .run(w.rename(&p("f"), &p("g"), Expect::Any, user()))
        .unwrap();
    let (e, _) = env.run(w.restore(&t.id)).unwrap();
    assert!(
        seen.insert(e.revision),
        "restored revision {} is new",
        e.revision
    );
    // The first lineage's revision 1 can never match the restored file.
    let err = env
        .run(w.write(
            &p("f"),
            b"3".to_vec(),
            "text/plain",
            Expect::Revision(1),
            user(),
        ))
        .unwrap_err();
    assert_eq!(err.code(), "stale_revision");
}

pub fn s7_3_receipts_name_path_revisions_and_hash() {
    let env = Env::new("s1");
    let w = ws(&env);
    let (_, r) = env
        .run(w.create(&p("r.txt"), b"abc".to_vec(), "text/plain", user()))
        .unwrap();
    assert_eq!(r.operation, Operation::Create);
    assert_eq!(
        (r.path.as_str(), r.old_revision, r.new_revision),
        ("r.txt", None, Some(1))
    );
    assert_eq!(
        r.content_hash.as_deref(),
        Some(agent_capabilities::sha256_hex(b"abc").as_str())
    );
    let er = r.to_effect_receipt();
    assert_eq!(er.effect, EffectClass::WriteLocal);
    assert_eq!(er.target, "r.txt");
    assert_eq!(er.detail["new_revision"], 1);
    assert_eq!(
        er.detail["content_hash"],
        agent_capabilities::sha256_hex(b"abc")
    );
    assert!(
        !er.detail.to_string().contains("abc\""),
        "no content in receipts"
    );
    let (_, r) = env
        .run(w.write(
            &p("r.txt"),
            b"abcd".to_vec(),
            "text/plain",
            Expect::Revision(1),
            user(),
        ))
        .unwrap();
    assert_eq!(
        (r.operation, r.old_revision, r.new_revision),
        (Operation::Write, Some(1), Some(2))
    );
    let (_, r) = env
        .run(w.rename(&p("r.txt"), &p("s.txt"), Expect::Any, user()))
        .unwrap();
    assert_eq!(r.to_effect_receipt().target, "r.txt -> s.txt");
    let (_, r) = env.run(w.delete(&p("s.txt"), Expect::Any, user())).unwrap();
    assert_eq!(
        (r.operation, r.old_revision, r.new_revision),
        (Operation::Delete, Some(3), None)
    );
}

pub fn quota_files_at_below_and_above() {
    let env = Env::new("s1");
    let w = env.actors(small()).workspace;
    env.run(w.create(&p("1"), vec![], "text/plain", user()))
        .unwrap();
    env.run(w.create(&p("2"), vec![], "text/plain", user()))
        .unwrap(); // below
    env.run(w.create(&p("3"), vec![], "text/plain", user()))
        .unwrap(); // at
    let (q, limit, req) = quota_err(env.run(w.create(&p("4"), vec![], "text/plain", user())));
    assert_eq!((q, limit, req), (Quota::Files, 3, 4)); // above
    // Replacing an existing file at the limit is fine.
    env.run(w.write(&p("3"), b"x".to_vec(), "text/plain", Expect::Any, user()))
        .unwrap();
    // A trashed file does not count as live, but cannot be restored past the limit.
    let (t, _) = env.run(w.delete(&p("3"), Expect::Any, user())).unwrap();
    env.run(w.create(&p("4"), vec![], "text/plain", user()))
        .unwrap();
    let (q, _, _) = quota_err(env.run(w.restore(&t.id)));
    assert_eq!(q, Quota::Files);
    let err = env
        .run(w.create(&p("5"), vec![], "text/plain", user()))
        .unwrap_err();
    assert!(err.to_string().contains("files"), "{err}");
    assert_eq!(env.run(w.usage()).unwrap().files, 3);
}

pub fn quota_file_bytes_at_below_and_above() {
    let env = Env::new("s1");
    let w = env.actors(small()).workspace;
    env.run(w.create(&p("a"), vec![1; 9], "application/octet-stream", user()))
        .unwrap();
    env.run(w.create(&p("b"), vec![1; 10], "application/octet-stream", user()))
        .unwrap();
    let blobs = env.blob_count();
    let (q, limit, req) =
        quota_err(env.run(w.create(&p("c"), vec![1; 11], "application/octet-stream", user())));
    assert_eq!((q, limit, req), (Quota::FileBytes, 10, 11));
    assert_eq!(env.blob_count(), blobs, "nothing stored");
    // Appending past the limit is refused too, and the file is unchanged.
    let (q, _, req) = quota_err(env.run(w.append(&p("a"), vec![2; 2], "x/y", Expect::Any, user())));
    assert_eq!((q, req), (Quota::FileBytes, 11));
    env.run(w.append(&p("a"), vec![2; 1], "x/y", Expect::Any, user()))
        .unwrap();
    assert_eq!(content(&env, &w, "a").len(), 10);
}

pub fn quota_default_file_bytes_at_below_and_above() {
    let env = Env::new("s1");
    let w = ws(&env);
    let max = usize::try_from(DEFAULT_MAX_FILE_BYTES).unwrap();
    env.run(w.create(
        &p("below"),
        vec![7; max - 1],
        "application/octet-stream",
        user(),
    ))
    .unwrap();
    env.run(w.create(&p("at"), vec![8; max], "application/octet-stream", user()))
        .unwrap();
    let (q, limit, req) = quota_err(env.run(w.create(
        &p("above"),
        vec![9; max + 1],
        "application/octet-stream",
        user(),
    )));
    assert_eq!(
        (q, limit, req),
        (
            Quota::FileBytes,
            DEFAULT_MAX_FILE_BYTES,
            DEFAULT_MAX_FILE_BYTES + 1
        )
    );
}

pub fn quota_total_bytes_at_below_and_above() {
    let env = Env::new("s1");
    let w = env.actors(small()).workspace;
    env.run(w.create(&p("a"), vec![1; 10], "x/y", user()))
        .unwrap();
    env.run(w.create(&p("b"), vec![1; 9], "x/y", user()))
        .unwrap(); // 19: below
    env.run(w.write(&p("b"), vec![1; 10], "x/y", Expect::Any, user()))
        .unwrap(); // 20: at
    let (q, limit, req) = quota_err(env.run(w.create(&p("c"), vec![1; 1], "x/y", user())));
    assert_eq!((q, limit, req), (Quota::TotalBytes, 20, 21)); // above
    // Trashed content still counts until the trash is emptied.
    env.run(w.delete(&p("b"), Expect::Any, user())).unwrap();
    let (q, _, _) = quota_err(env.run(w.create(&p("c"), vec![1; 1], "x/y", user())));
    assert_eq!(q, Quota::TotalBytes);
    env.run(w.empty_trash(&destructive_proof(&env))).unwrap();
    env.run(w.create(&p("c"), vec![1; 10], "x/y", user()))
        .unwrap();
    let u = env.run(w.usage()).unwrap();
    assert_eq!((u.live_bytes, u.trash_bytes, u.total_bytes()), (20, 0, 20));
}

pub fn quota_trash_entries_at_below_and_above() {
    let env = Env::new("s1");
    let w = env.actors(small()).workspace;
    for name in ["a", "b", "c"] {
        env.run(w.create(&p(name), vec![], "x/y", user())).unwrap();
    }
    env.run(w.delete(&p("a"), Expect::Any, user())).unwrap(); // below
    env.run(w.delete(&p("b"), Expect::Any, user())).unwrap(); // at
    let (q, limit, req) = quota_err(env.run(w.delete(&p("c"), Expect::Any, user())));
    assert_eq!((q, limit, req), (Quota::TrashEntries, 2, 3)); // above
    assert!(
        env.run(w.stat(&p("c"))).unwrap().is_some(),
        "c stays in place"
    );
    let err = env.run(w.delete(&p("c"), Expect::Any, user())).unwrap_err();
    assert!(err.to_string().contains("empty the trash"), "{err}");
}

pub fn s3_3_stale_fence_writes_nothing() {
    let env = Env::new("s1");
    let w = ws(&env);
    env.run(w.create(&p("a"), b"1".to_vec(), "text/plain", user()))
        .unwrap();
    // Another tab takes the session after the lease expires.
    env.advance_ms(super::LEASE_TTL_MS + 1);
    let other = OwnerId::new("tab-2").unwrap();
    let now = env.now_ms();
    let lease = env
        .run(env.host.storage.try_acquire_lease(
            &SessionId::new("s1").unwrap(),
            &other,
            now,
            60_000,
        ))
        .unwrap();
    assert!(lease.epoch > env.fence.epoch);
    let err = env
        .run(w.write(
            &p("a"),
            b"2".to_vec(),
            "text/plain",
            Expect::Revision(1),
            user(),
        ))
        .unwrap_err();
    assert_eq!(err.code(), "lease_lost", "{err}");
    assert!(matches!(
        err,
        WorkspaceError::Storage(StorageError::StaleEpoch { .. })
    ));
    assert_eq!(
        env.run(w.delete(&p("a"), Expect::Any, user()))
            .unwrap_err()
            .code(),
        "lease_lost"
    );
    // Reads still work and show the old state.
    assert_eq!(content(&env, &w, "a"), b"1");
}

pub fn corrupt_record_and_missing_blob_are_typed_errors() {
    let env = Env::new("s1");
    let w = ws(&env);
    let (e, _) = env
        .run(w.create(&p("ok"), b"fine".to_vec(), "text/plain", user()))
        .unwrap();
    env.mem
        .storage()
        .corrupt_for_tests(Table::Manifests, "s1/bad", b"{not json")
        .unwrap();
    let err = env.run(w.read(&p("bad"))).unwrap_err();
    assert!(
        matches!(err, WorkspaceError::Storage(StorageError::Corrupt { .. })),
        "{err:?}"
    );
    // A workspace actor that has to scan (a fresh one: the planted record
    // bypassed the revision counter that the snapshot cache follows) refuses
    // to mutate a corrupt workspace rather than guess.
    let fresh = ws(&env);
    let err = env
        .run(fresh.create(&p("new"), b"x".to_vec(), "text/plain", user()))
        .unwrap_err();
    assert_eq!(err.code(), "storage_error");
    // The corrupt record is left untouched.
    assert_eq!(
        env.run(env.host.storage.get(Table::Manifests, "s1/bad"))
            .unwrap()
            .unwrap(),
        b"{not json"
    );
    env.run(env.host.storage.delete_blob(&e.hash)).unwrap();
    let err = env.run(w.read(&p("ok"))).unwrap_err();
    assert_eq!(err.code(), "content_missing", "{err}");
}

pub fn s7_3_two_writers_on_one_session_see_each_other() {
    // Two workspace actors of one session (two handles a host opened): each
    // notices the other's writes through the revision counter, never acting
    // on a stale snapshot.
    let env = Env::new("s1");
    let (a, b) = (ws(&env), ws(&env));
    env.run(a.create(&p("f"), b"a1".to_vec(), "text/plain", user()))
        .unwrap();
    assert_eq!(env.run(b.usage()).unwrap().files, 1);
    env.run(b.write(
        &p("f"),
        b"b2".to_vec(),
        "text/plain",
        Expect::Revision(1),
        user(),
    ))
    .unwrap();
    let err = env
        .run(a.write(
            &p("f"),
            b"a3".to_vec(),
            "text/plain",
            Expect::Revision(1),
            user(),
        ))
        .unwrap_err();
    assert!(matches!(&err, WorkspaceError::StaleRevision { latest, .. } if latest.revision == 2));
    env.run(b.create(&p("F2"), b"x".to_vec(), "text/plain", user()))
        .unwrap();
    assert_eq!(
        env.run(a.create(&p("f2"), b"y".to_vec(), "text/plain", user()))
            .unwrap_err()
            .code(),
        "case_conflict",
        "a sees b's new file"
    );
    env.run(a.delete(&p("F2"), Expect::Any, user())).unwrap();
    assert_eq!(env.run(b.list_trash()).unwrap().len(), 1);
    let u = env.run(b.usage()).unwrap();
    assert_eq!((u.files, u.trash_entries), (1, 1));
    // Deleting the session under both: neither resurrects anything.
    env.run(agent_workspace::delete_session(
        env.host.storage.as_ref(),
        &env.fence,
    ))
    .unwrap();
    assert_eq!(
        env.run(a.usage()).unwrap(),
        agent_workspace::Usage::default()
    );
    let (e, _) = env
        .run(b.create(&p("new"), b"n".to_vec(), "text/plain", user()))
        .unwrap();
    assert!(
        e.revision > 5,
        "revisions are not reused after deletion: {}",
        e.revision
    );
    assert_eq!(env.run(a.usage()).unwrap().files, 1);
}
