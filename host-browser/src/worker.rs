//! The dedicated Workers that run the heavy built-ins (S5.7): a
//! `run_javascript` script in QuickJS, a PDF for `extract_document`, or an
//! HTML document's readable text (issue 32).
//! Both live in the Worker's own wasm module (`agent-worker-module`), which
//! the page fetches and compiles on first use, so the module the page loads
//! first carries neither (issue 18). Past the hard deadline the Worker is
//! terminated and replaced; the engine's interrupt handler is only the
//! soft deadline.
//!
//! The Worker makes no network request of its own: the page hands it the
//! compiled `WebAssembly.Module` and the wasm-bindgen glue as a `blob:`
//! URL, and the Worker removes `fetch`, `XMLHttpRequest`, `WebSocket`,
//! `EventSource` and `importScripts` from its scope before any work runs.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use futures::FutureExt;
use futures::channel::oneshot;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{Blob, BlobPropertyBag, MessageEvent, Url, Worker, WorkerOptions, WorkerType};

use crate::js::describe;
use crate::platform;

pub use agent_tools::builtin::offload::{
    PdfRequest, PdfResponse, ReadableResponse, ScriptRequest, ScriptResponse,
};

/// The Worker could not do the work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    #[error(
        "the work ran past its hard deadline of {0:?}; the Worker was terminated and will be replaced"
    )]
    Terminated(Duration),
    #[error("the Worker could not start: {0}")]
    Start(String),
    #[error("the Worker failed: {0}")]
    Failed(String),
    /// The Worker died with the work in flight (it reported an error, it
    /// trapped, or the page let go of it): the executor of that call is lost.
    #[error("the Worker died with the work in flight: {0}")]
    Lost(String),
    /// The module trapped on this input (a panic aborts in wasm32): the
    /// Worker was replaced, and the same input would trap again.
    #[error("the Worker's module failed on this input ({0}); its Worker was replaced")]
    Trapped(String),
}

/// An answer's text, and whether the module trapped giving it (then the
/// instance is unusable and the Worker is replaced).
type Answer = Result<(String, bool), String>;
type Pending = Rc<RefCell<HashMap<u64, oneshot::Sender<Answer>>>>;

struct Live {
    worker: Worker,
    pending: Pending,
    ready: futures::future::Shared<oneshot::Receiver<Result<(), String>>>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::Event)>,
}

impl Live {
    fn fail_all(&self, message: &str) {
        for (_, tx) in self.pending.borrow_mut().drain() {
            let _ = tx.send(Err(message.to_owned()));
        }
    }
}

/// Which wasm module a Worker instantiates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerModule {
    /// The Worker module (`agent-worker-module`): its glue and its wasm,
    /// fetched and compiled on first use.
    Separate { glue_url: String, wasm_url: String },
    /// The module this code runs in, through its glue: for a module that
    /// links the Worker module's entry points itself (the wasm tests).
    ThisModule { glue_url: String },
}

impl WorkerModule {
    /// The Worker module whose glue is `glue_url`, with its wasm beside it
    /// as `wasm-bindgen` names it (`name.js` → `name_bg.wasm`).
    pub fn beside_glue(glue_url: &str) -> WorkerModule {
        let stem = glue_url.strip_suffix(".js").unwrap_or(glue_url);
        WorkerModule::Separate {
            glue_url: glue_url.to_owned(),
            wasm_url: format!("{stem}_bg.wasm"),
        }
    }

    fn glue_url(&self) -> &str {
        match self {
            WorkerModule::Separate { glue_url, .. } | WorkerModule::ThisModule { glue_url } => {
                glue_url
            }
        }
    }
}

/// Where Workers get their module from: fetched and compiled once per tab,
/// shared by every [`ModuleWorker`] of it.
#[derive(Debug)]
pub struct WorkerSource {
    module: WorkerModule,
    glue_blob: RefCell<Option<String>>,
    compiled: RefCell<Option<JsValue>>,
}

impl WorkerSource {
    pub fn new(module: WorkerModule) -> Rc<WorkerSource> {
        Rc::new(WorkerSource {
            module,
            glue_blob: RefCell::new(None),
            compiled: RefCell::new(None),
        })
    }

    async fn glue_blob(&self) -> Result<String, WorkerError> {
        if let Some(url) = self.glue_blob.borrow().clone() {
            return Ok(url);
        }
        let response = fetch_ok(self.module.glue_url()).await?;
        let text = call_promise(&response, "text")
            .await?
            .as_string()
            .ok_or_else(|| WorkerError::Start("glue is not text".into()))?;
        let url = blob_url(&text, "text/javascript")?;
        *self.glue_blob.borrow_mut() = Some(url.clone());
        Ok(url)
    }

