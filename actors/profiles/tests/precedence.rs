//! Precedence (S10.2): a table test across the five layers, one test per
//! layer, widenings by a turn reference refused (a tool, a plugin, a budget,
//! permissive over strict), the narrowing carried as capability caveats
//! that make a forged widening fail verification, and the mapping onto the
//! supervisor's `RunConfig`. Pure: runs natively and on wasm32.

use std::collections::BTreeSet;

use agent_capabilities::{
    ApprovalMode, Authority, CapabilityError, Caveat, EffectClass, EffectRequest, Fingerprint,
    Grant, Origin, Target, TargetScope, Uses,
};
use agent_kernel::budget::{Budget, BudgetPreset};
use agent_kernel::protocol::AppliedSkill;
use agent_kernel::run::RunMode;
use agent_profiles::{
    AgentProfileV2, Effective, Layer, LayerName, Layers, MemoryScope, MemoryScopes, ProfileError,
    ProfileId, ProfileLayer, ProfileMode, ReasoningEffort, resolve,
};
use agent_supervisor::RunConfig;
use base64::Engine as _;
use serde_json::json;

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;
#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn profile() -> AgentProfileV2 {
    let mut p = AgentProfileV2::new(ProfileId::new("analyst").unwrap(), "Analyst");
    p.model.model = "profile-model".into();
    p.model.provider = Some("work".into());
    p.tools = Some(set(&[
        "fetch_url",
        "read_file",
        "write_file",
        "run_javascript",
    ]));
    p.plugins = Some(set(&["weather", "crm"]));
    p.mcp_servers = Some(set(&["docs"]));
    p.knowledge = Some(set(&["handbook", "wiki"]));
    p.skills = Some(set(&["summarise", "translate"]));
    p.budget = Budget::preset(BudgetPreset::Extended);
    p.search.web_search = true;
    p.memory = MemoryScopes {
        read: [
            MemoryScope::Global,
            MemoryScope::Profile,
            MemoryScope::Session,
        ]
        .into(),
        write: [MemoryScope::Profile, MemoryScope::Session].into(),
    };
    p.system_prompt_addition = Some("From the profile.".into());
    p
}

fn global() -> Layer {
    Layer {
        model: Some("host-model".into()),
        tools: Some(set(&[
            "fetch_url",
            "read_file",
            "write_file",
            "run_javascript",
            "web_search",
        ])),
        plugins: Some(set(&["weather", "crm", "mail"])),
        ..Layer::default()
    }
}

fn with_profile() -> Layers {
    Layers {
        global: global(),
        profile: Some(ProfileLayer::of(&profile(), 4)),
        ..Layers::default()
    }
}

fn fields(eff: &Effective) -> Vec<(LayerName, &str)> {
    eff.refused
        .iter()
        .map(|r| (r.layer, r.field.as_str()))
        .collect()
}

