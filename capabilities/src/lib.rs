//! `agent-capabilities`: the vocabulary and the mechanism of authority.
//!
//! No async and no I/O. Time and randomness are passed in by the caller.

pub mod canonical;
pub mod scope;
pub mod vocab;

pub use scope::{Target, TargetScope};
pub use vocab::{
    EffectClass, EffectSet, Idempotency, Origin, OriginParseError, Sensitivity, Trust, is_read_only,
};
