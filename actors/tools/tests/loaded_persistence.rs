//! A run's `load_tools` set survives a restart of the tools actor when it
//! is given storage (S5.2, S2.5 resume): a new actor over the same storage
//! restores it the first time it sees the run, within the registry's current
//! definitions (S6.2 `definition_changed`) and the 64-schema cap (S5.2).

#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::sync::Arc;

use serde_json::json;

use agent_capabilities::{ApprovalMode, Decision, EffectClass, Idempotency, Uses};
use agent_kernel::host::{Batch, Storage, Table};
use agent_kernel::ids::RunId;
use agent_kernel::memory::MemoryStorage;
use agent_tools::codes;
use agent_tools::plugin::{HttpMethod, PluginManifest};
use agent_tools::registry::{Exposure, Registry};
use agent_tools::{ToolsHandle, ToolsOptions, spawn_plugin, spawn_tools};
use common::*;

const RUN: &str = "run-restart";

fn tickets(base_url: &str, description: &str) -> PluginManifest {
    manifest(
        "tickets",
        base_url,
        vec![function(
            "tickets_write",
            description,
            HttpMethod::Post,
            "/tickets",
            json!({"type": "object", "properties": {"title": {"type": "string"}},
                   "required": ["title"], "additionalProperties": false}),
            effects(&[EffectClass::WriteExternal]),
            Idempotency::NonIdempotent,
        )],
    )
}

/// A plugin "big" with `count` read functions.
fn big(base_url: &str, count: usize) -> PluginManifest {
    manifest(
        "big",
        base_url,
        (0..count)
            .map(|i| read_fn(&format!("big_read_{i}"), "Read one big thing"))
            .collect(),
    )
}

/// A tools actor as a host builds it at start: plugins registered afresh.
fn start(
    manifests: &[(&PluginManifest, Exposure)],
    storage: Option<Arc<MemoryStorage>>,
) -> ToolsHandle {
    let mut registry = Registry::new();
    for (m, exposure) in manifests {
        let mut regs = spawn_plugin(executor(), clock(), m, no_secrets()).unwrap();
        for r in &mut regs {
            r.exposure = *exposure;
        }
        registry.register_all(regs).unwrap();
    }
    let options = ToolsOptions {
        storage: storage.map(|s| s as Arc<dyn Storage>),
        ..ToolsOptions::default()
    };
    spawn_tools(executor(), clock(), registry, options)
}

fn run_on(tools: &ToolsHandle) -> Run {
    let mut run = Run::new(tools.clone(), RUN);
    run.config.approval = ApprovalMode::Strict;
    run
}

