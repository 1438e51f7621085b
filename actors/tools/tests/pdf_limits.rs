//! The PDF pre-scan's limits (`document::pdf_scan`, issue 32 item 3) at,
//! below and above each bound, on real PDF files built here: objects,
//! values kept, elements of one array, nesting, values of one content
//! stream, bytes one stream decodes to, and bytes decoded in all (through
//! a chain of filters: ASCIIHex over Flate). Over a limit, `extract` is
//! `document_too_complex` before `lopdf` parses; at a limit the text is
//! read. Also the cost of the worst file within the default limits
//! (`pdf_limits_worst_case_time`, run in release for the doc comment).
#![cfg(feature = "pdf")]

use std::time::Instant;

use agent_tools::builtin::document::pdf_scan::{PdfCounts, scan};
use agent_tools::builtin::document::{
    DocumentFormat, DocumentHint, ExtractError, ExtractLimits, PdfLimits, PdfRefusal, extract,
};

/// Zlib-compressed `data` (lopdf's own compressor, which leaves data it
/// cannot shrink as it is: the tests compress only long data).
fn flate(data: &[u8]) -> Vec<u8> {
    let mut stream = lopdf::Stream::new(lopdf::Dictionary::new(), data.to_vec());
    stream.compress().expect("compress");
    assert!(stream.dict.get(b"Filter").is_ok(), "compressible test data");
    stream.content
}

fn hex(data: &[u8]) -> Vec<u8> {
    let mut text: Vec<u8> = data
        .iter()
        .flat_map(|b| format!("{b:02x}").into_bytes())
        .collect();
    text.push(b'>');
    text
}

/// One extra stream of the test PDF: its dictionary's keys (besides
/// `/Length`) and its data as stored.
struct Extra {
    keys: String,
    data: Vec<u8>,
}

/// An object stream holding object 7, `object` (e.g. an array).
fn object_stream(object: &str, filters: Filters) -> Extra {
    let content = format!("7 0 {object}");
    let (filter, data) = filters.apply(content.as_bytes());
    Extra {
        keys: format!("/Type /ObjStm /N 1 /First 4{filter}"),
        data,
    }
}

/// A content-like stream (a form) holding `content`.
fn other_stream(content: &str, filters: Filters) -> Extra {
    let (filter, data) = filters.apply(content.as_bytes());
    Extra {
        keys: format!("/Type /XObject /Subtype /Form /BBox [0 0 1 1]{filter}"),
        data,
    }
}

#[derive(Clone, Copy)]
enum Filters {
    None,
    Flate,
    HexOverFlate,
}

impl Filters {
    fn apply(self, content: &[u8]) -> (String, Vec<u8>) {
        match self {
            Filters::None => (String::new(), content.to_vec()),
            Filters::Flate => (" /Filter /FlateDecode".into(), flate(content)),
            Filters::HexOverFlate => (
                " /Filter [/ASCIIHexDecode /FlateDecode]".into(),
                hex(&flate(content)),
            ),
        }
    }
}

/// A one-page PDF saying `Hello bounded PDF`, with `extras` appended as
/// objects 6, 7, ... (a classic cross-reference table).
fn pdf(extras: Vec<Extra>) -> Vec<u8> {
    let content = b"BT /F1 12 Tf 72 712 Td (Hello bounded PDF) Tj ET".to_vec();
    let stream = |keys: &str, data: &[u8]| {
        [
            format!("<< {keys} /Length {} >>\nstream\n", data.len()).into_bytes(),
            data.to_vec(),
            b"\nendstream".to_vec(),
        ]
        .concat()
    };
    let mut objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_vec(),
        stream("", &content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ];
    for extra in extras {
        objects.push(stream(&extra.keys, &extra.data));
    }
    let mut out = b"%PDF-1.5\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn ints(n: usize) -> String {
    let mut s = String::from("[");
    for i in 0..n {
        s.push_str(&format!("{} ", i % 10));
    }
    s.push(']');
    s
}

fn counts(bytes: &[u8]) -> PdfCounts {
    scan(bytes, &PdfLimits::DEFAULT).expect("within the defaults")
}

fn read(bytes: &[u8], pdf: PdfLimits) -> Result<String, ExtractError> {
    let hint = DocumentHint {
        format: Some(DocumentFormat::Pdf),
        ..DocumentHint::default()
    };
    let limits = ExtractLimits {
        pdf,
        ..ExtractLimits::DEFAULT
    };
    extract(bytes, &hint, &limits).map(|e| e.text)
}

/// At `at` (the measured count) and above it the file is read; one below,
/// it is refused with `refusal(limit)` both by the scan and by `extract`.
fn at_below_and_above(
    bytes: &[u8],
    at: usize,
    set: impl Fn(&mut PdfLimits, usize),
    refusal: impl Fn(usize) -> PdfRefusal,
) {
    for (limit, ok) in [(at + 1, true), (at, true), (at - 1, false)] {
        let mut limits = PdfLimits::DEFAULT;
        set(&mut limits, limit);
        let outcome = read(bytes, limits);
        if ok {
            let text = outcome.unwrap_or_else(|e| panic!("limit {limit}: {e}"));
            assert!(text.contains("Hello bounded PDF"), "{text}");
        } else {
            assert_eq!(scan(bytes, &limits), Err(refusal(limit)), "limit {limit}");
            let refused = outcome.expect_err("over the limit");
            assert_eq!(refused.code(), "document_too_complex");
            assert_eq!(
                refused,
                ExtractError::PdfTooComplex {
                    refusal: refusal(limit)
                }
            );
        }
    }
}

