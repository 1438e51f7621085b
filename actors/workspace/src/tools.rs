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

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use agent_capabilities::{
    EffectClass, EffectSet, Idempotency, Origin, Sensitivity, Target, TargetScope, Trust, Verified,
};
use agent_kernel::host::Host;
use agent_kernel::protocol::{
    Reference, ReferenceKind, TargetRule, ToolDefinition, ToolFailure, ToolSuccess,
};
use agent_kernel::run::RunMode;
use agent_kernel::tool::{BuiltinTool, SpawnError, Tool, ToolContext, spawn_tool};

use crate::actor::{SessionActors, WorkspaceDirectory};
use crate::artifact::PublishedFrom;
use crate::error::WorkspaceError;
use crate::limits::{MAX_READ_BYTES, RESULTS_FOLDER};
use crate::manifest::{FileEntry, Receipt, Source, TrashEntry};
use crate::mime::{guess_mime, is_text};
use crate::path::WorkspacePath;
use crate::store::Expect;

pub const LIST: &str = "workspace_list";
pub const READ: &str = "workspace_read";
pub const WRITE: &str = "workspace_write";
pub const MOVE: &str = "workspace_move";
pub const DELETE: &str = "workspace_delete";
pub const RESTORE: &str = "workspace_restore";
pub const EMPTY_TRASH: &str = "workspace_empty_trash";
pub const PUBLISH: &str = "publish_artifact";

/// Most entries one `workspace_list` returns to the model.
pub const MAX_LIST_ENTRIES: usize = 200;

fn def(
    name: &str,
    description: &str,
    parameters: Value,
    effects: &[EffectClass],
    idempotency: Idempotency,
    target: TargetRule,
) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
        origin: Origin::Builtin,
        provider: None,
        effects: effects.iter().copied().collect::<EffectSet>(),
        idempotency,
        sensitivity: Sensitivity::Private,
        target,
        annotations: None,
    }
}

fn path_arg(field: &str) -> TargetRule {
    TargetRule::WorkspacePathArg {
        field: field.to_owned(),
    }
}

fn whole_workspace() -> TargetRule {
    TargetRule::Fixed {
        scope: TargetScope::Workspace {
            prefix: String::new(),
        },
    }
}

const PATH_DOC: &str =
    "Path relative to the session workspace root, folders separated by /, e.g. notes/plan.md";

