//! Where an extraction runs and how many run at once.
//!
//! [`on_extraction_stack`] runs one extraction natively on a thread of its
//! own with a known stack ([`EXTRACTION_STACK_BYTES`]) and waits for it: the
//! readability extractor recurses over the document tree, and the blocking
//! pool a host hands work to has threads with whatever stack that host
//! configured (tokio: 2 MiB by default, and a test harness thread may have
//! less). Callers call it from their host's blocking path
//! (`agent_kernel::actor::run_blocking`), so it never blocks an async task.
//!
//! [`ExtractionSlots`] bounds how many extractions run at once. A slot is
//! held until the extraction really ends: for work in process, also when
//! the caller stopped waiting at a deadline (the slot moves into the job);
//! for work in a place the host stops at the deadline (a sandbox process,
//! a Worker), until the place answers or is stopped. So slots count work
//! that is running, and a burst of hostile pages cannot pile up more work
//! than there are slots.
//!
//! In the browser (wasm32) there are no threads: the job runs where it is
//! called (the host's blocking path is a task on the page's event loop),
//! under the same slot count and the same HTML limits.

use std::sync::OnceLock;

/// Stack of an extraction thread. Measured need at the depth limit (512
/// nested `<div>`s, `examples/measure.rs`): 48–64 KiB in a release build,
/// 128–192 KiB in a debug build; 8 MiB is a margin of 40x, and an
/// untouched stack costs only address space.
pub const EXTRACTION_STACK_BYTES: usize = 8 * 1024 * 1024;

/// The extraction ended without an answer (its thread could not start, the
/// job panicked, or the slots are gone).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the text extraction did not finish: {detail}")]
pub struct ExtractionLost {
    pub detail: String,
}

/// Run `job` on a thread with [`EXTRACTION_STACK_BYTES`] of stack and wait
/// for its answer (natively); run it in place in the browser.
#[cfg(not(target_arch = "wasm32"))]
pub fn on_extraction_stack<T: Send>(job: impl FnOnce() -> T + Send) -> Result<T, ExtractionLost> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("html-extraction".into())
            .stack_size(EXTRACTION_STACK_BYTES)
            .spawn_scoped(scope, job)
            .map_err(|e| ExtractionLost {
                detail: format!("no extraction thread could start: {e}"),
            })?;
        worker.join().map_err(|_| ExtractionLost {
            detail: "the extractor failed (panicked) on this document".into(),
        })
    })
}

/// Run `job` on a thread with [`EXTRACTION_STACK_BYTES`] of stack and wait
/// for its answer (natively); run it in place in the browser.
#[cfg(target_arch = "wasm32")]
pub fn on_extraction_stack<T>(job: impl FnOnce() -> T) -> Result<T, ExtractionLost> {
    Ok(job())
}

/// A fixed number of extraction slots; [`ExtractionSlots::acquire`] waits
/// for a free one.
#[derive(Debug, Clone)]
pub struct ExtractionSlots {
    free: async_channel::Receiver<()>,
    release: async_channel::Sender<()>,
    count: usize,
}

/// One held slot: it returns to its pool when dropped. Move it into the
/// job, so that it is returned when the work ends, not when a caller stops
/// waiting.
#[derive(Debug)]
pub struct ExtractionSlot {
    release: async_channel::Sender<()>,
}

impl Drop for ExtractionSlot {
    fn drop(&mut self) {
        // The channel holds at most `count` tokens, and this one was taken
        // from it: there is always room.
        let _ = self.release.try_send(());
    }
}

impl ExtractionSlots {
    /// Slots of the process-wide pool that both tools share.
    pub const SHARED_SLOTS: usize = 2;

    /// `count` slots (at least one).
    pub fn new(count: usize) -> ExtractionSlots {
        let count = count.max(1);
        let (release, free) = async_channel::bounded(count);
        for _ in 0..count {
            let _ = release.try_send(());
        }
        ExtractionSlots {
            free,
            release,
            count,
        }
    }

    /// The process-wide pool: `fetch_url` (also when the gateway of
    /// `agentrt serve` reads for the browser) and `extract_document` share
    /// its [`ExtractionSlots::SHARED_SLOTS`] slots.
    pub fn shared() -> &'static ExtractionSlots {
        static SHARED: OnceLock<ExtractionSlots> = OnceLock::new();
        SHARED.get_or_init(|| ExtractionSlots::new(Self::SHARED_SLOTS))
    }

    /// How many extractions may run at once.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Slots free right now.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// Wait for a free slot and hold it.
    pub async fn acquire(&self) -> Result<ExtractionSlot, ExtractionLost> {
        self.free.recv().await.map_err(|_| ExtractionLost {
            detail: "the extraction slots are closed".into(),
        })?;
        Ok(ExtractionSlot {
            release: self.release.clone(),
        })
    }
}
