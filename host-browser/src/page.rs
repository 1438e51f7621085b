//! Page lifecycle (S2.5): `pagehide`, `offline` and `online` on the window
//! become `LifecycleEvent`s on the host's `Lifecycle`, which the supervisor
//! turns into checkpoints and interruptions. A page that starts offline says
//! so at once. Listeners are removed when the `PageEvents` value drops.

use agent_kernel::host::{Lifecycle, LifecycleEvent};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{Event, EventTarget};

use crate::js;

type Listener = Closure<dyn FnMut(Event)>;

/// The installed window listeners.
pub struct PageEvents {
    target: Option<EventTarget>,
    listeners: Vec<(&'static str, Listener)>,
}

impl std::fmt::Debug for PageEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageEvents")
            .field(
                "events",
                &self.listeners.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Which lifecycle event a DOM event name stands for.
pub fn lifecycle_event_for(name: &str) -> Option<LifecycleEvent> {
    match name {
        "pagehide" => Some(LifecycleEvent::PageHidden),
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
    /// Forward the page's `pagehide`, `offline` and `online` events to
    /// `lifecycle`. Outside a window (a worker) nothing is installed.
    pub fn install(lifecycle: &Lifecycle) -> PageEvents {
        let target: Option<EventTarget> = web_sys::window().map(|w| w.unchecked_into());
        let mut listeners = Vec::new();
        if let Some(target) = &target {
            for name in ["pagehide", "offline", "online"] {
                let Some(event) = lifecycle_event_for(name) else {
                    continue;
                };
                let lifecycle = lifecycle.clone();
                let listener = Closure::<dyn FnMut(Event)>::new(move |_e: Event| {
                    lifecycle.emit(event);
                });
                if target
                    .add_event_listener_with_callback(name, listener.as_ref().unchecked_ref())
                    .is_ok()
                {
                    listeners.push((name, listener));
                }
            }
        }
        if !navigator_online() {
            lifecycle.emit(LifecycleEvent::Offline);
        }
        PageEvents { target, listeners }
    }
}

impl Drop for PageEvents {
    fn drop(&mut self) {
        if let Some(target) = &self.target {
            for (name, listener) in &self.listeners {
                let _ = target
                    .remove_event_listener_with_callback(name, listener.as_ref().unchecked_ref());
            }
        }
    }
}
