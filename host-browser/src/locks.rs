//! Session leases across tabs (S3): a tab lock per session — Web Locks
//! (`navigator.locks.request(name, {ifAvailable: true}, cb)` held through one
//! pending Promise) or, where Web Locks is missing, a localStorage heartbeat
//! with an epoch — plus the stored lease epoch that fences every write, with
//! reentrancy counted in Rust and BroadcastChannel notices to other tabs.
//!
//! Web Locks are not reentrant (a nested request waits forever), so a nested
//! acquisition by the same tab only bumps a counter; the lock is released
//! when the last `SessionLease` of the session drops.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use agent_kernel::host::lease_cas;
use agent_kernel::host::{
    Clock, Executor, LeaseError, LeaseGuard, LeaseManager, LeaseRecord, Storage,
};
use agent_kernel::{OwnerId, SessionId};
use futures::channel::oneshot;
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{BroadcastChannel, MessageEvent};

use crate::idb::IdbStorage;
use crate::js;
use crate::platform;

/// The BroadcastChannel every tab of the origin listens on.
pub const CHANNEL: &str = "agentrt-sessions";
/// Prefix of Web Lock names and localStorage keys.
pub const LOCK_PREFIX: &str = "agentrt-session:";

#[wasm_bindgen]
extern "C" {
    type JsLockManager;
    #[wasm_bindgen(method, js_name = request)]
    fn request(
        this: &JsLockManager,
        name: &str,
        options: &JsValue,
        callback: &JsValue,
    ) -> js_sys::Promise;
}

thread_local! {
    /// One handler for rejections nobody needs to hear about.
    static IGNORE: Closure<dyn FnMut(JsValue)> = Closure::new(|_e: JsValue| {});
}

/// How this tab excludes other tabs from a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockBackend {
    /// `navigator.locks`: released by the browser when the tab closes.
    WebLocks,
    /// A localStorage record with owner, epoch and expiry, renewed by a heartbeat.
    LocalStorage,
}

fn lock_manager() -> Option<JsLockManager> {
    let navigator = js::global_property("navigator")?;
    js_sys::Reflect::get(&navigator, &JsValue::from_str("locks"))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
        .map(JsCast::unchecked_into)
}

impl LockBackend {
    /// Web Locks where the browser has them, the localStorage heartbeat otherwise.
    pub fn detect() -> LockBackend {
        if lock_manager().is_some() {
            LockBackend::WebLocks
        } else {
            LockBackend::LocalStorage
        }
    }
}

/// What one tab tells the others about a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    /// `owner` now executes the session.
    Busy { session: String, owner: String },
    /// Nobody executes the session any more.
    Free { session: String, owner: String },
    /// The session's stored state changed (reload it).
    Changed { session: String, owner: String },
}

impl Notice {
    pub fn session(&self) -> &str {
        match self {
            Notice::Busy { session, .. }
            | Notice::Free { session, .. }
            | Notice::Changed { session, .. } => session,
        }
    }
}

/// How a held tab lock is given back.
enum Release {
    /// Resolve the pending promise returned from the lock callback; the
    /// request's promise settles once the lock manager has let it go.
    WebLock {
        resolve: js_sys::Function,
        released: js_sys::Promise,
    },
    /// Stop the heartbeat and remove the localStorage record.
    Heartbeat(Rc<Cell<bool>>),
}

struct TabLock {
    depth: usize,
    release: Release,
}

/// A localStorage lease record (the fallback tab lock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredLock {
    owner: String,
    epoch: u64,
    expires_at_ms: u64,
}

struct Inner {
    backend: LockBackend,
    owner: OwnerId,
    manager: LeaseManager,
    idb: Option<Arc<IdbStorage>>,
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    ttl: Duration,
    held: RefCell<HashMap<SessionId, TabLock>>,
    /// Web Locks this tab let go of whose release the lock manager has not
    /// finished: taking the session again waits for it, so that this tab's
    /// own release is never mistaken for another tab holding the session.
    releasing: RefCell<HashMap<SessionId, js_sys::Promise>>,
    channel: Option<BroadcastChannel>,
    renewing: Cell<bool>,
}

/// Takes and keeps session leases for this tab.
#[derive(Clone)]
pub struct SessionLeases {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for SessionLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLeases")
            .field("owner", &self.inner.owner)
            .field("backend", &self.inner.backend)
            .finish()
    }
}

/// Proof that this tab executes a session; carries the write fence.
/// Dropping the last one of a session releases the lease and the tab lock.
pub struct SessionLease {
    guard: Option<LeaseGuard>,
    session: SessionId,
    inner: Rc<Inner>,
}

impl std::fmt::Debug for SessionLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLease")
            .field("session", &self.session)
            .field("guard", &self.guard)
            .finish()
    }
}

