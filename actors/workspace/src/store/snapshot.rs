//! A session's stored records as one value: the [`Snapshot`] a mutation
//! plans against (files, trash and the revision counter, each with the raw
//! bytes a batch requires unchanged), how a committed batch updates it, and
//! the record codec and revision check the store's writes share.

use std::collections::BTreeMap;

use agent_kernel::SessionId;
use agent_kernel::host::{Op, Record, StorageError, Table};

use crate::error::WorkspaceError;
use crate::manifest::{FileEntry, RevisionCounter, TrashEntry};
use crate::path::WorkspacePath;

use super::{Expect, Usage};

/// Everything stored for one session, with the raw bytes of each record so
/// that a batch can require it unchanged.
pub(crate) struct Snapshot {
    pub(crate) files: BTreeMap<WorkspacePath, (FileEntry, Vec<u8>)>,
    pub(crate) trash: BTreeMap<String, (TrashEntry, Vec<u8>)>,
    pub(super) counter: Option<Vec<u8>>,
    pub(super) last: u64,
}

impl Snapshot {
    /// Bring the snapshot up to date with a batch this workspace committed.
    pub(super) fn apply(&mut self, ops: &[Op], session: &SessionId) -> Result<(), WorkspaceError> {
        let prefix = format!("{session}/");
        let counter_key = RevisionCounter::key_for(session);
        for op in ops {
            match op {
                Op::Put {
                    table: Table::Manifests,
                    key,
                    value,
                } => {
                    let entry: FileEntry = decode(Table::Manifests, key, value)?;
                    self.files
                        .insert(entry.path.clone(), (entry, value.clone()));
                }
                Op::Delete {
                    table: Table::Manifests,
                    key,
                } => {
                    if let Some(path) = key.strip_prefix(&prefix) {
                        self.files.retain(|p, _| p.as_str() != path);
                    }
                }
                Op::Put {
                    table: Table::Trash,
                    key,
                    value,
                } => {
                    let entry: TrashEntry = decode(Table::Trash, key, value)?;
                    self.trash.insert(entry.id.clone(), (entry, value.clone()));
                }
                Op::Delete {
                    table: Table::Trash,
                    key,
                } => {
                    if let Some(id) = key.strip_prefix(&prefix) {
                        self.trash.remove(id);
                    }
                }
                Op::Put {
                    table: Table::Meta,
                    key,
                    value,
                } if *key == counter_key => {
                    self.last = decode::<RevisionCounter>(Table::Meta, key, value)?.last;
                    self.counter = Some(value.clone());
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(super) fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for (e, _) in self.files.values() {
            u.files += 1;
            u.live_bytes = u.live_bytes.saturating_add(e.size);
        }
        for (t, _) in self.trash.values() {
            u.trash_entries += 1;
            u.trash_bytes = u.trash_bytes.saturating_add(t.entry.size);
        }
        u
    }

    /// Refuse `path` as a new name when another file differs from it only by
    /// case in some folder, or when it would be a file and a folder at once.
    pub(super) fn check_new_path(
        &self,
        path: &WorkspacePath,
        ignore: Option<&WorkspacePath>,
    ) -> Result<(), WorkspaceError> {
        for existing in self.files.keys() {
            if Some(existing) == ignore || existing == path {
                continue;
            }
            if path.case_conflicts_with(existing) {
                return Err(WorkspaceError::CaseConflict {
                    path: path.to_string(),
                    existing: existing.to_string(),
                });
            }
            if existing.is_within(path) || path.is_within(existing) {
                return Err(WorkspaceError::FileFolderConflict {
                    path: path.to_string(),
                    existing: existing.to_string(),
                });
            }
        }
        Ok(())
    }
}

pub(super) fn encode<R: Record>(record: &R) -> Result<Vec<u8>, WorkspaceError> {
    serde_json::to_vec(record).map_err(|e| {
        WorkspaceError::Storage(StorageError::Encode {
            table: R::TABLE,
            detail: e.to_string(),
        })
    })
}

pub(super) fn decode<R: Record>(
    table: Table,
    key: &str,
    bytes: &[u8],
) -> Result<R, WorkspaceError> {
    serde_json::from_slice(bytes).map_err(|e| {
        WorkspaceError::Storage(StorageError::Corrupt {
            table,
            key: key.to_owned(),
            detail: e.to_string(),
        })
    })
}

pub(super) fn check_expect(
    path: &WorkspacePath,
    existing: Option<&FileEntry>,
    expect: Expect,
) -> Result<(), WorkspaceError> {
    match (expect, existing) {
        (Expect::Any, _) | (Expect::MustNotExist, None) => Ok(()),
        (Expect::MustNotExist, Some(e)) => Err(WorkspaceError::AlreadyExists {
            latest: Box::new(e.clone()),
        }),
        (Expect::Revision(r), Some(e)) if e.revision == r => Ok(()),
        (Expect::Revision(r), Some(e)) => Err(WorkspaceError::StaleRevision {
            expected: r,
            latest: Box::new(e.clone()),
        }),
        (Expect::Revision(r), None) => Err(WorkspaceError::Vanished {
            path: path.to_string(),
            expected: r,
        }),
    }
}
