//! A capability scoped to a workspace prefix and the workspace's path gate
//! (`WorkspacePath::parse`, SPEC S7.1) agree: on NFC and NFD spellings of one
//! name, and on every refused form. Scopes read workspace targets with the
//! path policy itself, so a spelling the gate refuses is covered by no
//! scope, and two spellings the gate maps to one file are covered alike.

#![cfg(not(target_arch = "wasm32"))]

use agent_capabilities::{Target, TargetScope, WorkspacePath};
use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;

fn scope(prefix: &str) -> TargetScope {
    TargetScope::Workspace {
        prefix: prefix.to_owned(),
    }
}

fn target(path: &str) -> Target {
    Target::WorkspacePath {
        path: path.to_owned(),
    }
}

/// Pieces of hostile and ordinary paths: separators, traversal, drive
/// letters, reserved names, forbidden and invisible characters, trailing
/// dots and spaces, and names with precomposed (NFC) and decomposed (NFD)
/// accents.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "notes", "a", "b", "caf\u{e9}", "cafe\u{301}", "\u{c5}ngstr\u{f6}m",
            "A\u{30a}ngstro\u{308}m", "r\u{e9}sum\u{e9}.md", "re\u{301}sume\u{301}.md", "x.txt",
        ]),
        3 => Just("/"),
        1 => prop::sample::select(vec![
            "..", ".", "\\", "C:", "//", ":", "*", "?", "<", "\"", "|", "\0", "\u{7f}",
            "\u{200b}", "\u{202e}", "\u{feff}", "CON", "nul.txt", "LPT1", "end.", "end ",
            "\u{301}",
        ]),
    ]
    .prop_map(|s| s.to_owned())
}

fn raw_path() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..7).prop_map(|parts| parts.concat())
}

/// What the gate says a scope should cover: the root covers every path the
/// gate accepts (and the root itself); a prefix covers what lies within it,
/// both normalised by the gate.
fn gate_says_covered(prefix: &str, raw: &str) -> bool {
    let prefix = if prefix.is_empty() {
        None
    } else {
        match WorkspacePath::parse(prefix) {
            Ok(p) => Some(p),
            Err(_) => return false,
        }
    };
    if raw.is_empty() {
        return prefix.is_none();
    }
    match (WorkspacePath::parse(raw), prefix) {
        (Err(_), _) => false,
        (Ok(_), None) => true,
        (Ok(path), Some(prefix)) => path.is_within(&prefix),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Scope and gate agree for arbitrary prefixes and paths.
    #[test]
    fn scope_covers_exactly_what_the_gate_places_within_the_prefix(
        prefix in raw_path(),
        raw in raw_path(),
    ) {
        prop_assert_eq!(scope(&prefix).covers(&target(&raw)), gate_says_covered(&prefix, &raw));
    }

    /// A path the gate refuses is covered by no scope, not even the whole
    /// workspace; a path it accepts is covered by the whole workspace and by
    /// its own parent folder.
    #[test]
    fn refused_forms_are_covered_by_no_scope(raw in raw_path()) {
        prop_assume!(!raw.is_empty());
        match WorkspacePath::parse(&raw) {
            Err(_) => {
                prop_assert!(!scope("").covers(&target(&raw)));
                prop_assert!(!scope(&raw).covers(&target(&raw)));
            }
            Ok(path) => {
                prop_assert!(scope("").covers(&target(&raw)));
                prop_assert!(scope(&raw).covers(&target(path.as_str())));
                if let Some(parent) = path.parent() {
                    prop_assert!(scope(parent.as_str()).covers(&target(&raw)));
                }
            }
        }
    }

    /// NFC and NFD spellings of a prefix and of a path are interchangeable,
    /// as they are for the gate, which maps both to one stored file.
    #[test]
    fn nfc_and_nfd_spellings_are_covered_alike(prefix in raw_path(), raw in raw_path()) {
        let expected = scope(&prefix).covers(&target(&raw));
        let prefix_nfd: String = prefix.nfd().collect();
        let prefix_nfc: String = prefix.nfc().collect();
        let raw_nfd: String = raw.nfd().collect();
        let raw_nfc: String = raw.nfc().collect();
        for p in [&prefix_nfc, &prefix_nfd] {
            for t in [&raw_nfc, &raw_nfd] {
                prop_assert_eq!(scope(p).covers(&target(t)), expected, "prefix {:?} path {:?}", p, t);
            }
        }
        prop_assert_eq!(
            WorkspacePath::parse(&raw_nfd).ok(),
            WorkspacePath::parse(&raw_nfc).ok()
        );
    }
}

#[test]
fn nfd_target_is_covered_by_an_nfc_prefix_and_the_reverse() {
    assert!(scope("caf\u{e9}").covers(&target("cafe\u{301}/menu.md")));
    assert!(scope("cafe\u{301}").covers(&target("caf\u{e9}/menu.md")));
    assert!(!scope("caf\u{e9}").covers(&target("cafe/menu.md")));
    assert!(scope("cafe\u{301}").is_within(&scope("caf\u{e9}")));
}

#[test]
fn every_refusal_rule_of_the_gate_is_a_refusal_of_the_whole_workspace_scope() {
    for raw in [
        "/etc/passwd",
        "//server/share",
        "\\\\server\\share",
        "C:/x",
        "a\\b",
        "a/../b",
        "./a",
        "a//b",
        "a/",
        "a\0b",
        "a\u{200b}b",
        "a<b",
        "CON",
        "notes/aux.txt",
        "end.",
        "end ",
    ] {
        assert!(
            WorkspacePath::parse(raw).is_err(),
            "{raw:?} should be refused"
        );
        assert!(
            !scope("").covers(&target(raw)),
            "{raw:?} should not be covered"
        );
    }
    let too_long = "a".repeat(agent_capabilities::path::MAX_SEGMENT_BYTES + 1);
    assert!(!scope("").covers(&target(&too_long)));
    let at_limit = "a".repeat(agent_capabilities::path::MAX_SEGMENT_BYTES);
    assert!(scope("").covers(&target(&at_limit)));
}
