//! Session holding: what this tab holds while it executes a session (the
//! tab lock and the stored lease, through the assembly's `open_session`),
//! counted per user and released when the last command or run settles.

use std::rc::Rc;

use agent_assembly::{Assembly, SessionActionError};
use agent_kernel::host::{LeaseError, LeaseGuard};
use agent_kernel::{RunId, SessionId};
use agent_supervisor::RunError;
use wasm_bindgen::prelude::*;

use super::Inner;
use super::errors::{
    ErrorCode, assembly_error, js_error, lease_code, run_error, session_action_error,
};
use crate::locks::SessionLease;

/// What this tab holds while it executes a session: the stored lease (its
/// fence also opens the session's workspace) and the tab lock. The guard is
/// declared first so that it is released before the lock.
pub(crate) struct Hold {
    /// Shared with a session action in progress (it needs the guard across
    /// its awaits; the hold's user count keeps the hold meanwhile).
    pub(crate) guard: Rc<LeaseGuard>,
    pub(crate) _tab: SessionLease,
    /// Commands and runs of this tab using the session; released at zero.
    pub(crate) users: usize,
}

impl Inner {
    pub(super) async fn session_of(&self, run: &RunId) -> Result<SessionId, RunError> {
        if let Some(s) = self.sessions.borrow().get(run).cloned() {
            return Ok(s);
        }
        let record = self.assembly.runtime().run(run).await?;
        self.sessions
            .borrow_mut()
            .insert(run.clone(), record.session.clone());
        Ok(record.session)
    }

    /// This tab must hold the session's tab lock to execute it (S3.1).
    pub(super) async fn ensure_hold(&self, session: &SessionId) -> Result<(), JsValue> {
        if self.closed.get() {
            return Err(js_error(ErrorCode::Unavailable, "this runtime was closed"));
        }
        if let Some(hold) = self.holds.borrow_mut().get_mut(session) {
            hold.users += 1;
            return Ok(());
        }
        let lease = self.leases.hold(session).await.map_err(|e| {
            let code = lease_code(&e);
            match e {
                LeaseError::Held { .. } => js_error(
                    code,
                    format!("session {session} is being executed in another tab; wait until it finishes there or close that tab"),
                ),
                other => js_error(code, other),
            }
        })?;
        // The stored lease, the workspace with its fence, and — since this
        // tab now holds the session's Web Lock, so no other tab executes it —
        // recovery of a run another tab left `running` (closed before its
        // pagehide writes committed), now rather than at the next page load.
        let opened = match self.assembly.open_session(session).await {
            Ok(opened) => opened,
            Err(e) => {
                drop(lease);
                self.leases.notify_changed(session);
                return Err(assembly_error(e));
            }
        };
        self.holds.borrow_mut().insert(
            session.clone(),
            Hold {
                guard: Rc::new(opened.guard),
                _tab: lease,
                users: 1,
            },
        );
        if !opened.recovered.is_empty() {
            self.recovered
                .borrow_mut()
                .extend(opened.recovered.iter().map(|r| r.to_string()));
            self.leases.notify_changed(session);
        }
        Ok(())
    }

    /// One user of the session is done; the last one releases it.
    pub(super) fn done(&self, session: &SessionId) {
        let last = match self.holds.borrow_mut().get_mut(session) {
            Some(hold) => {
                hold.users = hold.users.saturating_sub(1);
                hold.users == 0
            }
            None => false,
        };
        if last {
            self.release(session);
        }
    }

    /// Give up the session: close its workspace, release the lease and the tab lock.
    pub(super) fn release(&self, session: &SessionId) {
        if self.holds.borrow_mut().remove(session).is_some() {
            self.assembly.workspaces().close(session);
            self.leases.notify_changed(session);
        }
    }

    /// Count this use of the session done once `run` settles here (it is
    /// no longer `running` in this tab): awaiting, interrupted or final.
    pub(super) fn release_when_settled(self: &Rc<Self>, run: RunId, session: SessionId) {
        let inner = Rc::downgrade(self);
        wasm_bindgen_futures::spawn_local(async move {
            let Some(strong) = inner.upgrade() else {
                return;
            };
            let _ = strong.assembly.runtime().wait_settled(&run).await;
            strong.done(&session);
        });
    }

    pub(super) async fn command(
        self: &Rc<Self>,
        run: &RunId,
        act: impl AsyncFnOnce(&Assembly) -> Result<(), RunError>,
    ) -> Result<(), JsValue> {
        let session = self.session_of(run).await.map_err(run_error)?;
        self.ensure_hold(&session).await?;
        let outcome = act(&self.assembly).await;
        self.release_when_settled(run.clone(), session);
        outcome.map_err(run_error)
    }

    /// A session action that changes `session` (import, copy into, delete):
    /// run with this tab holding the session (its tab lock and lease), as
    /// one more user of the hold, released when the action ends.
    pub(super) async fn session_action<T>(
        &self,
        session: &SessionId,
        act: impl AsyncFnOnce(&Assembly, &LeaseGuard) -> Result<T, SessionActionError>,
    ) -> Result<T, JsValue> {
        self.ensure_hold(session).await?;
        let guard = self.holds.borrow().get(session).map(|h| h.guard.clone());
        let outcome = match guard {
            Some(guard) => act(&self.assembly, &guard)
                .await
                .map_err(session_action_error),
            None => Err(js_error(
                ErrorCode::LeaseLost,
                format!("session {session} was released during the action"),
            )),
        };
        self.done(session);
        outcome
    }
}
