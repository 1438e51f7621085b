//! The storage trait: ordered key-value tables, a content-addressed blob
//! store, lease records, and atomic declarative batches fenced by a lease
//! epoch. Backends (memory, SQLite, IndexedDB) implement only these
//! primitives; typed records are layered on top by `StorageExt`.
//!
//! A batch is data, not a closure, so that IndexedDB can run it in one
//! transaction without awaiting anything else inside it. A batch may carry
//! blobs too: a record and the blobs it names become durable in one commit.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::host::lease_cas::{self, LeaseCas, LeaseSwap};
use crate::host::lease_rules;
use crate::ids::{OwnerId, SessionId};
use crate::maybe_send::{MaybeSend, MaybeSync};

/// The tables of the runtime. Keys are ordered by their UTF-8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    /// `AgentRun` records, by run id.
    Runs,
    /// Journal records, `<run>/<call>`.
    Journal,
    /// Checkpoints, `<run>/<seq>`.
    Checkpoints,
    /// Activities, `<run>/<seq>`.
    Activities,
    /// Evidence, `<run>/<call>`.
    Evidence,
    /// Pending approvals, inputs and decisions, `<run>/<request>`.
    Pending,
    /// Workspace manifests, `<session>/<path>`.
    Manifests,
    /// Workspace trash, `<session>/<id>`.
    Trash,
    /// Artifact records and references, by the owning crate's keys.
    Artifacts,
    /// Anything else a component needs (schema versions, counters).
    Meta,
}

impl Table {
    /// Every table, for backends that create one store per table.
    pub const ALL: [Table; 10] = [
        Table::Runs,
        Table::Journal,
        Table::Checkpoints,
        Table::Activities,
        Table::Evidence,
        Table::Pending,
        Table::Manifests,
        Table::Trash,
        Table::Artifacts,
        Table::Meta,
    ];

    /// The table's stable name in backends.
    pub fn as_str(self) -> &'static str {
        match self {
            Table::Runs => "runs",
            Table::Journal => "journal",
            Table::Checkpoints => "checkpoints",
            Table::Activities => "activities",
            Table::Evidence => "evidence",
            Table::Pending => "pending",
            Table::Manifests => "manifests",
            Table::Trash => "trash",
            Table::Artifacts => "artifacts",
            Table::Meta => "meta",
        }
    }
}

/// A reference to a blob: the SHA-256 of its bytes (lowercase hex) and its size.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct BlobRef {
    pub hash: String,
    pub size: u64,
}

impl BlobRef {
    /// The reference for `bytes`.
    pub fn of(bytes: &[u8]) -> BlobRef {
        BlobRef {
            hash: agent_capabilities::sha256_hex(bytes),
            size: bytes.len() as u64,
        }
    }

    /// The reference for `bytes` stored under the name `claimed`, the rule
    /// of `Storage::put_blob`: refused (`BlobHashMismatch`) unless the bytes
    /// hash to it.
    pub fn claimed(claimed: &str, bytes: &[u8]) -> Result<BlobRef, StorageError> {
        let blob = BlobRef::of(bytes);
        if blob.hash != claimed {
            return Err(StorageError::BlobHashMismatch {
                claimed: claimed.to_owned(),
                actual: blob.hash,
            });
        }
        Ok(blob)
    }
}

/// A write is allowed only while the writer's lease epoch is current.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fence {
    pub session: SessionId,
    pub epoch: u64,
}

impl Fence {
    /// The fencing rule every backend applies inside a batch's transaction:
    /// the session's `current` stored epoch must be this one.
    pub fn check(&self, current: Option<u64>) -> Result<(), StorageError> {
        if current == Some(self.epoch) {
            return Ok(());
        }
        Err(StorageError::StaleEpoch {
            session: self.session.clone(),
            presented: self.epoch,
            current,
        })
    }
}

