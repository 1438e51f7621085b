//! The workspace actor and the artifact actor of one session: a private
//! message enum, a loop that owns the state ([`Workspace`], [`Artifacts`]),
//! and cloneable handles whose methods each send one message and await the
//! reply. Dropping every handle stops the actor.

use std::sync::Arc;

use tracing::Instrument;

use agent_capabilities::Verified;
use agent_kernel::SessionId;
use agent_kernel::actor::{Addr, Inbox, ParentLink, Reply, spawn_actor};
use agent_kernel::host::{Fence, Host};

use crate::artifact::{Artifact, Artifacts, Published, PublishedFrom};
use crate::error::WorkspaceError;
use crate::limits::Quotas;
use crate::manifest::{FileEntry, Receipt, Source, TrashEntry};
use crate::path::WorkspacePath;
use crate::store::{Expect, Listing, Usage, Workspace};

type R<T> = Reply<Result<T, WorkspaceError>>;

/// Mailbox capacity of each actor: callers wait when it is full. Every open
/// session allocates both mailboxes up front, so they stay small: 32 slots
/// cost 12 KB per session (issue 18 item 6), and one session's callers (its
/// runs' tool calls) rarely have more than a few requests queued.
const MAILBOX: usize = 8;

enum WorkspaceMsg {
    Write {
        path: WorkspacePath,
        bytes: Vec<u8>,
        mime: String,
        expect: Expect,
        source: Source,
        reply: R<(FileEntry, Receipt)>,
    },
    Append {
        path: WorkspacePath,
        bytes: Vec<u8>,
        mime: String,
        expect: Expect,
        source: Source,
        reply: R<(FileEntry, Receipt)>,
    },
    Stat {
        path: WorkspacePath,
        reply: R<Option<FileEntry>>,
    },
    Read {
        path: WorkspacePath,
        reply: R<(FileEntry, Vec<u8>)>,
    },
    List {
        folder: Option<WorkspacePath>,
        recursive: bool,
        reply: R<Listing>,
    },
    Move {
        from: WorkspacePath,
        to: WorkspacePath,
        expect: Expect,
        source: Source,
        reply: R<(FileEntry, Receipt)>,
    },
    Delete {
        path: WorkspacePath,
        expect: Expect,
        source: Source,
        reply: R<(TrashEntry, Receipt)>,
    },
    ListTrash {
        reply: R<Vec<TrashEntry>>,
    },
    FindInTrash {
        path: WorkspacePath,
        reply: R<Option<TrashEntry>>,
    },
    Restore {
        id: String,
        reply: R<(FileEntry, Receipt)>,
    },
    EmptyTrash {
        proof: Box<Verified>,
        reply: R<(Vec<TrashEntry>, Receipt)>,
    },
    Usage {
        reply: R<Usage>,
    },
}

async fn run_workspace(
    mut ws: Workspace,
    inbox: Inbox<WorkspaceMsg>,
) -> Result<(), WorkspaceError> {
    let span = tracing::debug_span!("workspace", session = %ws.session());
    async move {
        // Each request is served in its own boxed future: an idle session's
        // actor holds only the workspace and the receive (issue 18 item 6).
        while let Ok(msg) = inbox.recv().await {
            Box::pin(serve_workspace(&mut ws, msg)).await;
        }
        Ok(())
    }
    .instrument(span)
    .await
}

