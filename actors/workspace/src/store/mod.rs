//! One session's workspace over the host's `Storage` (S7.2, S7.3): create,
//! write, append, read, list, move, delete to trash, restore, empty the
//! trash. This is the workspace actor's state; every write is one fenced
//! batch guarded by compare-and-set conditions on the records it replaces.
//!
//! This module owns the [`Workspace`] and its live files; the stored
//! records as one value are in `snapshot`, the trash in `trash`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use agent_capabilities::canonical::sha256_hex;
use agent_kernel::SessionId;
use agent_kernel::host::{Batch, Clock, Fence, Record, Storage, StorageError, Table};

use crate::blobs;
use crate::error::Quota;
use crate::error::WorkspaceError;
use crate::limits::Quotas;
use crate::manifest::{FileEntry, Operation, Receipt, RevisionCounter, Source, TrashEntry};
use crate::mime::validate_mime;
use crate::path::WorkspacePath;

mod snapshot;
mod trash;

use snapshot::{Snapshot, check_expect, decode, encode};
pub use trash::authorise_empty_trash;

/// What a mutation expects to find at its path (S7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "revision", rename_all = "snake_case")]
pub enum Expect {
    /// No check: whatever is there is replaced (hosts and imports only).
    Any,
    /// The path must be free ("must not exist", for create).
    MustNotExist,
    /// The file must exist at exactly this revision (`expectedRevision`).
    Revision(u64),
}

/// What a folder holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// The folder listed; "" is the session root.
    pub folder: String,
    /// Files directly in the folder (or below it, when recursive).
    pub files: Vec<FileEntry>,
    /// Names of the sub-folders directly in the folder (empty when recursive).
    pub folders: Vec<String>,
}

/// How much of its quotas a session uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub files: u64,
    pub live_bytes: u64,
    pub trash_entries: u64,
    pub trash_bytes: u64,
}

impl Usage {
    /// Bytes counted against `max_total_bytes`: live and trashed content.
    pub fn total_bytes(&self) -> u64 {
        self.live_bytes.saturating_add(self.trash_bytes)
    }
}

/// One session's workspace. Not itself an actor: [`crate::actor`] owns one
/// and serialises every call through its mailbox.
pub struct Workspace {
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    session: SessionId,
    fence: Fence,
    quotas: Quotas,
    /// The last snapshot, valid while the stored revision counter is
    /// byte-for-byte the one it holds: every workspace mutation, by this
    /// actor or any other writer, moves the counter.
    cache: Option<Snapshot>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("session", &self.session)
            .field("epoch", &self.fence.epoch)
            .finish()
    }
}

/// How many times a mutation re-reads and re-plans after a lost race.
const ATTEMPTS: usize = 3;

impl Workspace {
    /// The workspace of `fence.session`; every write carries `fence`.
    pub fn new(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        fence: Fence,
        quotas: Quotas,
    ) -> Workspace {
        Workspace {
            storage,
            clock,
            session: fence.session.clone(),
            fence,
            quotas,
            cache: None,
        }
    }

    pub fn session(&self) -> &SessionId {
        &self.session
    }

    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    fn prefix(&self) -> String {
        format!("{}/", self.session)
    }

    /// The session's records: the cached snapshot when the counter has not
    /// moved since, otherwise a fresh scan. The counter is read first, so a
    /// snapshot is never newer than the counter it is filed under.
    async fn snapshot(&mut self) -> Result<Snapshot, WorkspaceError> {
        let counter_key = RevisionCounter::key_for(&self.session);
        let counter = self.storage.get(Table::Meta, &counter_key).await?;
        if let Some(cached) = self.cache.take()
            && cached.counter == counter
        {
            return Ok(cached);
        }
        let prefix = self.prefix();
        let mut files = BTreeMap::new();
        for (key, raw) in self.storage.scan_prefix(Table::Manifests, &prefix).await? {
            let entry: FileEntry = decode(Table::Manifests, &key, &raw)?;
            files.insert(entry.path.clone(), (entry, raw));
        }
        let mut trash = BTreeMap::new();
        for (key, raw) in self.storage.scan_prefix(Table::Trash, &prefix).await? {
            let entry: TrashEntry = decode(Table::Trash, &key, &raw)?;
            trash.insert(entry.id.clone(), (entry, raw));
        }
        let last = match &counter {
            Some(raw) => decode::<RevisionCounter>(Table::Meta, &counter_key, raw)?.last,
            None => 0,
        };
        Ok(Snapshot {
            files,
            trash,
            counter,
            last,
        })
    }

