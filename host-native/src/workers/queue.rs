//! The run queue in the store (S14.1): a run handed to `agentrt worker`
//! processes is a [`QueuedRun`] record (`Table::Meta`, key
//! `agentrt/queue/<enqueued ms>-<run>`), committed in one batch with what it
//! names (the prompt and configuration blobs, the run's launch record).
//! This module owns the record, enqueueing it ([`enqueue_start`],
//! [`enqueue_resume`], the embedder's calls behind `agentrt run --detach`
//! and `agentrt resume --detach`) and reading the queue ([`read_queue`]);
//! claiming and executing are the worker's ([`crate::workers::worker`]).
//!
//! A queued start has its run id from the moment it is queued, so the caller
//! can name the run at once; the worker starts it under that id
//! (`Runtime::start_as`, refused if the run exists, so a start taken again
//! after a lost worker never runs twice). Keys sort by enqueue time, so a
//! session's requests are taken in the order they were made.
//!
//! **A queued run names its model only by a name of the worker's own
//! configuration (S14.2)**: [`QueuedProvider`] is a scripted scenario or a
//! provider name, never an endpoint, a key or an environment variable, so
//! whoever can write the shared store cannot choose where a worker's secret
//! goes. A stored record that names one anyway (the format before S14.2, or
//! a hostile writer) reads as a [`RefusedEntry`] with its
//! [`QueueRecordError`]: the worker drops it without building any provider.
use agent_kernel::host::{Batch, BlobRef, Record, Storage, StorageError, StorageExt, Table};
use agent_kernel::run::{AgentRun, RunStatus};
use agent_kernel::{RunId, SessionId};
use agent_supervisor::RunConfig;
use agent_supervisor::conversation::HistoryMessage;
use serde::{Deserialize, Serialize};

use crate::app::{Launch, ProviderSpec};
use agent_supervisor::provider::set::{MAX_PROVIDER_NAME_BYTES, valid_name};

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

/// Which model a queued run talks to (S14.2): never an endpoint, a secret
/// or an environment variable. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum QueuedProvider {
    /// A scripted scenario, stored as a blob (no network, no key).
    Scripted { scenario: BlobRef },
    /// The provider the executing worker's configuration gives this name
    /// (`[providers.NAME]`; none: its `[provider]`). A name the worker lacks
    /// fails the run, saying so.
    Configured {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The model the person chose; none: the worker's configured one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
}

impl QueuedProvider {
    /// The queued form of a launch's provider: only a scripted scenario or
    /// a configured name; an endpoint (`Remote`, `OpenaiCompatible`) is
    /// [`QueueRecordError::NamesEndpoint`].
    pub fn from_spec(spec: &ProviderSpec) -> Result<QueuedProvider, QueueRecordError> {
        let queued = match spec {
            ProviderSpec::Scripted { scenario } => QueuedProvider::Scripted {
                scenario: scenario.clone(),
            },
            ProviderSpec::Configured { name, model } => QueuedProvider::Configured {
                name: name.clone(),
                model: model.clone(),
            },
            ProviderSpec::Remote { .. } | ProviderSpec::OpenaiCompatible { .. } => {
                return Err(QueueRecordError::NamesEndpoint);
            }
        };
        queued.check()?;
        Ok(queued)
    }

    /// The launch record's form of it.
    pub fn spec(&self) -> ProviderSpec {
        match self {
            QueuedProvider::Scripted { scenario } => ProviderSpec::Scripted {
                scenario: scenario.clone(),
            },
            QueuedProvider::Configured { name, model } => ProviderSpec::Configured {
                name: name.clone(),
                model: model.clone(),
            },
        }
    }

