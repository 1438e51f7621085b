//! A bounded Server-Sent Events decoder for Streamable HTTP: bytes in (split
//! anywhere), complete `data` payloads out, each at most
//! [`MAX_MESSAGE_BYTES`](crate::jsonrpc::MAX_MESSAGE_BYTES) (a line and a whole
//! event alike). Written here rather than shared with the supervisor's
//! decoder because actor crates do not import each other, and that one
//! bounds lines only, not events of many `data:` lines.

use crate::error::McpError;
use crate::jsonrpc::MAX_MESSAGE_BYTES;

/// Incremental SSE decoder.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes; returns the data of every event they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, McpError> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.end_line(&line, &mut out)?;
            } else {
                if self.line.len() >= MAX_MESSAGE_BYTES + 6 {
                    return Err(McpError::TooLarge {
                        size: self.line.len() + 1,
                        limit: MAX_MESSAGE_BYTES,
                    });
                }
                self.line.push(b);
            }
        }
        Ok(out)
    }

    fn end_line(&mut self, line: &[u8], out: &mut Vec<String>) -> Result<(), McpError> {
        if line.is_empty() {
            if self.has_data {
                out.push(std::mem::take(&mut self.data));
            }
            self.data.clear();
            self.has_data = false;
            return Ok(());
        }
        let text = std::str::from_utf8(line)
            .map_err(|_| McpError::Protocol("an SSE line is not UTF-8".into()))?;
        if text.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text, ""),
        };
        if field == "data" {
            let extra = value.len() + usize::from(self.has_data);
            if self.data.len() + extra > MAX_MESSAGE_BYTES {
                return Err(McpError::TooLarge {
                    size: self.data.len() + extra,
                    limit: MAX_MESSAGE_BYTES,
                });
            }
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        // `event`, `id`, `retry` and unknown fields are ignored.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_decode_the_same() {
        let text =
            b"event: message\r\nid: 1\ndata: {\"a\":\ndata: 1}\n\n: keep-alive\n\ndata: x\n\n";
        let mut whole = SseDecoder::new();
        assert_eq!(whole.push(text).unwrap(), vec!["{\"a\":\n1}", "x"]);
        let mut split = SseDecoder::new();
        let mut got = Vec::new();
        for b in text.iter() {
            got.extend(split.push(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(got, vec!["{\"a\":\n1}", "x"]);
    }

    #[test]
    fn event_size_limit_at_below_and_above() {
        for (size, ok) in [
            (MAX_MESSAGE_BYTES - 1, true),
            (MAX_MESSAGE_BYTES, true),
            (MAX_MESSAGE_BYTES + 1, false),
        ] {
            // One data line of `size` bytes.
            let mut d = SseDecoder::new();
            let ev = format!("data: {}\n\n", "a".repeat(size));
            assert_eq!(d.push(ev.as_bytes()).is_ok(), ok, "one line of {size}");
            // The same size as many lines (joined with newlines).
            let mut d = SseDecoder::new();
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
            let r = d.push(ev.as_bytes());
            assert_eq!(r.is_ok(), ok, "many lines of {size}");
            if ok {
                assert_eq!(r.unwrap()[0].len(), size);
            } else {
                assert!(matches!(r, Err(McpError::TooLarge { .. })));
            }
        }
    }
}
