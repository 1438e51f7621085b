//! `ProfileStore` (S10.3): profiles over the host's `Storage`, in
//! `Table::Meta`. Every save is a new revision written in one atomic batch
//! with a compare-and-set on the profile's head (and, when the store is
//! given a lease [`Fence`], fenced by its epoch), so two writers never both
//! win and a failed write changes nothing. Rollback, fork, import and the
//! lazy migration of legacy assistants are revisions too. Bad stored bytes
//! give a typed error for that record; other records stay readable.

use std::sync::Arc;

use agent_kernel::host::{Batch, Clock, Fence, Storage, StorageError, Table};

use crate::error::ProfileError;
use crate::export::{export_profile, parse_export};
use crate::legacy::LegacyAssistant;
use crate::precedence::{Layer, ProfileLayer, ProfileRef, Refused, narrow_profile};
use crate::profile::{AgentProfileV2, MAX_ITEM_BYTES, ProfileId, ProfileMode};
use crate::revision::{
    FieldChange, ForkOrigin, HEAD_PREFIX, LEGACY_PREFIX, ProfileHead, RECORD_FORMAT, REV_PREFIX,
    RUN_PREFIX, Revision, RevisionCause, RunUse, content_hash, decode, diff, encode, head_key,
    rev_key, run_key,
};

/// A profile as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ProfileSummary {
    pub id: ProfileId,
    pub name: String,
    pub mode: ProfileMode,
    pub latest: u64,
    pub saved_at_ms: u64,
    pub forked_from: Option<ForkOrigin>,
}

/// Every profile that could be read, and a typed error for each that could
/// not (its record left untouched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileList {
    pub profiles: Vec<ProfileSummary>,
    pub unreadable: Vec<ProfileError>,
}

/// What an import stored, and what the host's ceiling took away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    pub revision: Revision,
    pub refused: Vec<Refused>,
}

/// Profiles, their revisions and run history, over the host's storage.
#[derive(Clone)]
pub struct ProfileStore {
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    fence: Option<Fence>,
}

impl std::fmt::Debug for ProfileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileStore")
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

/// The previous head, as read, for the compare-and-set.
struct Base {
    head: ProfileHead,
    bytes: Vec<u8>,
}

impl ProfileStore {
    pub fn new(storage: Arc<dyn Storage>, clock: Arc<dyn Clock>) -> ProfileStore {
        ProfileStore {
            storage,
            clock,
            fence: None,
        }
    }

    /// Fence every write with a session lease's epoch (a run's writes,
    /// such as [`ProfileStore::record_run`]): a writer that lost its lease
    /// cannot write (S3.3). Edits by the person need no fence: the
    /// compare-and-set on the head orders them.
    pub fn fenced(mut self, fence: Fence) -> ProfileStore {
        self.fence = Some(fence);
        self
    }

    fn batch(&self) -> Batch {
        match &self.fence {
            Some(f) => Batch::new().fenced(f.clone()),
            None => Batch::new(),
        }
    }

    /// Store a new profile as revision 1; `Exists` if the id is taken.
    pub async fn create(&self, profile: &AgentProfileV2) -> Result<Revision, ProfileError> {
        profile.validate()?;
        if self
            .storage
            .get(Table::Meta, &head_key(&profile.id))
            .await?
            .is_some()
        {
            return Err(ProfileError::Exists {
                id: profile.id.to_string(),
            });
        }
        self.write(
            None,
            profile.clone(),
            RevisionCause::Saved,
            None,
            Batch::new(),
        )
        .await
    }

    /// Save an edit as a new revision. `based_on` is the revision the edit
    /// started from: if another save came meanwhile, `Conflict`, and
    /// nothing is written.
    pub async fn save(
        &self,
        profile: &AgentProfileV2,
        based_on: u64,
    ) -> Result<Revision, ProfileError> {
        profile.validate()?;
        let base = self.load_head(&profile.id).await?;
        if base.head.latest != based_on {
            return Err(ProfileError::Conflict {
                id: profile.id.to_string(),
                expected: based_on,
                latest: base.head.latest,
            });
        }
        self.write(
            Some(base),
            profile.clone(),
            RevisionCause::Saved,
            None,
            Batch::new(),
        )
        .await
    }

    /// The latest revision of `id` (a legacy assistant is migrated first).
    pub async fn get(&self, id: &ProfileId) -> Result<Revision, ProfileError> {
        let base = self.load_head(id).await?;
        self.get_revision(id, base.head.latest).await
    }

    /// The head of `id`: latest revision, creation time, fork origin.
    pub async fn head(&self, id: &ProfileId) -> Result<ProfileHead, ProfileError> {
        Ok(self.load_head(id).await?.head)
    }

