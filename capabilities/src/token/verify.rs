//! Verification of a capability token: the HMAC chain recomputed from the
//! base and every caveat, the base grant and each caveat checked against the
//! requested effect, target, tool and time, and a one-time token used up
//! (or only checked, [`Verifier::check`](super::Verifier::check)).

use subtle::ConstantTimeEq;

use super::{
    Capability, CapabilityError, Caveat, EffectRequest, FORMAT_VERSION, MAX_EXPIRY_MS, Shared,
    Uses, Verified, hmac32, mac_input,
};

/// Whether a successful verification uses up a one-time token.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Consume {
    Yes,
    /// Check everything, including that a one-time token is still unused, but leave it unused.
    No,
}

impl Shared {
    pub(super) fn verify(
        &self,
        cap: &Capability,
        request: &EffectRequest,
        now_ms: u64,
    ) -> Result<Verified, CapabilityError> {
        self.verify_with(cap, request, now_ms, Consume::Yes)
    }

    pub(super) fn verify_with(
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

    pub(super) fn verify_wire(
        &self,
        wire: &str,
        request: &EffectRequest,
        now_ms: u64,
    ) -> Result<Verified, CapabilityError> {
        self.verify(&Capability::from_wire(wire)?, request, now_ms)
    }
}
