//! Knowledge from files (issue 37 part 5): a workspace file, an Artifact
//! or the bytes of a file the host read, added to a knowledge base as one
//! document whose text came through `extract_document`'s bounded readers
//! ([`DocumentTool::extract_bytes`]: PDFs and HTML in the host's places,
//! natively the document sandbox, in a tab the Worker). Each document's
//! provenance names the file (workspace path and revision, Artifact id, or
//! the local file's name) and the SHA-256 of the bytes read. A file that
//! cannot be read or extracted is a typed [`KnowledgeFileError`] and adds
//! nothing.

use agent_capabilities::sha256_hex;
use agent_kernel::SessionId;
use agent_knowledge::{DocumentRecord, KnowledgeError, NewDocument, SourceRef, document_id_for};
use agent_tools::builtin::document::{
    DocumentFormat, DocumentReadFailure, DocumentTool, ExtractLimits,
};

use crate::Assembly;
use crate::sessions::SessionActionError;

/// Why a file was not added to a knowledge base; nothing was added.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeFileError {
    /// No such workspace file or Artifact, or a malformed path or id.
    #[error(transparent)]
    Session(#[from] SessionActionError),
    /// The file is over `extract_document`'s input limit.
    #[error("{what} is {size} bytes, over the {limit}-byte document limit")]
    TooLarge {
        what: String,
        size: u64,
        limit: usize,
    },
    /// The reader refused the file (not a document it reads, malformed,
    /// over a page or pre-scan limit, timed out, its place lost).
    #[error("{what}: {failure}")]
    Unreadable {
        what: String,
        failure: DocumentReadFailure,
    },
    /// The knowledge store refused the document.
    #[error(transparent)]
    Knowledge(#[from] KnowledgeError),
    /// The store answered no record for the added document.
    #[error("the knowledge store recorded no document: {0}")]
    Unavailable(String),
}

impl KnowledgeFileError {
    /// A stable code: the reader's own for [`KnowledgeFileError::Unreadable`].
    pub fn code(&self) -> &str {
        match self {
            KnowledgeFileError::Session(e) => e.code(),
            KnowledgeFileError::TooLarge { .. } => "document_too_large",
            KnowledgeFileError::Unreadable { failure, .. } => &failure.code,
            KnowledgeFileError::Knowledge(_) => "knowledge_refused",
            KnowledgeFileError::Unavailable(_) => "document_store_unavailable",
        }
    }
}

/// A file added to a knowledge base.
#[derive(Debug, Clone)]
pub struct AddedFile {
    pub record: DocumentRecord,
    /// The format the reader read it as.
    pub format: DocumentFormat,
    /// Whether its text was cut at the reader's bound
    /// ([`KNOWLEDGE_FILE_MAX_CHARS`]): only the first part is indexed.
    pub truncated: bool,
}

/// The most characters of one file's text a knowledge base keeps: at most
/// four bytes each, so the text stays within the knowledge store's
/// document limit.
pub const KNOWLEDGE_FILE_MAX_CHARS: usize = agent_knowledge::store::MAX_DOCUMENT_BYTES / 4;

/// The reader knowledge from files goes through: `extract_document`'s
/// own (its places and input limit), keeping up to
/// [`KNOWLEDGE_FILE_MAX_CHARS`] characters instead of a tool result's.
pub(crate) fn knowledge_reader(tool: DocumentTool) -> DocumentTool {
    let limits = ExtractLimits {
        max_chars: KNOWLEDGE_FILE_MAX_CHARS,
        ..tool.limits
    };
    DocumentTool { limits, ..tool }
}

/// The document a file named `name` (its path or name) becomes: an id
/// derived from the name, titled with the document's own title or the name.
fn document(name: &str, text: String, source: SourceRef, title: Option<String>) -> NewDocument {
    NewDocument {
        id: document_id_for(name),
        title: title.unwrap_or_else(|| name.to_owned()),
        source,
        text,
    }
}

impl Assembly {
    /// The most bytes a file added to a knowledge base may have: the
    /// input limit of `extract_document`.
    pub fn knowledge_file_limit(&self) -> usize {
        self.documents.limits.max_input_bytes
    }

    /// Add `bytes` (a file named `name`, read by the host) to `base`
    /// (created when new) as one document named `name`, its text through
    /// `extract_document`'s readers; `source` names where the bytes came
    /// from (its `content_hash`, when it has one, is set here).
    pub async fn add_knowledge_bytes(
        &self,
        base: &str,
        name: &str,
        bytes: Vec<u8>,
        mime: Option<String>,
        source: SourceRef,
    ) -> Result<AddedFile, KnowledgeFileError> {
        let limit = self.knowledge_file_limit();
        if bytes.len() > limit {
            return Err(KnowledgeFileError::TooLarge {
                what: name.to_owned(),
                size: bytes.len() as u64,
                limit,
            });
        }
        let hash = sha256_hex(&bytes);
        let source = match source {
            SourceRef::WorkspaceFile {
                session,
                path,
                revision,
                ..
            } => SourceRef::WorkspaceFile {
                session,
                path,
                revision,
                content_hash: Some(hash),
            },
            SourceRef::Artifact { id, .. } => SourceRef::Artifact {
                id,
                content_hash: Some(hash),
            },
            SourceRef::LocalFile { name, .. } => SourceRef::LocalFile {
                name,
                content_hash: hash,
            },
            other => other,
        };
        let extracted = self
            .documents
            .extract_bytes(bytes, name, mime, None)
            .await
            .map_err(|failure| KnowledgeFileError::Unreadable {
                what: name.to_owned(),
                failure,
            })?;
        let bases = self.knowledge().await?;
        if !bases.names().iter().any(|b| b == base) {
            bases.create_base(base).await?;
        }
        let (format, truncated) = (extracted.format, extracted.truncated);
        let mut added = bases
            .add_documents(
                base,
                vec![document(name, extracted.text, source, extracted.title)],
            )
            .await?;
        let record = added
            .pop()
            .ok_or_else(|| KnowledgeFileError::Unavailable("no document was recorded".into()))?;
        Ok(AddedFile {
            record,
            format,
            truncated,
        })
    }

    /// Add the workspace file at `path` of `session` to `base` (read as
    /// [`Assembly::read_file`] reads it): provenance names the path, its
    /// revision and the content hash.
    pub async fn add_knowledge_from_workspace(
        &self,
        base: &str,
        session: &SessionId,
        path: &str,
    ) -> Result<AddedFile, KnowledgeFileError> {
        let (entry, bytes) = self.read_file(session, path).await?;
        let source = SourceRef::WorkspaceFile {
            session: session.to_string(),
            path: entry.path.to_string(),
            revision: entry.revision,
            content_hash: None,
        };
        self.add_knowledge_bytes(base, path, bytes, Some(entry.mime), source)
            .await
    }

    /// Add the Artifact `id` of `session` to `base` as a document named
    /// after it (read as [`Assembly::read_artifact`] reads it): provenance
    /// names the Artifact and its content hash.
    pub async fn add_knowledge_from_artifact(
        &self,
        base: &str,
        session: &SessionId,
        id: &str,
    ) -> Result<AddedFile, KnowledgeFileError> {
        let (artifact, bytes) = self.read_artifact(session, id).await?;
        let source = SourceRef::Artifact {
            id: artifact.id.clone(),
            content_hash: None,
        };
        self.add_knowledge_bytes(base, &artifact.name, bytes, Some(artifact.mime), source)
            .await
    }
}
