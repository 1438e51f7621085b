//! Durable memories over the host's storage (`Table::Meta`): save, edit,
//! forget (kept, restorable), restore, purge, list and search. Every change
//! is one atomic batch with a compare-and-set on the stored bytes it
//! replaces (an expected revision that is stale fails and returns the
//! latest record), fenced by the writer's session lease when it has one.

use std::collections::BTreeSet;
use std::sync::Arc;

use agent_capabilities::EffectClass;
use agent_kernel::host::{Batch, Clock, Fence, Storage, StorageError};
use agent_kernel::protocol::EffectReceipt;
use serde::{Deserialize, Serialize};

use crate::record::{
    ChangedBy, Forgotten, MAX_RECORDS_PER_SCOPE, MAX_TEXT_BYTES, MemoryId, MemoryRecord,
    RECORD_FORMAT, TABLE, decode_record,
};
use crate::scope::MemoryScope;

/// Most results one search returns.
pub const MAX_SEARCH_RESULTS: usize = 20;
/// The longest search query, in bytes.
pub const MAX_QUERY_BYTES: usize = 512;
/// Most distinct terms of a query that count.
pub const MAX_QUERY_TERMS: usize = 16;

/// A memory operation failed. Every variant says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    #[error("no memory {id} in scope {scope}")]
    NotFound { scope: MemoryScope, id: MemoryId },
    #[error("no forgotten memory {id} in scope {scope} to restore")]
    NotForgotten { scope: MemoryScope, id: MemoryId },
    #[error(
        "memory {} already exists in scope {} (revision {}); pass its revision to replace it",
        latest.id, latest.scope, latest.revision
    )]
    Exists { latest: Box<MemoryRecord> },
    #[error(
        "memory {} is at revision {}, not the expected {expected}; read it again and retry with the latest revision",
        latest.id, latest.revision
    )]
    StaleRevision {
        expected: u64,
        latest: Box<MemoryRecord>,
    },
    #[error("a memory holds at most {MAX_TEXT_BYTES} bytes of text; this one has {bytes}")]
    TooLong { bytes: usize },
    #[error("a memory needs some text")]
    Empty,
    #[error(
        "scope {scope} already holds {MAX_RECORDS_PER_SCOPE} memories; forget some before saving more"
    )]
    ScopeFull { scope: MemoryScope },
    #[error("the search query is empty or longer than {MAX_QUERY_BYTES} bytes")]
    BadQuery,
    #[error(
        "stored memory at {key:?} has layout version {found}, not {RECORD_FORMAT}; it was left untouched"
    )]
    Format { key: String, found: u32 },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl MemoryError {
    /// The stable code a tool answers with.
    pub fn code(&self) -> &'static str {
        match self {
            MemoryError::NotFound { .. } | MemoryError::NotForgotten { .. } => "memory_not_found",
            MemoryError::Exists { .. } => "memory_exists",
            MemoryError::StaleRevision { .. } => "stale_revision",
            MemoryError::TooLong { .. } | MemoryError::Empty | MemoryError::BadQuery => {
                "invalid_arguments"
            }
            MemoryError::ScopeFull { .. } => "memory_scope_full",
            MemoryError::Format { .. } => "memory_corrupt",
            MemoryError::Storage(StorageError::Corrupt { .. }) => "memory_corrupt",
            MemoryError::Storage(StorageError::StaleEpoch { .. }) => "lease_lost",
            MemoryError::Storage(_) => "storage_error",
        }
    }

    /// The latest stored record, for a conflict.
    pub fn latest(&self) -> Option<&MemoryRecord> {
        match self {
            MemoryError::Exists { latest } | MemoryError::StaleRevision { latest, .. } => {
                Some(latest)
            }
            _ => None,
        }
    }
}

/// What a save expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A new memory: the id must be free.
    New,
    /// Replace the memory at exactly this revision.
    Revision(u64),
}

/// What a change did, without the text (S2.2: receipts hold no content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryReceipt {
    /// `save`, `forget`, `restore` or `purge`.
    pub operation: String,
    pub scope: MemoryScope,
    pub id: MemoryId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_revision: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_revision: Option<u64>,
    /// SHA-256 of the text the change left (or forgot).
    pub text_hash: String,
}

impl MemoryReceipt {
    /// The receipt in a tool result envelope: a recoverable local write.
    pub fn to_effect_receipt(&self) -> EffectReceipt {
        EffectReceipt {
            effect: EffectClass::WriteLocal,
            target: format!("memory {}/{}", self.scope, self.id),
            detail: serde_json::to_value(self).unwrap_or_default(),
        }
    }
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    pub record: MemoryRecord,
    pub score: u32,
}

