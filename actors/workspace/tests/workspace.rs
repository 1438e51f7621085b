//! The core suite natively, on `agent_kernel::memory` (see `suite/`).

#![cfg(not(target_arch = "wasm32"))]

mod suite;

suite_cases!(test);
