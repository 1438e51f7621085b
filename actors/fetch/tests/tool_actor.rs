//! `fetch_url` as a built-in tool (S5.3, S5.4, S5.8, S8): the definition,
//! capability verification before any network work, the `external_untrusted`
//! envelope with provenance, the body as a blob in the memory host's storage,
//! a bounded summary, failures as envelopes, and cancellation of a run.
#![cfg(not(target_arch = "wasm32"))] // loopback servers need tokio and axum

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use agent_capabilities::{
    Authority, Capability, EffectClass, EffectSet, Grant, Idempotency, Origin, Sensitivity, Target,
    TargetScope, Trust, Uses, sha256_hex,
};
use agent_fetch::{
    ExtractionSlots, FETCH_URL, FetchActor, HtmlLimits, SUMMARY_CHARS, ScriptedResolver,
    fetch_url_definition,
};
use agent_kernel::host::{ManualClock, Storage};
use agent_kernel::memory::MemoryStorage;
use agent_kernel::protocol::{
    InvocationDraft, ReferenceKind, TargetRule, ToolAddr, ToolInvocation, ToolMsg, ToolResult,
};
use agent_kernel::{CallId, RunId, SessionId};
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::get;
use common::*;
use serde_json::json;

struct Setup {
    addr: ToolAddr,
    storage: Arc<MemoryStorage>,
    authority: Authority,
    site: Hits,
    origin: String,
    slots: ExtractionSlots,
}

const RUN: &str = "run-1";

async fn setup() -> Setup {
    let site = Hits::default();
    let s = site.clone();
    let long = "word ".repeat(2_000); // 10,000 characters
    let app = Router::new()
        .route(
            "/page",
            get(move |headers: HeaderMap| {
                let s = s.clone();
                let long = long.clone();
                async move {
                    s.record(&headers);
                    ([(header::CONTENT_TYPE, "text/plain")], long)
                }
            }),
        )
        .route(
            "/private",
            get(|| async {
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Basic")],
                )
            }),
        )
        .route("/slow", get(std::future::pending::<String>))
        .route(
            "/nested/{n}",
            get(
                |axum::extract::Path(n): axum::extract::Path<usize>| async move {
                    (
                        [(header::CONTENT_TYPE, "text/html")],
                        format!("<html><body>{}", "<div>".repeat(n)),
                    )
                },
            ),
        );
    let server = serve(app).await;
    let resolver = ScriptedResolver::new().answer("site.example", [LOCALHOST]);
    let clock = ManualClock::new(1_700_000_000_000);
    // Extraction on blocking threads, as the hosts run it, in slots of
    // this test's own (so that they can be counted).
    let slots = ExtractionSlots::new(2);
    let reader = reader(test_policy(resolver, &[server]), None, &clock)
        .with_blocking(agent_test_support::executor())
        .with_extraction_slots(slots.clone());
    let storage = Arc::new(MemoryStorage::new());
    let addr = FetchActor::new(Arc::new(reader), storage.clone(), Arc::new(clock.clone()))
        .spawn(agent_test_support::executor(), None);
    Setup {
        addr,
        storage,
        authority: Authority::new(RUN, [7u8; 32]),
        site,
        origin: format!("http://site.example:{}", server.port()),
        slots,
    }
}

impl Setup {
    fn grant(&self, tool: &str, origin: &str, uses: Uses) -> Capability {
        self.authority.mint(Grant {
            tool: tool.into(),
            fingerprint: fetch_url_definition().fingerprint().unwrap(),
            origin: Origin::Builtin,
            effects: EffectSet::from([EffectClass::ReadNetwork]),
            scope: TargetScope::Origins {
                origins: BTreeSet::from([origin.to_owned()]),
            },
            uses,
            expires_at_ms: u64::MAX,
        })
    }

    fn invocation(
        &self,
        call: &str,
        url: &str,
        target_origin: &str,
        capability: Capability,
    ) -> ToolInvocation {
        let def = fetch_url_definition();
        let arguments = json!({ "url": url });
        ToolInvocation {
            draft: InvocationDraft {
                run: RunId::new(RUN).unwrap(),
                session: SessionId::new("session-1").unwrap(),
                call_id: CallId::new(call).unwrap(),
                tool: FETCH_URL.into(),
                fingerprint: def.fingerprint().unwrap(),
                args_hash: sha256_hex(arguments.to_string().as_bytes()),
                arguments,
                effects: def.effects.clone(),
                idempotency: def.idempotency,
                sensitivity: def.sensitivity,
                origin: Origin::Builtin,
                provider: None,
                target: Target::Url {
                    origin: target_origin.to_owned(),
                    // The host of the target origin, as the pipeline derives it.
                    host: url::Url::parse(target_origin)
                        .ok()
                        .and_then(|u| u.host_str().map(str::to_owned))
                        .unwrap_or_default(),
                },
                scope: TargetScope::Origins {
                    origins: BTreeSet::from([target_origin.to_owned()]),
                },
                attempt: 1,
                idempotency_key: format!("{RUN}/{call}"),
            },
            capability,
            verifier: self.authority.verifier(),
            progress: Default::default(),
        }
    }

