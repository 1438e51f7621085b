//! What every streaming wire format shares once its bytes are SSE events:
//! the loop that turns a response body into [`ModelEvent`]s through a
//! format's [`WireDecoder`], and the [`Answer`] a decoder assembles (tool
//! calls by index from fragments split anywhere, usage, the finish reason),
//! emitted whole only when the answer is complete. A stream that ends
//! early is `Disconnected`, so nothing partial is ever used. A response
//! body longer than [`MAX_ANSWER_BYTES`] is refused and its reading stops,
//! so a server that never ends its answer cannot grow memory without bound.

use std::collections::{BTreeMap, VecDeque};

use futures::StreamExt;

use agent_kernel::MaybeSend;

use super::http::ByteStream;
use super::{FinishReason, ModelEvent, ModelStream, ModelUsage, ProviderError};
use crate::message::{AssistantToolCall, NativeTurn};
use agent_http::SseDecoder;

/// The most bytes of one response body read ([`event_stream`]).
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// The largest one SSE event's data may be (one streamed chunk of an
/// answer; `agent_http`'s decoder refuses a longer line or event).
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// What a decoder says after one data payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More events follow.
    More,
    /// The answer is complete; the stream ends (whatever bytes follow).
    Done,
}

/// One wire format's reading of SSE data payloads.
pub trait WireDecoder: MaybeSend + 'static {
    /// Read one data payload; text deltas go to `out` at once, everything
    /// else into the decoder's [`Answer`] until it is complete.
    fn on_data(
        &mut self,
        data: &str,
        out: &mut VecDeque<ModelEvent>,
    ) -> Result<Step, ProviderError>;

    /// The connection ended without [`Step::Done`]: finish the answer if
    /// the format allows it to end so, else `Err(Disconnected)`.
    fn on_end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError>;
}

/// A tool call being assembled from fragments.
#[derive(Debug, Default, Clone)]
pub struct PartialCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
    /// An opaque token the provider wants back with this call (Gemini's
    /// thought signature).
    pub signature: Option<String>,
}

/// One usage report of a stream: each field the provider sent (`None`
/// for one it left out or sent as `null`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UsageReport {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cached_input: Option<u64>,
    pub cache_write: Option<u64>,
    pub reasoning: Option<u64>,
}

impl UsageReport {
    /// The unsigned integer at `key` of `usage`, if any.
    pub fn field(usage: &serde_json::Value, pointer: &str) -> Option<u64> {
        usage.pointer(pointer).and_then(serde_json::Value::as_u64)
    }
}

/// The parts of an answer that are emitted only when it is complete.
#[derive(Debug, Default)]
pub struct Answer {
    pub calls: BTreeMap<u64, PartialCall>,
    pub usage: Option<ModelUsage>,
    pub finish: Option<FinishReason>,
    /// The turn as the format wants it sent back, if it does.
    pub native: Option<NativeTurn>,
}

impl Answer {
    /// The call at `index`, created empty on first use.
    pub fn call(&mut self, index: u64) -> &mut PartialCall {
        self.calls.entry(index).or_default()
    }

    /// Take a usage report: per field, the later value the provider sent
    /// wins (Anthropic's `message_delta` over its `message_start`, the last
    /// `usageMetadata` of a Gemini stream, OpenAI's final usage chunk).
    pub fn report_usage(&mut self, report: UsageReport) {
        let u = self.usage.get_or_insert_with(ModelUsage::default);
        let fields = [
            (report.input, &mut u.input_tokens),
            (report.output, &mut u.output_tokens),
            (report.cached_input, &mut u.cached_input_tokens),
            (report.cache_write, &mut u.cache_write_tokens),
            (report.reasoning, &mut u.reasoning_tokens),
        ];
        for (value, slot) in fields {
            if let Some(v) = value {
                *slot = v;
            }
        }
    }

