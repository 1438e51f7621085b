//! The names of the workspace's model-facing tools, in one place: the tool
//! definitions and the argument parser use them ([`crate::tools`]), and the
//! store checks that a proof for emptying the trash names its tool
//! ([`crate::store::authorise_empty_trash`]).

pub const LIST: &str = "workspace_list";
pub const READ: &str = "workspace_read";
pub const WRITE: &str = "workspace_write";
pub const MOVE: &str = "workspace_move";
pub const DELETE: &str = "workspace_delete";
pub const RESTORE: &str = "workspace_restore";
pub const EMPTY_TRASH: &str = "workspace_empty_trash";
pub const PUBLISH: &str = "publish_artifact";
