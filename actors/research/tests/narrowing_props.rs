//! "Narrower" means one thing everywhere (S9.4, S9.5): for random plans and
//! random edits or filters, the plan-edit rule (`check_narrowing`) and the
//! capability verifier agree. An edit the rule accepts, used as the model's
//! filter, authorises only reads the approved plan authorises, and every
//! read its own scope covers; an edit the rule refuses for its domains or
//! dates, used as a filter, makes every read fail verification.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeSet;

use agent_capabilities::{Authority, CapabilityError, Fingerprint, Origin, Target};
use agent_research::plan::{DateRange, PlanError, ResearchPlan};
use agent_research::scope::{ExecutionScope, ReadTool, ScopeError, ScopeFilter};
use proptest::prelude::*;

const RUN: &str = "run-props";

fn tool() -> ReadTool {
    ReadTool {
        name: "fetch_url".into(),
        fingerprint: Fingerprint::of(&"fetch_url").unwrap(),
        origin: Origin::Builtin,
    }
}

fn domains() -> impl Strategy<Value = BTreeSet<String>> {
    prop::collection::btree_set(
        prop::sample::select(vec![
            "example.org",
            "a.example.org",
            "b.example.org",
            "example.com",
            "x.example.com",
        ])
        .prop_map(str::to_owned),
        1..4,
    )
}

const DATES: [&str; 6] = [
    "2023-06-01",
    "2024-01-01",
    "2024-03-15",
    "2024-07-01",
    "2024-12-31",
    "2025-06-30",
];

fn dates() -> impl Strategy<Value = Option<DateRange>> {
    prop::option::of(
        (0..DATES.len(), 0..DATES.len()).prop_map(|(a, b)| DateRange {
            from: DATES[a.min(b)].to_owned(),
            to: DATES[a.max(b)].to_owned(),
        }),
    )
}

fn plan(domains: BTreeSet<String>, dates: Option<DateRange>) -> ResearchPlan {
    ResearchPlan {
        questions: vec!["q".into()],
        queries: vec![],
        sources: vec![],
        domains,
        dates,
        notes: vec![],
    }
}

fn url() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "https://example.org/p",
        "https://a.example.org/p",
        "https://c.a.example.org/p",
        "https://b.example.org/p",
        "https://example.com/p",
        "https://x.example.com/p",
        "https://evil.org/p",
        "https://example.org.evil.net/p",
    ])
    .prop_map(str::to_owned)
}

fn published() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop::sample::select(DATES.to_vec()).prop_map(str::to_owned))
}

fn host_of(url: &str) -> String {
    url::Url::parse(url).unwrap().host_str().unwrap().to_owned()
}

fn covered(p: &ResearchPlan, url: &str, published: Option<&str>) -> bool {
    let domain_ok = p.domain_scope().covers(&Target::Url {
        origin: url::Url::parse(url).unwrap().origin().ascii_serialization(),
        host: host_of(url),
    });
    let date_ok =
        published.is_none_or(|d| p.date_scope().covers(&Target::Date { date: d.to_owned() }));
    domain_ok && date_ok
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn the_edit_rule_and_the_verifier_agree(
        approved_domains in domains(),
        approved_dates in dates(),
        edit_domains in domains(),
        edit_dates in dates(),
        reads in prop::collection::vec((url(), published()), 1..6),
    ) {
        let approved = plan(approved_domains, approved_dates);
        let edited = plan(edit_domains, edit_dates);
        let authority = Authority::new(RUN, [1; 32]);
        let v = authority.verifier();
        let scope = ExecutionScope::mint(&authority, &approved, &tool(), 1_000_000);
        let narrowed = scope.narrow(&ScopeFilter {
            domains: Some(edited.domains.clone()),
            dates: Some(edited.dates.clone().unwrap_or_else(DateRange::unbounded)),
        });
        match approved.check_narrowing(&edited) {
            Ok(()) => {
                for (url, published) in &reads {
                    let wide = scope.authorize(&v, RUN, &tool(), url, published.as_deref(), 1);
                    let narrow = narrowed.authorize(&v, RUN, &tool(), url, published.as_deref(), 1);
                    // The approved plan's capability is exactly its scopes.
                    prop_assert_eq!(wide.is_ok(), covered(&approved, url, published.as_deref()));
                    // The filter only narrows, and allows what the edit covers.
                    prop_assert!(narrow.is_err() || wide.is_ok());
                    prop_assert_eq!(narrow.is_ok(), covered(&edited, url, published.as_deref()));
                }
            }
            Err(PlanError::Widens { .. }) => {
                for (url, published) in &reads {
                    let narrow = narrowed.authorize(&v, RUN, &tool(), url, published.as_deref(), 1);
                    prop_assert!(
                        matches!(narrow, Err(ScopeError::Capability(CapabilityError::OutOfScope { .. }))),
                        "{narrow:?}"
                    );
                }
            }
            Err(other) => prop_assert!(false, "unexpected {other:?}"),
        }
    }
}
