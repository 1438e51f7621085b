//! Text extraction from document bytes: plain text, Markdown, HTML (readable
//! text via `agent-readable`, which owns the HTML limits), JSON, CSV (`csv`)
//! and PDF (`lopdf`, pure Rust and wasm32-clean; feature `pdf`), with a
//! bounded output that reports truncation.
//!
//! Pure and synchronous: the tool actor calls it on the host's blocking path.

use std::fmt;

use agent_readable::{
    BoundedReadable, HtmlLimits, HtmlRefusal, ReadableError, ReadableRequest, TextStyle,
};

use super::pdf_scan::{PdfLimits, PdfRefusal};
use serde::{Deserialize, Serialize};

/// The formats `extract_document` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentFormat {
    Text,
    Markdown,
    Html,
    Json,
    Csv,
    Pdf,
}

impl DocumentFormat {
    /// Every supported format.
    pub const ALL: [DocumentFormat; 6] = [
        DocumentFormat::Text,
        DocumentFormat::Markdown,
        DocumentFormat::Html,
        DocumentFormat::Json,
        DocumentFormat::Csv,
        DocumentFormat::Pdf,
    ];

    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DocumentFormat::Text => "text",
            DocumentFormat::Markdown => "markdown",
            DocumentFormat::Html => "html",
            DocumentFormat::Json => "json",
            DocumentFormat::Csv => "csv",
            DocumentFormat::Pdf => "pdf",
        }
    }

    /// The format a MIME type names (parameters such as `charset` ignored).
    pub fn from_mime(mime: &str) -> Option<DocumentFormat> {
        let essence = mime
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "text/plain" => Some(DocumentFormat::Text),
            "text/markdown" | "text/x-markdown" => Some(DocumentFormat::Markdown),
            "text/html" | "application/xhtml+xml" => Some(DocumentFormat::Html),
            "application/json" | "text/json" => Some(DocumentFormat::Json),
            e if e.starts_with("application/") && e.ends_with("+json") => {
                Some(DocumentFormat::Json)
            }
            "text/csv" | "application/csv" => Some(DocumentFormat::Csv),
            "application/pdf" => Some(DocumentFormat::Pdf),
            _ => None,
        }
    }

    /// The format a file name's extension names.
    pub fn from_name(name: &str) -> Option<DocumentFormat> {
        let ext = extension(name)?;
        match ext.as_str() {
            "txt" | "text" | "log" => Some(DocumentFormat::Text),
            "md" | "markdown" => Some(DocumentFormat::Markdown),
            "html" | "htm" | "xhtml" => Some(DocumentFormat::Html),
            "json" => Some(DocumentFormat::Json),
            "csv" => Some(DocumentFormat::Csv),
            "pdf" => Some(DocumentFormat::Pdf),
            _ => None,
        }
    }
}

impl fmt::Display for DocumentFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn extension(name: &str) -> Option<String> {
    let file = name.rsplit('/').next().unwrap_or(name);
    let (stem, ext) = file.rsplit_once('.')?;
    if stem.is_empty() || ext.is_empty() {
        return None;
    }
    Some(ext.to_ascii_lowercase())
}

/// The bounds of one extraction.
///
/// Defaults ([`ExtractLimits::DEFAULT`]): 20 MiB of input, 40,000 characters
/// of output (the same bound as a web read, S8.2), the first 1,000 PDF
/// pages, 16 MiB of decompressed content per PDF page, and HTML within
/// [`HtmlLimits::DEFAULT`] (8 MiB, depth 512, 200,000 elements; the same
/// limits as `fetch_url`, owned by `agent-readable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractLimits {
    /// Largest document accepted, in bytes.
    pub max_input_bytes: usize,
    /// Longest text returned, in characters (Unicode scalar values).
    pub max_chars: usize,
    /// PDF pages read at most; later pages are reported as truncated.
    pub max_pdf_pages: usize,
    /// Decompressed content of one PDF page, in bytes (bounds zip bombs).
    pub max_pdf_page_bytes: usize,
    /// Bounds on HTML (input bytes, nesting depth, elements), checked
    /// before any parser runs.
    pub html: HtmlLimits,
    /// Bounds on the objects and decoded bytes of a PDF, checked by
    /// [`super::pdf_scan`] before `lopdf` builds any object.
    #[serde(default)]
    pub pdf: PdfLimits,
}

