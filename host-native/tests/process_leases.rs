//! The native host's process liveness wired into its SQLite store: a lease
//! whose owner process is gone is taken at once, without waiting for its
//! time-to-live; a live owner keeps it (S3.3).

use agent_host_native::process::{Liveness, ProcessIdentity};
use agent_kernel::host::{LeaseError, Storage};
use agent_kernel::{OwnerId, SessionId};

fn sid(s: &str) -> SessionId {
    SessionId::new(s).expect("session id")
}
fn owner(s: &str) -> OwnerId {
    OwnerId::new(s).expect("owner id")
}

/// S3.3: a lease whose owner process is gone is taken at once, without
/// waiting for its time-to-live; a live owner keeps it.
#[tokio::test]
async fn s3_3_dead_process_lease_is_taken_over_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let s = agent_host_native::sqlite::open(dir.path().join("db.sqlite3"))
        .await
        .expect("open");
    let me = ProcessIdentity::current().expect("/proc");
    let mut child = std::process::Command::new("true").spawn().expect("spawn");
    let pid = child.id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let start: u64 = stat[stat.rfind(')').expect(")") + 1..]
        .split_whitespace()
        .nth(19)
        .expect("field")
        .parse()
        .expect("number");
    child.wait().expect("wait");
    // Owner ids name the PID namespace (issue 12 item 5): ours, so judged.
    let ns = me.pid_ns.expect("a readable PID namespace");
    let dead = owner(&format!("proc:{}:pidns-{ns}:{pid}:{start}:aa", me.boot));
    assert_eq!(
        agent_host_native::process::owner_liveness(&dead),
        Liveness::Dead
    );
    let ttl = 3_600_000;
    let held = s
        .try_acquire_lease(&sid("s"), &dead, 0, ttl)
        .await
        .expect("dead takes first");
    let alive = owner(&format!(
        "proc:{}:pidns-{ns}:{}:{}:bb",
        me.boot, me.pid, me.start
    ));
    let mine = s
        .try_acquire_lease(&sid("s"), &alive, 1, ttl)
        .await
        .expect("taken over at once");
    assert_eq!(mine.epoch, held.epoch + 1);
    assert_eq!(mine.owner, alive);
    // A live process's lease is not taken.
    let other = owner("tab-x");
    let err = s
        .try_acquire_lease(&sid("s"), &other, 2, ttl)
        .await
        .expect_err("live");
    assert!(matches!(err, LeaseError::Held { .. }));
}
