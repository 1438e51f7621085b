//! Runs handed to workers through a shared store (S14.1): the queue
//! ([`queue`]: the queued record, enqueueing a start or a resume, reading
//! the queue), `agentrt worker` ([`worker`]: claiming by the session's
//! lease, the loop, shutdown on SIGTERM) with where a claimed request goes
//! (`route`) and how it is executed (`execute`), and the worker's health
//! report ([`status`]).

mod execute;
pub mod queue;
mod route;
pub mod status;
pub mod worker;