/// S10.2: one row per layer; each row says what that layer set and what
/// the effective result then is.
#[test]
fn table_across_the_five_layers() {
    struct Row {
        name: &'static str,
        layers: Layers,
        model: &'static str,
        tools: Option<BTreeSet<String>>,
        approval: ApprovalMode,
        rounds: u32,
        prompt: Option<&'static str>,
    }
    let base = with_profile();
    let rows = [
        Row {
            name: "global default alone",
            layers: Layers {
                global: global(),
                ..Layers::default()
            },
            model: "host-model",
            tools: Some(set(&[
                "fetch_url",
                "read_file",
                "write_file",
                "run_javascript",
                "web_search",
            ])),
            approval: ApprovalMode::Permissive,
            rounds: 20,
            prompt: None,
        },
        Row {
            name: "workspace narrows tools, sets strict, a model and a budget",
            layers: Layers {
                global: global(),
                workspace: Layer {
                    model: Some("ws-model".into()),
                    tools: Some(set(&["fetch_url", "read_file"])),
                    approval: Some(ApprovalMode::Strict),
                    budget: Some(Budget::preset(BudgetPreset::Light)),
                    ..Layer::default()
                },
                ..Layers::default()
            },
            model: "ws-model",
            tools: Some(set(&["fetch_url", "read_file"])),
            approval: ApprovalMode::Strict,
            rounds: 8,
            prompt: None,
        },
        Row {
            name: "agent profile sets model, budget, tools",
            layers: base.clone(),
            model: "profile-model",
            tools: Some(set(&[
                "fetch_url",
                "read_file",
                "write_file",
                "run_javascript",
            ])),
            approval: ApprovalMode::Permissive,
            rounds: 24,
            prompt: Some("From the profile."),
        },
        Row {
            name: "session override narrows and changes the model",
            layers: Layers {
                session: Layer {
                    model: Some("session-model".into()),
                    tools: Some(set(&["fetch_url", "read_file", "write_file"])),
                    budget: Some(Budget::preset(BudgetPreset::Standard)),
                    ..Layer::default()
                },
                ..base.clone()
            },
            model: "session-model",
            tools: Some(set(&["fetch_url", "read_file", "write_file"])),
            approval: ApprovalMode::Permissive,
            rounds: 16,
            prompt: Some("From the profile."),
        },
        Row {
            name: "turn reference narrows further and sets the prompt",
            layers: Layers {
                session: Layer {
                    tools: Some(set(&["fetch_url", "read_file", "write_file"])),
                    ..Layer::default()
                },
                turn: Layer {
                    tools: Some(set(&["read_file"])),
                    approval: Some(ApprovalMode::Strict),
                    budget: Some(Budget {
                        max_tool_rounds: 3,
                        ..Budget::fallback()
                    }),
                    system_prompt_addition: Some("From the turn.".into()),
                    ..Layer::default()
                },
                ..base.clone()
            },
            model: "profile-model",
            tools: Some(set(&["read_file"])),
            approval: ApprovalMode::Strict,
            rounds: 3,
            prompt: Some("From the turn."),
        },
    ];
    for row in rows {
        let eff = resolve(&row.layers);
        assert_eq!(eff.model, row.model, "{}", row.name);
        assert_eq!(eff.tools, row.tools, "{}", row.name);
        assert_eq!(eff.approval, row.approval, "{}", row.name);
        assert_eq!(eff.budget.max_tool_rounds, row.rounds, "{}", row.name);
        assert_eq!(
            eff.system_prompt_addition.as_deref(),
            row.prompt,
            "{}",
            row.name
        );
        assert!(eff.refused.is_empty(), "{}: {:?}", row.name, eff.refused);
        // Pure: the same layers, the same result.
        assert_eq!(resolve(&row.layers), eff, "{}", row.name);
    }
}

/// S10.2, S4.2: with no layer at all, the runtime's defaults.
#[test]
fn global_default_layer_and_the_fallback() {
    let eff = resolve(&Layers::default());
    assert_eq!(eff.budget, Budget::fallback());
    assert_eq!(eff.approval, ApprovalMode::Permissive);
    assert_eq!(eff.mode, ProfileMode::Agent);
    assert_eq!(eff.model, "default");
    assert_eq!(eff.tools, None);
    assert!(eff.caveats().is_empty());
    assert_eq!(eff.profile, None);
    // The global default's own values, and it is the ceiling below.
    let eff = resolve(&Layers {
        global: Layer {
            approval: Some(ApprovalMode::Strict),
            web_search: Some(false),
            budget: Some(Budget::preset(BudgetPreset::Light)),
            ..global()
        },
        ..Layers::default()
    });
    assert_eq!(eff.approval, ApprovalMode::Strict);
    assert!(!eff.web_search);
    assert_eq!(eff.budget, Budget::preset(BudgetPreset::Light));
}

/// S10.2: the Workspace overrides settings and the budget, and narrows
/// allowlists; it cannot add a plugin the global default does not have.
#[test]
fn workspace_layer() {
    let eff = resolve(&Layers {
        global: global(),
        workspace: Layer {
            model: Some("ws-model".into()),
            reasoning_effort: Some(ReasoningEffort::Low),
            plugins: Some(set(&["weather", "evil"])),
            budget: Some(Budget::preset(BudgetPreset::Extended)),
            ..Layer::default()
        },
        ..Layers::default()
    });
    assert_eq!(eff.model, "ws-model");
    assert_eq!(eff.reasoning_effort, Some(ReasoningEffort::Low));
    assert_eq!(eff.plugins, Some(set(&["weather"])));
    assert_eq!(eff.budget, Budget::preset(BudgetPreset::Extended));
    assert_eq!(fields(&eff), [(LayerName::Workspace, "plugins")]);
    assert_eq!(eff.refused[0].asked, json!(["evil"]));
}

