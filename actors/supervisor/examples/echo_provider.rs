//! A model provider of your own: the book's "Adding a provider" chapter
//! shows this file, and `cargo test -p agent-supervisor` builds it.
//!
//! `EchoProvider` answers every request with the person's last message,
//! streamed in two text deltas, then usage and a finish reason: the events
//! every provider turns its wire format into. `main` drives it the way the
//! supervisor does, through `collect_response`.
//!
//! ```sh
//! cargo run -p agent-supervisor --example echo_provider
//! ```

use agent_supervisor::provider::{
    FinishReason, ModelEvent, ModelProvider, ModelRequest, ModelStream, ModelUsage, ProviderError,
    collect_response,
};
use agent_supervisor::transcript::Message;

/// Repeats the last user message.
struct EchoProvider;

// The trait's futures are `Send` natively and not on single-threaded wasm32.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ModelProvider for EchoProvider {
    fn name(&self) -> &str {
        "echo"
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ProviderError> {
        let last = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User { content } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let (head, tail) = last.split_at(last.len() / 2);
        let events = vec![
            Ok(ModelEvent::TextDelta(head.to_owned())),
            Ok(ModelEvent::TextDelta(tail.to_owned())),
            Ok(ModelEvent::Usage(ModelUsage {
                input_tokens: 1,
                output_tokens: 1,
                ..ModelUsage::default()
            })),
            Ok(ModelEvent::Finish(FinishReason::Stop)),
        ];
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

fn main() -> Result<(), ProviderError> {
    let request: ModelRequest = serde_json::from_value(serde_json::json!({
        "model": "echo-1",
        "messages": [{"role": "user", "content": "Hello, runtime."}],
        "tools": []
    }))
    .map_err(|e| ProviderError::Config(e.to_string()))?;
    let response = futures::executor::block_on(async {
        let stream = EchoProvider.stream(request).await?;
        collect_response(stream, |delta| print!("{delta}")).await
    })?;
    println!();
    assert_eq!(response.text, "Hello, runtime.");
    assert_eq!(response.finish, Some(FinishReason::Stop));
    Ok(())
}
