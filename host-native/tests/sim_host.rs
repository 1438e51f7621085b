//! A test host's own simulation (issue 17 acceptance): its own tool and an
//! HTTP plugin pointing at its own counting loopback server, wired into
//! `TabSim` as a host wires the assembly, 1,000 seeds with kills and
//! lifecycle events at random commits and await points, checked by the
//! invariants library; with a sabotaged supervisor the same simulation
//! reports violations (S2.3, S2.5, S3.3, S6.4).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_capabilities::{EffectClass, EffectSet, Idempotency, Origin, Sensitivity, Trust};
use agent_host_native::sim::{SimPlan, SimWiring, run_seeds};
use agent_kernel::host::Host;
use agent_kernel::protocol::{Provenance, TargetRule, ToolDefinition, ToolFailure, ToolSuccess};
use agent_kernel::tool::{Tool, ToolContext, spawn_tool};
use agent_supervisor::Sabotage;
use agent_tools::{PluginManifest, ToolRegistration};
use serde_json::{Value, json};

/// The test host's own tool: a read-only look-up in its "inventory".
struct Inventory;

#[async_trait::async_trait]
impl Tool for Inventory {
    type Args = Value;
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "check_inventory".into(),
            description: "How many items of a kind are in stock.".into(),
            parameters: json!({"type": "object", "properties": {"item": {"type": "string"}},
                               "required": ["item"]}),
            origin: Origin::Builtin,
            provider: None,
            effects: [EffectClass::ReadLocal].into_iter().collect::<EffectSet>(),
            idempotency: Idempotency::Idempotent,
            sensitivity: Sensitivity::Private,
            target: TargetRule::None,
            annotations: None,
        }
    }
    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<ToolSuccess, ToolFailure> {
        Ok(ToolSuccess {
            content: json!({"item": args["item"], "in_stock": 3}),
            trust: Trust::Internal,
            provenance: Provenance {
                origin: "builtin".into(),
                tool: "check_inventory".into(),
                ..Provenance::default()
            },
            references: Vec::new(),
            receipts: Vec::new(),
        })
    }
}

fn own_tools(host: &Host) -> Vec<ToolRegistration> {
    let (addr, def) =
        spawn_tool(host.executor.clone(), host.clock.clone(), Inventory).expect("spawn");
    vec![ToolRegistration::builtin(def, addr)]
}

/// A loopback server counting `POST /orders` (a non-idempotent external write).
struct Counter {
    port: u16,
    count: Arc<AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

fn start_counter() -> Counter {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let app = axum::Router::new().route(
        "/orders",
        axum::routing::post(move || {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            async move { axum::Json(json!({"order": n})) }
        }),
    );
    runtime.spawn(async move { axum::serve(listener, app).await });
    Counter {
        port,
        count,
        _runtime: runtime,
    }
}

/// The model: check the inventory, place one order, ask the person, finish.
const SCENARIO: &str = r#"{"turns": [
  {"text": "Checking.", "tool_calls": [
     {"name": "check_inventory", "arguments": {"item": "printer paper"}},
     {"name": "place_order", "arguments": {"item": "printer paper", "quantity": 2}}]},
  {"text": "One question.", "tool_calls": [{"name": "ask_user", "arguments": {"question": "anything else?"}}]},
  {"text": "Ordered."}
]}"#;

fn wiring(port: u16) -> SimWiring {
    let plugin: PluginManifest = serde_json::from_value(json!({
        "id": "shop",
        "base_url": format!("http://127.0.0.1:{port}"),
        "trusted": true,
        "timeout_ms": 5000,
        "functions": [{
            "name": "place_order",
            "description": "Order items.",
            "method": "POST",
            "path": "/orders",
            "parameters": {"type": "object", "properties": {
                "item": {"type": "string"}, "quantity": {"type": "integer"}},
                "required": ["item", "quantity"], "additionalProperties": false},
            "effects": ["write_external"],
            "idempotency": "non_idempotent"
        }]
    }))
    .expect("manifest");
    let mut plugin = plugin;
    plugin.expected_fingerprint = Some(plugin.fingerprint().expect("fingerprint"));
    let mut wiring = SimWiring::scripted(SCENARIO)
        .expect("scenario")
        .with_tools(own_tools)
        .with_plugin(plugin);
    wiring.always_on_plugins = vec!["shop".into()];
    wiring
}

fn plan() -> SimPlan {
    let mut plan = SimPlan::default();
    plan.sessions.push(agent_host_native::sim::SessionPlan {
        session: "second-session".into(),
        prompts: vec!["order printer paper".into(), "and once more please".into()],
    });
    plan.person.answers = vec!["nothing else, thanks".into()];
    plan
}

/// S2.3, S2.5: 1,000 seeds (`TABSIM_SEEDS` to change) with kills and
/// lifecycle events at random points: no violations, and the server
/// received no order the simulation did not see dispatched.
#[test]
fn a_test_host_tool_and_plugin_survive_1000_seeds_without_violations() {
    let seeds = std::env::var("TABSIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000u64);
    let server = start_counter();
    let dir = tempfile::tempdir().expect("dir");
    let started = std::time::Instant::now();
    let (summary, dispatches) =
        run_seeds(dir.path(), 0..seeds, &wiring(server.port), &plan()).expect("simulate");
    eprintln!("{summary} ({:.1} s)", started.elapsed().as_secs_f64());
    for v in summary.violations.iter().take(20) {
        eprintln!("{v}");
    }
    assert_eq!(summary.seeds, seeds);
    assert!(summary.crash_points >= seeds / 2, "{summary}");
    assert!(summary.violations.is_empty(), "{summary}");
    assert!(dispatches.get("check_inventory").copied().unwrap_or(0) >= seeds);
    // Every order the server saw was a dispatch the simulation saw; a
    // dispatch may not reach the server when its tab dies with the request
    // still in the plugin's hands (its call is then `effect_unknown`).
    let orders = server.count.load(Ordering::SeqCst);
    let dispatched = dispatches.get("place_order").copied().unwrap_or(0);
    eprintln!("orders: {orders} received, {dispatched} dispatched");
    assert!(
        orders <= dispatched,
        "the server saw {orders} orders but only {dispatched} were dispatched"
    );
    assert!(server.count.load(Ordering::SeqCst) >= seeds);
}

/// The same simulation must be able to fail: each sabotaged supervisor
/// makes the invariants report violations, naming seed and step.
#[test]
fn the_same_simulation_catches_both_sabotaged_supervisors() {
    let server = start_counter();
    for sabotage in [
        Sabotage {
            dispatch_before_running: true,
            ..Sabotage::default()
        },
        Sabotage {
            retry_unsafe_on_resume: true,
            ..Sabotage::default()
        },
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let mut wiring = wiring(server.port);
        wiring.sabotage = sabotage;
        let (summary, _) = run_seeds(dir.path(), 0..150, &wiring, &plan()).expect("simulate");
        eprintln!("{sabotage:?}: {summary}");
        assert!(!summary.violations.is_empty(), "{sabotage:?}: {summary}");
        let first = &summary.violations[0];
        assert!(
            first
                .to_string()
                .starts_with(&format!("seed {} step ", first.seed))
        );
    }
}
