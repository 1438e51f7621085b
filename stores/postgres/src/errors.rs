//! The errors of this store: [`OpenError`] for connecting and migrating, and
//! the one place that sorts PostgreSQL's failures into the kernel's
//! `StorageError` (unreachable server → `Unavailable`, a serialization
//! conflict → taken again, anything else → `Backend`).

use agent_kernel::host::StorageError;
use tokio_postgres::error::SqlState;

/// Opening the store failed. Each variant says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    #[error(
        "the PostgreSQL address is not valid ({detail}); write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
    )]
    InvalidUrl { detail: String },
    #[error(
        "cannot reach PostgreSQL at {target}: {detail}; check that the server runs, listens there and accepts this user"
    )]
    Unavailable { target: String, detail: String },
    #[error(
        "the database at {target} has agentrt schema version {found}, newer than this agentrt knows ({known}); use a newer agentrt or another database"
    )]
    TooNew {
        target: String,
        found: i64,
        known: i64,
    },
    #[error("the database at {target} could not be prepared: {detail}")]
    Setup { target: String, detail: String },
}

/// What one failed statement means for the operation that ran it.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A serialization conflict or deadlock: nothing was written; take the
    /// whole transaction again.
    Retry(String),
    /// Final: report this to the caller.
    Final(StorageError),
}

impl From<StorageError> for Failure {
    fn from(e: StorageError) -> Self {
        Failure::Final(e)
    }
}

/// True when `code` says the server could not be reached or is going away:
/// connection exceptions (08), operator intervention (57P01–57P03, a server
/// shutting down or starting), insufficient resources (53: too many
/// connections, disk full).
fn unavailable_code(code: &SqlState) -> bool {
    let c = code.code();
    c.starts_with("08") || c.starts_with("53") || matches!(c, "57P01" | "57P02" | "57P03")
}

/// The client's message, with the server's own message when there is one
/// (`tokio_postgres::Error` alone prints only "db error").
pub(crate) fn describe_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {} ({detail})", db.severity(), db.message()),
            None => format!("{}: {}", db.severity(), db.message()),
        },
        None => e.to_string(),
    }
}

/// Sort a client error. `target` names the database (no password) and
/// `in_commit` says whether `COMMIT` itself failed, whose outcome the
/// client then cannot know.
pub(crate) fn classify(target: &str, e: &tokio_postgres::Error, in_commit: bool) -> Failure {
    if let Some(code) = e.code() {
        if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
        {
            return Failure::Retry(describe_error(e));
        }
        if unavailable_code(code) {
            return Failure::Final(unavailable(target, e, in_commit));
        }
        return Failure::Final(StorageError::Backend(format!(
            "PostgreSQL at {target} refused a statement ({code}: {e}); nothing was written",
            code = code.code(),
            e = describe_error(e)
        )));
    }
    let io = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
    if e.is_closed() || io {
        return Failure::Final(unavailable(target, e, in_commit));
    }
    Failure::Final(StorageError::Backend(format!(
        "PostgreSQL client error with {target} ({e}); nothing was written"
    )))
}

fn unavailable(target: &str, e: &tokio_postgres::Error, in_commit: bool) -> StorageError {
    let e = describe_error(e);
    if in_commit {
        StorageError::Unavailable(format!(
            "the connection to PostgreSQL at {target} was lost while committing ({e}); the write may or may not have been applied: read the state again before deciding"
        ))
    } else {
        StorageError::Unavailable(format!(
            "PostgreSQL at {target} is unreachable ({e}); nothing was written, retry when it is back"
        ))
    }
}

/// The error for a statement outside any transaction (a read, a blob put).
pub(crate) fn single(target: &str, e: &tokio_postgres::Error) -> StorageError {
    match classify(target, e, false) {
        Failure::Final(err) => err,
        // A single statement conflicts only under serializable isolation,
        // which it does not use; report it rather than loop.
        Failure::Retry(detail) => StorageError::Unavailable(format!(
            "PostgreSQL at {target} aborted a statement on a conflict ({detail}); retry"
        )),
    }
}

/// The error when no pooled connection could be had.
pub(crate) fn pool(target: &str, e: &deadpool_postgres::PoolError) -> StorageError {
    StorageError::Unavailable(format!(
        "no connection to PostgreSQL at {target} ({e}); nothing was written, retry when the server is back"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_and_shutdown_codes_are_unavailable_others_are_not() {
        for code in [
            SqlState::CONNECTION_EXCEPTION,
            SqlState::CONNECTION_FAILURE,
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::DISK_FULL,
        ] {
            assert!(unavailable_code(&code), "{code:?}");
        }
        for code in [
            SqlState::UNIQUE_VIOLATION,
            SqlState::SYNTAX_ERROR,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::QUERY_CANCELED,
        ] {
            assert!(!unavailable_code(&code), "{code:?}");
        }
    }
}
