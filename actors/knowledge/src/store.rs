//! Knowledge bases as stored in the host's storage (`Table::Meta`): a base
//! record per base (its documents, with a revision for compare-and-set), a
//! document record per document (title, source reference, the text's blob
//! and its chunk spans), and the text itself as a content-addressed blob
//! written in the same batch. Bad stored bytes are a typed error.

use std::sync::Arc;

use agent_kernel::host::{Batch, BlobRef, Clock, Storage, StorageError, Table};
use serde::{Deserialize, Serialize};

use crate::chunk::{ChunkSpan, chunk};

/// The stored layout version of base and document records.
pub const FORMAT: u32 = 1;
/// The largest document text, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 8 * 1024 * 1024;
/// Most documents in one base.
pub const MAX_DOCUMENTS_PER_BASE: usize = 10_000;
/// Most documents added in one call.
pub const MAX_DOCUMENTS_PER_ADD: usize = 2_000;
/// The longest base name or document id.
pub const MAX_NAME_LEN: usize = 64;
/// The longest document title or source label, in bytes.
pub const MAX_TITLE_BYTES: usize = 512;

const BASE_PREFIX: &str = "kb/";
const DOC_PREFIX: &str = "kb-doc/";
const TABLE: Table = Table::Meta;

/// A knowledge operation failed. Every variant says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KnowledgeError {
    #[error(
        "invalid {what} {given:?}: use 1 to {MAX_NAME_LEN} characters from a-z 0-9 . _ - (lowercase)"
    )]
    BadName { what: &'static str, given: String },
    #[error("no knowledge base {base}")]
    NoBase { base: String },
    #[error("knowledge base {base} already exists")]
    BaseExists { base: String },
    #[error("no document {document} in knowledge base {base}")]
    NoDocument { base: String, document: String },
    #[error(
        "document {document} is already in knowledge base {base}; remove it first to replace it"
    )]
    DocumentExists { base: String, document: String },
    #[error(
        "document {document} has {bytes} bytes of text, over the {MAX_DOCUMENT_BYTES}-byte limit; split it"
    )]
    DocumentTooLarge { document: String, bytes: usize },
    #[error("document {document} has no text")]
    EmptyDocument { document: String },
    #[error("a title or source label is over {MAX_TITLE_BYTES} bytes")]
    TitleTooLong,
    #[error("knowledge base {base} would hold {count} documents, over {MAX_DOCUMENTS_PER_BASE}")]
    BaseFull { base: String, count: usize },
    #[error("{count} documents in one call is over {MAX_DOCUMENTS_PER_ADD}; add them in parts")]
    TooManyAtOnce { count: usize },
    #[error(
        "knowledge base {base} changed while this change was made (another writer); reload and retry"
    )]
    Conflict { base: String },
    #[error(
        "the text of document {document} in {base} is missing or does not match its hash; remove and add it again"
    )]
    MissingText { base: String, document: String },
    #[error(
        "stored knowledge record at {key:?} has layout version {found}, not {FORMAT}; it was left untouched"
    )]
    Format { key: String, found: u32 },
    #[error("the search query is empty, has no words, or is longer than {max} bytes")]
    BadQuery { max: usize },
    #[error("knowledge base {base} is not on this run's knowledge allowlist (allowed: {allowed})")]
    NotAllowed { base: String, allowed: String },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl KnowledgeError {
    /// The stable code a tool answers with.
    pub fn code(&self) -> &'static str {
        match self {
            KnowledgeError::NotAllowed { .. } => "knowledge_base_not_allowed",
            KnowledgeError::NoBase { .. } => "knowledge_base_not_found",
            KnowledgeError::BadName { .. } | KnowledgeError::BadQuery { .. } => "invalid_arguments",
            KnowledgeError::Format { .. }
            | KnowledgeError::MissingText { .. }
            | KnowledgeError::Storage(StorageError::Corrupt { .. }) => "knowledge_corrupt",
            _ => "knowledge_error",
        }
    }
}

