//! The Workers of the heavy built-ins (S5.7) in headless Chromium: scripts
//! run in QuickJS inside a dedicated Worker; the soft deadline (interrupt
//! handler) keeps the Worker, the hard deadline terminates and replaces it;
//! PDFs are read in a Worker too. The Worker runs this test module itself,
//! which links the Worker module's entry points (`agent-worker-module`).
#![cfg(all(target_arch = "wasm32", feature = "runtime"))]

extern crate agent_worker_module;

use std::rc::Rc;
use std::time::Duration;

use agent_host_browser::pdf_reader::WorkerPdfReader;
use agent_host_browser::worker::{
    ModuleWorker, ScriptRequest, ScriptResponse, WorkerError, WorkerModule, WorkerSource,
};
use agent_tools::builtin::document::{DocumentFormat, ExtractLimits, PdfReadError, PdfReader};
use agent_tools::builtin::javascript::JsLimits;
use serde_json::json;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

/// The glue the test page itself imports (`./wasm-bindgen-test`).
fn test_glue_url() -> String {
    let href = web_sys::window()
        .expect("window")
        .location()
        .href()
        .expect("href");
    web_sys::Url::new_with_base("wasm-bindgen-test", &href)
        .expect("url")
        .href()
}

/// A Worker of this test module.
fn test_worker() -> ModuleWorker {
    let source = WorkerSource::new(WorkerModule::ThisModule {
        glue_url: test_glue_url(),
    });
    ModuleWorker::new(source, "agentrt-test")
}

fn request(code: &str, limits: JsLimits) -> ScriptRequest {
    ScriptRequest {
        code: code.to_owned(),
        input: json!({ "values": [1, 2, 3] }),
        limits: serde_json::to_value(limits).expect("limits"),
    }
}

#[wasm_bindgen_test]
async fn s5_7_worker_runs_scripts_and_has_no_network_apis() {
    let worker = test_worker();
    let out = worker
        .run(
            &request("input.values.reduce((a, b) => a + b, 0)", JsLimits::DEFAULT),
            Duration::from_secs(10),
        )
        .await
        .expect("the worker answers");
    match out {
        ScriptResponse::Ok { value, .. } => assert_eq!(value, json!(6)),
        other => panic!("expected a result, got {other:?}"),
    }
    let out = worker
        .run(
            &request(
                "[typeof fetch, typeof XMLHttpRequest, typeof importScripts, typeof WebSocket, typeof self, typeof setTimeout]",
                JsLimits::DEFAULT,
            ),
            Duration::from_secs(10),
        )
        .await
        .expect("answers");
    match out {
        ScriptResponse::Ok { value, .. } => assert_eq!(
            value,
            json!([
                "undefined",
                "undefined",
                "undefined",
                "undefined",
                "undefined",
                "undefined"
            ]),
            "no network, module or timer API reaches a script"
        ),
        other => panic!("expected a result, got {other:?}"),
    }
    assert_eq!(worker.workers_started(), 1);
}

/// The soft deadline: QuickJS's interrupt handler stops a spinning script
/// with `js_time_limit`; the Worker survives.
#[wasm_bindgen_test]
async fn s5_7_soft_deadline_stops_a_spin_and_keeps_the_worker() {
    let worker = test_worker();
    let limits = JsLimits {
        time_ms: 100,
        ..JsLimits::DEFAULT
    };
    let out = worker
        .run(&request("for (;;) {}", limits), Duration::from_secs(10))
        .await
        .expect("answers");
    assert!(
        matches!(&out, ScriptResponse::Err { code, .. } if code == "js_time_limit"),
        "{out:?}"
    );
    let out = worker
        .run(
            &request("'still here'", JsLimits::DEFAULT),
            Duration::from_secs(10),
        )
        .await
        .expect("answers");
    assert!(matches!(out, ScriptResponse::Ok { .. }), "{out:?}");
    assert_eq!(worker.workers_started(), 1, "no replacement was needed");
}

