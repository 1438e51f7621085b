//! Skills (S5.6): narrowing as a capability caveat that verification
//! enforces, never widening, and each refused manifest kind (closed schema,
//! limits at, below and above, secret-looking values naming the field).
#![cfg(not(target_arch = "wasm32"))] // native tests (tokio); the browser runs builtin_wasm.rs

mod builtin_support;

use std::collections::BTreeSet;

use agent_capabilities::{
    CapabilityError, EffectRequest, Grant, Origin, Target, TargetScope, Uses,
};
use agent_tools::builtin::secrets::SecretKind;
use agent_tools::builtin::skill::{
    MAX_ALLOWED_TOOLS, MAX_DESCRIPTION_CHARS, MAX_INSTRUCTIONS_BYTES, MAX_NAME_CHARS, Skill,
    SkillError,
};
use builtin_support::*;
use serde_json::{Value, json};

fn manifest(tools: &[&str]) -> Value {
    json!({
        "name": "weekly-report",
        "description": "Writes the weekly status report from workspace notes.",
        "instructions": "Read notes/*.md, summarise progress, and write report.md.",
        "allowed_tools": tools,
    })
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn grant_for(tool: &str) -> Grant {
    Grant {
        tool: tool.into(),
        fingerprint: agent_capabilities::Fingerprint::of(&json!({"tool": tool})).expect("fp"),
        origin: Origin::Builtin,
        effects: BTreeSet::new(),
        scope: TargetScope::NoTarget,
        uses: Uses::ForRun,
        expires_at_ms: FAR,
    }
}

fn request(grant: &Grant) -> EffectRequest {
    EffectRequest {
        run_id: RUN.into(),
        tool: grant.tool.clone(),
        fingerprint: grant.fingerprint.clone(),
        effects: BTreeSet::new(),
        target: Target::Nothing,
    }
}

#[test]
fn s5_6_a_skill_narrows_to_the_intersection_as_a_caveat() {
    let authority = authority();
    let verifier = authority.verifier();
    let authorised = set(&["read_file", "write_file", "fetch_url", "run_javascript"]);
    let skill = Skill::from_json(&manifest(&["read_file", "write_file"])).expect("valid");

    // Capabilities the run holds, one per tool.
    let read = grant_for("read_file");
    let fetch = grant_for("fetch_url");
    let read_cap = authority.mint(read.clone());
    let fetch_cap = authority.mint(fetch.clone());
    assert!(
        verifier.verify(&fetch_cap, &request(&fetch), 0).is_ok(),
        "before the Skill"
    );

    let narrowed = skill.narrow(&read_cap, &authorised);
    assert_eq!(narrowed.tools, set(&["read_file", "write_file"]));
    assert!(narrowed.not_granted.is_empty());
    assert!(
        verifier
            .verify(&narrowed.capability, &request(&read), 0)
            .is_ok()
    );

    // The same caveat on the fetch capability: verification now refuses it.
    let fetch_narrowed = skill.narrow(&fetch_cap, &authorised);
    match verifier.verify(&fetch_narrowed.capability, &request(&fetch), 0) {
        Err(CapabilityError::WrongTool { requested, .. }) => assert_eq!(requested, "fetch_url"),
        other => panic!("expected WrongTool, got {other:?}"),
    }
    // The caveat is in the token, not a flag beside it.
    assert_eq!(
        fetch_narrowed.capability.caveats(),
        &[agent_capabilities::Caveat::Tools(set(&[
            "read_file",
            "write_file"
        ]))]
    );
    assert_eq!(
        skill.caveat(&authorised),
        agent_capabilities::Caveat::Tools(narrowed.tools.clone())
    );
}

#[test]
fn s5_6_naming_a_tool_outside_the_authorised_set_grants_nothing() {
    let authority = authority();
    let verifier = authority.verifier();
    let authorised = set(&["read_file", "fetch_url"]);
    let skill = Skill::from_json(&manifest(&["read_file", "delete_everything", "send_email"]))
        .expect("valid");

    let read = grant_for("read_file");
    let narrowed = skill.narrow(&authority.mint(read.clone()), &authorised);
    assert_eq!(
        narrowed.tools,
        set(&["read_file"]),
        "never wider than authorised"
    );
    assert_eq!(
        narrowed.not_granted,
        set(&["delete_everything", "send_email"])
    );
    assert!(narrowed.tools.is_subset(&authorised));

    // The narrowed capability cannot be used for a tool the Skill named
    // but the run was never authorised for.
    let mut delete = request(&read);
    delete.tool = "delete_everything".into();
    assert!(verifier.verify(&narrowed.capability, &delete, 0).is_err());

    // Narrowing twice only narrows further; a Skill with no tools leaves none.
    let none = Skill::from_json(&manifest(&[])).expect("valid");
    let twice = none.narrow(&narrowed.capability, &narrowed.tools);
    assert!(twice.tools.is_empty());
    assert!(
        verifier
            .verify(&twice.capability, &request(&read), 0)
            .is_err()
    );

    // An empty authorised set stays empty whatever the Skill lists.
    assert!(skill.narrow_tools(&BTreeSet::new()).is_empty());
}

#[test]
fn s5_6_closed_schema_refuses_every_other_field() {
    for field in [
        "script", "run", "url", "env", "secrets", "grant", "tools", "command", "on_load",
    ] {
        let mut m = manifest(&["read_file"]);
        m[field] = json!("x");
        assert_eq!(
            Skill::from_json(&m),
            Err(SkillError::UnknownField {
                field: field.into()
            }),
            "{field}"
        );
        assert!(
            Skill::from_json(&m)
                .unwrap_err()
                .to_string()
                .contains(field)
        );
    }
    for field in ["name", "description", "instructions", "allowed_tools"] {
        let mut m = manifest(&["read_file"]);
        m.as_object_mut().map(|o| o.remove(field));
        assert!(
            matches!(Skill::from_json(&m), Err(SkillError::MissingField { .. })),
            "{field}"
        );
    }
    assert_eq!(Skill::from_json(&json!([1])), Err(SkillError::NotAnObject));
    assert!(matches!(
        Skill::parse("{not json"),
        Err(SkillError::InvalidJson(_))
    ));
    let mut m = manifest(&[]);
    m["allowed_tools"] = json!("read_file");
    assert!(matches!(
        Skill::from_json(&m),
        Err(SkillError::WrongType { .. })
    ));
    let mut m = manifest(&[]);
    m["allowed_tools"] = json!([1]);
    assert!(
        matches!(Skill::from_json(&m), Err(SkillError::WrongType { field, .. }) if field == "allowed_tools[0]")
    );
    let mut m = manifest(&[]);
    m["instructions"] = json!({"step": "one"});
    assert!(matches!(
        Skill::from_json(&m),
        Err(SkillError::WrongType { .. })
    ));
    let mut m = manifest(&["read_file", "read_file"]);
    assert_eq!(
        Skill::from_json(&m),
        Err(SkillError::DuplicateTool {
            tool: "read_file".into()
        })
    );
    m["allowed_tools"] = json!(["bad tool name"]);
    assert!(matches!(
        Skill::from_json(&m),
        Err(SkillError::InvalidToolName { .. })
    ));
    let mut m = manifest(&[]);
    m["name"] = json!("Weekly Report");
    assert_eq!(Skill::from_json(&m), Err(SkillError::InvalidName));
    m["name"] = json!("  ");
    assert!(matches!(
        Skill::from_json(&m),
        Err(SkillError::Empty { field: "name" })
    ));
    let mut m = manifest(&[]);
    m["description"] = json!("bell \u{7}");
    assert!(matches!(
        Skill::from_json(&m),
        Err(SkillError::ControlCharacter { .. })
    ));
}

#[test]
fn s5_6_size_limits_at_below_and_above() {
    let with = |field: &str, value: Value| {
        let mut m = manifest(&[]);
        m[field] = value;
        Skill::from_json(&m)
    };
    // Instructions, in bytes (multi-byte characters count by their bytes).
    assert!(with("instructions", json!("i".repeat(MAX_INSTRUCTIONS_BYTES))).is_ok());
    assert!(
        with(
            "instructions",
            json!("i".repeat(MAX_INSTRUCTIONS_BYTES - 1))
        )
        .is_ok()
    );
    assert_eq!(
        with(
            "instructions",
            json!("i".repeat(MAX_INSTRUCTIONS_BYTES + 1))
        ),
        Err(SkillError::TooLong {
            field: "instructions",
            len: MAX_INSTRUCTIONS_BYTES + 1,
            limit: MAX_INSTRUCTIONS_BYTES,
            unit: "bytes"
        })
    );
    assert!(
        with(
            "instructions",
            json!("é".repeat(MAX_INSTRUCTIONS_BYTES / 2 + 1))
        )
        .is_err()
    );
    // Name and description, in characters.
    assert!(with("name", json!("n".repeat(MAX_NAME_CHARS))).is_ok());
    assert!(with("name", json!("n".repeat(MAX_NAME_CHARS + 1))).is_err());
    assert!(with("description", json!("d".repeat(MAX_DESCRIPTION_CHARS))).is_ok());
    assert!(with("description", json!("d".repeat(MAX_DESCRIPTION_CHARS - 1))).is_ok());
    assert!(matches!(
        with("description", json!("d".repeat(MAX_DESCRIPTION_CHARS + 1))),
        Err(SkillError::TooLong {
            field: "description",
            ..
        })
    ));
    // Tool count.
    let tools = |n: usize| json!((0..n).map(|i| format!("tool_{i}")).collect::<Vec<_>>());
    assert!(with("allowed_tools", tools(MAX_ALLOWED_TOOLS)).is_ok());
    assert_eq!(
        with("allowed_tools", tools(MAX_ALLOWED_TOOLS + 1)),
        Err(SkillError::TooManyTools {
            count: MAX_ALLOWED_TOOLS + 1,
            limit: MAX_ALLOWED_TOOLS
        })
    );
}

#[test]
fn s5_6_secret_looking_values_are_refused_naming_the_field() {
    let cases: Vec<(&str, Value, SecretKind, &str)> = vec![
        (
            "instructions",
            json!("Use the key sk-proj-Abcdefghijklmnopqrstuvwx0123 for calls."),
            SecretKind::OpenAiStyleKey,
            "instructions",
        ),
        (
            "description",
            json!("Uploads with AKIAIOSFODNN7EXAMPLE"),
            SecretKind::AwsAccessKeyId,
            "description",
        ),
        (
            "instructions",
            json!("git push with ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"),
            SecretKind::GitHubToken,
            "instructions",
        ),
        (
            "instructions",
            json!("token github_pat_11AAAAAAA0abcdefghijklmnop_qrstuvwxyz0123456789"),
            SecretKind::GitHubFineGrainedToken,
            "instructions",
        ),
        (
            "instructions",
            json!("Send header Authorization: Bearer 9f8e7d6c5b4a39281706abcdef"),
            SecretKind::BearerToken,
            "instructions",
        ),
        (
            "description",
            json!(
                "session eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
            ),
            SecretKind::Jwt,
            "description",
        ),
        (
            "instructions",
            json!("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIO\n-----END EC PRIVATE KEY-----"),
            SecretKind::PemPrivateKey,
            "instructions",
        ),
        (
            "allowed_tools",
            json!(["read_file", "sk-abcdefghijklmnopqrstuvwxyz"]),
            SecretKind::OpenAiStyleKey,
            "allowed_tools[1]",
        ),
    ];
    for (field, value, kind, named) in cases {
        let mut m = manifest(&["read_file"]);
        m[field] = value.clone();
        let err = Skill::from_json(&m).expect_err(named);
        assert_eq!(
            err,
            SkillError::SecretLike {
                field: named.into(),
                kind
            },
            "{named}"
        );
        let message = err.to_string();
        assert!(message.contains(named), "{message}");
        // The message never repeats the secret itself.
        if let Some(text) = value.as_str() {
            let secret_tail = &text[text.len().saturating_sub(12)..];
            assert!(!message.contains(secret_tail), "{message}");
        }
    }
    // Ordinary prose about secrets passes.
    let mut m = manifest(&["read_file"]);
    m["instructions"] =
        json!("Never paste API keys or Bearer tokens; ask the person to configure them.");
    assert!(Skill::from_json(&m).is_ok());
}

#[test]
fn a_manifest_parses_from_text() {
    let text = manifest(&["read_file"]).to_string();
    let skill = Skill::parse(&text).expect("valid");
    assert_eq!(skill.name(), "weekly-report");
    assert_eq!(skill.allowed_tools(), &set(&["read_file"]));
    assert!(skill.instructions().starts_with("Read notes"));
    assert!(matches!(
        Skill::parse(&" ".repeat(agent_tools::builtin::skill::MAX_MANIFEST_BYTES + 1)),
        Err(SkillError::ManifestTooLarge { .. })
    ));
}
