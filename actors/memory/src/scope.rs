//! Memory scopes and the rule of who may read and write them: a
//! [`MemoryScope`] names where a memory lives (`global`, `workspace:<id>`,
//! `profile:<id>`, `session:<id>`), and [`MemoryScopes`] is the set a run
//! may read and the set it may write (a profile's Memory scopes, S10.1).
//! Every memory tool checks it before it touches storage; a scope outside
//! it is a typed [`ScopeError`], never a silent widening.

use std::collections::BTreeSet;
use std::fmt;

use agent_kernel::SessionId;
use serde::{Deserialize, Serialize};

/// The longest id inside a scope (`workspace:<id>` and the others).
pub const MAX_SCOPE_ID_LEN: usize = 128;

/// Where a memory lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum MemoryScope {
    /// Every run the person allows to read global memory.
    Global,
    /// One workspace (a project of the embedding application).
    Workspace(String),
    /// One Agent Profile.
    Profile(String),
    /// One chat session.
    Session(String),
}

/// What a scope can be: its kind alone, as the model names it, or a full scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScopeKind {
    Global,
    Workspace,
    Profile,
    Session,
}

impl ScopeKind {
    fn parse(s: &str) -> Option<ScopeKind> {
        Some(match s {
            "global" => ScopeKind::Global,
            "workspace" => ScopeKind::Workspace,
            "profile" => ScopeKind::Profile,
            "session" => ScopeKind::Session,
            _ => return None,
        })
    }

    /// The kind's name (`global`, `workspace`, `profile`, `session`).
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeKind::Global => "global",
            ScopeKind::Workspace => "workspace",
            ScopeKind::Profile => "profile",
            ScopeKind::Session => "session",
        }
    }
}

/// A scope could not be read, or is not granted to this run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    #[error(
        "{given:?} is not a memory scope; use global, workspace:<id>, profile:<id> or session:<id> (ids: 1 to {MAX_SCOPE_ID_LEN} characters from A-Z a-z 0-9 . _ : -)"
    )]
    Invalid { given: String },
    #[error(
        "this run may not read memory scope {scope}; the profile's Memory scopes allow reading {allowed}"
    )]
    ReadDenied { scope: String, allowed: String },
    #[error(
        "this run may not write memory scope {scope}; the profile's Memory scopes allow writing {allowed}"
    )]
    WriteDenied { scope: String, allowed: String },
    #[error(
        "memory scope kind {kind} names {count} scopes this run may write ({allowed}); name one in full, for example {kind}:<id>"
    )]
    Ambiguous {
        kind: &'static str,
        count: usize,
        allowed: String,
    },
}

impl ScopeError {
    /// The stable code a tool answers with.
    pub fn code(&self) -> &'static str {
        match self {
            ScopeError::Invalid { .. } | ScopeError::Ambiguous { .. } => "invalid_arguments",
            ScopeError::ReadDenied { .. } | ScopeError::WriteDenied { .. } => "memory_scope_denied",
        }
    }
}

fn valid_scope_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SCOPE_ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

impl MemoryScope {
    /// Read `global`, `workspace:<id>`, `profile:<id>` or `session:<id>`.
    pub fn parse(s: &str) -> Result<MemoryScope, ScopeError> {
        let invalid = || ScopeError::Invalid {
            given: s.chars().take(200).collect(),
        };
        if s == "global" {
            return Ok(MemoryScope::Global);
        }
        let (kind, id) = s.split_once(':').ok_or_else(invalid)?;
        if !valid_scope_id(id) {
            return Err(invalid());
        }
        let id = id.to_owned();
        match ScopeKind::parse(kind) {
            Some(ScopeKind::Workspace) => Ok(MemoryScope::Workspace(id)),
            Some(ScopeKind::Profile) => Ok(MemoryScope::Profile(id)),
            Some(ScopeKind::Session) => Ok(MemoryScope::Session(id)),
            Some(ScopeKind::Global) | None => Err(invalid()),
        }
    }

    /// The scope of one session.
    pub fn session(session: &SessionId) -> MemoryScope {
        MemoryScope::Session(session.as_str().to_owned())
    }

