//! The trash of one session's workspace (S7.3): delete to the trash, list
//! and find trashed entries, restore one, and empty the trash, which only a
//! capability verified for `destructive_local` may do ([`authorise_empty_trash`]).

use std::collections::BTreeSet;

use agent_capabilities::{EffectClass, Target, Verified};
use agent_kernel::host::{Record, Table};

use crate::error::Quota;
use crate::error::WorkspaceError;
use crate::gc;
use crate::manifest::{FileEntry, Operation, Receipt, Source, TrashEntry};
use crate::path::WorkspacePath;

use super::snapshot::{check_expect, decode, encode};
use super::{Expect, Workspace};

impl Workspace {
    /// Move a file to the trash, keeping its path and revision (S7.3).
    pub async fn delete(
        &mut self,
        path: &WorkspacePath,
        expect: Expect,
        source: Source,
    ) -> Result<(TrashEntry, Receipt), WorkspaceError> {
        if expect == Expect::MustNotExist {
            return Err(WorkspaceError::InvalidArgument {
                field: "expectedRevision",
                reason: "a delete needs an existing file; pass its revision or nothing".into(),
            });
        }
        let now = self.clock.wall_ms();
        let quotas = self.quotas;
        let session = self.session.clone();
        self.mutate(None, |snap, batch, next| {
            let existing = snap.files.get(path);
            check_expect(path, existing.map(|(e, _)| e), expect)?;
            let Some((old, raw)) = existing else {
                return Err(WorkspaceError::NotFound {
                    path: path.to_string(),
                });
            };
            let usage = snap.usage();
            if usage.trash_entries + 1 > quotas.max_trash_entries {
                return Err(WorkspaceError::QuotaExceeded {
                    quota: Quota::TrashEntries,
                    limit: quotas.max_trash_entries,
                    requested: usage.trash_entries + 1,
                });
            }
            let trash = TrashEntry {
                session: session.clone(),
                id: TrashEntry::id_for(next),
                entry: old.clone(),
                deleted_at_ms: now,
                deleted_by: source.clone(),
            };
            let batch = batch
                .expect_value(Table::Manifests, old.key(), raw.clone())
                .delete(Table::Manifests, old.key())
                .expect_absent(Table::Trash, trash.key())
                .put(Table::Trash, trash.key(), encode(&trash)?);
            let mut receipt = Receipt::new(Operation::Delete, path.as_str());
            receipt.old_revision = Some(old.revision);
            receipt.content_hash = Some(old.hash.clone());
            receipt.size = Some(old.size);
            receipt.trash_id = Some(trash.id.clone());
            Ok((batch, (trash, receipt)))
        })
        .await
    }

    /// The trash, oldest deletion first.
    pub async fn list_trash(&self) -> Result<Vec<TrashEntry>, WorkspaceError> {
        let prefix = self.prefix();
        let mut out = Vec::new();
        for (key, raw) in self.storage.scan_prefix(Table::Trash, &prefix).await? {
            out.push(decode(Table::Trash, &key, &raw)?);
        }
        Ok(out)
    }

    /// The most recent trash entry whose original path is `path`.
    pub async fn find_in_trash(
        &self,
        path: &WorkspacePath,
    ) -> Result<Option<TrashEntry>, WorkspaceError> {
        Ok(self
            .list_trash()
            .await?
            .into_iter()
            .rev()
            .find(|t| &t.entry.path == path))
    }

