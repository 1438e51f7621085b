//! The dedicated Worker that runs `run_javascript` scripts (S5.7): the main
//! thread posts a script, the Worker runs it in QuickJS (this same wasm
//! module, instantiated inside the Worker) and posts the result back. Past
//! the hard deadline the Worker is terminated and replaced; the engine's
//! interrupt handler is only the soft deadline.
//!
//! The Worker makes no network request of its own: the main thread hands it
//! the compiled `WebAssembly.Module` and the wasm-bindgen glue as a `blob:`
//! URL, and the Worker removes `fetch`, `XMLHttpRequest`, `WebSocket`,
//! `EventSource` and `importScripts` from its scope before any script runs.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use futures::FutureExt;
use futures::channel::oneshot;
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{Blob, BlobPropertyBag, MessageEvent, Url, Worker, WorkerOptions, WorkerType};

use crate::js::describe;
use crate::platform;

/// One script for the Worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptRequest {
    pub code: String,
    pub input: serde_json::Value,
    /// `agent_tools::builtin::javascript::JsLimits`, as JSON.
    pub limits: serde_json::Value,
}

/// What the Worker answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptResponse {
    Ok {
        value: serde_json::Value,
        json_bytes: usize,
        elapsed_ms: u64,
    },
    Err {
        code: String,
        message: String,
    },
}

/// The Worker could not run the script.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    #[error(
        "the script ran past its hard deadline of {0:?}; the Worker was terminated and will be replaced"
    )]
    Terminated(Duration),
    #[error("the JavaScript Worker could not start: {0}")]
    Start(String),
    #[error("the JavaScript Worker failed: {0}")]
    Failed(String),
    /// The Worker died with the script in flight (it reported an error, or
    /// the page let go of it): the executor of that call is lost.
    #[error("the JavaScript Worker died with the script in flight: {0}")]
    Lost(String),
}

type Pending = Rc<RefCell<HashMap<u64, oneshot::Sender<Result<String, String>>>>>;

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

/// The `run_javascript` Worker of one tab: started on first use, one script
/// at a time, terminated and replaced past a deadline.
pub struct ScriptWorker {
    glue_url: String,
    glue_blob: RefCell<Option<String>>,
    live: RefCell<Option<Rc<Live>>>,
    next_id: Cell<u64>,
    turn: futures::lock::Mutex<()>,
    started: Cell<u32>,
}

impl std::fmt::Debug for ScriptWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptWorker")
            .field("glue_url", &self.glue_url)
            .field("workers_started", &self.started.get())
            .finish()
    }
}

/// The Worker's own script: wait for the module, drop every network API,
/// then answer `run` messages with `__agentrt_worker_run`.
fn worker_source(glue_blob_url: &str) -> String {
    format!(
        r#"import init, {{ __agentrt_worker_run as run }} from {glue};
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
    let response;
    try {{ response = run(m.request); }}
    catch (e) {{ response = JSON.stringify({{ err: {{ code: 'js_engine_error', message: String(e && e.message || e) }} }}); }}
    self.postMessage({{ kind: 'result', id: m.id, response }});
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

async fn fetch_text(url: &str) -> Result<String, WorkerError> {
    let fetch = crate::js::global_property("fetch")
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| WorkerError::Start("no fetch to load the wasm glue".into()))?;
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
    let text = js_sys::Reflect::get(&response, &JsValue::from_str("text"))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| WorkerError::Start("response has no text()".into()))?
        .call0(&response)
        .map_err(|e| WorkerError::Start(describe(&e)))?;
    wasm_bindgen_futures::JsFuture::from(js_sys::Promise::from(text))
        .await
        .map_err(|e| WorkerError::Start(describe(&e)))?
        .as_string()
        .ok_or_else(|| WorkerError::Start("glue is not text".into()))
}

