//! Private on disk: the file modes of the database. Its rows and blobs
//! hold prompts, transcripts and fetched pages, so the database and its
//! `-wal` / `-shm` / `-journal` files are [`FILE_MODE`] (0600), set at
//! creation and then again with `chmod`, so the process umask never loosens
//! them.
//!
//! SQLite creates `-wal`, `-shm` and `-journal` itself, with the permissions
//! of the main database file (its unix VFS copies them and `fchmod`s past the
//! umask): creating the main file 0600 before SQLite opens it makes all of
//! them 0600. An existing database file (or a leftover companion) with group
//! or other bits was written 0644 by an older version: once it opened as a
//! database (a corrupt one is left untouched) it is tightened to 0600, and
//! stderr says so; when that fails (another owner), stderr names the fix
//! (`chmod 600 <file>`).

use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of the database and its companion files.
pub const FILE_MODE: u32 = 0o600;
/// The suffixes of the files SQLite keeps beside a database.
pub const COMPANION_SUFFIXES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Whether `mode` lets anyone but the owner in.
pub fn open_to_others(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// Print a warning about modes on stderr (one line, `agentrt: warning: ...`).
pub fn warn(text: &str) {
    eprintln!("agentrt: warning: {text}");
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
