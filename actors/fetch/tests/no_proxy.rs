//! S8.1: reads never go through a proxy, even when the environment names one
//! (a proxy would resolve and connect on its own, outside the policy). Its
//! own test binary, because it sets process-wide environment variables.
#![cfg(not(target_arch = "wasm32"))] // loopback servers need tokio and axum

mod common;

use std::time::Duration;

use agent_fetch::{CancelToken, ScriptedResolver};
use agent_kernel::host::ManualClock;
use axum::Router;
use axum::routing::get;
use common::*;

#[test]
#[allow(unsafe_code)]
fn s8_1_no_proxy_even_when_the_environment_names_one() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let proxy = counting_listener("127.0.0.1:0".parse().unwrap()).await;
        let site = serve(Router::new().route("/", get(|| async { "direct" }))).await;
        for name in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
            // SAFETY: this binary runs this one test on a current-thread
            // runtime; no other thread reads the environment concurrently.
            unsafe { std::env::set_var(name, format!("http://{}", proxy.addr)) };
        }
        // Control: a default client obeys the environment and goes to the proxy.
        let control = reqwest::Client::new().get(format!("http://{site}/")).send();
        let _ = tokio::time::timeout(Duration::from_millis(300), control).await;
        assert_eq!(
            proxy.count(),
            1,
            "control: the environment's proxy should be used by a default client"
        );

        let clock = ManualClock::new(0);
        let r = reader(test_policy(ScriptedResolver::new(), &[site]), None, &clock);
        let page = r
            .read(&format!("http://{site}/"), CancelToken::never())
            .await
            .unwrap();
        assert_eq!(page.text, "direct");
        assert_eq!(proxy.count(), 1, "the reader connected to the proxy");
    });
}
