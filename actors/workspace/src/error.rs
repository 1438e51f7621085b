//! The typed errors of the workspace and artifact actors. Each says what was
//! wrong and what to do, and has a stable [`WorkspaceError::code`] for the
//! tool result envelope. Conflicts carry the latest stored state (S7.3). A
//! refused quota names which one ([`Quota`]); the limits themselves are in
//! [`crate::limits`].

use agent_kernel::actor::ActorError;
use agent_kernel::host::StorageError;

use crate::manifest::{FileEntry, TrashEntry};
use crate::path::PathError;

/// Which quota a mutation would exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quota {
    Files,
    FileBytes,
    TotalBytes,
    TrashEntries,
    ArtifactBytes,
}

impl Quota {
    /// The stable name, as in error codes and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Quota::Files => "files",
            Quota::FileBytes => "file_bytes",
            Quota::TotalBytes => "total_bytes",
            Quota::TrashEntries => "trash_entries",
            Quota::ArtifactBytes => "artifact_bytes",
        }
    }

    /// What the caller can do about it.
    pub fn advice(self) -> &'static str {
        match self {
            Quota::Files => "delete files and empty the trash, or ask for a larger quota",
            Quota::FileBytes => "split the content into several smaller files",
            Quota::TotalBytes => "delete files and empty the trash to free space",
            Quota::TrashEntries => "empty the trash (this asks for approval) before deleting more",
            Quota::ArtifactBytes => "publish a smaller Artifact",
        }
    }
}

impl std::fmt::Display for Quota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A workspace or artifact operation failed; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("no file at {path}; list the folder to see what exists")]
    NotFound { path: String },
    #[error(
        "{} already exists (revision {}); pass expectedRevision {} to overwrite it, or choose another path",
        latest.path, latest.revision, latest.revision
    )]
    AlreadyExists { latest: Box<FileEntry> },
    #[error(
        "{} changed: expected revision {expected}, the latest is {}; nothing was changed — read it again and retry with expectedRevision {}",
        latest.path, latest.revision, latest.revision
    )]
    StaleRevision {
        expected: u64,
        latest: Box<FileEntry>,
    },
    #[error("{path} was expected at revision {expected} but no longer exists; nothing was changed")]
    Vanished { path: String, expected: u64 },
    #[error(
        "{path} differs only by letter case from the existing {existing}; use the existing name or another one"
    )]
    CaseConflict { path: String, existing: String },
    #[error("{path} conflicts with {existing}: a name cannot be both a file and a folder")]
    FileFolderConflict { path: String, existing: String },
    #[error("{path} is inside the reserved folder {folder}/, which only the runtime writes to")]
    Reserved { path: String, folder: String },
    #[error("{source_path} and {target} are the same file; nothing to move")]
    SamePath { source_path: String, target: String },
    #[error(
        "quota {quota} exceeded: this needs {requested}, the limit is {limit}; {}",
        quota.advice()
    )]
    QuotaExceeded {
        quota: Quota,
        limit: u64,
        requested: u64,
    },
    #[error("no trash entry {id}; list the trash to see what can be restored")]
    TrashNotFound { id: String },
    #[error(
        "cannot restore {} (trash {}): the path is taken by revision {} of a newer file; move or delete that file first",
        trash.entry.path, trash.id, occupant.revision
    )]
    RestoreConflict {
        trash: Box<TrashEntry>,
        occupant: Box<FileEntry>,
    },
    #[error(
        "the content of {what} (blob {hash}) is missing or does not match its hash; the record was left untouched"
    )]
    ContentMissing { what: String, hash: String },
    #[error("no Artifact {id} in this session; list the session's Artifacts")]
    ArtifactNotFound { id: String },
    #[error("invalid {field}: {reason}")]
    InvalidArgument { field: &'static str, reason: String },
    #[error("session {session} is not empty ({what}); copy into a new session")]
    TargetNotEmpty { session: String, what: String },
    #[error(
        "{operation} was refused: {reason}; nothing was deleted — it needs an approved capability with the destructive_local effect"
    )]
    NotAuthorised {
        operation: &'static str,
        reason: String,
    },
    #[error("the workspace changed while this was being applied; try again")]
    Busy,
    #[error("workspace storage failed: {0}")]
    Storage(#[from] StorageError),
    #[error("workspace actor unavailable: {0}")]
    Actor(#[from] ActorError),
}

impl WorkspaceError {
    /// A stable snake_case code for the tool result envelope.
    pub fn code(&self) -> &'static str {
        match self {
            WorkspaceError::Path(_) => "invalid_path",
            WorkspaceError::NotFound { .. } => "not_found",
            WorkspaceError::AlreadyExists { .. } => "already_exists",
            WorkspaceError::StaleRevision { .. } => "stale_revision",
            WorkspaceError::Vanished { .. } => "stale_revision",
            WorkspaceError::CaseConflict { .. } => "case_conflict",
            WorkspaceError::FileFolderConflict { .. } => "file_folder_conflict",
            WorkspaceError::Reserved { .. } => "reserved_path",
            WorkspaceError::SamePath { .. } => "same_path",
            WorkspaceError::QuotaExceeded { .. } => "quota_exceeded",
            WorkspaceError::TrashNotFound { .. } => "trash_not_found",
            WorkspaceError::RestoreConflict { .. } => "restore_conflict",
            WorkspaceError::ContentMissing { .. } => "content_missing",
            WorkspaceError::ArtifactNotFound { .. } => "artifact_not_found",
            WorkspaceError::InvalidArgument { .. } => "invalid_arguments",
            WorkspaceError::TargetNotEmpty { .. } => "target_not_empty",
            WorkspaceError::NotAuthorised { .. } => "capability_refused",
            WorkspaceError::Busy => "busy",
            WorkspaceError::Storage(StorageError::StaleEpoch { .. }) => "lease_lost",
            WorkspaceError::Storage(_) => "storage_error",
            WorkspaceError::Actor(_) => "actor_stopped",
        }
    }

    /// True when trying the same call again later may succeed.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            WorkspaceError::Busy | WorkspaceError::Storage(StorageError::Unavailable(_))
        )
    }

    /// The latest stored state a conflict carries, for the model to retry with.
    pub fn latest(&self) -> Option<&FileEntry> {
        match self {
            WorkspaceError::AlreadyExists { latest }
            | WorkspaceError::StaleRevision { latest, .. } => Some(latest),
            WorkspaceError::RestoreConflict { occupant, .. } => Some(occupant),
            _ => None,
        }
    }
}
