//! The identifiers of Deep Research: a task, the chat message that refers
//! to it, and a piece of evidence, each validated by the kernel's id rule.

use serde::{Deserialize, Serialize};

/// An identifier was empty, too long, or used characters outside `[A-Za-z0-9._:-]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} id {value:?}: use 1 to 128 characters from A-Z a-z 0-9 . _ : -")]
pub struct IdError {
    pub kind: &'static str,
    pub value: String,
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "ts", derive(ts_rs::TS))]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validate and wrap an identifier (the kernel's id rule).
            pub fn new(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                let ok = !value.is_empty()
                    && value.len() <= 128
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
                if ok {
                    Ok(Self(value))
                } else {
                    Err(IdError { kind: $kind, value: value.chars().take(160).collect() })
                }
            }
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
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// One Deep Research task.
    TaskId, "research task"
);
id_type!(
    /// The chat message that refers to the task, supplied by the host out
    /// of band (S9.5), never by the model.
    MessageId, "message"
);
id_type!(
    /// One piece of evidence: a source read during execution (S9.6).
    EvidenceId, "evidence"
);