/// Check a base name or document id.
pub fn check_name(what: &'static str, given: &str) -> Result<(), KnowledgeError> {
    let ok = !given.is_empty()
        && given.len() <= MAX_NAME_LEN
        && given.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(KnowledgeError::BadName {
            what,
            given: given.chars().take(100).collect(),
        })
    }
}

/// A valid document id for a file named `name` (a path, a file name):
/// lowercase, every other character `-`, cut to [`MAX_NAME_LEN`] keeping
/// the end (where the name and its extension are); `document` when
/// nothing of the name is left. The file's own name stays the title.
pub fn document_id_for(name: &str) -> String {
    let mapped: Vec<char> = name
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let start = mapped.len().saturating_sub(MAX_NAME_LEN);
    let id: String = mapped[start..].iter().collect();
    let id = id.trim_start_matches('-');
    if id.is_empty() {
        "document".to_owned()
    } else {
        id.to_owned()
    }
}

/// Where a document's text came from (a reference, never the content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceRef {
    /// A file the person attached.
    Attachment { name: String },
    /// A workspace file at a revision; `content_hash`, the SHA-256 of the
    /// bytes read, when its text came from the file's bytes.
    WorkspaceFile {
        session: String,
        path: String,
        revision: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_hash: Option<String>,
    },
    /// An immutable Artifact; `content_hash` as for a workspace file.
    Artifact {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_hash: Option<String>,
    },
    /// A file of the person's own machine (`agentrt kb add --file`): its
    /// name and the SHA-256 of the bytes read.
    LocalFile { name: String, content_hash: String },
    /// Anything else the host names.
    Other { label: String },
}

impl SourceRef {
    fn size(&self) -> usize {
        match self {
            SourceRef::Attachment { name } => name.len(),
            SourceRef::WorkspaceFile {
                session,
                path,
                content_hash,
                ..
            } => session.len() + path.len() + content_hash.as_ref().map_or(0, String::len),
            SourceRef::Artifact { id, content_hash } => {
                id.len() + content_hash.as_ref().map_or(0, String::len)
            }
            SourceRef::LocalFile { name, content_hash } => name.len() + content_hash.len(),
            SourceRef::Other { label } => label.len(),
        }
    }
}

/// One document to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDocument {
    pub id: String,
    pub title: String,
    pub source: SourceRef,
    pub text: String,
}

/// A base as stored: its documents, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseRecord {
    pub v: u32,
    pub name: String,
    /// One more on every change of its documents.
    pub revision: u64,
    pub created_at_ms: u64,
    pub documents: Vec<String>,
}

/// A document as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentRecord {
    pub v: u32,
    pub base: String,
    pub id: String,
    pub title: String,
    pub source: SourceRef,
    /// The whole text, as a blob.
    pub text: BlobRef,
    pub chunks: Vec<ChunkSpan>,
    pub added_at_ms: u64,
}

fn base_key(base: &str) -> String {
    format!("{BASE_PREFIX}{base}")
}

fn doc_key(base: &str, doc: &str) -> String {
    format!("{DOC_PREFIX}{base}/{doc}")
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, KnowledgeError> {
    serde_json::to_vec(value).map_err(|e| {
        KnowledgeError::Storage(StorageError::Encode {
            table: TABLE,
            detail: e.to_string(),
        })
    })
}

fn decode<T: for<'de> Deserialize<'de>>(key: &str, bytes: &[u8]) -> Result<T, KnowledgeError> {
    #[derive(Deserialize)]
    struct Version {
        v: u32,
    }
    let corrupt = |detail: String| {
        KnowledgeError::Storage(StorageError::Corrupt {
            table: TABLE,
            key: key.to_owned(),
            detail,
        })
    };
    let version: Version = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if version.v != FORMAT {
        return Err(KnowledgeError::Format {
            key: key.to_owned(),
            found: version.v,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))
}

/// A document with its text, as loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedDocument {
    pub record: DocumentRecord,
    pub text: Arc<str>,
}

/// Bases and documents over the host's storage.
#[derive(Clone)]
pub struct KnowledgeStore {
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for KnowledgeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeStore").finish_non_exhaustive()
    }
}