    /// Revision `revision` of `id`, checked against its key and hash.
    pub async fn get_revision(
        &self,
        id: &ProfileId,
        revision: u64,
    ) -> Result<Revision, ProfileError> {
        let head = self.load_head(id).await?.head;
        if revision == 0 || revision > head.latest {
            return Err(ProfileError::RevisionNotFound {
                id: id.to_string(),
                revision,
                latest: head.latest,
            });
        }
        let key = rev_key(id, revision);
        let bytes =
            self.storage
                .get(Table::Meta, &key)
                .await?
                .ok_or_else(|| ProfileError::Corrupt {
                    key: key.clone(),
                    detail: format!(
                        "revision {revision} is missing though the head names {}",
                        head.latest
                    ),
                })?;
        check_revision(&key, id, revision, &bytes)
    }

    /// Every revision of `id`, oldest first.
    pub async fn revisions(&self, id: &ProfileId) -> Result<Vec<Revision>, ProfileError> {
        self.load_head(id).await?;
        let prefix = format!("{REV_PREFIX}{id}/");
        let mut out = Vec::new();
        for (key, bytes) in self.storage.scan_prefix(Table::Meta, &prefix).await? {
            let number = key[prefix.len()..]
                .parse::<u64>()
                .map_err(|e| ProfileError::Corrupt {
                    key: key.clone(),
                    detail: format!("the revision number does not parse: {e}"),
                })?;
            out.push(check_revision(&key, id, number, &bytes)?);
        }
        Ok(out)
    }

    /// Every profile (legacy assistants migrated on the way), by id. A
    /// record that cannot be read is reported in `unreadable`, never
    /// dropped silently and never in the way of the others.
    pub async fn list(&self) -> Result<ProfileList, ProfileError> {
        let mut profiles = Vec::new();
        let mut unreadable = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (key, _) in self.storage.scan_prefix(Table::Meta, HEAD_PREFIX).await? {
            let id = match ProfileId::new(&key[HEAD_PREFIX.len()..]) {
                Ok(id) => id,
                Err(e) => {
                    unreadable.push(ProfileError::Corrupt {
                        key,
                        detail: e.to_string(),
                    });
                    continue;
                }
            };
            seen.insert(id.clone());
            match self.summary(&id).await {
                Ok(s) => profiles.push(s),
                Err(e) => unreadable.push(e),
            }
        }
        for (key, _) in self.storage.scan_prefix(Table::Meta, LEGACY_PREFIX).await? {
            let id = match ProfileId::new(&key[LEGACY_PREFIX.len()..]) {
                Ok(id) => id,
                Err(e) => {
                    unreadable.push(ProfileError::Legacy {
                        key,
                        why: e.to_string(),
                    });
                    continue;
                }
            };
            if seen.contains(&id) {
                continue;
            }
            match self.summary(&id).await {
                Ok(s) => profiles.push(s),
                Err(e) => unreadable.push(e),
            }
        }
        profiles.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(ProfileList {
            profiles,
            unreadable,
        })
    }

    async fn summary(&self, id: &ProfileId) -> Result<ProfileSummary, ProfileError> {
        let head = self.load_head(id).await?.head;
        let latest = self.get_revision(id, head.latest).await?;
        Ok(ProfileSummary {
            id: id.clone(),
            name: latest.profile.name,
            mode: latest.profile.mode,
            latest: head.latest,
            saved_at_ms: latest.saved_at_ms,
            forked_from: head.forked_from,
        })
    }

    /// The fields that differ from revision `a` to revision `b` of `id`.
    pub async fn diff(
        &self,
        id: &ProfileId,
        a: u64,
        b: u64,
    ) -> Result<Vec<FieldChange>, ProfileError> {
        let ra = self.get_revision(id, a).await?;
        let rb = self.get_revision(id, b).await?;
        Ok(diff(&ra.profile, &rb.profile))
    }

    /// Roll `id` back to revision `to`: a new revision equal to it (older
    /// revisions stay).
    pub async fn rollback(&self, id: &ProfileId, to: u64) -> Result<Revision, ProfileError> {
        let old = self.get_revision(id, to).await?;
        let base = self.load_head(id).await?;
        self.write(
            Some(base),
            old.profile,
            RevisionCause::RolledBack { to },
            None,
            Batch::new(),
        )
        .await
    }

