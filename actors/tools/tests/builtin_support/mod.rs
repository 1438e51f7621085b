//! Shared helpers of the built-in tool tests: the tokio test host
//! (`agent-test-support`), and capabilities minted by a real `Authority`
//! for hand-built invocations.
#![allow(dead_code)]

use agent_capabilities::{
    Authority, Capability, Fingerprint, Grant, Origin, Target, TargetScope, Uses,
};
use agent_kernel::ids::{CallId, RunId, SessionId};
use agent_kernel::protocol::{InvocationDraft, ToolDefinition, ToolInvocation};
use serde_json::Value;

/// The tokio test host (not every test file of these helpers uses it).
#[allow(unused_imports)]
pub use agent_test_support::{SystemClock, TokioExecutor};

pub const RUN: &str = "run-builtin-1";
pub const SESSION: &str = "session-1";

pub fn authority() -> Authority {
    Authority::new(RUN, [7u8; 32])
}

/// A grant for `def` over `scope`, valid until `expires_at_ms`.
pub fn grant(def: &ToolDefinition, scope: TargetScope, uses: Uses, expires_at_ms: u64) -> Grant {
    Grant {
        tool: def.name.clone(),
        fingerprint: def.fingerprint().expect("fingerprint"),
        origin: Origin::Builtin,
        effects: def.effects.clone(),
        scope,
        uses,
        expires_at_ms,
    }
}

/// A draft as the pipeline would prepare it.
pub fn draft(
    def: &ToolDefinition,
    call: &str,
    arguments: Value,
    target: Target,
) -> InvocationDraft {
    draft_with(
        def,
        def.fingerprint().expect("fingerprint"),
        call,
        arguments,
        target,
    )
}

pub fn draft_with(
    def: &ToolDefinition,
    fingerprint: Fingerprint,
    call: &str,
    arguments: Value,
    target: Target,
) -> InvocationDraft {
    let scope = match &target {
        Target::WorkspacePath { path } => TargetScope::Workspace {
            prefix: path.clone(),
        },
        _ => TargetScope::NoTarget,
    };
    InvocationDraft {
        run: RunId::new(RUN).expect("run id"),
        session: SessionId::new(SESSION).expect("session id"),
        call_id: CallId::new(call).expect("call id"),
        tool: def.name.clone(),
        fingerprint,
        args_hash: agent_capabilities::sha256_hex(arguments.to_string().as_bytes()),
        arguments,
        effects: def.effects.clone(),
        idempotency: def.idempotency,
        sensitivity: def.sensitivity,
        origin: def.origin.clone(),
        provider: None,
        target,
        scope,
        attempt: 1,
        idempotency_key: format!("key-{call}"),
    }
}

pub fn invocation(
    draft: InvocationDraft,
    capability: Capability,
    authority: &Authority,
) -> ToolInvocation {
    ToolInvocation {
        draft,
        capability,
        verifier: authority.verifier(),
        progress: Default::default(),
    }
}

/// Far in the future (ms since the epoch).
pub const FAR: u64 = 4_000_000_000_000;
