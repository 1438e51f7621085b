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

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

use crate::canonical::{Fingerprint, canonical_bytes_of_plain};
use crate::scope::{Target, TargetScope};
use crate::vocab::{EffectClass, EffectSet, Origin};

type HmacSha256 = Hmac<Sha256>;

/// The largest expiry a token can carry: 2^53 - 1 ms (about 285,000 years),
/// the largest integer canonical JSON represents exactly.
pub const MAX_EXPIRY_MS: u64 = (1 << 53) - 1;

/// Longest wire form accepted by [`Authority::verify_wire`].
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
    /// padding) of its canonical JSON. Read back only by [`Authority::verify_wire`].
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

/// Whether a successful verification uses up a one-time token.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Consume {
    Yes,
    /// Check everything, including that a one-time token is still unused, but leave it unused.
    No,
}

impl Shared {
    fn verify(
        &self,
        cap: &Capability,
        request: &EffectRequest,
        now_ms: u64,
    ) -> Result<Verified, CapabilityError> {
        self.verify_with(cap, request, now_ms, Consume::Yes)
    }

    fn verify_with(
        &self,
        cap: &Capability,
        request: &EffectRequest,
        now_ms: u64,
        consume: Consume,
    ) -> Result<Verified, CapabilityError> {
        // 1. The chain, before trusting anything in the token.
        let mut tag = hmac32(&self.key, &mac_input(&cap.base)?);
        for caveat in &cap.caveats {
            tag = hmac32(&tag, &mac_input(caveat)?);
        }
        if !bool::from(tag.ct_eq(&cap.tag)) {
            return Err(CapabilityError::BadTag);
        }
        let base = &cap.base;
        let grant = &base.grant;
        if base.v != FORMAT_VERSION {
            return Err(CapabilityError::Malformed(format!(
                "format version {} is not {FORMAT_VERSION}",
                base.v
            )));
        }
        let too_late = grant.expires_at_ms > MAX_EXPIRY_MS
            || cap
                .caveats
                .iter()
                .any(|c| matches!(c, Caveat::ExpiresAt(ms) if *ms > MAX_EXPIRY_MS));
        if too_late {
            return Err(CapabilityError::Malformed(
                "expiry beyond 2^53 - 1 ms cannot be represented exactly".to_owned(),
            ));
        }

        // 2. Run.
        if base.run_id != self.run_id || request.run_id != self.run_id {
            return Err(CapabilityError::WrongRun {
                expected: self.run_id.clone(),
                token_run: base.run_id.clone(),
                request_run: request.run_id.clone(),
            });
        }

        // 3. Tool and fingerprint.
        if request.tool != grant.tool {
            return Err(CapabilityError::WrongTool {
                requested: request.tool.clone(),
                why: format!("it was granted for {:?}", grant.tool),
            });
        }
        for caveat in &cap.caveats {
            if let Caveat::Tools(tools) = caveat
                && !tools.contains(&request.tool)
            {
                return Err(CapabilityError::WrongTool {
                    requested: request.tool.clone(),
                    why: format!(
                        "it was narrowed to {}",
                        tools.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        }
        if request.fingerprint != grant.fingerprint {
            return Err(CapabilityError::WrongFingerprint {
                tool: grant.tool.clone(),
                granted: grant.fingerprint.clone(),
                found: request.fingerprint.clone(),
            });
        }

        // 4. Effects, scope, expiry, uses: base and every caveat.
        let mut effects = grant.effects.clone();
        let mut scope = grant.scope.clone();
        let mut expires_at_ms = grant.expires_at_ms;
        let mut uses = grant.uses;
        for caveat in &cap.caveats {
            match caveat {
                Caveat::Tools(_) => {}
                Caveat::Effects(allowed) => {
                    effects = effects.intersection(allowed).copied().collect();
                }
                Caveat::Scope(narrower) => {
                    if !narrower.is_within(&grant.scope) {
                        return Err(CapabilityError::OutOfScope {
                            tool: grant.tool.clone(),
                            detail: format!(
                                "a caveat's scope ({}) is not within the granted scope ({})",
                                narrower.summary(),
                                grant.scope.summary()
                            ),
                        });
                    }
                    scope = scope.intersect(narrower);
                }
                Caveat::ExpiresAt(ms) => expires_at_ms = expires_at_ms.min(*ms),
                Caveat::Uses(Uses::Once) => uses = Uses::Once,
                Caveat::Uses(Uses::ForRun) => {}
            }
        }
        if let Some(effect) = request.effects.iter().find(|e| !effects.contains(e)) {
            return Err(CapabilityError::EffectNotGranted {
                tool: grant.tool.clone(),
                effect: *effect,
            });
        }
        let in_scope = grant.scope.covers(&request.target)
            && cap.caveats.iter().all(|c| match c {
                Caveat::Scope(s) => s.covers(&request.target),
                _ => true,
            });
        if !in_scope {
            return Err(CapabilityError::OutOfScope {
                tool: grant.tool.clone(),
                detail: format!(
                    "{} is outside {}",
                    request.target.summary(),
                    scope.summary()
                ),
            });
        }
        if now_ms >= expires_at_ms {
            return Err(CapabilityError::Expired {
                expires_at_ms,
                now_ms,
            });
        }

        // 5. Consume last, so a refused attempt does not use up the token.
        if uses == Uses::Once {
            // A poisoned lock only means another thread panicked while
            // holding it; the set itself is still consistent.
            let mut consumed = self
                .consumed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let unused = match consume {
                Consume::Yes => consumed.insert(base.nonce.clone()),
                Consume::No => !consumed.contains(&base.nonce),
            };
            if !unused {
                return Err(CapabilityError::AlreadyUsed);
            }
        }
        Ok(Verified {
            tool: grant.tool.clone(),
            origin: grant.origin.clone(),
            fingerprint: grant.fingerprint.clone(),
            effects,
            scope,
            uses,
            expires_at_ms,
            nonce: base.nonce.clone(),
        })
    }

    fn verify_wire(
        &self,
        wire: &str,
        request: &EffectRequest,
        now_ms: u64,
    ) -> Result<Verified, CapabilityError> {
        self.verify(&Capability::from_wire(wire)?, request, now_ms)
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

    /// Checks `cap` against `request` at `now_ms`; consumes it when one-time.
    pub fn verify(
        &self,
        cap: &Capability,
        request: &EffectRequest,
        now_ms: u64,
    ) -> Result<Verified, CapabilityError> {
        self.shared.verify(cap, request, now_ms)
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

    /// Same as [`Authority::verify`].
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

    /// Same as [`Authority::verify_wire`].
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
mod tests {
    use super::*;

    #[test]
    fn the_key_is_wiped_when_the_last_holder_lets_go() {
        let mut shared = Shared {
            run_id: RUN.into(),
            key: KEY,
            consumed: Mutex::new(HashSet::new()),
        };
        shared.wipe_key();
        assert_eq!(shared.key, [0; 32]);
    }

    const KEY: [u8; 32] = [7; 32];
    const RUN: &str = "run-1";
    const NOW: u64 = 1_000_000;
    const EXPIRES: u64 = 2_000_000;

    fn fp(c: char) -> Fingerprint {
        Fingerprint::from_hex(&c.to_string().repeat(64)).unwrap()
    }

    fn effects(list: &[EffectClass]) -> EffectSet {
        list.iter().copied().collect()
    }

    fn ws(prefix: &str) -> TargetScope {
        TargetScope::Workspace {
            prefix: prefix.to_owned(),
        }
    }

    fn path(p: &str) -> Target {
        Target::WorkspacePath { path: p.to_owned() }
    }

    fn grant(uses: Uses) -> Grant {
        Grant {
            tool: "write_file".to_owned(),
            fingerprint: fp('a'),
            origin: Origin::Builtin,
            effects: effects(&[EffectClass::ReadLocal, EffectClass::WriteLocal]),
            scope: ws("notes"),
            uses,
            expires_at_ms: EXPIRES,
        }
    }

    fn request(target: &str) -> EffectRequest {
        EffectRequest {
            run_id: RUN.to_owned(),
            tool: "write_file".to_owned(),
            fingerprint: fp('a'),
            effects: effects(&[EffectClass::WriteLocal]),
            target: path(target),
        }
    }

    fn setup() -> (Authority, Capability) {
        let authority = Authority::new(RUN, KEY);
        let cap = authority.mint(grant(Uses::ForRun));
        (authority, cap)
    }

    /// Decodes a wire form, lets `edit` change its JSON, re-encodes it.
    fn tamper_wire(wire: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
        let bytes = URL_SAFE_NO_PAD.decode(wire).unwrap();
        let mut json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        edit(&mut json);
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json).unwrap())
    }

    #[test]
    fn minted_token_verifies_in_scope() {
        let (authority, cap) = setup();
        let verified = authority.verify(&cap, &request("notes/a.md"), NOW).unwrap();
        assert_eq!(verified.tool(), "write_file");
        assert_eq!(verified.uses(), Uses::ForRun);
        assert_eq!(verified.scope(), &ws("notes"));
        assert_eq!(verified.expires_at_ms(), EXPIRES);
        // ForRun: any number of times.
        assert!(authority.verify(&cap, &request("notes/b.md"), NOW).is_ok());
    }

    #[test]
    fn wire_round_trip_verifies() {
        let (authority, cap) = setup();
        let narrowed = cap.attenuate(Caveat::Scope(ws("notes/sub")));
        let wire = narrowed.to_wire();
        assert!(
            wire.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        let verified = authority
            .verify_wire(&wire, &request("notes/sub/x.md"), NOW)
            .unwrap();
        assert_eq!(verified.scope(), &ws("notes/sub"));
    }

    #[test]
    fn refuses_flipped_bit_in_tag() {
        let (authority, cap) = setup();
        for bit in [0, 7, 100, 255] {
            let mut forged = cap.clone();
            forged.tag[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                authority.verify(&forged, &request("notes/a.md"), NOW),
                Err(CapabilityError::BadTag)
            );
        }
        let wire = tamper_wire(&cap.to_wire(), |j| {
            let tag = j["tag"].as_str().unwrap().to_owned();
            let flipped = if tag.starts_with('0') { "1" } else { "0" };
            j["tag"] = format!("{flipped}{}", &tag[1..]).into();
        });
        assert_eq!(
            authority.verify_wire(&wire, &request("notes/a.md"), NOW),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn refuses_dropped_caveat() {
        let (authority, cap) = setup();
        let narrowed = cap
            .attenuate(Caveat::Scope(ws("notes/sub")))
            .attenuate(Caveat::ExpiresAt(NOW + 10));
        let mut dropped = narrowed.clone();
        dropped.caveats.remove(0);
        assert_eq!(
            authority.verify(&dropped, &request("notes/other.md"), NOW),
            Err(CapabilityError::BadTag)
        );
        let wire = tamper_wire(&narrowed.to_wire(), |j| {
            j["caveats"].as_array_mut().unwrap().remove(0);
        });
        assert_eq!(
            authority.verify_wire(&wire, &request("notes/other.md"), NOW),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn refuses_reordered_caveats() {
        let (authority, cap) = setup();
        let narrowed = cap
            .attenuate(Caveat::Scope(ws("notes/sub")))
            .attenuate(Caveat::ExpiresAt(NOW + 10));
        let mut reordered = narrowed.clone();
        reordered.caveats.swap(0, 1);
        assert_eq!(
            authority.verify(&reordered, &request("notes/sub/a.md"), NOW),
            Err(CapabilityError::BadTag)
        );
        let wire = tamper_wire(&narrowed.to_wire(), |j| {
            j["caveats"].as_array_mut().unwrap().swap(0, 1);
        });
        assert_eq!(
            authority.verify_wire(&wire, &request("notes/sub/a.md"), NOW),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn refuses_caveat_appended_without_recomputing_tag() {
        let (authority, cap) = setup();
        let mut appended = cap.clone();
        appended.caveats.push(Caveat::Uses(Uses::ForRun));
        assert_eq!(
            authority.verify(&appended, &request("notes/a.md"), NOW),
            Err(CapabilityError::BadTag)
        );
        let wire = tamper_wire(&cap.to_wire(), |j| {
            j["caveats"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::to_value(Caveat::ExpiresAt(EXPIRES)).unwrap());
        });
        assert_eq!(
            authority.verify_wire(&wire, &request("notes/a.md"), NOW),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn refuses_later_expiry() {
        let (authority, cap) = setup();
        // Past the base expiry: a caveat with a later expiry does not extend it.
        let extended = cap.attenuate(Caveat::ExpiresAt(EXPIRES * 10));
        assert_eq!(
            authority.verify(&extended, &request("notes/a.md"), EXPIRES + 1),
            Err(CapabilityError::Expired {
                expires_at_ms: EXPIRES,
                now_ms: EXPIRES + 1
            })
        );
        // An earlier caveat expiry applies.
        let shortened = cap.attenuate(Caveat::ExpiresAt(NOW));
        assert!(matches!(
            authority.verify(&shortened, &request("notes/a.md"), NOW),
            Err(CapabilityError::Expired { .. })
        ));
        // A forged base with a later expiry fails the tag.
        let mut forged = cap.clone();
        forged.base.grant.expires_at_ms = EXPIRES * 10;
        assert_eq!(
            authority.verify(&forged, &request("notes/a.md"), EXPIRES + 1),
            Err(CapabilityError::BadTag)
        );
        let wire = tamper_wire(&cap.to_wire(), |j| {
            j["base"]["grant"]["expires_at_ms"] = (EXPIRES * 10).into();
        });
        assert_eq!(
            authority.verify_wire(&wire, &request("notes/a.md"), EXPIRES + 1),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn expiry_beyond_2_pow_53_is_clamped_and_never_collides() {
        let authority = Authority::new(RUN, KEY);
        let cap = authority.mint(Grant {
            expires_at_ms: u64::MAX,
            ..grant(Uses::ForRun)
        });
        assert_eq!(cap.grant().expires_at_ms, MAX_EXPIRY_MS);
        assert!(authority.verify(&cap, &request("notes/a.md"), NOW).is_ok());
        // Written with a value that rounds to the same double: refused.
        let wire = tamper_wire(&cap.to_wire(), |j| {
            j["base"]["grant"]["expires_at_ms"] = (MAX_EXPIRY_MS + 2).into();
        });
        assert!(matches!(
            authority.verify_wire(&wire, &request("notes/a.md"), NOW),
            Err(CapabilityError::BadTag | CapabilityError::Malformed(_))
        ));
    }

    #[test]
    fn refuses_wider_scope() {
        let (authority, cap) = setup();
        // Outside the base scope.
        assert!(matches!(
            authority.verify(&cap, &request("secrets/key"), NOW),
            Err(CapabilityError::OutOfScope { .. })
        ));
        // A caveat cannot widen it.
        let widened = cap.attenuate(Caveat::Scope(ws("")));
        assert!(matches!(
            authority.verify(&widened, &request("secrets/key"), NOW),
            Err(CapabilityError::OutOfScope { .. })
        ));
        // And a widening caveat spoils the token even inside the base scope.
        assert!(matches!(
            authority.verify(&widened, &request("notes/a.md"), NOW),
            Err(CapabilityError::OutOfScope { .. })
        ));
        // A forged wider base fails the tag.
        let mut forged = cap.clone();
        forged.base.grant.scope = ws("");
        assert_eq!(
            authority.verify(&forged, &request("secrets/key"), NOW),
            Err(CapabilityError::BadTag)
        );
        let wire = tamper_wire(&cap.to_wire(), |j| {
            j["base"]["grant"]["scope"]["prefix"] = "".into();
        });
        assert_eq!(
            authority.verify_wire(&wire, &request("secrets/key"), NOW),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn refuses_another_run_id() {
        let (authority, cap) = setup();
        let mut other_request = request("notes/a.md");
        other_request.run_id = "run-2".to_owned();
        assert!(matches!(
            authority.verify(&cap, &other_request, NOW),
            Err(CapabilityError::WrongRun { .. })
        ));
        // An authority for another run, even with the same key.
        let other_run = Authority::new("run-2", KEY);
        assert!(matches!(
            other_run.verify(&cap, &other_request, NOW),
            Err(CapabilityError::WrongRun { .. })
        ));
        // Rewriting the run id in the wire form breaks the tag.
        let wire = tamper_wire(&cap.to_wire(), |j| j["base"]["run_id"] = "run-2".into());
        assert_eq!(
            other_run.verify_wire(&wire, &other_request, NOW),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn refuses_token_from_another_authority_key() {
        let (_, cap) = setup();
        let reloaded = Authority::new(RUN, [8; 32]);
        assert_eq!(
            reloaded.verify(&cap, &request("notes/a.md"), NOW),
            Err(CapabilityError::BadTag)
        );
        assert_eq!(
            reloaded.verify_wire(&cap.to_wire(), &request("notes/a.md"), NOW),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn refuses_another_tool_fingerprint() {
        let (authority, cap) = setup();
        let mut changed = request("notes/a.md");
        changed.fingerprint = fp('b');
        assert!(matches!(
            authority.verify(&cap, &changed, NOW),
            Err(CapabilityError::WrongFingerprint { .. })
        ));
        let wire = tamper_wire(&cap.to_wire(), |j| {
            j["base"]["grant"]["fingerprint"] = fp('b').as_str().into();
        });
        assert_eq!(
            authority.verify_wire(&wire, &changed, NOW),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn refuses_another_effect() {
        let (authority, cap) = setup();
        let mut destructive = request("notes/a.md");
        destructive.effects = effects(&[EffectClass::DestructiveLocal]);
        assert_eq!(
            authority.verify(&cap, &destructive, NOW),
            Err(CapabilityError::EffectNotGranted {
                tool: "write_file".to_owned(),
                effect: EffectClass::DestructiveLocal
            })
        );
        // An effects caveat narrows further.
        let read_only = cap.attenuate(Caveat::Effects(effects(&[EffectClass::ReadLocal])));
        assert!(matches!(
            authority.verify(&read_only, &request("notes/a.md"), NOW),
            Err(CapabilityError::EffectNotGranted {
                effect: EffectClass::WriteLocal,
                ..
            })
        ));
        // And cannot widen.
        let widened = cap.attenuate(Caveat::Effects(EffectClass::ALL.into_iter().collect()));
        assert!(matches!(
            authority.verify(&widened, &destructive, NOW),
            Err(CapabilityError::EffectNotGranted { .. })
        ));
        let wire = tamper_wire(&cap.to_wire(), |j| {
            j["base"]["grant"]["effects"]
                .as_array_mut()
                .unwrap()
                .push("destructive_local".into());
        });
        assert_eq!(
            authority.verify_wire(&wire, &destructive, NOW),
            Err(CapabilityError::BadTag)
        );
    }

    #[test]
    fn narrowed_token_verifies_inside_and_fails_outside() {
        let (authority, cap) = setup();
        let narrowed = cap.attenuate(Caveat::Scope(ws("notes/sub")));
        let verified = authority
            .verify(&narrowed, &request("notes/sub/a.md"), NOW)
            .unwrap();
        assert_eq!(verified.scope(), &ws("notes/sub"));
        assert!(matches!(
            authority.verify(&narrowed, &request("notes/other.md"), NOW),
            Err(CapabilityError::OutOfScope { .. })
        ));
        // Narrowing twice keeps both.
        let twice = narrowed.attenuate(Caveat::Scope(ws("notes/sub/deeper")));
        assert!(
            authority
                .verify(&twice, &request("notes/sub/deeper/x"), NOW)
                .is_ok()
        );
        assert!(
            authority
                .verify(&twice, &request("notes/sub/x"), NOW)
                .is_err()
        );
    }

    #[test]
    fn one_time_token_fails_on_second_use() {
        let authority = Authority::new(RUN, KEY);
        let cap = authority.mint(grant(Uses::Once));
        // A refused attempt does not consume it.
        assert!(
            authority
                .verify(&cap, &request("elsewhere/x"), NOW)
                .is_err()
        );
        let verified = authority.verify(&cap, &request("notes/a.md"), NOW).unwrap();
        assert_eq!(verified.uses(), Uses::Once);
        assert_eq!(
            authority.verify(&cap, &request("notes/a.md"), NOW),
            Err(CapabilityError::AlreadyUsed)
        );
        assert_eq!(
            authority.verify_wire(&cap.to_wire(), &request("notes/a.md"), NOW),
            Err(CapabilityError::AlreadyUsed)
        );
    }

    #[test]
    fn one_time_token_fails_on_second_use_via_verifier_clone() {
        let authority = Authority::new(RUN, KEY);
        let cap = authority.mint(grant(Uses::Once));
        let verifier = authority.verifier();
        let clone = verifier.clone();
        assert!(
            verifier
                .verify_wire(&cap.to_wire(), &request("notes/a.md"), NOW)
                .is_ok()
        );
        assert_eq!(
            clone.verify(&cap, &request("notes/a.md"), NOW),
            Err(CapabilityError::AlreadyUsed)
        );
        assert_eq!(
            authority.verify(&cap, &request("notes/a.md"), NOW),
            Err(CapabilityError::AlreadyUsed)
        );
    }

    #[test]
    fn check_does_not_use_up_a_one_time_token_but_sees_it_used() {
        let authority = Authority::new(RUN, KEY);
        let cap = authority.mint(grant(Uses::Once));
        let verifier = authority.verifier();
        // A check verifies the whole chain without consuming...
        assert!(verifier.check(&cap, &request("notes/a.md"), NOW).is_ok());
        assert!(verifier.check(&cap, &request("notes/a.md"), NOW).is_ok());
        let mut forged = cap.clone();
        forged.tag[0] ^= 1;
        assert_eq!(
            verifier.check(&forged, &request("notes/a.md"), NOW),
            Err(CapabilityError::BadTag)
        );
        // ...so the effect's own verification still succeeds exactly once.
        assert!(verifier.verify(&cap, &request("notes/a.md"), NOW).is_ok());
        assert_eq!(
            verifier.check(&cap, &request("notes/a.md"), NOW),
            Err(CapabilityError::AlreadyUsed)
        );
    }

    #[test]
    fn uses_once_caveat_makes_a_token_one_time() {
        let (authority, cap) = setup();
        let once = cap.attenuate(Caveat::Uses(Uses::Once));
        assert!(authority.verify(&once, &request("notes/a.md"), NOW).is_ok());
        assert_eq!(
            authority.verify(&once, &request("notes/a.md"), NOW),
            Err(CapabilityError::AlreadyUsed)
        );
        // Uses(ForRun) on a one-time token changes nothing.
        let one_time = authority.mint(grant(Uses::Once));
        let relaxed = one_time.attenuate(Caveat::Uses(Uses::ForRun));
        assert!(
            authority
                .verify(&relaxed, &request("notes/a.md"), NOW)
                .is_ok()
        );
        assert_eq!(
            authority.verify(&one_time, &request("notes/a.md"), NOW),
            Err(CapabilityError::AlreadyUsed)
        );
    }

    #[test]
    fn narrowed_by_tools_refuses_other_tools() {
        let (authority, cap) = setup();
        let only_search: BTreeSet<String> = ["search".to_owned()].into();
        let narrowed = cap.attenuate(Caveat::Tools(only_search));
        assert!(matches!(
            authority.verify(&narrowed, &request("notes/a.md"), NOW),
            Err(CapabilityError::WrongTool { .. })
        ));
        let mut other = request("notes/a.md");
        other.tool = "search".to_owned();
        assert!(matches!(
            authority.verify(&narrowed, &other, NOW),
            Err(CapabilityError::WrongTool { .. })
        ));
        let with_tool: BTreeSet<String> = ["write_file".to_owned(), "search".to_owned()].into();
        let kept = cap.attenuate(Caveat::Tools(with_tool));
        assert!(authority.verify(&kept, &request("notes/a.md"), NOW).is_ok());
    }

    #[test]
    fn malformed_wire_is_an_error_not_a_panic() {
        let (authority, cap) = setup();
        let req = request("notes/a.md");
        for wire in [
            "",
            "!!!",
            "e30",
            &URL_SAFE_NO_PAD.encode(b"[1,2]"),
            &"A".repeat(MAX_WIRE_LEN + 1),
        ] {
            assert!(matches!(
                authority.verify_wire(wire, &req, NOW),
                Err(CapabilityError::Malformed(_))
            ));
        }
        let bad_tag = tamper_wire(&cap.to_wire(), |j| j["tag"] = "zz".into());
        assert!(matches!(
            authority.verify_wire(&bad_tag, &req, NOW),
            Err(CapabilityError::Malformed(_))
        ));
        let extra = tamper_wire(&cap.to_wire(), |j| j["extra"] = true.into());
        assert!(matches!(
            authority.verify_wire(&extra, &req, NOW),
            Err(CapabilityError::Malformed(_))
        ));
    }

    #[test]
    fn nonces_are_unique_and_debug_hides_secrets() {
        let authority = Authority::new(RUN, KEY);
        let nonces: HashSet<String> = (0..100)
            .map(|_| authority.mint(grant(Uses::ForRun)).nonce().to_owned())
            .collect();
        assert_eq!(nonces.len(), 100);
        let cap = authority.mint(grant(Uses::ForRun));
        let debug = format!("{cap:?} {authority:?} {:?}", authority.verifier());
        assert!(!debug.contains(&hex::encode(cap.tag)));
        assert!(!debug.contains(&hex::encode(KEY)));
        assert!(!debug.contains("[7, 7"));
        assert!(debug.contains("<hidden>"));
    }

    #[test]
    fn hmac32_is_standard_hmac_sha256() {
        let mut mac = HmacSha256::new_from_slice(&KEY).unwrap();
        mac.update(b"message");
        let expected: [u8; 32] = mac.finalize().into_bytes().into();
        assert_eq!(hmac32(&KEY, b"message"), expected);
    }

    #[test]
    fn verifier_is_send_sync_clone() {
        fn assert_traits<T: Send + Sync + Clone + 'static>() {}
        assert_traits::<Verifier>();
        assert_traits::<Capability>();
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Authority>();
    }
}
