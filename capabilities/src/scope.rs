//! Target scopes: what a capability may touch, with an explicit subset
//! relation (`covers` a target; `is_within` another scope).
//!
//! Workspace prefixes and workspace targets are read with the workspace's own
//! path policy, [`WorkspacePath::parse`] (NFC included): a scope covers a path
//! exactly when the workspace would accept it and the normalised path lies
//! within the normalised prefix, so a scope check and the path gate never
//! disagree about which file a spelling names.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::path::WorkspacePath;

/// The set of targets a capability may touch. Narrowing is intersection.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetScope {
    /// Touches nothing outside the run itself (pure computation, ask_user).
    NoTarget,
    /// Workspace paths equal to or below `prefix` (segment-wise, after the
    /// path policy of [`WorkspacePath::parse`]; "" is the whole workspace).
    Workspace { prefix: String },
    /// Exactly these URL origins (`scheme://host[:port]`, lowercase).
    Origins { origins: BTreeSet<String> },
    /// These registrable domains and their subdomains (lowercase, no trailing dot).
    Domains { domains: BTreeSet<String> },
    /// ISO dates `YYYY-MM-DD`, inclusive at both ends.
    Dates { from: String, to: String },
    /// Exactly these things in the embedding page, as a page tool's
    /// target argument names them (S5.9; compared as written).
    PageItems { items: BTreeSet<String> },
    /// Every one of the listed scopes at once (for example domains and dates).
    All { scopes: Vec<TargetScope> },
}

/// One concrete thing an invocation touches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// Nothing outside the run.
    Nothing,
    /// A workspace path, relative to the session root ("" is the root
    /// itself); read with [`WorkspacePath::parse`], so any spelling the
    /// workspace accepts names the same file here.
    WorkspacePath { path: String },
    /// A URL, by its origin (`scheme://host[:port]`) and host.
    Url { origin: String, host: String },
    /// An ISO date `YYYY-MM-DD`.
    Date { date: String },
    /// A thing in the embedding page, named by a page tool's target
    /// argument (S5.9): the page, not the runtime, knows what it is.
    PageItem { item: String },
    /// Several targets at once; covered when each is covered.
    Many { targets: Vec<Target> },
}

/// How many items of a set [`TargetScope::summary`] lists before "+N more".
const SUMMARY_ITEMS: usize = 5;

impl TargetScope {
    /// True when this scope allows `target`.
    ///
    /// [`Target::Nothing`] is allowed by every scope (touching nothing is
    /// within any limit), a [`Target::Many`] when each part is, and a
    /// malformed target (a non-normalised workspace path, an invalid date, an
    /// empty host) by no scope at all.
    pub fn covers(&self, target: &Target) -> bool {
        match target {
            Target::Nothing => true,
            Target::Many { targets } => targets.iter().all(|t| self.covers(t)),
            single => target_is_well_formed(single) && self.covers_single(single),
        }
    }

    /// `target` is neither `Nothing` nor `Many`, and is well formed.
    fn covers_single(&self, target: &Target) -> bool {
        match (self, target) {
            (TargetScope::All { scopes }, _) => scopes.iter().all(|s| s.covers_single(target)),
            (TargetScope::Workspace { prefix }, Target::WorkspacePath { path }) => {
                match (workspace_location(prefix), workspace_location(path)) {
                    (Some(p), Some(t)) => location_is_within(t.as_ref(), p.as_ref()),
                    _ => false,
                }
            }
            (TargetScope::Origins { origins }, Target::Url { origin, .. }) => {
                origins.contains(origin)
            }
            (TargetScope::Domains { domains }, Target::Url { host, .. }) => {
                domains.iter().any(|d| domain_matches_host(d, host))
            }
            (TargetScope::PageItems { items }, Target::PageItem { item }) => items.contains(item),
            (TargetScope::Dates { from, to }, Target::Date { date }) => {
                valid_date(from)
                    && valid_date(to)
                    && valid_date(date)
                    && from.as_str() <= date.as_str()
                    && date.as_str() <= to.as_str()
            }
            _ => false,
        }
    }

