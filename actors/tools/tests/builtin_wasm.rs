//! `run_javascript`'s engine in headless Chromium (wasm32): the module links
//! with the clock shim (no `env` import left), and time, stack, heap and
//! output limits hold there too (S5.7). Run with
//! `cargo test -p agent-tools --target wasm32-unknown-unknown --test builtin_wasm`
//! (CHROMEDRIVER and the repository's webdriver.json, as in TOOLCHAIN.md).
#![cfg(target_arch = "wasm32")]

use agent_tools::builtin::javascript::{JsError, JsLimits, browser_monotonic, run_script};
use serde_json::json;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn run(code: &str, limits: &JsLimits) -> Result<serde_json::Value, JsError> {
    let now = browser_monotonic();
    run_script(code, &json!({"a": 20}), limits, move || now()).map(|o| o.value)
}

#[wasm_bindgen_test]
fn engine_runs_with_every_limit_in_the_browser() {
    let d = JsLimits::DEFAULT;
    assert_eq!(run("input.a + 22", &d), Ok(json!(42)));
    // Date comes through the `__rquickjs_host_now_us` shim.
    assert_eq!(run("Date.now() > 1.7e12", &d), Ok(json!(true)));
    let short = JsLimits { time_ms: 200, ..d };
    assert_eq!(
        run("while (true) {}", &short),
        Err(JsError::TimeLimit { limit_ms: 200 })
    );
    assert_eq!(
        run("function f(n) { return f(n + 1) + 1 } f(0)", &d),
        Err(JsError::StackLimit {
            limit_bytes: d.stack_bytes
        })
    );
    assert_eq!(
        run("new ArrayBuffer(1024 * 1024 * 1024)", &d),
        Err(JsError::MemoryLimit {
            limit_bytes: d.heap_bytes
        })
    );
    assert!(matches!(
        run(&format!("'x'.repeat({})", d.output_bytes), &d),
        Err(JsError::OutputTooLarge { .. })
    ));
    assert_eq!(
        run("typeof fetch + typeof setTimeout", &d),
        Ok(json!("undefinedundefined"))
    );
}