impl KnowledgeStore {
    pub fn new(storage: Arc<dyn Storage>, clock: Arc<dyn Clock>) -> KnowledgeStore {
        KnowledgeStore { storage, clock }
    }

    async fn load_base_raw(&self, base: &str) -> Result<(BaseRecord, Vec<u8>), KnowledgeError> {
        let key = base_key(base);
        let bytes = self
            .storage
            .get(TABLE, &key)
            .await?
            .ok_or_else(|| KnowledgeError::NoBase {
                base: base.to_owned(),
            })?;
        Ok((decode(&key, &bytes)?, bytes))
    }

    /// The stored base.
    pub async fn base(&self, base: &str) -> Result<BaseRecord, KnowledgeError> {
        check_name("knowledge base name", base)?;
        Ok(self.load_base_raw(base).await?.0)
    }

    /// Every base, by name.
    pub async fn bases(&self) -> Result<Vec<BaseRecord>, KnowledgeError> {
        self.storage
            .scan_prefix(TABLE, BASE_PREFIX)
            .await?
            .iter()
            .map(|(k, v)| decode(k, v))
            .collect()
    }

    /// Create an empty base.
    pub async fn create_base(&self, base: &str) -> Result<BaseRecord, KnowledgeError> {
        check_name("knowledge base name", base)?;
        let record = BaseRecord {
            v: FORMAT,
            name: base.to_owned(),
            revision: 1,
            created_at_ms: self.clock.wall_ms(),
            documents: Vec::new(),
        };
        let batch = Batch::new().expect_absent(TABLE, base_key(base)).put(
            TABLE,
            base_key(base),
            encode(&record)?,
        );
        match self.storage.commit(batch).await {
            Err(StorageError::ConditionFailed { .. }) => Err(KnowledgeError::BaseExists {
                base: base.to_owned(),
            }),
            Err(e) => Err(e.into()),
            Ok(()) => Ok(record),
        }
    }

    /// Add documents to a base in one batch: their texts as blobs, their
    /// records with chunk spans, and the base record with a
    /// compare-and-set on what it was. Returns the new base record.
    pub async fn add_documents(
        &self,
        base: &str,
        documents: Vec<NewDocument>,
    ) -> Result<(BaseRecord, Vec<DocumentRecord>), KnowledgeError> {
        check_name("knowledge base name", base)?;
        if documents.len() > MAX_DOCUMENTS_PER_ADD {
            return Err(KnowledgeError::TooManyAtOnce {
                count: documents.len(),
            });
        }
        let (mut record, old) = self.load_base_raw(base).await?;
        let count = record.documents.len() + documents.len();
        if count > MAX_DOCUMENTS_PER_BASE {
            return Err(KnowledgeError::BaseFull {
                base: base.to_owned(),
                count,
            });
        }
        let now = self.clock.wall_ms();
        let mut batch = Batch::new().expect_value(TABLE, base_key(base), old);
        let mut added = Vec::with_capacity(documents.len());
        for doc in documents {
            check_name("document id", &doc.id)?;
            if doc.title.len() > MAX_TITLE_BYTES || doc.source.size() > MAX_TITLE_BYTES {
                return Err(KnowledgeError::TitleTooLong);
            }
            if doc.text.len() > MAX_DOCUMENT_BYTES {
                return Err(KnowledgeError::DocumentTooLarge {
                    document: doc.id,
                    bytes: doc.text.len(),
                });
            }
            if doc.text.trim().is_empty() {
                return Err(KnowledgeError::EmptyDocument { document: doc.id });
            }
            if record.documents.contains(&doc.id) {
                return Err(KnowledgeError::DocumentExists {
                    base: base.to_owned(),
                    document: doc.id,
                });
            }
            let chunks = chunk(&doc.text);
            let text = batch.add_blob(doc.text.into_bytes());
            let dr = DocumentRecord {
                v: FORMAT,
                base: base.to_owned(),
                id: doc.id.clone(),
                title: doc.title,
                source: doc.source,
                text,
                chunks,
                added_at_ms: now,
            };
            batch = batch.expect_absent(TABLE, doc_key(base, &doc.id)).put(
                TABLE,
                doc_key(base, &doc.id),
                encode(&dr)?,
            );
            record.documents.push(doc.id);
            added.push(dr);
        }
        record.documents.sort();
        record.revision += 1;
        let batch = batch.put(TABLE, base_key(base), encode(&record)?);
        self.commit(batch, base).await?;
        Ok((record, added))
    }

