//! Small bridges between IndexedDB callbacks and Rust futures: a request or
//! a transaction as a future whose handlers are installed at once (before
//! any await), the text of a thrown JS value, and the global scope.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use futures::channel::oneshot;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{Event, IdbRequest, IdbTransaction};

type Callback = Closure<dyn FnMut(Event)>;

/// The outcome of a request or transaction, delivered by its event handlers.
pub struct EventFuture {
    rx: oneshot::Receiver<Result<JsValue, JsValue>>,
    // Kept alive until the future is dropped; the handlers are detached then.
    _callbacks: Vec<Callback>,
    detach: Box<dyn Fn()>,
}

impl Drop for EventFuture {
    fn drop(&mut self) {
        (self.detach)();
    }
}

impl Future for EventFuture {
    type Output = Result<JsValue, JsValue>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(Ok(v)) => Poll::Ready(v),
            Poll::Ready(Err(_)) => Poll::Ready(Err(JsValue::from_str(
                "the browser dropped an IndexedDB callback before it fired",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

type Slot = Rc<RefCell<Option<oneshot::Sender<Result<JsValue, JsValue>>>>>;

fn settle(slot: &Slot, value: Result<JsValue, JsValue>) {
    if let Some(tx) = slot.borrow_mut().take() {
        // The receiver may be gone (the caller stopped waiting): nothing to tell.
        let _ = tx.send(value);
    }
}

/// Wait for `req`'s `success` (its result) or `error` (its error). The
/// handlers are installed now, so the future may be awaited later in the
/// same task without missing the event.
pub fn request(req: &IdbRequest) -> EventFuture {
    let (tx, rx) = oneshot::channel();
    let slot: Slot = Rc::new(RefCell::new(Some(tx)));
    let ok = {
        let slot = slot.clone();
        let req = req.clone();
        Closure::<dyn FnMut(Event)>::new(move |_e: Event| {
            settle(&slot, req.result());
        })
    };
    let err = {
        let slot = slot.clone();
        let req = req.clone();
        Closure::<dyn FnMut(Event)>::new(move |_e: Event| {
            let error = req
                .error()
                .ok()
                .flatten()
                .map(JsValue::from)
                .unwrap_or_else(|| JsValue::from_str("IndexedDB request failed"));
            settle(&slot, Err(error));
        })
    };
    req.set_onsuccess(Some(ok.as_ref().unchecked_ref()));
    req.set_onerror(Some(err.as_ref().unchecked_ref()));
    let detach_req = req.clone();
    EventFuture {
        rx,
        _callbacks: vec![ok, err],
        detach: Box::new(move || {
            detach_req.set_onsuccess(None);
            detach_req.set_onerror(None);
        }),
    }
}

/// Wait for `tx` to `complete` (Ok) or to `abort`/fail (Err with its error).
pub fn transaction(tx: &IdbTransaction) -> EventFuture {
    let (sender, rx) = oneshot::channel();
    let slot: Slot = Rc::new(RefCell::new(Some(sender)));
    let complete = {
        let slot = slot.clone();
        Closure::<dyn FnMut(Event)>::new(move |_e: Event| settle(&slot, Ok(JsValue::UNDEFINED)))
    };
    let fail = {
        let slot = slot.clone();
        let tx = tx.clone();
        Closure::<dyn FnMut(Event)>::new(move |_e: Event| {
            let error = tx
                .error()
                .map(JsValue::from)
                .unwrap_or_else(|| JsValue::from_str("IndexedDB transaction aborted"));
            settle(&slot, Err(error));
        })
    };
    tx.set_oncomplete(Some(complete.as_ref().unchecked_ref()));
    tx.set_onabort(Some(fail.as_ref().unchecked_ref()));
    tx.set_onerror(Some(fail.as_ref().unchecked_ref()));
    let detach_tx = tx.clone();
    EventFuture {
        rx,
        _callbacks: vec![complete, fail],
        detach: Box::new(move || {
            detach_tx.set_oncomplete(None);
            detach_tx.set_onabort(None);
            detach_tx.set_onerror(None);
        }),
    }
}

/// A readable description of a thrown JS value (an `Error`, a `DOMException`, a string).
pub fn describe(value: &JsValue) -> String {
    if let Some(s) = value.as_string() {
        return s;
    }
    let name = js_sys::Reflect::get(value, &JsValue::from_str("name"))
        .ok()
        .and_then(|v| v.as_string());
    let message = js_sys::Reflect::get(value, &JsValue::from_str("message"))
        .ok()
        .and_then(|v| v.as_string());
    match (name, message) {
        (Some(n), Some(m)) => format!("{n}: {m}"),
        (None, Some(m)) => m,
        (Some(n), None) => n,
        (None, None) => format!("{value:?}"),
    }
}

/// A property of the global scope (a window or a worker), if present.
pub fn global_property(name: &str) -> Option<JsValue> {
    js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str(name))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}