impl SessionLease {
    /// The fence every write of this holder carries.
    pub fn fence(&self) -> Option<agent_kernel::host::Fence> {
        self.guard.as_ref().map(LeaseGuard::fence)
    }
    pub fn epoch(&self) -> u64 {
        self.guard.as_ref().map_or(0, LeaseGuard::epoch)
    }
    pub fn session(&self) -> &SessionId {
        &self.session
    }
    /// The stored-lease guard, when this lease was taken with `acquire`
    /// (`hold` takes the tab lock alone).
    pub fn guard(&self) -> Option<&LeaseGuard> {
        self.guard.as_ref()
    }
}

impl Drop for SessionLease {
    fn drop(&mut self) {
        // The stored lease first (released in the background), then the tab lock.
        drop(self.guard.take());
        self.inner.unlock(&self.session);
    }
}

impl Inner {
    fn post(&self, notice: &Notice) {
        if let (Some(ch), Ok(text)) = (&self.channel, serde_json::to_string(notice)) {
            // A closed channel (page unloading) has nobody left to tell.
            let _ = ch.post_message(&JsValue::from_str(&text));
        }
    }

    fn unlock(&self, session: &SessionId) {
        let release = {
            let mut held = self.held.borrow_mut();
            let Some(lock) = held.get_mut(session) else {
                return;
            };
            lock.depth = lock.depth.saturating_sub(1);
            if lock.depth > 0 {
                return;
            }
            held.remove(session).map(|l| l.release)
        };
        match release {
            Some(Release::WebLock { resolve, released }) => {
                let _ = resolve.call0(&JsValue::UNDEFINED);
                self.releasing
                    .borrow_mut()
                    .insert(session.clone(), released);
            }
            Some(Release::Heartbeat(stop)) => {
                stop.set(true);
                remove_stored_lock(session, &self.owner);
            }
            None => {}
        }
        self.post(&Notice::Free {
            session: session.to_string(),
            owner: self.owner.to_string(),
        });
    }
}

fn local_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

fn stored_lock_key(session: &SessionId) -> String {
    format!("{LOCK_PREFIX}{session}")
}

fn read_stored_lock(session: &SessionId) -> Option<StoredLock> {
    let text = local_storage()?
        .get_item(&stored_lock_key(session))
        .ok()
        .flatten()?;
    // An unreadable record is treated as absent: it guards nothing.
    serde_json::from_str(&text).ok()
}

fn write_stored_lock(session: &SessionId, lock: &StoredLock) -> bool {
    let (Some(storage), Ok(text)) = (local_storage(), serde_json::to_string(lock)) else {
        return false;
    };
    storage.set_item(&stored_lock_key(session), &text).is_ok()
}

fn remove_stored_lock(session: &SessionId, owner: &OwnerId) {
    if read_stored_lock(session).is_some_and(|l| l.owner == owner.as_str())
        && let Some(storage) = local_storage()
    {
        let _ = storage.remove_item(&stored_lock_key(session));
    }
}

/// Ask for a Web Lock without waiting; `Some(release)` when granted.
/// The Web Lock `name` if it is free now: the function that releases it and
/// the request's promise, which settles once the release is done.
async fn request_web_lock(name: &str) -> Result<Option<Release>, LeaseError> {
    let manager = lock_manager().ok_or_else(|| {
        LeaseError::Storage(agent_kernel::host::StorageError::Unavailable(
            "navigator.locks is missing".into(),
        ))
    })?;
    let (tx, rx) = oneshot::channel::<Option<js_sys::Function>>();
    let callback = Closure::once_into_js(move |lock: JsValue| -> JsValue {
        if lock.is_null() || lock.is_undefined() {
            let _ = tx.send(None);
            return JsValue::UNDEFINED;
        }
        let mut resolver = None;
        let pending = js_sys::Promise::new(&mut |resolve: js_sys::Function, _reject| {
            resolver = Some(resolve);
        });
        let _ = tx.send(resolver);
        // The lock is held until this promise settles.
        pending.into()
    });
    let options = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&options, &JsValue::from_str("ifAvailable"), &JsValue::TRUE);
    let request = manager.request(name, &options, &callback);
    // Swallow the request promise's eventual rejection (an aborted page).
    let released = IGNORE.with(|ignore| request.catch(ignore));
    let resolve = rx.await.map_err(|_| {
        LeaseError::Storage(agent_kernel::host::StorageError::Backend(
            "the Web Lock callback was dropped without an answer".into(),
        ))
    })?;
    Ok(resolve.map(|resolve| Release::WebLock { resolve, released }))
}

