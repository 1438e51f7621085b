//! Outside documents are read natively in a sandbox process that can be
//! stopped (issue 32, item 3), tested with the real `agentrt` binary and
//! real files built here:
//!
//! - the attribute pages of the finding (one `<p>` with 200,000 and with
//!   1.4 million distinct attributes) are refused at once by the pre-scan;
//!   with the attribute limits lifted, the parse is killed at the deadline
//!   (`TimedOut`), its process is gone from `/proc` within a second (the
//!   CPU is idle), and the next small page is served by the same sandbox;
//! - the PDF bomb of the finding (one FlateDecode object stream holding an
//!   array of 131 million integers) and its ASCIIHex-over-Flate variant are
//!   refused at once (`document_too_complex`); with the pre-scan limits
//!   lifted, `lopdf` reaches the child's 1 GiB address-space cap and the
//!   child aborts: a typed `document_too_complex`, the host alive and its
//!   own memory far below the cap, the next small PDF read at once;
//! - a sandbox that cannot start is a typed loss, never a panic.
#![cfg(target_os = "linux")] // reads /proc

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use agent_host_native::document_sandbox::{ADDRESS_SPACE_CAP, DocumentSandbox, SUBCOMMAND};
use agent_host_native::sandbox::SandboxCommand;
use agent_readable::{
    ExtractorError, HtmlLimits, HtmlRefusal, ReadableError, ReadableExtractor, ReadableRequest,
    TextStyle,
};
use agent_tools::builtin::document::{ExtractLimits, PdfLimits, PdfReadError, PdfReader};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

/// The tools' deadline (`DocumentTool::DEFAULT_DEADLINE`).
const DEADLINE: Duration = Duration::from_secs(30);

/// "At once" on a loaded two-core machine in a debug build: far below the
/// minutes of the findings.
const AT_ONCE: Duration = Duration::from_secs(20);

fn sandbox() -> DocumentSandbox {
    DocumentSandbox::new(DocumentSandbox::command(BIN), 1).expect("sandbox")
}

// ---------------------------------------------------------------------------
// processes
// ---------------------------------------------------------------------------

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Live document sandboxes of this process working in `workdir` (any
/// when `None`). The pool removes that directory once a child stands in
/// it, so `/proc/PID/cwd` reads its path with ` (deleted)` after it.
fn sandboxes_in_opt(workdir: Option<&Path>) -> BTreeSet<u32> {
    let mut found = BTreeSet::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if parent_of(pid) != Some(std::process::id()) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
        let removed =
            workdir.map(|w| std::path::PathBuf::from(format!("{} (deleted)", w.display())));
        if cmdline.split(|b| *b == 0).nth(1) == Some(SUBCOMMAND.as_bytes())
            && (workdir.is_none() || cwd == removed)
        {
            found.insert(pid);
        }
    }
    found
}

fn sandboxes_in(workdir: &Path) -> BTreeSet<u32> {
    sandboxes_in_opt(Some(workdir))
}

