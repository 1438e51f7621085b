//! The model-facing built-in tools over the workspace and Artifacts (S5.1,
//! S7): their `ToolDefinition`s (effects declared) and their tool actors,
//! one per tool, made by the one tool-actor shell (`agent_kernel::tool`) and
//! sharing the [`WorkspaceTools`] directory. Each tool parses its arguments
//! and names the exact target its effect touches ([`Tool::effect_target`]:
//! both paths of a move); the shell verifies the invocation's capability
//! against it before any effect, and the tool answers with the `ToolResult`
//! envelope carrying the effect receipts. The proof of that verification goes
//! with the call: emptying the trash checks it for `destructive_local` again
//! at the workspace ([`crate::store::authorise_empty_trash`]).
//!
//! | tool | effects | idempotency | target |
//! | --- | --- | --- | --- |
//! | `workspace_list` | read_local | idempotent | the whole workspace (the root is `""`) |
//! | `workspace_read` | read_local | idempotent | `path` |
//! | `workspace_write` | write_local | idempotent (a replay of the same call is recognised) | `path` |
//! | `workspace_move` | write_local | idempotent (likewise) | the whole workspace (two paths) |
//! | `workspace_delete` | write_local (to the trash) | idempotent (likewise) | `path` |
//! | `workspace_restore` | write_local | non-idempotent | `path` |
//! | `workspace_empty_trash` | destructive_local | non-idempotent | the whole workspace |
//! | `publish_artifact` | read_local, write_local | idempotent (same bytes, same id) | the whole workspace |
//!
//! This module owns the tool actors and their registration; the definitions
//! are in `definitions`, a call's parsing and execution in `calls`, the
//! names in [`crate::tool_names`].

use std::sync::Arc;

use serde_json::Value;

use agent_capabilities::{Origin, Target, Trust};
use agent_kernel::host::Host;
use agent_kernel::protocol::{ToolDefinition, ToolFailure, ToolSuccess};
use agent_kernel::run::RunMode;
use agent_kernel::tool::{BuiltinTool, SpawnError, Tool, ToolContext, spawn_tool};

use crate::actor::WorkspaceDirectory;
use crate::error::WorkspaceError;
use crate::manifest::{Receipt, Source};

mod calls;
mod definitions;

pub use crate::tool_names::{DELETE, EMPTY_TRASH, LIST, MOVE, PUBLISH, READ, RESTORE, WRITE};
pub use calls::refuse_reserved;
use calls::{entry_json, parse_call, run_call};
pub use definitions::all_tool_definitions;

/// Most entries one `workspace_list` returns to the model.
pub const MAX_LIST_ENTRIES: usize = 200;

/// What every workspace tool actor shares: where the sessions are open.
pub struct WorkspaceTools {
    directory: WorkspaceDirectory,
}

impl std::fmt::Debug for WorkspaceTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceTools").finish_non_exhaustive()
    }
}

impl WorkspaceTools {
    pub fn new(directory: WorkspaceDirectory) -> WorkspaceTools {
        WorkspaceTools { directory }
    }
}

/// A workspace error as the call's failure. A mutation that failed in the
/// storage backend may have happened.
fn failure(
    ctx_provenance: agent_kernel::protocol::Provenance,
    err: &WorkspaceError,
    mutation: bool,
) -> ToolFailure {
    let mut message = err.to_string();
    if let Some(latest) = err.latest() {
        message.push_str(&format!("; latest: {}", entry_json(latest)));
    }
    let uncertain = mutation
        && matches!(
            err,
            WorkspaceError::Storage(
                agent_kernel::host::StorageError::Backend(_)
                    | agent_kernel::host::StorageError::Unavailable(_)
            )
        );
    ToolFailure {
        code: err.code().to_owned(),
        message,
        retryable: err.retryable(),
        trust: Trust::Internal,
        provenance: ctx_provenance,
        effect_may_have_happened: uncertain,
    }
}

/// One workspace tool: its definition and the shared directory.
struct WorkspaceTool {
    definition: ToolDefinition,
    shared: Arc<WorkspaceTools>,
}

fn builtin_provenance(tool: &str) -> agent_kernel::protocol::Provenance {
    agent_kernel::protocol::Provenance {
        origin: Origin::Builtin.to_string(),
        tool: tool.to_owned(),
        ..Default::default()
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Tool for WorkspaceTool {
    type Args = Value;

    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    /// The NFC path (or both paths of a move) the effect touches; a scope
    /// spelled in NFD still covers it, because scopes read paths with the
    /// same policy.
    fn effect_target(&self, arguments: &Value) -> Result<Option<Target>, ToolFailure> {
        let tool = &self.definition.name;
        parse_call(tool, arguments)
            .map(|call| Some(call.target()))
            .map_err(|e| failure(builtin_provenance(tool), &e, false))
    }

    /// Runs only after the shell verified the capability for the target.
    async fn call(&self, ctx: &ToolContext, arguments: Value) -> Result<ToolSuccess, ToolFailure> {
        let tool = ctx.tool();
        let call =
            parse_call(tool, &arguments).map_err(|e| failure(ctx.provenance(), &e, false))?;
        let Some(actors) = self.shared.directory.get(&ctx.session) else {
            return Err(ctx.fail(
                "workspace_not_open",
                format!(
                    "the workspace of session {} is not open on this host; reopen the session",
                    ctx.session
                ),
            ));
        };
        let source = Source::Tool {
            tool: tool.to_owned(),
            run: ctx.run.clone(),
            call_id: ctx.call_id.clone(),
        };
        let mutation = !agent_capabilities::is_read_only(&self.definition.effects);
        match run_call(&actors, call, source, ctx.verified()).await {
            Ok(done) => Ok(ToolSuccess {
                content: done.content,
                trust: done.trust,
                provenance: ctx.provenance(),
                references: done.references,
                receipts: done
                    .receipts
                    .iter()
                    .map(Receipt::to_effect_receipt)
                    .collect(),
            }),
            Err(e) => Err(failure(ctx.provenance(), &e, mutation)),
        }
    }
}

/// What the workspace tools need beyond the host: the sessions' open
/// workspaces.
#[derive(Clone)]
pub struct ToolDeps {
    pub directory: WorkspaceDirectory,
}

/// Spawn one tool actor per workspace tool (the shell, `agent_kernel::tool`),
/// all serving the sessions open in `deps.directory`: every definition of
/// [`all_tool_definitions`] with the address that serves it, for Agent runs
/// (the tool crates' one registration shape,
/// [`agent_kernel::tool::builtin`]).
pub fn builtin_tools(host: &Host, deps: ToolDeps) -> Result<Vec<BuiltinTool>, SpawnError> {
    let shared = Arc::new(WorkspaceTools::new(deps.directory));
    all_tool_definitions()
        .into_iter()
        .map(|definition| {
            let tool = WorkspaceTool {
                definition,
                shared: shared.clone(),
            };
            spawn_tool(host.executor.clone(), host.clock.clone(), tool)
                .map(|spawned| BuiltinTool::spawned(spawned, &[RunMode::Agent]))
        })
        .collect()
}
