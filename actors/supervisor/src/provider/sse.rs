//! A small Server-Sent Events decoder: bytes in (split anywhere), complete
//! `data` payloads out. Only what Chat Completions streams use: `data:` lines,
//! comments, blank-line event boundaries, LF or CRLF line ends.

/// Incremental SSE decoder. Feed it chunks as they arrive.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the current, not yet complete line.
    line: Vec<u8>,
    /// `data:` lines of the current event.
    data: Vec<String>,
    /// True when the current event has at least one field.
    has_field: bool,
}

/// The stream was not valid SSE.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid SSE line: {0}")]
pub struct SseError(pub String);

/// Longest line accepted, so that a broken server cannot grow memory without bound.
pub const MAX_LINE: usize = 4 * 1024 * 1024;

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes; returns the data payloads of every event they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, SseError> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.end_line(&line, &mut out)?;
            } else {
                if self.line.len() >= MAX_LINE {
                    return Err(SseError(format!("line longer than {MAX_LINE} bytes")));
                }
                self.line.push(b);
            }
        }
        Ok(out)
    }

    /// True when bytes of an unfinished event are buffered (the stream broke mid-event).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_field
    }

    fn end_line(&mut self, line: &[u8], out: &mut Vec<String>) -> Result<(), SseError> {
        if line.is_empty() {
            if self.has_field && !self.data.is_empty() {
                out.push(self.data.join("\n"));
            }
            self.data.clear();
            self.has_field = false;
            return Ok(());
        }
        let text =
            std::str::from_utf8(line).map_err(|_| SseError("line is not UTF-8".to_owned()))?;
        if text.starts_with(':') {
            return Ok(()); // a comment (keep-alive)
        }
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text, ""),
        };
        self.has_field = true;
        if field == "data" {
            self.data.push(value.to_owned());
        }
        // `event`, `id`, `retry` and unknown fields are ignored, as the SSE spec says.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_at_every_byte_decode_the_same() {
        let wire = b"data: {\"a\":1}\n\n: keep-alive\n\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\n";
        let mut whole = SseDecoder::new();
        let all = whole.push(wire).unwrap();
        assert_eq!(all, vec!["{\"a\":1}", "x\ny", "[DONE]"]);
        let mut split = SseDecoder::new();
        let mut got = Vec::new();
        for b in wire {
            got.extend(split.push(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(got, all);
        assert!(!split.has_partial());
    }

    #[test]
    fn an_unterminated_event_is_partial() {
        let mut d = SseDecoder::new();
        assert!(d.push(b"data: {\"a\"").unwrap().is_empty());
        assert!(d.has_partial());
        let mut d = SseDecoder::new();
        assert!(d.push(b"data: {}\n").unwrap().is_empty());
        assert!(
            d.has_partial(),
            "a data line without its blank line is not an event yet"
        );
    }

    #[test]
    fn non_utf8_is_an_error_not_a_panic() {
        let mut d = SseDecoder::new();
        assert!(d.push(b"data: \xff\xfe\n\n").is_err());
    }
}
