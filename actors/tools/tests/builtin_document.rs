//! `extract_document`: each format (a real PDF built by the test), bounded
//! output with truncation reported at, below and above the bound, malformed
//! input of each format, unsupported types, and the actor (capability
//! check, trust by origin) on the memory host.
#![cfg(not(target_arch = "wasm32"))] // native tests (tokio); the browser runs builtin_wasm.rs

mod builtin_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_capabilities::{Target, TargetScope, Trust, Uses};
use agent_kernel::host::{Clock, Storage};
use agent_kernel::ids::SessionId;
use agent_kernel::memory::{MEMORY_HOST_START_WALL_MS, MemoryHost, MemoryStorage};
use agent_kernel::protocol::{ToolMsg, ToolResult};
use agent_tools::builtin::document::{
    self, DocumentFormat, DocumentHint, DocumentOrigin, DocumentSource, DocumentSourceError,
    DocumentTool, ExtractError, ExtractLimits, ExtractionSlots, HtmlLimits, HtmlRefusal,
    SourceDocument, extract,
};
use builtin_support::*;
use serde_json::json;

// ------------------------------------------------------------ fixtures

/// Escape text for a PDF literal string.
fn pdf_string(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('(', "\\(")
        .replace(')', "\\)")
}

/// A minimal but complete PDF 1.4: catalog, page tree, one page per entry
/// of `pages` showing its text in Helvetica, an Info dictionary with
/// `title`, and a cross-reference table with exact byte offsets.
fn make_pdf(pages: &[&str], title: &str) -> Vec<u8> {
    let n = pages.len();
    // Objects: 1 catalog, 2 pages, 3 font, 4 info, then (page, content) pairs.
    let mut objects: Vec<String> = Vec::new();
    objects.push("<< /Type /Catalog /Pages 2 0 R >>".into());
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 5 + 2 * i)).collect();
    objects.push(format!(
        "<< /Type /Pages /Kids [{}] /Count {n} >>",
        kids.join(" ")
    ));
    objects.push(
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".into(),
    );
    objects.push(format!(
        "<< /Title ({}) /Producer (builtin_document test) >>",
        pdf_string(title)
    ));
    for (i, text) in pages.iter().enumerate() {
        let content_id = 6 + 2 * i;
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R /Resources << /Font << /F1 3 0 R >> >> >>"
        ));
        let mut stream = String::from("BT\n/F1 12 Tf\n72 720 Td\n");
        for (j, line) in text.lines().enumerate() {
            if j > 0 {
                stream.push_str("0 -16 Td\n");
            }
            stream.push_str(&format!("({}) Tj\n", pdf_string(line)));
        }
        stream.push_str("ET");
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}\nendstream",
            stream.len()
        ));
    }
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R /Info 4 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

const ARTICLE_HTML: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Tidal energy in 2026</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/news">News</a> | <a href="/login">Log in</a></nav>
<div class="sidebar ad">Buy now! Limited offer on everything.</div>
<article>
<h1>Tidal energy in 2026</h1>
<p>Tidal power stations turn the rise and fall of the sea into electricity. Unlike wind and sun, the tides are predictable years ahead, which makes them attractive for grid operators planning reserve capacity.</p>
<p>The largest new installation opened this spring in a narrow strait where the current reaches four metres per second. Its turbines sit on the sea bed and rotate slowly enough that fish pass between the blades.</p>
<p>Critics point to the cost per megawatt-hour, which is still higher than offshore wind, and to the maintenance burden of machinery that lives under salt water all year.</p>
</article>
<footer>Copyright 2026 Example News. All rights reserved.</footer>
</body></html>"#;

fn hint(name: &str) -> DocumentHint<'_> {
    DocumentHint {
        name: Some(name),
        ..DocumentHint::default()
    }
}