impl SessionLeases {
    /// Leases for `owner` (this tab) over `storage`. Pass the IndexedDB store as
    /// `idb` when `storage` is it, so that holding the tab lock can take over
    /// the stored lease of a closed tab at once instead of after its expiry.
    pub fn new(
        storage: Arc<dyn Storage>,
        idb: Option<Arc<IdbStorage>>,
        clock: Arc<dyn Clock>,
        executor: Arc<dyn Executor>,
        owner: OwnerId,
        backend: LockBackend,
        ttl: Duration,
    ) -> SessionLeases {
        let manager =
            LeaseManager::new(storage.clone(), clock.clone(), executor, owner.clone(), ttl);
        SessionLeases {
            inner: Rc::new(Inner {
                backend,
                owner,
                manager,
                idb,
                storage,
                clock,
                ttl,
                held: RefCell::new(HashMap::new()),
                releasing: RefCell::new(HashMap::new()),
                channel: BroadcastChannel::new(CHANNEL).ok(),
                renewing: Cell::new(false),
            }),
        }
    }

    pub fn owner(&self) -> &OwnerId {
        &self.inner.owner
    }

    pub fn backend(&self) -> LockBackend {
        self.inner.backend
    }

    /// How deeply this tab holds the session (0 when it does not).
    pub fn depth(&self, session: &SessionId) -> usize {
        self.inner.held.borrow().get(session).map_or(0, |l| l.depth)
    }

    /// Tell other tabs that a session's stored state changed.
    pub fn notify_changed(&self, session: &SessionId) {
        self.inner.post(&Notice::Changed {
            session: session.to_string(),
            owner: self.inner.owner.to_string(),
        });
    }

    /// Notices from other tabs, from now on.
    pub fn notices(&self) -> NoticeStream {
        NoticeStream::open()
    }

    /// Take the session for this tab, or join it for a nested run (S3.2).
    /// Another tab holding it gives `LeaseError::Held` at once: this never waits.
    pub async fn acquire(&self, session: &SessionId) -> Result<SessionLease, LeaseError> {
        self.take(session, true).await
    }

    /// Hold only the tab lock (taking over a closed tab's stored lease), for a
    /// runtime whose own `LeaseManager` with the same owner writes the epoch.
    pub async fn hold(&self, session: &SessionId) -> Result<SessionLease, LeaseError> {
        self.take(session, false).await
    }

    async fn take(
        &self,
        session: &SessionId,
        with_guard: bool,
    ) -> Result<SessionLease, LeaseError> {
        let inner = &self.inner;
        let nested = match inner.held.borrow_mut().get_mut(session) {
            Some(lock) => {
                lock.depth += 1;
                true
            }
            None => false,
        };
        if !nested {
            let release = self.lock_tab(session).await?;
            inner
                .held
                .borrow_mut()
                .insert(session.clone(), TabLock { depth: 1, release });
            // Holding the tab lock proves any other stored holder is gone.
            if let Some(idb) = &inner.idb {
                let taken = lease_cas::take_over(
                    idb.as_ref(),
                    session,
                    &inner.owner,
                    inner.clock.wall_ms(),
                    u64::try_from(inner.ttl.as_millis()).unwrap_or(u64::MAX),
                )
                .await;
                if let Err(e) = taken {
                    inner.unlock(session);
                    return Err(e);
                }
            }
        }
        let guard = if with_guard {
            inner.manager.acquire(session).await.map(Some)
        } else {
            Ok(None)
        };
        match guard {
            Ok(guard) => {
                if !nested {
                    inner.post(&Notice::Busy {
                        session: session.to_string(),
                        owner: inner.owner.to_string(),
                    });
                    self.start_renewing();
                }
                Ok(SessionLease {
                    guard,
                    session: session.clone(),
                    inner: inner.clone(),
                })
            }
            Err(e) => {
                inner.unlock(session);
                Err(e)
            }
        }
    }

    async fn held_error(&self, session: &SessionId) -> LeaseError {
        let current: Option<LeaseRecord> = self
            .inner
            .storage
            .current_lease(session)
            .await
            .ok()
            .flatten();
        let owner = current
            .as_ref()
            .filter(|r| r.owner != self.inner.owner)
            .map(|r| r.owner.clone())
            .or_else(|| OwnerId::new("another-tab").ok());
        match owner {
            Some(owner) => LeaseError::Held {
                session: session.clone(),
                owner,
                expires_at_ms: current.map_or(0, |r| r.expires_at_ms),
            },
            None => LeaseError::Lost {
                session: session.clone(),
                epoch: 0,
            },
        }
    }

