//! The scratch temporary directory of one `cargo xtask test`: every step
//! runs with `TMPDIR` pointing into it, and it is removed when the run ends,
//! passed or failed. What the tools under test leave in the temporary
//! directory (a browser profile that ChromeDriver did not remove, a test's
//! folder after a panic) then goes with the run instead of filling the
//! machine's disk run after run. A run that was killed leaves its folder;
//! the next run removes the folders of runs that are no longer alive.
//!
//! It sits directly in the system's temporary directory, not under
//! `target/`: PostgreSQL's test clusters put their Unix socket in it
//! (a socket path has at most 107 bytes) and run as the `postgres` user,
//! who must be able to reach it.

use std::path::{Path, PathBuf};

const PREFIX: &str = "xtask-test-";

/// The scratch directory of this run; removed on drop.
pub(crate) struct ScratchTmp {
    path: PathBuf,
}

impl ScratchTmp {
    /// Removes the folders of earlier runs whose process is gone, then makes
    /// this run's (`<system temp>/xtask-test-<pid>`, world-traversable like
    /// the system's own so that other users' servers reach their sockets).
    pub(crate) fn create() -> std::io::Result<ScratchTmp> {
        let system = std::env::temp_dir();
        remove_abandoned(&system);
        let path = system.join(format!("{PREFIX}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o1777))?;
        }
        Ok(ScratchTmp { path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchTmp {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.path) {
            eprintln!(
                "xtask: could not remove the scratch directory {}: {error}",
                self.path.display()
            );
        }
    }
}

/// Remove `xtask-test-<pid>` folders in `system` whose process is gone.
fn remove_abandoned(system: &Path) {
    let Ok(entries) = std::fs::read_dir(system) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_runs_folder_is_removed_a_live_ones_kept() {
        let system =
            std::env::temp_dir().join(format!("xtask-scratch-test-{}", std::process::id()));
        std::fs::create_dir_all(&system).unwrap();
        // No process has pid u32::MAX - 1 (pid_max is at most 2^22).
        let dead = system.join(format!("{PREFIX}{}", u32::MAX - 1));
        let live = system.join(format!("{PREFIX}{}", std::process::id()));
        let other = system.join("unrelated");
        for dir in [&dead, &live, &other] {
            std::fs::create_dir_all(dir.join("inside")).unwrap();
        }
        remove_abandoned(&system);
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(other.exists());
        std::fs::remove_dir_all(&system).unwrap();
    }
}
