//! The checks every invocation passes immediately before an effect (S5.3):
//! the draft against the current definition (fingerprint, effects, canonical
//! arguments, schema, target), then the capability. Shared by the tools actor
//! and by every actor made with `spawn_tool` or the plugin module.

// Refusals are `ToolResult`s because the protocol answers `Prepare` with
// `Result<PreparedCall, ToolResult>`: they go to the model as they are.
#![allow(clippy::result_large_err)]

use crate::protocol::{InvocationDraft, ToolDefinition, ToolInvocation, ToolResult};
use agent_capabilities::{CapabilityError, EffectRequest, Fingerprint, Target, Verified};

use super::codes;
use super::validate::{CompiledSchema, canonicalise, derive_target};

/// Re-check a draft against the definition as it is now. Returns the stable
/// error result (nothing ran) when anything differs.
pub fn check_draft(
    draft: &InvocationDraft,
    def: &ToolDefinition,
    current: &Fingerprint,
    schema: &CompiledSchema,
) -> Result<(), ToolResult> {
    let fail = |code: &str, msg: String| Err(ToolResult::error(code, msg, &def.name));
    if draft.tool != def.name {
        return fail(
            codes::DRAFT_MISMATCH,
            format!("the draft names tool {:?}, not {:?}", draft.tool, def.name),
        );
    }
    if &draft.fingerprint != current {
        return fail(
            codes::DEFINITION_CHANGED,
            format!(
                "the definition of {} changed since this call was prepared (fingerprint {} is now {}); nothing ran, the call needs approval again",
                def.name, draft.fingerprint, current
            ),
        );
    }
    if draft.effects != def.effects
        || draft.origin != def.origin
        || draft.idempotency != def.idempotency
        || draft.sensitivity != def.sensitivity
        || draft.provider != def.provider
    {
        return fail(
            codes::DRAFT_MISMATCH,
            format!(
                "the draft's effects, origin, provider, idempotency or sensitivity differ from the definition of {}; prepare the call again",
                def.name
            ),
        );
    }
    let canonical = canonicalise(&draft.arguments)
        .map_err(|e| ToolResult::error(codes::INVALID_ARGUMENTS, e.to_string(), &def.name))?;
    if canonical.hash != draft.args_hash {
        return fail(
            codes::DRAFT_MISMATCH,
            "the draft's arguments do not hash to its args_hash; prepare the call again".into(),
        );
    }
    schema
        .check(&canonical.value)
        .map_err(|e| ToolResult::error(codes::INVALID_ARGUMENTS, e.to_string(), &def.name))?;
    let (target, scope) = derive_target(&def.target, &canonical.value)
        .map_err(|e| ToolResult::error(e.code(), e.to_string(), &def.name))?;
    if target != draft.target || scope != draft.scope {
        return fail(
            codes::TARGET_MISMATCH,
            "the draft's target or scope is not the one its arguments give; prepare the call again"
                .into(),
        );
    }
    Ok(())
}

/// The effect request an invocation makes.
pub fn effect_request(draft: &InvocationDraft) -> EffectRequest {
    EffectRequest {
        run_id: draft.run.as_str().to_owned(),
        tool: draft.tool.clone(),
        fingerprint: draft.fingerprint.clone(),
        effects: draft.effects.clone(),
        target: draft.target.clone(),
    }
}

fn refused(tool: &str, e: &CapabilityError) -> ToolResult {
    ToolResult::error(
        codes::CAPABILITY_REFUSED,
        format!("capability refused; nothing was done: {e}"),
        tool,
    )
}

/// The authoritative check, made by the actor that performs the effect:
/// the HMAC chain, run, tool, fingerprint, effects, scope and expiry, and the
/// consumption of a one-time token. Returns what the capability grants after
/// its caveats (the proof a destructive effect checks again).
pub fn verify_capability(inv: &ToolInvocation, now_ms: u64) -> Result<Verified, ToolResult> {
    verify_capability_for(inv, &inv.draft.target, now_ms)
}

/// [`verify_capability`] against `target`, the exact thing the effect
/// touches when the tool knows it more precisely than the definition's
/// target rule does (both paths of a move under a whole-workspace rule).
pub fn verify_capability_for(
    inv: &ToolInvocation,
    target: &Target,
    now_ms: u64,
) -> Result<Verified, ToolResult> {
    let req = EffectRequest {
        target: target.clone(),
        ..effect_request(&inv.draft)
    };
    if inv.verifier.run_id() != req.run_id {
        return Err(refused(
            &req.tool,
            &CapabilityError::WrongRun {
                expected: req.run_id.clone(),
                token_run: inv.verifier.run_id().to_owned(),
                request_run: req.run_id.clone(),
            },
        ));
    }
    inv.verifier
        .verify(&inv.capability, &req, now_ms)
        .map_err(|e| refused(&req.tool, &e))
}

/// The check the tools actor makes before forwarding: every check of
/// [`verify_capability`] (HMAC chain, run, tool, fingerprint, effects, scope,
/// expiry, a one-time token still unused) without using the token up, so that
/// it is consumed exactly once, by the actor that performs the effect.
pub fn precheck_capability(inv: &ToolInvocation, now_ms: u64) -> Result<(), ToolResult> {
    let req = effect_request(&inv.draft);
    inv.verifier
        .check(&inv.capability, &req, now_ms)
        .map(|_| ())
        .map_err(|e| refused(&req.tool, &e))
}
