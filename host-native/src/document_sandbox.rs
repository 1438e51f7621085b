//! The sandbox process that reads outside documents natively: HTML's
//! readable text (for `fetch_url` and `extract_document`) and PDFs (for
//! `extract_document`), both its sides: [`DocumentSandbox`], the host's
//! [`ReadableExtractor`] and [`PdfReader`], and [`serve_stdio`], the
//! child's loop behind `agentrt __document-sandbox`.
//!
//! The parsers (html5ever and readability, `lopdf`) cannot be stopped from
//! inside: a page with many attributes kept a core busy for minutes, and a
//! 255 KB PDF grew to ~16 GB of objects and aborted the whole process. A
//! child process can be stopped, so:
//!
//! - the child caps its own address space at [`ADDRESS_SPACE_CAP`] (1 GiB,
//!   `RLIMIT_AS`) before it reads anything: a document that needs more
//!   ends the child (Rust aborts on a failed allocation), never the host;
//! - the host SIGKILLs and reaps it at the call's deadline, so the CPU is
//!   idle at once and the extraction slot the call holds is free again;
//! - a child that ended on a signal of its own (the abort at the cap, a
//!   stack overflow, the kernel's OOM killer) is a typed outcome: HTML
//!   [`HtmlRefusal::OverMemoryCap`] (`page_too_complex`,
//!   `document_too_complex`), PDF `document_too_complex`; killed at the
//!   deadline, `timeout` / `document_timeout`; anything else (it could not
//!   start, it answered garbage) is lost and may be retried.
//!
//! The cheap refusals still come first, inside the child: the HTML
//! pre-scan ([`agent_readable::HtmlLimits`]: bytes, depth, elements,
//! attributes) and the PDF pre-scan (`agent_tools::builtin::document::
//! pdf_scan`: objects, values, array length, nesting, decoded bytes).
//!
//! Spawning, the pipes, the framing, the kill and the reaping are
//! [`crate::sandbox`]'s, shared with the script sandbox; the protocol is
//! one JSON line each way, a [`DocumentRequest`] then a [`DocumentReply`]
//! (PDF bytes travel base64-encoded). The child works on a thread with
//! [`agent_readable::EXTRACTION_STACK_BYTES`] of stack, as in process.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_readable::{
    BoundedReadable, ExtractorError, HtmlLimits, HtmlRefusal, ReadableError, ReadableExtractor,
    ReadableRequest, answer_limit, on_extraction_stack,
};
use agent_tools::builtin::document::{
    DocumentFormat, DocumentHint, ExtractLimits, Extracted, PdfReadError, PdfReader,
};
use agent_tools::builtin::offload::PdfResponse;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::sandbox::{CallFailure, SandboxCommand, SandboxPool};

/// The hidden `agentrt` subcommand that runs [`serve_stdio`].
pub const SUBCOMMAND: &str = "__document-sandbox";

/// The child's address-space cap (`RLIMIT_AS`): 1 GiB. The child itself
/// (the `agentrt` binary, its allocator's arenas, an 8 MiB extraction
/// stack) maps well under 200 MiB; a document within the pre-scan limits
/// needs at most about 0.5 GB (the PDF limit on values kept), and a page
/// within the HTML limits far less.
pub const ADDRESS_SPACE_CAP: u64 = 1024 * 1024 * 1024;

/// Time allowed past a call's deadline before the child ends itself:
/// later than the host's kill, so that it acts only when the host is gone.
pub const CHILD_SELF_STOP_GRACE: Duration = Duration::from_millis(3_000);

/// The longest request line the child reads: HTML at the default input
/// limit JSON-escaped (at most 6 bytes per byte), or a PDF at the default
/// input limit base64-encoded, with room for the rest.
pub const MAX_REQUEST_BYTES: usize = 6 * HtmlLimits::DEFAULT.max_input_bytes
    + 2 * ExtractLimits::DEFAULT.max_input_bytes
    + 1024 * 1024;

/// One document for the sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentRequest {
    /// Readable text of an HTML document.
    Readable {
        request: ReadableRequest,
        deadline_ms: u64,
    },
    /// The text of a PDF.
    Pdf {
        /// The file, base64 (standard alphabet).
        base64: String,
        limits: ExtractLimits,
        deadline_ms: u64,
    },
}

