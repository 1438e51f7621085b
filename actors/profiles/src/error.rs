//! `ProfileError`: every way a profile, a layer, a stored record, an
//! import or a legacy assistant can be refused, each naming what was wrong
//! and what to do.

use agent_kernel::host::StorageError;

use crate::precedence::LayerName;

/// A profile operation failed. Nothing stored changes when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// A profile field is out of its bounds (S10.1).
    #[error("profile field {field}: {why}")]
    Invalid { field: &'static str, why: String },
    /// A field of a precedence layer is out of its bounds (S10.2).
    #[error("{layer} layer, field {field}: {why}")]
    InvalidLayer {
        layer: LayerName,
        field: &'static str,
        why: String,
    },
    #[error("no profile {id}; list the profiles to see which exist")]
    NotFound { id: String },
    #[error("profile {id} has no revision {revision}; its latest is {latest}")]
    RevisionNotFound {
        id: String,
        revision: u64,
        latest: u64,
    },
    #[error("a profile {id} exists already; choose another id")]
    Exists { id: String },
    #[error(
        "profile {id} was saved meanwhile: the edit was based on revision {expected}, the latest is {latest}; reload it and edit again"
    )]
    Conflict {
        id: String,
        expected: u64,
        latest: u64,
    },
    #[error(
        "stored profile record at {key:?} does not decode ({detail}); it was left untouched, repair or remove it"
    )]
    Corrupt { key: String, detail: String },
    #[error(
        "stored profile record at {key:?} has layout version {found}, which this version does not read; it was left untouched"
    )]
    Format { key: String, found: u32 },
    #[error(
        "legacy assistant at {key:?} cannot be migrated ({why}); it was left untouched, edit it and read it again"
    )]
    Legacy { key: String, why: String },
    #[error("the profile export cannot be imported: {why}")]
    Import { why: String },
    #[error("{what} is {size} bytes, over the {max}-byte limit")]
    TooLarge {
        what: &'static str,
        size: usize,
        max: usize,
    },
    #[error("Skill {skill:?} is not allowed by the effective profile's Skill policy")]
    SkillNotAllowed { skill: String },
    #[error(transparent)]
    Storage(#[from] StorageError),
}
