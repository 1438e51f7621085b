//! Actor primitives on the deterministic executor: ask/reply, back-pressure,
//! failure and panic reports, stopped actors, blocking work.
#![cfg(not(target_arch = "wasm32"))]

use agent_kernel::actor::{
    ActorError, ActorExit, ActorReport, BlockingError, Inbox, Reply, mailbox, run_blocking,
    spawn_actor,
};
use agent_kernel::memory::SimExecutor;
use futures::FutureExt;

enum Msg {
    Add(u32, Reply<u32>),
    Forget(Reply<u32>),
    Fail(String),
    Panic,
    Stop,
}

async fn counter(inbox: Inbox<Msg>) -> Result<(), String> {
    let mut total = 0u32;
    while let Ok(msg) = inbox.recv().await {
        match msg {
            Msg::Add(n, reply) => {
                total += n;
                reply.send(total);
            }
            Msg::Forget(reply) => drop(reply),
            Msg::Fail(why) => return Err(why),
            Msg::Panic => panic!("counter exploded"),
            Msg::Stop => return Ok(()),
        }
    }
    Ok(())
}

fn spawn_counter(
    exec: &SimExecutor,
    capacity: usize,
) -> (
    agent_kernel::Addr<Msg>,
    async_channel::Receiver<ActorReport>,
) {
    let (parent, reports) = async_channel::unbounded();
    let addr = spawn_actor(exec, "counter", capacity, Some(parent), counter);
    (addr, reports)
}

#[test]
fn ask_gets_the_reply() {
    let exec = SimExecutor::new();
    let (addr, _reports) = spawn_counter(&exec, 4);
    let got = exec.block_on(async {
        let a = addr.ask(|r| Msg::Add(2, r)).await?;
        let b = addr.ask(|r| Msg::Add(3, r)).await?;
        Ok::<_, ActorError>((a, b))
    });
    assert_eq!(got, Some(Ok((2, 5))));
    assert_eq!(addr.name(), "counter");
    assert!(!addr.is_stopped());
}

#[test]
fn bounded_mailbox_pushes_back() {
    let (addr, inbox) = mailbox::<u32>("slow", 2);
    assert_eq!(addr.send(1).now_or_never(), Some(Ok(())));
    assert_eq!(addr.send(2).now_or_never(), Some(Ok(())));
    // Full: the third send waits instead of growing the queue.
    assert_eq!(addr.send(3).now_or_never(), None);
    assert_eq!(inbox.len(), 2);
    // Reading one frees one slot.
    assert_eq!(inbox.recv().now_or_never(), Some(Ok(1)));
    assert_eq!(addr.send(3).now_or_never(), Some(Ok(())));
    assert_eq!(addr.send(4).now_or_never(), None);
    // Capacity 0 is treated as 1, never as unbounded.
    let (tiny, _inbox) = mailbox::<u32>("tiny", 0);
    assert_eq!(tiny.send(1).now_or_never(), Some(Ok(())));
    assert_eq!(tiny.send(2).now_or_never(), None);
}

#[test]
fn back_pressure_on_a_spawned_actor_resolves_when_it_runs() {
    let exec = SimExecutor::new();
    let (addr, _reports) = spawn_counter(&exec, 1);
    let (tx, rx) = futures::channel::oneshot::channel();
    let a2 = addr.clone();
    // Two asks through a mailbox of one: the second waits until the actor reads.
    let both = exec.block_on(async move {
        let first = a2.ask(|r| Msg::Add(1, r));
        let second = a2.ask(|r| Msg::Add(10, r));
        let (x, y) = futures::join!(first, second);
        let _ = tx.send(());
        (x, y)
    });
    assert_eq!(both, Some((Ok(1), Ok(11))));
    assert!(rx.now_or_never().is_some());
}

#[test]
fn an_actor_error_is_reported_to_its_parent_with_its_name() {
    let exec = SimExecutor::new();
    let (addr, reports) = spawn_counter(&exec, 4);
    let report = exec.block_on(async {
        addr.send(Msg::Fail("disk on fire".into())).await.unwrap();
        reports.recv().await.unwrap()
    });
    assert_eq!(
        report,
        Some(ActorReport {
            actor: "counter".into(),
            exit: ActorExit::Failed("disk on fire".into()),
        })
    );
}

