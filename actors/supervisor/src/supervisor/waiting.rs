//! Waiting for work while a run is `running`: a stop queued between two
//! waits is taken first; during a wait the supervisor listens for a stop,
//! lifecycle events (offline, page hidden) and the duration budget (S4.4),
//! writes child links at once, refuses other commands as busy, and makes the
//! active time durable at intervals (S4.1).

use std::time::Duration;

use futures::FutureExt;
use futures::future::{Either, Fuse, FusedFuture};

use agent_kernel::actor::Inbox;
use agent_kernel::host::LifecycleEvent;
use agent_kernel::maybe_send::BoxFuture;

use super::{Answer, Interruption, MIN_ACTIVE_TIME_FLUSH, Msg, Supervisor, Watched, link_child};
use crate::error::RunError;

impl Supervisor {
    /// Take the commands queued while the run was busy between two waits:
    /// child links are written, others refused as busy, and a stop is
    /// returned for the caller to carry out.
    pub(super) async fn queued_stop(&mut self, inbox: &Inbox<Msg>) -> Option<Answer> {
        let run = self.id();
        while let Ok(msg) = inbox.try_recv() {
            match msg {
                Msg::Stop { reply } => return Some(reply),
                Msg::LinkChild { child, reply } => {
                    let r = link_child(&mut self.writer, child).await;
                    reply.send(r);
                }
                other => other.reject(RunError::Busy { run: run.clone() }),
            }
        }
        None
    }

    /// Wait for `fut` while listening for stop and lifecycle events; other
    /// commands are refused as busy, child links are written at once. A
    /// stop that arrives as `fut` finishes is taken before the next step
    /// ([`Supervisor::queued_stop`]).
    ///
    /// The run is `running` throughout, so the wait is active time (S4.1):
    /// a timer on the host clock ends the wait when the duration budget runs
    /// out (S4.4), and the active time so far is made durable at least every
    /// `RuntimeOptions::active_time_flush`, so a crash in a long wait loses
    /// at most that much of it.
    pub(super) async fn watch<T>(
        &mut self,
        inbox: &Inbox<Msg>,
        fut: &mut BoxFuture<'static, T>,
    ) -> Result<Watched<T>, RunError> {
        let run = self.id();
        let clock = self.ctx.host.clock.clone();
        let flush_every = self
            .ctx
            .options
            .active_time_flush
            .max(MIN_ACTIVE_TIME_FLUSH);
        let out_of_time_at = self
            .config
            .budget
            .duration_left_ms(&self.usage_now())
            .map(|left| {
                clock
                    .monotonic()
                    .saturating_add(Duration::from_millis(left))
            });
        let mut timer: Fuse<BoxFuture<'static, ()>> = Fuse::terminated();
        let mut inbox_open = true;
        let mut life_open = true;
        loop {
            let now = clock.monotonic();
            if out_of_time_at.is_some_and(|at| now >= at) {
                return Ok(Watched::OutOfTime);
            }
            if timer.is_terminated() {
                let wait = out_of_time_at
                    .map_or(flush_every, |at| at.saturating_sub(now).min(flush_every));
                timer = clock.sleep(wait).fuse();
            }
            let recv = if inbox_open {
                Either::Left(inbox.recv())
            } else {
                Either::Right(futures::future::pending())
            };
            let life = if life_open {
                Either::Left(self.lifecycle.recv())
            } else {
                Either::Right(futures::future::pending())
            };
            let recv = recv.fuse();
            let life = life.fuse();
            let work = (&mut *fut).fuse();
            futures::pin_mut!(recv, life, work);
            futures::select_biased! {
                out = work => return Ok(Watched::Done(out)),
                msg = recv => match msg {
                    Ok(Msg::Stop { reply }) => return Ok(Watched::Stop(reply)),
                    Ok(Msg::LinkChild { child, reply }) => {
                        let r = link_child(&mut self.writer, child).await;
                        reply.send(r);
                    }
                    Ok(Msg::Elicit { ask, answer, reply }) => {
                        let in_flight = self.in_flight.clone();
                        let r = self.elicitation_asked(in_flight.as_ref(), ask, answer).await;
                        reply.send(r);
                    }
                    Ok(Msg::Respond { request, text, reply })
                        if self.elicitations.is_waiting(&request) =>
                    {
                        let r = self.elicitation_answered(request, &text).await;
                        reply.send(r);
                    }
                    Ok(other) => other.reject(RunError::Busy { run: run.clone() }),
                    Err(_) => inbox_open = false,
                },
                event = life => match event {
                    Ok(LifecycleEvent::Offline) => return Ok(Watched::Interrupt(Interruption::Offline)),
                    Ok(LifecycleEvent::PageHidden) => return Ok(Watched::Interrupt(Interruption::PageHidden)),
                    Ok(LifecycleEvent::ExecutorLost) => {
                        return Ok(Watched::Interrupt(Interruption::ExecutorLost("host".into())));
                    }
                    Ok(LifecycleEvent::Online) => {}
                    Err(_) => life_open = false,
                },
                () = timer => {
                    // Out of time is seen at the top of the loop; otherwise
                    // the flush interval passed.
                    if out_of_time_at.is_none_or(|at| clock.monotonic() < at) {
                        self.writer.flush_active_time().await?;
                    }
                }
            }
        }
    }
}