    /// The scope's kind.
    pub fn kind(&self) -> ScopeKind {
        match self {
            MemoryScope::Global => ScopeKind::Global,
            MemoryScope::Workspace(_) => ScopeKind::Workspace,
            MemoryScope::Profile(_) => ScopeKind::Profile,
            MemoryScope::Session(_) => ScopeKind::Session,
        }
    }
}

impl fmt::Display for MemoryScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryScope::Global => f.write_str("global"),
            MemoryScope::Workspace(id) => write!(f, "workspace:{id}"),
            MemoryScope::Profile(id) => write!(f, "profile:{id}"),
            MemoryScope::Session(id) => write!(f, "session:{id}"),
        }
    }
}

impl TryFrom<String> for MemoryScope {
    type Error = ScopeError;
    fn try_from(value: String) -> Result<Self, ScopeError> {
        MemoryScope::parse(&value)
    }
}

impl From<MemoryScope> for String {
    fn from(scope: MemoryScope) -> String {
        scope.to_string()
    }
}

/// Which scopes a run may read and which it may write. The empty value
/// (the default) allows nothing: a run without a grant sees no memory.
/// Writing a scope does not imply reading it; list it in both for both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryScopes {
    pub read: BTreeSet<MemoryScope>,
    pub write: BTreeSet<MemoryScope>,
}

fn list(set: &BTreeSet<MemoryScope>) -> String {
    if set.is_empty() {
        return "nothing".to_owned();
    }
    set.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl MemoryScopes {
    /// No scope at all.
    pub fn none() -> MemoryScopes {
        MemoryScopes::default()
    }

    /// Read and write exactly `scopes`.
    pub fn read_write(scopes: impl IntoIterator<Item = MemoryScope>) -> MemoryScopes {
        let set: BTreeSet<MemoryScope> = scopes.into_iter().collect();
        MemoryScopes {
            read: set.clone(),
            write: set,
        }
    }

    /// True when nothing may be read or written.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.write.is_empty()
    }

    /// Refuse reading `scope` unless it is granted.
    pub fn check_read(&self, scope: &MemoryScope) -> Result<(), ScopeError> {
        if self.read.contains(scope) {
            return Ok(());
        }
        Err(ScopeError::ReadDenied {
            scope: scope.to_string(),
            allowed: list(&self.read),
        })
    }

    /// Refuse writing `scope` unless it is granted.
    pub fn check_write(&self, scope: &MemoryScope) -> Result<(), ScopeError> {
        if self.write.contains(scope) {
            return Ok(());
        }
        Err(ScopeError::WriteDenied {
            scope: scope.to_string(),
            allowed: list(&self.write),
        })
    }

    /// The scope the model means by `given` for a write: a full scope
    /// (`workspace:w1`), `session` for the run's own session, or a bare kind
    /// (`workspace`) when exactly one writable scope has that kind. The
    /// result is checked against the write set.
    pub fn resolve_write(
        &self,
        given: &str,
        session: &SessionId,
    ) -> Result<MemoryScope, ScopeError> {
        let scope = resolve(given, session, &self.write)?;
        self.check_write(&scope)?;
        Ok(scope)
    }

    /// Like [`MemoryScopes::resolve_write`], for reading.
    pub fn resolve_read(
        &self,
        given: &str,
        session: &SessionId,
    ) -> Result<MemoryScope, ScopeError> {
        let scope = resolve(given, session, &self.read)?;
        self.check_read(&scope)?;
        Ok(scope)
    }
}

fn resolve(
    given: &str,
    session: &SessionId,
    granted: &BTreeSet<MemoryScope>,
) -> Result<MemoryScope, ScopeError> {
    match ScopeKind::parse(given) {
        Some(ScopeKind::Global) => Ok(MemoryScope::Global),
        Some(ScopeKind::Session) => Ok(MemoryScope::session(session)),
        Some(kind) => {
            let of_kind: Vec<&MemoryScope> = granted.iter().filter(|s| s.kind() == kind).collect();
            match of_kind.as_slice() {
                [one] => Ok((*one).clone()),
                [] => Err(ScopeError::Invalid {
                    given: format!("{given} (this run has no {} scope)", kind.as_str()),
                }),
                many => Err(ScopeError::Ambiguous {
                    kind: kind.as_str(),
                    count: many.len(),
                    allowed: many
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                }),
            }
        }
        None => MemoryScope::parse(given),
    }
}
