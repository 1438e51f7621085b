//! The one atomic lease step every storage backend implements, and the
//! shared code that turns the kernel's lease rules into lease operations
//! with it.
//!
//! A backend implements [`Storage::lease_cas`]:
//! "if the session's stored record is exactly `expected` (or absent, for
//! `None`), store `new`; otherwise change nothing and say what is stored".
//! That is one conditional upsert in a `BEGIN IMMEDIATE` transaction in
//! SQLite, one readwrite transaction in IndexedDB, one serializable
//! transaction that reads, compares and upserts the row in PostgreSQL (the
//! upsert waits for every batch in flight that read the row `FOR SHARE` as
//! its fence), one lock in memory. Whole records are compared,
//! not epochs alone: a release keeps the epoch and moves the expiry, so a
//! renewal that compared epochs only could revive a released lease.
//!
//! Acquiring, renewing and releasing are then the same loop ([`settle`]):
//! read the record, apply the rule of [`lease_rules`]
//! to it, compare-and-set the result; when another writer changed the
//! record in between, apply the rule again to what it wrote. Every refused
//! swap means another writer's swap succeeded, so the loop always makes
//! progress, and a rule that refuses (`Held`, `Lost`) ends it.
//!
//! A host's heartbeat renews all its sessions at once: [`renew_all`] reads
//! them with [`Storage::current_leases`]
//! and swaps them with [`Storage::lease_cas_all`],
//! two batched steps that a backend whose commits are durable overrides to
//! make one transaction each (SQLite: one commit for 10,001 leases instead of
//! 10,001); only a lease changed in between is settled on its own.

use crate::host::lease_rules;
use crate::host::storage::{LeaseError, LeaseRecord, Storage, StorageError};
use crate::ids::{OwnerId, SessionId};

/// What a compare-and-set of a lease record did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseCas {
    /// The stored record was the expected one; the new one is stored.
    Swapped,
    /// The stored record was not the expected one; nothing changed.
    /// `current` is what is stored (`None`: no record).
    Refused { current: Option<LeaseRecord> },
}

/// One compare-and-set of a batch ([`Storage::lease_cas_all`]): store `new`
/// under `new.session` if the stored record is exactly `expected`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSwap {
    pub expected: Option<LeaseRecord>,
    pub new: LeaseRecord,
}

/// The compare of every backend's compare-and-set: does the `stored` record
/// of `new.session` (if any) match `expected`?
pub fn is_expected(expected: Option<&LeaseRecord>, stored: Option<&LeaseRecord>) -> bool {
    expected == stored
}

/// Apply `rule` to the session's record and compare-and-set what it grants,
/// starting from `current` (what the caller read), until a swap lands or the
/// rule refuses. Returns the record stored.
pub async fn settle<S, R>(
    storage: &S,
    mut current: Option<LeaseRecord>,
    rule: R,
) -> Result<LeaseRecord, LeaseError>
where
    S: Storage + ?Sized,
    R: Fn(Option<&LeaseRecord>) -> Result<LeaseRecord, LeaseError>,
{
    loop {
        let next = rule(current.as_ref())?;
        match storage.lease_cas(current.as_ref(), &next).await? {
            LeaseCas::Swapped => return Ok(next),
            LeaseCas::Refused { current: stored } => {
                refused_by_a_change(&current, &stored, &next)?;
                current = stored;
            }
        }
    }
}

/// A refusal must mean the record changed; a backend that refuses the very
/// record it was told to expect would make [`settle`] loop forever.
fn refused_by_a_change(
    expected: &Option<LeaseRecord>,
    stored: &Option<LeaseRecord>,
    new: &LeaseRecord,
) -> Result<(), StorageError> {
    if is_expected(expected.as_ref(), stored.as_ref()) {
        return Err(StorageError::Backend(format!(
            "the lease compare-and-set of session {} was refused although the stored record is the expected one (a bug in the storage backend); nothing was changed",
            new.session
        )));
    }
    Ok(())
}

/// Read the session's record and [`settle`] `rule` on it.
pub async fn update<S, R>(
    storage: &S,
    session: &SessionId,
    rule: R,
) -> Result<LeaseRecord, LeaseError>
where
    S: Storage + ?Sized,
    R: Fn(Option<&LeaseRecord>) -> Result<LeaseRecord, LeaseError>,
{
    let current = storage.current_lease(session).await?;
    settle(storage, current, rule).await
}

