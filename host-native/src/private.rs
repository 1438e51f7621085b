//! Private on disk (issue 12 item 4): the one owner of the file modes of a
//! data directory. Blobs hold prompts, transcripts and fetched pages, so
//! everything the runtime creates is for its user only: directories
//! [`DIR_MODE`] (0700), the database and its `-wal` / `-shm` / `-journal`
//! files [`FILE_MODE`] (0600). Modes are set at creation and then set again
//! with `chmod`, so the process umask (022, 000, ...) never loosens them.
//!
//! The database files' part lives with the SQLite store
//! (`agent_store_sqlite::files`, re-exported here); this module owns the
//! data directory's.
//!
//! SQLite creates `-wal`, `-shm` and `-journal` itself, with the permissions
//! of the main database file (its unix VFS copies them and `fchmod`s past the
//! umask): creating the main file 0600 before SQLite opens it makes all of
//! them 0600 (`tests/file_modes.rs` checks the modes on disk).
//!
//! Existing files and directories differ:
//! - an existing data directory with group or other bits is *not* changed,
//!   only warned about on stderr (once the host opened) with the fix (`chmod 700 <dir>`): the person
//!   chose that directory and may share it on purpose (say, one group across
//!   containers), and a silent `chmod` would break the other side;
//! - an existing database file (or a leftover `-wal` / `-shm` / `-journal`)
//!   with group or other bits is the runtime's own file, written 0644 by
//!   older versions: once it opened as a database (a corrupt one is left
//!   untouched) it is tightened to 0600, and stderr says so. When that
//!   fails (another owner), stderr names the fix (`chmod 600 <file>`).

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The database files' modes are the SQLite store's (one owner).
pub use agent_store_sqlite::files::{
    COMPANION_SUFFIXES, FILE_MODE, open_to_others, prepare_private_database,
    tighten_database_files, warn,
};

/// The mode of every directory the runtime creates.
pub const DIR_MODE: u32 = 0o700;

/// The warning for an existing data directory whose mode lets others in, or
/// `None` when it is private.
pub fn loose_dir_warning(dir: &Path, mode: u32) -> Option<String> {
    open_to_others(mode).then(|| {
        format!(
            "the data directory {} is open to other users (mode {:04o}) and holds prompts, transcripts and fetched pages; make it private with `chmod 700 {}`",
            dir.display(),
            mode & 0o777,
            dir.display()
        )
    })
}

/// Make sure `dir` exists. Every missing directory on the way is created
/// [`DIR_MODE`] (whatever the umask); an existing `dir` is left as it is.
/// Returns the warning to [`warn`] about when others may read it (the caller
/// prints it once the directory proved usable, so that a failure stays one
/// clear line).
pub fn prepare_private_dir(dir: &Path) -> io::Result<Option<String>> {
    let mut missing: Vec<PathBuf> = Vec::new();
    let mut cursor = Some(dir);
    while let Some(p) = cursor {
        if p.as_os_str().is_empty() || fs::symlink_metadata(p).is_ok() {
            break;
        }
        missing.push(p.to_owned());
        cursor = p.parent();
    }
    if missing.is_empty() {
        let mode = fs::metadata(dir)?.permissions().mode();
        return Ok(loose_dir_warning(dir, mode));
    }
    for p in missing.iter().rev() {
        match fs::DirBuilder::new().mode(DIR_MODE).create(p) {
            Ok(()) => fs::set_permissions(p, fs::Permissions::from_mode(DIR_MODE))?,
            // Another process created it meanwhile: it is not ours to change.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).expect("stat").permissions().mode() & 0o777
    }

    #[test]
    fn missing_directories_are_created_private() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("a").join("b").join("data");
        assert_eq!(prepare_private_dir(&dir).expect("created"), None);
        for p in [tmp.path().join("a"), tmp.path().join("a/b"), dir.clone()] {
            assert_eq!(mode(&p), DIR_MODE, "{}", p.display());
        }
        // Again: it exists and is private, no warning.
        assert_eq!(prepare_private_dir(&dir).expect("exists"), None);
    }

    #[test]
    fn a_looser_existing_directory_is_warned_about_and_left_alone() {
        let tmp = tempfile::tempdir().expect("tmp");
        for loose in [0o755, 0o750, 0o707, 0o701] {
            fs::set_permissions(tmp.path(), fs::Permissions::from_mode(loose)).expect("chmod");
            let warning = prepare_private_dir(tmp.path())
                .expect("exists")
                .expect("a warning");
            assert!(
                warning.contains(&format!("chmod 700 {}", tmp.path().display())),
                "{warning}"
            );
            assert_eq!(mode(tmp.path()), loose, "left as the person set it");
        }
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(prepare_private_dir(tmp.path()).expect("exists"), None);
    }
}
