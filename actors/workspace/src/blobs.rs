//! Reading content back from the blob store: a blob is returned only when
//! its bytes hash to its name, otherwise the typed `ContentMissing` error
//! (a workspace file's or an Artifact's content is gone or damaged). The
//! store and the Artifacts both read through here; freeing blobs is
//! [`crate::gc`]'s.

use agent_capabilities::canonical::sha256_hex;
use agent_kernel::host::Storage;

use crate::error::WorkspaceError;

/// The blob `hash`, verified against its hash; `ContentMissing` otherwise.
pub(crate) async fn load_verified(
    storage: &dyn Storage,
    hash: &str,
    what: &str,
) -> Result<Vec<u8>, WorkspaceError> {
    match storage.get_blob(hash).await? {
        Some(bytes) if sha256_hex(&bytes) == hash => Ok(bytes),
        _ => Err(WorkspaceError::ContentMissing {
            what: what.to_owned(),
            hash: hash.to_owned(),
        }),
    }
}
