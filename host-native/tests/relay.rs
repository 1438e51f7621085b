//! The model relay of `agentrt serve` (issue 15 item 4, S13.3), over real
//! loopback sockets: a page's model request, carrying the gateway token
//! where the provider's key would go, reaches the provider's streaming
//! endpoint with the server's key in the format's header and streams back
//! with CORS for the page; a wrong token, another origin, another path of
//! the provider or a provider not relayed never reaches it. Through the
//! binary: `--relay` without the key for a public endpoint is a usage error.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use agent_fetch::{Limits, ReaderConfig, ScriptedResolver, UrlPolicy, WebReader};
use agent_host_native::serve::gateway::{self, GatewayState};
use agent_host_native::serve::relay::{Relay, RelayTarget};
use agent_kernel::host::ManualClock;
use axum::http::HeaderMap;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const SERVER_KEY: &str = "server-side-key-5b1e";

/// What the upstream saw: path, the auth headers, the body.
type Seen = Arc<Mutex<Vec<(String, Vec<(String, String)>, String)>>>;

async fn upstream() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
            let s = s.clone();
            async move {
                let auth = [
                    "authorization",
                    "x-goog-api-key",
                    "x-api-key",
                    "anthropic-version",
                    "origin",
                ]
                .iter()
                .filter_map(|h| {
                    headers
                        .get(*h)
                        .and_then(|v| v.to_str().ok())
                        .map(|v| ((*h).to_owned(), v.to_owned()))
                })
                .collect();
                s.lock().unwrap().push((uri.to_string(), auth, body));
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from("data: {\"streamed\": true}\n\n"))
                    .unwrap()
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

