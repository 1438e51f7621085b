//! Hostile HTML through the gateway of `agentrt serve` (issue 12, item 1):
//! a page nested 10x, 100x and 1,000x deeper than the depth limit, served
//! by a real server on loopback and read directly (no Jina) through
//! `POST /v1/fetch`, comes back as the typed `page_too_complex` failure —
//! the process is alive, every extraction slot is free again (the work is
//! done, not left running), and the gateway still serves a normal page.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use agent_fetch::testing::TestLoopback;
use agent_fetch::{
    ExtractionSlots, FetchError, GatewayReply, HtmlLimits, HtmlRefusal, Limits, ReaderConfig,
    ScriptedResolver, UrlPolicy, WebReader,
};
use agent_host_native::host::TokioExecutor;
use agent_host_native::serve::gateway;
use agent_kernel::host::ManualClock;
use axum::Router;
use axum::extract::Path;
use axum::http::header;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "fedcba9876543210fedcba9876543210";

/// The hostile site: `/nested/{n}` is `n` unclosed `<div>`s, `/article` an
/// ordinary page.
fn site() -> Router {
    Router::new()
        .route(
            "/nested/{n}",
            get(|Path(n): Path<usize>| async move {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    format!("<!doctype html><title>deep</title>{}", "<div>".repeat(n)),
                )
            }),
        )
        .route(
            "/article",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    "<html><head><title>Fine</title></head><body><article><p>An ordinary page that is read after the hostile ones, with enough words.</p></article></body></html>",
                )
            }),
        )
}

/// One POST /v1/fetch over a fresh connection; the gateway's JSON answer.
async fn fetch(gateway: SocketAddr, url: &str) -> GatewayReply {
    let body = serde_json::json!({ "url": url }).to_string();
    let request = format!(
        "POST /v1/fetch HTTP/1.1\r\nHost: {gateway}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(gateway).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, json) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    serde_json::from_str(json).expect("a gateway reply")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_nesting_through_the_gateway_is_typed_and_the_gateway_still_serves() {
    let site_port = common::serve_on_loopback(site());
    let site_addr: SocketAddr = ([127, 0, 0, 1], site_port).into();
    let resolver = ScriptedResolver::new().answer("hostile.example", [site_addr.ip()]);
    let policy = UrlPolicy::public_web(Arc::new(resolver))
        .allowing_test_servers(TestLoopback::for_tests_only(), [site_addr]);
    // Slots of this test's own, so that they can be counted.
    let slots = ExtractionSlots::new(2);
    // As `agentrt serve` builds it: direct reads, extraction off the async
    // threads; a manual clock that never fires, so only the work's own
    // end can answer.
    let reader = WebReader::new(
        policy,
        ReaderConfig::direct_only(),
        Limits::spec(),
        Arc::new(ManualClock::new(0)),
    )
    .with_blocking(Arc::new(TokioExecutor::current().expect("a runtime")))
    .with_extraction_slots(slots.clone());
    let listener = gateway::bind(0).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = gateway::page_origin(addr);
    let state = gateway::GatewayState::new(Arc::new(reader), TOKEN, [origin]);
    tokio::spawn(async move { gateway::serve(listener, state).await.unwrap() });

    let depth = HtmlLimits::DEFAULT.max_depth;
    for factor in [10, 100, 1_000] {
        let url = format!(
            "http://hostile.example:{site_port}/nested/{}",
            depth * factor
        );
        let reply = tokio::time::timeout(std::time::Duration::from_secs(120), fetch(addr, &url))
            .await
            .expect("the gateway answered");
        let GatewayReply::Failure(failure) = reply else {
            panic!("{factor}x: expected a failure, got {reply:?}")
        };
        assert_eq!(
            failure.reason,
            FetchError::PageTooComplex {
                refusal: HtmlRefusal::TooDeep { limit: depth }
            },
            "{factor}x"
        );
        assert_eq!(failure.reason.code(), "page_too_complex");
        assert!(!failure.reason.retryable());
        // The answer came from the finished work: every slot is free again.
        assert_eq!(
            slots.free(),
            slots.count(),
            "{factor}x: extraction still running"
        );
    }

    // The same gateway (same process) still reads an ordinary page.
    let url = format!("http://hostile.example:{site_port}/article");
    let GatewayReply::Page(page) = fetch(addr, &url).await else {
        panic!("the ordinary page was not read")
    };
    assert_eq!(page.title.as_deref(), Some("Fine"));
    assert!(page.text.contains("ordinary page"), "{}", page.text);
}
