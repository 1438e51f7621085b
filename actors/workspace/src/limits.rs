//! Every limit of the workspace and artifact actors, in one place (SPEC S7,
//! S5.8). Path limits are fixed; quotas have documented defaults that a host
//! may lower or raise per session through [`Quotas`].

// The path limits belong to the path policy, which lives in
// `agent-capabilities` so that capability scopes use it too.
pub use agent_capabilities::path::{MAX_DEPTH, MAX_PATH_BYTES, MAX_SEGMENT_BYTES};

// Which quota was exceeded is part of the error that reports it; named here
// too, beside the quotas themselves.
pub use crate::error::Quota;
use crate::error::WorkspaceError;

/// The folder reserved for large tool results (S5.8). The model may read,
/// list and delete below it, but not write, move or restore into it.
pub const RESULTS_FOLDER: &str = ".results";

/// Default most live files in one session's workspace.
pub const DEFAULT_MAX_FILES: u64 = 1_000;

/// Default largest single file, in bytes (10 MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Default most bytes one session stores: live files plus trashed files
/// (trashed content still occupies storage until the trash is emptied).
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 100 * 1024 * 1024;

/// Default most entries in one session's trash.
pub const DEFAULT_MAX_TRASH_ENTRIES: u64 = 1_000;

/// Default largest Artifact, in bytes (10 MiB).
pub const DEFAULT_MAX_ARTIFACT_BYTES: u64 = 10 * 1024 * 1024;

/// Longest Artifact name, in UTF-8 bytes.
pub const MAX_ARTIFACT_NAME_BYTES: usize = 255;

/// Longest MIME type, in bytes (RFC 6838 allows 127 for each half).
pub const MAX_MIME_BYTES: usize = 255;

/// Most bytes of file content one `read` returns to the model; a longer file
/// is read in windows (`offset`, `length`).
pub const MAX_READ_BYTES: u64 = 64 * 1024;

/// Most characters of a bounded summary of a spilled result (S5.8).
pub const MAX_SUMMARY_CHARS: usize = 2_000;

/// Per-session quotas. Every mutation that would exceed one fails with a
/// typed error naming the quota, its limit and what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quotas {
    /// Most live files ([`DEFAULT_MAX_FILES`]).
    pub max_files: u64,
    /// Largest single file in bytes ([`DEFAULT_MAX_FILE_BYTES`]).
    pub max_file_bytes: u64,
    /// Most bytes of live plus trashed files ([`DEFAULT_MAX_TOTAL_BYTES`]).
    pub max_total_bytes: u64,
    /// Most trash entries ([`DEFAULT_MAX_TRASH_ENTRIES`]).
    pub max_trash_entries: u64,
    /// Largest Artifact in bytes ([`DEFAULT_MAX_ARTIFACT_BYTES`]).
    pub max_artifact_bytes: u64,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_files: DEFAULT_MAX_FILES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_trash_entries: DEFAULT_MAX_TRASH_ENTRIES,
            max_artifact_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
        }
    }
}

impl Quotas {
    /// The single-file rule: a file of `size` bytes fits, or the typed
    /// quota error. Every writer asks here (the store before a write, a
    /// host before it reads an attachment's bytes at all).
    pub fn check_file_bytes(&self, size: u64) -> Result<(), WorkspaceError> {
        if size > self.max_file_bytes {
            return Err(WorkspaceError::QuotaExceeded {
                quota: Quota::FileBytes,
                limit: self.max_file_bytes,
                requested: size,
            });
        }
        Ok(())
    }
}
