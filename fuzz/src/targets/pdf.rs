//! The PDF reader of `extract_document` (`agent-tools`, feature `pdf`): the
//! pre-scan (`pdf_scan::scan`, [`PdfLimits`]) and the extraction after it.
//!
//! Properties, with small limits so that the fuzzer reaches them:
//! - what the pre-scan admits is within its limits on objects, values kept
//!   and bytes decoded (its `deepest` and `longest_array` also count page
//!   content, which is bounded by values per stream, not by nesting: by
//!   design, see `pdf_scan`; arrays nested 100,000 deep in a content stream
//!   make `lopdf`'s content parser answer an error);
//! - a file the pre-scan refuses is refused by the extraction with that
//!   refusal, before `lopdf` builds anything;
//! - an extraction answers with text of at most `max_chars` characters
//!   and counts that match, or with a typed error; `lopdf` panics are the
//!   reader's to catch (it runs the parser under `catch_unwind`), so any
//!   panic that reaches here is a finding.

use agent_tools::builtin::document::extract::{
    DocumentFormat, DocumentHint, ExtractError, ExtractLimits, extract,
};
use agent_tools::builtin::document::{PdfLimits, pdf_scan};

pub const PDF_LIMITS: PdfLimits = PdfLimits {
    max_objects: 2_000,
    max_values: 50_000,
    max_array_len: 4_000,
    max_nesting: 16,
    max_stream_values: 50_000,
    max_stream_bytes: 1024 * 1024,
    max_decompressed_bytes: 4 * 1024 * 1024,
};

pub const LIMITS: ExtractLimits = ExtractLimits {
    max_input_bytes: 1024 * 1024,
    max_chars: 2_000,
    max_pdf_pages: 16,
    max_pdf_page_bytes: 1024 * 1024,
    html: super::readable_html::LIMITS,
    pdf: PDF_LIMITS,
};

pub fn check(data: &[u8]) {
    let scanned = pdf_scan::scan(data, &PDF_LIMITS);
    if let Ok(counts) = &scanned {
        let l = &PDF_LIMITS;
        assert!(
            counts.objects <= l.max_objects
                && counts.values <= l.max_values
                && counts.decompressed_bytes <= l.max_decompressed_bytes,
            "the pre-scan admitted counts over its limits: {counts:?}"
        );
    }
    let hint = DocumentHint {
        format: Some(DocumentFormat::Pdf),
        ..DocumentHint::default()
    };
    match (extract(data, &hint, &LIMITS), scanned) {
        (Ok(got), Ok(_)) => {
            assert!(got.chars <= LIMITS.max_chars, "{} chars", got.chars);
            assert_eq!(got.text.chars().count(), got.chars, "chars miscounted");
            if let Some(total) = got.total_chars {
                assert_eq!(got.truncated, total > got.chars);
            }
        }
        (Ok(_), Err(refusal)) => panic!("read a PDF the pre-scan refused: {refusal}"),
        (Err(ExtractError::PdfTooComplex { refusal: got }), Err(refusal)) => {
            assert_eq!(got, refusal);
        }
        // Without a header the reader stops before the scan.
        (Err(ExtractError::Malformed { .. }), Err(_)) if !has_header(data) => {}
        (Err(other), Err(refusal)) => {
            panic!("the pre-scan refused ({refusal}) but the reader answered {other}")
        }
        (Err(_), Ok(_)) => {}
    }
}

/// A `%PDF-` header within the first 1,024 bytes (PDF 32000-1 annex H).
fn has_header(data: &[u8]) -> bool {
    data[..data.len().min(1024 + 5)]
        .windows(5)
        .any(|w| w == b"%PDF-")
}
