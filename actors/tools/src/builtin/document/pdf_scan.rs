//! The PDF pre-scan: one linear pass over a PDF's bytes, and over the
//! decoded content of its streams, that refuses the file over
//! [`PdfLimits`] **before `lopdf` builds any object**.
//!
//! `lopdf` parses a whole file (and every object stream in it) into
//! objects of about 120 bytes each, whatever their source size: one
//! FlateDecode object stream of 255 KB holding an array of 131 million
//! integers became ~16 GB. Its own bound is per stream and on bytes, not
//! on the objects they make. So the scan counts, as `lopdf` would build
//! them:
//!
//! - indirect objects (`obj` in the file, `/N` of each object stream),
//! - values kept at once (every number, name, string, keyword, array and
//!   dictionary of the file and of its object streams; `a b R` counts one),
//! - elements of one array or dictionary, and nesting,
//! - values of each other stream that `lopdf` may parse (page content is
//!   parsed one page at a time, so it is bounded per stream),
//! - bytes decoded from one stream and from all streams together, through
//!   their whole filter chain (ASCIIHex over Flate included), by `lopdf`'s
//!   own bounded decoders, each given only what is left of the budget.
//!
//! Streams that are binary by kind (images, font programs, metadata) are
//! neither decoded nor tokenised: `lopdf` does not decode them to read
//! text. Cross-reference streams are decoded (`lopdf` does, while loading)
//! but not tokenised.
//! A stream's end comes from a direct `/Length` when it fits and is
//! followed by `endstream`, otherwise from the next `endstream`. The scan
//! is only the cheap first line: the PDF is read in a place that can be
//! stopped (natively a sandbox process with an address-space cap), which
//! also bounds what the scan cannot foresee.

use serde::{Deserialize, Serialize};

/// Bounds on one PDF, checked by [`scan`] before it is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PdfLimits {
    /// Indirect objects (in the file and in object streams).
    pub max_objects: usize,
    /// Values of the file and its object streams together (what stays in
    /// memory once the document is loaded).
    pub max_values: usize,
    /// Elements of one array or dictionary (a dictionary's keys and values
    /// each count).
    pub max_array_len: usize,
    /// Arrays and dictionaries nested in one another.
    pub max_nesting: usize,
    /// Values of one other stream (page content, a form, a CMap).
    pub max_stream_values: usize,
    /// Bytes one stream decodes to, after all its filters (also the bound
    /// `lopdf` applies to each stream it decodes while loading).
    pub max_stream_bytes: usize,
    /// Bytes decoded from all streams together, after all their filters.
    pub max_decompressed_bytes: usize,
}

impl PdfLimits {
    /// 500,000 objects, 4,000,000 values kept (about 0.5 GB as `lopdf`
    /// objects, half the sandbox's address-space cap), 500,000 elements in
    /// one array, nesting 64, 4,000,000 values in one content stream,
    /// 16 MiB decoded from one stream (the same as one page's content) and
    /// 256 MiB decoded in all. A 1,000-page text PDF has some 10,000
    /// objects and well under a million values outside its page content.
    /// The slowest file within them is measured in
    /// `actors/tools/tests/builtin_document.rs` (`pdf_limits_worst_case_time`).
    pub const DEFAULT: PdfLimits = PdfLimits {
        max_objects: 500_000,
        max_values: 4_000_000,
        max_array_len: 500_000,
        max_nesting: 64,
        max_stream_values: 4_000_000,
        max_stream_bytes: 16 * 1024 * 1024,
        max_decompressed_bytes: 256 * 1024 * 1024,
    };
}

impl Default for PdfLimits {
    fn default() -> Self {
        PdfLimits::DEFAULT
    }
}

/// Which limit a PDF is over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "exceeded", rename_all = "snake_case")]
pub enum PdfRefusal {
    #[error("the PDF has more than {limit} objects")]
    TooManyObjects { limit: usize },
    #[error("the PDF has more than {limit} values")]
    TooManyValues { limit: usize },
    #[error("an array or dictionary of the PDF has more than {limit} elements")]
    ArrayTooLong { limit: usize },
    #[error("the PDF nests arrays and dictionaries more than {limit} deep")]
    TooDeep { limit: usize },
    #[error("a stream of the PDF has more than {limit} values")]
    StreamTooComplex { limit: usize },
    #[error("a stream of the PDF decodes to more than {limit} bytes")]
    StreamTooLarge { limit: usize },
    #[error("the PDF's streams decode to more than {limit} bytes in all")]
    TooMuchDecoded { limit: usize },
}

