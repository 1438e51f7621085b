//! S8.2–S8.5 against servers on loopback that the tests start: every row of
//! the outcome table, the limits at, below and above SPEC's numbers (time on
//! the manual clock: the servers never answer and the test moves the clock),
//! readable text, charsets, redirects and credentials.
#![cfg(not(target_arch = "wasm32"))] // loopback servers need tokio and axum

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent_fetch::{
    CancelHandle, CancelToken, FallbackReason, FetchError, Limits, Page, ReaderConfig, ReaderUsed,
    ScriptedResolver, Stage, WebReader,
};
use agent_kernel::host::ManualClock;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use common::*;

const MIB2: usize = 2 * 1024 * 1024;

type Handler = Arc<dyn Fn() -> Response + Send + Sync>;

fn respond(status: u16, headers: &[(&str, &str)], body: impl Into<Body>) -> Response {
    let mut resp = Response::new(body.into());
    *resp.status_mut() = StatusCode::from_u16(status).unwrap();
    for (k, v) in headers {
        resp.headers_mut().append(
            header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    resp
}

/// A server answering `handler` on every path, counting hits; `None` hangs forever.
async fn scripted_server(handler: Option<Handler>) -> (SocketAddr, Hits) {
    let hits = Hits::default();
    let h = hits.clone();
    let app = Router::new().fallback(move |headers: HeaderMap| {
        let h = h.clone();
        let handler = handler.clone();
        async move {
            h.record(&headers);
            match handler {
                Some(f) => f(),
                None => std::future::pending::<Response>().await,
            }
        }
    });
    (serve(app).await, hits)
}

fn jina_json(code: i64, title: &str, url: &str, content: &str) -> String {
    serde_json::json!({
        "code": code, "status": code * 100,
        "data": {"title": title, "url": url, "content": content}
    })
    .to_string()
}

struct Fixture {
    clock: ManualClock,
    reader: WebReader,
    url: String,
    site: Hits,
    jina: Option<Hits>,
}

/// The target `site.example:<port>` (scripted to the site server on
/// 127.0.0.1) and, when `jina` is given, a Jina-compatible reader.
async fn fixture(site: Option<Handler>, jina: Option<Option<Handler>>) -> Fixture {
    fixture_with(site, jina, Limits::spec()).await
}

async fn fixture_with(
    site: Option<Handler>,
    jina: Option<Option<Handler>>,
    limits: Limits,
) -> Fixture {
    let (site_addr, site_hits) = scripted_server(site).await;
    let (jina_addr, jina_hits) = match jina {
        Some(h) => {
            let (a, hits) = scripted_server(h).await;
            (Some(a), Some(hits))
        }
        None => (None, None),
    };
    let resolver = ScriptedResolver::new().answer("site.example", [LOCALHOST]);
    let clock = ManualClock::new(1_000);
    let reader = reader_with(
        test_policy(resolver, &[site_addr]),
        jina_addr,
        &clock,
        limits,
    );
    Fixture {
        clock,
        reader,
        url: format!("http://site.example:{}/page", site_addr.port()),
        site: site_hits,
        jina: jina_hits,
    }
}

impl Fixture {
    async fn read(&self) -> Result<Page, agent_fetch::FlowFailure> {
        self.reader.read(&self.url, CancelToken::never()).await
    }
    fn spawn(
        &self,
        cancel: CancelToken,
    ) -> tokio::task::JoinHandle<Result<Page, agent_fetch::FlowFailure>> {
        let reader = self.reader.clone();
        let url = self.url.clone();
        tokio::spawn(async move { reader.read(&url, cancel).await })
    }
    fn jina_hits(&self) -> usize {
        self.jina.as_ref().map(Hits::get).unwrap_or(0)
    }
}

fn text(body: &str) -> Option<Handler> {
    let body = body.to_owned();
    Some(Arc::new(move || {
        respond(200, &[("content-type", "text/plain")], body.clone())
    }))
}

fn status(
    code: u16,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
) -> Option<Handler> {
    Some(Arc::new(move || respond(code, headers, body)))
}

async fn still_running<T>(task: &tokio::task::JoinHandle<T>) -> bool {
    tokio::time::sleep(Duration::from_millis(50)).await;
    !task.is_finished()
}

// ---- S8.2 limits ----

#[test]
fn s8_2_defaults_equal_spec() {
    let l = Limits::spec();
    assert_eq!(l.request_timeout, Duration::from_secs(15));
    assert_eq!(l.total_timeout, Duration::from_secs(30));
    assert_eq!(l.max_body_bytes, 2 * 1024 * 1024);
    assert_eq!(l.max_text_chars, 40_000);
    assert_eq!(l.max_redirects, 5);
    assert_eq!(Limits::default(), l);
}

#[tokio::test]
async fn s8_2_direct_deadline_at_below_and_above_15s() {
    let f = fixture(None, None).await;
    let task = f.spawn(CancelToken::never());
    wait_sleepers(&f.clock, 2).await; // total + direct stage
    wait_count(&f.site.count, 1).await;
    f.clock.advance(Duration::from_millis(14_999));
    assert!(still_running(&task).await, "finished before 15 s");
    f.clock.advance(Duration::from_millis(1));
    let failure = task.await.unwrap().unwrap_err();
    assert_eq!(failure.stage, Stage::Direct);
    assert_eq!(failure.reason, FetchError::Timeout { ms: 15_000 });
}

#[tokio::test]
async fn s8_2_body_limit_at_below_and_above_2mib() {
    for (size, truncated) in [(MIB2 - 1, false), (MIB2, false), (MIB2 + 1, true)] {
        let f = fixture(text(&"a".repeat(size)), None).await;
        let page = f.read().await.unwrap();
        assert_eq!(page.body_truncated, truncated, "size {size}");
        assert_eq!(page.body_bytes as usize, size.min(MIB2), "size {size}");
    }
}

#[tokio::test]
async fn s8_2_endless_body_is_streamed_and_truncated() {
    let endless: Handler = Arc::new(|| {
        let chunk = bytes::Bytes::from(vec![b'x'; 64 * 1024]);
        let stream = futures::stream::repeat(Ok::<_, Infallible>(chunk));
        respond(
            200,
            &[("content-type", "text/plain")],
            Body::from_stream(stream),
        )
    });
    let f = fixture(Some(endless), None).await;
    let page = f.read().await.unwrap();
    assert!(page.body_truncated);
    assert_eq!(page.body_bytes as usize, MIB2);
    assert!(page.text_truncated);
    assert_eq!(page.text.len(), 40_000);
}

#[tokio::test]
async fn s8_2_text_limit_at_below_and_above_40000_chars() {
    for (chars, truncated) in [(39_999, false), (40_000, false), (40_001, true)] {
        // Two-byte characters: the limit counts characters, not bytes.
        let f = fixture(text(&"é".repeat(chars)), None).await;
        let page = f.read().await.unwrap();
        assert_eq!(page.text_truncated, truncated, "{chars} chars");
        assert_eq!(page.text.chars().count(), chars.min(40_000));
        assert!(!page.body_truncated);
    }
}

fn article(paragraphs: usize) -> String {
    let mut html = String::from(
        "<!doctype html><html><head><title>Long Read</title><script>var SECRET_SCRIPT = 1;</script></head><body>\
         <nav><a href='/'>Home</a> <a href='/news'>News</a></nav><!-- COMMENT_MARKER --><article><h1>Long Read</h1>",
    );
    for i in 0..paragraphs {
        html.push_str(&format!(
            "<p>Paragraph {i} of the article explains, at some length and with commas, how public web reads are bounded.</p>"
        ));
    }
    html.push_str("</article><footer>Copyright FOOTER_MARKER</footer></body></html>");
    html
}

#[tokio::test]
async fn s8_2_long_page_is_cut_at_40000_chars_and_reported() {
    let html = article(600);
    let f = fixture(
        Some(Arc::new(move || {
            respond(200, &[("content-type", "text/html")], html.clone())
        })),
        None,
    )
    .await;
    let page = f.read().await.unwrap();
    assert!(page.text_truncated);
    assert_eq!(page.text.chars().count(), 40_000);
    assert!(!page.body_truncated);
}

#[tokio::test]
async fn s8_5_html_becomes_readable_text_without_scripts() {
    let html = article(12);
    let f = fixture(
        Some(Arc::new(move || {
            respond(
                200,
                &[("content-type", "text/html; charset=utf-8")],
                html.clone(),
            )
        })),
        None,
    )
    .await;
    let page = f.read().await.unwrap();
    assert_eq!(page.title.as_deref(), Some("Long Read"));
    assert!(
        page.text.contains("Paragraph 3 of the article"),
        "{}",
        page.text
    );
    for absent in ["SECRET_SCRIPT", "COMMENT_MARKER"] {
        assert!(
            !page.text.contains(absent),
            "{absent} leaked into {}",
            page.text
        );
    }
    assert_eq!(page.content_type, "text/html");
    assert_eq!(page.reader, ReaderUsed::Direct);
    assert!(!page.text_truncated && !page.body_truncated);
}

#[tokio::test]
async fn s8_2_charsets_are_decoded() {
    let mut body = b"<html><head><title>Caf\xe9</title></head><body><article><p>".to_vec();
    for _ in 0..20 {
        body.extend_from_slice(b"Le caf\xe9 est tr\xe8s bon, et la cr\xe8me br\xfbl\xe9e aussi. ");
    }
    body.extend_from_slice(b"</p></article></body></html>");
    let f = fixture(
        Some(Arc::new(move || {
            respond(
                200,
                &[("content-type", "text/html; charset=windows-1252")],
                body.clone(),
            )
        })),
        None,
    )
    .await;
    let page = f.read().await.unwrap();
    assert!(page.text.contains("café est très bon"), "{}", page.text);
    assert!(page.text.contains("crème brûlée"));
}

#[tokio::test]
async fn s8_2_text_markdown_and_json_pass_through() {
    for (ct, body) in [
        ("text/plain", "plain *text* <b>kept</b>"),
        ("text/markdown", "# Title\n\n- item"),
        ("application/json", r#"{"a": [1, 2, {"b": "<p>x</p>"}]}"#),
    ] {
        let f = fixture(
            Some(Arc::new(move || {
                respond(200, &[("content-type", ct)], body)
            })),
            None,
        )
        .await;
        let page = f.read().await.unwrap();
        assert_eq!(page.text, body, "{ct}");
        assert_eq!(page.content_type, ct);
    }
}

#[tokio::test]
async fn s8_2_binary_types_are_a_typed_error() {
    for ct in ["image/png", "application/pdf", "application/octet-stream"] {
        let f = fixture(
            Some(Arc::new(move || {
                respond(200, &[("content-type", ct)], "\u{0}\u{1}binary")
            })),
            None,
        )
        .await;
        let failure = f.read().await.unwrap_err();
        assert_eq!(failure.stage, Stage::Direct);
        assert!(
            matches!(failure.reason, FetchError::Unsupported { .. }),
            "{ct}: {:?}",
            failure.reason
        );
    }
}

// ---- S8.1 redirects ----

async fn chain_server() -> SocketAddr {
    let app = Router::new().route(
        "/r/{n}",
        get(
            |axum::extract::Path(n): axum::extract::Path<u32>| async move {
                if n == 0 {
                    ([(header::CONTENT_TYPE, "text/plain")], "end of chain").into_response()
                } else {
                    (
                        StatusCode::FOUND,
                        [(header::LOCATION, format!("/r/{}", n - 1))],
                    )
                        .into_response()
                }
            },
        ),
    );
    serve(app).await
}

#[tokio::test]
async fn s8_1_redirect_limit_at_below_and_above_5_hops() {
    let server = chain_server().await;
    let clock = ManualClock::new(0);
    let r = reader(
        test_policy(ScriptedResolver::new(), &[server]),
        None,
        &clock,
    );
    for hops in [4usize, 5] {
        let page = r
            .read(&format!("http://{server}/r/{hops}"), CancelToken::never())
            .await
            .unwrap();
        assert_eq!(page.redirects.len(), hops);
        assert_eq!(
            page.final_url,
            format!("http://{server}/r/0"),
            "the final URL is reported"
        );
        assert_eq!(page.text, "end of chain");
    }
    let failure = r
        .read(&format!("http://{server}/r/6"), CancelToken::never())
        .await
        .unwrap_err();
    assert_eq!(failure.reason, FetchError::TooManyRedirects { max: 5 });
}

#[tokio::test]
async fn s8_1_credentials_and_cookies_are_dropped_across_origins() {
    let (b_addr, b_hits) = scripted_server(text("on b")).await;
    let app = Router::new()
        .route(
            "/cross",
            get(move || async move {
                (
                    StatusCode::FOUND,
                    [
                        (header::LOCATION, format!("http://{b_addr}/landing")),
                        (header::SET_COOKIE, "sid=abc".into()),
                    ],
                )
            }),
        )
        .route(
            "/same",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/echo")]) }),
        )
        .route(
            "/echo",
            get(|headers: HeaderMap| async move {
                let auth = headers
                    .get(header::AUTHORIZATION)
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                ([(header::CONTENT_TYPE, "text/plain")], auth)
            }),
        );
    let a_addr = serve(app).await;
    let clock = ManualClock::new(0);
    let r = reader(
        test_policy(ScriptedResolver::new(), &[a_addr, b_addr]),
        None,
        &clock,
    );
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer secret"),
    );
    headers.insert(header::COOKIE, HeaderValue::from_static("session=1"));
    headers.insert(
        header::PROXY_AUTHORIZATION,
        HeaderValue::from_static("Basic eA=="),
    );

    let raw = r
        .direct()
        .fetch(&format!("http://{a_addr}/cross"), headers.clone())
        .await
        .unwrap();
    assert_eq!(raw.final_url, format!("http://{b_addr}/landing"));
    let seen = b_hits.last_headers();
    for h in [
        header::AUTHORIZATION,
        header::COOKIE,
        header::PROXY_AUTHORIZATION,
    ] {
        assert!(!seen.contains_key(&h), "{h} crossed origins");
    }
    // Same origin: the caller's Authorization stays.
    let raw = r
        .direct()
        .fetch(&format!("http://{a_addr}/same"), headers)
        .await
        .unwrap();
    assert_eq!(raw.body, b"Bearer secret");
}

// ---- S8.3–S8.5: the outcome table ----

#[tokio::test]
async fn s8_3_jina_success_is_used_without_a_direct_read() {
    let jina: Handler = Arc::new(|| {
        respond(
            200,
            &[("content-type", "application/json")],
            jina_json(
                200,
                "Example",
                "https://site.example/final",
                "# Example\n\nBody text.",
            ),
        )
    });
    let f = fixture(text("direct"), Some(Some(jina))).await;
    let page = f.read().await.unwrap();
    assert_eq!(page.reader, ReaderUsed::Jina);
    assert_eq!(page.final_url, "https://site.example/final");
    assert_eq!(page.title.as_deref(), Some("Example"));
    assert_eq!(page.text, "# Example\n\nBody text.");
    assert_eq!(f.site.get(), 0);
    let seen = f.jina.as_ref().unwrap().last_headers();
    assert_eq!(seen.get(header::ACCEPT).unwrap(), "application/json");
}

#[tokio::test]
async fn s8_3_jina_network_failure_permits_one_direct_read() {
    let dead = closed_port().await;
    let (site_addr, site_hits) = scripted_server(text("direct body")).await;
    let clock = ManualClock::new(0);
    let resolver = ScriptedResolver::new().answer("site.example", [LOCALHOST]);
    let r = reader(test_policy(resolver, &[site_addr]), Some(dead), &clock);
    let page = r
        .read(
            &format!("http://site.example:{}/", site_addr.port()),
            CancelToken::never(),
        )
        .await
        .unwrap();
    assert_eq!(page.reader, ReaderUsed::Direct);
    assert!(
        matches!(page.fallback, Some(FallbackReason::JinaNetwork { .. })),
        "{:?}",
        page.fallback
    );
    assert_eq!(site_hits.get(), 1);
}

#[tokio::test]
async fn s8_3_jina_stage_timeout_at_15s_then_direct() {
    let f = fixture(text("direct body"), Some(None)).await;
    let task = f.spawn(CancelToken::never());
    wait_sleepers(&f.clock, 2).await; // total + Jina stage
    wait_count(&f.jina.as_ref().unwrap().count, 1).await;
    f.clock.advance(Duration::from_millis(14_999));
    assert!(still_running(&task).await);
    assert_eq!(f.site.get(), 0, "no direct read before the Jina stage ends");
    f.clock.advance(Duration::from_millis(1));
    let page = task.await.unwrap().unwrap();
    assert_eq!(page.reader, ReaderUsed::Direct);
    assert_eq!(
        page.fallback,
        Some(FallbackReason::JinaTimeout { ms: 15_000 })
    );
    assert_eq!(f.site.get(), 1);
}

#[tokio::test]
async fn s8_3_jina_5xx_permits_one_direct_read() {
    for code in [500u16, 502, 503] {
        let f = fixture(
            text("direct body"),
            Some(Some(Arc::new(move || respond(code, &[], "oops")))),
        )
        .await;
        let page = f.read().await.unwrap();
        assert_eq!(
            page.fallback,
            Some(FallbackReason::JinaServerError { status: code })
        );
        assert_eq!(page.text, "direct body");
        assert_eq!((f.jina_hits(), f.site.get()), (1, 1));
    }
}

#[tokio::test]
async fn s8_3_jina_service_challenge_permits_one_direct_read() {
    let challenge = status(
        403,
        &[("cf-mitigated", "challenge"), ("content-type", "text/html")],
        "<html><title>Just a moment...</title></html>",
    );
    let f = fixture(text("direct body"), Some(challenge)).await;
    let page = f.read().await.unwrap();
    assert!(
        matches!(page.fallback, Some(FallbackReason::JinaChallenge { .. })),
        "{:?}",
        page.fallback
    );
    assert_eq!(f.site.get(), 1);
    // Also an HTML challenge body without the header, with HTTP 200.
    let body = status(
        200,
        &[("content-type", "text/html")],
        "<div id=cf-browser-verification></div>",
    );
    let f = fixture(text("direct body"), Some(body)).await;
    let page = f.read().await.unwrap();
    assert!(matches!(
        page.fallback,
        Some(FallbackReason::JinaChallenge { .. })
    ));
}

#[tokio::test]
async fn s8_5_jina_application_error_refused_without_direct_read() {
    for http in [200u16, 422] {
        let body = r#"{"code":422,"status":42206,"name":"AssertionFailureError","message":"Failed to goto"}"#;
        let f = fixture(
            text("direct"),
            Some(Some(Arc::new(move || {
                respond(http, &[("content-type", "application/json")], body)
            }))),
        )
        .await;
        let failure = f.read().await.unwrap_err();
        assert_eq!(failure.stage, Stage::Jina);
        assert!(
            matches!(
                failure.reason,
                FetchError::JinaApplication { code: 422, .. }
            ),
            "{:?}",
            failure.reason
        );
        assert_eq!(
            f.site.get(),
            0,
            "an application error permits no direct read"
        );
    }
}

#[tokio::test]
async fn s8_5_unreadable_jina_answer_permits_no_direct_read() {
    let f = fixture(
        text("direct"),
        Some(status(200, &[("content-type", "text/plain")], "hello")),
    )
    .await;
    let failure = f.read().await.unwrap_err();
    assert!(matches!(
        failure.reason,
        FetchError::JinaMalformed { status: 200, .. }
    ));
    assert_eq!(f.site.get(), 0);
}

#[tokio::test]
async fn s8_5_target_challenge_page_refused_even_with_200() {
    // Direct: body markers, and the header alone.
    let f = fixture(
        status(
            200,
            &[("content-type", "text/html")],
            "<html><head><title>Just a moment...</title></head><body>cf_chl_opt</body></html>",
        ),
        None,
    )
    .await;
    let failure = f.read().await.unwrap_err();
    assert!(
        matches!(failure.reason, FetchError::Challenge { .. }),
        "{:?}",
        failure.reason
    );
    let f = fixture(
        status(
            200,
            &[
                ("content-type", "text/plain"),
                ("cf-mitigated", "challenge"),
            ],
            "fine words",
        ),
        None,
    )
    .await;
    assert!(matches!(
        f.read().await.unwrap_err().reason,
        FetchError::Challenge { .. }
    ));
    // A 403 challenge is a challenge, not a refusal.
    let f = fixture(status(403, &[("cf-mitigated", "challenge")], ""), None).await;
    assert!(matches!(
        f.read().await.unwrap_err().reason,
        FetchError::Challenge { .. }
    ));
    // Through Jina: the target's challenge page as content, HTTP 200.
    let jina: Handler = Arc::new(|| {
        respond(
            200,
            &[],
            jina_json(
                200,
                "Just a moment...",
                "https://site.example/",
                "Verify you are human by completing the action below.",
            ),
        )
    });
    let f = fixture(text("direct"), Some(Some(jina))).await;
    let failure = f.read().await.unwrap_err();
    assert_eq!(failure.stage, Stage::Jina);
    assert!(matches!(failure.reason, FetchError::Challenge { .. }));
    assert_eq!(f.site.get(), 0);
}

#[tokio::test]
async fn s8_4_authentication_required_stops() {
    let cases: Vec<(Option<Handler>, u16, Option<&str>)> = vec![
        (
            status(401, &[("www-authenticate", "Basic realm=\"x\"")], ""),
            401,
            Some("Basic"),
        ),
        (
            status(407, &[("proxy-authenticate", "Negotiate")], ""),
            407,
            Some("Negotiate"),
        ),
        (
            status(403, &[("www-authenticate", "Bearer realm=\"api\"")], ""),
            403,
            Some("Bearer"),
        ),
    ];
    for (handler, code, scheme) in cases {
        let f = fixture(handler, None).await;
        let failure = f.read().await.unwrap_err();
        assert_eq!(
            failure.reason,
            FetchError::AuthRequired {
                status: code,
                scheme: scheme.map(str::to_owned)
            }
        );
    }
    // Through Jina: the target answered 401; no direct read follows.
    let jina: Handler = Arc::new(|| {
        let body = serde_json::json!({"code": 200, "status": 20000, "data": {"title": "", "url": "https://site.example/", "content": "", "warning": "Target URL returned error 401: Unauthorized"}});
        respond(200, &[], body.to_string())
    });
    let f = fixture(text("direct"), Some(Some(jina))).await;
    let failure = f.read().await.unwrap_err();
    assert_eq!(
        failure.reason,
        FetchError::AuthRequired {
            status: 401,
            scheme: None
        }
    );
    assert_eq!(f.site.get(), 0);
}

#[tokio::test]
async fn s8_4_refusal_by_target_stops() {
    for code in [403u16, 451] {
        let f = fixture(status(code, &[], "no"), None).await;
        assert_eq!(
            f.read().await.unwrap_err().reason,
            FetchError::RefusedByTarget { status: code }
        );
    }
    let jina: Handler = Arc::new(|| {
        let body = serde_json::json!({"code": 200, "data": {"content": "", "warning": "Target URL returned error 451: Unavailable For Legal Reasons"}});
        respond(200, &[], body.to_string())
    });
    let f = fixture(text("direct"), Some(Some(jina))).await;
    assert_eq!(
        f.read().await.unwrap_err().reason,
        FetchError::RefusedByTarget { status: 451 }
    );
    assert_eq!(f.site.get(), 0);
}

#[tokio::test]
async fn s8_4_429_is_a_refusal_after_its_retry_budget() {
    // Always 429: one retry (the budget), then a refusal.
    let f = fixture(status(429, &[("retry-after", "0")], ""), None).await;
    assert_eq!(
        f.read().await.unwrap_err().reason,
        FetchError::RefusedByTarget { status: 429 }
    );
    assert_eq!(f.site.get(), 2);
    // A Retry-After longer than the budget allows: refused at once.
    let f = fixture(status(429, &[("retry-after", "60")], ""), None).await;
    assert_eq!(
        f.read().await.unwrap_err().reason,
        FetchError::RefusedByTarget { status: 429 }
    );
    assert_eq!(f.site.get(), 1);
    // 429 then 200: the retry waits Retry-After on the host clock, then succeeds.
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handler: Handler = Arc::new(move || {
        if n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            respond(429, &[("retry-after", "1")], "")
        } else {
            respond(200, &[("content-type", "text/plain")], "second time")
        }
    });
    let f = fixture(Some(handler), None).await;
    let task = f.spawn(CancelToken::never());
    wait_count(&f.site.count, 1).await;
    wait_sleepers(&f.clock, 3).await; // total + stage + Retry-After
    assert!(still_running(&task).await);
    f.clock.advance(Duration::from_secs(1));
    assert_eq!(task.await.unwrap().unwrap().text, "second time");
}

#[tokio::test]
async fn s8_4_user_cancellation_stops() {
    let f = fixture(text("direct"), Some(None)).await;
    let handle = CancelHandle::new();
    let task = f.spawn(handle.token());
    wait_count(&f.jina.as_ref().unwrap().count, 1).await;
    handle.cancel();
    let failure = task.await.unwrap().unwrap_err();
    assert_eq!(
        (failure.stage, failure.reason),
        (Stage::Flow, FetchError::Cancelled)
    );
    assert_eq!(f.site.get(), 0);
}

#[tokio::test]
async fn s8_4_total_deadline_of_30s_stops() {
    // Jina hangs for its 15 s stage; the direct read hangs for the rest.
    let f = fixture(None, Some(None)).await;
    let task = f.spawn(CancelToken::never());
    wait_sleepers(&f.clock, 2).await;
    f.clock.advance(Duration::from_secs(15));
    wait_count(&f.site.count, 1).await;
    wait_sleepers(&f.clock, 2).await; // total + direct stage
    f.clock.advance(Duration::from_millis(14_999));
    assert!(still_running(&task).await);
    f.clock.advance(Duration::from_millis(1));
    let failure = task.await.unwrap().unwrap_err();
    assert_eq!(
        (failure.stage, failure.reason),
        (Stage::Flow, FetchError::TotalDeadline { ms: 30_000 })
    );
}

#[tokio::test]
async fn s8_3_direct_read_gets_the_time_left() {
    // With a 20 s total, a Jina stage that used 15 s leaves the direct read 5 s.
    let limits = Limits {
        total_timeout: Duration::from_secs(20),
        ..Limits::spec()
    };
    let f = fixture_with(None, Some(None), limits).await;
    let task = f.spawn(CancelToken::never());
    wait_sleepers(&f.clock, 2).await;
    f.clock.advance(Duration::from_secs(15));
    wait_count(&f.site.count, 1).await;
    f.clock.advance(Duration::from_millis(4_999));
    assert!(still_running(&task).await);
    f.clock.advance(Duration::from_millis(1));
    let failure = task.await.unwrap().unwrap_err();
    assert_eq!(failure.reason, FetchError::TotalDeadline { ms: 20_000 });
}

#[tokio::test]
async fn s8_3_direct_failure_ends_the_flow_without_a_third_attempt() {
    let f = fixture(status(404, &[], "missing"), Some(status(503, &[], "down"))).await;
    let failure = f.read().await.unwrap_err();
    assert_eq!(failure.stage, Stage::Direct);
    assert_eq!(failure.reason, FetchError::HttpStatus { status: 404 });
    assert_eq!(
        failure.fallback,
        Some(FallbackReason::JinaServerError { status: 503 })
    );
    assert_eq!((f.jina_hits(), f.site.get()), (1, 1));
    // A hanging direct read after a fast Jina 5xx: its own 15 s deadline.
    let f = fixture(None, Some(status(502, &[], ""))).await;
    let task = f.spawn(CancelToken::never());
    wait_count(&f.site.count, 1).await;
    wait_sleepers(&f.clock, 3).await; // total + Jina stage (done, not yet due) + direct stage
    f.clock.advance(Duration::from_secs(15));
    let failure = task.await.unwrap().unwrap_err();
    assert_eq!(
        (failure.stage, failure.reason),
        (Stage::Direct, FetchError::Timeout { ms: 15_000 })
    );
    assert_eq!(f.jina_hits(), 1);
}

#[tokio::test]
async fn s8_3_direct_read_carries_no_jina_credentials() {
    let (site_addr, site_hits) = scripted_server(text("direct")).await;
    let (jina_addr, jina_hits) = scripted_server(status(503, &[], "")).await;
    let clock = ManualClock::new(0);
    let resolver = ScriptedResolver::new().answer("site.example", [LOCALHOST]);
    let config = ReaderConfig {
        jina_base: Some(format!("http://{jina_addr}/jina")),
        jina_key: Some("jina-secret".into()),
    };
    let r = WebReader::new(
        test_policy(resolver, &[site_addr]),
        config,
        Limits::spec(),
        Arc::new(clock),
    );
    r.read(
        &format!("http://site.example:{}/", site_addr.port()),
        CancelToken::never(),
    )
    .await
    .unwrap();
    assert_eq!(
        jina_hits.last_headers().get(header::AUTHORIZATION).unwrap(),
        "Bearer jina-secret"
    );
    assert!(
        site_hits
            .last_headers()
            .get(header::AUTHORIZATION)
            .is_none()
    );
}

#[tokio::test]
async fn s8_1_target_is_checked_before_jina_is_asked() {
    let f = fixture(text("direct"), Some(text("jina"))).await;
    let failure = f
        .reader
        .read("http://127.0.0.1:9/", CancelToken::never())
        .await
        .unwrap_err();
    assert_eq!(failure.stage, Stage::Policy);
    assert!(matches!(failure.reason, FetchError::Policy { .. }));
    assert_eq!(f.jina_hits(), 0);
}
