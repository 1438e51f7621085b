//! `agent-workspace`: each chat session's scratch workspace and its
//! immutable Artifacts (SPEC S7), and the model-facing tools over them.
//!
//! - [`path`]: the path policy. [`WorkspacePath::parse`] is the only way a
//!   string becomes a path: relative, NFC-normalised, portable, bounded. It
//!   lives in `agent_capabilities::path` (capability scopes use the same
//!   rule) and is re-exported here.
//! - [`limits`]: every limit and quota, documented, in one place.
//! - [`store`]: one session's files over the host's `Storage` — manifest
//!   entries in `Table::Manifests` under `<session>/<path>`, content in the
//!   blob store by SHA-256, a per-session revision counter. Every mutation is
//!   one fenced batch with compare-and-set conditions (the actor keeps a
//!   snapshot of the session's records, valid while the stored revision
//!   counter is unchanged); `expectedRevision`
//!   (or "must not exist") guards it, and a stale one fails with the latest
//!   entry and changes nothing (S7.3). Deletion goes to a trash
//!   (`Table::Trash`) that keeps path and revision until it is emptied.
//! - [`artifact`]: immutable Artifacts whose id is the SHA-256 of their bytes
//!   (`Table::Artifacts`, `<session>/<id>`), stored once (S7.4).
//! - [`session`]: copying a session copies references; deleting one frees
//!   only unreferenced blobs ([`gc`]) (S7.5).
//! - [`actor`]: the per-session workspace and artifact actors and their handles.
//! - [`tools`]: the built-in tools (`workspace_list`, `workspace_read`, ...,
//!   `publish_artifact`) as `ToolDefinition`s and one actor that verifies each
//!   invocation's capability before any effect; their names in
//!   [`tool_names`], which the store also reads (emptying the trash checks
//!   the proof names its tool).
//! - [`documents`]: the workspace as `extract_document`'s document store
//!   (an `agent_kernel::protocol::DocumentSource`).
//! - [`spill`]: the large-result helper (S5.8), an `agent_kernel::protocol::ResultSpill`.
//!
//! The workspace is never the host's file system: nothing here opens a file.
//! Unicode normalisation uses the maintained `unicode-normalization` crate.
//!
//! ```
//! use agent_workspace::WorkspacePath;
//! let p = WorkspacePath::parse("notes/cafe\u{301}.md").unwrap();
//! assert_eq!(p.as_str(), "notes/caf\u{e9}.md");
//! assert!(WorkspacePath::parse("../etc/passwd").is_err());
//! ```

pub mod actor;
pub mod artifact;
mod blobs;
pub mod documents;
pub mod error;
pub mod gc;
pub mod limits;
pub mod manifest;
pub mod mime;
pub mod path;
pub mod session;
pub mod spill;
pub mod store;
pub mod tool_names;
pub mod tools;

pub use actor::{
    ArtifactHandle, SessionActors, WorkspaceDirectory, WorkspaceHandle, spawn_artifacts,
    spawn_session, spawn_workspace,
};
pub use artifact::{Artifact, Artifacts, Published, PublishedFrom};
pub use documents::WorkspaceDocuments;
pub use error::{Quota, WorkspaceError};
pub use limits::Quotas;
pub use manifest::{FileEntry, Operation, Receipt, Source, TrashEntry};
pub use path::{PathError, PathErrorKind, WorkspacePath};
pub use session::{CopyReport, DeleteReport, copy_session, delete_session};
pub use spill::{SpillTarget, WorkspaceSpill, bounded_summary, spill_path};
pub use store::{Expect, Listing, Usage, Workspace};
pub use tools::{ToolDeps, WorkspaceTools, all_tool_definitions, builtin_tools, refuse_reserved};
