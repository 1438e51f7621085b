//! A throwaway PostgreSQL server for tests and benchmarks (feature
//! `test-cluster`): [`PgCluster`] runs Debian's `initdb` and `pg_ctl` in a
//! temporary folder, listening only on 127.0.0.1 on a free port with trust
//! authentication, and stops the server and removes the folder when it is
//! dropped; [`PgCluster::shared`] gives one cluster per test process;
//! [`TestDatabase`] is a fresh database on it, dropped with its guard.
//!
//! PostgreSQL refuses to run as root: when this process is root the server
//! runs as the package's `postgres` user (`runuser -u postgres --`), in a
//! folder handed to that user. A watchdog shell, whose standard input is a
//! pipe only this process holds, stops the server and removes the folder
//! when this process ends in any way (a panic, `exit`, SIGKILL), so no
//! server outlives its test.
//!
//! When PostgreSQL is not installed or does not start, every constructor
//! returns [`ClusterError`] saying what to do; tests `expect` it and fail
//! loudly, never skip.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Starting or using a test cluster failed. Each message says what to do.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    #[error(
        "PostgreSQL is not installed (no {looked}); install it with `cargo xtask install` or `apt-get install -y postgresql`, or set AGENTRT_PG_BIN to the folder holding initdb and pg_ctl"
    )]
    NotInstalled { looked: String },
    #[error("{step} failed: {detail}")]
    Command { step: String, detail: String },
}

/// How the server writes: durably (fsync, as in production: for
/// benchmarks) or fast (no fsync: for tests, whose data dies with them;
/// a killed server still loses no acknowledged commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Fast,
    Durable,
}

/// A PostgreSQL server on 127.0.0.1 in a temporary folder; stopped and
/// removed on drop.
pub struct PgCluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
    durability: Durability,
    /// Closing this pipe makes the watchdog stop the server.
    watchdog: Mutex<Option<(Child, ChildStdin)>>,
}

impl std::fmt::Debug for PgCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgCluster")
            .field("dir", &self.dir.path())
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// The folder holding `initdb` and `pg_ctl`: `AGENTRT_PG_BIN`, or the
/// newest `/usr/lib/postgresql/<version>/bin`.
pub fn find_bin() -> Result<PathBuf, ClusterError> {
    find_bin_from(
        std::env::var_os("AGENTRT_PG_BIN"),
        Path::new("/usr/lib/postgresql"),
    )
}

/// [`find_bin`] with its inputs given: the override and the folder of
/// Debian's versioned installs.
fn find_bin_from(
    override_dir: Option<std::ffi::OsString>,
    installs: &Path,
) -> Result<PathBuf, ClusterError> {
    if let Some(dir) = override_dir {
        let dir = PathBuf::from(dir);
        if dir.join("initdb").is_file() {
            return Ok(dir);
        }
        return Err(ClusterError::NotInstalled {
            looked: format!("initdb in AGENTRT_PG_BIN={}", dir.display()),
        });
    }
    let looked = format!("{}/*/bin/initdb", installs.display());
    let versions = std::fs::read_dir(installs)
        .map_err(|_| ClusterError::NotInstalled {
            looked: looked.clone(),
        })?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max_by_key(|(v, _)| *v);
    versions
        .map(|(_, bin)| bin)
        .ok_or(ClusterError::NotInstalled { looked })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> Result<u16, ClusterError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| ClusterError::Command {
        step: "finding a free port".into(),
        detail: e.to_string(),
    })?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| ClusterError::Command {
            step: "finding a free port".into(),
            detail: e.to_string(),
        })
}

