//! Starting runs: a top-level run in a session, a child run of a parent
//! in the parent's session, each optionally under an id the caller chose.
//! The checks that need no storage (the configuration, what the model can
//! do) run in the caller's task; the durable part (the session's lease,
//! the conversation the run starts from, the batch that writes the run
//! with its prompt, configuration and first transcript segment, then its
//! supervisor) is a step of the live supervisors' actor (`super::live`).

use agent_kernel::host::{BlobRef, Storage, Table};
use agent_kernel::ids::{RunId, SessionId};
use agent_kernel::run::{ActivityKind, AgentRun, CheckpointStage, RunMode, RunStatus, Usage};

use super::Runtime;
use super::live::{LiveMsg, StartRequest, Supervisors, open_writer};
use crate::compaction::SessionSummaries;
use crate::config::{HistoryMessage, RunConfig};
use crate::conversation::SessionConversation;
use crate::error::RunError;
use crate::message::Message;
use crate::store::{RunMeta, RunWriter, load_run};
use crate::supervisor::Msg;
use crate::transcript::{TranscriptLog, Window};

/// What a new run's transcript starts from.
#[derive(Default)]
struct ConversationStart {
    /// An embedder's history, first in the run's own first segment.
    history: Vec<Message>,
    /// The newest segment of the session's earlier turns.
    earlier: Option<BlobRef>,
    window: StartWindow,
    /// The session's conversation, when this start added turns to it.
    conversation: Option<SessionConversation>,
}

#[derive(Default)]
struct StartWindow {
    /// Messages before the run's first segment in its chain.
    from_len: u64,
    window: Window,
    kept_turns: u64,
    dropped_turns: u64,
    /// The summary sent before the window (S12.4).
    summary: Option<crate::conversation::SummaryUse>,
}

impl Runtime {
    /// Start a run in `session`: take the session's lease, store the prompt
    /// and config blobs, then the run record, and spawn its supervisor.
    pub async fn start(
        &self,
        session: &SessionId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        self.start_inner(session, None, None, prompt, config).await
    }

    /// [`Runtime::start`] under an id the caller chose beforehand (a run
    /// handed to a worker through a queue gets its id when it is queued, so
    /// that the caller can name it at once). Refused with
    /// [`RunError::AlreadyExists`] when a run of that id is stored: a
    /// queued start taken again after a lost worker never starts twice.
    pub async fn start_as(
        &self,
        id: RunId,
        session: &SessionId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        self.start_inner(session, None, Some(id), prompt, config)
            .await
    }

    /// Start a child run of `parent` in the same session, under the same
    /// (reentrant) lease; parent and child name each other in their records.
    pub async fn start_child(
        &self,
        parent: &RunId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        self.start_child_inner(parent, None, prompt, config).await
    }

    /// [`Runtime::start_child`] under an id the caller chose (a Deep
    /// Research phase's run is named after its task, so that a phase taken
    /// up again after a reload finds its run instead of starting a second);
    /// refused with [`RunError::AlreadyExists`] when a run of that id is
    /// stored.
    pub async fn start_child_as(
        &self,
        id: RunId,
        parent: &RunId,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        self.start_child_inner(parent, Some(id), prompt, config)
            .await
    }

    async fn start_child_inner(
        &self,
        parent: &RunId,
        chosen: Option<RunId>,
        prompt: &str,
        config: RunConfig,
    ) -> Result<RunId, RunError> {
        let (parent_run, _) = load_run(&*self.host().storage, parent).await?;
        let child = self
            .start_inner(
                &parent_run.session,
                Some(parent.clone()),
                chosen,
                prompt,
                config,
            )
            .await?;
        // A parent supervisor found live may end before it reads the
        // request (its run finished meanwhile): then it wrote its last and
        // the parent's record is linked here instead (linking is idempotent).
        if let Some(addr) = self.find(parent).await? {
            let c = child.clone();
            match addr.ask(|reply| Msg::LinkChild { child: c, reply }).await {
                Ok(linked) => return linked.map(|()| child),
                Err(e) => {
                    tracing::debug!(run = %parent, error = %e, "the parent's supervisor ended; linking its record directly");
                }
            }
        }
        let guard = self.inner.leases.acquire(&parent_run.session).await?;
        let (run, bytes) = load_run(&*self.host().storage, parent).await?;
        let mut writer = open_writer(&self.inner.ctx, guard.fence(), run, bytes).await?;
        crate::supervisor::link_child(&mut writer, child.clone()).await?;
        Ok(child)
    }

    async fn start_inner(
        &self,
        session: &SessionId,
        parent: Option<RunId>,
        chosen: Option<RunId>,
        prompt: &str,
        mut config: RunConfig,
    ) -> Result<RunId, RunError> {
        config.validate()?;
        // What the model can do decides what the run may be (S13.1, S9.1)
        // and, unless the run says otherwise, its context window.
        let provider = crate::provider::set::resolve(
            &self.inner.ctx.provider,
            config.model.provider.as_deref(),
        )
        .map_err(|_| RunError::UnknownProvider {
            name: config.model.provider.clone().unwrap_or_default(),
        })?;
        let capabilities = provider.capabilities(&config.model.model);
        if !capabilities.tool_calling && config.mode != RunMode::Chat {
            return Err(RunError::ModelWithoutTools {
                model: config.model.model.clone(),
                mode: match config.mode {
                    RunMode::Agent => "agent",
                    RunMode::Research => "research",
                    RunMode::Chat => "chat",
                },
            });
        }
        if config.model.context_window_tokens.is_none() {
            config.model.context_window_tokens = Some(
                capabilities
                    .context_window_tokens
                    .max(crate::config::MIN_CONTEXT_WINDOW_TOKENS),
            );
        }
        self.inner
            .live
            .ask(|reply| LiveMsg::Start {
                request: Box::new(StartRequest {
                    session: session.clone(),
                    parent,
                    chosen,
                    prompt: prompt.to_owned(),
                    config,
                }),
                reply,
            })
            .await?
    }
}