/// The definitions of every workspace and Artifact tool, for hosts to register.
pub fn all_tool_definitions() -> Vec<ToolDefinition> {
    use EffectClass::*;
    use Idempotency::*;
    vec![
        def(
            LIST,
            "List the files and sub-folders of a workspace folder (\"\" is the root), or the trash.",
            json!({"type": "object", "additionalProperties": false, "required": ["folder"],
            "properties": {
                "folder": {"type": "string", "description": "Folder to list; \"\" for the root."},
                "recursive": {"type": "boolean", "description": "List every file below the folder."},
                "trash": {"type": "boolean", "description": "List the trash instead (folder must be \"\")."}
            }}),
            &[ReadLocal],
            Idempotent,
            // "" (the root) is not a path the pipeline's path rule accepts.
            whole_workspace(),
        ),
        def(
            READ,
            "Read a workspace file. Returns its text (up to 65536 bytes per call; use offset to read on), revision and MIME type.",
            json!({"type": "object", "additionalProperties": false, "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": PATH_DOC},
                "offset": {"type": "integer", "minimum": 0},
                "length": {"type": "integer", "minimum": 1, "maximum": MAX_READ_BYTES}
            }}),
            &[ReadLocal],
            Idempotent,
            path_arg("path"),
        ),
        def(
            WRITE,
            "Create a workspace file, or replace or append to one. Replacing or appending to an existing file needs its current revision as expectedRevision; a stale revision fails and returns the latest state.",
            json!({"type": "object", "additionalProperties": false, "required": ["path", "content"],
            "properties": {
                "path": {"type": "string", "description": PATH_DOC},
                "content": {"type": "string"},
                "mime": {"type": "string", "description": "MIME type; guessed from the extension when absent."},
                "expectedRevision": {"type": "integer", "minimum": 1},
                "append": {"type": "boolean"}
            }}),
            &[WriteLocal],
            Idempotent,
            path_arg("path"),
        ),
        def(
            MOVE,
            "Move or rename a workspace file. The destination must not exist.",
            json!({"type": "object", "additionalProperties": false, "required": ["from", "to"],
            "properties": {
                "from": {"type": "string", "description": PATH_DOC},
                "to": {"type": "string", "description": PATH_DOC},
                "expectedRevision": {"type": "integer", "minimum": 1}
            }}),
            &[WriteLocal],
            Idempotent,
            whole_workspace(),
        ),
        def(
            DELETE,
            "Move a workspace file to the trash (it can be restored until the trash is emptied).",
            json!({"type": "object", "additionalProperties": false, "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": PATH_DOC},
                "expectedRevision": {"type": "integer", "minimum": 1}
            }}),
            &[WriteLocal],
            Idempotent,
            path_arg("path"),
        ),
        def(
            RESTORE,
            "Restore a file from the trash to its original path (the most recently deleted one, or trashId).",
            json!({"type": "object", "additionalProperties": false, "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": "The file's original path."},
                "trashId": {"type": "string"}
            }}),
            &[WriteLocal],
            NonIdempotent,
            path_arg("path"),
        ),
        def(
            EMPTY_TRASH,
            "Permanently delete everything in the workspace trash. Cannot be undone; asks the person first.",
            json!({"type": "object", "additionalProperties": false, "properties": {}}),
            &[DestructiveLocal],
            NonIdempotent,
            whole_workspace(),
        ),
        def(
            PUBLISH,
            "Publish an immutable Artifact from a workspace file (path) or from content. Later edits of the file never change it; the same bytes give the same Artifact id.",
            json!({"type": "object", "additionalProperties": false, "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 255},
                "mime": {"type": "string"},
                "path": {"type": "string", "description": PATH_DOC},
                "expectedRevision": {"type": "integer", "minimum": 1},
                "content": {"type": "string"}
            }}),
            &[ReadLocal, WriteLocal],
            Idempotent,
            whole_workspace(),
        ),
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    folder: String,
    #[serde(default)]
    recursive: bool,
    #[serde(default)]
    trash: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: u64,
    length: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WriteArgs {
    path: String,
    content: String,
    mime: Option<String>,
    expected_revision: Option<u64>,
    #[serde(default)]
    append: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MoveArgs {
    from: String,
    to: String,
    expected_revision: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DeleteArgs {
    path: String,
    expected_revision: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RestoreArgs {
    path: String,
    trash_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmptyArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PublishArgs {
    name: String,
    mime: Option<String>,
    path: Option<String>,
    expected_revision: Option<u64>,
    content: Option<String>,
}

/// A parsed call: what it touches and what to do.
enum Call {
    List(Option<WorkspacePath>, ListArgs),
    Read(WorkspacePath, ReadArgs),
    Write(WorkspacePath, WriteArgs),
    Move(WorkspacePath, WorkspacePath, MoveArgs),
    Delete(WorkspacePath, DeleteArgs),
    Restore(WorkspacePath, RestoreArgs),
    EmptyTrash,
    Publish(Option<WorkspacePath>, PublishArgs),
}

fn target_of(path: &WorkspacePath) -> Target {
    Target::WorkspacePath {
        path: path.to_string(),
    }
}

fn root_target() -> Target {
    Target::WorkspacePath {
        path: String::new(),
    }
}

impl Call {
    fn target(&self) -> Target {
        match self {
            Call::List(Some(p), _) => target_of(p),
            Call::List(None, _) | Call::EmptyTrash => root_target(),
            Call::Read(p, _) | Call::Write(p, _) | Call::Delete(p, _) | Call::Restore(p, _) => {
                target_of(p)
            }
            Call::Move(from, to, _) => Target::Many {
                targets: vec![target_of(from), target_of(to)],
            },
            Call::Publish(Some(p), _) => target_of(p),
            Call::Publish(None, _) => Target::Nothing,
        }
    }
}

fn args<T: for<'de> Deserialize<'de>>(arguments: &Value) -> Result<T, WorkspaceError> {
    serde_json::from_value(arguments.clone()).map_err(|e| WorkspaceError::InvalidArgument {
        field: "arguments",
        reason: e.to_string(),
    })
}

fn parse_call(tool: &str, arguments: &Value) -> Result<Call, WorkspaceError> {
    Ok(match tool {
        LIST => {
            let a: ListArgs = args(arguments)?;
            Call::List(WorkspacePath::parse_folder(&a.folder)?, a)
        }
        READ => {
            let a: ReadArgs = args(arguments)?;
            Call::Read(WorkspacePath::parse(&a.path)?, a)
        }
        WRITE => {
            let a: WriteArgs = args(arguments)?;
            Call::Write(WorkspacePath::parse(&a.path)?, a)
        }
        MOVE => {
            let a: MoveArgs = args(arguments)?;
            Call::Move(
                WorkspacePath::parse(&a.from)?,
                WorkspacePath::parse(&a.to)?,
                a,
            )
        }
        DELETE => {
            let a: DeleteArgs = args(arguments)?;
            Call::Delete(WorkspacePath::parse(&a.path)?, a)
        }
        RESTORE => {
            let a: RestoreArgs = args(arguments)?;
            Call::Restore(WorkspacePath::parse(&a.path)?, a)
        }
        EMPTY_TRASH => {
            let _: EmptyArgs = args(arguments)?;
            Call::EmptyTrash
        }
        PUBLISH => {
            let a: PublishArgs = args(arguments)?;
            let path = match (&a.path, &a.content) {
                (Some(p), None) => Some(WorkspacePath::parse(p)?),
                (None, Some(_)) => None,
                _ => {
                    return Err(WorkspaceError::InvalidArgument {
                        field: "arguments",
                        reason: "give exactly one of path (a workspace file) or content".into(),
                    });
                }
            };
            if path.is_none() && a.expected_revision.is_some() {
                return Err(WorkspaceError::InvalidArgument {
                    field: "expectedRevision",
                    reason: "expectedRevision applies only when publishing from a path".into(),
                });
            }
            Call::Publish(path, a)
        }
        other => {
            return Err(WorkspaceError::InvalidArgument {
                field: "tool",
                reason: format!("{other:?} is not a workspace tool"),
            });
        }
    })
}

fn in_reserved(path: &WorkspacePath) -> bool {
    path.segments()
        .next()
        .is_some_and(|s| s.to_lowercase() == RESULTS_FOLDER)
}

/// Refuse a path in the reserved folder only the runtime writes to (result
/// spills): for the tools and for a person's attachments alike.
pub fn refuse_reserved(path: &WorkspacePath) -> Result<(), WorkspaceError> {
    if in_reserved(path) {
        return Err(WorkspaceError::Reserved {
            path: path.to_string(),
            folder: RESULTS_FOLDER.to_owned(),
        });
    }
    Ok(())
}

fn entry_json(e: &FileEntry) -> Value {
    json!({"path": e.path, "revision": e.revision, "mime": e.mime, "size": e.size,
           "hash": e.hash, "updatedAtMs": e.updated_at_ms})
}

fn trash_json(t: &TrashEntry) -> Value {
    json!({"trashId": t.id, "path": t.entry.path, "revision": t.entry.revision,
           "size": t.entry.size, "deletedAtMs": t.deleted_at_ms})
}

fn file_reference(e: &FileEntry) -> Reference {
    Reference {
        kind: ReferenceKind::WorkspaceFile,
        id: e.path.to_string(),
        name: Some(e.path.name().to_owned()),
        mime: Some(e.mime.clone()),
        size: e.size,
        hash: e.hash.clone(),
    }
}

/// What a successful call produced.
struct Done {
    content: Value,
    trust: Trust,
    references: Vec<Reference>,
    receipts: Vec<Receipt>,
}

impl Done {
    fn internal(content: Value, receipts: Vec<Receipt>) -> Done {
        Done {
            content,
            trust: Trust::Internal,
            references: Vec::new(),
            receipts,
        }
    }
}

/// Content a person wrote is `user`; anything a tool, an import or an
/// attachment brought may carry web or plugin text, or someone else's
/// instructions, and stays `external_untrusted` (S5.4, S12.3).
fn trust_of(entry: &FileEntry) -> Trust {
    match entry.source {
        Source::User => Trust::User,
        Source::Tool { .. } | Source::Import { .. } | Source::Attachment { .. } => {
            Trust::ExternalUntrusted
        }
    }
}

/// The longest prefix of `bytes` that is whole UTF-8, when the rest is only
/// a character cut at the window's end.
fn text_window(bytes: &[u8]) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok(),
        Err(_) => None,
    }
}

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

/// Carry out a parsed call; `proof` is the verified capability, which the
/// destructive operations check again at the workspace.
async fn run_call(
    actors: &SessionActors,
    call: Call,
    source: Source,
    proof: &Verified,
) -> Result<Done, WorkspaceError> {
    let ws = &actors.workspace;
    match call {
        Call::List(folder, a) => {
            if a.trash {
                if folder.is_some() {
                    return Err(WorkspaceError::InvalidArgument {
                        field: "folder",
                        reason: "the trash is listed as a whole; pass folder \"\"".into(),
                    });
                }
                let trash = ws.list_trash().await?;
                let total = trash.len();
                let shown: Vec<Value> = trash
                    .iter()
                    .rev()
                    .take(MAX_LIST_ENTRIES)
                    .map(trash_json)
                    .collect();
                return Ok(Done::internal(
                    json!({"trash": shown, "total": total, "truncated": total > MAX_LIST_ENTRIES}),
                    Vec::new(),
                ));
            }
            let listing = ws.list(folder.as_ref(), a.recursive).await?;
            let total = listing.files.len() + listing.folders.len();
            let files: Vec<Value> = listing
                .files
                .iter()
                .take(MAX_LIST_ENTRIES)
                .map(entry_json)
                .collect();
            let room = MAX_LIST_ENTRIES.saturating_sub(files.len());
            let folders: Vec<&String> = listing.folders.iter().take(room).collect();
            Ok(Done::internal(
                json!({"folder": listing.folder, "files": files, "folders": folders,
                       "total": total, "truncated": total > MAX_LIST_ENTRIES}),
                Vec::new(),
            ))
        }
        Call::Read(path, a) => {
            let (entry, bytes) = ws.read(&path).await?;
            let len = a.length.unwrap_or(MAX_READ_BYTES).min(MAX_READ_BYTES);
            let start = usize::try_from(a.offset.min(entry.size))
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            let end = start
                .saturating_add(usize::try_from(len).unwrap_or(usize::MAX))
                .min(bytes.len());
            let window = &bytes[start..end];
            let mut content = entry_json(&entry);
            content["offset"] = json!(start);
            match (
                is_text(&entry.mime) || std::str::from_utf8(&bytes).is_ok(),
                text_window(window),
            ) {
                (true, Some(text)) => {
                    let next = start + text.len();
                    content["content"] = json!(text);
                    content["truncated"] = json!(next < bytes.len());
                    if next < bytes.len() {
                        content["nextOffset"] = json!(next);
                    }
                }
                _ => {
                    content["content"] = Value::Null;
                    content["binary"] = json!(true);
                    content["note"] =
                        json!("binary content is not shown; publish it as an Artifact to share it");
                }
            }
            Ok(Done {
                content,
                trust: trust_of(&entry),
                references: vec![file_reference(&entry)],
                receipts: Vec::new(),
            })
        }
        Call::Write(path, a) => {
            refuse_reserved(&path)?;
            let mime = a
                .mime
                .clone()
                .unwrap_or_else(|| guess_mime(path.name()).to_owned());
            let expect = match a.expected_revision {
                Some(r) => Expect::Revision(r),
                None => Expect::MustNotExist,
            };
            let bytes = a.content.into_bytes();
            let result = if a.append {
                ws.append(&path, bytes, &mime, expect, source.clone()).await
            } else {
                ws.write(&path, bytes, &mime, expect, source.clone()).await
            };
            match result {
                Ok((entry, receipt)) => Ok(Done {
                    content: json!({"path": entry.path, "revision": entry.revision, "size": entry.size,
                        "hash": entry.hash, "created": receipt.old_revision.is_none()}),
                    trust: Trust::Internal,
                    references: vec![file_reference(&entry)],
                    receipts: vec![receipt],
                }),
                // A replay of this very call (same run and call id) already applied.
                Err(
                    WorkspaceError::StaleRevision { latest, .. }
                    | WorkspaceError::AlreadyExists { latest },
                ) if latest.source == source => {
                    let mut receipt = Receipt::new(
                        if a.append {
                            crate::manifest::Operation::Append
                        } else {
                            crate::manifest::Operation::Write
                        },
                        path.as_str(),
                    );
                    receipt.new_revision = Some(latest.revision);
                    receipt.content_hash = Some(latest.hash.clone());
                    receipt.size = Some(latest.size);
                    Ok(Done {
                        content: json!({"path": latest.path, "revision": latest.revision, "size": latest.size,
                            "hash": latest.hash, "replayed": true}),
                        trust: Trust::Internal,
                        references: vec![file_reference(&latest)],
                        receipts: vec![receipt],
                    })
                }
                Err(e) => Err(e),
            }
        }
        Call::Move(from, to, a) => {
            refuse_reserved(&to)?;
            let expect = a.expected_revision.map_or(Expect::Any, Expect::Revision);
            match ws.rename(&from, &to, expect, source.clone()).await {
                Ok((entry, receipt)) => Ok(Done {
                    content: json!({"from": from, "to": entry.path, "revision": entry.revision}),
                    trust: Trust::Internal,
                    references: vec![file_reference(&entry)],
                    receipts: vec![receipt],
                }),
                Err(e @ (WorkspaceError::NotFound { .. } | WorkspaceError::Vanished { .. })) => {
                    match ws.stat(&to).await? {
                        Some(latest) if latest.source == source => {
                            let mut receipt =
                                Receipt::new(crate::manifest::Operation::Move, from.as_str());
                            receipt.to = Some(to.to_string());
                            receipt.new_revision = Some(latest.revision);
                            receipt.content_hash = Some(latest.hash.clone());
                            Ok(Done {
                                content: json!({"from": from, "to": latest.path, "revision": latest.revision, "replayed": true}),
                                trust: Trust::Internal,
                                references: vec![file_reference(&latest)],
                                receipts: vec![receipt],
                            })
                        }
                        _ => Err(e),
                    }
                }
                Err(e) => Err(e),
            }
        }
        Call::Delete(path, a) => {
            let expect = a.expected_revision.map_or(Expect::Any, Expect::Revision);
            match ws.delete(&path, expect, source.clone()).await {
                Ok((trash, receipt)) => Ok(Done::internal(
                    json!({"path": path, "trashId": trash.id, "revision": trash.entry.revision,
                           "note": "moved to the trash; workspace_restore brings it back"}),
                    vec![receipt],
                )),
                Err(e @ (WorkspaceError::NotFound { .. } | WorkspaceError::Vanished { .. })) => {
                    match ws.find_in_trash(&path).await? {
                        Some(trash) if trash.deleted_by == source => {
                            let mut receipt =
                                Receipt::new(crate::manifest::Operation::Delete, path.as_str());
                            receipt.old_revision = Some(trash.entry.revision);
                            receipt.content_hash = Some(trash.entry.hash.clone());
                            receipt.trash_id = Some(trash.id.clone());
                            Ok(Done::internal(
                                json!({"path": path, "trashId": trash.id, "revision": trash.entry.revision, "replayed": true}),
                                vec![receipt],
                            ))
                        }
                        _ => Err(e),
                    }
                }
                Err(e) => Err(e),
            }
        }
        Call::Restore(path, a) => {
            refuse_reserved(&path)?;
            let id = match a.trash_id {
                Some(id) => {
                    let found = ws.list_trash().await?.into_iter().find(|t| t.id == id);
                    match found {
                        Some(t) if t.entry.path == path => id,
                        _ => return Err(WorkspaceError::TrashNotFound { id }),
                    }
                }
                None => match ws.find_in_trash(&path).await? {
                    Some(t) => t.id,
                    None => {
                        return Err(WorkspaceError::TrashNotFound {
                            id: format!("(any entry for {path})"),
                        });
                    }
                },
            };
            let (entry, receipt) = ws.restore(&id).await?;
            Ok(Done {
                content: json!({"path": entry.path, "revision": entry.revision, "trashId": id}),
                trust: Trust::Internal,
                references: vec![file_reference(&entry)],
                receipts: vec![receipt],
            })
        }
        Call::EmptyTrash => {
            let (removed, receipt) = ws.empty_trash(proof).await?;
            Ok(Done::internal(
                json!({"removed": removed.len(), "bytes": receipt.size}),
                vec![receipt],
            ))
        }
        Call::Publish(path, a) => {
            let (bytes, mime, from) = match (&path, a.content) {
                (Some(p), _) => {
                    let (entry, bytes) = ws.read(p).await?;
                    if let Some(r) = a.expected_revision
                        && r != entry.revision
                    {
                        return Err(WorkspaceError::StaleRevision {
                            expected: r,
                            latest: Box::new(entry),
                        });
                    }
                    let mime = a.mime.clone().unwrap_or_else(|| entry.mime.clone());
                    let from = PublishedFrom {
                        path: entry.path.to_string(),
                        revision: entry.revision,
                    };
                    (bytes, mime, Some(from))
                }
                (None, Some(content)) => {
                    let mime = a
                        .mime
                        .clone()
                        .unwrap_or_else(|| guess_mime(&a.name).to_owned());
                    (content.into_bytes(), mime, None)
                }
                (None, None) => {
                    return Err(WorkspaceError::InvalidArgument {
                        field: "arguments",
                        reason: "give exactly one of path or content".into(),
                    });
                }
            };
            let published = actors
                .artifacts
                .publish(bytes, &a.name, &mime, source, from)
                .await?;
            let art = &published.artifact;
            Ok(Done {
                content: json!({"artifactId": art.id, "name": art.name, "mime": art.mime,
                    "size": art.size, "created": published.created}),
                trust: Trust::Internal,
                references: vec![Reference {
                    kind: ReferenceKind::Artifact,
                    id: art.id.clone(),
                    name: Some(art.name.clone()),
                    mime: Some(art.mime.clone()),
                    size: art.size,
                    hash: art.id.clone(),
                }],
                receipts: if published.created {
                    vec![published.receipt]
                } else {
                    Vec::new()
                },
            })
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