/// S10.2, S4.4: the Agent Profile sets the budget (even above the
/// fallback), its settings win over the Workspace's, its allowlists stay
/// within the layers above, and the result names the profile revision.
#[test]
fn agent_profile_layer() {
    let mut layers = with_profile();
    layers.workspace = Layer {
        model: Some("ws-model".into()),
        knowledge: Some(set(&["wiki"])),
        approval: Some(ApprovalMode::Strict),
        ..Layer::default()
    };
    let eff = resolve(&layers);
    assert_eq!(eff.model, "profile-model");
    assert_eq!(eff.provider.as_deref(), Some("work"));
    assert_eq!(eff.budget, Budget::preset(BudgetPreset::Extended));
    assert_eq!(eff.knowledge, Some(set(&["wiki"])));
    // The profile is permissive, the Workspace strict: strict stays.
    assert_eq!(eff.approval, ApprovalMode::Strict);
    assert_eq!(
        fields(&eff),
        [
            (LayerName::Profile, "approval"),
            (LayerName::Profile, "knowledge")
        ]
    );
    let used = eff.profile.expect("profile revision");
    assert_eq!((used.id.as_str(), used.revision), ("analyst", 4));
    assert_eq!(
        eff.memory.write,
        [MemoryScope::Profile, MemoryScope::Session].into()
    );
}

/// S10.2 (decided here): no layer after the profile may widen; the session
/// override narrows like a turn reference. Without a profile it sets the
/// budget (S4.4: "the selected profile or chat override").
#[test]
fn session_override_layer() {
    let eff = resolve(&Layers {
        session: Layer {
            tools: Some(set(&["fetch_url", "mail_send"])),
            budget: Some(Budget {
                max_tool_rounds: 50,
                max_tool_calls: 10,
                max_tokens: Some(1_000),
                max_duration_ms: None,
            }),
            mode: Some(ProfileMode::Chat),
            ..Layer::default()
        },
        ..with_profile()
    });
    assert_eq!(eff.tools, Some(set(&["fetch_url"])));
    assert_eq!(eff.budget.max_tool_rounds, 24);
    assert_eq!(eff.budget.max_tool_calls, 10);
    assert_eq!(eff.budget.max_tokens, Some(1_000));
    assert_eq!(eff.budget.max_duration_ms, Some(45 * 60_000));
    assert_eq!(eff.mode, ProfileMode::Chat);
    assert_eq!(
        fields(&eff),
        [
            (LayerName::Session, "budget.max_tool_rounds"),
            (LayerName::Session, "tools")
        ]
    );

    let no_profile = resolve(&Layers {
        global: global(),
        session: Layer {
            budget: Some(Budget::preset(BudgetPreset::Extended)),
            ..Layer::default()
        },
        ..Layers::default()
    });
    assert_eq!(no_profile.budget, Budget::preset(BudgetPreset::Extended));
    assert!(no_profile.refused.is_empty());
}