#[test]
fn a_panic_is_caught_and_reported() {
    let exec = SimExecutor::new();
    let (addr, reports) = spawn_counter(&exec, 4);
    let report = exec.block_on(async {
        addr.send(Msg::Panic).await.unwrap();
        reports.recv().await.unwrap()
    });
    assert_eq!(
        report,
        Some(ActorReport {
            actor: "counter".into(),
            exit: ActorExit::Panicked("counter exploded".into()),
        })
    );
    // The panicked actor's address answers Stopped, not a hang.
    let after = exec.block_on(addr.ask(|r| Msg::Add(1, r)));
    assert_eq!(
        after,
        Some(Err(ActorError::Stopped {
            actor: "counter".into()
        }))
    );
}

#[test]
fn a_clean_stop_is_reported_and_the_addr_answers_stopped() {
    let exec = SimExecutor::new();
    let (addr, reports) = spawn_counter(&exec, 4);
    let report = exec.block_on(async {
        addr.send(Msg::Stop).await.unwrap();
        reports.recv().await.unwrap()
    });
    assert_eq!(report.map(|r| r.exit), Some(ActorExit::Stopped));
    assert!(addr.is_stopped());
    assert_eq!(
        exec.block_on(addr.send(Msg::Stop)),
        Some(Err(ActorError::Stopped {
            actor: "counter".into()
        }))
    );
    assert_eq!(
        exec.block_on(addr.ask(|r| Msg::Add(1, r))),
        Some(Err(ActorError::Stopped {
            actor: "counter".into()
        }))
    );
}

#[test]
fn a_dropped_request_answers_no_reply() {
    let exec = SimExecutor::new();
    let (addr, _reports) = spawn_counter(&exec, 4);
    assert_eq!(
        exec.block_on(addr.ask(Msg::Forget)),
        Some(Err(ActorError::NoReply {
            actor: "counter".into()
        }))
    );
    // The actor itself is still alive.
    assert_eq!(exec.block_on(addr.ask(|r| Msg::Add(4, r))), Some(Ok(4)));
}

#[test]
fn a_killed_actor_answers_instead_of_hanging() {
    let exec = SimExecutor::new();
    let (addr, reports) = spawn_counter(&exec, 4);
    assert_eq!(exec.block_on(addr.ask(|r| Msg::Add(1, r))), Some(Ok(1)));
    // The executor dies (a closed tab): no report, but no hang either.
    assert_eq!(exec.kill(), 1);
    assert!(addr.is_stopped());
    assert_eq!(
        exec.block_on(addr.ask(|r| Msg::Add(1, r))),
        Some(Err(ActorError::Stopped {
            actor: "counter".into()
        }))
    );
    assert!(reports.try_recv().is_err(), "a killed tab runs no cleanup");
}

#[test]
fn dropping_every_addr_stops_the_actor() {
    let exec = SimExecutor::new();
    let (addr, reports) = spawn_counter(&exec, 4);
    drop(addr);
    let report = exec.block_on(reports.recv());
    assert_eq!(
        report.map(|r| r.map(|r| r.exit)),
        Some(Ok(ActorExit::Stopped))
    );
    assert_eq!(exec.pending_tasks(), 0);
}

#[test]
fn run_blocking_returns_the_value() {
    let exec = SimExecutor::new();
    let got = exec.block_on(run_blocking(&exec, || (1..=10u64).product::<u64>()));
    assert_eq!(got, Some(Ok(3_628_800)));
}

#[test]
fn run_blocking_reports_a_panicking_job_as_lost() {
    let exec = SimExecutor::new();
    let got = exec.block_on(run_blocking(&exec, || -> u32 { panic!("job failed") }));
    assert_eq!(got, Some(Err(BlockingError::Lost)));
}

#[test]
fn panic_message_reads_str_and_string_payloads() {
    use agent_kernel::actor::panic_message;
    assert_eq!(panic_message(&"static"), "static");
    assert_eq!(panic_message(&String::from("owned")), "owned");
    assert_eq!(panic_message(&42u32), "panic with a non-text payload");
}

/// Found by a hung CI run: a request queued behind the message that ends an
/// actor sat in the closed mailbox with its reply channel alive, so its
/// `ask` waited forever. It must hear `NoReply`.
#[test]
fn a_request_queued_behind_the_end_hears_no_reply() {
    let exec = SimExecutor::new();
    let (addr, _reports) = spawn_counter(&exec, 4);
    let got = exec.block_on(async {
        addr.send(Msg::Stop).await?;
        // Queued before the actor reads `Stop`, so the send itself succeeds.
        addr.ask(|r| Msg::Add(1, r)).await
    });
    assert!(
        matches!(got, Some(Err(ActorError::NoReply { .. }))),
        "{got:?}"
    );
    assert!(addr.is_stopped());
}
