//! The lease rules of `Storage` (S3), owned here once, as pure functions over
//! the current record: who may take a lease (free, expired, released, or
//! already one's own), when the epoch increments (each new tenure), how
//! renewal and release check owner, epoch and expiry, and the take-over of a
//! live lease by the holder of a host's session lock.
//!
//! Backends do not call them: every backend implements one atomic
//! compare-and-set of a lease record (`Storage::lease_cas`), and the
//! kernel's provided lease methods (`crate::host::lease_cas`) read the
//! record, apply a rule here, and compare-and-set the result. The model
//! checker (`model-check`) steps through the same rules.

use crate::host::storage::{LeaseError, LeaseRecord};
use crate::ids::{OwnerId, SessionId};

/// The record after `owner` tries to take the lease at `now_ms`, or `Held`.
/// Free, expired or released: a new tenure with epoch + 1 (1 for a first
/// lease). Still live and the same owner: the epoch stays, the expiry extends.
pub fn acquire(
    current: Option<&LeaseRecord>,
    session: &SessionId,
    owner: &OwnerId,
    now_ms: u64,
    ttl_ms: u64,
) -> Result<LeaseRecord, LeaseError> {
    let expires_at_ms = now_ms.saturating_add(ttl_ms);
    match current {
        Some(cur) if cur.is_live(now_ms) && &cur.owner != owner => Err(LeaseError::Held {
            session: session.clone(),
            owner: cur.owner.clone(),
            expires_at_ms: cur.expires_at_ms,
        }),
        Some(cur) if cur.is_live(now_ms) => Ok(LeaseRecord {
            expires_at_ms: expires_at_ms.max(cur.expires_at_ms),
            ..cur.clone()
        }),
        Some(cur) => Ok(LeaseRecord {
            session: session.clone(),
            owner: owner.clone(),
            epoch: cur.epoch.saturating_add(1),
            expires_at_ms,
        }),
        None => Ok(LeaseRecord {
            session: session.clone(),
            owner: owner.clone(),
            epoch: 1,
            expires_at_ms,
        }),
    }
}

/// [`acquire`], except that a live holder `gone` says has gone (its process
/// exited) is taken over at once ([`take_over`]): the host's knowledge of its own
/// processes shortens the wait, never the fence.
pub fn acquire_unless_gone(
    current: Option<&LeaseRecord>,
    session: &SessionId,
    owner: &OwnerId,
    now_ms: u64,
    ttl_ms: u64,
    gone: impl Fn(&OwnerId) -> bool,
) -> Result<LeaseRecord, LeaseError> {
    match acquire(current, session, owner, now_ms, ttl_ms) {
        Err(LeaseError::Held { owner: holder, .. }) if gone(&holder) => {
            Ok(take_over(current, session, owner, now_ms, ttl_ms))
        }
        outcome => outcome,
    }
}

/// The record after `owner` takes the lease over although another owner's
/// may still look live, because the host knows that holder is gone: the
/// browser's tab lock (Web Locks release a closed tab's lock at once) or a
/// native holder whose process has exited. A live lease of another owner is
/// treated as expired, so the new tenure gets epoch + 1 and the old holder's
/// writes are refused by the fence.
pub fn take_over(
    current: Option<&LeaseRecord>,
    session: &SessionId,
    owner: &OwnerId,
    now_ms: u64,
    ttl_ms: u64,
) -> LeaseRecord {
    match current {
        Some(cur) if &cur.owner != owner && cur.is_live(now_ms) => LeaseRecord {
            session: session.clone(),
            owner: owner.clone(),
            epoch: cur.epoch.saturating_add(1),
            expires_at_ms: now_ms.saturating_add(ttl_ms),
        },
        _ => match acquire(current, session, owner, now_ms, ttl_ms) {
            Ok(record) => record,
            // Unreachable by the guard above (only a live other owner is
            // `Held`); a fresh tenure is the safe answer anyway.
            Err(_) => LeaseRecord {
                session: session.clone(),
                owner: owner.clone(),
                epoch: current.map_or(1, |c| c.epoch.saturating_add(1)),
                expires_at_ms: now_ms.saturating_add(ttl_ms),
            },
        },
    }
}

/// The record after renewing a lease still held by `owner` with `epoch`.
pub fn renew(
    current: Option<&LeaseRecord>,
    session: &SessionId,
    owner: &OwnerId,
    epoch: u64,
    now_ms: u64,
    ttl_ms: u64,
) -> Result<LeaseRecord, LeaseError> {
    match current {
        Some(cur) if &cur.owner == owner && cur.epoch == epoch && cur.is_live(now_ms) => {
            Ok(LeaseRecord {
                expires_at_ms: now_ms.saturating_add(ttl_ms).max(cur.expires_at_ms),
                ..cur.clone()
            })
        }
        _ => Err(LeaseError::Lost {
            session: session.clone(),
            epoch,
        }),
    }
}

