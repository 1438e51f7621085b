//! Page lifecycle (S2.5): `pagehide`, `offline` and `online` on the window
//! and `freeze` on the document become `LifecycleEvent`s on the host's
//! `Lifecycle`, which the supervisor turns into checkpoints and
//! interruptions. A page that is frozen, or hidden into the back/forward
//! cache (`pagehide` with `persisted`), keeps no executor for its runs: both
//! raise `ExecutorLost`. A page that starts offline says so at once.
//! Listeners are removed when the `PageEvents` value drops.

use agent_kernel::host::{Lifecycle, LifecycleEvent};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{Event, EventTarget};

use crate::js;

type Listener = Closure<dyn FnMut(Event)>;

/// The installed window and document listeners.
pub struct PageEvents {
    listeners: Vec<(EventTarget, &'static str, Listener)>,
}

impl std::fmt::Debug for PageEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageEvents")
            .field(
                "events",
                &self
                    .listeners
                    .iter()
                    .map(|(_, n, _)| *n)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Which lifecycle event a DOM event stands for: its name, and for
/// `pagehide` whether the page is `persisted` (kept frozen in the
/// back/forward cache rather than unloaded).
pub fn lifecycle_event_for(name: &str, persisted: bool) -> Option<LifecycleEvent> {
    match name {
        "pagehide" if persisted => Some(LifecycleEvent::ExecutorLost),
        "pagehide" => Some(LifecycleEvent::PageHidden),
        "freeze" => Some(LifecycleEvent::ExecutorLost),
        "offline" => Some(LifecycleEvent::Offline),
        "online" => Some(LifecycleEvent::Online),
        _ => None,
    }
}

/// True when the browser says it is online (and when it cannot say).
pub fn navigator_online() -> bool {
    js::global_property("navigator")
        .and_then(|n| js_sys::Reflect::get(&n, &JsValue::from_str("onLine")).ok())
        .and_then(|v| v.as_bool())
        .unwrap_or(true)
}

impl PageEvents {
    /// Forward the window's `pagehide`, `offline` and `online` events and
    /// the document's `freeze` to `lifecycle`. Outside a window (a worker)
    /// nothing is installed.
    pub fn install(lifecycle: &Lifecycle) -> PageEvents {
        let mut listeners = Vec::new();
        if let Some(window) = web_sys::window() {
            let document: Option<EventTarget> = window.document().map(|d| d.unchecked_into());
            let window: EventTarget = window.unchecked_into();
            let targets = [
                (Some(window.clone()), "pagehide"),
                (Some(window.clone()), "offline"),
                (Some(window), "online"),
                (document, "freeze"),
            ];
            for (target, name) in targets {
                let Some(target) = target else { continue };
                let lifecycle = lifecycle.clone();
                let listener = Closure::<dyn FnMut(Event)>::new(move |e: Event| {
                    let persisted = js_sys::Reflect::get(&e, &JsValue::from_str("persisted"))
                        .ok()
                        .and_then(|v| v.as_bool())
                        .unwrap_or(false);
                    if let Some(event) = lifecycle_event_for(name, persisted) {
                        lifecycle.emit(event);
                    }
                });
                if target
                    .add_event_listener_with_callback(name, listener.as_ref().unchecked_ref())
                    .is_ok()
                {
                    listeners.push((target, name, listener));
                }
            }
        }
        if !navigator_online() {
            lifecycle.emit(LifecycleEvent::Offline);
        }
        PageEvents { listeners }
    }
}

impl Drop for PageEvents {
    fn drop(&mut self) {
        for (target, name, listener) in &self.listeners {
            let _ =
                target.remove_event_listener_with_callback(name, listener.as_ref().unchecked_ref());
        }
    }
}