/// A compare-and-set condition checked inside the batch's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The key must not exist.
    Absent { table: Table, key: String },
    /// The key must exist.
    Present { table: Table, key: String },
    /// The key must hold exactly these bytes.
    Equals {
        table: Table,
        key: String,
        value: Vec<u8>,
    },
}

impl Condition {
    /// The table and key the condition is about.
    pub fn target(&self) -> (Table, &str) {
        match self {
            Condition::Absent { table, key }
            | Condition::Present { table, key }
            | Condition::Equals { table, key, .. } => (*table, key),
        }
    }

    /// The condition rule every backend applies to what its transaction
    /// read at [`Condition::target`] (`stored`: the value, if any).
    pub fn check(&self, stored: Option<&[u8]>) -> Result<(), StorageError> {
        let holds = match self {
            Condition::Absent { .. } => stored.is_none(),
            Condition::Present { .. } => stored.is_some(),
            Condition::Equals { value, .. } => stored == Some(value.as_slice()),
        };
        if holds {
            return Ok(());
        }
        let (table, key) = self.target();
        Err(StorageError::ConditionFailed {
            table,
            key: key.to_owned(),
        })
    }
}

/// One write inside a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put {
        table: Table,
        key: String,
        value: Vec<u8>,
    },
    Delete {
        table: Table,
        key: String,
    },
    /// Store `bytes` as the blob named `hash` (their SHA-256, checked before
    /// anything applies); storing bytes already there keeps one copy.
    PutBlob {
        hash: String,
        bytes: Vec<u8>,
    },
}

/// An atomic batch: either every op applies or none does. Conditions and the
/// fence are checked first, in the same transaction.
///
/// Its ops are added only through its methods: a blob added with
/// [`Batch::add_blob`] is named by the hash of its bytes computed there, so
/// [`Batch::check_blobs`] hashes again only the blobs whose name was
/// claimed by the caller ([`Batch::put_claimed_blob`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    pub fence: Option<Fence>,
    pub conditions: Vec<Condition>,
    ops: Vec<Op>,
    /// Positions in `ops` of blobs named by their caller, not by the batch.
    claimed: Vec<usize>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }
    /// Refuse the whole batch unless `fence` is the session's current lease epoch.
    pub fn fenced(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }
    pub fn put(mut self, table: Table, key: impl Into<String>, value: Vec<u8>) -> Self {
        self.ops.push(Op::Put {
            table,
            key: key.into(),
            value,
        });
        self
    }
    pub fn delete(mut self, table: Table, key: impl Into<String>) -> Self {
        self.ops.push(Op::Delete {
            table,
            key: key.into(),
        });
        self
    }
    pub fn expect_absent(mut self, table: Table, key: impl Into<String>) -> Self {
        self.conditions.push(Condition::Absent {
            table,
            key: key.into(),
        });
        self
    }
    pub fn expect_present(mut self, table: Table, key: impl Into<String>) -> Self {
        self.conditions.push(Condition::Present {
            table,
            key: key.into(),
        });
        self
    }
    pub fn expect_value(mut self, table: Table, key: impl Into<String>, value: Vec<u8>) -> Self {
        self.conditions.push(Condition::Equals {
            table,
            key: key.into(),
            value,
        });
        self
    }
    /// Serialise a typed record and put it under its own key.
    pub fn put_record<R: Record>(self, record: &R) -> Result<Self, StorageError> {
        let bytes = serde_json::to_vec(record).map_err(|e| StorageError::Encode {
            table: R::TABLE,
            detail: e.to_string(),
        })?;
        Ok(self.put(R::TABLE, record.key(), bytes))
    }
    /// Store `bytes` as a blob in this batch; returns its reference. The
    /// blob becomes durable with the batch's records, never without them.
    pub fn add_blob(&mut self, bytes: Vec<u8>) -> BlobRef {
        let blob = BlobRef::of(&bytes);
        self.ops.push(Op::PutBlob {
            hash: blob.hash.clone(),
            bytes,
        });
        blob
    }
    /// Store `bytes` as the blob named `hash`, a name the caller claims:
    /// [`Batch::check_blobs`] refuses the batch if the bytes do not hash to it.
    pub fn put_claimed_blob(mut self, hash: impl Into<String>, bytes: Vec<u8>) -> Self {
        self.claimed.push(self.ops.len());
        self.ops.push(Op::PutBlob {
            hash: hash.into(),
            bytes,
        });
        self
    }
    /// The writes, in order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }
    /// The writes, in order, taken out of the batch (its fence and
    /// conditions checked already).
    pub fn into_ops(self) -> Vec<Op> {
        self.ops
    }
    /// Refuse the batch (`BlobHashMismatch`) if one of its blobs does not
    /// hash to its name. Backends call this before applying anything. Blobs
    /// named by [`Batch::add_blob`] hash to their name by construction.
    pub fn check_blobs(&self) -> Result<(), StorageError> {
        for &i in &self.claimed {
            if let Some(Op::PutBlob { hash, bytes }) = self.ops.get(i) {
                let actual = agent_capabilities::sha256_hex(bytes);
                if actual != *hash {
                    return Err(StorageError::BlobHashMismatch {
                        claimed: hash.clone(),
                        actual,
                    });
                }
            }
        }
        Ok(())
    }
    /// True when the batch writes nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Who holds a session's lease, with which epoch, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub session: SessionId,
    pub owner: OwnerId,
    /// Increases by one each time a different owner (or the same owner after
    /// expiry or release) takes the lease. Writes carry it as their fence.
    pub epoch: u64,
    pub expires_at_ms: u64,
}

