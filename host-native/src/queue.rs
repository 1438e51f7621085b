//! The run queue in the store (S14.1): a run handed to `agentrt worker`
//! processes is a [`QueuedRun`] record (`Table::Meta`, key
//! `agentrt/queue/<enqueued ms>-<run>`), committed in one batch with what it
//! names (the prompt and configuration blobs, the run's launch record).
//! This module owns the record, enqueueing it ([`enqueue_start`],
//! [`enqueue_resume`], the embedder's calls behind `agentrt run --detach`
//! and `agentrt resume --detach`) and reading the queue; claiming and
//! executing are the worker's ([`crate::worker`]).
//!
//! A queued start has its run id from the moment it is queued, so the caller
//! can name the run at once; the worker starts it under that id
//! (`Runtime::start_as`, refused if the run exists, so a start taken again
//! after a lost worker never runs twice). Keys sort by enqueue time, so a
//! session's requests are taken in the order they were made.

use agent_kernel::host::{Batch, BlobRef, Record, Storage, StorageError, StorageExt, Table};
use agent_kernel::run::{AgentRun, RunStatus};
use agent_kernel::{RunId, SessionId};
use agent_supervisor::RunConfig;
use agent_supervisor::conversation::HistoryMessage;
use serde::{Deserialize, Serialize};

use crate::app::{Launch, ProviderSpec};

/// The key prefix of queued requests in `Table::Meta`.
pub const QUEUE_PREFIX: &str = "agentrt/queue/";

/// What a queued request asks a worker to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum QueuedAction {
    /// Start the run: its prompt and [`StartRequest`] are blobs.
    Start { prompt: BlobRef, request: BlobRef },
    /// Resume the interrupted run (the person chose Resume, S2.5).
    Resume,
}

/// A run's configuration as queued: the run config and an embedder's own
/// history (which `RunConfig` does not serialise).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StartRequest {
    pub config: RunConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<HistoryMessage>>,
}

/// One request in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedRun {
    pub run: RunId,
    pub session: SessionId,
    #[serde(flatten)]
    pub action: QueuedAction,
    /// The model the run talks to (a copy of its launch record's).
    pub provider: ProviderSpec,
    pub enqueued_at_ms: u64,
}

impl Record for QueuedRun {
    const TABLE: Table = Table::Meta;
    fn key(&self) -> String {
        format!("{QUEUE_PREFIX}{:016}-{}", self.enqueued_at_ms, self.run)
    }
}

impl QueuedRun {
    /// `start` or `resume`.
    pub fn action_name(&self) -> &'static str {
        match self.action {
            QueuedAction::Start { .. } => "start",
            QueuedAction::Resume => "resume",
        }
    }
}

/// Queueing a request failed; nothing was queued.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("run {0} does not exist")]
    NotFound(RunId),
    #[error(
        "run {run} is {status}; only an interrupted run is resumed (answer a waiting one with approve, deny, respond or decide)"
    )]
    NotInterrupted { run: RunId, status: RunStatus },
    #[error(
        "run {0} has no launch record (it was not started by agentrt); a worker cannot know its model"
    )]
    NoLaunch(RunId),
    #[error("the run configuration cannot be queued: {0}")]
    Encode(String),
    #[error("the run configuration is refused: {0}")]
    Config(String),
}

/// A new run to queue ([`enqueue_start`]).
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// Its id from now on (fresh: `random_id(entropy, "run-")`).
    pub run: RunId,
    pub session: SessionId,
    pub prompt: &'a str,
    pub request: &'a StartRequest,
    /// The model it talks to (recorded as its launch record).
    pub provider: ProviderSpec,
    /// True for `agentrt demo` runs.
    pub demo: bool,
}

