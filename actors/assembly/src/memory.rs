//! Memory and knowledge bases wired into runs (SPEC S10.1), one rule for
//! every host:
//! - the memory tools (`memory_search`, `memory_save`, `memory_forget`)
//!   and `knowledge_search`, registered for Agent runs only (Deep Research
//!   and chat never see Memory, S9.1);
//! - what each run may do with them (`RunGrants`): the Memory scopes and
//!   the knowledge allowlist its profile resolved to, kept in the run's
//!   stored configuration (`RunConfig::grants`) so that a run resumed after
//!   a restart keeps them, read back from there when this process has not
//!   seen the run;
//! - a run without a profile gets no Memory and no knowledge base: only a
//!   profile grants them; a grant with no scope or no base is no grant;
//! - the tools are offered only to runs holding their grant (`needs_grant`
//!   on the registration): a run without one is never shown a tool that
//!   could only refuse.
//! - the person's side: [`Assembly::memories`] and [`Assembly::knowledge`].

use std::sync::{Arc, OnceLock};

use agent_kernel::run::RunMode;
use agent_kernel::{RunId, SessionId};
use agent_knowledge::{KnowledgeAccess, KnowledgeAllowlist, KnowledgeBases, RunAllowlists};
use agent_memory::{
    MemoryAccess, MemoryGrant, MemoryScope, MemoryScopes, MemoryStore, RunGrants as MemoryGrants,
};
use agent_profiles::{Effective, MemoryScope as ProfileScope};
use agent_supervisor::{RunConfig, Runtime};

use crate::{Assembly, WorkspaceDirectory};

/// The key of the Memory scopes in `RunConfig::grants`.
pub const MEMORY_GRANT: &str = "memory";
/// The key of the knowledge allowlist in `RunConfig::grants`.
pub const KNOWLEDGE_GRANT: &str = "knowledge";

/// The Memory scopes and knowledge allowlist of each run, for the tools.
pub(crate) struct RunGrants {
    memory: MemoryGrants,
    knowledge: RunAllowlists,
    bases: KnowledgeBases,
    workspaces: WorkspaceDirectory,
    /// Set once the runtime exists (the tools are wired before it).
    runtime: OnceLock<Runtime>,
}

impl RunGrants {
    pub(crate) fn new(bases: KnowledgeBases, workspaces: WorkspaceDirectory) -> RunGrants {
        RunGrants {
            memory: MemoryGrants::new(),
            knowledge: RunAllowlists::default(),
            bases,
            workspaces,
            runtime: OnceLock::new(),
        }
    }

    pub(crate) fn set_runtime(&self, runtime: Runtime) {
        let _ = self.runtime.set(runtime);
    }

    /// The knowledge bases the `knowledge_search` tool searches.
    pub(crate) fn bases_handle(&self) -> KnowledgeBases {
        self.bases.clone()
    }

    /// The run's stored grants, remembered for this process.
    async fn learn(&self, session: &SessionId, run: &RunId) {
        let Some(runtime) = self.runtime.get() else {
            return;
        };
        let Ok(config) = runtime.config(run).await else {
            return;
        };
        if let Some(scopes) = config
            .grants
            .get(MEMORY_GRANT)
            .and_then(|v| serde_json::from_value::<MemoryScopes>(v.clone()).ok())
        {
            let grant = MemoryGrant {
                scopes,
                fence: None,
            };
            let _ = self
                .memory
                .allow(session.clone(), run.clone(), config.mode, grant);
        }
        if let Some(bases) = config
            .grants
            .get(KNOWLEDGE_GRANT)
            .and_then(|v| serde_json::from_value::<KnowledgeAllowlist>(v.clone()).ok())
            && config.mode == RunMode::Agent
        {
            self.knowledge.allow(session.clone(), run.clone(), bases);
        }
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl MemoryAccess for RunGrants {
    async fn grant(&self, session: &SessionId, run: &RunId) -> Option<MemoryGrant> {
        if self.memory.grant(session, run).await.is_none() {
            self.learn(session, run).await;
        }
        let mut grant = self.memory.grant(session, run).await?;
        // Writes carry the fence of the session's open workspace: a tab that
        // lost the session cannot write its memories.
        grant.fence = self.workspaces.get(session).map(|open| open.fence.clone());
        Some(grant)
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl KnowledgeAccess for RunGrants {
    async fn allowlist(&self, session: &SessionId, run: &RunId) -> Option<KnowledgeAllowlist> {
        if self.knowledge.allowlist(session, run).await.is_none() {
            self.learn(session, run).await;
        }
        let allowlist = self.knowledge.allowlist(session, run).await?;
        // The bases are indexed on first use (the assembly is wired
        // without awaiting).
        if let Err(e) = self.bases.load().await {
            tracing::warn!(error = %e, "knowledge bases could not be indexed");
        }
        Some(allowlist)
    }
}

/// The concrete Memory scopes of a run in `session` under `effective`: a
/// profile's scope kinds made concrete (the session, its workspace — one
/// per session here — the profile itself, global).
pub fn memory_scopes(effective: &Effective, session: &SessionId) -> MemoryScopes {
    let concrete = |kind: &ProfileScope| -> Option<MemoryScope> {
        Some(match kind {
            ProfileScope::Global => MemoryScope::Global,
            ProfileScope::Workspace => MemoryScope::Workspace(session.to_string()),
            ProfileScope::Profile => {
                MemoryScope::Profile(effective.profile.as_ref()?.id.to_string())
            }
            ProfileScope::Session => MemoryScope::Session(session.to_string()),
        })
    };
    MemoryScopes {
        read: effective.memory.read.iter().filter_map(concrete).collect(),
        write: effective.memory.write.iter().filter_map(concrete).collect(),
    }
}

/// Put the run's Memory scopes and knowledge allowlist into `config`
/// (only a run under a profile gets any; only Agent runs use them).
pub(crate) fn grant_into(
    config: &mut RunConfig,
    effective: &Effective,
    session: &SessionId,
    bases: &KnowledgeBases,
) {
    if effective.profile.is_none() || config.mode != RunMode::Agent {
        return;
    }
    let scopes = memory_scopes(effective, session);
    if (!scopes.read.is_empty() || !scopes.write.is_empty())
        && let Ok(value) = serde_json::to_value(scopes)
    {
        config.grants.insert(MEMORY_GRANT.to_owned(), value);
    }
    let allowed: Vec<String> = match &effective.knowledge {
        Some(list) => list.iter().cloned().collect(),
        None => bases.names(),
    };
    let allowlist = KnowledgeAllowlist::of(allowed.iter().map(String::as_str));
    if !allowlist.bases.is_empty()
        && let Ok(value) = serde_json::to_value(allowlist)
    {
        config.grants.insert(KNOWLEDGE_GRANT.to_owned(), value);
    }
}

impl Assembly {
    /// The memories of this host's storage, for the person (list, edit,
    /// delete, restore, S10.1).
    pub fn memories(&self) -> MemoryStore {
        MemoryStore::new(self.host.storage.clone(), self.host.clock.clone())
    }

    /// The knowledge bases of this host (indexed on first use).
    pub async fn knowledge(&self) -> Result<KnowledgeBases, agent_knowledge::KnowledgeError> {
        self.grants.bases.load().await?;
        Ok(self.grants.bases.clone())
    }
}

pub(crate) type SharedGrants = Arc<RunGrants>;
