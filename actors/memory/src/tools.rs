//! The model-facing memory tools, each an actor made by the one tool shell
//! (`agent_kernel::tool`), and the per-run grant they check before doing
//! anything ([`MemoryAccess`]: a run's [`MemoryScopes`] and its lease fence).
//!
//! | tool | effects | idempotency | target |
//! | --- | --- | --- | --- |
//! | `memory_search` | read_local | idempotent | none (scopes are checked against the grant) |
//! | `memory_save` | write_local (revision check, receipt) | idempotent (a replay of the same call is recognised) | none |
//! | `memory_forget` | write_local (kept, restorable) | idempotent (likewise) | none |
//!
//! The tools are for Agent runs only ([`TOOL_MODES`]): Deep Research never
//! sees Memory (S9.1), and [`RunGrants::allow`] refuses a grant to a run of
//! another mode, so a mistaken registration still reads and writes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use agent_capabilities::{EffectClass, Idempotency, Sensitivity, Trust};
use agent_kernel::host::{Fence, Host};
use agent_kernel::protocol::{ToolDefinition, ToolFailure, ToolSuccess};
use agent_kernel::run::RunMode;
use agent_kernel::tool::{BuiltinTool, SpawnError, Tool, ToolContext, spawn_tool};
use agent_kernel::{MaybeSend, MaybeSync, RunId, SessionId};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::record::{ChangedBy, MAX_ID_LEN, MAX_TEXT_BYTES, MemoryId};
use crate::scope::{MemoryScope, MemoryScopes, ScopeError};
use crate::store::{
    Expect, MAX_QUERY_BYTES, MAX_SEARCH_RESULTS, MemoryError, MemoryReceipt, MemoryStore,
};

pub const SEARCH: &str = "memory_search";
pub const SAVE: &str = "memory_save";
pub const FORGET: &str = "memory_forget";

/// The run modes the memory tools are registered for: Agent only (S9.1).
/// [`builtin_tools`] gives each of them with these modes.
pub const TOOL_MODES: [RunMode; 1] = [RunMode::Agent];

/// Results `memory_search` returns when the call names no limit.
pub const DEFAULT_SEARCH_RESULTS: usize = 5;

/// What one run may do with memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryGrant {
    /// The scopes it may read and write (its profile's Memory scopes).
    pub scopes: MemoryScopes,
    /// The session lease's fence its writes carry; `None` writes unfenced.
    pub fence: Option<Fence>,
}

/// Where the memory tools learn what a run may do. A run without a grant
/// is refused every memory call (`memory_not_granted`).
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait MemoryAccess: MaybeSend + MaybeSync {
    /// Async, so that a host can read a run's grant from where it keeps
    /// it (a run resumed after a restart).
    async fn grant(&self, session: &SessionId, run: &RunId) -> Option<MemoryGrant>;
}

/// A grant was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    #[error(
        "a {mode:?} run gets no memory: Deep Research and chat never see Memory (S9.1); only Agent runs do"
    )]
    NotAgentMode { mode: RunMode },
}

/// Grants per run, as a host records them when it starts a run and drops
/// them when the run ends. Shared by every memory tool actor.
#[derive(Debug, Clone, Default)]
pub struct RunGrants {
    runs: Arc<Mutex<BTreeMap<RunId, (SessionId, MemoryGrant)>>>,
}

impl RunGrants {
    pub fn new() -> RunGrants {
        RunGrants::default()
    }

