//! S9.5: model-supplied filters may narrow approved domains and dates, never
//! widen them, enforced as capability caveats and decided by the
//! capabilities crate's own verifier; S9.4: plan approval bypasses nothing,
//! so an authorised read of a private address is still refused by the
//! fetch crate's URL policy. (Native: the policy test runs on tokio; the
//! caveat checks run in Chromium too, in `tests/wasm.rs`.)
#![cfg(not(target_arch = "wasm32"))]

use std::net::IpAddr;
use std::sync::Arc;

use agent_capabilities::{Authority, CapabilityError, Fingerprint, Origin};
use agent_fetch::{PolicyViolation, ScriptedResolver, UrlPolicy};
use agent_research::ResearchPlan;
use agent_research::plan::DateRange;
use agent_research::scope::{ExecutionScope, ReadTool, ScopeError, ScopeFilter, authorize_wire};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const RUN: &str = "research-run-1";
const NOW: u64 = 1_000;
const EXPIRES: u64 = 1_000_000;

fn tool() -> ReadTool {
    ReadTool {
        name: "fetch_url".into(),
        fingerprint: Fingerprint::of(&serde_json::json!({"name": "fetch_url"})).unwrap(),
        origin: Origin::Builtin,
    }
}

fn plan() -> ResearchPlan {
    ResearchPlan {
        questions: vec!["What changed?".into()],
        queries: vec![],
        sources: vec![
            "https://docs.example.org/a".into(),
            "https://news.example.com/b".into(),
        ],
        domains: ["example.org".to_string(), "example.com".to_string()].into(),
        dates: Some(DateRange {
            from: "2024-01-01".into(),
            to: "2024-12-31".into(),
        }),
        notes: vec![],
    }
}

fn domains(ds: &[&str]) -> Option<std::collections::BTreeSet<String>> {
    Some(ds.iter().map(|d| d.to_string()).collect())
}

fn dates(from: &str, to: &str) -> Option<DateRange> {
    Some(DateRange {
        from: from.into(),
        to: to.into(),
    })
}

fn setup() -> (Authority, ExecutionScope) {
    let authority = Authority::new(RUN, [7; 32]);
    let scope = ExecutionScope::mint(&authority, &plan(), &tool(), EXPIRES);
    (authority, scope)
}

fn out_of_scope(result: Result<agent_research::scope::AuthorizedRead, ScopeError>) -> String {
    match result {
        Err(ScopeError::Capability(CapabilityError::OutOfScope { detail, .. })) => detail,
        other => panic!("expected OutOfScope, got {other:?}"),
    }
}

#[test]
fn the_approved_plan_authorises_its_domains_and_dates() {
    let (authority, scope) = setup();
    let v = authority.verifier();
    let ok = scope
        .authorize(
            &v,
            RUN,
            &tool(),
            "https://docs.example.org/a",
            Some("2024-06-01"),
            NOW,
        )
        .unwrap();
    assert_eq!(ok.host, "docs.example.org");
    assert!(
        scope
            .authorize(
                &v,
                RUN,
                &tool(),
                "https://sub.news.example.com/x",
                None,
                NOW
            )
            .is_ok()
    );
    out_of_scope(scope.authorize(&v, RUN, &tool(), "https://example.net/", None, NOW));
    out_of_scope(scope.authorize(
        &v,
        RUN,
        &tool(),
        "https://docs.example.org/a",
        Some("2023-12-31"),
        NOW,
    ));
    // Look-alikes are not subdomains.
    out_of_scope(scope.authorize(&v, RUN, &tool(), "https://badexample.org/", None, NOW));
}

#[test]
fn a_model_filter_narrows() {
    let (authority, scope) = setup();
    let v = authority.verifier();
    let narrowed = scope.narrow(&ScopeFilter {
        domains: domains(&["docs.example.org"]),
        dates: dates("2024-03-01", "2024-03-31"),
    });
    assert!(
        narrowed
            .authorize(
                &v,
                RUN,
                &tool(),
                "https://docs.example.org/a",
                Some("2024-03-15"),
                NOW
            )
            .is_ok()
    );
    // Inside the plan but outside the filter: refused.
    out_of_scope(narrowed.authorize(&v, RUN, &tool(), "https://news.example.com/b", None, NOW));
    out_of_scope(narrowed.authorize(
        &v,
        RUN,
        &tool(),
        "https://docs.example.org/a",
        Some("2024-04-01"),
        NOW,
    ));
    // The original capabilities are untouched.
    assert!(
        scope
            .authorize(&v, RUN, &tool(), "https://news.example.com/b", None, NOW)
            .is_ok()
    );
}

#[test]
fn a_widening_filter_fails_verification_for_every_read() {
    let (authority, scope) = setup();
    let v = authority.verifier();
    let wider_domains = scope.narrow(&ScopeFilter {
        domains: domains(&["example.org", "example.net"]),
        dates: None,
    });
    // Even a read the plan allows: the token itself is refused.
    for url in ["https://example.net/", "https://docs.example.org/a"] {
        let detail = out_of_scope(wider_domains.authorize(&v, RUN, &tool(), url, None, NOW));
        assert!(detail.contains("not within the granted scope"), "{detail}");
    }
    let wider_dates = scope.narrow(&ScopeFilter {
        domains: None,
        dates: dates("2023-01-01", "2024-12-31"),
    });
    for published in [Some("2023-06-01"), Some("2024-06-01"), None] {
        let detail = out_of_scope(wider_dates.authorize(
            &v,
            RUN,
            &tool(),
            "https://docs.example.org/a",
            published,
            NOW,
        ));
        assert!(detail.contains("not within the granted scope"), "{detail}");
    }
}

