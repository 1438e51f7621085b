//! The core suite of the workspace crate, written once and run natively
//! (`tests/workspace.rs`) and in headless Chromium (`tests/wasm.rs`), each
//! case on a fresh `agent_kernel::memory` host. Cases cite SPEC clauses.

#![allow(dead_code)]

pub mod artifacts;
pub mod documents;
pub mod files;
pub mod paths;
pub mod tools;

use std::future::Future;
use std::sync::Arc;

use agent_capabilities::{
    Authority, EffectClass, EffectRequest, EffectSet, Grant, Origin, Target, TargetScope, Uses,
    Verified,
};
#[allow(unused_imports)]
pub use agent_kernel::host::Clock;
use agent_kernel::host::{Fence, Host, Storage, Table};
use agent_kernel::memory::MemoryHost;
use agent_kernel::{OwnerId, SessionId};
use agent_workspace::{Quotas, SessionActors, Source, WorkspaceDirectory, WorkspacePath};

/// One memory host with a session whose lease is held.
pub struct Env {
    pub mem: MemoryHost,
    pub host: Host,
    pub session: SessionId,
    pub fence: Fence,
}

pub const LEASE_TTL_MS: u64 = 60_000;

impl Env {
    pub fn new(session: &str) -> Env {
        let mem = MemoryHost::fifo(7);
        let host = mem.host();
        let session = SessionId::new(session).unwrap();
        let mut env = Env {
            mem,
            host,
            session: session.clone(),
            fence: Fence { session, epoch: 0 },
        };
        env.fence = env.fence_for(env.session.as_str());
        env
    }

    /// Take the lease of `session` for the test's owner and return its fence.
    pub fn fence_for(&self, session: &str) -> Fence {
        let session = SessionId::new(session).unwrap();
        let owner = OwnerId::new("tab-1").unwrap();
        let now = self.now_ms();
        self.run(
            self.host
                .storage
                .try_acquire_lease(&session, &owner, now, LEASE_TTL_MS),
        )
        .unwrap()
        .fence()
    }

    /// Drive a future on the memory host's executor to completion.
    pub fn run<F: Future>(&self, fut: F) -> F::Output {
        self.mem.block_on(fut).expect("the future stalled")
    }

    pub fn actors(&self, quotas: Quotas) -> SessionActors {
        agent_workspace::spawn_session(&self.host, self.fence.clone(), quotas, None)
    }

    pub fn directory(&self, quotas: Quotas) -> WorkspaceDirectory {
        let dir = WorkspaceDirectory::new();
        dir.open(&self.host, self.fence.clone(), quotas);
        dir
    }

    pub fn storage(&self) -> Arc<dyn Storage> {
        self.host.storage.clone()
    }

    pub fn blob_count(&self) -> usize {
        self.run(self.host.storage.list_blobs()).unwrap().len()
    }

    pub fn has_blob(&self, hash: &str) -> bool {
        self.run(self.host.storage.list_blobs())
            .unwrap()
            .iter()
            .any(|h| h == hash)
    }

    pub fn table_len(&self, table: Table) -> usize {
        self.mem.storage().len(table)
    }

    pub fn now_ms(&self) -> u64 {
        self.host.clock.wall_ms()
    }

    pub fn advance_ms(&self, ms: u64) {
        self.mem.advance(std::time::Duration::from_millis(ms));
    }
}

/// What verifying a capability for `tool` that grants `effects` over
/// `scope` returns: the proof `empty_trash` asks for (S6.1). The request
/// asks for exactly the granted effects, so a lesser grant verifies.
pub fn verified_grant(
    env: &Env,
    tool: &str,
    effects: &[EffectClass],
    scope: TargetScope,
    target: Target,
) -> Verified {
    let definition = agent_workspace::all_tool_definitions()
        .into_iter()
        .find(|d| d.name == tool)
        .unwrap_or_else(|| panic!("no tool {tool}"));
    let fingerprint = definition.fingerprint().unwrap();
    let effects: EffectSet = effects.iter().copied().collect();
    let authority = Authority::new("run-1", [9; 32]);
    let capability = authority.mint(Grant {
        tool: tool.into(),
        fingerprint: fingerprint.clone(),
        origin: Origin::Builtin,
        effects: effects.clone(),
        scope,
        uses: Uses::Once,
        expires_at_ms: env.now_ms() + 60_000,
    });
    let request = EffectRequest {
        run_id: "run-1".into(),
        tool: tool.into(),
        fingerprint,
        effects,
        target,
    };
    authority
        .verifier()
        .verify(&capability, &request, env.now_ms())
        .expect("the grant verifies for what it grants")
}

