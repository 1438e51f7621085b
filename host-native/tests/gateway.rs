//! The gateway (issue 7, S8): `POST /v1/fetch` behind its per-process token,
//! CORS limited to its own page, the Host check, the same URL policy as
//! native reads, and the browser's `GatewayClient` talking to it. Every peer
//! is a server on loopback started here; the Jina-compatible reader is user
//! configuration, so it may live on loopback.

use agent_host_native::serve::gateway;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_fetch::{
    CancelToken, FetchBackend, FetchError, GatewayClient, GatewayReply, Limits, ReaderConfig,
    ReaderUsed, ScriptedResolver, Stage, UrlPolicy, WebReader,
};
use agent_kernel::host::{ManualClock, SeededEntropy};
use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

struct Gateway {
    addr: SocketAddr,
    origin: String,
    jina_hits: Arc<AtomicUsize>,
}

/// A Jina-compatible reader on loopback that counts its requests.
async fn jina() -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = Router::new().fallback(move || {
        h.fetch_add(1, Ordering::SeqCst);
        async {
            axum::Json(serde_json::json!({
                "code": 200, "status": 20000,
                "data": {"title": "Example Domain", "url": "https://site.example/", "content": "This domain is for use in examples."}
            }))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, hits)
}

async fn start() -> Gateway {
    start_allowing(&[]).await
}

/// The gateway, also allowing the hosted apps' origins `extra`.
async fn start_allowing(extra: &[gateway::AllowedOrigin]) -> Gateway {
    let (jina_addr, jina_hits) = jina().await;
    // site.example is scripted public; Jina answers for it, so nothing
    // off this machine is ever contacted.
    let resolver =
        ScriptedResolver::new().answer("site.example", ["93.184.216.34".parse().unwrap()]);
    let reader = WebReader::new(
        UrlPolicy::public_web(Arc::new(resolver)),
        ReaderConfig {
            jina_base: Some(format!("http://{jina_addr}")),
            jina_key: None,
        },
        Limits::spec(),
        Arc::new(ManualClock::new(0)),
    );
    let listener = gateway::bind(0).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = gateway::page_origin(addr);
    let state =
        gateway::GatewayState::new(Arc::new(reader), TOKEN, [origin.clone()]).also_allowing(extra);
    tokio::spawn(async move { gateway::serve(listener, state).await.unwrap() });
    Gateway {
        addr,
        origin,
        jina_hits,
    }
}

struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// One HTTP/1.1 request over a fresh connection, with exactly these headers.
async fn raw(
    addr: SocketAddr,
    method: &str,
    headers: &[(&str, String)],
    body: &str,
) -> RawResponse {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} /v1/fetch HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    RawResponse {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn json_body(url: &str) -> String {
    serde_json::json!({ "url": url }).to_string()
}

impl Gateway {
    fn host(&self) -> (&'static str, String) {
        ("Host", self.addr.to_string())
    }
    fn auth(&self) -> (&'static str, String) {
        ("Authorization", format!("Bearer {TOKEN}"))
    }
    fn json(&self) -> (&'static str, String) {
        ("Content-Type", "application/json".to_owned())
    }
}

#[tokio::test]
async fn gateway_binds_loopback_only_and_makes_random_tokens() {
    assert_eq!(gateway::DEFAULT_PORT, 8787);
    let listener = gateway::bind(0).await.unwrap();
    assert!(listener.local_addr().unwrap().ip().is_loopback());
    let a = gateway::random_token(&SeededEntropy::new(1));
    let b = gateway::random_token(&SeededEntropy::new(2));
    assert_eq!(a.len(), 64);
    assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
}

#[tokio::test]
async fn gateway_refuses_requests_without_its_token() {
    let g = start().await;
    let body = json_body("https://site.example/");
    let cases: Vec<Vec<(&str, String)>> = vec![
        vec![g.host(), g.json()],
        vec![g.host(), g.json(), ("Authorization", "Bearer wrong".into())],
        vec![
            g.host(),
            g.json(),
            ("Authorization", format!("Bearer {TOKEN}x")),
        ],
        vec![
            g.host(),
            g.json(),
            ("Authorization", format!("Basic {TOKEN}")),
        ],
        vec![g.host(), g.json(), ("Authorization", TOKEN.into())],
    ];
    for headers in cases {
        let resp = raw(g.addr, "POST", &headers, &body).await;
        assert_eq!(resp.status, 401, "{headers:?}");
        assert_eq!(resp.json()["error"], "token_required");
        assert_eq!(resp.header("www-authenticate"), Some("Bearer"));
    }
    assert_eq!(
        g.jina_hits.load(Ordering::SeqCst),
        0,
        "nothing was read without the token"
    );
    // With the token the same request is served.
    let resp = raw(g.addr, "POST", &[g.host(), g.json(), g.auth()], &body).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let reply: GatewayReply = serde_json::from_str(&resp.body).unwrap();
    let GatewayReply::Page(page) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(page.reader, ReaderUsed::Jina);
    assert_eq!(g.jina_hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn gateway_refuses_other_origins() {
    let g = start().await;
    let body = json_body("https://site.example/");
    for evil in [
        "http://evil.example",
        "null",
        "http://127.0.0.1:1",
        "https://127.0.0.1",
    ] {
        let resp = raw(
            g.addr,
            "POST",
            &[g.host(), g.json(), g.auth(), ("Origin", evil.into())],
            &body,
        )
        .await;
        assert_eq!(resp.status, 403, "{evil}");
        assert_eq!(resp.json()["error"], "origin_refused");
        assert_eq!(resp.header("access-control-allow-origin"), None);
        let pre = raw(
            g.addr,
            "OPTIONS",
            &[
                g.host(),
                ("Origin", evil.into()),
                ("Access-Control-Request-Method", "POST".into()),
            ],
            "",
        )
        .await;
        assert_eq!(pre.status, 403, "preflight from {evil}");
        assert_eq!(pre.header("access-control-allow-origin"), None);
    }
    assert_eq!(g.jina_hits.load(Ordering::SeqCst), 0);
    // Its own page: the preflight is answered and the request served.
    let pre = raw(
        g.addr,
        "OPTIONS",
        &[
            g.host(),
            ("Origin", g.origin.clone()),
            ("Access-Control-Request-Method", "POST".into()),
        ],
        "",
    )
    .await;
    assert_eq!(pre.status, 204);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some(g.origin.as_str())
    );
    assert!(
        pre.header("access-control-allow-headers")
            .unwrap()
            .contains("authorization")
    );
    let resp = raw(
        g.addr,
        "POST",
        &[g.host(), g.json(), g.auth(), ("Origin", g.origin.clone())],
        &body,
    )
    .await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("access-control-allow-origin"),
        Some(g.origin.as_str())
    );
}

#[tokio::test]
async fn gateway_refuses_foreign_host_headers() {
    // A DNS-rebound name pointing at 127.0.0.1 arrives with its own Host.
    let g = start().await;
    let resp = raw(
        g.addr,
        "POST",
        &[("Host", "rebound.example".into()), g.json(), g.auth()],
        &json_body("https://site.example/"),
    )
    .await;
    assert_eq!(resp.status, 403);
    assert_eq!(resp.json()["error"], "host_refused");
}

#[tokio::test]
async fn gateway_applies_the_url_policy() {
    let g = start().await;
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1/",
        "http://[::1]/",
        "file:///etc/passwd",
    ] {
        let resp = raw(
            g.addr,
            "POST",
            &[g.host(), g.json(), g.auth()],
            &json_body(url),
        )
        .await;
        assert_eq!(resp.status, 200);
        let reply: GatewayReply = serde_json::from_str(&resp.body).unwrap();
        let GatewayReply::Failure(f) = reply else {
            panic!("{url} was read")
        };
        assert_eq!(f.stage, Stage::Policy, "{url}");
        assert!(matches!(f.reason, FetchError::Policy { .. }));
    }
    assert_eq!(g.jina_hits.load(Ordering::SeqCst), 0);
    let resp = raw(g.addr, "POST", &[g.host(), g.json(), g.auth()], "{not json").await;
    assert_eq!(resp.status, 400);
    assert_eq!(resp.json()["error"], "bad_request");
}

#[tokio::test]
async fn gateway_client_is_the_browser_backend() {
    let g = start().await;
    let clock: Arc<ManualClock> = Arc::new(ManualClock::new(0));
    let base = format!("http://{}", g.addr);
    let client = GatewayClient::new(&base, TOKEN, &Limits::spec(), clock.clone()).unwrap();
    assert_eq!(client.name(), "gateway");
    let page = client
        .fetch("https://site.example/", CancelToken::never())
        .await
        .unwrap();
    assert_eq!(page.reader, ReaderUsed::Jina);
    assert_eq!(page.title.as_deref(), Some("Example Domain"));
    let refused = client
        .fetch("http://10.0.0.1/", CancelToken::never())
        .await
        .unwrap_err();
    assert_eq!(refused.stage, Stage::Policy);
    let wrong = GatewayClient::new(&base, "nope", &Limits::spec(), clock).unwrap();
    let failure = wrong
        .fetch("https://site.example/", CancelToken::never())
        .await
        .unwrap_err();
    assert_eq!(failure.stage, Stage::Gateway);
    assert!(matches!(
        failure.reason,
        FetchError::Gateway {
            status: Some(401),
            ..
        }
    ));
    assert!(
        GatewayClient::new(
            "ftp://x",
            TOKEN,
            &Limits::spec(),
            Arc::new(ManualClock::new(0))
        )
        .is_err()
    );
}

/// `--allow-origin` takes exact web origins only, in the form browsers send
/// in `Origin` (issue 14 item 9).
#[test]
fn allowed_origins_are_exact_web_origins() {
    for (given, kept) in [
        ("https://chat.example", "https://chat.example"),
        ("https://chat.example/", "https://chat.example"),
        ("HTTPS://Chat.Example:443", "https://chat.example"),
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
        ("http://[::1]:3000", "http://[::1]:3000"),
        ("https://bücher.example", "https://xn--bcher-kva.example"),
    ] {
        let origin = gateway::AllowedOrigin::parse(given).expect(given);
        assert_eq!(origin.as_str(), kept, "{given}");
    }
    for refused in [
        "",
        "*",
        "https://*.example",
        "null",
        "NULL",
        "chat.example",
        "ftp://chat.example",
        "file:///etc/passwd",
        "data:text/html,x",
        "https://user:pw@chat.example",
        "https://user@chat.example",
        "https://chat.example/app",
        "https://chat.example/?q=1",
        "https://chat.example#top",
        "https://chat.example//",
        "https://chat.example\\app",
        "https://chat.example\\",
        "https://chat.example?",
        "https://chat.example#",
    ] {
        let err = gateway::AllowedOrigin::parse(refused).expect_err(refused);
        assert_eq!(err.given, refused);
        assert!(err.to_string().contains("--allow-origin"), "{err}");
    }
}

/// A hosted app's origin, once allowed, reads through the gateway with the
/// token, exactly like the gateway's own page; every other check holds for
/// it: no token, no read; a third origin, a foreign Host and a private
/// address are refused as before (issue 14 item 9).
#[tokio::test]
async fn an_allowed_origin_reads_with_the_token_and_every_check_holds() {
    let app = gateway::AllowedOrigin::parse("https://chat.example").unwrap();
    let g = start_allowing(std::slice::from_ref(&app)).await;
    let body = json_body("https://site.example/");
    let from_app = ("Origin", app.as_str().to_owned());

    let pre = raw(
        g.addr,
        "OPTIONS",
        &[
            g.host(),
            from_app.clone(),
            ("Access-Control-Request-Method", "POST".into()),
        ],
        "",
    )
    .await;
    assert_eq!(pre.status, 204);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some(app.as_str())
    );

    let without_token = raw(
        g.addr,
        "POST",
        &[g.host(), g.json(), from_app.clone()],
        &body,
    )
    .await;
    assert_eq!(without_token.status, 401);
    assert_eq!(without_token.json()["error"], "token_required");
    assert_eq!(g.jina_hits.load(Ordering::SeqCst), 0);

    let resp = raw(
        g.addr,
        "POST",
        &[g.host(), g.json(), g.auth(), from_app.clone()],
        &body,
    )
    .await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_eq!(
        resp.header("access-control-allow-origin"),
        Some(app.as_str())
    );
    assert_eq!(resp.header("vary"), Some("Origin"));
    assert_eq!(g.jina_hits.load(Ordering::SeqCst), 1);

    // A third origin, and a lookalike of the allowed one, stay refused.
    for third in [
        "https://evil.example",
        "https://chat.example.evil.example",
        "http://chat.example",
        "https://chat.example:8443",
    ] {
        let resp = raw(
            g.addr,
            "POST",
            &[g.host(), g.json(), g.auth(), ("Origin", third.into())],
            &body,
        )
        .await;
        assert_eq!(resp.status, 403, "{third}");
        assert_eq!(resp.json()["error"], "origin_refused");
        assert_eq!(resp.header("access-control-allow-origin"), None);
    }
    // The Host must still name the gateway itself (no DNS rebinding through
    // the allowed app's name).
    let resp = raw(
        g.addr,
        "POST",
        &[
            ("Host", "chat.example".into()),
            g.json(),
            g.auth(),
            from_app.clone(),
        ],
        &body,
    )
    .await;
    assert_eq!(resp.status, 403);
    assert_eq!(resp.json()["error"], "host_refused");
    // The URL policy is the same for every origin: no private address.
    let resp = raw(
        g.addr,
        "POST",
        &[g.host(), g.json(), g.auth(), from_app],
        &json_body("http://127.0.0.1:22/"),
    )
    .await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    let reply: GatewayReply = serde_json::from_str(&resp.body).unwrap();
    assert!(matches!(reply, GatewayReply::Failure(_)), "{reply:?}");
    assert_eq!(
        g.jina_hits.load(Ordering::SeqCst),
        1,
        "nothing more was read"
    );
}
