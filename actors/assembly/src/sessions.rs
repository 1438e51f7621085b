//! What a person does to a session from any host, besides running turns in
//! it: bring a file in (an attachment, S12.3), list the sessions, list and
//! read their files and Artifacts, copy a session and delete one (S7.5).
//! Both hosts call these and keep no copy of their rules.
//!
//! Changing a session needs its lease: the mutating actions take the
//! caller's [`LeaseGuard`] for it (from [`crate::Assembly::open_session`]),
//! so a session another process or tab executes is never written here, and
//! every write is fenced by that lease's epoch. Reads need no lease.

use std::collections::BTreeMap;

use agent_kernel::SessionId;
use agent_kernel::host::{LeaseGuard, StorageError, StorageExt, Table};
use agent_kernel::run::AgentRun;
use agent_supervisor::RunError;
use agent_workspace::artifact::{Artifact, is_artifact_id};
use agent_workspace::manifest::{FileEntry, Source};
use agent_workspace::mime::{guess_mime, validate_mime};
use agent_workspace::{CopyReport, DeleteReport, Quotas, WorkspaceError, WorkspacePath};
use serde::Serialize;

use crate::Assembly;

/// The longest original file name an attachment records, in bytes.
pub const MAX_ATTACHMENT_NAME_BYTES: usize = 255;

/// A host action on a session failed; nothing was changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionActionError {
    /// An argument was malformed (a path, a name, a MIME type, an id).
    #[error("invalid {field}: {reason}")]
    InvalidArgument { field: &'static str, reason: String },
    /// The caller does not hold the session it tries to change.
    #[error("session {0} is not held by this runtime; open it first")]
    NotHeld(SessionId),
    /// A run of the session is still going; it must end first.
    #[error(
        "session {session} has a run that is not finished ({run}); stop it or let it finish first"
    )]
    RunActive { session: SessionId, run: String },
    /// No such file or Artifact.
    #[error("{0}")]
    NotFound(String),
    /// The workspace refused (path gate, quota, an existing file, ...).
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// Reading the stored records failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Reading the session's runs failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

impl SessionActionError {
    /// A stable snake_case code for hosts (the browser's error `code`, the
    /// CLI's message prefix).
    pub fn code(&self) -> &'static str {
        match self {
            SessionActionError::InvalidArgument { .. } => "invalid_argument",
            SessionActionError::NotHeld(_) => "session_busy",
            SessionActionError::RunActive { .. } => "session_busy",
            SessionActionError::NotFound(_) => "not_found",
            SessionActionError::Workspace(WorkspaceError::Path(_)) => "invalid_argument",
            SessionActionError::Workspace(WorkspaceError::InvalidArgument { .. }) => {
                "invalid_argument"
            }
            SessionActionError::Workspace(
                WorkspaceError::NotFound { .. } | WorkspaceError::ArtifactNotFound { .. },
            ) => "not_found",
            SessionActionError::Workspace(e) => e.code(),
            SessionActionError::Storage(StorageError::StaleEpoch { .. }) => "lease_lost",
            SessionActionError::Storage(_) => "storage_error",
            SessionActionError::Run(_) => "storage_error",
        }
    }
}

/// One session as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct SessionSummary {
    pub session: SessionId,
    /// Top-level runs (turns) of the session.
    pub runs: u64,
    /// When its newest run was created, if it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_at_ms: Option<u64>,
    pub files: u64,
    pub artifacts: u64,
}

/// A person's file to bring into a session.
#[derive(Debug, Clone)]
pub struct Attachment<'a> {
    /// Where it goes in the session's workspace (through the path gate).
    pub path: &'a str,
    pub bytes: Vec<u8>,
    /// Its MIME type; guessed from `name` (else `path`) when `None`.
    pub mime: Option<&'a str>,
    /// Its original name (recorded as the source); `path`'s file name when `None`.
    pub name: Option<&'a str>,
}

