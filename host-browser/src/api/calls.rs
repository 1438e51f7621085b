//! A run as a chat UI renders it, part by part: one tool call
//! (`readToolCall`: its journal record with the arguments and the result
//! envelope read back from their hash-checked blobs) and the whole
//! transcript (`readTranscript`: each model round's text and reasoning, and
//! every call). The journal and the run record keep only hashes (S2.2); a
//! UI that shows what the model said in each round, what a call was given
//! and what it returned (the AI SDK's message parts, `ai_transport.js`,
//! which replays a persisted run after a reload from these) reads them
//! here, through the runtime, never from raw storage.

use agent_kernel::host::BlobRef;
use agent_kernel::journal::JournalRecord;
use agent_kernel::protocol::ToolResult;
use agent_kernel::run::ActivityKind;
use agent_kernel::{CallId, RunId};
use agent_supervisor::Runtime;
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use super::errors::{ErrorCode, js_error, run_error, run_id, to_js};
use super::{AgentRuntime, promise};

/// `{ call, input, result? }` of one journal record: the arguments and the
/// result envelope read back through `runtime`.
async fn call_view(
    runtime: &Runtime,
    run: &RunId,
    record: JournalRecord,
) -> Result<Value, JsValue> {
    let call = record.call_id.clone();
    let decode = |what: &str, bytes: Vec<u8>| -> Result<Value, JsValue> {
        serde_json::from_slice(&bytes).map_err(|e| {
            js_error(
                ErrorCode::InconsistentState,
                format!("the {what} of call {call} is not JSON ({e})"),
            )
        })
    };
    let input = decode(
        "arguments",
        runtime.blob(run, &record.args).await.map_err(run_error)?,
    )?;
    let result = match &record.result {
        None => None,
        Some(blob) => {
            let value = decode("result", runtime.blob(run, blob).await.map_err(run_error)?)?;
            // Only an envelope (S5.4) is a result; anything else is a broken store.
            serde_json::from_value::<ToolResult>(value.clone()).map_err(|e| {
                js_error(
                    ErrorCode::InconsistentState,
                    format!("the result of call {call} is not a result envelope ({e})"),
                )
            })?;
            Some(value)
        }
    };
    let mut view = json!({ "call": record, "input": input });
    if let Some(result) = result {
        view["result"] = result;
    }
    Ok(view)
}

/// A round's text or reasoning blob as text.
async fn text_of(runtime: &Runtime, run: &RunId, blob: &BlobRef) -> Result<String, JsValue> {
    let bytes = runtime.blob(run, blob).await.map_err(run_error)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[wasm_bindgen]
impl AgentRuntime {
    /// The call `call` of `run`: `{ call, input, result? }` with `call` its
    /// journal record, `input` the arguments it was prepared with and
    /// `result` the stored result envelope once it has one. Rejects with
    /// `not_found` for an unknown run or call, and `inconsistent_state`
    /// when a stored blob is not the JSON its record says.
    #[wasm_bindgen(js_name = readToolCall, unchecked_return_type = "Promise<ToolCallView>")]
    pub fn read_tool_call(&self, run: String, call: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let run = run_id(&run)?;
            let call = CallId::new(&call)
                .map_err(|e| js_error(ErrorCode::InvalidArgument, format!("call id: {e}")))?;
            let runtime = inner.assembly.runtime();
            let record = runtime
                .journal(&run)
                .await
                .map_err(run_error)?
                .into_iter()
                .find(|r| r.call_id == call)
                .ok_or_else(|| {
                    js_error(ErrorCode::NotFound, format!("run {run} has no call {call}"))
                })?;
            to_js(&call_view(runtime, &run, record).await?)
        })
    }

    /// What `run` said and did, for a UI that renders it again (after a
    /// reload): `{ rounds, calls }`, each model round's `text` and
    /// `reasoning` (kept apart, S13.4) in round order, and every call as
    /// `readToolCall` gives it, in journal order. Reading changes nothing.
    /// Rejects with `not_found` for an unknown run.
    #[wasm_bindgen(js_name = readTranscript, unchecked_return_type = "Promise<RunTranscript>")]
    pub fn read_transcript(&self, run: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        promise(async move {
            let run = run_id(&run)?;
            let runtime = inner.assembly.runtime();
            // An unknown run is `not_found`, not an empty transcript.
            runtime.run(&run).await.map_err(run_error)?;
            let mut rounds = Vec::new();
            for activity in runtime.activities(&run).await.map_err(run_error)? {
                if let ActivityKind::ModelResponse {
                    round,
                    text,
                    reasoning,
                    ..
                } = &activity.kind
                {
                    let mut view = json!({ "round": round });
                    if let Some(blob) = text {
                        view["text"] = Value::String(text_of(runtime, &run, blob).await?);
                    }
                    if let Some(blob) = reasoning {
                        view["reasoning"] = Value::String(text_of(runtime, &run, blob).await?);
                    }
                    rounds.push(view);
                }
            }
            let mut calls = Vec::new();
            for record in runtime.journal(&run).await.map_err(run_error)? {
                calls.push(call_view(runtime, &run, record).await?);
            }
            to_js(&json!({ "rounds": rounds, "calls": calls }))
        })
    }
}
