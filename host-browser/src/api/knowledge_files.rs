//! Knowledge from files for the page (issue 37 part 5):
//! `addKnowledgeFromWorkspace(base, session, path)` and
//! `addKnowledgeFromArtifact(base, session, id)`. The text comes through
//! `extract_document`'s bounded readers (PDFs in the Worker module); every
//! rule is the assembly's (`agent_assembly::knowledge_files`); this module
//! converts JavaScript values.

use agent_assembly::knowledge_files::{AddedFile, KnowledgeFileError};
use serde_json::json;
use wasm_bindgen::prelude::*;

use super::errors::{ErrorCode, js_error, session_action_error, session_id, to_js};
use super::memory::knowledge_error;
use super::{AgentRuntime, promise};

fn file_error(e: KnowledgeFileError) -> JsValue {
    match e {
        KnowledgeFileError::Session(e) => session_action_error(e),
        KnowledgeFileError::Knowledge(e) => knowledge_error(e),
        KnowledgeFileError::Unavailable(_) => js_error(ErrorCode::StorageError, e.to_string()),
        KnowledgeFileError::TooLarge { .. } | KnowledgeFileError::Unreadable { .. } => {
            js_error(ErrorCode::InvalidArgument, format!("{e} ({})", e.code()))
        }
    }
}

fn added(file: AddedFile) -> Result<JsValue, JsValue> {
    to_js(&json!({
        "id": file.record.id,
        "title": file.record.title,
        "source": file.record.source,
        "format": file.format,
        "truncated": file.truncated,
    }))
}

#[wasm_bindgen]
impl AgentRuntime {
    /// Add the workspace file at `path` of `session` to `base` (created
    /// when new) as one document, its text through `extract_document`'s
    /// readers (PDF included); its passages' provenance names the path,
    /// revision and content hash.
    #[wasm_bindgen(js_name = addKnowledgeFromWorkspace, unchecked_return_type = "Promise<KnowledgeFileAdded>")]
    pub fn add_knowledge_from_workspace(
        &self,
        base: String,
        session: String,
        path: String,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let file = inner
                .assembly
                .add_knowledge_from_workspace(&base, &session, &path)
                .await
                .map_err(file_error)?;
            added(file)
        })
    }

    /// Add the Artifact `id` of `session` to `base` (created when new),
    /// like [`AgentRuntime::add_knowledge_from_workspace`]; provenance
    /// names the Artifact and its content hash.
    #[wasm_bindgen(js_name = addKnowledgeFromArtifact, unchecked_return_type = "Promise<KnowledgeFileAdded>")]
    pub fn add_knowledge_from_artifact(
        &self,
        base: String,
        session: String,
        id: String,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let file = inner
                .assembly
                .add_knowledge_from_artifact(&base, &session, &id)
                .await
                .map_err(file_error)?;
            added(file)
        })
    }
}
