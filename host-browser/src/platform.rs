//! The browser's clock (`Date.now()`, `performance.now()`, `setTimeout`),
//! entropy (`crypto.getRandomValues` through getrandom's `wasm_js` backend)
//! and executor (`wasm_bindgen_futures::spawn_local`, no tokio).

use std::time::Duration;

use agent_kernel::BoxFuture;
use agent_kernel::host::{Clock, Entropy, Executor};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

use crate::js;

/// Wall time from `Date.now()`, monotonic time from `performance.now()`,
/// sleep through `setTimeout`. Works in a window and in a worker.
#[derive(Debug, Clone, Default)]
pub struct BrowserClock;

fn performance_now_ms() -> f64 {
    js::global_property("performance")
        .and_then(|p| {
            let now = js_sys::Reflect::get(&p, &JsValue::from_str("now")).ok()?;
            now.dyn_into::<js_sys::Function>().ok()?.call0(&p).ok()
        })
        .and_then(|v| v.as_f64())
        // Without `performance` (never in a supported browser) fall back to Date.
        .unwrap_or_else(js_sys::Date::now)
}

/// A promise that resolves after `ms` milliseconds of `setTimeout`.
pub fn timeout_promise(ms: f64) -> js_sys::Promise {
    js_sys::Promise::new(&mut |resolve: js_sys::Function, reject: js_sys::Function| {
        let set_timeout =
            js::global_property("setTimeout").and_then(|f| f.dyn_into::<js_sys::Function>().ok());
        match set_timeout {
            Some(f) => {
                if let Err(e) = f.call2(&JsValue::UNDEFINED, &resolve, &JsValue::from_f64(ms)) {
                    let _ = reject.call1(&JsValue::UNDEFINED, &e);
                }
            }
            None => {
                let _ = reject.call1(&JsValue::UNDEFINED, &JsValue::from_str("no setTimeout"));
            }
        }
    })
}

/// Sleep `duration` on the browser's timer.
pub async fn sleep(duration: Duration) {
    // A rejected timer (no setTimeout in this scope) ends the sleep early
    // rather than never; callers treat sleeps as upper bounds.
    let _ = wasm_bindgen_futures::JsFuture::from(timeout_promise(duration.as_secs_f64() * 1000.0))
        .await;
}

impl Clock for BrowserClock {
    fn wall_ms(&self) -> u64 {
        let now = js_sys::Date::now();
        if now.is_finite() && now > 0.0 {
            now as u64
        } else {
            0
        }
    }

    fn monotonic(&self) -> Duration {
        let ms = performance_now_ms();
        if ms.is_finite() && ms > 0.0 {
            Duration::from_secs_f64(ms / 1000.0)
        } else {
            Duration::ZERO
        }
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(sleep(duration))
    }
}

/// Random bytes from `crypto.getRandomValues`.
#[derive(Debug, Clone)]
pub struct BrowserEntropy {
    _probed: (),
}

/// The browser gave no random bytes (no `crypto` in this context).
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "crypto.getRandomValues is unavailable here ({0}); run the runtime in a secure browser context"
)]
pub struct EntropyUnavailable(String);

impl BrowserEntropy {
    /// Check once that `crypto.getRandomValues` works; `fill` relies on it.
    pub fn new() -> Result<BrowserEntropy, EntropyUnavailable> {
        let mut probe = [0u8; 8];
        getrandom::fill(&mut probe).map_err(|e| EntropyUnavailable(e.to_string()))?;
        Ok(BrowserEntropy { _probed: () })
    }
}

impl Entropy for BrowserEntropy {
    fn fill(&self, buf: &mut [u8]) {
        // Invariant: `new` proved getRandomValues works in this context, and
        // it does not start failing later; a failure here would leave zeros,
        // so it is reported loudly.
        if let Err(e) = getrandom::fill(buf) {
            web_sys::console::error_1(&JsValue::from_str(&format!(
                "crypto.getRandomValues failed after a successful probe: {e}"
            )));
        }
    }
}

/// Spawns tasks on the page's event loop with `spawn_local`.
#[derive(Debug, Clone, Default)]
pub struct BrowserExecutor;

impl Executor for BrowserExecutor {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        wasm_bindgen_futures::spawn_local(task);
    }

    /// A tab has no blocking threads: the job runs as its own task on the
    /// event loop. CPU-heavy work (JavaScript) goes to a Worker instead.
    fn spawn_blocking(&self, job: Box<dyn FnOnce() + Send + 'static>) {
        wasm_bindgen_futures::spawn_local(async move {
            sleep(Duration::ZERO).await;
            job();
        });
    }
}
