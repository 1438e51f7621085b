//! Conformance cases for fencing and leases: a stale writer is refused after
//! a take-over, the lease steps (acquire, renew, release, the one atomic
//! compare-and-set and its batched form) at and around their boundaries.

use std::sync::Arc;

use crate::host::lease_cas::{LeaseCas, LeaseSwap};
use crate::host::storage::{Batch, Fence, LeaseError, LeaseRecord, Storage, StorageError, Table};

use super::{T0, TTL, dump, owner, sid};

/// After another owner takes an expired lease, the old holder's writes are
/// refused with `StaleEpoch` and change nothing; the new holder writes.
pub async fn fence_refuses_a_stale_writer_after_takeover(storage: Arc<dyn Storage>) {
    let s = sid("session-fence");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("a acquires");
    assert_eq!(a.epoch, 1, "the first holder of a session gets epoch 1");
    assert_eq!(a.owner, owner("tab-a"));
    assert_eq!(a.expires_at_ms, T0 + TTL);
    assert!(a.is_live(T0));
    storage
        .commit(
            Batch::new()
                .fenced(a.fence())
                .put(Table::Runs, "r", b"a1".to_vec()),
        )
        .await
        .expect("a writes");
    // Tab A stalls past its expiry; tab B takes over.
    let b = storage
        .try_acquire_lease(&s, &owner("tab-b"), T0 + TTL, TTL)
        .await
        .expect("b takes the expired lease");
    assert_eq!(b.epoch, a.epoch + 1);
    assert_eq!(b.owner, owner("tab-b"));
    assert_eq!(
        storage.current_lease(&s).await.expect("current"),
        Some(b.clone())
    );
    let before = dump(storage.as_ref()).await;
    let err = storage
        .commit(
            Batch::new()
                .fenced(a.fence())
                .put(Table::Runs, "r", b"a2".to_vec())
                .put(Table::Journal, "r/c", b"a2".to_vec()),
        )
        .await
        .expect_err("a is fenced off");
    assert_eq!(
        err,
        StorageError::StaleEpoch {
            session: s.clone(),
            presented: a.epoch,
            current: Some(b.epoch),
        }
    );
    assert_eq!(
        dump(storage.as_ref()).await,
        before,
        "the stale write changed nothing"
    );
    // A cannot renew or release B's lease either.
    let err = storage
        .renew_lease(&s, &owner("tab-a"), a.epoch, T0 + TTL, TTL)
        .await
        .expect_err("a lost its lease");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    let err = storage
        .release_lease(&s, &owner("tab-a"), a.epoch)
        .await
        .expect_err("a cannot release");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    storage
        .commit(
            Batch::new()
                .fenced(b.fence())
                .put(Table::Runs, "r", b"b1".to_vec()),
        )
        .await
        .expect("b writes");
    assert_eq!(
        storage.get(Table::Runs, "r").await.expect("get"),
        Some(b"b1".to_vec())
    );
    // Fences are per session: B's epoch means nothing for another session.
    let err = storage
        .commit(
            Batch::new()
                .fenced(Fence {
                    session: sid("session-other"),
                    epoch: b.epoch,
                })
                .put(Table::Runs, "x", b"x".to_vec()),
        )
        .await
        .expect_err("no lease on the other session");
    assert!(
        matches!(err, StorageError::StaleEpoch { current: None, .. }),
        "{err:?}"
    );
}

/// A fenced write on a session nobody ever leased is refused (`current: None`).
pub async fn fence_without_a_lease_is_refused(storage: Arc<dyn Storage>) {
    let s = sid("session-unleased");
    let err = storage
        .commit(
            Batch::new()
                .fenced(Fence {
                    session: s.clone(),
                    epoch: 1,
                })
                .put(Table::Meta, "k", b"v".to_vec()),
        )
        .await
        .expect_err("no lease, no write");
    assert_eq!(
        err,
        StorageError::StaleEpoch {
            session: s.clone(),
            presented: 1,
            current: None,
        }
    );
    assert_eq!(storage.get(Table::Meta, "k").await.expect("get"), None);
    assert_eq!(storage.current_lease(&s).await.expect("current"), None);
}