/// The record after `owner` gives the lease up: expired now, epoch kept.
pub fn release(
    current: Option<&LeaseRecord>,
    session: &SessionId,
    owner: &OwnerId,
    epoch: u64,
) -> Result<LeaseRecord, LeaseError> {
    match current {
        Some(cur) if &cur.owner == owner && cur.epoch == epoch => Ok(LeaseRecord {
            expires_at_ms: 0,
            ..cur.clone()
        }),
        _ => Err(LeaseError::Lost {
            session: session.clone(),
            epoch,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid() -> SessionId {
        SessionId::new("s").expect("valid")
    }
    fn owner(s: &str) -> OwnerId {
        OwnerId::new(s).expect("valid")
    }

    #[test]
    fn s3_first_lease_has_epoch_one_and_expiry() {
        let rec = acquire(None, &sid(), &owner("a"), 100, 50).expect("free");
        assert_eq!((rec.epoch, rec.expires_at_ms), (1, 150));
    }

    #[test]
    fn s3_live_other_owner_is_held_until_expiry_then_epoch_plus_one() {
        let a = acquire(None, &sid(), &owner("a"), 100, 50).expect("free");
        for now in [100, 149] {
            let err = acquire(Some(&a), &sid(), &owner("b"), now, 50).expect_err("held");
            assert!(
                matches!(err, LeaseError::Held { ref owner, expires_at_ms: 150, .. } if owner.as_str() == "a")
            );
        }
        let b = acquire(Some(&a), &sid(), &owner("b"), 150, 50).expect("expired");
        assert_eq!((b.epoch, b.owner.as_str()), (2, "b"));
    }

    #[test]
    fn s3_same_owner_keeps_epoch_and_release_expires_now() {
        let a = acquire(None, &sid(), &owner("a"), 100, 50).expect("free");
        let again = acquire(Some(&a), &sid(), &owner("a"), 120, 50).expect("same owner");
        assert_eq!((again.epoch, again.expires_at_ms), (1, 170));
        let released = release(Some(&again), &sid(), &owner("a"), 1).expect("release");
        assert!(!released.is_live(121));
        assert_eq!(released.epoch, 1);
        assert!(release(Some(&again), &sid(), &owner("b"), 1).is_err());
        assert!(renew(Some(&released), &sid(), &owner("a"), 1, 121, 50).is_err());
        let renewed = renew(Some(&again), &sid(), &owner("a"), 1, 169, 50).expect("live");
        assert_eq!(renewed.expires_at_ms, 219);
        assert!(
            renew(Some(&again), &sid(), &owner("a"), 1, 170, 50).is_err(),
            "at expiry"
        );
    }

    #[test]
    fn s3_a_gone_holder_is_taken_over_a_live_one_is_held() {
        let a = acquire(None, &sid(), &owner("a"), 100, 50).expect("free");
        let held = acquire_unless_gone(Some(&a), &sid(), &owner("b"), 110, 50, |_| false)
            .expect_err("a lives");
        assert!(matches!(held, LeaseError::Held { .. }), "{held:?}");
        let b = acquire_unless_gone(Some(&a), &sid(), &owner("b"), 110, 50, |o| {
            o.as_str() == "a"
        })
        .expect("a is gone");
        assert_eq!((b.epoch, b.owner.as_str(), b.expires_at_ms), (2, "b", 160));
        let own = acquire_unless_gone(Some(&a), &sid(), &owner("a"), 110, 50, |_| true)
            .expect("own lease");
        assert_eq!(own.epoch, 1, "one's own lease is never taken over");
    }

    #[test]
    fn s3_3_take_over_a_live_other_owner_bumps_the_epoch() {
        let a = acquire(None, &sid(), &owner("a"), 100, 50).expect("free");
        let b = take_over(Some(&a), &sid(), &owner("b"), 110, 50);
        assert_eq!((b.epoch, b.owner.as_str(), b.expires_at_ms), (2, "b", 160));
        let same = take_over(Some(&b), &sid(), &owner("b"), 120, 50);
        assert_eq!(
            (same.epoch, same.expires_at_ms),
            (2, 170),
            "own lease: epoch kept"
        );
        let first = take_over(None, &sid(), &owner("c"), 0, 50);
        assert_eq!(first.epoch, 1);
    }
}
