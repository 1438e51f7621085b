//! Page tools in the tab-loss simulator (issue 36, SPEC S5.9): a native
//! stand-in for a page's JavaScript functions, registered by every tab as
//! a page registers its tools at each load (origin `page`, no provider):
//! a read-only lookup and a non-idempotent write that changes "the page"
//! (a counter) and, as an external write of a tool no one marked trusted,
//! is asked about. Through hundreds of seeds of kills and lifecycle events
//! the invariants find nothing: each change the stand-in made is a
//! dispatch the simulation saw (the invariants check at most once per
//! call and no replay of an uncertain effect), and a kill between
//! dispatch and outcome leaves the person a decision (`effect_unknown`),
//! never a replay (S2.1, S2.3, S2.5, S6.1).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_capabilities::{EffectClass, EffectSet, Idempotency, Origin, Sensitivity};
use agent_host_native::sim::{SimPlan, SimWiring, simulate_seed};
use agent_kernel::protocol::{TargetRule, ToolDefinition, ToolFailure, ToolSuccess};
use agent_kernel::run::RunMode;
use agent_kernel::tool::{Tool, ToolContext, spawn_tool};
use agent_tools::ToolRegistration;
use agent_tools::registry::Exposure;
use serde_json::{Value, json};

/// A page tool's definition as `registerTool` makes it: origin `page`.
fn page_definition(
    name: &str,
    effects: &[EffectClass],
    idempotency: Idempotency,
) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: format!("the page's {name}"),
        parameters: json!({"type": "object", "properties": {"id": {"type": "string"}},
                           "required": ["id"], "additionalProperties": false}),
        origin: Origin::Page,
        provider: None,
        effects: effects.iter().copied().collect::<EffectSet>(),
        idempotency,
        sensitivity: Sensitivity::Public,
        target: TargetRule::None,
        annotations: Some(
            json!({"page_tool": {"trust": "external_untrusted", "timeout_ms": 30000,
                                               "offer": "always", "target_arg": "id"}}),
        ),
    }
}

/// The stand-in for the page's functions: `lookup_order` reads, and
/// `ship_order` counts each change it makes to the page.
struct PageStandIn {
    def: ToolDefinition,
    changes: Option<Arc<AtomicU64>>,
}

#[async_trait::async_trait]
impl Tool for PageStandIn {
    type Args = Value;

    fn definition(&self) -> ToolDefinition {
        self.def.clone()
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolSuccess, ToolFailure> {
        let id = args["id"].as_str().unwrap_or_default().to_owned();
        match &self.changes {
            None => Ok(ctx.ok_untrusted(json!({"id": id, "status": "packed"}))),
            Some(changes) => {
                let n = changes.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(ctx.ok_untrusted(json!({"id": id, "status": "shipped", "change": n})))
            }
        }
    }
}

const SCENARIO: &str = r#"{"turns": [
  {"text": "Looking.", "tool_calls": [{"name": "lookup_order", "arguments": {"id": "A-1"}}]},
  {"text": "Shipping.", "tool_calls": [{"name": "ship_order", "arguments": {"id": "A-1"}}]},
  {"text": "Shipped."}
]}"#;

#[test]
fn a_page_tools_write_survives_the_simulator_at_most_once_with_decisions_on_doubt() {
    let seeds = std::env::var("TABSIM_PAGE_TOOL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300u64);
    let changes = Arc::new(AtomicU64::new(0));
    let counted = changes.clone();
    let wiring = SimWiring::scripted(SCENARIO)
        .expect("scenario")
        .with_tools(move |host| {
            [
                (
                    page_definition(
                        "lookup_order",
                        &[EffectClass::ReadLocal],
                        Idempotency::Idempotent,
                    ),
                    None,
                ),
                (
                    page_definition(
                        "ship_order",
                        &[EffectClass::WriteExternal],
                        Idempotency::NonIdempotent,
                    ),
                    Some(counted.clone()),
                ),
            ]
            .into_iter()
            .map(|(def, changes)| {
                let (addr, definition) = spawn_tool(
                    host.executor.clone(),
                    host.clock.clone(),
                    PageStandIn { def, changes },
                )
                .expect("a valid page tool");
                ToolRegistration {
                    definition,
                    modes: vec![RunMode::Agent],
                    exposure: Exposure::AlwaysOn,
                    trusted_external: false,
                    unknown_function: false,
                    needs_grant: None,
                    addr,
                }
            })
            .collect()
        });
    let dir = tempfile::tempdir().expect("dir");
    let mut summary = agent_supervisor::sim::invariants::SimSummary::default();
    let (mut dispatched, mut decided, mut approvals) = (0u64, 0u64, 0u64);
    for seed in 0..seeds {
        let path = dir.path().join(format!("seed-{seed}.sqlite3"));
        let report = simulate_seed(&path, seed, &wiring, &SimPlan::default()).expect("simulate");
        dispatched += report.dispatches.get("ship_order").copied().unwrap_or(0);
        summary.add_seed(report.crash_points, report.violations);
        let mut bytes = Vec::new();
        for suffix in ["", "-wal"] {
            bytes.extend(std::fs::read(format!("{}{suffix}", path.display())).unwrap_or_default());
        }
        let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        decided += u64::from(has(b"decision_requested"));
        approvals += u64::from(has(b"approval_requested"));
    }
    eprintln!("{summary}; {decided} seeds with a decision, {approvals} with an approval");
    for v in summary.violations.iter().take(20) {
        eprintln!("{v}");
    }
    assert_eq!(summary.seeds, seeds);
    assert!(summary.violations.is_empty(), "{summary}");
    let made = changes.load(Ordering::SeqCst);
    // The stand-in runs on its tab's executor: a tab killed after the
    // dispatch and before the function ran leaves a dispatch with no
    // change (a page unloaded first), never a change without a dispatch.
    assert!(
        made <= dispatched,
        "every change the page tool made was a dispatch the simulation saw: {made} changes, {dispatched} dispatches"
    );
    assert!(made >= seeds / 2, "most seeds shipped the order: {made}");
    assert!(
        decided > 0,
        "no seed left a decision about an unknown effect"
    );
    assert!(
        approvals >= seeds / 2,
        "the page tool's external write was asked about: {approvals}"
    );
}
