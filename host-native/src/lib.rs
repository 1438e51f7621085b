//! `agent-host-native`: the native host of the Trusted Agent Runtime.
//!
//! - [`sqlite`]: the SQLite store (`agent-store-sqlite`) opened with this
//!   process's liveness check, so that a dead process's lease is taken at once;
//! - [`private`]: the file modes of the data directory (0700), and of the
//!   database files (0600, owned by `agent-store-sqlite`), whatever the umask;
//! - [`process`]: lease owners that name this process, and a `/proc`
//!   liveness check so that a dead process's lease is taken over at once;
//! - [`host`]: the tokio executor, the system clock, OS entropy, and
//!   [`host::NativeHost`], which bundles them into the kernel's `Host`, with
//!   process leases renewed by a heartbeat;
//! - [`config`]: the `agentrt` TOML configuration file;
//! - [`app`]: the wired runtime (every tool actor registered, the
//!   supervisor's `Runtime`, launch records);
//! - [`demo`]: the embedded demo scenario;
//! - [`serve`]: what `agentrt serve` serves: the local gateway, the demo
//!   page's static routes beside it, the model relay and MCP through the
//!   gateway;
//! - `sim` (feature `sim`, on by default): the tab-loss simulator for
//!   native test hosts (`agentrt sim`), and Deep Research in it;
//! - `pause` (feature `test-hooks`, never in a release build): a test-only
//!   pause at a named journal boundary (SIGKILL tests); the same feature
//!   turns on the supervisor's deliberate faults (`Sabotage`);
//! - [`sandbox`]: the one mechanism of the killable sandbox processes
//!   (spawn, pipes, framing, kill at the deadline, reaping);
//! - [`script_sandbox`]: the killable process `run_javascript` scripts run
//!   in (`agentrt __script-sandbox`);
//! - [`document_sandbox`]: the killable, address-space-capped process that
//!   reads HTML and PDFs (`agentrt __document-sandbox`);
//! - [`workers`]: runs handed to workers through the store (`agentrt run
//!   --detach`, `agentrt resume --detach`, an embedder's call), and
//!   `agentrt worker`, which executes them, many workers sharing one
//!   database (S14.1), with its health report.
//!
//! The `agentrt` binary's own code (argument parsing, one module per group
//! of commands, the output) is in `src/cli/`, beside `src/main.rs`.
//!
//! Storage backends are crates of their own (`stores/sqlite`,
//! `stores/postgres`): this host picks one and wires it. tokio because every
//! other native crate here (axum, reqwest) runs on it.
//!
//! # Example
//!
//! A Rust program opens the native runtime over a data directory and runs a
//! turn, as `agentrt run` does (`examples/embed.rs` is the same with events
//! and a tool call; the book's "Embedding from Rust" chapter explains each
//! step):
//!
//! ```
//! use std::sync::Arc;
//!
//! use agent_host_native::app::{App, AppOptions};
//! use agent_host_native::host::SystemClock;
//! use agent_kernel::SessionId;
//! use agent_kernel::run::RunStatus;
//! use agent_supervisor::{RunConfig, Scenario, ScriptedProvider};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let scenario = Scenario::from_json(r#"{"turns": [{"text": "Hello."}]}"#)?;
//! let clock = Arc::new(SystemClock::new(tokio::runtime::Handle::current()));
//! let provider = Arc::new(ScriptedProvider::new(scenario, clock));
//! let app = App::open(&dir.path().join("agentrt"), AppOptions::default(), provider).await?;
//!
//! let session = SessionId::new("doc")?;
//! let _opened = app.open_session(&session).await?;
//! let run = app.runtime().start(&session, "Say hello.", RunConfig::default()).await?;
//! assert_eq!(app.runtime().wait_settled(&run).await?.status, RunStatus::Completed);
//! assert_eq!(app.run_view(&run).await?.output.as_deref(), Some("Hello."));
//! app.native().shut_down();
//! # Ok(())
//! # }
//! ```

pub mod app;
pub mod config;
pub mod demo;
pub mod document_sandbox;
pub mod host;
pub mod mcp_auth;
#[cfg(feature = "test-hooks")]
pub mod pause;
pub mod private;
pub mod process;
pub mod sandbox;
pub mod script_sandbox;
pub mod serve;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sqlite;
pub mod workers;