    /// Read a stored provider field, refusing what names an endpoint, a
    /// secret or an environment variable before anything else is decoded.
    pub fn from_stored(value: &serde_json::Value) -> Result<QueuedProvider, QueueRecordError> {
        if let Some(fields) = value.as_object() {
            for (field, error) in [
                ("base_url", QueueRecordError::NamesEndpoint),
                ("api_key_env", QueueRecordError::NamesKeyVariable),
                ("api_key", QueueRecordError::NamesSecret),
            ] {
                if fields.contains_key(field) {
                    return Err(error);
                }
            }
            if let Some(kind) = fields.get("kind").and_then(|k| k.as_str())
                && matches!(kind, "remote" | "openai_compatible")
            {
                return Err(QueueRecordError::NamesEndpoint);
            }
        }
        let queued = serde_json::from_value::<QueuedProvider>(value.clone())
            .map_err(|e| QueueRecordError::Malformed(e.to_string()))?;
        queued.check()?;
        Ok(queued)
    }

    /// A configured name follows the provider-name rule.
    fn check(&self) -> Result<(), QueueRecordError> {
        match self {
            QueuedProvider::Configured {
                name: Some(name), ..
            } if !valid_name(name) => Err(QueueRecordError::InvalidName),
            _ => Ok(()),
        }
    }
}

/// Why a stored queue record is refused (S14.2). Each message names the
/// rule, never the value (a hostile record's text is not echoed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueRecordError {
    #[error(
        "it names a model endpoint; a queued run names its provider only by a name of the worker's own configuration (S14.2)"
    )]
    NamesEndpoint,
    #[error(
        "it names an environment variable for the API key; a worker reads only the variables its own configuration names (S14.2)"
    )]
    NamesKeyVariable,
    #[error("it carries an API key; a queued run never carries a secret (S14.2)")]
    NamesSecret,
    #[error(
        "its provider name is not 1 to {MAX_PROVIDER_NAME_BYTES} characters from A-Z a-z 0-9 - _ ."
    )]
    InvalidName,
    #[error("its provider does not decode: {0}")]
    Malformed(String),
}

/// One request in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedRun {
    pub run: RunId,
    pub session: SessionId,
    #[serde(flatten)]
    pub action: QueuedAction,
    /// The model the run talks to (its launch record says the same).
    pub provider: QueuedProvider,
    pub enqueued_at_ms: u64,
}

/// A stored request whose provider is refused ([`QueueRecordError`]): what
/// the worker needs to drop it under the session's lease, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct RefusedEntry {
    pub key: String,
    pub run: RunId,
    pub session: SessionId,
    /// `start` or `resume`.
    pub action: &'static str,
    pub error: QueueRecordError,
}

/// A queue record as stored, its provider not yet trusted.
#[derive(Deserialize)]
struct StoredEntry {
    run: RunId,
    session: SessionId,
    #[serde(flatten)]
    action: QueuedAction,
    provider: serde_json::Value,
    enqueued_at_ms: u64,
}

/// One item of the queue, in key order.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueItem {
    Run(QueuedRun),
    Refused(RefusedEntry),
}

impl QueueItem {
    pub fn session(&self) -> &SessionId {
        match self {
            QueueItem::Run(e) => &e.session,
            QueueItem::Refused(r) => &r.session,
        }
    }
    pub fn run(&self) -> &RunId {
        match self {
            QueueItem::Run(e) => &e.run,
            QueueItem::Refused(r) => &r.run,
        }
    }
}

/// The queue as read: every item oldest first, and the keys of records
/// that do not decode at all (no run or session to name; left alone).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Queue {
    pub items: Vec<QueueItem>,
    pub corrupt: Vec<String>,
}

impl Queue {
    /// The requests that may run.
    pub fn runs(&self) -> impl Iterator<Item = &QueuedRun> {
        self.items.iter().filter_map(|i| match i {
            QueueItem::Run(e) => Some(e),
            QueueItem::Refused(_) => None,
        })
    }

    /// The refused records.
    pub fn refused(&self) -> impl Iterator<Item = &RefusedEntry> {
        self.items.iter().filter_map(|i| match i {
            QueueItem::Refused(r) => Some(r),
            QueueItem::Run(_) => None,
        })
    }