    /// The compiled module (a `WebAssembly.Module`) the Worker instantiates.
    async fn module(&self) -> Result<JsValue, WorkerError> {
        if let Some(module) = self.compiled.borrow().clone() {
            return Ok(module);
        }
        let module = match &self.module {
            WorkerModule::ThisModule { .. } => wasm_bindgen::module(),
            WorkerModule::Separate { wasm_url, .. } => {
                let response = fetch_ok(wasm_url).await?;
                let bytes = call_promise(&response, "arrayBuffer").await?;
                wasm_bindgen_futures::JsFuture::from(js_sys::WebAssembly::compile(&bytes))
                    .await
                    .map_err(|e| {
                        WorkerError::Start(format!("compiling {wasm_url}: {}", describe(&e)))
                    })?
            }
        };
        *self.compiled.borrow_mut() = Some(module.clone());
        Ok(module)
    }
}

impl Drop for WorkerSource {
    fn drop(&mut self) {
        if let Some(url) = self.glue_blob.borrow_mut().take() {
            let _ = Url::revoke_object_url(&url);
        }
    }
}

/// One dedicated Worker of a tab: started on first use, one piece of work
/// at a time, terminated and replaced past a deadline.
pub struct ModuleWorker {
    source: Rc<WorkerSource>,
    name: &'static str,
    live: RefCell<Option<Rc<Live>>>,
    next_id: Cell<u64>,
    turn: futures::lock::Mutex<()>,
    started: Cell<u32>,
}

impl std::fmt::Debug for ModuleWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleWorker")
            .field("name", &self.name)
            .field("module", &self.source.module)
            .field("workers_started", &self.started.get())
            .finish()
    }
}

/// The Worker's own script: wait for the module, drop every network API,
/// then answer `run` messages with the module's entry points.
fn worker_source(glue_blob_url: &str) -> String {
    format!(
        r#"import init, {{ __agentrt_worker_run as runScript, __agentrt_worker_read_pdf as readPdf, __agentrt_worker_readable as readReadable }} from {glue};
let ready = null;
self.onmessage = async (event) => {{
  const m = event.data;
  if (m.kind === 'init') {{
    try {{
      ready = init({{ module_or_path: m.module }});
      await ready;
      for (const name of ['fetch', 'XMLHttpRequest', 'WebSocket', 'EventSource', 'importScripts']) {{
        try {{ delete self[name]; }} catch (_) {{}}
        try {{ Object.defineProperty(self, name, {{ value: undefined, configurable: false }}); }} catch (_) {{}}
      }}
      self.postMessage({{ kind: 'ready' }});
    }} catch (e) {{
      self.postMessage({{ kind: 'failed', message: String(e && e.message || e) }});
    }}
    return;
  }}
  if (m.kind === 'run') {{
    await ready;
    try {{
      const response = m.op === 'pdf' ? readPdf(m.bytes, m.request)
        : m.op === 'readable' ? readReadable(m.request)
        : runScript(m.request);
      self.postMessage({{ kind: 'result', id: m.id, response }});
    }} catch (e) {{
      // A trap (a panic aborts in wasm32) leaves the instance unusable.
      self.postMessage({{ kind: 'result', id: m.id, trapped: true, response: String(e && e.message || e) }});
    }}
  }}
}};
"#,
        glue = serde_json::Value::String(glue_blob_url.to_owned())
    )
}

fn blob_url(text: &str, mime: &str) -> Result<String, WorkerError> {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = BlobPropertyBag::new();
    options.set_type(mime);
    let blob = Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|e| WorkerError::Start(describe(&e)))?;
    Url::create_object_url_with_blob(&blob).map_err(|e| WorkerError::Start(describe(&e)))
}

/// `fetch(url)` on the page, refusing a response that is not ok.
async fn fetch_ok(url: &str) -> Result<JsValue, WorkerError> {
    let fetch = crate::js::global_property("fetch")
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| WorkerError::Start("no fetch to load the Worker module".into()))?;
    let response = fetch
        .call1(&JsValue::UNDEFINED, &JsValue::from_str(url))
        .map_err(|e| WorkerError::Start(describe(&e)))?;
    let response = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::from(response))
        .await
        .map_err(|e| WorkerError::Start(format!("loading {url}: {}", describe(&e))))?;
    let ok = js_sys::Reflect::get(&response, &JsValue::from_str("ok"))
        .ok()
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    if !ok {
        return Err(WorkerError::Start(format!("loading {url} failed")));
    }
    Ok(response)
}

