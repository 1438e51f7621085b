//! Memory and knowledge in runs (S10.1), through the assembly on the
//! kernel's memory host with a scripted model: a run under a profile whose
//! Memory scopes allow the session saves a memory and the next run finds
//! it; a profile that may only read Memory has its save refused; a run
//! without a profile gets no Memory; a Deep Research run is offered no
//! memory tool (S9.1); `knowledge_search` reaches only the bases the
//! profile allows, and its passages come back as untrusted data. The grants
//! are kept with the run's configuration. The memory tools and
//! `knowledge_search` are offered only to runs granted a Memory scope or a
//! knowledge base (issue 37 part 3): the schemas the model receives say so.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_assembly::{Assembly, Parts, ProfileChoice};
use agent_kernel::memory::MemoryHost;
use agent_kernel::{OwnerId, RunId, SessionId};
use agent_knowledge::{NewDocument, SourceRef};
use agent_profiles::{AgentProfileV2, MemoryScope, MemoryScopes, ProfileId};
use agent_supervisor::provider::{ModelRequest, ModelStream};
use agent_supervisor::{
    ModelProvider, ProviderError, RunConfig, RuntimeOptions, Scenario, ScriptedProvider,
};
use agent_tools::plugin::{SecretError, SecretHandle, SecretResolver, SecretValue};
use serde_json::Value;

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

/// The tool names of every request a provider received, in order.
type Offered = Arc<Mutex<Vec<Vec<String>>>>;

/// A provider that records the tool schemas of each request it is sent,
/// then answers as the scripted model it wraps.
struct Recording {
    inner: ScriptedProvider,
    offered: Offered,
}

#[async_trait::async_trait]
impl ModelProvider for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        self.offered
            .lock()
            .unwrap()
            .push(request.tools.iter().map(|t| t.name.clone()).collect());
        self.inner.stream(request).await
    }
}

/// A model that plays `prompt → turns` by the run's prompt.
fn assembly(mem: &MemoryHost, by_prompt: &[(&str, &str)]) -> Assembly {
    assembly_recording(mem, by_prompt, Offered::default())
}