/// Load `tickets_write` for the run, as the model does, and prepare a call
/// that waits for approval; then the actor goes away (reload, SIGKILL).
async fn load_then_restart(manifest: &PluginManifest, storage: Option<Arc<MemoryStorage>>) {
    let tools = start(&[(manifest, Exposure::Discoverable)], storage);
    let run = run_on(&tools);
    run.schemas().await;
    let r = run
        .call("l1", "load_tools", r#"{"names":["tickets_write"]}"#)
        .await;
    assert!(r.is_success(), "{}", text(&r));
    run.schemas().await;
    let p = run
        .prepare("c1", "tickets_write", r#"{"title":"one"}"#)
        .await
        .unwrap();
    assert!(
        matches!(p.decision, Decision::AskOnce { .. }),
        "{:?}",
        p.decision
    );
    drop(run);
    drop(tools);
}

#[tokio::test]
async fn s5_2_an_approved_plugin_call_runs_after_the_tools_actor_restarts() {
    let server = ok_server(r#"{"id":1}"#);
    let m = tickets(&server.base_url, "Write a ticket");
    let storage = Arc::new(MemoryStorage::new());
    load_then_restart(&m, Some(storage.clone())).await;
    let stored = storage
        .get(Table::Meta, &format!("tools/loaded/{RUN}"))
        .await
        .unwrap()
        .expect("the loaded set is stored");
    assert!(String::from_utf8_lossy(&stored).contains("tickets_write"));

    // A new actor over the same storage; the supervisor re-prepares the
    // approved call first, before any Schemas.
    let tools = start(&[(&m, Exposure::Discoverable)], Some(storage.clone()));
    let run = run_on(&tools);
    let p = run
        .prepare("c1", "tickets_write", r#"{"title":"one"}"#)
        .await
        .unwrap_or_else(|e| panic!("{}", text(&e)));
    let cap = run.mint(&p, Uses::Once);
    let r = run.dispatch(&p, cap).await;
    assert!(r.is_success(), "{}", text(&r));
    assert_eq!(
        server.count(),
        1,
        "the approved write reached the server once"
    );
    assert!(
        tools
            .loaded(RunId::new(RUN).unwrap())
            .await
            .unwrap()
            .contains("tickets_write")
    );
    let names: Vec<String> = run.schemas().await.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"tickets_write".to_owned()), "{names:?}");
}

#[tokio::test]
async fn s5_2_control_without_storage_the_restarted_actor_forgets_the_loaded_tool() {
    let server = ok_server(r#"{"id":1}"#);
    let m = tickets(&server.base_url, "Write a ticket");
    load_then_restart(&m, None).await;
    let tools = start(&[(&m, Exposure::Discoverable)], None);
    let run = run_on(&tools);
    let r = run
        .prepare("c1", "tickets_write", r#"{"title":"one"}"#)
        .await
        .unwrap_err();
    assert_eq!(code(&r), codes::TOOL_NOT_LOADED);
    assert_eq!(server.count(), 0);
}

#[tokio::test]
async fn s6_2_a_definition_changed_while_the_actor_was_down_is_refused_once_restored() {
    let server = ok_server(r#"{"id":1}"#);
    let storage = Arc::new(MemoryStorage::new());
    load_then_restart(
        &tickets(&server.base_url, "Write a ticket"),
        Some(storage.clone()),
    )
    .await;

    let changed = tickets(&server.base_url, "Write a tickeT");
    let tools = start(&[(&changed, Exposure::Discoverable)], Some(storage));
    let run = run_on(&tools);
    let r = run
        .prepare("c1", "tickets_write", r#"{"title":"one"}"#)
        .await
        .unwrap_err();
    assert_eq!(code(&r), codes::DEFINITION_CHANGED);
    // Once the model is shown the new definition, it can be called (and the
    // policy asks about the new identity).
    run.schemas().await;
    let p = run
        .prepare("c2", "tickets_write", r#"{"title":"two"}"#)
        .await
        .unwrap();
    assert!(matches!(p.decision, Decision::AskOnce { .. }));
    assert_eq!(server.count(), 0);
}

#[tokio::test]
async fn s5_2_a_restored_tool_no_longer_registered_is_unknown() {
    let server = ok_server(r#"{"id":1}"#);
    let storage = Arc::new(MemoryStorage::new());
    load_then_restart(
        &tickets(&server.base_url, "Write a ticket"),
        Some(storage.clone()),
    )
    .await;
    let other = big(&server.base_url, 1);
    let tools = start(&[(&other, Exposure::Discoverable)], Some(storage));
    let run = run_on(&tools);
    let r = run
        .prepare("c1", "tickets_write", r#"{"title":"one"}"#)
        .await
        .unwrap_err();
    assert_eq!(code(&r), codes::UNKNOWN_TOOL);
    let names: Vec<String> = run.schemas().await.into_iter().map(|s| s.name).collect();
    assert!(!names.contains(&"tickets_write".to_owned()), "{names:?}");
}

/// After the restart `always_on` always-on tools plus the two discovery
/// tools are in every request; the restored tool is one more schema.
async fn restored_with_always_on(always_on: usize) -> (Result<(), String>, usize) {
    let server = ok_server(r#"{"id":1}"#);
    let m = tickets(&server.base_url, "Write a ticket");
    let storage = Arc::new(MemoryStorage::new());
    load_then_restart(&m, Some(storage.clone())).await;
    let b = big(&server.base_url, always_on);
    let tools = start(
        &[(&m, Exposure::Discoverable), (&b, Exposure::AlwaysOn)],
        Some(storage),
    );
    let run = run_on(&tools);
    let prepared = run
        .prepare("c1", "tickets_write", r#"{"title":"one"}"#)
        .await
        .map(|_| ())
        .map_err(|e| code(&e));
    (prepared, run.schemas().await.len())
}

#[tokio::test]
async fn s5_2_restored_tools_respect_the_64_schema_cap() {
    // Below: 60 + 2 + 1 = 63 schemas.
    assert_eq!(restored_with_always_on(60).await, (Ok(()), 63));
    // At: 61 + 2 + 1 = 64 schemas.
    assert_eq!(restored_with_always_on(61).await, (Ok(()), 64));
    // Above: 62 + 2 + 1 would be 65; the restored tool is dropped.
    assert_eq!(
        restored_with_always_on(62).await,
        (Err(codes::TOOL_NOT_LOADED.to_owned()), 64)
    );
}

#[tokio::test]
async fn a_corrupt_loaded_record_is_a_tool_error_and_is_left_untouched() {
    let server = ok_server(r#"{"id":1}"#);
    let m = tickets(&server.base_url, "Write a ticket");
    let storage = Arc::new(MemoryStorage::new());
    let key = format!("tools/loaded/{RUN}");
    storage
        .commit(Batch::new().put(Table::Meta, key.clone(), b"{not json".to_vec()))
        .await
        .unwrap();
    let tools = start(&[(&m, Exposure::Discoverable)], Some(storage.clone()));
    let run = run_on(&tools);
    // Schemas has no error channel: the always-on tools only.
    let names: Vec<String> = run.schemas().await.into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["load_tools", "search_tools"]);
    let r = run
        .prepare("c1", "tickets_write", r#"{"title":"one"}"#)
        .await
        .unwrap_err();
    assert_eq!(code(&r), codes::LOADED_TOOLS_UNAVAILABLE);
    assert!(text(&r).contains(&key), "{}", text(&r));
    let r = run
        .call("l1", "load_tools", r#"{"names":["tickets_write"]}"#)
        .await;
    assert_eq!(code(&r), codes::LOADED_TOOLS_UNAVAILABLE);
    assert!(tools.loaded(RunId::new(RUN).unwrap()).await.is_err());
    assert_eq!(
        storage.get(Table::Meta, &key).await.unwrap().as_deref(),
        Some(&b"{not json"[..]),
        "the record was not overwritten"
    );
    assert_eq!(server.count(), 0);
}

#[tokio::test]
async fn two_actors_loading_for_the_same_run_keep_both_names() {
    // Two hosts (tabs) over one storage: writes merge, none is lost.
    let server = ok_server(r#"{"id":1}"#);
    let m = tickets(&server.base_url, "Write a ticket");
    let b = big(&server.base_url, 1);
    let storage = Arc::new(MemoryStorage::new());
    let manifests = [(&m, Exposure::Discoverable), (&b, Exposure::Discoverable)];
    let first = start(&manifests, Some(storage.clone()));
    let second = start(&manifests, Some(storage.clone()));
    let (r1, r2) = (run_on(&first), run_on(&second));
    // Both see the run (and an empty stored set) before either loads.
    r1.schemas().await;
    r2.schemas().await;
    let a = r1
        .call("l1", "load_tools", r#"{"names":["tickets_write"]}"#)
        .await;
    let c = r2
        .call("l2", "load_tools", r#"{"names":["big_read_0"]}"#)
        .await;
    assert!(a.is_success() && c.is_success());
    let third = start(&manifests, Some(storage));
    let loaded = third.loaded(RunId::new(RUN).unwrap()).await.unwrap();
    assert_eq!(
        loaded.into_iter().collect::<Vec<_>>(),
        ["big_read_0", "tickets_write"]
    );
}