    /// Emit the tool calls (in index order), the usage and the finish
    /// reason; without a finish reason the answer is incomplete.
    pub fn complete(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
        let Some(finish) = self.finish.take() else {
            return Err(ProviderError::Disconnected { events: 0 });
        };
        for (index, call) in std::mem::take(&mut self.calls) {
            if call.id.is_empty() || call.name.is_empty() {
                return Err(ProviderError::Malformed {
                    detail: format!("tool call {index} has no id or no function name"),
                });
            }
            out.push_back(ModelEvent::ToolCall(AssistantToolCall {
                id: call.id,
                name: call.name,
                arguments: call.arguments,
                signature: call.signature,
            }));
        }
        if let Some(usage) = self.usage.take() {
            out.push_back(ModelEvent::Usage(usage));
        }
        if let Some(native) = self.native.take() {
            out.push_back(ModelEvent::Native(native));
        }
        out.push_back(ModelEvent::Finish(finish));
        Ok(())
    }
}

/// Parse one data payload as JSON, or say it was malformed.
pub fn json_payload(data: &str) -> Result<serde_json::Value, ProviderError> {
    serde_json::from_str(data).map_err(|e| ProviderError::Malformed {
        detail: format!("a data event is not JSON ({e})"),
    })
}

struct Reading<D> {
    body: ByteStream,
    sse: SseDecoder,
    decoder: D,
    out: VecDeque<Result<ModelEvent, ProviderError>>,
    /// Data payloads read, for the `Disconnected` message.
    payloads: usize,
    /// Body bytes read so far, and the most allowed.
    read: usize,
    max_bytes: usize,
    closed: bool,
}

impl<D: WireDecoder> Reading<D> {
    fn emit(&mut self, result: Result<(), ProviderError>, events: VecDeque<ModelEvent>) {
        self.out.extend(events.into_iter().map(Ok));
        if let Err(e) = result {
            let e = match e {
                ProviderError::Disconnected { .. } => ProviderError::Disconnected {
                    events: self.payloads,
                },
                other => other,
            };
            self.out.push_back(Err(e));
            self.closed = true;
        }
    }

    fn on_bytes(&mut self, bytes: &[u8]) {
        self.read = self.read.saturating_add(bytes.len());
        if self.read > self.max_bytes {
            let e = ProviderError::Malformed {
                detail: format!("the answer is longer than {} bytes", self.max_bytes),
            };
            return self.emit(Err(e), VecDeque::new());
        }
        // Events completed before a broken line are decoded first: the
        // stream may have finished in the same chunk.
        let mut payloads = Vec::new();
        let broken = self.sse.push(bytes, &mut payloads);
        for p in payloads {
            self.payloads += 1;
            let mut events = VecDeque::new();
            let step = self.decoder.on_data(&p, &mut events);
            let done = matches!(step, Ok(Step::Done));
            self.emit(step.map(|_| ()), events);
            if done {
                self.closed = true;
            }
            if self.closed {
                return;
            }
        }
        if let Err(e) = broken {
            let e = ProviderError::Malformed {
                detail: e.to_string(),
            };
            self.emit(Err(e), VecDeque::new());
        }
    }

    fn on_closed(&mut self) {
        let mut events = VecDeque::new();
        let result = if self.sse.has_partial() {
            // The connection broke in the middle of an event.
            Err(ProviderError::Disconnected { events: 0 })
        } else {
            self.decoder.on_end(&mut events)
        };
        self.emit(result, events);
        self.closed = true;
    }
}

/// The model events of a streaming response body read by `decoder`.
pub fn event_stream<D: WireDecoder>(body: ByteStream, decoder: D) -> ModelStream {
    bounded_event_stream(body, decoder, MAX_ANSWER_BYTES)
}

/// [`event_stream`] with `max_bytes` instead of [`MAX_ANSWER_BYTES`].
fn bounded_event_stream<D: WireDecoder>(
    body: ByteStream,
    decoder: D,
    max_bytes: usize,
) -> ModelStream {
    let reading = Reading {
        body,
        sse: SseDecoder::new(MAX_EVENT_BYTES),
        decoder,
        out: VecDeque::new(),
        payloads: 0,
        read: 0,
        max_bytes,
        closed: false,
    };
    Box::pin(futures::stream::unfold(reading, |mut r| async move {
        loop {
            if let Some(item) = r.out.pop_front() {
                return Some((item, r));
            }
            if r.closed {
                return None;
            }
            match r.body.next().await {
                Some(Ok(bytes)) => r.on_bytes(&bytes),
                Some(Err(_)) | None => r.on_closed(),
            }
        }
    }))
}

