//! Shared test helpers: loopback axum servers started by the tests, a
//! connection-counting listener, the test-only loopback policy, and waiting
//! for work to park on the manual clock.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_fetch::testing::TestLoopback;
use agent_fetch::{Limits, ReaderConfig, ScriptedResolver, UrlPolicy, WebReader};
use agent_kernel::host::ManualClock;
use axum::Router;

pub const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Start `router` on 127.0.0.1 with a fresh port; it runs until the test ends.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    addr
}

/// A listener that counts accepted connections and never answers.
pub struct Counter {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicUsize>,
}

impl Counter {
    pub fn count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

pub async fn counting_listener(addr: SocketAddr) -> Counter {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let c = connections.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            held.push(sock);
        }
    });
    Counter { addr, connections }
}

/// A port on 127.0.0.1 that nothing listens on.
pub async fn closed_port() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

/// The public-web policy plus exactly `servers` (the tests' own).
pub fn test_policy(resolver: ScriptedResolver, servers: &[SocketAddr]) -> UrlPolicy {
    UrlPolicy::public_web(Arc::new(resolver))
        .allowing_test_servers(TestLoopback::for_tests_only(), servers.iter().copied())
}

pub fn reader(policy: UrlPolicy, jina: Option<SocketAddr>, clock: &ManualClock) -> WebReader {
    reader_with(policy, jina, clock, Limits::spec())
}

pub fn reader_with(
    policy: UrlPolicy,
    jina: Option<SocketAddr>,
    clock: &ManualClock,
    limits: Limits,
) -> WebReader {
    let config = ReaderConfig {
        jina_base: jina.map(|a| format!("http://{a}/jina")),
        jina_key: None,
    };
    WebReader::new(policy, config, limits, Arc::new(clock.clone()))
}

/// Wait (in real time, briefly) until at least `n` sleeps are pending on the clock.
pub async fn wait_sleepers(clock: &ManualClock, n: usize) {
    for _ in 0..2500 {
        if clock.pending_sleepers() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!(
        "expected {n} pending sleeps on the manual clock, found {}",
        clock.pending_sleepers()
    );
}

/// Wait until `counter` reaches `n`.
pub async fn wait_count(counter: &AtomicUsize, n: usize) {
    for _ in 0..2500 {
        if counter.load(Ordering::SeqCst) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!(
        "expected {n} hits, found {}",
        counter.load(Ordering::SeqCst)
    );
}

/// Hit counter plus the request headers each hit carried.
#[derive(Clone, Default)]
pub struct Hits {
    pub count: Arc<AtomicUsize>,
    pub headers: Arc<Mutex<Vec<axum::http::HeaderMap>>>,
}

impl Hits {
    pub fn record(&self, headers: &axum::http::HeaderMap) {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.headers.lock().unwrap().push(headers.clone());
    }
    pub fn get(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
    pub fn last_headers(&self) -> axum::http::HeaderMap {
        self.headers
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or_default()
    }
}
