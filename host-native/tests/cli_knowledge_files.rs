//! `agentrt kb add BASE --file PATH` (issue 37 part 5, S10.1): a real PDF
//! built here is read through `extract_document`'s bounded readers (the
//! document sandbox process), indexed, found by `kb search` and by a run's
//! `knowledge_search`, each passage's provenance naming the file and the
//! SHA-256 of its bytes. Bad input (a missing file, a file over the
//! document limit, a binary that is no document) is one line with its
//! code and indexes nothing; a file at the limit is read.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");
/// `extract_document`'s input limit (`ExtractLimits::DEFAULT`).
const DOCUMENT_LIMIT: usize = 20 * 1024 * 1024;

fn agentrt(data: &Path, args: &[&str]) -> Output {
    std::fs::set_permissions(data, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod data dir");
    Command::new(BIN)
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run agentrt")
}

fn ok_json(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// A refusal: exit 2, one line on stderr naming `code`.
fn refused(out: &Output, code: &str) {
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(code), "{err}");
}

/// A one-page PDF whose page shows `line` in Helvetica, with its cross
/// reference table (PDF 1.4, ISO 32000-1 §7.5).
fn pdf(line: &str) -> Vec<u8> {
    let content = format!("BT /F1 12 Tf 72 712 Td ({line}) Tj ET").into_bytes();
    let objects: Vec<Vec<u8>> = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_vec(),
        [format!("<< /Length {} >>\nstream\n", content.len()).into_bytes(), content, b"\nendstream".to_vec()].concat(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
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

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn documents_in(dir: &Path, base: &str) -> Value {
    ok_json(&agentrt(dir, &["--json", "kb", "search", base, "turbine"]))["passages"].clone()
}

#[test]
fn a_pdf_file_is_indexed_and_found_with_its_provenance() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path();
    let manual = dir.join("turbine-manual.pdf");
    let bytes = pdf("The turbine bearings are greased every 400 operating hours.");
    std::fs::write(&manual, &bytes).unwrap();

    let added = ok_json(&agentrt(
        dir,
        &[
            "--json",
            "kb",
            "add",
            "manuals",
            "--file",
            manual.to_str().unwrap(),
        ],
    ));
    assert_eq!(added["added"], 1, "{added}");
    let source = json!({
        "kind": "local_file",
        "name": "turbine-manual.pdf",
        "content_hash": hex_sha256(&bytes),
    });
    assert_eq!(added["documents"][0]["source"], source, "{added}");
    assert_eq!(added["documents"][0]["format"], "pdf", "{added}");
    assert_eq!(added["documents"][0]["truncated"], false, "{added}");

    let found = ok_json(&agentrt(
        dir,
        &[
            "--json",
            "kb",
            "search",
            "manuals",
            "how often are bearings greased",
        ],
    ));
    let first = &found["passages"][0];
    assert!(
        first["text"]
            .as_str()
            .unwrap()
            .contains("400 operating hours"),
        "the PDF's text was extracted: {found}"
    );
    assert_eq!(first["document"], "turbine-manual.pdf");
    assert_eq!(
        first["source"], source,
        "provenance names the file and hash"
    );

    // The same PDF attached to a session: a workspace file, indexed with
    // its path, revision and content hash.
    ok_json(&agentrt(
        dir,
        &[
            "--json",
            "attach",
            "s1",
            manual.to_str().unwrap(),
            "--as",
            "docs/manual.pdf",
        ],
    ));
    let from_workspace = ok_json(&agentrt(
        dir,
        &[
            "--json",
            "kb",
            "add",
            "shop",
            "--session",
            "s1",
            "--workspace",
            "docs/manual.pdf",
        ],
    ));
    // The path is the document's title; its id, the path made valid.
    assert_eq!(from_workspace["documents"][0]["id"], "docs-manual.pdf");
    let workspace_source = &from_workspace["documents"][0]["source"];
    assert_eq!(
        workspace_source["kind"], "workspace_file",
        "{from_workspace}"
    );
    assert_eq!(workspace_source["session"], "s1");
    assert_eq!(workspace_source["path"], "docs/manual.pdf");
    assert!(
        workspace_source["revision"].as_u64().is_some(),
        "{from_workspace}"
    );
    assert_eq!(workspace_source["content_hash"], hex_sha256(&bytes));
    let found = ok_json(&agentrt(
        dir,
        &["--json", "kb", "search", "shop", "bearings"],
    ));
    assert_eq!(found["passages"][0]["source"], *workspace_source, "{found}");
    // A workspace path that is not there adds nothing.
    refused(
        &agentrt(
            dir,
            &[
                "kb",
                "add",
                "shop",
                "--session",
                "s1",
                "--workspace",
                "docs/none.pdf",
            ],
        ),
        "not_found",
    );

    // A run granted the base finds it through `knowledge_search`.
    let profile = dir.join("p.json");
    std::fs::write(
        &profile,
        json!({"id": "engineer", "name": "Engineer", "knowledge": ["manuals"]}).to_string(),
    )
    .unwrap();
    ok_json(&agentrt(
        dir,
        &["--json", "profile", "save", profile.to_str().unwrap()],
    ));
    let scenario = dir.join("lookup.json");
    std::fs::write(
        &scenario,
        json!({"turns": [
            {"tool_calls": [{"name": "knowledge_search",
                "arguments": {"query": "bearings greased", "bases": ["manuals"]}}]},
            {"text": "Every 400 hours."}]})
        .to_string(),
    )
    .unwrap();
    let run = agentrt(
        dir,
        &[
            "--json",
            "run",
            "How often are the bearings greased?",
            "--scenario",
            scenario.to_str().unwrap(),
            "--profile",
            "engineer",
            "--session",
            "s1",
        ],
    );
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let id = String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| {
            v["run"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| v["run"]["id"].as_str().map(str::to_owned))
        })
        .expect("a run id");
    let shown: Value =
        serde_json::from_slice(&agentrt(dir, &["--json", "show", &id]).stdout).expect("run card");
    assert_eq!(shown["evidence"][0]["tool"], "knowledge_search", "{shown}");
    assert_eq!(
        shown["evidence"][0]["trust"], "external_untrusted",
        "{shown}"
    );
    assert!(
        shown.get("failures").is_none_or(|f| f == &json!([])),
        "the search succeeded: {shown}"
    );
}

#[test]
fn bad_files_are_refused_with_a_code_and_index_nothing() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path();
    // A base with one document, so that a search tells what was added.
    let good = dir.join("good.pdf");
    std::fs::write(&good, pdf("The turbine hums.")).unwrap();
    ok_json(&agentrt(
        dir,
        &["--json", "kb", "add", "b", "--file", good.to_str().unwrap()],
    ));
    assert_eq!(documents_in(dir, "b").as_array().unwrap().len(), 1);

    let missing = dir.join("missing.pdf");
    refused(
        &agentrt(
            dir,
            &["kb", "add", "b", "--file", missing.to_str().unwrap()],
        ),
        "document_not_found",
    );

    // A binary that is no document (an ELF header and zeros).
    let binary = dir.join("turbine.bin");
    let mut elf = b"\x7fELF\x02\x01\x01\0".to_vec();
    elf.extend(std::iter::repeat_n(0u8, 4096));
    std::fs::write(&binary, &elf).unwrap();
    refused(
        &agentrt(dir, &["kb", "add", "b", "--file", binary.to_str().unwrap()]),
        "document_unsupported",
    );

    // A PDF whose bytes are broken past its header.
    let broken = dir.join("broken.pdf");
    std::fs::write(&broken, b"%PDF-1.4\n1 0 obj << /Type /Catalog turbine").unwrap();
    refused(
        &agentrt(dir, &["kb", "add", "b", "--file", broken.to_str().unwrap()]),
        "document_malformed",
    );

    // Over the limit by one byte: refused before it is read.
    let over = dir.join("over.txt");
    let mut text = b"turbine ".repeat(DOCUMENT_LIMIT / 8 + 1);
    text.truncate(DOCUMENT_LIMIT + 1);
    std::fs::write(&over, &text).unwrap();
    refused(
        &agentrt(dir, &["kb", "add", "b", "--file", over.to_str().unwrap()]),
        "document_too_large",
    );
    // Nothing of the refused files was indexed.
    let passages = documents_in(dir, "b");
    assert_eq!(passages.as_array().unwrap().len(), 1, "{passages}");
    assert_eq!(passages[0]["document"], "good.pdf");

    // At the limit (and so below it): read.
    text.truncate(DOCUMENT_LIMIT);
    std::fs::write(&over, &text).unwrap();
    let added = ok_json(&agentrt(
        dir,
        &["--json", "kb", "add", "b", "--file", over.to_str().unwrap()],
    ));
    assert_eq!(added["added"], 1, "{added}");
    // Its text is cut at the knowledge reader's bound, and says so.
    assert_eq!(added["documents"][0]["truncated"], true, "{added}");
}
