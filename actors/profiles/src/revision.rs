//! Revisions (S10.3): the stored records (a head per profile, one record per
//! revision, the runs that used a revision), their content hash, how they
//! decode (a typed error for bad bytes), and the field-by-field diff.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ProfileError;
use crate::profile::{AgentProfileV2, ProfileId};

/// The layout version of every record this crate stores.
pub const RECORD_FORMAT: u32 = 1;

/// Key prefix of profile heads in `Table::Meta`: `profile-head/<id>`.
pub const HEAD_PREFIX: &str = "profile-head/";
/// Key prefix of revisions: `profile-rev/<id>/<revision, 20 digits>`.
pub const REV_PREFIX: &str = "profile-rev/";
/// Key prefix of run-use records: `profile-run/<id>/<run>`.
pub const RUN_PREFIX: &str = "profile-run/";
/// Key prefix of legacy assistants: `assistant/<id>`.
pub const LEGACY_PREFIX: &str = "assistant/";

pub(crate) fn head_key(id: &ProfileId) -> String {
    format!("{HEAD_PREFIX}{id}")
}

pub(crate) fn rev_key(id: &ProfileId, revision: u64) -> String {
    format!("{REV_PREFIX}{id}/{revision:020}")
}

pub(crate) fn run_key(id: &ProfileId, run: &str) -> String {
    format!("{RUN_PREFIX}{id}/{run}")
}

/// Where a fork came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct ForkOrigin {
    pub id: ProfileId,
    pub revision: u64,
    pub hash: String,
}

/// A profile's head: its latest revision and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileHead {
    pub v: u32,
    pub id: ProfileId,
    pub latest: u64,
    pub created_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
}

/// Why a revision exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RevisionCause {
    /// The person saved it.
    Saved,
    /// A copy of an older revision (rollback).
    RolledBack { to: u64 },
    /// The first revision of a fork.
    Forked { from: ForkOrigin },
    /// Imported from a shareable export, narrowed to the host's ceiling.
    Imported,
    /// Migrated from a legacy assistant record, whose bytes hash to `legacy_hash`.
    Migrated { legacy_hash: String },
}

/// One stored revision of a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ProfileRevision"))]
#[serde(deny_unknown_fields)]
pub struct Revision {
    pub v: u32,
    pub revision: u64,
    /// SHA-256 of the profile's canonical JSON (RFC 8785).
    pub hash: String,
    pub saved_at_ms: u64,
    pub cause: RevisionCause,
    // The profile is also what a page writes (`saveProfile`), where every
    // field with a default may be left out: its TypeScript is written by
    // hand (host-browser/src/api/types.d.ts).
    #[cfg_attr(feature = "ts", ts(type = "AgentProfileV2"))]
    pub profile: AgentProfileV2,
}

/// A run that used a profile revision: the profile's run history, kept
/// locally and never exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ProfileRunUse"))]
#[serde(deny_unknown_fields)]
pub struct RunUse {
    pub v: u32,
    pub run: String,
    pub revision: u64,
    pub at_ms: u64,
}

/// SHA-256 (hex) of a profile's canonical JSON: equal profiles, equal hash.
pub fn content_hash(profile: &AgentProfileV2) -> Result<String, ProfileError> {
    let bytes =
        agent_capabilities::canonical_bytes(profile).map_err(|e| ProfileError::Invalid {
            field: "profile",
            why: format!("has no canonical JSON form: {e}"),
        })?;
    Ok(agent_capabilities::sha256_hex(&bytes))
}

/// Decode a stored record: a typed error for bytes that are not JSON of
/// this record (`Corrupt`) or of another layout version (`Format`).
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    key: &str,
    bytes: &[u8],
) -> Result<T, ProfileError> {
    #[derive(Deserialize)]
    struct Version {
        v: u32,
    }
    let corrupt = |detail: String| ProfileError::Corrupt {
        key: key.to_owned(),
        detail,
    };
    let version: Version = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if version.v != RECORD_FORMAT {
        return Err(ProfileError::Format {
            key: key.to_owned(),
            found: version.v,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ProfileError> {
    serde_json::to_vec(value).map_err(|e| {
        ProfileError::Storage(agent_kernel::host::StorageError::Encode {
            table: agent_kernel::host::Table::Meta,
            detail: e.to_string(),
        })
    })
}

/// One field that differs between two revisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FieldChange {
    /// Dotted path (`model.model`, `budget.max_tool_calls`, `tools`).
    pub path: String,
    /// `null` where the field was absent.
    pub before: Value,
    pub after: Value,
}

/// Credential handle names are shown in a diff as changed, never by value.
const REDACTED: &str = "<redacted>";

/// The fields that differ between `a` and `b`, in path order. Objects are
/// compared field by field; lists and sets as a whole. Credential handles
/// appear by purpose with their names redacted.
pub fn diff(a: &AgentProfileV2, b: &AgentProfileV2) -> Vec<FieldChange> {
    let va = serde_json::to_value(a).unwrap_or(Value::Null);
    let vb = serde_json::to_value(b).unwrap_or(Value::Null);
    let mut out = Vec::new();
    walk("", &va, &vb, 0, &mut out);
    for change in &mut out {
        if change.path == "credentials" || change.path.starts_with("credentials.") {
            for v in [&mut change.before, &mut change.after] {
                if !v.is_null() {
                    *v = Value::String(REDACTED.to_owned());
                }
            }
        }
    }
    out
}

/// The profile's own shape is at most four objects deep; the bound keeps
/// the walk finite whatever it is given.
const MAX_DIFF_DEPTH: usize = 8;

fn walk(path: &str, a: &Value, b: &Value, depth: usize, out: &mut Vec<FieldChange>) {
    if a == b {
        return;
    }
    let empty = serde_json::Map::new();
    let as_object = Value::as_object;
    // An absent section (`null`) against an object is compared as an empty object.
    let objects = match (as_object(a), as_object(b), a.is_null(), b.is_null()) {
        (Some(oa), Some(ob), _, _) => Some((oa, ob)),
        (Some(oa), None, _, true) => Some((oa, &empty)),
        (None, Some(ob), true, _) => Some((&empty, ob)),
        _ => None,
    };
    match objects {
        Some((oa, ob)) if depth < MAX_DIFF_DEPTH => {
            let keys: std::collections::BTreeSet<&String> = oa.keys().chain(ob.keys()).collect();
            for key in keys {
                let sub = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                let null = Value::Null;
                walk(
                    &sub,
                    oa.get(key).unwrap_or(&null),
                    ob.get(key).unwrap_or(&null),
                    depth + 1,
                    out,
                );
            }
        }
        _ => out.push(FieldChange {
            path: path.to_owned(),
            before: a.clone(),
            after: b.clone(),
        }),
    }
}