    /// A new profile `new_id` named `name`, starting as the latest revision
    /// of `source`, with fork metadata (source id, revision and hash).
    pub async fn fork(
        &self,
        source: &ProfileId,
        new_id: ProfileId,
        name: &str,
    ) -> Result<Revision, ProfileError> {
        let from = self.get(source).await?;
        let mut profile = from.profile;
        profile.id = new_id;
        profile.name = name.to_owned();
        profile.validate()?;
        if self
            .storage
            .get(Table::Meta, &head_key(&profile.id))
            .await?
            .is_some()
        {
            return Err(ProfileError::Exists {
                id: profile.id.to_string(),
            });
        }
        let origin = ForkOrigin {
            id: source.clone(),
            revision: from.revision,
            hash: from.hash,
        };
        self.write(
            None,
            profile,
            RevisionCause::Forked {
                from: origin.clone(),
            },
            Some(origin),
            Batch::new(),
        )
        .await
    }

    /// The shareable export of `id`'s latest revision: canonical JSON
    /// without credentials or run history.
    pub async fn export(&self, id: &ProfileId) -> Result<Vec<u8>, ProfileError> {
        export_profile(&self.get(id).await?.profile)
    }

    /// Import an export as a new profile (under `as_id` when given),
    /// narrowed to the host's `ceiling` first: it never grants more than the
    /// host allows. What the ceiling took away is returned.
    pub async fn import(
        &self,
        bytes: &[u8],
        ceiling: &Layer,
        as_id: Option<ProfileId>,
    ) -> Result<Imported, ProfileError> {
        let mut profile = parse_export(bytes)?;
        if let Some(id) = as_id {
            profile.id = id;
        }
        let (profile, refused) = narrow_profile(&profile, ceiling);
        profile.validate()?;
        if self
            .storage
            .get(Table::Meta, &head_key(&profile.id))
            .await?
            .is_some()
        {
            return Err(ProfileError::Exists {
                id: profile.id.to_string(),
            });
        }
        let revision = self
            .write(None, profile, RevisionCause::Imported, None, Batch::new())
            .await?;
        Ok(Imported { revision, refused })
    }

    /// The latest revision of `id` as a precedence layer (S10.2).
    pub async fn layer(&self, id: &ProfileId) -> Result<ProfileLayer, ProfileError> {
        let r = self.get(id).await?;
        Ok(ProfileLayer::of(&r.profile, r.revision))
    }

    /// Record that run `run` used `profile` (the profile's local run
    /// history; never exported). Fenced when the store is.
    pub async fn record_run(&self, profile: &ProfileRef, run: &str) -> Result<(), ProfileError> {
        if run.is_empty()
            || run.len() > MAX_ITEM_BYTES
            || run
                .chars()
                .any(|c| c.is_control() || c.is_whitespace() || c == '/')
        {
            return Err(ProfileError::Invalid {
                field: "run",
                why: format!(
                    "a run id must be 1 to {MAX_ITEM_BYTES} bytes without whitespace, control characters or '/'"
                ),
            });
        }
        let record = RunUse {
            v: RECORD_FORMAT,
            run: run.to_owned(),
            revision: profile.revision,
            at_ms: self.clock.wall_ms(),
        };
        let batch = self
            .batch()
            .expect_present(Table::Meta, rev_key(&profile.id, profile.revision))
            .put(Table::Meta, run_key(&profile.id, run), encode(&record)?);
        match self.storage.commit(batch).await {
            Err(StorageError::ConditionFailed { .. }) => Err(ProfileError::RevisionNotFound {
                id: profile.id.to_string(),
                revision: profile.revision,
                latest: self.stored_latest(&profile.id).await,
            }),
            other => Ok(other?),
        }
    }

    /// The runs that used `id`, by run id.
    pub async fn runs(&self, id: &ProfileId) -> Result<Vec<RunUse>, ProfileError> {
        let prefix = format!("{RUN_PREFIX}{id}/");
        self.storage
            .scan_prefix(Table::Meta, &prefix)
            .await?
            .iter()
            .map(|(key, bytes)| decode(key, bytes))
            .collect()
    }

    /// The latest revision a stored head names, for error messages (0 when
    /// there is none or it cannot be read); never migrates.
    async fn stored_latest(&self, id: &ProfileId) -> u64 {
        let key = head_key(id);
        match self.storage.get(Table::Meta, &key).await {
            Ok(Some(bytes)) => decode::<ProfileHead>(&key, &bytes).map_or(0, |h| h.latest),
            _ => 0,
        }
    }

    /// The head of `id`; a legacy assistant without one is migrated now.
    async fn load_head(&self, id: &ProfileId) -> Result<Base, ProfileError> {
        let key = head_key(id);
        match self.storage.get(Table::Meta, &key).await? {
            Some(bytes) => {
                let head: ProfileHead = decode(&key, &bytes)?;
                if head.id != *id || head.latest == 0 {
                    return Err(ProfileError::Corrupt {
                        key,
                        detail: format!(
                            "the head names profile {} at revision {}",
                            head.id, head.latest
                        ),
                    });
                }
                Ok(Base { head, bytes })
            }
            None => self.migrate(id).await,
        }
    }

