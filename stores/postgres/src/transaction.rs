//! One serializable transaction of [`PostgresStorage`](crate::PostgresStorage):
//! what it does ([`Work`]: a batch, or the lease compare-and-set), the SQL it
//! sends, the fence and conditions of a batch checked and its writes applied
//! in one pipelined round trip. The retry loop around it, taken again on a
//! serialization conflict, is `PostgresStorage::serializable`; why the fence
//! reads `FOR SHARE` is "Fencing in commit order" in [`crate::storage`].

use agent_kernel::SessionId;
use agent_kernel::host::lease_cas;
use agent_kernel::host::{Batch, LeaseCas, LeaseRecord, Op, StorageError};

use crate::errors::{Failure, classify};

pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The record of an `agentrt_leases` row (owner, epoch, expiry).
pub(crate) fn lease_from_row(
    session: &SessionId,
    row: &tokio_postgres::Row,
) -> Result<Result<LeaseRecord, StorageError>, tokio_postgres::Error> {
    Ok(LeaseRecord::from_sql_row(
        session,
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        "agentrt_leases",
    ))
}

pub(crate) const SELECT_LEASE: &str =
    "SELECT owner, epoch, expires_at_ms FROM agentrt_leases WHERE session = $1";
pub(crate) const UPSERT_LEASE: &str =
    "INSERT INTO agentrt_leases (session, owner, epoch, expires_at_ms)
     VALUES ($1, $2, $3, $4)
     ON CONFLICT (session) DO UPDATE SET owner = EXCLUDED.owner,
       epoch = EXCLUDED.epoch, expires_at_ms = EXCLUDED.expires_at_ms";
/// The fence's read of the session's epoch, `FOR SHARE`: see "Fencing in
/// commit order" in [`crate::storage`].
pub(crate) const SELECT_EPOCH: &str =
    "SELECT epoch FROM agentrt_leases WHERE session = $1 FOR SHARE";
pub(crate) const SELECT_VALUE: &str = "SELECT value FROM agentrt_kv WHERE tbl = $1 AND key = $2";
pub(crate) const UPSERT_VALUE: &str = "INSERT INTO agentrt_kv (tbl, key, value) VALUES ($1, $2, $3)
     ON CONFLICT (tbl, key) DO UPDATE SET value = EXCLUDED.value";
pub(crate) const DELETE_VALUE: &str = "DELETE FROM agentrt_kv WHERE tbl = $1 AND key = $2";
pub(crate) const INSERT_BLOB: &str =
    "INSERT INTO agentrt_blobs (hash, size, bytes) VALUES ($1, $2, $3)
     ON CONFLICT (hash) DO NOTHING";
/// What one serializable transaction does; taken again whole on a conflict.
pub(crate) enum Work<'a> {
    Batch(&'a Batch),
    Lease {
        expected: Option<&'a LeaseRecord>,
        new: &'a LeaseRecord,
    },
}

/// What a transaction of [`Work`] produced.
pub(crate) enum Done {
    Committed,
    /// The compare-and-set's answer: a refusal wrote nothing.
    Lease(LeaseCas),
}

impl Work<'_> {
    pub(crate) fn what(&self) -> &'static str {
        match self {
            Work::Batch(_) => "a batch",
            Work::Lease { .. } => "a lease step",
        }
    }

    pub(crate) async fn run(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        target: &str,
    ) -> Result<Done, Failure> {
        match self {
            Work::Batch(batch) => check_and_apply(tx, batch, target)
                .await
                .map(|()| Done::Committed),
            Work::Lease { expected, new } => lease_step(tx, *expected, new, target)
                .await
                .map(Done::Lease),
        }
    }
}

/// Store `new` if the session's row is exactly `expected` (absent for
/// `None`), in the caller's serializable transaction: read the row, compare,
/// then write it. The write of the row waits for every batch in flight
/// that holds it through its fence's `FOR SHARE` read, so a batch with the
/// old epoch either commits before the new record or is taken again and
/// refused as stale ("Fencing in commit order" in [`crate::storage`]);
/// serializable isolation alone would not order their commits.
pub(crate) async fn lease_step(
    tx: &deadpool_postgres::Transaction<'_>,
    expected: Option<&LeaseRecord>,
    new: &LeaseRecord,
    target: &str,
) -> Result<LeaseCas, Failure> {
    let db = |e: tokio_postgres::Error| classify(target, &e, false);
    let session = new.session.as_str();
    let select = tx.prepare_cached(SELECT_LEASE).await.map_err(db)?;
    let current = match tx.query_opt(&select, &[&session]).await.map_err(db)? {
        None => None,
        Some(row) => Some(lease_from_row(&new.session, &row).map_err(db)??),
    };
    if !lease_cas::is_expected(expected, current.as_ref()) {
        return Ok(LeaseCas::Refused { current });
    }
    let upsert = tx.prepare_cached(UPSERT_LEASE).await.map_err(db)?;
    tx.execute(
        &upsert,
        &[
            &session,
            &new.owner.as_str(),
            &to_i64(new.epoch),
            &to_i64(new.expires_at_ms),
        ],
    )
    .await
    .map_err(db)?;
    Ok(LeaseCas::Swapped)
}

/// What one pipelined statement answered.
pub(crate) enum Reply {
    Row(Option<tokio_postgres::Row>),
    Count,
}