impl LeaseRecord {
    pub fn fence(&self) -> Fence {
        Fence {
            session: self.session.clone(),
            epoch: self.epoch,
        }
    }
    pub fn is_live(&self, now_ms: u64) -> bool {
        now_ms < self.expires_at_ms
    }

    /// The record of a lease row as the SQL backends store it (signed
    /// 64-bit columns; a negative value reads as 0). An owner column that is
    /// not an owner id is `Backend`, naming the row and `table` to fix.
    pub fn from_sql_row(
        session: &SessionId,
        owner: String,
        epoch: i64,
        expires_at_ms: i64,
        table: &str,
    ) -> Result<LeaseRecord, StorageError> {
        let owner = OwnerId::new(owner).map_err(|e| {
            StorageError::Backend(format!(
                "the lease row of session {session} names an invalid owner ({e}); delete that row from {table}"
            ))
        })?;
        Ok(LeaseRecord {
            session: session.clone(),
            owner,
            epoch: u64::try_from(epoch).unwrap_or(0),
            expires_at_ms: u64::try_from(expires_at_ms).unwrap_or(0),
        })
    }
}

/// A storage operation failed. Every variant says what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    #[error(
        "write refused: lease epoch {presented} for session {session} is stale (current: {current:?}); another tab or process owns this session now"
    )]
    StaleEpoch {
        session: SessionId,
        presented: u64,
        current: Option<u64>,
    },
    #[error("write refused: condition on {table:?} key {key:?} did not hold; reload and retry")]
    ConditionFailed { table: Table, key: String },
    #[error("blob refused: its bytes hash to {actual}, not the claimed {claimed}")]
    BlobHashMismatch { claimed: String, actual: String },
    #[error(
        "stored record in {table:?} at {key:?} is corrupt ({detail}); it was left untouched, repair or remove it"
    )]
    Corrupt {
        table: Table,
        key: String,
        detail: String,
    },
    #[error("could not encode a record for {table:?}: {detail}")]
    Encode { table: Table, detail: String },
    #[error("storage is unavailable: {0}")]
    Unavailable(String),
    #[error("storage backend error: {0}")]
    Backend(String),
}

