//! Cutting a document's text into bounded, overlapping chunks on char
//! boundaries (preferring a whitespace break near the end of a window), so
//! that every chunk is a byte range of the stored text that provenance can
//! point back to.

use serde::{Deserialize, Serialize};

/// The largest chunk, in bytes.
pub const CHUNK_BYTES: usize = 1200;
/// How many bytes a chunk shares with the one before it (about).
pub const OVERLAP_BYTES: usize = 200;

/// One chunk: a byte range of the document's text and the SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkSpan {
    /// Byte offset in the document's text.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// SHA-256 of the chunk's bytes (lowercase hex).
    pub hash: String,
}

/// The largest char boundary of `text` at or below `i`.
fn floor_boundary(text: &str, mut i: usize) -> usize {
    if i >= text.len() {
        return text.len();
    }
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Byte ranges of `text` of at most `max` bytes each (at least one
/// character even when that is longer), each starting about `overlap`
/// bytes before the previous one ended; empty text has no chunks.
/// `overlap` is kept below half of `max`, so the walk always advances.
pub fn chunk_ranges(text: &str, max: usize, overlap: usize) -> Vec<(usize, usize)> {
    let max = max.max(8);
    let overlap = overlap.min(max / 2);
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = floor_boundary(text, start + max);
        if end <= start {
            // One character longer than `max` (cannot happen for max >= 4).
            end = text[start..]
                .char_indices()
                .nth(1)
                .map_or(text.len(), |(i, _)| start + i);
        }
        if end < text.len() {
            // Break after the last whitespace in the window's last quarter.
            let window = &text[start..end];
            if let Some(ws) = window.rfind(char::is_whitespace)
                && ws >= window.len() * 3 / 4
            {
                let after = start + ws + window[ws..].chars().next().map_or(1, char::len_utf8);
                end = after;
            }
        }
        out.push((start, end));
        if end >= text.len() {
            break;
        }
        let next = floor_boundary(text, end.saturating_sub(overlap));
        start = if next > start { next } else { end };
    }
    out
}

/// [`chunk_ranges`] with the default bounds, as spans with hashes.
pub fn chunk(text: &str) -> Vec<ChunkSpan> {
    chunk_ranges(text, CHUNK_BYTES, OVERLAP_BYTES)
        .into_iter()
        .map(|(s, e)| ChunkSpan {
            offset: s as u64,
            len: (e - s) as u64,
            hash: agent_capabilities::sha256_hex(&text.as_bytes()[s..e]),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_text_overlap_and_stay_on_char_boundaries() {
        let text = "héllo wörld ".repeat(400);
        let ranges = chunk_ranges(&text, 100, 20);
        assert_eq!(ranges.first().unwrap().0, 0);
        assert_eq!(ranges.last().unwrap().1, text.len());
        for w in ranges.windows(2) {
            assert!(w[1].0 < w[0].1, "overlap");
            assert!(w[1].0 > w[0].0, "advances");
        }
        for (s, e) in &ranges {
            assert!(e - s <= 100);
            assert!(text.is_char_boundary(*s) && text.is_char_boundary(*e));
        }
    }

    #[test]
    fn bounds_at_below_and_above_one_chunk() {
        assert!(chunk_ranges("", 100, 20).is_empty());
        assert_eq!(chunk_ranges(&"a".repeat(99), 100, 20), [(0, 99)]);
        assert_eq!(chunk_ranges(&"a".repeat(100), 100, 20), [(0, 100)]);
        assert_eq!(
            chunk_ranges(&"a".repeat(101), 100, 20),
            [(0, 100), (80, 101)]
        );
        // Four-byte characters never split.
        let emoji = "😀".repeat(30);
        for (s, e) in chunk_ranges(&emoji, 10, 3) {
            assert!(emoji.is_char_boundary(s) && emoji.is_char_boundary(e) && e > s);
        }
    }
}