    /// True when every target this scope covers is also covered by `wider`.
    ///
    /// Sound, not complete: `true` is always right; a `false` may be
    /// conservative for unusual combinations (for example origins against
    /// domains, since an origin scope does not look at the host).
    pub fn is_within(&self, wider: &TargetScope) -> bool {
        if self.covers_nothing() {
            return true;
        }
        if let TargetScope::All { scopes } = wider {
            return scopes.iter().all(|w| self.is_within(w));
        }
        if let TargetScope::All { scopes } = self {
            return scopes.iter().any(|s| s.is_within(wider));
        }
        match (self, wider) {
            (TargetScope::Workspace { prefix: a }, TargetScope::Workspace { prefix: b }) => {
                match (workspace_location(a), workspace_location(b)) {
                    (Some(a), Some(b)) => location_is_within(a.as_ref(), b.as_ref()),
                    _ => false,
                }
            }
            (TargetScope::Origins { origins: a }, TargetScope::Origins { origins: b }) => {
                a.is_subset(b)
            }
            (TargetScope::PageItems { items: a }, TargetScope::PageItems { items: b }) => {
                a.is_subset(b)
            }
            (TargetScope::Domains { domains: a }, TargetScope::Domains { domains: b }) => a
                .iter()
                .filter(|d| normalise_host(d).is_some())
                .all(|d| b.iter().any(|w| domain_matches_host(w, d))),
            (TargetScope::Dates { from: f1, to: t1 }, TargetScope::Dates { from: f2, to: t2 }) => {
                valid_date(f2) && valid_date(t2) && f2 <= f1 && t1 <= t2
            }
            _ => false,
        }
    }

    /// A scope that covers only targets both `self` and `other` cover.
    ///
    /// Same-kind scopes are simplified (the longer prefix, the common
    /// origins, the narrower domains, the overlapping dates); anything else
    /// becomes an [`TargetScope::All`] of both.
    pub fn intersect(&self, other: &TargetScope) -> TargetScope {
        if self.covers_nothing() || other.covers_nothing() {
            return TargetScope::NoTarget;
        }
        match (self, other) {
            (TargetScope::Workspace { .. }, TargetScope::Workspace { .. }) => {
                // Two valid prefixes are nested or disjoint.
                return if self.is_within(other) {
                    self.clone()
                } else if other.is_within(self) {
                    other.clone()
                } else {
                    TargetScope::NoTarget
                };
            }
            (TargetScope::Origins { origins: a }, TargetScope::Origins { origins: b }) => {
                let origins: BTreeSet<String> = a.intersection(b).cloned().collect();
                return TargetScope::Origins { origins }.or_no_target();
            }
            (TargetScope::PageItems { items: a }, TargetScope::PageItems { items: b }) => {
                let items: BTreeSet<String> = a.intersection(b).cloned().collect();
                return TargetScope::PageItems { items }.or_no_target();
            }
            (TargetScope::Domains { domains: a }, TargetScope::Domains { domains: b }) => {
                let mut domains = BTreeSet::new();
                for x in a.iter().filter_map(|d| normalise_host(d)) {
                    for y in b.iter().filter_map(|d| normalise_host(d)) {
                        if domain_matches_host(&y, &x) {
                            domains.insert(x.clone());
                        } else if domain_matches_host(&x, &y) {
                            domains.insert(y.clone());
                        }
                    }
                }
                return TargetScope::Domains { domains }.or_no_target();
            }
            (TargetScope::Dates { from: f1, to: t1 }, TargetScope::Dates { from: f2, to: t2 }) => {
                let from = f1.max(f2).clone();
                let to = t1.min(t2).clone();
                return TargetScope::Dates { from, to }.or_no_target();
            }
            _ => {}
        }
        if self.is_within(other) {
            return self.clone();
        }
        if other.is_within(self) {
            return other.clone();
        }
        let mut scopes = Vec::new();
        for s in [self, other] {
            match s {
                TargetScope::All { scopes: parts } => scopes.extend(parts.iter().cloned()),
                s => scopes.push(s.clone()),
            }
        }
        TargetScope::All { scopes }.or_no_target()
    }