    /// A fenced batch that moves the revision counter from `snap.last` to
    /// `snap.last + 1`, or fails if someone else moved it first.
    fn begin(&self, snap: &Snapshot) -> Result<(Batch, u64), WorkspaceError> {
        let next = snap.last + 1;
        let key = RevisionCounter::key_for(&self.session);
        let batch = Batch::new().fenced(self.fence.clone());
        let batch = match &snap.counter {
            Some(raw) => batch.expect_value(Table::Meta, key.clone(), raw.clone()),
            None => batch.expect_absent(Table::Meta, key.clone()),
        };
        let counter = RevisionCounter {
            session: self.session.clone(),
            last: next,
        };
        Ok((batch.put(Table::Meta, key, encode(&counter)?), next))
    }

    /// Plan against the session's records, commit the plan with `blob` (in
    /// the same batch as the records that name it); re-plan when another
    /// writer won a race.
    ///
    /// The first plan uses the cached snapshot without reading the revision
    /// counter: the batch's compare-and-set on the counter refuses it if
    /// anyone moved the counter since, and a refusal the plan itself gives
    /// (a stale revision, a quota, a taken path) is planned again on a
    /// checked snapshot before it is returned. A write that goes through
    /// so costs its commit alone, not a read of the counter before it.
    async fn mutate<T>(
        &mut self,
        mut blob: Option<(String, Vec<u8>)>,
        mut plan: impl FnMut(&Snapshot, Batch, u64) -> Result<(Batch, T), WorkspaceError>,
    ) -> Result<T, WorkspaceError> {
        let mut unchecked = self.cache.take();
        let mut attempt = 0;
        while attempt < ATTEMPTS {
            let checked = unchecked.is_none();
            let mut snap = match unchecked.take() {
                Some(cached) => cached,
                None => {
                    attempt += 1;
                    self.snapshot().await?
                }
            };
            let planned = self
                .begin(&snap)
                .and_then(|(batch, next)| plan(&snap, batch, next));
            let (batch, out) = match planned {
                Ok(p) => p,
                Err(e) => {
                    // Nothing was written: the snapshot is kept, and checked
                    // against the counter before a refusal is believed.
                    self.cache = Some(snap);
                    if checked {
                        return Err(e);
                    }
                    continue;
                }
            };
            let ops = batch.ops().to_vec();
            // The content rides in the batch of the entry that names it: one
            // transaction, durable together (S2), instead of a blob write
            // before the commit. A retry needs the bytes again.
            let content = if checked && attempt == ATTEMPTS {
                blob.take()
            } else {
                blob.clone()
            };
            let batch = match content {
                Some((hash, bytes)) => batch.put_claimed_blob(hash, bytes),
                None => batch,
            };
            match self.storage.commit(batch).await {
                Ok(()) => {
                    // A snapshot that cannot follow is dropped and rescanned next time.
                    if snap.apply(&ops, &self.session).is_ok() {
                        self.cache = Some(snap);
                    }
                    return Ok(out);
                }
                Err(StorageError::ConditionFailed { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(WorkspaceError::Busy)
    }

    fn check_size(&self, size: u64) -> Result<(), WorkspaceError> {
        self.quotas.check_file_bytes(size)
    }

    /// Create or replace a file. `expect` guards the replace (S7.3): a stale
    /// revision fails with the latest entry and changes nothing.
    pub async fn write(
        &mut self,
        path: &WorkspacePath,
        bytes: Vec<u8>,
        mime: &str,
        expect: Expect,
        source: Source,
    ) -> Result<(FileEntry, Receipt), WorkspaceError> {
        self.put_content(path, bytes, mime, expect, source, None)
            .await
    }

    /// Create a file that must not exist yet.
    pub async fn create(
        &mut self,
        path: &WorkspacePath,
        bytes: Vec<u8>,
        mime: &str,
        source: Source,
    ) -> Result<(FileEntry, Receipt), WorkspaceError> {
        self.write(path, bytes, mime, Expect::MustNotExist, source)
            .await
    }

    async fn put_content(
        &mut self,
        path: &WorkspacePath,
        bytes: Vec<u8>,
        mime: &str,
        expect: Expect,
        source: Source,
        operation: Option<Operation>,
    ) -> Result<(FileEntry, Receipt), WorkspaceError> {
        validate_mime(mime)?;
        let size = bytes.len() as u64;
        self.check_size(size)?;
        let hash = sha256_hex(&bytes);
        let now = self.clock.wall_ms();
        let quotas = self.quotas;
        let session = self.session.clone();
        self.mutate(Some((hash.clone(), bytes)), |snap, batch, next| {
            let existing = snap.files.get(path);
            check_expect(path, existing.map(|(e, _)| e), expect)?;
            let usage = snap.usage();
            if existing.is_none() {
                snap.check_new_path(path, None)?;
                if usage.files + 1 > quotas.max_files {
                    return Err(WorkspaceError::QuotaExceeded {
                        quota: Quota::Files,
                        limit: quotas.max_files,
                        requested: usage.files + 1,
                    });
                }
            }
            let old_size = existing.map_or(0, |(e, _)| e.size);
            let total = usage
                .total_bytes()
                .saturating_sub(old_size)
                .saturating_add(size);
            if total > quotas.max_total_bytes {
                return Err(WorkspaceError::QuotaExceeded {
                    quota: Quota::TotalBytes,
                    limit: quotas.max_total_bytes,
                    requested: total,
                });
            }
            let entry = FileEntry {
                session: session.clone(),
                path: path.clone(),
                mime: mime.to_owned(),
                size,
                hash: hash.clone(),
                revision: next,
                source: source.clone(),
                created_at_ms: existing.map_or(now, |(e, _)| e.created_at_ms),
                updated_at_ms: now,
            };
            let key = entry.key();
            let batch = match existing {
                Some((_, raw)) => batch.expect_value(Table::Manifests, key.clone(), raw.clone()),
                None => batch.expect_absent(Table::Manifests, key.clone()),
            };
            let batch = batch.put(Table::Manifests, key, encode(&entry)?);
            let op = operation.unwrap_or(if existing.is_some() {
                Operation::Write
            } else {
                Operation::Create
            });
            let mut receipt = Receipt::new(op, path.as_str());
            receipt.old_revision = existing.map(|(e, _)| e.revision);
            receipt.new_revision = Some(next);
            receipt.content_hash = Some(hash.clone());
            receipt.size = Some(size);
            Ok((batch, (entry, receipt)))
        })
        .await
    }

    /// Add `bytes` to the end of a file, creating it when it does not exist
    /// (then `expect` must not name a revision).
    pub async fn append(
        &mut self,
        path: &WorkspacePath,
        bytes: Vec<u8>,
        mime: &str,
        expect: Expect,
        source: Source,
    ) -> Result<(FileEntry, Receipt), WorkspaceError> {
        let current = self.stat(path).await?;
        check_expect(path, current.as_ref(), expect)?;
        match current {
            None => {
                self.put_content(
                    path,
                    bytes,
                    mime,
                    Expect::MustNotExist,
                    source,
                    Some(Operation::Append),
                )
                .await
            }
            Some(entry) => {
                let (_, mut content) = self.read(path).await?;
                let total = content.len() as u64 + bytes.len() as u64;
                self.check_size(total)?;
                content.extend_from_slice(&bytes);
                let mime = entry.mime.clone();
                self.put_content(
                    path,
                    content,
                    &mime,
                    Expect::Revision(entry.revision),
                    source,
                    Some(Operation::Append),
                )
                .await
            }
        }
    }

    /// The manifest entry of `path`, if the file exists.
    pub async fn stat(&self, path: &WorkspacePath) -> Result<Option<FileEntry>, WorkspaceError> {
        let key = FileEntry::key_for(&self.session, path);
        match self.storage.get(Table::Manifests, &key).await? {
            Some(raw) => Ok(Some(decode(Table::Manifests, &key, &raw)?)),
            None => Ok(None),
        }
    }

    /// The entry and content of `path`; content that is missing or does not
    /// hash to the entry's hash is `ContentMissing`, never wrong bytes.
    pub async fn read(&self, path: &WorkspacePath) -> Result<(FileEntry, Vec<u8>), WorkspaceError> {
        let entry = self
            .stat(path)
            .await?
            .ok_or_else(|| WorkspaceError::NotFound {
                path: path.to_string(),
            })?;
        let bytes = blobs::load_verified(self.storage.as_ref(), &entry.hash, path.as_str()).await?;
        Ok((entry, bytes))
    }

    /// The files in `folder` (`None`: the session root), with sub-folder
    /// names; or, when `recursive`, every file below it.
    pub async fn list(
        &self,
        folder: Option<&WorkspacePath>,
        recursive: bool,
    ) -> Result<Listing, WorkspaceError> {
        let base = match folder {
            Some(f) => format!("{}{}/", self.prefix(), f),
            None => self.prefix(),
        };
        let mut files = Vec::new();
        let mut folders = BTreeSet::new();
        for (key, raw) in self.storage.scan_prefix(Table::Manifests, &base).await? {
            let entry: FileEntry = decode(Table::Manifests, &key, &raw)?;
            // The backend returns only keys under `base`; skip anything else.
            let Some(rest) = key.strip_prefix(&base) else {
                continue;
            };
            match rest.split_once('/') {
                Some((sub, _)) if !recursive => {
                    folders.insert(sub.to_owned());
                }
                _ => files.push(entry),
            }
        }
        if let Some(f) = folder
            && files.is_empty()
            && folders.is_empty()
            && self.stat(f).await?.is_some()
        {
            return Err(WorkspaceError::InvalidArgument {
                field: "folder",
                reason: format!("{f} is a file, not a folder; read it instead"),
            });
        }
        Ok(Listing {
            folder: folder.map(ToString::to_string).unwrap_or_default(),
            files,
            folders: folders.into_iter().collect(),
        })
    }

    /// Move or rename a file. The destination must be free; `expect` guards
    /// the source. A rename that changes only letter case is allowed.
    pub async fn rename(
        &mut self,
        from: &WorkspacePath,
        to: &WorkspacePath,
        expect: Expect,
        source: Source,
    ) -> Result<(FileEntry, Receipt), WorkspaceError> {
        if from == to {
            return Err(WorkspaceError::SamePath {
                source_path: from.to_string(),
                target: to.to_string(),
            });
        }
        if expect == Expect::MustNotExist {
            return Err(WorkspaceError::InvalidArgument {
                field: "expectedRevision",
                reason: "a move needs an existing source; pass its revision or nothing".into(),
            });
        }
        let now = self.clock.wall_ms();
        self.mutate(None, |snap, batch, next| {
            let existing = snap.files.get(from);
            check_expect(from, existing.map(|(e, _)| e), expect)?;
            let Some((old, raw)) = existing else {
                return Err(WorkspaceError::NotFound {
                    path: from.to_string(),
                });
            };
            if let Some((occupant, _)) = snap.files.get(to) {
                return Err(WorkspaceError::AlreadyExists {
                    latest: Box::new(occupant.clone()),
                });
            }
            snap.check_new_path(to, Some(from))?;
            let entry = FileEntry {
                path: to.clone(),
                revision: next,
                source: source.clone(),
                updated_at_ms: now,
                ..old.clone()
            };
            let batch = batch
                .expect_value(Table::Manifests, old.key(), raw.clone())
                .delete(Table::Manifests, old.key())
                .expect_absent(Table::Manifests, entry.key())
                .put(Table::Manifests, entry.key(), encode(&entry)?);
            let mut receipt = Receipt::new(Operation::Move, from.as_str());
            receipt.to = Some(to.to_string());
            receipt.old_revision = Some(old.revision);
            receipt.new_revision = Some(next);
            receipt.content_hash = Some(old.hash.clone());
            receipt.size = Some(old.size);
            Ok((batch, (entry, receipt)))
        })
        .await
    }

    /// The session's quota usage.
    pub async fn usage(&mut self) -> Result<Usage, WorkspaceError> {
        Ok(self.snapshot().await?.usage())
    }
}