/// [`assembly`], recording the tools offered in each request in `offered`.
fn assembly_recording(mem: &MemoryHost, by_prompt: &[(&str, &str)], offered: Offered) -> Assembly {
    let prompts: Vec<Value> = by_prompt
        .iter()
        .map(|(p, turns)| {
            serde_json::json!({"starts_with": p, "turns": serde_json::from_str::<Value>(turns).unwrap()})
        })
        .collect();
    let scenario = Scenario::from_json(
        &serde_json::json!({"turns": [{"text": "?"}], "prompts": prompts}).to_string(),
    )
    .expect("scenario");
    Assembly::build(Parts {
        host: mem.host(),
        owner: OwnerId::new("tab-1").expect("owner"),
        provider: Arc::new(Recording {
            inner: ScriptedProvider::new(scenario, mem.host().clock),
            offered,
        }),
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

fn profile(id: &str, read: &[MemoryScope], write: &[MemoryScope]) -> AgentProfileV2 {
    let mut p = AgentProfileV2::new(ProfileId::new(id).unwrap(), id);
    p.memory = MemoryScopes {
        read: read.iter().copied().collect(),
        write: write.iter().copied().collect(),
    };
    p.knowledge = Some(["docs".to_string()].into());
    p
}

/// The JSON each tool call of `run` returned to the model, in order.
async fn results(a: &Assembly, run: &RunId) -> Vec<Value> {
    let evidence = a.runtime().evidence(run).await.unwrap();
    let mut out = Vec::new();
    for e in evidence {
        let bytes = a.runtime().blob(run, &e.result).await.unwrap();
        out.push(serde_json::from_slice(&bytes).unwrap_or(Value::Null));
    }
    out
}

#[test]
fn s10_1_memory_follows_the_profile_s_scopes_and_knowledge_its_allowlist() {
    let mem = MemoryHost::fifo(5);
    let a = assembly(
        &mem,
        &[
            (
                "Remember",
                r#"[{"tool_calls": [{"name": "memory_save", "arguments": {"scope": "session", "text": "The person drinks green tea."}}]}, {"text": "Saved."}]"#,
            ),
            (
                "Recall",
                r#"[{"tool_calls": [{"name": "memory_search", "arguments": {"query": "tea"}}]}, {"text": "Found."}]"#,
            ),
            (
                "Look up",
                r#"[{"tool_calls": [{"name": "knowledge_search", "arguments": {"query": "density", "bases": ["docs"]}}, {"name": "knowledge_search", "arguments": {"query": "salary", "bases": ["private"]}}]}, {"text": "Looked."}]"#,
            ),
        ],
    );
    let session = SessionId::new("memory").unwrap();
    let (saved, recalled, read_only, unprofiled, looked, config) = mem
        .block_on_advancing(async {
            let _opened = a.open_session(&session).await.unwrap();
            let profiles = a.profiles();
            profiles
                .create(&profile(
                    "keeper",
                    &[MemoryScope::Session],
                    &[MemoryScope::Session],
                ))
                .await
                .unwrap();
            profiles
                .create(&profile("reader", &[MemoryScope::Session], &[]))
                .await
                .unwrap();
            let bases = a.knowledge().await.unwrap();
            for (base, text) in [
                ("docs", "Solid-state cells reach a density of 500 Wh/kg."),
                ("private", "The salary table."),
            ] {
                bases.create_base(base).await.unwrap();
                bases
                    .add_documents(
                        base,
                        vec![NewDocument {
                            id: "d1".into(),
                            title: base.into(),
                            source: SourceRef::Attachment {
                                name: format!("{base}.txt"),
                            },
                            text: text.into(),
                        }],
                    )
                    .await
                    .unwrap();
            }
            let under = |id: &str| ProfileChoice {
                profile: Some(ProfileId::new(id).unwrap()),
                ..ProfileChoice::default()
            };
            let run = |prompt: &'static str, choice: Option<ProfileChoice>| {
                let a = &a;
                let session = session.clone();
                async move {
                    let run = match choice {
                        Some(c) => {
                            a.start_with_profile(&session, prompt, RunConfig::default(), &c)
                                .await
                                .unwrap()
                                .0
                        }
                        None => a
                            .runtime()
                            .start(&session, prompt, RunConfig::default())
                            .await
                            .unwrap(),
                    };
                    a.runtime().wait_settled(&run).await.unwrap();
                    run
                }
            };
            let saved = run("Remember", Some(under("keeper"))).await;
            let recalled = run("Recall", Some(under("keeper"))).await;
            let read_only = run("Remember", Some(under("reader"))).await;
            let unprofiled = run("Recall", None).await;
            let looked = run("Look up", Some(under("keeper"))).await;
            let config = a.runtime().config(&saved).await.unwrap();
            (
                results(&a, &saved).await,
                results(&a, &recalled).await,
                results(&a, &read_only).await,
                results(&a, &unprofiled).await,
                results(&a, &looked).await,
                config,
            )
        })
        .expect("settles");
    assert_eq!(saved[0]["outcome"], "success", "{saved:?}");
    assert!(
        recalled[0].to_string().contains("green tea"),
        "{recalled:?}"
    );
    assert_eq!(read_only[0]["outcome"], "error", "{read_only:?}");
    assert!(read_only[0].to_string().contains("scope"), "{read_only:?}");
    // Not offered, so not callable either: nothing ran.
    assert_eq!(unprofiled[0]["outcome"], "error", "{unprofiled:?}");
    assert!(
        unprofiled[0].to_string().contains("tool_not_allowed"),
        "{unprofiled:?}"
    );
    assert_eq!(looked[0]["outcome"], "success", "{looked:?}");
    assert!(looked[0].to_string().contains("500 Wh/kg"), "{looked:?}");
    assert_eq!(looked[0]["trust"], "external_untrusted", "{looked:?}");
    assert_eq!(looked[1]["outcome"], "error", "{looked:?}");
    assert!(
        looked[1].to_string().contains("knowledge_base_not_allowed"),
        "{looked:?}"
    );
    // The grants are kept with the run (a resumed run keeps them).
    assert!(config.grants.contains_key("memory") && config.grants.contains_key("knowledge"));
}

#[test]
fn s9_1_a_deep_research_start_turn_is_offered_no_memory_tool() {
    let mem = MemoryHost::fifo(6);
    let a = assembly(&mem, &[]);
    let session = SessionId::new("research").unwrap();
    let schemas = mem
        .block_on_advancing(async {
            let _opened = a.open_session(&session).await.unwrap();
            let config = RunConfig {
                mode: agent_kernel::run::RunMode::Research,
                ..RunConfig::default()
            };
            a.tools()
                .addr
                .ask(|reply| agent_kernel::protocol::ToolsMsg::Schemas {
                    run: RunId::new("probe").unwrap(),
                    config: config.tool_config(),
                    reply,
                })
                .await
                .unwrap()
        })
        .unwrap();
    let names: Vec<&str> = schemas.iter().map(|s| s.name.as_str()).collect();
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("memory_") || *n == "knowledge_search"),
        "{names:?}"
    );
}