/// What [`scan`] counted in a PDF within the limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PdfCounts {
    pub objects: usize,
    pub values: usize,
    pub longest_array: usize,
    pub deepest: usize,
    pub decompressed_bytes: usize,
    pub streams: usize,
}

#[cfg(feature = "pdf")]
pub use scanning::scan;

/// The scanner itself, which decodes streams with `lopdf`'s decoders.
#[cfg(feature = "pdf")]
mod scanning {
    use super::{PdfCounts, PdfLimits, PdfRefusal};

    fn is_white(c: u8) -> bool {
        matches!(c, 0 | b'\t' | b'\n' | 0x0c | b'\r' | b' ')
    }

    fn is_delimiter(c: u8) -> bool {
        matches!(
            c,
            b'(' | b')' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'/' | b'%'
        )
    }

    /// The keys of a top-level dictionary that describe the stream after it.
    #[derive(Debug, Default, Clone)]
    struct StreamDict {
        length: Option<usize>,
        filters: Vec<Vec<u8>>,
        kind: Option<Vec<u8>>,
        subtype: Option<Vec<u8>>,
        objects: Option<usize>,
        font_program: bool,
    }

    /// Reads the few keys of a top-level dictionary that describe its stream:
    /// at depth 1 keys and values alternate; a value that is an array is read
    /// at depth 2 (`/Filter [/A /B]`).
    #[derive(Debug, Default)]
    struct DictKeys {
        /// The depth-1 key whose value comes next.
        key: Option<Vec<u8>>,
        /// The key whose value is the container open at depth 2.
        container_of: Option<Vec<u8>>,
        /// The key whose value was an integer just now (`a b R` follows).
        integer_of: Option<Vec<u8>>,
    }

    impl DictKeys {
        fn name(&mut self, depth: usize, name: &[u8], dict: &mut StreamDict) {
            self.integer_of = None;
            match depth {
                1 => match self.key.take() {
                    None => {
                        if matches!(name, b"Length1" | b"Length2" | b"Length3") {
                            dict.font_program = true;
                        }
                        self.key = Some(name.to_vec());
                    }
                    Some(key) => match key.as_slice() {
                        b"Filter" => dict.filters = vec![name.to_vec()],
                        b"Type" => dict.kind = Some(name.to_vec()),
                        b"Subtype" => dict.subtype = Some(name.to_vec()),
                        _ => {}
                    },
                },
                2 if self.container_of.as_deref() == Some(b"Filter") => {
                    dict.filters.push(name.to_vec());
                }
                _ => {}
            }
        }

        fn integer(&mut self, depth: usize, word: &[u8], dict: &mut StreamDict) {
            if depth != 1 {
                return;
            }
            // Without a key, an integer is the generation of `a b R`: the
            // key it belongs to is kept in `integer_of`.
            if let Some(key) = self.key.take() {
                let n = std::str::from_utf8(word)
                    .ok()
                    .and_then(|w| w.parse::<usize>().ok());
                match key.as_slice() {
                    b"Length" => dict.length = n,
                    b"N" => dict.objects = n,
                    _ => {}
                }
                self.integer_of = Some(key);
            }
        }

        fn reference(&mut self, depth: usize, dict: &mut StreamDict) {
            if depth == 1 && self.integer_of.take().as_deref() == Some(b"Length") {
                // An indirect length: the data's end is found by `endstream`.
                dict.length = None;
            }
        }

        fn other(&mut self, depth: usize) {
            if depth == 1 {
                self.key = None;
                self.integer_of = None;
            }
        }

        /// A container opens inside a container of depth `depth`.
        fn opening(&mut self, depth: usize) {
            if depth == 1 {
                self.container_of = self.key.take();
                self.integer_of = None;
            }
        }

        /// A container closed; `depth` containers are still open.
        fn closed(&mut self, depth: usize) {
            if depth == 1 {
                self.container_of = None;
            }
        }
    }

