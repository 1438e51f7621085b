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
//!
//! # Design
//!
//! A tool is an actor on the kernel's one tool-actor shell: its author writes
//! a [`Tool`] (a `ToolDefinition` and an async `call`), and [`spawn_tool`]
//! gives it argument validation, capability verification, cancellation,
//! tracing and failure reports, so no tool checks a capability itself. The
//! tools actor ([`pipeline`]) owns what is the same for every tool: the
//! registry and the model-facing names, discovery (`search_tools`,
//! `load_tools`), preparing a call (parse, canonicalise, validate, derive the
//! target, ask the policy), dispatch, and the result envelope (trust floor,
//! size bounds, spilling to the workspace). The supervisor asks it through
//! `ToolsMsg`; it never sees a tool's actor. A whole tool, from definition to
//! dispatch, is `examples/word_count.rs` (`cargo run -p agent-tools --example
//! word_count`).
//!
//! # Example
//!
//! Arguments arrive as the model's text: they are parsed into one canonical
//! object (RFC 8785, so a call's argument hash is stable), then checked
//! against the definition's JSON Schema, with values masked in the errors:
//!
//! ```
//! use agent_tools::validate::{ArgumentError, CompiledSchema, parse_arguments};
//! use serde_json::json;
//!
//! let schema = CompiledSchema::compile(&json!({
//!     "type": "object",
//!     "properties": {"text": {"type": "string"}, "top": {"type": "integer", "maximum": 10}},
//!     "required": ["text"],
//!     "additionalProperties": false
//! }))
//! .unwrap();
//!
//! let good = parse_arguments(r#"{ "top": 3, "text": "to be or not to be" }"#).unwrap();
//! assert_eq!(good.canonical, r#"{"text":"to be or not to be","top":3}"#);
//! assert!(schema.check(&good.value).is_ok());
//!
//! let bad = parse_arguments(r#"{"text": "x", "top": 99}"#).unwrap();
//! assert!(matches!(schema.check(&bad.value), Err(ArgumentError::Schema { .. })));
//! assert!(parse_arguments("[1, 2]").is_err()); // not an object
//! ```

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
