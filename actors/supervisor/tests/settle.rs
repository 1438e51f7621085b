//! `Runtime::wait_settled` has one source of truth for "settled here":
//! whether a supervisor of the runtime still holds the run, checked before
//! the run is read (S1.1: the stored record is the truth, read after
//! every write of the supervisors is durable). The test-only settle hook
//! (feature `test-hooks`) ends a supervisor exactly between the two steps,
//! so that the old order (read, then check) fails here every time instead
//! of under load.

#[cfg(not(target_arch = "wasm32"))]
mod common;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use agent_kernel::ids::RunId;
    use agent_kernel::run::RunStatus;
    use agent_supervisor::sim::tools::SimToolsConfig;
    use agent_supervisor::{RunConfig, Runtime, RuntimeOptions, SettleHook};

    use super::common::{env, tab};

    /// One answer after ten seconds of model time.
    const ANSWER_AFTER_10S: &str = r#"{"turns": [{"text": "Done.", "delay_ms": 10000}]}"#;

    /// S1.1: a supervisor that writes its run's end and stops between
    /// `wait_settled`'s check and its read: the waiter returns the final
    /// record, never the `running` one read before the end.
    #[test]
    fn a_supervisor_ending_between_the_check_and_the_read_is_seen_settled() {
        let env = env(ANSWER_AFTER_10S);
        let run = env.start("go", RunConfig::default());
        env.mem.executor().run_until_stalled();
        assert_eq!(env.run(&run).status, RunStatus::Running);

        let clock = env.clock();
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let hook: SettleHook = Arc::new(move |runtime: Runtime, run: RunId| {
            let clock = clock.clone();
            let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
            Box::pin(async move {
                if first {
                    // The model answers at 10 s; the supervisor writes
                    // `completed` and ends, and its end is handled.
                    clock.sleep(Duration::from_secs(11)).await;
                    runtime.wait_released(&run).await;
                    assert_eq!(
                        runtime.run(&run).await.unwrap().status,
                        RunStatus::Completed,
                        "the hook ended the supervisor"
                    );
                }
            })
        });
        env.runtime.set_settle_hook(Some(hook));
        let settled = env.settle(&run);
        env.runtime.set_settle_hook(None);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the hook ran once");
        assert_eq!(
            settled.status,
            RunStatus::Completed,
            "wait_settled returned a stale record: {settled:?}"
        );
    }

    /// S3.3: a supervisor that ends without writing its run's status (its
    /// lease was taken over by another tab, whose events this runtime never
    /// hears) does not leave the waiter hanging: its end wakes it, and the
    /// waiter returns what is stored.
    #[test]
    fn a_supervisor_that_ends_without_a_status_change_does_not_hang_the_waiter() {
        let scenario = r#"{"turns": [{"text": "Done.", "delay_ms": 60000}]}"#;
        let env1 = env(scenario);
        let run = env1.start("go", RunConfig::default());
        env1.mem.executor().run_until_stalled();
        // No heartbeat renews tab-1's lease: it lapses after its 30 s.
        env1.mem.advance(Duration::from_secs(31));
        assert_eq!(env1.run(&run).status, RunStatus::Running);
        let env2 = tab(
            env1.mem.clone(),
            scenario,
            SimToolsConfig::default(),
            RuntimeOptions::default(),
            "tab-2",
        );
        // The waiter starts while the run is `running` here; tab-2 then
        // takes the session over and interrupts the run; tab-1's supervisor
        // finds its lease lost at its next write and ends without one.
        let (settled, recovered) = env1.block(futures::future::join(
            env1.runtime.wait_settled(&run),
            env2.runtime.recover(),
        ));
        assert_eq!(recovered.unwrap(), vec![run.clone()]);
        let settled = settled.unwrap();
        assert_eq!(settled.status, RunStatus::Interrupted, "{settled:?}");
        assert!(env1.log.dispatches().is_empty(), "no tool ran");
    }

    /// A tab whose executor was killed (every task dropped, no supervisor
    /// reports its end): a waiter on its runtime gets the stored record at
    /// once instead of waiting for a supervisor that is gone.
    #[test]
    fn a_killed_supervisor_does_not_hang_the_waiter() {
        let env = env(ANSWER_AFTER_10S);
        let run = env.start("go", RunConfig::default());
        env.mem.executor().run_until_stalled();
        env.kill();
        let settled = env.settle(&run);
        assert_eq!(settled.status, RunStatus::Running, "{settled:?}");
    }
}
