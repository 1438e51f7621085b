//! The core suite natively, on `agent_kernel::memory` (see `suite/`).

mod suite;

suite_cases!(test);
