//! `agent-tools`: the tool registry, discovery, the invocation pipeline and
//! result envelope, HTTP plugins, the tool-author API, and the built-in tools.
//!
//! - [`registry`]: tools per mode, reserved ids, collisions, model-facing names;
//! - [`discovery`]: BM25 `search_tools` and the 64-schema rule of `load_tools`;
//! - [`envelope`]: trust floor, fencing, size bounds and spilling of results;
//! - [`pipeline`]: the tools actor answering `ToolsMsg`;
//! - [`loaded`]: the durable record of the tools each run loaded;
//! - [`plugin`]: HTTP plugins and the `SecretResolver` the host implements;
//! - [`plugin_path`]: plugin path templates, placeholder values and the
//!   check that a request URL stays inside its function;
//! - [`author`], [`gate`], [`validate`], [`codes`]: re-exports of the one
//!   tool-actor shell, `agent_kernel::tool` (the `Tool` trait, `spawn_tool`,
//!   the capability gate, argument validation, the stable codes);
//!
//! HTTP uses `reqwest`
//! (tokio natively, the browser's fetch on wasm32).

pub mod author;
pub mod builtin;
pub mod codes;
pub mod discovery;
pub mod envelope;
pub mod gate;
pub mod loaded;
pub mod pipeline;
pub mod plugin;
pub mod plugin_path;
pub mod registry;
pub mod validate;

pub use author::{Tool, ToolContext, ToolHooks, spawn_tool, spawn_tool_with};
pub use pipeline::{ToolsHandle, ToolsOptions, spawn_tools};
pub use plugin::{PluginManifest, SecretHandle, SecretResolver, SecretValue, spawn_plugin};
pub use registry::{Registry, RegistryError, ToolRegistration};