/// The hard deadline: past it the Worker is terminated and replaced, and
/// the next script runs in the new Worker.
#[wasm_bindgen_test]
async fn s5_7_hard_deadline_terminates_and_replaces_the_worker() {
    let worker = test_worker();
    // Warm up, so the deadline measures the script alone.
    worker
        .run(&request("0", JsLimits::DEFAULT), Duration::from_secs(10))
        .await
        .expect("warm up");
    let generous = JsLimits {
        time_ms: 60_000,
        ..JsLimits::DEFAULT
    };
    let err = worker
        .run(
            &request("for (;;) {}", generous),
            Duration::from_millis(300),
        )
        .await
        .expect_err("terminated");
    assert_eq!(err, WorkerError::Terminated(Duration::from_millis(300)));
    assert_eq!(worker.workers_started(), 2, "replaced at once");
    let out = worker
        .run(
            &request("40 + 2", JsLimits::DEFAULT),
            Duration::from_secs(10),
        )
        .await
        .expect("the replacement answers");
    assert_eq!(
        match out {
            ScriptResponse::Ok { value, .. } => value,
            other => panic!("{other:?}"),
        },
        json!(42)
    );
}

/// The stack bound (S5.7): deep recursion is a typed error, not a trap.
#[wasm_bindgen_test]
async fn s5_7_deep_recursion_is_a_stack_limit_error() {
    let worker = test_worker();
    let out = worker
        .run(
            &request(
                "function f(n) { return f(n + 1) + 1; } f(0)",
                JsLimits::DEFAULT,
            ),
            Duration::from_secs(10),
        )
        .await
        .expect("answers");
    assert!(
        matches!(&out, ScriptResponse::Err { code, .. } if code == "js_stack_limit"),
        "{out:?}"
    );
}

/// S2.5 (issue 17 item 4): a Worker that dies with a script in flight
/// answers `Lost` at once, not at the hard deadline, so the run is
/// interrupted (`executor_lost`) instead of waiting; the next script gets a
/// new Worker.
#[wasm_bindgen_test]
async fn s2_5_a_worker_that_dies_mid_script_answers_lost_at_once() {
    let worker = Rc::new(test_worker());
    worker
        .run(&request("0", JsLimits::DEFAULT), Duration::from_secs(10))
        .await
        .expect("warm up");
    let generous = JsLimits {
        time_ms: 60_000,
        ..JsLimits::DEFAULT
    };
    let killer = worker.clone();
    wasm_bindgen_futures::spawn_local(async move {
        agent_host_browser::platform::sleep(Duration::from_millis(300)).await;
        killer.kill("discarded by the browser");
    });
    let started = js_sys::Date::now();
    let err = worker
        .run(&request("for (;;) {}", generous), Duration::from_secs(60))
        .await
        .expect_err("the Worker died");
    assert!(matches!(err, WorkerError::Lost(_)), "{err:?}");
    assert!(
        js_sys::Date::now() - started < 30_000.0,
        "answered when the Worker died, not at the hard deadline"
    );
    let out = worker
        .run(
            &request("40 + 2", JsLimits::DEFAULT),
            Duration::from_secs(10),
        )
        .await
        .expect("a new Worker answers");
    assert!(matches!(out, ScriptResponse::Ok { .. }), "{out:?}");
    assert_eq!(worker.workers_started(), 2);
}