/// Release keeps the epoch; the next holder (another owner, or the same
/// owner after a release) gets a higher one at once, before any expiry.
pub async fn lease_release_then_other_owner_gets_next_epoch(storage: Arc<dyn Storage>) {
    let s = sid("session-release");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("a acquires");
    storage
        .release_lease(&s, &owner("tab-a"), a.epoch)
        .await
        .expect("a releases");
    let released = storage
        .current_lease(&s)
        .await
        .expect("current")
        .expect("a released lease keeps its record");
    assert_eq!(released.epoch, a.epoch, "release keeps the epoch");
    assert!(!released.is_live(T0 + 1), "a released lease is not live");
    let b = storage
        .try_acquire_lease(&s, &owner("tab-b"), T0 + 1, TTL)
        .await
        .expect("b acquires the released lease before its ttl");
    assert_eq!(b.epoch, a.epoch + 1);
    // A writes with its old epoch: refused.
    let err = storage
        .commit(
            Batch::new()
                .fenced(a.fence())
                .put(Table::Meta, "k", b"a".to_vec()),
        )
        .await
        .expect_err("a released");
    assert!(matches!(err, StorageError::StaleEpoch { .. }), "{err:?}");
    // B releases; A comes back: again a new epoch.
    storage
        .release_lease(&s, &owner("tab-b"), b.epoch)
        .await
        .expect("b releases");
    let a2 = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0 + 2, TTL)
        .await
        .expect("a acquires again");
    assert_eq!(a2.epoch, b.epoch + 1);
    // The same owner after its own release gets a new epoch too.
    storage
        .release_lease(&s, &owner("tab-a"), a2.epoch)
        .await
        .expect("a releases again");
    let a3 = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0 + 3, TTL)
        .await
        .expect("a acquires a third time");
    assert_eq!(a3.epoch, a2.epoch + 1);
}

/// The same owner re-acquiring a live lease keeps the epoch and extends the
/// expiry; after expiry it starts a new tenure with epoch + 1.
pub async fn lease_same_owner_reacquire_keeps_epoch(storage: Arc<dyn Storage>) {
    let s = sid("session-same");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("acquire");
    let again = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0 + TTL / 2, TTL)
        .await
        .expect("re-acquire");
    assert_eq!(again.epoch, a.epoch, "same owner, live lease: same epoch");
    assert_eq!(again.expires_at_ms, T0 + TTL / 2 + TTL, "expiry extended");
    // The old fence is still current.
    storage
        .commit(
            Batch::new()
                .fenced(a.fence())
                .put(Table::Meta, "k", b"v".to_vec()),
        )
        .await
        .expect("same fence still writes");
    // After expiry, even the same owner starts a new tenure.
    let later = storage
        .try_acquire_lease(&s, &owner("tab-a"), again.expires_at_ms, TTL)
        .await
        .expect("re-acquire after expiry");
    assert_eq!(later.epoch, a.epoch + 1);
}

/// A live lease of another owner gives `Held` naming the holder; at its
/// expiry the lease is free.
pub async fn lease_held_by_live_other_owner(storage: Arc<dyn Storage>) {
    let s = sid("session-held");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("a acquires");
    for now in [T0, T0 + 1, T0 + TTL - 1] {
        let err = storage
            .try_acquire_lease(&s, &owner("tab-b"), now, TTL)
            .await
            .expect_err("held by a");
        assert_eq!(
            err,
            LeaseError::Held {
                session: s.clone(),
                owner: owner("tab-a"),
                expires_at_ms: a.expires_at_ms,
            }
        );
    }
    // Refusals changed nothing.
    assert_eq!(
        storage.current_lease(&s).await.expect("current"),
        Some(a.clone())
    );
    let b = storage
        .try_acquire_lease(&s, &owner("tab-b"), a.expires_at_ms, TTL)
        .await
        .expect("free at expiry");
    assert_eq!(b.epoch, a.epoch + 1);
    // Leases are per session.
    let other = storage
        .try_acquire_lease(&sid("session-held-2"), &owner("tab-a"), T0, TTL)
        .await
        .expect("another session is free");
    assert_eq!(other.epoch, 1);
}

