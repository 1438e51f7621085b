//! The draft and capability checks made right before an effect (S5.3); their
//! one owner is `agent_kernel::tool::gate`, re-exported here.

pub use agent_kernel::tool::gate::*;
