//! Memory and knowledge bases on the command line (S10.1): `agentrt memory
//! list|save|edit|delete|restore` (the person's side of Memory: every
//! change a new revision, a deleted memory kept until purged), and
//! `agentrt kb add|search|list`. Every rule is `agent-memory`'s and
//! `agent-knowledge`'s; this module reads the person's files and prints
//! what the stores answered (`--json`: one object).

use agent_host_native::app::App;
use agent_knowledge::{NewDocument, SearchLimits, SourceRef};
use agent_memory::{ChangedBy, Expect, MemoryId, MemoryScope};
use serde_json::json;

use super::args::{KbAction, MemoryAction};
use super::exit::{code, usage};
use super::render::print_json_or_text;

fn scope(text: &str) -> anyhow::Result<MemoryScope> {
    MemoryScope::parse(text).map_err(|e| usage(e.to_string()))
}

fn memory_id(text: &str) -> anyhow::Result<MemoryId> {
    MemoryId::new(text).map_err(|e| usage(e.to_string()))
}

/// `agentrt memory …`.
pub(crate) async fn memory(json: bool, app: &App, action: &MemoryAction) -> anyhow::Result<u8> {
    let store = app.assembly().memories();
    let refused = |e: agent_memory::MemoryError| usage(format!("{e} ({})", e.code()));
    match action {
        MemoryAction::List {
            scope: s,
            forgotten,
        } => {
            let s = scope(s)?;
            let records = if *forgotten {
                store.list_forgotten(&s).await
            } else {
                store.list(&s).await
            }
            .map_err(refused)?;
            let text = records
                .iter()
                .map(|r| format!("{} r{}  {}", r.id, r.revision, r.text))
                .collect::<Vec<_>>()
                .join("\n");
            print_json_or_text(
                json,
                json!({"scope": s.to_string(), "memories": records}),
                if text.is_empty() {
                    format!("no memories in {s}")
                } else {
                    text
                },
            )?;
        }
        MemoryAction::Save { scope: s, id, text } => {
            let s = scope(s)?;
            let id = memory_id(id)?;
            let (record, _) = store
                .save(None, &s, &id, text, ChangedBy::Person, Expect::New)
                .await
                .map_err(refused)?;
            print_json_or_text(
                json,
                json!({"scope": s.to_string(), "id": record.id, "revision": record.revision}),
                format!("saved {}/{} r{}", s, record.id, record.revision),
            )?;
        }
        MemoryAction::Edit {
            scope: s,
            id,
            revision,
            text,
        } => {
            let s = scope(s)?;
            let (record, _) = store
                .edit(&s, &memory_id(id)?, text, *revision)
                .await
                .map_err(refused)?;
            print_json_or_text(
                json,
                json!({"scope": s.to_string(), "id": record.id, "revision": record.revision}),
                format!("edited {}/{} r{}", s, record.id, record.revision),
            )?;
        }
        MemoryAction::Delete {
            scope: s,
            id,
            revision,
        } => {
            let s = scope(s)?;
            let (record, _) = store
                .delete(&s, &memory_id(id)?, *revision)
                .await
                .map_err(refused)?;
            print_json_or_text(
                json,
                json!({"scope": s.to_string(), "id": record.id, "deleted": true}),
                format!("deleted {}/{} (restore brings it back)", s, record.id),
            )?;
        }
        MemoryAction::Restore { scope: s, id } => {
            let s = scope(s)?;
            let (record, _) = store
                .restore(None, &s, &memory_id(id)?, ChangedBy::Person)
                .await
                .map_err(refused)?;
            print_json_or_text(
                json,
                json!({"scope": s.to_string(), "id": record.id, "revision": record.revision}),
                format!("restored {}/{} as r{}", s, record.id, record.revision),
            )?;
        }
    }
    Ok(code::OK)
}

/// `agentrt kb …`.
pub(crate) async fn kb(json: bool, app: &App, action: &KbAction) -> anyhow::Result<u8> {
    let bases = app.assembly().knowledge().await?;
    let refused = |e: agent_knowledge::KnowledgeError| usage(e.to_string());
    match action {
        KbAction::List => {
            let names = bases.names();
            print_json_or_text(
                json,
                json!({"bases": names}),
                if names.is_empty() {
                    "no knowledge bases".into()
                } else {
                    names.join("\n")
                },
            )?;
        }
        KbAction::Add {
            base,
            files,
            documents,
            session,
            workspace,
            artifacts,
        } if !documents.is_empty() || !workspace.is_empty() || !artifacts.is_empty() => {
            let from_session = super::knowledge_files::SessionFiles {
                session: session.as_deref(),
                workspace,
                artifacts,
            };
            return super::knowledge_files::add(json, app, base, files, documents, from_session)
                .await;
        }
        KbAction::Add { base, files, .. } => {
            if !bases.names().contains(base) {
                bases.create_base(base).await.map_err(refused)?;
            }
            let mut documents = Vec::new();
            for file in files {
                let name = file
                    .file_name()
                    .and_then(|n| n.to_str())
                    .ok_or_else(|| usage(format!("{}: the name must be UTF-8", file.display())))?
                    .to_owned();
                // Refused before it is read: a document's limit is the crate's.
                let size = std::fs::metadata(file)
                    .map_err(|e| usage(format!("cannot read {}: {e}", file.display())))?
                    .len();
                if size > agent_knowledge::store::MAX_DOCUMENT_BYTES as u64 {
                    return Err(usage(format!(
                        "{} is {size} bytes, over the {}-byte document limit",
                        file.display(),
                        agent_knowledge::store::MAX_DOCUMENT_BYTES
                    )));
                }
                let text = std::fs::read_to_string(file).map_err(|e| {
                    usage(format!("cannot read {} as UTF-8 text: {e}", file.display()))
                })?;
                documents.push(NewDocument {
                    id: name.clone(),
                    title: name.clone(),
                    source: SourceRef::Attachment { name },
                    text,
                });
            }
            let count = documents.len();
            bases
                .add_documents(base, documents)
                .await
                .map_err(refused)?;
            print_json_or_text(
                json,
                json!({"base": base, "added": count}),
                format!("added {count} document(s) to {base}"),
            )?;
        }
        KbAction::Search { base, query } => {
            let passages = bases
                .search(std::slice::from_ref(base), query, SearchLimits::default())
                .map_err(refused)?;
            let text = passages
                .iter()
                .map(|p| serde_json::to_string(p).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            print_json_or_text(
                json,
                json!({"base": base, "passages": passages}),
                if text.is_empty() {
                    "no passage matches".into()
                } else {
                    text
                },
            )?;
        }
    }
    Ok(code::OK)
}
