//! The page's session actions in headless Chromium (issue 14 item 3, S7.5,
//! S12.3): `importFile` from a `Uint8Array`, a `Blob` or a string, with
//! source `attachment`; bad paths, names, MIME types and data, an existing
//! path, an oversize file and the file-count quota are refused with a clear
//! code and change nothing; import, copy, delete with the Artifact
//! reference rule; `listSessions`; and the run card's new fields (evidence
//! with provenance, the plan's steps, the answer, target summaries) through
//! `readRun`.
#![cfg(all(target_arch = "wasm32", feature = "runtime"))]

use std::time::Duration;

use agent_host_browser::api::AgentRuntime;
use agent_host_browser::platform;
use serde::Serialize;
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn js(value: &Value) -> JsValue {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .expect("to js")
}

fn rust(value: JsValue) -> Value {
    serde_wasm_bindgen::from_value(value).expect("from js")
}

fn code_of(err: &JsValue) -> String {
    assert!(err.is_instance_of::<js_sys::Error>(), "a JS Error: {err:?}");
    js_sys::Reflect::get(err, &"code".into())
        .ok()
        .and_then(|c| c.as_string())
        .unwrap_or_default()
}

async fn runtime(turns: Value) -> AgentRuntime {
    AgentRuntime::open(js(&json!({
        "storage": "memory",
        "model": { "provider": "scripted", "scenario": { "turns": turns } },
    })))
    .await
    .expect("created")
}

async fn import(
    rt: &AgentRuntime,
    session: &str,
    path: &str,
    data: JsValue,
    mime: Option<&str>,
    name: Option<&str>,
) -> Result<Value, String> {
    JsFuture::from(rt.import_file(
        session.into(),
        path.into(),
        data,
        mime.map(str::to_owned),
        name.map(str::to_owned),
    ))
    .await
    .map(rust)
    .map_err(|e| code_of(&e))
}

async fn files(rt: &AgentRuntime, session: &str) -> Value {
    rust(
        JsFuture::from(rt.list_workspace(session.into()))
            .await
            .expect("list"),
    )
}

async fn sessions(rt: &AgentRuntime) -> Value {
    rust(JsFuture::from(rt.list_sessions()).await.expect("sessions"))
}

async fn read_file(rt: &AgentRuntime, session: &str, path: &str) -> Result<Value, String> {
    JsFuture::from(rt.read_workspace_file(session.into(), path.into()))
        .await
        .map(|v| {
            let text = js_sys::Reflect::get(&v, &"text".into())
                .ok()
                .and_then(|t| t.as_string());
            let entry = rust(js_sys::Reflect::get(&v, &"entry".into()).expect("entry"));
            json!({ "entry": entry, "text": text })
        })
        .map_err(|e| code_of(&e))
}

fn text(s: &str) -> JsValue {
    JsValue::from_str(s)
}

