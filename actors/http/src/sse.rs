//! The one Server-Sent Events decoder (model streams and MCP Streamable
//! HTTP): bytes in (split anywhere), complete `data` payloads out. `data:`
//! lines (joined with `\n`), comments, blank-line event boundaries, LF or
//! CRLF line ends; `event` and unknown fields are ignored, as the SSE
//! specification says; the last `id` and a valid `retry` are kept for a
//! reader that resumes ([`SseDecoder::last_event_id`], [`SseDecoder::retry_ms`]). Bounded: one event's data is at most
//! `max_event_bytes`, and one line at most that plus [`LINE_OVERHEAD`]
//! (room for the field name), so a broken or hostile server cannot grow
//! memory without bound.

/// How much longer than the event limit one line may be: the field name
/// and its colon and space (`data: `), with room to spare.
pub const LINE_OVERHEAD: usize = 64;

/// The stream was not valid SSE, or passed a bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an SSE line is longer than {limit} bytes")]
    LineTooLong { limit: usize },
    #[error("an SSE event's data is {size} bytes, more than the {limit} allowed")]
    EventTooLarge { size: usize, limit: usize },
    #[error("an SSE line is not UTF-8")]
    NotUtf8,
}

/// Incremental SSE decoder. Feed it chunks as they arrive.
#[derive(Debug)]
pub struct SseDecoder {
    max_event_bytes: usize,
    /// Bytes of the current, not yet complete line.
    line: Vec<u8>,
    /// The joined `data:` lines of the current event.
    data: String,
    has_data: bool,
    /// True when the current event has at least one field.
    has_field: bool,
    /// The last `id` field seen (the stream's last event ID).
    last_event_id: Option<String>,
    /// The last `retry` field that was all ASCII digits, in milliseconds.
    retry_ms: Option<u64>,
    /// The error that broke the stream, returned by every later push.
    failed: Option<SseError>,
}

