//! The page's session actions (S7.2, S7.5, S12.3): import a person's file
//! into a session, list the sessions, list and read their files and
//! Artifacts, copy and delete a session. Every rule (path gate, quotas,
//! MIME, names, the Artifact reference rule of S7.5) is the assembly's
//! ([`agent_assembly::sessions`]); this module only converts JavaScript
//! values and holds the session (its tab lock and lease) for the actions
//! that change one.

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use agent_assembly::Attachment;

use super::errors::{ErrorCode, js_error, session_action_error, session_id, to_js};
use super::views::content_view;
use super::{AgentRuntime, promise};

/// The bytes of an `importFile` `data` argument: a `Uint8Array`, a `Blob`
/// (a `File` too) or a string (its UTF-8 bytes). `fits` is asked with the
/// size first, so a file over the quota is refused before it is read.
async fn bytes_of(
    data: JsValue,
    fits: impl Fn(u64) -> Result<(), JsValue>,
) -> Result<Vec<u8>, JsValue> {
    if let Some(text) = data.as_string() {
        fits(text.len() as u64)?;
        return Ok(text.into_bytes());
    }
    if let Some(array) = data.dyn_ref::<js_sys::Uint8Array>() {
        fits(u64::from(array.length()))?;
        return Ok(array.to_vec());
    }
    if let Some(blob) = data.dyn_ref::<web_sys::Blob>() {
        // A Blob's size is a double; a negative or fractional one cannot be.
        fits(blob.size().max(0.0) as u64)?;
        let buffer = JsFuture::from(blob.array_buffer()).await.map_err(|e| {
            js_error(
                ErrorCode::InvalidArgument,
                format!("the Blob could not be read: {e:?}"),
            )
        })?;
        return Ok(js_sys::Uint8Array::new(&buffer).to_vec());
    }
    Err(js_error(
        ErrorCode::InvalidArgument,
        "data must be a Uint8Array, a Blob or a string",
    ))
}

#[wasm_bindgen]
impl AgentRuntime {
    /// Bring a person's file into `session`'s workspace at `path` (S12.3):
    /// through the path gate and the quotas, refused when `path` exists;
    /// recorded with source `attachment` under `name` (default: `path`'s
    /// file name), and its content is `external_untrusted` to every tool
    /// that reads it. `mimeType` is guessed from the name when omitted.
    /// Rejects with `invalid_argument` (a bad path, name or MIME type),
    /// `already_exists`, `quota_exceeded` or `session_busy`; a refused
    /// import changes nothing.
    #[wasm_bindgen(js_name = importFile, unchecked_return_type = "Promise<FileEntry>")]
    pub fn import_file(
        &self,
        session: String,
        path: String,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array | Blob | string")] data: JsValue,
        #[wasm_bindgen(js_name = mimeType)] mime_type: Option<String>,
        name: Option<String>,
    ) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let bytes = bytes_of(data, |size| {
                inner
                    .assembly
                    .check_attachment_size(size)
                    .map_err(session_action_error)
            })
            .await?;
            let entry = inner
                .session_action(&session, async |assembly, held| {
                    let attachment = Attachment {
                        path: &path,
                        bytes,
                        mime: mime_type.as_deref(),
                        name: name.as_deref(),
                    };
                    assembly.import_file(held, attachment).await
                })
                .await?;
            inner.leases.notify_changed(&session);
            to_js(&entry)
        })
    }

    /// Every session with a run, a file or an Artifact, by id: its number
    /// of turns, when the newest was created, its files and Artifacts.
    #[wasm_bindgen(js_name = listSessions, unchecked_return_type = "Promise<SessionSummary[]>")]
    pub fn list_sessions(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let sessions = inner
                .assembly
                .sessions()
                .await
                .map_err(session_action_error)?;
            to_js(&sessions)
        })
    }

    /// Copy `from`'s files, trash and Artifact references into the empty
    /// session `to` (S7.5; no content is copied). Rejects with
    /// `target_not_empty` when `to` has files, `session_busy` while
    /// another tab executes `to`.
    #[wasm_bindgen(js_name = copySession, unchecked_return_type = "Promise<CopyReport>")]
    pub fn copy_session(&self, from: String, to: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let from = session_id(&from)?;
            let to = session_id(&to)?;
            let report = inner
                .session_action(&to, async |assembly, held| {
                    assembly.copy_session(&from, held).await
                })
                .await?;
            inner.leases.notify_changed(&to);
            to_js(&report)
        })
    }

    /// Delete `session`'s workspace, trash and Artifact references, and the
    /// content nothing else references (S7.5: a copy's Artifacts stay
    /// readable). Its runs stay, as history. Rejects with `session_busy`
    /// while a run of the session is not finished.
    #[wasm_bindgen(js_name = deleteSession, unchecked_return_type = "Promise<DeleteReport>")]
    pub fn delete_session(&self, session: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let report = inner
                .session_action(&session, async |assembly, held| {
                    assembly.delete_session(held).await
                })
                .await?;
            inner.leases.notify_changed(&session);
            to_js(&report)
        })
    }

    /// The workspace files of `session` (manifest entries, S7.2).
    #[wasm_bindgen(js_name = listWorkspace, unchecked_return_type = "Promise<FileEntry[]>")]
    pub fn list_workspace(&self, session: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let entries = inner
                .assembly
                .files(&session)
                .await
                .map_err(session_action_error)?;
            to_js(&entries)
        })
    }

    /// One workspace file: `{ entry, text?, bytes }` (`text` when UTF-8).
    #[wasm_bindgen(js_name = readWorkspaceFile, unchecked_return_type = "Promise<FileContent>")]
    pub fn read_workspace_file(&self, session: String, path: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let (entry, bytes) = inner
                .assembly
                .read_file(&session, &path)
                .await
                .map_err(session_action_error)?;
            content_view(&entry, bytes)
        })
    }

    /// The Artifacts of `session`.
    #[wasm_bindgen(js_name = listArtifacts, unchecked_return_type = "Promise<Artifact[]>")]
    pub fn list_artifacts(&self, session: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let artifacts = inner
                .assembly
                .artifacts(&session)
                .await
                .map_err(session_action_error)?;
            to_js(&artifacts)
        })
    }

    /// One Artifact: `{ entry, text?, bytes }`.
    #[wasm_bindgen(js_name = readArtifact, unchecked_return_type = "Promise<ArtifactContent>")]
    pub fn read_artifact(&self, session: String, id: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let session = session_id(&session)?;
            let (entry, bytes) = inner
                .assembly
                .read_artifact(&session, &id)
                .await
                .map_err(session_action_error)?;
            content_view(&entry, bytes)
        })
    }
}