impl Assembly {
    /// Put a person's file into the session `held` is the lease of, as a new
    /// file with source `attachment` (S12.3): through the workspace's path
    /// gate and quotas, refused when the path exists. Its content is
    /// `external_untrusted` to every tool that reads it.
    pub async fn import_file(
        &self,
        held: &LeaseGuard,
        attachment: Attachment<'_>,
    ) -> Result<FileEntry, SessionActionError> {
        let path = WorkspacePath::parse(attachment.path).map_err(WorkspaceError::from)?;
        agent_workspace::refuse_reserved(&path)?;
        let name = match attachment.name {
            Some(name) => attachment_name(name)?,
            None => path
                .as_str()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned(),
        };
        let mime = match attachment.mime {
            Some(m) => {
                validate_mime(m)?;
                m.to_owned()
            }
            None => {
                let by_name = guess_mime(&name);
                if by_name == "application/octet-stream" {
                    guess_mime(path.as_str()).to_owned()
                } else {
                    by_name.to_owned()
                }
            }
        };
        let actors = self.held_workspace(held)?;
        let (entry, _receipt) = actors
            .workspace
            .create(&path, attachment.bytes, &mime, Source::Attachment { name })
            .await?;
        Ok(entry)
    }

    /// The quotas of every session's workspace.
    pub fn quotas(&self) -> Quotas {
        Quotas::default()
    }

    /// Refuse an attachment of `size` bytes before its bytes are read (a
    /// host reading a large `Blob`, say): the workspace's own file rule.
    pub fn check_attachment_size(&self, size: u64) -> Result<(), SessionActionError> {
        Ok(self.quotas().check_file_bytes(size)?)
    }

    /// Every session with a run, a file or an Artifact, ordered by id.
    pub async fn sessions(&self) -> Result<Vec<SessionSummary>, SessionActionError> {
        let storage = &*self.host.storage;
        let mut sessions: BTreeMap<SessionId, SessionSummary> = BTreeMap::new();
        let runs: Vec<AgentRun> = storage.scan_records("").await?;
        for run in runs.iter().filter(|r| r.parent.is_none()) {
            let s = summary(&mut sessions, &run.session);
            s.runs += 1;
            s.last_run_at_ms = s.last_run_at_ms.max(Some(run.created_at_ms));
        }
        for (table, is_file) in [(Table::Manifests, true), (Table::Artifacts, false)] {
            for (key, _) in storage.scan_prefix(table, "").await? {
                let Some(session) = key.split('/').next().and_then(|s| SessionId::new(s).ok())
                else {
                    continue;
                };
                let s = summary(&mut sessions, &session);
                if is_file {
                    s.files += 1;
                } else {
                    s.artifacts += 1;
                }
            }
        }
        Ok(sessions.into_values().collect())
    }

    /// The workspace files of `session` (manifest entries, S7.2), by path.
    pub async fn files(&self, session: &SessionId) -> Result<Vec<FileEntry>, SessionActionError> {
        Ok(self
            .host
            .storage
            .scan_records(&format!("{session}/"))
            .await?)
    }

    /// One workspace file and its bytes (hash-checked).
    pub async fn read_file(
        &self,
        session: &SessionId,
        path: &str,
    ) -> Result<(FileEntry, Vec<u8>), SessionActionError> {
        let path = WorkspacePath::parse(path).map_err(WorkspaceError::from)?;
        let storage = &self.host.storage;
        let entry: FileEntry = storage
            .get_record(&FileEntry::key_for(session, &path))
            .await?
            .ok_or_else(|| {
                SessionActionError::NotFound(format!("no file {path} in session {session}"))
            })?;
        let bytes = self.blob(&entry.hash, &format!("file {path}")).await?;
        Ok((entry, bytes))
    }

    /// The Artifacts of `session`.
    pub async fn artifacts(
        &self,
        session: &SessionId,
    ) -> Result<Vec<Artifact>, SessionActionError> {
        Ok(self
            .host
            .storage
            .scan_records(&format!("{session}/"))
            .await?)
    }

