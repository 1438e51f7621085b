//! The one way a tool actor is made: the shell that authorises, refuses,
//! runs and answers every tool call (SPEC S5.3, S5.4), and what it needs.
//!
//! - [`shell`]: the [`Tool`] trait, [`ToolContext`] (with the call's
//!   cancellation signal), [`spawn_tool`] / [`spawn_tool_with`], hooks;
//! - [`definition`]: the [`ToolDefinitionBuilder`];
//! - [`builtin`]: [`BuiltinTool`], the one shape in which a tool crate
//!   hands its spawned tools to the assembly (`builtin_tools(host, deps)`);
//! - [`gate`]: the draft and capability checks made right before an effect
//!   (the tools actor's pre-check uses them too);
//! - [`validate`]: argument parsing, canonical form, JSON Schema, targets;
//! - [`cancel`]: the cancellation signal ([`CancelHandle`], [`CancelToken`]);
//! - [`codes`]: the stable error codes;
//! - [`names`]: model-facing names, reserved provider ids and tool names.
//!
//! Argument validation uses the maintained `jsonschema` crate (default
//! features off: no remote `$ref`s, no TLS, builds for wasm32).
//!
//! A tool in a few lines:
//!
//! ```
//! use std::sync::Arc;
//! use agent_kernel::host::{Clock, Executor, ManualClock};
//! use agent_kernel::memory::SimExecutor;
//! use agent_kernel::protocol::{ToolDefinition, ToolFailure, ToolSuccess};
//! use agent_kernel::tool::{Tool, ToolContext, spawn_tool};
//! use serde_json::json;
//!
//! struct WordCount;
//!
//! #[derive(serde::Deserialize)]
//! struct Args {
//!     text: String,
//! }
//!
//! #[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
//! #[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
//! impl Tool for WordCount {
//!     type Args = Args;
//!
//!     fn definition(&self) -> ToolDefinition {
//!         ToolDefinition::builder("word_count")
//!             .description("Count the words of a text.")
//!             .parameters(json!({
//!                 "type": "object",
//!                 "properties": {"text": {"type": "string", "maxLength": 10000}},
//!                 "required": ["text"],
//!                 "additionalProperties": false
//!             }))
//!             .annotations(json!({"readOnlyHint": true}))
//!             .build()
//!     }
//!
//!     async fn call(&self, ctx: &ToolContext, args: Args) -> Result<ToolSuccess, ToolFailure> {
//!         if args.text.trim().is_empty() {
//!             return Err(ctx.fail("empty_text", "give a text with at least one word"));
//!         }
//!         Ok(ctx.ok(json!({"words": args.text.split_whitespace().count()})))
//!     }
//! }
//!
//! let executor: Arc<dyn Executor> = Arc::new(SimExecutor::new());
//! let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(0));
//! let (addr, definition) = spawn_tool(executor, clock, WordCount).expect("a valid definition");
//! assert_eq!(definition.name, "word_count");
//! // Register `addr` with `definition` in the tools registry.
//! # drop(addr);
//! ```

pub mod builtin;
pub mod cancel;
pub mod codes;
pub mod definition;
pub mod gate;
pub mod names;
pub mod shell;
pub mod validate;

pub use builtin::BuiltinTool;
pub use cancel::{CancelHandle, CancelToken};
pub use definition::ToolDefinitionBuilder;
pub use gate::{
    check_draft, effect_request, precheck_capability, verify_capability, verify_capability_for,
};
pub use shell::{
    NoHooks, SpawnError, Tool, ToolContext, ToolHooks, ToolOptions, spawn_tool, spawn_tool_with,
    with_receipt,
};
