//! Execution-phase read authority as capabilities (S9.4, S9.5): approval
//! mints, with the run's `Authority`, a read capability whose granted scope
//! is the approved plan's domains and one whose granted scope is its date
//! range; a model-supplied [`ScopeFilter`] becomes `Caveat::Scope` caveats
//! on them. Nothing here decides whether a filter is narrower: the
//! capability verifier does, at every read, so a filter that would widen
//! the plan fails verification as a forged capability does, and no
//! parallel check can disagree with it.
//!
//! Minted for `fetch_url` (its name and definition fingerprint), the domain
//! capability is the very token an execution read hands the `fetch_url`
//! actor, whose tool shell verifies it before any network work: the
//! model's caveats are enforced by the tool, not only here
//! (`tests/execution.rs`).
//!
//! Authorisation by scope is not permission to connect: every authorised
//! read still goes through the normal URL policy of `agent-fetch` (the
//! `fetch_url` tool), so an approved plan naming a private address is
//! still refused there (S9.4: plan approval bypasses nothing).
//!
//! Why two tokens: a capability's scope covers one kind of target at a
//! time (a URL, or a date), and a read of a dated source touches both, so
//! the URL is verified against the domain token and the publication date,
//! when the source has one, against the date token. Undated sources are
//! checked by domain only and keep no date in their evidence.

use std::collections::BTreeSet;

use agent_capabilities::{
    Authority, Capability, CapabilityError, Caveat, EffectClass, EffectRequest, EffectSet,
    Fingerprint, Grant, Origin, Target, TargetScope, Uses, Verifier,
};
use serde::{Deserialize, Serialize};

use crate::plan::{DateRange, MAX_DOMAINS, PlanError, ResearchPlan, parse_source, url_host};

/// The tool execution reads with, as the registry knows it: the grant is
/// bound to its name and definition fingerprint (S6.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadTool {
    pub name: String,
    pub fingerprint: Fingerprint,
    pub origin: Origin,
}

/// A filter the model may add during execution: narrower domains and
/// dates. Unknown fields are refused; sizes are bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domains: Option<BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dates: Option<DateRange>,
}

impl ScopeFilter {
    /// Bounds only (how many domains); whether the filter narrows is the
    /// verifier's decision at each read, not this function's.
    pub fn check_bounds(&self) -> Result<(), PlanError> {
        match &self.domains {
            Some(domains) if domains.len() > MAX_DOMAINS => Err(PlanError::TooMany {
                what: "filter domains",
                count: domains.len(),
                max: MAX_DOMAINS,
            }),
            _ => Ok(()),
        }
    }
}

/// A read was not authorised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    #[error(transparent)]
    Url(#[from] PlanError),
    #[error("the read is not authorised: {0}")]
    Capability(#[from] CapabilityError),
}

/// The two execution capabilities of a research run.
#[derive(Debug, Clone)]
pub struct ExecutionScope {
    domains: Capability,
    dates: Capability,
}

/// A read the capabilities allow; it still goes through the URL policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizedRead {
    pub url: String,
    pub origin: String,
    pub host: String,
}

impl ExecutionScope {
    /// Mint the execution capabilities for the approved `plan`: `read_network`
    /// with `tool`, for the run, until `expires_at_ms`. Only the run's
    /// supervisor holds an `Authority`; this is where plan approval turns
    /// into authority, and nowhere else.
    pub fn mint(
        authority: &Authority,
        plan: &ResearchPlan,
        tool: &ReadTool,
        expires_at_ms: u64,
    ) -> ExecutionScope {
        let grant = |scope: TargetScope| Grant {
            tool: tool.name.clone(),
            fingerprint: tool.fingerprint.clone(),
            origin: tool.origin.clone(),
            effects: EffectSet::from([EffectClass::ReadNetwork]),
            scope,
            uses: Uses::ForRun,
            expires_at_ms,
        };
        ExecutionScope {
            domains: authority.mint(grant(plan.domain_scope())),
            dates: authority.mint(grant(plan.date_scope())),
        }
    }

    /// These capabilities with the model's `filter` as caveats. Attenuation
    /// cannot widen: a filter outside the plan makes every later
    /// verification fail.
    pub fn narrow(&self, filter: &ScopeFilter) -> ExecutionScope {
        let mut next = self.clone();
        if let Some(domains) = &filter.domains {
            next.domains = next.domains.attenuate(Caveat::Scope(TargetScope::Domains {
                domains: domains.clone(),
            }));
        }
        if let Some(dates) = &filter.dates {
            next.dates = next.dates.attenuate(Caveat::Scope(dates.scope()));
        }
        next
    }

    /// The domain capability (its wire form goes with a read to the tool).
    pub fn domains(&self) -> &Capability {
        &self.domains
    }

    /// The date capability.
    pub fn dates(&self) -> &Capability {
        &self.dates
    }

    /// Verify a read of `url` (and of a source published on `published`,
    /// when known) against both capabilities with the run's `verifier`.
    pub fn authorize(
        &self,
        verifier: &Verifier,
        run_id: &str,
        tool: &ReadTool,
        url: &str,
        published: Option<&str>,
        now_ms: u64,
    ) -> Result<AuthorizedRead, ScopeError> {
        authorize_wire(
            verifier,
            run_id,
            tool,
            &self.domains.to_wire(),
            &self.dates.to_wire(),
            url,
            published,
            now_ms,
        )
    }
}

/// [`ExecutionScope::authorize`] for capabilities received in wire form
/// (as a tool actor receives them): the wire is read only through the verifier.
#[allow(clippy::too_many_arguments)]
pub fn authorize_wire(
    verifier: &Verifier,
    run_id: &str,
    tool: &ReadTool,
    domains_wire: &str,
    dates_wire: &str,
    url: &str,
    published: Option<&str>,
    now_ms: u64,
) -> Result<AuthorizedRead, ScopeError> {
    let parsed = parse_source(url)?;
    let origin = parsed.origin().ascii_serialization();
    let host = url_host(&parsed);
    let request = |target: Target| EffectRequest {
        run_id: run_id.to_owned(),
        tool: tool.name.clone(),
        fingerprint: tool.fingerprint.clone(),
        effects: EffectSet::from([EffectClass::ReadNetwork]),
        target,
    };
    verifier.verify_wire(
        domains_wire,
        &request(Target::Url {
            origin: origin.clone(),
            host: host.clone(),
        }),
        now_ms,
    )?;
    // Also without a date: a token whose caveats widen is refused whatever
    // it is asked, so a widened date filter never passes silently.
    let date = published.map_or(Target::Nothing, |d| Target::Date { date: d.to_owned() });
    verifier.verify_wire(dates_wire, &request(date), now_ms)?;
    Ok(AuthorizedRead {
        url: parsed.to_string(),
        origin,
        host,
    })
}
