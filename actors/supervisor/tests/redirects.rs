//! S13.5 for every provider format: the configured model endpoint (a real
//! loopback server) answers 301, 302, 303, 307 or 308 pointing at a second
//! loopback origin that records every request. The redirect is not
//! followed: no request — so no `Authorization`, `x-api-key` or
//! `x-goog-api-key` and no prompt — reaches the other origin, the round
//! fails with `ProviderError::Redirected` at the first attempt (no retry),
//! and a run against such an endpoint ends `failed` saying so.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::Arc;
use std::time::Duration;

use agent_kernel::host::Clock;
use agent_kernel::ids::{OwnerId, SessionId};
use agent_kernel::run::{RunStatus, StopReason};
use agent_supervisor::provider::{ModelProvider, ModelRequest, collect_response};
use agent_supervisor::sim::tools::{SimToolsConfig, ToolLog, spawn_sim_tools};
use agent_supervisor::transcript::Message;
use agent_supervisor::{
    AnthropicConfig, AnthropicProvider, GeminiConfig, GeminiProvider, OpenAiConfig, OpenAiProvider,
    ProviderError, RunConfig, Runtime, RuntimeOptions,
};
use agent_test_support::redirect::{REDIRECT_STATUSES, RedirectPair};

const KEY: &str = "key-that-must-not-leave";
const PROMPT: &str = "a prompt that must not leave";

/// Each format, the header its key rides in, and its provider at `origin`.
fn providers(
    origin: &str,
    clock: Arc<dyn Clock>,
) -> Vec<(&'static str, &'static str, Arc<dyn ModelProvider>)> {
    let mut openai = OpenAiConfig::new(format!("{origin}/v1"));
    openai.api_key = Some(KEY.into());
    let mut anthropic = AnthropicConfig::new(format!("{origin}/v1"));
    anthropic.api_key = Some(KEY.into());
    let mut gemini = GeminiConfig::new(format!("{origin}/v1beta"));
    gemini.api_key = Some(KEY.into());
    vec![
        (
            "openai-compatible",
            "authorization",
            Arc::new(OpenAiProvider::new(openai, clock.clone()).unwrap()),
        ),
        (
            "anthropic",
            "x-api-key",
            Arc::new(AnthropicProvider::new(anthropic, clock.clone()).unwrap()),
        ),
        (
            "gemini",
            "x-goog-api-key",
            Arc::new(GeminiProvider::new(gemini, clock).unwrap()),
        ),
    ]
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        system: None,
        messages: vec![Message::User {
            content: PROMPT.into(),
        }]
        .into(),
        tools: Vec::new().into(),
        temperature: None,
        max_output_tokens: None,
        reasoning: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s13_5_no_key_header_and_no_prompt_follow_a_redirect_in_any_format() {
    for status in REDIRECT_STATUSES {
        let pair = RedirectPair::start(status).await;
        for (format, key_header, provider) in providers(
            &pair.endpoint.origin(),
            agent_test_support::recording_clock(),
        ) {
            let asked_before = pair.endpoint.requests().len();
            let got = match provider.stream(request()).await {
                Ok(stream) => collect_response(stream, |_| {}).await.map(|_| ()),
                Err(e) => Err(e),
            };
            match got {
                Err(ProviderError::Redirected { status: Some(s) }) => assert_eq!(s, status),
                other => panic!("{format} after {status}: {other:?}"),
            }
            let asked = pair.endpoint.requests();
            assert_eq!(
                asked.len(),
                asked_before + 1,
                "{format} after {status}: one attempt, a redirect is not retried"
            );
            // The key and the prompt went to the configured endpoint only.
            let last = &asked[asked_before];
            assert!(
                last.header(key_header).is_some_and(|v| v.contains(KEY)),
                "{format}: its key rides in {key_header}"
            );
            assert!(String::from_utf8_lossy(&last.body).contains(PROMPT));
            pair.assert_nothing_elsewhere(status, &[KEY, PROMPT]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_against_a_redirecting_endpoint_fails_saying_so() {
    let pair = RedirectPair::start(307).await;
    for (format, _, provider) in providers(&pair.endpoint.origin(), agent_test_support::clock()) {
        let host = agent_test_support::memory_host(agent_test_support::clock(), 1);
        let tools = spawn_sim_tools(
            host.executor.clone(),
            agent_test_support::clock(),
            ToolLog::default(),
            SimToolsConfig::default(),
        );
        let runtime = Runtime::new(
            host,
            OwnerId::new("proc").unwrap(),
            tools,
            provider,
            RuntimeOptions::default(),
        );
        let run = runtime
            .start(&SessionId::new("s").unwrap(), PROMPT, RunConfig::default())
            .await
            .unwrap();
        let record = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let record = runtime.wait_settled(&run).await.unwrap();
                if record.status != RunStatus::Running {
                    return record;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("settles");
        assert_eq!(record.status, RunStatus::Failed, "{format}: {record:?}");
        assert!(
            matches!(&record.stop_reason, Some(StopReason::RuntimeError { message, .. }) if message.contains("redirect") && message.contains("307")),
            "{format}: {:?}",
            record.stop_reason
        );
    }
    pair.assert_nothing_elsewhere(307, &[KEY, PROMPT]);
}
