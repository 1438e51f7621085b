//! One workspace tool call: its arguments parsed into a [`Call`] that names
//! the exact target its effect touches, then carried out against the
//! session's workspace and Artifact actors, with the result's content,
//! trust, references and receipts.

use serde::Deserialize;
use serde_json::{Value, json};

use agent_capabilities::{Target, Trust, Verified};
use agent_kernel::protocol::{Reference, ReferenceKind};

use crate::actor::SessionActors;
use crate::artifact::PublishedFrom;
use crate::error::WorkspaceError;
use crate::limits::{MAX_READ_BYTES, RESULTS_FOLDER};
use crate::manifest::{FileEntry, Receipt, Source, TrashEntry};
use crate::mime::{guess_mime, is_text};
use crate::path::WorkspacePath;
use crate::store::Expect;
use crate::tool_names::{DELETE, EMPTY_TRASH, LIST, MOVE, PUBLISH, READ, RESTORE, WRITE};

use super::MAX_LIST_ENTRIES;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListArgs {
    folder: String,
    #[serde(default)]
    recursive: bool,
    #[serde(default)]
    trash: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: u64,
    length: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct WriteArgs {
    path: String,
    content: String,
    mime: Option<String>,
    expected_revision: Option<u64>,
    #[serde(default)]
    append: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct MoveArgs {
    from: String,
    to: String,
    expected_revision: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct DeleteArgs {
    path: String,
    expected_revision: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RestoreArgs {
    path: String,
    trash_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EmptyArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PublishArgs {
    name: String,
    mime: Option<String>,
    path: Option<String>,
    expected_revision: Option<u64>,
    content: Option<String>,
}

/// A parsed call: what it touches and what to do.
pub(super) enum Call {
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
    pub(super) fn target(&self) -> Target {
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

pub(super) fn parse_call(tool: &str, arguments: &Value) -> Result<Call, WorkspaceError> {
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

pub(super) fn entry_json(e: &FileEntry) -> Value {
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
pub(super) struct Done {
    pub(super) content: Value,
    pub(super) trust: Trust,
    pub(super) references: Vec<Reference>,
    pub(super) receipts: Vec<Receipt>,
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

/// Carry out a parsed call; `proof` is the verified capability, which the
/// destructive operations check again at the workspace.
pub(super) async fn run_call(
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
