//! Page lifecycle events (S2.5) reach the host's `Lifecycle` in headless Chromium.
#![cfg(target_arch = "wasm32")]

use std::time::Duration;

use agent_host_browser::page::PageEvents;
use agent_host_browser::platform::BrowserClock;
use agent_kernel::host::{Lifecycle, LifecycleEvent, timeout};
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn dispatch(name: &str) {
    let window = web_sys::window().expect("a window");
    let event = web_sys::Event::new(name).expect("event");
    window.dispatch_event(&event).expect("dispatch");
}

#[wasm_bindgen_test]
async fn s2_5_pagehide_offline_online_become_lifecycle_events() {
    let lifecycle = Lifecycle::new();
    let events = lifecycle.subscribe();
    let page = PageEvents::install(&lifecycle);
    dispatch("pagehide");
    dispatch("offline");
    dispatch("online");
    dispatch("visibilitychange"); // not a lifecycle event: ignored
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(
            timeout(&BrowserClock, Duration::from_secs(1), events.recv())
                .await
                .expect("in time")
                .expect("open"),
        );
    }
    assert_eq!(
        seen,
        vec![
            LifecycleEvent::PageHidden,
            LifecycleEvent::Offline,
            LifecycleEvent::Online
        ]
    );
    assert!(events.try_recv().is_err(), "nothing else");
    // Dropped: the listeners are gone.
    drop(page);
    dispatch("offline");
    assert!(events.try_recv().is_err(), "no listener after drop");
    assert!(lifecycle.is_online());
}

/// S2.5 (issue 17 item 4): a frozen page (`freeze` on the document) and a
/// page hidden into the back/forward cache (`pagehide` with `persisted`)
/// keep no executor for their runs: both raise `ExecutorLost`; a plain
/// `pagehide` stays `PageHidden`.
#[wasm_bindgen_test]
async fn s2_5_freeze_and_a_persisted_pagehide_raise_executor_lost() {
    let lifecycle = Lifecycle::new();
    let events = lifecycle.subscribe();
    let _page = PageEvents::install(&lifecycle);
    let document = web_sys::window()
        .and_then(|w| w.document())
        .expect("a document");
    document
        .dispatch_event(&web_sys::Event::new("freeze").expect("event"))
        .expect("dispatch");
    let init = web_sys::PageTransitionEventInit::new();
    init.set_persisted(true);
    let persisted =
        web_sys::PageTransitionEvent::new_with_event_init_dict("pagehide", &init).expect("event");
    web_sys::window()
        .expect("window")
        .dispatch_event(&persisted)
        .expect("dispatch");
    dispatch("pagehide");
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(
            timeout(&BrowserClock, Duration::from_secs(1), events.recv())
                .await
                .expect("in time")
                .expect("open"),
        );
    }
    assert_eq!(
        seen,
        vec![
            LifecycleEvent::ExecutorLost,
            LifecycleEvent::ExecutorLost,
            LifecycleEvent::PageHidden
        ]
    );
}
