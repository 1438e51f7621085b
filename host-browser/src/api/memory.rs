//! Memory and knowledge bases for the page (S10.1): `listMemories`,
//! `saveMemory`, `editMemory`, `deleteMemory`, `restoreMemory` (the
//! person's side of Memory: each change a new revision, a deleted memory
//! restorable) and `listKnowledgeBases`, `addKnowledge`, `searchKnowledge`.
//! Every rule is `agent-memory`'s and `agent-knowledge`'s; this module
//! converts JavaScript values.

use agent_knowledge::{KnowledgeError, NewDocument, SearchLimits, SourceRef};
use agent_memory::{ChangedBy, Expect, MemoryError, MemoryId, MemoryScope};
use serde::Deserialize;
use serde_json::json;
use wasm_bindgen::prelude::*;

use super::errors::{ErrorCode, from_js, js_error, storage_code, to_js};
use super::{AgentRuntime, promise};

fn memory_error(e: MemoryError) -> JsValue {
    let code = match &e {
        MemoryError::Storage(s) => storage_code(s),
        _ => match e.code() {
            "stale_revision" => ErrorCode::WrongStatus,
            "memory_not_found" => ErrorCode::NotFound,
            "memory_exists" => ErrorCode::AlreadyExists,
            "memory_corrupt" => ErrorCode::InconsistentState,
            _ => ErrorCode::InvalidArgument,
        },
    };
    js_error(code, format!("{e} ({})", e.code()))
}

pub(super) fn knowledge_error(e: KnowledgeError) -> JsValue {
    let code = match &e {
        KnowledgeError::Storage(s) => storage_code(s),
        _ => ErrorCode::InvalidArgument,
    };
    js_error(code, e)
}

fn scope(s: &str) -> Result<MemoryScope, JsValue> {
    MemoryScope::parse(s).map_err(|e| js_error(ErrorCode::InvalidArgument, e))
}

fn memory_id(s: &str) -> Result<MemoryId, JsValue> {
    MemoryId::new(s).map_err(|e| js_error(ErrorCode::InvalidArgument, e))
}

/// A document to add to a knowledge base: its text and a name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DocumentInput {
    id: String,
    #[serde(default)]
    title: Option<String>,
    text: String,
}

#[wasm_bindgen]
impl AgentRuntime {
    /// The memories of `scope` (`global`, `workspace:ID`, `profile:ID`,
    /// `session:ID`); with `forgotten`, the deleted ones (restorable).
    #[wasm_bindgen(js_name = listMemories, unchecked_return_type = "Promise<MemoryRecord[]>")]
    pub fn list_memories(&self, scope: String, forgotten: Option<bool>) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let scope = self::scope(&scope)?;
            let store = inner.assembly.memories();
            let records = if forgotten.unwrap_or(false) {
                store.list_forgotten(&scope).await
            } else {
                store.list(&scope).await
            }
            .map_err(memory_error)?;
            to_js(&records)
        })
    }

    /// The person saves a new memory.
    #[wasm_bindgen(js_name = saveMemory, unchecked_return_type = "Promise<MemoryRecord>")]
    pub fn save_memory(&self, scope: String, id: String, text: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let (record, _) = inner
                .assembly
                .memories()
                .save(
                    None,
                    &self::scope(&scope)?,
                    &memory_id(&id)?,
                    &text,
                    ChangedBy::Person,
                    Expect::New,
                )
                .await
                .map_err(memory_error)?;
            to_js(&record)
        })
    }

    /// The person edits a memory at its current `revision` (a stale one is
    /// refused with `wrong_status`).
    #[wasm_bindgen(js_name = editMemory, unchecked_return_type = "Promise<MemoryRecord>")]
    pub fn edit_memory(
        &self,
        scope: String,
        id: String,
        revision: u32,
        text: String,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let (record, _) = inner
                .assembly
                .memories()
                .edit(
                    &self::scope(&scope)?,
                    &memory_id(&id)?,
                    &text,
                    u64::from(revision),
                )
                .await
                .map_err(memory_error)?;
            to_js(&record)
        })
    }

    /// The person deletes a memory at its current `revision`; it stays
    /// restorable until purged.
    #[wasm_bindgen(js_name = deleteMemory, unchecked_return_type = "Promise<MemoryRecord>")]
    pub fn delete_memory(&self, scope: String, id: String, revision: u32) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let (record, _) = inner
                .assembly
                .memories()
                .delete(&self::scope(&scope)?, &memory_id(&id)?, u64::from(revision))
                .await
                .map_err(memory_error)?;
            to_js(&record)
        })
    }

    /// Bring a deleted or forgotten memory back as a new revision.
    #[wasm_bindgen(js_name = restoreMemory, unchecked_return_type = "Promise<MemoryRecord>")]
    pub fn restore_memory(&self, scope: String, id: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let (record, _) = inner
                .assembly
                .memories()
                .restore(
                    None,
                    &self::scope(&scope)?,
                    &memory_id(&id)?,
                    ChangedBy::Person,
                )
                .await
                .map_err(memory_error)?;
            to_js(&record)
        })
    }

    /// The knowledge bases of this browser.
    #[wasm_bindgen(js_name = listKnowledgeBases, unchecked_return_type = "Promise<string[]>")]
    pub fn list_knowledge_bases(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let bases = inner.assembly.knowledge().await.map_err(knowledge_error)?;
            to_js(&bases.names())
        })
    }

    /// Add text documents to `base` (created when new); each is chunked and
    /// indexed. Resolves with the number added.
    #[wasm_bindgen(js_name = addKnowledge, unchecked_return_type = "Promise<number>")]
    pub fn add_knowledge(
        &self,
        base: String,
        #[wasm_bindgen(unchecked_param_type = "KnowledgeDocument[]")] documents: JsValue,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let documents: Vec<DocumentInput> = from_js(documents, "documents")?;
            let bases = inner.assembly.knowledge().await.map_err(knowledge_error)?;
            if !bases.names().contains(&base) {
                bases.create_base(&base).await.map_err(knowledge_error)?;
            }
            let count = documents.len();
            let documents = documents
                .into_iter()
                .map(|d| NewDocument {
                    title: d.title.unwrap_or_else(|| d.id.clone()),
                    source: SourceRef::Attachment { name: d.id.clone() },
                    id: d.id,
                    text: d.text,
                })
                .collect();
            bases
                .add_documents(&base, documents)
                .await
                .map_err(knowledge_error)?;
            to_js(&json!(count))
        })
    }

    /// The best passages of `base` for `query`, with their provenance.
    #[wasm_bindgen(js_name = searchKnowledge, unchecked_return_type = "Promise<KnowledgePassage[]>")]
    pub fn search_knowledge(&self, base: String, query: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let bases = inner.assembly.knowledge().await.map_err(knowledge_error)?;
            let passages = bases
                .search(&[base], &query, SearchLimits::default())
                .map_err(knowledge_error)?;
            to_js(&passages)
        })
    }
}
