//! The browser Worker's own wasm module (S5.7, issue 18): what the page's
//! first module leaves out because the first run may never need it,
//! QuickJS (`run_javascript`) and the PDF reader (`extract_document`); it
//! also extracts HTML's readable text, so that a Worker's `terminate()`
//! stops that parser too.
//! The page compiles this module on first use and hands it to a dedicated
//! Worker (`agent-host-browser`'s `worker` module), which calls the entry
//! points below; the Worker's `terminate()` is the hard stop of each.
//!
//! The entry points only decode, run and encode: the request and answer
//! types and the work itself are `agent_tools::builtin::offload`'s, shared
//! with the page so the two sides cannot disagree.
//!
//! # Example
//!
//! The entry points are wasm32 only (`__agentrt_worker_run`,
//! `__agentrt_worker_readable`, `__agentrt_worker_read_pdf`); natively the
//! same work answers the same JSON, which is how the page's side and this
//! module stay in step:
//!
//! ```
//! let request = r#"{"html": "<article><p>Readable text of a page.</p></article>",
//!     "url": null, "style": "formatted", "max_chars": 100,
//!     "limits": {"max_input_bytes": 100000, "max_depth": 64,
//!                "max_elements": 1000, "max_depth_sum": 100000}}"#;
//! let answer = agent_tools::builtin::offload::answer_readable(request);
//! assert!(answer.contains("Readable text of a page."), "{answer}");
//!
//! // A malformed request is an answer too, never a trap in the Worker.
//! let refused = agent_tools::builtin::offload::answer_readable("{}");
//! assert!(refused.contains("bad_request"), "{refused}");
//! ```

#[cfg(target_arch = "wasm32")]
use wasm_bindgen::prelude::*;

/// Run one `ScriptRequest` (JSON) in QuickJS; answers a `ScriptResponse`
/// (JSON). Timed by the Worker's monotonic clock (the soft deadline).
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen(js_name = __agentrt_worker_run)]
pub fn worker_run(request: &str) -> String {
    let now = agent_tools::builtin::javascript::browser_monotonic();
    agent_tools::builtin::offload::answer_script(request, move || now())
}

/// Extract one HTML document's readable text under a `ReadableRequest`
/// (JSON); answers a `ReadableResponse` (JSON). html5ever and readability
/// run here so that terminating the Worker stops them (issue 32).
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen(js_name = __agentrt_worker_readable)]
pub fn worker_readable(request: &str) -> String {
    agent_tools::builtin::offload::answer_readable(request)
}

/// Read one PDF (`bytes`) under a `PdfRequest` (JSON); answers a
/// `PdfResponse` (JSON).
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen(js_name = __agentrt_worker_read_pdf)]
pub fn worker_read_pdf(bytes: &[u8], request: &str) -> String {
    agent_tools::builtin::offload::answer_pdf(bytes, request)
}