/// Answer one request. A reply whose asker went away is dropped inside
/// `Reply::send`: nobody waits for it, and the effect is already recorded.
async fn serve_workspace(ws: &mut Workspace, msg: WorkspaceMsg) {
    match msg {
        WorkspaceMsg::Write {
            path,
            bytes,
            mime,
            expect,
            source,
            reply,
        } => reply.send(ws.write(&path, bytes, &mime, expect, source).await),
        WorkspaceMsg::Append {
            path,
            bytes,
            mime,
            expect,
            source,
            reply,
        } => reply.send(ws.append(&path, bytes, &mime, expect, source).await),
        WorkspaceMsg::Stat { path, reply } => reply.send(ws.stat(&path).await),
        WorkspaceMsg::Read { path, reply } => reply.send(ws.read(&path).await),
        WorkspaceMsg::List {
            folder,
            recursive,
            reply,
        } => reply.send(ws.list(folder.as_ref(), recursive).await),
        WorkspaceMsg::Move {
            from,
            to,
            expect,
            source,
            reply,
        } => reply.send(ws.rename(&from, &to, expect, source).await),
        WorkspaceMsg::Delete {
            path,
            expect,
            source,
            reply,
        } => reply.send(ws.delete(&path, expect, source).await),
        WorkspaceMsg::ListTrash { reply } => reply.send(ws.list_trash().await),
        WorkspaceMsg::FindInTrash { path, reply } => reply.send(ws.find_in_trash(&path).await),
        WorkspaceMsg::Restore { id, reply } => reply.send(ws.restore(&id).await),
        WorkspaceMsg::EmptyTrash { proof, reply } => reply.send(ws.empty_trash(&proof).await),
        WorkspaceMsg::Usage { reply } => reply.send(ws.usage().await),
    }
}

/// A handle to one session's workspace actor.
#[derive(Clone, Debug)]
pub struct WorkspaceHandle {
    addr: Addr<WorkspaceMsg>,
    session: SessionId,
}

/// Spawn the workspace actor of `fence.session` on the host's executor.
/// Every write carries `fence`; once the lease moves on, writes fail with
/// `lease_lost` and nothing is written.
pub fn spawn_workspace(
    host: &Host,
    fence: Fence,
    quotas: Quotas,
    parent: Option<ParentLink>,
) -> WorkspaceHandle {
    let session = fence.session.clone();
    let ws = Workspace::new(host.storage.clone(), host.clock.clone(), fence, quotas);
    let addr = spawn_actor(
        host.executor.as_ref(),
        &format!("workspace:{session}"),
        MAILBOX,
        parent,
        move |inbox| run_workspace(ws, inbox),
    );
    WorkspaceHandle { addr, session }
}

impl WorkspaceHandle {
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    async fn ask<T>(&self, make: impl FnOnce(R<T>) -> WorkspaceMsg) -> Result<T, WorkspaceError> {
        self.addr.ask(make).await?
    }

    /// Create or replace a file (see [`Workspace::write`]).
    pub async fn write(
        &self,
        path: &WorkspacePath,
        bytes: Vec<u8>,
        mime: &str,
        expect: Expect,
        source: Source,
    ) -> Result<(FileEntry, Receipt), WorkspaceError> {
        let (path, mime) = (path.clone(), mime.to_owned());
        self.ask(|reply| WorkspaceMsg::Write {
            path,
            bytes,
            mime,
            expect,
            source,
            reply,
        })
        .await
    }

    /// Create a file that must not exist yet.
    pub async fn create(
        &self,
        path: &WorkspacePath,
        bytes: Vec<u8>,
        mime: &str,
        source: Source,
    ) -> Result<(FileEntry, Receipt), WorkspaceError> {
        self.write(path, bytes, mime, Expect::MustNotExist, source)
            .await
    }

    /// Append to a file (see [`Workspace::append`]).
    pub async fn append(
        &self,
        path: &WorkspacePath,
        bytes: Vec<u8>,
        mime: &str,
        expect: Expect,
        source: Source,
    ) -> Result<(FileEntry, Receipt), WorkspaceError> {
        let (path, mime) = (path.clone(), mime.to_owned());
        self.ask(|reply| WorkspaceMsg::Append {
            path,
            bytes,
            mime,
            expect,
            source,
            reply,
        })
        .await
    }

    pub async fn stat(&self, path: &WorkspacePath) -> Result<Option<FileEntry>, WorkspaceError> {
        let path = path.clone();
        self.ask(|reply| WorkspaceMsg::Stat { path, reply }).await
    }

