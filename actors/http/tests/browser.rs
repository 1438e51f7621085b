//! S13.5 in Chromium (wasm-bindgen-test): every request `agent_http::send`
//! makes goes through the page's `fetch` with `redirect: "manual"` — checked
//! on the `web_sys::Request` as built, for the header of each provider
//! format (`Authorization: Bearer`, `x-api-key`, `x-goog-api-key`) and a
//! plugin's own header — and a real exchange with the test runner's own
//! server arrives whole (status, headers, body). The redirect itself,
//! against a loopback server pair, is host-browser/e2e/tests/redirects.test.mjs.
#![cfg(target_arch = "wasm32")]

use futures::StreamExt;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

const KEY: &str = "key-that-must-not-leave";

fn origin() -> String {
    let location = js_sys::Reflect::get(&js_sys::global(), &"location".into()).unwrap();
    js_sys::Reflect::get(&location, &"origin".into())
        .unwrap()
        .as_string()
        .unwrap()
}

#[wasm_bindgen_test]
fn every_credentialed_request_is_built_with_redirect_manual() {
    let client = agent_http::strict_client(&agent_http::ClientOptions::default()).unwrap();
    for (header, value) in [
        ("authorization", format!("Bearer {KEY}")),
        ("x-api-key", KEY.to_owned()),
        ("x-goog-api-key", KEY.to_owned()),
        ("x-plugin-key", format!("Key {KEY}")),
    ] {
        let request = client
            .post("https://models.example/v1/messages")
            .header(header, value.as_str())
            .body(r#"{"prompt":"p"}"#)
            .build()
            .unwrap();
        let controller = web_sys::AbortController::new().unwrap();
        let built = agent_http::send::browser_request(&request, &controller).unwrap();
        assert_eq!(
            built.redirect(),
            web_sys::RequestRedirect::Manual,
            "{header}"
        );
        assert_eq!(built.method(), "POST");
        assert_eq!(built.headers().get(header).unwrap(), Some(value));
    }
}

#[wasm_bindgen_test]
async fn an_answer_from_a_real_server_arrives_whole() {
    let client = agent_http::strict_client(&agent_http::ClientOptions::default()).unwrap();
    let url = format!("{}/agent-http-no-such-file", origin());
    let request = client.get(&url).header("x-api-key", KEY).build().unwrap();
    let response = agent_http::send(&client, request).await.unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        chunk.unwrap();
    }
}

#[wasm_bindgen_test]
async fn an_unreachable_server_is_a_typed_error() {
    let client = agent_http::strict_client(&agent_http::ClientOptions::default()).unwrap();
    // Port 9 (discard) on loopback: nothing listens there.
    let request = client.get("http://127.0.0.1:9/").build().unwrap();
    let err = agent_http::send(&client, request).await.unwrap_err();
    assert!(
        matches!(err, agent_http::SendError::Transport { .. }),
        "{err:?}"
    );
}
