//! Capability tokens: the [`Authority`] that mints them, the [`Verifier`]
//! that tool actors hold, attenuation by [`Caveat`]s, and verification
//! (including consumption of one-time tokens).
//!
//! A token is a macaroon-style HMAC-SHA-256 chain:
//! `tag_0 = HMAC(key, enc(base))` where the base holds the run id, a
//! per-token nonce and the [`Grant`]; `tag_{i+1} = HMAC(tag_i,
//! enc(caveat_i))`. `enc` is the JSON of the typed value as serde writes
//! it (`mac_input`): deterministic (fixed field order, ordered sets, no
//! floats) and injective (tagged enums), so it is recomputed from the
//! fields at every verification, never trusted from the token; it is much
//! cheaper than RFC 8785 canonicalisation, which the wire form keeps. Anyone holding a token can append a caveat (the
//! new tag is computed from the old one), nobody without the key can remove
//! or reorder one, and every caveat can only narrow: verification checks the
//! base grant *and* every caveat. The key lives in memory only, so a reload
//! invalidates every outstanding token, and is wiped when the authority and
//! its last verifier are dropped.
//!
//! Integers in the wire form are canonical JSON numbers, exact only up to
//! 2^53 (see [`crate::canonical`]); expiry times are therefore clamped to
//! [`MAX_EXPIRY_MS`] when minted and larger values are refused as malformed.
//!
//! This module owns the token types, the wire form, minting and the
//! verifier handles; checking a token against a request is in `verify`.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use zeroize::Zeroize;

use crate::canonical::{Fingerprint, canonical_bytes_of_plain};
use crate::scope::{Target, TargetScope};
use crate::vocab::{EffectClass, EffectSet, Origin};

mod verify;

use verify::Consume;

type HmacSha256 = Hmac<Sha256>;

/// The largest expiry a token can carry: 2^53 - 1 ms (about 285,000 years),
/// the largest integer canonical JSON represents exactly.
pub const MAX_EXPIRY_MS: u64 = (1 << 53) - 1;

/// Longest wire form accepted by [`Verifier::verify_wire`].
const MAX_WIRE_LEN: usize = 64 * 1024;

/// Version of the base and wire layout.
const FORMAT_VERSION: u32 = 1;

/// How often a capability may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Uses {
    /// Consumed by its first successful verification.
    Once,
    /// Any number of times until it expires or the run ends.
    ForRun,
}

/// What the [`Authority`] grants in one token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// The tool name.
    pub tool: String,
    /// The tool's definition fingerprint.
    pub fingerprint: Fingerprint,
    /// Where the tool comes from.
    pub origin: Origin,
    /// The effect classes granted.
    pub effects: EffectSet,
    /// The targets the tool may touch.
    pub scope: TargetScope,
    /// How often the token may be used.
    pub uses: Uses,
    /// Expiry, in ms since the Unix epoch; the token is expired when `now_ms >= expires_at_ms`.
    pub expires_at_ms: u64,
}

/// A restriction a holder appends to a token. Caveats only ever narrow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "caveat", content = "value", rename_all = "snake_case")]
pub enum Caveat {
    /// The tool must be one of these (a Skill narrowing its tool set).
    Tools(BTreeSet<String>),
    /// The target must also be covered by this scope, which must lie within the granted one.
    Scope(TargetScope),
    /// An earlier expiry; the earliest of all expiries applies.
    ExpiresAt(u64),
    /// The requested effects must all be in this set.
    Effects(EffectSet),
    /// `Uses(Once)` makes the token one-time; `Uses(ForRun)` changes nothing.
    Uses(Uses),
}

/// One attempted use of a capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectRequest {
    /// The run the invocation belongs to.
    pub run_id: String,
    /// The tool being invoked.
    pub tool: String,
    /// The definition fingerprint the dispatcher computed for it.
    pub fingerprint: Fingerprint,
    /// The effects this invocation has.
    pub effects: EffectSet,
    /// What this invocation touches.
    pub target: Target,
}

