//! The token's unit tests: minting, the wire form, every refusal (a flipped
//! tag bit, a dropped, reordered or unsigned caveat, a wider scope, another
//! run, key, tool or effect, a later expiry), attenuation and one-time use.

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
    let verified = authority
        .verifier()
        .verify(&cap, &request("notes/a.md"), NOW)
        .unwrap();
    assert_eq!(verified.tool(), "write_file");
    assert_eq!(verified.uses(), Uses::ForRun);
    assert_eq!(verified.scope(), &ws("notes"));
    assert_eq!(verified.expires_at_ms(), EXPIRES);
    // ForRun: any number of times.
    assert!(
        authority
            .verifier()
            .verify(&cap, &request("notes/b.md"), NOW)
            .is_ok()
    );
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
        .verifier()
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
            authority
                .verifier()
                .verify(&forged, &request("notes/a.md"), NOW),
            Err(CapabilityError::BadTag)
        );
    }
    let wire = tamper_wire(&cap.to_wire(), |j| {
        let tag = j["tag"].as_str().unwrap().to_owned();
        let flipped = if tag.starts_with('0') { "1" } else { "0" };
        j["tag"] = format!("{flipped}{}", &tag[1..]).into();
    });
    assert_eq!(
        authority
            .verifier()
            .verify_wire(&wire, &request("notes/a.md"), NOW),
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
        authority
            .verifier()
            .verify(&dropped, &request("notes/other.md"), NOW),
        Err(CapabilityError::BadTag)
    );
    let wire = tamper_wire(&narrowed.to_wire(), |j| {
        j["caveats"].as_array_mut().unwrap().remove(0);
    });
    assert_eq!(
        authority
            .verifier()
            .verify_wire(&wire, &request("notes/other.md"), NOW),
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
        authority
            .verifier()
            .verify(&reordered, &request("notes/sub/a.md"), NOW),
        Err(CapabilityError::BadTag)
    );
    let wire = tamper_wire(&narrowed.to_wire(), |j| {
        j["caveats"].as_array_mut().unwrap().swap(0, 1);
    });
    assert_eq!(
        authority
            .verifier()
            .verify_wire(&wire, &request("notes/sub/a.md"), NOW),
        Err(CapabilityError::BadTag)
    );
}

#[test]
fn refuses_caveat_appended_without_recomputing_tag() {
    let (authority, cap) = setup();
    let mut appended = cap.clone();
    appended.caveats.push(Caveat::Uses(Uses::ForRun));
    assert_eq!(
        authority
            .verifier()
            .verify(&appended, &request("notes/a.md"), NOW),
        Err(CapabilityError::BadTag)
    );
    let wire = tamper_wire(&cap.to_wire(), |j| {
        j["caveats"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::to_value(Caveat::ExpiresAt(EXPIRES)).unwrap());
    });
    assert_eq!(
        authority
            .verifier()
            .verify_wire(&wire, &request("notes/a.md"), NOW),
        Err(CapabilityError::BadTag)
    );
}