    /// The counts of one tokenised byte range.
    struct Tokens<'l> {
        limits: &'l PdfLimits,
        /// Open containers: how many elements each has.
        open: Vec<usize>,
        values: usize,
        longest_array: usize,
        deepest: usize,
        /// Whether nesting and element counts are checked (the file and
        /// object streams) or only values (other streams).
        structured: bool,
        /// The value just counted was an integer.
        prev_int: bool,
        /// The limit on `values` and the refusal over it.
        values_limit: usize,
        over_values: fn(usize) -> PdfRefusal,
    }

    impl Tokens<'_> {
        fn value(&mut self) -> Result<(), PdfRefusal> {
            self.counted(false)
        }

        /// Count one value; `int` for an integer. The second of two
        /// integers in a row may yet become one reference with the first
        /// (`a b R`), so it is checked as if it had.
        fn counted(&mut self, int: bool) -> Result<(), PdfRefusal> {
            let slack = usize::from(int && self.prev_int);
            self.prev_int = int;
            self.values += 1;
            if self.values - slack > self.values_limit {
                return Err((self.over_values)(self.values_limit));
            }
            if let Some(top) = self.open.last_mut() {
                *top += 1;
                self.longest_array = self.longest_array.max(*top - slack);
                if self.structured && *top - slack > self.limits.max_array_len {
                    return Err(PdfRefusal::ArrayTooLong {
                        limit: self.limits.max_array_len,
                    });
                }
            }
            Ok(())
        }

        /// `a b R`: the two integers before make one reference.
        fn reference(&mut self) {
            self.prev_int = false;
            self.values = self.values.saturating_sub(1);
            if let Some(top) = self.open.last_mut() {
                *top = top.saturating_sub(1);
            }
        }

        fn open(&mut self) -> Result<(), PdfRefusal> {
            self.value()?;
            self.open.push(0);
            self.deepest = self.deepest.max(self.open.len());
            if self.structured && self.open.len() > self.limits.max_nesting {
                return Err(PdfRefusal::TooDeep {
                    limit: self.limits.max_nesting,
                });
            }
            Ok(())
        }

        /// Close the innermost container: its elements are final now.
        fn close(&mut self) -> Result<(), PdfRefusal> {
            self.prev_int = false;
            if let Some(top) = self.open.pop() {
                self.longest_array = self.longest_array.max(top);
                if self.structured && top > self.limits.max_array_len {
                    return Err(PdfRefusal::ArrayTooLong {
                        limit: self.limits.max_array_len,
                    });
                }
            }
            Ok(())
        }
    }

    /// The index just past a literal string starting after its `(` at `i`.
    fn literal_string_end(b: &[u8], mut i: usize) -> usize {
        let mut depth = 1usize;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 1,
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        b.len()
    }

    fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
        if from >= b.len() {
            return None;
        }
        b[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|p| from + p)
    }

    /// The end of inline image data that starts at `i` (just past `ID`): the
    /// next `EI` between white space (or at the end).
    fn inline_image_end(b: &[u8], mut i: usize) -> usize {
        while i + 1 < b.len() {
            if b[i] == b'E'
                && b[i + 1] == b'I'
                && i > 0
                && is_white(b[i - 1])
                && b.get(i + 2)
                    .is_none_or(|c| is_white(*c) || is_delimiter(*c))
            {
                return i + 2;
            }
            i += 1;
        }
        b.len()
    }

    /// The running scan of one file.
    struct Scan<'l> {
        limits: &'l PdfLimits,
        counts: PdfCounts,
    }

    impl Scan<'_> {
        fn add_objects(&mut self, n: usize) -> Result<(), PdfRefusal> {
            self.counts.objects = self.counts.objects.saturating_add(n);
            if self.counts.objects > self.limits.max_objects {
                return Err(PdfRefusal::TooManyObjects {
                    limit: self.limits.max_objects,
                });
            }
            Ok(())
        }

        /// Tokenise `b`. In the file (`top_level`), `obj` counts an object and
        /// `stream` hands the stream after the dictionary before it to
        /// [`Scan::stream`]. Values add to `kept` (the document's total) when
        /// `structured`, else they are counted for this range alone.
        fn tokens(
            &mut self,
            b: &[u8],
            top_level: bool,
            structured: bool,
        ) -> Result<(), PdfRefusal> {
            let limits = self.limits;
            let mut t = Tokens {
                limits,
                open: Vec::new(),
                values: if structured { self.counts.values } else { 0 },
                longest_array: 0,
                deepest: 0,
                structured,
                prev_int: false,
                values_limit: if structured {
                    limits.max_values
                } else {
                    limits.max_stream_values
                },
                over_values: if structured {
                    |limit| PdfRefusal::TooManyValues { limit }
                } else {
                    |limit| PdfRefusal::StreamTooComplex { limit }
                },
            };
            // The top-level dictionary being read, and the one just closed.
            let mut dict = StreamDict::default();
            let mut last_dict: Option<StreamDict> = None;
            let mut keys = DictKeys::default();
            // The two tokens before the current one were integers (for `R`).
            let mut ints_before = 0u8;
            let mut i = 0usize;
            while i < b.len() {
                let c = b[i];
                if is_white(c) {
                    i += 1;
                    continue;
                }
                let in_dict = top_level && !t.open.is_empty();
                let mut was_int = false;
                match c {
                    b'%' => {
                        while i < b.len() && b[i] != b'\n' && b[i] != b'\r' {
                            i += 1;
                        }
                        continue;
                    }
                    b'(' => {
                        t.value()?;
                        i = literal_string_end(b, i + 1);
                        keys.other(t.open.len());
                    }
                    b'<' if b.get(i + 1) == Some(&b'<') => {
                        if top_level && t.open.is_empty() {
                            dict = StreamDict::default();
                            keys = DictKeys::default();
                        }
                        keys.opening(t.open.len());
                        t.open()?;
                        i += 2;
                    }
                    b'<' => {
                        t.value()?;
                        i = find(b, i + 1, b">").map_or(b.len(), |e| e + 1);
                        keys.other(t.open.len());
                    }
                    b'>' if b.get(i + 1) == Some(&b'>') => {
                        t.close()?;
                        keys.closed(t.open.len());
                        if top_level && t.open.is_empty() {
                            last_dict = Some(std::mem::take(&mut dict));
                        }
                        i += 2;
                    }
                    b'[' => {
                        keys.opening(t.open.len());
                        t.open()?;
                        i += 1;
                    }
                    b']' => {
                        t.close()?;
                        keys.closed(t.open.len());
                        i += 1;
                    }
                    b'/' => {
                        let start = i + 1;
                        i = start;
                        while i < b.len() && !is_white(b[i]) && !is_delimiter(b[i]) {
                            i += 1;
                        }
                        t.value()?;
                        if in_dict {
                            keys.name(t.open.len(), &b[start..i], &mut dict);
                        }
                    }
                    b')' | b'>' | b'{' | b'}' => i += 1,
                    _ => {
                        let start = i;
                        while i < b.len() && !is_white(b[i]) && !is_delimiter(b[i]) {
                            i += 1;
                        }
                        let word = &b[start..i];
                        match word {
                            b"R" if ints_before >= 2 => {
                                t.reference();
                                if in_dict {
                                    keys.reference(t.open.len(), &mut dict);
                                }
                            }
                            b"obj" if top_level && t.open.is_empty() => {
                                self.counts.values = t.values;
                                self.add_objects(1)?;
                                t.value()?;
                            }
                            b"stream" if top_level && t.open.is_empty() => {
                                let described = last_dict.take().unwrap_or_default();
                                i = self.stream(b, i, &described, &mut t)?;
                                continue;
                            }
                            b"ID" if !top_level && !structured => {
                                t.value()?;
                                i = inline_image_end(b, i);
                                continue;
                            }
                            _ => {
                                was_int = !word.is_empty() && word.iter().all(u8::is_ascii_digit);
                                t.counted(was_int)?;
                                if in_dict {
                                    if was_int {
                                        keys.integer(t.open.len(), word, &mut dict);
                                    } else {
                                        keys.other(t.open.len());
                                    }
                                }
                            }
                        }
                    }
                }
                ints_before = if was_int {
                    ints_before.saturating_add(1)
                } else {
                    0
                };
            }
            if structured {
                self.counts.values = t.values;
            }
            self.counts.longest_array = self.counts.longest_array.max(t.longest_array);
            self.counts.deepest = self.counts.deepest.max(t.deepest);
            Ok(())
        }

        /// The stream whose `stream` keyword ends at `at`: find its data,
        /// decode it within what is left of the byte budget, and tokenise it
        /// by kind. Returns the index just past `endstream`.
        fn stream(
            &mut self,
            b: &[u8],
            at: usize,
            dict: &StreamDict,
            file: &mut Tokens<'_>,
        ) -> Result<usize, PdfRefusal> {
            self.counts.streams += 1;
            let mut start = at;
            if b.get(start) == Some(&b'\r') {
                start += 1;
            }
            if b.get(start) == Some(&b'\n') {
                start += 1;
            }
            let by_length = dict.length.and_then(|len| {
                let end = start.checked_add(len)?;
                let rest = b.get(end..)?;
                let skip = rest.iter().take_while(|c| is_white(**c)).count();
                rest[skip..]
                    .starts_with(b"endstream")
                    .then_some((end, end + skip + 9))
            });
            let (end, after) = match by_length {
                Some(found) => found,
                None => match find(b, start, b"endstream") {
                    Some(e) => (e, e + 9),
                    None => (b.len(), b.len()),
                },
            };
            let data = &b[start.min(end)..end];
            // The file's values so far go with the tokens of what follows.
            self.counts.values = file.values;
            let object_stream = dict.kind.as_deref() == Some(b"ObjStm");
            if object_stream {
                self.add_objects(dict.objects.unwrap_or(0))?;
            }
            let binary = dict.font_program
                || matches!(dict.kind.as_deref(), Some(b"Metadata" | b"EmbeddedFile"))
                || matches!(
                    dict.subtype.as_deref(),
                    Some(b"Image" | b"Type1C" | b"CIDFontType0C" | b"OpenType" | b"XML")
                );
            if binary {
                return Ok(after);
            }
            let decoded = self.decode(data, dict)?;
            let cross_reference = dict.kind.as_deref() == Some(b"XRef");
            if let Some(content) = decoded.as_deref() {
                if object_stream {
                    self.tokens(content, false, true)?;
                    file.values = self.counts.values;
                } else if !cross_reference {
                    self.tokens(content, false, false)?;
                }
            }
            Ok(after)
        }

        /// `data` through the stream's filters, counted against the budget;
        /// `None` for a stream without filters (its bytes are the file's own),
        /// with a filter `lopdf` cannot decode, or that fails to decode.
        fn decode(
            &mut self,
            data: &[u8],
            dict: &StreamDict,
        ) -> Result<Option<Vec<u8>>, PdfRefusal> {
            const DECODABLE: [&[u8]; 6] = [
                b"FlateDecode",
                b"LZWDecode",
                b"ASCII85Decode",
                b"ASCIIHexDecode",
                b"RunLengthDecode",
                b"BrotliDecode",
            ];
            if dict.filters.is_empty() {
                return Ok(Some(data.to_vec()));
            }
            if !dict
                .filters
                .iter()
                .all(|f| DECODABLE.contains(&f.as_slice()))
            {
                return Ok(None);
            }
            let limit = self.limits.max_decompressed_bytes;
            let left = limit.saturating_sub(self.counts.decompressed_bytes);
            let one = self.limits.max_stream_bytes;
            let mut described = lopdf::Dictionary::new();
            let names: Vec<lopdf::Object> = dict
                .filters
                .iter()
                .map(|f| lopdf::Object::Name(f.clone()))
                .collect();
            described.set("Filter", lopdf::Object::Array(names));
            let stream = lopdf::Stream::new(described, data.to_vec());
            match stream.decompressed_content_with_limit(left.min(one)) {
                Ok(content) => {
                    self.counts.decompressed_bytes += content.len();
                    Ok(Some(content))
                }
                Err(lopdf::Error::Decompress(lopdf::DecompressError::MemoryLimitExceeded {
                    ..
                })) => Err(if left < one {
                    PdfRefusal::TooMuchDecoded { limit }
                } else {
                    PdfRefusal::StreamTooLarge { limit: one }
                }),
                // A stream that does not decode is left to the parser, which
                // meets the same error.
                Err(_) => Ok(None),
            }
        }
    }

    /// Check `bytes` (a whole PDF file) against `limits` without building any
    /// object; the counts when it is within them.
    pub fn scan(bytes: &[u8], limits: &PdfLimits) -> Result<PdfCounts, PdfRefusal> {
        let mut scan = Scan {
            limits,
            counts: PdfCounts::default(),
        };
        scan.tokens(bytes, true, true)?;
        Ok(scan.counts)
    }
}
