//! The lifecycle test (S2.5) in headless Chromium on the memory host.
#![cfg(target_arch = "wasm32")]
#![allow(clippy::arc_with_non_send_sync)]

mod common;

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn s2_5_lifecycle_in_the_browser() {
    common::lifecycle_scenario();
}

#[wasm_bindgen_test]
fn a_completed_run_in_the_browser() {
    let env = common::env(common::READ_THEN_ANSWER);
    let run = env.start("hello", agent_supervisor::RunConfig::default());
    let record = env.settle(&run);
    assert_eq!(record.status, agent_kernel::run::RunStatus::Completed);
    common::assert_gap_free_monotonic(&env.activities(&run), &record);
}