/// S10.2: a turn reference that tries to widen (a tool, a plugin, a budget,
/// permissive over strict, chat to agent, web search, Memory) is refused:
/// the effective result keeps the layer above, and each refusal is listed.
#[test]
fn turn_reference_can_only_narrow() {
    let mut layers = with_profile();
    layers.session = Layer {
        approval: Some(ApprovalMode::Strict),
        web_search: Some(false),
        mode: Some(ProfileMode::Chat),
        ..Layer::default()
    };
    layers.turn = Layer {
        tools: Some(set(&["read_file", "mail_send"])),
        plugins: Some(set(&["weather", "mail"])),
        budget: Some(Budget {
            max_tool_rounds: 100,
            max_tool_calls: 5,
            max_tokens: None,
            max_duration_ms: Some(46 * 60_000),
        }),
        approval: Some(ApprovalMode::Permissive),
        mode: Some(ProfileMode::Agent),
        web_search: Some(true),
        memory: Some(MemoryScopes::all()),
        model: Some("turn-model".into()),
        ..Layer::default()
    };
    let eff = resolve(&layers);
    assert_eq!(eff.tools, Some(set(&["read_file"])));
    assert_eq!(eff.plugins, Some(set(&["weather"])));
    assert_eq!(eff.budget.max_tool_rounds, 24);
    assert_eq!(eff.budget.max_tool_calls, 5);
    assert_eq!(eff.budget.max_duration_ms, Some(45 * 60_000));
    assert_eq!(eff.approval, ApprovalMode::Strict);
    assert_eq!(eff.mode, ProfileMode::Chat);
    assert!(!eff.web_search);
    assert_eq!(
        eff.memory.read,
        [
            MemoryScope::Global,
            MemoryScope::Profile,
            MemoryScope::Session
        ]
        .into()
    );
    // A setting is not a capability: the turn may change the model.
    assert_eq!(eff.model, "turn-model");
    let turn: Vec<&str> = eff
        .refused
        .iter()
        .filter(|r| r.layer == LayerName::Turn)
        .map(|r| r.field.as_str())
        .collect();
    assert_eq!(
        turn,
        [
            "mode",
            "search.web_search",
            "approval",
            "budget.max_tool_rounds",
            "budget.max_duration_ms",
            "plugins",
            "tools",
            "memory.read",
            "memory.write"
        ]
    );
    let tools = eff.refused.iter().find(|r| r.field == "tools").unwrap();
    assert_eq!(tools.asked, json!(["mail_send"]));
    let approval = eff.refused.iter().find(|r| r.field == "approval").unwrap();
    assert_eq!(
        (approval.asked.clone(), approval.kept.clone()),
        (json!("permissive"), json!("strict"))
    );
}

fn fp() -> Fingerprint {
    Fingerprint::from_hex(&"a".repeat(64)).unwrap()
}

fn request(tool: &str) -> EffectRequest {
    EffectRequest {
        run_id: "run-1".into(),
        tool: tool.into(),
        fingerprint: fp(),
        effects: [EffectClass::WriteLocal].into_iter().collect(),
        target: Target::WorkspacePath {
            path: "notes/a.md".into(),
        },
    }
}

fn grant(tool: &str) -> Grant {
    Grant {
        tool: tool.into(),
        fingerprint: fp(),
        origin: Origin::Builtin,
        effects: [EffectClass::WriteLocal].into_iter().collect(),
        scope: TargetScope::Workspace {
            prefix: "notes".into(),
        },
        uses: Uses::ForRun,
        expires_at_ms: 2_000_000,
    }
}

/// S10.2: the narrowing is carried as caveats on what the run mints. A
/// capability for a tool outside the effective set fails verification, and
/// a holder who strips the caveat (a forged widening) fails too.
#[test]
fn caveats_make_a_forged_widening_fail_verification() {
    let mut layers = with_profile();
    layers.turn.tools = Some(set(&["read_file"]));
    let eff = resolve(&layers);
    assert_eq!(eff.caveats(), vec![Caveat::Tools(set(&["read_file"]))]);

    let authority = Authority::new("run-1", [9; 32]);
    let attenuate = |cap: agent_capabilities::Capability| {
        eff.caveats()
            .into_iter()
            .fold(cap, |cap, caveat| cap.attenuate(caveat))
    };
    // Inside the effective set: verifies.
    let read = attenuate(authority.mint(grant("read_file")));
    assert!(
        authority
            .verifier()
            .verify(&read, &request("read_file"), 1_000)
            .is_ok()
    );
    // write_file was in the profile, not in the turn's narrowing: refused,
    // although the authority itself granted it.
    let write = attenuate(authority.mint(grant("write_file")));
    assert!(matches!(
        authority
            .verifier()
            .verify(&write, &request("write_file"), 1_000),
        Err(CapabilityError::WrongTool { .. })
    ));
    // Forgery: strip the Tools caveat from the wire form.
    let wire = write.to_wire();
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut doc: serde_json::Value =
        serde_json::from_slice(&engine.decode(&wire).unwrap()).unwrap();
    doc["caveats"].as_array_mut().unwrap().clear();
    let forged = engine.encode(serde_json::to_vec(&doc).unwrap());
    assert_eq!(
        authority
            .verifier()
            .verify_wire(&forged, &request("write_file"), 1_000),
        Err(CapabilityError::BadTag)
    );
    // Forgery: widen the caveat's set in place.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&engine.decode(&wire).unwrap()).unwrap();
    doc["caveats"][0]["value"] = json!(["read_file", "write_file"]);
    let forged = engine.encode(serde_json::to_vec(&doc).unwrap());
    assert_eq!(
        authority
            .verifier()
            .verify_wire(&forged, &request("write_file"), 1_000),
        Err(CapabilityError::BadTag)
    );
}