    /// Remove a document from a base (its text blob stays until the
    /// host's blob collection, as every blob does).
    pub async fn remove_document(
        &self,
        base: &str,
        document: &str,
    ) -> Result<BaseRecord, KnowledgeError> {
        check_name("knowledge base name", base)?;
        check_name("document id", document)?;
        let (mut record, old) = self.load_base_raw(base).await?;
        if !record.documents.iter().any(|d| d == document) {
            return Err(KnowledgeError::NoDocument {
                base: base.to_owned(),
                document: document.to_owned(),
            });
        }
        record.documents.retain(|d| d != document);
        record.revision += 1;
        let batch = Batch::new()
            .expect_value(TABLE, base_key(base), old)
            .delete(TABLE, doc_key(base, document))
            .put(TABLE, base_key(base), encode(&record)?);
        self.commit(batch, base).await?;
        Ok(record)
    }

    /// Delete a base and its document records.
    pub async fn delete_base(&self, base: &str) -> Result<(), KnowledgeError> {
        check_name("knowledge base name", base)?;
        let (record, old) = self.load_base_raw(base).await?;
        let mut batch = Batch::new()
            .expect_value(TABLE, base_key(base), old)
            .delete(TABLE, base_key(base));
        for doc in &record.documents {
            batch = batch.delete(TABLE, doc_key(base, doc));
        }
        self.commit(batch, base).await
    }

    async fn commit(&self, batch: Batch, base: &str) -> Result<(), KnowledgeError> {
        match self.storage.commit(batch).await {
            Err(StorageError::ConditionFailed { .. }) => Err(KnowledgeError::Conflict {
                base: base.to_owned(),
            }),
            Err(e) => Err(e.into()),
            Ok(()) => Ok(()),
        }
    }

    /// One document's record.
    pub async fn document(
        &self,
        base: &str,
        document: &str,
    ) -> Result<DocumentRecord, KnowledgeError> {
        check_name("document id", document)?;
        let key = doc_key(base, document);
        let bytes =
            self.storage
                .get(TABLE, &key)
                .await?
                .ok_or_else(|| KnowledgeError::NoDocument {
                    base: base.to_owned(),
                    document: document.to_owned(),
                })?;
        decode(&key, &bytes)
    }

    /// A document's text, checked against its hash.
    pub async fn text(&self, record: &DocumentRecord) -> Result<Arc<str>, KnowledgeError> {
        let missing = || KnowledgeError::MissingText {
            base: record.base.clone(),
            document: record.id.clone(),
        };
        let bytes = self
            .storage
            .get_blob(&record.text.hash)
            .await?
            .ok_or_else(missing)?;
        if BlobRef::of(&bytes) != record.text {
            return Err(missing());
        }
        let text = String::from_utf8(bytes).map_err(|_| missing())?;
        // The spans must lie on the text's char boundaries.
        for c in &record.chunks {
            let (s, e) = (c.offset as usize, (c.offset + c.len) as usize);
            if e > text.len() || !text.is_char_boundary(s) || !text.is_char_boundary(e) {
                return Err(missing());
            }
        }
        Ok(Arc::from(text))
    }

    /// Every document of a base with its text.
    pub async fn load_documents(
        &self,
        base: &BaseRecord,
    ) -> Result<Vec<LoadedDocument>, KnowledgeError> {
        let mut out = Vec::with_capacity(base.documents.len());
        for doc in &base.documents {
            let record = self.document(&base.name, doc).await?;
            let text = self.text(&record).await?;
            out.push(LoadedDocument { record, text });
        }
        Ok(out)
    }
}