/// Queue a new run for the workers, in one batch: the prompt and the
/// configuration as blobs, the launch record, the queue entry. Returns the
/// entry; its `run` is the run's id from now on. The run itself is created
/// by the worker that takes the entry. The configuration is checked first:
/// a refused one queues nothing.
pub async fn enqueue_start(
    storage: &dyn Storage,
    new: NewRun<'_>,
    now_ms: u64,
) -> Result<QueuedRun, QueueError> {
    new.request
        .config
        .validate()
        .map_err(|e| QueueError::Config(e.to_string()))?;
    let mut batch = Batch::new();
    let prompt = batch.add_blob(new.prompt.as_bytes().to_vec());
    let request_bytes =
        serde_json::to_vec(new.request).map_err(|e| QueueError::Encode(e.to_string()))?;
    let request = batch.add_blob(request_bytes);
    let entry = QueuedRun {
        run: new.run.clone(),
        session: new.session,
        action: QueuedAction::Start { prompt, request },
        provider: new.provider.clone(),
        enqueued_at_ms: now_ms,
    };
    let batch = batch
        .put_record(&Launch {
            run: new.run,
            provider: new.provider,
            demo: new.demo,
        })?
        .put_record(&entry)?;
    storage.commit(batch).await?;
    Ok(entry)
}

/// Queue a Resume of the interrupted `run` for the workers (the person's
/// choice, S2.5: a worker never resumes a run by itself).
pub async fn enqueue_resume(
    storage: &dyn Storage,
    run: &RunId,
    now_ms: u64,
) -> Result<QueuedRun, QueueError> {
    let record: AgentRun = storage
        .get_record(run.as_str())
        .await?
        .ok_or_else(|| QueueError::NotFound(run.clone()))?;
    if record.status != RunStatus::Interrupted {
        return Err(QueueError::NotInterrupted {
            run: run.clone(),
            status: record.status,
        });
    }
    let launch = Launch::load(storage, run)
        .await?
        .ok_or_else(|| QueueError::NoLaunch(run.clone()))?;
    let entry = QueuedRun {
        run: run.clone(),
        session: record.session,
        action: QueuedAction::Resume,
        provider: launch.provider,
        enqueued_at_ms: now_ms,
    };
    storage.commit(Batch::new().put_record(&entry)?).await?;
    Ok(entry)
}

/// The queue, oldest first, and the keys of entries that do not decode
/// (reported, never taken, never a panic).
pub async fn read_queue(
    storage: &dyn Storage,
) -> Result<(Vec<QueuedRun>, Vec<String>), StorageError> {
    let mut entries = Vec::new();
    let mut corrupt = Vec::new();
    for (key, bytes) in storage.scan_prefix(Table::Meta, QUEUE_PREFIX).await? {
        match serde_json::from_slice::<QueuedRun>(&bytes) {
            Ok(entry) if entry.key() == key => entries.push(entry),
            _ => corrupt.push(key),
        }
    }
    Ok((entries, corrupt))
}

/// The first entry of each session, oldest first: what may be taken now
/// (a session's requests run in the order they were made).
pub fn heads(entries: &[QueuedRun]) -> Vec<&QueuedRun> {
    let mut seen = std::collections::HashSet::new();
    entries
        .iter()
        .filter(|e| seen.insert(e.session.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(session: &str, run: &str, at: u64) -> QueuedRun {
        QueuedRun {
            run: RunId::new(run).expect("run id"),
            session: SessionId::new(session).expect("session id"),
            action: QueuedAction::Resume,
            provider: ProviderSpec::Scripted {
                scenario: BlobRef::of(b"{}"),
            },
            enqueued_at_ms: at,
        }
    }

    #[test]
    fn keys_sort_by_enqueue_time_and_heads_take_one_per_session_in_order() {
        let a = entry("s1", "run-b", 2);
        let b = entry("s1", "run-a", 10);
        let c = entry("s2", "run-c", 5);
        assert!(a.key() < c.key() && c.key() < b.key());
        let all = vec![a.clone(), c.clone(), b];
        let heads: Vec<&str> = heads(&all).iter().map(|e| e.run.as_str()).collect();
        assert_eq!(heads, vec!["run-b", "run-c"]);
    }

    #[test]
    fn an_entry_round_trips_through_json() {
        let e = entry("s1", "run-x", 7);
        let json = serde_json::to_string(&e).expect("encode");
        assert!(json.contains("\"action\":\"resume\""), "{json}");
        let back: QueuedRun = serde_json::from_str(&json).expect("decode");
        assert_eq!(back, e);
    }
}