    pub async fn read(&self, path: &WorkspacePath) -> Result<(FileEntry, Vec<u8>), WorkspaceError> {
        let path = path.clone();
        self.ask(|reply| WorkspaceMsg::Read { path, reply }).await
    }

    pub async fn list(
        &self,
        folder: Option<&WorkspacePath>,
        recursive: bool,
    ) -> Result<Listing, WorkspaceError> {
        let folder = folder.cloned();
        self.ask(|reply| WorkspaceMsg::List {
            folder,
            recursive,
            reply,
        })
        .await
    }

    /// Move or rename a file (see [`Workspace::rename`]).
    pub async fn rename(
        &self,
        from: &WorkspacePath,
        to: &WorkspacePath,
        expect: Expect,
        source: Source,
    ) -> Result<(FileEntry, Receipt), WorkspaceError> {
        let (from, to) = (from.clone(), to.clone());
        self.ask(|reply| WorkspaceMsg::Move {
            from,
            to,
            expect,
            source,
            reply,
        })
        .await
    }

    /// Move a file to the trash.
    pub async fn delete(
        &self,
        path: &WorkspacePath,
        expect: Expect,
        source: Source,
    ) -> Result<(TrashEntry, Receipt), WorkspaceError> {
        let path = path.clone();
        self.ask(|reply| WorkspaceMsg::Delete {
            path,
            expect,
            source,
            reply,
        })
        .await
    }

    pub async fn list_trash(&self) -> Result<Vec<TrashEntry>, WorkspaceError> {
        self.ask(|reply| WorkspaceMsg::ListTrash { reply }).await
    }

    pub async fn find_in_trash(
        &self,
        path: &WorkspacePath,
    ) -> Result<Option<TrashEntry>, WorkspaceError> {
        let path = path.clone();
        self.ask(|reply| WorkspaceMsg::FindInTrash { path, reply })
            .await
    }

    pub async fn restore(&self, id: &str) -> Result<(FileEntry, Receipt), WorkspaceError> {
        let id = id.to_owned();
        self.ask(|reply| WorkspaceMsg::Restore { id, reply }).await
    }

    /// Empty the trash for good: a destructive effect. `proof` is what
    /// verifying the caller's capability returned; it must grant
    /// `workspace_empty_trash` the `destructive_local` effect
    /// ([`crate::store::authorise_empty_trash`]), else nothing is deleted.
    pub async fn empty_trash(
        &self,
        proof: &Verified,
    ) -> Result<(Vec<TrashEntry>, Receipt), WorkspaceError> {
        let proof = Box::new(proof.clone());
        self.ask(|reply| WorkspaceMsg::EmptyTrash { proof, reply })
            .await
    }

    pub async fn usage(&self) -> Result<Usage, WorkspaceError> {
        self.ask(|reply| WorkspaceMsg::Usage { reply }).await
    }
}

enum ArtifactMsg {
    Publish {
        bytes: Vec<u8>,
        name: String,
        mime: String,
        source: Source,
        from: Option<PublishedFrom>,
        reply: R<Published>,
    },
    Get {
        id: String,
        reply: R<(Artifact, Vec<u8>)>,
    },
    List {
        reply: R<Vec<Artifact>>,
    },
}

async fn run_artifacts(store: Artifacts, inbox: Inbox<ArtifactMsg>) -> Result<(), WorkspaceError> {
    while let Ok(msg) = inbox.recv().await {
        // Boxed, as the workspace's requests are.
        Box::pin(serve_artifacts(&store, msg)).await;
    }
    Ok(())
}

async fn serve_artifacts(store: &Artifacts, msg: ArtifactMsg) {
    match msg {
        ArtifactMsg::Publish {
            bytes,
            name,
            mime,
            source,
            from,
            reply,
        } => reply.send(store.publish(bytes, &name, &mime, source, from).await),
        ArtifactMsg::Get { id, reply } => reply.send(store.get(&id).await),
        ArtifactMsg::List { reply } => reply.send(store.list().await),
    }
}

