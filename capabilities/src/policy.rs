//! The approval policy: given a tool invocation's declared effects, trust
//! and the mode, decide whether it runs automatically, asks the person
//! once, or is denied (the table in DESIGN.md, S6).
//!
//! The decision looks only at declared effect classes and configuration,
//! never at tool annotations (MCP hints are display text, S6.3), and the
//! most severe declared effect decides.

use serde::{Deserialize, Serialize};

use crate::canonical::{Fingerprint, canonical_bytes_of_plain, sha256_hex};
use crate::scope::TargetScope;
use crate::vocab::{EffectClass, EffectSet, Origin};

/// How much runs without asking.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Reads, recoverable local writes and trusted external writes run automatically.
    #[default]
    Permissive,
    /// Only reads run automatically; every write asks first.
    Strict,
}

/// What an approval is bound to (S6.2). A change to any field is a new identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ApprovalIdentity {
    /// Where the tool comes from.
    pub origin: Origin,
    /// The model provider or MCP server, when there is one.
    pub provider: Option<String>,
    /// The tool name.
    pub tool: String,
    /// The tool definition's fingerprint.
    pub fingerprint: Fingerprint,
    /// The declared effect classes.
    pub effects: EffectSet,
    /// The target scope the approval covers.
    pub scope: TargetScope,
}

impl ApprovalIdentity {
    /// A stable key: SHA-256 hex of this identity's canonical JSON.
    pub fn key(&self) -> String {
        sha256_hex(&canonical_bytes_of_plain(self))
    }
}

/// Everything the decision looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyInput {
    /// The tool, its effects and scope.
    pub identity: ApprovalIdentity,
    /// The tool is in the allowlist.
    pub allowed: bool,
    /// Built in, or a user-configured plugin marked trusted whose fingerprint matches.
    pub trusted_external: bool,
    /// An MCP function the person has not seen before.
    pub unknown_mcp_function: bool,
    /// Short human text naming what the invocation touches.
    pub target_summary: String,
}

/// The outcome of the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Runs without asking; `summary` is shown to the person.
    Automatic { summary: String },
    /// Runs only after the person confirms this identity, once; never persisted.
    AskOnce {
        reason: String,
        identity: ApprovalIdentity,
    },
    /// Never runs.
    Deny { reason: String },
}

