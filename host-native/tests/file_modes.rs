//! Private on disk (issue 12 item 4): after a fresh `agentrt` run the data
//! directory is 0700 and the database with its `-wal` and `-shm` files 0600,
//! whatever the umask (each case runs under umask 022 and 000, set by `sh`
//! before it execs the real binary); an existing looser directory gets a
//! warning naming `chmod 700 <dir>` and is left as it was.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agent_host_native::host::DATABASE_FILE;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");
const UMASKS: [&str; 2] = ["022", "000"];

const SCENARIO: &str = r#"{"turns": [
  {"text": "writing", "tool_calls": [{"name": "workspace_write", "arguments": {"path": "notes/a.md", "content": "a private note"}}]},
  {"text": "done"}]}"#;

/// `agentrt <args>` under `umask`, through `sh` (no unsafe `pre_exec`).
fn command(umask: &str, data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("AGENTRT_TEST_PAUSE")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    cmd
}

fn run(umask: &str, data: &Path, args: &[&str]) -> Output {
    command(umask, data, args).output().expect("run agentrt")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn companion(data: &Path, suffix: &str) -> std::path::PathBuf {
    data.join(format!("{DATABASE_FILE}{suffix}"))
}

/// The umask in effect really is the one asked for (the test would prove
/// nothing under a umask that hides the bits anyway).
#[test]
fn the_shell_sets_the_umask_it_is_given() {
    for umask in UMASKS {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask}; umask"))
            .output()
            .expect("sh");
        let shown = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            shown.trim().trim_start_matches('0'),
            umask.trim_start_matches('0')
        );
    }
}

/// A run that pauses after its first commit, so that the `-wal` and `-shm`
/// files exist on disk while the modes are read; then it is killed.
#[test]
fn a_fresh_run_creates_a_private_directory_and_database_files() {
    for umask in UMASKS {
        let dir = tempfile::tempdir().expect("dir");
        let scenario = dir.path().join("s.json");
        std::fs::write(&scenario, SCENARIO).expect("scenario");
        // Two levels the runtime must create.
        let data = dir.path().join("nested").join("data");
        let mut child: Child = command(
            umask,
            &data,
            &["run", "go", "--scenario", scenario.to_str().expect("utf8")],
        )
        .env("AGENTRT_TEST_PAUSE", "after:committed:workspace_write")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|e| panic!("umask {umask}: no pause ({e}); stderr: {seen:?}"));
            if line.starts_with("agentrt-test-paused") {
                break;
            }
            seen.push(line);
        }
        let modes = [
            ("nested", mode(&dir.path().join("nested")), 0o700),
            ("data dir", mode(&data), 0o700),
            ("database", mode(&data.join(DATABASE_FILE)), 0o600),
            ("-wal", mode(&companion(&data, "-wal")), 0o600),
            ("-shm", mode(&companion(&data, "-shm")), 0o600),
        ];
        child.kill().expect("kill");
        child.wait().expect("reap");
        for (what, found, expected) in modes {
            assert_eq!(
                found, expected,
                "umask {umask}: {what} is {found:04o}, expected {expected:04o}"
            );
        }
        assert!(
            seen.iter().all(|l| !l.contains("warning")),
            "umask {umask}: a fresh directory warns about nothing: {seen:?}"
        );
        // Opening again after the kill (leftover -wal/-shm) keeps every mode.
        let out = run(umask, &data, &["--json", "runs"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(mode(&data), 0o700);
        assert_eq!(mode(&data.join(DATABASE_FILE)), 0o600);
        for suffix in ["-wal", "-shm", "-journal"] {
            let p = companion(&data, suffix);
            if p.exists() {
                assert_eq!(mode(&p), 0o600, "umask {umask}: {suffix}");
            }
        }
    }
}

/// A run to its end (no pause): what stays on disk is private.
#[test]
fn a_completed_run_leaves_only_private_files() {
    for umask in UMASKS {
        let dir = tempfile::tempdir().expect("dir");
        let scenario = dir.path().join("s.json");
        std::fs::write(&scenario, SCENARIO).expect("scenario");
        let data = dir.path().join("data");
        let out = run(
            umask,
            &data,
            &["run", "go", "--scenario", scenario.to_str().expect("utf8")],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(mode(&data), 0o700, "umask {umask}");
        for entry in std::fs::read_dir(&data).expect("list") {
            let path = entry.expect("entry").path();
            let expected = if path.is_dir() { 0o700 } else { 0o600 };
            assert_eq!(mode(&path), expected, "umask {umask}: {}", path.display());
        }
    }
}

/// An existing directory open to others is left alone, with a warning that
/// names the fix; a private one gets no warning. An old 0644 database is
/// tightened (it is the runtime's own file) and stderr says so.
#[test]
fn a_looser_existing_directory_warns_and_an_old_database_is_tightened() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    for loose in [0o755, 0o750, 0o711] {
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(loose)).expect("chmod");
        let out = run("022", &data, &["--json", "runs"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        let fix = format!("chmod 700 {}", data.display());
        assert!(
            err.contains(&fix),
            "mode {loose:04o}: no warning naming {fix:?}: {err}"
        );
        assert!(err.starts_with("agentrt: warning: "), "{err}");
        assert_eq!(
            mode(&data),
            loose,
            "the person's directory is left as it was"
        );
    }
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let db = data.join(DATABASE_FILE);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).expect("chmod db");
    let out = run("022", &data, &["--json", "runs"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("chmod 700"), "a private directory: {err}");
    assert!(err.contains("it is now 0600"), "{err}");
    assert_eq!(mode(&db), 0o600);
    let again = run("022", &data, &["--json", "runs"]);
    assert!(
        String::from_utf8_lossy(&again.stderr).trim().is_empty(),
        "nothing left to say: {}",
        String::from_utf8_lossy(&again.stderr)
    );
}