/// A gateway relaying Gemini and Anthropic to the upstream, keyed.
async fn gateway(up: SocketAddr) -> (SocketAddr, String) {
    let key = |_: &str| Some(SERVER_KEY.to_owned());
    let relay = Relay::new(vec![
        RelayTarget::parse(&format!("gemini=http://{up}/v1beta"), key).unwrap(),
        RelayTarget::parse(&format!("anthropic=http://{up}/v1"), key).unwrap(),
    ])
    .unwrap();
    let reader = WebReader::new(
        UrlPolicy::public_web(Arc::new(ScriptedResolver::new())),
        ReaderConfig::direct_only(),
        Limits::spec(),
        Arc::new(ManualClock::new(0)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = gateway::page_origin(addr);
    let state = GatewayState::new(Arc::new(reader), TOKEN, [origin.clone()]).with_relay(relay);
    tokio::spawn(async move { gateway::serve(listener, state).await.unwrap() });
    (addr, origin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_request_reaches_the_provider_with_the_servers_key_and_streams_back() {
    let (up, seen) = upstream().await;
    let (gw, origin) = gateway(up).await;
    let client = reqwest::Client::new();
    let body = r#"{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}"#;
    let resp = client
        .post(format!(
            "http://{gw}/v1/relay/gemini/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        ))
        .header("origin", &origin)
        .header("x-goog-api-key", TOKEN)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["access-control-allow-origin"]
            .to_str()
            .unwrap(),
        origin
    );
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.text().await.unwrap(), "data: {\"streamed\": true}\n\n");
    let (path, auth, got) = seen.lock().unwrap().pop().expect("upstream reached");
    assert_eq!(
        path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(auth, [("x-goog-api-key".to_owned(), SERVER_KEY.to_owned())]);
    assert_eq!(got, body, "the body is relayed as sent");

    // Anthropic: the token in x-api-key, the version passed on.
    let resp = client
        .post(format!("http://{gw}/v1/relay/anthropic/messages"))
        .header("origin", &origin)
        .header("x-api-key", TOKEN)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-dangerous-direct-browser-access", "true")
        .body(r#"{"stream": true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (path, auth, _) = seen.lock().unwrap().pop().expect("upstream reached");
    assert_eq!(path, "/v1/messages");
    assert_eq!(
        auth,
        [
            ("x-api-key".to_owned(), SERVER_KEY.to_owned()),
            ("anthropic-version".to_owned(), "2023-06-01".to_owned())
        ]
    );

    // A preflight from the page names the key headers.
    let resp = client
        .request(
            reqwest::Method::OPTIONS,
            format!("http://{gw}/v1/relay/anthropic/messages"),
        )
        .header("origin", &origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "x-api-key, anthropic-version, x-stainless-os",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let allowed = resp.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap();
    assert!(allowed.contains("x-api-key") && allowed.contains("x-goog-api-key"));
    assert!(
        allowed.contains("x-stainless-os"),
        "the SDK's own headers: {allowed}"
    );
}

/// A request's path, headers and body, and the status it must get.
type Case = (String, Vec<(&'static str, String)>, &'static str, u16);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_else_reaches_the_provider() {
    let (up, seen) = upstream().await;
    let (gw, origin) = gateway(up).await;
    let client = reqwest::Client::new();
    let gemini = "models/gemini-2.5-flash:streamGenerateContent?alt=sse";
    let cases: Vec<Case> = vec![
        // No token, a wrong token, the real provider key instead of the token.
        (format!("/v1/relay/gemini/{gemini}"), vec![], "{}", 401),
        (
            format!("/v1/relay/gemini/{gemini}"),
            vec![("x-goog-api-key", "wrong".into())],
            "{}",
            401,
        ),
        // Another page's origin.
        (
            format!("/v1/relay/gemini/{gemini}"),
            vec![
                ("x-goog-api-key", TOKEN.into()),
                ("origin", "http://evil.example".into()),
            ],
            "{}",
            403,
        ),
        // Another path of the provider, a path trick, another query.
        (
            "/v1/relay/gemini/files".into(),
            vec![("x-goog-api-key", TOKEN.into())],
            "{}",
            404,
        ),
        (
            "/v1/relay/gemini/models/x:countTokens".into(),
            vec![("x-goog-api-key", TOKEN.into())],
            "{}",
            404,
        ),
        (
            "/v1/relay/gemini/models/gemini-2.5-flash:streamGenerateContent?key=abc".into(),
            vec![("x-goog-api-key", TOKEN.into())],
            "{}",
            400,
        ),
        // A provider this gateway does not relay, an unknown one.
        (
            "/v1/relay/openai-compatible/chat/completions".into(),
            vec![("authorization", format!("Bearer {TOKEN}"))],
            "{}",
            404,
        ),
        (
            "/v1/relay/upstream/anything".into(),
            vec![("authorization", format!("Bearer {TOKEN}"))],
            "{}",
            404,
        ),
        // A body that is not JSON, a request that does not stream (400 in
        // the provider's error format).
        (
            "/v1/relay/anthropic/messages".into(),
            vec![("x-api-key", TOKEN.into())],
            "not json",
            400,
        ),
        (
            "/v1/relay/anthropic/v1/messages".into(),
            vec![("x-api-key", TOKEN.into())],
            r#"{"stream": false}"#,
            400,
        ),
        (
            "/v1/relay/gemini/models/x:generateContent".into(),
            vec![("x-goog-api-key", TOKEN.into())],
            "{}",
            400,
        ),
        (
            "/v1/relay/gemini/v1beta/models/m:generateContent".into(),
            vec![("x-goog-api-key", TOKEN.into())],
            "{}",
            400,
        ),
        // Another path under the SDK's version segment.
        (
            "/v1/relay/anthropic/v1/messages/batches".into(),
            vec![("x-api-key", TOKEN.into())],
            r#"{"stream": true}"#,
            404,
        ),
    ];
    for (path, headers, body, status) in cases {
        let mut req = client.post(format!("http://{gw}{path}")).body(body);
        if !headers.iter().any(|(k, _)| *k == "origin") {
            req = req.header("origin", &origin);
        }
        for (k, v) in &headers {
            req = req.header(*k, v);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{path} {headers:?}");
    }
    // Over the body limit.
    let big = format!(
        "{{\"x\": \"{}\"}}",
        "a".repeat(agent_host_native::serve::relay::MAX_RELAY_BODY_BYTES)
    );
    let resp = client
        .post(format!("http://{gw}/v1/relay/anthropic/messages"))
        .header("origin", &origin)
        .header("x-api-key", TOKEN)
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    assert!(
        seen.lock().unwrap().is_empty(),
        "the provider was never reached"
    );
}

#[test]
fn relay_without_the_key_for_a_public_endpoint_is_a_usage_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentrt"))
        .args(["serve", "--port", "0", "--relay", "gemini"])
        .env_remove("GEMINI_API_KEY")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GEMINI_API_KEY"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentrt"))
        .args(["serve", "--port", "0", "--relay", "openai"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "an unknown provider");
}

/// An upstream whose answer is `chunks` pieces, `gap` apart, then (when
/// `stall` is set) silence for that long before the last piece.
async fn slow_upstream(
    chunks: usize,
    gap: std::time::Duration,
    stall: Option<std::time::Duration>,
) -> SocketAddr {
    let app = axum::Router::new().fallback(move || async move {
        let pieces = futures::stream::unfold(0usize, move |i| async move {
            if i > chunks {
                return None;
            }
            let wait = if i == chunks { stall? } else { gap };
            tokio::time::sleep(wait).await;
            let piece = format!("data: {{\"piece\": {i}}}\n\n");
            Some((
                Ok::<_, std::io::Error>(axum::body::Bytes::from(piece)),
                i + 1,
            ))
        });
        axum::response::Response::builder()
            .header("content-type", "text/event-stream")
            .body(axum::body::Body::from_stream(pieces))
            .unwrap()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A gateway relaying Gemini to `up` whose request timeout is `request`
/// and whose relayed streams are bounded by `limits`.
async fn gateway_with(
    up: SocketAddr,
    request: std::time::Duration,
    limits: agent_host_native::serve::relay::RelayLimits,
) -> (SocketAddr, String) {
    let key = |_: &str| Some(SERVER_KEY.to_owned());
    let relay = Relay::new(vec![
        RelayTarget::parse(&format!("gemini=http://{up}/v1beta"), key).unwrap(),
    ])
    .unwrap()
    .with_limits(limits);
    let reader = WebReader::new(
        UrlPolicy::public_web(Arc::new(ScriptedResolver::new())),
        ReaderConfig::direct_only(),
        Limits::spec(),
        Arc::new(ManualClock::new(0)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = gateway::page_origin(addr);
    let state = GatewayState::new(Arc::new(reader), TOKEN, [origin.clone()]).with_relay(relay);
    let limits = gateway::ServeLimits {
        request_timeout: request,
        ..gateway::ServeLimits::default()
    };
    tokio::spawn(async move {
        gateway::serve_app(listener, gateway::router(state), limits)
            .await
            .unwrap()
    });
    (addr, origin)
}

async fn relayed_gemini(gw: SocketAddr, origin: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!(
            "http://{gw}/v1/relay/gemini/models/m:streamGenerateContent?alt=sse"
        ))
        .header("origin", origin)
        .header("x-goog-api-key", TOKEN)
        .body("{}")
        .send()
        .await
        .unwrap()
}

/// The gateway's request timeout bounds the wait for the answer's head,
/// not a long answer: one that streams on past it arrives whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_relayed_answer_streams_past_the_gateways_request_timeout() {
    let gap = std::time::Duration::from_millis(250);
    let up = slow_upstream(6, gap, None).await;
    let request_timeout = std::time::Duration::from_millis(400);
    let (gw, origin) = gateway_with(up, request_timeout, Default::default()).await;
    let started = std::time::Instant::now();
    let resp = relayed_gemini(gw, &origin).await;
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.expect("the whole answer");
    let expected: String = (0..6)
        .map(|i| format!("data: {{\"piece\": {i}}}\n\n"))
        .collect();
    assert_eq!(body, expected);
    assert!(
        started.elapsed() > request_timeout,
        "the answer did outlast the request timeout"
    );
}

/// An upstream that stops sending mid-answer is cut at the relay's idle
/// bound: the client gets the pieces so far and then a broken body, which
/// the model client takes as a disconnect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_relayed_answer_is_cut_at_the_idle_bound() {
    let up = slow_upstream(
        2,
        std::time::Duration::from_millis(10),
        Some(std::time::Duration::from_secs(30)),
    )
    .await;
    let limits = agent_host_native::serve::relay::RelayLimits {
        idle: std::time::Duration::from_millis(300),
        whole: std::time::Duration::from_secs(600),
    };
    let (gw, origin) = gateway_with(up, std::time::Duration::from_secs(60), limits).await;
    let started = std::time::Instant::now();
    let mut resp = relayed_gemini(gw, &origin).await;
    assert_eq!(resp.status(), 200);
    let mut got = String::new();
    let ended = loop {
        match resp.chunk().await {
            Ok(Some(c)) => got.push_str(&String::from_utf8_lossy(&c)),
            Ok(None) => break "complete",
            Err(_) => break "broken",
        }
    };
    assert_eq!(ended, "broken", "a cut answer is not a complete one: {got}");
    assert_eq!(got, "data: {\"piece\": 0}\n\ndata: {\"piece\": 1}\n\n");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(25),
        "cut long before the upstream's 30 s silence ended"
    );

    // The whole-answer limit: a steady trickle past it is cut too.
    let up = slow_upstream(40, std::time::Duration::from_millis(50), None).await;
    let limits = agent_host_native::serve::relay::RelayLimits {
        idle: std::time::Duration::from_secs(60),
        whole: std::time::Duration::from_millis(500),
    };
    let (gw, origin) = gateway_with(up, std::time::Duration::from_secs(60), limits).await;
    let resp = relayed_gemini(gw, &origin).await;
    assert!(resp.text().await.is_err(), "cut at the whole-answer limit");
}
