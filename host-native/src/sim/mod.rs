//! The tab-loss simulator for native test hosts (feature `sim`, issue 17):
//! several "tabs" over one SQLite database, each a full assembly
//! (`agent_assembly::Assembly`) wired from the same parts a host passes in
//! ([`SimWiring`]: provider, the host's own tools, plugins, secrets, run
//! configuration with its budget and Skill), each with its own
//! deterministic executor and lease owner, all sharing one manual clock.
//!
//! A tab can be killed without any cleanup, or be sent a lifecycle event
//! (online, offline, page hidden, executor lost), at a chosen journal
//! boundary, at its n-th commit, after n executor polls (an await point),
//! or at once; tabs open, reload and close; a person approves, denies,
//! answers, decides and stops through the tab's helpers. Every call that
//! reaches a tool is observed with the journal record durable at that
//! moment and handed to the invariants library
//! (`agent_supervisor::sim::invariants`), which [`TabSim::checker`] exposes;
//! [`run_seeds`] drives a whole [`SimPlan`] from seeds and returns the
//! summary line (S2.3, S2.5, S3.1, S3.3, S6.4).
//!
//! Plugins run on a tokio runtime of the simulation (their HTTP requests
//! are real, to the test host's own loopback servers) on the tabs' clock:
//! while one is in flight the tab waits for its answer instead of moving
//! the clock.
//!
//! ```no_run
//! # use agent_host_native::sim::{TabSim, KillAt};
//! let sim = TabSim::create(std::path::Path::new("/tmp/sim.sqlite3"), 7).unwrap();
//! let a = sim.open_tab("a").unwrap();
//! a.kill_at(KillAt::Journal { state: "running".into(), tool: "send_ticket".into() });
//! let run = a.start("session-1", "go").unwrap();
//! a.drive();                       // runs until the kill
//! assert!(a.is_dead());
//! let b = sim.open_tab("b").unwrap();
//! assert!(b.recover().unwrap().is_empty()); // the dead tab's lease is live
//! sim.expire_leases();
//! b.recover().unwrap();
//! b.resume(&run).unwrap();
//! b.drive();
//! ```
//!
//! [`TabSim::create`] wires the supervisor's simulator tools (`read_note`,
//! `write_note`, the counting external write `send_ticket`, ...), whose
//! [`ToolLog`](agent_supervisor::sim::tools::ToolLog) records every execution.

mod at;
pub mod compaction;
mod error;
mod file;
pub mod research;
mod seeds;
mod tab;
mod tabs;
mod wiring;

pub use at::{At, Interruption, KillAt};
pub use error::SimError;
pub use file::{SimFile, SimFilePerson, SimFileSession, SimReportFile};
pub use seeds::{SeedReport, SessionPlan, SimPlan, run_seeds, simulate_seed};
pub use tab::{Person, Tab};
pub use tabs::TabSim;
pub use wiring::{NoSecrets, ProviderFactory, SimWiring, ToolsFactory};
