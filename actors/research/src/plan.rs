//! The research plan (S9.4): questions, search queries, candidate sources,
//! and the domain and date filters the person approves; its bounds, and the
//! rule that an edit by the person may only narrow it (S9.4, S9.5).
//!
//! The domain and date filters are compared with the capability crate's own
//! scope relation ([`TargetScope::is_within`]), the same relation the
//! verifier applies to caveats, so "narrower" means one thing everywhere.

use std::collections::BTreeSet;

use agent_capabilities::TargetScope;
use serde::{Deserialize, Serialize};

/// At most this many questions, queries, candidate sources or domains.
pub const MAX_QUESTIONS: usize = 12;
pub const MAX_QUERIES: usize = 12;
pub const MAX_SOURCES: usize = 40;
pub const MAX_DOMAINS: usize = 40;
/// The longest question or query, in characters.
pub const MAX_TEXT_CHARS: usize = 500;
/// The longest candidate source URL, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// The longest domain name, in bytes (DNS's limit).
pub const MAX_DOMAIN_BYTES: usize = 253;

/// An inclusive range of ISO dates (`YYYY-MM-DD`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct DateRange {
    pub from: String,
    pub to: String,
}

impl DateRange {
    /// Every date a capability can name: the range of a plan without a date filter.
    pub fn unbounded() -> DateRange {
        DateRange {
            from: "0001-01-01".into(),
            to: "9999-12-31".into(),
        }
    }

    /// The range as a capability scope.
    pub fn scope(&self) -> TargetScope {
        TargetScope::Dates {
            from: self.from.clone(),
            to: self.to.clone(),
        }
    }
}

/// A plan as the planning run proposes it and the person approves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct ResearchPlan {
    /// What the report must answer.
    pub questions: Vec<String>,
    /// Search queries execution may send to the search backend.
    pub queries: Vec<String>,
    /// Candidate source URLs (absolute http or https).
    pub sources: Vec<String>,
    /// Registrable domains (and their subdomains) execution may read; every
    /// candidate source must lie within them.
    pub domains: BTreeSet<String>,
    /// Publication dates execution may use, when the plan restricts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dates: Option<DateRange>,
    /// What planning could not do, said to the person (for example: no
    /// search backend is configured, so the plan uses only the topic and
    /// the URLs given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A plan was refused. Each variant says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error("the plan has no questions; give at least one question the report must answer")]
    NoQuestions,
    #[error("the plan has {count} {what}, more than the {max} allowed; keep the most useful ones")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("a {what} is empty or longer than {max} characters; shorten it")]
    BadText { what: &'static str, max: usize },
    #[error("candidate source {url:?} is not an absolute http(s) URL without user info ({why})")]
    BadSource { url: String, why: String },
    #[error("domain {domain:?} is not a host name (lowercase labels, no scheme, no port)")]
    BadDomain { domain: String },
    #[error("date range {from:?} to {to:?} is not two valid YYYY-MM-DD dates, oldest first")]
    BadDates { from: String, to: String },
    #[error(
        "candidate source {url:?} is outside the plan's domains; add its domain or drop the source"
    )]
    SourceOutsideDomains { url: String },
    #[error("the edit widens the plan ({what}); an edit may only remove or narrow, never add")]
    Widens { what: String },
}

fn check_texts(what: &'static str, items: &[String], max: usize) -> Result<(), PlanError> {
    if items.len() > max {
        return Err(PlanError::TooMany {
            what,
            count: items.len(),
            max,
        });
    }
    for item in items {
        let chars = item.chars().count();
        if item.trim().is_empty() || chars > MAX_TEXT_CHARS {
            return Err(PlanError::BadText {
                what,
                max: MAX_TEXT_CHARS,
            });
        }
    }
    Ok(())
}

