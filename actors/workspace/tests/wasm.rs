//! The core suite in headless Chromium (wasm-bindgen-test), on the same
//! `agent_kernel::memory` host as natively. Run with
//! `CHROMEDRIVER=/usr/bin/chromedriver WASM_BINDGEN_TEST_WEBDRIVER_JSON=webdriver.json
//! cargo test -p agent-workspace --target wasm32-unknown-unknown`.

#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

mod suite;

suite_cases!(wasm_bindgen_test);
