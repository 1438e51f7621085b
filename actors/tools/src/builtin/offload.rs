//! The messages between a host and a place that runs the heavy built-ins
//! apart from it (the browser's Worker module, `agent-worker-module`): one
//! `run_javascript` script, one PDF for `extract_document`, or one HTML
//! document's readable text (both tools), and their answers. Both sides
//! use these types and [`answer_script`] / [`answer_pdf`] /
//! [`answer_readable`], so the place and the host cannot disagree on a
//! field.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::document::{ExtractLimits, Extracted};

/// One script for the place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptRequest {
    pub code: String,
    pub input: Value,
    /// [`super::javascript::JsLimits`], as JSON.
    pub limits: Value,
}

/// What the place answered for a script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptResponse {
    Ok {
        value: Value,
        json_bytes: usize,
        elapsed_ms: u64,
    },
    Err {
        code: String,
        message: String,
    },
}

/// One PDF for the place (its bytes travel beside this, not in the JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PdfRequest {
    pub limits: ExtractLimits,
}

/// What the place answered for a PDF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PdfResponse {
    Ok(Extracted),
    /// [`super::document::ExtractError::code`] and its message.
    Err {
        code: String,
        message: String,
    },
}

impl From<Result<Extracted, super::document::ExtractError>> for PdfResponse {
    fn from(outcome: Result<Extracted, super::document::ExtractError>) -> PdfResponse {
        match outcome {
            Ok(extracted) => PdfResponse::Ok(extracted),
            Err(e) => PdfResponse::Err {
                code: e.code().to_owned(),
                message: e.to_string(),
            },
        }
    }
}

/// What the place answered for an HTML document
/// ([`agent_readable::ReadableRequest`] as JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadableResponse {
    Ok(agent_readable::BoundedReadable),
    Err(agent_readable::ReadableError),
    /// The request could not be read.
    BadRequest {
        message: String,
    },
}

