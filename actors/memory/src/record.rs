//! One memory as stored: its scope and id, bounded text, revision, and the
//! provenance of its last save (the person, or which run and tool call,
//! and when), plus how its bytes are read back (a typed error for bytes
//! that are not a memory or are of another layout).

use std::fmt;

use agent_kernel::host::{StorageError, Table};
use agent_kernel::{CallId, RunId};
use serde::{Deserialize, Serialize};

use crate::scope::MemoryScope;

/// The stored layout version of [`MemoryRecord`].
pub const RECORD_FORMAT: u32 = 1;
/// The longest memory text, in bytes of UTF-8.
pub const MAX_TEXT_BYTES: usize = 2048;
/// The longest memory id.
pub const MAX_ID_LEN: usize = 64;
/// Live memories kept per scope; saving one more is refused.
pub const MAX_RECORDS_PER_SCOPE: usize = 1000;

/// Key prefix of live memories in `Table::Meta`: `memory/<scope>/<id>`.
pub const LIVE_PREFIX: &str = "memory/";
/// Key prefix of forgotten memories: `memory-forgotten/<scope>/<id>`.
pub const FORGOTTEN_PREFIX: &str = "memory-forgotten/";
/// The table memories live in.
pub const TABLE: Table = Table::Meta;

/// A memory's id within its scope: 1 to 64 characters from `A-Z a-z 0-9 . _ -`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(try_from = "String", into = "String")]
pub struct MemoryId(String);

/// A memory id was empty, too long or used other characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid memory id {given:?}: use 1 to {MAX_ID_LEN} characters from A-Z a-z 0-9 . _ -")]
pub struct MemoryIdError {
    pub given: String,
}

impl MemoryId {
    pub fn new(value: impl Into<String>) -> Result<MemoryId, MemoryIdError> {
        let value = value.into();
        let ok = !value.is_empty()
            && value.len() <= MAX_ID_LEN
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(MemoryId(value))
        } else {
            Err(MemoryIdError {
                given: value.chars().take(100).collect(),
            })
        }
    }

    /// The id a tool call's new memory gets: derived from the call's
    /// idempotency key, so a retry of the same call names the same memory.
    pub fn for_call(idempotency_key: &str) -> MemoryId {
        let hash = agent_capabilities::sha256_hex(idempotency_key.as_bytes());
        MemoryId(format!("m-{}", &hash[..16]))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for MemoryId {
    type Error = MemoryIdError;
    fn try_from(value: String) -> Result<Self, MemoryIdError> {
        MemoryId::new(value)
    }
}

impl From<MemoryId> for String {
    fn from(id: MemoryId) -> String {
        id.0
    }
}

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "MemoryChange"))]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum ChangedBy {
    /// The person, from the host's memory view.
    Person,
    /// A tool call of a run.
    Tool {
        run: RunId,
        call_id: CallId,
        tool: String,
    },
}

/// When and by whom a memory was forgotten (it can be restored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Forgotten {
    pub by: ChangedBy,
    pub at_ms: u64,
}

/// One memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MemoryRecord {
    /// Layout version ([`RECORD_FORMAT`]).
    pub v: u32,
    /// `global`, `workspace:ID`, `profile:ID` or `session:ID`.
    #[cfg_attr(feature = "ts", ts(type = "string"))]
    pub scope: MemoryScope,
    pub id: MemoryId,
    /// 1 when created; each save adds one, and so does a restore.
    pub revision: u64,
    pub text: String,
    /// SHA-256 of `text` (lowercase hex).
    pub text_hash: String,
    /// Who saved this revision.
    pub saved_by: ChangedBy,
    pub saved_at_ms: u64,
    pub created_at_ms: u64,
    /// Set on a forgotten memory (kept under the forgotten prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forgotten: Option<Forgotten>,
}

impl MemoryRecord {
    /// The key of a live memory.
    pub fn live_key(scope: &MemoryScope, id: &MemoryId) -> String {
        format!("{LIVE_PREFIX}{scope}/{id}")
    }

    /// The key of a forgotten memory.
    pub fn forgotten_key(scope: &MemoryScope, id: &MemoryId) -> String {
        format!("{FORGOTTEN_PREFIX}{scope}/{id}")
    }

    /// The prefix of a scope's live memories.
    pub fn scope_prefix(scope: &MemoryScope) -> String {
        format!("{LIVE_PREFIX}{scope}/")
    }

    /// The prefix of a scope's forgotten memories.
    pub fn forgotten_prefix(scope: &MemoryScope) -> String {
        format!("{FORGOTTEN_PREFIX}{scope}/")
    }

    /// The record as JSON for a tool answer or a host's view.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "scope": self.scope,
            "id": self.id,
            "revision": self.revision,
            "text": self.text,
            "savedBy": self.saved_by,
            "savedAtMs": self.saved_at_ms,
        });
        if let Some(f) = &self.forgotten {
            v["forgottenAtMs"] = serde_json::json!(f.at_ms);
        }
        v
    }
}

/// Decode stored memory bytes: `StorageError::Corrupt` for bytes that are
/// not a memory (or whose key does not match what they say), `Format` for
/// another layout version.
pub fn decode_record(key: &str, bytes: &[u8]) -> Result<MemoryRecord, crate::MemoryError> {
    #[derive(Deserialize)]
    struct Version {
        v: u32,
    }
    let corrupt = |detail: String| {
        crate::MemoryError::Storage(StorageError::Corrupt {
            table: TABLE,
            key: key.to_owned(),
            detail,
        })
    };
    let version: Version = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if version.v != RECORD_FORMAT {
        return Err(crate::MemoryError::Format {
            key: key.to_owned(),
            found: version.v,
        });
    }
    let record: MemoryRecord = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    let expected = if record.forgotten.is_some() {
        MemoryRecord::forgotten_key(&record.scope, &record.id)
    } else {
        MemoryRecord::live_key(&record.scope, &record.id)
    };
    if expected != key {
        return Err(corrupt(format!(
            "the record says it belongs at {expected:?}"
        )));
    }
    if record.text.len() > MAX_TEXT_BYTES
        || record.text_hash != agent_capabilities::sha256_hex(record.text.as_bytes())
    {
        return Err(corrupt(
            "the text is over the limit or does not match its hash".into(),
        ));
    }
    Ok(record)
}
