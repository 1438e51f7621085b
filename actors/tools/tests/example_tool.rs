//! Issue 4 acceptance: the example tool from `examples/word_count.rs` is
//! exercised here, through `spawn_tool` and the tools actor, with the checks
//! the tool-author API gives it for free.

#![cfg(not(target_arch = "wasm32"))]

#[allow(dead_code)]
#[path = "../examples/word_count.rs"]
mod word_count;

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use agent_capabilities::{Authority, Decision, Uses};
use agent_kernel::protocol::{
    InvocationDraft, ToolFailure, ToolInvocation, ToolMsg, ToolResult, ToolSuccess,
};
use agent_tools::author::{ToolHooks, ToolOptions};
use agent_tools::codes;
use agent_tools::registry::{Registry, ToolRegistration};
use agent_tools::{Tool, ToolContext, spawn_tool, spawn_tool_with, spawn_tools};
use common::*;
use word_count::WordCount;

#[derive(Default)]
struct CountingHooks {
    before: AtomicUsize,
    after: AtomicUsize,
}

impl ToolHooks for CountingHooks {
    fn before_call(&self, _draft: &InvocationDraft) {
        self.before.fetch_add(1, Ordering::SeqCst);
    }
    fn after_call(&self, _draft: &InvocationDraft, _result: &ToolResult) {
        self.after.fetch_add(1, Ordering::SeqCst);
    }
}

async fn word_count_run(hooks: Arc<CountingHooks>) -> Run {
    let (addr, def) = spawn_tool_with(
        executor(),
        clock(),
        WordCount,
        ToolOptions {
            hooks,
            ..ToolOptions::default()
        },
    )
    .unwrap();
    let mut registry = Registry::new();
    registry
        .register(ToolRegistration::builtin(def, addr))
        .unwrap();
    let tools = spawn_tools(executor(), clock(), registry, tools_options());
    Run::new(tools, "run-example")
}

#[tokio::test]
async fn the_example_tool_runs_through_the_pipeline() {
    let hooks = Arc::new(CountingHooks::default());
    let run = word_count_run(hooks.clone()).await;
    let schemas = run.schemas().await;
    assert_eq!(
        schemas.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["word_count"]
    );

    let prepared = run
        .prepare(
            "c1",
            "word_count",
            r#"{"text":"the cat sat on the mat\nthe end","top":2}"#,
        )
        .await
        .unwrap();
    assert!(matches!(prepared.decision, Decision::Automatic { .. }));
    let r = run
        .dispatch(&prepared, run.mint(&prepared, Uses::Once))
        .await;
    let ToolResult::Success(s) = &r else {
        panic!("{}", text(&r))
    };
    assert_eq!(s.trust, agent_capabilities::Trust::Internal);
    assert_eq!(s.provenance.origin, "user");
    assert_eq!(
        s.content,
        json!({
            "words": 8, "distinct_words": 6, "lines": 2, "characters": 30,
            "top": [{"word": "the", "count": 3}, {"word": "cat", "count": 1}]
        })
    );
    assert_eq!(hooks.before.load(Ordering::SeqCst), 1);
    assert_eq!(hooks.after.load(Ordering::SeqCst), 1);

    // Its own failure comes back with its stable code.
    let r = run.call("c2", "word_count", r#"{"text":"   "}"#).await;
    assert_eq!(code(&r), "empty_text");
    // Validation for free: the schema refuses before the tool runs.
    let r = run
        .call("c3", "word_count", r#"{"text":"a","top":11}"#)
        .await;
    assert_eq!(code(&r), codes::INVALID_ARGUMENTS);
    let r = run.call("c4", "word_count", r#"{"txt":"a"}"#).await;
    assert_eq!(code(&r), codes::INVALID_ARGUMENTS);
    assert_eq!(
        hooks.before.load(Ordering::SeqCst),
        2,
        "refused calls never reached call()"
    );
}

#[tokio::test]
async fn the_example_tool_verifies_capabilities_itself() {
    // Sent straight to the tool actor, bypassing the tools actor.
    let hooks = Arc::new(CountingHooks::default());
    let run = word_count_run(hooks.clone()).await;
    let prepared = run
        .prepare("c1", "word_count", r#"{"text":"hello"}"#)
        .await
        .unwrap();
    let (addr, _) = spawn_tool(executor(), clock(), WordCount).unwrap();
    let invoke = |capability, verifier| {
        let invocation = ToolInvocation {
            draft: prepared.draft.clone(),
            capability,
            verifier,
            progress: Default::default(),
        };
        let addr = addr.clone();
        async move {
            addr.ask(|reply| ToolMsg::Invoke { invocation, reply })
                .await
                .unwrap()
        }
    };
    // A capability from another authority (a forged or stale one) is refused.
    let forger = Authority::new("run-example", [9u8; 32]);
    let forged = run.mint(&prepared, Uses::Once);
    let r = invoke(forged, forger.verifier()).await;
    assert_eq!(code(&r), codes::CAPABILITY_REFUSED);
    // A valid one-time capability works once.
    let cap = run.mint(&prepared, Uses::Once);
    assert!(
        invoke(cap.clone(), run.authority.verifier())
            .await
            .is_success()
    );
    let r = invoke(cap, run.authority.verifier()).await;
    assert_eq!(code(&r), codes::CAPABILITY_REFUSED);
    // A draft whose arguments were changed after Prepare is refused.
    let mut tampered = prepared.clone();
    tampered.draft.arguments = json!({"text": "changed"});
    let invocation = ToolInvocation {
        draft: tampered.draft.clone(),
        capability: run.mint(&tampered, Uses::Once),
        verifier: run.authority.verifier(),
        progress: Default::default(),
    };
    let r = addr
        .ask(|reply| ToolMsg::Invoke { invocation, reply })
        .await
        .unwrap();
    assert_eq!(code(&r), codes::DRAFT_MISMATCH);
}

struct Panics;

#[async_trait::async_trait]
impl Tool for Panics {
    type Args = serde_json::Value;
    fn definition(&self) -> agent_kernel::protocol::ToolDefinition {
        let mut d = WordCount.definition();
        d.name = "panics".into();
        d.parameters = json!({"type": "object"});
        d
    }
    async fn call(
        &self,
        _ctx: &ToolContext,
        _args: serde_json::Value,
    ) -> Result<ToolSuccess, ToolFailure> {
        panic!("boom")
    }
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_and_the_actor_keeps_serving() {
    let (addr, def) = spawn_tool(executor(), clock(), Panics).unwrap();
    let mut registry = Registry::new();
    registry
        .register(ToolRegistration::builtin(def, addr))
        .unwrap();
    let run = Run::new(
        spawn_tools(executor(), clock(), registry, tools_options()),
        "run-panic",
    );
    for i in 0..2 {
        let r = run.call(&format!("p{i}"), "panics", "{}").await;
        assert_eq!(code(&r), codes::EXECUTOR_LOST);
        assert!(text(&r).contains("boom"));
    }
}

#[test]
fn the_example_main_runs() {
    word_count::main();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = rt.block_on(word_count::demo("one two two"));
    let ToolResult::Success(s) = r else {
        panic!("{r:?}")
    };
    assert_eq!(s.content["words"], json!(3));
    assert_eq!(s.content["top"][0], json!({"word": "two", "count": 2}));
}
