//! One session's workspace over the host's `Storage` (S7.2, S7.3): create,
//! write, append, read, list, move, delete to trash, restore, empty the
//! trash. This is the workspace actor's state; every write is one fenced
//! batch guarded by compare-and-set conditions on the records it replaces.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use agent_capabilities::canonical::sha256_hex;
use agent_capabilities::{EffectClass, Target, Verified};
use agent_kernel::SessionId;
use agent_kernel::host::{Batch, Clock, Fence, Op, Record, Storage, StorageError, Table};

use crate::error::WorkspaceError;
use crate::gc;
use crate::limits::{Quota, Quotas};
use crate::manifest::{FileEntry, Operation, Receipt, RevisionCounter, Source, TrashEntry};
use crate::mime::validate_mime;
use crate::path::WorkspacePath;

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

/// Everything stored for one session, with the raw bytes of each record so
/// that a batch can require it unchanged.
pub(crate) struct Snapshot {
    pub(crate) files: BTreeMap<WorkspacePath, (FileEntry, Vec<u8>)>,
    pub(crate) trash: BTreeMap<String, (TrashEntry, Vec<u8>)>,
    counter: Option<Vec<u8>>,
    last: u64,
}

impl Snapshot {
    /// Bring the snapshot up to date with a batch this workspace committed.
    fn apply(&mut self, ops: &[Op], session: &SessionId) -> Result<(), WorkspaceError> {
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

    fn usage(&self) -> Usage {
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
    fn check_new_path(
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

fn encode<R: Record>(record: &R) -> Result<Vec<u8>, WorkspaceError> {
    serde_json::to_vec(record).map_err(|e| {
        WorkspaceError::Storage(StorageError::Encode {
            table: R::TABLE,
            detail: e.to_string(),
        })
    })
}

fn decode<R: Record>(table: Table, key: &str, bytes: &[u8]) -> Result<R, WorkspaceError> {
    serde_json::from_slice(bytes).map_err(|e| {
        WorkspaceError::Storage(StorageError::Corrupt {
            table,
            key: key.to_owned(),
            detail: e.to_string(),
        })
    })
}

fn check_expect(
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
        let bytes = gc::load_verified(self.storage.as_ref(), &entry.hash, path.as_str()).await?;
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

    /// The session's quota usage.
    pub async fn usage(&mut self) -> Result<Usage, WorkspaceError> {
        Ok(self.snapshot().await?.usage())
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
    if proof.tool() != crate::tools::EMPTY_TRASH {
        return refuse(format!(
            "the capability is for tool {:?}, not {:?}",
            proof.tool(),
            crate::tools::EMPTY_TRASH
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