/// Call `response[method]()` and await the promise it returns.
async fn call_promise(response: &JsValue, method: &str) -> Result<JsValue, WorkerError> {
    let promise = js_sys::Reflect::get(response, &JsValue::from_str(method))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| WorkerError::Start(format!("the response has no {method}()")))?
        .call0(response)
        .map_err(|e| WorkerError::Start(describe(&e)))?;
    wasm_bindgen_futures::JsFuture::from(js_sys::Promise::from(promise))
        .await
        .map_err(|e| WorkerError::Start(describe(&e)))
}

impl ModuleWorker {
    /// A Worker (named `name` in the browser's tools) of `source`'s module.
    pub fn new(source: Rc<WorkerSource>, name: &'static str) -> ModuleWorker {
        ModuleWorker {
            source,
            name,
            live: RefCell::new(None),
            next_id: Cell::new(1),
            turn: futures::lock::Mutex::new(()),
            started: Cell::new(0),
        }
    }

    /// How many Workers were started so far (one more after each termination).
    pub fn workers_started(&self) -> u32 {
        self.started.get()
    }

    async fn live(&self) -> Result<Rc<Live>, WorkerError> {
        if let Some(live) = self.live.borrow().clone() {
            return Ok(live);
        }
        let glue = self.source.glue_blob().await?;
        let module = self.source.module().await?;
        let script = blob_url(&worker_source(&glue), "text/javascript")?;
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        options.set_name(self.name);
        let worker = Worker::new_with_options(&script, &options)
            .map_err(|e| WorkerError::Start(describe(&e)))?;
        let pending: Pending = Rc::new(RefCell::new(HashMap::new()));
        let (ready_tx, ready_rx) = oneshot::channel::<Result<(), String>>();
        let ready_tx = Rc::new(RefCell::new(Some(ready_tx)));
        let on_message = {
            let pending = pending.clone();
            let ready_tx = ready_tx.clone();
            Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
                let data = e.data();
                let kind = js_sys::Reflect::get(&data, &JsValue::from_str("kind"))
                    .ok()
                    .and_then(|v| v.as_string())
                    .unwrap_or_default();
                match kind.as_str() {
                    "ready" => {
                        if let Some(tx) = ready_tx.borrow_mut().take() {
                            let _ = tx.send(Ok(()));
                        }
                    }
                    "failed" => {
                        let message = js_sys::Reflect::get(&data, &JsValue::from_str("message"))
                            .ok()
                            .and_then(|v| v.as_string())
                            .unwrap_or_default();
                        if let Some(tx) = ready_tx.borrow_mut().take() {
                            let _ = tx.send(Err(message));
                        }
                    }
                    "result" => {
                        let id = js_sys::Reflect::get(&data, &JsValue::from_str("id"))
                            .ok()
                            .and_then(|v| v.as_f64())
                            .unwrap_or(-1.0);
                        let response = js_sys::Reflect::get(&data, &JsValue::from_str("response"))
                            .ok()
                            .and_then(|v| v.as_string())
                            .unwrap_or_default();
                        let trapped = js_sys::Reflect::get(&data, &JsValue::from_str("trapped"))
                            .ok()
                            .and_then(|v| v.as_bool())
                            .unwrap_or(false);
                        if id >= 0.0
                            && let Some(tx) = pending.borrow_mut().remove(&(id as u64))
                        {
                            let _ = tx.send(Ok((response, trapped)));
                        }
                    }
                    _ => {}
                }
            })
        };
        let on_error = {
            let pending = pending.clone();
            let ready_tx = ready_tx.clone();
            Closure::<dyn FnMut(web_sys::Event)>::new(move |e: web_sys::Event| {
                let message = js_sys::Reflect::get(&e, &JsValue::from_str("message"))
                    .ok()
                    .and_then(|v| v.as_string())
                    .unwrap_or_else(|| "the Worker reported an error".into());
                if let Some(tx) = ready_tx.borrow_mut().take() {
                    let _ = tx.send(Err(message.clone()));
                }
                for (_, tx) in pending.borrow_mut().drain() {
                    let _ = tx.send(Err(message.clone()));
                }
            })
        };
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let init = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&init, &"kind".into(), &"init".into());
        let _ = js_sys::Reflect::set(&init, &"module".into(), &module);
        worker
            .post_message(&init)
            .map_err(|e| WorkerError::Start(describe(&e)))?;
        self.started.set(self.started.get() + 1);
        let live = Rc::new(Live {
            worker,
            pending,
            ready: ready_rx.shared(),
            _on_message: on_message,
            _on_error: on_error,
        });
        *self.live.borrow_mut() = Some(live.clone());
        Ok(live)
    }

    pub(crate) fn terminate(&self, reason: &str) {
        if let Some(live) = self.live.borrow_mut().take() {
            live.worker.terminate();
            live.fail_all(reason);
        }
    }

    /// The Worker is gone from under its script, as when the browser
    /// discards it: it is terminated, and a script in flight is answered
    /// [`WorkerError::Lost`] at once (the next script starts a new Worker).
    pub fn kill(&self, why: &str) {
        self.terminate(why);
    }

    /// Run one script; terminate the Worker if no answer comes within
    /// `hard_deadline` (measured from when the script is posted).
    pub async fn run(
        &self,
        request: &ScriptRequest,
        hard_deadline: Duration,
    ) -> Result<ScriptResponse, WorkerError> {
        let text =
            serde_json::to_string(request).map_err(|e| WorkerError::Failed(e.to_string()))?;
        let answer = self.call("script", &text, None, hard_deadline).await?;
        serde_json::from_str(&answer).map_err(|e| WorkerError::Failed(e.to_string()))
    }

    /// Read one PDF; terminate the Worker if no answer comes within
    /// `hard_deadline`.
    pub async fn read_pdf(
        &self,
        bytes: &[u8],
        request: &PdfRequest,
        hard_deadline: Duration,
    ) -> Result<PdfResponse, WorkerError> {
        let text =
            serde_json::to_string(request).map_err(|e| WorkerError::Failed(e.to_string()))?;
        let bytes = js_sys::Uint8Array::from(bytes);
        let answer = self.call("pdf", &text, Some(bytes), hard_deadline).await?;
        serde_json::from_str(&answer).map_err(|e| WorkerError::Failed(e.to_string()))
    }

    /// Extract one HTML document's readable text; terminate the Worker if
    /// no answer comes within `hard_deadline`.
    pub async fn readable(
        &self,
        request: &agent_tools::builtin::document::ReadableRequest,
        hard_deadline: Duration,
    ) -> Result<ReadableResponse, WorkerError> {
        let text =
            serde_json::to_string(request).map_err(|e| WorkerError::Failed(e.to_string()))?;
        let answer = self.call("readable", &text, None, hard_deadline).await?;
        serde_json::from_str(&answer).map_err(|e| WorkerError::Failed(e.to_string()))
    }

    /// Post one piece of work (`op`, its JSON request and its bytes) and
    /// wait for the answer's text, at most `hard_deadline`.
    async fn call(
        &self,
        op: &str,
        request: &str,
        bytes: Option<js_sys::Uint8Array>,
        hard_deadline: Duration,
    ) -> Result<String, WorkerError> {
        let _turn = self.turn.lock().await;
        let live = self.live().await?;
        let ready = live.ready.clone();
        let started = futures::select! {
            r = ready.fuse() => r.map_err(|_| "the Worker went away".to_owned()).and_then(|r| r),
            () = platform::sleep(Duration::from_secs(30)).fuse() => Err("the Worker did not start within 30 s".to_owned()),
        };
        if let Err(message) = started {
            self.terminate(&message);
            return Err(WorkerError::Start(message));
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        live.pending.borrow_mut().insert(id, tx);
        let message = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&message, &"kind".into(), &"run".into());
        let _ = js_sys::Reflect::set(&message, &"op".into(), &op.into());
        let _ = js_sys::Reflect::set(&message, &"id".into(), &JsValue::from_f64(id as f64));
        let _ = js_sys::Reflect::set(&message, &"request".into(), &JsValue::from_str(request));
        let posted = match bytes {
            Some(bytes) => {
                let _ = js_sys::Reflect::set(&message, &"bytes".into(), &bytes);
                // The copy moves to the Worker instead of being copied again.
                live.worker
                    .post_message_with_transfer(&message, &js_sys::Array::of1(&bytes.buffer()))
            }
            None => live.worker.post_message(&message),
        };
        if let Err(e) = posted {
            live.pending.borrow_mut().remove(&id);
            return Err(WorkerError::Failed(describe(&e)));
        }
        let answer = futures::select! {
            r = rx.fuse() => Some(r),
            () = platform::sleep(hard_deadline).fuse() => None,
        };
        match answer {
            None => {
                self.terminate("terminated past the hard deadline");
                // Start the replacement now, so the next piece of work does not wait for it.
                let _ = self.live().await;
                Err(WorkerError::Terminated(hard_deadline))
            }
            Some(Err(_)) => {
                self.terminate("lost");
                Err(WorkerError::Lost("the Worker dropped the work".into()))
            }
            Some(Ok(Err(message))) => {
                self.terminate(&message);
                Err(WorkerError::Lost(message))
            }
            Some(Ok(Ok((message, true)))) => {
                self.terminate(&message);
                Err(WorkerError::Trapped(message))
            }
            Some(Ok(Ok((text, false)))) => Ok(text),
        }
    }
}

impl Drop for ModuleWorker {
    fn drop(&mut self) {
        self.terminate("the runtime was dropped");
    }
}