    /// Lazy migration (S10.3): the legacy assistant `id` becomes a
    /// chat-only profile at revision 1, in one batch that also checks the
    /// legacy bytes are still those read. The legacy record is kept.
    async fn migrate(&self, id: &ProfileId) -> Result<Base, ProfileError> {
        let key = format!("{LEGACY_PREFIX}{id}");
        let Some(bytes) = self.storage.get(Table::Meta, &key).await? else {
            return Err(ProfileError::NotFound { id: id.to_string() });
        };
        let legacy = LegacyAssistant::parse(&key, &bytes)?;
        let profile = legacy.to_profile(&key, id.clone())?;
        let cause = RevisionCause::Migrated {
            legacy_hash: agent_capabilities::sha256_hex(&bytes),
        };
        let check = Batch::new().expect_value(Table::Meta, key.clone(), bytes);
        match self.write(None, profile, cause, None, check).await {
            // Another reader migrated it first: read what it wrote.
            Ok(_) | Err(ProfileError::Exists { .. }) => {}
            Err(e) => return Err(e),
        }
        let head_key = head_key(id);
        let bytes = self
            .storage
            .get(Table::Meta, &head_key)
            .await?
            .ok_or_else(|| ProfileError::Legacy {
                key,
                why: "the legacy record changed while it was migrated; read it again".to_owned(),
            })?;
        let head = decode(&head_key, &bytes)?;
        Ok(Base { head, bytes })
    }

    /// Write `profile` as the next revision after `base` (or revision 1 of
    /// a new profile), with `extra`'s conditions, in one batch.
    async fn write(
        &self,
        base: Option<Base>,
        profile: AgentProfileV2,
        cause: RevisionCause,
        forked_from: Option<ForkOrigin>,
        extra: Batch,
    ) -> Result<Revision, ProfileError> {
        let now = self.clock.wall_ms();
        let id = profile.id.clone();
        let (head, condition) = match &base {
            Some(b) => {
                let latest = b
                    .head
                    .latest
                    .checked_add(1)
                    .ok_or_else(|| ProfileError::Corrupt {
                        key: head_key(&id),
                        detail: "the revision counter is at its maximum".to_owned(),
                    })?;
                (
                    ProfileHead {
                        latest,
                        ..b.head.clone()
                    },
                    Some(b.bytes.clone()),
                )
            }
            None => (
                ProfileHead {
                    v: RECORD_FORMAT,
                    id: id.clone(),
                    latest: 1,
                    created_at_ms: now,
                    forked_from,
                },
                None,
            ),
        };
        let revision = Revision {
            v: RECORD_FORMAT,
            revision: head.latest,
            hash: content_hash(&profile)?,
            saved_at_ms: now,
            cause,
            profile,
        };
        let mut batch = self.batch();
        batch.conditions.extend(extra.conditions);
        let batch = match condition {
            Some(bytes) => batch.expect_value(Table::Meta, head_key(&id), bytes),
            None => batch.expect_absent(Table::Meta, head_key(&id)),
        };
        let batch = batch
            .expect_absent(Table::Meta, rev_key(&id, head.latest))
            .put(Table::Meta, rev_key(&id, head.latest), encode(&revision)?)
            .put(Table::Meta, head_key(&id), encode(&head)?);
        match self.storage.commit(batch).await {
            Ok(()) => Ok(revision),
            Err(StorageError::ConditionFailed { key, .. }) if key == head_key(&id) => match base {
                None => Err(ProfileError::Exists { id: id.to_string() }),
                Some(b) => Err(ProfileError::Conflict {
                    id: id.to_string(),
                    expected: b.head.latest,
                    latest: self.stored_latest(&id).await,
                }),
            },
            Err(StorageError::ConditionFailed { key, .. }) => Err(ProfileError::Legacy {
                key,
                why: "the record changed while it was written; read it again".to_owned(),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

/// Decode a revision and check it is the one its key names, with the hash
/// of its content.
fn check_revision(
    key: &str,
    id: &ProfileId,
    revision: u64,
    bytes: &[u8],
) -> Result<Revision, ProfileError> {
    let rev: Revision = decode(key, bytes)?;
    let corrupt = |detail: String| ProfileError::Corrupt {
        key: key.to_owned(),
        detail,
    };
    if rev.revision != revision || rev.profile.id != *id {
        return Err(corrupt(format!(
            "the record holds profile {} revision {}",
            rev.profile.id, rev.revision
        )));
    }
    if content_hash(&rev.profile)? != rev.hash {
        return Err(corrupt(
            "the profile does not match its content hash".to_owned(),
        ));
    }
    Ok(rev)
}