/// Parse a candidate source: absolute http(s), no user info, a host. This
/// is a shape check only; every read still goes through the URL policy.
pub fn parse_source(url: &str) -> Result<url::Url, PlanError> {
    let bad = |why: &str| PlanError::BadSource {
        url: url.chars().take(200).collect(),
        why: why.to_owned(),
    };
    if url.len() > MAX_URL_BYTES {
        return Err(bad("too long"));
    }
    let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" {
        return Err(bad("only http and https"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("user info is refused"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    Ok(parsed)
}

/// The host of a parsed URL as the capability scope compares it (IPv6
/// without brackets).
pub fn url_host(url: &url::Url) -> String {
    match url.host() {
        Some(url::Host::Ipv6(v6)) => v6.to_string(),
        Some(host) => host.to_string(),
        None => String::new(),
    }
}

fn valid_domain(domain: &str) -> bool {
    !domain.is_empty()
        && domain.len() <= MAX_DOMAIN_BYTES
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

impl ResearchPlan {
    /// The domain filter as a capability scope.
    pub fn domain_scope(&self) -> TargetScope {
        TargetScope::Domains {
            domains: self.domains.clone(),
        }
    }

    /// The date filter as a capability scope (every date when there is none).
    pub fn date_scope(&self) -> TargetScope {
        self.dates
            .clone()
            .unwrap_or_else(DateRange::unbounded)
            .scope()
    }

    /// Check the plan's bounds and consistency: counts and sizes, source
    /// URLs, domain names, the date range, and every source within the domains.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.questions.is_empty() {
            return Err(PlanError::NoQuestions);
        }
        check_texts("question", &self.questions, MAX_QUESTIONS)?;
        check_texts("query", &self.queries, MAX_QUERIES)?;
        check_texts("note", &self.notes, MAX_QUESTIONS)?;
        if self.sources.len() > MAX_SOURCES {
            return Err(PlanError::TooMany {
                what: "sources",
                count: self.sources.len(),
                max: MAX_SOURCES,
            });
        }
        if self.domains.len() > MAX_DOMAINS {
            return Err(PlanError::TooMany {
                what: "domains",
                count: self.domains.len(),
                max: MAX_DOMAINS,
            });
        }
        if let Some(domain) = self.domains.iter().find(|d| !valid_domain(d)) {
            return Err(PlanError::BadDomain {
                domain: domain.chars().take(MAX_DOMAIN_BYTES).collect(),
            });
        }
        if let Some(dates) = &self.dates {
            let scope = dates.scope();
            let probe = agent_capabilities::Target::Date {
                date: dates.from.clone(),
            };
            // A valid, ordered range covers its own first day.
            if !scope.covers(&probe) {
                return Err(PlanError::BadDates {
                    from: dates.from.chars().take(20).collect(),
                    to: dates.to.chars().take(20).collect(),
                });
            }
        }
        let domains = self.domain_scope();
        for source in &self.sources {
            let url = parse_source(source)?;
            let target = agent_capabilities::Target::Url {
                origin: url.origin().ascii_serialization(),
                host: url_host(&url),
            };
            if !domains.covers(&target) {
                return Err(PlanError::SourceOutsideDomains {
                    url: source.clone(),
                });
            }
        }
        Ok(())
    }

    /// Check that `edited` only narrows `self` (S9.4: the person edits,
    /// narrowing only): its questions, queries and sources are among the
    /// proposed ones, its domains and dates lie within the proposed scopes,
    /// and it is itself a valid plan. Notes may change freely.
    pub fn check_narrowing(&self, edited: &ResearchPlan) -> Result<(), PlanError> {
        edited.validate()?;
        let subset = |what: &str, new: &[String], old: &[String]| match new
            .iter()
            .find(|item| !old.contains(item))
        {
            Some(added) => Err(PlanError::Widens {
                what: format!("{what} {added:?} was not proposed"),
            }),
            None => Ok(()),
        };
        subset("question", &edited.questions, &self.questions)?;
        subset("query", &edited.queries, &self.queries)?;
        subset("source", &edited.sources, &self.sources)?;
        if !edited.domain_scope().is_within(&self.domain_scope()) {
            return Err(PlanError::Widens {
                what: format!(
                    "{} is not within {}",
                    edited.domain_scope().summary(),
                    self.domain_scope().summary()
                ),
            });
        }
        if !edited.date_scope().is_within(&self.date_scope()) {
            return Err(PlanError::Widens {
                what: format!(
                    "{} is not within {}",
                    edited.date_scope().summary(),
                    self.date_scope().summary()
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn plan() -> ResearchPlan {
        ResearchPlan {
            questions: vec!["What changed in 2024?".into(), "Who uses it?".into()],
            queries: vec!["rust wasm actors 2024".into()],
            sources: vec![
                "https://docs.example.org/a".into(),
                "https://blog.example.com/b".into(),
            ],
            domains: ["example.org".to_string(), "example.com".to_string()].into(),
            dates: Some(DateRange {
                from: "2024-01-01".into(),
                to: "2024-12-31".into(),
            }),
            notes: vec![],
        }
    }

    #[test]
    fn a_valid_plan_passes() {
        assert_eq!(plan().validate(), Ok(()));
    }

    #[test]
    fn bounds_and_shapes_are_typed_errors() {
        let mut p = plan();
        p.questions.clear();
        assert_eq!(p.validate(), Err(PlanError::NoQuestions));

        let mut p = plan();
        p.queries = vec!["q".into(); MAX_QUERIES + 1];
        assert!(matches!(
            p.validate(),
            Err(PlanError::TooMany { what: "query", .. })
        ));

        let mut p = plan();
        p.questions.push("x".repeat(MAX_TEXT_CHARS + 1));
        assert!(matches!(p.validate(), Err(PlanError::BadText { .. })));

        let mut p = plan();
        p.sources.push("ftp://example.org/x".into());
        assert!(matches!(p.validate(), Err(PlanError::BadSource { .. })));

        let mut p = plan();
        p.sources.push("https://user:pw@example.org/x".into());
        assert!(matches!(p.validate(), Err(PlanError::BadSource { .. })));

        let mut p = plan();
        p.domains.insert("https://example.net".into());
        assert!(matches!(p.validate(), Err(PlanError::BadDomain { .. })));

        let mut p = plan();
        p.dates = Some(DateRange {
            from: "2024-12-31".into(),
            to: "2024-01-01".into(),
        });
        assert!(matches!(p.validate(), Err(PlanError::BadDates { .. })));

        let mut p = plan();
        p.sources.push("https://elsewhere.net/x".into());
        assert!(matches!(
            p.validate(),
            Err(PlanError::SourceOutsideDomains { .. })
        ));
    }

    #[test]
    fn an_edit_may_narrow() {
        let proposed = plan();
        let mut edited = plan();
        edited.questions.pop();
        edited.sources.retain(|s| s.contains("example.org"));
        edited.domains = ["docs.example.org".to_string()].into();
        edited.dates = Some(DateRange {
            from: "2024-03-01".into(),
            to: "2024-06-30".into(),
        });
        assert_eq!(proposed.check_narrowing(&edited), Ok(()));
    }

    #[test]
    fn an_edit_may_not_widen() {
        let proposed = plan();
        let widen = |f: &dyn Fn(&mut ResearchPlan)| {
            let mut edited = plan();
            f(&mut edited);
            proposed.check_narrowing(&edited)
        };
        assert!(matches!(
            widen(&|p| p.questions.push("A new question?".into())),
            Err(PlanError::Widens { .. })
        ));
        assert!(matches!(
            widen(&|p| {
                p.domains.insert("example.net".into());
                p.sources.push("https://example.net/x".into());
            }),
            Err(PlanError::Widens { .. })
        ));
        assert!(matches!(
            widen(&|p| p.dates = None),
            Err(PlanError::Widens { .. })
        ));
        assert!(matches!(
            widen(&|p| p.dates = Some(DateRange {
                from: "2023-01-01".into(),
                to: "2024-12-31".into()
            })),
            Err(PlanError::Widens { .. })
        ));
    }
}
