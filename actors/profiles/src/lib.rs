//! `agent-profiles`: Agent Profiles (SPEC S10), the part of issue 20 that
//! owns the profile itself; the hosts, the CLI and the browser API wire it
//! in later.
//!
//! - [`profile`]: `AgentProfileV2` (S10.1) and its bounds, validated with
//!   errors that name the field;
//! - [`precedence`]: the five layers (global default → Workspace → Agent
//!   Profile → session override → turn reference) and [`resolve`], one pure
//!   function whose capability-bearing fields only narrow (S10.2), the
//!   caveats that carry the narrowing into capabilities, and the
//!   [`RunSettings`] a run's `RunConfig` takes;
//! - [`revision`]: the stored records, content hashes and the
//!   field-by-field diff (S10.3);
//! - [`store`]: [`ProfileStore`], revisions, rollback, fork, import and
//!   lazy legacy migration over the host's storage, in fenced,
//!   compare-and-set batches (S10.3);
//! - [`export`]: the shareable export without credentials (S10.3);
//! - [`legacy`]: legacy assistants and their chat-only profiles (S10.3);
//! - [`error`]: the error type, [`ProfileError`].
//!
//! # Design
//!
//! A profile is data and precedence is a pure function: the run's
//! [`Effective`] settings come from [`resolve`] alone, so a host and a test
//! see the same result, and every widening a later layer asks for is
//! listed in [`Effective::refused`] instead of granted. The narrowing does
//! not stay a host-side check: [`Effective::caveats`] are attenuations the
//! run adds to every capability it mints, and the capability verifier
//! refuses a tool outside them even if a host forgot to look.
//!
//! Like every actor crate it names no tokio, SQLite or web-sys: storage
//! and time come from the host (`agent_kernel::host`). It depends on the
//! kernel (storage, budgets, the run mode, the tools' per-run settings)
//! and the capabilities crate (approval modes, caveats, canonical JSON for
//! content hashes and exports) only: actor crates do not depend on each
//! other (`cargo xtask layering`), so the supervisor's `RunConfig` is
//! filled by the assembly from [`RunSettings`] (what
//! [`Effective::run_settings`] returns; the tests show the mapping).
//!
//! ```
//! use agent_capabilities::{ApprovalMode, Caveat};
//! use agent_profiles::{AgentProfileV2, Layer, Layers, ProfileId, ProfileLayer, resolve};
//!
//! let mut profile = AgentProfileV2::new(ProfileId::new("writer")?, "Writer");
//! profile.tools = Some(["fetch_url".to_string(), "write_file".to_string()].into());
//! profile.validate()?;
//!
//! // The turn reference asks for a tool the profile does not allow and for
//! // strict approval: the tool is refused, the stricter mode is kept.
//! let layers = Layers {
//!     profile: Some(ProfileLayer::of(&profile, 3)),
//!     turn: Layer {
//!         tools: Some(["write_file".to_string(), "run_javascript".to_string()].into()),
//!         approval: Some(ApprovalMode::Strict),
//!         ..Layer::default()
//!     },
//!     ..Layers::default()
//! };
//! let effective = resolve(&layers);
//! assert_eq!(effective.tools, Some(["write_file".to_string()].into()));
//! assert_eq!(effective.approval, ApprovalMode::Strict);
//! assert_eq!(effective.refused[0].field, "tools");
//! assert_eq!(effective.profile.as_ref().map(|p| p.revision), Some(3));
//! assert_eq!(effective.caveats(), vec![Caveat::Tools(["write_file".to_string()].into())]);
//! # Ok::<(), agent_profiles::ProfileError>(())
//! ```

pub mod error;
pub mod export;
pub mod legacy;
pub mod precedence;
pub mod profile;
pub mod revision;
pub mod store;

pub use error::ProfileError;
pub use export::{ShareableProfile, export_profile, parse_export};
pub use legacy::LegacyAssistant;
pub use precedence::{
    Effective, Layer, LayerName, Layers, ProfileLayer, ProfileRef, Refused, RunSettings,
    narrow_profile, resolve, strictness,
};
pub use profile::{
    AgentProfileV2, Credentials, MemoryScope, MemoryScopes, ModelChoice, ProfileId, ProfileMode,
    ReasoningEffort, ReasoningSettings, SearchSettings,
};
pub use revision::{FieldChange, ForkOrigin, ProfileHead, Revision, RevisionCause, RunUse, diff};
pub use store::{Imported, ProfileList, ProfileStore, ProfileSummary};
