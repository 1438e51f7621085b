//! `agent-capabilities`: the vocabulary and the mechanism of authority.
//!
//! No async and no I/O. Time and randomness are passed in by the caller.
//!
//! - [`vocab`]: effect classes, origins, trust and sensitivity labels.
//! - [`path`]: the workspace path policy ([`WorkspacePath`], SPEC S7.1), the
//!   one rule both workspace scopes and the workspace itself use.
//! - [`scope`]: target scopes and the targets they cover.
//! - [`canonical`]: RFC 8785 canonical JSON and SHA-256 fingerprints.
//! - [`token`]: capability tokens (mint, attenuate, verify, consume).
//! - [`policy`]: the approval decision (automatic, ask once, deny).
//!
//! ```
//! use agent_capabilities::*;
//!
//! // The supervisor holds the authority; the key comes from host entropy.
//! let authority = Authority::new("run-1", [9; 32]);
//! let fingerprint = Fingerprint::of(&serde_json::json!({"name": "write_file"}))?;
//! let cap = authority.mint(Grant {
//!     tool: "write_file".into(),
//!     fingerprint: fingerprint.clone(),
//!     origin: Origin::Builtin,
//!     effects: [EffectClass::WriteLocal].into(),
//!     scope: TargetScope::Workspace { prefix: "notes".into() },
//!     uses: Uses::ForRun,
//!     expires_at_ms: 60_000,
//! });
//! // A holder narrows it; tool actors verify it with a `Verifier`.
//! let narrowed = cap.attenuate(Caveat::Scope(TargetScope::Workspace { prefix: "notes/today".into() }));
//! let request = |path: &str| EffectRequest {
//!     run_id: "run-1".into(),
//!     tool: "write_file".into(),
//!     fingerprint: fingerprint.clone(),
//!     effects: [EffectClass::WriteLocal].into(),
//!     target: Target::WorkspacePath { path: path.into() },
//! };
//! let verifier = authority.verifier();
//! assert!(verifier.verify_wire(&narrowed.to_wire(), &request("notes/today/a.md"), 1_000).is_ok());
//! assert!(matches!(
//!     verifier.verify(&narrowed, &request("notes/old.md"), 1_000),
//!     Err(CapabilityError::OutOfScope { .. })
//! ));
//! # Ok::<(), CanonicalError>(())
//! ```

pub mod canonical;
pub mod path;
pub mod policy;
pub mod scope;
pub mod token;
pub mod vocab;

pub use canonical::{CanonicalError, Fingerprint, canonical_bytes, canonical_json, sha256_hex};
pub use path::{PathError, PathErrorKind, WorkspacePath};
pub use policy::{ApprovalIdentity, ApprovalMode, Decision, PolicyInput, decide};
pub use scope::{Target, TargetScope};
pub use token::{
    Authority, Capability, CapabilityError, Caveat, EffectRequest, Grant, MAX_EXPIRY_MS, Uses,
    Verified, Verifier,
};
pub use vocab::{
    EffectClass, EffectSet, Idempotency, Origin, OriginParseError, Sensitivity, Trust, is_read_only,
};