/// Quote `s` for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl PgCluster {
    /// A fast cluster (no fsync) for tests.
    pub fn start() -> Result<Self, ClusterError> {
        Self::start_with(Durability::Fast)
    }

    /// A cluster that writes as production does (fsync, synchronous
    /// commit): for benchmarks.
    pub fn start_durable() -> Result<Self, ClusterError> {
        Self::start_with(Durability::Durable)
    }

    /// One fast cluster for the whole test process, started on first use
    /// and stopped by the watchdog when the process ends.
    pub fn shared() -> Result<&'static PgCluster, ClusterError> {
        static SHARED: OnceLock<Result<PgCluster, ClusterError>> = OnceLock::new();
        SHARED
            .get_or_init(PgCluster::start)
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn start_with(durability: Durability) -> Result<Self, ClusterError> {
        let bin = find_bin()?;
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("agentrt-pg-")
            .tempdir()
            .map_err(|e| ClusterError::Command {
                step: "creating the cluster folder".into(),
                detail: e.to_string(),
            })?;
        let mut cluster = PgCluster {
            bin,
            dir,
            port: 0,
            as_postgres,
            durability,
            watchdog: Mutex::new(None),
        };
        if as_postgres {
            cluster.run(
                "handing the cluster folder to the postgres user",
                Command::new("chown").args(["postgres:postgres", &cluster.dir_str()]),
            )?;
        }
        let initdb = cluster.bin.join("initdb");
        let data = cluster.data_dir();
        cluster.run(
            "initdb",
            cluster.as_user(&initdb).args([
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]),
        )?;
        cluster.arm_watchdog()?;
        // A port found free may be taken before the server binds it: try again.
        let mut last = None;
        for _ in 0..3 {
            cluster.port = free_port()?;
            match cluster.pg_ctl_start() {
                Ok(()) => return Ok(cluster),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ClusterError::Command {
            step: "pg_ctl start".into(),
            detail: "no attempt was made".into(),
        }))
    }

    fn dir_str(&self) -> String {
        self.dir.path().display().to_string()
    }

    fn data_dir(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// A command for `program`, as the `postgres` user when this process is root.
    fn as_user(&self, program: &Path) -> Command {
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn run(&self, step: &str, command: &mut Command) -> Result<(), ClusterError> {
        let output = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| ClusterError::Command {
                step: step.to_owned(),
                detail: e.to_string(),
            })?;
        if output.status.success() {
            return Ok(());
        }
        Err(ClusterError::Command {
            step: step.to_owned(),
            detail: format!(
                "{}; stdout: {}; stderr: {}",
                output.status,
                String::from_utf8_lossy(&output.stdout).trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        })
    }

    /// The server options: loopback only, the socket in our folder.
    fn server_options(&self) -> String {
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300",
            self.port,
            self.dir_str()
        );
        if self.durability == Durability::Fast {
            // Commits still reach the operating system before they are
            // acknowledged (synchronous_commit stays on), so a killed server
            // loses nothing; only a crash of the machine would.
            options.push_str(" -c fsync=off -c full_page_writes=off");
        }
        options
    }

    fn pg_ctl_start(&self) -> Result<(), ClusterError> {
        let pg_ctl = self.bin.join("pg_ctl");
        let log = self.log_path().display().to_string();
        let started = self.run(
            "pg_ctl start",
            self.as_user(&pg_ctl).args([
                "-D",
                &self.data_dir(),
                "-o",
                &self.server_options(),
                "-l",
                &log,
                "-w",
                "-t",
                "60",
                "start",
            ]),
        );
        started.map_err(|e| match e {
            ClusterError::Command { step, detail } => ClusterError::Command {
                step,
                detail: format!(
                    "{detail}; server log: {}",
                    std::fs::read_to_string(&log).unwrap_or_default().trim()
                ),
            },
            other => other,
        })
    }

    /// The shell command that stops the server now.
    fn stop_command(&self, mode: &str) -> String {
        let pg_ctl = sh_quote(&self.bin.join("pg_ctl").display().to_string());
        let args = format!("-D {} -m {mode} -w -t 60 stop", sh_quote(&self.data_dir()));
        if self.as_postgres {
            format!("runuser -u postgres -- {pg_ctl} {args}")
        } else {
            format!("{pg_ctl} {args}")
        }
    }

    /// Start the shell that stops the server and removes the folder once
    /// its standard input closes (this process ended, or [`Drop`]).
    fn arm_watchdog(&self) -> Result<(), ClusterError> {
        let script = format!(
            "cat >/dev/null; {} >/dev/null 2>&1; rm -rf {}",
            self.stop_command("immediate"),
            sh_quote(&self.dir_str())
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| ClusterError::Command {
                step: "starting the cluster watchdog".into(),
                detail: e.to_string(),
            })?;
        let stdin = child.stdin.take().ok_or_else(|| ClusterError::Command {
            step: "starting the cluster watchdog".into(),
            detail: "no pipe to its standard input".into(),
        })?;
        if let Ok(mut w) = self.watchdog.lock() {
            *w = Some((child, stdin));
        }
        Ok(())
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log file.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The address of `database` on this server, as the `postgres` user.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Stop the server at once (`-m immediate`: like a crash, connections cut).
    pub fn kill(&self) -> Result<(), ClusterError> {
        self.run(
            "pg_ctl stop -m immediate",
            Command::new("sh").args(["-c", &self.stop_command("immediate")]),
        )
    }

    /// Stop the server cleanly (`-m fast`: sessions cut, then a checkpoint).
    pub fn stop(&self) -> Result<(), ClusterError> {
        self.run(
            "pg_ctl stop -m fast",
            Command::new("sh").args(["-c", &self.stop_command("fast")]),
        )
    }

    /// Start the server again on the same port after [`PgCluster::stop`] or
    /// [`PgCluster::kill`]; its data is kept.
    pub fn restart(&self) -> Result<(), ClusterError> {
        self.pg_ctl_start()
    }

    /// A fresh, empty database on this cluster.
    pub fn create_database(&self) -> Result<TestDatabase<'_>, ClusterError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "agentrt_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        self.psql(&format!("CREATE DATABASE {name}"))?;
        Ok(TestDatabase {
            cluster: self,
            name,
        })
    }

    /// Run one SQL statement on the `postgres` database through `psql`.
    pub fn psql(&self, sql: &str) -> Result<(), ClusterError> {
        let psql = self.bin.join("psql");
        self.run(
            "psql",
            Command::new(psql).args([
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                &self.url("postgres"),
                "-c",
                sql,
            ]),
        )
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Best effort: the watchdog stops the server anyway when its pipe closes.
        let _ = self.stop();
        if let Ok(mut w) = self.watchdog.lock()
            && let Some((mut child, mut stdin)) = w.take()
        {
            // Ignored on purpose: a watchdog gone already has nothing to do.
            let _ = stdin.flush();
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// A database on a [`PgCluster`], dropped (with any connections still
/// open to it) when this guard is.
#[derive(Debug)]
pub struct TestDatabase<'c> {
    cluster: &'c PgCluster,
    name: String,
}

impl TestDatabase<'_> {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn url(&self) -> String {
        self.cluster.url(&self.name)
    }
}