/// Why a capability was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    /// The HMAC chain does not verify.
    #[error(
        "capability tag does not verify: the token was altered, a caveat was dropped or \
         reordered, or it was minted by another authority (for example before a reload); \
         request a new capability"
    )]
    BadTag,
    /// The token could not be decoded.
    #[error("malformed capability: {0}")]
    Malformed(String),
    /// The token or the request belongs to another run.
    #[error(
        "capability is for run {token_run:?} but this authority serves run {expected:?} (request run {request_run:?})"
    )]
    WrongRun {
        expected: String,
        token_run: String,
        request_run: String,
    },
    /// The request names a tool the token does not grant.
    #[error("capability does not grant tool {requested:?}: {why}")]
    WrongTool { requested: String, why: String },
    /// The tool definition changed since the grant.
    #[error(
        "tool {tool:?} has fingerprint {found} but the capability was granted for {granted}; the definition changed, so approval is needed again"
    )]
    WrongFingerprint {
        tool: String,
        granted: Fingerprint,
        found: Fingerprint,
    },
    /// The request has an effect the token does not grant.
    #[error("capability for tool {tool:?} does not grant effect {effect}")]
    EffectNotGranted { tool: String, effect: EffectClass },
    /// The target is outside the granted scope, or a caveat tried to widen it.
    #[error("capability for tool {tool:?} is out of scope: {detail}")]
    OutOfScope { tool: String, detail: String },
    /// The token (or one of its caveats) has expired.
    #[error("capability expired at {expires_at_ms} ms (now {now_ms} ms); request a new one")]
    Expired { expires_at_ms: u64, now_ms: u64 },
    /// A one-time token was used before.
    #[error("this one-time capability was already used; a new approval is needed")]
    AlreadyUsed,
}

/// The base of a token: what `tag_0` is computed over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Base {
    v: u32,
    run_id: String,
    nonce: String,
    grant: Grant,
}

/// The wire layout (canonical JSON, then base64url without padding).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    base: Base,
    caveats: Vec<Caveat>,
    tag: String,
}

/// An unforgeable grant to perform effects with one tool. No public
/// constructor: only [`Authority::mint`] makes one, and holders can only
/// narrow it with [`Capability::attenuate`].
#[derive(Clone)]
pub struct Capability {
    base: Base,
    caveats: Vec<Caveat>,
    tag: [u8; 32],
}

impl fmt::Debug for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capability")
            .field("run_id", &self.base.run_id)
            .field("nonce", &self.base.nonce)
            .field("grant", &self.base.grant)
            .field("caveats", &self.caveats)
            .finish_non_exhaustive()
    }
}

impl Capability {
    /// A narrower token: this one plus `caveat`. No caveat can widen.
    pub fn attenuate(&self, caveat: Caveat) -> Capability {
        let caveat = match caveat {
            Caveat::ExpiresAt(ms) => Caveat::ExpiresAt(ms.min(MAX_EXPIRY_MS)),
            other => other,
        };
        let tag = hmac32(&self.tag, &mac_input_of_plain(&caveat));
        let mut caveats = self.caveats.clone();
        caveats.push(caveat);
        Capability {
            base: self.base.clone(),
            caveats,
            tag,
        }
    }

    /// The base grant (before caveats).
    pub fn grant(&self) -> &Grant {
        &self.base.grant
    }

    /// The caveats, oldest first.
    pub fn caveats(&self) -> &[Caveat] {
        &self.caveats
    }

    /// The run this token belongs to.
    pub fn run_id(&self) -> &str {
        &self.base.run_id
    }

    /// The token's unique nonce (hex).
    pub fn nonce(&self) -> &str {
        &self.base.nonce
    }