/// Memories of every scope, over the host's storage.
#[derive(Clone)]
pub struct MemoryStore {
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

fn encode(record: &MemoryRecord) -> Result<Vec<u8>, MemoryError> {
    serde_json::to_vec(record).map_err(|e| {
        MemoryError::Storage(StorageError::Encode {
            table: TABLE,
            detail: e.to_string(),
        })
    })
}

fn check_text(text: &str) -> Result<(), MemoryError> {
    if text.trim().is_empty() {
        return Err(MemoryError::Empty);
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(MemoryError::TooLong { bytes: text.len() });
    }
    Ok(())
}

fn batch(fence: Option<&Fence>) -> Batch {
    match fence {
        Some(f) => Batch::new().fenced(f.clone()),
        None => Batch::new(),
    }
}

impl MemoryStore {
    pub fn new(storage: Arc<dyn Storage>, clock: Arc<dyn Clock>) -> MemoryStore {
        MemoryStore { storage, clock }
    }

    async fn load(&self, key: &str) -> Result<Option<(MemoryRecord, Vec<u8>)>, MemoryError> {
        match self.storage.get(TABLE, key).await? {
            Some(bytes) => Ok(Some((decode_record(key, &bytes)?, bytes))),
            None => Ok(None),
        }
    }

    /// The live memory `id` of `scope`, if any.
    pub async fn get(
        &self,
        scope: &MemoryScope,
        id: &MemoryId,
    ) -> Result<Option<MemoryRecord>, MemoryError> {
        Ok(self
            .load(&MemoryRecord::live_key(scope, id))
            .await?
            .map(|(r, _)| r))
    }

    /// The forgotten memory `id` of `scope`, if any.
    pub async fn get_forgotten(
        &self,
        scope: &MemoryScope,
        id: &MemoryId,
    ) -> Result<Option<MemoryRecord>, MemoryError> {
        Ok(self
            .load(&MemoryRecord::forgotten_key(scope, id))
            .await?
            .map(|(r, _)| r))
    }

    /// Every live memory of `scope`, by id. A record that does not decode
    /// fails the listing with a typed error naming its key.
    pub async fn list(&self, scope: &MemoryScope) -> Result<Vec<MemoryRecord>, MemoryError> {
        self.scan(&MemoryRecord::scope_prefix(scope)).await
    }

    /// Every forgotten memory of `scope`, by id.
    pub async fn list_forgotten(
        &self,
        scope: &MemoryScope,
    ) -> Result<Vec<MemoryRecord>, MemoryError> {
        self.scan(&MemoryRecord::forgotten_prefix(scope)).await
    }

    async fn scan(&self, prefix: &str) -> Result<Vec<MemoryRecord>, MemoryError> {
        self.storage
            .scan_prefix(TABLE, prefix)
            .await?
            .iter()
            .map(|(key, bytes)| decode_record(key, bytes))
            .collect()
    }

    /// Save `text` as memory `id` of `scope`: a new one ([`Expect::New`])
    /// or a new revision of the one at the expected revision. One batch,
    /// fenced by `fence` when given, with a compare-and-set on what it
    /// replaces; a conflict returns the latest record.
    pub async fn save(
        &self,
        fence: Option<&Fence>,
        scope: &MemoryScope,
        id: &MemoryId,
        text: &str,
        by: ChangedBy,
        expect: Expect,
    ) -> Result<(MemoryRecord, MemoryReceipt), MemoryError> {
        check_text(text)?;
        let key = MemoryRecord::live_key(scope, id);
        let now = self.clock.wall_ms();
        let current = self.load(&key).await?;
        let (record, batch, old_revision) = match (expect, current) {
            (Expect::New, Some((latest, _))) => {
                return Err(MemoryError::Exists {
                    latest: Box::new(latest),
                });
            }
            (Expect::New, None) => {
                if self.list(scope).await?.len() >= MAX_RECORDS_PER_SCOPE {
                    return Err(MemoryError::ScopeFull {
                        scope: scope.clone(),
                    });
                }
                let record = MemoryRecord {
                    v: RECORD_FORMAT,
                    scope: scope.clone(),
                    id: id.clone(),
                    revision: 1,
                    text: text.to_owned(),
                    text_hash: agent_capabilities::sha256_hex(text.as_bytes()),
                    saved_by: by,
                    saved_at_ms: now,
                    created_at_ms: now,
                    forgotten: None,
                };
                // A forgotten memory of the same id stays forgotten (and
                // restorable only once this one is forgotten too).
                (record, batch(fence).expect_absent(TABLE, key.clone()), None)
            }
            (Expect::Revision(_), None) => {
                return Err(MemoryError::NotFound {
                    scope: scope.clone(),
                    id: id.clone(),
                });
            }
            (Expect::Revision(expected), Some((latest, old))) => {
                if latest.revision != expected {
                    return Err(MemoryError::StaleRevision {
                        expected,
                        latest: Box::new(latest),
                    });
                }
                let record = MemoryRecord {
                    revision: latest.revision + 1,
                    text: text.to_owned(),
                    text_hash: agent_capabilities::sha256_hex(text.as_bytes()),
                    saved_by: by,
                    saved_at_ms: now,
                    ..latest.clone()
                };
                (
                    record,
                    batch(fence).expect_value(TABLE, key.clone(), old),
                    Some(latest.revision),
                )
            }
        };
        let batch = batch.put(TABLE, key, encode(&record)?);
        self.commit(batch, scope, id).await?;
        let receipt = MemoryReceipt {
            operation: "save".into(),
            scope: scope.clone(),
            id: id.clone(),
            old_revision,
            new_revision: Some(record.revision),
            text_hash: record.text_hash.clone(),
        };
        Ok((record, receipt))
    }