    /// Short human text for approval dialogs, for example
    /// `workspace notes/`, `domains example.com (and subdomains)`.
    pub fn summary(&self) -> String {
        match self {
            TargetScope::NoTarget => "nothing outside the run".to_owned(),
            TargetScope::Workspace { prefix } if prefix.is_empty() => {
                "the whole workspace".to_owned()
            }
            TargetScope::Workspace { prefix } => format!("workspace {prefix}/"),
            TargetScope::Origins { origins } if origins.is_empty() => "no origins".to_owned(),
            TargetScope::Origins { origins } => format!("origins {}", list_summary(origins)),
            TargetScope::Domains { domains } if domains.is_empty() => "no domains".to_owned(),
            TargetScope::Domains { domains } => {
                format!("domains {} (and subdomains)", list_summary(domains))
            }
            TargetScope::Dates { from, to } => format!("dates {from} to {to}"),
            TargetScope::PageItems { items } if items.is_empty() => "no page items".to_owned(),
            TargetScope::PageItems { items } => {
                let shown: BTreeSet<String> = items.iter().map(|i| bounded_item(i)).collect();
                format!("page {}", list_summary(&shown))
            }
            TargetScope::All { scopes } if scopes.is_empty() => "anything".to_owned(),
            TargetScope::All { scopes } => scopes
                .iter()
                .map(TargetScope::summary)
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    /// True when this scope provably covers no well-formed single target, so
    /// it allows only [`Target::Nothing`].
    fn covers_nothing(&self) -> bool {
        match self {
            TargetScope::NoTarget => true,
            TargetScope::Workspace { prefix } => workspace_location(prefix).is_none(),
            TargetScope::Origins { origins } => origins.is_empty(),
            TargetScope::Domains { domains } => domains.iter().all(|d| normalise_host(d).is_none()),
            TargetScope::Dates { from, to } => !(valid_date(from) && valid_date(to) && from <= to),
            TargetScope::PageItems { items } => items.iter().all(String::is_empty),
            TargetScope::All { scopes } => {
                if scopes.iter().any(TargetScope::covers_nothing) {
                    return true;
                }
                // Each single target has one kind; parts of different kinds
                // can never all cover the same target.
                let kinds: BTreeSet<u8> = scopes.iter().filter_map(TargetScope::kind).collect();
                kinds.len() > 1
            }
        }
    }

    /// Which kind of single target this scope can cover (`None` for `All`).
    fn kind(&self) -> Option<u8> {
        match self {
            TargetScope::NoTarget => Some(0),
            TargetScope::Workspace { .. } => Some(1),
            TargetScope::Origins { .. } | TargetScope::Domains { .. } => Some(2),
            TargetScope::Dates { .. } => Some(3),
            TargetScope::PageItems { .. } => Some(4),
            TargetScope::All { .. } => None,
        }
    }

    fn or_no_target(self) -> TargetScope {
        if self.covers_nothing() {
            TargetScope::NoTarget
        } else {
            self
        }
    }
}

impl Target {
    /// Short human text for approval dialogs.
    pub fn summary(&self) -> String {
        match self {
            Target::Nothing => "nothing outside the run".to_owned(),
            Target::WorkspacePath { path } => format!("workspace file {path}"),
            Target::Url { origin, .. } => origin.clone(),
            Target::Date { date } => date.clone(),
            Target::PageItem { item } => format!("page {}", bounded_item(item)),
            Target::Many { targets } => targets
                .iter()
                .map(Target::summary)
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// The most characters of a page item a summary shows; the rest is `…`
/// (the item is the model's text: a summary must stay one short line).
pub const PAGE_ITEM_SUMMARY_CHARS: usize = 120;

fn bounded_item(item: &str) -> String {
    match item.char_indices().nth(PAGE_ITEM_SUMMARY_CHARS) {
        Some((cut, _)) => format!("{}…", &item[..cut]),
        None => item.to_owned(),
    }
}

fn list_summary(items: &BTreeSet<String>) -> String {
    let mut shown: Vec<&str> = items
        .iter()
        .take(SUMMARY_ITEMS)
        .map(String::as_str)
        .collect();
    let more = items.len().saturating_sub(SUMMARY_ITEMS);
    let more_text = format!("+{more} more");
    if more > 0 {
        shown.push(&more_text);
    }
    shown.join(", ")
}

fn target_is_well_formed(target: &Target) -> bool {
    match target {
        Target::WorkspacePath { path } => workspace_location(path).is_some(),
        Target::Date { date } => valid_date(date),
        Target::Url { origin, .. } => !origin.is_empty(),
        Target::PageItem { item } => !item.is_empty(),
        Target::Nothing | Target::Many { .. } => true,
    }
}

/// A workspace prefix or target read with the path policy: `Some(None)` is
/// the workspace root (the empty string), `Some(Some(path))` a path the
/// workspace accepts (NFC-normalised), `None` a spelling it refuses.
fn workspace_location(path: &str) -> Option<Option<WorkspacePath>> {
    if path.is_empty() {
        return Some(None);
    }
    WorkspacePath::parse(path).ok().map(Some)
}

/// True when `inner` is `outer` or below it; everything is within the root.
fn location_is_within(inner: Option<&WorkspacePath>, outer: Option<&WorkspacePath>) -> bool {
    match (inner, outer) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(inner), Some(outer)) => inner.is_within(outer),
    }
}

/// Lowercase, one trailing dot removed; `None` for an empty name or one
/// with an empty label.
fn normalise_host(host: &str) -> Option<String> {
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if host.is_empty() || host.split('.').any(str::is_empty) {
        return None;
    }
    Some(host)
}

/// IP literals (all-numeric labels, or anything with a colon) match only exactly.
fn is_ip_like(host: &str) -> bool {
    host.contains(':')
        || host.starts_with('[')
        || host
            .split('.')
            .all(|l| l.bytes().all(|b| b.is_ascii_digit()))
}

/// `domain` covers `host` when they are equal or `host` is a subdomain on a
/// label boundary. Case-insensitive; a trailing dot is ignored.
fn domain_matches_host(domain: &str, host: &str) -> bool {
    let (Some(domain), Some(host)) = (normalise_host(domain), normalise_host(host)) else {
        return false;
    };
    if host == domain {
        return true;
    }
    if is_ip_like(&host) || is_ip_like(&domain) {
        return false;
    }
    host.len() > domain.len()
        && host.ends_with(domain.as_str())
        && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
}

/// A real calendar date written `YYYY-MM-DD`.
fn valid_date(date: &str) -> bool {
    let b = date.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        b[r].iter().try_fold(0u32, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(prefix: &str) -> TargetScope {
        TargetScope::Workspace {
            prefix: prefix.to_owned(),
        }
    }
    fn path(p: &str) -> Target {
        Target::WorkspacePath { path: p.to_owned() }
    }
    fn domains(ds: &[&str]) -> TargetScope {
        TargetScope::Domains {
            domains: ds.iter().map(|d| d.to_string()).collect(),
        }
    }
    fn origins(os: &[&str]) -> TargetScope {
        TargetScope::Origins {
            origins: os.iter().map(|d| d.to_string()).collect(),
        }
    }
    fn url(origin: &str, host: &str) -> Target {
        Target::Url {
            origin: origin.to_owned(),
            host: host.to_owned(),
        }
    }
    fn dates(from: &str, to: &str) -> TargetScope {
        TargetScope::Dates {
            from: from.to_owned(),
            to: to.to_owned(),
        }
    }
    fn date(d: &str) -> Target {
        Target::Date { date: d.to_owned() }
    }

    #[test]
    fn workspace_prefixes_compare_segment_wise() {
        assert!(ws("notes").covers(&path("notes/a.md")));
        assert!(ws("notes").covers(&path("notes")));
        assert!(!ws("notes").covers(&path("notesx/a")));
        assert!(ws("").covers(&path("anything/at/all.txt")));
        assert!(ws("a/b").covers(&path("a/b/c")));
        assert!(!ws("a/b").covers(&path("a/bc")));
        assert!(!ws("notes").covers(&path("notes/../secret")));
        assert!(!ws("").covers(&path("/etc/passwd")));
        assert!(!ws("").covers(&path("a//b")));
        assert!(!ws("").covers(&path("a\\b")));
        assert!(!ws("../x").covers(&path("../x/y")));
    }

    #[test]
    fn domains_cover_subdomains_on_label_boundary() {
        let d = domains(&["example.com"]);
        assert!(d.covers(&url("https://example.com", "example.com")));
        assert!(d.covers(&url("https://a.example.com", "a.example.com")));
        assert!(d.covers(&url("https://A.Example.COM", "A.Example.COM.")));
        assert!(!d.covers(&url("https://badexample.com", "badexample.com")));
        assert!(!d.covers(&url("https://example.com.evil", "example.com.evil")));
        assert!(domains(&["Example.com."]).covers(&url("https://x.example.com", "x.example.com")));
        assert!(!domains(&["3.4"]).covers(&url("http://1.2.3.4", "1.2.3.4")));
        assert!(!domains(&[""]).covers(&url("http://x", "")));
    }

    #[test]
    fn origins_are_exact() {
        let o = origins(&["https://example.com"]);
        assert!(o.covers(&url("https://example.com", "example.com")));
        assert!(!o.covers(&url("http://example.com", "example.com")));
        assert!(!o.covers(&url("https://example.com:8443", "example.com")));
        assert!(!o.covers(&url("https://a.example.com", "a.example.com")));
    }

    #[test]
    fn dates_are_inclusive_and_valid_only() {
        let d = dates("2024-01-01", "2024-02-29");
        assert!(d.covers(&date("2024-01-01")));
        assert!(d.covers(&date("2024-02-29")));
        assert!(!d.covers(&date("2024-03-01")));
        assert!(!d.covers(&date("2023-12-31")));
        assert!(!d.covers(&date("2024-02-30")));
        assert!(!d.covers(&date("2024-1-15")));
        assert!(!dates("2023-01-01", "2023-12-31").covers(&date("2023-02-29")));
        assert!(!dates("2024-13-01", "2025-01-01").covers(&date("2024-12-01")));
        assert!(!TargetScope::All { scopes: vec![] }.covers(&date("2024-02-30")));
    }

    #[test]
    fn no_target_and_many() {
        assert!(TargetScope::NoTarget.covers(&Target::Nothing));
        assert!(!TargetScope::NoTarget.covers(&path("a")));
        assert!(ws("a").covers(&Target::Nothing));
        let many = Target::Many {
            targets: vec![path("a/x"), path("a/y")],
        };
        assert!(ws("a").covers(&many));
        let mixed = Target::Many {
            targets: vec![path("a/x"), path("b/y")],
        };
        assert!(!ws("a").covers(&mixed));
    }

    #[test]
    fn all_requires_every_part() {
        let both = TargetScope::All {
            scopes: vec![
                domains(&["example.com"]),
                origins(&["https://a.example.com"]),
            ],
        };
        assert!(both.covers(&url("https://a.example.com", "a.example.com")));
        assert!(!both.covers(&url("https://b.example.com", "b.example.com")));
    }

    #[test]
    fn is_within_examples() {
        assert!(ws("notes/a").is_within(&ws("notes")));
        assert!(!ws("notes").is_within(&ws("notes/a")));
        assert!(!ws("notesx").is_within(&ws("notes")));
        assert!(ws("x").is_within(&ws("")));
        assert!(domains(&["a.example.com"]).is_within(&domains(&["example.com"])));
        assert!(!domains(&["example.com"]).is_within(&domains(&["a.example.com"])));
        assert!(dates("2024-02-01", "2024-02-10").is_within(&dates("2024-01-01", "2024-12-31")));
        assert!(!dates("2023-02-01", "2024-02-10").is_within(&dates("2024-01-01", "2024-12-31")));
        assert!(TargetScope::NoTarget.is_within(&ws("x")));
        assert!(!ws("x").is_within(&TargetScope::NoTarget));
        assert!(!origins(&["https://a.com"]).is_within(&domains(&["a.com"])));
    }

    #[test]
    fn intersect_examples() {
        assert_eq!(ws("notes").intersect(&ws("notes/a")), ws("notes/a"));
        assert_eq!(ws("a").intersect(&ws("b")), TargetScope::NoTarget);
        assert_eq!(
            domains(&["example.com", "other.org"]).intersect(&domains(&["a.example.com"])),
            domains(&["a.example.com"])
        );
        assert_eq!(
            dates("2024-01-01", "2024-06-30").intersect(&dates("2024-03-01", "2024-12-31")),
            dates("2024-03-01", "2024-06-30")
        );
        assert_eq!(
            dates("2024-01-01", "2024-01-31").intersect(&dates("2024-03-01", "2024-12-31")),
            TargetScope::NoTarget
        );
    }

    #[test]
    fn summaries_are_short_and_readable() {
        assert_eq!(ws("").summary(), "the whole workspace");
        assert_eq!(ws("notes").summary(), "workspace notes/");
        assert_eq!(
            domains(&["example.com"]).summary(),
            "domains example.com (and subdomains)"
        );
        let many: Vec<String> = (0..8).map(|i| format!("d{i}.com")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(domains(&many).summary().contains("+3 more"));
        assert_eq!(
            TargetScope::All {
                scopes: vec![domains(&["a.com"]), dates("2024-01-01", "2024-01-31")]
            }
            .summary(),
            "domains a.com (and subdomains); dates 2024-01-01 to 2024-01-31"
        );
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn arb_path() -> impl Strategy<Value = String> {
            prop::collection::vec(
                prop::sample::select(vec!["a", "b", "notes", "notesx", "..", "", "."]),
                0..4,
            )
            .prop_map(|s| s.join("/"))
        }

        fn arb_host() -> impl Strategy<Value = String> {
            (
                prop::collection::vec(
                    prop::sample::select(vec!["a", "B", "example", "com", "badexample", "1", "2"]),
                    0..4,
                ),
                any::<bool>(),
            )
                .prop_map(|(labels, dot)| {
                    let mut h = labels.join(".");
                    if dot {
                        h.push('.');
                    }
                    h
                })
        }

        fn arb_origin() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["https://a.com", "https://b.com", "http://a.com", ""])
                .prop_map(str::to_owned)
        }

        fn arb_date() -> impl Strategy<Value = String> {
            prop::sample::select(vec![
                "2024-01-01",
                "2024-01-15",
                "2024-02-29",
                "2023-02-29",
                "2024-12-31",
                "2025-06-01",
                "2024-13-01",
                "x",
            ])
            .prop_map(str::to_owned)
        }

        fn arb_leaf_scope() -> impl Strategy<Value = TargetScope> {
            prop_oneof![
                Just(TargetScope::NoTarget),
                arb_path().prop_map(|prefix| TargetScope::Workspace { prefix }),
                prop::collection::btree_set(arb_origin(), 0..3)
                    .prop_map(|origins| TargetScope::Origins { origins }),
                prop::collection::btree_set(arb_host(), 0..3)
                    .prop_map(|domains| TargetScope::Domains { domains }),
                (arb_date(), arb_date()).prop_map(|(from, to)| TargetScope::Dates { from, to }),
            ]
        }

        fn arb_scope() -> impl Strategy<Value = TargetScope> {
            arb_leaf_scope().prop_recursive(2, 8, 3, |inner| {
                prop::collection::vec(inner, 0..3).prop_map(|scopes| TargetScope::All { scopes })
            })
        }

        fn arb_leaf_target() -> impl Strategy<Value = Target> {
            prop_oneof![
                Just(Target::Nothing),
                arb_path().prop_map(|path| Target::WorkspacePath { path }),
                (arb_origin(), arb_host()).prop_map(|(origin, host)| Target::Url { origin, host }),
                arb_date().prop_map(|date| Target::Date { date }),
            ]
        }

        fn arb_target() -> impl Strategy<Value = Target> {
            arb_leaf_target().prop_recursive(2, 6, 3, |inner| {
                prop::collection::vec(inner, 0..3).prop_map(|targets| Target::Many { targets })
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn is_within_is_sound(a in arb_scope(), b in arb_scope(), t in arb_target()) {
                if a.is_within(&b) && a.covers(&t) {
                    prop_assert!(b.covers(&t), "{a:?} within {b:?} but {t:?} escapes");
                }
            }

            #[test]
            fn is_within_is_reflexive(a in arb_scope()) {
                prop_assert!(a.is_within(&a));
            }

            #[test]
            fn intersect_covers_exactly_what_both_cover(
                a in arb_scope(), b in arb_scope(), t in arb_target()
            ) {
                let i = a.intersect(&b);
                prop_assert_eq!(i.covers(&t), a.covers(&t) && b.covers(&t), "{:?}", i);
                prop_assert!(i.is_within(&a) || !i.covers(&t) || a.covers(&t));
            }

            #[test]
            fn intersect_is_within_both_for_same_kinds(a in arb_leaf_scope(), b in arb_leaf_scope()) {
                let i = a.intersect(&b);
                prop_assert!(i.is_within(&a) && i.is_within(&b), "{:?} ∩ {:?} = {:?}", a, b, i);
            }
        }
    }
}
