//! Immutable, content-addressed Artifacts (S7.4, S7.5): an Artifact's id is
//! the SHA-256 of its bytes; its record lives in `Table::Artifacts` under
//! `<session>/<id>` and its bytes in the blob store, stored once.
//!
//! An Artifact never changes: publishing the same bytes again returns the
//! existing record, and editing or deleting the workspace file it came from
//! touches neither the record nor the blob.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use agent_capabilities::canonical::sha256_hex;
use agent_kernel::SessionId;
use agent_kernel::host::{Batch, Clock, Fence, Record, Storage, StorageError, Table};

use crate::blobs;
use crate::error::Quota;
use crate::error::WorkspaceError;
use crate::limits::{MAX_ARTIFACT_NAME_BYTES, Quotas};
use crate::manifest::{Operation, Receipt, Source};
use crate::mime::validate_mime;

/// The workspace file an Artifact was published from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PublishedFrom {
    pub path: String,
    pub revision: u64,
}

/// One published Artifact, as a session refers to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Artifact {
    pub session: SessionId,
    /// SHA-256 of the bytes, lowercase hex; also the blob's name.
    pub id: String,
    pub name: String,
    pub mime: String,
    pub size: u64,
    pub published_at_ms: u64,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<PublishedFrom>,
}

impl Artifact {
    pub fn key_for(session: &SessionId, id: &str) -> String {
        format!("{session}/{id}")
    }
}

impl Record for Artifact {
    const TABLE: Table = Table::Artifacts;
    fn key(&self) -> String {
        Artifact::key_for(&self.session, &self.id)
    }
}

/// What [`Artifacts::publish`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub artifact: Artifact,
    /// False when this session had already published the same bytes: the
    /// existing record is returned unchanged.
    pub created: bool,
    pub receipt: Receipt,
}

fn validate_name(name: &str) -> Result<(), WorkspaceError> {
    let bad = |reason: String| WorkspaceError::InvalidArgument {
        field: "name",
        reason,
    };
    if name.trim().is_empty() {
        return Err(bad(
            "the Artifact name is empty; give it a short title".into()
        ));
    }
    if name.len() > MAX_ARTIFACT_NAME_BYTES {
        return Err(bad(format!(
            "the Artifact name is {} bytes, over the limit of {MAX_ARTIFACT_NAME_BYTES}",
            name.len()
        )));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(bad(format!(
            "the Artifact name contains the control character U+{:04X}",
            u32::from(c)
        )));
    }
    Ok(())
}

/// Valid Artifact ids are 64 lowercase hex digits.
pub fn is_artifact_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// One session's Artifacts: the artifact actor's state.
pub struct Artifacts {
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    session: SessionId,
    fence: Fence,
    quotas: Quotas,
}

impl std::fmt::Debug for Artifacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Artifacts")
            .field("session", &self.session)
            .finish()
    }
}

impl Artifacts {
    pub fn new(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        fence: Fence,
        quotas: Quotas,
    ) -> Artifacts {
        Artifacts {
            storage,
            clock,
            session: fence.session.clone(),
            fence,
            quotas,
        }
    }

    /// Publish `bytes` as an immutable Artifact. The same bytes give the same
    /// id and one stored blob; publishing them again in this session returns
    /// the existing record (`created: false`), whatever name is given.
    pub async fn publish(
        &self,
        bytes: Vec<u8>,
        name: &str,
        mime: &str,
        source: Source,
        from: Option<PublishedFrom>,
    ) -> Result<Published, WorkspaceError> {
        validate_name(name)?;
        validate_mime(mime)?;
        let size = bytes.len() as u64;
        if size > self.quotas.max_artifact_bytes {
            return Err(WorkspaceError::QuotaExceeded {
                quota: Quota::ArtifactBytes,
                limit: self.quotas.max_artifact_bytes,
                requested: size,
            });
        }
        let id = sha256_hex(&bytes);
        let receipt_for = |artifact: &Artifact| {
            let mut r = Receipt::new(Operation::Publish, &format!("artifact/{}", artifact.id));
            r.content_hash = Some(artifact.id.clone());
            r.size = Some(artifact.size);
            r
        };
        if let Some(existing) = self.get_record(&id).await? {
            let receipt = receipt_for(&existing);
            return Ok(Published {
                artifact: existing,
                created: false,
                receipt,
            });
        }
        let artifact = Artifact {
            session: self.session.clone(),
            id: id.clone(),
            name: name.to_owned(),
            mime: mime.to_owned(),
            size,
            published_at_ms: self.clock.wall_ms(),
            source,
            from,
        };
        // The blob is durable before the record that names it.
        self.storage.put_blob(&id, bytes).await?;
        let batch = Batch::new()
            .fenced(self.fence.clone())
            .expect_absent(Table::Artifacts, artifact.key())
            .put_record(&artifact)?;
        match self.storage.commit(batch).await {
            Ok(()) => {}
            Err(StorageError::ConditionFailed { .. }) => {
                // Published meanwhile (by a retry of this call): return that one.
                if let Some(existing) = self.get_record(&id).await? {
                    let receipt = receipt_for(&existing);
                    return Ok(Published {
                        artifact: existing,
                        created: false,
                        receipt,
                    });
                }
                return Err(WorkspaceError::Busy);
            }
            Err(e) => return Err(e.into()),
        }
        let receipt = receipt_for(&artifact);
        Ok(Published {
            artifact,
            created: true,
            receipt,
        })
    }

    async fn get_record(&self, id: &str) -> Result<Option<Artifact>, WorkspaceError> {
        let key = Artifact::key_for(&self.session, id);
        match self.storage.get(Table::Artifacts, &key).await? {
            Some(raw) => serde_json::from_slice(&raw).map(Some).map_err(|e| {
                WorkspaceError::Storage(StorageError::Corrupt {
                    table: Table::Artifacts,
                    key,
                    detail: e.to_string(),
                })
            }),
            None => Ok(None),
        }
    }

    /// The record of Artifact `id`, if this session has it.
    pub async fn stat(&self, id: &str) -> Result<Option<Artifact>, WorkspaceError> {
        if !is_artifact_id(id) {
            return Err(WorkspaceError::ArtifactNotFound { id: id.to_owned() });
        }
        self.get_record(id).await
    }

    /// The record and bytes of Artifact `id`, verified against the id.
    pub async fn get(&self, id: &str) -> Result<(Artifact, Vec<u8>), WorkspaceError> {
        let artifact = self
            .stat(id)
            .await?
            .ok_or_else(|| WorkspaceError::ArtifactNotFound { id: id.to_owned() })?;
        let bytes = blobs::load_verified(
            self.storage.as_ref(),
            &artifact.id,
            &format!("artifact {id}"),
        )
        .await?;
        Ok((artifact, bytes))
    }

    /// Every Artifact of this session, by id.
    pub async fn list(&self) -> Result<Vec<Artifact>, WorkspaceError> {
        let prefix = format!("{}/", self.session);
        let mut out = Vec::new();
        for (key, raw) in self.storage.scan_prefix(Table::Artifacts, &prefix).await? {
            out.push(serde_json::from_slice(&raw).map_err(|e| {
                WorkspaceError::Storage(StorageError::Corrupt {
                    table: Table::Artifacts,
                    key,
                    detail: e.to_string(),
                })
            })?);
        }
        Ok(out)
    }
}
