//! The workspace as `extract_document`'s document store: [`WorkspaceDocuments`]
//! implements the kernel protocol's [`DocumentSource`], so that the tools
//! crate reads workspace files without depending on this crate.

use agent_kernel::ids::SessionId;
use agent_kernel::protocol::{DocumentOrigin, DocumentSource, DocumentSourceError, SourceDocument};

use crate::actor::WorkspaceDirectory;
use crate::manifest::Source;
use crate::path::WorkspacePath;

/// Reads documents for `extract_document` from the session's open
/// workspace (the hosts' `DocumentSource`): the path goes through the
/// workspace's path policy, the size is checked before the bytes are read,
/// and the file's source decides its trust (user files `user`, tool output
/// `internal`, imports `external_untrusted`).
pub struct WorkspaceDocuments {
    directory: WorkspaceDirectory,
}

impl WorkspaceDocuments {
    pub fn new(directory: WorkspaceDirectory) -> Self {
        Self { directory }
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl DocumentSource for WorkspaceDocuments {
    async fn read(
        &self,
        session: &SessionId,
        path: &str,
        max_bytes: usize,
    ) -> Result<SourceDocument, DocumentSourceError> {
        let not_found = || DocumentSourceError::NotFound {
            path: path.to_owned(),
        };
        let parsed = WorkspacePath::parse(path).map_err(|_| not_found())?;
        let actors = self.directory.get(session).ok_or_else(|| {
            DocumentSourceError::Unavailable(format!(
                "the workspace of session {session} is not open"
            ))
        })?;
        let entry = actors
            .workspace
            .stat(&parsed)
            .await
            .map_err(|e| DocumentSourceError::Unavailable(e.to_string()))?
            .ok_or_else(not_found)?;
        if entry.size > max_bytes as u64 {
            return Err(DocumentSourceError::TooLarge {
                path: path.to_owned(),
                size: entry.size,
                limit: max_bytes,
            });
        }
        let (entry, bytes) = actors
            .workspace
            .read(&parsed)
            .await
            .map_err(|e| DocumentSourceError::Unavailable(e.to_string()))?;
        let origin = match entry.source {
            Source::User => DocumentOrigin::User,
            Source::Tool { .. } => DocumentOrigin::Runtime,
            Source::Import { .. } | Source::Attachment { .. } => DocumentOrigin::External,
        };
        Ok(SourceDocument {
            bytes,
            mime: Some(entry.mime),
            origin,
        })
    }
}
