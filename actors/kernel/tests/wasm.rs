//! The kernel in headless Chromium: the storage conformance suite against
//! `MemoryStorage`, and actor ask/reply both on `SimExecutor` and on the
//! browser's own executor (`wasm_bindgen_futures::spawn_local`).
#![cfg(target_arch = "wasm32")]
#![allow(clippy::arc_with_non_send_sync)]

use std::sync::Arc;

use agent_kernel::actor::{ActorError, ActorExit, Inbox, Reply, spawn_actor};
use agent_kernel::host::{Executor, Storage};
use agent_kernel::maybe_send::BoxFuture;
use agent_kernel::memory::{MemoryStorage, SimExecutor};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

agent_kernel::storage_conformance_tests! {
    attr: #[wasm_bindgen_test],
    fixture: async { Arc::new(MemoryStorage::new()) as Arc<dyn Storage> },
}

/// The browser's executor, as a browser host would provide it.
struct LocalExecutor;

impl Executor for LocalExecutor {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        wasm_bindgen_futures::spawn_local(task);
    }
    fn spawn_blocking(&self, job: Box<dyn FnOnce() + Send + 'static>) {
        job();
    }
}

enum Msg {
    Double(u32, Reply<u32>),
    Forget(Reply<u32>),
    Fail,
}

async fn doubler(inbox: Inbox<Msg>) -> Result<(), String> {
    while let Ok(msg) = inbox.recv().await {
        match msg {
            Msg::Double(n, reply) => reply.send(n * 2),
            Msg::Forget(reply) => drop(reply),
            Msg::Fail => return Err("asked to fail".into()),
        }
    }
    Ok(())
}

#[wasm_bindgen_test]
async fn ask_reply_on_the_browser_executor() {
    let (parent, reports) = async_channel::unbounded();
    let addr = spawn_actor(&LocalExecutor, "doubler", 4, Some(parent), doubler);
    assert_eq!(addr.ask(|r| Msg::Double(21, r)).await, Ok(42));
    assert_eq!(
        addr.ask(Msg::Forget).await,
        Err(ActorError::NoReply {
            actor: "doubler".into()
        })
    );
    addr.send(Msg::Fail).await.unwrap();
    let report = reports.recv().await.unwrap();
    assert_eq!(report.actor, "doubler");
    assert_eq!(report.exit, ActorExit::Failed("asked to fail".into()));
    assert_eq!(
        addr.ask(|r| Msg::Double(1, r)).await,
        Err(ActorError::Stopped {
            actor: "doubler".into()
        })
    );
}

#[wasm_bindgen_test]
fn ask_reply_on_the_sim_executor() {
    let exec = SimExecutor::seeded(9);
    let addr = spawn_actor(&exec, "doubler", 1, None, doubler);
    let got = exec.block_on(async {
        let (a, b) = futures::join!(
            addr.ask(|r| Msg::Double(1, r)),
            addr.ask(|r| Msg::Double(2, r))
        );
        (a, b)
    });
    assert_eq!(got, Some((Ok(2), Ok(4))));
    assert_eq!(exec.kill(), 1);
    assert_eq!(
        exec.block_on(addr.ask(|r| Msg::Double(1, r))),
        Some(Err(ActorError::Stopped {
            actor: "doubler".into()
        }))
    );
}