/// Rewrite a token's wire form as an attacker would: decode, edit, encode.
fn tamper(wire: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let bytes = URL_SAFE_NO_PAD.decode(wire).unwrap();
    let mut value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    edit(&mut value);
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&value).unwrap())
}

#[test]
fn widening_by_editing_the_token_fails_like_a_forgery() {
    let (authority, scope) = setup();
    let v = authority.verifier();
    let narrowed = scope.narrow(&ScopeFilter {
        domains: domains(&["docs.example.org"]),
        dates: None,
    });
    let dates_wire = narrowed.dates().to_wire();
    let read = |domains_wire: &str, url: &str| {
        authorize_wire(&v, RUN, &tool(), domains_wire, &dates_wire, url, None, NOW)
    };
    assert!(read(&narrowed.domains().to_wire(), "https://docs.example.org/").is_ok());
    // Widen the granted domains in the base.
    let widened_base = tamper(&narrowed.domains().to_wire(), |v| {
        v["base"]["grant"]["scope"]["domains"] = serde_json::json!(["example.net"]);
    });
    // Drop the model's narrowing caveat.
    let dropped = tamper(&narrowed.domains().to_wire(), |v| {
        v["caveats"] = serde_json::json!([]);
    });
    // Replace the caveat by a wider one.
    let replaced = tamper(&narrowed.domains().to_wire(), |v| {
        v["caveats"][0]["value"]["domains"] = serde_json::json!(["example.org"]);
    });
    for wire in [widened_base, dropped, replaced] {
        assert_eq!(
            read(&wire, "https://news.example.org/"),
            Err(ScopeError::Capability(CapabilityError::BadTag))
        );
    }
    // A token of an earlier authority (before a reload) is refused too.
    let before_reload = Authority::new(RUN, [8; 32]);
    let old = ExecutionScope::mint(&before_reload, &plan(), &tool(), EXPIRES);
    assert_eq!(
        old.authorize(&v, RUN, &tool(), "https://docs.example.org/a", None, NOW),
        Err(ScopeError::Capability(CapabilityError::BadTag))
    );
}

#[test]
fn another_run_or_tool_or_an_expired_token_is_refused() {
    let (authority, scope) = setup();
    let v = authority.verifier();
    assert!(matches!(
        scope.authorize(
            &v,
            "other-run",
            &tool(),
            "https://docs.example.org/a",
            None,
            NOW
        ),
        Err(ScopeError::Capability(CapabilityError::WrongRun { .. }))
    ));
    let mut other = tool();
    other.name = "web_search".into();
    assert!(matches!(
        scope.authorize(&v, RUN, &other, "https://docs.example.org/a", None, NOW),
        Err(ScopeError::Capability(CapabilityError::WrongTool { .. }))
    ));
    assert!(matches!(
        scope.authorize(
            &v,
            RUN,
            &tool(),
            "https://docs.example.org/a",
            None,
            EXPIRES
        ),
        Err(ScopeError::Capability(CapabilityError::Expired { .. }))
    ));
    assert!(matches!(
        scope.authorize(&v, RUN, &tool(), "file:///etc/passwd", None, NOW),
        Err(ScopeError::Url(_))
    ));
}

#[tokio::test]
async fn a_private_address_in_an_approved_plan_is_still_refused_by_the_url_policy() {
    let mut plan = plan();
    plan.domains = ["intranet.example.org".to_string(), "10.1.2.3".to_string()].into();
    plan.sources = vec![
        "https://intranet.example.org/wiki".into(),
        "http://10.1.2.3/admin".into(),
    ];
    plan.validate().unwrap();
    let authority = Authority::new(RUN, [7; 32]);
    let scope = ExecutionScope::mint(&authority, &plan, &tool(), EXPIRES);
    let v = authority.verifier();
    let resolver = ScriptedResolver::new().answer(
        "intranet.example.org",
        ["10.1.2.3".parse::<IpAddr>().unwrap()],
    );
    let policy = UrlPolicy::public_web(Arc::new(resolver));
    for url in &plan.sources {
        // The capability allows it: it is in the approved plan ...
        let authorized = scope.authorize(&v, RUN, &tool(), url, None, NOW).unwrap();
        // ... and the URL policy still refuses it.
        let refused = policy.check(&authorized.url).await;
        assert!(
            matches!(refused, Err(PolicyViolation::RefusedAddress { .. })),
            "{url}: {refused:?}"
        );
    }
    // A public address in the same plan passes both.
    let resolver = ScriptedResolver::new().answer(
        "docs.example.org",
        ["93.184.215.14".parse::<IpAddr>().unwrap()],
    );
    let policy = UrlPolicy::public_web(Arc::new(resolver));
    let wide = ExecutionScope::mint(&authority, &self::plan(), &tool(), EXPIRES);
    let ok = wide
        .authorize(&v, RUN, &tool(), "https://docs.example.org/a", None, NOW)
        .unwrap();
    assert!(policy.check(&ok.url).await.is_ok());
}