/// Taking, renewing or releasing a lease failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    #[error(
        "session {session} is being executed by {owner} until {expires_at_ms} ms; wait or close it there"
    )]
    Held {
        session: SessionId,
        owner: OwnerId,
        expires_at_ms: u64,
    },
    #[error("lease on session {session} was lost (epoch {epoch} is no longer current)")]
    Lost { session: SessionId, epoch: u64 },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// The primitives a storage backend implements. Run the conformance suite
/// (`agent_kernel::conformance`, feature `conformance`) against every backend.
///
/// Leases: a backend implements two steps, [`Storage::current_lease`] (a
/// read) and [`Storage::lease_cas`] (one atomic compare-and-set); acquiring,
/// renewing and releasing are provided over them and the kernel's
/// [`lease_rules`], and a backend never implements or forwards them. A
/// wrapper around another storage forwards those two steps (and
/// [`Storage::lease_holder_gone`], [`Storage::current_leases`] and
/// [`Storage::lease_cas_all`] when the wrapped backend overrides them).
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait Storage: MaybeSend + MaybeSync {
    /// The value at `key`, if any.
    async fn get(&self, table: Table, key: &str) -> Result<Option<Vec<u8>>, StorageError>;
    /// Every entry whose key starts with `prefix`, ordered by key bytes.
    async fn scan_prefix(
        &self,
        table: Table,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError>;
    /// Apply a batch atomically: check the fence and the conditions, then all ops.
    async fn commit(&self, batch: Batch) -> Result<(), StorageError>;

    /// Store bytes under their SHA-256; refuse them if `hash` does not match.
    /// Storing the same bytes twice keeps one copy.
    async fn put_blob(&self, hash: &str, bytes: Vec<u8>) -> Result<BlobRef, StorageError>;
    async fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StorageError>;
    /// Remove a blob; true when it existed.
    async fn delete_blob(&self, hash: &str) -> Result<bool, StorageError>;
    /// Every stored blob hash, ordered.
    async fn list_blobs(&self) -> Result<Vec<String>, StorageError>;

    /// The current lease record, live or expired. With
    /// [`Storage::lease_cas`], the lease step a backend implements.
    async fn current_lease(&self, session: &SessionId)
    -> Result<Option<LeaseRecord>, StorageError>;

    /// The one atomic lease step (see [`lease_cas`](crate::host::lease_cas)):
    /// if the record stored for `new.session` is exactly `expected` (`None`:
    /// no record), store `new` and answer `Swapped`; otherwise change nothing
    /// and answer `Refused` with what is stored. Whole records are compared
    /// ([`crate::host::lease_cas::is_expected`]). The
    /// lease operations below are built on it and on
    /// [`Storage::current_lease`]; a backend does not implement them.
    async fn lease_cas(
        &self,
        expected: Option<&LeaseRecord>,
        new: &LeaseRecord,
    ) -> Result<LeaseCas, StorageError>;

    /// [`Storage::current_lease`] of each session, in order. A backend whose
    /// every call has a fixed cost (a thread hop, a round trip) overrides it
    /// to read them all at once; the heartbeat reads every held lease.
    async fn current_leases(
        &self,
        sessions: &[SessionId],
    ) -> Result<Vec<Option<LeaseRecord>>, StorageError> {
        let mut currents = Vec::with_capacity(sessions.len());
        for session in sessions {
            currents.push(self.current_lease(session).await?);
        }
        Ok(currents)
    }

    /// [`Storage::lease_cas`] of each swap, in order (a later swap of the
    /// same session sees the earlier one), one answer per swap. A backend
    /// whose writes are durable commits overrides it to make the lot one
    /// commit: a host's heartbeat renews every session it holds at once.
    async fn lease_cas_all(&self, swaps: &[LeaseSwap]) -> Result<Vec<LeaseCas>, StorageError> {
        let mut answers = Vec::with_capacity(swaps.len());
        for swap in swaps {
            answers.push(self.lease_cas(swap.expected.as_ref(), &swap.new).await?);
        }
        Ok(answers)
    }

    /// True when this backend's host knows that `holder` is gone (its process
    /// exited), so that its live-looking lease may be taken over at once
    /// ([`lease_rules::acquire_unless_gone`]). By default no holder is known
    /// gone: leases end at their expiry.
    fn lease_holder_gone(&self, holder: &OwnerId) -> bool {
        let _ = holder;
        false
    }

    /// Grant the lease to `owner` if it is free, expired, released, or
    /// already `owner`'s (then the epoch stays and the expiry extends), or
    /// held by a holder known gone; otherwise `LeaseError::Held`. A new
    /// holder gets epoch + 1. Provided: the rule of
    /// [`lease_rules::acquire_unless_gone`] through [`Storage::lease_cas`].
    async fn try_acquire_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<LeaseRecord, LeaseError> {
        lease_cas::update(self, session, |current| {
            lease_rules::acquire_unless_gone(current, session, owner, now_ms, ttl_ms, |holder| {
                self.lease_holder_gone(holder)
            })
        })
        .await
    }

    /// Extend a lease still held with `epoch`; `LeaseError::Lost` otherwise.
    /// Provided: [`lease_rules::renew`] through [`Storage::lease_cas`].
    async fn renew_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        epoch: u64,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<LeaseRecord, LeaseError> {
        lease_cas::update(self, session, |current| {
            lease_rules::renew(current, session, owner, epoch, now_ms, ttl_ms)
        })
        .await
    }

    /// Extend every lease in `held` (a session and the epoch `owner` holds
    /// it with) as [`Storage::renew_lease`] would, one answer per lease in
    /// order. Provided: two batched steps ([`Storage::current_leases`],
    /// [`Storage::lease_cas_all`]), see [`lease_cas::renew_all`].
    async fn renew_leases(
        &self,
        owner: &OwnerId,
        held: &[(SessionId, u64)],
        now_ms: u64,
        ttl_ms: u64,
    ) -> Vec<Result<LeaseRecord, LeaseError>> {
        lease_cas::renew_all(self, owner, held, now_ms, ttl_ms).await
    }

    /// Give the lease up (expire it now) if still held with `epoch`; the epoch
    /// is kept so the next holder gets a higher one. Provided:
    /// [`lease_rules::release`] through [`Storage::lease_cas`].
    async fn release_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        epoch: u64,
    ) -> Result<(), LeaseError> {
        lease_cas::update(self, session, |current| {
            lease_rules::release(current, session, owner, epoch)
        })
        .await
        .map(|_| ())
    }
}

