//! The stored records of a workspace (S7.2): manifest entries in
//! `Table::Manifests` under `<session>/<path>`, trash entries in
//! `Table::Trash` under `<session>/<trash id>`, the per-session revision
//! counter in `Table::Meta`, and the receipts mutations return.

use serde::{Deserialize, Serialize};
use serde_json::json;

use agent_capabilities::EffectClass;
use agent_kernel::host::{Record, Table};
use agent_kernel::protocol::EffectReceipt;
use agent_kernel::{CallId, RunId, SessionId};

use crate::path::WorkspacePath;

/// Who wrote a file (S7.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// The person, through the host's UI.
    User,
    /// A tool call of a run.
    Tool {
        tool: String,
        run: RunId,
        call_id: CallId,
    },
    /// Imported by the host from elsewhere (a copied session, a migration).
    Import { from: String },
    /// A person's file brought into the session (S12.3), under its
    /// original `name`; its content is `external_untrusted`.
    Attachment { name: String },
}

/// One file of a session's workspace: what the manifest knows about it.
/// The content is a blob named by `hash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FileEntry {
    pub session: SessionId,
    pub path: WorkspacePath,
    pub mime: String,
    /// Content length in bytes.
    pub size: u64,
    /// SHA-256 of the content, lowercase hex; also the blob's name.
    pub hash: String,
    /// Changes on every mutation of this file and never repeats within the
    /// session, even across delete and restore (it is drawn from one
    /// per-session counter), so an `expectedRevision` names one exact state.
    pub revision: u64,
    pub source: Source,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

impl FileEntry {
    /// The manifest key of `path` in `session`.
    pub fn key_for(session: &SessionId, path: &WorkspacePath) -> String {
        format!("{session}/{path}")
    }
}

impl Record for FileEntry {
    const TABLE: Table = Table::Manifests;
    fn key(&self) -> String {
        FileEntry::key_for(&self.session, &self.path)
    }
}

/// A deleted file, kept with its original path and revision until the trash
/// is emptied (S7.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrashEntry {
    pub session: SessionId,
    /// `t` and the zero-padded revision of the deletion, so that listing by
    /// key lists in deletion order.
    pub id: String,
    /// The entry as it was when deleted (original path and revision).
    pub entry: FileEntry,
    pub deleted_at_ms: u64,
    pub deleted_by: Source,
}

impl TrashEntry {
    pub fn key_for(session: &SessionId, id: &str) -> String {
        format!("{session}/{id}")
    }
    pub(crate) fn id_for(revision: u64) -> String {
        format!("t{revision:020}")
    }
}

impl Record for TrashEntry {
    const TABLE: Table = Table::Trash;
    fn key(&self) -> String {
        TrashEntry::key_for(&self.session, &self.id)
    }
}

/// The per-session revision counter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisionCounter {
    pub session: SessionId,
    /// The last revision handed out.
    pub last: u64,
}

impl RevisionCounter {
    pub fn key_for(session: &SessionId) -> String {
        format!("workspace-revision/{session}")
    }
}

impl Record for RevisionCounter {
    const TABLE: Table = Table::Meta;
    fn key(&self) -> String {
        RevisionCounter::key_for(&self.session)
    }
}

/// What a mutation did to the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Create,
    Write,
    Append,
    Move,
    Delete,
    Restore,
    EmptyTrash,
    Publish,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Write => "write",
            Operation::Append => "append",
            Operation::Move => "move",
            Operation::Delete => "delete",
            Operation::Restore => "restore",
            Operation::EmptyTrash => "empty_trash",
            Operation::Publish => "publish",
        }
    }
}

/// Proof of one successful mutation: the path, the old and new revision and
/// the content hash. Converted into the journal's `EffectReceipt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub operation: Operation,
    pub path: String,
    /// The destination of a move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// None when the file did not exist before.
    pub old_revision: Option<u64>,
    /// None when the file no longer exists (delete, empty trash).
    pub new_revision: Option<u64>,
    /// SHA-256 of the content after the mutation (before it, for a delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The trash entry a delete created or a restore consumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trash_id: Option<String>,
    /// How many trash entries an empty removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<u64>,
}

impl Receipt {
    pub(crate) fn new(operation: Operation, path: &str) -> Receipt {
        Receipt {
            operation,
            path: path.to_owned(),
            to: None,
            old_revision: None,
            new_revision: None,
            content_hash: None,
            size: None,
            trash_id: None,
            removed: None,
        }
    }

    /// The effect class of this mutation.
    pub fn effect(&self) -> EffectClass {
        match self.operation {
            Operation::EmptyTrash => EffectClass::DestructiveLocal,
            _ => EffectClass::WriteLocal,
        }
    }

    /// The journal form: target is the path, detail the structured fields
    /// (revisions, hash, ids), never content.
    pub fn to_effect_receipt(&self) -> EffectReceipt {
        let target = match &self.to {
            Some(to) => format!("{} -> {}", self.path, to),
            None if self.path.is_empty() => "the workspace trash".to_owned(),
            None => self.path.clone(),
        };
        EffectReceipt {
            effect: self.effect(),
            target,
            detail: serde_json::to_value(self).unwrap_or_else(|_| json!({})),
        }
    }
}
