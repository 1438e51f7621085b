//! S13.5 at the leaf: a request carrying credentials, sent through
//! `agent_http::send` on the strict client, to a loopback endpoint that
//! redirects (301, 302, 303, 307, 308) to a second loopback origin: the
//! answer is `SendError::Redirected` and nothing — no header, no body —
//! reaches the second origin. The control shows the harness sees a leak:
//! reqwest's default client carries `x-api-key` across.
#![cfg(not(target_arch = "wasm32"))]

use agent_http::{ClientOptions, SendError, send, strict_client};
use agent_test_support::redirect::{REDIRECT_STATUSES, RedirectPair};

const SECRET: &str = "sk-secret-must-stay-home";

fn credentialed(client: &reqwest::Client, url: &str) -> reqwest::Request {
    client
        .post(url)
        .header("authorization", format!("Bearer {SECRET}"))
        .header("x-api-key", SECRET)
        .header("x-goog-api-key", SECRET)
        .json(&serde_json::json!({ "prompt": format!("the prompt {SECRET}") }))
        .build()
        .unwrap()
}

#[tokio::test]
async fn s13_5_no_redirect_is_followed_and_nothing_reaches_the_other_origin() {
    let client = strict_client(&ClientOptions::default()).unwrap();
    for status in REDIRECT_STATUSES {
        let pair = RedirectPair::start(status).await;
        let url = format!("{}/v1/messages", pair.endpoint.origin());
        let got = send(&client, credentialed(&client, &url)).await;
        assert_eq!(
            got.as_ref().map(|r| r.status().as_u16()).err(),
            Some(&SendError::Redirected {
                status: Some(status)
            }),
            "status {status}"
        );
        pair.assert_nothing_elsewhere(status, &[SECRET]);
        // The endpoint itself got the request (the credential is for it).
        let asked = pair.endpoint.requests();
        assert_eq!(asked[0].header("x-api-key"), Some(SECRET));
    }
}

#[tokio::test]
async fn the_harness_sees_a_leak_from_a_redirect_following_client() {
    // reqwest's default policy strips only Authorization and Cookie.
    let client = reqwest::Client::new();
    let pair = RedirectPair::start(307).await;
    let url = format!("{}/v1/messages", pair.endpoint.origin());
    let answer = client.execute(credentialed(&client, &url)).await.unwrap();
    assert_eq!(answer.status().as_u16(), 200, "the hop was followed");
    let reached = pair.elsewhere.requests();
    assert_eq!(reached.len(), 1);
    assert_eq!(reached[0].header("x-api-key"), Some(SECRET));
    assert!(String::from_utf8_lossy(&reached[0].body).contains(SECRET));
}

#[tokio::test]
async fn a_non_redirect_answer_is_delivered_whole() {
    use agent_test_support::redirect::{RecordingServer, http_answer};
    let server =
        RecordingServer::start(|_| http_answer(404, &[("x-kind", "missing")], b"nope")).await;
    let client = strict_client(&ClientOptions::default()).unwrap();
    let url = format!("{}/x", server.origin());
    let resp = send(&client, credentialed(&client, &url)).await.unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert_eq!(resp.headers().get("x-kind").unwrap(), "missing");
    assert_eq!(resp.bytes_limited(4).await.unwrap(), Ok(b"nope".to_vec()));
}

#[tokio::test]
async fn a_body_is_refused_past_its_limit_at_below_and_above() {
    use agent_test_support::redirect::{RecordingServer, http_answer};
    let server = RecordingServer::start(|_| http_answer(200, &[], b"12345")).await;
    let client = strict_client(&ClientOptions::default()).unwrap();
    let url = format!("{}/x", server.origin());
    for (limit, whole) in [(4, false), (5, true), (6, true)] {
        let resp = send(&client, client.get(&url).build().unwrap())
            .await
            .unwrap();
        let got = resp.bytes_limited(limit).await.unwrap();
        assert_eq!(got.is_ok(), whole, "limit {limit}");
    }
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error_never_sent() {
    // A port just closed: nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = strict_client(&ClientOptions::default()).unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let err = send(&client, client.get(&url).build().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::Connect { .. }), "{err:?}");
    assert!(err.never_sent());
    assert!(
        !err.to_string().contains(&port.to_string()),
        "no URL in the detail: {err}"
    );
}