    /// The token as text for messages and the journal: base64url (no
    /// padding) of its canonical JSON. Read back only by [`Verifier::verify_wire`].
    pub fn to_wire(&self) -> String {
        let wire = Wire {
            base: self.base.clone(),
            caveats: self.caveats.clone(),
            tag: hex::encode(self.tag),
        };
        URL_SAFE_NO_PAD.encode(canonical_bytes_of_plain(&wire))
    }

    fn from_wire(wire: &str) -> Result<Capability, CapabilityError> {
        if wire.len() > MAX_WIRE_LEN {
            return Err(CapabilityError::Malformed(format!(
                "wire form is {} bytes, longer than the {MAX_WIRE_LEN}-byte limit",
                wire.len()
            )));
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(wire.trim())
            .map_err(|e| CapabilityError::Malformed(format!("not base64url: {e}")))?;
        let parsed: Wire = serde_json::from_slice(&bytes)
            .map_err(|e| CapabilityError::Malformed(format!("not a capability: {e}")))?;
        let mut tag = [0u8; 32];
        hex::decode_to_slice(&parsed.tag, &mut tag)
            .map_err(|e| CapabilityError::Malformed(format!("tag is not 32 hex bytes: {e}")))?;
        Ok(Capability {
            base: parsed.base,
            caveats: parsed.caveats,
            tag,
        })
    }
}

/// What a successful verification proves: the effective grant after every caveat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    tool: String,
    origin: Origin,
    fingerprint: Fingerprint,
    effects: EffectSet,
    scope: TargetScope,
    uses: Uses,
    expires_at_ms: u64,
    nonce: String,
}

impl Verified {
    /// The granted tool.
    pub fn tool(&self) -> &str {
        &self.tool
    }
    /// The tool's origin.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }
    /// The granted definition fingerprint.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }
    /// The granted effects, narrowed by every effects caveat.
    pub fn effects(&self) -> &EffectSet {
        &self.effects
    }
    /// The granted scope, narrowed by every scope caveat.
    pub fn scope(&self) -> &TargetScope {
        &self.scope
    }
    /// `Once` when the token was one-time (and is now consumed).
    pub fn uses(&self) -> Uses {
        self.uses
    }
    /// The earliest expiry of the base and its caveats.
    pub fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
    /// The token's nonce, for receipts.
    pub fn nonce(&self) -> &str {
        &self.nonce
    }
}

/// State shared by an [`Authority`] and its [`Verifier`]s.
struct Shared {
    run_id: String,
    key: [u8; 32],
    consumed: Mutex<HashSet<String>>,
}

impl Shared {
    /// Overwrite the key with zeros (volatile writes the optimiser keeps).
    fn wipe_key(&mut self) {
        self.key.zeroize();
    }
}

impl Drop for Shared {
    /// When the authority and its last verifier are gone (the run ended or
    /// its supervisor stopped), the key is wiped, not left in freed memory.
    fn drop(&mut self) {
        self.wipe_key();
    }
}

/// Mints capabilities for one run. Held by the supervisor alone.
///
/// Its key comes from the host's entropy and lives in memory only: it is
/// neither `Serialize` nor `Clone`, and `Debug` does not show it.
pub struct Authority {
    shared: Arc<Shared>,
    minted: AtomicU64,
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authority")
            .field("run_id", &self.shared.run_id)
            .field("key", &"<hidden>")
            .field("minted", &self.minted.load(Ordering::Relaxed))
            .finish()
    }
}

impl Authority {
    /// An authority for `run_id` with a random 256-bit `key` from the host's entropy.
    ///
    /// This is where authority enters the system: everything it mints is
    /// trusted by every [`Verifier`] it hands out.
    pub fn new(run_id: impl Into<String>, key: [u8; 32]) -> Authority {
        Authority {
            shared: Arc::new(Shared {
                run_id: run_id.into(),
                key,
                consumed: Mutex::new(HashSet::new()),
            }),
            minted: AtomicU64::new(0),
        }
    }

    /// The run this authority serves.
    pub fn run_id(&self) -> &str {
        &self.shared.run_id
    }