    /// Put a trashed file back at its original path, with a new revision. A
    /// path that is taken again is a `RestoreConflict` naming the occupant.
    pub async fn restore(&mut self, id: &str) -> Result<(FileEntry, Receipt), WorkspaceError> {
        let now = self.clock.wall_ms();
        let quotas = self.quotas;
        self.mutate(None, |snap, batch, next| {
            let Some((trash, raw)) = snap.trash.get(id) else {
                return Err(WorkspaceError::TrashNotFound { id: id.to_owned() });
            };
            let path = &trash.entry.path;
            if let Some((occupant, _)) = snap.files.get(path) {
                return Err(WorkspaceError::RestoreConflict {
                    trash: Box::new(trash.clone()),
                    occupant: Box::new(occupant.clone()),
                });
            }
            snap.check_new_path(path, None)?;
            let usage = snap.usage();
            if usage.files + 1 > quotas.max_files {
                return Err(WorkspaceError::QuotaExceeded {
                    quota: Quota::Files,
                    limit: quotas.max_files,
                    requested: usage.files + 1,
                });
            }
            let entry = FileEntry {
                revision: next,
                updated_at_ms: now,
                ..trash.entry.clone()
            };
            let batch = batch
                .expect_value(Table::Trash, trash.key(), raw.clone())
                .delete(Table::Trash, trash.key())
                .expect_absent(Table::Manifests, entry.key())
                .put(Table::Manifests, entry.key(), encode(&entry)?);
            let mut receipt = Receipt::new(Operation::Restore, path.as_str());
            receipt.old_revision = Some(trash.entry.revision);
            receipt.new_revision = Some(next);
            receipt.content_hash = Some(entry.hash.clone());
            receipt.size = Some(entry.size);
            receipt.trash_id = Some(trash.id.clone());
            Ok((batch, (entry, receipt)))
        })
        .await
    }

    /// Remove every trash entry for good, then free the blobs nothing else
    /// references. Returns the removed entries' count in the receipt.
    ///
    /// A destructive effect (S6.1): `proof` is what verifying the caller's
    /// capability returned, and it must grant `workspace_empty_trash` the
    /// `destructive_local` effect over the whole workspace
    /// ([`authorise_empty_trash`]); otherwise nothing is deleted and the
    /// answer is [`WorkspaceError::NotAuthorised`].
    pub async fn empty_trash(
        &mut self,
        proof: &Verified,
    ) -> Result<(Vec<TrashEntry>, Receipt), WorkspaceError> {
        authorise_empty_trash(proof)?;
        let (removed, receipt) = self
            .mutate(None, |snap, mut batch, _next| {
                let mut removed = Vec::new();
                for (trash, raw) in snap.trash.values() {
                    batch = batch
                        .expect_value(Table::Trash, trash.key(), raw.clone())
                        .delete(Table::Trash, trash.key());
                    removed.push(trash.clone());
                }
                let mut receipt = Receipt::new(Operation::EmptyTrash, "");
                receipt.removed = Some(removed.len() as u64);
                receipt.size = Some(removed.iter().map(|t| t.entry.size).sum());
                Ok((batch, (removed, receipt)))
            })
            .await?;
        let candidates: BTreeSet<String> = removed.iter().map(|t| t.entry.hash.clone()).collect();
        gc::free_unreferenced(self.storage.as_ref(), candidates).await?;
        Ok((removed, receipt))
    }
}

/// The one rule for emptying the trash (S6.1): the verified capability
/// grants the `workspace_empty_trash` tool the `destructive_local` effect,
/// over a scope that covers the whole workspace. A capability minted for a
/// lesser effect (`write_local`, say) verifies for that effect but is
/// refused here.
pub fn authorise_empty_trash(proof: &Verified) -> Result<(), WorkspaceError> {
    let refuse = |reason: String| {
        Err(WorkspaceError::NotAuthorised {
            operation: "emptying the trash",
            reason,
        })
    };
    if proof.tool() != crate::tool_names::EMPTY_TRASH {
        return refuse(format!(
            "the capability is for tool {:?}, not {:?}",
            proof.tool(),
            crate::tool_names::EMPTY_TRASH
        ));
    }
    if !proof.effects().contains(&EffectClass::DestructiveLocal) {
        return refuse(format!(
            "the capability grants {} but not {}",
            proof
                .effects()
                .iter()
                .map(|e| e.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            EffectClass::DestructiveLocal.as_str()
        ));
    }
    let whole = Target::WorkspacePath {
        path: String::new(),
    };
    if !proof.scope().covers(&whole) {
        return refuse(format!(
            "the capability's scope ({}) does not cover the whole workspace",
            proof.scope().summary()
        ));
    }
    Ok(())
}