impl ExtractLimits {
    /// The documented defaults.
    pub const DEFAULT: ExtractLimits = ExtractLimits {
        max_input_bytes: 20 * 1024 * 1024,
        max_chars: 40_000,
        max_pdf_pages: 1_000,
        max_pdf_page_bytes: 16 * 1024 * 1024,
        html: HtmlLimits::DEFAULT,
        pdf: PdfLimits::DEFAULT,
    };
}

impl Default for ExtractLimits {
    fn default() -> Self {
        ExtractLimits::DEFAULT
    }
}

/// What is known about a document besides its bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct DocumentHint<'a> {
    /// The file name or workspace path (its extension names a format).
    pub name: Option<&'a str>,
    /// The MIME type the store recorded.
    pub mime: Option<&'a str>,
    /// A format the caller insists on; it wins over name, MIME and sniffing.
    pub format: Option<DocumentFormat>,
}

/// Extracted text and what is known about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    pub format: DocumentFormat,
    /// At most `max_chars` characters.
    pub text: String,
    /// True when `text` is not the whole text of the document.
    pub truncated: bool,
    /// Characters in `text`.
    pub chars: usize,
    /// Characters in the whole text, when known (a PDF read stops early).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_chars: Option<usize>,
    /// The document's title (HTML `<title>` or article title, PDF Info
    /// title, first Markdown heading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// PDF page count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<usize>,
    /// CSV record count (header included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<usize>,
}

/// Why no text came out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The document is larger than the input limit.
    #[error(
        "the document is {len} bytes, over the limit of {limit} bytes; extract a smaller file or split it"
    )]
    TooLarge { len: usize, limit: usize },
    /// Not one of the supported formats.
    #[error(
        "unsupported document type: {what}; extract_document reads plain text, Markdown, HTML, JSON, CSV and PDF"
    )]
    Unsupported { what: String },
    /// The bytes are not a valid document of the format.
    #[error("the file is not valid {format}: {detail}")]
    Malformed {
        format: DocumentFormat,
        detail: String,
    },
    /// An encrypted PDF.
    #[error("the PDF is encrypted; ask for an unencrypted copy")]
    Encrypted,
    /// HTML over one of its limits (bytes, nesting depth, elements): it
    /// was not handed to the readability extractor.
    #[error("{refusal}; the page is too complex to extract safely, so its text was not extracted")]
    TooComplex { refusal: HtmlRefusal },
    /// A PDF over one of its limits (objects, values, array length,
    /// nesting, decoded bytes): it was not handed to the PDF parser.
    #[error("{refusal}; the PDF is too complex to read safely, so its text was not extracted")]
    PdfTooComplex { refusal: PdfRefusal },
    /// A valid document without extractable text.
    #[error("the {format} document has no extractable text: {detail}")]
    NoText {
        format: DocumentFormat,
        detail: String,
    },
}

impl ExtractError {
    /// A stable code for the result envelope.
    pub fn code(&self) -> &'static str {
        match self {
            ExtractError::TooLarge { .. } => "document_too_large",
            ExtractError::Unsupported { .. } => "document_unsupported",
            ExtractError::Malformed { .. } => "document_malformed",
            ExtractError::Encrypted => "document_encrypted",
            ExtractError::TooComplex { .. } | ExtractError::PdfTooComplex { .. } => {
                "document_too_complex"
            }
            ExtractError::NoText { .. } => "document_no_text",
        }
    }
}

fn malformed(format: DocumentFormat, detail: impl Into<String>) -> ExtractError {
    ExtractError::Malformed {
        format,
        detail: detail.into(),
    }
}

/// Decide the format of `bytes`: the hint's explicit format, then a
/// supported MIME type, then a supported extension; a specific unsupported
/// MIME type or extension is refused; otherwise the content is sniffed.
pub fn detect_format(
    bytes: &[u8],
    hint: &DocumentHint<'_>,
) -> Result<DocumentFormat, ExtractError> {
    if let Some(format) = hint.format {
        return Ok(format);
    }
    if let Some(format) = hint.mime.and_then(DocumentFormat::from_mime) {
        return Ok(format);
    }
    if let Some(format) = hint.name.and_then(DocumentFormat::from_name) {
        return Ok(format);
    }
    if let Some(what) = sniff_binary(bytes) {
        return Err(ExtractError::Unsupported { what: what.into() });
    }
    if let Some(mime) = hint.mime {
        let essence = mime
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let generic = essence.is_empty()
            || essence == "application/octet-stream"
            || essence.starts_with("text/");
        if !generic {
            return Err(ExtractError::Unsupported {
                what: format!("MIME type {essence}"),
            });
        }
    }
    if let Some(ext) = hint.name.and_then(extension) {
        return Err(ExtractError::Unsupported {
            what: format!(".{ext} file"),
        });
    }
    let head = skip_bom_and_space(bytes);
    if head.starts_with(b"%PDF-") {
        return Ok(DocumentFormat::Pdf);
    }
    let lower: Vec<u8> = head.iter().take(64).map(u8::to_ascii_lowercase).collect();
    if lower.starts_with(b"<!doctype html") || lower.starts_with(b"<html") {
        return Ok(DocumentFormat::Html);
    }
    if (head.starts_with(b"{") || head.starts_with(b"["))
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
    {
        return Ok(DocumentFormat::Json);
    }
    Ok(DocumentFormat::Text)
}