/// S10.2: chat mode allows no tool at all; plugin and MCP allowlists narrow
/// a registry's tools by origin.
#[test]
fn caveats_for_a_registry_fold_in_plugins_and_mcp() {
    let eff = resolve(&with_profile());
    let registry = [
        ("fetch_url", Origin::Builtin),
        ("forecast", Origin::Plugin("weather".into())),
        ("send", Origin::Plugin("mail".into())),
        ("search_docs", Origin::Mcp("docs".into())),
        ("query", Origin::Mcp("db".into())),
    ];
    let mut layers = with_profile();
    layers.global.tools = None;
    layers.profile.as_mut().unwrap().layer.tools = None;
    let open = resolve(&layers);
    assert_eq!(
        open.caveats_for(registry.iter().map(|(n, o)| (*n, o))),
        vec![Caveat::Tools(set(&[
            "fetch_url",
            "forecast",
            "search_docs"
        ]))]
    );
    assert!(!eff.allows_tool("forecast", &Origin::Plugin("weather".into())));
    assert!(eff.allows_tool("fetch_url", &Origin::Builtin));
    assert!(open.allows_tool("forecast", &Origin::Plugin("weather".into())));
    assert!(!open.allows_tool("send", &Origin::Plugin("mail".into())));

    let mut chat = with_profile();
    chat.turn.mode = Some(ProfileMode::Chat);
    let chat = resolve(&chat);
    assert_eq!(chat.caveats(), vec![Caveat::Tools(BTreeSet::new())]);
    assert!(!chat.allows_tool("fetch_url", &Origin::Builtin));
}

/// The assembly's mapping of [`agent_profiles::RunSettings`] onto the
/// supervisor's `RunConfig` (the library may not depend on the supervisor).
fn apply(settings: &agent_profiles::RunSettings, config: &mut RunConfig) {
    config.mode = settings.mode_for(config.mode);
    config.budget = settings.budget;
    config.approval = settings.approval;
    config.allowlist = settings.allowlist.clone();
    config.model.model = settings.model.clone();
    config.model.provider = settings.provider.clone();
    config.model.max_output_tokens = settings.max_output_tokens;
    config.model.reasoning = settings.reasoning;
    config.model.system_extension = settings.system_extension.clone();
}