/// Take the lease over from a live other owner (epoch + 1): only for a
/// holder that knows the other is gone (see [`lease_rules::take_over`]).
pub async fn take_over<S: Storage + ?Sized>(
    storage: &S,
    session: &SessionId,
    owner: &OwnerId,
    now_ms: u64,
    ttl_ms: u64,
) -> Result<LeaseRecord, LeaseError> {
    update(storage, session, |current| {
        Ok(lease_rules::take_over(
            current, session, owner, now_ms, ttl_ms,
        ))
    })
    .await
}

/// Renew every lease of `held` (a session and the epoch `owner` holds it
/// with), one answer per lease in order, in two batched steps (read all,
/// swap all); a lease another writer changed in between is settled alone.
/// A storage failure of a batched step is every lease's answer: nothing was
/// swapped by it.
pub async fn renew_all<S: Storage + ?Sized>(
    storage: &S,
    owner: &OwnerId,
    held: &[(SessionId, u64)],
    now_ms: u64,
    ttl_ms: u64,
) -> Vec<Result<LeaseRecord, LeaseError>> {
    if held.is_empty() {
        return Vec::new();
    }
    let fail_all = |e: StorageError| held.iter().map(|_| Err(e.clone().into())).collect();
    let sessions: Vec<SessionId> = held.iter().map(|(s, _)| s.clone()).collect();
    let currents = match storage.current_leases(&sessions).await {
        Ok(currents) if currents.len() == held.len() => currents,
        Ok(other) => return fail_all(answer_count_error("current_leases", held, other.len())),
        Err(e) => return fail_all(e),
    };
    let decided: Vec<(Option<LeaseRecord>, Result<LeaseRecord, LeaseError>)> = held
        .iter()
        .zip(currents)
        .map(|((session, epoch), current)| {
            let outcome =
                lease_rules::renew(current.as_ref(), session, owner, *epoch, now_ms, ttl_ms);
            (current, outcome)
        })
        .collect();
    let swaps: Vec<LeaseSwap> = decided
        .iter()
        .filter_map(|(current, outcome)| {
            outcome.as_ref().ok().map(|new| LeaseSwap {
                expected: current.clone(),
                new: new.clone(),
            })
        })
        .collect();
    let swapped = match storage.lease_cas_all(&swaps).await {
        Ok(swapped) if swapped.len() == swaps.len() => swapped,
        Ok(other) => return fail_all(answer_count_error("lease_cas_all", held, other.len())),
        Err(e) => return fail_all(e),
    };
    let mut swapped = swapped.into_iter();
    let mut answers = Vec::with_capacity(held.len());
    for ((session, epoch), (_, outcome)) in held.iter().zip(decided) {
        let Ok(new) = outcome else {
            answers.push(outcome);
            continue;
        };
        let answer = match swapped.next() {
            Some(LeaseCas::Swapped) => Ok(new),
            Some(LeaseCas::Refused { current }) => {
                settle(storage, current, |current| {
                    lease_rules::renew(current, session, owner, *epoch, now_ms, ttl_ms)
                })
                .await
            }
            // Unreachable: the count was checked above.
            None => Err(answer_count_error("lease_cas_all", held, 0).into()),
        };
        answers.push(answer);
    }
    answers
}

fn answer_count_error(step: &str, held: &[(SessionId, u64)], got: usize) -> StorageError {
    StorageError::Backend(format!(
        "the storage backend's {step} answered {got} times for {} leases (a bug in the backend)",
        held.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(epoch: u64, expires_at_ms: u64) -> LeaseRecord {
        LeaseRecord {
            session: SessionId::new("s").expect("valid"),
            owner: OwnerId::new("a").expect("valid"),
            epoch,
            expires_at_ms,
        }
    }

    #[test]
    fn whole_records_are_compared_not_epochs() {
        let live = record(1, 100);
        let released = record(1, 0);
        assert!(is_expected(Some(&live), Some(&live)));
        assert!(is_expected(None, None));
        assert!(
            !is_expected(Some(&live), Some(&released)),
            "same epoch, released"
        );
        assert!(!is_expected(None, Some(&live)));
        assert!(!is_expected(Some(&live), None));
    }

    #[test]
    fn a_refusal_of_the_expected_record_is_a_backend_error() {
        let live = record(1, 100);
        let err = refused_by_a_change(&Some(live.clone()), &Some(live.clone()), &live)
            .expect_err("no change");
        assert!(matches!(err, StorageError::Backend(_)), "{err:?}");
        refused_by_a_change(&None, &Some(live.clone()), &live).expect("a change");
    }
}