/// The approved `destructive_local` capability of `workspace_empty_trash`
/// over the whole workspace, verified.
pub fn destructive_proof(env: &Env) -> Verified {
    verified_grant(
        env,
        "workspace_empty_trash",
        &[EffectClass::DestructiveLocal],
        TargetScope::Workspace {
            prefix: String::new(),
        },
        Target::WorkspacePath {
            path: String::new(),
        },
    )
}

pub fn p(s: &str) -> WorkspacePath {
    WorkspacePath::parse(s).unwrap()
}

pub fn user() -> Source {
    Source::User
}

/// Every case of the suite, expanded with the given test attribute.
#[macro_export]
macro_rules! suite_cases {
    ($attr:meta) => {
        $crate::suite_cases!(@each $attr;
            paths::s7_1_refused_table_names_each_reason,
            paths::s7_1_accepted_table_normalises_to_nfc,
            paths::s7_1_limits_at_below_and_above,
            files::s7_2_manifest_entry_fields,
            files::s7_3_stale_revision_on_write_returns_latest_and_changes_nothing,
            files::s7_3_a_workspace_with_a_stale_snapshot_sees_the_other_writer,
            files::s7_3_stale_revision_on_move_returns_latest_and_changes_nothing,
            files::s7_3_stale_revision_on_delete_returns_latest_and_changes_nothing,
            files::s7_3_must_not_exist_and_vanished,
            files::s7_3_append_and_list,
            files::s7_1_case_conflicts_and_file_folder_conflicts,
            files::s7_3_trash_round_trip,
            files::s6_1_empty_trash_refuses_a_lesser_capability_and_deletes_nothing,
            files::s7_3_restore_onto_taken_path_is_a_conflict,
            files::s7_3_revisions_never_repeat,
            files::s7_3_receipts_name_path_revisions_and_hash,
            files::quota_files_at_below_and_above,
            files::quota_file_bytes_at_below_and_above,
            files::quota_default_file_bytes_at_below_and_above,
            files::quota_total_bytes_at_below_and_above,
            files::quota_trash_entries_at_below_and_above,
            files::s3_3_stale_fence_writes_nothing,
            files::corrupt_record_and_missing_blob_are_typed_errors,
            files::s7_3_two_writers_on_one_session_see_each_other,
            artifacts::s7_4_artifact_immutable_after_edit_and_delete,
            artifacts::s7_4_identical_bytes_stored_once,
            artifacts::s7_5_session_copy_and_delete_keep_references,
            artifacts::s7_5_foreign_references_keep_blobs,
            artifacts::quota_artifact_bytes_at_below_and_above,
            artifacts::artifact_arguments_are_checked,
            tools::s5_3_definitions_declare_effects_and_targets,
            tools::s6_1_empty_trash_asks_for_approval_and_writes_do_not,
            tools::s5_3_tools_round_trip_with_receipts,
            tools::s5_3_capability_is_verified_before_any_effect,
            tools::s2_3_replayed_write_is_recognised,
            tools::s7_3_tool_write_needs_expected_revision_to_overwrite,
            tools::s5_8_spill_stores_large_results_and_summarises,
            tools::reserved_results_folder_is_read_only_for_the_model,
            tools::read_window_and_list_size_at_below_and_above,
            documents::s5_4_documents_are_read_with_their_origin_and_size_limit,
        );
    };
    (@each $attr:meta; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[$attr]
            fn $case() {
                suite::$module::$case();
            }
        )*
    };
}
