//! `extract_document`: text from workspace files and attachments (plain
//! text, Markdown, HTML, JSON, CSV, PDF), bounded, with its tool definition
//! and actor.

pub mod extract;

pub use extract::{
    DocumentFormat, DocumentHint, ExtractError, ExtractLimits, Extracted, detect_format, extract,
};