/// S12.3: every refused import is a clear code and changes nothing: no
/// file, and the session is not even listed.
#[wasm_bindgen_test]
async fn s12_3_bad_imports_are_refused_with_a_code_and_change_nothing() {
    let rt = runtime(json!([{ "text": "ok" }])).await;
    let s = "s-bad-imports";
    let long_name = "n".repeat(256);
    // (path, data, mimeType, name, the expected code)
    type Case<'a> = (&'a str, JsValue, Option<&'a str>, Option<&'a str>, &'a str);
    let cases: Vec<Case> = vec![
        ("../escape.txt", text("x"), None, None, "invalid_argument"),
        ("/abs.txt", text("x"), None, None, "invalid_argument"),
        ("", text("x"), None, None, "invalid_argument"),
        ("a\u{0}b.txt", text("x"), None, None, "invalid_argument"),
        (
            ".results/mine.txt",
            text("x"),
            None,
            None,
            "invalid_argument",
        ),
        (
            "ok.txt",
            text("x"),
            None,
            Some("bad\nname.txt"),
            "invalid_argument",
        ),
        (
            "ok.txt",
            text("x"),
            None,
            Some(long_name.as_str()),
            "invalid_argument",
        ),
        ("ok.txt", text("x"), None, Some("  "), "invalid_argument"),
        (
            "ok.txt",
            text("x"),
            Some("not a mime"),
            None,
            "invalid_argument",
        ),
        (
            "ok.txt",
            JsValue::from_f64(42.0),
            None,
            None,
            "invalid_argument",
        ),
        (
            "big.bin",
            js_sys::Uint8Array::new_with_length(10 * 1024 * 1024 + 1).into(),
            None,
            None,
            "quota_exceeded",
        ),
    ];
    for (path, data, mime, name, code) in cases {
        assert_eq!(
            import(&rt, s, path, data, mime, name).await,
            Err(code.to_owned()),
            "{path:?} {mime:?} {name:?}"
        );
    }
    assert_eq!(files(&rt, s).await, json!([]));
    assert_eq!(sessions(&rt).await, json!([]), "nothing was created");

    // Exactly at the size quota is accepted; an existing path is refused
    // and keeps its first content.
    let at_quota = js_sys::Uint8Array::new_with_length(10 * 1024 * 1024);
    let entry = import(&rt, s, "big.bin", at_quota.into(), None, None)
        .await
        .expect("10 MiB is within the quota");
    assert_eq!(entry["size"], json!(10 * 1024 * 1024));
    import(&rt, s, "notes.txt", text("first"), None, None)
        .await
        .expect("imported");
    assert_eq!(
        import(&rt, s, "notes.txt", text("second"), None, None).await,
        Err("already_exists".into())
    );
    assert_eq!(
        read_file(&rt, s, "notes.txt").await.expect("read")["text"],
        json!("first")
    );
    assert_eq!(files(&rt, s).await.as_array().map(Vec::len), Some(2));
}

/// A Blob whose bytes cannot be read (its `arrayBuffer` rejects) but whose
/// size is `size`.
fn unreadable_blob(size: u32) -> JsValue {
    let make = js_sys::Function::new_with_args(
        "size",
        "class Unreadable extends Blob { arrayBuffer() { return Promise.reject(new Error('read')); } }
         return new Unreadable([new Uint8Array(size)]);",
    );
    make.call1(&JsValue::NULL, &JsValue::from(size))
        .expect("a Blob")
}

/// S12.3: a Blob over the file quota is refused by its size before a byte
/// of it is read (reading this one would fail); one at the quota is read
/// (and so fails here with the read error, not the quota).
#[wasm_bindgen_test]
async fn s12_3_a_blob_over_the_quota_is_refused_before_it_is_read() {
    let rt = runtime(json!([{ "text": "ok" }])).await;
    let s = "s-blob-quota";
    let limit = 10 * 1024 * 1024;
    assert_eq!(
        import(&rt, s, "over.bin", unreadable_blob(limit + 1), None, None).await,
        Err("quota_exceeded".into()),
        "refused by its size"
    );
    assert_eq!(
        import(&rt, s, "at.bin", unreadable_blob(limit), None, None).await,
        Err("invalid_argument".into()),
        "within the quota, so it was read (and its read failed)"
    );
    assert_eq!(files(&rt, s).await, json!([]));
}

/// The file-count quota (1000 files a session): the 1001st import is
/// `quota_exceeded` and adds nothing.
#[wasm_bindgen_test]
async fn s12_3_the_file_count_quota_refuses_the_next_import() {
    let rt = runtime(json!([{ "text": "ok" }])).await;
    let s = "s-count-quota";
    for i in 0..1000 {
        import(&rt, s, &format!("f/{i}.txt"), text("x"), None, None)
            .await
            .unwrap_or_else(|e| panic!("import {i}: {e}"));
    }
    assert_eq!(
        import(&rt, s, "one-more.txt", text("x"), None, None).await,
        Err("quota_exceeded".into())
    );
    assert_eq!(files(&rt, s).await.as_array().map(Vec::len), Some(1000));
    assert!(
        read_file(&rt, s, "one-more.txt").await.is_err(),
        "the refused file is not there"
    );
}