/// Decides an invocation under `mode` (the DESIGN.md approval table).
pub fn decide(mode: ApprovalMode, input: &PolicyInput) -> Decision {
    let id = &input.identity;
    let tool = &id.tool;
    let origin = &id.origin;
    let target = &input.target_summary;
    let ask = |reason: String| Decision::AskOnce {
        reason,
        identity: id.clone(),
    };

    if !input.allowed {
        return Decision::Deny {
            reason: format!(
                "tool {tool} ({origin}) is not in the allowlist; add it to the allowlist to use it"
            ),
        };
    }
    let declared = id.effects.iter().max().copied();
    if input.unknown_mcp_function
        && !declared.is_some_and(|e| e.is_destructive() || e == EffectClass::CredentialExposure)
    {
        let effect = declared.map_or("no declared effect", EffectClass::as_str);
        return ask(format!(
            "tool {tool} is an unknown MCP function of {origin} ({effect}, on {target}); confirm it once"
        ));
    }
    let Some(most) = declared else {
        return Decision::Automatic {
            summary: format!("{tool}: no effects outside the run"),
        };
    };
    if most.is_destructive() {
        return ask(format!(
            "tool {tool} ({origin}) has effect {most} on {target}: it cannot be undone, so it needs a one-time confirmation"
        ));
    }
    if most == EffectClass::CredentialExposure {
        return ask(format!(
            "tool {tool} ({origin}) has effect {most}: it would send a credential to {target}, which is not the origin it is bound to"
        ));
    }
    match (most, mode) {
        (EffectClass::WriteExternal, ApprovalMode::Permissive) if input.trusted_external => {
            Decision::Automatic {
                summary: format!("{tool}: {most} to {target}"),
            }
        }
        (EffectClass::WriteExternal, ApprovalMode::Strict) => ask(format!(
            "tool {tool} ({origin}) has effect {most} on {target}, and strict mode asks before every write"
        )),
        (EffectClass::WriteExternal, ApprovalMode::Permissive) => ask(format!(
            "tool {tool} ({origin}) has effect {most} on {target} and is not a trusted tool (built in, or a plugin marked trusted whose fingerprint matches)"
        )),
        (EffectClass::WriteLocal, ApprovalMode::Permissive) => Decision::Automatic {
            summary: format!("{tool}: {most} to {target}, with revision check and receipt"),
        },
        (EffectClass::WriteLocal, ApprovalMode::Strict) => ask(format!(
            "tool {tool} ({origin}) has effect {most} on {target}, and strict mode asks before every write"
        )),
        // Only reads remain (destructive and credential classes returned above).
        _ => Decision::Automatic {
            summary: format!("{tool}: {most} of {target}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use EffectClass::*;

    fn identity(effects: &[EffectClass]) -> ApprovalIdentity {
        ApprovalIdentity {
            origin: Origin::Plugin("tickets".to_owned()),
            provider: None,
            tool: "create_ticket".to_owned(),
            fingerprint: Fingerprint::from_hex(&"c".repeat(64)).unwrap(),
            effects: effects.iter().copied().collect(),
            scope: TargetScope::Origins {
                origins: ["https://tickets.example".to_owned()].into(),
            },
        }
    }

    fn input(effects: &[EffectClass], trusted: bool, unknown_mcp: bool) -> PolicyInput {
        PolicyInput {
            identity: identity(effects),
            allowed: true,
            trusted_external: trusted,
            unknown_mcp_function: unknown_mcp,
            target_summary: "https://tickets.example".to_owned(),
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Kind {
        Auto,
        Ask,
        Deny,
    }
    use Kind::*;

    fn kind(d: &Decision) -> Kind {
        match d {
            Decision::Automatic { .. } => Auto,
            Decision::AskOnce { .. } => Ask,
            Decision::Deny { .. } => Deny,
        }
    }

    /// (row name, effects, trusted, unknown MCP, allowed, permissive, strict)
    type Row = (
        &'static str,
        &'static [EffectClass],
        bool,
        bool,
        bool,
        Kind,
        Kind,
    );

    #[test]
    fn approval_table_in_both_modes() {
        // (row, effects, trusted, unknown MCP, allowed, permissive, strict)
        #[rustfmt::skip]
        let rows: &[Row] = &[
            ("not allowed read",            &[ReadLocal],              true,  false, false, Deny, Deny),
            ("not allowed destructive",     &[DestructiveExternal],    true,  false, false, Deny, Deny),
            ("no effects",                  &[],                       false, false, true,  Auto, Auto),
            ("local read",                  &[ReadLocal],              false, false, true,  Auto, Auto),
            ("network read",                &[ReadNetwork],            false, false, true,  Auto, Auto),
            ("both reads",                  &[ReadLocal, ReadNetwork], false, false, true,  Auto, Auto),
            ("recoverable local write",     &[ReadLocal, WriteLocal],  false, false, true,  Auto, Ask),
            ("trusted external write",      &[WriteExternal],          true,  false, true,  Auto, Ask),
            ("untrusted external write",    &[WriteExternal],          false, false, true,  Ask,  Ask),
            ("destructive local",           &[DestructiveLocal],       true,  false, true,  Ask,  Ask),
            ("destructive external",        &[DestructiveExternal],    true,  false, true,  Ask,  Ask),
            ("credential exposure",         &[CredentialExposure],     true,  false, true,  Ask,  Ask),
            ("unknown MCP read",            &[ReadNetwork],            true,  true,  true,  Ask,  Ask),
            ("unknown MCP no effects",      &[],                       false, true,  true,  Ask,  Ask),
            ("unknown MCP write",           &[WriteLocal],             true,  true,  true,  Ask,  Ask),
            ("most severe decides",         &[ReadLocal, WriteLocal, DestructiveLocal], true, false, true, Ask, Ask),
            ("write_local + trusted ext",   &[WriteLocal, WriteExternal], true, false, true, Auto, Ask),
            ("write_local + untrusted ext", &[WriteLocal, WriteExternal], false, false, true, Ask, Ask),
        ];
        for &(row, effects, trusted, unknown, allowed, permissive, strict) in rows {
            let mut inp = input(effects, trusted, unknown);
            inp.allowed = allowed;
            for (mode, expected) in [
                (ApprovalMode::Permissive, permissive),
                (ApprovalMode::Strict, strict),
            ] {
                let decision = decide(mode, &inp);
                assert_eq!(kind(&decision), expected, "{row} in {mode:?}: {decision:?}");
                match &decision {
                    Decision::AskOnce { reason, identity } => {
                        assert_eq!(identity, &inp.identity, "{row}");
                        assert!(reason.contains("create_ticket"), "{row}: {reason}");
                        if let Some(most) = effects.iter().max() {
                            assert!(reason.contains(most.as_str()), "{row}: {reason}");
                        }
                    }
                    Decision::Deny { reason } => {
                        assert!(reason.contains("create_ticket"), "{row}: {reason}");
                    }
                    Decision::Automatic { summary } => {
                        assert!(summary.contains("create_ticket"), "{row}: {summary}");
                    }
                }
            }
        }
    }

    #[test]
    fn automatic_summaries_name_the_target_and_revision_check() {
        let ext = decide(
            ApprovalMode::Permissive,
            &input(&[WriteExternal], true, false),
        );
        let Decision::Automatic { summary } = ext else {
            panic!("expected automatic, got {ext:?}");
        };
        assert!(summary.contains("https://tickets.example"), "{summary}");
        let local = decide(
            ApprovalMode::Permissive,
            &input(&[WriteLocal], false, false),
        );
        let Decision::Automatic { summary } = local else {
            panic!("expected automatic, got {local:?}");
        };
        assert!(summary.contains("revision check and receipt"), "{summary}");
    }

    #[test]
    fn annotations_never_lower_a_decision() {
        // The decision only sees declared effects: a tool that calls itself
        // read-only in its name or description still asks for a destructive effect.
        let mut inp = input(&[DestructiveExternal], true, false);
        inp.identity.tool = "read_only_list (readOnlyHint: true)".to_owned();
        inp.target_summary = "harmless read-only listing".to_owned();
        assert_eq!(kind(&decide(ApprovalMode::Permissive, &inp)), Ask);

        // Adding declared effects never lowers the decision (monotonic).
        let subsets: Vec<Vec<EffectClass>> = (0u32..128)
            .map(|mask| {
                EffectClass::ALL
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, e)| *e)
                    .collect()
            })
            .collect();
        for small in &subsets {
            for large in subsets
                .iter()
                .filter(|l| small.iter().all(|e| l.contains(e)))
            {
                for mode in [ApprovalMode::Permissive, ApprovalMode::Strict] {
                    for trusted in [false, true] {
                        for unknown in [false, true] {
                            let a = kind(&decide(mode, &input(small, trusted, unknown)));
                            let b = kind(&decide(mode, &input(large, trusted, unknown)));
                            assert!(a <= b, "{small:?} -> {a:?} but {large:?} -> {b:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn strict_never_lower_than_permissive() {
        for mask in 0u32..128 {
            let effects: Vec<EffectClass> = EffectClass::ALL
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, e)| *e)
                .collect();
            for trusted in [false, true] {
                let inp = input(&effects, trusted, false);
                assert!(
                    kind(&decide(ApprovalMode::Permissive, &inp))
                        <= kind(&decide(ApprovalMode::Strict, &inp))
                );
            }
        }
    }

    #[test]
    fn identity_key_changes_with_every_field() {
        let base = identity(&[WriteExternal]);
        let key = base.key();
        assert_eq!(key.len(), 64);
        assert_eq!(key, base.clone().key(), "stable");
        let mut variants = Vec::new();
        let mut v = base.clone();
        v.origin = Origin::Plugin("other".to_owned());
        variants.push(("origin", v));
        let mut v = base.clone();
        v.provider = Some("mcp-server-a".to_owned());
        variants.push(("provider", v));
        let mut v = base.clone();
        v.tool = "create_ticket2".to_owned();
        variants.push(("tool", v));
        let mut v = base.clone();
        v.fingerprint = Fingerprint::from_hex(&"d".repeat(64)).unwrap();
        variants.push(("fingerprint", v));
        let mut v = base.clone();
        v.effects.insert(ReadNetwork);
        variants.push(("effects", v));
        let mut v = base.clone();
        v.scope = TargetScope::Origins {
            origins: ["https://other.example".to_owned()].into(),
        };
        variants.push(("scope", v));
        let mut keys: std::collections::BTreeSet<String> = [key.clone()].into();
        for (field, v) in variants {
            assert_ne!(v.key(), key, "changing {field} must change the key");
            assert!(keys.insert(v.key()), "{field} collides");
        }
    }

    #[test]
    fn mode_serde_and_default() {
        assert_eq!(ApprovalMode::default(), ApprovalMode::Permissive);
        assert_eq!(
            serde_json::to_string(&ApprovalMode::Strict).unwrap(),
            "\"strict\""
        );
        assert_eq!(
            serde_json::from_str::<ApprovalMode>("\"permissive\"").unwrap(),
            ApprovalMode::Permissive
        );
    }
}