    /// The first item of each session, oldest first: what may be taken now
    /// (a session's requests are taken in the order they were made; a
    /// refused one is dropped in its turn).
    pub fn heads(&self) -> Vec<&QueueItem> {
        let mut seen = std::collections::HashSet::new();
        self.items
            .iter()
            .filter(|i| seen.insert(i.session().clone()))
            .collect()
    }
}

impl Record for QueuedRun {
    const TABLE: Table = Table::Meta;
    fn key(&self) -> String {
        key_of(self.enqueued_at_ms, &self.run)
    }
}

/// The key of a request queued at `enqueued_at_ms` for `run`.
fn key_of(enqueued_at_ms: u64, run: &RunId) -> String {
    format!("{QUEUE_PREFIX}{enqueued_at_ms:016}-{run}")
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
    #[error(
        "run {0} talks to a model endpoint named on the command line; a worker runs only providers of its own configuration (S14.2): resume it here with `agentrt resume {0}`"
    )]
    ExplicitEndpoint(RunId),
    #[error("the queued provider is refused: {0}")]
    Provider(#[from] QueueRecordError),
}

/// A new run to queue ([`enqueue_start`]).
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// Its id from now on (fresh: `random_id(entropy, "run-")`).
    pub run: RunId,
    pub session: SessionId,
    pub prompt: &'a str,
    pub request: &'a StartRequest,
    /// The model it talks to (recorded as its launch record too).
    pub provider: QueuedProvider,
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
    new.provider.check()?;
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
            provider: new.provider.spec(),
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
    let provider = QueuedProvider::from_spec(&launch.provider).map_err(|e| match e {
        QueueRecordError::NamesEndpoint => QueueError::ExplicitEndpoint(run.clone()),
        other => QueueError::Provider(other),
    })?;
    let entry = QueuedRun {
        run: run.clone(),
        session: record.session,
        action: QueuedAction::Resume,
        provider,
        enqueued_at_ms: now_ms,
    };
    storage.commit(Batch::new().put_record(&entry)?).await?;
    Ok(entry)
}

/// The queue, oldest first: the requests, the refused records (a provider
/// naming an endpoint, a key or a variable), and the keys of records that
/// do not decode at all (reported, never taken, never a panic).
pub async fn read_queue(storage: &dyn Storage) -> Result<Queue, StorageError> {
    let mut queue = Queue::default();
    for (key, bytes) in storage.scan_prefix(Table::Meta, QUEUE_PREFIX).await? {
        match decode_entry(&key, &bytes) {
            Some(item) => queue.items.push(item),
            None => queue.corrupt.push(key),
        }
    }
    Ok(queue)
}