#[test]
fn objects_at_below_and_above_the_limit() {
    let file = pdf(vec![object_stream("[1 2 3]", Filters::None)]);
    let c = counts(&file);
    // Six objects in the file and one in the object stream.
    assert_eq!(c.objects, 7);
    at_below_and_above(
        &file,
        c.objects,
        |l, n| l.max_objects = n,
        |limit| PdfRefusal::TooManyObjects { limit },
    );
}

#[test]
fn values_kept_at_below_and_above_the_limit() {
    let small = counts(&pdf(vec![object_stream("[1]", Filters::None)]));
    let file = pdf(vec![object_stream(&ints(1_000), Filters::None)]);
    let c = counts(&file);
    // The 999 more integers (the same file, with one integer, otherwise). of the object stream count.
    assert_eq!(c.values - small.values, 999);
    at_below_and_above(
        &file,
        c.values,
        |l, n| l.max_values = n,
        |limit| PdfRefusal::TooManyValues { limit },
    );
}

#[test]
fn elements_of_one_array_at_below_and_above_the_limit() {
    for filters in [Filters::None, Filters::Flate, Filters::HexOverFlate] {
        let file = pdf(vec![object_stream(&ints(5_000), filters)]);
        let c = counts(&file);
        assert_eq!(c.longest_array, 5_000);
        at_below_and_above(
            &file,
            5_000,
            |l, n| l.max_array_len = n,
            |limit| PdfRefusal::ArrayTooLong { limit },
        );
    }
    // References count once each: `[1 0 R ...]` of 40 has 40 elements.
    let refs: String = (0..40).map(|i| format!("{} 0 R ", i + 1)).collect();
    let file = pdf(vec![object_stream(&format!("[{refs}]"), Filters::None)]);
    assert_eq!(counts(&file).longest_array, 40);
}

#[test]
fn nesting_at_below_and_above_the_limit() {
    let nested = format!("{}1{}", "[".repeat(20), "]".repeat(20));
    let file = pdf(vec![object_stream(&nested, Filters::Flate)]);
    let c = counts(&file);
    assert_eq!(c.deepest, 20);
    at_below_and_above(
        &file,
        20,
        |l, n| l.max_nesting = n,
        |limit| PdfRefusal::TooDeep { limit },
    );
}

#[test]
fn values_of_one_content_stream_at_below_and_above_the_limit() {
    let content = "0 0 1 rg ".repeat(2_000);
    let file = pdf(vec![other_stream(&content, Filters::Flate)]);
    // The largest stream's values: measured with the file values lifted.
    let measured = (1..=10_000)
        .find(|n| {
            let limits = PdfLimits {
                max_stream_values: *n,
                ..PdfLimits::DEFAULT
            };
            scan(&file, &limits).is_ok()
        })
        .expect("at most 10,000 values");
    // 2,000 times three operands and an operator.
    assert_eq!(measured, 8_000);
    at_below_and_above(
        &file,
        measured,
        |l, n| l.max_stream_values = n,
        |limit| PdfRefusal::StreamTooComplex { limit },
    );
}

#[test]
fn bytes_one_stream_decodes_to_at_below_and_above_the_limit() {
    let object = ints(20_000);
    let decoded = format!("7 0 {object}").len();
    for filters in [Filters::Flate, Filters::HexOverFlate] {
        let file = pdf(vec![object_stream(&object, filters)]);
        assert_eq!(counts(&file).decompressed_bytes, decoded);
        at_below_and_above(
            &file,
            decoded,
            |l, n| l.max_stream_bytes = n,
            |limit| PdfRefusal::StreamTooLarge { limit },
        );
    }
}

#[test]
fn bytes_decoded_in_all_at_below_and_above_the_limit() {
    let a = ints(20_000);
    let b = "0 0 1 rg ".repeat(3_000);
    let file = pdf(vec![
        object_stream(&a, Filters::HexOverFlate),
        other_stream(&b, Filters::Flate),
    ]);
    let total = format!("7 0 {a}").len() + b.len();
    assert_eq!(counts(&file).decompressed_bytes, total);
    at_below_and_above(
        &file,
        total,
        |l, n| l.max_decompressed_bytes = n,
        |limit| PdfRefusal::TooMuchDecoded { limit },
    );
}

#[test]
fn binary_streams_are_neither_decoded_nor_scanned() {
    // An image whose bytes would look like a huge array if scanned.
    let image = Extra {
        keys: "/Type /XObject /Subtype /Image /Width 1 /Height 1 /BitsPerComponent 8 /ColorSpace /DeviceGray /Filter /FlateDecode".into(),
        data: flate(ints(100_000).as_bytes()),
    };
    let file = pdf(vec![image]);
    let tight = PdfLimits {
        max_array_len: 20,
        max_stream_values: 100,
        max_decompressed_bytes: 100,
        ..PdfLimits::DEFAULT
    };
    assert!(scan(&file, &tight).is_ok());
    assert!(read(&file, tight).unwrap().contains("Hello bounded PDF"));
}

/// The worst file within the default limits that this scan lets through
/// to `lopdf`: eight object streams of 500,000 integers each (4,000,000
/// values, the limit on values kept). Run in release for the doc comment
/// of `PdfLimits::DEFAULT`:
/// `cargo test --release -p agent-tools --test pdf_limits worst -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, run in release"]
fn pdf_limits_worst_case_time() {
    let per = PdfLimits::DEFAULT.max_array_len - 1;
    let streams = 7;
    let extras = (0..streams)
        .map(|_| object_stream(&ints(per), Filters::Flate))
        .collect();
    let file = pdf(extras);
    let start = Instant::now();
    let c = counts(&file);
    let scanned = start.elapsed();
    let outcome = read(&file, PdfLimits::DEFAULT);
    println!(
        "worst case: {} bytes, {c:?}, scan {scanned:?}, scan and read {:?}: {:?}",
        file.len(),
        start.elapsed(),
        outcome.map(|t| t.len())
    );
}
