//! Capability verification in the browser: mint, narrow, verify and refuse
//! a forged token under wasm32 (run in headless Chromium).
#![cfg(target_arch = "wasm32")]

use agent_capabilities::{
    Authority, CapabilityError, Caveat, EffectClass, EffectRequest, Fingerprint, Grant, Origin,
    Target, TargetScope, Uses,
};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn ws(prefix: &str) -> TargetScope {
    TargetScope::Workspace {
        prefix: prefix.to_owned(),
    }
}

fn request(run: &str, path: &str) -> EffectRequest {
    EffectRequest {
        run_id: run.to_owned(),
        tool: "write_file".to_owned(),
        fingerprint: Fingerprint::of(&"write_file v1").unwrap(),
        effects: [EffectClass::WriteLocal].into(),
        target: Target::WorkspacePath {
            path: path.to_owned(),
        },
    }
}

#[wasm_bindgen_test]
fn mint_narrow_verify_and_refuse_forgery() {
    let authority = Authority::new("run-wasm", [42; 32]);
    let cap = authority.mint(Grant {
        tool: "write_file".to_owned(),
        fingerprint: Fingerprint::of(&"write_file v1").unwrap(),
        origin: Origin::Builtin,
        effects: [EffectClass::ReadLocal, EffectClass::WriteLocal].into(),
        scope: ws("notes"),
        uses: Uses::ForRun,
        expires_at_ms: 2_000,
    });
    let narrowed = cap.attenuate(Caveat::Scope(ws("notes/today")));
    let verifier = authority.verifier();

    let ok = verifier
        .verify_wire(
            &narrowed.to_wire(),
            &request("run-wasm", "notes/today/a.md"),
            1_000,
        )
        .unwrap();
    assert_eq!(ok.scope(), &ws("notes/today"));
    assert!(matches!(
        verifier.verify(&narrowed, &request("run-wasm", "notes/other.md"), 1_000),
        Err(CapabilityError::OutOfScope { .. })
    ));

    // A token minted by another authority (another key) is refused.
    let forger = Authority::new("run-wasm", [0; 32]);
    let forged = forger.mint(Grant {
        tool: "write_file".to_owned(),
        fingerprint: Fingerprint::of(&"write_file v1").unwrap(),
        origin: Origin::Builtin,
        effects: [EffectClass::WriteLocal].into(),
        scope: ws(""),
        uses: Uses::ForRun,
        expires_at_ms: 2_000,
    });
    assert_eq!(
        verifier.verify_wire(&forged.to_wire(), &request("run-wasm", "secret"), 1_000),
        Err(CapabilityError::BadTag)
    );

    // One-time tokens are consumed in the browser too.
    let once = cap.attenuate(Caveat::Uses(Uses::Once));
    assert!(
        authority
            .verifier()
            .verify(&once, &request("run-wasm", "notes/x"), 1_000)
            .is_ok()
    );
    assert_eq!(
        verifier.verify(&once, &request("run-wasm", "notes/x"), 1_000),
        Err(CapabilityError::AlreadyUsed)
    );
}
