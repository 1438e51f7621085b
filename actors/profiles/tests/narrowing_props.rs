//! "Only narrows" holds for every combination (S10.2): for random layers,
//! the effective capability-bearing fields never exceed any layer after the
//! global default that set them, the session override and the turn
//! reference never raise the budget the profile set, everything a layer
//! asked and did not get is listed as refused, and a capability attenuated
//! with the effective caveats verifies exactly for the effective tools.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeSet;

use agent_capabilities::{
    ApprovalMode, Authority, EffectClass, EffectRequest, Fingerprint, Grant, Origin, Target,
    TargetScope, Uses,
};
use agent_kernel::budget::Budget;
use agent_profiles::{
    Layer, LayerName, Layers, MemoryScope, MemoryScopes, ProfileId, ProfileLayer, ProfileMode,
    ProfileRef, resolve, strictness,
};
use proptest::prelude::*;

const TOOLS: [&str; 5] = [
    "fetch_url",
    "read_file",
    "write_file",
    "run_javascript",
    "web_search",
];

fn tool_set() -> impl Strategy<Value = Option<BTreeSet<String>>> {
    prop::option::of(prop::collection::btree_set(
        prop::sample::select(TOOLS.to_vec()).prop_map(str::to_owned),
        0..5,
    ))
}

fn scopes() -> impl Strategy<Value = BTreeSet<MemoryScope>> {
    prop::collection::btree_set(prop::sample::select(MemoryScope::ALL.to_vec()), 0..4)
}

fn budget() -> impl Strategy<Value = Option<Budget>> {
    prop::option::of(
        (
            1u32..40,
            1u32..200,
            prop::option::of(1u64..1_000_000),
            prop::option::of(1u64..3_600_000),
        )
            .prop_map(|(r, c, t, d)| Budget {
                max_tool_rounds: r,
                max_tool_calls: c,
                max_tokens: t,
                max_duration_ms: d,
            }),
    )
}

fn layer() -> impl Strategy<Value = Layer> {
    (
        tool_set(),
        prop::option::of(prop::sample::select(vec![
            ApprovalMode::Permissive,
            ApprovalMode::Strict,
        ])),
        prop::option::of(prop::sample::select(vec![
            ProfileMode::Chat,
            ProfileMode::Agent,
        ])),
        prop::option::of(any::<bool>()),
        budget(),
        prop::option::of((scopes(), scopes())),
    )
        .prop_map(|(tools, approval, mode, web, budget, memory)| Layer {
            tools,
            approval,
            mode,
            web_search: web,
            budget,
            memory: memory.map(|(read, write)| MemoryScopes { read, write }),
            ..Layer::default()
        })
}

fn layers() -> impl Strategy<Value = Layers> {
    (
        layer(),
        layer(),
        prop::option::of(layer()),
        layer(),
        layer(),
    )
        .prop_map(|(global, workspace, profile, session, turn)| Layers {
            global,
            workspace,
            profile: profile.map(|layer| ProfileLayer {
                profile: ProfileRef {
                    id: ProfileId::new("p").unwrap(),
                    revision: 1,
                },
                layer,
            }),
            session,
            turn,
        })
}

fn each_layer(l: &Layers) -> Vec<(LayerName, &Layer)> {
    let mut out = vec![
        (LayerName::Global, &l.global),
        (LayerName::Workspace, &l.workspace),
    ];
    if let Some(p) = &l.profile {
        out.push((LayerName::Profile, &p.layer));
    }
    out.push((LayerName::Session, &l.session));
    out.push((LayerName::Turn, &l.turn));
    out
}

fn leq_limit(effective: Option<u64>, asked: Option<u64>) -> bool {
    match (effective, asked) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(e), Some(a)) => e <= a,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_effective_set_never_exceeds_a_layer(l in layers()) {
        let eff = resolve(&l);
        for (name, layer) in each_layer(&l) {
            if let Some(tools) = &layer.tools {
                let eff_tools = eff.tools.as_ref().expect("a layer set tools");
                prop_assert!(eff_tools.is_subset(tools), "{name}: {eff_tools:?} ⊄ {tools:?}");
                // What the last layer asked and did not get is reported
                // (earlier layers' sets may also shrink by later narrowing).
                let denied: BTreeSet<&String> = tools.difference(eff_tools).collect();
                if name == LayerName::Turn && !denied.is_empty() {
                    let refused = eff.refused.iter().find(|r| r.layer == name && r.field == "tools");
                    prop_assert!(refused.is_some());
                    prop_assert_eq!(&refused.unwrap().asked, &serde_json::json!(denied));
                }
            }
            if let Some(mode) = layer.approval {
                prop_assert!(strictness(eff.approval) >= strictness(mode), "{name}");
                if name == LayerName::Turn && strictness(mode) < strictness(eff.approval) {
                    prop_assert!(eff.refused.iter().any(|r| r.layer == name && r.field == "approval"));
                }
            }
            if let Some(mode) = layer.mode {
                prop_assert!(eff.mode <= mode, "{name}");
            }
            if layer.web_search == Some(false) {
                prop_assert!(!eff.web_search, "{name}");
            }
            if let Some(m) = &layer.memory {
                prop_assert!(eff.memory.read.is_subset(&m.read), "{name}");
                prop_assert!(eff.memory.write.is_subset(&m.write), "{name}");
            }
        }
        // After the profile (or, without one, after the session), nothing
        // raises a budget dimension.
        let narrowing: Vec<&Layer> = if l.profile.is_some() {
            vec![&l.session, &l.turn]
        } else {
            vec![&l.turn]
        };
        for layer in narrowing {
            if let Some(b) = &layer.budget {
                prop_assert!(eff.budget.max_tool_rounds <= b.max_tool_rounds);
                prop_assert!(eff.budget.max_tool_calls <= b.max_tool_calls);
                prop_assert!(leq_limit(eff.budget.max_tokens, b.max_tokens));
                prop_assert!(leq_limit(eff.budget.max_duration_ms, b.max_duration_ms));
            }
        }
        // Pure.
        prop_assert_eq!(resolve(&l), eff);
    }

    #[test]
    fn caveats_verify_exactly_the_effective_tools(l in layers()) {
        let eff = resolve(&l);
        let authority = Authority::new("run", [3; 32]);
        for tool in TOOLS {
            let fingerprint = Fingerprint::of(&tool).unwrap();
            let cap = eff.caveats().into_iter().fold(
                authority.mint(Grant {
                    tool: tool.into(),
                    fingerprint: fingerprint.clone(),
                    origin: Origin::Builtin,
                    effects: [EffectClass::ReadLocal].into_iter().collect(),
                    scope: TargetScope::Workspace { prefix: String::new() },
                    uses: Uses::ForRun,
                    expires_at_ms: 10_000,
                }),
                |cap, caveat| cap.attenuate(caveat),
            );
            let request = EffectRequest {
                run_id: "run".into(),
                tool: tool.into(),
                fingerprint,
                effects: [EffectClass::ReadLocal].into_iter().collect(),
                target: Target::WorkspacePath { path: "a.md".into() },
            };
            let verifies = authority.verifier().verify(&cap, &request, 1).is_ok();
            let listed = eff.mode == ProfileMode::Agent
                && eff.tools.as_ref().is_none_or(|t| t.contains(tool));
            prop_assert_eq!(verifies, listed, "{}", tool);
        }
    }
}
