//! Reading and writing the runs' records. Every change goes through a
//! [`Tx`]: one fenced, atomic `Batch` carrying the lease epoch and a
//! compare-and-set on the run record, with the activities it produces
//! numbered gap-free and time-stamped monotonically. Blobs are written before
//! the batch that names them. The [`RunWriter`] also owns the accounting of
//! active time (S4.1): each commit adds the time spent `running` since the
//! previous one. The journal transitions of a call (a fresh `prepared`
//! record, `running` before dispatch, settled, settled as unfinished,
//! `effect_unknown`) are methods of [`Tx`], written once here. It owns,
//! too, the one transaction step "mark a call `effect_unknown` and ask the
//! person to decide" (S2.3, [`RunWriter::mark_effect_unknown`]), which the
//! supervisor's loop and recovery after a reload both use.
//!
//! - [`writer`]: the [`RunWriter`], which commits;
//! - [`tx`]: the [`Tx`] a change is built in, with the journal steps;
//! - [`records`]: where each record is kept and how it is read back;
//! - [`index`]: the runs by session and the live runs, whose rows only the
//!   writer writes, and the one listing of runs every host shows;
//! - [`events`]: the live events announced after each commit.

pub mod events;
pub mod index;
pub mod records;
pub mod tx;
pub mod writer;

pub use events::{EventBus, RunEvent};
pub use index::{list_runs, live_runs, runs_of_session};
pub use records::{RunMeta, journal_of, latest_checkpoint, load_run, pending_of, run_prefix};
pub(crate) use records::{decision_request, request_id};
pub use tx::Tx;
pub use writer::RunWriter;