impl Supervisors {
    /// The durable part of a start (see [`Runtime::start`]).
    pub(super) async fn start(&mut self, request: StartRequest) -> Result<RunId, RunError> {
        let StartRequest {
            session,
            parent,
            chosen,
            prompt,
            config,
        } = request;
        let session = &session;
        let prompt = prompt.as_str();
        let host = &self.ctx.host;
        // Run by the live supervisors' actor, one step at a time: the
        // session's conversation record is read, extended and written by
        // the start's batch with no other start in between. (The same
        // order as a command's spawn: the actor's turn, then the lease.)
        let guard = self.leases.acquire(session).await?;
        let id = match chosen {
            // Checked under the session's lease: every writer of a run of
            // this session is fenced by it, so nobody creates it meanwhile.
            Some(id) => {
                if host.storage.get(Table::Runs, id.as_str()).await?.is_some() {
                    return Err(RunError::AlreadyExists(id));
                }
                id
            }
            None => RunId::new(agent_kernel::host::random_id(&*host.entropy, "run-"))?,
        };
        let storage = host.storage.clone();
        let start = conversation_start(&*storage, session, &parent, &config, prompt).await?;
        let mut messages: Vec<Message> = start.history;
        messages.push(Message::User {
            content: prompt.to_owned(),
        });
        let now = host.clock.wall_ms();
        let run = AgentRun {
            id: id.clone(),
            session: session.clone(),
            parent,
            children: Vec::new(),
            mode: config.mode,
            status: RunStatus::Running,
            stop_reason: None,
            usage: Usage::default(),
            budget: config.budget,
            prompt: BlobRef::of(prompt.as_bytes()),
            output: None,
            plan: None,
            next_activity: 0,
            status_history: vec![RunStatus::Running],
            created_at_ms: now,
            updated_at_ms: now,
        };
        let mut writer = RunWriter::create(
            storage.clone(),
            host.clock.clone(),
            self.ctx.events.clone(),
            guard.fence(),
            run,
        );
        let mut tx = writer.begin();
        // The prompt, the configuration and the first transcript segment
        // ride in the batch that writes the run: one durable commit.
        tx.blob(prompt.as_bytes().to_vec());
        let config_blob = tx.json_blob(&config)?;
        let (_, transcript_blob) =
            TranscriptLog::start_after(start.earlier, start.window.from_len, messages, |b| {
                tx.blob(b)
            })?;
        tx.put(&RunMeta {
            run: id.clone(),
            config: config_blob,
            window: start.window.window,
            summary: start.window.summary,
        });
        if let Some(conversation) = &start.conversation {
            tx.put(conversation);
        }
        if start.window.dropped_turns > 0 {
            tx.activity(ActivityKind::ConversationTrimmed {
                dropped_turns: start.window.dropped_turns,
                kept_turns: start.window.kept_turns,
            });
        }
        tx.checkpoint(
            CheckpointStage::BeforeModelRequest { round: 1 },
            transcript_blob,
        );
        writer.commit(tx).await?;
        tracing::info!(run = %id, session = %session, "run started");
        self.spawn(writer, guard).await?;
        Ok(id)
    }
}

/// Where a new run's conversation starts (S12, [`crate::conversation`]):
/// an embedder's `history`; nothing, for a child run or Deep Research;
/// else its session's conversation, brought up to date with the runs
/// that ended since and kept within the context rule.
async fn conversation_start(
    storage: &dyn Storage,
    session: &SessionId,
    parent: &Option<RunId>,
    config: &RunConfig,
    prompt: &str,
) -> Result<ConversationStart, RunError> {
    if let Some(history) = &config.history {
        let len = history.len() as u64;
        return Ok(ConversationStart {
            history: history.iter().map(HistoryMessage::to_message).collect(),
            earlier: None,
            window: StartWindow {
                from_len: 0,
                window: Window {
                    from: 0,
                    own_from: len,
                },
                kept_turns: 0,
                dropped_turns: 0,
                summary: None,
            },
            conversation: None,
        });
    }
    if parent.is_some() || !config.mode.is_conversation_turn() {
        return Ok(ConversationStart::default());
    }
    let mut conversation = SessionConversation::load(storage, session).await?;
    let runs = crate::store::runs_of_session(storage, session).await?;
    let added = conversation.catch_up(storage, runs).await?;
    let summaries = SessionSummaries::load(storage, session).await?;
    let plan = conversation.plan(
        summaries.latest(),
        config.model.context_window(),
        prompt.len() as u64,
    );
    Ok(ConversationStart {
        history: Vec::new(),
        earlier: conversation.head.clone(),
        window: StartWindow {
            from_len: conversation.len(),
            window: plan.window,
            kept_turns: plan.kept_turns,
            dropped_turns: plan.dropped_turns,
            summary: plan.summary,
        },
        conversation: (added > 0).then_some(conversation),
    })
}
