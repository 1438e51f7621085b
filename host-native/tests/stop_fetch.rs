//! Stopping a run ends its `fetch_url` read in flight (S2.5 stop, S8): the
//! supervisor tells the tools actor (`ToolsMsg::CancelRun`), which tells the
//! fetch actor (`ToolMsg::Cancel`), with no host-side canceller, so the
//! read's connection closes at once instead of running on to its deadline. The page server is a loopback server started
//! here that never answers and reports when the reader goes away.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_fetch::testing::TestLoopback;
use agent_fetch::{SystemResolver, UrlPolicy};
use agent_host_native::app::{App, AppOptions};
use agent_host_native::host::TokioExecutor;
use agent_kernel::SessionId;
use agent_kernel::run::RunStatus;
use agent_supervisor::{RunConfig, Scenario, ScriptedProvider};
use axum::Router;
use tokio::sync::mpsc;

/// Sends once when dropped: the handler's future was dropped (the client left).
struct Gone(mpsc::UnboundedSender<&'static str>);
impl Drop for Gone {
    fn drop(&mut self) {
        let _ = self.0.send("gone");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_run_cancels_its_fetch_in_flight() {
    let (tx, mut rx) = mpsc::unbounded_channel::<&'static str>();
    let app = Router::new().fallback(move || {
        let tx = tx.clone();
        async move {
            let _ = tx.send("arrived");
            let _gone = Gone(tx);
            tokio::time::sleep(Duration::from_secs(60)).await;
            "too late"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });

    let executor = Arc::new(TokioExecutor::current().expect("runtime"));
    let policy = UrlPolicy::public_web(Arc::new(SystemResolver::new(executor)))
        .allowing_test_servers(TestLoopback::for_tests_only(), [addr]);
    let scenario = Scenario::from_json(&format!(
        r#"{{"turns": [
            {{"text": "Reading.", "tool_calls": [{{"name": "fetch_url", "arguments": {{"url": "http://{addr}/"}}}}]}},
            {{"text": "Done."}}
        ]}}"#
    ))
    .expect("scenario");
    let data = tempfile::tempdir().expect("data");
    let native = agent_host_native::host::NativeHost::open_with(data.path(), Default::default())
        .await
        .expect("host");
    let provider = Arc::new(ScriptedProvider::new(scenario, native.host().clock.clone()));
    let options = AppOptions {
        url_policy: Some(policy),
        ..AppOptions::default()
    };
    let app = App::on_host(native, options, provider).await.expect("app");
    let session = SessionId::new("stop-fetch").expect("session");
    let _lease = app.open_session(&session).await.expect("lease");
    let run = app
        .runtime()
        .start(&session, "Read it.", RunConfig::default())
        .await
        .expect("start");

    let arrived = tokio::time::timeout(Duration::from_secs(20), rx.recv()).await;
    assert_eq!(arrived, Ok(Some("arrived")), "the read reached the server");
    let started = Instant::now();
    app.stop(&run).await.expect("stop");
    let gone = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
    assert_eq!(
        gone,
        Ok(Some("gone")),
        "the read's connection must close when the run stops, not at its deadline"
    );
    let settled = tokio::time::timeout(Duration::from_secs(10), app.runtime().wait_settled(&run))
        .await
        .expect("settles")
        .expect("run");
    assert_eq!(settled.status, RunStatus::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(10));
}
