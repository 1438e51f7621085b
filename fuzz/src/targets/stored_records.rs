//! The decoding of stored records: the JSON bytes that the SQLite backend
//! keeps in its `value` column and the IndexedDB backend in its values,
//! read back as typed records (`agent_kernel::host::storage::Record`,
//! decoded with serde_json by `StorageExt`, where a failure is
//! `StorageError::Corrupt`).
//!
//! Properties: any bytes decode to a record or give a typed error, never a
//! panic; a record decoded from the input is a fixed point of the codec:
//! decode(encode(x)) == x, and encoding it again gives the same bytes.
//!
//! Input: the first byte picks the record type; the rest is the stored value.

use agent_kernel::host::storage::LeaseRecord;
use agent_kernel::journal::JournalRecord;
use agent_kernel::run::{Activity, AgentRun, Checkpoint, Evidence, PendingRequest};
use agent_supervisor::conversation::SessionConversation;
use agent_supervisor::store::RunMeta;
use agent_workspace::manifest::RevisionCounter;
use agent_workspace::{Artifact, FileEntry, TrashEntry};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Decode `bytes` as `R` and check the codec on it; false when the bytes
/// are not an `R` (a typed serde error, which the backends report as
/// `StorageError::Corrupt`).
pub fn round_trip<R>(bytes: &[u8]) -> bool
where
    R: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let Ok(record) = serde_json::from_slice::<R>(bytes) else {
        return false;
    };
    let encoded = serde_json::to_vec(&record)
        .unwrap_or_else(|e| panic!("a decoded record does not encode: {e}: {record:?}"));
    let again: R = serde_json::from_slice(&encoded).unwrap_or_else(|e| {
        panic!(
            "an encoded record does not decode: {e}: {}",
            String::from_utf8_lossy(&encoded)
        )
    });
    assert_eq!(again, record, "decode(encode(x)) != x");
    let twice = serde_json::to_vec(&again).unwrap_or_default();
    assert_eq!(twice, encoded, "the encoding of one record is not stable");
    true
}

/// Decodes and checks one record type ([`round_trip`]).
pub type RoundTrip = fn(&[u8]) -> bool;

/// The record types, in the order the first input byte picks them.
pub const RECORDS: &[(&str, RoundTrip)] = &[
    ("agent_run", round_trip::<AgentRun>),
    ("journal", round_trip::<JournalRecord>),
    ("activity", round_trip::<Activity>),
    ("evidence", round_trip::<Evidence>),
    ("pending", round_trip::<PendingRequest>),
    ("checkpoint", round_trip::<Checkpoint>),
    ("lease", round_trip::<LeaseRecord>),
    ("file_entry", round_trip::<FileEntry>),
    ("trash_entry", round_trip::<TrashEntry>),
    ("revision_counter", round_trip::<RevisionCounter>),
    ("artifact", round_trip::<Artifact>),
    ("run_meta", round_trip::<RunMeta>),
    ("session_conversation", round_trip::<SessionConversation>),
];

pub fn check(data: &[u8]) {
    let Some((&which, value)) = data.split_first() else {
        return;
    };
    let (_, decode) = RECORDS[usize::from(which) % RECORDS.len()];
    decode(value);
}

/// Whether `data` (selector byte and value) decodes as the record it picks.
pub fn decodes(data: &[u8]) -> bool {
    let Some((&which, value)) = data.split_first() else {
        return false;
    };
    (RECORDS[usize::from(which) % RECORDS.len()].1)(value)
}