    /// A conflict found only inside the batch (another writer between our
    /// read and our commit) answers with the latest record too.
    async fn commit(
        &self,
        batch: Batch,
        scope: &MemoryScope,
        id: &MemoryId,
    ) -> Result<(), MemoryError> {
        match self.storage.commit(batch).await {
            Ok(()) => Ok(()),
            Err(StorageError::ConditionFailed { .. }) => match self.get(scope, id).await? {
                Some(latest) => Err(MemoryError::StaleRevision {
                    expected: latest.revision.saturating_sub(1),
                    latest: Box::new(latest),
                }),
                None => Err(MemoryError::NotFound {
                    scope: scope.clone(),
                    id: id.clone(),
                }),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// The person edits a memory they can see at `expected_revision`.
    pub async fn edit(
        &self,
        scope: &MemoryScope,
        id: &MemoryId,
        text: &str,
        expected_revision: u64,
    ) -> Result<(MemoryRecord, MemoryReceipt), MemoryError> {
        self.save(
            None,
            scope,
            id,
            text,
            ChangedBy::Person,
            Expect::Revision(expected_revision),
        )
        .await
    }

    /// Forget a live memory: it moves, with its revision, to the forgotten
    /// records (replacing an older forgotten copy of the same id), from
    /// which [`MemoryStore::restore`] brings it back. `expected_revision`,
    /// when given, must be the live revision.
    pub async fn forget(
        &self,
        fence: Option<&Fence>,
        scope: &MemoryScope,
        id: &MemoryId,
        expected_revision: Option<u64>,
        by: ChangedBy,
    ) -> Result<(MemoryRecord, MemoryReceipt), MemoryError> {
        let key = MemoryRecord::live_key(scope, id);
        let Some((latest, old)) = self.load(&key).await? else {
            return Err(MemoryError::NotFound {
                scope: scope.clone(),
                id: id.clone(),
            });
        };
        if let Some(expected) = expected_revision
            && expected != latest.revision
        {
            return Err(MemoryError::StaleRevision {
                expected,
                latest: Box::new(latest),
            });
        }
        let forgotten = MemoryRecord {
            forgotten: Some(Forgotten {
                by,
                at_ms: self.clock.wall_ms(),
            }),
            ..latest.clone()
        };
        let batch = batch(fence)
            .expect_value(TABLE, key.clone(), old)
            .delete(TABLE, key)
            .put(
                TABLE,
                MemoryRecord::forgotten_key(scope, id),
                encode(&forgotten)?,
            );
        self.commit(batch, scope, id).await?;
        let receipt = MemoryReceipt {
            operation: "forget".into(),
            scope: scope.clone(),
            id: id.clone(),
            old_revision: Some(latest.revision),
            new_revision: None,
            text_hash: latest.text_hash.clone(),
        };
        Ok((forgotten, receipt))
    }

    /// The person deletes a memory: it is forgotten, restorable until purged.
    pub async fn delete(
        &self,
        scope: &MemoryScope,
        id: &MemoryId,
        expected_revision: u64,
    ) -> Result<(MemoryRecord, MemoryReceipt), MemoryError> {
        self.forget(None, scope, id, Some(expected_revision), ChangedBy::Person)
            .await
    }

    /// Bring a forgotten memory back as a new revision (its old revision
    /// plus one). Refused while a live memory holds the id.
    pub async fn restore(
        &self,
        fence: Option<&Fence>,
        scope: &MemoryScope,
        id: &MemoryId,
        by: ChangedBy,
    ) -> Result<(MemoryRecord, MemoryReceipt), MemoryError> {
        let fkey = MemoryRecord::forgotten_key(scope, id);
        let Some((gone, old)) = self.load(&fkey).await? else {
            return Err(MemoryError::NotForgotten {
                scope: scope.clone(),
                id: id.clone(),
            });
        };
        let key = MemoryRecord::live_key(scope, id);
        if let Some(latest) = self.get(scope, id).await? {
            return Err(MemoryError::Exists {
                latest: Box::new(latest),
            });
        }
        let record = MemoryRecord {
            revision: gone.revision + 1,
            saved_by: by,
            saved_at_ms: self.clock.wall_ms(),
            forgotten: None,
            ..gone.clone()
        };
        let batch = batch(fence)
            .expect_value(TABLE, fkey.clone(), old)
            .expect_absent(TABLE, key.clone())
            .delete(TABLE, fkey)
            .put(TABLE, key, encode(&record)?);
        self.commit(batch, scope, id).await?;
        let receipt = MemoryReceipt {
            operation: "restore".into(),
            scope: scope.clone(),
            id: id.clone(),
            old_revision: Some(gone.revision),
            new_revision: Some(record.revision),
            text_hash: record.text_hash.clone(),
        };
        Ok((record, receipt))
    }

    /// The person removes a forgotten memory for good; true when it existed.
    pub async fn purge(&self, scope: &MemoryScope, id: &MemoryId) -> Result<bool, MemoryError> {
        let fkey = MemoryRecord::forgotten_key(scope, id);
        let Some((_, old)) = self.load(&fkey).await? else {
            return Ok(false);
        };
        let batch = Batch::new()
            .expect_value(TABLE, fkey.clone(), old)
            .delete(TABLE, fkey);
        self.commit(batch, scope, id).await?;
        Ok(true)
    }

    /// The live memories of `scopes` that match `query`, best first, at
    /// most `limit` (capped at [`MAX_SEARCH_RESULTS`]). A memory scores for
    /// each query term that is one of its words (3) or inside its text (1),
    /// and for the whole query inside its text (5); ties go to the most
    /// recently saved. Matching ignores case.
    pub async fn search(
        &self,
        scopes: &BTreeSet<MemoryScope>,
        query: &str,
        limit: usize,
    ) -> Result<Vec<MemoryHit>, MemoryError> {
        let query = query.trim();
        if query.is_empty() || query.len() > MAX_QUERY_BYTES {
            return Err(MemoryError::BadQuery);
        }
        let phrase = query.to_lowercase();
        let terms = terms_of(&phrase);
        if terms.is_empty() {
            return Err(MemoryError::BadQuery);
        }
        let limit = limit.clamp(1, MAX_SEARCH_RESULTS);
        let mut hits = Vec::new();
        for scope in scopes {
            for record in self.list(scope).await? {
                let score = score(&record.text, &terms, &phrase);
                if score > 0 {
                    hits.push(MemoryHit { record, score });
                }
            }
        }
        hits.sort_by(|a, b| {
            b.score
                .cmp(&a.score)
                .then(b.record.saved_at_ms.cmp(&a.record.saved_at_ms))
                .then(a.record.scope.cmp(&b.record.scope))
                .then(a.record.id.cmp(&b.record.id))
        });
        hits.truncate(limit);
        Ok(hits)
    }

    /// The host clock's wall time, in ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock.wall_ms()
    }
}

/// The distinct lowercase alphanumeric terms of a lowercased query, at
/// most [`MAX_QUERY_TERMS`].
fn terms_of(lower: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .filter(|t| seen.insert(t.to_string()))
        .take(MAX_QUERY_TERMS)
        .map(str::to_owned)
        .collect()
}

fn score(text: &str, terms: &[String], phrase: &str) -> u32 {
    let lower = text.to_lowercase();
    let words: BTreeSet<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut score = 0;
    for term in terms {
        if words.contains(term.as_str()) {
            score += 3;
        } else if lower.contains(term.as_str()) {
            score += 1;
        }
    }
    if score > 0 && terms.len() > 1 && lower.contains(phrase) {
        score += 5;
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_outrank_substrings_and_the_phrase_adds() {
        let terms = terms_of("dark mode");
        assert_eq!(score("prefers dark mode", &terms, "dark mode"), 3 + 3 + 5);
        assert_eq!(score("modem darkness", &terms, "dark mode"), 2);
        assert_eq!(score("light theme", &terms, "dark mode"), 0);
        assert_eq!(terms_of("a, a b"), ["a", "b"]);
    }
}