pub(crate) type Pending<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Reply, tokio_postgres::Error>> + Send + 'a>,
>;

/// Send every statement of `pending` before waiting for any answer, in
/// order, and collect the answers in the same order. tokio-postgres sends a
/// request when its future is first polled, so one in-order pass of polls
/// puts them all on the wire back to back (pipelining): one round trip for
/// the lot instead of one each. The server runs them in that order.
pub(crate) async fn pipelined(
    mut pending: Vec<Pending<'_>>,
) -> Vec<Result<Reply, tokio_postgres::Error>> {
    use std::task::Poll;
    let mut done: Vec<Option<Result<Reply, tokio_postgres::Error>>> =
        pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (future, out) in pending.iter_mut().zip(done.iter_mut()) {
            if let Poll::Ready(reply) = future.as_mut().poll(cx) {
                *out = Some(reply);
            }
        }
        Poll::Ready(())
    })
    .await;
    let mut replies = Vec::with_capacity(pending.len());
    for (future, out) in pending.into_iter().zip(done) {
        replies.push(match out {
            Some(reply) => reply,
            None => future.await,
        });
    }
    replies
}

/// Check the batch's fence and conditions and apply its ops, inside `tx`:
/// the reads and the writes go to the server in one pipelined round trip
/// (reads first, so they see the state before the batch); a refusal then
/// returns an error, which drops `tx` and so rolls the writes back.
pub(crate) async fn check_and_apply(
    tx: &deadpool_postgres::Transaction<'_>,
    batch: &Batch,
    target: &str,
) -> Result<(), Failure> {
    let db = |e: tokio_postgres::Error| classify(target, &e, false);
    // Every statement is prepared first (cached per connection after its
    // first use), so that sending them below needs no round trip of its own.
    let prepare = |sql: &'static str, needed: bool| async move {
        match needed {
            true => tx.prepare_cached(sql).await.map(Some),
            false => Ok(None),
        }
    };
    let ops = batch.ops();
    let fence_st = prepare(SELECT_EPOCH, batch.fence.is_some())
        .await
        .map_err(db)?;
    let value_st = prepare(SELECT_VALUE, !batch.conditions.is_empty())
        .await
        .map_err(db)?;
    let put_st = prepare(
        UPSERT_VALUE,
        ops.iter().any(|op| matches!(op, Op::Put { .. })),
    )
    .await
    .map_err(db)?;
    let delete_st = prepare(
        DELETE_VALUE,
        ops.iter().any(|op| matches!(op, Op::Delete { .. })),
    )
    .await
    .map_err(db)?;
    let blob_st = prepare(
        INSERT_BLOB,
        ops.iter().any(|op| matches!(op, Op::PutBlob { .. })),
    )
    .await
    .map_err(db)?;

    let mut pending: Vec<Pending<'_>> = Vec::with_capacity(1 + batch.conditions.len() + ops.len());
    if let (Some(fence), Some(st)) = (&batch.fence, &fence_st) {
        pending.push(Box::pin(async move {
            let session = fence.session.as_str();
            tx.query_opt(st, &[&session]).await.map(Reply::Row)
        }));
    }
    if let Some(st) = &value_st {
        for condition in &batch.conditions {
            pending.push(Box::pin(async move {
                let (table, key) = condition.target();
                let (table, key) = (table.as_str(), key.as_bytes());
                tx.query_opt(st, &[&table, &key]).await.map(Reply::Row)
            }));
        }
    }
    for op in ops {
        let (put_st, delete_st, blob_st) = (&put_st, &delete_st, &blob_st);
        pending.push(Box::pin(async move {
            match (op, put_st, delete_st, blob_st) {
                (Op::Put { table, key, value }, Some(st), _, _) => {
                    let (table, key) = (table.as_str(), key.as_bytes());
                    tx.execute(st, &[&table, &key, value]).await?;
                }
                (Op::Delete { table, key }, _, Some(st), _) => {
                    let (table, key) = (table.as_str(), key.as_bytes());
                    tx.execute(st, &[&table, &key]).await?;
                }
                (Op::PutBlob { hash, bytes }, _, _, Some(st)) => {
                    let size = to_i64(bytes.len() as u64);
                    tx.execute(st, &[hash, &size, bytes]).await?;
                }
                // Each kind's statement was prepared above when an op needed it.
                _ => {}
            }
            Ok(Reply::Count)
        }));
    }
    let mut replies = pipelined(pending).await.into_iter();
    let mut next_row = || -> Result<Option<tokio_postgres::Row>, Failure> {
        match replies.next() {
            Some(Ok(Reply::Row(row))) => Ok(row),
            Some(Err(e)) => Err(db(e)),
            Some(Ok(Reply::Count)) | None => Err(Failure::Final(StorageError::Backend(
                "a pipelined read had no answer (a bug in agent-store-postgres); nothing was written".to_owned(),
            ))),
        }
    };
    if let Some(fence) = &batch.fence {
        let current: Option<i64> = next_row()?
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(db)?;
        fence.check(current.map(to_u64))?;
    }
    for condition in &batch.conditions {
        let value: Option<Vec<u8>> = next_row()?
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(db)?;
        condition.check(value.as_deref())?;
    }
    for reply in replies {
        reply.map_err(db)?;
    }
    Ok(())
}