/// Recognise common binary formats by their magic bytes.
fn sniff_binary(bytes: &[u8]) -> Option<&'static str> {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "PNG image"),
        (b"\xff\xd8\xff", "JPEG image"),
        (b"GIF87a", "GIF image"),
        (b"GIF89a", "GIF image"),
        (b"PK\x03\x04", "ZIP archive (or an Office document)"),
        (b"\x1f\x8b", "gzip archive"),
        (b"\x7fELF", "ELF executable"),
        (b"\0asm", "WebAssembly module"),
        (b"\xd0\xcf\x11\xe0", "legacy Office document"),
    ];
    MAGIC
        .iter()
        .find(|(magic, _)| bytes.starts_with(magic))
        .map(|(_, what)| *what)
}

fn skip_bom_and_space(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    &bytes[start..]
}

/// Extract the text of a document, bounded by `limits`.
pub fn extract(
    bytes: &[u8],
    hint: &DocumentHint<'_>,
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    if bytes.len() > limits.max_input_bytes {
        return Err(ExtractError::TooLarge {
            len: bytes.len(),
            limit: limits.max_input_bytes,
        });
    }
    let format = detect_format(bytes, hint)?;
    match format {
        DocumentFormat::Text => {
            let text = decode_text(bytes, format, None)?;
            Ok(bounded(format, text, limits.max_chars))
        }
        DocumentFormat::Markdown => {
            let text = decode_text(bytes, format, None)?;
            let title = text
                .lines()
                .find_map(|l| l.strip_prefix("# "))
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty());
            let mut out = bounded(format, text, limits.max_chars);
            out.title = title;
            Ok(out)
        }
        DocumentFormat::Json => extract_json(bytes, limits),
        DocumentFormat::Csv => extract_csv(bytes, limits),
        DocumentFormat::Html => extract_html(bytes, limits),
        #[cfg(feature = "pdf")]
        DocumentFormat::Pdf => extract_pdf(bytes, limits),
        // The browser's page module leaves the PDF reader to its Worker
        // module; the tool hands PDFs to the host's `PdfReader` there.
        #[cfg(not(feature = "pdf"))]
        DocumentFormat::Pdf => Err(ExtractError::Unsupported {
            what: "PDF in this build (PDFs are read by the host's PDF reader)".into(),
        }),
    }
}

/// `text` cut to `max_chars` characters, with the counts.
fn bounded(format: DocumentFormat, mut text: String, max_chars: usize) -> Extracted {
    let total = text.chars().count();
    let truncated = total > max_chars;
    if truncated {
        let cut = text
            .char_indices()
            .nth(max_chars)
            .map_or(text.len(), |(i, _)| i);
        text.truncate(cut);
    }
    Extracted {
        format,
        text,
        truncated,
        chars: total.min(max_chars),
        total_chars: Some(total),
        title: None,
        pages: None,
        rows: None,
    }
}

/// Decode text strictly: a BOM picks UTF-8 or UTF-16, else `declared`, else
/// UTF-8. Invalid sequences and NUL bytes are refused, not replaced.
fn decode_text(
    bytes: &[u8],
    format: DocumentFormat,
    declared: Option<&'static encoding_rs::Encoding>,
) -> Result<String, ExtractError> {
    let (encoding, body) = match encoding_rs::Encoding::for_bom(bytes) {
        Some((encoding, bom_len)) => (encoding, &bytes[bom_len..]),
        None => (declared.unwrap_or(encoding_rs::UTF_8), bytes),
    };
    let text = if encoding == encoding_rs::UTF_8 {
        match std::str::from_utf8(body) {
            Ok(text) => text.to_owned(),
            Err(e) => {
                return Err(malformed(
                    format,
                    format!(
                        "it is not UTF-8 text (invalid byte sequence at byte {})",
                        e.valid_up_to()
                    ),
                ));
            }
        }
    } else {
        match encoding.decode_without_bom_handling_and_without_replacement(body) {
            Some(text) => text.into_owned(),
            None => {
                return Err(malformed(
                    format,
                    format!("it is not valid {} text", encoding.name()),
                ));
            }
        }
    };
    if let Some(at) = text.find('\0') {
        return Err(malformed(
            format,
            format!("it contains a NUL character at offset {at}: binary data, not text"),
        ));
    }
    Ok(text)
}

