//! Agent Profiles in runs (S10.2), through the assembly on the kernel's
//! memory host with a scripted model: a run under a profile gets the
//! profile's tools, budget and approval; a turn that asks for more is
//! narrowed and the refusal listed; the narrowing is a caveat on the
//! capabilities the run mints, so a tool outside it is refused before it
//! runs; the run records the profile revision it used, and the profile's
//! run history lists the run.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::Arc;
use std::time::Duration;

use agent_assembly::{Assembly, Parts, ProfileChoice};
use agent_capabilities::{ApprovalMode, Caveat};
use agent_kernel::memory::MemoryHost;
use agent_kernel::run::RunStatus;
use agent_kernel::{OwnerId, SessionId};
use agent_profiles::{AgentProfileV2, Layer, ProfileId, ProfileMode};
use agent_supervisor::{RunConfig, RuntimeOptions, Scenario, ScriptedProvider};
use agent_tools::plugin::{SecretError, SecretHandle, SecretResolver, SecretValue};

struct NoSecrets;

#[async_trait::async_trait]
impl SecretResolver for NoSecrets {
    fn bound_origin(&self, _: &SecretHandle) -> Option<String> {
        None
    }
    async fn resolve(&self, handle: &SecretHandle) -> Result<SecretValue, SecretError> {
        Err(SecretError::Unknown(handle.0.clone()))
    }
}

fn assembly(mem: &MemoryHost, turns: &str) -> Assembly {
    let scenario = Scenario::from_json(&format!(r#"{{"turns": {turns}}}"#)).expect("scenario");
    Assembly::build(Parts {
        host: mem.host(),
        owner: OwnerId::new("tab-1").expect("owner"),
        provider: Arc::new(ScriptedProvider::new(scenario, mem.host().clock)),
        javascript: None,
        pdf_reader: None,
        html_extractor: None,
        fetch: None,
        secrets: Arc::new(NoSecrets),
        plugins: Vec::new(),
        always_on_plugins: Vec::new(),
        mcp: Vec::new(),
        search: None,
        runtime: RuntimeOptions {
            lease_ttl: Duration::from_secs(30),
            ..RuntimeOptions::default()
        },
    })
    .expect("assembly")
}

fn reader_profile() -> AgentProfileV2 {
    let mut profile = AgentProfileV2::new(ProfileId::new("reader").unwrap(), "Reader");
    profile.tools = Some(["workspace_read".to_string(), "workspace_list".to_string()].into());
    profile.approval = ApprovalMode::Strict;
    profile.budget.max_tool_calls = 5;
    profile
}

#[test]
fn s10_2_a_run_under_a_profile_is_narrowed_on_its_tokens_and_records_the_revision() {
    let mem = MemoryHost::fifo(3);
    // The model tries a write the profile does not allow, then answers.
    let a = assembly(
        &mem,
        r#"[{"tool_calls": [{"name": "workspace_write", "arguments": {"path": "x.txt", "content": "no"}}]},
            {"text": "done"}]"#,
    );
    let session = SessionId::new("profiled").unwrap();
    let id = ProfileId::new("reader").unwrap();
    let (run, effective, config) = mem
        .block_on_advancing(async {
            let _opened = a.open_session(&session).await.unwrap();
            a.profiles().create(&reader_profile()).await.unwrap();
            // The turn asks for a write tool and permissive approval.
            let choice = ProfileChoice {
                profile: Some(id.clone()),
                turn: Some(Layer {
                    tools: Some(["workspace_read".into(), "workspace_write".into()].into()),
                    approval: Some(ApprovalMode::Permissive),
                    ..Layer::default()
                }),
                ..ProfileChoice::default()
            };
            let (config, _) = a
                .profile_config(RunConfig::default(), &choice)
                .await
                .unwrap();
            let (run, effective) = a
                .start_with_profile(&session, "Write x.", RunConfig::default(), &choice)
                .await
                .unwrap();
            a.runtime().wait_settled(&run).await.unwrap();
            (run, effective, config)
        })
        .expect("settles");
    // Narrowed, with the refusals listed.
    assert_eq!(
        config.allowlist,
        Some(["workspace_read".to_string()].into()),
        "the turn cannot add a tool the profile lacks"
    );
    assert_eq!(config.approval, ApprovalMode::Strict);
    assert_eq!(config.budget.max_tool_calls, 5);
    let refused: Vec<&str> = effective.refused.iter().map(|r| r.field.as_str()).collect();
    assert!(
        refused.contains(&"tools") && refused.contains(&"approval"),
        "{refused:?}"
    );
    // The narrowing is a caveat on every minted capability.
    assert!(
        config.caveats.iter().any(|c| matches!(c, Caveat::Tools(t) if t.contains("workspace_read") && !t.contains("workspace_write"))),
        "{:?}",
        config.caveats
    );
    let profile = config.profile.clone().expect("the profile revision");
    assert_eq!((profile.id.as_str(), profile.revision), ("reader", 1));

    let (record, stored, history, files) = mem
        .block_on_advancing(async {
            let record = a.runtime().run(&run).await.unwrap();
            let stored = a.runtime().config(&run).await.unwrap();
            let history = a.profiles().runs(&id).await.unwrap();
            let files = a.files(&session).await.unwrap();
            (record, stored, history, files)
        })
        .unwrap();
    assert_eq!(record.status, RunStatus::Completed);
    assert!(files.is_empty(), "the write never ran");
    assert_eq!(
        stored.profile, config.profile,
        "the run records its profile revision"
    );
    assert_eq!(stored.caveats, config.caveats);
    assert_eq!(history.len(), 1);
    assert_eq!(effective.mode, ProfileMode::Agent);
}

#[test]
fn s10_2_a_chat_only_profile_turns_an_agent_turn_into_chat() {
    let mem = MemoryHost::fifo(4);
    let a = assembly(&mem, r#"[{"text": "hello"}]"#);
    let mut chat = AgentProfileV2::new(ProfileId::new("chatty").unwrap(), "Chatty");
    chat.mode = ProfileMode::Chat;
    let config = mem
        .block_on_advancing(async {
            a.profiles().create(&chat).await.unwrap();
            let choice = ProfileChoice {
                profile: Some(chat.id.clone()),
                turn: Some(Layer {
                    mode: Some(ProfileMode::Agent),
                    ..Layer::default()
                }),
                ..ProfileChoice::default()
            };
            a.profile_config(RunConfig::default(), &choice)
                .await
                .unwrap()
                .0
        })
        .unwrap();
    assert_eq!(config.mode, agent_kernel::run::RunMode::Chat);
    assert_eq!(config.caveats, vec![Caveat::Tools(Default::default())]);
}