/// S12.3 + S7.5: import from each kind of data with source `attachment`
/// (the original name, the MIME type given or guessed); copy the session
/// (into an empty one only); delete the original: the copy still reads its
/// files; `listSessions` counts files and turns.
#[wasm_bindgen_test]
async fn s7_5_import_then_copy_then_delete() {
    let rt = runtime(json!([{ "text": "ok" }])).await;
    let s = "s-import";
    let bytes = js_sys::Uint8Array::from(&b"a,b\n1,2\n"[..]);
    let entry = import(
        &rt,
        s,
        "data/table.csv",
        bytes.into(),
        None,
        Some("My Table.csv"),
    )
    .await
    .expect("from a Uint8Array");
    assert_eq!(
        entry["source"],
        json!({ "kind": "attachment", "name": "My Table.csv" })
    );
    assert_eq!(entry["mime"], json!("text/csv"), "{entry}");
    assert_eq!(entry["path"], json!("data/table.csv"));

    let parts = js_sys::Array::of1(&JsValue::from_str("# Notes\nhello"));
    let blob = web_sys::Blob::new_with_str_sequence(&parts).expect("blob");
    let entry = import(&rt, s, "notes.md", blob.into(), Some("text/markdown"), None)
        .await
        .expect("from a Blob");
    assert_eq!(
        entry["source"],
        json!({ "kind": "attachment", "name": "notes.md" })
    );
    assert_eq!(entry["mime"], json!("text/markdown"));
    let entry = import(&rt, s, "hello.txt", text("héllo"), None, None)
        .await
        .expect("from a string");
    assert_eq!(entry["size"], json!("héllo".len()));
    assert_eq!(
        read_file(&rt, s, "notes.md").await.expect("read")["text"],
        json!("# Notes\nhello")
    );

    let run = JsFuture::from(rt.start_run(s.into(), "hi".into(), JsValue::UNDEFINED))
        .await
        .expect("started")
        .as_string()
        .expect("id");
    for _ in 0..100 {
        let view = rust(
            JsFuture::from(rt.read_run(run.clone()))
                .await
                .expect("read"),
        );
        if view["run"]["status"] == json!("completed") {
            break;
        }
        platform::sleep(Duration::from_millis(50)).await;
    }
    let listed = sessions(&rt).await;
    assert_eq!(listed[0]["session"], json!(s), "{listed}");
    assert_eq!(listed[0]["files"], json!(3), "{listed}");
    assert_eq!(listed[0]["runs"], json!(1), "{listed}");
    assert!(listed[0]["last_run_at_ms"].as_u64().is_some(), "{listed}");

    let report = rust(
        JsFuture::from(rt.copy_session(s.into(), "s-copy".into()))
            .await
            .expect("copied"),
    );
    assert_eq!(report["files"], json!(3), "{report}");
    let err = JsFuture::from(rt.copy_session(s.into(), "s-copy".into()))
        .await
        .expect_err("the target is not empty");
    assert_eq!(code_of(&err), "target_not_empty");

    let report = rust(
        JsFuture::from(rt.delete_session(s.into()))
            .await
            .expect("deleted"),
    );
    assert_eq!(report["files"], json!(3), "{report}");
    assert_eq!(
        report["blobs_freed"],
        json!([]),
        "the copy still references every blob"
    );
    assert_eq!(files(&rt, s).await, json!([]));
    assert_eq!(read_file(&rt, s, "notes.md").await, Err("not_found".into()));
    assert_eq!(
        read_file(&rt, "s-copy", "notes.md").await.expect("read")["text"],
        json!("# Notes\nhello"),
        "the copy reads the content after the original is deleted"
    );
    let copy = read_file(&rt, "s-copy", "data/table.csv")
        .await
        .expect("read");
    assert_eq!(copy["text"], json!("a,b\n1,2\n"));
    let listed = sessions(&rt).await;
    let copy = listed
        .as_array()
        .and_then(|l| l.iter().find(|x| x["session"] == json!("s-copy")))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(copy["files"], json!(3), "{listed}");

    // Deleting the copy frees the content nothing references any more.
    let report = rust(
        JsFuture::from(rt.delete_session("s-copy".into()))
            .await
            .expect("deleted"),
    );
    assert_eq!(
        report["blobs_freed"].as_array().map(Vec::len),
        Some(3),
        "{report}"
    );
}

