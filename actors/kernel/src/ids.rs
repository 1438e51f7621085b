//! Identifiers: runs, sessions, tool calls, pending requests, lease owners.
//! Opaque strings, validated so that they are safe as storage keys.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An identifier was empty, too long, or used characters outside `[A-Za-z0-9._:-]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} id {value:?}: use 1 to 128 characters from A-Z a-z 0-9 . _ : -")]
pub struct IdError {
    pub kind: &'static str,
    pub value: String,
}

fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "ts", derive(ts_rs::TS))]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validate and wrap an identifier.
            pub fn new(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                if valid_id(&value) {
                    Ok(Self(value))
                } else {
                    Err(IdError { kind: $kind, value })
                }
            }
            /// The identifier as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(value: String) -> Result<Self, IdError> {
                Self::new(value)
            }
        }
        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// One `AgentRun`.
    RunId, "run"
);
id_type!(
    /// A chat session; leases and workspaces are per session.
    SessionId, "session"
);
id_type!(
    /// One tool call inside a run (from the model, or derived by the host).
    CallId, "call"
);
id_type!(
    /// A pending approval, input or decision request.
    RequestId, "request"
);
id_type!(
    /// A lease owner: a tab, a process, or a simulated tab.
    OwnerId, "owner"
);
