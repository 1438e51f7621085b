//! The model providers' stream decoders (`agent-supervisor`'s
//! `provider::{anthropic, openai, gemini}::decode_body`): response bytes go
//! through the SSE decoder into each wire format's decoder, exactly as a
//! streamed answer does.
//!
//! Properties: no panic; the events are the same however the body is split
//! into chunks when the stream has no error (with an error, both readings
//! end in one, and the events before it in the whole reading are a prefix
//! of those in the chunked one: the SSE decoder drops the payloads a
//! failing chunk completed, and the first error in that chunk wins, see
//! docs/src/development/fuzzing.md); a stream ends with exactly one terminal item, `Finish` or an
//! error, and nothing follows it; every tool call has an id and a name; the
//! text, reasoning and arguments emitted are bounded by the body's size.
//!
//! Input: the first byte sets the chunk size of the split reading; the rest
//! is the response body.

use agent_supervisor::provider::{
    ModelEvent, ModelStream, ProviderError, anthropic, gemini, openai,
};
use futures::StreamExt;

type Decode = fn(agent_http::ByteStream) -> ModelStream;

fn events(decode: Decode, body: &[u8], chunk: usize) -> Vec<Result<ModelEvent, ProviderError>> {
    let chunks: Vec<Result<bytes::Bytes, agent_http::SendError>> = body
        .chunks(chunk.max(1))
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let stream = decode(Box::pin(futures::stream::iter(chunks)));
    futures::executor::block_on(stream.collect())
}

fn check_with(decode: Decode, data: &[u8]) {
    let Some((&knob, body)) = data.split_first() else {
        return;
    };
    let whole = events(decode, body, body.len());
    let split = events(decode, body, usize::from(knob % 32) + 1);
    match (whole.last(), split.last()) {
        (Some(Err(_)), Some(Err(_))) => {
            let ok = |items: &[Result<ModelEvent, ProviderError>]| items.len() - 1;
            assert!(
                ok(&whole) <= ok(&split) && whole[..ok(&whole)] == split[..ok(&whole)],
                "the chunking changed the events before the error:\n{whole:?}\n{split:?}"
            );
        }
        _ => assert_eq!(whole, split, "the chunking changed the events"),
    }

    let (last, before) = whole
        .split_last()
        .unwrap_or_else(|| panic!("a stream with no end"));
    assert!(
        matches!(last, Ok(ModelEvent::Finish(_)) | Err(_)),
        "the stream ended with {last:?}, neither Finish nor an error"
    );
    let mut emitted = 0usize;
    for item in before {
        match item {
            Ok(ModelEvent::Finish(_)) => panic!("an event after Finish"),
            Err(e) => panic!("an event after the error {e}"),
            Ok(ModelEvent::TextDelta(t) | ModelEvent::ReasoningDelta(t)) => emitted += t.len(),
            Ok(ModelEvent::ToolCall(call)) => {
                assert!(!call.id.is_empty() && !call.name.is_empty(), "{call:?}");
                emitted += call.arguments.len() + call.name.len() + call.id.len();
            }
            Ok(ModelEvent::Usage(_) | ModelEvent::Native(_)) => {}
        }
    }
    // Re-serialised JSON (a tool call's input) can be longer than its
    // source (`1E2` is written `100.0`), but only by a small factor.
    assert!(
        emitted <= 8 * body.len() + 1024,
        "{emitted} bytes emitted from a body of {}",
        body.len()
    );
}

pub fn check_anthropic(data: &[u8]) {
    check_with(anthropic::decode_body, data);
}

pub fn check_openai(data: &[u8]) {
    check_with(openai::decode_body, data);
}

pub fn check_gemini(data: &[u8]) {
    check_with(gemini::decode_body, data);
}
