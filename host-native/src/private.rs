//! Private on disk (issue 12 item 4): the one owner of the file modes of a
//! data directory. Blobs hold prompts, transcripts and fetched pages, so
//! everything the runtime creates is for its user only: directories
//! [`DIR_MODE`] (0700), the database and its `-wal` / `-shm` / `-journal`
//! files [`FILE_MODE`] (0600). Modes are set at creation and then set again
//! with `chmod`, so the process umask (022, 000, ...) never loosens them.
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
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of every directory the runtime creates.
pub const DIR_MODE: u32 = 0o700;
/// The mode of the database and its companion files.
pub const FILE_MODE: u32 = 0o600;
/// The suffixes of the files SQLite keeps beside a database.
pub const COMPANION_SUFFIXES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Whether `mode` lets anyone but the owner in.
fn open_to_others(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// Print a warning about modes on stderr (one line, `agentrt: warning: ...`).
pub fn warn(text: &str) {
    eprintln!("agentrt: warning: {text}");
}

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

/// Before SQLite opens `db`: create it empty with [`FILE_MODE`] when it
/// does not exist, so that SQLite gives its companions that mode too. An
/// existing file is not touched here (it may be corrupt and must be left as
/// it is): see [`tighten_database_files`].
pub fn prepare_private_database(db: &Path) -> io::Result<()> {
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(db)
    {
        Ok(_) => fs::set_permissions(db, fs::Permissions::from_mode(FILE_MODE)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Once `db` opened as a database: tighten it and its companion files to
/// [`FILE_MODE`] if others may read them (an older version wrote 0644),
/// saying so on stderr.
pub fn tighten_database_files(db: &Path) {
    tighten(db);
    for suffix in COMPANION_SUFFIXES {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        tighten(Path::new(&name));
    }
}

/// Set an existing regular file of the runtime to [`FILE_MODE`] if others
/// may read it. A missing file is fine; a failure is a warning.
fn tighten(file: &Path) {
    let Ok(meta) = fs::symlink_metadata(file) else {
        return;
    };
    let mode = meta.permissions().mode();
    if !meta.is_file() || !open_to_others(mode) {
        return;
    }
    match fs::set_permissions(file, fs::Permissions::from_mode(FILE_MODE)) {
        Ok(()) => warn(&format!(
            "{} was open to other users (mode {:04o}); it is now {FILE_MODE:04o}",
            file.display(),
            mode & 0o777
        )),
        Err(e) => warn(&format!(
            "{} is open to other users (mode {:04o}) and could not be changed ({e}); run `chmod 600 {}`",
            file.display(),
            mode & 0o777,
            file.display()
        )),
    }
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

    #[test]
    fn the_database_is_created_private_and_old_loose_files_are_tightened() {
        let tmp = tempfile::tempdir().expect("tmp");
        let db = tmp.path().join("x.sqlite3");
        prepare_private_database(&db).expect("created");
        assert_eq!(mode(&db), FILE_MODE);
        assert_eq!(fs::metadata(&db).expect("stat").len(), 0);
        let wal = tmp.path().join("x.sqlite3-wal");
        fs::write(&wal, b"w").expect("wal");
        for p in [&db, &wal] {
            fs::set_permissions(p, fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        prepare_private_database(&db).expect("existing");
        assert_eq!(mode(&db), 0o644, "not touched before it opened");
        tighten_database_files(&db);
        assert_eq!(mode(&db), FILE_MODE);
        assert_eq!(mode(&wal), FILE_MODE);
        assert_eq!(fs::read(&wal).expect("kept"), b"w", "contents untouched");
    }
}
