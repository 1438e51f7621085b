//! The native host's SQLite storage: [`agent_store_sqlite`] (re-exported
//! here), opened by [`open`] with this host's process liveness
//! ([`crate::process::owner_liveness`]), so that a lease whose owner process
//! has exited is taken over at once instead of waiting out its time-to-live.

use std::path::Path;
use std::sync::Arc;

pub use agent_store_sqlite::{
    BUSY_TIMEOUT, CommitHook, Liveness, LivenessCheck, OpenError, SqliteStorage,
};

use crate::process::owner_liveness;

/// Open (creating if needed) the database at `path` and migrate it; lease
/// owners are judged alive or dead through [`owner_liveness`].
pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStorage, OpenError> {
    SqliteStorage::open_with_liveness(path, Arc::new(owner_liveness)).await
}
