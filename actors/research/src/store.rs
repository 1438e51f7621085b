//! Durable research tasks (S9.1: the same primitives as runs): every
//! transition is one atomic batch fenced by the session lease's epoch, with
//! a compare-and-set on the task's stored bytes, and the blobs it names
//! (topic, plans, source texts) in the same batch, so a record never names
//! a blob that is not there. The plan request is shown once (S6.4).
//!
//! Nothing here starts work: loading tasks after a reload only reads, and
//! [`ResearchStore::interrupt_active`] turns tasks left mid-phase into
//! `Interrupted`, from which only [`Event::Resume`] continues (S2.5, S9.6).

use std::sync::Arc;

use agent_kernel::host::{Batch, BlobRef, Clock, Fence, Record, Storage, StorageError, Table};
use agent_kernel::protocol::{ReferenceKind, ToolResult};
use agent_kernel::{RequestId, SessionId};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::plan::{PlanError, ResearchPlan};
use crate::task::{
    Event, KEY_PREFIX, MessageId, Phase, ResearchTask, TASK_FORMAT, TaskId, TransitionError,
};

/// The index of tasks left mid-phase: a `Meta` row
/// `research-mid-phase/<session>/<task>` (the session id as JSON) for each
/// task in Planning, Executing or Synthesizing, written in the batch of the
/// transition into or out of those phases, so that a page load reads the
/// tasks it must interrupt, not every task ever stored.
const MID_PHASE: &str = "research-mid-phase/";
/// Present once every task stored before the index has its row.
const MID_PHASE_INDEXED: &str = "research-mid-phase-index";

fn is_mid_phase(phase: Phase) -> bool {
    matches!(
        phase,
        Phase::Planning | Phase::Executing | Phase::Synthesizing
    )
}

fn mid_phase_key(task: &ResearchTask) -> String {
    format!("{MID_PHASE}{}/{}", task.session, task.id)
}

/// `batch` with `next`'s index row put or deleted as its phase moves
/// into or out of the middle (from `before`; `None` for a new task).
fn index_mid_phase(batch: Batch, before: Option<Phase>, next: &ResearchTask) -> Batch {
    match (before.is_some_and(is_mid_phase), is_mid_phase(next.phase)) {
        (false, true) => batch.put(
            Table::Meta,
            mid_phase_key(next),
            serde_json::Value::String(next.session.as_str().to_owned())
                .to_string()
                .into_bytes(),
        ),
        (true, false) => batch.delete(Table::Meta, mid_phase_key(next)),
        _ => batch,
    }
}

/// The longest topic the person can give, in bytes.
pub const MAX_TOPIC_BYTES: usize = 8 * 1024;
/// The longest failure reason kept for a gap, in characters.
pub const MAX_REASON_CHARS: usize = 500;
/// At most this many URLs come with a topic.
pub const MAX_SEED_URLS: usize = 10;
/// The longest source text stored per read, in bytes (S8.2's 2 MiB limit).
pub const MAX_SOURCE_BYTES: usize = 2 * 1024 * 1024;