impl ScriptWorker {
    /// A Worker that instantiates this wasm module through the glue at
    /// `glue_url` (the `wasm-bindgen --target web` JavaScript file).
    pub fn new(glue_url: &str) -> ScriptWorker {
        ScriptWorker {
            glue_url: glue_url.to_owned(),
            glue_blob: RefCell::new(None),
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

    async fn glue_blob(&self) -> Result<String, WorkerError> {
        if let Some(url) = self.glue_blob.borrow().clone() {
            return Ok(url);
        }
        let text = fetch_text(&self.glue_url).await?;
        let url = blob_url(&text, "text/javascript")?;
        *self.glue_blob.borrow_mut() = Some(url.clone());
        Ok(url)
    }

    async fn live(&self) -> Result<Rc<Live>, WorkerError> {
        if let Some(live) = self.live.borrow().clone() {
            return Ok(live);
        }
        let glue = self.glue_blob().await?;
        let script = blob_url(&worker_source(&glue), "text/javascript")?;
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        options.set_name("agentrt-run-javascript");
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
                        if id >= 0.0
                            && let Some(tx) = pending.borrow_mut().remove(&(id as u64))
                        {
                            let _ = tx.send(Ok(response));
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
        let _ = js_sys::Reflect::set(&init, &"module".into(), &wasm_bindgen::module());
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
        let text =
            serde_json::to_string(request).map_err(|e| WorkerError::Failed(e.to_string()))?;
        let message = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&message, &"kind".into(), &"run".into());
        let _ = js_sys::Reflect::set(&message, &"id".into(), &JsValue::from_f64(id as f64));
        let _ = js_sys::Reflect::set(&message, &"request".into(), &JsValue::from_str(&text));
        if let Err(e) = live.worker.post_message(&message) {
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
                // Start the replacement now, so the next script does not wait for it.
                let _ = self.live().await;
                Err(WorkerError::Terminated(hard_deadline))
            }
            Some(Err(_)) => {
                self.terminate("lost");
                Err(WorkerError::Lost("the Worker dropped the script".into()))
            }
            Some(Ok(Err(message))) => {
                self.terminate(&message);
                Err(WorkerError::Lost(message))
            }
            Some(Ok(Ok(text))) => {
                serde_json::from_str(&text).map_err(|e| WorkerError::Failed(e.to_string()))
            }
        }
    }
}

impl Drop for ScriptWorker {
    fn drop(&mut self) {
        self.terminate("the runtime was dropped");
        if let Some(url) = self.glue_blob.borrow_mut().take() {
            let _ = Url::revoke_object_url(&url);
        }
    }
}

/// The Worker's entry point: run one `ScriptRequest` (JSON) in QuickJS and
/// answer a `ScriptResponse` (JSON). Called by the Worker script only.
#[cfg(feature = "runtime")]
#[wasm_bindgen(js_name = __agentrt_worker_run)]
pub fn worker_run(request: &str) -> String {
    use agent_tools::builtin::javascript::{JsLimits, browser_monotonic, run_script};
    let response = match serde_json::from_str::<ScriptRequest>(request) {
        Err(e) => ScriptResponse::Err {
            code: "js_engine_error".into(),
            message: format!("bad request to the Worker: {e}"),
        },
        Ok(req) => match serde_json::from_value::<JsLimits>(req.limits.clone()) {
            Err(e) => ScriptResponse::Err {
                code: "js_engine_error".into(),
                message: format!("bad limits: {e}"),
            },
            Ok(limits) => {
                let now = browser_monotonic();
                match run_script(&req.code, &req.input, &limits, move || now()) {
                    Ok(out) => ScriptResponse::Ok {
                        value: out.value,
                        json_bytes: out.json_bytes,
                        elapsed_ms: u64::try_from(out.elapsed.as_millis()).unwrap_or(u64::MAX),
                    },
                    Err(e) => ScriptResponse::Err {
                        code: e.code().to_owned(),
                        message: e.to_string(),
                    },
                }
            }
        },
    };
    // A response is strings, numbers and JSON values: it always serialises.
    serde_json::to_string(&response).unwrap_or_else(|_| {
        r#"{"err":{"code":"js_engine_error","message":"unencodable response"}}"#.to_owned()
    })
}
