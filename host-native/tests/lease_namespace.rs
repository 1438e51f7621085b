//! Lease owners across PID namespaces (issue 12 item 5, S3.1, S3.3): a session
//! lease held by a process of another PID namespace (a container sharing the
//! data directory, same boot id) names a pid that means nothing here. The
//! real `agentrt` must not read it as dead: it does not take the session
//! before the lease's time-to-live runs out, and does after. A dead pid of
//! *this* namespace is still taken over at once, and an owner written in the
//! older form (no namespace) waits like a foreign one.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_host_native::host::DATABASE_FILE;
use agent_host_native::process::ProcessIdentity;
use agent_host_native::sqlite::SqliteStorage;
use agent_kernel::host::Storage;
use agent_kernel::{OwnerId, SessionId};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");
/// Above the kernel's PID_MAX_LIMIT (2^22): no process anywhere has it.
const NO_SUCH_PID: u32 = 4_195_304;
/// Long enough that the refused run surely ends before it runs out.
const TTL: Duration = Duration::from_secs(15);

fn wall_ms() -> u64 {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    u64::try_from(d.as_millis()).expect("ms")
}

/// Plant `owner`'s lease on `session` for `ttl`; returns its expiry (wall ms).
async fn plant(data: &Path, session: &str, owner: &str, ttl: Duration) -> u64 {
    std::fs::create_dir_all(data).expect("data dir");
    let storage = SqliteStorage::open(data.join(DATABASE_FILE))
        .await
        .expect("open");
    let ttl_ms = u64::try_from(ttl.as_millis()).expect("ms");
    let lease = storage
        .try_acquire_lease(
            &SessionId::new(session).expect("session"),
            &OwnerId::new(owner).expect("owner"),
            wall_ms(),
            ttl_ms,
        )
        .await
        .expect("planted");
    lease.expires_at_ms
}

fn run_in_session(dir: &Path, session: &str) -> Output {
    let scenario = dir.join("s.json");
    std::fs::write(&scenario, r#"{"turns": [{"text": "done"}]}"#).expect("scenario");
    Command::new(BIN)
        .args(["run", "go", "--scenario"])
        .arg(&scenario)
        .args(["--session", session])
        .env("AGENTRT_DATA_DIR", dir.join("data"))
        .env_remove("AGENTRT_TEST_PAUSE")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run agentrt")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited")
}

fn me() -> ProcessIdentity {
    ProcessIdentity::current().expect("this test needs /proc")
}

/// Wait until the wall clock is past `expires_at_ms`.
async fn wait_past(expires_at_ms: u64) {
    let left = expires_at_ms.saturating_sub(wall_ms()) + 200;
    tokio::time::sleep(Duration::from_millis(left)).await;
}

/// Plant `owner`'s lease for [`TTL`]: the real `agentrt` is refused the
/// session until the lease expires, then takes it.
async fn waits_out_its_ttl(session: &str, owner: &str) {
    let dir = tempfile::tempdir().expect("dir");
    let expires = plant(&dir.path().join("data"), session, owner, TTL).await;
    let refused = run_in_session(dir.path(), session);
    let ended = wall_ms();
    assert!(
        ended < expires,
        "{session}: the refused run took longer than the {TTL:?} lease; the machine is too slow for this test"
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(code(&refused), 3, "{session}: taken before its TTL: {err}");
    assert!(err.contains("being executed"), "{session}: {err}");
    assert!(err.contains(owner), "{session}: names the holder: {err}");

    wait_past(expires).await;
    let taken = run_in_session(dir.path(), session);
    assert_eq!(
        code(&taken),
        0,
        "{session}: after the TTL the session is taken: {}",
        String::from_utf8_lossy(&taken.stderr)
    );
}

/// The holder runs (for all we know) in another container: the same boot
/// (containers share the kernel), another PID namespace, a pid that does
/// not exist here.
#[tokio::test]
async fn a_holder_in_another_pid_namespace_waits_out_its_ttl() {
    let me = me();
    let foreign = me
        .pid_ns
        .expect("a readable PID namespace here")
        .wrapping_add(1);
    let owner = format!("proc:{}:pidns-{foreign}:{NO_SUCH_PID}:1:c0ffee", me.boot);
    waits_out_its_ttl("foreign-ns", &owner).await;
}

/// A holder that could not read its namespace is judged like a foreign one.
#[tokio::test]
async fn a_holder_of_unknown_pid_namespace_waits_out_its_ttl() {
    let owner = format!("proc:{}:pidns-unknown:{NO_SUCH_PID}:1:c0ffee", me().boot);
    waits_out_its_ttl("unknown-ns", &owner).await;
}

/// An owner id of the older form (no namespace) still decodes, with an
/// unknown namespace: it may come from another container, so it waits.
#[tokio::test]
async fn a_holder_written_in_the_older_form_waits_out_its_ttl() {
    let owner = format!("proc:{}:{NO_SUCH_PID}:1:c0ffee", me().boot);
    waits_out_its_ttl("old-form", &owner).await;
}

/// The control: the same dead pid in *our* namespace is taken over at once,
/// long before its (one hour) time-to-live.
#[tokio::test]
async fn a_dead_holder_of_this_namespace_is_taken_over_at_once() {
    let me = me();
    let ours = me.pid_ns.expect("ns");
    let dir = tempfile::tempdir().expect("dir");
    let owner = format!("proc:{}:pidns-{ours}:{NO_SUCH_PID}:1:c0ffee", me.boot);
    let expires = plant(
        &dir.path().join("data"),
        "same-ns",
        &owner,
        Duration::from_secs(3600),
    )
    .await;
    let taken = run_in_session(dir.path(), "same-ns");
    assert!(wall_ms() < expires);
    assert_eq!(
        code(&taken),
        0,
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
}