    async fn invoke(&self, invocation: ToolInvocation) -> ToolResult {
        self.addr
            .ask(|reply| ToolMsg::Invoke { invocation, reply })
            .await
            .unwrap()
    }
}

fn error_code(result: &ToolResult) -> &str {
    match result {
        ToolResult::Error(e) => &e.code,
        ToolResult::Success(_) => panic!("expected an error, got success"),
    }
}

#[test]
fn definition_is_a_read_network_tool_scoped_to_the_url() {
    let def = fetch_url_definition();
    assert_eq!(def.name, "fetch_url");
    assert_eq!(def.effects, EffectSet::from([EffectClass::ReadNetwork]));
    assert_eq!(
        def.target,
        TargetRule::UrlArg {
            field: "url".into()
        }
    );
    assert_eq!(def.idempotency, Idempotency::Idempotent);
    assert_eq!(def.sensitivity, Sensitivity::Public);
    assert_eq!(def.origin, Origin::Builtin);
    assert_eq!(def.parameters["required"], json!(["url"]));
    assert_eq!(
        def.fingerprint().unwrap(),
        fetch_url_definition().fingerprint().unwrap()
    );
}

#[tokio::test]
async fn s5_4_success_is_external_untrusted_with_provenance_blob_and_bounded_summary() {
    let s = setup().await;
    let url = format!("{}/page", s.origin);
    let cap = s.grant(FETCH_URL, &s.origin, Uses::Once);
    let result = s.invoke(s.invocation("call-1", &url, &s.origin, cap)).await;
    let ToolResult::Success(ok) = result else {
        panic!("{result:?}")
    };
    assert_eq!(ok.trust, Trust::ExternalUntrusted);
    let p = &ok.provenance;
    assert_eq!(p.tool, "fetch_url");
    assert_eq!(p.requested_url.as_deref(), Some(url.as_str()));
    assert_eq!(p.final_url.as_deref(), Some(url.as_str()));
    assert_eq!(p.fetched_at_ms, Some(1_700_000_000_000));
    assert_eq!(p.detail["reader"], json!("direct"));
    assert_eq!(p.detail["body_truncated"], json!(false));
    assert_eq!(p.detail["text_truncated"], json!(false));
    // S5.8: the body is a blob; only a bounded summary enters the context.
    let text = "word ".repeat(2_000);
    assert_eq!(
        p.content_hash.as_deref(),
        Some(sha256_hex(text.as_bytes()).as_str())
    );
    assert_eq!(ok.references.len(), 1);
    let reference = &ok.references[0];
    assert_eq!(reference.kind, ReferenceKind::Blob);
    assert_eq!(reference.size, text.len() as u64);
    let stored = s.storage.get_blob(&reference.hash).await.unwrap().unwrap();
    assert_eq!(stored, text.as_bytes());
    let summary = ok.content["summary"].as_str().unwrap();
    assert_eq!(summary.chars().count(), SUMMARY_CHARS);
    assert_eq!(ok.content["summary_truncated"], json!(true));
    assert_eq!(ok.content["chars"], json!(10_000));
}

#[tokio::test]
async fn s5_3_capability_is_verified_before_any_network_work() {
    let s = setup().await;
    let url = format!("{}/page", s.origin);
    // Minted for another tool.
    let cap = s.grant("write_file", &s.origin, Uses::Once);
    let result = s.invoke(s.invocation("call-1", &url, &s.origin, cap)).await;
    assert_eq!(error_code(&result), "capability_refused");
    // Minted for another origin.
    let cap = s.grant(FETCH_URL, "https://elsewhere.example", Uses::Once);
    let result = s.invoke(s.invocation("call-2", &url, &s.origin, cap)).await;
    assert_eq!(error_code(&result), "capability_refused");
    // From another run's authority.
    let other = Authority::new(RUN, [9u8; 32]);
    let forged = other.mint(Grant {
        tool: FETCH_URL.into(),
        fingerprint: fetch_url_definition().fingerprint().unwrap(),
        origin: Origin::Builtin,
        effects: EffectSet::from([EffectClass::ReadNetwork]),
        scope: TargetScope::Origins {
            origins: BTreeSet::from([s.origin.clone()]),
        },
        uses: Uses::Once,
        expires_at_ms: u64::MAX,
    });
    let result = s
        .invoke(s.invocation("call-3", &url, &s.origin, forged))
        .await;
    assert_eq!(error_code(&result), "capability_refused");
    assert_eq!(
        s.site.get(),
        0,
        "nothing was fetched without a valid capability"
    );
    // A one-time capability works once.
    let cap = s.grant(FETCH_URL, &s.origin, Uses::Once);
    assert!(
        s.invoke(s.invocation("call-4", &url, &s.origin, cap.clone()))
            .await
            .is_success()
    );
    let again = s.invoke(s.invocation("call-5", &url, &s.origin, cap)).await;
    assert_eq!(error_code(&again), "capability_refused");
    assert_eq!(s.site.get(), 1);
}

