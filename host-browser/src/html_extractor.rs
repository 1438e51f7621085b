//! Readable text of HTML in a tab (`fetch_url`'s and `extract_document`'s
//! `ReadableExtractor`): each document is parsed in a dedicated Worker of
//! the Worker module (`agent-worker-module`), so html5ever and readability
//! never run on the page's thread, and a page that keeps them busy past
//! the deadline is stopped by terminating that Worker (issue 32: the bound
//! is enforced by something that stops the work).

use std::rc::Rc;
use std::time::Duration;

use agent_tools::builtin::document::{
    BoundedReadable, ExtractorError, HtmlRefusal, ReadableExtractor, ReadableRequest,
};
use agent_tools::builtin::offload::ReadableResponse;

use crate::worker::{ModuleWorker, WorkerError};

/// Extracts readable text in its own [`ModuleWorker`].
#[derive(Debug)]
pub struct WorkerHtmlExtractor {
    worker: Rc<ModuleWorker>,
}

impl WorkerHtmlExtractor {
    pub fn new(worker: Rc<ModuleWorker>) -> WorkerHtmlExtractor {
        WorkerHtmlExtractor { worker }
    }
}

#[async_trait::async_trait(?Send)]
impl ReadableExtractor for WorkerHtmlExtractor {
    async fn extract(
        &self,
        request: ReadableRequest,
        deadline: Duration,
    ) -> Result<BoundedReadable, ExtractorError> {
        match self.worker.readable(&request, deadline).await {
            Ok(ReadableResponse::Ok(page)) => Ok(page),
            Ok(ReadableResponse::Err(refused)) => Err(ExtractorError::Readable(refused)),
            Ok(ReadableResponse::BadRequest { message }) => Err(ExtractorError::Lost(message)),
            Err(WorkerError::Terminated(_)) => Err(ExtractorError::TimedOut {
                deadline_ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
            }),
            // The module trapped on this document (in wasm32 a failed
            // allocation or a stack overflow aborts): it needs more than the
            // Worker may use, and would trap again.
            Err(WorkerError::Trapped(detail)) => Err(ExtractorError::Readable(
                agent_tools::builtin::document::ReadableError::Refused(
                    HtmlRefusal::OverMemoryCap { detail },
                ),
            )),
            Err(e) => Err(ExtractorError::Lost(e.to_string())),
        }
    }
}
