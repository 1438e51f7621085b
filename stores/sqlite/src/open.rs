//! Opening a database: the file created private ([`crate::files`]), WAL
//! and `synchronous=FULL` set and read back, the numbered migrations
//! applied once whatever the number of processes opening one fresh file,
//! and each failure a typed [`OpenError`] that says what to do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

/// The numbered migrations, applied in order; `PRAGMA user_version` records
/// how many ran. Never edit a released one: add the next number.
const MIGRATIONS: &[(u32, &str)] = &[(1, include_str!("../migrations/0001_init.sql"))];

/// How long one connection waits for another process's write lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opening a database failed. Each variant says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    #[error(
        "cannot open the database {path}: {detail}; check that the data directory exists and is readable and writable (set --data-dir or AGENTRT_DATA_DIR)"
    )]
    Io { path: PathBuf, detail: String },
    #[error(
        "{path} is not an agentrt database or is corrupt ({detail}); it was left untouched: move it aside or restore a backup, then start again"
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "the database {path} has schema version {found}, newer than this agentrt knows ({known}); use a newer agentrt or another data directory"
    )]
    TooNew {
        path: PathBuf,
        found: u32,
        known: u32,
    },
    #[error("the database {path} could not be prepared: {detail}")]
    Setup { path: PathBuf, detail: String },
}

fn classify(path: &Path, e: &rusqlite::Error) -> OpenError {
    use rusqlite::ffi::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => OpenError::Corrupt {
            path: path.to_owned(),
            detail: e.to_string(),
        },
        Some(
            ErrorCode::CannotOpen
            | ErrorCode::PermissionDenied
            | ErrorCode::ReadOnly
            | ErrorCode::SystemIoFailure,
        ) => OpenError::Io {
            path: path.to_owned(),
            detail: e.to_string(),
        },
        _ => OpenError::Setup {
            path: path.to_owned(),
            detail: e.to_string(),
        },
    }
}

/// Take `step` again while SQLite answers "busy" without having waited
/// (until `deadline`). SQLite skips the busy handler when a connection that
/// read the file must upgrade to write while another process prepares the
/// same database: two `agentrt` processes opening a fresh data directory.
fn retry_while_busy<T>(
    deadline: std::time::Instant,
    mut step: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    use rusqlite::ffi::ErrorCode;
    let mut pause = Duration::from_millis(2);
    loop {
        match step() {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

fn apply_migrations(
    conn: &mut Connection,
    path: &Path,
    deadline: std::time::Instant,
) -> Result<(), OpenError> {
    let known = MIGRATIONS.last().map_or(0, |(n, _)| *n);
    let found: u32 = retry_while_busy(deadline, || {
        conn.pragma_query_value(None, "user_version", |r| r.get(0))
    })
    .map_err(|e| classify(path, &e))?;
    if found > known {
        return Err(OpenError::TooNew {
            path: path.to_owned(),
            found,
            known,
        });
    }
    for (number, sql) in MIGRATIONS.iter().filter(|(n, _)| *n > found) {
        retry_while_busy(deadline, || apply_migration(conn, *number, sql))
            .map_err(|e| classify(path, &e))?;
    }
    Ok(())
}

/// Apply migration `number` unless another process got there first.
fn apply_migration(conn: &mut Connection, number: u32, sql: &str) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Another process may have migrated between our read and our lock.
    let now: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if now >= number {
        return Ok(());
    }
    tx.execute_batch(sql)?;
    tx.pragma_update(None, "user_version", number)?;
    tx.commit()
}

pub(crate) fn open_connection(path: &Path) -> Result<Connection, OpenError> {
    // The file exists 0600 before SQLite sees it; its -wal/-shm follow its mode.
    crate::files::prepare_private_database(path).map_err(|e| OpenError::Io {
        path: path.to_owned(),
        detail: e.to_string(),
    })?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| classify(path, &e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| classify(path, &e))?;
    // Each step is idempotent, so a step another process's preparation
    // refused is simply taken again.
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    retry_while_busy(deadline, || {
        // The first statement that reads the file header reports a non-database.
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
    })
    .map_err(|e| classify(path, &e))
    .and_then(|mode| {
        if mode.eq_ignore_ascii_case("wal") {
            Ok(())
        } else {
            Err(OpenError::Setup {
                path: path.to_owned(),
                detail: format!("journal_mode is {mode}, WAL was refused"),
            })
        }
    })?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(|e| classify(path, &e))?;
    conn.set_prepared_statement_cache_capacity(64);
    apply_migrations(&mut conn, path, deadline)?;
    // A database of an older version may be 0644: ours, so made private.
    crate::files::tighten_database_files(path);
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// S3.1: connections (standing in for processes) that open one fresh
    /// database at the same moment all get it prepared; none is refused with
    /// "database is locked" (it failed in CI when two `agentrt run`s raced).
    #[test]
    fn many_openers_of_one_fresh_database_all_succeed() {
        for _ in 0..300 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("agentrt.sqlite3");
            let barrier = Arc::new(std::sync::Barrier::new(6));
            let handles: Vec<_> = (0..6)
                .map(|_| {
                    let path = path.clone();
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        barrier.wait();
                        open_connection(&path).map(|_| ())
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap().unwrap();
            }
        }
    }
}