/// The sandbox's answer to one [`DocumentRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentReply {
    Readable(Result<BoundedReadable, ReadableError>),
    Pdf(PdfResponse),
}

// ---------------------------------------------------------------------------
// the child
// ---------------------------------------------------------------------------

/// Cap this process's address space at [`ADDRESS_SPACE_CAP`].
fn cap_address_space() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        rlimit::Resource::AS.set(ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP)
    }
    #[cfg(not(unix))]
    {
        Err(std::io::Error::other(
            "no address-space limit on this system",
        ))
    }
}

/// The child's exit code when it could not cap its address space: it
/// reads nothing uncapped.
pub const EXIT_NO_CAP: u8 = 70;

/// The child's loop: cap the address space, then read one
/// [`DocumentRequest`] line from stdin, answer it, write one
/// [`DocumentReply`] line to stdout; exit 0 when stdin closes.
pub fn serve_stdio() -> ExitCode {
    if cap_address_space().is_err() {
        return ExitCode::from(EXIT_NO_CAP);
    }
    crate::sandbox::serve_requests(MAX_REQUEST_BYTES, |line, watchdog| {
        let request = serde_json::from_slice::<DocumentRequest>(line).ok()?;
        let deadline_ms = match &request {
            DocumentRequest::Readable { deadline_ms, .. }
            | DocumentRequest::Pdf { deadline_ms, .. } => *deadline_ms,
        };
        watchdog.arm(Instant::now() + Duration::from_millis(deadline_ms) + CHILD_SELF_STOP_GRACE);
        let reply = match request {
            DocumentRequest::Readable { request, .. } => DocumentReply::Readable(
                on_extraction_stack(|| agent_readable::answer(&request)).ok()?,
            ),
            DocumentRequest::Pdf { base64, limits, .. } => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(base64)
                    .ok()?;
                DocumentReply::Pdf(on_extraction_stack(|| read_pdf_here(&bytes, &limits)).ok()?)
            }
        };
        serde_json::to_vec(&reply).ok()
    })
}

/// Read a PDF in this process (the child's side).
fn read_pdf_here(bytes: &[u8], limits: &ExtractLimits) -> PdfResponse {
    let hint = DocumentHint {
        format: Some(DocumentFormat::Pdf),
        ..DocumentHint::default()
    };
    PdfResponse::from(agent_tools::builtin::document::extract(
        bytes, &hint, limits,
    ))
}

// ---------------------------------------------------------------------------
// the host
// ---------------------------------------------------------------------------

/// Reads documents in sandbox processes, at most `keep_idle` kept warm.
#[derive(Debug, Clone)]
pub struct DocumentSandbox {
    pool: Arc<SandboxPool>,
}

/// How a call to the sandbox ended without a reply.
enum Failed {
    /// Killed at (or ended itself past) the deadline.
    TimedOut,
    /// Ended on a signal of its own: the memory cap, a stack overflow.
    TooComplex(String),
    Lost(String),
}

impl From<CallFailure> for Failed {
    fn from(failure: CallFailure) -> Failed {
        match failure {
            CallFailure::PastHardStop { .. } | CallFailure::SelfStopped { .. } => Failed::TimedOut,
            ended @ CallFailure::Ended { .. } if ended.signal().is_some() => {
                Failed::TooComplex(format!(
                    "the document reader {ended}; it may use at most {} MiB of address space",
                    ADDRESS_SPACE_CAP / (1024 * 1024)
                ))
            }
            other => Failed::Lost(format!("the document reader {other}")),
        }
    }
}

impl DocumentSandbox {
    /// A reader that starts `command` (`agentrt __document-sandbox`),
    /// keeping at most `keep_idle` processes warm.
    pub fn new(command: SandboxCommand, keep_idle: usize) -> std::io::Result<DocumentSandbox> {
        Ok(DocumentSandbox {
            pool: Arc::new(SandboxPool::new(command, keep_idle)?),
        })
    }

    /// `agentrt __document-sandbox` with the `agentrt` binary at `program`.
    pub fn command(program: impl Into<std::path::PathBuf>) -> SandboxCommand {
        SandboxCommand::agentrt_serving(program, SUBCOMMAND)
    }