impl Drop for TestDatabase<'_> {
    fn drop(&mut self) {
        // Ignored on purpose: the whole cluster is removed at the end anyway.
        let _ = self.cluster.psql(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_postgresql_is_a_loud_error_saying_how_to_install_it() {
        let empty = tempfile::tempdir().expect("temp dir");
        for (override_dir, installs) in [
            (None, empty.path().join("absent")),
            (None, empty.path().to_owned()),
            (
                Some(empty.path().as_os_str().to_owned()),
                empty.path().to_owned(),
            ),
        ] {
            let err = find_bin_from(override_dir, &installs).expect_err("nothing installed");
            assert!(matches!(err, ClusterError::NotInstalled { .. }), "{err:?}");
            let message = err.to_string();
            assert!(
                message.contains("apt-get install -y postgresql"),
                "{message}"
            );
            assert!(message.contains("cargo xtask install"), "{message}");
        }
    }

    #[test]
    fn the_newest_installed_version_is_chosen() {
        let root = tempfile::tempdir().expect("temp dir");
        for version in ["13", "15", "9", "not-a-version"] {
            let bin = root.path().join(version).join("bin");
            std::fs::create_dir_all(&bin).expect("mkdir");
            std::fs::write(bin.join("initdb"), b"").expect("touch");
        }
        let bin = find_bin_from(None, root.path()).expect("found");
        assert_eq!(bin, root.path().join("15").join("bin"));
    }

    #[test]
    fn shell_quoting_survives_quotes() {
        assert_eq!(sh_quote("a'b"), "'a'\\''b'");
    }
}