/// A typed record stored as JSON in one table under its own key.
pub trait Record: Serialize + DeserializeOwned {
    const TABLE: Table;
    fn key(&self) -> String;
}

/// Typed reads over any `Storage`. A record that does not decode is
/// `StorageError::Corrupt`, never a panic and never silently skipped.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait StorageExt {
    async fn get_record<R: Record>(&self, key: &str) -> Result<Option<R>, StorageError>;
    async fn scan_records<R: Record>(&self, prefix: &str) -> Result<Vec<R>, StorageError>;
}

fn decode<R: Record>(key: &str, bytes: &[u8]) -> Result<R, StorageError> {
    serde_json::from_slice(bytes).map_err(|e| StorageError::Corrupt {
        table: R::TABLE,
        key: key.to_owned(),
        detail: e.to_string(),
    })
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl<S: Storage + ?Sized> StorageExt for S {
    async fn get_record<R: Record>(&self, key: &str) -> Result<Option<R>, StorageError> {
        match self.get(R::TABLE, key).await? {
            Some(bytes) => decode(key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    async fn scan_records<R: Record>(&self, prefix: &str) -> Result<Vec<R>, StorageError> {
        self.scan_prefix(R::TABLE, prefix)
            .await?
            .iter()
            .map(|(k, v)| decode(k, v))
            .collect()
    }
}
