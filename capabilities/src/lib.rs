//! `agent-capabilities`: the vocabulary and the mechanism of authority.
//!
//! No async and no I/O. Time and randomness are passed in by the caller.

pub mod canonical;
pub mod policy;
pub mod scope;
pub mod token;
pub mod vocab;

pub use canonical::{CanonicalError, Fingerprint, canonical_bytes, canonical_json, sha256_hex};
pub use policy::{ApprovalIdentity, ApprovalMode, Decision, PolicyInput, decide};
pub use scope::{Target, TargetScope};
pub use token::{
    Authority, Capability, CapabilityError, Caveat, EffectRequest, Grant, MAX_EXPIRY_MS, Uses,
    Verified, Verifier,
};
pub use vocab::{
    EffectClass, EffectSet, Idempotency, Origin, OriginParseError, Sensitivity, Trust, is_read_only,
};
