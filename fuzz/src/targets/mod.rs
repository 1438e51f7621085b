//! The checks, one module per parser (see the crate documentation).

pub mod canonical_json;
pub mod mcp_jsonrpc;
pub mod pdf;
pub mod plugin_path;
pub mod provider;
pub mod readable_html;
pub mod sse;
pub mod stored_records;
pub mod url_policy;
pub mod workspace_path;

/// `data` as text, or `None` when it is not UTF-8 (text-only parsers).
pub(crate) fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}