#[tokio::test]
async fn s5_3_url_must_be_the_authorised_target() {
    let s = setup().await;
    let cap = s.grant(FETCH_URL, &s.origin, Uses::Once);
    // The draft's target is the granted origin, but the URL points elsewhere.
    let result = s
        .invoke(s.invocation("call-1", "http://other.example/page", &s.origin, cap))
        .await;
    assert_eq!(error_code(&result), "target_mismatch");
    assert_eq!(s.site.get(), 0);
}

#[tokio::test]
async fn s8_failures_are_envelopes_with_typed_codes() {
    let s = setup().await;
    let url = format!("{}/private", s.origin);
    let cap = s.grant(FETCH_URL, &s.origin, Uses::Once);
    let result = s.invoke(s.invocation("call-1", &url, &s.origin, cap)).await;
    let ToolResult::Error(e) = result else {
        panic!()
    };
    assert_eq!(e.code, "auth_required");
    assert_eq!(e.trust, Trust::ExternalUntrusted);
    assert!(!e.retryable && !e.effect_may_have_happened);
    assert_eq!(e.provenance.detail["stage"], json!("direct"));
    // A refused URL (the policy) is an internal refusal, nothing fetched.
    let origin = "http://127.0.0.1:1";
    let cap = s.grant(FETCH_URL, origin, Uses::Once);
    let result = s
        .invoke(s.invocation("call-2", "http://127.0.0.1:1/", origin, cap))
        .await;
    let ToolResult::Error(e) = result else {
        panic!()
    };
    assert_eq!((e.code.as_str(), e.trust), ("url_refused", Trust::Internal));
}

#[tokio::test]
async fn s8_4_cancelling_a_run_stops_its_reads() {
    let s = setup().await;
    let url = format!("{}/slow", s.origin);
    let cap = s.grant(FETCH_URL, &s.origin, Uses::Once);
    let invocation = s.invocation("call-1", &url, &s.origin, cap);
    let addr = s.addr.clone();
    let pending = tokio::spawn(async move {
        addr.ask(|reply| ToolMsg::Invoke { invocation, reply })
            .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    s.addr
        .send(ToolMsg::Cancel {
            run: RunId::new("another-run").unwrap(),
        })
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(
        !pending.is_finished(),
        "another run's cancellation stopped this read"
    );
    s.addr
        .send(ToolMsg::Cancel {
            run: RunId::new(RUN).unwrap(),
        })
        .await
        .unwrap();
    let result = pending.await.unwrap().unwrap();
    assert_eq!(error_code(&result), "cancelled");
}

/// Issue 12, item 1: HTML nested 10x, 100x and 1,000x deeper than the depth
/// limit, from a real server on loopback, is the typed `page_too_complex`
/// failure; the answer comes from finished work (every extraction slot is
/// free again, on a manual clock that never fires a deadline), and the
/// actor still reads an ordinary page afterwards.
#[tokio::test]
async fn hostile_nesting_is_a_typed_failure_and_the_work_is_done() {
    let s = setup().await;
    let depth = HtmlLimits::DEFAULT.max_depth;
    for factor in [10, 100, 1_000] {
        let url = format!("{}/nested/{}", s.origin, depth * factor);
        let cap = s.grant(FETCH_URL, &s.origin, Uses::Once);
        let result = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            s.invoke(s.invocation(&format!("deep-{factor}"), &url, &s.origin, cap)),
        )
        .await
        .expect("answered");
        assert_eq!(error_code(&result), "page_too_complex", "{factor}x");
        let ToolResult::Error(e) = &result else {
            unreachable!()
        };
        assert!(
            e.message.contains(&format!("more than {depth} deep")),
            "{}",
            e.message
        );
        assert!(!e.retryable);
        assert_eq!(
            s.slots.free(),
            s.slots.count(),
            "{factor}x: work still running"
        );
    }
    let url = format!("{}/page", s.origin);
    let cap = s.grant(FETCH_URL, &s.origin, Uses::Once);
    let result = s.invoke(s.invocation("after", &url, &s.origin, cap)).await;
    assert!(matches!(result, ToolResult::Success(_)), "{result:?}");
}
