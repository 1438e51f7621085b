//! Target scopes: what a capability may touch, with an explicit subset
//! relation (`covers` a target; `is_within` another scope).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The set of targets a capability may touch. Narrowing is intersection.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetScope {
    /// Touches nothing outside the run itself (pure computation, ask_user).
    NoTarget,
    /// Workspace paths equal to or below `prefix` (segment-wise; "" is the whole workspace).
    Workspace { prefix: String },
    /// Exactly these URL origins (`scheme://host[:port]`, lowercase).
    Origins { origins: BTreeSet<String> },
    /// These registrable domains and their subdomains (lowercase, no trailing dot).
    Domains { domains: BTreeSet<String> },
    /// ISO dates `YYYY-MM-DD`, inclusive at both ends.
    Dates { from: String, to: String },
    /// Every one of the listed scopes at once (for example domains and dates).
    All { scopes: Vec<TargetScope> },
}

/// One concrete thing an invocation touches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// Nothing outside the run.
    Nothing,
    /// A normalised workspace path, relative to the session root.
    WorkspacePath { path: String },
    /// A URL, by its origin (`scheme://host[:port]`) and host.
    Url { origin: String, host: String },
    /// An ISO date `YYYY-MM-DD`.
    Date { date: String },
    /// Several targets at once; covered when each is covered.
    Many { targets: Vec<Target> },
}
