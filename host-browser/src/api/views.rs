//! Views handed to the page beyond the run view (which is the assembly's
//! `RunView`, shared with `agentrt show`): a workspace file or Artifact with
//! its bytes and, when UTF-8, its text.

use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::errors::to_js;

pub(crate) fn content_view<T: Serialize>(entry: &T, bytes: Vec<u8>) -> Result<JsValue, JsValue> {
    let out = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&out, &"entry".into(), &to_js(entry)?);
    if let Ok(text) = std::str::from_utf8(&bytes) {
        let _ = js_sys::Reflect::set(&out, &"text".into(), &JsValue::from_str(text));
    }
    let _ = js_sys::Reflect::set(
        &out,
        &"bytes".into(),
        &js_sys::Uint8Array::from(bytes.as_slice()).into(),
    );
    Ok(out.into())
}