/// A one-page PDF 1.4 showing `text` in Helvetica, with exact offsets.
fn one_page_pdf(text: &str, title: &str) -> Vec<u8> {
    let stream = format!("BT\n/F1 12 Tf\n72 720 Td\n({text}) Tj\nET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [5 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
        format!("<< /Title ({title}) >>"),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R /Resources << /Font << /F1 3 0 R >> >> >>".to_owned(),
        format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
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
            "trailer\n<< /Size {} /Root 1 0 R /Info 4 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// Issue 18 item 4: `extract_document`'s PDF reader runs in the Worker
/// module, not in the page's: a real PDF's text and title come back from
/// the Worker, a malformed one is a typed `document_malformed`, and the
/// same Worker reads the next file.
#[wasm_bindgen_test]
async fn pdfs_are_read_in_the_worker_and_a_malformed_one_is_a_typed_error() {
    let worker = Rc::new(test_worker());
    let reader = WorkerPdfReader::new(worker.clone());
    let pdf = one_page_pdf("Quarterly numbers rose", "Report");
    let extracted = reader
        .read_pdf(pdf, ExtractLimits::DEFAULT, Duration::from_secs(30))
        .await
        .expect("the Worker reads the PDF");
    assert_eq!(extracted.format, DocumentFormat::Pdf);
    assert!(
        extracted.text.contains("Quarterly numbers rose"),
        "{extracted:?}"
    );
    assert_eq!(extracted.title.as_deref(), Some("Report"));

    let mut broken = b"%PDF-1.4\n".to_vec();
    broken.extend_from_slice(&[0xff; 64]);
    let err = reader
        .read_pdf(broken, ExtractLimits::DEFAULT, Duration::from_secs(30))
        .await
        .expect_err("not a PDF inside");
    assert!(
        matches!(&err, PdfReadError::Failed { code, .. } if code == "document_malformed"),
        "{err:?}"
    );
    let again = reader
        .read_pdf(
            one_page_pdf("second file", "Two"),
            ExtractLimits::DEFAULT,
            Duration::from_secs(30),
        )
        .await
        .expect("the next PDF is read");
    assert!(again.text.contains("second file"));
    assert_eq!(
        worker.workers_started(),
        1,
        "a malformed file needs no new Worker"
    );
}

/// One `<p>` with `count` distinct attributes.
fn attribute_page(count: usize) -> String {
    let mut html = String::from("<html><body><p");
    for i in 0..count {
        html.push_str(&format!(" a{i:x}"));
    }
    html.push_str(">text</p></body></html>");
    html
}

fn readable_request(
    html: String,
    limits: agent_tools::builtin::document::HtmlLimits,
) -> agent_tools::builtin::document::ReadableRequest {
    agent_tools::builtin::document::ReadableRequest {
        html,
        url: None,
        style: agent_tools::builtin::document::TextStyle::Formatted,
        limits,
        max_chars: 40_000,
    }
}

/// Issue 32: HTML's readable text is extracted in a Worker; the finding's
/// attribute page is refused by the pre-scan there; with the attribute
/// limits lifted its quadratic parse is stopped at the deadline by
/// terminating the Worker, and the next small page is read at once.
#[wasm_bindgen_test]
async fn html_is_extracted_in_the_worker_and_a_parse_past_its_deadline_is_terminated() {
    use agent_host_browser::html_extractor::WorkerHtmlExtractor;
    use agent_tools::builtin::document::{
        ExtractorError, HtmlLimits, HtmlRefusal, ReadableError, ReadableExtractor,
    };
    let worker = Rc::new(test_worker());
    let extractor = WorkerHtmlExtractor::new(worker.clone());
    let small = "<html><head><title>Small</title></head><body><article><p>A small page read in the Worker after the hostile one.</p></article></body></html>";
    let page = extractor
        .extract(
            readable_request(small.into(), HtmlLimits::DEFAULT),
            Duration::from_secs(30),
        )
        .await
        .expect("the small page is read");
    assert!(page.text.contains("read in the Worker"), "{page:?}");
    let refused = extractor
        .extract(
            readable_request(attribute_page(200_000), HtmlLimits::DEFAULT),
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(
        refused,
        Err(ExtractorError::Readable(ReadableError::Refused(
            HtmlRefusal::TooManyAttributesOnElement {
                limit: HtmlLimits::DEFAULT.max_attributes_per_element
            }
        )))
    );
    let started = worker.workers_started();
    let lifted = HtmlLimits {
        max_attributes_per_element: usize::MAX,
        max_attributes: usize::MAX,
        ..HtmlLimits::DEFAULT
    };
    let stopped = extractor
        .extract(
            readable_request(attribute_page(200_000), lifted),
            Duration::from_secs(1),
        )
        .await;
    assert_eq!(
        stopped,
        Err(ExtractorError::TimedOut { deadline_ms: 1_000 })
    );
    // Terminated and replaced: a new Worker serves the next page.
    assert_eq!(worker.workers_started(), started + 1);
    let page = extractor
        .extract(
            readable_request(small.into(), HtmlLimits::DEFAULT),
            Duration::from_secs(30),
        )
        .await
        .expect("the next small page is read");
    assert!(page.text.contains("read in the Worker"), "{page:?}");
}