/// Renewing several leases at once (a host's heartbeat) answers each as
/// `renew_lease` would, in order: the ones still held are extended, a stale
/// epoch or a lease another owner took is `Lost` and left as it is.
pub async fn lease_renewals_together_answer_each_lease(storage: Arc<dyn Storage>) {
    let a = owner("tab-a");
    let (kept, stale, taken) = (sid("renew-kept"), sid("renew-stale"), sid("renew-taken"));
    let kept_lease = storage
        .try_acquire_lease(&kept, &a, T0, TTL)
        .await
        .expect("acquire kept");
    let stale_lease = storage
        .try_acquire_lease(&stale, &a, T0, TTL)
        .await
        .expect("acquire stale");
    let taken_lease = storage
        .try_acquire_lease(&taken, &a, T0 - TTL, TTL)
        .await
        .expect("acquire taken");
    let b_lease = storage
        .try_acquire_lease(&taken, &owner("tab-b"), T0, TTL)
        .await
        .expect("b takes the expired lease");
    assert!(
        storage
            .renew_leases(&a, &[], T0 + 1_000, TTL)
            .await
            .is_empty()
    );
    let held = [
        (kept.clone(), kept_lease.epoch),
        (stale.clone(), stale_lease.epoch + 1),
        (taken.clone(), taken_lease.epoch),
    ];
    let answers = storage.renew_leases(&a, &held, T0 + 5_000, TTL).await;
    assert_eq!(answers.len(), 3, "{answers:?}");
    let renewed = answers[0].clone().expect("the kept lease is renewed");
    assert_eq!(renewed.epoch, kept_lease.epoch);
    assert_eq!(renewed.expires_at_ms, T0 + 5_000 + TTL);
    assert!(
        matches!(answers[1], Err(LeaseError::Lost { .. })),
        "{answers:?}"
    );
    assert!(
        matches!(answers[2], Err(LeaseError::Lost { .. })),
        "{answers:?}"
    );
    assert_eq!(
        storage.current_lease(&kept).await.expect("current"),
        Some(renewed)
    );
    assert_eq!(
        storage.current_lease(&stale).await.expect("current"),
        Some(stale_lease.clone())
    );
    assert_eq!(
        storage.current_lease(&taken).await.expect("current"),
        Some(b_lease)
    );
    // When none is held any more, nothing changes.
    let answers = storage.renew_leases(&a, &held[1..], T0 + 6_000, TTL).await;
    assert!(
        answers
            .iter()
            .all(|r| matches!(r, Err(LeaseError::Lost { .. })))
    );
    assert_eq!(
        storage.current_lease(&stale).await.expect("current"),
        Some(stale_lease)
    );
}

fn lease(session: &str, who: &str, epoch: u64, expires_at_ms: u64) -> LeaseRecord {
    LeaseRecord {
        session: sid(session),
        owner: owner(who),
        epoch,
        expires_at_ms,
    }
}