/// Wait until `pids` are all gone from `/proc` (killed and reaped), up to
/// `within`; true when they are.
fn all_gone_within(pids: &BTreeSet<u32>, within: Duration) -> bool {
    let start = Instant::now();
    loop {
        if pids
            .iter()
            .all(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        {
            return true;
        }
        if start.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Peak resident memory of this (the host's) process, in bytes.
fn own_peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("kB");
    kb * 1024
}

/// While `work` runs, watch for the sandbox's process and remember it.
async fn with_pids<T>(
    sandbox: &DocumentSandbox,
    work: impl std::future::Future<Output = T>,
) -> (T, BTreeSet<u32>) {
    let workdir = sandbox.workdir().to_path_buf();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let seen = seen.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                seen.lock().unwrap().extend(sandboxes_in(&workdir));
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let out = work.await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    watcher.join().unwrap();
    let pids = seen.lock().unwrap().clone();
    (out, pids)
}

// ---------------------------------------------------------------------------
// HTML
// ---------------------------------------------------------------------------

/// One `<p>` with `count` distinct attributes (names of base-36 digits).
fn attribute_page(count: usize) -> String {
    let mut html = String::with_capacity(count * 6 + 64);
    html.push_str("<html><body><p");
    for i in 0..count {
        html.push_str(" a");
        let mut n = i;
        loop {
            let digit = (n % 36) as u32;
            html.push(char::from_digit(digit, 36).unwrap());
            n /= 36;
            if n == 0 {
                break;
            }
        }
    }
    html.push_str(">text</p></body></html>");
    html
}

fn readable(html: String, limits: HtmlLimits) -> ReadableRequest {
    ReadableRequest {
        html,
        url: None,
        style: TextStyle::Formatted,
        limits,
        max_chars: 40_000,
    }
}

const SMALL_PAGE: &str = "<html><head><title>Small</title></head><body><article><p>A small page, served at once after the hostile one.</p></article></body></html>";

async fn small_page_is_served(sandbox: &DocumentSandbox) {
    let start = Instant::now();
    let page = sandbox
        .extract(readable(SMALL_PAGE.into(), HtmlLimits::DEFAULT), DEADLINE)
        .await
        .expect("the small page is read");
    assert!(page.text.contains("served at once"), "{page:?}");
    assert!(start.elapsed() < AT_ONCE, "{:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attribute_pages_of_the_finding_are_refused_at_once_by_the_prescan() {
    let sandbox = sandbox();
    for count in [200_000usize, 1_400_000] {
        let html = attribute_page(count);
        assert!(
            html.len() <= HtmlLimits::DEFAULT.max_input_bytes,
            "{}",
            html.len()
        );
        let start = Instant::now();
        let refused = sandbox
            .extract(readable(html, HtmlLimits::DEFAULT), DEADLINE)
            .await;
        assert_eq!(
            refused,
            Err(ExtractorError::Readable(ReadableError::Refused(
                HtmlRefusal::TooManyAttributesOnElement {
                    limit: HtmlLimits::DEFAULT.max_attributes_per_element
                }
            ))),
            "{count} attributes"
        );
        assert!(start.elapsed() < AT_ONCE, "{count}: {:?}", start.elapsed());
        small_page_is_served(&sandbox).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parse_past_its_deadline_is_killed_and_the_cpu_is_idle_within_a_second() {
    let sandbox = sandbox();
    // The attribute limits lifted: the quadratic parse of the finding
    // (7.7 s release for 200,000 attributes, far more in a debug build).
    let lifted = HtmlLimits {
        max_attributes_per_element: usize::MAX,
        max_attributes: usize::MAX,
        ..HtmlLimits::DEFAULT
    };
    let deadline = Duration::from_secs(2);
    let start = Instant::now();
    let (outcome, pids) = with_pids(
        &sandbox,
        sandbox.extract(readable(attribute_page(200_000), lifted), deadline),
    )
    .await;
    let took = start.elapsed();
    assert_eq!(
        outcome,
        Err(ExtractorError::TimedOut {
            deadline_ms: deadline.as_millis() as u64
        })
    );
    assert!(took >= deadline, "{took:?}");
    assert!(took < deadline + AT_ONCE, "{took:?}");
    assert!(!pids.is_empty(), "the parse ran in a sandbox process");
    assert!(
        all_gone_within(&pids, Duration::from_secs(1)),
        "the killed sandbox {pids:?} is gone from /proc within a second"
    );
    small_page_is_served(&sandbox).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_that_cannot_start_is_a_typed_loss() {
    let missing = DocumentSandbox::new(
        SandboxCommand::agentrt_serving("/nonexistent/agentrt", SUBCOMMAND),
        1,
    )
    .unwrap();
    let lost = missing
        .extract(readable(SMALL_PAGE.into(), HtmlLimits::DEFAULT), DEADLINE)
        .await;
    assert!(matches!(lost, Err(ExtractorError::Lost(_))), "{lost:?}");
    let lost = missing
        .read_pdf(small_pdf(), ExtractLimits::DEFAULT, DEADLINE)
        .await;
    assert!(matches!(lost, Err(PdfReadError::Lost(_))), "{lost:?}");
}

// ---------------------------------------------------------------------------
// PDF
// ---------------------------------------------------------------------------

/// A zlib stream of `prefix`, `unit` repeated `count` times, `suffix`,
/// written as fixed-Huffman deflate with length-258 copies, so that 131
/// million integers take about 1.6 MB and no buffer of their size.
fn zlib_repeat(prefix: &[u8], unit: [u8; 2], count: usize, suffix: &[u8]) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        acc: u64,
        n: u32,
    }
    impl Bits {
        fn put(&mut self, value: u64, bits: u32) {
            self.acc |= value << self.n;
            self.n += bits;
            while self.n >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.n -= 8;
            }
        }
        /// A Huffman code: most significant bit first.
        fn code(&mut self, code: u64, bits: u32) {
            let mut reversed = 0u64;
            for i in 0..bits {
                reversed |= ((code >> i) & 1) << (bits - 1 - i);
            }
            self.put(reversed, bits);
        }
        fn literal(&mut self, byte: u8) {
            if byte < 144 {
                self.code(0x30 + u64::from(byte), 8);
            } else {
                self.code(0x190 + u64::from(byte) - 144, 9);
            }
        }
    }
    let mut adler_a: u64 = 1;
    let mut adler_b: u64 = 0;
    let mut adler = |bytes: &[u8]| {
        for &b in bytes {
            adler_a = (adler_a + u64::from(b)) % 65521;
            adler_b = (adler_b + adler_a) % 65521;
        }
    };
    let mut bits = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        n: 0,
    };
    bits.put(1, 1); // final block
    bits.put(1, 2); // fixed Huffman
    for &b in prefix {
        bits.literal(b);
    }
    adler(prefix);
    bits.literal(unit[0]);
    bits.literal(unit[1]);
    adler(&unit);
    let mut left = 2 * (count - 1);
    let run: Vec<u8> = unit.iter().copied().cycle().take(258).collect();
    while left >= 258 {
        bits.code(0xC0 + (285 - 280), 8); // length 258
        bits.code(1, 5); // distance 2
        adler(&run);
        left -= 258;
    }
    for i in 0..left {
        bits.literal(unit[i % 2]);
        adler(&[unit[i % 2]]);
    }
    for &b in suffix {
        bits.literal(b);
    }
    adler(suffix);
    bits.code(0, 7); // end of block
    if bits.n > 0 {
        bits.put(0, 8 - bits.n);
    }
    let mut out = bits.out;
    let checksum = ((adler_b << 16) | adler_a) as u32;
    out.extend_from_slice(&checksum.to_be_bytes());
    out
}

/// A one-page PDF saying `Hello from a small PDF`, with one more object
/// stream (`extra`: its filters and data) when given.
fn pdf_with(extra: Option<(&str, Vec<u8>)>) -> Vec<u8> {
    let content = b"BT /F1 12 Tf 72 712 Td (Hello from a small PDF) Tj ET".to_vec();
    let mut objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_vec(),
        [format!("<< /Length {} >>\nstream\n", content.len()).into_bytes(), content, b"\nendstream".to_vec()].concat(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ];
    if let Some((filters, data)) = extra {
        objects.push(
            [
                format!(
                    "<< /Type /ObjStm /N 1 /First 4 /Length {} /Filter {filters} >>\nstream\n",
                    data.len()
                )
                .into_bytes(),
                data,
                b"\nendstream".to_vec(),
            ]
            .concat(),
        );
    }
    let mut pdf = b"%PDF-1.5\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        pdf.extend_from_slice(body);
        pdf.extend_from_slice(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

fn small_pdf() -> Vec<u8> {
    pdf_with(None)
}

/// The finding's bomb: an object stream holding object 7, an array of
/// `count` integers, FlateDecode (`hex` false) or ASCIIHex over Flate.
fn pdf_bomb(count: usize, hex: bool) -> Vec<u8> {
    let zlib = zlib_repeat(b"7 0 [", *b"0 ", count, b"]");
    if hex {
        let mut text = String::with_capacity(zlib.len() * 2 + 1);
        for b in zlib {
            text.push_str(&format!("{b:02x}"));
        }
        text.push('>');
        pdf_with(Some(("[/ASCIIHexDecode /FlateDecode]", text.into_bytes())))
    } else {
        pdf_with(Some(("/FlateDecode", zlib)))
    }
}

const BOMB_INTEGERS: usize = 131_000_000;

async fn small_pdf_is_read(sandbox: &DocumentSandbox) {
    let start = Instant::now();
    let read = sandbox
        .read_pdf(small_pdf(), ExtractLimits::DEFAULT, DEADLINE)
        .await
        .expect("the small PDF is read");
    assert!(read.text.contains("Hello from a small PDF"), "{read:?}");
    assert!(start.elapsed() < AT_ONCE, "{:?}", start.elapsed());
}

fn code_of(outcome: &Result<agent_tools::builtin::document::Extracted, PdfReadError>) -> &str {
    match outcome {
        Err(PdfReadError::Failed { code, .. }) => code,
        Err(PdfReadError::Lost(_)) => "lost",
        Ok(_) => "ok",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pdf_bombs_of_the_finding_are_refused_at_once() {
    let sandbox = sandbox();
    small_pdf_is_read(&sandbox).await;
    for hex in [false, true] {
        let bomb = pdf_bomb(BOMB_INTEGERS, hex);
        assert!(bomb.len() < ExtractLimits::DEFAULT.max_input_bytes);
        let start = Instant::now();
        let outcome = sandbox
            .read_pdf(bomb, ExtractLimits::DEFAULT, DEADLINE)
            .await;
        assert_eq!(
            code_of(&outcome),
            "document_too_complex",
            "hex {hex}: {outcome:?}"
        );
        assert!(
            start.elapsed() < AT_ONCE,
            "hex {hex}: {:?}",
            start.elapsed()
        );
        small_pdf_is_read(&sandbox).await;
    }
    assert!(own_peak_resident_bytes() < ADDRESS_SPACE_CAP / 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_prescan_the_address_space_cap_ends_the_child_not_the_host() {
    let sandbox = sandbox();
    // Every pre-scan limit lifted: `lopdf` builds the array's objects
    // (~16 GB for all of them) until the child reaches its cap.
    let lifted = ExtractLimits {
        pdf: PdfLimits {
            max_objects: usize::MAX,
            max_values: usize::MAX,
            max_array_len: usize::MAX,
            max_nesting: usize::MAX,
            max_stream_values: usize::MAX,
            max_stream_bytes: usize::MAX / 2,
            max_decompressed_bytes: usize::MAX,
        },
        ..ExtractLimits::DEFAULT
    };
    for hex in [false, true] {
        let (outcome, pids) = with_pids(
            &sandbox,
            sandbox.read_pdf(
                pdf_bomb(BOMB_INTEGERS, hex),
                lifted,
                Duration::from_secs(300),
            ),
        )
        .await;
        assert_eq!(
            code_of(&outcome),
            "document_too_complex",
            "hex {hex}: {outcome:?}"
        );
        let Err(PdfReadError::Failed { message, .. }) = &outcome else {
            unreachable!()
        };
        assert!(message.contains("MiB of address space"), "{message}");
        assert!(!pids.is_empty());
        assert!(all_gone_within(&pids, Duration::from_secs(1)), "{pids:?}");
        // The host is alive (this test runs in it), far below the cap.
        assert!(own_peak_resident_bytes() < ADDRESS_SPACE_CAP / 2);
        small_pdf_is_read(&sandbox).await;
    }
}

// ---------------------------------------------------------------------------
// end to end, in the app's actors
// ---------------------------------------------------------------------------

/// `extract_document` outcomes of a run: the path → its text or failure
/// code, read back from the journal's blobs.
async fn extraction_outcomes(
    app: &agent_host_native::app::App,
    run: &agent_kernel::RunId,
    tool: &str,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    use agent_kernel::host::StorageExt;
    use agent_kernel::journal::JournalRecord;
    use agent_kernel::protocol::ToolResult;
    let storage = app.native().host().storage.clone();
    let journal: Vec<JournalRecord> = storage
        .scan_records(&format!("{run}/"))
        .await
        .expect("journal");
    let mut outcomes = std::collections::BTreeMap::new();
    for record in journal.iter().filter(|j| j.tool == tool) {
        let args = storage
            .get_blob(&record.args.hash)
            .await
            .expect("read")
            .expect("arguments blob");
        let args: serde_json::Value = serde_json::from_slice(&args).expect("arguments");
        let path = args["path"].as_str().expect("path").to_owned();
        let result = match &record.result {
            Some(blob) => storage.get_blob(&blob.hash).await.expect("read"),
            None => None,
        };
        let outcome = match result.map(|b| serde_json::from_slice::<ToolResult>(&b)) {
            Some(Ok(ToolResult::Success(s))) => s.content["text"].clone(),
            Some(Ok(ToolResult::Error(f))) => {
                serde_json::json!({ "code": f.code, "message": f.message })
            }
            other => serde_json::json!({ "state": format!("{:?} {other:?}", record.state) }),
        };
        outcomes.insert(path, outcome);
    }
    outcomes
}

/// The finding's documents attached to a session (the ASCIIHex-over-Flate
/// PDF bomb and the 200,000-attribute page), read by a run with
/// `extract_document` in the app's actor: typed failures, the run settles,
/// the next small document (written by the model) is read, and the host is
/// alive and far below the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_reads_the_findings_documents_settles_with_typed_failures() {
    use agent_host_native::app::{App, AppOptions};
    use agent_host_native::script_sandbox::SandboxCommand as ScriptCommand;
    use agent_kernel::SessionId;
    use agent_kernel::run::RunStatus;
    use agent_supervisor::{RunConfig, Scenario, ScriptedProvider};
    use serde_json::json;

    let bomb = String::from_utf8(pdf_bomb(BOMB_INTEGERS, true)).expect("ASCII");
    let page = attribute_page(200_000);
    let write = |path: &str, content: &str, mime: &str| {
        json!({"text": "Writing.", "tool_calls": [{"name": "workspace_write",
            "arguments": {"path": path, "content": content, "mime": mime}}]})
    };
    let read = |path: &str| {
        json!({"text": "Reading.", "tool_calls": [{"name": "extract_document",
            "arguments": {"path": path}}]})
    };
    let turns = vec![
        write("small.html", SMALL_PAGE, "text/html"),
        read("bomb.pdf"),
        read("page.html"),
        read("small.html"),
        json!({"text": "Done."}),
    ];
    let scenario = Scenario::from_json(&json!({ "turns": turns }).to_string()).expect("scenario");
    let data = tempfile::tempdir().expect("data");
    let native = agent_host_native::host::NativeHost::open_with(data.path(), Default::default())
        .await
        .expect("host");
    let provider =
        std::sync::Arc::new(ScriptedProvider::new(scenario, native.host().clock.clone()));
    let options = AppOptions {
        script_sandbox: Some(ScriptCommand::agentrt(BIN)),
        ..AppOptions::default()
    };
    let app = App::on_host(native, options, provider).await.expect("app");
    let session = SessionId::new("documents").expect("session");
    let _lease = app.open_session(&session).await.expect("lease");
    // The person attaches the finding's documents.
    let workspace = app.workspaces().get(&session).expect("open").workspace;
    for (path, bytes, mime) in [
        ("bomb.pdf", bomb.into_bytes(), "application/pdf"),
        ("page.html", page.into_bytes(), "text/html"),
    ] {
        let path = agent_workspace::WorkspacePath::parse(path).expect("path");
        workspace
            .create(&path, bytes, mime, agent_workspace::Source::User)
            .await
            .expect("attach");
    }
    let run = app
        .runtime()
        .start(&session, "Read the documents.", RunConfig::default())
        .await
        .expect("start");
    let mut seen = BTreeSet::new();
    let settled = loop {
        seen.extend(sandboxes_in_opt(None));
        if let Ok(done) =
            tokio::time::timeout(Duration::from_millis(10), app.runtime().wait_settled(&run)).await
        {
            break done.expect("run");
        }
    };
    // The reads ran in document sandboxes, not in this process.
    assert!(!seen.is_empty());
    assert_eq!(settled.status, RunStatus::Completed);
    let writes = extraction_outcomes(&app, &run, "workspace_write").await;
    let outcomes = extraction_outcomes(&app, &run, "extract_document").await;
    assert_eq!(outcomes.len(), 3, "{outcomes:?} {writes:?}");
    assert_eq!(
        outcomes["bomb.pdf"]["code"], "document_too_complex",
        "{outcomes:?} {writes:?}"
    );
    assert_eq!(
        outcomes["page.html"]["code"], "document_too_complex",
        "{outcomes:?}"
    );
    assert!(
        outcomes["small.html"]
            .as_str()
            .is_some_and(|t| t.contains("served at once")),
        "{outcomes:?}"
    );
    // Resuming the settled run does not re-run the reads into a crash.
    let _ = app.runtime().resume(&run).await;
    assert!(own_peak_resident_bytes() < ADDRESS_SPACE_CAP / 2);
}

// ---------------------------------------------------------------------------
// fetch_url's reader
// ---------------------------------------------------------------------------

/// `fetch_url`'s reader with the sandbox as its extractor, against a real
/// loopback server: the finding's attribute page (about 1.2 MB) is
/// `page_too_complex` at once, not 30 s of CPU per read, and the next
/// small page is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_reads_pages_through_the_sandbox() {
    use agent_fetch::testing::TestLoopback;
    use agent_fetch::{
        CancelToken, FetchError, ReaderConfig, SystemResolver, UrlPolicy, WebReader,
    };
    use agent_host_native::host::{SystemClock, TokioExecutor};

    let hostile = attribute_page(200_000);
    let app = axum::Router::new()
        .route(
            "/hostile",
            axum::routing::get(move || {
                let body = hostile.clone();
                async move { ([("content-type", "text/html")], body) }
            }),
        )
        .route(
            "/small",
            axum::routing::get(|| async { ([("content-type", "text/html")], SMALL_PAGE) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    let executor = std::sync::Arc::new(TokioExecutor::current().expect("runtime"));
    let policy = UrlPolicy::public_web(std::sync::Arc::new(SystemResolver::new(executor.clone())))
        .allowing_test_servers(TestLoopback::for_tests_only(), [addr]);
    let clock = std::sync::Arc::new(SystemClock::new(tokio::runtime::Handle::current()));
    let sandbox = sandbox();
    let reader = WebReader::new(
        policy,
        ReaderConfig::direct_only(),
        Default::default(),
        clock,
    )
    .with_blocking(executor)
    .with_readable_extractor(std::sync::Arc::new(sandbox.clone()));
    let start = Instant::now();
    let (refused, pids) = with_pids(
        &sandbox,
        reader.read(&format!("http://{addr}/hostile"), CancelToken::never()),
    )
    .await;
    let refused = refused.expect_err("refused");
    assert!(
        matches!(
            refused.reason,
            FetchError::PageTooComplex {
                refusal: HtmlRefusal::TooManyAttributesOnElement { .. }
            }
        ),
        "{refused:?}"
    );
    assert_eq!(refused.reason.code(), "page_too_complex");
    assert!(start.elapsed() < AT_ONCE, "{:?}", start.elapsed());
    assert!(!pids.is_empty(), "extracted in a sandbox process");
    let page = reader
        .read(&format!("http://{addr}/small"), CancelToken::never())
        .await
        .expect("the small page is read");
    assert!(page.text.contains("served at once"), "{page:?}");
}