fn extract_json(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    let format = DocumentFormat::Json;
    let text = decode_text(bytes, format, None)?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        malformed(
            format,
            format!("{e} (line {}, column {})", e.line(), e.column()),
        )
    })?;
    let pretty = serde_json::to_string_pretty(&value)
        .map_err(|e| malformed(format, format!("it cannot be rendered: {e}")))?;
    Ok(bounded(format, pretty, limits.max_chars))
}

fn extract_csv(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    let format = DocumentFormat::Csv;
    // Validate the encoding first, so a bad byte gets its position.
    let text = decode_text(bytes, format, None)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(false)
        .from_reader(text.as_bytes());
    let mut out = String::new();
    let mut rows = 0usize;
    let mut out_chars = 0usize;
    let mut total_chars = 0usize;
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(malformed(format, csv_error(&e))),
        }
        rows += 1;
        let line = record
            .iter()
            .map(|field| field.replace('|', "\\|").replace(['\r', '\n'], " "))
            .collect::<Vec<_>>()
            .join(" | ");
        let line_chars = line.chars().count() + 1;
        total_chars += line_chars;
        if out_chars + line_chars <= limits.max_chars {
            out.push_str(&line);
            out.push('\n');
            out_chars += line_chars;
        } else if out_chars < limits.max_chars {
            // Fill up to the bound with the start of this row.
            let room = limits.max_chars - out_chars;
            let piece: String = line.chars().take(room).collect();
            out_chars += piece.chars().count();
            out.push_str(&piece);
        }
    }
    Ok(Extracted {
        format,
        truncated: total_chars > out_chars,
        chars: out_chars,
        total_chars: Some(total_chars),
        text: out,
        title: None,
        pages: None,
        rows: Some(rows),
    })
}

fn csv_error(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            pos,
            expected_len,
            len,
        } => {
            let line = pos.as_ref().map_or(0, |p| p.line());
            format!(
                "record on line {line} has {len} fields, but the first record has {expected_len}"
            )
        }
        csv::ErrorKind::Utf8 { pos, err } => {
            let line = pos.as_ref().map_or(0, |p| p.line());
            format!("record on line {line} is not UTF-8: {err}")
        }
        _ => e.to_string(),
    }
}

/// The charset an HTML document declares in its first 1,024 bytes.
fn html_declared_charset(bytes: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let head: Vec<u8> = bytes
        .iter()
        .take(1024)
        .map(u8::to_ascii_lowercase)
        .collect();
    let at = head.windows(8).position(|w| w == b"charset=")?;
    let rest = &head[at + 8..];
    let rest = rest
        .strip_prefix(b"\"")
        .or_else(|| rest.strip_prefix(b"'"))
        .unwrap_or(rest);
    let end = rest
        .iter()
        .position(|b| matches!(b, b'"' | b'\'' | b';' | b'>' | b' ' | b'/'))
        .unwrap_or(rest.len());
    encoding_rs::Encoding::for_label(&rest[..end])
}

/// The request that hands an HTML document to readable-text extraction:
/// decoded by its BOM or declared charset (strictly), as formatted text of
/// at most `limits.max_chars` characters, within `limits.html`.
pub fn html_request(bytes: &[u8], limits: &ExtractLimits) -> Result<ReadableRequest, ExtractError> {
    let html = decode_text(bytes, DocumentFormat::Html, html_declared_charset(bytes))?;
    Ok(ReadableRequest {
        html,
        url: None,
        style: TextStyle::Formatted,
        limits: limits.html,
        max_chars: limits.max_chars,
    })
}