/// The one atomic lease step at its boundary: expected absent and absent,
/// expected absent but present, expected present but absent, the expected
/// record exactly, the epoch one off, the same epoch with another expiry
/// (a released lease), and an expired record (the step compares records; it
/// does not judge time). A refusal changes nothing and says what is stored.
pub async fn lease_cas_at_the_boundary(storage: Arc<dyn Storage>) {
    let s = "session-cas";
    let current = |storage: Arc<dyn Storage>| async move {
        storage.current_lease(&sid(s)).await.expect("current")
    };
    let first = lease(s, "tab-a", 1, T0 + TTL);
    // Expected present, but there is no record: refused, still absent.
    assert_eq!(
        storage.lease_cas(Some(&first), &first).await.expect("cas"),
        LeaseCas::Refused { current: None }
    );
    assert_eq!(current(storage.clone()).await, None);
    // Expected absent and absent: stored.
    assert_eq!(
        storage.lease_cas(None, &first).await.expect("cas"),
        LeaseCas::Swapped
    );
    assert_eq!(current(storage.clone()).await, Some(first.clone()));
    // Expected absent, but present: refused with what is stored.
    let intruder = lease(s, "tab-b", 1, T0 + 2 * TTL);
    assert_eq!(
        storage.lease_cas(None, &intruder).await.expect("cas"),
        LeaseCas::Refused {
            current: Some(first.clone())
        }
    );
    // The epoch one off either way: refused, unchanged.
    for epoch in [first.epoch - 1, first.epoch + 1] {
        let stale = LeaseRecord {
            epoch,
            ..first.clone()
        };
        assert_eq!(
            storage
                .lease_cas(Some(&stale), &intruder)
                .await
                .expect("cas"),
            LeaseCas::Refused {
                current: Some(first.clone())
            },
            "expected epoch {epoch}"
        );
    }
    // The same epoch and owner with another expiry (what a renewal that
    // raced a release would expect): refused.
    let released = LeaseRecord {
        expires_at_ms: 0,
        ..first.clone()
    };
    assert_eq!(
        storage
            .lease_cas(Some(&released), &intruder)
            .await
            .expect("cas"),
        LeaseCas::Refused {
            current: Some(first.clone())
        }
    );
    // Another owner expected: refused.
    let other_owner = LeaseRecord {
        owner: owner("tab-b"),
        ..first.clone()
    };
    assert_eq!(
        storage
            .lease_cas(Some(&other_owner), &intruder)
            .await
            .expect("cas"),
        LeaseCas::Refused {
            current: Some(first.clone())
        }
    );
    assert_eq!(current(storage.clone()).await, Some(first.clone()));
    // Exactly the stored record: swapped (here, a release).
    assert_eq!(
        storage
            .lease_cas(Some(&first), &released)
            .await
            .expect("cas"),
        LeaseCas::Swapped
    );
    assert_eq!(current(storage.clone()).await, Some(released.clone()));
    // An expired record is swapped like any other when it is the one expected.
    let next = lease(s, "tab-b", 2, T0 + TTL);
    assert!(!released.is_live(T0));
    assert_eq!(
        storage
            .lease_cas(Some(&released), &next)
            .await
            .expect("cas"),
        LeaseCas::Swapped
    );
    assert_eq!(current(storage.clone()).await, Some(next.clone()));
    // The largest times and epochs round-trip, so that a swap can expect them.
    let far = LeaseRecord {
        epoch: i64::MAX as u64,
        expires_at_ms: i64::MAX as u64,
        ..next.clone()
    };
    assert_eq!(
        storage.lease_cas(Some(&next), &far).await.expect("cas"),
        LeaseCas::Swapped
    );
    assert_eq!(current(storage.clone()).await, Some(far.clone()));
    assert_eq!(
        storage.lease_cas(Some(&far), &next).await.expect("cas"),
        LeaseCas::Swapped
    );
    // The provided operations agree with what the steps stored.
    let err = storage
        .try_acquire_lease(&sid(s), &owner("tab-a"), T0, TTL)
        .await
        .expect_err("tab-b holds it");
    assert!(
        matches!(&err, LeaseError::Held { owner: o, expires_at_ms, .. } if o.as_str() == "tab-b" && *expires_at_ms == T0 + TTL),
        "{err:?}"
    );
}