/// One stored record: a request, a refused one, or `None` when it does not
/// decode or is not stored under its own key.
fn decode_entry(key: &str, bytes: &[u8]) -> Option<QueueItem> {
    let stored: StoredEntry = serde_json::from_slice(bytes).ok()?;
    let action_name = match stored.action {
        QueuedAction::Start { .. } => "start",
        QueuedAction::Resume => "resume",
    };
    let item = match QueuedProvider::from_stored(&stored.provider) {
        Ok(provider) => QueueItem::Run(QueuedRun {
            run: stored.run,
            session: stored.session,
            action: stored.action,
            provider,
            enqueued_at_ms: stored.enqueued_at_ms,
        }),
        Err(error) => QueueItem::Refused(RefusedEntry {
            key: key.to_owned(),
            run: stored.run,
            session: stored.session,
            action: action_name,
            error,
        }),
    };
    (key_of(stored.enqueued_at_ms, item.run()) == key).then_some(item)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(session: &str, run: &str, at: u64) -> QueuedRun {
        QueuedRun {
            run: RunId::new(run).expect("run id"),
            session: SessionId::new(session).expect("session id"),
            action: QueuedAction::Resume,
            provider: QueuedProvider::Scripted {
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
        let queue = Queue {
            items: vec![a.clone(), c.clone(), b]
                .into_iter()
                .map(QueueItem::Run)
                .collect(),
            corrupt: Vec::new(),
        };
        let heads: Vec<&str> = queue.heads().iter().map(|e| e.run().as_str()).collect();
        assert_eq!(heads, vec!["run-b", "run-c"]);
    }

    #[test]
    fn an_entry_round_trips_through_json() {
        let mut e = entry("s1", "run-x", 7);
        let json = serde_json::to_string(&e).expect("encode");
        assert!(json.contains("\"action\":\"resume\""), "{json}");
        assert_eq!(
            decode_entry(&e.key(), json.as_bytes()),
            Some(QueueItem::Run(e.clone()))
        );
        e.provider = QueuedProvider::Configured {
            name: Some("claude".into()),
            model: None,
        };
        let json = serde_json::to_string(&e).expect("encode");
        assert!(
            json.contains(r#""provider":{"kind":"configured","name":"claude"}"#),
            "{json}"
        );
        assert_eq!(
            decode_entry(&e.key(), json.as_bytes()),
            Some(QueueItem::Run(e.clone()))
        );
        // Stored under another key: not taken.
        assert_eq!(decode_entry("agentrt/queue/other", json.as_bytes()), None);
    }

    /// S14.2: a stored record naming an endpoint, a key variable or a key
    /// (the old format, or a hostile writer) is refused with its typed
    /// error, whatever else it says; so is a bad name or an unknown field.
    #[test]
    fn s14_2_a_record_naming_an_endpoint_or_a_variable_is_refused() {
        let key = format!("{QUEUE_PREFIX}{:016}-run-h", 9);
        let with = |provider: serde_json::Value| {
            serde_json::json!({"run": "run-h", "session": "s1", "action": "resume",
                "provider": provider, "enqueued_at_ms": 9})
            .to_string()
        };
        for (provider, error) in [
            (
                serde_json::json!({"kind": "remote", "provider": "openai-compatible",
                    "base_url": "http://127.0.0.1:9/v1", "model": "m",
                    "api_key_env": "WORKER_DB_PASSWORD"}),
                QueueRecordError::NamesEndpoint,
            ),
            (
                serde_json::json!({"kind": "remote", "provider": "openai-compatible", "model": "m",
                    "api_key_env": "WORKER_DB_PASSWORD"}),
                QueueRecordError::NamesKeyVariable,
            ),
            (
                serde_json::json!({"kind": "remote", "provider": "gemini", "model": "m"}),
                QueueRecordError::NamesEndpoint,
            ),
            (
                serde_json::json!({"kind": "openai_compatible", "model": "m"}),
                QueueRecordError::NamesEndpoint,
            ),
            (
                serde_json::json!({"kind": "configured", "name": "claude",
                    "base_url": "http://attacker"}),
                QueueRecordError::NamesEndpoint,
            ),
            (
                serde_json::json!({"kind": "configured", "name": "claude",
                    "api_key_env": "WORKER_DB_PASSWORD"}),
                QueueRecordError::NamesKeyVariable,
            ),
            (
                serde_json::json!({"kind": "configured", "api_key": "sk-1"}),
                QueueRecordError::NamesSecret,
            ),
            (
                serde_json::json!({"kind": "configured", "name": "a b"}),
                QueueRecordError::InvalidName,
            ),
            (
                serde_json::json!({"kind": "configured", "name": "n".repeat(65)}),
                QueueRecordError::InvalidName,
            ),
        ] {
            let text = with(provider.clone());
            match decode_entry(&key, text.as_bytes()) {
                Some(QueueItem::Refused(r)) => {
                    assert_eq!(r.error, error, "{provider}");
                    assert_eq!((r.run.as_str(), r.action), ("run-h", "resume"));
                    assert!(!r.error.to_string().contains("WORKER_DB_PASSWORD"));
                }
                other => panic!("{provider}: {other:?}"),
            }
        }
        // An unknown field or kind is malformed; a name at the limit is fine.
        for provider in [
            serde_json::json!({"kind": "configured", "endpoint": "http://x"}),
            serde_json::json!({"kind": "mystery"}),
            serde_json::json!("configured"),
        ] {
            let text = with(provider.clone());
            assert!(
                matches!(
                    decode_entry(&key, text.as_bytes()),
                    Some(QueueItem::Refused(RefusedEntry {
                        error: QueueRecordError::Malformed(_),
                        ..
                    }))
                ),
                "{provider}"
            );
        }
        let at_limit = with(serde_json::json!({"kind": "configured", "name": "n".repeat(64)}));
        assert!(matches!(
            decode_entry(&key, at_limit.as_bytes()),
            Some(QueueItem::Run(_))
        ));
    }

    /// An interrupted run `run-r` of session `s1`, launched on `provider`.
    async fn interrupted_run(provider: ProviderSpec) -> agent_kernel::memory::MemoryStorage {
        let storage = agent_kernel::memory::MemoryStorage::new();
        let run: AgentRun = serde_json::from_value(serde_json::json!({
            "id": "run-r", "session": "s1", "mode": "agent", "status": "interrupted",
            "stop_reason": {"reason": "page_interrupted"},
            "usage": agent_kernel::run::Usage::default(),
            "budget": agent_kernel::budget::Budget::preset(agent_kernel::budget::BudgetPreset::Light),
            "prompt": BlobRef::of(b"go"), "next_activity": 0, "status_history": [],
            "created_at_ms": 0, "updated_at_ms": 0
        }))
        .expect("run");
        let launch = Launch {
            run: run.id.clone(),
            provider,
            demo: false,
        };
        let batch = Batch::new()
            .put_record(&run)
            .and_then(|b| b.put_record(&launch))
            .expect("batch");
        storage.commit(batch).await.expect("commit");
        storage
    }

    /// S14.2: `resume --detach` queues a run launched on a scenario or a
    /// configured name; one launched on an endpoint named on the command
    /// line is refused and nothing is queued.
    #[tokio::test]
    async fn s14_2_a_resume_is_queued_only_for_a_scenario_or_a_configured_name() {
        let run = RunId::new("run-r").expect("run");
        let remote = ProviderSpec::Remote {
            provider: agent_supervisor::ProviderKind::OpenaiCompatible,
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: "m".into(),
            capabilities: Default::default(),
        };
        let storage = interrupted_run(remote).await;
        let err = enqueue_resume(&storage, &run, 5)
            .await
            .expect_err("refused");
        assert!(
            matches!(&err, QueueError::ExplicitEndpoint(r) if r == &run),
            "{err}"
        );
        assert!(err.to_string().contains("agentrt resume run-r"), "{err}");
        assert_eq!(read_queue(&storage).await.expect("queue"), Queue::default());

        for provider in [
            ProviderSpec::Configured {
                name: Some("claude".into()),
                model: None,
            },
            ProviderSpec::Scripted {
                scenario: BlobRef::of(b"{}"),
            },
        ] {
            let storage = interrupted_run(provider.clone()).await;
            let entry = enqueue_resume(&storage, &run, 5).await.expect("queued");
            assert_eq!(entry.provider.spec(), provider);
            let queue = read_queue(&storage).await.expect("queue");
            assert_eq!(queue.runs().collect::<Vec<_>>(), vec![&entry]);
        }
    }

    #[test]
    fn only_a_scenario_or_a_configured_name_is_queued_from_a_launch() {
        let remote = ProviderSpec::Remote {
            provider: agent_supervisor::ProviderKind::OpenaiCompatible,
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: "m".into(),
            capabilities: Default::default(),
        };
        assert_eq!(
            QueuedProvider::from_spec(&remote),
            Err(QueueRecordError::NamesEndpoint)
        );
        let named = ProviderSpec::Configured {
            name: Some("claude".into()),
            model: Some("claude-x".into()),
        };
        let queued = QueuedProvider::from_spec(&named).expect("named");
        assert_eq!(queued.spec(), named);
    }
}
