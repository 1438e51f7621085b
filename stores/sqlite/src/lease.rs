//! This backend's lease steps: the compare-and-set as one conditional
//! upsert, many of them in one transaction (a heartbeat's renewals in one
//! commit), the lease row read and decoded, and who decides whether a
//! holder is gone ([`Liveness`]). The lease rules themselves are the
//! kernel's (`agent_kernel::host::lease_cas`): nothing here applies them.

use std::path::Path;
use std::sync::Arc;

use agent_kernel::host::{LeaseCas, LeaseRecord, LeaseSwap, StorageError};
use agent_kernel::{OwnerId, SessionId};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::storage::{backend, to_i64};

/// What the host knows about a lease holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// It still runs (or it is inside this process).
    Alive,
    /// It no longer runs: its lease can be taken over now.
    Dead,
    /// It cannot be known (another machine, boot or PID namespace, or not a
    /// process at all): its lease ends at its expiry.
    Unknown,
}

/// Decides whether a lease owner is still alive; the host supplies it (a native host
/// judges process owners through `/proc`); [`Liveness::Dead`] lets a
/// holder's live-looking lease be taken over at once.
pub type LivenessCheck = Arc<dyn Fn(&OwnerId) -> Liveness + Send + Sync>;

/// The one atomic lease step of this backend, inside the caller's
/// transaction: a conditional upsert (insert only if absent when nothing is
/// expected; update only the row that is exactly the expected record
/// otherwise), and on a refusal the row as it is.
fn lease_cas_in(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    expected: Option<&LeaseRecord>,
    new: &LeaseRecord,
) -> Result<LeaseCas, StorageError> {
    let db = |e: rusqlite::Error| backend(path, &e);
    let changed = match expected {
        None => tx
            .prepare_cached(
                "INSERT INTO leases (session, owner, epoch, expires_at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (session) DO NOTHING",
            )
            .map_err(db)?
            .execute(params![
                new.session.as_str(),
                new.owner.as_str(),
                to_i64(new.epoch),
                to_i64(new.expires_at_ms)
            ])
            .map_err(db)?,
        Some(expected) => tx
            .prepare_cached(
                "UPDATE leases SET owner = ?2, epoch = ?3, expires_at_ms = ?4
                 WHERE session = ?1 AND owner = ?5 AND epoch = ?6 AND expires_at_ms = ?7",
            )
            .map_err(db)?
            .execute(params![
                new.session.as_str(),
                new.owner.as_str(),
                to_i64(new.epoch),
                to_i64(new.expires_at_ms),
                expected.owner.as_str(),
                to_i64(expected.epoch),
                to_i64(expected.expires_at_ms)
            ])
            .map_err(db)?,
    };
    if changed == 1 {
        return Ok(LeaseCas::Swapped);
    }
    let current = read_lease(tx, &new.session)
        .map_err(db)?
        .map(|row| lease_from_row(&new.session, row))
        .transpose()?;
    Ok(LeaseCas::Refused { current })
}

/// Every swap of `swaps` in one `BEGIN IMMEDIATE` transaction, one commit
/// for all of them (a heartbeat's renewals).
pub(crate) fn lease_cas_in_one_commit(
    conn: &mut Connection,
    path: &Path,
    swaps: &[LeaseSwap],
) -> Result<Vec<LeaseCas>, StorageError> {
    let db = |e: rusqlite::Error| backend(path, &e);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db)?;
    let answers = swaps
        .iter()
        .map(|swap| lease_cas_in(&tx, path, swap.expected.as_ref(), &swap.new))
        .collect::<Result<Vec<_>, _>>()?;
    if answers.contains(&LeaseCas::Swapped) {
        tx.commit().map_err(db)?;
    }
    Ok(answers)
}

pub(crate) fn read_lease(
    conn: &Connection,
    session: &SessionId,
) -> rusqlite::Result<Option<(String, i64, i64)>> {
    conn.prepare_cached("SELECT owner, epoch, expires_at_ms FROM leases WHERE session = ?1")?
        .query_row([session.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()
}

/// The record of a `leases` row.
pub(crate) fn lease_from_row(
    session: &SessionId,
    (owner, epoch, expires): (String, i64, i64),
) -> Result<LeaseRecord, StorageError> {
    LeaseRecord::from_sql_row(session, owner, epoch, expires, "the leases table")
}

#[cfg(test)]
mod tests {
    use agent_kernel::host::Storage;

    use super::*;
    use crate::SqliteStorage;

    /// A heartbeat's renewal of many sessions is one commit: the WAL on
    /// disk grows by the leases table's few pages, not by a frame per
    /// session, as it did when each lease was renewed on its own.
    #[tokio::test]
    async fn renewing_many_leases_writes_one_commit_to_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentrt.sqlite3");
        let storage =
            SqliteStorage::open_inline(&path, Arc::new(|_: &OwnerId| Liveness::Unknown)).unwrap();
        let owner = OwnerId::new("process-a").unwrap();
        let ttl = 30_000;
        let mut held = Vec::new();
        for i in 0..200 {
            let session = SessionId::new(format!("session-{i:03}")).unwrap();
            let lease = storage
                .try_acquire_lease(&session, &owner, 1_000, ttl)
                .await
                .unwrap();
            held.push((session, lease.epoch));
        }
        let wal = format!("{}-wal", path.display());
        let before = std::fs::metadata(&wal).unwrap().len();
        let renewed = storage.renew_leases(&owner, &held, 2_000, ttl).await;
        assert_eq!(renewed.len(), 200);
        for answer in &renewed {
            assert_eq!(answer.as_ref().unwrap().expires_at_ms, 2_000 + ttl);
        }
        let grown = std::fs::metadata(&wal).unwrap().len() - before;
        let frame = 4096 + 24;
        assert!(
            grown <= 8 * frame,
            "renewing 200 leases wrote {grown} bytes of WAL ({} frames)",
            grown / frame
        );
        assert!(grown > 0, "the renewal reached the disk");
    }
}