/// The batched step answers each swap as the single step would, in order:
/// a later swap of the same session sees the earlier one, a refusal does
/// not stop the swaps after it, and nothing is asked of an empty batch.
pub async fn lease_cas_all_answers_each_swap_in_order(storage: Arc<dyn Storage>) {
    assert!(storage.lease_cas_all(&[]).await.expect("empty").is_empty());
    let a1 = lease("session-all-a", "tab-a", 1, T0 + TTL);
    let a2 = LeaseRecord {
        expires_at_ms: T0 + 2 * TTL,
        ..a1.clone()
    };
    let b1 = lease("session-all-b", "tab-a", 1, T0 + TTL);
    let c1 = lease("session-all-c", "tab-a", 1, T0 + TTL);
    let swaps = [
        LeaseSwap {
            expected: None,
            new: a1.clone(),
        },
        LeaseSwap {
            expected: Some(a1.clone()),
            new: a2.clone(),
        },
        // Expects a record that is not there.
        LeaseSwap {
            expected: Some(b1.clone()),
            new: b1.clone(),
        },
        LeaseSwap {
            expected: None,
            new: c1.clone(),
        },
        // Expects what was there before the second swap.
        LeaseSwap {
            expected: Some(a1.clone()),
            new: a1.clone(),
        },
    ];
    let answers = storage.lease_cas_all(&swaps).await.expect("cas all");
    assert_eq!(
        answers,
        vec![
            LeaseCas::Swapped,
            LeaseCas::Swapped,
            LeaseCas::Refused { current: None },
            LeaseCas::Swapped,
            LeaseCas::Refused {
                current: Some(a2.clone())
            },
        ]
    );
    let sessions = [
        sid("session-all-a"),
        sid("session-all-b"),
        sid("session-all-c"),
    ];
    assert_eq!(
        storage.current_leases(&sessions).await.expect("read all"),
        vec![Some(a2), None, Some(c1)]
    );
    assert!(storage.current_leases(&[]).await.expect("none").is_empty());
}

/// Renew and release need the right owner and epoch; renewing a live lease
/// extends it; a released or expired lease cannot be renewed.
pub async fn lease_renew_and_release_check_owner_and_epoch(storage: Arc<dyn Storage>) {
    let s = sid("session-renew");
    let a = storage
        .try_acquire_lease(&s, &owner("tab-a"), T0, TTL)
        .await
        .expect("acquire");
    let renewed = storage
        .renew_lease(&s, &owner("tab-a"), a.epoch, T0 + 5_000, TTL)
        .await
        .expect("renew");
    assert_eq!(renewed.epoch, a.epoch);
    assert_eq!(renewed.expires_at_ms, T0 + 5_000 + TTL);
    assert_eq!(
        storage.current_lease(&s).await.expect("current"),
        Some(renewed.clone())
    );
    for (who, epoch) in [("tab-b", a.epoch), ("tab-a", a.epoch + 1), ("tab-a", 0)] {
        let err = storage
            .renew_lease(&s, &owner(who), epoch, T0 + 6_000, TTL)
            .await
            .expect_err("wrong owner or epoch");
        assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
        let err = storage
            .release_lease(&s, &owner(who), epoch)
            .await
            .expect_err("wrong owner or epoch");
        assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    }
    assert_eq!(
        storage.current_lease(&s).await.expect("current"),
        Some(renewed.clone())
    );
    // Renewing past expiry fails: the lease may already belong to someone else.
    let err = storage
        .renew_lease(&s, &owner("tab-a"), a.epoch, renewed.expires_at_ms, TTL)
        .await
        .expect_err("expired");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    // Release, then renew: lost.
    let fresh = storage
        .try_acquire_lease(&s, &owner("tab-a"), renewed.expires_at_ms, TTL)
        .await
        .expect("new tenure");
    storage
        .release_lease(&s, &owner("tab-a"), fresh.epoch)
        .await
        .expect("release");
    let err = storage
        .renew_lease(
            &s,
            &owner("tab-a"),
            fresh.epoch,
            renewed.expires_at_ms + 1,
            TTL,
        )
        .await
        .expect_err("released");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    // Renewing a session without a lease is lost too.
    let err = storage
        .renew_lease(&sid("session-none"), &owner("tab-a"), 1, T0, TTL)
        .await
        .expect_err("no lease");
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
}