    /// Let `run` of `session`, a run of `mode`, use memory as `grant` says.
    /// Only Agent runs may ([`TOOL_MODES`]).
    pub fn allow(
        &self,
        session: SessionId,
        run: RunId,
        mode: RunMode,
        grant: MemoryGrant,
    ) -> Result<(), GrantError> {
        if !TOOL_MODES.contains(&mode) {
            return Err(GrantError::NotAgentMode { mode });
        }
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(run, (session, grant));
        }
        Ok(())
    }

    /// Forget `run`'s grant (its run ended); true when it had one.
    pub fn revoke(&self, run: &RunId) -> bool {
        self.runs
            .lock()
            .map(|mut r| r.remove(run).is_some())
            .unwrap_or(false)
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl MemoryAccess for RunGrants {
    async fn grant(&self, session: &SessionId, run: &RunId) -> Option<MemoryGrant> {
        let runs = self.runs.lock().ok()?;
        let (owner, grant) = runs.get(run)?;
        (owner == session).then(|| grant.clone())
    }
}

const SCOPE_DOC: &str = "Memory scope: global, workspace, profile or session (the run's own), or a full scope such as workspace:<id>.";

/// The definitions of the three memory tools, for hosts to register.
pub fn all_tool_definitions() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::builder(SEARCH)
            .description("Search the memories this run may read (facts the person let the agent keep). Returns the best matches with their scope, id, revision and text.")
            .parameters(json!({"type": "object", "additionalProperties": false, "required": ["query"],
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_BYTES},
                    "scopes": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 200},
                        "description": "Only these scopes (each readable by this run); all readable scopes when absent."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS}
                }}))
            .effect(EffectClass::ReadLocal)
            .idempotency(Idempotency::Idempotent)
            .sensitivity(Sensitivity::Private)
            .build(),
        ToolDefinition::builder(SAVE)
            .description("Save a short fact to memory so later runs can use it. To change an existing memory, pass its id and its current revision as expectedRevision; a stale revision fails and returns the latest.")
            .parameters(json!({"type": "object", "additionalProperties": false, "required": ["text", "scope"],
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_BYTES},
                    "scope": {"type": "string", "maxLength": 200, "description": SCOPE_DOC},
                    "id": {"type": "string", "minLength": 1, "maxLength": MAX_ID_LEN},
                    "expectedRevision": {"type": "integer", "minimum": 1}
                }}))
            .effect(EffectClass::WriteLocal)
            .idempotency(Idempotency::Idempotent)
            .sensitivity(Sensitivity::Private)
            .build(),
        ToolDefinition::builder(FORGET)
            .description("Forget a memory. It is kept aside and the person can restore it.")
            .parameters(json!({"type": "object", "additionalProperties": false, "required": ["scope", "id"],
                "properties": {
                    "scope": {"type": "string", "maxLength": 200, "description": SCOPE_DOC},
                    "id": {"type": "string", "minLength": 1, "maxLength": MAX_ID_LEN},
                    "expectedRevision": {"type": "integer", "minimum": 1}
                }}))
            .effect(EffectClass::WriteLocal)
            .idempotency(Idempotency::Idempotent)
            .sensitivity(Sensitivity::Private)
            .build(),
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    scopes: Option<Vec<String>>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SaveArgs {
    text: String,
    scope: String,
    id: Option<String>,
    expected_revision: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ForgetArgs {
    scope: String,
    id: String,
    expected_revision: Option<u64>,
}

/// Why a call was refused or failed, before it becomes the envelope.
enum Refusal {
    Scope(ScopeError),
    Memory(MemoryError),
    Other(&'static str, String),
}

impl From<ScopeError> for Refusal {
    fn from(e: ScopeError) -> Refusal {
        Refusal::Scope(e)
    }
}

impl From<MemoryError> for Refusal {
    fn from(e: MemoryError) -> Refusal {
        Refusal::Memory(e)
    }
}

fn failure(ctx: &ToolContext, refusal: Refusal, mutation: bool) -> ToolFailure {
    match refusal {
        Refusal::Scope(e) => ctx.fail(e.code(), e.to_string()),
        Refusal::Other(code, message) => ctx.fail(code, message),
        Refusal::Memory(e) => {
            let mut message = e.to_string();
            if let Some(latest) = e.latest() {
                message.push_str(&format!("; latest: {}", latest.to_json()));
            }
            let uncertain = mutation
                && matches!(
                    e,
                    MemoryError::Storage(
                        agent_kernel::host::StorageError::Backend(_)
                            | agent_kernel::host::StorageError::Unavailable(_)
                    )
                );
            ToolFailure {
                effect_may_have_happened: uncertain,
                retryable: uncertain,
                ..ctx.fail(e.code(), message)
            }
        }
    }
}

fn parse<T: for<'de> Deserialize<'de>>(arguments: &Value) -> Result<T, Refusal> {
    serde_json::from_value(arguments.clone())
        .map_err(|e| Refusal::Other("invalid_arguments", e.to_string()))
}

fn memory_id(given: &str) -> Result<MemoryId, Refusal> {
    MemoryId::new(given).map_err(|e| Refusal::Other("invalid_arguments", e.to_string()))
}

/// One memory tool actor: its definition, the store and the grants.
struct MemoryTool {
    definition: ToolDefinition,
    store: MemoryStore,
    access: Arc<dyn MemoryAccess>,
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Tool for MemoryTool {
    type Args = Value;

    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    /// Runs only after the shell verified the capability; checks the run's
    /// grant before anything else.
    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<ToolSuccess, ToolFailure> {
        let mutation = ctx.tool() != SEARCH;
        let Some(grant) = self.access.grant(&ctx.session, &ctx.run).await else {
            return Err(ctx.fail(
                "memory_not_granted",
                format!(
                    "run {} has no memory access; its profile grants no Memory scopes",
                    ctx.run
                ),
            ));
        };
        let by = ChangedBy::Tool {
            run: ctx.run.clone(),
            call_id: ctx.call_id.clone(),
            tool: ctx.tool().to_owned(),
        };
        let result = match ctx.tool() {
            SEARCH => self.search(ctx, &grant, &arguments).await,
            SAVE => self.save(ctx, &grant, &arguments, by).await,
            FORGET => self.forget(ctx, &grant, &arguments, by).await,
            other => Err(Refusal::Other(
                "invalid_arguments",
                format!("{other:?} is not a memory tool"),
            )),
        };
        result.map_err(|r| failure(ctx, r, mutation))
    }
}

fn with_receipt(ctx: &ToolContext, content: Value, receipt: &MemoryReceipt) -> ToolSuccess {
    agent_kernel::tool::with_receipt(ctx.ok(content), receipt.to_effect_receipt())
}

impl MemoryTool {
    async fn search(
        &self,
        ctx: &ToolContext,
        grant: &MemoryGrant,
        arguments: &Value,
    ) -> Result<ToolSuccess, Refusal> {
        let args: SearchArgs = parse(arguments)?;
        let scopes: BTreeSet<MemoryScope> = match &args.scopes {
            Some(given) => given
                .iter()
                .map(|s| grant.scopes.resolve_read(s, &ctx.session))
                .collect::<Result<_, _>>()?,
            None => grant.scopes.read.clone(),
        };
        if scopes.is_empty() {
            return Err(Refusal::Scope(ScopeError::ReadDenied {
                scope: "any scope".into(),
                allowed: "nothing".into(),
            }));
        }
        let limit = args.limit.unwrap_or(DEFAULT_SEARCH_RESULTS);
        let hits = self.store.search(&scopes, &args.query, limit).await?;
        // What the person saved is theirs; what a tool call saved may carry
        // text from the web or a file, so the answer stays data (S5.4).
        let all_person = hits.iter().all(|h| h.record.saved_by == ChangedBy::Person);
        let results: Vec<Value> = hits
            .iter()
            .map(|h| {
                let mut v = h.record.to_json();
                v["score"] = json!(h.score);
                v
            })
            .collect();
        let content = json!({"results": results, "count": results.len(),
            "searchedScopes": scopes.iter().map(ToString::to_string).collect::<Vec<_>>()});
        Ok(ToolSuccess {
            trust: if all_person {
                Trust::User
            } else {
                Trust::ExternalUntrusted
            },
            ..ctx.ok(content)
        })
    }

    async fn save(
        &self,
        ctx: &ToolContext,
        grant: &MemoryGrant,
        arguments: &Value,
        by: ChangedBy,
    ) -> Result<ToolSuccess, Refusal> {
        let args: SaveArgs = parse(arguments)?;
        let scope = grant.scopes.resolve_write(&args.scope, &ctx.session)?;
        let (id, expect) = match (&args.id, args.expected_revision) {
            (None, None) => (MemoryId::for_call(&ctx.idempotency_key), Expect::New),
            (None, Some(_)) => {
                return Err(Refusal::Other(
                    "invalid_arguments",
                    "expectedRevision needs the id of the memory to change".into(),
                ));
            }
            (Some(id), None) => (memory_id(id)?, Expect::New),
            (Some(id), Some(r)) => (memory_id(id)?, Expect::Revision(r)),
        };
        let fence = grant.fence.as_ref();
        match self
            .store
            .save(fence, &scope, &id, &args.text, by.clone(), expect)
            .await
        {
            Ok((record, receipt)) => Ok(with_receipt(
                ctx,
                json!({"scope": record.scope, "id": record.id, "revision": record.revision,
                       "created": receipt.old_revision.is_none()}),
                &receipt,
            )),
            // A replay of this very call (same run and call id) already applied.
            Err(MemoryError::Exists { latest } | MemoryError::StaleRevision { latest, .. })
                if latest.saved_by == by =>
            {
                let receipt = MemoryReceipt {
                    operation: "save".into(),
                    scope: latest.scope.clone(),
                    id: latest.id.clone(),
                    old_revision: latest.revision.checked_sub(1).filter(|r| *r > 0),
                    new_revision: Some(latest.revision),
                    text_hash: latest.text_hash.clone(),
                };
                Ok(with_receipt(
                    ctx,
                    json!({"scope": latest.scope, "id": latest.id, "revision": latest.revision,
                           "replayed": true}),
                    &receipt,
                ))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn forget(
        &self,
        ctx: &ToolContext,
        grant: &MemoryGrant,
        arguments: &Value,
        by: ChangedBy,
    ) -> Result<ToolSuccess, Refusal> {
        let args: ForgetArgs = parse(arguments)?;
        let scope = grant.scopes.resolve_write(&args.scope, &ctx.session)?;
        let id = memory_id(&args.id)?;
        let fence = grant.fence.as_ref();
        match self
            .store
            .forget(fence, &scope, &id, args.expected_revision, by.clone())
            .await
        {
            Ok((record, receipt)) => Ok(with_receipt(
                ctx,
                json!({"scope": record.scope, "id": record.id, "revision": record.revision,
                       "note": "forgotten; the person can restore it"}),
                &receipt,
            )),
            Err(e @ MemoryError::NotFound { .. }) => {
                match self.store.get_forgotten(&scope, &id).await? {
                    Some(gone) if gone.forgotten.as_ref().is_some_and(|f| f.by == by) => {
                        let receipt = MemoryReceipt {
                            operation: "forget".into(),
                            scope: gone.scope.clone(),
                            id: gone.id.clone(),
                            old_revision: Some(gone.revision),
                            new_revision: None,
                            text_hash: gone.text_hash.clone(),
                        };
                        Ok(with_receipt(
                            ctx,
                            json!({"scope": gone.scope, "id": gone.id, "revision": gone.revision,
                               "replayed": true}),
                            &receipt,
                        ))
                    }
                    _ => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// What the memory tools need beyond the host: the store and the check of
/// each run's grant.
#[derive(Clone)]
pub struct ToolDeps {
    pub store: MemoryStore,
    pub access: Arc<dyn MemoryAccess>,
}

/// Spawn one tool actor per memory tool on the host's executor, all over
/// `deps.store` and checking `deps.access`: every definition of
/// [`all_tool_definitions`] with the address that serves it, for
/// [`TOOL_MODES`] only (the tool crates' one registration shape,
/// [`agent_kernel::tool::builtin`]).
pub fn builtin_tools(host: &Host, deps: ToolDeps) -> Result<Vec<BuiltinTool>, SpawnError> {
    all_tool_definitions()
        .into_iter()
        .map(|definition| {
            let tool = MemoryTool {
                definition,
                store: deps.store.clone(),
                access: deps.access.clone(),
            };
            spawn_tool(host.executor.clone(), host.clock.clone(), tool)
                .map(|spawned| BuiltinTool::spawned(spawned, &TOOL_MODES))
        })
        .collect()
}
