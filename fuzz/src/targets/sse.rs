//! The SSE decoder (`agent_http::sse`), shared by the model streams and MCP.
//!
//! Properties: the same bytes split at any points decode to the same events
//! and the same error; no event is longer than the event bound and the
//! buffered line never passes the line bound; within the bounds the events
//! are those of a plain reading of the SSE specification (LF or CRLF line
//! ends, `data` lines joined with LF, comments and other fields ignored,
//! one space after the colon dropped, an event dispatched at a blank line
//! when it has data).
//!
//! Input: two bytes choose the event bound (1 to 1,024 bytes), two more the
//! split points; the rest is the stream.

use agent_http::{SseDecoder, SseError};

/// The whole stream through one decoder, split at `cuts`: the events of
/// every push in order (those a failing push completed before its error
/// included), then the first error (decoding stops there).
fn decode(stream: &[u8], limit: usize, cuts: &[usize]) -> (Vec<String>, Option<SseError>, bool) {
    let mut decoder = SseDecoder::new(limit);
    let mut events = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
        let cut = cut.clamp(start, stream.len());
        if let Err(e) = decoder.push(&stream[start..cut], &mut events) {
            return (events, Some(e), decoder.has_partial());
        }
        start = cut;
    }
    (events, None, decoder.has_partial())
}

/// The plain reading of the specification (no bounds): the events, and
/// whether bytes of an unfinished event remain.
fn reference(stream: &[u8]) -> Option<(Vec<String>, bool)> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    let mut has_field = false;
    let mut lines = stream.split(|&b| b == b'\n').peekable();
    let mut tail: &[u8] = &[];
    while let Some(line) = lines.next() {
        if lines.peek().is_none() {
            tail = line;
            break;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if let Some(d) = data.take() {
                events.push(d);
            }
            has_field = false;
            continue;
        }
        let text = std::str::from_utf8(line).ok()?;
        if text.starts_with(':') {
            continue;
        }
        has_field = true;
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (text, ""),
        };
        if field == "data" {
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
    Some((events, has_field || !tail.is_empty()))
}

pub fn check(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let limit = 1 + usize::from(u16::from_le_bytes([data[0], data[1]])) % 1024;
    let stream = &data[4..];
    let n = stream.len().max(1);
    let cuts = [usize::from(data[2]) % n, usize::from(data[3]) * 7 % n];
    let mut cuts = cuts.to_vec();
    cuts.sort_unstable();

    // Every reading agrees event for event, up to the same error: the
    // events completed before a broken line are kept whatever the split.
    let whole = decode(stream, limit, &[]);
    let mut splits = vec![decode(stream, limit, &cuts)];
    if stream.len() <= 256 {
        let every: Vec<usize> = (1..stream.len()).collect();
        splits.push(decode(stream, limit, &every));
    }
    for split in &splits {
        assert_eq!(whole.1, split.1, "a split at {cuts:?} changed the error");
        assert_eq!(whole.0, split.0, "a split at {cuts:?} changed the events");
        if whole.1.is_none() {
            assert_eq!(whole.2, split.2, "a split at {cuts:?} changed has_partial");
        }
        for event in &split.0 {
            assert!(event.len() <= limit, "an event passed the bound {limit}");
        }
    }
    for event in &whole.0 {
        assert!(
            event.len() <= limit,
            "an event of {} bytes passed the bound {limit}",
            event.len()
        );
    }
    match &whole.1 {
        Some(SseError::LineTooLong { limit: l }) => assert_eq!(*l, limit + 64),
        Some(SseError::EventTooLarge { size, limit: l }) => {
            assert_eq!(*l, limit);
            assert!(*size > limit, "refused an event of {size} <= {limit}");
        }
        Some(SseError::NotUtf8) | None => {}
    }
    if whole.1.is_none() {
        // Within the bounds: exactly the specification's events.
        if let Some((events, partial)) = reference(stream) {
            assert_eq!(
                whole.0, events,
                "the events differ from the specification's"
            );
            assert_eq!(
                whole.2, partial,
                "has_partial differs from the specification's"
            );
        } else {
            panic!("the decoder accepted a line that is not UTF-8");
        }
    }
}