/// The extraction's answer for an HTML document, wherever it was computed
/// ([`agent_readable::answer`] in process, in a sandbox or in a Worker).
pub fn html_extracted(
    answer: Result<BoundedReadable, ReadableError>,
) -> Result<Extracted, ExtractError> {
    let format = DocumentFormat::Html;
    let page = match answer {
        Ok(page) => page,
        Err(ReadableError::Refused(refusal)) => return Err(ExtractError::TooComplex { refusal }),
        Err(ReadableError::NoArticle { .. }) => {
            return Err(ExtractError::NoText {
                format,
                detail: "no readable content was found in the page".into(),
            });
        }
    };
    if page.text.is_empty() {
        return Err(ExtractError::NoText {
            format,
            detail: "the page's readable content is empty".into(),
        });
    }
    Ok(Extracted {
        format,
        text: page.text,
        truncated: page.truncated,
        chars: page.chars,
        total_chars: Some(page.total_chars),
        title: page.title,
        pages: None,
        rows: None,
    })
}

fn extract_html(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    let request = html_request(bytes, limits)?;
    html_extracted(agent_readable::answer(&request))
}

#[cfg(feature = "pdf")]
fn extract_pdf(bytes: &[u8], limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    let format = DocumentFormat::Pdf;
    // The header may follow up to 1,024 bytes of junk (PDF 32000-1 annex H).
    let header_window = &bytes[..bytes.len().min(1024 + 5)];
    if !header_window.windows(5).any(|w| w == b"%PDF-") {
        return Err(malformed(format, "there is no %PDF- header"));
    }
    super::pdf_scan::scan(bytes, &limits.pdf)
        .map_err(|refusal| ExtractError::PdfTooComplex { refusal })?;
    let options = lopdf::LoadOptions {
        max_decompressed_size: Some(limits.pdf.max_stream_bytes),
        ..lopdf::LoadOptions::default()
    };
    let document = guarded(|| lopdf::Document::load_mem_with_options(bytes, options))
        .ok_or_else(|| malformed(format, "the PDF parser failed on this file"))?
        .map_err(|e| match e {
            lopdf::Error::Decryption(_) | lopdf::Error::InvalidPassword => ExtractError::Encrypted,
            other => malformed(format, other.to_string()),
        })?;
    if document.is_encrypted() {
        return Err(ExtractError::Encrypted);
    }
    let pages = document.get_pages();
    if pages.is_empty() {
        return Err(malformed(format, "it has no pages"));
    }
    let title = pdf_title(&document);
    let mut text = String::new();
    let mut chars = 0usize;
    let mut stopped_early = pages.len() > limits.max_pdf_pages;
    let mut failed_pages = Vec::new();
    let mut first_error = None;
    for &number in pages.keys().take(limits.max_pdf_pages) {
        if chars > limits.max_chars {
            stopped_early = true;
            break;
        }
        let page =
            guarded(|| document.extract_text_with_limit(&[number], limits.max_pdf_page_bytes));
        match page {
            Some(Ok(page_text)) => {
                chars += page_text.chars().count() + 1;
                text.push_str(page_text.trim_end());
                text.push('\n');
            }
            Some(Err(e)) => {
                failed_pages.push(number);
                first_error.get_or_insert_with(|| e.to_string());
            }
            None => {
                failed_pages.push(number);
                first_error.get_or_insert_with(|| "the text decoder failed".to_owned());
            }
        }
    }
    let read_pages = pages.len().min(limits.max_pdf_pages);
    if failed_pages.len() == read_pages {
        return Err(malformed(
            format,
            format!(
                "the text of no page could be decoded ({})",
                first_error.unwrap_or_default()
            ),
        ));
    }
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err(ExtractError::NoText {
            format,
            detail: "its pages have no text layer (a scan or images only?)".into(),
        });
    }
    let mut out = bounded(format, text, limits.max_chars);
    if stopped_early {
        out.truncated = true;
        out.total_chars = None;
    }
    out.title = title;
    out.pages = Some(pages.len());
    Ok(out)
}

#[cfg(feature = "pdf")]
fn pdf_title(document: &lopdf::Document) -> Option<String> {
    let info = document.trailer.get(b"Info").ok()?;
    let info = match info {
        lopdf::Object::Reference(id) => document.get_dictionary(*id).ok()?,
        lopdf::Object::Dictionary(d) => d,
        _ => return None,
    };
    let title = info.get(b"Title").ok()?;
    let decoded = lopdf::decode_text_string(title).ok()?;
    Some(decoded.trim().to_owned()).filter(|t| !t.is_empty())
}

/// Run a third-party parser so that a panic inside it becomes `None`
/// (natively; wasm32 aborts on panic, and the browser runs this in a Worker).
#[cfg(feature = "pdf")]
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}
