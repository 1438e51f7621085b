//! S2.5: lifecycle events interrupt running work with the right reason; only
//! `resume` continues. The same scenario runs in headless Chromium (tests/wasm.rs).
#![cfg(not(target_arch = "wasm32"))]

mod common;

#[test]
fn s2_5_lifecycle_interrupts_and_only_resume_continues() {
    common::lifecycle_scenario();
}