fn ok(bytes: &[u8], name: &str) -> document::Extracted {
    extract(bytes, &hint(name), &ExtractLimits::DEFAULT).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn malformed(bytes: &[u8], name: &str) -> (DocumentFormat, String) {
    match extract(bytes, &hint(name), &ExtractLimits::DEFAULT) {
        Err(ExtractError::Malformed { format, detail }) => (format, detail),
        other => panic!("{name}: expected Malformed, got {other:?}"),
    }
}

// ------------------------------------------------------- each format

#[test]
fn extracts_plain_text_and_utf16() {
    let out = ok("line one\nline two — ünïcode\n".as_bytes(), "notes.txt");
    assert_eq!(out.format, DocumentFormat::Text);
    assert_eq!(out.text, "line one\nline two — ünïcode\n");
    assert!(!out.truncated);
    assert_eq!(out.total_chars, Some(out.chars));
    // UTF-16 with a BOM is decoded.
    let mut utf16 = vec![0xFF, 0xFE];
    for unit in "héllo".encode_utf16() {
        utf16.extend_from_slice(&unit.to_le_bytes());
    }
    assert_eq!(ok(&utf16, "le.txt").text, "héllo");
}

#[test]
fn extracts_markdown_with_its_title() {
    let md = "Intro line\n\n# Release notes\n\n- fixed *everything*\n";
    let out = ok(md.as_bytes(), "docs/NOTES.md");
    assert_eq!(out.format, DocumentFormat::Markdown);
    assert_eq!(out.title.as_deref(), Some("Release notes"));
    assert!(out.text.contains("- fixed *everything*"));
}

#[test]
fn extracts_readable_text_from_html() {
    let out = ok(ARTICLE_HTML.as_bytes(), "page.html");
    assert_eq!(out.format, DocumentFormat::Html);
    assert_eq!(out.title.as_deref(), Some("Tidal energy in 2026"));
    assert!(out.text.contains("predictable years ahead"), "{}", out.text);
    assert!(out.text.contains("maintenance burden"));
    assert!(!out.text.contains("<p>"), "no markup in readable text");
    assert!(
        !out.text.contains("Buy now"),
        "boilerplate removed: {}",
        out.text
    );
    // A short page that readability cannot score still gives its text.
    let short = ok(
        b"<html><body><p>Just one short line.</p></body></html>",
        "s.htm",
    );
    assert!(
        short.text.contains("Just one short line."),
        "{}",
        short.text
    );
    // A declared legacy charset is honoured.
    let latin1 = b"<html><head><meta charset=\"iso-8859-1\"></head><body><p>caf\xe9 cr\xe8me</p></body></html>";
    assert!(ok(latin1, "l.html").text.contains("café crème"));
}

#[test]
fn extracts_json_as_pretty_text() {
    let out = ok(br#"{"b":[1,2],"a":{"c":"d"}}"#, "data.json");
    assert_eq!(out.format, DocumentFormat::Json);
    assert!(out.text.contains("\"c\": \"d\""), "{}", out.text);
    assert!(out.text.contains('\n'));
}

#[test]
fn extracts_csv_rows() {
    let csv = "name,qty,note\nbolts,40,\"with, comma\"\nnuts,12,\"two\nlines\"\n";
    let out = ok(csv.as_bytes(), "stock.csv");
    assert_eq!(out.format, DocumentFormat::Csv);
    assert_eq!(out.rows, Some(3));
    assert_eq!(
        out.text,
        "name | qty | note\nbolts | 40 | with, comma\nnuts | 12 | two lines\n"
    );
}

#[test]
fn extracts_a_real_pdf() {
    let pdf = make_pdf(
        &[
            "Quarterly report (Q3)\nRevenue grew by 12 percent.",
            "Page two: outlook for Q4.",
        ],
        "Quarterly report",
    );
    let out = ok(&pdf, "report.pdf");
    assert_eq!(out.format, DocumentFormat::Pdf);
    assert_eq!(out.pages, Some(2));
    assert_eq!(out.title.as_deref(), Some("Quarterly report"));
    assert!(out.text.contains("Quarterly report (Q3)"), "{:?}", out.text);
    assert!(
        out.text.contains("Revenue grew by 12 percent."),
        "{:?}",
        out.text
    );
    assert!(out.text.contains("outlook for Q4"), "{:?}", out.text);
    assert!(!out.truncated);
    // Detected by content, without a name or type.
    let sniffed =
        extract(&pdf, &DocumentHint::default(), &ExtractLimits::DEFAULT).expect("sniffed");
    assert_eq!(sniffed.format, DocumentFormat::Pdf);
}

#[test]
fn format_comes_from_explicit_choice_mime_name_then_content() {
    let text = b"{\"a\": 1}";
    let as_text = extract(
        text,
        &DocumentHint {
            name: Some("x.json"),
            mime: None,
            format: Some(DocumentFormat::Text),
        },
        &ExtractLimits::DEFAULT,
    )
    .expect("text");
    assert_eq!(as_text.format, DocumentFormat::Text);
    let by_mime = extract(
        b"a,b\n1,2\n",
        &DocumentHint {
            name: Some("upload.bin"),
            mime: Some("text/csv; charset=utf-8"),
            format: None,
        },
        &ExtractLimits::DEFAULT,
    )
    .expect("csv");
    assert_eq!(by_mime.format, DocumentFormat::Csv);
    for (bytes, format) in [
        (
            &b"<!DOCTYPE html><html><body><p>x</p></body></html>"[..],
            DocumentFormat::Html,
        ),
        (&b"[1, 2]"[..], DocumentFormat::Json),
        (&b"[not json"[..], DocumentFormat::Text),
        (&b"plain words"[..], DocumentFormat::Text),
    ] {
        let out = extract(bytes, &DocumentHint::default(), &ExtractLimits::DEFAULT).expect("sniff");
        assert_eq!(out.format, format);
    }
}

// -------------------------------------------------------- truncation

#[test]
fn output_bound_at_below_and_above() {
    let max = ExtractLimits::DEFAULT.max_chars;
    assert_eq!(max, 40_000);
    // Multi-byte characters: the bound counts characters, not bytes.
    let at = "é".repeat(max);
    let out = ok(at.as_bytes(), "a.txt");
    assert!(!out.truncated);
    assert_eq!((out.chars, out.total_chars), (max, Some(max)));
    let below = ok("é".repeat(max - 1).as_bytes(), "b.txt");
    assert!(!below.truncated);
    let above = ok("é".repeat(max + 1).as_bytes(), "c.txt");
    assert!(above.truncated);
    assert_eq!((above.chars, above.total_chars), (max, Some(max + 1)));
    assert_eq!(above.text.chars().count(), max);
}

#[test]
fn truncation_is_reported_for_every_format() {
    let limits = ExtractLimits {
        max_chars: 50,
        ..ExtractLimits::DEFAULT
    };
    let long = "word ".repeat(200);
    let csv: String = (0..100).map(|i| format!("{i},value {i}\n")).collect();
    let json = format!(
        "{{\"items\": [{}]}}",
        (0..100)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let pdf = make_pdf(&[&long, "second page"], "Long");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (long.clone().into_bytes(), "t.txt"),
        (format!("# T\n{long}").into_bytes(), "t.md"),
        (ARTICLE_HTML.as_bytes().to_vec(), "t.html"),
        (json.into_bytes(), "t.json"),
        (csv.into_bytes(), "t.csv"),
        (pdf, "t.pdf"),
    ];
    for (bytes, name) in cases {
        let out = extract(&bytes, &hint(name), &limits).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(out.truncated, "{name} must report truncation");
        assert!(
            out.text.chars().count() <= 50,
            "{name}: {} chars",
            out.text.chars().count()
        );
        assert_eq!(out.chars, out.text.chars().count(), "{name}");
    }
    // Only the first pages of a long PDF are read.
    let pages = ExtractLimits {
        max_pdf_pages: 1,
        ..ExtractLimits::DEFAULT
    };
    let pdf = make_pdf(&["first page", "second page"], "Two");
    let out = extract(&pdf, &hint("two.pdf"), &pages).expect("pdf");
    assert!(out.truncated);
    assert_eq!(out.pages, Some(2));
    assert!(out.text.contains("first page") && !out.text.contains("second page"));
}

#[test]
fn input_size_at_below_and_above() {
    let limits = ExtractLimits {
        max_input_bytes: 1_000,
        ..ExtractLimits::DEFAULT
    };
    assert!(extract(&[b'a'; 1_000], &hint("a.txt"), &limits).is_ok());
    assert!(extract(&[b'a'; 999], &hint("a.txt"), &limits).is_ok());
    assert_eq!(
        extract(&[b'a'; 1_001], &hint("a.txt"), &limits),
        Err(ExtractError::TooLarge {
            len: 1_001,
            limit: 1_000
        })
    );
}

// ---------------------------------------------------------- malformed

#[test]
fn malformed_input_of_each_format_is_a_typed_error() {
    let (f, d) = malformed(b"abc \xff\xfe def", "bad.txt");
    assert_eq!(f, DocumentFormat::Text);
    assert!(d.contains("byte 4"), "{d}");
    let (f, d) = malformed(b"# Title\n\0\0\0binary", "bad.md");
    assert_eq!(f, DocumentFormat::Markdown);
    assert!(d.contains("NUL"), "{d}");
    let (f, _) = malformed(b"<html><body><p>caf\xc3(</p></body></html>", "bad.html");
    assert_eq!(f, DocumentFormat::Html);
    let (f, d) = malformed(b"{\"a\": 1,\n \"b\": }", "bad.json");
    assert_eq!(f, DocumentFormat::Json);
    assert!(d.contains("line 2"), "{d}");
    let (f, d) = malformed(b"a,b,c\n1,2,3\n4,5\n", "bad.csv");
    assert_eq!(f, DocumentFormat::Csv);
    assert!(d.contains("line 3") && d.contains("2 fields"), "{d}");
    let (f, _) = malformed(b"a,b\n1,\xff\n", "bad2.csv");
    assert_eq!(f, DocumentFormat::Csv);
    // PDF: no header; a header followed by garbage; a real PDF cut in half.
    let (f, d) = malformed(b"this is not a pdf", "bad.pdf");
    assert_eq!(f, DocumentFormat::Pdf);
    assert!(d.contains("%PDF-"), "{d}");
    let (f, _) = malformed(b"%PDF-1.7\n\x00\x01garbage without objects", "bad2.pdf");
    assert_eq!(f, DocumentFormat::Pdf);
    let pdf = make_pdf(&["Cut short"], "Cut");
    let cut = &pdf[..pdf.len() / 3];
    assert!(
        matches!(
            extract(cut, &hint("cut.pdf"), &ExtractLimits::DEFAULT),
            Err(ExtractError::Malformed { .. } | ExtractError::NoText { .. })
        ),
        "a truncated PDF is refused"
    );
    // Messages say what was wrong.
    assert!(
        ExtractError::Malformed {
            format: DocumentFormat::Csv,
            detail: "x".into()
        }
        .to_string()
        .contains("not valid csv")
    );
}

#[test]
fn documents_without_text_and_unsupported_types_are_refused() {
    let empty_pdf = make_pdf(&[""], "Blank");
    assert!(matches!(
        extract(&empty_pdf, &hint("blank.pdf"), &ExtractLimits::DEFAULT),
        Err(ExtractError::NoText {
            format: DocumentFormat::Pdf,
            ..
        })
    ));
    assert!(matches!(
        extract(
            b"<html><body></body></html>",
            &hint("e.html"),
            &ExtractLimits::DEFAULT
        ),
        Err(ExtractError::NoText { .. })
    ));
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    for (bytes, h) in [
        (&png[..], DocumentHint::default()),
        (&b"PK\x03\x04zip"[..], hint("report.docx")),
        (&b"some bytes"[..], hint("archive.rar")),
        (
            &b"some bytes"[..],
            DocumentHint {
                mime: Some("image/webp"),
                ..DocumentHint::default()
            },
        ),
    ] {
        match extract(bytes, &h, &ExtractLimits::DEFAULT) {
            Err(e @ ExtractError::Unsupported { .. }) => {
                assert!(
                    e.to_string().contains("PDF"),
                    "the message lists what is supported: {e}"
                );
            }
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }
    // An HTML page past the element limit.
    let limits = ExtractLimits {
        html: HtmlLimits {
            max_elements: 50,
            ..HtmlLimits::DEFAULT
        },
        ..ExtractLimits::DEFAULT
    };
    let many = format!("<html><body>{}</body></html>", "<p>x</p>".repeat(100));
    assert_eq!(
        extract(many.as_bytes(), &hint("m.html"), &limits),
        Err(ExtractError::TooComplex {
            refusal: HtmlRefusal::TooManyElements { limit: 50 }
        })
    );
}

// ------------------------------------------------------------- actor

/// Documents kept in the kernel's memory storage: bytes as blobs, a path
/// index beside them. Counts reads so tests can prove nothing was read.
struct BlobDocuments {
    storage: Arc<MemoryStorage>,
    index: BTreeMap<String, (String, Option<String>, DocumentOrigin)>,
    reads: AtomicUsize,
}

#[async_trait::async_trait]
impl DocumentSource for BlobDocuments {
    async fn read(
        &self,
        _session: &SessionId,
        path: &str,
        max_bytes: usize,
    ) -> Result<SourceDocument, DocumentSourceError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let Some((hash, mime, origin)) = self.index.get(path) else {
            return Err(DocumentSourceError::NotFound { path: path.into() });
        };
        let bytes = self
            .storage
            .get_blob(hash)
            .await
            .map_err(|e| DocumentSourceError::Unavailable(e.to_string()))?
            .ok_or_else(|| DocumentSourceError::NotFound { path: path.into() })?;
        if bytes.len() > max_bytes {
            return Err(DocumentSourceError::TooLarge {
                path: path.into(),
                size: bytes.len() as u64,
                limit: max_bytes,
            });
        }
        Ok(SourceDocument {
            bytes,
            mime: mime.clone(),
            origin: *origin,
        })
    }
}

#[test]
fn actor_extracts_with_a_verified_capability_and_labels_trust_by_origin() {
    let mem = MemoryHost::fifo(5);
    let host = mem.host();
    let exec = mem.executor().clone();
    let pdf = make_pdf(&["Attached invoice: 42 EUR"], "Invoice");
    let files: Vec<(&str, Vec<u8>, Option<&str>, DocumentOrigin)> = vec![
        (
            "attachments/invoice.pdf",
            pdf,
            Some("application/pdf"),
            DocumentOrigin::External,
        ),
        (
            "notes/todo.md",
            b"# Todo\n- call Ana\n".to_vec(),
            None,
            DocumentOrigin::User,
        ),
    ];
    let mut index = BTreeMap::new();
    for (path, bytes, mime, origin) in files {
        let blob = exec
            .block_on(
                host.storage
                    .put_blob(&agent_capabilities::sha256_hex(&bytes), bytes),
            )
            .expect("ran")
            .expect("stored");
        index.insert(
            path.to_owned(),
            (blob.hash, mime.map(str::to_owned), origin),
        );
    }
    let source = Arc::new(BlobDocuments {
        storage: mem.storage().clone(),
        index,
        reads: AtomicUsize::new(0),
    });
    let addr = DocumentTool::new(host.executor.clone(), host.clock.clone(), source.clone())
        .spawn(None)
        .expect("spawn");
    let def = document::definition();
    let authority = authority();
    let expires = MEMORY_HOST_START_WALL_MS + 60_000;
    let call = |id: &str, path: &str, extra: serde_json::Value, scope: TargetScope| {
        let mut args = json!({ "path": path });
        if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
            a.extend(e.clone());
        }
        let cap = authority.mint(grant(&def, scope, Uses::ForRun, expires));
        let inv = invocation(
            draft(&def, id, args, Target::WorkspacePath { path: path.into() }),
            cap,
            &authority,
        );
        exec.block_on(addr.ask(|reply| ToolMsg::Invoke {
            invocation: inv,
            reply,
        }))
        .expect("ran")
        .expect("answered")
    };
    let whole = || TargetScope::Workspace {
        prefix: String::new(),
    };

    // An attachment: its text is external_untrusted.
    let result = call("d1", "attachments/invoice.pdf", json!({}), whole());
    let ToolResult::Success(s) = &result else {
        panic!("{result:?}")
    };
    assert_eq!(s.trust, Trust::ExternalUntrusted);
    assert!(s.content["text"].as_str().unwrap_or("").contains("42 EUR"));
    assert_eq!(s.content["format"], json!("pdf"));
    assert_eq!(s.references.len(), 1);
    assert_eq!(s.references[0].id, "attachments/invoice.pdf");

    // A file the person wrote: user trust; max_chars bounds and reports.
    let result = call("d2", "notes/todo.md", json!({"max_chars": 6}), whole());
    let ToolResult::Success(s) = &result else {
        panic!("{result:?}")
    };
    assert_eq!(s.trust, Trust::User);
    assert_eq!(s.content["text"], json!("# Todo"));
    assert_eq!(s.content["truncated"], json!(true));

    // A capability scoped to another folder grants nothing, and the store is not read.
    let before = source.reads.load(Ordering::SeqCst);
    let result = call(
        "d3",
        "attachments/invoice.pdf",
        json!({}),
        TargetScope::Workspace {
            prefix: "notes".into(),
        },
    );
    let ToolResult::Error(e) = &result else {
        panic!("{result:?}")
    };
    assert_eq!(e.code, "capability_refused");
    assert_eq!(source.reads.load(Ordering::SeqCst), before);

    // A missing file and a bad format argument.
    let result = call("d4", "nope.txt", json!({}), whole());
    let ToolResult::Error(e) = &result else {
        panic!("{result:?}")
    };
    assert_eq!(e.code, "document_not_found");
    let result = call("d5", "notes/todo.md", json!({"format": "docx"}), whole());
    let ToolResult::Error(e) = &result else {
        panic!("{result:?}")
    };
    assert_eq!(e.code, "invalid_arguments");

    // Reading an attachment as the wrong format is a typed, labelled failure.
    let result = call(
        "d6",
        "attachments/invoice.pdf",
        json!({"format": "json"}),
        whole(),
    );
    let ToolResult::Error(e) = &result else {
        panic!("{result:?}")
    };
    assert_eq!(e.code, "document_malformed");
    assert_eq!(e.trust, Trust::ExternalUntrusted);
}

#[test]
fn definition_is_a_local_read_of_one_path() {
    let def = document::definition();
    assert_eq!(def.name, "extract_document");
    assert_eq!(
        def.effects,
        [agent_capabilities::EffectClass::ReadLocal]
            .into_iter()
            .collect()
    );
    assert_eq!(
        def.target,
        agent_kernel::protocol::TargetRule::WorkspacePathArg {
            field: "path".into()
        }
    );
    assert!(jsonschema::validator_for(&def.parameters).is_ok());
}

#[test]
fn pdf_page_content_bound_below_and_above() {
    let pdf = make_pdf(&["Bounded page content"], "Bound");
    // The page's content stream: "BT\n/F1 12 Tf\n72 720 Td\n(Bounded page content) Tj\nET".
    let content_len = "BT\n/F1 12 Tf\n72 720 Td\n(Bounded page content) Tj\nET".len();
    let with = |bytes: usize| ExtractLimits {
        max_pdf_page_bytes: bytes,
        ..ExtractLimits::DEFAULT
    };
    assert!(extract(&pdf, &hint("b.pdf"), &with(content_len * 4)).is_ok());
    match extract(&pdf, &hint("b.pdf"), &with(content_len / 2)) {
        Err(ExtractError::Malformed {
            format: DocumentFormat::Pdf,
            detail,
        }) => {
            assert!(detail.contains("no page"), "{detail}");
        }
        other => panic!("expected the page bound to refuse, got {other:?}"),
    }
}

// ------------------------------------------------ hostile HTML, deadline

/// A `DocumentTool` over `files` (all external) on the memory host, and a
/// way to call it on one path.
struct DocSetup {
    mem: MemoryHost,
    addr: agent_kernel::protocol::ToolAddr,
    authority: agent_capabilities::Authority,
}

fn doc_setup(files: Vec<(&str, Vec<u8>)>, configure: impl FnOnce(&mut DocumentTool)) -> DocSetup {
    let mem = MemoryHost::fifo(11);
    let host = mem.host();
    let exec = mem.executor().clone();
    let mut index = BTreeMap::new();
    for (path, bytes) in files {
        let blob = exec
            .block_on(
                host.storage
                    .put_blob(&agent_capabilities::sha256_hex(&bytes), bytes),
            )
            .expect("ran")
            .expect("stored");
        index.insert(
            path.to_owned(),
            (
                blob.hash,
                Some("text/html".to_owned()),
                DocumentOrigin::External,
            ),
        );
    }
    let source = Arc::new(BlobDocuments {
        storage: mem.storage().clone(),
        index,
        reads: AtomicUsize::new(0),
    });
    let mut tool = DocumentTool::new(host.executor.clone(), host.clock.clone(), source);
    configure(&mut tool);
    let addr = tool.spawn(None).expect("spawn");
    DocSetup {
        mem,
        addr,
        authority: authority(),
    }
}

impl DocSetup {
    /// Call `extract_document` on `path`; the clock jumps to the next
    /// deadline whenever everything waits.
    fn call(&self, id: &str, path: &str) -> ToolResult {
        let def = document::definition();
        let cap = self.authority.mint(grant(
            &def,
            TargetScope::Workspace {
                prefix: String::new(),
            },
            Uses::ForRun,
            MEMORY_HOST_START_WALL_MS + 3_600_000,
        ));
        let inv = invocation(
            draft(
                &def,
                id,
                json!({ "path": path }),
                Target::WorkspacePath { path: path.into() },
            ),
            cap,
            &self.authority,
        );
        self.mem
            .block_on_advancing(self.addr.ask(|reply| ToolMsg::Invoke {
                invocation: inv,
                reply,
            }))
            .expect("ran")
            .expect("answered")
    }
}

/// Issue 12, item 1: HTML nested 10x, 100x and 1,000x deeper than the depth
/// limit is the typed `document_too_complex` failure naming the limit; the
/// extraction is finished when the answer comes (its slot is free again),
/// and an ordinary page is read afterwards.
#[test]
fn hostile_nesting_is_a_typed_failure_and_the_work_is_done() {
    let depth = HtmlLimits::DEFAULT.max_depth;
    let mut files: Vec<(&str, Vec<u8>)> = vec![(
        "fine.html",
        b"<html><head><title>Fine</title></head><body><p>An ordinary page with a paragraph of words.</p></body></html>"
            .to_vec(),
    )];
    let names = ["deep10.html", "deep100.html", "deep1000.html"];
    for (name, factor) in names.iter().zip([10, 100, 1_000]) {
        files.push((
            name,
            format!("<html><body>{}", "<div>".repeat(depth * factor)).into_bytes(),
        ));
    }
    let slots = ExtractionSlots::new(2);
    let s = doc_setup(files, |tool| tool.slots = slots.clone());
    for (i, name) in names.iter().enumerate() {
        let result = s.call(&format!("deep-{i}"), name);
        let ToolResult::Error(e) = &result else {
            panic!("{name}: {result:?}")
        };
        assert_eq!(e.code, "document_too_complex", "{name}");
        assert!(
            e.message.contains(&format!("more than {depth} deep")),
            "{}",
            e.message
        );
        assert_eq!(e.trust, Trust::ExternalUntrusted);
        assert_eq!(
            slots.free(),
            slots.count(),
            "{name}: extraction still running"
        );
    }
    let result = s.call("fine", "fine.html");
    let ToolResult::Success(ok) = &result else {
        panic!("{result:?}")
    };
    assert!(
        ok.content["text"]
            .as_str()
            .unwrap_or("")
            .contains("ordinary page")
    );
}

/// The deadline of `extract_document` and its bounded slots: with the only
/// slot taken, a call waits, and fails `document_timeout` exactly at its
/// deadline (the manual clock moved by the deadline, no less); once the
/// slot is free the same call succeeds.
#[test]
fn a_call_waiting_past_its_deadline_times_out_and_slots_bound_extractions() {
    let slots = ExtractionSlots::new(1);
    let deadline = std::time::Duration::from_secs(5);
    let page =
        b"<html><body><p>A page that waits for a free extraction slot.</p></body></html>".to_vec();
    let s = doc_setup(vec![("wait.html", page)], |tool| {
        tool.slots = slots.clone();
        tool.deadline = deadline;
    });
    let held = s
        .mem
        .block_on(slots.acquire())
        .expect("ran")
        .expect("a slot");
    assert_eq!(slots.free(), 0);
    let start = s.mem.clock().monotonic();
    let result = s.call("waits", "wait.html");
    let ToolResult::Error(e) = &result else {
        panic!("{result:?}")
    };
    assert_eq!(e.code, "document_timeout");
    assert!(e.retryable);
    assert_eq!(s.mem.clock().monotonic() - start, deadline);
    drop(held);
    assert_eq!(slots.free(), 1);
    let result = s.call("free", "wait.html");
    assert!(matches!(result, ToolResult::Success(_)), "{result:?}");
    assert_eq!(slots.free(), 1);
}

#[test]
fn html_limits_are_the_shared_ones() {
    assert_eq!(ExtractLimits::DEFAULT.html, HtmlLimits::DEFAULT);
}
