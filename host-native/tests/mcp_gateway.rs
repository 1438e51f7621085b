//! MCP through the gateway (issue 16 item 6), over real loopback sockets: a
//! page's Streamable HTTP request reaches a server configured for the
//! gateway with the gateway's own credentials for it (never the page's
//! token), streams back with the session id exposed to the page; a URL not
//! configured passes the `/v1/fetch` address policy or is refused before a
//! byte leaves; token, origin, method and target checks hold.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use agent_fetch::testing::TestLoopback;
use agent_fetch::{Limits, ReaderConfig, ScriptedResolver, UrlPolicy, WebReader};
use agent_host_native::serve::gateway::{self, GatewayState};
use agent_host_native::serve::mcp_gateway::{ConfiguredMcpServer, MCP_TARGET_HEADER, McpGateway};
use agent_kernel::host::ManualClock;
use axum::http::HeaderMap;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const UPSTREAM_SECRET: &str = "Bearer mcp-upstream-secret-77";

/// What the MCP server saw: method, the headers of interest, the body.
type Seen = Arc<Mutex<Vec<(String, Vec<(String, String)>, String)>>>;

async fn mcp_server() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = axum::Router::new().fallback(
        move |method: axum::http::Method, headers: HeaderMap, body: String| {
            let s = s.clone();
            async move {
                let kept = [
                    "authorization",
                    "mcp-session-id",
                    "mcp-protocol-version",
                    "accept",
                    "cookie",
                    MCP_TARGET_HEADER,
                ]
                .iter()
                .filter_map(|h| {
                    headers
                        .get(*h)
                        .and_then(|v| v.to_str().ok())
                        .map(|v| ((*h).to_owned(), v.to_owned()))
                })
                .collect();
                s.lock().unwrap().push((method.to_string(), kept, body));
                let event =
                    "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .header("mcp-session-id", "session-abc")
                    .header("set-cookie", "tracking=1")
                    .body(axum::body::Body::from(event))
                    .unwrap()
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

async fn gateway(mcp: McpGateway) -> (SocketAddr, String) {
    let reader = WebReader::new(
        UrlPolicy::public_web(Arc::new(ScriptedResolver::new())),
        ReaderConfig::direct_only(),
        Limits::spec(),
        Arc::new(ManualClock::new(0)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = gateway::page_origin(addr);
    let state = GatewayState::new(Arc::new(reader), TOKEN, [origin.clone()]).with_mcp(mcp);
    tokio::spawn(async move { gateway::serve(listener, state).await.unwrap() });
    (addr, origin)
}

fn post(gw: SocketAddr, origin: &str, target: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("http://{gw}/v1/mcp"))
        .header("origin", origin)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header(MCP_TARGET_HEADER, target)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("cookie", "page=1")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_server_gets_the_gateways_credentials_and_streams_back() {
    let (up, seen) = mcp_server().await;
    let target = format!("http://{up}/mcp");
    let configured =
        ConfiguredMcpServer::new(&target, [("Authorization".into(), UPSTREAM_SECRET.into())])
            .unwrap();
    let (gw, origin) = gateway(McpGateway::new(vec![configured], None)).await;

    let resp = post(gw, &origin, &target)
        .header("mcp-session-id", "session-abc")
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["mcp-session-id"], "session-abc");
    assert_eq!(
        resp.headers()["access-control-expose-headers"],
        "mcp-session-id"
    );
    assert_eq!(
        resp.headers()["access-control-allow-origin"]
            .to_str()
            .unwrap(),
        origin
    );
    assert!(
        resp.headers().get("set-cookie").is_none(),
        "only MCP headers come back"
    );
    let body = resp.text().await.unwrap();
    assert!(body.contains("\"result\""), "{body}");

    let (method, headers, got) = seen.lock().unwrap().pop().expect("reached");
    assert_eq!(method, "POST");
    assert_eq!(got, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    let header = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(
        header("authorization"),
        Some(UPSTREAM_SECRET),
        "the gateway's credential, not the page's token"
    );
    assert_eq!(header("mcp-session-id"), Some("session-abc"));
    assert_eq!(header("mcp-protocol-version"), Some("2025-06-18"));
    assert_eq!(
        header("accept"),
        Some("application/json, text/event-stream")
    );
    assert_eq!(
        header("cookie"),
        None,
        "the page's other headers stay behind"
    );
    assert_eq!(header(MCP_TARGET_HEADER), None);

    // GET (the server's event stream) and DELETE (end of session) pass too.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let resp = reqwest::Client::new()
            .request(method.clone(), format!("http://{gw}/v1/mcp"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .header(MCP_TARGET_HEADER, &target)
            .header("mcp-session-id", "session-abc")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{method}");
        let (seen_method, _, body) = seen.lock().unwrap().pop().expect("reached");
        assert_eq!(seen_method, method.as_str());
        assert_eq!(body, "", "no body is forwarded on {method}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_not_configured_passes_the_address_policy_or_never_leaves() {
    let (up, seen) = mcp_server().await;
    // No policy: only configured servers are reached.
    let (gw, origin) = gateway(McpGateway::default()).await;
    let resp = post(gw, &origin, &format!("http://{up}/mcp"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert!(resp.text().await.unwrap().contains("mcp_target_refused"));

    // The public-web policy: a name that resolves to loopback, a loopback
    // literal, a private literal and an IPv4-mapped loopback are refused.
    let resolver = ScriptedResolver::new()
        .answer("rebound.example", [IpAddr::V4(Ipv4Addr::LOCALHOST)])
        .answer("tests.example", [up.ip()]);
    let policy = Arc::new(UrlPolicy::public_web(Arc::new(resolver)));
    let (gw, origin) = gateway(McpGateway::new(Vec::new(), Some(policy))).await;
    let port = up.port();
    for target in [
        format!("http://rebound.example:{port}/mcp"),
        format!("http://127.0.0.1:{port}/mcp"),
        format!("http://[::ffff:127.0.0.1]:{port}/mcp"),
        format!("http://10.0.0.8:{port}/mcp"),
        format!("http://0x7f.1:{port}/mcp"),
    ] {
        let resp = post(gw, &origin, &target).send().await.unwrap();
        assert_eq!(resp.status(), 403, "{target}");
        assert!(
            resp.text().await.unwrap().contains("mcp_target_refused"),
            "{target}"
        );
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the server"
    );

    // The test's own server allowed (as a public one would be): reached,
    // with no credentials of any kind.
    let resolver = ScriptedResolver::new().answer("tests.example", [up.ip()]);
    let policy = Arc::new(
        UrlPolicy::public_web(Arc::new(resolver))
            .allowing_test_servers(TestLoopback::for_tests_only(), [up]),
    );
    let (gw, origin) = gateway(McpGateway::new(Vec::new(), Some(policy))).await;
    let resp = post(gw, &origin, &format!("http://tests.example:{port}/mcp"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (_, headers, _) = seen.lock().unwrap().pop().expect("reached");
    assert!(
        headers
            .iter()
            .all(|(k, _)| k != "authorization" && k != "cookie"),
        "{headers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_origin_method_and_target_are_checked_first() {
    let (up, seen) = mcp_server().await;
    let target = format!("http://{up}/mcp");
    let configured = ConfiguredMcpServer::new(&target, []).unwrap();
    let (gw, origin) = gateway(McpGateway::new(vec![configured], None)).await;
    let client = reqwest::Client::new();
    let url = format!("http://{gw}/v1/mcp");

    let no_token = client
        .post(&url)
        .header(MCP_TARGET_HEADER, &target)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(no_token.status(), 401);
    let other_origin = post(gw, "https://evil.example", &target)
        .send()
        .await
        .unwrap();
    assert_eq!(other_origin.status(), 403);
    let put = client
        .put(&url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header(MCP_TARGET_HEADER, &target)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 405);
    let no_target = client
        .post(&url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(no_target.status(), 400);
    let bad_target = post(gw, &origin, "file:///etc/passwd")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_target.status(), 400);
    let too_big = client
        .post(&url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header(MCP_TARGET_HEADER, &target)
        .body(vec![
            b'x';
            agent_host_native::serve::mcp_gateway::MAX_MCP_BODY_BYTES
                + 1
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(too_big.status(), 413);
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the server"
    );

    // A preflight names the MCP headers and exposes the session id.
    let resp = client
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", &origin)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let allowed = resp.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap();
    assert!(allowed.contains("mcp-session-id") && allowed.contains(MCP_TARGET_HEADER));
    let methods = resp.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap();
    assert!(methods.contains("GET") && methods.contains("DELETE"));
}
