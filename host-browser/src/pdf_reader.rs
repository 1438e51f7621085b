//! `extract_document`'s PDF reader in a tab: each PDF is read in a
//! dedicated Worker of the Worker module (`agent-worker-module`), so the
//! module the page loads first carries no PDF parser, and a PDF that keeps
//! the parser busy past the tool's deadline is stopped by terminating its
//! Worker (a deadline that can stop the work, not only answer the caller).

use std::rc::Rc;
use std::time::Duration;

use agent_tools::builtin::document::{ExtractLimits, Extracted, PdfReadError, PdfReader};

use crate::worker::{ModuleWorker, PdfRequest, PdfResponse, WorkerError};

/// Reads PDFs in its own [`ModuleWorker`].
#[derive(Debug)]
pub struct WorkerPdfReader {
    worker: Rc<ModuleWorker>,
}

impl WorkerPdfReader {
    pub fn new(worker: Rc<ModuleWorker>) -> WorkerPdfReader {
        WorkerPdfReader { worker }
    }
}

#[async_trait::async_trait(?Send)]
impl PdfReader for WorkerPdfReader {
    async fn read_pdf(
        &self,
        bytes: Vec<u8>,
        limits: ExtractLimits,
        deadline: Duration,
    ) -> Result<Extracted, PdfReadError> {
        let request = PdfRequest { limits };
        match self.worker.read_pdf(&bytes, &request, deadline).await {
            Ok(PdfResponse::Ok(extracted)) => Ok(extracted),
            Ok(PdfResponse::Err { code, message }) => Err(PdfReadError::Failed { code, message }),
            // The parser itself failed on this file: the same answer as a
            // parser panic natively.
            Err(WorkerError::Trapped(detail)) => Err(PdfReadError::Failed {
                code: "document_malformed".into(),
                message: format!(
                    "the file is not valid pdf: the PDF parser failed on this file ({detail})"
                ),
            }),
            Err(e @ WorkerError::Terminated(_)) => Err(PdfReadError::Failed {
                code: "document_timeout".into(),
                message: format!(
                    "the extraction did not finish within its {} ms deadline ({e})",
                    deadline.as_millis()
                ),
            }),
            Err(e) => Err(PdfReadError::Lost(e.to_string())),
        }
    }
}