impl SseDecoder {
    /// A decoder whose events carry at most `max_event_bytes` of data.
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            max_event_bytes,
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            has_field: false,
            last_event_id: None,
            retry_ms: None,
            failed: None,
        }
    }

    /// The last event ID the stream set (an `id` field without NUL), to
    /// send as `Last-Event-ID` when reconnecting.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// The reconnection time the stream asked for (`retry`), if any.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// The longest line accepted.
    pub fn max_line_bytes(&self) -> usize {
        self.max_event_bytes.saturating_add(LINE_OVERHEAD)
    }

    /// Feed bytes; appends to `events` the data payload of every event
    /// they completed. On an error the events completed before it are in
    /// `events` all the same (a response that ended in the same chunk as
    /// garbage is not lost), and the stream is broken: every later push
    /// returns the same error and appends nothing.
    pub fn push(&mut self, bytes: &[u8], events: &mut Vec<String>) -> Result<(), SseError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let decoded = self.decode(bytes, events);
        if let Err(error) = &decoded {
            self.failed = Some(error.clone());
        }
        decoded
    }

    fn decode(&mut self, bytes: &[u8], out: &mut Vec<String>) -> Result<(), SseError> {
        for &b in bytes {
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.end_line(&line, out)?;
            } else {
                if self.line.len() >= self.max_line_bytes() {
                    return Err(SseError::LineTooLong {
                        limit: self.max_line_bytes(),
                    });
                }
                self.line.push(b);
            }
        }
        Ok(())
    }

    /// True when bytes of an unfinished event are buffered (the stream
    /// broke mid-event).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_field
    }

    fn end_line(&mut self, line: &[u8], out: &mut Vec<String>) -> Result<(), SseError> {
        if line.is_empty() {
            if self.has_data {
                out.push(std::mem::take(&mut self.data));
            }
            self.data.clear();
            self.has_data = false;
            self.has_field = false;
            return Ok(());
        }
        let text = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        if text.starts_with(':') {
            return Ok(()); // a comment (keep-alive)
        }
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text, ""),
        };
        self.has_field = true;
        if field == "id" && !value.contains('\0') {
            self.last_event_id = Some(value.to_owned());
        }
        if field == "retry" && !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
            self.retry_ms = value.parse().ok();
        }
        if field == "data" {
            let size = self.data.len() + value.len() + usize::from(self.has_data);
            if size > self.max_event_bytes {
                return Err(SseError::EventTooLarge {
                    size,
                    limit: self.max_event_bytes,
                });
            }
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One push: its events, or its error.
    fn pushed(d: &mut SseDecoder, bytes: &[u8]) -> Result<Vec<String>, SseError> {
        let mut events = Vec::new();
        d.push(bytes, &mut events).map(|()| events)
    }

    #[test]
    fn events_completed_before_an_error_in_the_same_chunk_are_kept() {
        // A response, then a line that is not UTF-8, in one chunk.
        let mut d = SseDecoder::new(1024);
        let mut events = Vec::new();
        let r = d.push(
            b"data: {\"id\":1}\n\ndata: \xff\n\ndata: later\n\n",
            &mut events,
        );
        assert_eq!(r, Err(SseError::NotUtf8));
        assert_eq!(events, ["{\"id\":1}"]);
        // The stream is broken: the same error, nothing more decoded.
        let r = d.push(b"data: more\n\n", &mut events);
        assert_eq!(r, Err(SseError::NotUtf8));
        assert_eq!(events, ["{\"id\":1}"]);
    }

    #[test]
    fn the_last_event_id_and_a_valid_retry_are_kept() {
        let mut d = SseDecoder::new(1024);
        assert_eq!((d.last_event_id(), d.retry_ms()), (None, None));
        // A priming event (MCP 2025-11-25): an id, a retry and empty data.
        assert_eq!(
            pushed(&mut d, b"id: event-1\nretry: 500\ndata: \n\n").unwrap(),
            vec![String::new()]
        );
        assert_eq!(
            (d.last_event_id(), d.retry_ms()),
            (Some("event-1"), Some(500))
        );
        // A retry that is not all digits is ignored; a later id replaces.
        pushed(&mut d, b"retry: 5s\nid: event-2\ndata: {}\n\n").unwrap();
        assert_eq!(
            (d.last_event_id(), d.retry_ms()),
            (Some("event-2"), Some(500))
        );
    }

    const LIMIT: usize = 64 * 1024;

    fn byte_by_byte(d: &mut SseDecoder, wire: &[u8]) -> Vec<String> {
        let mut got = Vec::new();
        for b in wire {
            got.extend(pushed(d, std::slice::from_ref(b)).unwrap());
        }
        got
    }

    #[test]
    fn events_split_at_every_byte_decode_the_same() {
        let wire = b"data: {\"a\":1}\n\n: keep-alive\n\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\n";
        let mut whole = SseDecoder::new(LIMIT);
        let all = pushed(&mut whole, wire).unwrap();
        assert_eq!(all, vec!["{\"a\":1}", "x\ny", "[DONE]"]);
        let mut split = SseDecoder::new(LIMIT);
        assert_eq!(byte_by_byte(&mut split, wire), all);
        assert!(!split.has_partial());
    }

    #[test]
    fn other_fields_are_ignored_and_multiline_data_joined() {
        let text =
            b"event: message\r\nid: 1\ndata: {\"a\":\ndata: 1}\n\n: keep-alive\n\ndata: x\n\n";
        let mut whole = SseDecoder::new(LIMIT);
        assert_eq!(pushed(&mut whole, text).unwrap(), vec!["{\"a\":\n1}", "x"]);
        let mut split = SseDecoder::new(LIMIT);
        assert_eq!(byte_by_byte(&mut split, text), vec!["{\"a\":\n1}", "x"]);
    }

    #[test]
    fn an_event_without_data_yields_nothing() {
        let mut d = SseDecoder::new(LIMIT);
        assert!(
            pushed(&mut d, b"event: ping\nid: 7\n\n")
                .unwrap()
                .is_empty()
        );
        assert!(!d.has_partial());
    }

    #[test]
    fn an_unterminated_event_is_partial() {
        let mut d = SseDecoder::new(LIMIT);
        assert!(pushed(&mut d, b"data: {\"a\"").unwrap().is_empty());
        assert!(d.has_partial());
        let mut d = SseDecoder::new(LIMIT);
        assert!(pushed(&mut d, b"data: {}\n").unwrap().is_empty());
        assert!(
            d.has_partial(),
            "a data line without its blank line is not an event yet"
        );
    }

    #[test]
    fn non_utf8_is_an_error_not_a_panic() {
        let mut d = SseDecoder::new(LIMIT);
        assert_eq!(
            pushed(&mut d, b"data: \xff\xfe\n\n"),
            Err(SseError::NotUtf8)
        );
    }

    #[test]
    fn event_size_limit_at_below_and_above() {
        for (size, ok) in [(LIMIT - 1, true), (LIMIT, true), (LIMIT + 1, false)] {
            // One data line of `size` bytes.
            let mut d = SseDecoder::new(LIMIT);
            let ev = format!("data: {}\n\n", "a".repeat(size));
            let r = pushed(&mut d, ev.as_bytes());
            assert_eq!(r.is_ok(), ok, "one line of {size}");
            if !ok {
                assert!(matches!(r, Err(SseError::EventTooLarge { .. })), "{r:?}");
            }
            // The same size as many lines (joined with newlines).
            let mut d = SseDecoder::new(LIMIT);
            let line = "b".repeat(1023);
            let lines = size / 1024;
            let mut ev = String::new();
            for _ in 0..lines {
                ev.push_str("data: ");
                ev.push_str(&line);
                ev.push('\n');
            }
            // The last line makes the joined data exactly `size` bytes.
            let rest = size - lines * 1024;
            ev.push_str("data: ");
            ev.push_str(&"c".repeat(rest));
            ev.push_str("\n\n");
            let r = pushed(&mut d, ev.as_bytes());
            assert_eq!(r.is_ok(), ok, "many lines of {size}");
            if ok {
                assert_eq!(r.unwrap()[0].len(), size);
            } else {
                assert!(matches!(r, Err(SseError::EventTooLarge { .. })), "{r:?}");
            }
        }
    }

    #[test]
    fn line_limit_at_below_and_above() {
        let d = SseDecoder::new(LIMIT);
        let max = d.max_line_bytes();
        for (len, ok) in [(max - 1, true), (max, true), (max + 1, false)] {
            // A comment line: no event data, so only the line bound applies.
            let mut d = SseDecoder::new(LIMIT);
            let line = format!(":{}\n", "k".repeat(len - 1));
            let r = pushed(&mut d, line.as_bytes());
            assert_eq!(r.is_ok(), ok, "a line of {len} bytes");
            if !ok {
                assert_eq!(r, Err(SseError::LineTooLong { limit: max }));
            }
        }
    }

    #[test]
    fn an_endless_line_is_refused_without_buffering_it_all() {
        let mut d = SseDecoder::new(1024);
        let chunk = vec![b'x'; 4096];
        let r = pushed(&mut d, &chunk);
        assert!(matches!(r, Err(SseError::LineTooLong { .. })));
        assert!(d.line.len() <= d.max_line_bytes());
    }
}