    /// The sandboxes' working directory (empty, private to this user).
    pub fn workdir(&self) -> &std::path::Path {
        self.pool.workdir()
    }

    async fn call(
        &self,
        request: &DocumentRequest,
        reply_limit: usize,
        deadline: Duration,
    ) -> Result<DocumentReply, Failed> {
        let mut line = serde_json::to_vec(request)
            .map_err(|e| Failed::Lost(format!("could not encode the document: {e}")))?;
        line.push(b'\n');
        if line.len() > MAX_REQUEST_BYTES {
            return Err(Failed::Lost(format!(
                "the request is {} bytes, more than the document reader reads ({MAX_REQUEST_BYTES})",
                line.len()
            )));
        }
        Ok(self
            .pool
            .call(&line, reply_limit, deadline, |reply| {
                serde_json::from_slice::<DocumentReply>(reply).map_err(|e| e.to_string())
            })
            .await?)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[async_trait::async_trait]
impl ReadableExtractor for DocumentSandbox {
    async fn extract(
        &self,
        request: ReadableRequest,
        deadline: Duration,
    ) -> Result<BoundedReadable, ExtractorError> {
        // Over the input limit: refused here, as the pre-scan would.
        if let Some(refusal) = agent_readable::prescan::size_refusal(&request.html, &request.limits)
        {
            return Err(ExtractorError::Readable(ReadableError::Refused(refusal)));
        }
        let reply_limit = answer_limit(request.max_chars);
        let request = DocumentRequest::Readable {
            request,
            deadline_ms: millis(deadline),
        };
        match self.call(&request, reply_limit, deadline).await {
            Ok(DocumentReply::Readable(answer)) => answer.map_err(ExtractorError::Readable),
            Ok(DocumentReply::Pdf(_)) => Err(ExtractorError::Lost(
                "the document reader answered a PDF for HTML".into(),
            )),
            Err(Failed::TimedOut) => Err(ExtractorError::TimedOut {
                deadline_ms: millis(deadline),
            }),
            Err(Failed::TooComplex(detail)) => Err(ExtractorError::Readable(
                ReadableError::Refused(HtmlRefusal::OverMemoryCap { detail }),
            )),
            Err(Failed::Lost(detail)) => Err(ExtractorError::Lost(detail)),
        }
    }
}

#[async_trait::async_trait]
impl PdfReader for DocumentSandbox {
    async fn read_pdf(
        &self,
        bytes: Vec<u8>,
        limits: ExtractLimits,
        deadline: Duration,
    ) -> Result<Extracted, PdfReadError> {
        if bytes.len() > limits.max_input_bytes {
            let refused = agent_tools::builtin::document::ExtractError::TooLarge {
                len: bytes.len(),
                limit: limits.max_input_bytes,
            };
            return Err(PdfReadError::Failed {
                code: refused.code().into(),
                message: refused.to_string(),
            });
        }
        // The text and title are bounded by `max_chars` and the file.
        let reply_limit = answer_limit(limits.max_chars) + 6 * bytes.len();
        let request = DocumentRequest::Pdf {
            base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
            limits,
            deadline_ms: millis(deadline),
        };
        drop(bytes);
        match self.call(&request, reply_limit, deadline).await {
            Ok(DocumentReply::Pdf(PdfResponse::Ok(extracted))) => Ok(extracted),
            Ok(DocumentReply::Pdf(PdfResponse::Err { code, message })) => {
                Err(PdfReadError::Failed { code, message })
            }
            Ok(DocumentReply::Readable(_)) => Err(PdfReadError::Lost(
                "the document reader answered HTML for a PDF".into(),
            )),
            Err(Failed::TimedOut) => Err(PdfReadError::Failed {
                code: "document_timeout".into(),
                message: format!(
                    "the PDF was not read within its {} ms deadline; its reader was stopped",
                    deadline.as_millis()
                ),
            }),
            Err(Failed::TooComplex(detail)) => Err(PdfReadError::Failed {
                code: "document_too_complex".into(),
                message: format!(
                    "the PDF is too complex to read safely ({detail}), so its text was not extracted"
                ),
            }),
            Err(Failed::Lost(detail)) => Err(PdfReadError::Lost(detail)),
        }
    }
}