fn is_memory_or_knowledge(name: &str) -> bool {
    name.starts_with("memory_") || name == "knowledge_search"
}

#[test]
fn issue_37_3_memory_and_knowledge_tools_are_offered_only_with_a_grant() {
    let mem = MemoryHost::fifo(7);
    let offered = Offered::default();
    let a = assembly_recording(&mem, &[], offered.clone());
    let session = SessionId::new("offered").unwrap();
    mem.block_on_advancing(async {
        let _opened = a.open_session(&session).await.unwrap();
        let profiles = a.profiles();
        // Memory only; knowledge only; a profile granting neither (no
        // scope, an empty knowledge allowlist).
        let mut memory_only = profile("memory-only", &[MemoryScope::Session], &[]);
        memory_only.knowledge = Some(Default::default());
        let knowledge_only = profile("knowledge-only", &[], &[]);
        let mut nothing = profile("nothing", &[], &[]);
        nothing.knowledge = Some(Default::default());
        for p in [&memory_only, &knowledge_only, &nothing] {
            profiles.create(p).await.unwrap();
        }
        let unprofiled = a
            .runtime()
            .start(&session, "Hello", RunConfig::default())
            .await
            .unwrap();
        a.runtime().wait_settled(&unprofiled).await.unwrap();
        for id in ["memory-only", "knowledge-only", "nothing"] {
            let choice = ProfileChoice {
                profile: Some(ProfileId::new(id).unwrap()),
                ..ProfileChoice::default()
            };
            let (run, _) = a
                .start_with_profile(&session, "Hello", RunConfig::default(), &choice)
                .await
                .unwrap();
            a.runtime().wait_settled(&run).await.unwrap();
        }
    })
    .expect("settles");
    let offered = offered.lock().unwrap().clone();
    assert_eq!(offered.len(), 4, "{offered:?}");
    let granted = |i: usize| -> Vec<&str> {
        offered[i]
            .iter()
            .map(String::as_str)
            .filter(|n| is_memory_or_knowledge(n))
            .collect()
    };
    // Without a grant: none of them, while the other built-ins are there.
    assert!(granted(0).is_empty(), "{:?}", offered[0]);
    assert!(
        offered[0].iter().any(|n| n == "update_plan"),
        "{:?}",
        offered[0]
    );
    assert_eq!(
        granted(1),
        ["memory_forget", "memory_save", "memory_search"],
        "{:?}",
        offered[1]
    );
    assert_eq!(granted(2), ["knowledge_search"], "{:?}", offered[2]);
    assert!(granted(3).is_empty(), "{:?}", offered[3]);
}