/// S10.2, S4.4: the effective settings fill a run's `RunConfig` (which
/// then validates) and name the profile revision; a Skill outside the
/// Skill policy is refused.
#[test]
fn run_settings_fill_a_run_config() {
    let mut layers = with_profile();
    layers.turn.tools = Some(set(&["read_file"]));
    layers.turn.approval = Some(ApprovalMode::Strict);
    let eff = resolve(&layers);
    let settings = eff.run_settings(None).unwrap();
    let used = settings.profile.clone().unwrap();
    assert_eq!((used.id.as_str(), used.revision), ("analyst", 4));
    let mut config = RunConfig::default();
    apply(&settings, &mut config);
    assert_eq!(config.mode, RunMode::Agent);
    assert_eq!(config.budget, Budget::preset(BudgetPreset::Extended));
    assert_eq!(config.approval, ApprovalMode::Strict);
    assert_eq!(config.allowlist, Some(set(&["read_file"])));
    assert_eq!(config.model.model, "profile-model");
    assert_eq!(config.model.provider.as_deref(), Some("work"));
    assert_eq!(
        config.model.system_extension.as_deref(),
        Some("From the profile.")
    );
    config.validate().unwrap();
    // S10.1: the reasoning setting reaches the run, the turn's budget over
    // the profile's effort.
    let mut thinking = with_profile();
    thinking.profile.as_mut().unwrap().layer.reasoning_effort = Some(ReasoningEffort::High);
    thinking.turn.reasoning_budget_tokens = Some(2_048);
    let mut config = RunConfig::default();
    apply(&resolve(&thinking).run_settings(None).unwrap(), &mut config);
    assert_eq!(
        config.model.reasoning,
        agent_kernel::reasoning::Reasoning {
            effort: Some(ReasoningEffort::High),
            budget_tokens: Some(2_048),
        }
    );
    config.validate().unwrap();
    for (budget, ok) in [
        (1_023, false),
        (1_024, true),
        (128_000, true),
        (128_001, false),
    ] {
        let layer = Layer {
            reasoning_budget_tokens: Some(budget),
            ..Layer::default()
        };
        assert_eq!(layer.validate(LayerName::Turn).is_ok(), ok, "{budget}");
    }
    let tools = settings.tool_config(RunMode::Agent);
    assert_eq!(tools.allowlist, Some(set(&["read_file"])));
    assert_eq!(tools.approval, ApprovalMode::Strict);

    let allowed = AppliedSkill {
        name: "summarise".into(),
        instructions: "x".into(),
        tools: BTreeSet::new(),
    };
    assert!(eff.run_settings(Some(&allowed)).is_ok());
    let other = AppliedSkill {
        name: "jailbreak".into(),
        ..allowed
    };
    assert_eq!(
        eff.run_settings(Some(&other)),
        Err(ProfileError::SkillNotAllowed {
            skill: "jailbreak".into()
        })
    );

    let mut chat = with_profile();
    chat.session.mode = Some(ProfileMode::Chat);
    let settings = resolve(&chat).run_settings(None).unwrap();
    let mut config = RunConfig::default();
    apply(&settings, &mut config);
    assert_eq!(config.mode, RunMode::Chat);
    assert_eq!(config.allowlist, Some(BTreeSet::new()));
    // A research run keeps its mode.
    assert_eq!(settings.mode_for(RunMode::Research), RunMode::Research);
}

/// S10.2: outside layers (a session override, a turn reference) are read
/// strictly and bounded, each error naming the layer and the field.
#[test]
fn outside_layers_are_validated() {
    let ok = Layer::from_json(&json!({"tools": ["read_file"]}), LayerName::Turn).unwrap();
    assert_eq!(ok.tools, Some(set(&["read_file"])));
    assert!(matches!(
        Layer::from_json(&json!({"tools": ["a"], "grant_all": true}), LayerName::Turn),
        Err(ProfileError::InvalidLayer {
            layer: LayerName::Turn,
            ..
        })
    ));
    assert!(matches!(
        Layer::from_json(
            &json!({"budget": {"max_tool_rounds": 0, "max_tool_calls": 1}}),
            LayerName::Session
        ),
        Err(ProfileError::InvalidLayer {
            layer: LayerName::Session,
            field: "budget.max_tool_rounds",
            ..
        })
    ));
    let too_many: Vec<String> = (0..=agent_profiles::profile::MAX_LIST_ITEMS)
        .map(|i| format!("t{i}"))
        .collect();
    assert!(matches!(
        Layer::from_json(&json!({ "plugins": too_many }), LayerName::Turn),
        Err(ProfileError::InvalidLayer {
            field: "plugins",
            ..
        })
    ));
    let layers = Layers {
        turn: Layer {
            model: Some("two words".into()),
            ..Layer::default()
        },
        ..Layers::default()
    };
    assert!(matches!(
        layers.validate(),
        Err(ProfileError::InvalidLayer {
            layer: LayerName::Turn,
            field: "model.model",
            ..
        })
    ));
}