/// Test support: read a recorded (fixture) body through `decoder`, cut
/// into small chunks so that events split anywhere, into a response.
#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) fn decode_fixture<D: WireDecoder>(
    body: &str,
    decoder: D,
) -> Result<super::ModelResponse, ProviderError> {
    let chunks: Vec<Result<bytes::Bytes, agent_http::SendError>> = body
        .as_bytes()
        .chunks(7)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let stream = event_stream(Box::pin(futures::stream::iter(chunks)), decoder);
    futures::executor::block_on(super::collect_response(stream, |_| {}))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    /// Text deltas as they come; complete on `[DONE]`.
    struct Echo;

    impl WireDecoder for Echo {
        fn on_data(
            &mut self,
            data: &str,
            out: &mut VecDeque<ModelEvent>,
        ) -> Result<Step, ProviderError> {
            if data == "[DONE]" {
                out.push_back(ModelEvent::Finish(FinishReason::Stop));
                return Ok(Step::Done);
            }
            out.push_back(ModelEvent::TextDelta(data.to_owned()));
            Ok(Step::More)
        }
        fn on_end(&mut self, _: &mut VecDeque<ModelEvent>) -> Result<(), ProviderError> {
            Err(ProviderError::Disconnected { events: 0 })
        }
    }

    fn read_all(body: &'static [u8], max: usize) -> Vec<Result<ModelEvent, ProviderError>> {
        read_in_chunks(body, 5, max)
    }

    fn read_in_chunks(
        body: &'static [u8],
        chunk: usize,
        max: usize,
    ) -> Vec<Result<ModelEvent, ProviderError>> {
        let chunks: Vec<Result<bytes::Bytes, agent_http::SendError>> = body
            .chunks(chunk)
            .map(|c| Ok(bytes::Bytes::from_static(c)))
            .collect();
        let stream = bounded_event_stream(Box::pin(futures::stream::iter(chunks)), Echo, max);
        futures::executor::block_on(stream.collect())
    }

    #[test]
    fn a_body_is_read_up_to_its_bound_and_refused_past_it() {
        const BODY: &[u8] = b"data: hello\n\ndata: [DONE]\n\n";
        for max in [BODY.len(), BODY.len() + 1] {
            let events = read_all(BODY, max);
            assert!(events.iter().all(Result::is_ok), "{max}: {events:?}");
            assert_eq!(
                events.last(),
                Some(&Ok(ModelEvent::Finish(FinishReason::Stop)))
            );
        }
        let events = read_all(BODY, BODY.len() - 1);
        assert!(
            matches!(events.last(), Some(Err(ProviderError::Malformed { .. }))),
            "{events:?}"
        );
        assert!(
            !events.contains(&Ok(ModelEvent::Finish(FinishReason::Stop))),
            "nothing past the bound is read"
        );
    }

    #[test]
    fn events_before_a_broken_line_in_the_same_chunk_are_decoded_first() {
        // The whole answer, then a line that is not UTF-8, in one chunk.
        const BODY: &[u8] = b"data: hello\n\ndata: \xff\n\n";
        let events = read_in_chunks(BODY, BODY.len(), 1 << 20);
        assert_eq!(
            events.first(),
            Some(&Ok(ModelEvent::TextDelta("hello".into())))
        );
        assert!(
            matches!(events.last(), Some(Err(ProviderError::Malformed { .. }))),
            "{events:?}"
        );
        // Finished in the same chunk: the garbage after `[DONE]` is unread.
        const DONE: &[u8] = b"data: hello\n\ndata: [DONE]\n\ndata: \xff\n\n";
        let events = read_in_chunks(DONE, DONE.len(), 1 << 20);
        assert_eq!(
            events,
            [
                Ok(ModelEvent::TextDelta("hello".into())),
                Ok(ModelEvent::Finish(FinishReason::Stop))
            ]
        );
    }
}