    async fn lock_tab(&self, session: &SessionId) -> Result<Release, LeaseError> {
        match self.inner.backend {
            LockBackend::WebLocks => {
                // This tab's own release of the lock, if still under way.
                let releasing = self.inner.releasing.borrow_mut().remove(session);
                if let Some(released) = releasing {
                    let _ = wasm_bindgen_futures::JsFuture::from(released).await;
                }
                match request_web_lock(&format!("{LOCK_PREFIX}{session}")).await? {
                    Some(release) => Ok(release),
                    None => Err(self.held_error(session).await),
                }
            }
            LockBackend::LocalStorage => self.lock_with_heartbeat(session).await,
        }
    }

    async fn lock_with_heartbeat(&self, session: &SessionId) -> Result<Release, LeaseError> {
        let inner = &self.inner;
        let ttl_ms = u64::try_from(inner.ttl.as_millis()).unwrap_or(u64::MAX);
        let now = inner.clock.wall_ms();
        let current = read_stored_lock(session);
        if let Some(cur) = &current
            && cur.owner != inner.owner.as_str()
            && now < cur.expires_at_ms
        {
            return Err(LeaseError::Held {
                session: session.clone(),
                owner: OwnerId::new(cur.owner.clone()).unwrap_or_else(|_| inner.owner.clone()),
                expires_at_ms: cur.expires_at_ms,
            });
        }
        let mine = StoredLock {
            owner: inner.owner.to_string(),
            epoch: current.map_or(1, |c| c.epoch.saturating_add(1)),
            expires_at_ms: now.saturating_add(ttl_ms),
        };
        if !write_stored_lock(session, &mine) {
            return Err(LeaseError::Storage(
                agent_kernel::host::StorageError::Unavailable(
                    "localStorage refused the lease record (full or disabled)".into(),
                ),
            ));
        }
        // localStorage has no compare-and-set: let a racing tab's write land,
        // then the last writer wins and the others back off.
        platform::sleep(Duration::from_millis(30)).await;
        if read_stored_lock(session).as_ref() != Some(&mine) {
            return Err(self.held_error(session).await);
        }
        let stop = Rc::new(Cell::new(false));
        let beat = stop.clone();
        let session = session.clone();
        let owner = inner.owner.clone();
        let clock = inner.clock.clone();
        let period = inner.ttl / 3;
        wasm_bindgen_futures::spawn_local(async move {
            loop {
                platform::sleep(period).await;
                if beat.get() {
                    break;
                }
                match read_stored_lock(&session) {
                    Some(mut cur) if cur.owner == owner.as_str() && cur.epoch == mine.epoch => {
                        cur.expires_at_ms = clock.wall_ms().saturating_add(ttl_ms);
                        write_stored_lock(&session, &cur);
                    }
                    // Taken over: the stored fence refuses our writes from now on.
                    _ => break,
                }
            }
        });
        Ok(Release::Heartbeat(stop))
    }

    /// Renew the stored leases while any is held (a third of the TTL apart).
    fn start_renewing(&self) {
        if self.inner.renewing.replace(true) {
            return;
        }
        let weak = Rc::downgrade(&self.inner);
        let period = self.inner.ttl / 3;
        wasm_bindgen_futures::spawn_local(async move {
            loop {
                platform::sleep(period).await;
                let Some(inner) = weak.upgrade() else { break };
                if inner.held.borrow().is_empty() {
                    inner.renewing.set(false);
                    break;
                }
                // A lost lease is forgotten by the manager; the fence refuses its writes.
                let _lost = inner.manager.renew_all().await;
            }
        });
    }
}

/// Notices from other tabs on the BroadcastChannel.
pub struct NoticeStream {
    rx: async_channel::Receiver<Notice>,
    channel: Option<BroadcastChannel>,
    _listener: Option<Closure<dyn FnMut(MessageEvent)>>,
}

impl NoticeStream {
    fn open() -> NoticeStream {
        let (tx, rx) = async_channel::unbounded();
        let channel = BroadcastChannel::new(CHANNEL).ok();
        let listener = channel.as_ref().map(|ch| {
            let listener = Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
                if let Some(text) = e.data().as_string()
                    && let Ok(notice) = serde_json::from_str::<Notice>(&text)
                {
                    let _ = tx.try_send(notice);
                }
            });
            ch.set_onmessage(Some(listener.as_ref().unchecked_ref()));
            listener
        });
        NoticeStream {
            rx,
            channel,
            _listener: listener,
        }
    }

    /// The next notice (None once the channel is closed).
    pub async fn next(&self) -> Option<Notice> {
        self.rx.recv().await.ok()
    }

    /// A notice already received, without waiting.
    pub fn try_next(&self) -> Option<Notice> {
        self.rx.try_recv().ok()
    }
}

impl Drop for NoticeStream {
    fn drop(&mut self) {
        if let Some(ch) = &self.channel {
            ch.set_onmessage(None);
            ch.close();
        }
    }
}