    /// One Artifact and its bytes (hash-checked).
    pub async fn read_artifact(
        &self,
        session: &SessionId,
        id: &str,
    ) -> Result<(Artifact, Vec<u8>), SessionActionError> {
        if !is_artifact_id(id) {
            return Err(SessionActionError::InvalidArgument {
                field: "id",
                reason: "an Artifact id is 64 lowercase hex digits".into(),
            });
        }
        let entry: Artifact = self
            .host
            .storage
            .get_record(&Artifact::key_for(session, id))
            .await?
            .ok_or_else(|| {
                SessionActionError::NotFound(format!("no Artifact {id} in session {session}"))
            })?;
        let bytes = self.blob(&entry.id, &format!("Artifact {id}")).await?;
        Ok((entry, bytes))
    }

    /// Copy `from`'s files, trash and Artifact references into the empty
    /// session `to` is the lease of (S7.5): records only, no blob is copied.
    pub async fn copy_session(
        &self,
        from: &SessionId,
        to: &LeaseGuard,
    ) -> Result<CopyReport, SessionActionError> {
        self.held_workspace(to)?;
        Ok(agent_workspace::copy_session(&*self.host.storage, from, &to.fence()).await?)
    }

    /// Delete the workspace, trash and Artifact references of the session
    /// `held` is the lease of, and free the blobs nothing else references
    /// (S7.5: a copy's Artifacts stay readable). Refused while a run of the
    /// session is not final. Its runs' records stay, as history.
    pub async fn delete_session(
        &self,
        held: &LeaseGuard,
    ) -> Result<DeleteReport, SessionActionError> {
        let session = held.session();
        self.held_workspace(held)?;
        let runs = agent_supervisor::store::runs_of_session(&*self.host.storage, session).await?;
        if let Some(active) = runs.iter().find(|r| !r.status.is_final()) {
            return Err(SessionActionError::RunActive {
                session: session.clone(),
                run: active.id.to_string(),
            });
        }
        Ok(agent_workspace::delete_session(&*self.host.storage, &held.fence()).await?)
    }

    /// The open workspace of the session `held` is the lease of.
    fn held_workspace(
        &self,
        held: &LeaseGuard,
    ) -> Result<agent_workspace::SessionActors, SessionActionError> {
        self.workspaces
            .get(held.session())
            .filter(|open| open.fence == held.fence())
            .ok_or_else(|| SessionActionError::NotHeld(held.session().clone()))
    }

    async fn blob(&self, hash: &str, what: &str) -> Result<Vec<u8>, SessionActionError> {
        let bytes = self.host.storage.get_blob(hash).await?;
        match bytes {
            Some(b) if agent_capabilities::sha256_hex(&b) == hash => Ok(b),
            _ => Err(WorkspaceError::ContentMissing {
                what: what.to_owned(),
                hash: hash.to_owned(),
            }
            .into()),
        }
    }
}

fn summary<'a>(
    sessions: &'a mut BTreeMap<SessionId, SessionSummary>,
    session: &SessionId,
) -> &'a mut SessionSummary {
    sessions
        .entry(session.clone())
        .or_insert_with(|| SessionSummary {
            session: session.clone(),
            runs: 0,
            last_run_at_ms: None,
            files: 0,
            artifacts: 0,
        })
}

/// A person's original file name: 1 to [`MAX_ATTACHMENT_NAME_BYTES`]
/// bytes, no control characters.
fn attachment_name(name: &str) -> Result<String, SessionActionError> {
    let bad = |reason: &str| SessionActionError::InvalidArgument {
        field: "name",
        reason: reason.to_owned(),
    };
    if name.trim().is_empty() {
        return Err(bad("an attachment's name cannot be empty"));
    }
    if name.len() > MAX_ATTACHMENT_NAME_BYTES {
        return Err(bad(&format!(
            "an attachment's name is at most {MAX_ATTACHMENT_NAME_BYTES} bytes, got {}",
            name.len()
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(bad(
            "an attachment's name cannot contain control characters",
        ));
    }
    Ok(name.to_owned())
}