/// A research store operation failed. Every variant says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResearchError {
    #[error("no research task {task} in session {session}")]
    NotFound { session: SessionId, task: TaskId },
    #[error("research task {task} already exists in session {session}; use another id")]
    Exists { session: SessionId, task: TaskId },
    #[error(
        "stored research task at {key:?} has layout version {found}, not {TASK_FORMAT}; it was left untouched"
    )]
    Format { key: String, found: u32 },
    #[error("the topic is empty or longer than {MAX_TOPIC_BYTES} bytes; give a short topic")]
    BadTopic,
    #[error("the source text is {size} bytes, over the {MAX_SOURCE_BYTES}-byte limit")]
    SourceTooLarge { size: usize },
    #[error(
        "plan request {given} is not the task's open plan request{}; reload the task and answer the plan it shows",
        match open { Some(id) => format!(" ({id})"), None => " (there is none)".to_owned() }
    )]
    NoSuchRequest {
        given: RequestId,
        open: Option<RequestId>,
    },
    #[error(transparent)]
    Transition(#[from] TransitionError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(
        "the {what} blob {hash} of a research task is missing or does not match its hash; the task cannot continue"
    )]
    MissingBlob { what: &'static str, hash: String },
    #[error("the {what} blob of a research task does not decode ({detail}); it was left untouched")]
    CorruptBlob { what: &'static str, detail: String },
    #[error("the read's result envelope cannot be recorded: {why}")]
    BadEnvelope { why: &'static str },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// The person's answer to a plan request (S9.4).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "decision", content = "plan", rename_all = "snake_case")]
pub enum PlanDecision {
    /// Run the plan as proposed.
    Approve,
    /// Run this edit of the plan; it may only narrow the proposal.
    Edit(ResearchPlan),
    /// Do not run it; the task ends `Rejected`.
    Reject,
}

/// The prefix of a stop request in [`Table::Meta`]:
/// `research-stop/<session>/<task>` (outside [`KEY_PREFIX`]'s scans).
pub const STOP_PREFIX: &str = "research-stop/";

/// Research tasks of every session, over the host's storage.
#[derive(Clone)]
pub struct ResearchStore {
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ResearchStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResearchStore").finish_non_exhaustive()
    }
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ResearchError> {
    serde_json::to_vec(value).map_err(|e| {
        ResearchError::Storage(StorageError::Encode {
            table: Table::Meta,
            detail: e.to_string(),
        })
    })
}

/// Decode stored task bytes: a typed error for bytes that are not a task
/// (`StorageError::Corrupt`) or a task of another layout (`Format`).
pub fn decode_task(key: &str, bytes: &[u8]) -> Result<ResearchTask, ResearchError> {
    #[derive(serde::Deserialize)]
    struct Version {
        v: u32,
    }
    let corrupt = |detail: String| {
        ResearchError::Storage(StorageError::Corrupt {
            table: Table::Meta,
            key: key.to_owned(),
            detail,
        })
    };
    let version: Version = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if version.v != TASK_FORMAT {
        return Err(ResearchError::Format {
            key: key.to_owned(),
            found: version.v,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))
}

impl ResearchStore {
    pub fn new(storage: Arc<dyn Storage>, clock: Arc<dyn Clock>) -> ResearchStore {
        ResearchStore { storage, clock }
    }

    /// Start a task in `Planning` for the person's `topic`, in the fence's
    /// session, referred to by chat message `message` (both host-supplied, S9.5).
    pub async fn create(
        &self,
        fence: &Fence,
        id: TaskId,
        message: MessageId,
        topic: &str,
    ) -> Result<ResearchTask, ResearchError> {
        self.create_with_urls(fence, id, message, topic, &[]).await
    }

    /// [`ResearchStore::create`] with the URLs the person gave (at most
    /// [`MAX_SEED_URLS`], each an absolute http(s) URL).
    pub async fn create_with_urls(
        &self,
        fence: &Fence,
        id: TaskId,
        message: MessageId,
        topic: &str,
        urls: &[String],
    ) -> Result<ResearchTask, ResearchError> {
        if topic.trim().is_empty() || topic.len() > MAX_TOPIC_BYTES {
            return Err(ResearchError::BadTopic);
        }
        if urls.len() > MAX_SEED_URLS {
            return Err(PlanError::TooMany {
                what: "URLs",
                count: urls.len(),
                max: MAX_SEED_URLS,
            }
            .into());
        }
        for url in urls {
            crate::plan::parse_source(url)?;
        }
        let mut batch = Batch::new().fenced(fence.clone());
        let topic = batch.add_blob(topic.as_bytes().to_vec());
        let mut task = ResearchTask::new(
            id,
            fence.session.clone(),
            message,
            topic,
            self.clock.wall_ms(),
        );
        if !urls.is_empty() {
            task.seeds = Some(batch.add_blob(encode(&urls)?));
        }
        let batch = batch.expect_absent(Table::Meta, task.key()).put(
            Table::Meta,
            task.key(),
            encode(&task)?,
        );
        let batch = index_mid_phase(batch, None, &task);
        match self.storage.commit(batch).await {
            Err(StorageError::ConditionFailed { .. }) => Err(ResearchError::Exists {
                session: task.session,
                task: task.id,
            }),
            Err(e) => Err(e.into()),
            Ok(()) => Ok(task),
        }
    }

    async fn load_raw(
        &self,
        session: &SessionId,
        id: &TaskId,
    ) -> Result<(ResearchTask, Vec<u8>), ResearchError> {
        let key = ResearchTask::key_for(session, id);
        let bytes =
            self.storage
                .get(Table::Meta, &key)
                .await?
                .ok_or_else(|| ResearchError::NotFound {
                    session: session.clone(),
                    task: id.clone(),
                })?;
        Ok((decode_task(&key, &bytes)?, bytes))
    }

    /// The stored task.
    pub async fn load(
        &self,
        session: &SessionId,
        id: &TaskId,
    ) -> Result<ResearchTask, ResearchError> {
        Ok(self.load_raw(session, id).await?.0)
    }

    /// Every task of `session`, by id.
    pub async fn list(&self, session: &SessionId) -> Result<Vec<ResearchTask>, ResearchError> {
        let prefix = format!("{KEY_PREFIX}{session}/");
        self.storage
            .scan_prefix(Table::Meta, &prefix)
            .await?
            .iter()
            .map(|(key, bytes)| decode_task(key, bytes))
            .collect()
    }

    /// The task `id` in whichever session holds it (a command line that is
    /// given only the task's id); reads every stored task, so a host that
    /// knows the session uses [`ResearchStore::load`].
    pub async fn find(&self, id: &TaskId) -> Result<Option<ResearchTask>, ResearchError> {
        for (key, bytes) in self.storage.scan_prefix(Table::Meta, KEY_PREFIX).await? {
            if key.rsplit('/').next() == Some(id.as_str()) {
                return decode_task(&key, &bytes).map(Some);
            }
        }
        Ok(None)
    }

    /// Ask whichever process advances `id` to stop it (S9.6): a request
    /// written without the session's lease, which the holder may not be
    /// (another `agentrt` executes the session). The process that advances
    /// the task reads it ([`ResearchStore::stop_requested`]) and stops the
    /// task as its own Stop would.
    pub async fn request_stop(
        &self,
        session: &SessionId,
        id: &TaskId,
    ) -> Result<(), ResearchError> {
        let key = format!("{STOP_PREFIX}{session}/{id}");
        let at = self.now_ms().to_string().into_bytes();
        self.storage
            .commit(Batch::new().put(Table::Meta, key, at))
            .await?;
        Ok(())
    }

    /// Whether a stop of `id` was requested ([`ResearchStore::request_stop`]).
    pub async fn stop_requested(
        &self,
        session: &SessionId,
        id: &TaskId,
    ) -> Result<bool, ResearchError> {
        let key = format!("{STOP_PREFIX}{session}/{id}");
        Ok(self.storage.get(Table::Meta, &key).await?.is_some())
    }

    /// The sessions with a task left in Planning, Executing or
    /// Synthesizing (a page load interrupts them, S9.6), read through the
    /// mid-phase index: the cost does not grow with the tasks that ended.
    pub async fn sessions_mid_phase(&self) -> Result<Vec<SessionId>, ResearchError> {
        self.ensure_mid_phase_indexed().await?;
        let mut sessions: Vec<SessionId> = Vec::new();
        for (key, value) in self.storage.scan_prefix(Table::Meta, MID_PHASE).await? {
            let session = serde_json::from_slice::<String>(&value)
                .ok()
                .and_then(|s| SessionId::new(s).ok());
            match session {
                Some(session) if !sessions.contains(&session) => sessions.push(session),
                Some(_) => {}
                // Left for a person to repair; the others are read.
                None => tracing::error!(key = %key, "skipping a corrupt research index row"),
            }
        }
        Ok(sessions)
    }

    /// Index the tasks stored before the mid-phase index existed, once.
    async fn ensure_mid_phase_indexed(&self) -> Result<(), ResearchError> {
        if self
            .storage
            .get(Table::Meta, MID_PHASE_INDEXED)
            .await?
            .is_some()
        {
            return Ok(());
        }
        let mut batch = Batch::new();
        for (key, bytes) in self.storage.scan_prefix(Table::Meta, KEY_PREFIX).await? {
            let task = decode_task(&key, &bytes)?;
            batch = index_mid_phase(batch, None, &task);
        }
        let batch = batch.put(Table::Meta, MID_PHASE_INDEXED, b"true".to_vec());
        self.storage.commit(batch).await?;
        Ok(())
    }

    /// Apply `event` to the stored task as one fenced, compare-and-set batch
    /// (with `batch`'s blobs); the stored task is unchanged on any error.
    async fn commit_event(
        &self,
        fence: &Fence,
        id: &TaskId,
        event: Event,
        batch: Batch,
    ) -> Result<ResearchTask, ResearchError> {
        let (task, old) = self.load_raw(&fence.session, id).await?;
        let next = task.apply(event, self.clock.wall_ms())?;
        let batch = batch
            .fenced(fence.clone())
            .expect_value(Table::Meta, task.key(), old)
            .put(Table::Meta, next.key(), encode(&next)?);
        let batch = index_mid_phase(batch, Some(task.phase), &next);
        self.storage.commit(batch).await?;
        Ok(next)
    }

    /// Apply an event that names no new blob (present, reject, finish,
    /// stop, interrupt, resume, failures, the report reference).
    pub async fn apply(
        &self,
        fence: &Fence,
        id: &TaskId,
        event: Event,
    ) -> Result<ResearchTask, ResearchError> {
        self.commit_event(fence, id, event, Batch::new()).await
    }

    /// Count one planning look-up before it is dispatched (S9.4): durable
    /// first, so a reload cannot reset the count; refused, typed, over the cap.
    pub async fn count_lookup(
        &self,
        fence: &Fence,
        id: &TaskId,
        kind: crate::task::LookupKind,
    ) -> Result<crate::task::Lookups, ResearchError> {
        Ok(self
            .apply(fence, id, Event::CountLookup { kind })
            .await?
            .lookups)
    }

    /// Planning proposes `plan` (validated first); it becomes the pending
    /// plan request `request`, not yet shown.
    pub async fn propose_plan(
        &self,
        fence: &Fence,
        id: &TaskId,
        plan: &ResearchPlan,
        request: RequestId,
    ) -> Result<ResearchTask, ResearchError> {
        plan.validate()?;
        let mut batch = Batch::new();
        let plan = batch.add_blob(encode(plan)?);
        self.commit_event(fence, id, Event::ProposePlan { plan, request }, batch)
            .await
    }

    /// The plan request if it has not been shown yet, marked as shown in
    /// the same step: after a reload the plan is presented once, not twice
    /// (S6.4). `None` when there is no request or it was shown already.
    pub async fn present_plan(
        &self,
        fence: &Fence,
        id: &TaskId,
    ) -> Result<Option<ResearchPlan>, ResearchError> {
        let task = self.load(&fence.session, id).await?;
        match &task.plan_request {
            Some(request) if !request.presented => {}
            _ => return Ok(None),
        }
        let plan = self.proposed_plan(&task).await?;
        // Marked in a compare-and-set step that refuses a request already
        // shown: of two tabs presenting at once, one gets the plan.
        match self.apply(fence, id, Event::PresentPlan).await {
            Ok(_) => Ok(plan),
            Err(ResearchError::Transition(TransitionError::AlreadyPresented)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The person's decision on plan request `request`: the one pending
    /// request of the task (a decision for an older or unknown request is
    /// refused, typed, and changes nothing). Approve and edit freeze the
    /// snapshot ([`ResearchStore::approve_plan`]); reject ends the task.
    pub async fn decide_plan(
        &self,
        fence: &Fence,
        id: &TaskId,
        request: &RequestId,
        decision: PlanDecision,
    ) -> Result<ResearchTask, ResearchError> {
        let task = self.load(&fence.session, id).await?;
        // A task's plan request cannot be replaced while it waits (a plan
        // is proposed only in Planning, which no later phase returns to),
        // so the check here holds for the compare-and-set commit below.
        let open = task.plan_request.as_ref().map(|r| r.id.clone());
        if open.as_ref() != Some(request) {
            return Err(ResearchError::NoSuchRequest {
                given: request.clone(),
                open,
            });
        }
        match decision {
            PlanDecision::Approve => Ok(self.approve_plan(fence, id, None).await?.0),
            PlanDecision::Edit(plan) => Ok(self.approve_plan(fence, id, Some(plan)).await?.0),
            PlanDecision::Reject => self.apply(fence, id, Event::RejectPlan).await,
        }
    }

    /// The person approves the proposed plan, or an edit of it that only
    /// narrows it (checked; a widening edit is `PlanError::Widens`).
    /// Approval freezes the snapshot of the approved plan's sources.
    pub async fn approve_plan(
        &self,
        fence: &Fence,
        id: &TaskId,
        edit: Option<ResearchPlan>,
    ) -> Result<(ResearchTask, ResearchPlan), ResearchError> {
        let task = self.load(&fence.session, id).await?;
        if task.phase != Phase::AwaitingPlanApproval {
            return Err(TransitionError::Illegal {
                phase: task.phase.name(),
                event: "approve_plan",
            }
            .into());
        }
        let proposed = self
            .proposed_plan(&task)
            .await?
            .ok_or(TransitionError::Illegal {
                phase: task.phase.name(),
                event: "approve_plan",
            })?;
        let approved = match edit {
            Some(edited) => {
                proposed.check_narrowing(&edited)?;
                edited
            }
            None => proposed,
        };
        let mut batch = Batch::new();
        let blob = batch.add_blob(encode(&approved)?);
        let event = Event::ApprovePlan {
            approved: blob,
            sources: approved.sources.clone(),
        };
        let task = self.commit_event(fence, id, event, batch).await?;
        Ok((task, approved))
    }

    /// Execution read a snapshot source: its text becomes a blob in the
    /// same batch as the evidence entry that names it.
    pub async fn record_read(
        &self,
        fence: &Fence,
        id: &TaskId,
        url: &str,
        final_url: &str,
        text: &[u8],
        published: Option<String>,
    ) -> Result<ResearchTask, ResearchError> {
        if text.len() > MAX_SOURCE_BYTES {
            return Err(ResearchError::SourceTooLarge { size: text.len() });
        }
        let mut batch = Batch::new();
        let content = batch.add_blob(text.to_vec());
        let event = Event::RecordRead {
            url: url.to_owned(),
            final_url: final_url.to_owned(),
            content,
            fetched_at_ms: self.clock.wall_ms(),
            published,
        };
        self.commit_event(fence, id, event, batch).await
    }

    /// Record the outcome of reading snapshot source `url` with the
    /// `fetch_url` tool (its result envelope): on success the text the tool
    /// stored (its blob reference, checked against the stored bytes)
    /// becomes the source's evidence, with the final URL of the read; on
    /// failure the source becomes a gap with the tool's code and message.
    pub async fn record_fetch_result(
        &self,
        fence: &Fence,
        id: &TaskId,
        url: &str,
        result: &ToolResult,
        published: Option<String>,
    ) -> Result<ResearchTask, ResearchError> {
        match result {
            ToolResult::Success(success) => {
                let reference = success
                    .references
                    .iter()
                    .find(|r| r.kind == ReferenceKind::Blob)
                    .ok_or(ResearchError::BadEnvelope {
                        why: "a successful read names no text blob",
                    })?;
                let content = BlobRef {
                    hash: reference.hash.clone(),
                    size: reference.size,
                };
                // The text must be stored under its hash before a record names it.
                self.blob("source", &content).await?;
                let final_url = success
                    .provenance
                    .final_url
                    .clone()
                    .unwrap_or_else(|| url.to_owned());
                let event = Event::RecordRead {
                    url: url.to_owned(),
                    final_url: final_url.chars().take(crate::plan::MAX_URL_BYTES).collect(),
                    content,
                    fetched_at_ms: success
                        .provenance
                        .fetched_at_ms
                        .unwrap_or_else(|| self.clock.wall_ms()),
                    published,
                };
                self.apply(fence, id, event).await
            }
            ToolResult::Error(failure) => {
                let reason: String = format!("{}: {}", failure.code, failure.message)
                    .chars()
                    .take(MAX_REASON_CHARS)
                    .collect();
                let event = Event::RecordFailure {
                    url: url.to_owned(),
                    reason,
                };
                self.apply(fence, id, event).await
            }
        }
    }

    /// After a reload: every task of the fence's session left in Planning,
    /// Executing or Synthesizing becomes `Interrupted`. Nothing is started
    /// (S2.5, S9.6); a task awaiting plan approval keeps waiting.
    pub async fn interrupt_active(&self, fence: &Fence) -> Result<Vec<TaskId>, ResearchError> {
        let mut interrupted = Vec::new();
        for task in self.list(&fence.session).await? {
            if matches!(
                task.phase,
                Phase::Planning | Phase::Executing | Phase::Synthesizing
            ) {
                self.apply(fence, &task.id, Event::Interrupt).await?;
                interrupted.push(task.id);
            }
        }
        Ok(interrupted)
    }

    /// The topic text.
    pub async fn topic(&self, task: &ResearchTask) -> Result<String, ResearchError> {
        let bytes = self.blob("topic", &task.topic).await?;
        String::from_utf8(bytes).map_err(|e| ResearchError::CorruptBlob {
            what: "topic",
            detail: e.to_string(),
        })
    }

    /// The URLs the person gave with the topic.
    pub async fn seed_urls(&self, task: &ResearchTask) -> Result<Vec<String>, ResearchError> {
        match &task.seeds {
            Some(blob) => self.json_blob("seed URLs", blob).await,
            None => Ok(Vec::new()),
        }
    }

    /// The plan as proposed, if planning proposed one.
    pub async fn proposed_plan(
        &self,
        task: &ResearchTask,
    ) -> Result<Option<ResearchPlan>, ResearchError> {
        match &task.plan {
            Some(blob) => Ok(Some(self.json_blob("plan", blob).await?)),
            None => Ok(None),
        }
    }

    /// The plan as approved, once approved.
    pub async fn approved_plan(
        &self,
        task: &ResearchTask,
    ) -> Result<Option<ResearchPlan>, ResearchError> {
        match &task.approved_plan {
            Some(blob) => Ok(Some(self.json_blob("approved plan", blob).await?)),
            None => Ok(None),
        }
    }

    /// The bytes of a blob a task names, checked against its hash.
    pub async fn blob(&self, what: &'static str, blob: &BlobRef) -> Result<Vec<u8>, ResearchError> {
        let missing = || ResearchError::MissingBlob {
            what,
            hash: blob.hash.clone(),
        };
        let bytes = self
            .storage
            .get_blob(&blob.hash)
            .await?
            .ok_or_else(missing)?;
        if BlobRef::of(&bytes) != *blob {
            return Err(missing());
        }
        Ok(bytes)
    }

    async fn json_blob<T: DeserializeOwned>(
        &self,
        what: &'static str,
        blob: &BlobRef,
    ) -> Result<T, ResearchError> {
        let bytes = self.blob(what, blob).await?;
        serde_json::from_slice(&bytes).map_err(|e| ResearchError::CorruptBlob {
            what,
            detail: e.to_string(),
        })
    }

    /// The host clock's wall time, in ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock.wall_ms()
    }

    /// The storage this store writes to (for the report publisher and tests).
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }
}

/// The key of a task, for hosts that list or watch `Table::Meta`.
pub fn task_key(session: &SessionId, id: &TaskId) -> String {
    ResearchTask::key_for(session, id)
}

/// The table tasks live in.
pub const TASK_TABLE: Table = <ResearchTask as Record>::TABLE;