/// The answer to a readable-text request (JSON text), as JSON text: every
/// outcome, a malformed request included, is a [`ReadableResponse`].
pub fn answer_readable(request: &str) -> String {
    let response = match serde_json::from_str::<agent_readable::ReadableRequest>(request) {
        Err(e) => ReadableResponse::BadRequest {
            message: format!("bad request to the Worker: {e}"),
        },
        Ok(request) => match agent_readable::answer(&request) {
            Ok(page) => ReadableResponse::Ok(page),
            Err(e) => ReadableResponse::Err(e),
        },
    };
    serde_json::to_string(&response)
        .unwrap_or_else(|_| r#"{"bad_request":{"message":"unencodable response"}}"#.to_owned())
}

/// The answer to a script request given as JSON text, as JSON text:
/// every outcome, a malformed request included, is a [`ScriptResponse`].
#[cfg(feature = "quickjs")]
pub fn answer_script(request: &str, now: impl Fn() -> std::time::Duration + 'static) -> String {
    use super::javascript::{JsLimits, run_script};
    let response = match serde_json::from_str::<ScriptRequest>(request) {
        Err(e) => engine_error(format!("bad request to the Worker: {e}")),
        Ok(req) => match serde_json::from_value::<JsLimits>(req.limits) {
            Err(e) => engine_error(format!("bad limits: {e}")),
            Ok(limits) => match run_script(&req.code, &req.input, &limits, now) {
                Ok(out) => ScriptResponse::Ok {
                    value: out.value,
                    json_bytes: out.json_bytes,
                    elapsed_ms: u64::try_from(out.elapsed.as_millis()).unwrap_or(u64::MAX),
                },
                Err(e) => ScriptResponse::Err {
                    code: e.code().to_owned(),
                    message: e.to_string(),
                },
            },
        },
    };
    encode(&response)
}

#[cfg(feature = "quickjs")]
fn engine_error(message: String) -> ScriptResponse {
    ScriptResponse::Err {
        code: "js_engine_error".into(),
        message,
    }
}

/// The answer to a PDF request (JSON text) for `bytes`, as JSON text: every
/// outcome, a malformed request included, is a [`PdfResponse`].
#[cfg(feature = "pdf")]
pub fn answer_pdf(bytes: &[u8], request: &str) -> String {
    use super::document::{DocumentFormat, DocumentHint};
    let response = match serde_json::from_str::<PdfRequest>(request) {
        Err(e) => PdfResponse::Err {
            code: "document_worker_lost".into(),
            message: format!("bad request to the Worker: {e}"),
        },
        Ok(req) => {
            let hint = DocumentHint {
                format: Some(DocumentFormat::Pdf),
                ..DocumentHint::default()
            };
            PdfResponse::from(super::document::extract(bytes, &hint, &req.limits))
        }
    };
    encode(&response)
}

/// A response is strings, numbers and JSON values: it always serialises.
#[cfg(any(feature = "quickjs", feature = "pdf"))]
fn encode(response: &impl Serialize) -> String {
    serde_json::to_string(response).unwrap_or_else(|_| {
        r#"{"err":{"code":"js_engine_error","message":"unencodable response"}}"#.to_owned()
    })
}

#[cfg(all(test, feature = "quickjs", feature = "pdf"))]
mod tests {
    use super::*;
    use crate::builtin::document::ExtractLimits;
    use crate::builtin::javascript::JsLimits;
    use serde_json::json;

    fn script(code: &str) -> String {
        serde_json::to_string(&ScriptRequest {
            code: code.into(),
            input: json!({ "n": 20 }),
            limits: serde_json::to_value(JsLimits::DEFAULT).unwrap(),
        })
        .unwrap()
    }

    fn decode_script(text: &str) -> ScriptResponse {
        serde_json::from_str(text).expect("every answer decodes")
    }

    fn decode_pdf(text: &str) -> PdfResponse {
        serde_json::from_str(text).expect("every answer decodes")
    }

    fn pdf_request() -> String {
        serde_json::to_string(&PdfRequest {
            limits: ExtractLimits::DEFAULT,
        })
        .unwrap()
    }

    #[test]
    fn a_script_runs_and_answers_its_value() {
        let answer = decode_script(&answer_script(
            &script("input.n + 22"),
            std::time::Duration::default,
        ));
        assert!(
            matches!(&answer, ScriptResponse::Ok { value, .. } if *value == json!(42)),
            "{answer:?}"
        );
    }

    #[test]
    fn a_malformed_script_request_is_a_typed_engine_error() {
        for bad in [
            "",
            "{",
            "[]",
            r#"{"code": 1}"#,
            r#"{"code":"1","input":null,"limits":{"time_ms":"x"}}"#,
        ] {
            let answer = decode_script(&answer_script(bad, std::time::Duration::default));
            assert!(
                matches!(&answer, ScriptResponse::Err { code, .. } if code == "js_engine_error"),
                "{bad:?}: {answer:?}"
            );
        }
    }

    #[test]
    fn a_script_error_keeps_its_own_code() {
        let answer = decode_script(&answer_script(
            &script("throw new Error('no')"),
            std::time::Duration::default,
        ));
        assert!(
            matches!(&answer, ScriptResponse::Err { code, .. } if code != "js_engine_error"),
            "{answer:?}"
        );
    }

    #[test]
    fn bytes_that_are_not_a_pdf_are_a_typed_document_error() {
        for bytes in [&b""[..], b"hello", b"%PDF-1.4\n\xff\xff\xff\xff"] {
            let answer = decode_pdf(&answer_pdf(bytes, &pdf_request()));
            assert!(
                matches!(&answer, PdfResponse::Err { code, .. } if code.starts_with("document_")),
                "{bytes:?}: {answer:?}"
            );
        }
    }

    #[test]
    fn a_malformed_pdf_request_is_a_typed_error() {
        let answer = decode_pdf(&answer_pdf(b"%PDF-1.4", "{"));
        assert!(matches!(answer, PdfResponse::Err { .. }), "{answer:?}");
    }

    #[test]
    fn the_pdf_format_is_forced_whatever_the_bytes_look_like() {
        // Text bytes read as a PDF: refused as a malformed PDF, never
        // extracted as text (the page sends only what it detected as PDF).
        let answer = decode_pdf(&answer_pdf(b"plain words", &pdf_request()));
        assert!(
            matches!(&answer, PdfResponse::Err { code, .. } if code == "document_malformed"),
            "{answer:?}"
        );
    }
}