#[test]
fn refuses_later_expiry() {
    let (authority, cap) = setup();
    // Past the base expiry: a caveat with a later expiry does not extend it.
    let extended = cap.attenuate(Caveat::ExpiresAt(EXPIRES * 10));
    assert_eq!(
        authority
            .verifier()
            .verify(&extended, &request("notes/a.md"), EXPIRES + 1),
        Err(CapabilityError::Expired {
            expires_at_ms: EXPIRES,
            now_ms: EXPIRES + 1
        })
    );
    // An earlier caveat expiry applies.
    let shortened = cap.attenuate(Caveat::ExpiresAt(NOW));
    assert!(matches!(
        authority
            .verifier()
            .verify(&shortened, &request("notes/a.md"), NOW),
        Err(CapabilityError::Expired { .. })
    ));
    // A forged base with a later expiry fails the tag.
    let mut forged = cap.clone();
    forged.base.grant.expires_at_ms = EXPIRES * 10;
    assert_eq!(
        authority
            .verifier()
            .verify(&forged, &request("notes/a.md"), EXPIRES + 1),
        Err(CapabilityError::BadTag)
    );
    let wire = tamper_wire(&cap.to_wire(), |j| {
        j["base"]["grant"]["expires_at_ms"] = (EXPIRES * 10).into();
    });
    assert_eq!(
        authority
            .verifier()
            .verify_wire(&wire, &request("notes/a.md"), EXPIRES + 1),
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
    assert!(
        authority
            .verifier()
            .verify(&cap, &request("notes/a.md"), NOW)
            .is_ok()
    );
    // Written with a value that rounds to the same double: refused.
    let wire = tamper_wire(&cap.to_wire(), |j| {
        j["base"]["grant"]["expires_at_ms"] = (MAX_EXPIRY_MS + 2).into();
    });
    assert!(matches!(
        authority
            .verifier()
            .verify_wire(&wire, &request("notes/a.md"), NOW),
        Err(CapabilityError::BadTag | CapabilityError::Malformed(_))
    ));
}

#[test]
fn refuses_wider_scope() {
    let (authority, cap) = setup();
    // Outside the base scope.
    assert!(matches!(
        authority
            .verifier()
            .verify(&cap, &request("secrets/key"), NOW),
        Err(CapabilityError::OutOfScope { .. })
    ));
    // A caveat cannot widen it.
    let widened = cap.attenuate(Caveat::Scope(ws("")));
    assert!(matches!(
        authority
            .verifier()
            .verify(&widened, &request("secrets/key"), NOW),
        Err(CapabilityError::OutOfScope { .. })
    ));
    // And a widening caveat spoils the token even inside the base scope.
    assert!(matches!(
        authority
            .verifier()
            .verify(&widened, &request("notes/a.md"), NOW),
        Err(CapabilityError::OutOfScope { .. })
    ));
    // A forged wider base fails the tag.
    let mut forged = cap.clone();
    forged.base.grant.scope = ws("");
    assert_eq!(
        authority
            .verifier()
            .verify(&forged, &request("secrets/key"), NOW),
        Err(CapabilityError::BadTag)
    );
    let wire = tamper_wire(&cap.to_wire(), |j| {
        j["base"]["grant"]["scope"]["prefix"] = "".into();
    });
    assert_eq!(
        authority
            .verifier()
            .verify_wire(&wire, &request("secrets/key"), NOW),
        Err(CapabilityError::BadTag)
    );
}

#[test]
fn refuses_another_run_id() {
    let (authority, cap) = setup();
    let mut other_request = request("notes/a.md");
    other_request.run_id = "run-2".to_owned();
    assert!(matches!(
        authority.verifier().verify(&cap, &other_request, NOW),
        Err(CapabilityError::WrongRun { .. })
    ));
    // An authority for another run, even with the same key.
    let other_run = Authority::new("run-2", KEY);
    assert!(matches!(
        other_run.verifier().verify(&cap, &other_request, NOW),
        Err(CapabilityError::WrongRun { .. })
    ));
    // Rewriting the run id in the wire form breaks the tag.
    let wire = tamper_wire(&cap.to_wire(), |j| j["base"]["run_id"] = "run-2".into());
    assert_eq!(
        other_run.verifier().verify_wire(&wire, &other_request, NOW),
        Err(CapabilityError::BadTag)
    );
}

#[test]
fn refuses_token_from_another_authority_key() {
    let (_, cap) = setup();
    let reloaded = Authority::new(RUN, [8; 32]);
    assert_eq!(
        reloaded
            .verifier()
            .verify(&cap, &request("notes/a.md"), NOW),
        Err(CapabilityError::BadTag)
    );
    assert_eq!(
        reloaded
            .verifier()
            .verify_wire(&cap.to_wire(), &request("notes/a.md"), NOW),
        Err(CapabilityError::BadTag)
    );
}

#[test]
fn refuses_another_tool_fingerprint() {
    let (authority, cap) = setup();
    let mut changed = request("notes/a.md");
    changed.fingerprint = fp('b');
    assert!(matches!(
        authority.verifier().verify(&cap, &changed, NOW),
        Err(CapabilityError::WrongFingerprint { .. })
    ));
    let wire = tamper_wire(&cap.to_wire(), |j| {
        j["base"]["grant"]["fingerprint"] = fp('b').as_str().into();
    });
    assert_eq!(
        authority.verifier().verify_wire(&wire, &changed, NOW),
        Err(CapabilityError::BadTag)
    );
}

#[test]
fn refuses_another_effect() {
    let (authority, cap) = setup();
    let mut destructive = request("notes/a.md");
    destructive.effects = effects(&[EffectClass::DestructiveLocal]);
    assert_eq!(
        authority.verifier().verify(&cap, &destructive, NOW),
        Err(CapabilityError::EffectNotGranted {
            tool: "write_file".to_owned(),
            effect: EffectClass::DestructiveLocal
        })
    );
    // An effects caveat narrows further.
    let read_only = cap.attenuate(Caveat::Effects(effects(&[EffectClass::ReadLocal])));
    assert!(matches!(
        authority
            .verifier()
            .verify(&read_only, &request("notes/a.md"), NOW),
        Err(CapabilityError::EffectNotGranted {
            effect: EffectClass::WriteLocal,
            ..
        })
    ));
    // And cannot widen.
    let widened = cap.attenuate(Caveat::Effects(EffectClass::ALL.into_iter().collect()));
    assert!(matches!(
        authority.verifier().verify(&widened, &destructive, NOW),
        Err(CapabilityError::EffectNotGranted { .. })
    ));
    let wire = tamper_wire(&cap.to_wire(), |j| {
        j["base"]["grant"]["effects"]
            .as_array_mut()
            .unwrap()
            .push("destructive_local".into());
    });
    assert_eq!(
        authority.verifier().verify_wire(&wire, &destructive, NOW),
        Err(CapabilityError::BadTag)
    );
}

#[test]
fn narrowed_token_verifies_inside_and_fails_outside() {
    let (authority, cap) = setup();
    let narrowed = cap.attenuate(Caveat::Scope(ws("notes/sub")));
    let verified = authority
        .verifier()
        .verify(&narrowed, &request("notes/sub/a.md"), NOW)
        .unwrap();
    assert_eq!(verified.scope(), &ws("notes/sub"));
    assert!(matches!(
        authority
            .verifier()
            .verify(&narrowed, &request("notes/other.md"), NOW),
        Err(CapabilityError::OutOfScope { .. })
    ));
    // Narrowing twice keeps both.
    let twice = narrowed.attenuate(Caveat::Scope(ws("notes/sub/deeper")));
    assert!(
        authority
            .verifier()
            .verify(&twice, &request("notes/sub/deeper/x"), NOW)
            .is_ok()
    );
    assert!(
        authority
            .verifier()
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
            .verifier()
            .verify(&cap, &request("elsewhere/x"), NOW)
            .is_err()
    );
    let verified = authority
        .verifier()
        .verify(&cap, &request("notes/a.md"), NOW)
        .unwrap();
    assert_eq!(verified.uses(), Uses::Once);
    assert_eq!(
        authority
            .verifier()
            .verify(&cap, &request("notes/a.md"), NOW),
        Err(CapabilityError::AlreadyUsed)
    );
    assert_eq!(
        authority
            .verifier()
            .verify_wire(&cap.to_wire(), &request("notes/a.md"), NOW),
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
        authority
            .verifier()
            .verify(&cap, &request("notes/a.md"), NOW),
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
    assert!(
        authority
            .verifier()
            .verify(&once, &request("notes/a.md"), NOW)
            .is_ok()
    );
    assert_eq!(
        authority
            .verifier()
            .verify(&once, &request("notes/a.md"), NOW),
        Err(CapabilityError::AlreadyUsed)
    );
    // Uses(ForRun) on a one-time token changes nothing.
    let one_time = authority.mint(grant(Uses::Once));
    let relaxed = one_time.attenuate(Caveat::Uses(Uses::ForRun));
    assert!(
        authority
            .verifier()
            .verify(&relaxed, &request("notes/a.md"), NOW)
            .is_ok()
    );
    assert_eq!(
        authority
            .verifier()
            .verify(&one_time, &request("notes/a.md"), NOW),
        Err(CapabilityError::AlreadyUsed)
    );
}

#[test]
fn narrowed_by_tools_refuses_other_tools() {
    let (authority, cap) = setup();
    let only_search: BTreeSet<String> = ["search".to_owned()].into();
    let narrowed = cap.attenuate(Caveat::Tools(only_search));
    assert!(matches!(
        authority
            .verifier()
            .verify(&narrowed, &request("notes/a.md"), NOW),
        Err(CapabilityError::WrongTool { .. })
    ));
    let mut other = request("notes/a.md");
    other.tool = "search".to_owned();
    assert!(matches!(
        authority.verifier().verify(&narrowed, &other, NOW),
        Err(CapabilityError::WrongTool { .. })
    ));
    let with_tool: BTreeSet<String> = ["write_file".to_owned(), "search".to_owned()].into();
    let kept = cap.attenuate(Caveat::Tools(with_tool));
    assert!(
        authority
            .verifier()
            .verify(&kept, &request("notes/a.md"), NOW)
            .is_ok()
    );
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
            authority.verifier().verify_wire(wire, &req, NOW),
            Err(CapabilityError::Malformed(_))
        ));
    }
    let bad_tag = tamper_wire(&cap.to_wire(), |j| j["tag"] = "zz".into());
    assert!(matches!(
        authority.verifier().verify_wire(&bad_tag, &req, NOW),
        Err(CapabilityError::Malformed(_))
    ));
    let extra = tamper_wire(&cap.to_wire(), |j| j["extra"] = true.into());
    assert!(matches!(
        authority.verifier().verify_wire(&extra, &req, NOW),
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