/// Issue 14 item 4 through `readRun`: a run that reads an imported file
/// with `extract_document`, writes a file and updates its plan shows the
/// evidence (external_untrusted, with provenance), the plan's steps with
/// their statuses, the final answer, and the write's target summary
/// journaled before dispatch.
#[wasm_bindgen_test]
async fn s12_read_run_carries_evidence_plan_answer_and_target_summaries() {
    let rt = runtime(json!([
        { "text": "Reading.", "tool_calls": [
            { "name": "extract_document", "arguments": { "path": "upload.txt" } },
            { "name": "update_plan", "arguments": { "steps": [
                { "title": "Read the upload", "status": "completed" },
                { "title": "Write a summary", "status": "in_progress" } ] } }
        ] },
        { "text": "Writing.", "tool_calls": [
            { "name": "workspace_write", "arguments": { "path": "summary.txt", "content": "short" } }
        ] },
        { "text": "The upload says hello." }
    ]))
    .await;
    let s = "s-card";
    import(
        &rt,
        s,
        "upload.txt",
        text("hello from the person"),
        None,
        None,
    )
    .await
    .expect("imported");
    let run = JsFuture::from(rt.start_run(s.into(), "Summarise".into(), JsValue::UNDEFINED))
        .await
        .expect("started")
        .as_string()
        .expect("id");
    let mut view = Value::Null;
    for _ in 0..100 {
        view = rust(
            JsFuture::from(rt.read_run(run.clone()))
                .await
                .expect("read"),
        );
        if view["run"]["status"] != json!("running") {
            break;
        }
        platform::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(view["run"]["status"], json!("completed"), "{view}");
    assert_eq!(view["output"], json!("The upload says hello."));
    let evidence = view["evidence"].as_array().cloned().unwrap_or_default();
    let read = evidence
        .iter()
        .find(|e| e["tool"] == json!("extract_document"))
        .unwrap_or_else(|| panic!("evidence of extract_document: {view}"));
    assert_eq!(read["trust"], json!("external_untrusted"), "{read}");
    assert!(read["provenance"]["origin"].is_string(), "{read}");
    assert_eq!(
        view["plan"]["steps"],
        json!([
            { "title": "Read the upload", "status": "completed" },
            { "title": "Write a summary", "status": "in_progress" }
        ]),
        "{view}"
    );
    let write = view["journal"]
        .as_array()
        .and_then(|j| j.iter().find(|r| r["tool"] == json!("workspace_write")))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(write["state"], json!("committed"), "{view}");
    let summary = write["target_summary"].as_str().unwrap_or_default();
    assert!(summary.contains("summary.txt"), "{write}");
}

/// S7.5: a session whose run is not finished (here waiting for the
/// person's answer) is not deleted: `session_busy`, and its files stay; a
/// bad session id is `invalid_argument` for every session action.
#[wasm_bindgen_test]
async fn s7_5_delete_is_refused_while_a_run_is_not_finished() {
    let rt = runtime(json!([
        { "tool_calls": [{ "name": "ask_user", "arguments": { "question": "Which one?" } }] },
        { "text": "ok" }
    ]))
    .await;
    let s = "s-busy-delete";
    import(&rt, s, "keep.txt", text("kept"), None, None)
        .await
        .expect("imported");
    let run = JsFuture::from(rt.start_run(s.into(), "go".into(), JsValue::UNDEFINED))
        .await
        .expect("started")
        .as_string()
        .expect("id");
    let mut status = Value::Null;
    for _ in 0..100 {
        let view = rust(
            JsFuture::from(rt.read_run(run.clone()))
                .await
                .expect("read"),
        );
        status = view["run"]["status"].clone();
        if status == json!("awaiting_input") {
            break;
        }
        platform::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, json!("awaiting_input"));
    let err = JsFuture::from(rt.delete_session(s.into()))
        .await
        .expect_err("refused");
    assert_eq!(code_of(&err), "session_busy");
    assert_eq!(
        read_file(&rt, s, "keep.txt").await.expect("still there")["text"],
        json!("kept")
    );

    for bad in ["../x", "", "a b"] {
        assert_eq!(
            import(&rt, bad, "f.txt", text("x"), None, None).await,
            Err("invalid_argument".into()),
            "{bad:?}"
        );
        for promise in [
            rt.delete_session(bad.into()),
            rt.copy_session(s.into(), bad.into()),
            rt.copy_session(bad.into(), "s-fresh".into()),
            rt.list_workspace(bad.into()),
        ] {
            let err = JsFuture::from(promise).await.expect_err("refused");
            assert_eq!(code_of(&err), "invalid_argument", "{bad:?}");
        }
    }
}