    /// A new token for `grant`, with a nonce unique to this authority
    /// (HMAC of a counter under the key, so no randomness is needed).
    /// An expiry beyond [`MAX_EXPIRY_MS`] is clamped to it.
    pub fn mint(&self, mut grant: Grant) -> Capability {
        grant.expires_at_ms = grant.expires_at_ms.min(MAX_EXPIRY_MS);
        let counter = self.minted.fetch_add(1, Ordering::Relaxed);
        // The nonce message starts with `a`, every base starts with `{`:
        // the two uses of the key never MAC the same bytes.
        let mut msg = b"agent-capabilities/nonce/v1/".to_vec();
        msg.extend_from_slice(&counter.to_be_bytes());
        let nonce = hex::encode(&hmac32(&self.shared.key, &msg)[..16]);
        let base = Base {
            v: FORMAT_VERSION,
            run_id: self.shared.run_id.clone(),
            nonce,
            grant,
        };
        let tag = hmac32(&self.shared.key, &mac_input_of_plain(&base));
        Capability {
            base,
            caveats: Vec::new(),
            tag,
        }
    }

    /// A handle that verifies (and consumes) but cannot mint; it shares the
    /// consumed-token set with this authority and every other verifier.
    pub fn verifier(&self) -> Verifier {
        Verifier {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Verifies capabilities for one run; cannot mint. Tool actors hold this.
#[derive(Clone)]
pub struct Verifier {
    shared: Arc<Shared>,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("run_id", &self.shared.run_id)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// The run this verifier serves.
    pub fn run_id(&self) -> &str {
        &self.shared.run_id
    }

    /// Checks `cap` against `request` at `now_ms`; consumes it when
    /// one-time. (An [`Authority`] verifies through its
    /// [`Authority::verifier`]: one verifying path.)
    pub fn verify(
        &self,
        cap: &Capability,
        request: &EffectRequest,
        now_ms: u64,
    ) -> Result<Verified, CapabilityError> {
        self.shared.verify(cap, request, now_ms)
    }

    /// Everything [`Verifier::verify`] checks, including that a one-time
    /// token is still unused, without using it up. A forwarding actor calls
    /// this; the actor that performs the effect then calls `verify`.
    pub fn check(
        &self,
        cap: &Capability,
        request: &EffectRequest,
        now_ms: u64,
    ) -> Result<Verified, CapabilityError> {
        self.shared.verify_with(cap, request, now_ms, Consume::No)
    }

    /// Decodes a wire form from [`Capability::to_wire`] and verifies it.
    pub fn verify_wire(
        &self,
        wire: &str,
        request: &EffectRequest,
        now_ms: u64,
    ) -> Result<Verified, CapabilityError> {
        self.shared.verify_wire(wire, request, now_ms)
    }
}

/// HMAC-SHA-256 with a 32-byte key.
fn hmac32(key: &[u8; 32], msg: &[u8]) -> [u8; 32] {
    // HMAC zero-pads keys shorter than the 64-byte block, so this is
    // exactly HMAC with the 32-byte key, without a fallible constructor.
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let mut mac = <HmacSha256 as hmac::digest::KeyInit>::new(&block.into());
    block.zeroize();
    mac.update(msg);
    mac.finalize().into_bytes().into()
}

/// What a tag MACs for `value`: its JSON as serde writes the typed value.
fn mac_input<T: Serialize>(value: &T) -> Result<Vec<u8>, CapabilityError> {
    let mut out = Vec::with_capacity(512);
    serde_json::to_writer(&mut out, value)
        .map_err(|e| CapabilityError::Malformed(e.to_string()))?;
    Ok(out)
}

/// [`mac_input`] of the crate's own plain types, which always serialise.
fn mac_input_of_plain<T: Serialize>(value: &T) -> Vec<u8> {
    // Invariant: strings, integers, sets, sequences and tagged enums only.
    #[allow(clippy::expect_used)]
    mac_input(value).expect("plain data always serialises")
}

#[cfg(test)]
mod tests;