/// A handle to one session's artifact actor.
#[derive(Clone, Debug)]
pub struct ArtifactHandle {
    addr: Addr<ArtifactMsg>,
}

/// Spawn the artifact actor of `fence.session` on the host's executor.
pub fn spawn_artifacts(
    host: &Host,
    fence: Fence,
    quotas: Quotas,
    parent: Option<ParentLink>,
) -> ArtifactHandle {
    let name = format!("artifacts:{}", fence.session);
    let store = Artifacts::new(host.storage.clone(), host.clock.clone(), fence, quotas);
    let addr = spawn_actor(
        host.executor.as_ref(),
        &name,
        MAILBOX,
        parent,
        move |inbox| run_artifacts(store, inbox),
    );
    ArtifactHandle { addr }
}

impl ArtifactHandle {
    /// Publish bytes as an immutable Artifact (see [`Artifacts::publish`]).
    pub async fn publish(
        &self,
        bytes: Vec<u8>,
        name: &str,
        mime: &str,
        source: Source,
        from: Option<PublishedFrom>,
    ) -> Result<Published, WorkspaceError> {
        let (name, mime) = (name.to_owned(), mime.to_owned());
        self.addr
            .ask(|reply| ArtifactMsg::Publish {
                bytes,
                name,
                mime,
                source,
                from,
                reply,
            })
            .await?
    }

    pub async fn get(&self, id: &str) -> Result<(Artifact, Vec<u8>), WorkspaceError> {
        let id = id.to_owned();
        self.addr
            .ask(|reply| ArtifactMsg::Get { id, reply })
            .await?
    }

    pub async fn list(&self) -> Result<Vec<Artifact>, WorkspaceError> {
        self.addr.ask(|reply| ArtifactMsg::List { reply }).await?
    }
}

/// Both actors of one session.
#[derive(Clone, Debug)]
pub struct SessionActors {
    pub workspace: WorkspaceHandle,
    pub artifacts: ArtifactHandle,
    /// The lease tenure both actors write with.
    pub fence: Fence,
}

/// Spawn the workspace and artifact actors of `fence.session`.
pub fn spawn_session(
    host: &Host,
    fence: Fence,
    quotas: Quotas,
    parent: Option<ParentLink>,
) -> SessionActors {
    SessionActors {
        workspace: spawn_workspace(host, fence.clone(), quotas, parent.clone()),
        artifacts: spawn_artifacts(host, fence.clone(), quotas, parent),
        fence,
    }
}

/// The sessions whose actors are open on this host, for the tool actor and
/// the result spill to find them. Hosts `open` a session once they hold its
/// lease and `close` it when they release it.
#[derive(Clone, Debug, Default)]
pub struct WorkspaceDirectory {
    sessions: Arc<std::sync::Mutex<std::collections::BTreeMap<SessionId, SessionActors>>>,
}

impl WorkspaceDirectory {
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawn (or replace, with a newer fence) the actors of `fence.session`.
    pub fn open(&self, host: &Host, fence: Fence, quotas: Quotas) -> SessionActors {
        let actors = spawn_session(host, fence.clone(), quotas, None);
        if let Ok(mut map) = self.sessions.lock() {
            map.insert(fence.session, actors.clone());
        }
        actors
    }

    /// The actors of `session`, when it is open.
    pub fn get(&self, session: &SessionId) -> Option<SessionActors> {
        self.sessions.lock().ok()?.get(session).cloned()
    }

    /// Forget `session`; its actors stop once the last handle is dropped.
    pub fn close(&self, session: &SessionId) -> bool {
        self.sessions
            .lock()
            .map(|mut m| m.remove(session).is_some())
            .unwrap_or(false)
    }
}
